/*
 * cli_quantize.c — `wasmlm quantize IN OUT TYPE [-z tokenizer.bin] [--name NAME]`, the native
 * CLI's converter: a llama2.c checkpoint (with its tokenizer.bin, whose vocabulary goes into the
 * file) or a GGUF of any architecture in (llama through the model loader; any other is copied
 * key/value by key/value and tensor by tensor, its weight matrices converted), a GGUF v3 file of
 * TYPE (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, MXFP4, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, or
 * llama.cpp's mixes Q3_K_M, Q4_K_M, Q5_K_M, MXFP4_MOE) out. The input
 * is memory-mapped, so a multi-gigabyte checkpoint is never copied into the heap; the output is
 * streamed to OUT.tmp and renamed to OUT when complete. The work is quantize.c's.
 */
#if !defined(_WIN32)
#define _POSIX_C_SOURCE 200809L
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__unix__) || defined(__APPLE__)
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#define HAVE_POSIX 1
#endif

#include "formats/gguf.h"
#include "kernels/quantize.h"
#include "wasmlm.h"

int wlm_cli_quantize(int argc, char **argv);

static void usage(void) {
    fprintf(stderr,
            "Usage: wasmlm quantize IN OUT TYPE [-z tokenizer.bin] [--name NAME]\n"
            "  IN    a llama2.c checkpoint (needs -z: its vocabulary goes into OUT) or a GGUF\n"
            "  OUT   the GGUF v3 file to write (via OUT.tmp, renamed when complete)\n"
            "  TYPE  the type of the weight matrices: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0,\n"
            "        Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, MXFP4; or a llama.cpp mix of types per\n"
            "        tensor: Q3_K_M, Q4_K_M, Q5_K_M, MXFP4_MOE (experts MXFP4, the rest Q8_0).\n"
            "        Norms stay F32; rows that are not whole blocks fall back as in llama.cpp\n"
            "        (Q2_K/Q3_K to Q4_0, Q4_K to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0), else to F16\n"
            "  --name NAME  general.name (default: the GGUF's, or IN's file name)\n");
}

/* A read-only view of a whole file: mapped where possible, else read into the heap. */
typedef struct file_view {
    void *data;
    size_t size;
    int mapped;
} file_view;

/* Returns 0, or -1 with errno saying why. */
static int view_open(file_view *v, const char *path) {
    memset(v, 0, sizeof *v);
#ifdef HAVE_POSIX
    int fd = open(path, O_RDONLY);
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) == 0 && st.st_size > 0 && (uint64_t)st.st_size <= (uint64_t)SIZE_MAX) {
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p != MAP_FAILED) {
            close(fd);
            v->data = p;
            v->size = (size_t)st.st_size;
            v->mapped = 1;
            return 0;
        }
    }
    close(fd);
#endif
    errno = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    long n = -1;
    int err = 0;
    /* one byte first: a directory opens, then fails here with EISDIR (not a huge size) */
    if (fgetc(f) == EOF && ferror(f)) n = -2;
    else if (fseek(f, 0, SEEK_END) == 0) n = ftell(f);
    if (n < 0 || fseek(f, 0, SEEK_SET) != 0) {
        err = errno;
    } else if (!(v->data = malloc(n ? (size_t)n : 1))) {
        err = ENOMEM;
    } else if (fread(v->data, 1, (size_t)n, f) != (size_t)n || ferror(f)) {
        err = errno;
        free(v->data);
        v->data = NULL;
    } else {
        v->size = (size_t)n;
    }
    fclose(f);
    errno = v->data ? 0 : (err ? err : EIO); /* the reason, for strerror(errno) */
    return v->data ? 0 : -1;
}

static void view_close(file_view *v) {
#ifdef HAVE_POSIX
    if (v->mapped) {
        munmap(v->data, v->size);
        memset(v, 0, sizeof *v);
        return;
    }
#endif
    free(v->data);
    memset(v, 0, sizeof *v);
}

