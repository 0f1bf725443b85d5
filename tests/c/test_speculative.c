/*
 * test_speculative.c — speculative decoding (src/runtime/speculative.c) on stories260K:
 * wlm_seq_truncate against re-evaluation; wlm_vocab_match's refusals; greedy output identical
 * to plain greedy decoding, token for token, for several prompts, draft models (a perturbed
 * copy of the weights, and the Q4_0 quantization), prompt lookup, draft lengths, penalties,
 * stop strings, a full context with and without context shift, and two threads; sampled output
 * against the exact distribution of plain sampling: the joint frequencies of the first three
 * tokens over many seeds in a Pearson chi-square test, the reference probabilities computed
 * here from the logits of plain one-token evaluation (the papers' claim, checked where it can
 * fail); and every refusal (grammar, n_probs, bad parameters, no generation).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wasmlm.h"
#include "kernels/quant.h"
#include "kernels/quantize.h"
#include "test_util.h"
#include "test_models.h"

#define P_MIN 1e-4 /* chi-square p-value below which a distribution is rejected */
#define MAX_GEN 256

static unsigned char *model_bytes, *tok_bytes;
static size_t model_size, tok_size;

static wlm_model *load_from(unsigned char *bytes, size_t size, const unsigned char *tok,
                            size_t tsize) {
    wlm_model *m = NULL;
    int rc = wlm_model_load(bytes, size, 0, &m);
    if (rc == WLM_OK && tok) rc = wlm_model_load_tokenizer(m, tok, tsize);
    CHECKF(rc == WLM_OK, "load: %s %s", wlm_status_name(rc), m ? wlm_model_errmsg(m) : "");
    if (rc != WLM_OK) {
        wlm_model_free(m);
        return NULL;
    }
    return m;
}

/* A copy of the checkpoint with every weight multiplied by 1 + noise × u, u uniform in [-1, 1]:
 * a draft model that agrees with the target often but not always. */
static unsigned char *perturbed(float noise, uint64_t seed) {
    unsigned char *b = tu_dup(model_bytes, model_size);
    tu_rng r = {seed};
    float *w = (float *)(void *)(b + 28); /* after the seven int32 of the header */
    const size_t n = (model_size - 28) / sizeof(float);
    for (size_t i = 0; i < n; i++) w[i] *= 1.0f + tu_rng_uniform(&r, -noise, noise);
    return b;
}

static int32_t tokenize(const wlm_model *m, const char *text, int32_t *out, int32_t cap) {
    int32_t n = wlm_tokenize(m, text, strlen(text), 1, out, cap);
    CHECKF(n > 0 && n <= cap, "tokenize '%s': %d", text, (int)n);
    return n;
}

/* One generation's output. */
typedef struct run_out {
    int32_t ids[MAX_GEN];
    int32_t n;
    int32_t stop_reason;
    char text[4096];
    size_t text_len;
    float prob[MAX_GEN], logprob[MAX_GEN];
    int32_t n_past[MAX_GEN];
    wlm_spec_stats st;
    int rc;
} run_out;

/* Generates from `prompt` with gp; with sp (non-NULL) speculatively. */
static void run(wlm_context *ctx, const int32_t *prompt, int32_t n, const wlm_gen_params *gp,
                const wlm_spec_params *sp, run_out *o) {
    memset(o, 0, sizeof *o);
    o->rc = wlm_generate_begin(ctx, prompt, n, gp);
    if (o->rc == WLM_OK && sp) o->rc = wlm_generate_speculate(ctx, sp);
    if (o->rc != WLM_OK) return;
    wlm_token t;
    int s;
    while ((s = wlm_generate_next(ctx, &t)) == WLM_OK || s == WLM_DONE) {
        if (o->text_len + t.piece_len < sizeof o->text) {
            memcpy(o->text + o->text_len, t.piece, t.piece_len);
            o->text_len += t.piece_len;
        }
        if (s == WLM_DONE) {
            o->stop_reason = t.stop_reason;
            break;
        }
        if (o->n < MAX_GEN) {
            o->prob[o->n] = t.prob;
            o->logprob[o->n] = t.logprob;
            o->n_past[o->n] = t.n_past;
            o->ids[o->n++] = t.id;
        }
    }
    if (s < 0) o->rc = s;
    wlm_spec_stats_get(ctx, &o->st);
}

