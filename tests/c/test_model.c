/*
 * test_model.c — the public API end to end on stories260K: loading (and refusing corrupt,
 * implausible or unsupported files), the forward pass against run.c's logits position by
 * position, the KV cache against recomputation, and generation: run.c's greedy text byte for
 * byte, stop conditions (EOS, max tokens, context full, stop strings, abort) and parameter
 * checks. Only wasmlm.h is used here.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wasmlm.h"
#include "test_util.h"

#define REF_POS 32
#define VOCAB 512

static unsigned char *model_bytes, *tok_bytes;
static size_t model_size, tok_size;

static int32_t ref_tokens[REF_POS];
static float *ref_logits; /* (REF_POS, VOCAB) */

/* The reference greedy run: "Once upon a time" and what run.c printed after it. */
static char *ref_text;        /* file content without the final "\n" run.c adds */
static size_t ref_text_len;
static const char *PROMPT = "Once upon a time";
#define PROMPT_LEN 16

/* ------------------------------------------------------------------------------------------ */
/* The reference JSON: {"input_tokens": [ints], "logits": [[floats] x 32]} — a scanner that
 * finds a key and reads the numbers in the brackets that follow it.                          */

static const char *skip_to_key(const char *s, const char *key) {
    const char *p = strstr(s, key);
    if (!p) return NULL;
    p = strchr(p + strlen(key), '[');
    return p;
}

/* Reads up to `max` numbers from p (just after a '[') until the matching ']' at depth 0 of the
 * call's nesting `levels` (1: a flat array, 2: an array of arrays). Returns the count. */
static int scan_numbers(const char *p, int levels, double *out, int max) {
    int depth = 0, n = 0;
    for (; *p; p++) {
        char c = *p;
        if (c == '[') {
            depth++;
        } else if (c == ']') {
            if (--depth == 0) break;
        } else if (c == '-' || c == '+' || c == '.' || (c >= '0' && c <= '9')) {
            char *end;
            double v = strtod(p, &end);
            if (end == p) return -1;
            if (n < max) out[n] = v;
            n++;
            p = end - 1;
        } else if (c != ',' && c != ' ' && c != '\n' && c != '\r' && c != '\t') {
            return -1; /* not a number array */
        }
        if (depth > levels) return -1;
    }
    return n;
}

static int load_reference(void) {
    size_t size = 0;
    unsigned char *json = tu_read_shared("reference/stories260K_logits_OnceUponATime_32.json", &size);
    if (!json) return 0;
    double *tmp = (double *)malloc(sizeof(double) * REF_POS * VOCAB);
    const char *p = skip_to_key((const char *)json, "\"input_tokens\"");
    int n = p ? scan_numbers(p, 1, tmp, REF_POS) : -1;
    CHECKF(n == REF_POS, "input_tokens: %d numbers", n);
    for (int i = 0; i < REF_POS; i++) ref_tokens[i] = (int32_t)tmp[i];
    CHECK(ref_tokens[0] == 1 && ref_tokens[1] == 403 && ref_tokens[2] == 407 &&
          ref_tokens[3] == 261 && ref_tokens[4] == 378);
    p = skip_to_key((const char *)json, "\"logits\"");
    int m = p ? scan_numbers(p, 2, tmp, REF_POS * VOCAB) : -1;
    CHECKF(m == REF_POS * VOCAB, "logits: %d numbers", m);
    ref_logits = (float *)malloc(sizeof(float) * REF_POS * VOCAB);
    for (int i = 0; i < REF_POS * VOCAB; i++) ref_logits[i] = (float)tmp[i];
    free(tmp);
    free(json);

    unsigned char *txt = tu_read_shared("reference/stories260K_run.c_greedy_OnceUponATime_404.txt", &size);
    if (!txt) return 0;
    CHECK(size > PROMPT_LEN + 1 && txt[size - 1] == '\n' && memcmp(txt, PROMPT, PROMPT_LEN) == 0);
    ref_text = (char *)txt;
    ref_text_len = size - 1;
    ref_text[ref_text_len] = 0;
    return n == REF_POS && m == REF_POS * VOCAB;
}

/* ------------------------------------------------------------------------------------------ */

static wlm_model *load_model(void) {
    wlm_model *m = NULL;
    int rc = wlm_model_load(model_bytes, model_size, 0, &m);
    CHECKF(rc == WLM_OK, "wlm_model_load: %s %s", wlm_status_name(rc), m ? wlm_model_errmsg(m) : "");
    if (rc != WLM_OK) {
        wlm_model_free(m);
        return NULL;
    }
    rc = wlm_model_load_tokenizer(m, tok_bytes, tok_size);
    CHECKF(rc == WLM_OK, "wlm_model_load_tokenizer: %s %s", wlm_status_name(rc), wlm_model_errmsg(m));
    return m;
}

/* KV cache type of new_context's contexts: F32, the tests below compare with run.c's float32
 * logits to 1e-4 and its greedy text byte for byte; test_f16_cache measures the F16 default. */
static int32_t kv_type = WLM_KV_F32;

static wlm_context *new_context(const wlm_model *m, int n_ctx, int kv_cache, int use_simd) {
    wlm_context_params cp;
    wlm_context *ctx = NULL;
    wlm_context_params_default(&cp);
    cp.kv_type = kv_type;
    cp.n_ctx = n_ctx;
    cp.kv_cache = kv_cache;
    cp.use_simd = use_simd;
    int rc = wlm_context_new(m, &cp, &ctx);
    CHECKF(rc == WLM_OK, "wlm_context_new(n_ctx %d, kv %d, simd %d): %s %s", n_ctx, kv_cache,
           use_simd, wlm_status_name(rc), ctx ? wlm_context_errmsg(ctx) : "");
    if (rc != WLM_OK) {
        wlm_context_free(ctx);
        return NULL;
    }
    return ctx;
}