/* ---- callbacks ------------------------------------------------------------------------------ */

typedef struct progress_state {
    int tty;
    int last_pct;
} progress_state;

static void on_log(void *user, const char *msg) {
    progress_state *ps = user;
    if (ps->tty && ps->last_pct >= 0) fputc('\n', stderr); /* leave the progress line */
    ps->last_pct = -1;
    fprintf(stderr, "wasmlm quantize: %s\n", msg);
}

static void on_progress(void *user, uint64_t written, uint64_t total) {
    progress_state *ps = user;
    if (!ps->tty || total == 0) return;
    int pct = (int)(100.0 * (double)written / (double)total);
    if (pct != ps->last_pct) fprintf(stderr, "\r%3d%%", pct);
    ps->last_pct = pct;
}

static double now_s(void) {
    struct timespec t;
    timespec_get(&t, TIME_UTC);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The file name of a path without directory and extension, into buf. */
static const char *stem(const char *path, char *buf, size_t n) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t len = strlen(base);
    const char *dot = strrchr(base, '.');
    if (dot && dot != base) len = (size_t)(dot - base);
    if (len >= n) len = n - 1;
    memcpy(buf, base, len);
    buf[len] = '\0';
    return buf;
}

/* ---- the command ---------------------------------------------------------------------------- */

/* Writes `out` from a loaded llama model (wlm_quantize_model; src, when not NULL, gives its
 * key/values) or, when model is NULL, straight from the GGUF `src` of any other architecture
 * (wlm_quantize_gguf). Prints progress on a terminal, then the summary or the error. Returns
 * the exit code. */
static int quantize_to(const char *in, const char *out, wlm_model *model, const wlm_gguf *src,
                       int32_t type, int32_t mix, const char *name, double t0) {
    char err[512] = "";
    progress_state ps = {0, -1};
#ifdef HAVE_POSIX
    ps.tty = isatty(fileno(stderr));
#endif
    wlm_quantize_params qp;
    wlm_quantize_params_default(&qp);
    qp.type = type;
    qp.mix = mix > 0 ? mix : WLM_QUANT_MIX_NONE;
    qp.name = name;
    qp.src = src;
    qp.log = on_log;
    qp.progress = on_progress;
    qp.user = &ps;
    const int s = model ? wlm_quantize_model(model, out, &qp, err, sizeof err)
                        : wlm_quantize_gguf(src, out, &qp, err, sizeof err);
    if (ps.tty && ps.last_pct >= 0) fputc('\r', stderr);
    if (s != WLM_OK) {
        fprintf(stderr, "wasmlm quantize: %s: %s (%s); nothing written to %s\n", in, err,
                wlm_status_name(s), out);
        return 1;
    }
    FILE *f = fopen(out, "rb");
    long size = -1;
    if (f && fseek(f, 0, SEEK_END) == 0) size = ftell(f);
    if (f) fclose(f);
    char shape[64];
    if (model) {
        wlm_model_info info;
        wlm_model_get_info(model, &info);
        snprintf(shape, sizeof shape, "%d layers, dim %d", (int)info.n_layers, (int)info.dim);
    } else {
        snprintf(shape, sizeof shape, "%zu tensors", src->n_tensors);
    }
    fprintf(stderr, "wasmlm quantize: wrote %s: %s, %s, %.1f MB, in %.2f s\n", out,
            mix > 0 ? wlm_quantize_mix_name(mix) : wlm_type_get(type)->name, shape,
            (double)size / 1e6, now_s() - t0);
    return 0;
}

