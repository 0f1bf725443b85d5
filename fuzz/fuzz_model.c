/*
 * fuzz_model.c — libFuzzer harness: wlm_model_load on arbitrary bytes (a llama2.c checkpoint,
 * or GGUF when the bytes start with "GGUF"), copied into an exact-size malloc'd buffer first.
 * When a model loads: its info must be plausible, a context of at most 8 positions must
 * evaluate a prefill and a decode step, and run a short sampled generation with two stop
 * strings (from text through wlm_generate_begin_text when the file has a vocabulary; bounded
 * work: n_ctx <= 8, 3 tokens), a context shift must succeed or be refused with a message, and a
 * vocabulary that came with the file must tokenize and decode a fixed text. The seeds cover
 * every architecture of src/model/arch.c (fuzz/make-corpus.mjs). A GGUF input is also loaded
 * with WLM_LOAD_TENSORS_EXTERNAL (its bytes read as header + resident area, the WebGPU
 * backend's streamed load): a model that loads must give its info, refuse a CPU context, and
 * after wlm_model_commit_external either refuse everything (an error with a message) or give a
 * deferred context and still refuse a CPU one.
 * Checks: no crash, leak, ASan/UBSan report or hang; only documented status codes; an error
 * always has a message.
 */
#include <stdio.h>
#include <string.h>

#include "fuzz_util.h"

/* Token ids for the evaluation, taken from the input so that different files use different
 * rows of the embedding (any id in range is valid). */
static int32_t pick_token(const uint8_t *data, size_t size, size_t k, int32_t vocab) {
    uint32_t h = fz_touch(&k, sizeof k);
    if (size) h ^= fz_touch(data + (k * 7919) % size, 1);
    return (int32_t)(h % (uint32_t)vocab);
}

