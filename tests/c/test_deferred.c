/*
 * test_deferred.c — the seam of the WebGPU backend (runtime/deferred.c) without a GPU: a
 * deferred context's recorded batches are evaluated by a second, ordinary context on the same
 * model (standing in for the other backend) and their logits copied in; generation must then
 * equal the ordinary context's token for token (greedy and sampled, stop strings, the prompt
 * cache), a step dropped while it waits for logits must leave the sequence where it was, logits
 * must be unreadable until supplied, the context must hold no KV memory, and what the deferred
 * mode does not support (batches, beams, forks, context shift) must be refused. Also checks
 * wlm_model_describe's JSON (length contract, key fields) on stories260K.
 * Uses wasmlm.h plus model.h (the deferred fields are internal).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "wasmlm.h"
#include "test_util.h"

static unsigned char *model_bytes, *tok_bytes;
static size_t model_size, tok_size;

/* A deferred context (kv_cache 2: another backend keeps K/V), or NULL after a failed check. */
static wlm_context *deferred_ctx(const wlm_model *m, int n_ctx, int n_seq) {
    wlm_context_params cp;
    wlm_context_params_default(&cp);
    cp.n_ctx = n_ctx;
    cp.n_seq_max = n_seq;
    cp.kv_cache = 2;
    wlm_context *c = NULL;
    int rc = wlm_context_new(m, &cp, &c);
    CHECK_STATUS(rc, WLM_OK);
    if (rc != WLM_OK) {
        wlm_context_free(c);
        return NULL;
    }
    return c;
}

/* Evaluates d's recorded batch on `ref` (an ordinary context kept at the same positions) and
 * copies the logits in: what js/backend/webgpu/backend.js's supply() does with the GPU. */
static int supply(wlm_context *d, wlm_context *ref) {
    const int32_t n = d->dfr_n;
    if (n <= 0) return WLM_OK;
    const int32_t p0 = d->dfr_pos[0];
    if (ref->seqs[0].n_past > p0) wlm_context_reset_keep(ref, p0);
    CHECKF(ref->seqs[0].n_past == p0, "ref at %d, batch at %d", (int)ref->seqs[0].n_past, (int)p0);
    uint8_t *want = calloc((size_t)n, 1);
    for (int32_t i = 0; i < n; i++) want[i] = d->logit_row[i] >= 0;
    int rc = wlm_eval_entries(ref, d->dfr_tok, NULL, want, n);
    free(want);
    if (rc != WLM_OK) return rc;
    const size_t V = (size_t)d->model->hp.vocab_size;
    for (int32_t i = 0; i < n; i++)
        if (d->logit_row[i] >= 0)
            memcpy(d->logits + (size_t)d->logit_row[i] * V, wlm_logits_ith(ref, i), V * sizeof(float));
    d->dfr_n = 0;
    return WLM_OK;
}

/* One generation on `c` (deferred when ref != NULL): ids into out (cap), returns the count;
 * *stop gets the stop reason, text appended to buf. */
static int generate(wlm_context *c, wlm_context *ref, const char *prompt, const wlm_gen_params *p,
                    int32_t *out, int cap, int32_t *stop, char *buf, size_t buf_cap) {
    int rc = wlm_generate_begin_text(c, prompt, p);
    CHECK_STATUS(rc, WLM_OK);
    if (rc != WLM_OK) return 0;
    if (ref) CHECK_STATUS(supply(c, ref), WLM_OK);
    int n = 0;
    buf[0] = '\0';
    for (;;) {
        wlm_token t;
        rc = wlm_generate_next(c, &t);
        if (ref && rc == WLM_NEED_LOGITS) {
            CHECK(wlm_logits(c) == NULL); /* not readable before they are supplied */
            CHECK_STATUS(supply(c, ref), WLM_OK);
            rc = wlm_generate_batch_resume(c, &t);
            if (rc >= 0) rc = t.status;
        }
        if (t.piece_len && strlen(buf) + t.piece_len < buf_cap) strncat(buf, t.piece, t.piece_len);
        if (rc != WLM_OK) {
            *stop = t.stop_reason;
            CHECK_STATUS(rc, WLM_DONE);
            return n;
        }
        if (n < cap) out[n++] = t.id;
    }
}

