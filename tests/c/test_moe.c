/*
 * test_moe.c — mixture-of-experts feed-forwards (src/model/moe.c) on small random GGUF models
 * written here in memory (qwen3moe), in F32, F16 and Q8_0:
 * - the logits of every position equal those of a double-precision forward pass written below
 *   from ../shared/reference/archs-2026.md (qwen3moe: softmax router, top k, renormalised
 *   weights, SwiGLU experts), whose choice of experts is checked to change from token to token;
 * - a batched prefill (70 entries: two chunks), 2 and 3 threads (a prefill, and with the wider
 *   shape decode steps too, split among them), and two sequences interleaved in one batch give
 *   logits bitwise equal to one token at a time on one thread;
 * - the loader: expert tensors of the wrong shape or expert count, a missing router, and bad
 *   expert_count / expert_used_count values are errors naming the tensor or key; the bytes read
 *   per token count k experts, not all of them.
 * llama.cpp itself checks the architecture in tests/js/oracle.test.mjs (qwen3moe-*).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "formats/gguf_write.h"
#include "kernels/quant.h"
#include "model/model.h"
#include "runtime/threadpool.h"
#include "wasmlm.h"
#include "test_util.h"
#include "test_models.h"

/* ---- the models ------------------------------------------------------------------------------ */

typedef struct spec {
    const char *arch;
    int dim, hidden, heads, kv_heads, key_len, vocab, seq, layers;
    int experts, used, ff_exp;  /* expert_count, expert_used_count, expert_feed_forward_length */
    int tied;
    int32_t type;
    const char *omit;           /* leave this tensor out */
    const char *misshape;       /* give this tensor one row too many (per expert) */
    int bad_experts;            /* the expert tensors hold one expert fewer than expert_count */
    int used_key;               /* expert_used_count written (0: the spec's) */
} spec;

static spec base_spec(const char *arch) {
    spec s = {0};
    s.arch = arch;
    s.vocab = 96;
    s.seq = 512;
    s.tied = 0;
    s.type = WLM_TYPE_F32;
    /* qwen3moe: GQA 4/2, head 32 (q_dim 128 ≠ dim), 6 experts of 64, 2 used */
    s.dim = 64, s.hidden = 160, s.heads = 4, s.kv_heads = 2, s.key_len = 32, s.layers = 3;
    s.experts = 6, s.used = 2, s.ff_exp = 64;
    return s;
}

enum { K_MAT, K_NORM, K_ROUTER };
typedef tm_tensor tdesc;
#define TENSORS_MAX(s) (8 + 16 * (size_t)(s)->layers)

static int list_tensors(const spec *s, tdesc *t) {
    const int D = s->dim, hs = s->key_len, Q = hs * s->heads, KV = hs * s->kv_heads;
    const int E = s->experts - (s->bad_experts != 0), Fe = s->ff_exp;
    int n = 0;
#define T(nm, c, r, k, ex) (snprintf(t[n].name, sizeof t[n].name, "%s", nm), t[n].cols = (c), t[n].rows = (r), t[n].kind = (k), t[n].mat = (k) == K_MAT, t[n].experts = (ex), n++)
#define TL(l, nm, c, r, k, ex) (snprintf(t[n].name, sizeof t[n].name, "blk.%d.%s", l, nm), t[n].cols = (c), t[n].rows = (r), t[n].kind = (k), t[n].mat = (k) == K_MAT, t[n].experts = (ex), n++)
    T("token_embd.weight", D, s->vocab, K_MAT, 0);
    T("output_norm.weight", D, 1, K_NORM, 0);
    if (!s->tied) T("output.weight", D, s->vocab, K_MAT, 0);
    for (int l = 0; l < s->layers; l++) {
        TL(l, "attn_norm.weight", D, 1, K_NORM, 0);
        TL(l, "attn_q.weight", D, Q, K_MAT, 0);
        TL(l, "attn_k.weight", D, KV, K_MAT, 0);
        TL(l, "attn_v.weight", D, KV, K_MAT, 0);
        TL(l, "attn_q_norm.weight", hs, 1, K_NORM, 0);
        TL(l, "attn_k_norm.weight", hs, 1, K_NORM, 0);
        TL(l, "attn_output.weight", Q, D, K_MAT, 0);
        TL(l, "ffn_norm.weight", D, 1, K_NORM, 0);
        /* the router stays F32 as in llama.cpp's quantized files (ffn_gate_inp is not
         * quantized) */
        TL(l, "ffn_gate_inp.weight", D, s->experts, K_ROUTER, 0);
        TL(l, "ffn_gate_exps.weight", D, Fe * E, K_MAT, E);
        TL(l, "ffn_up_exps.weight", D, Fe * E, K_MAT, E);
        TL(l, "ffn_down_exps.weight", Fe, D * E, K_MAT, E);
    }
#undef T
#undef TL
    return n;
}

