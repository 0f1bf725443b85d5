/*
 * cli_embed.c — `wasmlm embed MODEL`: embeddings or reranking scores of texts, with llama.cpp's
 * llama-embedding flags and output shapes. It only parses arguments, tokenizes and prints;
 * wlm_embed (src/runtime/embed.c) computes.
 *
 *   wasmlm embed MODEL -p TEXT [-p TEXT]... [-f FILE] [--pooling none|mean|cls|last|rank]
 *         [--embd-normalize N] [--embd-output-format json|json+|array] [--embd-separator S]
 *         [--cls-separator S] [-c N] [-t N] [-b N]
 *
 * Each -p, and the contents of -f, is split at --embd-separator (default a newline) into texts;
 * empty texts are dropped. With rank pooling each text is "query<cls-separator>document"
 * (default a tab). Output: by default one line per vector ("embedding N: v v ..." or "rerank
 * score N: s"); --embd-output-format json prints {"object":"list","data":[{"object":
 * "embedding","index":0,"embedding":[...]}, ...]} as llama.cpp's, array prints [[...],...];
 * json+ adds, with two or more vectors, llama.cpp's "cosineSimilarity" matrix (row i, column j:
 * cos(v_i, v_j) = v_i·v_j / (|v_i| |v_j|), 1 when both are zero, 0 when one is; two decimals).
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wasmlm.h"

void *wlm_cli_read_file(const char *path, size_t *size); /* cli.c */

/* cos(a, b) in double, as llama.cpp's common_embd_similarity_cos defines the zero cases. */
static double cosine(const float *a, const float *b, int32_t n) {
    double ab = 0, aa = 0, bb = 0;
    for (int32_t i = 0; i < n; i++)
        ab += (double)a[i] * b[i], aa += (double)a[i] * a[i], bb += (double)b[i] * b[i];
    if (aa == 0 || bb == 0) return aa == 0 && bb == 0 ? 1.0 : 0.0;
    return ab / (sqrt(aa) * sqrt(bb));
}

/* json+'s ",\n  \"cosineSimilarity\": [[...], ...]" member: n × n, two decimals. */
static void print_cosine_matrix(const float *vecs, size_t n, int32_t width) {
    printf(",\n  \"cosineSimilarity\": [\n");
    for (size_t i = 0; i < n; i++) {
        printf("    [");
        for (size_t j = 0; j < n; j++)
            printf("%s%6.2f", j ? ", " : "",
                   cosine(vecs + i * (size_t)width, vecs + j * (size_t)width, width));
        printf(" ]%s\n", i + 1 < n ? "," : "");
    }
    printf("  ]");
}

typedef struct text_list {
    char **v;
    size_t n, cap;
} text_list;

static int push_text(text_list *l, const char *s, size_t n) {
    if (n == 0) return 0;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        char **v = realloc(l->v, sizeof(char *) * cap);
        if (!v) return -1;
        l->v = v, l->cap = cap;
    }
    char *c = malloc(n + 1);
    if (!c) return -1;
    memcpy(c, s, n);
    c[n] = '\0';
    l->v[l->n++] = c;
    return 0;
}

/* Splits s (n bytes) at every occurrence of sep into l. */
static int split_texts(text_list *l, const char *s, size_t n, const char *sep) {
    const size_t k = strlen(sep);
    size_t start = 0;
    for (size_t i = 0; k && i + k <= n;) {
        if (memcmp(s + i, sep, k) == 0) {
            if (push_text(l, s + start, i - start)) return -1;
            i += k;
            start = i;
        } else {
            i++;
        }
    }
    return push_text(l, s + start, n - start);
}

static int parse_int(const char *flag, const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "wasmlm embed: %s expects an integer in %ld..%ld, got \"%s\"\n", flag, lo,
                hi, s);
        return -1;
    }
    *out = v;
    return 0;
}