/* Same ids, stop reason, text, n_past, and bitwise the same prob and logprob. */
static int same_run(const run_out *a, const run_out *b, const char *what) {
    int ok = CHECKF(a->rc == WLM_OK && b->rc == WLM_OK, "%s: rc %d / %d", what, a->rc, b->rc);
    ok &= CHECKF(a->n == b->n, "%s: %d vs %d tokens", what, (int)a->n, (int)b->n);
    int32_t first = -1;
    for (int32_t i = 0; i < a->n && i < b->n; i++)
        if (a->ids[i] != b->ids[i]) {
            first = i;
            break;
        }
    ok &= CHECKF(first < 0, "%s: token %d differs: %d vs %d", what, (int)first,
                 first >= 0 ? (int)a->ids[first] : 0, first >= 0 ? (int)b->ids[first] : 0);
    ok &= CHECKF(a->stop_reason == b->stop_reason, "%s: stop %s vs %s", what,
                 wlm_stop_reason_name(a->stop_reason), wlm_stop_reason_name(b->stop_reason));
    ok &= CHECKF(a->text_len == b->text_len && memcmp(a->text, b->text, a->text_len) == 0,
                 "%s: texts differ", what);
    int same_probs = 1, npast = 1;
    for (int32_t i = 0; i < a->n && i < b->n; i++) {
        same_probs &= a->logprob[i] == b->logprob[i] && a->prob[i] == b->prob[i];
        npast &= a->n_past[i] == b->n_past[i];
    }
    ok &= CHECKF(same_probs, "%s: prob / logprob differ", what);
    ok &= CHECKF(npast, "%s: n_past differs", what);
    return ok;
}

/* ---- wlm_seq_truncate -------------------------------------------------------------------- */

static void test_truncate(const wlm_model *m) {
    tu_section("wlm_seq_truncate: truncated and re-evaluated = evaluated once");
    wlm_context *c = tu_context(m, 128, 2, 1, WLM_KV_F16);
    if (!c) return;
    const int32_t vocab = 512;
    int32_t toks[40];
    for (int i = 0; i < 40; i++) toks[i] = 3 + (i * 37) % 500;
    float *ref = malloc(sizeof(float) * vocab * 2);
    CHECK_STATUS(wlm_eval(c, toks, 40), WLM_OK);
    memcpy(ref, wlm_logits(c), sizeof(float) * vocab);
    /* a different tail after position 20, then back to the original one */
    CHECK_STATUS(wlm_seq_truncate(c, 0, 20), WLM_OK);
    CHECK_EQ_INT(wlm_context_n_past(c), 20);
    int32_t other[20];
    for (int i = 0; i < 20; i++) other[i] = 400 - i;
    CHECK_STATUS(wlm_eval(c, other, 20), WLM_OK);
    CHECK_STATUS(wlm_seq_truncate(c, 0, 20), WLM_OK);
    CHECK_STATUS(wlm_eval(c, toks + 20, 20), WLM_OK);
    CHECK(memcmp(wlm_logits(c), ref, sizeof(float) * vocab) == 0);
    /* beyond the end: nothing changes; the logits stay readable */
    CHECK_STATUS(wlm_seq_truncate(c, 0, 100), WLM_OK);
    CHECK_EQ_INT(wlm_context_n_past(c), 40);
    CHECK(wlm_logits(c) != NULL);
    /* a forked sequence truncated inside a shared block does not disturb its source */
    CHECK_STATUS(wlm_seq_fork(c, 0, 1), WLM_OK);
    CHECK_STATUS(wlm_seq_truncate(c, 1, 35), WLM_OK); /* block 2 (32..47) shared */
    int32_t seqs[5] = {1, 1, 1, 1, 1};
    CHECK_STATUS(wlm_eval_batch(c, other, seqs, NULL, 5), WLM_OK);
    CHECK_EQ_INT(wlm_seq_n_past(c, 1), 40);
    int32_t next = 7, zero = 0;
    CHECK_STATUS(wlm_eval_batch(c, &next, &zero, NULL, 1), WLM_OK);
    memcpy(ref + vocab, wlm_logits(c), sizeof(float) * vocab);
    wlm_context *fresh = tu_context(m, 128, 1, 1, WLM_KV_F16);
    if (fresh) {
        CHECK_STATUS(wlm_eval(fresh, toks, 40), WLM_OK);
        CHECK_STATUS(wlm_eval(fresh, &next, 1), WLM_OK);
        CHECK(memcmp(wlm_logits(fresh), ref + vocab, sizeof(float) * vocab) == 0);
        wlm_context_free(fresh);
    }
    /* to zero, and the errors */
    CHECK_STATUS(wlm_seq_truncate(c, 1, 0), WLM_OK);
    CHECK_EQ_INT(wlm_seq_n_past(c, 1), 0);
    CHECK_STATUS(wlm_seq_truncate(c, 0, -1), WLM_ERR_INVALID_ARG);
    CHECK_STATUS(wlm_seq_truncate(c, 2, 0), WLM_ERR_INVALID_ARG);
    CHECK_STATUS(wlm_seq_truncate(NULL, 0, 0), WLM_ERR_INVALID_ARG);
    wlm_gen_params gp;
    wlm_gen_params_default(&gp);
    CHECK_STATUS(wlm_generate_begin(c, toks, 4, &gp), WLM_OK);
    CHECK_STATUS(wlm_seq_truncate(c, 0, 1), WLM_ERR_STATE);
    free(ref);
    wlm_context_free(c);
}

/* ---- vocabulary check -------------------------------------------------------------------- */

