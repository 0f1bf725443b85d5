/*
 * fuzz_util.h — shared by the libFuzzer harnesses in fuzz/: property checks that abort (so
 * libFuzzer records the input as a crash), finding and reading the shared model files once,
 * exact-size copies of the input (so a read one byte past the end is an ASan report), and a
 * strict UTF-8 validator. Test code only: the library itself never aborts.
 */
#ifndef WASMLM_FUZZ_UTIL_H
#define WASMLM_FUZZ_UTIL_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "wasmlm.h"

#if defined(__GNUC__) || defined(__clang__)
#define FZ_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define FZ_PRINTF(a, b)
#endif

/* A violated property: print it and abort, which libFuzzer reports as a crash. */
static inline FZ_PRINTF(3, 4) void fz_fail(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "==FUZZ CHECK FAILED== %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    abort();
}

#define FZ_CHECK(cond, ...)                                       \
    do {                                                          \
        if (!(cond)) fz_fail(__FILE__, __LINE__, __VA_ARGS__);    \
    } while (0)

/* FZ_STRICT=1 in the environment: also assert the properties that known, still open bugs
 * violate (each is listed in fuzz/README.md with its reproducer in fuzz/regressions/). Without
 * it the harnesses step around those bugs, so that fuzzing keeps exploring past them;
 * tools/fuzz.sh replays the regressions strictly. */
static inline int fz_strict(void) {
    static int strict = -1;
    if (strict < 0) {
        const char *e = getenv("FZ_STRICT");
        strict = e && e[0] == '1';
    }
    return strict;
}

/* A status any public function may return: OK, DONE or one of the documented errors. */
static inline int fz_known_status(int rc) {
    return rc == WLM_OK || rc == WLM_DONE || (rc <= WLM_ERR_INVALID_ARG && rc >= WLM_ERR_STATE);
}

/* An error message must be a NUL-terminated string; reading it whole lets ASan check that. */
static inline void fz_check_msg(const char *msg, int must_be_nonempty, const char *what) {
    FZ_CHECK(msg != NULL, "%s: errmsg is NULL", what);
    size_t n = strlen(msg);
    FZ_CHECK(!must_be_nonempty || n > 0, "%s: an error without a message", what);
}

/* Reads n bytes at p (each one, so ASan checks the whole range) and folds them. */
static inline uint32_t fz_touch(const void *p, size_t n) {
    const unsigned char *b = p;
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 16777619u;
    return h;
}

/* An exact-size malloc'd copy of the input (malloc alignment, like a real load). */
static inline void *fz_dup(const uint8_t *data, size_t size) {
    void *p = malloc(size ? size : 1);
    if (!p) abort();
    if (size) memcpy(p, data, size);
    return p;
}

/* ---------------------------------------------------------------------------------------- */
/* Shared files: $WASMLM_SHARED, else the path CMake compiled in (WASMLM_FUZZ_SHARED), else   */
/* the first ../shared, ../../shared, ... above the executable holding models/.              */

static inline int fz_has_models(const char *dir) {
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/models/stories260K.bin", dir);
    return access(probe, R_OK) == 0;
}

static inline const char *fz_shared_dir(void) {
    static char dir[4096];
    if (dir[0]) return dir;
    const char *env = getenv("WASMLM_SHARED");
    if (env && env[0] && fz_has_models(env)) {
        snprintf(dir, sizeof dir, "%s", env);
        return dir;
    }
#ifdef WASMLM_FUZZ_SHARED
    if (fz_has_models(WASMLM_FUZZ_SHARED)) {
        snprintf(dir, sizeof dir, "%s", WASMLM_FUZZ_SHARED);
        return dir;
    }
#endif
    char exe[2048];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) *slash = '\0';
        for (int up = 1; up <= 6; up++) {
            char cand[4096];
            size_t o = (size_t)snprintf(cand, sizeof cand, "%s", exe);
            for (int i = 0; i < up && o < sizeof cand; i++)
                o += (size_t)snprintf(cand + o, sizeof cand - o, "/..");
            snprintf(cand + o, sizeof cand - o, "/shared");
            if (fz_has_models(cand)) {
                snprintf(dir, sizeof dir, "%s", cand);
                return dir;
            }
        }
    }
    fprintf(stderr, "fuzz: cannot find the shared model files; set WASMLM_SHARED to the "
                    "directory holding models/stories260K.bin\n");
    exit(2);
}

/* Reads <shared>/<rel> whole into a malloc'd buffer of exactly *size bytes; exits on failure
 * (a harness without its fixed inputs cannot run). */
static inline void *fz_read_shared(const char *rel, size_t *size) {
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", fz_shared_dir(), rel);
    FILE *f = fopen(path, "rb");
    void *buf = NULL;
    long n = -1;
    if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
        buf = malloc((size_t)n + 1);
        if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
            free(buf);
            buf = NULL;
        }
    }
    if (f) fclose(f);
    if (!buf) {
        fprintf(stderr, "fuzz: cannot read %s\n", path);
        exit(2);
    }
    *size = (size_t)n;
    return buf;
}