/* The float values of tensor i (seeded by its index), as written before any quantization. */
static float *tensor_values(const tdesc *t, int i) {
    const size_t n = (size_t)t->cols * (size_t)t->rows;
    float *v = malloc(n * sizeof(float));
    tu_rng rng = {5000u + (uint32_t)i * 7919u};
    /* the router's logits spread over a few units, so the choice changes between tokens */
    const float amp = (t->kind == K_ROUTER ? 4.0f : 2.2f) / sqrtf((float)t->cols);
    for (size_t j = 0; j < n; j++)
        v[j] = t->kind == K_NORM ? 1.0f + tu_rng_uniform(&rng, -0.2f, 0.2f)
                                 : tu_rng_uniform(&rng, -amp, amp);
    return v;
}

static void key_u32(wlm_gguf_writer *w, const spec *s, const char *suffix, uint32_t v) {
    char k[96];
    snprintf(k, sizeof k, "%s.%s", s->arch, suffix);
    wlm_gguf_add_u32(w, k, v);
}

/* The GGUF file of spec s, in memory (malloc'd), or NULL. */
static unsigned char *build_model(const spec *s, size_t *size) {
    tdesc *t = calloc(TENSORS_MAX(s), sizeof *t);
    const int nt = list_tensors(s, t);
    wlm_gguf_writer w;
    wlm_gguf_writer_init(&w, NULL);
    char k[96];
    wlm_gguf_add_str(&w, "general.architecture", s->arch);
    key_u32(&w, s, "embedding_length", (uint32_t)s->dim);
    key_u32(&w, s, "feed_forward_length", (uint32_t)s->hidden);
    key_u32(&w, s, "block_count", (uint32_t)s->layers);
    key_u32(&w, s, "attention.head_count", (uint32_t)s->heads);
    key_u32(&w, s, "attention.head_count_kv", (uint32_t)s->kv_heads);
    key_u32(&w, s, "attention.key_length", (uint32_t)s->key_len);
    key_u32(&w, s, "attention.value_length", (uint32_t)s->key_len);
    key_u32(&w, s, "context_length", (uint32_t)s->seq);
    key_u32(&w, s, "expert_count", (uint32_t)s->experts);
    key_u32(&w, s, "expert_used_count", (uint32_t)(s->used_key ? s->used_key : s->used));
    key_u32(&w, s, "expert_feed_forward_length", (uint32_t)s->ff_exp);
    snprintf(k, sizeof k, "%s.attention.layer_norm_rms_epsilon", s->arch);
    wlm_gguf_add_f32(&w, k, 1e-6f);
    snprintf(k, sizeof k, "%s.rope.freq_base", s->arch);
    wlm_gguf_add_f32(&w, k, 1e6f);
    tm_write_tensors(&w, t, nt, s->type, s->omit, s->misshape, tensor_values);
    unsigned char *file = tm_finish(&w, size);
    free(t);
    return file;
}

/* ---- an independent reference in double, from archs-2026.md's qwen3moe ---------------------- */

typedef struct ref_model {
    const spec *s;
    tm_ref m;
} ref_model;

static const float *rv(const ref_model *r, const char *name) { return tm_rv(&r->m, name); }
static const float *rvl(const ref_model *r, int l, const char *name) {
    return tm_rvl(&r->m, l, name);
}

static void ref_load(ref_model *r, const spec *s) {
    tdesc *t = calloc(TENSORS_MAX(s), sizeof *t);
    r->s = s;
    tm_ref_load_owned(&r->m, t, list_tensors(s, t), s->type, tensor_values);
}

/* The activation type the engine (as llama.cpp) multiplies a matrix of the test's type with. */
static int32_t g_act_type = WLM_TYPE_F32;

/* y = W x, W (rows, cols); x first rounded through g_act_type when `round` (products with the
 * file's matrices; not the F32 router). */