static void test_vocab(const wlm_model *target) {
    tu_section("wlm_vocab_match");
    char msg[256];
    CHECK_STATUS(wlm_vocab_match(target, target, msg, sizeof msg), WLM_OK);
    CHECK_STATUS(wlm_vocab_match(target, NULL, msg, sizeof msg), WLM_ERR_INVALID_ARG);
    /* the same weights with one vocabulary entry changed */
    unsigned char *tok2 = tu_dup(tok_bytes, tok_size);
    /* tokenizer.bin: int32 max_len, then per token float score, int32 len, bytes; token 300 */
    size_t off = 4;
    for (int t = 0; t < 300; t++) {
        int32_t len;
        memcpy(&len, tok2 + off + 4, 4);
        off += 8 + (size_t)len;
    }
    tok2[off + 8] = tok2[off + 8] == 'Z' ? 'Q' : 'Z'; /* another first byte */
    wlm_model *m2 = load_from(model_bytes, model_size, tok2, tok_size);
    if (m2) {
        int rc = wlm_vocab_match(target, m2, msg, sizeof msg);
        CHECK_STATUS(rc, WLM_ERR_TOKENIZER);
        CHECKF(strstr(msg, "token 300") != NULL, "message: %s", msg);
        /* a generation refuses it with the same message */
        wlm_context *c = tu_context(target, 64, 1, 1, WLM_KV_F16), *d = tu_context(m2, 64, 1, 1, WLM_KV_F16);
        if (c && d) {
            wlm_gen_params gp;
            wlm_gen_params_default(&gp);
            int32_t p[1] = {1};
            CHECK_STATUS(wlm_generate_begin(c, p, 1, &gp), WLM_OK);
            wlm_spec_params sp;
            wlm_spec_params_default(&sp);
            sp.draft = d;
            CHECK_STATUS(wlm_generate_speculate(c, &sp), WLM_ERR_TOKENIZER);
            CHECKF(strstr(wlm_context_errmsg(c), "token 300") != NULL, "%s", wlm_context_errmsg(c));
            wlm_token t;
            CHECK_STATUS(wlm_generate_next(c, &t), WLM_OK); /* the generation goes on, plainly */
        }
        wlm_context_free(c);
        wlm_context_free(d);
    }
    wlm_model_free(m2);
    free(tok2);
    /* no tokenizer on one side */
    wlm_model *bare = load_from(model_bytes, model_size, NULL, 0);
    if (bare) {
        CHECK_STATUS(wlm_vocab_match(target, bare, msg, sizeof msg), WLM_ERR_TOKENIZER);
        CHECKF(strstr(msg, "no tokenizer") != NULL, "message: %s", msg);
    }
    wlm_model_free(bare);
    /* another vocabulary size: the checkpoint cut to its first 256 embedding rows */
    int32_t hdr[7];
    memcpy(hdr, model_bytes, sizeof hdr);
    const size_t dim = (size_t)hdr[0], vocab = (size_t)(hdr[5] < 0 ? -hdr[5] : hdr[5]);
    const size_t emb = vocab * dim * 4, emb2 = 256 * dim * 4;
    unsigned char *small = malloc(model_size);
    hdr[5] = hdr[5] < 0 ? -256 : 256;
    memcpy(small, hdr, sizeof hdr);
    memcpy(small + 28, model_bytes + 28, emb2);
    memcpy(small + 28 + emb2, model_bytes + 28 + emb, model_size - 28 - emb);
    wlm_model *m3 = hdr[5] < 0 ? NULL : load_from(small, model_size - emb + emb2, NULL, 0);
    if (m3) {
        CHECK_STATUS(wlm_vocab_match(target, m3, msg, sizeof msg), WLM_ERR_TOKENIZER);
        CHECKF(strstr(msg, "256 tokens") && strstr(msg, "512"), "message: %s", msg);
    }
    wlm_model_free(m3);
    free(small);
}

/* ---- greedy: identical to plain greedy decoding ------------------------------------------ */

/* The plain greedy run of the last (context, prompt, parameters) asked for, kept: each is
 * compared with several speculative runs. plain_forget() when contexts are replaced. */
static int32_t plain_key_n = -1;
static void plain_forget(void) { plain_key_n = -1; }

static const run_out *plain_run(wlm_context *c, const int32_t *toks, int32_t n,
                                const wlm_gen_params *gp) {
    static run_out plain;
    static int32_t key[128];
    static wlm_gen_params key_gp;
    static const wlm_context *key_c;
    if (plain_key_n != n || key_c != c || memcmp(key, toks, sizeof(int32_t) * (size_t)n) != 0 ||
        memcmp(&key_gp, gp, sizeof *gp) != 0) {
        run(c, toks, n, gp, NULL, &plain);
        memcpy(key, toks, sizeof(int32_t) * (size_t)n);
        plain_key_n = n;
        key_gp = *gp;
        key_c = c;
    }
    return &plain;
}

