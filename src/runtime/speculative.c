/*
 * speculative.c — speculative decoding of a single-sequence generation (Leviathan et al. 2023,
 * arXiv:2211.17192; Chen et al. 2023, arXiv:2302.01318). Each round a drafter proposes up to k
 * tokens — a draft model with the target's vocabulary in a context of its own, or prompt lookup
 * (the tokens that followed the latest earlier occurrence of the sequence's last n-gram; Saxena
 * 2023, "Prompt Lookup Decoding") — and the target evaluates its pending token and the k drafts
 * in one batched forward pass with logits at every position. The drafts are accepted left to
 * right by the rejection rule; the first rejected one is replaced by a draw from the residual
 * distribution, or, when all are accepted, one more token is drawn from the last position. The
 * tokens so decided are handed out one per wlm_generate_next through generate.c's emission
 * (stop strings, end of generation, max_tokens), and rejected positions are dropped from both
 * KV caches. It does not sample batches or beams, follow grammars, or report alternatives.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "runtime/errors.h"

typedef struct wlm_spec_state wlm_spec_state;

/* One token decided by a round, waiting to be emitted. */
typedef struct spec_entry {
    int32_t id;
    int32_t n_past;    /* wlm_token.n_past: the sequence's length with this token */
    int32_t cached;    /* 1: an accepted draft, already in the target's KV cache */
    float prob, logprob, prob_sampled;
} spec_entry;

struct wlm_spec_state {
    int active;
    wlm_context *draft;       /* borrowed; NULL with prompt lookup */
    int32_t n_draft, ngram;
    float p_min;
    int greedy;               /* the target's temperature is 0 */
    int32_t vocab;
    int32_t cap;              /* n_draft the buffers were sized for */
    wlm_sampler dsamp;        /* the draft model's chain: the target's parameters */
    float *q;                 /* (cap, vocab) the draft model's distributions (sampled only) */
    float *p;                 /* (vocab) the target's distribution at one position */
    float *r;                 /* (vocab) the residual distribution */
    int32_t *tok;             /* (cap + 1) the pending token, then the drafts */
    uint8_t *want;            /* (cap + 1) all 1: logits at every verified position */
    spec_entry *queue;        /* (cap + 1) */
    int32_t qn, qhead;
    int32_t *text;            /* (text_cap) the history without its image rows (text_only) */
    int32_t text_cap;
    /* a deferred target (runtime/deferred.c): the round's verification is recorded and waits
     * for its logits (wlm_spec_resume decides it) */
    int awaiting;
    int32_t aw_n0, aw_nd;     /* the round's n_past before it, and its drafts */
    wlm_spec_stats stats;
};

void wlm_spec_params_default(wlm_spec_params *p) {
    if (!p) return;
    memset(p, 0, sizeof *p);
    p->n_draft = 8;
}

void wlm_spec_free(wlm_spec_state *s) {
    if (!s) return;
    wlm_sampler_free(&s->dsamp);
    free(s->q);
    free(s->p);
    free(s->r);
    free(s->tok);
    free(s->want);
    free(s->queue);
    free(s->text);
    free(s);
}

void wlm_spec_end(wlm_context *c) {
    if (!c || !c->spec) return;
    c->spec->active = 0;
    c->spec->awaiting = 0;
    c->spec->qn = c->spec->qhead = 0;
}

int wlm_spec_awaiting(const wlm_context *c) { return c && c->spec && c->spec->awaiting; }

int wlm_spec_stats_get(const wlm_context *ctx, wlm_spec_stats *out) {
    if (!ctx || !out) return WLM_ERR_INVALID_ARG;
    if (ctx->spec) *out = ctx->spec->stats;
    else memset(out, 0, sizeof *out);
    return WLM_OK;
}

/* ---- vocabulary check --------------------------------------------------------------------- */

/* A message into err (when given), returning WLM_ERR_TOKENIZER: runtime/errors.h's wlm_errorf. */
#define say(err, errlen, ...) wlm_errorf((err), (errlen), WLM_ERR_TOKENIZER, __VA_ARGS__)