/* argv holds the arguments after "quantize". Returns the process exit code. */
int wlm_cli_quantize(int argc, char **argv) {
    const char *pos[3] = {NULL, NULL, NULL}, *tok_path = NULL, *name = NULL;
    int npos = 0;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "-z") == 0 && i + 1 < argc) tok_path = argv[++i];
        else if (strcmp(argv[i], "--name") == 0 && i + 1 < argc) name = argv[++i];
        else if (argv[i][0] != '-' && npos < 3) pos[npos++] = argv[i];
        else {
            usage();
            return 1;
        }
    }
    if (npos != 3) {
        usage();
        return 1;
    }
    const char *in = pos[0], *out = pos[1];
    const int32_t mix = wlm_quantize_mix_from_name(pos[2]);
    const int32_t type = mix > 0 ? WLM_TYPE_F32 : wlm_quantize_type_from_name(pos[2]);
    if (type < 0) {
        fprintf(stderr,
                "wasmlm quantize: unknown type '%s' (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, "
                "Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, MXFP4, Q3_K_M, Q4_K_M, Q5_K_M, MXFP4_MOE)\n",
                pos[2]);
        return 1;
    }
    char err[512] = "";
    if (mix <= 0 && wlm_quantize_check_type(type, err, sizeof err) != WLM_OK) {
        fprintf(stderr, "wasmlm quantize: %s\n", err);
        return 1;
    }

    int rc = 1;
    file_view model_file, tok_file;
    memset(&tok_file, 0, sizeof tok_file);
    wlm_model *model = NULL;
    wlm_gguf src;
    int have_src = 0;
    char stem_buf[128];
    const double t0 = now_s();
    if (view_open(&model_file, in) != 0) {
        fprintf(stderr, "wasmlm quantize: cannot read %s: %s\n", in, strerror(errno));
        return 1;
    }
    const int is_gguf = model_file.size >= 4 && memcmp(model_file.data, "GGUF", 4) == 0;
    if (is_gguf) {
        if (wlm_gguf_parse(&src, model_file.data, model_file.size, err, sizeof err) != WLM_OK) {
            fprintf(stderr, "wasmlm quantize: %s: %s\n", in, err);
            goto out;
        }
        have_src = 1;
        wlm_gguf_str arch = {NULL, 0};
        if (wlm_gguf_get_str(&src, "general.architecture", &arch, err, sizeof err) == WLM_OK &&
            !(arch.len == 5 && memcmp(arch.ptr, "llama", 5) == 0)) {
            /* Any other architecture: every key/value and tensor copied, the weight matrices
             * converted (quantize.c's wlm_quantize_gguf), without loading the model. */
            rc = quantize_to(in, out, NULL, &src, type, mix, name, t0);
            goto out;
        }
    }
    if (wlm_model_load(model_file.data, model_file.size, 0, &model) != WLM_OK) {
        fprintf(stderr, "wasmlm quantize: %s: %s\n", in, wlm_model_errmsg(model));
        goto out;
    }
    wlm_model_info info;
    wlm_model_get_info(model, &info);
    if (is_gguf) {
        /* its key/values (parsed above) are copied: chat template, token ids... */
        if (tok_path && info.has_tokenizer)
            fprintf(stderr, "wasmlm quantize: %s has its own vocabulary; -z %s is ignored\n", in,
                    tok_path);
    } else if (!tok_path) {
        fprintf(stderr, "wasmlm quantize: %s is a llama2.c checkpoint: give its tokenizer.bin "
                        "with -z (the vocabulary goes into the GGUF)\n", in);
        goto out;
    }
    if (tok_path && !info.has_tokenizer) {
        if (view_open(&tok_file, tok_path) != 0) {
            fprintf(stderr, "wasmlm quantize: cannot read %s: %s\n", tok_path, strerror(errno));
            goto out;
        }
        if (wlm_model_load_tokenizer(model, tok_file.data, tok_file.size) != WLM_OK) {
            fprintf(stderr, "wasmlm quantize: %s: %s\n", tok_path, wlm_model_errmsg(model));
            goto out;
        }
    }

    rc = quantize_to(in, out, model, have_src ? &src : NULL, type, mix,
                     name ? name : is_gguf ? NULL : stem(in, stem_buf, sizeof stem_buf), t0);
out:
    if (have_src) wlm_gguf_free(&src);
    wlm_model_free(model);
    view_close(&tok_file);
    view_close(&model_file);
    return rc;
}