static void exercise(wlm_model *m, const uint8_t *data, size_t size) {
    wlm_model_info info;
    int rc = wlm_model_get_info(m, &info);
    FZ_CHECK(rc == WLM_OK, "wlm_model_get_info on a loaded model: %s", wlm_status_name(rc));
    FZ_CHECK(info.dim > 0 && info.hidden_dim > 0 && info.n_layers > 0 && info.n_heads > 0 &&
                 info.n_kv_heads > 0 && info.n_kv_heads <= info.n_heads && info.vocab_size > 0 &&
                 info.seq_len > 0,
             "implausible info: dim %d hidden %d layers %d heads %d/%d vocab %d seq %d",
             (int)info.dim, (int)info.hidden_dim, (int)info.n_layers, (int)info.n_heads,
             (int)info.n_kv_heads, (int)info.vocab_size, (int)info.seq_len);

    if (info.has_tokenizer) {
        static const char text[] = "Once upon a time, \xc3\xa9t\xc3\xa9 \xf0\x9f\x98\x80 <s>\n";
        int32_t *ids = NULL;
        int32_t n = fz_tokenize(m, text, sizeof text - 1, 1, info.vocab_size, &ids);
        if (n > 0) {
            fz_buf out = {0};
            fz_decode(m, ids, 0, n, &out);
            free(out.p);
        }
        free(ids);
        fz_piece_out_of_range(m, info.vocab_size);
        for (int32_t t = 0; t < info.vocab_size && t < 4096; t++) fz_piece(m, -1, t, NULL);
    }

    wlm_context_params cp;
    wlm_context_params_default(&cp);
    cp.n_ctx = info.seq_len < 8 ? info.seq_len : 8;
    cp.use_simd = (int32_t)(size & 1);
    wlm_context *ctx = NULL;
    rc = wlm_context_new(m, &cp, &ctx);
    FZ_CHECK(fz_known_status(rc) && rc != WLM_DONE, "wlm_context_new: %d", rc);
    if (rc != WLM_OK) {
        FZ_CHECK(rc == WLM_ERR_NOMEM, "wlm_context_new on a loaded model failed: %s %s",
                 wlm_status_name(rc), ctx ? wlm_context_errmsg(ctx) : "");
        wlm_context_free(ctx);
        return;
    }

    int32_t toks[3];
    for (size_t k = 0; k < 3; k++) toks[k] = pick_token(data, size, k, info.vocab_size);
    const int32_t n_prefill = cp.n_ctx >= 2 ? 2 : 1;

    /* Embeddings (src/runtime/embed.c), any model: a pooling picked by the input; the count
     * is the documented one. An embedding-only model refuses to generate and stops here. */
    wlm_embed_info ei;
    rc = wlm_model_embed_info(m, &ei);
    FZ_CHECK(rc == WLM_OK, "wlm_model_embed_info on a loaded model: %s", wlm_status_name(rc));
    {
        const int32_t pooling = (int32_t)(size % 5), len = n_prefill;
        const int32_t width = pooling == WLM_POOLING_RANK ? ei.n_rank_out : ei.n_embd;
        const size_t cap = (size_t)(width > 0 ? width : 1) * (size_t)len;
        float *out = malloc(sizeof(float) * cap);
        if (!out) abort();
        int32_t got = wlm_embed(ctx, toks, &len, 1, pooling, 2, out, cap);
        if (pooling == WLM_POOLING_RANK && ei.n_rank_out == 0)
            FZ_CHECK(got == WLM_ERR_INVALID_ARG, "rank without a head: %d", (int)got);
        else
            FZ_CHECK(got == (pooling == WLM_POOLING_NONE ? len : 1) * width || got == WLM_ERR_NOMEM,
                     "wlm_embed (pooling %d) returned %d for %d floats of width %d: %s",
                     (int)pooling, (int)got, (int)cap, (int)width, wlm_context_errmsg(ctx));
        if (got > 0) (void)fz_touch(out, sizeof(float) * (size_t)got);
        free(out);
    }
    if (!ei.generative) {
        rc = wlm_eval(ctx, toks, n_prefill);
        FZ_CHECK(rc == WLM_ERR_UNSUPPORTED, "wlm_eval on an embedding-only model: %s",
                 wlm_status_name(rc));
        fz_check_msg(wlm_context_errmsg(ctx), 1, "wlm_eval on an embedding-only model");
        wlm_context_free(ctx);
        return;
    }
    rc = wlm_eval(ctx, toks, n_prefill);
    FZ_CHECK(rc == WLM_OK, "wlm_eval prefill: %s %s", wlm_status_name(rc), wlm_context_errmsg(ctx));
    const float *logits = wlm_logits(ctx);
    FZ_CHECK(logits != NULL, "no logits after wlm_eval");
    (void)fz_touch(logits, sizeof(float) * (size_t)info.vocab_size);
    rc = wlm_eval(ctx, toks + 2, 1);
    FZ_CHECK(rc == (cp.n_ctx >= n_prefill + 1 ? WLM_OK : WLM_ERR_CONTEXT_FULL),
             "wlm_eval decode at n_past %d of %d: %s", (int)n_prefill, (int)cp.n_ctx,
             wlm_status_name(rc));
    /* A context shift by one position: done, or refused with a message (learned positions,
     * sliding windows); either way the sequence still evaluates. */
    if (wlm_context_n_past(ctx) >= 2) {
        rc = wlm_seq_shift(ctx, 0, 0, 1);
        FZ_CHECK(rc == WLM_OK || rc == WLM_ERR_UNSUPPORTED, "wlm_seq_shift: %s %s",
                 wlm_status_name(rc), wlm_context_errmsg(ctx));
        fz_check_msg(wlm_context_errmsg(ctx), rc != WLM_OK, "wlm_seq_shift");
        rc = wlm_eval(ctx, toks, 1);
        FZ_CHECK(rc == WLM_OK || rc == WLM_ERR_CONTEXT_FULL, "wlm_eval after a shift: %s",
                 wlm_status_name(rc));
    }
    const int32_t bad = info.vocab_size;
    rc = wlm_eval(ctx, &bad, 1);
    FZ_CHECK(rc == WLM_ERR_INVALID_ARG || rc == WLM_ERR_CONTEXT_FULL,
             "wlm_eval of id %d (= vocab_size) returned %s", (int)bad, wlm_status_name(rc));

    /* A short sampled generation: the sampler must cope with whatever logits this file gives
     * (NaN and Inf included). */
    wlm_gen_params gp;
    wlm_gen_params_default(&gp);
    gp.seed = size + 1;
    gp.max_tokens = 3;
    gp.top_k = (int32_t)(size % 5);
    gp.repeat_penalty = 1.1f;
    gp.temperature = (size & 2) ? 0.0f : 0.8f;
    /* Stop strings: a piece the model may well produce (when it has a vocabulary), and a
     * space, so that held-back text and partial matches are exercised. */
    gp.n_stop = 2;
    snprintf(gp.stop[0], WLM_MAX_STOP_LEN, "e");
    snprintf(gp.stop[1], WLM_MAX_STOP_LEN, " ");
    if (info.has_tokenizer) {
        size_t plen = 0;
        const char *p = wlm_token_piece(m, -1, toks[1], &plen);
        if (p && plen > 0 && plen < WLM_MAX_STOP_LEN && !memchr(p, '\0', plen)) {
            memcpy(gp.stop[0], p, plen);
            gp.stop[0][plen] = '\0';
        }
        /* Through the tokenizer: a short prompt always fits n_ctx 8 unless the vocabulary
         * lacks both byte tokens and <unk>. */
        rc = wlm_generate_begin_text(ctx, "a", &gp);
        FZ_CHECK(rc == WLM_OK || rc == WLM_ERR_TOKENIZER || rc == WLM_ERR_CONTEXT_FULL,
                 "wlm_generate_begin_text: %s %s", wlm_status_name(rc), wlm_context_errmsg(ctx));
    } else {
        rc = wlm_generate_begin(ctx, toks, 1, &gp);
        FZ_CHECK(rc == WLM_OK, "wlm_generate_begin: %s %s", wlm_status_name(rc),
                 wlm_context_errmsg(ctx));
    }
    if (rc != WLM_OK) {
        wlm_context_free(ctx);
        return;
    }
    wlm_token tok;
    for (int step = 0; step < 10; step++) {
        rc = wlm_generate_next(ctx, &tok);
        /* WLM_ERR_FORMAT: weights whose activations overflow to NaN / -inf everywhere */
        FZ_CHECK(rc == WLM_OK || rc == WLM_DONE || rc == WLM_ERR_FORMAT, "wlm_generate_next: %s %s",
                 wlm_status_name(rc), wlm_context_errmsg(ctx));
        if (rc == WLM_ERR_FORMAT) {
            FZ_CHECK(strstr(wlm_context_errmsg(ctx), "NaN") != NULL, "unexpected: %s",
                     wlm_context_errmsg(ctx));
            break;
        }
        if (rc == WLM_DONE) break;
        FZ_CHECK(tok.id >= 0 && tok.id < info.vocab_size, "sampled id %d outside 0..%d",
                 (int)tok.id, (int)info.vocab_size - 1);
        /* n_past counts the token just emitted, which is evaluated only by the next call
         * (and never when the context is full): at most n_ctx + 1. */
        FZ_CHECK(tok.n_past <= cp.n_ctx + 1, "n_past %d beyond n_ctx %d + 1", (int)tok.n_past,
                 (int)cp.n_ctx);
        if (tok.piece_len) (void)fz_touch(tok.piece, tok.piece_len);
    }
    FZ_CHECK(rc == WLM_DONE || rc == WLM_ERR_FORMAT,
             "a generation of max_tokens 3 did not end within 10 steps");
    if (tok.piece_len) (void)fz_touch(tok.piece, tok.piece_len); /* text released with DONE */
    wlm_context_free(ctx);
}