int wlm_vocab_match(const wlm_model *target, const wlm_model *draft, char *msg, size_t msg_size) {
    if (msg && msg_size) msg[0] = '\0';
    if (!target || !draft || !target->loaded || !draft->loaded) {
        if (msg && msg_size) snprintf(msg, msg_size, "a model is NULL or did not load");
        return WLM_ERR_INVALID_ARG;
    }
    const int32_t n = target->hp.vocab_size;
    if (draft->hp.vocab_size != n)
        return say(msg, msg_size,
                   "the draft model's vocabulary has %d tokens and the target's %d: speculative "
                   "decoding needs the same vocabulary",
                   (int)draft->hp.vocab_size, (int)n);
    if (target->has_tokenizer != draft->has_tokenizer)
        return say(msg, msg_size, "the %s model has no tokenizer loaded: the vocabularies "
                                  "cannot be compared",
                   target->has_tokenizer ? "draft" : "target");
    if (!target->has_tokenizer) return WLM_OK; /* sizes alone: nothing else to compare */
    if (target->tok.bos_id != draft->tok.bos_id || target->tok.eos_id != draft->tok.eos_id)
        return say(msg, msg_size,
                   "the draft model's BOS / EOS ids (%d / %d) differ from the target's (%d / %d)",
                   (int)draft->tok.bos_id, (int)draft->tok.eos_id, (int)target->tok.bos_id,
                   (int)target->tok.eos_id);
    /* From id 5 on, as llama.cpp's speculative example: the first ids are special tokens whose
     * spelling depends on the file format (llama2.c's tokenizer.bin writes BOS as "\n<s>\n", a
     * GGUF "<s>"); their ids are compared above. */
    for (int32_t t = n > 5 ? 5 : 0; t < n; t++) {
        /* the bytes each token decodes to (llama2.c's " t" and GGUF's "\u2581t" are one
         * token), else the entries as written */
        size_t la = 0, lb = 0;
        const char *a = wlm_token_piece(target, -1, t, &la);
        const char *b = wlm_token_piece(draft, -1, t, &lb);
        if (a && b && la == lb && memcmp(a, b, la) == 0) continue;
        a = wlm_token_text(target, t, &la);
        b = wlm_token_text(draft, t, &lb);
        if (!a || !b || la != lb || memcmp(a, b, la) != 0)
            return say(msg, msg_size,
                       "token %d is \"%.*s\" in the target's vocabulary and \"%.*s\" in the draft "
                       "model's: speculative decoding needs the same vocabulary",
                       (int)t, (int)(la > 40 ? 40 : la), a ? a : "", (int)(lb > 40 ? 40 : lb),
                       b ? b : "");
    }
    return WLM_OK;
}

/* ---- set-up ------------------------------------------------------------------------------- */

/* The wlm_gen_params of the sampler chain s runs (its copies of the lists are borrowed). */
static void chain_params(const wlm_sampler *s, wlm_gen_params *p) {
    wlm_gen_params_default(p);
    p->temperature = s->temperature;
    p->top_k = s->top_k;
    p->top_p = s->top_p;
    p->min_p = s->min_p;
    p->typical_p = s->typical_p;
    p->repeat_penalty = s->repeat_penalty;
    p->repeat_last_n = s->repeat_last_n;
    p->presence_penalty = s->presence_penalty;
    p->frequency_penalty = s->frequency_penalty;
    p->n_logit_bias = s->n_logit_bias;
    p->logit_bias = s->logit_bias;
    p->n_banned = s->n_banned;
    p->banned = s->banned;
    p->order = s->order;
}

static int grow(wlm_spec_state *s, int32_t cap, int32_t vocab, int with_q) {
    const size_t v = (size_t)vocab, k = (size_t)cap;
    if (cap > s->cap || vocab != s->vocab || !s->p) {
        free(s->p);
        free(s->r);
        free(s->tok);
        free(s->want);
        free(s->queue);
        free(s->q);
        s->q = NULL;
        s->p = malloc(sizeof(float) * v);
        s->r = malloc(sizeof(float) * v);
        s->tok = malloc(sizeof(int32_t) * (k + 1));
        s->want = malloc(k + 1);
        s->queue = malloc(sizeof(spec_entry) * (k + 1));
        s->cap = cap;
        s->vocab = vocab;
        if (!s->p || !s->r || !s->tok || !s->want || !s->queue) {
            s->cap = 0;
            return WLM_ERR_NOMEM;
        }
    }
    if (with_q && !s->q) {
        if ((uint64_t)k * v > (uint64_t)SIZE_MAX / sizeof(float)) return WLM_ERR_NOMEM;
        s->q = malloc(sizeof(float) * k * v);
        if (!s->q) return WLM_ERR_NOMEM;
    }
    memset(s->want, 1, k + 1);
    return WLM_OK;
}