static void greedy_case(const wlm_model *m, wlm_context *c, wlm_context *d, const char *prompt,
                        const wlm_gen_params *gp, int32_t n_draft, int32_t ngram, const char *what,
                        wlm_spec_stats *sum) {
    int32_t toks[128];
    const int32_t n = tokenize(m, prompt, toks, 128);
    static run_out spec;
    const run_out *plain = plain_run(c, toks, n, gp);
    wlm_spec_params sp;
    wlm_spec_params_default(&sp);
    sp.draft = ngram ? NULL : d;
    sp.ngram = ngram;
    sp.n_draft = n_draft;
    run(c, toks, n, gp, &sp, &spec);
    char label[200];
    snprintf(label, sizeof label, "%s, k %d, \"%.20s\"", what, (int)n_draft, prompt);
    same_run(plain, &spec, label);
    CHECKF(spec.st.n_accepted <= spec.st.n_drafted && spec.st.n_rounds <= spec.n,
           "%s: stats %d rounds %d drafted %d accepted", label, (int)spec.st.n_rounds,
           (int)spec.st.n_drafted, (int)spec.st.n_accepted);
    sum->n_rounds += spec.st.n_rounds;
    sum->n_drafted += spec.st.n_drafted;
    sum->n_accepted += spec.st.n_accepted;
}

static const char *PROMPTS[] = {
    "Once upon a time",
    "Lily and Tom went to the park. Lily and Tom went to the park. Lily and",
    "The cat sat on the mat. The dog",
    "One day, a little girl named Sue found a big red ball. She",
};
#define N_PROMPTS 4

static void test_greedy(const wlm_model *m, const wlm_model *draft, const wlm_model *q4,
                        wlm_threadpool *pool) {
    tu_section("greedy: the tokens of plain greedy decoding");
    plain_forget();
    wlm_context *c = tu_context(m, 512, 1, 1, WLM_KV_F16);
    wlm_context *d = tu_context(draft, 512, 1, 1, WLM_KV_F16);
    wlm_context *dq = q4 ? tu_context(q4, 512, 1, 1, WLM_KV_F16) : NULL;
    if (!c || !d) goto out;
    wlm_gen_params gp;
    wlm_gen_params_default(&gp);
    gp.temperature = 0.0f;
    gp.max_tokens = 160;
    wlm_spec_stats model_sum = {0}, q4_sum = {0}, ngram_sum = {0};
    static const int32_t K[] = {1, 3, 8, 32};
    for (int p = 0; p < N_PROMPTS; p++)
        for (int ki = 0; ki < 4; ki++) {
            greedy_case(m, c, d, PROMPTS[p], &gp, K[ki], 0, "perturbed draft", &model_sum);
            if (dq) greedy_case(m, c, dq, PROMPTS[p], &gp, K[ki], 0, "Q4_0 draft", &q4_sum);
            greedy_case(m, c, NULL, PROMPTS[p], &gp, K[ki], 3, "ngram 3", &ngram_sum);
            greedy_case(m, c, NULL, PROMPTS[p], &gp, K[ki], 1, "ngram 1", &ngram_sum);
        }
    printf("   acceptance: perturbed draft %d/%d, Q4_0 draft %d/%d, prompt lookup %d/%d\n",
           (int)model_sum.n_accepted, (int)model_sum.n_drafted, (int)q4_sum.n_accepted,
           (int)q4_sum.n_drafted, (int)ngram_sum.n_accepted, (int)ngram_sum.n_drafted);
    /* the perturbed draft is neither always right nor always wrong: both paths ran */
    CHECK(model_sum.n_accepted > 0 && model_sum.n_accepted < model_sum.n_drafted);
    CHECK(ngram_sum.n_accepted > 0 && ngram_sum.n_accepted < ngram_sum.n_drafted);

    wlm_spec_stats s = {0};
    /* penalties depend on the history, drafts included */
    gp.repeat_penalty = 1.3f;
    gp.frequency_penalty = 0.2f;
    for (int p = 0; p < N_PROMPTS; p++) {
        greedy_case(m, c, d, PROMPTS[p], &gp, 6, 0, "penalties, draft", &s);
        greedy_case(m, c, NULL, PROMPTS[p], &gp, 6, 2, "penalties, ngram", &s);
    }
    gp.repeat_penalty = 1.0f;
    gp.frequency_penalty = 0.0f;
    /* stop strings and max_tokens inside a round */
    gp.n_stop = 1;
    strcpy(gp.stop[0], "park");
    for (int32_t mt = 1; mt <= 9; mt += 4) {
        gp.max_tokens = mt;
        greedy_case(m, c, d, PROMPTS[1], &gp, 8, 0, "stop string / max_tokens", &s);
    }
    gp.max_tokens = 160;
    greedy_case(m, c, d, PROMPTS[1], &gp, 8, 0, "stop string", &s);
    greedy_case(m, c, NULL, PROMPTS[1], &gp, 8, 3, "stop string, ngram", &s);
    gp.n_stop = 0;
    /* two threads: the same tokens */
    if (pool) {
        wlm_context_set_threadpool(c, pool);
        wlm_context_set_threadpool(d, pool);
        for (int p = 0; p < N_PROMPTS; p++) {
            greedy_case(m, c, d, PROMPTS[p], &gp, 5, 0, "2 threads, draft", &s);
            greedy_case(m, c, NULL, PROMPTS[p], &gp, 5, 3, "2 threads, ngram", &s);
        }
        wlm_context_set_threadpool(c, NULL);
        wlm_context_set_threadpool(d, NULL);
    }
    /* p_min 1: the draft never drafts, every step is plain */
    {
        int32_t toks[64];
        const int32_t n = tokenize(m, PROMPTS[0], toks, 64);
        static run_out a, b;
        run(c, toks, n, &gp, NULL, &a);
        wlm_spec_params sp;
        wlm_spec_params_default(&sp);
        sp.draft = d;
        sp.p_min = 1.0f;
        run(c, toks, n, &gp, &sp, &b);
        same_run(&a, &b, "p_min 1");
        CHECK_EQ_INT(b.st.n_rounds, 0);
    }
out:
    wlm_context_free(c);
    wlm_context_free(d);
    wlm_context_free(dq);
}