/* The same bytes as a WLM_LOAD_TENSORS_EXTERNAL buffer (header + resident area). */
static void exercise_external(const uint8_t *data, size_t size) {
    void *buf = fz_dup(data, size);
    wlm_model *m = NULL;
    int rc = wlm_model_load(buf, size, WLM_LOAD_TENSORS_EXTERNAL, &m);
    FZ_CHECK(fz_known_status(rc) && rc != WLM_DONE, "external load returned %d", rc);
    fz_check_msg(wlm_model_errmsg(m), rc != WLM_OK, "external wlm_model_load");
    wlm_context_params cp;
    wlm_context_params_default(&cp);
    cp.n_ctx = 8;
    wlm_context *ctx = NULL;
    if (rc == WLM_OK) {
        wlm_model_info info0;
        FZ_CHECK(wlm_model_get_info(m, &info0) == WLM_OK, "wlm_model_get_info on an external model");
        for (int commit = 0; commit < 2; commit++) {
            wlm_model_info info;
            if (wlm_model_get_info(m, &info) == WLM_OK && info.seq_len < 8) cp.n_ctx = info.seq_len;
            cp.kv_cache = 1;
            int rc2 = wlm_context_new(m, &cp, &ctx);
            FZ_CHECK(rc2 == WLM_ERR_STATE, "a CPU context on an external model: %s", wlm_status_name(rc2));
            wlm_context_free(ctx);
            ctx = NULL;
            cp.kv_cache = 2;
            rc2 = wlm_context_new(m, &cp, &ctx);
            FZ_CHECK(commit ? rc2 == WLM_OK || rc2 == WLM_ERR_NOMEM : rc2 == WLM_ERR_STATE,
                     "a deferred context on an external model (%s): %s",
                     commit ? "committed" : "not committed", wlm_status_name(rc2));
            wlm_context_free(ctx);
            ctx = NULL;
            if (commit) break;
            rc = wlm_model_commit_external(m);
            FZ_CHECK(fz_known_status(rc) && rc != WLM_DONE, "commit returned %d", rc);
            fz_check_msg(wlm_model_errmsg(m), rc != WLM_OK, "wlm_model_commit_external");
            if (rc != WLM_OK) {
                FZ_CHECK(wlm_context_new(m, &cp, &ctx) == WLM_ERR_STATE, "a context after a failed commit");
                wlm_context_free(ctx);
                ctx = NULL;
                break;
            }
        }
    }
    wlm_model_free(m);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    void *buf = fz_dup(data, size);
    wlm_model *m = NULL;
    int rc = wlm_model_load(buf, size, 0, &m);
    FZ_CHECK(fz_known_status(rc) && rc != WLM_DONE, "wlm_model_load returned %d", rc);
    FZ_CHECK(m != NULL, "wlm_model_load gave no handle (%s)", wlm_status_name(rc));
    fz_check_msg(wlm_model_errmsg(m), rc != WLM_OK, "wlm_model_load");
    if (rc == WLM_OK) {
        exercise(m, data, size);
    } else {
        wlm_model_info info;
        FZ_CHECK(wlm_model_get_info(m, &info) == WLM_ERR_STATE,
                 "wlm_model_get_info on a failed model is not WLM_ERR_STATE");
        wlm_context *ctx = NULL;
        int rc2 = wlm_context_new(m, NULL, &ctx);
        FZ_CHECK(rc2 == WLM_ERR_STATE, "wlm_context_new on a failed model: %s",
                 wlm_status_name(rc2));
        wlm_context_free(ctx);
    }
    wlm_model_free(m);
    free(buf);
    if (size >= 4 && memcmp(data, "GGUF", 4) == 0) exercise_external(data, size);
    return 0;
}