/* The history the drafters see: hist[0..n) without its image rows (WLM_TOKEN_EMBD, a media
 * prompt's: vision/sequence.c), in *m tokens — hist itself when it has none. A draft model
 * without the mmproj cannot see an image, so it drafts from the text around it, and prompt
 * lookup never proposes an image row; the target, which holds the image, verifies every draft,
 * so greedy output stays plain greedy decoding's. NULL when out of memory. */
static const int32_t *text_only(wlm_spec_state *sp, const int32_t *hist, int32_t n, int32_t *m) {
    int32_t rows = 0;
    for (int32_t i = 0; i < n; i++) rows += hist[i] == WLM_TOKEN_EMBD;
    *m = n - rows;
    if (rows == 0) return hist;
    if (n > sp->text_cap) {
        int32_t *t = realloc(sp->text, sizeof(int32_t) * (size_t)n);
        if (!t) return NULL;
        sp->text = t;
        sp->text_cap = n;
    }
    int32_t k = 0;
    for (int32_t i = 0; i < n; i++)
        if (hist[i] != WLM_TOKEN_EMBD) sp->text[k++] = hist[i];
    return sp->text;
}

/* Makes the draft context's sequence 0 hold hist[0..n) with the logits of its last token:
 * keeps the longest common prefix it already holds and evaluates the rest in one batch.
 * Returns 1 when done, 0 when the draft's context cannot hold n tokens, or a negative status. */
static int draft_sync(wlm_spec_state *sp, const int32_t *hist, int32_t n) {
    wlm_context *d = sp->draft;
    if (n < 1 || n > d->n_ctx) return 0;
    const wlm_seq *ds = &d->seqs[0];
    int32_t lim = ds->n_past < n - 1 ? ds->n_past : n - 1; /* the last token is re-evaluated */
    if (lim > ds->exact) lim = ds->exact;
    int32_t keep = 0;
    while (keep < lim && ds->tokens[keep] == hist[keep]) keep++;
    wlm_seq_truncate_internal(d, 0, keep);
    int rc = wlm_eval_entries(d, hist + keep, NULL, NULL, n - keep);
    return rc == WLM_OK ? 1 : rc;
}