static void test_generation_equal(const wlm_model *m) {
    tu_section("deferred generation equals the ordinary context's");
    wlm_context *plain = tu_context(m, 128, 0, 1, WLM_KV_F16);
    wlm_context *d = deferred_ctx(m, 128, 1);
    wlm_context *ref = tu_context(m, 128, 0, 1, WLM_KV_F16);
    if (!plain || !d || !ref) goto out;
    CHECK(d->deferred && d->kv.n_alloc == 0); /* no CPU KV blocks */
    CHECKF(wlm_context_memory(d) + 8 * d->kv.block_bytes <= wlm_context_memory(plain), /* 8 blocks */
           "deferred %zu bytes, plain %zu", wlm_context_memory(d), wlm_context_memory(plain));
    for (int sampled = 0; sampled < 2; sampled++) {
        wlm_gen_params p;
        wlm_gen_params_default(&p);
        p.max_tokens = 40;
        p.seed = 11;
        if (!sampled) p.temperature = 0.0f;
        p.cache_prompt = 1;
        int32_t a[64], b[64], sa = -1, sb = -1;
        char ta[2048], tb[2048];
        const char *prompts[] = {"Once upon a time", "Once upon a time, there was a dog"};
        for (int k = 0; k < 2; k++) {
            int na = generate(plain, NULL, prompts[k], &p, a, 64, &sa, ta, sizeof ta);
            int nb = generate(d, ref, prompts[k], &p, b, 64, &sb, tb, sizeof tb);
            CHECKF(na == nb && na > 0 && memcmp(a, b, sizeof(int32_t) * (size_t)na) == 0,
                   "%s, prompt %d: %d vs %d tokens", sampled ? "sampled" : "greedy", k, na, nb);
            CHECK(sa == sb);
            CHECK(strcmp(ta, tb) == 0);
            CHECKF(wlm_generate_n_cached(plain) == wlm_generate_n_cached(d), "cached %d vs %d",
                   (int)wlm_generate_n_cached(plain), (int)wlm_generate_n_cached(d));
            if (k == 1) CHECK(wlm_generate_n_cached(d) > 0);
        }
        /* a stop string cut from the text is never emitted, on both */
        char stop[8];
        if (strlen(ta) > 6) {
            memcpy(stop, ta + 3, 3);
            stop[3] = '\0';
            memcpy(p.stop[0], stop, 4);
            p.n_stop = 1;
            int na = generate(plain, NULL, prompts[0], &p, a, 64, &sa, ta, sizeof ta);
            int nb = generate(d, ref, prompts[0], &p, b, 64, &sb, tb, sizeof tb);
            CHECK(na == nb && sa == WLM_STOP_STRING && sb == WLM_STOP_STRING && strcmp(ta, tb) == 0);
            p.n_stop = 0;
        }
    }
out:
    wlm_context_free(plain);
    wlm_context_free(d);
    wlm_context_free(ref);
}