static void test_load(void) {
    tu_section("load and info");
    wlm_model *m = NULL;
    int rc = wlm_model_load(model_bytes, model_size, 0, &m);
    CHECK_STATUS(rc, WLM_OK);
    CHECK(m != NULL);
    if (!m) return;
    CHECK(strcmp(wlm_model_errmsg(m), "") == 0);
    wlm_model_info info;
    memset(&info, 0x55, sizeof info);
    CHECK_STATUS(wlm_model_get_info(m, &info), WLM_OK);
    CHECK_EQ_INT(info.dim, 64);
    CHECK_EQ_INT(info.hidden_dim, 172);
    CHECK_EQ_INT(info.n_layers, 5);
    CHECK_EQ_INT(info.n_heads, 8);
    CHECK_EQ_INT(info.n_kv_heads, 4);
    CHECK_EQ_INT(info.vocab_size, 512);
    CHECK_EQ_INT(info.seq_len, 512);
    CHECK_EQ_INT(info.shared_classifier, 1);
    CHECK_EQ_INT(info.has_tokenizer, 0);
    /* every matrix once per token: 5 × (wq 64² + wk, wv 32·64 + wo 64² + w1, w3, w2 172·64)
     * + the classifier 512·64, in float32; vectors and one embedding row come on top */
    size_t matrices = 4u * (5u * (64 * 64 * 2 + 32 * 64 * 2 + 172 * 64 * 3) + 512 * 64);
    CHECKF(info.weight_bytes >= matrices && info.weight_bytes <= model_size,
           "weight_bytes %zu (matrices alone %zu, file %zu)", info.weight_bytes, matrices, model_size);
    CHECK_STATUS(wlm_model_get_info(m, NULL), WLM_ERR_INVALID_ARG);
    CHECK_STATUS(wlm_model_get_info(NULL, &info), WLM_ERR_INVALID_ARG);

    /* no tokenizer yet */
    int32_t ids[8];
    size_t len = 0;
    CHECKF(wlm_tokenize(m, "Once", 4, 1, ids, 8) < 0, "wlm_tokenize without a tokenizer");
    CHECK(wlm_token_piece(m, -1, 403, &len) == NULL);

    /* the wrong tokenizers: refused, the model keeps none and accepts the right one after */
    size_t big_size = 0;
    unsigned char *big = tu_read_shared("models/tokenizer.bin", &big_size);
    if (big) {
        rc = wlm_model_load_tokenizer(m, big, big_size);
        CHECK_STATUS(rc, WLM_ERR_TOKENIZER);
        CHECKF(wlm_model_errmsg(m)[0] != 0, "no message for a 32000-token tokenizer");
        free(big);
    }
    unsigned char *cut = tu_dup(tok_bytes, tok_size - 10);
    CHECK_STATUS(wlm_model_load_tokenizer(m, cut, tok_size - 10), WLM_ERR_TRUNCATED);
    CHECK(wlm_model_errmsg(m)[0] != 0);
    free(cut);
    CHECK_STATUS(wlm_model_get_info(m, &info), WLM_OK);
    CHECK_EQ_INT(info.has_tokenizer, 0);

    unsigned char *tcopy = tu_dup(tok_bytes, tok_size);
    CHECK_STATUS(wlm_model_load_tokenizer(m, tcopy, tok_size), WLM_OK);
    memset(tcopy, 0, tok_size); /* the tokenizer was copied */
    free(tcopy);
    CHECK_STATUS(wlm_model_load_tokenizer(m, tok_bytes, tok_size), WLM_ERR_STATE);
    CHECK_STATUS(wlm_model_get_info(m, &info), WLM_OK);
    CHECK_EQ_INT(info.has_tokenizer, 1);
    CHECK_EQ_INT(info.bos_id, 1);
    CHECK_EQ_INT(info.eos_id, 2);

    /* tokenize through the model */
    for (int i = 0; i < 8; i++) ids[i] = -7;
    int32_t n = wlm_tokenize(m, PROMPT, PROMPT_LEN, 1, ids, 8);
    CHECK_EQ_INT(n, 5);
    CHECK(ids[0] == 1 && ids[1] == 403 && ids[2] == 407 && ids[3] == 261 && ids[4] == 378 && ids[5] == -7);
    CHECK_EQ_INT(wlm_tokenize(m, PROMPT, PROMPT_LEN, 0, ids, 2), 4);
    const char *piece = wlm_token_piece(m, 1, 403, &len);
    CHECK(piece && len == 4 && strcmp(piece, "Once") == 0);
    piece = wlm_token_piece(m, 403, 407, &len);
    CHECK(piece && len == 5 && strcmp(piece, " upon") == 0);
    piece = wlm_token_piece(m, 403, 13, &len);
    CHECK(piece && len == 1 && strcmp(piece, "\n") == 0);
    CHECK(wlm_token_piece(m, -1, 512, &len) == NULL);
    CHECK(wlm_token_piece(m, -1, -1, &len) == NULL);
    CHECK(wlm_tokenize(NULL, PROMPT, PROMPT_LEN, 1, ids, 8) < 0);
    CHECK(wlm_tokenize(m, PROMPT, PROMPT_LEN, 1, ids, -1) < 0);
    CHECK(wlm_token_piece(NULL, -1, 403, &len) == NULL);
    wlm_model_free(m);

    /* a model that owns its buffer frees it (LeakSanitizer checks that in the ASan build) */
    unsigned char *own = tu_dup(model_bytes, model_size);
    m = NULL;
    CHECK_STATUS(wlm_model_load(own, model_size, WLM_LOAD_OWN_BUFFER, &m), WLM_OK);
    wlm_model_free(m);
    own = tu_dup(model_bytes, 100);
    m = NULL;
    CHECK_STATUS(wlm_model_load(own, 100, WLM_LOAD_OWN_BUFFER, &m), WLM_ERR_TRUNCATED);
    wlm_model_free(m); /* owned buffers are freed on failure too */

    /* NULLs */
    wlm_model_free(NULL);
    wlm_context_free(NULL);
    m = NULL;
    CHECK_STATUS(wlm_model_load(NULL, model_size, 0, &m), WLM_ERR_INVALID_ARG);
    wlm_model_free(m);
    CHECK_STATUS(wlm_model_load(model_bytes, model_size, 0, NULL), WLM_ERR_INVALID_ARG);
    CHECK(wlm_status_name(WLM_ERR_FORMAT) && strcmp(wlm_status_name(WLM_ERR_FORMAT), "WLM_ERR_FORMAT") == 0);
    CHECK(strcmp(wlm_status_name(WLM_OK), "WLM_OK") == 0);
    CHECK(wlm_status_name(-1000) != NULL && wlm_status_name(12345) != NULL);
    CHECK(strcmp(wlm_stop_reason_name(WLM_STOP_EOS), "WLM_STOP_EOS") == 0);
    CHECK(wlm_stop_reason_name(99) != NULL);
}

/* Loads `size` bytes (an exact-size copy) and expects one of two statuses, a handle, a
 * message, and that the failed model refuses further use. */
static void expect_model_error(const unsigned char *data, size_t size, int want1, int want2,
                               const char *what) {
    unsigned char *copy = tu_dup(data, size);
    wlm_model *m = NULL;
    int rc = wlm_model_load(copy, size, 0, &m);
    CHECKF(rc == want1 || rc == want2, "%s: got %s, want %s%s%s", what, wlm_status_name(rc),
           wlm_status_name(want1), want1 != want2 ? " or " : "", want1 != want2 ? wlm_status_name(want2) : "");
    CHECKF(m != NULL, "%s: no handle on failure", what);
    if (m && rc != WLM_OK) {
        const char *msg = wlm_model_errmsg(m);
        CHECKF(msg && msg[0], "%s: empty message", what);
        wlm_model_info info;
        CHECK_STATUS(wlm_model_get_info(m, &info), WLM_ERR_STATE);
        CHECK_STATUS(wlm_model_load_tokenizer(m, tok_bytes, tok_size), WLM_ERR_STATE);
        wlm_context *ctx = NULL;
        wlm_context_params cp;
        wlm_context_params_default(&cp);
        CHECK_STATUS(wlm_context_new(m, &cp, &ctx), WLM_ERR_STATE);
        wlm_context_free(ctx);
    }
    wlm_model_free(m);
    free(copy);
}

static void header(unsigned char *h, int32_t dim, int32_t hidden, int32_t layers, int32_t heads,
                   int32_t kv, int32_t vocab, int32_t seq) {
    tu_put_i32(h, dim);
    tu_put_i32(h + 4, hidden);
    tu_put_i32(h + 8, layers);
    tu_put_i32(h + 12, heads);
    tu_put_i32(h + 16, kv);
    tu_put_i32(h + 20, vocab);
    tu_put_i32(h + 24, seq);
}