int wlm_generate_speculate(wlm_context *ctx, const wlm_spec_params *params) {
    if (!ctx) return WLM_ERR_INVALID_ARG;
    ctx->errmsg[0] = '\0';
    if (!ctx->model || !ctx->seqs)
        return wlm_set_error(ctx->errmsg, WLM_ERR_STATE, "context has no model");
    if (!params) return wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG, "params is NULL");
    if (ctx->n_gen != 1 || !ctx->gens[0].active || ctx->beam.active)
        return wlm_set_error(ctx->errmsg, WLM_ERR_STATE,
                             "speculative decoding needs a single-sequence generation in progress "
                             "(call wlm_generate_begin first; batches and beams are not supported)");
    const wlm_spec_params *p = params;
    if (p->n_draft < 1 || p->n_draft > WLM_MAX_DRAFT)
        return wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG, "n_draft must be in 1..%d (got %d)",
                             WLM_MAX_DRAFT, (int)p->n_draft);
    if (p->ngram < 0 || p->ngram > WLM_MAX_NGRAM)
        return wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG,
                             "ngram must be in 0..%d, 0 = off (got %d)", WLM_MAX_NGRAM,
                             (int)p->ngram);
    if (!(p->p_min >= 0.0f && p->p_min <= 1.0f))
        return wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG,
                             "p_min must be in [0, 1], 0 = off (got %g)", (double)p->p_min);
    if ((p->draft != NULL) == (p->ngram > 0))
        return wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG,
                             "give either a draft context or ngram > 0 (prompt lookup), not %s",
                             p->draft ? "both" : "neither");
    if (!ctx->kv_cache)
        return wlm_set_error(ctx->errmsg, WLM_ERR_STATE,
                             "speculative decoding needs a context with a KV cache");
    if (p->draft && p->draft->deferred)
        return wlm_set_error(ctx->errmsg, WLM_ERR_UNSUPPORTED,
                             "the draft context's forward pass is deferred to another backend "
                             "(e.g. WebGPU): a draft model runs on the CPU (the target may be "
                             "deferred)");
    wlm_generation *g = &ctx->gens[0];
    if (g->sampler.matcher)
        return wlm_set_error(ctx->errmsg, WLM_ERR_UNSUPPORTED,
                             "speculative decoding does not support grammars (the parse state "
                             "would have to follow every drafted token and back)");
    if (g->sampler.n_probs > 0)
        return wlm_set_error(ctx->errmsg, WLM_ERR_UNSUPPORTED,
                             "speculative decoding does not report alternatives: n_probs must "
                             "be 0 (got %d)",
                             (int)g->sampler.n_probs);
    wlm_context *d = p->draft;
    if (d) {
        if (d == ctx)
            return wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG,
                                 "the draft context must be another context than the target's");
        if (!d->model || !d->seqs)
            return wlm_set_error(ctx->errmsg, WLM_ERR_STATE, "the draft context has no model");
        if (!d->kv_cache)
            return wlm_set_error(ctx->errmsg, WLM_ERR_STATE,
                                 "the draft context needs a KV cache");
        int busy = d->beam.active;
        for (int32_t i = 0; i < d->n_gen; i++) busy |= d->gens[i].active;
        if (busy)
            return wlm_set_error(ctx->errmsg, WLM_ERR_STATE,
                                 "the draft context has a generation in progress");
        char msg[WLM_ERRMSG_SIZE];
        int rc = wlm_vocab_match(ctx->model, d->model, msg, sizeof msg);
        if (rc != WLM_OK) return wlm_set_error(ctx->errmsg, rc, "%s", msg);
    }
    if (!ctx->spec) {
        ctx->spec = calloc(1, sizeof *ctx->spec);
        if (!ctx->spec) return wlm_set_error(ctx->errmsg, WLM_ERR_NOMEM, "out of memory");
    }
    wlm_spec_state *sp = ctx->spec;
    sp->active = 0;
    sp->awaiting = 0;
    sp->qn = sp->qhead = 0;
    sp->draft = d;
    sp->n_draft = p->n_draft;
    sp->ngram = p->ngram;
    sp->p_min = p->p_min;
    sp->greedy = g->sampler.temperature == 0.0f;
    memset(&sp->stats, 0, sizeof sp->stats);
    const int32_t vocab = ctx->model->hp.vocab_size;
    int rc = grow(sp, p->n_draft, vocab, d && !sp->greedy);
    if (rc == WLM_OK && d) {
        wlm_gen_params gp;
        chain_params(&g->sampler, &gp);
        rc = wlm_sampler_init(&sp->dsamp, vocab, &gp);
    }
    if (rc != WLM_OK)
        return wlm_set_error(ctx->errmsg, rc, "out of memory for speculative decoding");
    if (d) { /* the draft's prefill now, so that it counts as prefill */
        const wlm_seq *s = &ctx->seqs[0];
        int32_t n = 0;
        const int32_t *hist = text_only(sp, s->tokens, s->n_past, &n);
        if (!hist)
            return wlm_set_error(ctx->errmsg, WLM_ERR_NOMEM, "out of memory for speculative decoding");
        rc = draft_sync(sp, hist, n);
        if (rc < 0) return wlm_set_error(ctx->errmsg, rc, "draft model: %s", d->errmsg);
    }
    sp->active = 1;
    return WLM_OK;
}

/* ---- a round ------------------------------------------------------------------------------ */

/* A draw from the weights w[0..n) (not necessarily normalised) with coin u in [0, 1): the first
 * token whose running sum exceeds u × total; -1 when there is no positive weight. */
static int32_t draw_dense(const float *w, int32_t n, float u) {
    double total = 0.0;
    for (int32_t i = 0; i < n; i++)
        if (w[i] > 0.0f) total += w[i];
    if (!(total > 0.0)) return -1;
    const double r = (double)u * total;
    double cdf = 0.0;
    int32_t last = -1;
    for (int32_t i = 0; i < n; i++) {
        if (!(w[i] > 0.0f)) continue;
        cdf += w[i];
        last = i;
        if (r < cdf) return i;
    }
    return last; /* rounding: the last token of positive weight */
}

/* Prompt lookup: the tokens that followed the latest earlier occurrence of the last n tokens of
 * hist[0..len), for n = ngram down to 1 (the longest match wins); up to k into out. */