/* A full context: rounds shrink to the room left, then plain steps stop or shift. */
static void test_context_full(const wlm_model *m, const wlm_model *draft) {
    tu_section("greedy: a full context, with and without context shift");
    wlm_spec_stats s = {0};
    for (int shift = 0; shift <= 1; shift++) {
        plain_forget();
        wlm_context *c = tu_context(m, 48, 1, 1, WLM_KV_F16);
        wlm_context *d = tu_context(draft, 40, 1, 1, WLM_KV_F16); /* smaller than the target's */
        if (c && d) {
            wlm_gen_params gp;
            wlm_gen_params_default(&gp);
            gp.temperature = 0.0f;
            gp.max_tokens = shift ? 120 : 0;
            gp.context_shift = shift;
            gp.n_keep = 1;
            greedy_case(m, c, d, PROMPTS[0], &gp, 8, 0, shift ? "shift, draft" : "full, draft", &s);
            greedy_case(m, c, NULL, PROMPTS[1], &gp, 8, 3, shift ? "shift, ngram" : "full, ngram", &s);
        }
        wlm_context_free(c);
        wlm_context_free(d);
    }
}

/* ---- sampling: the target's distribution, exactly ---------------------------------------- */

/* The sampler chain of these tests, computed here in double from raw logits: repetition
 * penalty over the last `window` tokens of hist, then top-k (ties: lower id), then softmax at
 * temperature T over the survivors. p (vocab) receives the distribution. */
typedef struct chain_ref {
    float temperature, repeat_penalty;
    int32_t top_k, window;
} chain_ref;

static void ref_dist(const chain_ref *cr, const float *logits, const int32_t *hist, int32_t nh,
                     double *p, int32_t vocab) {
    double *z = malloc(sizeof(double) * (size_t)vocab);
    for (int32_t t = 0; t < vocab; t++) z[t] = logits[t];
    const float r = cr->repeat_penalty;
    uint8_t seen[512] = {0};
    for (int32_t i = nh > cr->window ? nh - cr->window : 0; i < nh; i++) {
        const int32_t t = hist[i];
        if (seen[t]) continue;
        seen[t] = 1;
        const float x = (float)z[t]; /* the sampler applies it in float */
        z[t] = x > 0.0f ? x / r : x * r;
    }
    /* top-k by z descending, then id */
    int32_t keep[64];
    tm_top_k(z, vocab, cr->top_k, keep);
    double mx = z[keep[0]], sum = 0;
    for (int32_t t = 0; t < vocab; t++) p[t] = 0;
    for (int32_t j = 0; j < cr->top_k; j++) sum += exp((z[keep[j]] - mx) / cr->temperature);
    for (int32_t j = 0; j < cr->top_k; j++) p[keep[j]] = exp((z[keep[j]] - mx) / cr->temperature) / sum;
    free(z);
}

#define N_TOKENS 3
#define MAX_OUT 128
typedef struct outcome {
    int32_t ids[N_TOKENS];
    int32_t n; /* tokens emitted; n < N_TOKENS: the generation ended (EOS) after them */
    double p;
} outcome;

/* Enumerates every sequence of up to N_TOKENS tokens the chain can produce after prompt, with
 * its probability: one plain evaluation per node of the tree. */
static void enumerate(const wlm_model *m, wlm_context *c, const chain_ref *cr, int32_t *seq,
                      int32_t n_prompt, int32_t depth, double prob, outcome *out, int *n_out) {
    const int32_t vocab = 512;
    wlm_context_reset(c);
    if (wlm_eval(c, seq, n_prompt + depth) != WLM_OK) return;
    double *p = malloc(sizeof(double) * vocab);
    ref_dist(cr, wlm_logits(c), seq, n_prompt + depth, p, vocab);
    double end = 0;
    for (int32_t t = 0; t < vocab; t++) {
        if (p[t] == 0) continue;
        if (wlm_token_is_eog(m, t) || t == 1) { /* EOS, or run.c's BOS: the generation ends */
            end += p[t];
            continue;
        }
        if (depth + 1 == N_TOKENS) {
            if (*n_out < MAX_OUT) {
                outcome *o = &out[(*n_out)++];
                memcpy(o->ids, seq + n_prompt, sizeof(int32_t) * (size_t)depth);
                o->ids[depth] = t;
                o->n = N_TOKENS;
                o->p = prob * p[t];
            }
            continue;
        }
        seq[n_prompt + depth] = t;
        enumerate(m, c, cr, seq, n_prompt, depth + 1, prob * p[t], out, n_out);
    }
    if (end > 0 && *n_out < MAX_OUT) {
        outcome *o = &out[(*n_out)++];
        memcpy(o->ids, seq + n_prompt, sizeof(int32_t) * (size_t)depth);
        o->n = depth;
        o->p = prob * end;
    }
    free(p);
}