/* Loads a model from a shared file (the buffer is owned by the model); exits on failure. */
static inline wlm_model *fz_load_shared_model(const char *rel, unsigned flags) {
    size_t size = 0;
    void *buf = fz_read_shared(rel, &size);
    wlm_model *m = NULL;
    int rc = wlm_model_load(buf, size, flags | WLM_LOAD_OWN_BUFFER, &m);
    if (rc != WLM_OK) {
        fprintf(stderr, "fuzz: %s does not load: %s %s\n", rel, wlm_status_name(rc),
                wlm_model_errmsg(m));
        exit(2);
    }
    return m;
}

/* Loads <shared>/<rel> as the tokenizer of m; exits on failure. */
static inline void fz_load_shared_tokenizer(wlm_model *m, const char *rel) {
    size_t size = 0;
    void *buf = fz_read_shared(rel, &size);
    int rc = wlm_model_load_tokenizer(m, buf, size);
    free(buf);
    if (rc != WLM_OK) {
        fprintf(stderr, "fuzz: tokenizer %s does not load: %s %s\n", rel, wlm_status_name(rc),
                wlm_model_errmsg(m));
        exit(2);
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Text                                                                                        */

/* 1 when s[0..n) is well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, at most
 * U+10FFFF). NUL bytes are allowed (they are ordinary characters to the tokenizer). */
static inline int fz_utf8_valid(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t len;
        unsigned lo = 0x80, hi = 0xBF;
        if (c < 0x80) len = 1;
        else if (c >= 0xC2 && c <= 0xDF) len = 2;
        else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            if (c == 0xE0) lo = 0xA0;
            if (c == 0xED) hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            if (c == 0xF0) lo = 0x90;
            if (c == 0xF4) hi = 0x8F;
        } else return 0;
        if (len > n - i) return 0;
        for (size_t k = 1; k < len; k++) {
            unsigned d = s[i + k];
            if (d < (k == 1 ? lo : 0x80) || d > (k == 1 ? hi : 0xBF)) return 0;
        }
        i += len;
    }
    return 1;
}

/* A growable byte buffer for decoded text. */
typedef struct fz_buf {
    char *p;
    size_t n, cap;
} fz_buf;

static inline void fz_buf_put(fz_buf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) abort();
        b->p = q;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

/* wlm_tokenize(add_bos = flags) when ex is 0, else wlm_tokenize_ex(flags). */
static inline int32_t fz_tokenize_call(const wlm_model *model, const char *text, size_t len, int ex,
                                       unsigned flags, int32_t *tokens, int32_t cap) {
    return ex ? wlm_tokenize_ex(model, text, len, flags, tokens, cap)
              : wlm_tokenize(model, text, len, (int)flags, tokens, cap);
}

/*
 * Tokenizes text with `model` the way a caller would, through wlm_tokenize (ex 0, flags is
 * add_bos) or wlm_tokenize_ex (ex 1, flags are WLM_TOKENIZE_* flags), and checks that ids are in
 * 0..vocab_size-1 and that nothing is written past the count. With cap_checks: ask for the
 * count with cap 0, then fill an exact buffer, then a buffer of half the count, and check the
 * three calls agree (same count, the first cap ids) and that nothing is written past cap (a
 * guard word after the array). Without: one call into a buffer of 4 * len + 8 ids (more than any
 * tokenizer here gives; a bigger count is asked again with that cap), every word after the count
 * checked untouched — a third of the work, for harnesses that tokenize each input with several
 * vocabularies and give the cap checks to one of them per input. Returns the count (the ids in
 * *out, malloc'd, caller frees) or the negative status (after checking it is a documented one;
 * *out NULL).
 */