static int32_t draft_ngram(const wlm_spec_state *sp, const int32_t *hist, int32_t len, int32_t k,
                           int32_t *out) {
    for (int32_t n = sp->ngram < len - 1 ? sp->ngram : len - 1; n >= 1; n--) {
        const int32_t *pat = hist + len - n;
        for (int32_t i = len - n - 1; i >= 0; i--) {
            if (hist[i] != pat[0] || memcmp(hist + i, pat, sizeof(int32_t) * (size_t)n) != 0)
                continue;
            int32_t m = len - (i + n);
            if (m > k) m = k;
            memcpy(out, hist + i + n, sizeof(int32_t) * (size_t)m);
            return m;
        }
    }
    return 0;
}

/* The model probability of the argmax of raw logits (for p_min with a greedy draft). */
static float top_prob(const float *z, int32_t n, int32_t t) {
    float mx = z[t];
    double sum = 0.0;
    for (int32_t i = 0; i < n; i++)
        if (z[i] > -INFINITY) sum += exp((double)z[i] - mx);
    return sum > 0.0 ? (float)(1.0 / sum) : 0.0f;
}

/* The draft model proposes up to k tokens after hist[0..len) into out (and, sampling, their
 * distributions into sp->q); returns how many, or a negative status. */
static int32_t draft_model(wlm_spec_state *sp, uint64_t *rng, const int32_t *hist, int32_t len,
                           int32_t k, int32_t *out) {
    wlm_context *d = sp->draft;
    if (k > d->n_ctx - len + 1) k = d->n_ctx - len + 1; /* drafts 1..k-1 are evaluated */
    if (k < 1) return 0;
    int rc = draft_sync(sp, hist, len);
    if (rc <= 0) return rc;
    /* a recurrent draft: its state here, where the next round's draft_sync cuts back to at the
     * earliest (the drafts after it are evaluated one by one, so there is no verification pass
     * to keep each position's copy); without it that cut would replay from position 0 */
    wlm_state_snapshot(d, 0, WLM_SNAP_SPEC);
    const int32_t vocab = sp->vocab;
    int32_t nd = 0;
    for (int32_t j = 0; j < k; j++) {
        const float *logits = wlm_logits(d);
        const wlm_seq *ds = &d->seqs[0];
        int32_t t;
        if (sp->greedy) {
            t = wlm_sampler_distribution(&sp->dsamp, logits, ds->tokens, ds->n_past, NULL);
            if (t < 0) break;
            if (sp->p_min > 0.0f && top_prob(logits, vocab, t) < sp->p_min) break;
        } else {
            float *q = sp->q + (size_t)j * (size_t)vocab;
            if (wlm_sampler_distribution(&sp->dsamp, logits, ds->tokens, ds->n_past, q) < 0) break;
            if (sp->p_min > 0.0f) {
                float qmax = 0.0f;
                for (int32_t i = 0; i < vocab; i++) qmax = q[i] > qmax ? q[i] : qmax;
                if (qmax < sp->p_min) break;
            }
            t = draw_dense(q, vocab, wlm_rng_f32(rng));
            if (t < 0) break;
        }
        out[nd++] = t;
        if (j + 1 < k && wlm_eval_entries(d, &t, NULL, NULL, 1) != WLM_OK) break;
    }
    return nd;
}

/* Fills e's model probability and log-probability of token t from raw logits z, with the
 * sampler's arithmetic for wlm_token.prob / logprob (sampler.c: NaN as -inf, +inf as FLT_MAX,
 * expf of z - max summed in double), so they are the floats plain decoding reports. */
static float sane(float x) { return x != x ? -INFINITY : x > FLT_MAX ? FLT_MAX : x; }

static void entry_probs(spec_entry *e, const float *z, int32_t n, int32_t t) {
    float mx = -INFINITY;
    for (int32_t i = 0; i < n; i++)
        if (sane(z[i]) > mx) mx = sane(z[i]);
    double sum = 0.0;
    for (int32_t i = 0; i < n; i++) sum += (double)expf(sane(z[i]) - mx);
    const double lse = (double)mx + log(sum);
    e->logprob = (float)((double)sane(z[t]) - lse);
    e->prob = expf(sane(z[t]) - mx) * (float)(1.0 / sum);
}

