/*
 * test_util.h — the tiny harness shared by the C tests: CHECK macros that count passes and
 * failures and print each failure with file:line, a seeded PRNG for test data, and a reader
 * for the shared model files. Each test executable ends with TEST_FINISH(), which prints the
 * line "N passed, N failed" and returns nonzero when anything failed (CTest reads the code).
 * Header-only on purpose: every test is one translation unit, so the counters are per test.
 */
#ifndef WASMLM_TEST_UTIL_H
#define WASMLM_TEST_UTIL_H

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tu_passed, tu_failed;

/* Only the first failures are printed in full; a broken kernel in a loop would flood the log. */
#define TU_MAX_PRINTED 60

#if defined(__GNUC__) || defined(__clang__)
#define TU_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define TU_PRINTF(a, b)
#endif

/* Counts one check; on failure prints "FAIL file:line: expr -- detail" (detail may be NULL). */
static inline int tu_record(int ok, const char *file, int line, const char *expr,
                            const char *detail) {
    if (ok) {
        tu_passed++;
        return 1;
    }
    tu_failed++;
    if (tu_failed <= TU_MAX_PRINTED)
        printf("FAIL %s:%d: %s%s%s\n", file, line, expr, detail ? " -- " : "", detail ? detail : "");
    else if (tu_failed == TU_MAX_PRINTED + 1)
        puts("(further failures are counted but not printed)");
    fflush(stdout);
    return 0;
}

static inline TU_PRINTF(5, 6) int tu_check(int ok, const char *file, int line,
                                           const char *expr, const char *fmt, ...) {
    char detail[512];
    va_list ap;
    if (ok) return tu_record(1, file, line, expr, NULL);
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    return tu_record(0, file, line, expr, detail);
}

/* CHECK(cond): counts one check. CHECKF(cond, fmt, ...): same, with a printf-style explanation
 * printed on failure. Both evaluate to 1 on success, 0 on failure. */
#define CHECK(cond) tu_record(!!(cond), __FILE__, __LINE__, #cond, NULL)
#define CHECKF(cond, ...) tu_check(!!(cond), __FILE__, __LINE__, #cond, __VA_ARGS__)

#define CHECK_EQ_INT(a, b)                                                                    \
    do {                                                                                      \
        long long tu_a_ = (long long)(a), tu_b_ = (long long)(b);                             \
        tu_check(tu_a_ == tu_b_, __FILE__, __LINE__, #a " == " #b, "%lld != %lld", tu_a_,     \
                 tu_b_);                                                                      \
    } while (0)

/* |a - b| <= tol (NaN fails). */
#define CHECK_NEAR(a, b, tol)                                                                 \
    do {                                                                                      \
        double tu_a_ = (double)(a), tu_b_ = (double)(b), tu_t_ = (double)(tol);               \
        tu_check(fabs(tu_a_ - tu_b_) <= tu_t_, __FILE__, __LINE__, "|" #a " - " #b "| <= " #tol, \
                 "%.9g vs %.9g (diff %.3g, tol %.3g)", tu_a_, tu_b_, fabs(tu_a_ - tu_b_),     \
                 tu_t_);                                                                      \
    } while (0)

/* Status codes: prints the enum names on failure (needs wasmlm.h for wlm_status_name). */
#define CHECK_STATUS(got, want)                                                               \
    do {                                                                                      \
        int tu_g_ = (int)(got), tu_w_ = (int)(want);                                          \
        tu_check(tu_g_ == tu_w_, __FILE__, __LINE__, #got " == " #want, "got %d (%s), want %d (%s)", \
                 tu_g_, wlm_status_name(tu_g_), tu_w_, wlm_status_name(tu_w_));               \
    } while (0)

/* Prints the summary line and yields main's exit code. */
static inline int tu_finish(void) {
    printf("%d passed, %d failed\n", tu_passed, tu_failed);
    fflush(stdout);
    return tu_failed ? 1 : 0;
}
#define TEST_FINISH() tu_finish()

/* Section headers make the log readable; they are not checks. */
static inline void tu_section(const char *name) {
    printf("-- %s\n", name);
    fflush(stdout);
}

/* ---------------------------------------------------------------------------------------- */
/* Deterministic test data: splitmix64, independent of the library's RNG under test.        */

typedef struct tu_rng {
    uint64_t s;
} tu_rng;