static inline int32_t fz_tokenize_opt(const wlm_model *model, const char *text, size_t len, int ex,
                                      unsigned flags, int32_t vocab_size, int cap_checks,
                                      int32_t **out) {
    *out = NULL;
    int32_t n;
    int32_t *ids;
    if (cap_checks) {
        n = fz_tokenize_call(model, text, len, ex, flags, NULL, 0);
        FZ_CHECK(n >= 0 || fz_known_status(n), "wlm_tokenize returned %d", (int)n);
        if (n < 0) return n;
    } else {
        const int32_t bound = len < (1u << 18) ? (int32_t)(4 * len + 8) : (1 << 20);
        ids = malloc(sizeof(int32_t) * ((size_t)bound + 1));
        if (!ids) abort();
        for (int32_t i = 0; i <= bound; i++) ids[i] = 0x7eadbeef;
        n = fz_tokenize_call(model, text, len, ex, flags, ids, bound);
        FZ_CHECK(n >= 0 || fz_known_status(n), "wlm_tokenize returned %d", (int)n);
        if (n >= 0 && n <= bound) {
            for (int32_t i = n; i <= bound; i++)
                FZ_CHECK(ids[i] == 0x7eadbeef, "wlm_tokenize gave %d tokens but wrote ids[%d] "
                         "(cap %d)", (int)n, (int)i, (int)bound);
            for (int32_t i = 0; i < n; i++)
                FZ_CHECK(ids[i] >= 0 && ids[i] < vocab_size,
                         "wlm_tokenize: token %d of %d is id %d, outside the vocabulary (0..%d)",
                         (int)i, (int)n, (int)ids[i], (int)vocab_size - 1);
            *out = ids;
            return n;
        }
        free(ids);
        if (n < 0) return n;
    }
    ids = malloc(sizeof(int32_t) * ((size_t)n + 1));
    if (!ids) abort();
    ids[n] = 0x7eadbeef;
    int32_t n2 = fz_tokenize_call(model, text, len, ex, flags, ids, n);
    FZ_CHECK(n2 == n, "wlm_tokenize gave %d tokens with cap 0, %d with cap %d", (int)n, (int)n2,
             (int)n);
    FZ_CHECK(ids[n] == 0x7eadbeef, "wlm_tokenize wrote past cap %d", (int)n);
    for (int32_t i = 0; i < n; i++)
        FZ_CHECK(ids[i] >= 0 && ids[i] < vocab_size,
                 "wlm_tokenize: token %d of %d is id %d, outside the vocabulary (0..%d)", (int)i,
                 (int)n, (int)ids[i], (int)vocab_size - 1);
    if (n > 1) {
        /* A short buffer gets the first cap ids, and the same count. */
        int32_t cap = n / 2;
        int32_t *part = malloc(sizeof(int32_t) * ((size_t)cap + 1));
        if (!part) abort();
        part[cap] = 0x7eadbeef;
        int32_t n3 = fz_tokenize_call(model, text, len, ex, flags, part, cap);
        FZ_CHECK(n3 == n, "wlm_tokenize gave %d tokens with cap %d, %d with cap %d", (int)n3,
                 (int)cap, (int)n, (int)n);
        FZ_CHECK(part[cap] == 0x7eadbeef, "wlm_tokenize wrote past cap %d", (int)cap);
        FZ_CHECK(memcmp(part, ids, sizeof(int32_t) * (size_t)cap) == 0,
                 "wlm_tokenize with cap %d wrote other ids than with cap %d", (int)cap, (int)n);
        free(part);
    }
    *out = ids;
    return n;
}

/* fz_tokenize_opt through wlm_tokenize with every cap check. */
static inline int32_t fz_tokenize(const wlm_model *model, const char *text, size_t len,
                                  int add_bos, int32_t vocab_size, int32_t **out) {
    return fz_tokenize_opt(model, text, len, 0, (unsigned)add_bos, vocab_size, 1, out);
}

/* The piece of `token` after `prev`, checked: non-NULL for an id in the vocabulary, NUL at
 * [len], every byte readable. Appends it to *text when text is not NULL. */
static inline void fz_piece(const wlm_model *model, int32_t prev, int32_t token, fz_buf *text) {
    size_t len = 12345;
    const char *p = wlm_token_piece(model, prev, token, &len);
    FZ_CHECK(p != NULL, "wlm_token_piece(prev %d, token %d) is NULL", (int)prev, (int)token);
    FZ_CHECK(len < (1u << 24), "wlm_token_piece(%d): implausible length %zu", (int)token, len);
    (void)fz_touch(p, len + 1);
    FZ_CHECK(p[len] == '\0', "wlm_token_piece(%d) is not NUL-terminated at its length %zu",
             (int)token, len);
    if (text) fz_buf_put(text, p, len);
}

/* Decodes ids[start..n) as a caller would: each piece after the previous id (-1 for the
 * first id of the array). With start 1 and BOS in ids[0], this is the text after BOS. */
static inline void fz_decode(const wlm_model *model, const int32_t *ids, int32_t start, int32_t n,
                             fz_buf *out) {
    out->n = 0;
    fz_buf_put(out, "", 0);
    for (int32_t i = start; i < n; i++) fz_piece(model, i ? ids[i - 1] : -1, ids[i], out);
}

/* Out-of-range ids must be refused (NULL and *len 0), not read. */
static inline void fz_piece_out_of_range(const wlm_model *model, int32_t vocab_size) {
    const int32_t bad[] = {-1, vocab_size, vocab_size + 1, INT32_MIN, INT32_MAX};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t len = 99;
        const char *p = wlm_token_piece(model, -1, bad[i], &len);
        FZ_CHECK(p == NULL && len == 0, "wlm_token_piece(%d) with vocab %d is not NULL/0",
                 (int)bad[i], (int)vocab_size);
    }
}

#endif