/* A round's decision, once the logits of the pending token (at n_past n0) and its nd drafts are
 * in the context: accepts drafts left to right by the rule, queues the tokens so decided, and
 * drops the rejected positions. Returns 1, or a negative status. */
static int round_decide(wlm_context *c, int32_t n0, int32_t nd) {
    wlm_spec_state *sp = c->spec;
    wlm_generation *g = &c->gens[0];
    wlm_seq *s = &c->seqs[0];
    const int32_t *tok = sp->tok;
    uint64_t *rng = &g->sampler.rng_state;
    /* s->tokens[n0 .. n0 + nd] now hold tok[0 .. nd] */
    const int32_t vocab = sp->vocab;
    int32_t acc = 0;
    sp->qn = sp->qhead = 0;
    for (int32_t j = 0; j <= nd; j++) {
        const float *logits = wlm_logits_ith(c, j);
        const int32_t nh = n0 + 1 + j; /* the target's history at this position */
        spec_entry *e = &sp->queue[sp->qn];
        int32_t x;
        int accepted = 0;
        if (sp->greedy) {
            x = wlm_sampler_distribution(&g->sampler, logits, s->tokens, nh, NULL);
            if (x < 0) return x;
            accepted = j < nd && tok[j + 1] == x;
            e->prob_sampled = 1.0f;
        } else {
            float *p = sp->p;
            if ((x = wlm_sampler_distribution(&g->sampler, logits, s->tokens, nh, p)) < 0) return x;
            if (j == nd) { /* every draft accepted: one more token from the last position */
                x = draw_dense(p, vocab, wlm_rng_f32(rng));
            } else {
                const int32_t dt = tok[j + 1];
                const float *q = sp->draft ? sp->q + (size_t)j * (size_t)vocab : NULL;
                const float qd = q ? q[dt] : 1.0f; /* prompt lookup: all mass on its draft */
                /* accept with probability min(1, p / q) */
                if (wlm_rng_f32(rng) * qd < p[dt]) {
                    accepted = 1;
                    x = dt;
                } else { /* the residual max(0, p - q), renormalised by the draw */
                    float *r = sp->r;
                    if (q)
                        for (int32_t t = 0; t < vocab; t++) r[t] = p[t] > q[t] ? p[t] - q[t] : 0.0f;
                    else {
                        memcpy(r, p, sizeof(float) * (size_t)vocab);
                        r[dt] = 0.0f;
                    }
                    x = draw_dense(r, vocab, wlm_rng_f32(rng));
                    if (x < 0) x = draw_dense(p, vocab, wlm_rng_f32(rng)); /* p = q up to rounding */
                }
            }
            if (x < 0) return wlm_set_error(c->errmsg, WLM_ERR_STATE, "no token to sample");
            e->prob_sampled = p[x];
        }
        e->id = x;
        e->cached = accepted;
        e->n_past = n0 + 2 + j;
        entry_probs(e, logits, vocab, x);
        sp->qn++;
        if (!accepted) {
            g->logit_entry = j; /* the logits the last token came from (wlm_sampler_preview) */
            break;
        }
        acc++;
    }
    wlm_seq_truncate_internal(c, 0, n0 + 1 + acc); /* the pending token and accepted drafts */
    wlm_state_roll_drop(c);
    sp->stats.n_rounds++;
    sp->stats.n_drafted += nd;
    sp->stats.n_accepted += acc;
    return 1;
}

/* One round: draft, then verify in one forward pass (round_decide). Returns 1 when it queued
 * tokens, 0 when no round was possible (the caller takes a plain step), WLM_NEED_LOGITS when the
 * context is deferred (the verification was recorded: wlm_spec_resume decides it once the
 * logits are supplied), or a negative status. */