static void usage(FILE *f) {
    fprintf(f, "Usage: wasmlm embed MODEL -p TEXT [-p TEXT]... [-f FILE]\n"
               "         [--pooling none|mean|cls|last|rank] [--embd-normalize N]\n"
               "         [--embd-output-format json|json+|array] [--embd-separator S]\n"
               "         [--cls-separator S] [-c N] [-t N]\n"
               "  --embd-normalize: -1 none, 0 max absolute (int16), 1 taxicab, 2 Euclidean\n"
               "                    (default), N > 2 p-norm\n");
}

int wlm_cli_embed(int argc, char **argv) {
    const char *model_path = NULL, *format = "", *sep = "\n", *cls_sep = "\t";
    const char *prompts[64];
    const char *files[16];
    int n_prompts = 0, n_files = 0, rc = 1;
    long pooling = WLM_POOLING_UNSPECIFIED, norm = 2, n_ctx = 0, threads = 1;
    static const char *const POOL[] = {"none", "mean", "cls", "last", "rank"};
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int takes = strcmp(a, "-p") == 0 || strcmp(a, "--prompt") == 0 || strcmp(a, "-f") == 0 ||
                    strcmp(a, "--file") == 0 || strcmp(a, "--pooling") == 0 ||
                    strcmp(a, "--embd-normalize") == 0 || strcmp(a, "--embd-output-format") == 0 ||
                    strcmp(a, "--embd-separator") == 0 || strcmp(a, "--cls-separator") == 0 ||
                    strcmp(a, "-c") == 0 || strcmp(a, "--ctx-size") == 0 || strcmp(a, "-t") == 0 ||
                    strcmp(a, "--threads") == 0 || strcmp(a, "-m") == 0 || strcmp(a, "--model") == 0;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        }
        if (takes && !v) {
            fprintf(stderr, "wasmlm embed: %s needs a value\n", a);
            return 1;
        }
        if (!takes) {
            if (a[0] == '-' || model_path) {
                fprintf(stderr, "wasmlm embed: unknown argument \"%s\"\n", a);
                usage(stderr);
                return 1;
            }
            model_path = a;
            continue;
        }
        i++;
        if (strcmp(a, "-p") == 0 || strcmp(a, "--prompt") == 0) {
            if (n_prompts == 64) {
                fprintf(stderr, "wasmlm embed: at most 64 -p (use -f FILE for more texts)\n");
                return 1;
            }
            prompts[n_prompts++] = v;
        } else if (strcmp(a, "-f") == 0 || strcmp(a, "--file") == 0) {
            if (n_files == 16) {
                fprintf(stderr, "wasmlm embed: at most 16 -f\n");
                return 1;
            }
            files[n_files++] = v;
        } else if (strcmp(a, "--pooling") == 0) {
            pooling = -2;
            for (int k = 0; k < 5; k++)
                if (strcmp(v, POOL[k]) == 0) pooling = k;
            if (pooling == -2) {
                fprintf(stderr, "wasmlm embed: --pooling expects none, mean, cls, last or rank, "
                                "got \"%s\"\n", v);
                return 1;
            }
        } else if (strcmp(a, "--embd-normalize") == 0) {
            if (parse_int(a, v, -1, 1000, &norm)) return 1;
        } else if (strcmp(a, "--embd-output-format") == 0) {
            if (strcmp(v, "json") && strcmp(v, "json+") && strcmp(v, "array") && v[0]) {
                fprintf(stderr, "wasmlm embed: --embd-output-format expects json, json+ or array, "
                                "got \"%s\"\n", v);
                return 1;
            }
            format = v;
        } else if (strcmp(a, "--embd-separator") == 0) {
            sep = v;
        } else if (strcmp(a, "--cls-separator") == 0) {
            cls_sep = v;
        } else if (strcmp(a, "-c") == 0 || strcmp(a, "--ctx-size") == 0) {
            if (parse_int(a, v, 0, 1 << 24, &n_ctx)) return 1;
        } else if (strcmp(a, "-t") == 0 || strcmp(a, "--threads") == 0) {
            if (parse_int(a, v, 1, 64, &threads)) return 1;
        } else { /* -m / --model */
            model_path = v;
        }
    }
    if (!model_path || (n_prompts == 0 && n_files == 0)) {
        usage(stderr);
        return 1;
    }

    text_list texts = {0};
    wlm_model *model = NULL;
    wlm_context *ctx = NULL;
    wlm_threadpool *pool = NULL;
    int32_t *tokens = NULL, *lengths = NULL;
    float *out = NULL;
    for (int i = 0; i < n_prompts; i++)
        if (split_texts(&texts, prompts[i], strlen(prompts[i]), sep)) goto nomem;
    for (int i = 0; i < n_files; i++) {
        size_t size = 0;
        char *bytes = wlm_cli_read_file(files[i], &size);
        if (!bytes) {
            fprintf(stderr, "wasmlm embed: cannot read %s: %s\n", files[i], strerror(errno));
            goto out;
        }
        int bad = split_texts(&texts, bytes, size, sep);
        free(bytes);
        if (bad) goto nomem;
    }
    if (texts.n == 0) {
        fprintf(stderr, "wasmlm embed: no text to embed (every text is empty)\n");
        goto out;
    }

    size_t msize = 0;
    void *mbytes = wlm_cli_read_file(model_path, &msize);
    if (!mbytes) {
        fprintf(stderr, "wasmlm embed: cannot read %s: %s\n", model_path, strerror(errno));
        goto out;
    }
    if (wlm_model_load(mbytes, msize, WLM_LOAD_OWN_BUFFER, &model) != WLM_OK) {
        fprintf(stderr, "wasmlm embed: %s: %s\n", model_path, wlm_model_errmsg(model));
        goto out;
    }
    wlm_embed_info info;
    wlm_model_info minfo;
    if (wlm_model_embed_info(model, &info) != WLM_OK || wlm_model_get_info(model, &minfo) != WLM_OK ||
        !minfo.has_tokenizer) {
        fprintf(stderr, "wasmlm embed: %s has no vocabulary\n", model_path);
        goto out;
    }
    if (pooling == WLM_POOLING_UNSPECIFIED) {
        if (info.pooling == WLM_POOLING_NONE) {
            fprintf(stderr, "wasmlm embed: %s does not say how to pool its hidden states (no "
                            "pooling_type: not an embedding model?); choose --pooling mean, cls, "
                            "last or none (one vector per token)\n", model_path);
            goto out;
        }
        pooling = info.pooling;
    }
    if (pooling == WLM_POOLING_RANK && info.n_rank_out == 0) {
        fprintf(stderr, "wasmlm embed: --pooling rank needs a reranker (tensors cls / cls.output); "
                        "%s has none\n", model_path);
        goto out;
    }

    /* tokenize: texts with the special tokens, or (rank) query/document pairs */
    size_t n_tok = 0, cap_tok = 0;
    lengths = malloc(sizeof(int32_t) * texts.n);
    if (!lengths) goto nomem;
    for (size_t t = 0; t < texts.n; t++) {
        const char *s = texts.v[t];
        int32_t n;
        const char *cut = pooling == WLM_POOLING_RANK ? strstr(s, cls_sep) : NULL;
        if (pooling == WLM_POOLING_RANK && (!cut || !cls_sep[0])) {
            fprintf(stderr, "wasmlm embed: text %zu has no --cls-separator between query and "
                            "document\n", t);
            goto out;
        }
        for (int pass = 0; pass < 2; pass++) {
            int32_t *dst = pass ? tokens + n_tok : NULL, cap = pass ? (int32_t)(cap_tok - n_tok) : 0;
            n = cut ? wlm_tokenize_pair(model, s, (size_t)(cut - s), cut + strlen(cls_sep),
                                        strlen(cut + strlen(cls_sep)), dst, cap)
                    : wlm_tokenize(model, s, strlen(s), 1, dst, cap);
            if (n < 0) {
                fprintf(stderr, "wasmlm embed: cannot tokenize text %zu: %s\n", t,
                        wlm_status_name(n));
                goto out;
            }
            if (pass == 0 && n_tok + (size_t)n > cap_tok) {
                size_t c = cap_tok ? cap_tok : 1024;
                while (c < n_tok + (size_t)n) c *= 2;
                int32_t *nt = realloc(tokens, sizeof(int32_t) * c);
                if (!nt) goto nomem;
                tokens = nt, cap_tok = c;
            }
        }
        lengths[t] = n;
        n_tok += (size_t)n;
    }

    wlm_context_params cp;
    wlm_context_params_default(&cp);
    int32_t longest = 0;
    for (size_t t = 0; t < texts.n; t++) longest = lengths[t] > longest ? lengths[t] : longest;
    cp.n_ctx = (int32_t)n_ctx;
    if (cp.n_ctx == 0) cp.n_ctx = minfo.seq_len < 512 || longest > 512 ? minfo.seq_len : 512;
    cp.n_seq_max = texts.n < 16 ? (int32_t)texts.n : 16;
    if (wlm_context_new(model, &cp, &ctx) != WLM_OK) {
        fprintf(stderr, "wasmlm embed: %s\n", wlm_context_errmsg(ctx));
        goto out;
    }
    if (threads > 1 && (wlm_threadpool_new((int32_t)threads, &pool) != WLM_OK ||
                        wlm_context_set_threadpool(ctx, pool) != WLM_OK)) {
        fprintf(stderr, "wasmlm embed: cannot start %ld threads\n", threads);
        goto out;
    }
    int32_t need = wlm_embed(ctx, tokens, lengths, (int32_t)texts.n, (int32_t)pooling,
                             (int32_t)norm, NULL, 0);
    out = need > 0 ? malloc(sizeof(float) * (size_t)need) : NULL;
    if (need < 0 || !out ||
        wlm_embed(ctx, tokens, lengths, (int32_t)texts.n, (int32_t)pooling, (int32_t)norm, out,
                  (size_t)need) != need) {
        fprintf(stderr, "wasmlm embed: %s\n", need < 0 || out ? wlm_context_errmsg(ctx)
                                                               : "out of memory");
        goto out;
    }

    const int32_t width = pooling == WLM_POOLING_RANK ? info.n_rank_out : info.n_embd;
    const size_t n_vec = (size_t)need / (size_t)width;
    const int plus = strcmp(format, "json+") == 0;
    const int json = plus || strcmp(format, "json") == 0, array = strcmp(format, "array") == 0;
    if (json) printf("{\n  \"object\": \"list\",\n  \"data\": [\n");
    if (array) printf("[");
    for (size_t v = 0; v < n_vec; v++) {
        const float *e = out + v * (size_t)width;
        if (json) printf("    {\n      \"object\": \"embedding\",\n      \"index\": %zu,\n      "
                         "\"embedding\": [", v);
        else if (array) printf(v ? ",[" : "[");
        else if (pooling == WLM_POOLING_RANK) printf("rerank score %zu:", v);
        else printf("embedding %zu:", v);
        for (int32_t i = 0; i < width; i++) {
            if (json || array) printf(i ? ",%.9g" : "%.9g", (double)e[i]);
            else printf(" %.9g", (double)e[i]);
        }
        if (json) printf("]\n    }%s\n", v + 1 < n_vec ? "," : "");
        else if (array) printf("]");
        else printf("\n");
    }
    if (json) printf("  ]");
    if (plus && n_vec > 1) print_cosine_matrix(out, n_vec, width);
    if (json) printf("\n}\n");
    if (array) printf("]\n");
    rc = fflush(stdout) == 0 ? 0 : 1;
    goto out;
nomem:
    fprintf(stderr, "wasmlm embed: out of memory\n");
out:
    for (size_t t = 0; t < texts.n; t++) free(texts.v[t]);
    free(texts.v), free(tokens), free(lengths), free(out);
    wlm_context_free(ctx);
    wlm_threadpool_free(pool);
    wlm_model_free(model);
    return rc;
}