/* Upper tail of chi-square (Wilson-Hilferty): enough to compare against 1e-4. */
static double chi2_pvalue(double x, int df) {
    if (df <= 0) return 1.0;
    const double k = df, z = (pow(x / k, 1.0 / 3) - (1 - 2 / (9 * k))) / sqrt(2 / (9 * k));
    return 0.5 * erfc(z / sqrt(2.0));
}

static void sampled_case(const wlm_model *m, wlm_context *c, wlm_context *d, const char *prompt,
                         const chain_ref *cr, int32_t n_draft, int32_t ngram, int trials,
                         const char *what) {
    int32_t seq[128];
    const int32_t n = tokenize(m, prompt, seq, 120);
    static outcome out[MAX_OUT];
    int n_out = 0;
    enumerate(m, c, cr, seq, n, 0, 1.0, out, &n_out);
    double total = 0;
    for (int i = 0; i < n_out; i++) total += out[i].p;
    CHECKF(n_out < MAX_OUT && fabs(total - 1.0) < 1e-9, "%s: %d outcomes, mass %.12f", what,
           n_out, total);
    long counts[MAX_OUT + 1] = {0};
    wlm_gen_params gp;
    wlm_gen_params_default(&gp);
    gp.temperature = cr->temperature;
    gp.top_k = cr->top_k;
    gp.top_p = 1.0f;
    gp.repeat_penalty = cr->repeat_penalty;
    gp.repeat_last_n = cr->window;
    gp.max_tokens = N_TOKENS + 1; /* a round after the first token may draft 2 and add 1 */
    gp.cache_prompt = 1; /* each trial evaluates only the prompt's last token (bitwise the same) */
    wlm_spec_params sp;
    wlm_spec_params_default(&sp);
    sp.draft = d;
    sp.ngram = ngram;
    sp.n_draft = n_draft;
    wlm_spec_stats sum = {0};
    int bad = 0;
    for (int trial = 0; trial < trials; trial++) {
        gp.seed = (uint64_t)trial * 7919 + 1;
        if (wlm_generate_begin(c, seq, n, &gp) != WLM_OK || wlm_generate_speculate(c, &sp) != WLM_OK) {
            bad++;
            continue;
        }
        int32_t ids[N_TOKENS], k = 0;
        wlm_token t;
        int s;
        while (k < N_TOKENS && (s = wlm_generate_next(c, &t)) == WLM_OK) ids[k++] = t.id;
        if (k < N_TOKENS && s < 0) {
            bad++;
            continue;
        }
        wlm_spec_stats st;
        wlm_spec_stats_get(c, &st);
        sum.n_rounds += st.n_rounds;
        sum.n_drafted += st.n_drafted;
        sum.n_accepted += st.n_accepted;
        int hit = MAX_OUT; /* not an outcome of the chain: impossible */
        for (int i = 0; i < n_out && hit == MAX_OUT; i++)
            if (out[i].n == k && memcmp(out[i].ids, ids, sizeof(int32_t) * (size_t)k) == 0) hit = i;
        counts[hit]++;
    }
    CHECKF(bad == 0, "%s: %d generations failed", what, bad);
    CHECKF(counts[MAX_OUT] == 0, "%s: %ld draws of sequences the chain cannot produce", what,
           counts[MAX_OUT]);
    /* Pearson's chi-square, cells expecting < 5 pooled */
    double stat = 0, pe = 0;
    long pc = 0;
    int cells = 0;
    for (int i = 0; i < n_out; i++) {
        const double e = out[i].p * trials;
        if (e < 5) {
            pe += e;
            pc += counts[i];
            continue;
        }
        stat += (counts[i] - e) * (counts[i] - e) / e;
        cells++;
    }
    if (pe >= 5) {
        stat += (pc - pe) * (pc - pe) / pe;
        cells++;
    }
    const double pv = chi2_pvalue(stat, cells - 1);
    printf("   %-34s %2d outcomes, chi2 %6.2f df %2d p %.4f; accepted %d of %d drafted\n", what,
           n_out, stat, cells - 1, pv, (int)sum.n_accepted, (int)sum.n_drafted);
    CHECKF(pv >= P_MIN, "%s: chi-square %.2f with %d df, p = %.3g", what, stat, cells - 1, pv);
    /* both outcomes of the rule ran: some drafts accepted, some rejected */
    CHECKF(sum.n_accepted > 0 && sum.n_accepted < sum.n_drafted, "%s: %d of %d accepted", what,
           (int)sum.n_accepted, (int)sum.n_drafted);
}