static void dmat(double *y, const float *W, const double *x, int rows, int cols, int round) {
    tm_dmat(y, W, x, rows, cols, round ? g_act_type : WLM_TYPE_F32);
}
static void drms(double *y, const double *x, int n, const float *w) { tm_drms(y, x, n, w, 1e-6); }
static double dsilu(double x) { return x / (1.0 + exp(-x)); }
static void drope(double *h, int n_rot, double pos, double base) {
    for (int i = 0; i < n_rot / 2; i++) {
        const double th = pos * pow(base, -2.0 * i / n_rot);
        const double a = h[i], b = h[i + n_rot / 2];
        h[i] = a * cos(th) - b * sin(th);
        h[i + n_rot / 2] = a * sin(th) + b * cos(th);
    }
}

/* logits (n, vocab) of tok[0..n); the experts chosen at each (position, layer) into
 * chosen[(p * layers + l) * used + j] */
static void ref_forward(const ref_model *r, const int32_t *tok, int n, double *out, int *chosen) {
    const spec *s = r->s;
    const int D = s->dim, L = s->layers, hs = s->key_len, V = s->vocab;
    const int H = s->heads, KVH = s->kv_heads, Q = hs * H, KV = hs * KVH;
    const int E = s->experts, K = s->used, Fe = s->ff_exp;
    double *x = calloc((size_t)D, sizeof *x), *h = calloc((size_t)D, sizeof *h);
    double *big = calloc((size_t)(4 * (Q + D + Fe + E) + 64), sizeof *big);
    double *kc = calloc((size_t)L * n * KV, sizeof *kc), *vc = calloc((size_t)L * n * KV, sizeof *vc);
    for (int p = 0; p < n; p++) {
        const float *e = rv(r, "token_embd.weight") + (size_t)tok[p] * D;
        for (int i = 0; i < D; i++) x[i] = e[i];
        for (int l = 0; l < L; l++) {
            drms(h, x, D, rvl(r, l, "attn_norm.weight"));
            double *y = big, *q = big + D, *k = q + Q, *v = k + KV, *o = v + KV;
            dmat(q, rvl(r, l, "attn_q.weight"), h, Q, D, 1);
            dmat(k, rvl(r, l, "attn_k.weight"), h, KV, D, 1);
            dmat(v, rvl(r, l, "attn_v.weight"), h, KV, D, 1);
            for (int hh = 0; hh < H; hh++) {
                drms(q + hh * hs, q + hh * hs, hs, rvl(r, l, "attn_q_norm.weight"));
                drope(q + hh * hs, hs, p, 1e6);
            }
            for (int hh = 0; hh < KVH; hh++) {
                drms(k + hh * hs, k + hh * hs, hs, rvl(r, l, "attn_k_norm.weight"));
                drope(k + hh * hs, hs, p, 1e6);
            }
            double *kl = kc + (size_t)l * n * KV, *vl = vc + (size_t)l * n * KV;
            memcpy(kl + (size_t)p * KV, k, sizeof(double) * KV);
            memcpy(vl + (size_t)p * KV, v, sizeof(double) * KV);
            tm_dattend(o, q, kl, vl, p, H, KVH, hs);
            dmat(y, rvl(r, l, "attn_output.weight"), o, D, Q, 1);
            for (int i = 0; i < D; i++) x[i] += y[i];

            /* the mixture: softmax over all experts, the k best, weights renormalised */
            drms(h, x, D, rvl(r, l, "ffn_norm.weight"));
            double *pr = big, *g = pr + E, *u = g + Fe, *f = u + Fe, *acc = f + D;
            dmat(pr, rvl(r, l, "ffn_gate_inp.weight"), h, E, D, 0);
            double mx = pr[0], sum = 0;
            for (int i = 1; i < E; i++) mx = pr[i] > mx ? pr[i] : mx;
            for (int i = 0; i < E; i++) sum += pr[i] = exp(pr[i] - mx);
            for (int i = 0; i < E; i++) pr[i] /= sum;
            int32_t ids[16];
            double w[16], wsum = 0;
            tm_top_k(pr, E, K, ids);
            for (int j = 0; j < K; j++) {
                w[j] = pr[ids[j]];
                wsum += w[j];
                chosen[((size_t)p * L + l) * K + j] = ids[j];
            }
            for (int i = 0; i < D; i++) acc[i] = 0;
            const float *G = rvl(r, l, "ffn_gate_exps.weight"), *U = rvl(r, l, "ffn_up_exps.weight");
            const float *Dn = rvl(r, l, "ffn_down_exps.weight");
            for (int j = 0; j < K; j++) {
                const size_t ex = (size_t)ids[j];
                dmat(g, G + ex * Fe * D, h, Fe, D, 1);
                dmat(u, U + ex * Fe * D, h, Fe, D, 1);
                for (int i = 0; i < Fe; i++) g[i] = dsilu(g[i]) * u[i];
                dmat(f, Dn + ex * D * Fe, g, D, Fe, 1);
                for (int i = 0; i < D; i++) acc[i] += w[j] / wsum * f[i];
            }
            for (int i = 0; i < D; i++) x[i] += acc[i];
        }
        drms(h, x, D, rv(r, "output_norm.weight"));
        const float *wo = s->tied ? rv(r, "token_embd.weight") : rv(r, "output.weight");
        dmat(out + (size_t)p * V, wo, h, V, D, 1);
    }
    free(x);
    free(h);
    free(big);
    free(kc);
    free(vc);
}