static void test_drop_and_refusals(const wlm_model *m) {
    tu_section("a step dropped while waiting; what deferred contexts refuse");
    wlm_context *d = deferred_ctx(m, 64, 2);
    wlm_context *ref = tu_context(m, 64, 0, 1, WLM_KV_F16);
    if (!d || !ref) goto out;
    wlm_gen_params p;
    wlm_gen_params_default(&p);
    p.temperature = 0.0f;
    p.max_tokens = 10;
    CHECK_STATUS(wlm_generate_begin_text(d, "Once upon", &p), WLM_OK);
    const int32_t n_prompt = wlm_context_n_past(d);
    CHECK(d->dfr_n == n_prompt && wlm_logits(d) == NULL);
    wlm_token t;
    CHECK_STATUS(wlm_generate_batch_resume(d, &t), WLM_ERR_STATE); /* nothing waits yet */
    CHECK_STATUS(supply(d, ref), WLM_OK);
    CHECK_STATUS(wlm_generate_next(d, &t), WLM_OK); /* sampled from the prefill's logits */
    CHECK_STATUS(wlm_generate_next(d, &t), WLM_NEED_LOGITS);
    CHECK(wlm_context_n_past(d) == n_prompt + 1);
    CHECK_STATUS(wlm_generate_batch_resume(d, &t), WLM_ERR_STATE); /* logits not supplied */
    wlm_generate_abort(d);
    CHECK_STATUS(wlm_generate_next(d, &t), WLM_DONE);
    CHECK(t.stop_reason == WLM_STOP_ABORTED);
    CHECKF(wlm_context_n_past(d) == n_prompt, "n_past %d after the dropped step, want %d",
           (int)wlm_context_n_past(d), (int)n_prompt);
    /* a prefill whose logits never came is no prompt cache (from an empty cache: positions
     * computed by an earlier generation stay a cache, rightly) */
    wlm_context_reset(d);
    p.cache_prompt = 1;
    CHECK_STATUS(wlm_generate_begin_text(d, "Once upon a time", &p), WLM_OK);
    wlm_generate_abort(d);
    CHECK_STATUS(wlm_generate_next(d, &t), WLM_DONE);
    CHECK_STATUS(wlm_generate_begin_text(d, "Once upon a time there", &p), WLM_OK);
    CHECK(wlm_generate_n_cached(d) == 0);
    wlm_context_reset(d);
    CHECK(wlm_context_n_past(d) == 0 && d->dfr_n == 0);

    const int32_t toks[] = {1, 403, 407};
    const int32_t *prompts[] = {toks, toks};
    const int32_t lens[] = {3, 2};
    wlm_gen_params ps[2] = {p, p};
    CHECK_STATUS(wlm_generate_batch_begin(d, 2, prompts, lens, ps), WLM_ERR_UNSUPPORTED);
    p.context_shift = 1;
    CHECK_STATUS(wlm_generate_begin(d, toks, 3, &p), WLM_ERR_UNSUPPORTED);
    CHECK(strstr(wlm_context_errmsg(d), "WebGPU") != NULL);
    CHECK_STATUS(wlm_seq_fork(d, 0, 1), WLM_ERR_UNSUPPORTED);
    wlm_beam_params bp;
    wlm_beam_params_default(&bp);
    bp.width = 1;
    CHECK_STATUS(wlm_beam_begin(d, toks, 3, &bp), WLM_ERR_UNSUPPORTED);
out:
    wlm_context_free(d);
    wlm_context_free(ref);
}

static void test_describe(const wlm_model *m) {
    tu_section("wlm_model_describe");
    int64_t n = wlm_model_describe(m, NULL, 0);
    CHECK(n > 100);
    char *buf = malloc((size_t)n + 1);
    CHECK(wlm_model_describe(m, buf, (size_t)n + 1) == n && (int64_t)strlen(buf) == n);
    CHECK(strstr(buf, "\"name\":\"llama\"") && strstr(buf, "\"rope\":\"norm\"") &&
          strstr(buf, "\"dim\":64,") && strstr(buf, "\"n_layers\":5,"));
    char small[16];
    CHECK(wlm_model_describe(m, small, sizeof small) == n && strlen(small) == sizeof small - 1);
    free(buf);
}

int main(int argc, char **argv) {
    tu_find_shared(argc, argv);
    model_bytes = tu_read_shared("models/stories260K.bin", &model_size);
    tok_bytes = tu_read_shared("models/tok512.bin", &tok_size);
    if (!model_bytes || !tok_bytes) return TEST_FINISH();
    wlm_model *m = NULL;
    int rc = wlm_model_load(model_bytes, model_size, 0, &m);
    if (rc == WLM_OK) rc = wlm_model_load_tokenizer(m, tok_bytes, tok_size);
    CHECK_STATUS(rc, WLM_OK);
    if (rc == WLM_OK) {
        test_generation_equal(m);
        test_drop_and_refusals(m);
        test_describe(m);
    }
    wlm_model_free(m);
    free(model_bytes);
    free(tok_bytes);
    return TEST_FINISH();
}