static int round_run(wlm_context *c) {
    wlm_spec_state *sp = c->spec;
    wlm_generation *g = &c->gens[0];
    wlm_seq *s = &c->seqs[0];
    if (!g->active || g->done || c->gen_aborted || g->pending < 0) return 0;
    int32_t k = sp->n_draft;
    if (g->max_tokens > 0) {
        const int32_t left = g->max_tokens - g->n_generated; /* tokens still to emit */
        if (k > left - 1) k = left - 1;
    }
    const int32_t n0 = s->n_past;
    if (k > c->n_ctx - n0 - 1) k = c->n_ctx - n0 - 1; /* room for the pending token + k */
    if (k < 1) return 0;
    /* the history the drafters see: the sequence and its pending token */
    s->tokens[n0] = g->pending;
    int32_t *tok = sp->tok;
    tok[0] = g->pending;
    uint64_t *rng = &g->sampler.rng_state;
    int32_t nh = 0;
    const int32_t *hist = text_only(sp, s->tokens, n0 + 1, &nh);
    if (!hist) return wlm_set_error(c->errmsg, WLM_ERR_NOMEM, "out of memory for speculative decoding");
    int32_t nd = sp->draft ? draft_model(sp, rng, hist, nh, k, tok + 1)
                           : draft_ngram(sp, hist, nh, k, tok + 1);
    if (nd < 0) return wlm_set_error(c->errmsg, nd, "draft model: %s", sp->draft->errmsg);
    if (nd == 0) return 0;
    /* a recurrent state cannot drop rejected drafts: round_decide's truncation takes the
     * state of the last accepted position (context.c's rollback: a copy the pass keeps of each
     * position's, or the snapshot taken here and the accepted tokens evaluated again) */
    wlm_state_roll_begin(c, 0, nd + 1);
    int rc = wlm_eval_entries(c, tok, NULL, sp->want, nd + 1);
    wlm_state_roll_recorded(c);
    if (rc != WLM_OK) {
        wlm_state_roll_drop(c);
        return rc;
    }
    if (c->deferred) { /* the verification runs elsewhere: decided by wlm_spec_resume */
        c->dfr_exact = 1; /* its logits as one token at a time's: greedy is plain greedy */
        sp->awaiting = 1;
        sp->aw_n0 = n0;
        sp->aw_nd = nd;
        return WLM_NEED_LOGITS;
    }
    return round_decide(c, n0, nd);
}

/* out says no token (a step that waits for its logits, or failed); returns rc. */
static int no_token(wlm_token *out, int rc) {
    memset(out, 0, sizeof *out);
    out->piece = "";
    out->id = -1;
    return rc;
}

/* Ends the generation after a failed round. */
static int round_failed(wlm_context *c, wlm_token *out, int rc) {
    c->gens[0].active = 0;
    return no_token(out, rc);
}

/* Emits the next queued token, or takes a plain step when none is queued (ended meanwhile, no
 * round possible); wlm_generate_next's return value. */
static int emit_next(wlm_context *c, wlm_token *out) {
    wlm_spec_state *sp = c->spec;
    wlm_generation *g = &c->gens[0];
    if (sp->qhead < sp->qn && g->active && !g->done && !c->gen_aborted &&
        !(g->max_tokens > 0 && g->n_generated >= g->max_tokens)) {
        const spec_entry *e = &sp->queue[sp->qhead++];
        memset(out, 0, sizeof *out);
        out->piece = "";
        int rc = wlm_gen_emit(c, 0, e->id, out);
        if (rc < 0) return rc;
        if (out->status == WLM_OK) {
            out->prob = e->prob;
            out->logprob = e->logprob;
            out->prob_sampled = e->prob_sampled;
            out->n_past = e->n_past;
            if (e->cached) g->pending = -1; /* already evaluated by the round */
        }
        return out->status;
    }
    sp->qn = sp->qhead = 0;
    int rc = wlm_generate_batch_next(c, out); /* deferred: may wait for logits too */
    return rc < 0 || rc == WLM_NEED_LOGITS ? rc : out->status;
}

int wlm_spec_next(wlm_context *c, wlm_token *out) {
    wlm_spec_state *sp = c->spec;
    if (sp->awaiting) { /* the round that waited for its logits is dropped (as a plain step's) */
        sp->awaiting = 0;
        wlm_deferred_drop(c);
    }
    if (sp->active && sp->qhead == sp->qn) {
        int rc = round_run(c);
        if (rc == WLM_NEED_LOGITS) return no_token(out, rc);
        if (rc < 0) return round_failed(c, out, rc);
    }
    return emit_next(c, out);
}

int wlm_spec_resume(wlm_context *c, wlm_token *out) {
    wlm_spec_state *sp = c->spec;
    if (c->dfr_n > 0)
        return wlm_set_error(c->errmsg, WLM_ERR_STATE, "the round's logits were not supplied");
    sp->awaiting = 0;
    int rc = round_decide(c, sp->aw_n0, sp->aw_nd);
    if (rc < 0) return round_failed(c, out, rc);
    return emit_next(c, out);
}