/* ---- helpers --------------------------------------------------------------------------------- */

static wlm_model *load_spec(const spec *s, int want, const char *needle, const char *what) {
    size_t size = 0;
    unsigned char *file = build_model(s, &size);
    return tm_load(file, size, want, needle, what);
}

static void prompt_tokens(int32_t *t, int n, int vocab, uint64_t seed) {
    tu_rng rng = {seed};
    for (int i = 0; i < n; i++) t[i] = (int32_t)(tu_rng_u64(&rng) % (uint64_t)vocab);
}

/* ---- tests ----------------------------------------------------------------------------------- */

static void test_logits(spec s) {
    char what[128];
    snprintf(what, sizeof what, "%s %s", s.arch, wlm_type_get(s.type)->name);
    tu_section(what);
    wlm_model *m = load_spec(&s, WLM_OK, NULL, what);
    if (!m) return;
    for (int l = 0; l < s.layers; l++)
        CHECKF(m->w.layers[l].ffn_kind == WLM_FFN_KIND_MOE, "%s: layer %d is not MoE", what, l);
    CHECK_EQ_INT(m->hp.n_expert, s.experts);
    CHECK_EQ_INT(m->hp.n_expert_used, s.used);
    { /* bytes per token: k of the E experts */
        wlm_model_info info;
        CHECK_STATUS(wlm_model_get_info(m, &info), WLM_OK);
        const size_t one = m->w.layers[0].exp_gate.row_bytes * (size_t)s.ff_exp * 3;
        CHECKF(info.weight_bytes < (size_t)s.layers * one * (size_t)s.experts &&
                   info.weight_bytes > (size_t)s.layers * one * (size_t)s.used,
               "%s: weight_bytes %zu does not count %d of %d experts", what, info.weight_bytes,
               s.used, s.experts);
    }
    const int N = 70; /* one pass (WLM_BATCH_CHUNK_MOE); the passes below */
    int32_t t[70];
    prompt_tokens(t, N, s.vocab, 77);
    wlm_context *c = tu_context(m, 0, 2, 1, WLM_KV_F32);
    if (!c) {
        wlm_model_free(m);
        return;
    }
    float *bat = tm_logits_batched(c, t, N, s.vocab);
    ref_model r;
    ref_load(&r, &s);
    double *ref = malloc(sizeof(double) * (size_t)N * s.vocab);
    int *chosen = malloc(sizeof(int) * (size_t)N * s.layers * s.used);
    g_act_type = s.type == WLM_TYPE_Q8_0 ? WLM_TYPE_Q8_0 : WLM_TYPE_F32;
    ref_forward(&r, t, N, ref, chosen);
    g_act_type = WLM_TYPE_F32;
    /* the routing is not constant: the experts of layer 0 differ between positions, and every
     * expert is chosen somewhere */
    int changes = 0, used[64] = {0};
    for (int p = 0; p < N; p++)
        for (int l = 0; l < s.layers; l++)
            for (int j = 0; j < s.used; j++) used[chosen[((size_t)p * s.layers + l) * s.used + j]]++;
    for (int p = 1; p < N; p++) changes += chosen[(size_t)p * s.layers * s.used] !=
                                           chosen[(size_t)(p - 1) * s.layers * s.used];
    CHECKF(changes > N / 4, "%s: layer 0's first expert changed only %d times in %d tokens", what,
           changes, N);
    for (int e = 0; e < s.experts; e++) CHECKF(used[e] > 0, "%s: expert %d never chosen", what, e);
    const double worst = tm_worst_diff(ref, bat, N, s.vocab);
    const double tol = s.type == WLM_TYPE_F32 || s.type == WLM_TYPE_F16 ? 2e-4 : 5e-2;
    CHECKF(worst <= tol, "%s: logits differ from the reference by %.3g of the largest (tol %.3g)",
           what, worst, tol);
    printf("   %s: max |logit - reference| %.2e of the largest logit over %d positions, %d "
           "expert changes\n", what, worst, N, changes);
    free(ref);
    free(chosen);
    tm_ref_free(&r.m);

    /* one by one, threads, two sequences in one batch: the same bits */
    float *one = tm_logits_one_by_one(c, t, N, s.vocab);
    size_t at = 0;
    CHECKF(tm_same(one, bat, (size_t)N * s.vocab, &at), "%s: batched differs from one-by-one at %zu",
           what, at / (size_t)s.vocab);
    tm_check_threads(c, t, N, s.vocab, one, 8, what);
    int32_t u[70]; /* sequence 1, with other tokens */
    prompt_tokens(u, N, s.vocab, 99);
    tm_check_interleaved(c, t, u, N, s.vocab, one, what);
    free(one);
    free(bat);
    { /* 300 positions: three passes of WLM_BATCH_CHUNK_MOE entries, the bits of one by one */
        enum { NL = 300 };
        int32_t tl[NL];
        prompt_tokens(tl, NL, s.vocab, 55);
        float *b2 = tm_logits_batched(c, tl, NL, s.vocab);
        float *o2 = tm_logits_one_by_one(c, tl, NL, s.vocab);
        CHECKF(b2 && o2 && tm_same(o2, b2, (size_t)NL * s.vocab, &at),
               "%s: a batch of %d differs from one-by-one at %zu", what, NL, at / (size_t)s.vocab);
        free(b2);
        free(o2);
    }
    wlm_context_free(c);
    wlm_model_free(m);
}