static void test_corrupt(void) {
    char what[160];
    tu_section("truncated, implausible and unsupported files");
    const size_t cuts[] = {0, 1, 4, 27, 28, 29, 32, 1000, model_size / 3, model_size / 2,
                           model_size - 4 * 64 * 32, model_size - 4, model_size - 1};
    for (unsigned i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        snprintf(what, sizeof what, "stories260K.bin cut to %zu of %zu bytes", cuts[i], model_size);
        expect_model_error(model_bytes, cuts[i], WLM_ERR_TRUNCATED, WLM_ERR_FORMAT, what);
    }
    /* one byte too many is not a llama2.c checkpoint either (the size must match exactly, or
     * be accepted; it must not crash) */
    {
        unsigned char *longer = (unsigned char *)malloc(model_size + 1);
        memcpy(longer, model_bytes, model_size);
        longer[model_size] = 0;
        wlm_model *m = NULL;
        int rc = wlm_model_load(longer, model_size + 1, 0, &m);
        printf("   a trailing extra byte: %s\n", wlm_status_name(rc));
        CHECK(rc == WLM_OK || rc == WLM_ERR_FORMAT || rc == WLM_ERR_UNSUPPORTED);
        wlm_model_free(m);
        free(longer);
    }

    /* implausible headers on top of the real file's bytes */
    static const struct {
        int32_t v[7];
        const char *what;
    } BAD[] = {
        {{-64, 172, 5, 8, 4, 512, 512}, "negative dim"},
        {{0, 172, 5, 8, 4, 512, 512}, "dim 0"},
        {{64, -172, 5, 8, 4, 512, 512}, "negative hidden_dim"},
        {{64, 0, 5, 8, 4, 512, 512}, "hidden_dim 0"},
        {{64, 172, -5, 8, 4, 512, 512}, "negative n_layers"},
        {{64, 172, 0, 8, 4, 512, 512}, "n_layers 0"},
        {{64, 172, 5, 0, 4, 512, 512}, "n_heads 0"},
        {{64, 172, 5, -8, 4, 512, 512}, "negative n_heads"},
        {{64, 172, 5, 7, 7, 512, 512}, "n_heads 7 does not divide dim 64"},
        {{64, 172, 5, 8, 16, 512, 512}, "n_kv_heads 16 > n_heads 8"},
        {{64, 172, 5, 8, 0, 512, 512}, "n_kv_heads 0"},
        {{64, 172, 5, 8, -4, 512, 512}, "negative n_kv_heads"},
        {{64, 172, 5, 8, 3, 512, 512}, "n_kv_heads 3 does not divide n_heads 8"},
        {{24, 172, 5, 8, 4, 512, 512}, "an odd head size (24 / 8 = 3; RoPE rotates pairs)"},
        {{64, 172, 5, 8, 4, 0, 512}, "vocab_size 0"},
        {{64, 172, 5, 8, 4, INT32_MIN, 512}, "vocab_size INT32_MIN (negation overflows)"},
        {{64, 172, 5, 8, 4, 512, 0}, "seq_len 0"},
        {{64, 172, 5, 8, 4, 512, -512}, "negative seq_len"},
        {{1 << 30, 1 << 30, 1 << 30, 8, 4, 512, 512}, "sizes whose product overflows 64 bits"},
        {{1 << 20, 1 << 30, 1 << 20, 1 << 10, 1 << 10, 1 << 30, 1 << 30}, "every size huge"},
        {{0x7fffffff, 0x7fffffff, 0x7fffffff, 1, 1, 0x7fffffff, 0x7fffffff}, "INT32_MAX everywhere"},
    };
    for (unsigned i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        unsigned char *c = tu_dup(model_bytes, model_size);
        header(c, BAD[i].v[0], BAD[i].v[1], BAD[i].v[2], BAD[i].v[3], BAD[i].v[4], BAD[i].v[5], BAD[i].v[6]);
        snprintf(what, sizeof what, "header with %s", BAD[i].what);
        expect_model_error(c, model_size, WLM_ERR_FORMAT, WLM_ERR_FORMAT, what);
        free(c);
    }
    /* Large but representable sizes: the product fits in 64 bits but not in 32 (wasm32's
     * size_t). Natively the file is simply too short; in wasm a wrapped size must not pass. */
    {
        unsigned char *c = tu_dup(model_bytes, model_size);
        header(c, 65536, 65536, 64, 64, 64, 32000, 4096);
        expect_model_error(c, model_size, WLM_ERR_FORMAT, WLM_ERR_TRUNCATED,
                           "a 64-layer 65536-wide header on a 1 MB file");
        header(c, 4096, 11008, 32, 32, 32, 32000, 4096); /* Llama 2 7B's header */
        expect_model_error(c, model_size, WLM_ERR_TRUNCATED, WLM_ERR_FORMAT,
                           "Llama 2 7B's header on a 1 MB file");
        header(c, 64, 172, 5, 8, 4, -512, 512); /* separate classifier announced, not present */
        expect_model_error(c, model_size, WLM_ERR_TRUNCATED, WLM_ERR_FORMAT,
                           "negative vocab_size (separate classifier) without the classifier");
        free(c);
    }
    /* a NaN or an infinity in the weights: not a usable checkpoint */
    {
        unsigned char *c = tu_dup(model_bytes, model_size);
        tu_put_f32(c + 28 + 4 * 1000, NAN); /* in the token embedding */
        expect_model_error(c, model_size, WLM_ERR_FORMAT, WLM_ERR_FORMAT, "a NaN in the embedding");
        memcpy(c, model_bytes, model_size);
        tu_put_f32(c + model_size - 4 * 64 * 32 * 2 - 4 * 10, INFINITY); /* in rms_final */
        expect_model_error(c, model_size, WLM_ERR_FORMAT, WLM_ERR_FORMAT, "an infinity near the end");
        free(c);
    }
    /* llama2.c's newer export (magic "ak42", version 1/2) */
    {
        unsigned char c[256] = {0x32, 0x34, 0x6b, 0x61, 1, 0, 0, 0};
        expect_model_error(c, sizeof c, WLM_ERR_UNSUPPORTED, WLM_ERR_UNSUPPORTED, "an \"ak42\" export");
    }
    /* GGUF without the metadata a model needs (test_gguf covers GGUF in depth) */
    {
        unsigned char mini[32] = {'G', 'G', 'U', 'F', 3, 0, 0, 0};
        expect_model_error(mini, sizeof mini, WLM_ERR_FORMAT, WLM_ERR_FORMAT,
                           "a 32-byte GGUF v3 header");
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Forward pass against run.c                                                                   */

static double max_diff(const float *a, const float *b, int n) {
    double d = 0;
    for (int i = 0; i < n; i++) {
        double e = fabs((double)a[i] - (double)b[i]);
        if (!(e <= d)) d = e; /* NaN propagates */
    }
    return d;
}

/* Evaluates the reference tokens one at a time; stores every position's logits in out. */
static void eval_positions(wlm_context *ctx, float *out, const char *what) {
    int bad = 0, first = -1;
    double worst = 0;
    for (int pos = 0; pos < REF_POS; pos++) {
        int rc = wlm_eval(ctx, &ref_tokens[pos], 1);
        if (rc != WLM_OK) {
            CHECKF(0, "%s: wlm_eval at %d: %s %s", what, pos, wlm_status_name(rc), wlm_context_errmsg(ctx));
            return;
        }
        const float *lg = wlm_logits(ctx);
        if (!lg) {
            CHECKF(0, "%s: no logits at %d", what, pos);
            return;
        }
        memcpy(out + (size_t)pos * VOCAB, lg, sizeof(float) * VOCAB);
        double d = max_diff(lg, ref_logits + (size_t)pos * VOCAB, VOCAB);
        if (!(d <= 1e-4)) {
            bad++;
            if (first < 0) first = pos;
        }
        if (!(d <= worst)) worst = d;
    }
    CHECKF(bad == 0, "%s: %d of 32 positions differ from run.c's logits by more than 1e-4 "
           "(first %d, worst %.3g)", what, bad, first, worst);
    CHECK_EQ_INT(wlm_context_n_past(ctx), REF_POS);
    printf("   %s: largest difference from run.c's logits %.3g\n", what, worst);
}

static void test_forward(const wlm_model *m) {
    tu_section("forward pass against run.c's logits");
    float *kv_simd = (float *)malloc(sizeof(float) * REF_POS * VOCAB);
    float *kv_ref = (float *)malloc(sizeof(float) * REF_POS * VOCAB);
    float *nokv = (float *)malloc(sizeof(float) * REF_POS * VOCAB);

    wlm_context *ctx = new_context(m, 0, 1, 1);
    if (ctx) {
        CHECK(wlm_logits(ctx) == NULL);
        CHECK_EQ_INT(wlm_context_n_past(ctx), 0);
        /* the KV cache alone: 2 × 5 layers × 512 positions × kv_dim 32 × 4 bytes */
        CHECKF(wlm_context_memory(ctx) >= 2u * 5 * 512 * 32 * 4, "memory %zu", wlm_context_memory(ctx));
        eval_positions(ctx, kv_simd, "KV cache, SIMD kernels");

        /* prefill: all 32 at once give the last position's logits */
        wlm_context_reset(ctx);
        CHECK_EQ_INT(wlm_context_n_past(ctx), 0);
        CHECK_STATUS(wlm_eval(ctx, ref_tokens, REF_POS), WLM_OK);
        const float *lg = wlm_logits(ctx);
        CHECK(lg && max_diff(lg, ref_logits + (size_t)(REF_POS - 1) * VOCAB, VOCAB) <= 1e-4);
        /* in two pieces: 20 then 12 */
        wlm_context_reset(ctx);
        CHECK_STATUS(wlm_eval(ctx, ref_tokens, 20), WLM_OK);
        lg = wlm_logits(ctx);
        CHECK(lg && max_diff(lg, ref_logits + 19 * VOCAB, VOCAB) <= 1e-4);
        CHECK_STATUS(wlm_eval(ctx, ref_tokens + 20, 12), WLM_OK);
        lg = wlm_logits(ctx);
        CHECK(lg && max_diff(lg, ref_logits + 31 * VOCAB, VOCAB) <= 1e-4);
        CHECK_EQ_INT(wlm_context_n_past(ctx), 32);

        /* bad calls change nothing */
        int32_t bad_ids[3] = {5, 512, 6};
        CHECK_STATUS(wlm_eval(ctx, bad_ids, 3), WLM_ERR_INVALID_ARG);
        CHECK(wlm_context_errmsg(ctx)[0] != 0);
        bad_ids[1] = -1;
        CHECK_STATUS(wlm_eval(ctx, bad_ids, 3), WLM_ERR_INVALID_ARG);
        CHECK_STATUS(wlm_eval(ctx, ref_tokens, 0), WLM_ERR_INVALID_ARG);
        CHECK_STATUS(wlm_eval(ctx, ref_tokens, -3), WLM_ERR_INVALID_ARG);
        CHECK_STATUS(wlm_eval(ctx, NULL, 1), WLM_ERR_INVALID_ARG);
        CHECK_EQ_INT(wlm_context_n_past(ctx), 32);
        /* and the sequence goes on correctly after them: reset, then one token */
        wlm_context_reset(ctx);
        CHECK_STATUS(wlm_eval(ctx, ref_tokens, 1), WLM_OK);
        lg = wlm_logits(ctx);
        CHECK(lg && max_diff(lg, ref_logits, VOCAB) <= 1e-4);
        wlm_context_free(ctx);
    }
    ctx = new_context(m, 0, 1, 0);
    if (ctx) {
        eval_positions(ctx, kv_ref, "KV cache, scalar kernels");
        wlm_context_free(ctx);
    }
    ctx = new_context(m, 0, 0, 1);
    if (ctx) {
        eval_positions(ctx, nokv, "no KV cache (recompute), SIMD kernels");
        int bad = 0;
        for (int pos = 0; pos < REF_POS; pos++)
            bad += !(max_diff(nokv + pos * VOCAB, kv_simd + pos * VOCAB, VOCAB) <= 1e-5);
        CHECKF(bad == 0, "KV cache on vs off: %d positions differ by more than 1e-5", bad);
        wlm_context_free(ctx);
    }
    {
        int bad = 0;
        for (int pos = 0; pos < REF_POS; pos++)
            bad += !(max_diff(kv_ref + pos * VOCAB, kv_simd + pos * VOCAB, VOCAB) <= 1e-4);
        CHECKF(bad == 0, "SIMD vs scalar kernels: %d positions differ by more than 1e-4", bad);
    }
    /* context limits */
    ctx = new_context(m, 8, 1, 1);
    if (ctx) {
        CHECK_STATUS(wlm_eval(ctx, ref_tokens, 9), WLM_ERR_CONTEXT_FULL);
        CHECK(wlm_context_errmsg(ctx)[0] != 0);
        CHECK_EQ_INT(wlm_context_n_past(ctx), 0);
        CHECK_STATUS(wlm_eval(ctx, ref_tokens, 6), WLM_OK);
        CHECK_STATUS(wlm_eval(ctx, ref_tokens + 6, 3), WLM_ERR_CONTEXT_FULL);
        CHECK_EQ_INT(wlm_context_n_past(ctx), 6);
        CHECK_STATUS(wlm_eval(ctx, ref_tokens + 6, 2), WLM_OK);
        const float *lg = wlm_logits(ctx);
        CHECK(lg && max_diff(lg, ref_logits + 7 * VOCAB, VOCAB) <= 1e-4);
        CHECK_STATUS(wlm_eval(ctx, ref_tokens + 8, 1), WLM_ERR_CONTEXT_FULL);
        CHECK_EQ_INT(wlm_context_n_past(ctx), 8);
        wlm_context_free(ctx);
    }
    {
        wlm_context_params cp;
        wlm_context *c2 = NULL;
        wlm_context_params_default(&cp);
        CHECK(cp.n_ctx == 0 && cp.kv_cache == 1 && cp.use_simd == 1 && cp.kv_type == WLM_KV_F16 &&
              cp.dot_form == WLM_DOT_FUSED && cp.dot_form_batch == -1);
        cp.kv_type = 2; /* neither F16 nor F32 */
        CHECK_STATUS(wlm_context_new(m, &cp, &c2), WLM_ERR_INVALID_ARG);
        CHECK(c2 && strstr(wlm_context_errmsg(c2), "kv_type 2") != NULL);
        wlm_context_free(c2);
        c2 = NULL;
        cp.kv_type = WLM_KV_F16;
        cp.dot_form = 2; /* neither fused nor split */
        CHECK_STATUS(wlm_context_new(m, &cp, &c2), WLM_ERR_INVALID_ARG);
        CHECK(c2 && strstr(wlm_context_errmsg(c2), "dot_form 2") != NULL);
        wlm_context_free(c2);
        c2 = NULL;
        cp.dot_form = WLM_DOT_SPLIT; /* accepted in every build (only the relaxed one uses it) */
        CHECK_STATUS(wlm_context_new(m, &cp, &c2), WLM_OK);
        wlm_context_free(c2);
        c2 = NULL;
        cp.dot_form = WLM_DOT_FUSED;
        cp.dot_form_batch = -2; /* neither -1, fused nor split */
        CHECK_STATUS(wlm_context_new(m, &cp, &c2), WLM_ERR_INVALID_ARG);
        CHECK(c2 && strstr(wlm_context_errmsg(c2), "dot_form_batch -2") != NULL);
        wlm_context_free(c2);
        c2 = NULL;
        cp.dot_form_batch = WLM_DOT_SPLIT;
        CHECK_STATUS(wlm_context_new(m, &cp, &c2), WLM_OK);
        wlm_context_free(c2);
        c2 = NULL;
        cp.dot_form_batch = -1;
        cp.n_ctx = 513;
        CHECK_STATUS(wlm_context_new(m, &cp, &c2), WLM_ERR_INVALID_ARG);
        wlm_context_free(c2);
        c2 = NULL;
        cp.n_ctx = -1;
        CHECK_STATUS(wlm_context_new(m, &cp, &c2), WLM_ERR_INVALID_ARG);
        wlm_context_free(c2);
        c2 = NULL;
        cp.n_ctx = 1;
        CHECK_STATUS(wlm_context_new(m, &cp, &c2), WLM_OK);
        wlm_context_free(c2);
        c2 = NULL;
        cp.n_ctx = 0;
        CHECK_STATUS(wlm_context_new(NULL, &cp, &c2), WLM_ERR_INVALID_ARG);
        wlm_context_free(c2);
    }
    free(kv_simd);
    free(kv_ref);
    free(nokv);
}

/* A separate classifier (negative vocab_size in the header, wcls after the RoPE tables): the
 * same weights with wcls = a copy of the embedding must give run.c's logits. And a buffer that
 * is not 4-byte aligned: refused with a message, or read correctly; never undefined behaviour. */
static void test_layouts(void) {
    tu_section("separate classifier, unaligned buffer");
    size_t emb = 4u * 512 * 64, size = model_size + emb;
    unsigned char *sep = (unsigned char *)malloc(size);
    memcpy(sep, model_bytes, model_size);
    memcpy(sep + model_size, model_bytes + 28, emb);
    tu_put_i32(sep + 20, -512);
    wlm_model *m = NULL;
    int rc = wlm_model_load(sep, size, WLM_LOAD_OWN_BUFFER, &m);
    CHECKF(rc == WLM_OK, "separate classifier: %s %s", wlm_status_name(rc), wlm_model_errmsg(m));
    if (rc == WLM_OK) {
        wlm_model_info info;
        CHECK_STATUS(wlm_model_get_info(m, &info), WLM_OK);
        CHECK_EQ_INT(info.vocab_size, 512);
        CHECK_EQ_INT(info.shared_classifier, 0);
        CHECK_STATUS(wlm_model_load_tokenizer(m, tok_bytes, tok_size), WLM_OK);
        wlm_context *ctx = new_context(m, 64, 1, 1);
        if (ctx) {
            float *out = (float *)malloc(sizeof(float) * REF_POS * VOCAB);
            eval_positions(ctx, out, "separate classifier");
            free(out);
            wlm_context_free(ctx);
        }
    }
    wlm_model_free(m); /* frees sep */

    unsigned char *raw = (unsigned char *)malloc(model_size + 4);
    for (int off = 1; off < 4; off++) {
        memcpy(raw + off, model_bytes, model_size);
        m = NULL;
        rc = wlm_model_load(raw + off, model_size, 0, &m);
        printf("   buffer at an offset of %d bytes: %s\n", off, wlm_status_name(rc));
        CHECKF(rc == WLM_OK || rc == WLM_ERR_INVALID_ARG || rc == WLM_ERR_UNSUPPORTED,
               "unaligned by %d: %s", off, wlm_status_name(rc));
        if (rc != WLM_OK) {
            CHECK(wlm_model_errmsg(m)[0] != 0);
        } else if (wlm_model_load_tokenizer(m, tok_bytes, tok_size) == WLM_OK) {
            wlm_context *ctx = new_context(m, 64, 1, 1);
            if (ctx) {
                float *out = (float *)malloc(sizeof(float) * REF_POS * VOCAB);
                eval_positions(ctx, out, "unaligned buffer");
                free(out);
                wlm_context_free(ctx);
            }
        }
        wlm_model_free(m);
    }
    free(raw);
}

/* A tiny model (dim 2, 1024 layers, vocab 1) with seq_len 2^20: its KV cache at full length is
 * 2 × 1024 × 2^20 × 2 floats = 16 GiB, a size that wraps to 0 in a 32-bit size_t. A short
 * context works; the full one must fail cleanly where it cannot be addressed (wasm32). */
static void test_huge_context(void) {
    tu_section("a context larger than the address space");
    const uint64_t D = 2, H = 1, L = 1024, V = 1, S = 1u << 20, hs = 2, kv = 2;
    const uint64_t floats = V * D + L * D + L * D * D + 2 * L * kv * D + L * D * D + L * D +
                            3 * L * H * D + D + 2 * S * hs / 2;
    size_t size = (size_t)(28 + 4 * floats);
    unsigned char *buf = (unsigned char *)malloc(size);
    header(buf, (int32_t)D, (int32_t)H, (int32_t)L, 1, 1, (int32_t)V, (int32_t)S);
    for (uint64_t i = 0; i < floats; i++) tu_put_f32(buf + 28 + 4 * i, i % 7 == 0 ? 1.0f : 0.01f);
    wlm_model *m = NULL;
    int rc = wlm_model_load(buf, size, WLM_LOAD_OWN_BUFFER, &m);
    CHECKF(rc == WLM_OK, "tiny model: %s %s", wlm_status_name(rc), wlm_model_errmsg(m));
    if (rc == WLM_OK) {
        wlm_context *ctx = new_context(m, 16, 1, 1);
        if (ctx) {
            int32_t zero[4] = {0, 0, 0, 0};
            CHECK_STATUS(wlm_eval(ctx, zero, 4), WLM_OK);
            const float *lg = wlm_logits(ctx);
            CHECK(lg && isfinite(lg[0]));
            wlm_context_free(ctx);
        }
        if (sizeof(size_t) < 8) {
            wlm_context_params cp;
            wlm_context_params_default(&cp);
            ctx = NULL;
            rc = wlm_context_new(m, &cp, &ctx);
            CHECKF(rc == WLM_ERR_NOMEM || rc == WLM_ERR_INVALID_ARG,
                   "an 8 GiB (F16) KV cache in a 32-bit address space: %s", wlm_status_name(rc));
            CHECK(ctx == NULL || wlm_context_errmsg(ctx)[0] != 0);
            wlm_context_free(ctx);
        }
    }
    wlm_model_free(m);
}

/* ------------------------------------------------------------------------------------------ */
/* Generation                                                                                  */

typedef struct gen_result {
    int rc;              /* the status that ended the loop */
    int stop_reason;
    int n;               /* tokens emitted (WLM_OK steps) */
    int32_t ids[600];
    char text[4096];     /* concatenated pieces, including the piece given with WLM_DONE */
    size_t len;
    int bad_steps;       /* steps with an inconsistent wlm_token */
} gen_result;

static void append(gen_result *r, const char *p, size_t len) {
    if (!p || !len) return;
    if (r->len + len >= sizeof r->text) len = sizeof r->text - 1 - r->len;
    memcpy(r->text + r->len, p, len);
    r->len += len;
    r->text[r->len] = 0;
}

/* Runs wlm_generate_next until it stops (or `abort_after` steps, then aborts). */
static void run_generation(wlm_context *ctx, gen_result *r, int abort_after) {
    wlm_token tok;
    int32_t last_past = -1;
    memset(r, 0, sizeof *r);
    for (int step = 0; step < 2000; step++) {
        if (step == abort_after) wlm_generate_abort(ctx);
        memset(&tok, 0x5a, sizeof tok);
        int rc = wlm_generate_next(ctx, &tok);
        if (rc == WLM_OK) {
            if (r->n < 600) r->ids[r->n] = tok.id;
            r->n++;
            append(r, tok.piece, tok.piece_len);
            if (!(tok.id >= 0 && tok.id < VOCAB) || !(tok.prob > 0 && tok.prob <= 1) ||
                !(tok.prob_sampled > 0 && tok.prob_sampled <= 1.0001f) ||
                (tok.piece == NULL && tok.piece_len != 0) || tok.stop_reason != WLM_STOP_NONE ||
                (last_past >= 0 && tok.n_past != last_past + 1))
                r->bad_steps++;
            last_past = tok.n_past;
            continue;
        }
        r->rc = rc;
        if (rc == WLM_DONE) {
            r->stop_reason = tok.stop_reason;
            if (tok.piece) append(r, tok.piece, tok.piece_len);
            if (tok.id != -1) r->bad_steps++;
        }
        break;
    }
}

static gen_result gr; /* large: static */

static void gen_params(wlm_gen_params *gp, float temperature, int max_tokens) {
    wlm_gen_params_default(gp);
    gp->temperature = temperature;
    gp->max_tokens = max_tokens;
    gp->seed = 42;
}

static void test_greedy(const wlm_model *m) {
    tu_section("greedy generation against run.c");
    wlm_context *ctx = new_context(m, 0, 1, 1);
    if (!ctx) return;
    wlm_gen_params gp;
    wlm_token tok;

    CHECK_STATUS(wlm_generate_next(ctx, &tok), WLM_ERR_STATE); /* nothing begun */

    gen_params(&gp, 0.0f, 404 - 5); /* run.c's -n 404 counts the 5 prompt positions */
    CHECK_STATUS(wlm_generate_begin_text(ctx, PROMPT, &gp), WLM_OK);
    CHECK_EQ_INT(wlm_context_n_past(ctx), 5);
    run_generation(ctx, &gr, -1);
    CHECK_STATUS(gr.rc, WLM_DONE);
    CHECKF(gr.stop_reason == WLM_STOP_EOS, "stop reason %s", wlm_stop_reason_name(gr.stop_reason));
    CHECK_EQ_INT(gr.bad_steps, 0);
    CHECKF(PROMPT_LEN + gr.len == ref_text_len && memcmp(gr.text, ref_text + PROMPT_LEN, gr.len) == 0,
           "greedy text differs from run.c's: %zu vs %zu bytes; got \"%.60s...\"",
           PROMPT_LEN + gr.len, ref_text_len, gr.text);
    int same = 1;
    for (int i = 0; i < REF_POS - 5 && i < gr.n; i++) same &= gr.ids[i] == ref_tokens[5 + i];
    CHECKF(same && gr.n >= REF_POS - 5, "the first greedy ids differ from the reference's input_tokens");
    printf("   %d tokens, stop %s\n", gr.n, wlm_stop_reason_name(gr.stop_reason));
    /* after WLM_DONE: WLM_DONE again */
    CHECK_STATUS(wlm_generate_next(ctx, &tok), WLM_DONE);
    CHECK_STATUS(wlm_generate_next(ctx, &tok), WLM_DONE);

    /* the same with the scalar kernels, and without the KV cache (O(n^2): 80 tokens only) */
    for (int variant = 0; variant < 2; variant++) {
        wlm_context *c2 = new_context(m, 0, variant ? 0 : 1, variant ? 1 : 0);
        if (!c2) continue;
        gen_params(&gp, 0.0f, variant ? 80 : 404 - 5);
        CHECK_STATUS(wlm_generate_begin_text(c2, PROMPT, &gp), WLM_OK);
        run_generation(c2, &gr, -1);
        CHECKF((variant ? gr.n == 80 : PROMPT_LEN + gr.len == ref_text_len) &&
               memcmp(gr.text, ref_text + PROMPT_LEN, gr.len) == 0,
               "greedy text with %s differs from run.c's", variant ? "no KV cache" : "scalar kernels");
        wlm_context_free(c2);
    }

    /* two contexts on one model, stepped alternately: each gives run.c's text (nothing shared) */
    {
        wlm_context *a = new_context(m, 0, 1, 1), *b = new_context(m, 128, 1, 0);
        static char ta[2048], tb[2048];
        size_t la = 0, lb = 0;
        int done_a = 0, done_b = 0;
        gen_params(&gp, 0.0f, 80);
        if (a && b) {
            CHECK_STATUS(wlm_generate_begin_text(a, PROMPT, &gp), WLM_OK);
            CHECK_STATUS(wlm_generate_begin_text(b, PROMPT, &gp), WLM_OK);
            while (!done_a || !done_b) {
                wlm_token t;
                if (!done_a) {
                    if (wlm_generate_next(a, &t) == WLM_OK && la + t.piece_len < sizeof ta)
                        memcpy(ta + la, t.piece, t.piece_len), la += t.piece_len;
                    else
                        done_a = 1;
                }
                if (!done_b) {
                    if (wlm_generate_next(b, &t) == WLM_OK && lb + t.piece_len < sizeof tb)
                        memcpy(tb + lb, t.piece, t.piece_len), lb += t.piece_len;
                    else
                        done_b = 1;
                }
            }
            CHECKF(la > 100 && la == lb && memcmp(ta, tb, la) == 0 &&
                   memcmp(ta, ref_text + PROMPT_LEN, la) == 0,
                   "interleaved contexts: %zu and %zu bytes, not run.c's text", la, lb);
        }
        wlm_context_free(a);
        wlm_context_free(b);
    }

    /* no prompt: BOS alone, 256 tokens, as run.c -n 256 */
    {
        size_t n = 0;
        unsigned char *np = tu_read_shared("reference/stories260K_run.c_greedy_noprompt_256.txt", &n);
        if (np) {
            gen_params(&gp, 0.0f, 256);
            CHECK_STATUS(wlm_generate_begin_text(ctx, "", &gp), WLM_OK);
            CHECK_EQ_INT(wlm_context_n_past(ctx), 1);
            run_generation(ctx, &gr, -1);
            CHECK_STATUS(gr.rc, WLM_DONE);
            CHECKF(gr.len + 1 == n && memcmp(gr.text, np, gr.len) == 0 && np[n - 1] == '\n',
                   "no-prompt greedy text differs from run.c's: %zu vs %zu bytes", gr.len + 1, n);
            CHECKF(gr.stop_reason == WLM_STOP_MAX_TOKENS || gr.stop_reason == WLM_STOP_EOS,
                   "stop reason %s", wlm_stop_reason_name(gr.stop_reason));
            printf("   no prompt: %d tokens, stop %s\n", gr.n, wlm_stop_reason_name(gr.stop_reason));
            free(np);
        }
    }

    /* token-level begin with the reference prompt ids gives the same first tokens */
    gen_params(&gp, 0.0f, 10);
    CHECK_STATUS(wlm_generate_begin(ctx, ref_tokens, 5, &gp), WLM_OK);
    run_generation(ctx, &gr, -1);
    CHECK_EQ_INT(gr.n, 10);
    CHECKF(gr.stop_reason == WLM_STOP_MAX_TOKENS, "stop reason %s", wlm_stop_reason_name(gr.stop_reason));
    same = 1;
    for (int i = 0; i < 10 && i < gr.n; i++) same &= gr.ids[i] == ref_tokens[5 + i];
    CHECK(same);
    /* add_bos 0: the prompt without BOS is a different sequence, but it runs */
    gp.add_bos = 0;
    CHECK_STATUS(wlm_generate_begin_text(ctx, PROMPT, &gp), WLM_OK);
    CHECK_EQ_INT(wlm_context_n_past(ctx), 4);
    run_generation(ctx, &gr, -1);
    CHECK_EQ_INT(gr.n, 10);
    wlm_context_free(ctx);
}

/* The default F16 KV cache: logits within a measured bound of run.c's (float32) and of the F32
 * cache's, really different from the latter (the cache is binary16), half the cache memory,
 * and the same greedy 404-token story as run.c. */
static void test_f16_cache(const wlm_model *m) {
    tu_section("F16 KV cache");
    double worst_ref = 0.0, worst_f32 = 0.0;
    for (int simd = 1; simd >= 0; simd--) {
        kv_type = WLM_KV_F32;
        wlm_context *a = new_context(m, 0, 1, simd);
        kv_type = WLM_KV_F16;
        wlm_context *b = new_context(m, 0, 1, simd);
        if (!a || !b) {
            wlm_context_free(a), wlm_context_free(b);
            continue;
        }
        /* the KV cache is 2 × 5 layers × 512 positions × kv_dim 32 elements: 4 or 2 bytes */
        CHECKF(wlm_context_memory(a) - wlm_context_memory(b) == 5u * 2 * 512 * 32 * 2,
               "memory F32 %zu, F16 %zu", wlm_context_memory(a), wlm_context_memory(b));
        double d_ref = 0.0, d_f32 = 0.0;
        for (int pos = 0; pos < REF_POS; pos++) {
            CHECK_STATUS(wlm_eval(a, &ref_tokens[pos], 1), WLM_OK);
            CHECK_STATUS(wlm_eval(b, &ref_tokens[pos], 1), WLM_OK);
            const float *la = wlm_logits(a), *lb = wlm_logits(b);
            if (!la || !lb) break;
            d_ref = fmax(d_ref, max_diff(lb, ref_logits + (size_t)pos * VOCAB, VOCAB));
            d_f32 = fmax(d_f32, max_diff(lb, la, VOCAB));
        }
        /* measured 0.0128 on both kernel sets; logits here span about -15..15 */
        CHECKF(d_ref < 0.05 && d_f32 < 0.05 && d_f32 > 0.0,
               "%s kernels: F16 cache logits differ from run.c's by %.3g, from the F32 cache's "
               "by %.3g", simd ? "SIMD" : "scalar", d_ref, d_f32);
        worst_ref = fmax(worst_ref, d_ref), worst_f32 = fmax(worst_f32, d_f32);
        wlm_context_free(a), wlm_context_free(b);
    }
    printf("   max |logit difference| over %d positions: vs run.c %.3g, vs the F32 cache %.3g\n",
           REF_POS, worst_ref, worst_f32);
    /* greedy: the same 404-token story as run.c, with the SIMD and the scalar kernels */
    for (int simd = 1; simd >= 0; simd--) {
        wlm_context *c = new_context(m, 0, 1, simd);
        if (!c) continue;
        wlm_gen_params gp;
        gen_params(&gp, 0.0f, 404 - 5);
        CHECK_STATUS(wlm_generate_begin_text(c, PROMPT, &gp), WLM_OK);
        run_generation(c, &gr, -1);
        CHECKF(PROMPT_LEN + gr.len == ref_text_len &&
                   memcmp(gr.text, ref_text + PROMPT_LEN, gr.len) == 0,
               "F16 cache, %s kernels: greedy text differs from run.c's (%zu vs %zu bytes)",
               simd ? "SIMD" : "scalar", PROMPT_LEN + gr.len, ref_text_len);
        wlm_context_free(c);
    }
    kv_type = WLM_KV_F32;
}

static void test_stops(const wlm_model *m) {
    tu_section("stop conditions");
    wlm_context *ctx = new_context(m, 0, 1, 1);
    if (!ctx) return;
    wlm_gen_params gp;
    const char *gen_ref = ref_text + PROMPT_LEN; /* what run.c generated after the prompt */
    size_t gen_ref_len = ref_text_len - PROMPT_LEN;

    /* max_tokens */
    gen_params(&gp, 0.0f, 3);
    CHECK_STATUS(wlm_generate_begin_text(ctx, PROMPT, &gp), WLM_OK);
    run_generation(ctx, &gr, -1);
    CHECK_EQ_INT(gr.n, 3);
    CHECKF(gr.stop_reason == WLM_STOP_MAX_TOKENS, "%s", wlm_stop_reason_name(gr.stop_reason));
    CHECK(gr.len <= gen_ref_len && memcmp(gr.text, gen_ref, gr.len) == 0);

    /* stop strings at token boundaries: the text before the stop string, nothing of it */
    static const struct {
        const char *stop, *want;
    } STOPS[] = {
        {" named Lily", ", there was a little girl"},       /* spans two tokens */
        {" named", ", there was a little girl"},            /* one token */
        {",", ""},                                          /* the very first token */
    };
    for (unsigned i = 0; i < sizeof STOPS / sizeof STOPS[0]; i++) {
        gen_params(&gp, 0.0f, 0);
        gp.n_stop = 2;
        strcpy(gp.stop[0], "no such text");
        strcpy(gp.stop[1], STOPS[i].stop);
        CHECK_STATUS(wlm_generate_begin_text(ctx, PROMPT, &gp), WLM_OK);
        run_generation(ctx, &gr, -1);
        CHECK_STATUS(gr.rc, WLM_DONE);
        CHECKF(gr.stop_reason == WLM_STOP_STRING, "stop \"%s\": %s", STOPS[i].stop,
               wlm_stop_reason_name(gr.stop_reason));
        CHECKF(strcmp(gr.text, STOPS[i].want) == 0, "stop \"%s\": text \"%s\", want \"%s\"",
               STOPS[i].stop, gr.text, STOPS[i].want);
        CHECK_EQ_INT(gr.bad_steps, 0);
    }
    /* a stop string that begins inside a token: what comes out is a prefix of run.c's text
     * without the stop string, cut at most one token before it */
    {
        static const char *MID[] = {"amed", "ly. She", "\n"};
        for (unsigned i = 0; i < 3; i++) {
            const char *at = strstr(gen_ref, MID[i]);
            size_t idx = at ? (size_t)(at - gen_ref) : 0;
            gen_params(&gp, 0.0f, 0);
            gp.n_stop = 1;
            strcpy(gp.stop[0], MID[i]);
            CHECK_STATUS(wlm_generate_begin_text(ctx, PROMPT, &gp), WLM_OK);
            run_generation(ctx, &gr, -1);
            CHECKF(gr.stop_reason == WLM_STOP_STRING && gr.len <= idx && idx - gr.len <= 8 &&
                   memcmp(gr.text, gen_ref, gr.len) == 0,
                   "stop \"%s\" (at byte %zu): %s, %zu bytes \"%s\"", MID[i], idx,
                   wlm_stop_reason_name(gr.stop_reason), gr.len, gr.text);
        }
    }
    /* a stop string whose beginning appears but which never completes: the held-back text is
     * released, and the whole run.c text comes out */
    gen_params(&gp, 0.0f, 0);
    gp.n_stop = 3;
    strcpy(gp.stop[0], " named Bob");
    strcpy(gp.stop[1], "Lily!!");
    strcpy(gp.stop[2], "friend.\"\nThe end");
    CHECK_STATUS(wlm_generate_begin_text(ctx, PROMPT, &gp), WLM_OK);
    run_generation(ctx, &gr, -1);
    CHECKF(gr.stop_reason == WLM_STOP_EOS, "%s", wlm_stop_reason_name(gr.stop_reason));
    CHECKF(gr.len == gen_ref_len && memcmp(gr.text, gen_ref, gr.len) == 0,
           "with unmatched stop strings the text differs: %zu vs %zu bytes", gr.len, gen_ref_len);

    /* text held back for a stop string is released when the generation ends for another
     * reason: " named" (the 9th token) could begin " named Bob" when max_tokens stops at 9 */
    gen_params(&gp, 0.0f, 9);
    gp.n_stop = 1;
    strcpy(gp.stop[0], " named Bob");
    CHECK_STATUS(wlm_generate_begin_text(ctx, PROMPT, &gp), WLM_OK);
    run_generation(ctx, &gr, -1);
    CHECKF(gr.stop_reason == WLM_STOP_MAX_TOKENS, "%s", wlm_stop_reason_name(gr.stop_reason));
    CHECKF(strcmp(gr.text, ", there was a little girl named") == 0,
           "held-back text not released at max_tokens: \"%s\"", gr.text);
    /* the same at context full */
    {
        wlm_context *small = new_context(m, 10, 1, 1);
        if (small) {
            static char plain[sizeof gr.text];
            gen_params(&gp, 0.0f, 0);
            CHECK_STATUS(wlm_generate_begin_text(small, PROMPT, &gp), WLM_OK);
            run_generation(small, &gr, -1);
            snprintf(plain, sizeof plain, "%s", gr.text);
            /* the last token's text, " g" or " little", begins a stop string that never comes */
            gp.n_stop = 2;
            strcpy(gp.stop[0], " girl!");
            strcpy(gp.stop[1], " little boy");
            CHECK_STATUS(wlm_generate_begin_text(small, PROMPT, &gp), WLM_OK);
            run_generation(small, &gr, -1);
            CHECKF(gr.stop_reason == WLM_STOP_CONTEXT_FULL, "%s", wlm_stop_reason_name(gr.stop_reason));
            CHECKF(strcmp(gr.text, plain) == 0, "held-back text not released at context full: "
                   "\"%s\" vs \"%s\"", gr.text, plain);
            wlm_context_free(small);
        }
    }

    /* abort */
    gen_params(&gp, 0.0f, 0);
    CHECK_STATUS(wlm_generate_begin_text(ctx, PROMPT, &gp), WLM_OK);
    run_generation(ctx, &gr, 4);
    CHECK_STATUS(gr.rc, WLM_DONE);
    CHECK_EQ_INT(gr.n, 4);
    CHECKF(gr.stop_reason == WLM_STOP_ABORTED, "%s", wlm_stop_reason_name(gr.stop_reason));
    wlm_token tok;
    CHECK_STATUS(wlm_generate_next(ctx, &tok), WLM_DONE);
    CHECK_STATUS(wlm_generate_begin_text(ctx, PROMPT, &gp), WLM_OK);
    wlm_generate_abort(ctx); /* before the first token */
    memset(&tok, 0, sizeof tok);
    CHECK_STATUS(wlm_generate_next(ctx, &tok), WLM_DONE);
    CHECK_EQ_INT(tok.stop_reason, WLM_STOP_ABORTED);
    wlm_context_reset(ctx);
    wlm_generate_abort(ctx); /* nothing running: harmless */
    int rc_after = wlm_generate_next(ctx, &tok); /* the reset ended the generation */
    CHECKF(rc_after == WLM_ERR_STATE || rc_after == WLM_DONE, "next after reset: %s",
           wlm_status_name(rc_after));
    CHECK_STATUS(wlm_generate_begin_text(ctx, PROMPT, &gp), WLM_OK); /* and it begins again */

    /* context full: n_ctx 10, a 5-token prompt, no max_tokens */
    wlm_context *small = new_context(m, 10, 1, 1);
    if (small) {
        gen_params(&gp, 0.0f, 0);
        CHECK_STATUS(wlm_generate_begin_text(small, PROMPT, &gp), WLM_OK);
        run_generation(small, &gr, -1);
        CHECK_STATUS(gr.rc, WLM_DONE);
        CHECKF(gr.stop_reason == WLM_STOP_CONTEXT_FULL, "%s", wlm_stop_reason_name(gr.stop_reason));
        CHECKF(gr.n == 5 || gr.n == 6, "%d tokens from a 5-token prompt in a 10-token context", gr.n);
        int same = 1;
        for (int i = 0; i < gr.n && i < 6; i++) same &= gr.ids[i] == ref_tokens[5 + i];
        CHECK(same);
        CHECK(wlm_context_n_past(small) <= 10);
        printf("   n_ctx 10, 5-token prompt: %d tokens, then %s\n", gr.n,
               wlm_stop_reason_name(gr.stop_reason));

        /* a prompt longer than n_ctx */
        static const char *LONG = "Once upon a time, there was a little girl named Lily.";
        int rc = wlm_generate_begin_text(small, LONG, &gp);
        CHECK_STATUS(rc, WLM_ERR_CONTEXT_FULL);
        CHECK(wlm_context_errmsg(small)[0] != 0);
        CHECK_STATUS(wlm_generate_next(small, &tok), WLM_ERR_STATE);
        CHECK_STATUS(wlm_generate_begin(small, ref_tokens, 11, &gp), WLM_ERR_CONTEXT_FULL);
        /* exactly n_ctx prompt tokens: accepted, then the context is full at once */
        rc = wlm_generate_begin(small, ref_tokens, 10, &gp);
        if (rc == WLM_OK) {
            run_generation(small, &gr, -1);
            CHECKF(gr.n <= 1 && gr.stop_reason == WLM_STOP_CONTEXT_FULL, "%d tokens, %s", gr.n,
                   wlm_stop_reason_name(gr.stop_reason));
        } else {
            CHECK_STATUS(rc, WLM_ERR_CONTEXT_FULL);
        }
        /* still usable */
        gen_params(&gp, 0.0f, 2);
        CHECK_STATUS(wlm_generate_begin_text(small, "Once", &gp), WLM_OK);
        run_generation(small, &gr, -1);
        CHECK_EQ_INT(gr.n, 2);
        wlm_context_free(small);
    }
    wlm_context_free(ctx);
}

static void expect_bad_params(wlm_context *ctx, const wlm_gen_params *gp, const char *what) {
    int rc = wlm_generate_begin_text(ctx, PROMPT, gp);
    CHECKF(rc == WLM_ERR_INVALID_ARG, "%s: %s", what, wlm_status_name(rc));
    CHECKF(wlm_context_errmsg(ctx)[0] != 0, "%s: no message", what);
    rc = wlm_generate_begin(ctx, ref_tokens, 5, gp);
    CHECKF(rc == WLM_ERR_INVALID_ARG, "%s (token begin): %s", what, wlm_status_name(rc));
    wlm_token tok;
    CHECKF(wlm_generate_next(ctx, &tok) == WLM_ERR_STATE, "%s: a generation runs after it", what);
}

static void test_params(const wlm_model *m) {
    tu_section("parameter checks");
    wlm_context *ctx = new_context(m, 0, 1, 1);
    if (!ctx) return;
    wlm_gen_params gp, d;
    gen_params(&d, 0.8f, 5);

    gp = d, gp.temperature = -1.0f;
    expect_bad_params(ctx, &gp, "temperature -1");
    gp = d, gp.temperature = NAN;
    expect_bad_params(ctx, &gp, "temperature NaN");
    gp = d, gp.top_p = 0.0f;
    expect_bad_params(ctx, &gp, "top_p 0");
    gp = d, gp.top_p = 1.5f;
    expect_bad_params(ctx, &gp, "top_p 1.5");
    gp = d, gp.top_k = -1;
    expect_bad_params(ctx, &gp, "top_k -1");
    gp = d, gp.repeat_penalty = 0.0f;
    expect_bad_params(ctx, &gp, "repeat_penalty 0");
    gp = d, gp.repeat_last_n = -1;
    expect_bad_params(ctx, &gp, "repeat_last_n -1");
    gp = d, gp.max_tokens = -1;
    expect_bad_params(ctx, &gp, "max_tokens -1");
    gp = d, gp.n_stop = 9;
    expect_bad_params(ctx, &gp, "n_stop 9");
    gp = d, gp.n_stop = -1;
    expect_bad_params(ctx, &gp, "n_stop -1");
    gp = d, gp.n_stop = 1;
    memset(gp.stop[0], 'a', WLM_MAX_STOP_LEN);
    expect_bad_params(ctx, &gp, "an unterminated stop string");

    /* an empty stop string would match everywhere: refused, or ignored */
    gp = d, gp.n_stop = 1, gp.stop[0][0] = 0;
    {
        int rc = wlm_generate_begin_text(ctx, PROMPT, &gp);
        if (rc == WLM_OK) {
            run_generation(ctx, &gr, -1);
            CHECKF(gr.n == 5, "an empty stop string: %d tokens, %s", gr.n,
                   wlm_stop_reason_name(gr.stop_reason));
        } else {
            CHECK_STATUS(rc, WLM_ERR_INVALID_ARG);
        }
    }

    /* bad prompts */
    gp = d, gp.add_bos = 0;
    CHECK_STATUS(wlm_generate_begin_text(ctx, "", &gp), WLM_ERR_INVALID_ARG);
    CHECK_STATUS(wlm_generate_begin_text(ctx, NULL, &d), WLM_ERR_INVALID_ARG);
    CHECK_STATUS(wlm_generate_begin(ctx, ref_tokens, 0, &d), WLM_ERR_INVALID_ARG);
    int32_t bad[2] = {1, 512};
    CHECK_STATUS(wlm_generate_begin(ctx, bad, 2, &d), WLM_ERR_INVALID_ARG);
    CHECK_STATUS(wlm_generate_begin(ctx, ref_tokens, 5, NULL), WLM_ERR_INVALID_ARG);

    /* the context recovers: a valid generation after all of that */
    CHECK_STATUS(wlm_generate_begin_text(ctx, PROMPT, &d), WLM_OK);
    run_generation(ctx, &gr, -1);
    CHECK_EQ_INT(gr.n, 5);
    CHECK_EQ_INT(gr.bad_steps, 0);
    wlm_context_free(ctx);
}

/* The repetition penalty inside generation: each greedy token is the argmax of the logits an
 * independent context computes, penalised here over the last repeat_last_n tokens of the whole
 * sequence (prompt included). */
static void test_penalty_generation(const wlm_model *m) {
    tu_section("repetition penalty in generation");
    wlm_context *ctx = new_context(m, 0, 1, 1), *check = new_context(m, 0, 1, 0);
    if (!ctx || !check) {
        wlm_context_free(ctx);
        wlm_context_free(check);
        return;
    }
    wlm_gen_params gp;
    gen_params(&gp, 0.0f, 60);
    gp.repeat_penalty = 1.5f;
    gp.repeat_last_n = 8;
    int32_t hist[128];
    int nh = 5, n = 0, bad_id = 0, bad_prob = 0, skipped = 0;
    memcpy(hist, ref_tokens, sizeof(int32_t) * 5);
    CHECK_STATUS(wlm_generate_begin_text(ctx, PROMPT, &gp), WLM_OK);
    CHECK_STATUS(wlm_eval(check, hist, 5), WLM_OK);
    wlm_token tok;
    size_t text_len = 0;
    int differs_from_plain = 0;
    while (wlm_generate_next(ctx, &tok) == WLM_OK && nh < 128) {
        float lg[VOCAB];
        int seen[VOCAB] = {0};
        memcpy(lg, wlm_logits(check), sizeof lg);
        for (int i = nh - 8 < 0 ? 0 : nh - 8; i < nh; i++) {
            int t = hist[i];
            if (seen[t]++) continue;
            lg[t] = lg[t] > 0 ? lg[t] / 1.5f : lg[t] * 1.5f;
        }
        int best = 0, second = -1;
        for (int i = 1; i < VOCAB; i++)
            if (lg[i] > lg[best]) best = i;
        for (int i = 0; i < VOCAB; i++)
            if (i != best && (second < 0 || lg[i] > lg[second])) second = i;
        if (lg[best] - lg[second] < 1e-4f) skipped++; /* a near tie: either answer is right */
        else if (tok.id != best) bad_id++;
        /* prob is the model's: the softmax of the raw logits, before the penalty */
        const float *raw = wlm_logits(check);
        double mx = raw[0], sum = 0;
        for (int i = 1; i < VOCAB; i++) mx = raw[i] > mx ? raw[i] : mx;
        for (int i = 0; i < VOCAB; i++) sum += exp(raw[i] - mx);
        double p = exp(raw[tok.id] - mx) / sum;
        if (fabs(p - tok.prob) > 1e-4 * p + 1e-7) bad_prob++;
        if (text_len + tok.piece_len <= ref_text_len - PROMPT_LEN &&
            memcmp(ref_text + PROMPT_LEN + text_len, tok.piece, tok.piece_len) != 0)
            differs_from_plain = 1;
        text_len += tok.piece_len;
        hist[nh++] = tok.id;
        n++;
        if (wlm_eval(check, &tok.id, 1) != WLM_OK) break;
    }
    CHECKF(n > 10, "%d tokens", n);
    CHECKF(bad_id == 0, "%d of %d tokens are not the argmax of the penalised logits", bad_id, n);
    CHECKF(bad_prob == 0, "%d of %d tokens report a prob unlike the raw softmax", bad_prob, n);
    CHECKF(differs_from_plain, "a penalty of 1.5 left the greedy text unchanged");
    if (skipped) printf("   %d near ties skipped\n", skipped);
    wlm_context_free(ctx);
    wlm_context_free(check);
}

/* Sampled generation: a seed reproduces its tokens, and each token's reported probability is
 * the softmax of the logits an independent context computes for the same sequence. */
static void test_sampled(const wlm_model *m) {
    tu_section("sampled generation");
    wlm_context *ctx = new_context(m, 0, 1, 1), *check = new_context(m, 0, 1, 0);
    if (!ctx || !check) {
        wlm_context_free(ctx);
        wlm_context_free(check);
        return;
    }
    wlm_gen_params gp;
    int32_t first[64];
    int n_first = 0, n_rep[2] = {0, 0};
    for (int rep = 0; rep < 2; rep++) {
        gen_params(&gp, 1.0f, 60);
        gp.top_p = 0.9f;
        gp.seed = 1234;
        CHECK_STATUS(wlm_generate_begin_text(ctx, PROMPT, &gp), WLM_OK);
        CHECK_STATUS(wlm_eval(check, ref_tokens, 5), WLM_OK);
        wlm_token tok;
        int n = 0, bad_prob = 0, bad_nucleus = 0, differs = 0;
        while (wlm_generate_next(ctx, &tok) == WLM_OK && n < 64) {
            const float *lg = wlm_logits(check);
            double mx = -INFINITY, sum = 0;
            for (int i = 0; i < VOCAB; i++) mx = fmax(mx, lg[i]);
            for (int i = 0; i < VOCAB; i++) sum += exp(lg[i] - mx);
            double p = exp(lg[tok.id] - mx) / sum;
            if (fabs(p - tok.prob) > 1e-4 * p + 1e-7) bad_prob++;
            /* in the 0.9 nucleus: the mass strictly above p is below 0.9 */
            double above = 0;
            for (int i = 0; i < VOCAB; i++) {
                double q = exp(lg[i] - mx) / sum;
                if (q > p) above += q;
            }
            if (above >= 0.9 + 1e-4) bad_nucleus++;
            if (rep == 0 && n < 64) first[n_first++] = tok.id;
            if (rep == 1 && (n >= n_first || first[n] != tok.id)) differs++;
            n++;
            if (wlm_eval(check, &tok.id, 1) != WLM_OK) break;
        }
        n_rep[rep] = n;
        CHECKF(n > 0 && n <= 60, "rep %d: %d tokens", rep, n);
        CHECKF(bad_prob == 0, "rep %d: %d tokens report a prob unlike the softmax", rep, bad_prob);
        CHECKF(bad_nucleus == 0, "rep %d: %d tokens outside the top-p 0.9 nucleus", rep, bad_nucleus);
        if (rep == 1)
            CHECKF(differs == 0 && n_rep[1] == n_rep[0], "the same seed gave %d different tokens "
                   "(%d vs %d tokens)", differs, n_rep[0], n_rep[1]);
        wlm_context_reset(check);
    }
    /* another seed takes another path (60 tokens at temperature 1: certain in practice) */
    gp.seed = 99;
    CHECK_STATUS(wlm_generate_begin_text(ctx, PROMPT, &gp), WLM_OK);
    run_generation(ctx, &gr, -1);
    int same = gr.n == n_first;
    for (int i = 0; same && i < gr.n; i++) same = gr.ids[i] == first[i];
    CHECK(!same);
    wlm_context_free(ctx);
    wlm_context_free(check);
}

int main(int argc, char **argv) {
    tu_find_shared(argc, argv);
    printf("shared files: %s\n", tu_shared_dir);
    model_bytes = tu_read_shared("models/stories260K.bin", &model_size);
    tok_bytes = tu_read_shared("models/tok512.bin", &tok_size);
    if (!model_bytes || !tok_bytes || !load_reference()) return TEST_FINISH();

    test_load();
    test_corrupt();
    wlm_model *m = load_model();
    if (m) {
        test_forward(m);
        test_layouts();
        test_huge_context();
        test_greedy(m);
        test_f16_cache(m);
        test_stops(m);
        test_params(m);
        test_penalty_generation(m);
        test_sampled(m);
        wlm_model_free(m);
    }
    free(model_bytes);
    free(tok_bytes);
    free(ref_logits);
    free(ref_text);
    return TEST_FINISH();
}