static void test_sampled(const wlm_model *m, const wlm_model *draft) {
    tu_section("sampling: joint frequencies of 3 tokens against the exact distribution");
    wlm_context *c = tu_context(m, 256, 1, 1, WLM_KV_F16);
    wlm_context *d = tu_context(draft, 256, 1, 1, WLM_KV_F16);
    if (c && d) {
        /* trials per case: 6000 (each runs a few forward passes of the model; the suite runs
         * this test under the sanitizers too), WASMLM_SPEC_TRIALS for a longer run */
        const char *env = getenv("WASMLM_SPEC_TRIALS");
        const int n = env && atoi(env) > 0 ? atoi(env) : 6000;
        const chain_ref a = {1.0f, 1.0f, 3, 64}, b = {0.7f, 1.3f, 3, 64}, e = {1.6f, 1.0f, 4, 64};
        sampled_case(m, c, d, "Once upon a time", &a, 2, 0, n, "draft, top-k 3");
        sampled_case(m, c, d, "The cat sat on the mat. The dog", &b, 2, 0, n,
                     "draft, top-k 3, T 0.7, penalty 1.3");
        sampled_case(m, c, d, "Once upon a time", &e, 3, 0, n, "draft, top-k 4, T 1.6");
        sampled_case(m, c, NULL, "Lily and Tom went to the park. Lily and Tom went to the park. Lily and",
                     &e, 3, 3, n, "prompt lookup, top-k 4, T 1.6");
    }
    wlm_context_free(c);
    wlm_context_free(d);
}

/* ---- refusals ---------------------------------------------------------------------------- */