static void test_errors(void) {
    tu_section("loader errors");
    spec s = base_spec("qwen3moe");
    s.misshape = "blk.1.ffn_up_exps.weight";
    wlm_model_free(load_spec(&s, WLM_ERR_FORMAT, "blk.1.ffn_up_exps.weight", "misshapen experts"));
    s = base_spec("qwen3moe");
    s.misshape = "blk.0.ffn_gate_inp.weight";
    wlm_model_free(load_spec(&s, WLM_ERR_FORMAT, "blk.0.ffn_gate_inp.weight", "misshapen router"));
    s = base_spec("qwen3moe");
    s.bad_experts = 1;
    wlm_model_free(load_spec(&s, WLM_ERR_FORMAT, "experts)", "one expert short"));
    s = base_spec("qwen3moe");
    s.omit = "blk.2.ffn_gate_inp.weight";
    wlm_model_free(load_spec(&s, WLM_ERR_FORMAT, "blk.2.ffn_gate_inp.weight", "no router"));
    s = base_spec("qwen3moe");
    s.omit = "blk.0.ffn_down_exps.weight";
    wlm_model_free(load_spec(&s, WLM_ERR_FORMAT, "ffn_down_exps", "no down experts"));
    s = base_spec("qwen3moe");
    s.used_key = 7; /* more than the 6 experts */
    wlm_model_free(load_spec(&s, WLM_ERR_FORMAT, "expert_used_count", "k > experts"));
    s = base_spec("qwen3moe");
    s.experts = 1; /* a MoE architecture with one expert */
    s.used = 1;
    wlm_model_free(load_spec(&s, WLM_ERR_FORMAT, "expert_count", "one expert"));
}

int main(void) {
    const int32_t types[] = {WLM_TYPE_F32, WLM_TYPE_F16, WLM_TYPE_Q8_0};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        spec s = base_spec("qwen3moe");
        s.type = types[i];
        test_logits(s);
    }
    /* wider: a decode step's expert products (3 of 10 experts, 256 × 256) are big enough for
     * the pool to split them among threads, so one token at a time is checked split too */
    for (size_t i = 0; i < 2; i++) {
        spec s = base_spec("qwen3moe");
        s.dim = 256, s.ff_exp = 256, s.experts = 10, s.used = 3, s.key_len = 64, s.layers = 2;
        s.type = types[i * 2];
        test_logits(s);
    }
    test_errors();
    return tu_finish();
}