static inline uint64_t tu_rng_u64(tu_rng *r) {
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform float in [lo, hi). */
static inline float tu_rng_uniform(tu_rng *r, float lo, float hi) {
    double u = (double)(tu_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(lo + (hi - lo) * u);
}

/* ---------------------------------------------------------------------------------------- */
/* Shared files. The directory comes from argv[1], else $WASMLM_SHARED, else the first of
 * ../shared, ../../shared, ... (relative to the working directory) that holds
 * models/stories260K.bin. The upward search matters in the Emscripten build: node's
 * environment variables do not reach getenv() there, but NODERAWFS sees the real cwd. */

static char tu_shared_dir[1024];

static inline int tu_file_exists(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    fclose(f);
    return 1;
}

static inline const char *tu_find_shared(int argc, char **argv) {
    char probe[1200];
    const char *env;
    int up;
    if (tu_shared_dir[0]) return tu_shared_dir;
    if (argc > 1 && argv[1][0]) {
        snprintf(tu_shared_dir, sizeof tu_shared_dir, "%s", argv[1]);
        return tu_shared_dir;
    }
    env = getenv("WASMLM_SHARED");
    if (env && env[0]) {
        snprintf(probe, sizeof probe, "%s/models/stories260K.bin", env);
        if (tu_file_exists(probe)) {
            snprintf(tu_shared_dir, sizeof tu_shared_dir, "%s", env);
            return tu_shared_dir;
        }
    }
    for (up = 1; up <= 6; up++) {
        char dir[256] = "";
        int i;
        for (i = 0; i < up; i++) strcat(dir, "../");
        strcat(dir, "shared");
        snprintf(probe, sizeof probe, "%s/models/stories260K.bin", dir);
        if (tu_file_exists(probe)) {
            snprintf(tu_shared_dir, sizeof tu_shared_dir, "%s", dir);
            return tu_shared_dir;
        }
    }
    snprintf(tu_shared_dir, sizeof tu_shared_dir, "%s", env && env[0] ? env : "../shared");
    return tu_shared_dir;
}

/* Reads <shared>/<rel> whole into a malloc'ed buffer of exactly *size bytes (plus a NUL after
 * it, not counted, so text files can be used as strings). NULL (and a failed check) if absent. */
static inline unsigned char *tu_read_shared(const char *rel, size_t *size) {
    char path[1400];
    FILE *f;
    unsigned char *buf = NULL;
    long n;
    *size = 0;
    snprintf(path, sizeof path, "%s/%s", tu_shared_dir[0] ? tu_shared_dir : "../shared", rel);
    f = fopen(path, "rb");
    if (!tu_check(f != NULL, __FILE__, __LINE__, "fopen(shared file)", "cannot open %s", path))
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
        buf = (unsigned char *)malloc((size_t)n + 1);
        if (buf && fread(buf, 1, (size_t)n, f) == (size_t)n) {
            buf[n] = 0;
            *size = (size_t)n;
        } else {
            free(buf);
            buf = NULL;
        }
    }
    fclose(f);
    tu_check(buf != NULL, __FILE__, __LINE__, "read(shared file)", "cannot read %s", path);
    return buf;
}

/* A malloc'ed copy of exactly n bytes (n may be 0), so that reading past the end of a cut
 * buffer is a real overrun that AddressSanitizer reports. */
static inline unsigned char *tu_dup(const void *p, size_t n) {
    unsigned char *q = (unsigned char *)malloc(n ? n : 1);
    if (q && n) memcpy(q, p, n);
    return q;
}

static inline void tu_put_i32(unsigned char *p, int32_t v) {
    uint32_t u = (uint32_t)v;
    p[0] = (unsigned char)u;
    p[1] = (unsigned char)(u >> 8);
    p[2] = (unsigned char)(u >> 16);
    p[3] = (unsigned char)(u >> 24);
}

static inline void tu_put_f32(unsigned char *p, float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    tu_put_i32(p, (int32_t)u);
}

#ifdef WASMLM_H /* helpers on the engine's API, for the tests that include wasmlm.h first */

/* A context with these settings (n_seq 0 = the default), or NULL after counting a failed check
 * that names the reason. */
static inline wlm_context *tu_context(const wlm_model *m, int n_ctx, int n_seq, int simd,
                                      int32_t kv_type) {
    wlm_context_params cp;
    wlm_context_params_default(&cp);
    cp.n_ctx = n_ctx;
    if (n_seq > 0) cp.n_seq_max = n_seq;
    cp.use_simd = simd;
    cp.kv_type = kv_type;
    wlm_context *c = NULL;
    int rc = wlm_context_new(m, &cp, &c);
    CHECKF(rc == WLM_OK, "context: %s %s", wlm_status_name(rc), c ? wlm_context_errmsg(c) : "");
    if (rc != WLM_OK) {
        wlm_context_free(c);
        return NULL;
    }
    return c;
}

#endif

#endif