static void test_errors(const wlm_model *m, const wlm_model *draft) {
    tu_section("refusals");
    wlm_context *c = tu_context(m, 64, 2, 1, WLM_KV_F16);
    wlm_context *d = tu_context(draft, 64, 1, 1, WLM_KV_F16);
    if (!c || !d) goto out;
    wlm_spec_params sp;
    wlm_spec_params_default(&sp);
    sp.ngram = 2;
    CHECK_STATUS(wlm_generate_speculate(c, &sp), WLM_ERR_STATE); /* no generation */
    CHECK_STATUS(wlm_generate_speculate(NULL, &sp), WLM_ERR_INVALID_ARG);
    wlm_gen_params gp;
    wlm_gen_params_default(&gp);
    int32_t p[3] = {1, 400, 401};
    CHECK_STATUS(wlm_generate_begin(c, p, 3, &gp), WLM_OK);
    CHECK_STATUS(wlm_generate_speculate(c, NULL), WLM_ERR_INVALID_ARG);
    struct { int32_t n_draft, ngram; float p_min; int draft; const char *needle; } bad[] = {
        {0, 2, 0, 0, "n_draft"}, {33, 2, 0, 0, "n_draft"}, {8, 9, 0, 0, "ngram"},
        {8, -1, 0, 0, "ngram"}, {8, 2, 1.5f, 0, "p_min"}, {8, 2, NAN, 0, "p_min"},
        {8, 0, 0, 0, "neither"}, {8, 2, 0, 1, "both"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        wlm_spec_params_default(&sp);
        sp.n_draft = bad[i].n_draft;
        sp.ngram = bad[i].ngram;
        sp.p_min = bad[i].p_min;
        sp.draft = bad[i].draft ? d : NULL;
        CHECK_STATUS(wlm_generate_speculate(c, &sp), WLM_ERR_INVALID_ARG);
        CHECKF(strstr(wlm_context_errmsg(c), bad[i].needle) != NULL, "%s", wlm_context_errmsg(c));
    }
    wlm_spec_params_default(&sp);
    sp.draft = c;
    CHECK_STATUS(wlm_generate_speculate(c, &sp), WLM_ERR_INVALID_ARG);
    /* grammar and n_probs */
    gp.grammar = "root ::= [a-z]+";
    gp.grammar_len = strlen(gp.grammar);
    CHECK_STATUS(wlm_generate_begin(c, p, 3, &gp), WLM_OK);
    wlm_spec_params_default(&sp);
    sp.ngram = 2;
    CHECK_STATUS(wlm_generate_speculate(c, &sp), WLM_ERR_UNSUPPORTED);
    CHECKF(strstr(wlm_context_errmsg(c), "grammar") != NULL, "%s", wlm_context_errmsg(c));
    gp.grammar = NULL;
    gp.grammar_len = 0;
    gp.n_probs = 3;
    CHECK_STATUS(wlm_generate_begin(c, p, 3, &gp), WLM_OK);
    CHECK_STATUS(wlm_generate_speculate(c, &sp), WLM_ERR_UNSUPPORTED);
    CHECKF(strstr(wlm_context_errmsg(c), "n_probs") != NULL, "%s", wlm_context_errmsg(c));
    gp.n_probs = 0;
    /* a batch */
    const int32_t *prompts[2] = {p, p};
    int32_t lens[2] = {3, 3};
    wlm_gen_params gps[2] = {gp, gp};
    CHECK_STATUS(wlm_generate_batch_begin(c, 2, prompts, lens, gps), WLM_OK);
    CHECK_STATUS(wlm_generate_speculate(c, &sp), WLM_ERR_STATE);
    /* a draft context without KV cache */
    wlm_context_params cp;
    wlm_context_params_default(&cp);
    cp.n_ctx = 64;
    cp.kv_cache = 0;
    wlm_context *nokv = NULL;
    CHECK_STATUS(wlm_context_new(draft, &cp, &nokv), WLM_OK);
    CHECK_STATUS(wlm_generate_begin(c, p, 3, &gp), WLM_OK);
    wlm_spec_params_default(&sp);
    sp.draft = nokv;
    CHECK_STATUS(wlm_generate_speculate(c, &sp), WLM_ERR_STATE);
    wlm_context_free(nokv);
    /* after the refusals the generation runs, and an abort ends a speculative one */
    sp.draft = d;
    CHECK_STATUS(wlm_generate_speculate(c, &sp), WLM_OK);
    wlm_token t;
    CHECK_STATUS(wlm_generate_next(c, &t), WLM_OK);
    CHECK_STATUS(wlm_generate_next(c, &t), WLM_OK);
    wlm_generate_abort(c);
    CHECK_STATUS(wlm_generate_next(c, &t), WLM_DONE);
    CHECK_EQ_INT(t.stop_reason, WLM_STOP_ABORTED);
    /* a new begin turns speculation off: plain steps, statistics kept until the next speculate */
    CHECK_STATUS(wlm_generate_begin(c, p, 3, &gp), WLM_OK);
    CHECK_STATUS(wlm_generate_next(c, &t), WLM_OK);
    CHECK_STATUS(wlm_generate_next(c, &t), WLM_OK);
    wlm_spec_stats st;
    CHECK_STATUS(wlm_spec_stats_get(c, &st), WLM_OK);
    CHECK_STATUS(wlm_spec_stats_get(NULL, &st), WLM_ERR_INVALID_ARG);
out:
    wlm_context_free(c);
    wlm_context_free(d);
}

int main(int argc, char **argv) {
    tu_find_shared(argc, argv);
    model_bytes = tu_read_shared("models/stories260K.bin", &model_size);
    tok_bytes = tu_read_shared("models/tok512.bin", &tok_size);
    if (!model_bytes || !tok_bytes) return TEST_FINISH();
    wlm_model *m = load_from(model_bytes, model_size, tok_bytes, tok_size);
    unsigned char *pb = perturbed(0.25f, 42);
    wlm_model *draft = load_from(pb, model_size, tok_bytes, tok_size);
    /* the Q4_0 quantization of the same weights, as `wasmlm quantize` writes it */
    wlm_model *q4 = NULL;
    unsigned char *q4_bytes = NULL;
    if (m) {
        const char *path = "test_speculative_q4_0.gguf";
        wlm_quantize_params qp;
        wlm_quantize_params_default(&qp);
        qp.type = WLM_TYPE_Q4_0;
        qp.name = "stories260K";
        char err[256] = "";
        if (CHECKF(wlm_quantize_model(m, path, &qp, err, sizeof err) == WLM_OK, "quantize: %s", err)) {
            FILE *f = fopen(path, "rb");
            long sz = 0;
            if (f && fseek(f, 0, SEEK_END) == 0 && (sz = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0) {
                q4_bytes = malloc((size_t)sz);
                if (q4_bytes && fread(q4_bytes, 1, (size_t)sz, f) == (size_t)sz)
                    q4 = load_from(q4_bytes, (size_t)sz, NULL, 0);
            }
            if (f) fclose(f);
            remove(path);
        }
    }
    if (q4) {
        char msg[256];
        int rc = wlm_vocab_match(m, q4, msg, sizeof msg);
        CHECKF(rc == WLM_OK, "the Q4_0 GGUF's vocabulary: %s", msg);
    }
    wlm_threadpool *pool = NULL;
    if (wlm_threadpool_new(2, &pool) != WLM_OK) pool = NULL; /* wasm without threads */
    const char *only = getenv("WASMLM_SPEC_ONLY"); /* one part alone, for profiling */
    if (m && draft && only && strcmp(only, "sampled") == 0) {
        test_sampled(m, draft);
    } else if (m && draft) {
        test_truncate(m);
        test_vocab(m);
        test_errors(m, draft);
        test_greedy(m, draft, q4, pool);
        test_context_full(m, draft);
        test_sampled(m, draft);
    }
    wlm_threadpool_free(pool);
    wlm_model_free(q4);
    free(q4_bytes);
    wlm_model_free(draft);
    free(pb);
    wlm_model_free(m);
    free(model_bytes);
    free(tok_bytes);
    return TEST_FINISH();
}
