/*
 * test_hybrid.c — the hybrid architectures (qwen35: Gated DeltaNet + gated attention; lfm2:
 * short convolutions + GQA attention) on small random GGUF models written here in memory, in
 * F32, F16 and Q8_0, with several layer patterns:
 * - the logits of every position equal those of a double-precision forward pass written below
 *   from ../shared/reference/archs-2026.md (sections 1.3 and 2.3), state and all;
 * - a batched prefill, 2 and 3 threads, and two sequences interleaved in one batch give logits
 *   bitwise equal to one token at a time on one thread;
 * - the recurrent state per sequence: a fork continues as the original would; a truncation
 *   (restore a snapshot, replay) continues exactly as a fresh evaluation of the kept tokens; the
 *   prompt cache of wlm_generate_begin and speculative decoding give plain decoding's tokens;
 *   a sequence added to a running batch (continuous batching) generates what it does alone;
 * - speculative rollback, both strategies (a copy of each verified position's state, or the
 *   snapshot and a replay): a rejection at every position continues as a fresh evaluation, and
 *   greedy speculative decoding (prompt lookup, a Q8_0 draft) gives plain greedy's tokens;
 *   kv_stats counts the state; a context shift is refused naming the reason;
 * - a deferred context (the WebGPU backend's, runtime/deferred.c) keeps the same snapshot slots
 *   as orders to its backend: which positions to copy, which copy to restore after a cut back
 *   (only one the backend took), forgotten past a cut, a dropped batch and a fork;
 * - kinds that contradict the tensors, per-layer arrays of the wrong length and bad shapes are
 *   errors naming the key or tensor.
 * llama.cpp itself checks the same architectures in tests/js/oracle.test.mjs.
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


static int has(const char *arch, const char *a) { return strcmp(arch, a) == 0; }

/* ---- the models ------------------------------------------------------------------------------ */

typedef struct spec {
    const char *arch;
    int dim, hidden, heads, kv_heads, key_len, vocab, seq;
    const char *pattern;        /* one letter per layer: 'A' attention, 'R' recurrent */
    int explicit_kinds;         /* qwen35: attention.recurrent_layers (else the interval) */
    int interval;               /* qwen35: full_attention_interval written (0: absent, 4) */
    int conv;                   /* K (qwen35 ssm.conv_kernel) or L (lfm2 shortconv.l_cache) */
    int d_state, hk, hv;        /* qwen35 DeltaNet */
    int n_rot;                  /* qwen35 partial RoPE */
    int32_t sections[4];        /* qwen35 rope.dimension_sections */
    int tied;
    int32_t type;
    const char *omit;           /* leave this tensor out */
    const char *misshape;       /* give this tensor one row too many */
    const char *omit_key;       /* leave this key out */
    int bad_array;              /* per-layer arrays one entry short */
} spec;

static int n_layers(const spec *s) { return (int)strlen(s->pattern); }
static int rec(const spec *s, int l) { return s->pattern[l] == 'R'; }
static int head_size(const spec *s) { return s->key_len ? s->key_len : s->dim / s->heads; }
static int channels(const spec *s) {
    return has(s->arch, "qwen35") ? 2 * s->hk * s->d_state + s->hv * s->d_state : s->dim;
}

static spec base_spec(const char *arch) {
    spec s = {0};
    s.arch = arch;
    s.vocab = 96;
    s.seq = 512;
    s.tied = 1;
    s.type = WLM_TYPE_F32;
    if (has(arch, "qwen35")) { /* GQA 4/2, head 32 (q_dim 128 ≠ dim), HV = 2 HK */
        s.dim = 64, s.hidden = 96, s.heads = 4, s.kv_heads = 2, s.key_len = 32;
        s.pattern = "RRRARA", s.explicit_kinds = 1;
        s.conv = 4, s.d_state = 16, s.hk = 2, s.hv = 4, s.n_rot = 8;
        s.sections[0] = 2, s.sections[1] = 1, s.sections[2] = 1, s.sections[3] = 0;
    } else { /* lfm2: head 16 = dim / heads */
        s.dim = 64, s.hidden = 96, s.heads = 4, s.kv_heads = 2;
        s.pattern = "RRARRA";
        s.conv = 3;
    }
    return s;
}

enum { K_MAT, K_NORM, K_BIAS, K_CONV, K_A, K_DT };
typedef tm_tensor tdesc;
/* room for every tensor of spec s */
#define TENSORS_MAX(s) (16 + 16 * (size_t)n_layers(s))

static int list_tensors(const spec *s, tdesc *t) {
    const int D = s->dim, F = s->hidden, hs = head_size(s);
    const int Q = hs * s->heads, KV = hs * s->kv_heads, C = channels(s);
    const int q35 = has(s->arch, "qwen35");
    int n = 0;
#define T(nm, c, r, k) (snprintf(t[n].name, sizeof t[n].name, "%s", nm), t[n].cols = (c), t[n].rows = (r), t[n].kind = (k), t[n].mat = (k) == K_MAT || ((k) == K_CONV && s->type == WLM_TYPE_F16), n++)
#define TL(l, nm, c, r, k) (snprintf(t[n].name, sizeof t[n].name, "blk.%d.%s", l, nm), t[n].cols = (c), t[n].rows = (r), t[n].kind = (k), t[n].mat = (k) == K_MAT || ((k) == K_CONV && s->type == WLM_TYPE_F16), n++)
    T("token_embd.weight", D, s->vocab, K_MAT);
    T(q35 ? "output_norm.weight" : "token_embd_norm.weight", D, 1, K_NORM);
    if (!s->tied) T("output.weight", D, s->vocab, K_MAT);
    for (int l = 0; l < n_layers(s); l++) {
        TL(l, "attn_norm.weight", D, 1, K_NORM);
        if (rec(s, l) && q35) {
            TL(l, "attn_qkv.weight", D, C, K_MAT);
            TL(l, "attn_gate.weight", D, s->hv * s->d_state, K_MAT);
            TL(l, "ssm_beta.weight", D, s->hv, K_MAT);
            TL(l, "ssm_alpha.weight", D, s->hv, K_MAT);
            TL(l, "ssm_out.weight", s->hv * s->d_state, D, K_MAT);
            TL(l, "ssm_conv1d.weight", s->conv, C, K_CONV);
            TL(l, "ssm_dt.bias", s->hv, 1, K_DT);
            TL(l, "ssm_a", s->hv, 1, K_A);
            TL(l, "ssm_norm.weight", s->d_state, 1, K_NORM);
        } else if (rec(s, l)) {
            TL(l, "shortconv.in_proj.weight", D, 3 * D, K_MAT);
            TL(l, "shortconv.conv.weight", s->conv, D, K_CONV);
            TL(l, "shortconv.out_proj.weight", D, D, K_MAT);
        } else {
            TL(l, "attn_q.weight", D, q35 ? 2 * Q : Q, K_MAT);
            TL(l, "attn_k.weight", D, KV, K_MAT);
            TL(l, "attn_v.weight", D, KV, K_MAT);
            TL(l, "attn_q_norm.weight", hs, 1, K_NORM);
            TL(l, "attn_k_norm.weight", hs, 1, K_NORM);
            TL(l, "attn_output.weight", Q, D, K_MAT);
        }
        TL(l, q35 ? "post_attention_norm.weight" : "ffn_norm.weight", D, 1, K_NORM);
        TL(l, "ffn_gate.weight", D, F, K_MAT);
        TL(l, "ffn_up.weight", D, F, K_MAT);
        TL(l, "ffn_down.weight", F, D, K_MAT);
    }
#undef T
#undef TL
    return n;
}

/* The float values of tensor i (seeded by its index), as written before any quantization. */
static float *tensor_values(const tdesc *t, int i) {
    const size_t n = (size_t)t->cols * (size_t)t->rows;
    float *v = malloc(n * sizeof(float));
    tu_rng rng = {3000u + (uint32_t)i * 7919u};
    const float amp = t->kind == K_MAT ? 2.2f / sqrtf((float)t->cols) : 0.0f;
    for (size_t j = 0; j < n; j++) {
        switch (t->kind) {
        case K_MAT: v[j] = tu_rng_uniform(&rng, -amp, amp); break;
        case K_NORM: v[j] = 1.0f + tu_rng_uniform(&rng, -0.2f, 0.2f); break;
        case K_CONV: v[j] = tu_rng_uniform(&rng, -0.8f, 0.8f); break;
        case K_A: v[j] = -expf(tu_rng_uniform(&rng, -1.5f, 0.5f)); break; /* -exp(A_log) */
        case K_DT: v[j] = tu_rng_uniform(&rng, -1.0f, 1.0f); break;
        default: v[j] = tu_rng_uniform(&rng, -0.3f, 0.3f); break;
        }
    }
    return v;
}

static void key_u32(wlm_gguf_writer *w, const spec *s, const char *suffix, uint32_t v) {
    char k[96];
    snprintf(k, sizeof k, "%s.%s", s->arch, suffix);
    if (s->omit_key && strcmp(s->omit_key, k) == 0) return;
    wlm_gguf_add_u32(w, k, v);
}

/* The GGUF file of spec s, in memory (malloc'd), or NULL. */
static unsigned char *build_model(const spec *s, size_t *size) {
    const int L = n_layers(s), q35 = has(s->arch, "qwen35");
    tdesc *t = calloc(TENSORS_MAX(s), sizeof *t);
    const int nt = list_tensors(s, t);
    wlm_gguf_writer w;
    wlm_gguf_writer_init(&w, NULL);
    char k[96];
    wlm_gguf_add_str(&w, "general.architecture", s->arch);
    key_u32(&w, s, "embedding_length", (uint32_t)s->dim);
    key_u32(&w, s, "feed_forward_length", (uint32_t)s->hidden);
    key_u32(&w, s, "block_count", (uint32_t)L);
    key_u32(&w, s, "attention.head_count", (uint32_t)s->heads);
    key_u32(&w, s, "context_length", (uint32_t)s->seq);
    snprintf(k, sizeof k, "%s.attention.layer_norm_rms_epsilon", s->arch);
    wlm_gguf_add_f32(&w, k, 1e-6f);
    snprintf(k, sizeof k, "%s.rope.freq_base", s->arch);
    wlm_gguf_add_f32(&w, k, q35 ? 1e7f : 1e6f);
    const int n_arr = L - (s->bad_array != 0);
    if (q35) {
        key_u32(&w, s, "attention.head_count_kv", (uint32_t)s->kv_heads);
        key_u32(&w, s, "attention.key_length", (uint32_t)s->key_len);
        key_u32(&w, s, "attention.value_length", (uint32_t)s->key_len);
        key_u32(&w, s, "rope.dimension_count", (uint32_t)s->n_rot);
        key_u32(&w, s, "ssm.conv_kernel", (uint32_t)s->conv);
        key_u32(&w, s, "ssm.state_size", (uint32_t)s->d_state);
        key_u32(&w, s, "ssm.group_count", (uint32_t)s->hk);
        key_u32(&w, s, "ssm.time_step_rank", (uint32_t)s->hv);
        key_u32(&w, s, "ssm.inner_size", (uint32_t)(s->hv * s->d_state));
        if (s->interval) key_u32(&w, s, "full_attention_interval", (uint32_t)s->interval);
        snprintf(k, sizeof k, "%s.rope.dimension_sections", s->arch);
        if (!s->omit_key || strcmp(s->omit_key, k) != 0)
            wlm_gguf_add_arr(&w, k, WLM_GGUF_INT32, s->sections, 4);
        if (s->explicit_kinds) {
            uint8_t flags[64];
            for (int l = 0; l < L; l++) flags[l] = (uint8_t)rec(s, l);
            snprintf(k, sizeof k, "%s.attention.recurrent_layers", s->arch);
            wlm_gguf_add_arr(&w, k, WLM_GGUF_BOOL, flags, (uint64_t)n_arr);
        }
    } else {
        int32_t kvh[64];
        for (int l = 0; l < L; l++) kvh[l] = rec(s, l) ? 0 : s->kv_heads;
        snprintf(k, sizeof k, "%s.attention.head_count_kv", s->arch);
        wlm_gguf_add_arr(&w, k, WLM_GGUF_INT32, kvh, (uint64_t)n_arr);
        key_u32(&w, s, "shortconv.l_cache", (uint32_t)s->conv);
    }
    tm_write_tensors(&w, t, nt, s->type, s->omit, s->misshape, tensor_values);
    unsigned char *file = tm_finish(&w, size);
    free(t);
    return file;
}

/* ---- an independent reference in double, from the architectures' definitions --------------- */

typedef struct ref_model {
    const spec *s;
    tm_ref m;                     /* each tensor's values, as the file holds them */
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

/* The activation type the engine (as llama.cpp) multiplies a matrix of the test's type with:
 * Q8_0 for the block types; F32 otherwise (the reference then rounds nothing). */
static int32_t g_act_type = WLM_TYPE_F32;

/* y = W x, W (rows, cols); x first rounded through g_act_type, as the engine's products. */
static void dmat(double *y, const float *W, const double *x, int rows, int cols) {
    tm_dmat(y, W, x, rows, cols, g_act_type);
}
static void drms(double *y, const double *x, int n, const float *w) { tm_drms(y, x, n, w, 1e-6); }
static double dsig(double x) { return 1.0 / (1.0 + exp(-x)); }
static double dsilu(double x) { return x * dsig(x); }

/* NEOX RoPE on the first n_rot dims of a head; pair i turns by pos unless a qwen35 section
 * rule gives it the fourth (zero) position. */
static void drope(double *h, int n_rot, double pos, double base, const int *sec) {
    for (int i = 0; i < n_rot / 2; i++) {
        double p = pos;
        if (sec) {
            const int sum = sec[0] + sec[1] + sec[2] + sec[3], t = i % sum;
            const int moving = (t % 3 == 0 && t < 3 * sec[0]) || (t % 3 == 1 && t < 3 * sec[1]) ||
                               (t % 3 == 2 && t < 3 * sec[2]);
            if (!moving) p = 0;
        }
        const double th = p * pow(base, -2.0 * i / n_rot);
        const double a = h[i], b = h[i + n_rot / 2];
        h[i] = a * cos(th) - b * sin(th);
        h[i + n_rot / 2] = a * sin(th) + b * cos(th);
    }
}

/* logits (n, vocab) of the token sequence tok[0..n) */
static void ref_forward(const ref_model *r, const int32_t *tok, int n, double *out) {
    const spec *s = r->s;
    const int D = s->dim, F = s->hidden, L = n_layers(s), hs = head_size(s), V = s->vocab;
    const int H = s->heads, KVH = s->kv_heads, Q = hs * H, KV = hs * KVH, C = channels(s);
    const int q35 = has(s->arch, "qwen35"), K = s->conv, Ds = s->d_state;
    double *x = calloc((size_t)D, sizeof *x), *h = calloc((size_t)D, sizeof *h);
    double *big = calloc((size_t)(4 * (Q + C + D + F) + 64), sizeof *big);
    double *kc = calloc((size_t)L * n * KV, sizeof *kc), *vc = calloc((size_t)L * n * KV, sizeof *vc);
    double *hist = calloc((size_t)L * n * C, sizeof *hist); /* conv inputs per layer, position */
    double *S = calloc((size_t)L * (s->hv ? s->hv : 1) * Ds * Ds + 1, sizeof *S);
    for (int p = 0; p < n; p++) {
        const float *e = rv(r, "token_embd.weight") + (size_t)tok[p] * D;
        for (int i = 0; i < D; i++) x[i] = e[i];
        for (int l = 0; l < L; l++) {
            drms(h, x, D, rvl(r, l, "attn_norm.weight"));
            double *y = big, *t1 = big + D;
            if (rec(s, l) && q35) {
                double *m = t1, *z = m + C, *bt = z + s->hv * Ds, *al = bt + s->hv, *o = al + s->hv;
                double *cv = o + s->hv * Ds;
                dmat(m, rvl(r, l, "attn_qkv.weight"), h, C, D);
                dmat(z, rvl(r, l, "attn_gate.weight"), h, s->hv * Ds, D);
                dmat(bt, rvl(r, l, "ssm_beta.weight"), h, s->hv, D);
                dmat(al, rvl(r, l, "ssm_alpha.weight"), h, s->hv, D);
                double *hl = hist + ((size_t)l * n + p) * C;
                for (int c = 0; c < C; c++) hl[c] = m[c];
                const float *w = rvl(r, l, "ssm_conv1d.weight");
                for (int c = 0; c < C; c++) {
                    double a = 0;
                    for (int j = 0; j < K; j++) {
                        const int pp = p - K + 1 + j;
                        if (pp >= 0) a += (double)w[(size_t)c * K + j] * hist[((size_t)l * n + pp) * C + c];
                    }
                    cv[c] = dsilu(a);
                }
                for (int hh = 0; hh < 2 * s->hk; hh++) { /* L2 norms of q and k heads */
                    double ss = 0;
                    for (int i = 0; i < Ds; i++) ss += cv[hh * Ds + i] * cv[hh * Ds + i];
                    double nn = sqrt(ss);
                    if (nn < 1e-6) nn = 1e-6;
                    for (int i = 0; i < Ds; i++) cv[hh * Ds + i] /= nn;
                    if (hh < s->hk)
                        for (int i = 0; i < Ds; i++) cv[hh * Ds + i] /= sqrt((double)Ds);
                }
                const float *dt = rvl(r, l, "ssm_dt.bias"), *A = rvl(r, l, "ssm_a");
                for (int j = 0; j < s->hv; j++) {
                    const int kh = j % s->hk;
                    const double *q = cv + kh * Ds, *k = cv + (s->hk + kh) * Ds;
                    const double *v = cv + 2 * s->hk * Ds + j * Ds;
                    const double beta = dsig(bt[j]);
                    const double g = log1p(exp(al[j] + dt[j])) * A[j];
                    double *Sj = S + ((size_t)l * s->hv + j) * Ds * Ds;
                    double rr[256], d[256];
                    for (int b = 0; b < Ds; b++) rr[b] = 0;
                    for (int a = 0; a < Ds; a++)
                        for (int b = 0; b < Ds; b++) {
                            Sj[a * Ds + b] *= exp(g);
                            rr[b] += Sj[a * Ds + b] * k[a];
                        }
                    for (int b = 0; b < Ds; b++) d[b] = beta * (v[b] - rr[b]);
                    double *oj = o + j * Ds;
                    for (int b = 0; b < Ds; b++) oj[b] = 0;
                    for (int a = 0; a < Ds; a++)
                        for (int b = 0; b < Ds; b++) {
                            Sj[a * Ds + b] += k[a] * d[b];
                            oj[b] += Sj[a * Ds + b] * q[a];
                        }
                    drms(oj, oj, Ds, rvl(r, l, "ssm_norm.weight"));
                    for (int b = 0; b < Ds; b++) oj[b] *= dsilu(z[j * Ds + b]);
                }
                dmat(y, rvl(r, l, "ssm_out.weight"), o, D, s->hv * Ds);
            } else if (rec(s, l)) {
                double *bcx = t1, *u = bcx + 3 * D;
                dmat(bcx, rvl(r, l, "shortconv.in_proj.weight"), h, 3 * D, D);
                double *hl = hist + ((size_t)l * n + p) * C;
                for (int c = 0; c < D; c++) hl[c] = bcx[c] * bcx[2 * D + c];
                const float *w = rvl(r, l, "shortconv.conv.weight");
                for (int c = 0; c < D; c++) {
                    double a = 0;
                    for (int j = 0; j < K; j++) {
                        const int pp = p - K + 1 + j;
                        if (pp >= 0) a += (double)w[(size_t)c * K + j] * hist[((size_t)l * n + pp) * C + c];
                    }
                    u[c] = bcx[D + c] * a;
                }
                dmat(y, rvl(r, l, "shortconv.out_proj.weight"), u, D, D);
            } else {
                double *qg = t1, *q = qg + 2 * Q, *k = q + Q, *v = k + KV, *o = v + KV;
                dmat(qg, rvl(r, l, "attn_q.weight"), h, q35 ? 2 * Q : Q, D);
                for (int hh = 0; hh < H; hh++)
                    for (int i = 0; i < hs; i++) q[hh * hs + i] = qg[(q35 ? 2 : 1) * hh * hs + i];
                dmat(k, rvl(r, l, "attn_k.weight"), h, KV, D);
                dmat(v, rvl(r, l, "attn_v.weight"), h, KV, D);
                const int n_rot = q35 ? s->n_rot : hs;
                const double base = q35 ? 1e7 : 1e6;
                for (int hh = 0; hh < H; hh++) {
                    drms(q + hh * hs, q + hh * hs, hs, rvl(r, l, "attn_q_norm.weight"));
                    drope(q + hh * hs, n_rot, p, base, q35 ? s->sections : NULL);
                }
                for (int hh = 0; hh < KVH; hh++) {
                    drms(k + hh * hs, k + hh * hs, hs, rvl(r, l, "attn_k_norm.weight"));
                    drope(k + hh * hs, n_rot, p, base, q35 ? s->sections : NULL);
                }
                double *kl = kc + (size_t)l * n * KV, *vl = vc + (size_t)l * n * KV;
                memcpy(kl + (size_t)p * KV, k, sizeof(double) * KV);
                memcpy(vl + (size_t)p * KV, v, sizeof(double) * KV);
                tm_dattend(o, q, kl, vl, p, H, KVH, hs);
                for (int hh = 0; q35 && hh < H; hh++) /* the output gate */
                    for (int i = 0; i < hs; i++) o[hh * hs + i] *= dsig(qg[2 * hh * hs + hs + i]);
                dmat(y, rvl(r, l, "attn_output.weight"), o, D, Q);
            }
            for (int i = 0; i < D; i++) x[i] += y[i];
            drms(h, x, D, rvl(r, l, q35 ? "post_attention_norm.weight" : "ffn_norm.weight"));
            double *g = big, *u = big + F, *f = big + 2 * F;
            dmat(g, rvl(r, l, "ffn_gate.weight"), h, F, D);
            dmat(u, rvl(r, l, "ffn_up.weight"), h, F, D);
            for (int i = 0; i < F; i++) g[i] = dsilu(g[i]) * u[i];
            dmat(f, rvl(r, l, "ffn_down.weight"), g, D, F);
            for (int i = 0; i < D; i++) x[i] += f[i];
        }
        drms(h, x, D, rv(r, q35 ? "output_norm.weight" : "token_embd_norm.weight"));
        const float *wo = s->tied ? rv(r, "token_embd.weight") : rv(r, "output.weight");
        dmat(out + (size_t)p * V, wo, h, V, D);
    }
    free(x);
    free(h);
    free(big);
    free(kc);
    free(vc);
    free(hist);
    free(S);
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

static void test_logits(spec s, const char *variant) {
    char what[128];
    snprintf(what, sizeof what, "%s %s %s", s.arch, variant, wlm_type_get(s.type)->name);
    wlm_model *m = load_spec(&s, WLM_OK, NULL, what);
    if (!m) return;
    int n_rec = 0;
    for (int l = 0; l < n_layers(&s); l++) {
        n_rec += rec(&s, l);
        CHECKF(m->w.layers[l].mixer == (rec(&s, l) ? (has(s.arch, "qwen35") ? WLM_MIX_DELTANET
                                                                               : WLM_MIX_SHORTCONV)
                                                    : WLM_MIX_ATTN),
               "%s: layer %d has mixer %d", what, l, (int)m->w.layers[l].mixer);
    }
    CHECK_EQ_INT(m->hp.n_rec_layers, n_rec);
    CHECK_EQ_INT(m->hp.n_attn_layers, n_layers(&s) - n_rec);
    const int N = 70; /* two batch chunks */
    int32_t t[70];
    prompt_tokens(t, N, s.vocab, 77);
    wlm_context *c = tu_context(m, 0, 2, 1, WLM_KV_F32);
    if (!c) {
        wlm_model_free(m);
        return;
    }
    /* the reference */
    float *bat = tm_logits_batched(c, t, N, s.vocab);
    ref_model r;
    ref_load(&r, &s);
    double *ref = malloc(sizeof(double) * (size_t)N * s.vocab);
    g_act_type = s.type == WLM_TYPE_Q8_0 ? WLM_TYPE_Q8_0 : WLM_TYPE_F32;
    ref_forward(&r, t, N, ref);
    g_act_type = WLM_TYPE_F32;
    const double worst = tm_worst_diff(ref, bat, N, s.vocab);
    /* Q8_0: the reference rounds the activations as the engine does; a value near a rounding
     * boundary may still round the other way */
    const double tol = s.type == WLM_TYPE_F32 || s.type == WLM_TYPE_F16 ? 2e-4 : 5e-2;
    CHECKF(worst <= tol, "%s: logits differ from the reference by %.3g of the largest (tol %.3g)",
           what, worst, tol);
    printf("   %s: max |logit - reference| %.2e of the largest logit over %d positions\n", what,
           worst, N);
    free(ref);
    tm_ref_free(&r.m);

    /* one by one, threads, two sequences in one batch: the same bits */
    float *one = tm_logits_one_by_one(c, t, N, s.vocab);
    size_t at = 0;
    CHECKF(tm_same(one, bat, (size_t)N * s.vocab, &at), "%s: batched differs from one-by-one at %zu",
           what, at / (size_t)s.vocab);
    tm_check_threads(c, t, N, s.vocab, one, 0, what);
    int32_t u[70]; /* sequence 1, with other tokens */
    prompt_tokens(u, N, s.vocab, 99);
    tm_check_interleaved(c, t, u, N, s.vocab, one, what);
    free(one);
    free(bat);
    wlm_context_free(c);
    wlm_model_free(m);
}

/* Fork, truncation (snapshot or replay), the prompt cache and speculative decoding: every path
 * that moves a recurrent state gives what a fresh evaluation gives. */
static void test_state(const char *arch) {
    spec s = base_spec(arch);
    wlm_model *m = load_spec(&s, WLM_OK, NULL, arch);
    if (!m) return;
    wlm_context *c = tu_context(m, 0, 4, 1, WLM_KV_F32), *f = tu_context(m, 0, 1, 1, WLM_KV_F32);
    int32_t t[80];
    prompt_tokens(t, 80, s.vocab, 5);
    const size_t V = (size_t)s.vocab;
    if (c && f) {
        /* truncation without a snapshot: replay from 0 */
        CHECK_STATUS(wlm_eval(c, t, 50), WLM_OK);
        CHECK_STATUS(wlm_seq_truncate(c, 0, 20), WLM_OK);
        CHECK_EQ_INT(wlm_context_n_past(c), 20);
        CHECK_STATUS(wlm_eval(c, t + 40, 5), WLM_OK);
        int32_t mix[25];
        memcpy(mix, t, 20 * sizeof(int32_t));
        memcpy(mix + 20, t + 40, 5 * sizeof(int32_t));
        wlm_context_reset(f);
        CHECK_STATUS(wlm_eval(f, mix, 25), WLM_OK);
        CHECKF(memcmp(wlm_logits(c), wlm_logits(f), V * sizeof(float)) == 0,
               "%s: truncate + eval differs from a fresh evaluation", arch);

        /* a fork continues as the original */
        wlm_context_reset(c);
        CHECK_STATUS(wlm_eval(c, t, 30), WLM_OK);
        CHECK_STATUS(wlm_seq_fork(c, 0, 2), WLM_OK);
        const int32_t one = t[31], seqs[1] = {2};
        const uint8_t want1[1] = {1};
        CHECK_STATUS(wlm_eval_batch(c, &one, seqs, want1, 1), WLM_OK);
        wlm_context_reset(f);
        CHECK_STATUS(wlm_eval(f, t, 30), WLM_OK);
        CHECK_STATUS(wlm_eval(f, &one, 1), WLM_OK);
        CHECKF(memcmp(wlm_logits(c), wlm_logits(f), V * sizeof(float)) == 0,
               "%s: a forked sequence differs from the original continued", arch);
        CHECK_EQ_INT(wlm_seq_n_past(c, 0), 30); /* the source untouched */

        wlm_kv_stats st;
        CHECK_STATUS(wlm_kv_stats_get(c, &st), WLM_OK);
        size_t want_state = 0;
        for (int l = 0; l < n_layers(&s); l++)
            if (rec(&s, l))
                want_state += sizeof(float) *
                              ((size_t)(s.conv - 1) * (size_t)channels(&s) +
                               (has(arch, "qwen35") ? (size_t)s.hv * s.d_state * s.d_state : 0));
        CHECK(st.state_bytes == want_state);
        CHECK_EQ_INT(st.states, 2);
        CHECK(wlm_context_memory(c) >= st.state_bytes_allocated + 2 * want_state - want_state);

        /* context shift: refused, naming the recurrent state */
        CHECK_STATUS(wlm_seq_shift(c, 0, 2, 4), WLM_ERR_UNSUPPORTED);
        CHECKF(strstr(wlm_context_errmsg(c), "recurrent") != NULL, "%s: shift message \"%s\"",
               arch, wlm_context_errmsg(c));
    }
    if (c && f) { /* the prompt cache: a second prompt sharing a prefix (snapshot, replay) */
        wlm_gen_params gp;
        wlm_gen_params_default(&gp);
        gp.temperature = 0;
        gp.max_tokens = 6;
        gp.cache_prompt = 1;
        gp.checkpoint = -1;
        CHECK_STATUS(wlm_generate_begin(c, t, 40, &gp), WLM_ERR_INVALID_ARG);
        gp.checkpoint = 30; /* the state kept at 30 too: the third prompt resumes there */
        int32_t p2[60];
        memcpy(p2, t, 30 * sizeof(int32_t));
        prompt_tokens(p2 + 30, 30, s.vocab, 11);
        int32_t got[3][8];
        const int32_t *prompts[3] = {t, p2, t};
        const int32_t lens[3] = {40, 60, 36};
        for (int i = 0; i < 3; i++) { /* cached run, then a fresh context */
            for (int fresh = 0; fresh <= 1; fresh++) {
                wlm_context *x = fresh ? f : c;
                if (fresh) wlm_context_reset(x);
                CHECK_STATUS(wlm_generate_begin(x, prompts[i], lens[i], &gp), WLM_OK);
                wlm_token tok;
                int n = 0;
                int32_t ids[8];
                while (wlm_generate_next(x, &tok) == WLM_OK && n < 8) ids[n++] = tok.id;
                if (!fresh) memcpy(got[i], ids, sizeof ids);
                else
                    CHECKF(n == 6 && memcmp(got[i], ids, 6 * sizeof(int32_t)) == 0,
                           "%s: prompt %d with the prompt cache differs from a fresh context",
                           arch, i);
            }
        }
        CHECKF(wlm_generate_n_cached(c) == 0 || wlm_generate_n_cached(c) <= 36,
               "%s: n_cached %d", arch, (int)wlm_generate_n_cached(c));

        /* speculative decoding by prompt lookup: greedy gives plain greedy's tokens */
        int32_t rep[48];
        for (int i = 0; i < 48; i++) rep[i] = t[i % 12];
        gp.max_tokens = 24;
        gp.cache_prompt = 0;
        gp.checkpoint = 0;
        int32_t plain[24], spec_ids[24];
        int np = 0, ns = 0;
        wlm_token tok;
        CHECK_STATUS(wlm_generate_begin(f, rep, 48, &gp), WLM_OK);
        while (np < 24 && wlm_generate_next(f, &tok) == WLM_OK) plain[np++] = tok.id;
        CHECK_STATUS(wlm_generate_begin(c, rep, 48, &gp), WLM_OK);
        wlm_spec_params sp;
        wlm_spec_params_default(&sp);
        sp.n_draft = 4;
        sp.ngram = 3;
        CHECK_STATUS(wlm_generate_speculate(c, &sp), WLM_OK);
        while (ns < 24 && wlm_generate_next(c, &tok) == WLM_OK) spec_ids[ns++] = tok.id;
        CHECKF(np == ns && memcmp(plain, spec_ids, sizeof(int32_t) * (size_t)np) == 0,
               "%s: speculative decoding's %d tokens differ from plain decoding's %d", arch, ns, np);
        wlm_spec_stats st;
        CHECK_STATUS(wlm_spec_stats_get(c, &st), WLM_OK);
        /* rejected drafts: the state restored and the accepted tokens replayed */
        CHECKF(st.n_accepted < st.n_drafted, "%s: all %d drafts accepted: none rejected", arch,
               (int)st.n_drafted);
        printf("   %s: prompt lookup accepted %d of %d drafts in %d rounds\n", arch,
               (int)st.n_accepted, (int)st.n_drafted, (int)st.n_rounds);
        /* the model as its own draft: every draft accepted, nothing to roll back */
        wlm_context *d = tu_context(m, 0, 1, 1, WLM_KV_F32);
        if (d) {
            CHECK_STATUS(wlm_generate_begin(c, rep, 48, &gp), WLM_OK);
            sp.ngram = 0;
            sp.draft = d;
            CHECK_STATUS(wlm_generate_speculate(c, &sp), WLM_OK);
            ns = 0;
            while (ns < 24 && wlm_generate_next(c, &tok) == WLM_OK) spec_ids[ns++] = tok.id;
            CHECKF(np == ns && memcmp(plain, spec_ids, sizeof(int32_t) * (size_t)np) == 0,
                   "%s: self-drafted decoding differs from plain decoding", arch);
            CHECK_STATUS(wlm_spec_stats_get(c, &st), WLM_OK);
            CHECKF(st.n_drafted > 0 && st.n_accepted == st.n_drafted,
                   "%s: the model as its own draft: %d of %d accepted", arch, (int)st.n_accepted,
                   (int)st.n_drafted);
            wlm_context_free(d);
        }
    }
    wlm_context_free(c);
    wlm_context_free(f);
    wlm_model_free(m);
}

static int gen_alone(wlm_context *c, const int32_t *t, int n, const wlm_gen_params *gp,
                     int32_t *ids, int cap);

/* ---- speculative rollback (context.c's WLM_ROLL_*) ------------------------------------------ */

/* One verification of n entries after a prefix of n0 tokens, then the sequence cut to keep
 * entries 0..j (a rejection of draft j + 1; j = n - 1: all kept), then 3 more tokens: the logits
 * of the verification and of the continuation equal a fresh evaluation of the kept tokens, and
 * the cut took the strategy asked for (a copy at the cut, or the snapshot at n0 and a replay).
 * Returns 0 on a failed check. */
static int roll_case(wlm_context *c, wlm_context *f, int mode, const int32_t *t, int n0, int n,
                     int j, float *ver, const char *what) {
    const size_t V = (size_t)c->model->hp.vocab_size;
    wlm_context_reset(c);
    c->roll_mode = mode;
    int ok = CHECKF(wlm_eval(c, t, n0) == WLM_OK, "%s: prefix", what);
    uint8_t want[96];
    memset(want, 1, sizeof want);
    const int took = wlm_state_roll_begin(c, 0, n);
    ok &= CHECKF(took == mode, "%s: strategy %d taken for %d", what, took, mode);
    ok &= CHECKF(wlm_eval_batch(c, t + n0, NULL, want, n) == WLM_OK, "%s: verification", what);
    wlm_state_roll_recorded(c);
    memcpy(ver, c->logits, sizeof(float) * V * (size_t)n); /* one row per entry, in order */
    const int keep = n0 + 1 + j;
    wlm_seq_truncate_internal(c, 0, keep);
    wlm_state_roll_drop(c);
    ok &= CHECKF(wlm_seq_n_past(c, 0) == keep, "%s: n_past %d, want %d", what,
                 (int)wlm_seq_n_past(c, 0), keep);
    if (j < n - 1) { /* a cut: by the record, or from the snapshot with a replay */
        const int want_restore = mode == WLM_ROLL_POSITIONS ? keep : n0;
        ok &= CHECKF(c->last_restore == want_restore, "%s: keep %d restored at %d, want %d", what,
                     keep, (int)c->last_restore, want_restore);
    }
    int32_t more[3] = {(int32_t)(t[keep] + 1) % 96, 7, 11};
    ok &= CHECKF(wlm_eval(c, more, 3) == WLM_OK, "%s: continuation", what);
    int32_t all[200];
    memcpy(all, t, sizeof(int32_t) * (size_t)keep);
    memcpy(all + keep, more, sizeof more);
    wlm_context_reset(f);
    ok &= CHECKF(wlm_eval(f, all, keep + 3) == WLM_OK, "%s: fresh evaluation", what);
    ok &= CHECKF(memcmp(wlm_logits(c), wlm_logits(f), V * sizeof(float)) == 0,
                 "%s: the continuation after keeping %d differs from a fresh evaluation", what,
                 keep);
    return ok;
}

/* Greedy speculative decoding under strategy `mode`: the ids of plain greedy decoding; a
 * recurrent draft model's cut back to a round's start restores its snapshot there. */
static void roll_generate(wlm_context *c, wlm_context *d, int mode, const int32_t *prompt, int n,
                          const int32_t *plain, int np, const char *what, wlm_spec_stats *sum,
                          int *draft_cuts) {
    wlm_gen_params gp;
    wlm_gen_params_default(&gp);
    gp.temperature = 0;
    gp.max_tokens = 40;
    gp.add_bos = 0;
    c->roll_mode = mode;
    CHECK_STATUS(wlm_generate_begin(c, prompt, n, &gp), WLM_OK);
    wlm_spec_params sp;
    wlm_spec_params_default(&sp);
    sp.n_draft = 6;
    sp.ngram = d ? 0 : 2;
    sp.draft = d;
    CHECK_STATUS(wlm_generate_speculate(c, &sp), WLM_OK);
    if (d) d->last_restore = -1;
    int32_t ids[48];
    int ns = 0;
    wlm_token tok;
    while (ns < 48 && wlm_generate_next(c, &tok) == WLM_OK) ids[ns++] = tok.id;
    CHECKF(ns == np && memcmp(ids, plain, sizeof(int32_t) * (size_t)np) == 0,
           "%s: %d tokens, plain greedy %d (or different ids)", what, ns, np);
    if (d && d->last_restore >= 0) { /* the draft was cut back (a rejection): to its snapshot
                                         at the round's start, not from position 0 */
        CHECKF(d->last_restore > n, "%s: the draft's last cut restored position %d", what,
               (int)d->last_restore);
        (*draft_cuts)++;
    }
    wlm_spec_stats st;
    CHECK_STATUS(wlm_spec_stats_get(c, &st), WLM_OK);
    sum->n_rounds += st.n_rounds;
    sum->n_drafted += st.n_drafted;
    sum->n_accepted += st.n_accepted;
    c->roll_mode = WLM_ROLL_AUTO;
}

/* Both rollback strategies: a rejection at every position of a verification gives a fresh
 * evaluation's state (one thread, and 3 threads over a pass long enough to split DeltaNet's
 * heads); the verification's logits do not depend on the strategy; greedy speculative decoding
 * with prompt lookup and with a draft model (the target quantized to Q8_0, which disagrees at
 * times) gives plain greedy decoding's tokens under each. */
static void test_rollback(const char *arch) {
    spec s = base_spec(arch);
    wlm_model *m = load_spec(&s, WLM_OK, NULL, arch);
    spec sq = s;
    sq.type = WLM_TYPE_Q8_0;
    wlm_model *mq = load_spec(&sq, WLM_OK, NULL, arch);
    wlm_context *c = m ? tu_context(m, 0, 1, 1, WLM_KV_F32) : NULL;
    wlm_context *f = m ? tu_context(m, 0, 1, 1, WLM_KV_F32) : NULL;
    wlm_context *d = mq ? tu_context(mq, 0, 1, 1, WLM_KV_F32) : NULL;
    wlm_threadpool *pool = NULL;
    float *ver[2] = {malloc(sizeof(float) * 96 * (size_t)s.vocab),
                     malloc(sizeof(float) * 96 * (size_t)s.vocab)};
    if (!c || !f || !d || !ver[0] || !ver[1]) goto out;
    int32_t t[160];
    prompt_tokens(t, 160, s.vocab, 23);
    const int modes[2] = {WLM_ROLL_REPLAY, WLM_ROLL_POSITIONS};
    char what[96];
    int cases = 0, ok = 1;
    for (int j = 0; j < 9; j++) { /* k = 8 drafts: rejected at 0..7, or all accepted */
        for (int mi = 0; mi < 2; mi++) {
            snprintf(what, sizeof what, "%s, strategy %d, kept %d of 9", arch, modes[mi], j + 1);
            ok &= roll_case(c, f, modes[mi], t, 30, 9, j, ver[mi], what);
            cases++;
        }
        ok &= CHECKF(memcmp(ver[0], ver[1], sizeof(float) * 9 * (size_t)s.vocab) == 0,
                     "%s: the verification's logits depend on the strategy", arch);
    }
    /* a long pass on 3 threads: DeltaNet's heads split over the pool, each thread's copies */
    if (wlm_threadpool_new(3, &pool) == WLM_OK) {
        wlm_context_set_threadpool(c, pool);
        for (int j = 0; j < 80; j += 79 / 3) {
            for (int mi = 0; mi < 2; mi++) {
                snprintf(what, sizeof what, "%s, 3 threads, strategy %d, kept %d of 80", arch,
                         modes[mi], j + 1);
                ok &= roll_case(c, f, modes[mi], t, 20, 80, j, ver[mi], what);
                cases++;
            }
            ok &= CHECKF(memcmp(ver[0], ver[1], sizeof(float) * 80 * (size_t)s.vocab) == 0,
                         "%s: 3 threads: the verification's logits depend on the strategy", arch);
        }
        wlm_context_set_threadpool(c, NULL);
    }
    printf("   %s: %d rollbacks, each strategy a fresh evaluation's state%s\n", arch, cases,
           ok ? "" : " (FAILED)");
    /* a record left behind (a round that failed before its cut) is not taken once other passes
     * ran, even with the sequence back at the same length */
    {
        uint8_t want[9];
        memset(want, 1, sizeof want);
        wlm_context_reset(c);
        c->roll_mode = WLM_ROLL_POSITIONS;
        CHECK_STATUS(wlm_eval(c, t, 30), WLM_OK);
        CHECK_EQ_INT(wlm_state_roll_begin(c, 0, 9), WLM_ROLL_POSITIONS);
        CHECK_STATUS(wlm_eval_batch(c, t + 30, NULL, want, 9), WLM_OK);
        wlm_state_roll_recorded(c);
        wlm_context_reset(c);
        CHECK_STATUS(wlm_eval(c, t + 1, 39), WLM_OK); /* other tokens, the same length */
        wlm_seq_truncate_internal(c, 0, 33);
        CHECKF(c->last_restore != 33, "%s: a stale record was taken", arch);
        CHECK_STATUS(wlm_eval(c, t + 100, 3), WLM_OK);
        int32_t all[36];
        memcpy(all, t + 1, 33 * sizeof(int32_t));
        memcpy(all + 33, t + 100, 3 * sizeof(int32_t));
        wlm_context_reset(f);
        CHECK_STATUS(wlm_eval(f, all, 36), WLM_OK);
        CHECKF(memcmp(wlm_logits(c), wlm_logits(f), sizeof(float) * (size_t)s.vocab) == 0,
               "%s: after a stale record, a cut differs from a fresh evaluation", arch);
        wlm_state_roll_drop(c);
        c->roll_mode = WLM_ROLL_AUTO;
    }
    /* the record's memory: n - 1 states of the longest pass, counted */
    const int32_t longest = pool ? 79 : 8; /* (wasm without threads: no pool) */
    CHECK(c->roll_cap >= longest &&
          c->state_bytes >= (size_t)longest * m->hp.state_floats * sizeof(float));
    /* AUTO: copies for a small state, the snapshot when they would outweigh the weights */
    c->roll_mode = WLM_ROLL_AUTO;
    CHECK_EQ_INT(wlm_state_roll_choose(c, 9),
                 (uint64_t)8 * m->hp.state_floats * sizeof(float) * WLM_ROLL_WEIGHT_RATIO <=
                         m->weight_bytes
                     ? WLM_ROLL_POSITIONS
                     : WLM_ROLL_REPLAY);

    /* generation: prompt lookup on a repetitive prompt, and the Q8_0 draft */
    int draft_cuts = 0;
    int32_t rep[48];
    for (int i = 0; i < 48; i++) rep[i] = t[i % 10];
    for (int p = 0; p < 2; p++) {
        const int32_t *prompt = p ? t : rep;
        wlm_gen_params gp;
        wlm_gen_params_default(&gp);
        gp.temperature = 0;
        gp.max_tokens = 40;
        gp.add_bos = 0;
        int32_t plain[48];
        const int np = gen_alone(f, prompt, 48, &gp, plain, 48);
        CHECKF(np >= 10, "%s: plain greedy gave %d tokens (ends at EOS or 40)", arch, np);
        for (int mi = 0; mi < 2; mi++) {
            wlm_spec_stats lookup = {0}, drafted = {0};
            snprintf(what, sizeof what, "%s, prompt %d, strategy %d, prompt lookup", arch, p,
                     modes[mi]);
            roll_generate(c, NULL, modes[mi], prompt, 48, plain, np, what, &lookup, &draft_cuts);
            snprintf(what, sizeof what, "%s, prompt %d, strategy %d, Q8_0 draft", arch, p,
                     modes[mi]);
            roll_generate(c, d, modes[mi], prompt, 48, plain, np, what, &drafted, &draft_cuts);
            if (mi == 0)
                printf("   %s, prompt %d: prompt lookup accepted %d of %d drafts, the Q8_0 "
                       "draft %d of %d\n", arch, p, (int)lookup.n_accepted, (int)lookup.n_drafted,
                       (int)drafted.n_accepted, (int)drafted.n_drafted);
            /* rounds with a rejection ran (else nothing was rolled back) */
            CHECKF(lookup.n_accepted + drafted.n_accepted < lookup.n_drafted + drafted.n_drafted,
                   "%s: no draft rejected", what);
        }
    }
    CHECKF(draft_cuts > 0, "%s: the draft model was never cut back", arch);
out:
    free(ver[0]);
    free(ver[1]);
    wlm_threadpool_free(pool);
    wlm_context_free(c);
    wlm_context_free(f);
    wlm_context_free(d);
    wlm_model_free(m);
    wlm_model_free(mq);
}

/* Generation alone: the ids (at most cap), or -1. */
static int gen_alone(wlm_context *c, const int32_t *t, int n, const wlm_gen_params *gp,
                     int32_t *ids, int cap) {
    wlm_token o;
    int k = 0, rc;
    if (wlm_generate_begin(c, t, n, gp) != WLM_OK) return -1;
    while ((rc = wlm_generate_next(c, &o)) == WLM_OK)
        if (k < cap) ids[k++] = o.id;
    return rc == WLM_DONE ? k : -1;
}

/* Continuous batching with recurrent states: a sequence added to a running batch (into a slot
 * another sequence left, whose state it must not inherit) generates what it generates alone,
 * greedy and seeded-sampled. */
static void test_join(wlm_model *m, const spec *s, const char *arch) {
    wlm_context *c = tu_context(m, 0, 2, 1, WLM_KV_F32), *one = tu_context(m, 0, 1, 1, WLM_KV_F32);
    int32_t t[3][12], ids[3][16], got[3][16];
    int n_ids[3], cnt[3] = {0, 0, 0};
    wlm_gen_params gp[3];
    for (int i = 0; i < 3; i++) {
        prompt_tokens(t[i], 12, s->vocab, 11 + (uint64_t)i);
        wlm_gen_params_default(&gp[i]);
        gp[i].max_tokens = 10;
        gp[i].temperature = i == 0 ? 0.0f : 1.0f;
        gp[i].seed = 5 + (uint64_t)i;
        gp[i].add_bos = 0;
    }
    if (!c || !one) goto out;
    for (int i = 0; i < 3; i++) {
        n_ids[i] = gen_alone(one, t[i], 9 + i, &gp[i], ids[i], 16);
        CHECKF(n_ids[i] >= 1, "%s: sequence %d alone gave %d tokens", arch, i, n_ids[i]);
    }
    const int32_t *p0 = t[0];
    int32_t n0 = 9;
    CHECK_STATUS(wlm_generate_batch_begin(c, 1, &p0, &n0, &gp[0]), WLM_OK);
    wlm_token out[2];
    int who[2] = {0, -1}, rc = WLM_OK, steps = 0, added = 0;
    while (rc == WLM_OK && steps++ < 100) {
        rc = wlm_generate_batch_next(c, out);
        if (rc < 0) break;
        for (int i = 0; i < 2; i++) {
            if (who[i] < 0) continue;
            if (out[i].status == WLM_OK && cnt[who[i]] < 16) got[who[i]][cnt[who[i]]++] = out[i].id;
            if (out[i].status != WLM_OK) who[i] = -1;
        }
        if (steps == 2) { /* joins mid-way */
            CHECK_STATUS(wlm_generate_batch_add(c, t[1], 10, &gp[1]), 1);
            who[1] = 1, added++, rc = WLM_OK;
        } else if (steps == 4) { /* leaves, and another takes its slot (and its state's memory) */
            CHECK_STATUS(wlm_generate_batch_end(c, 1), WLM_OK);
            CHECK_STATUS(wlm_generate_batch_add(c, t[2], 11, &gp[2]), 1);
            CHECK(memcmp(got[1], ids[1], sizeof(int32_t) * (size_t)cnt[1]) == 0);
            cnt[1] = n_ids[1]; /* (compared so far; not compared again) */
            memcpy(got[1], ids[1], sizeof(int32_t) * (size_t)n_ids[1]);
            who[1] = 2, added++, rc = WLM_OK;
        }
    }
    CHECKF(rc == WLM_DONE && added == 2, "%s: join run ended with %s", arch, wlm_status_name(rc));
    for (int i = 0; i < 3; i++)
        CHECKF(cnt[i] == n_ids[i] && memcmp(got[i], ids[i], sizeof(int32_t) * (size_t)cnt[i]) == 0,
               "%s: sequence %d joined gave %d tokens, alone %d (or different ids)", arch, i,
               cnt[i], n_ids[i]);
out:
    wlm_context_free(c);
    wlm_context_free(one);
}

/* Beam search and sampled batches run (forks copy the state). */
static void test_generate(const char *arch) {
    spec s = base_spec(arch);
    wlm_model *m = load_spec(&s, WLM_OK, NULL, arch);
    if (!m) return;
    wlm_context *c = tu_context(m, 0, 8, 1, WLM_KV_F16);
    if (c) {
        int32_t t[8];
        prompt_tokens(t, 8, s.vocab, 3);
        wlm_beam_params bp;
        wlm_beam_params_default(&bp);
        bp.width = 3;
        bp.max_tokens = 4;
        CHECK_STATUS(wlm_beam_begin(c, t, 8, &bp), WLM_OK);
        int rc;
        while ((rc = wlm_beam_step(c)) == WLM_OK) {}
        CHECKF(rc == WLM_DONE && wlm_beam_count(c) >= 1, "%s: beam search %s", arch,
               wlm_status_name(rc));
    }
    wlm_context_free(c);
    test_join(m, &s, arch);
    wlm_model_free(m);
}

/* A deferred context's orders to its backend about the recurrent state (deferred.c): the
 * positions whose state it copies into each snapshot slot (dfr_snap, -1 once the backend marks
 * it taken) and, after a cut back, the slot to restore and replay from (dfr_restore). Here the
 * test plays the backend: it marks what it took and "supplies" each batch. */
static void test_deferred_state(const char *arch) {
    spec s = base_spec(arch);
    wlm_model *m = load_spec(&s, WLM_OK, NULL, arch);
    if (!m) return;
    wlm_context_params cp;
    wlm_context_params_default(&cp);
    cp.n_seq_max = 2;
    cp.kv_cache = 2;
    wlm_context *d = NULL;
    CHECK_STATUS(wlm_context_new(m, &cp, &d), WLM_OK);
    int32_t t[40], u[40];
    prompt_tokens(t, 40, s.vocab, 9);
    memcpy(u, t, sizeof u);
    for (int i = 20; i < 40; i++) u[i] = (t[i] + 1) % s.vocab; /* diverges at 20 */
    wlm_gen_params p;
    wlm_gen_params_default(&p);
    p.temperature = 0;
    p.cache_prompt = 1;
    const int P = WLM_SNAP_PROMPT, C = WLM_SNAP_CHECKPOINT;
    if (d) {
        /* a prompt of 30 with its checkpoint at 10: one batch, both copies asked for */
        p.checkpoint = 10;
        CHECK_STATUS(wlm_generate_begin(d, t, 30, &p), WLM_OK);
        CHECK_EQ_INT(d->dfr_n, 30);
        CHECK_EQ_INT(d->dfr_snap[0][C], 10);
        CHECK_EQ_INT(d->dfr_snap[0][P], 30);
        CHECK_EQ_INT(d->dfr_restore[0][1], -1);
        d->dfr_snap[0][P] = -1; /* the backend took only the prompt's end */
        d->dfr_n = 0;

        /* diverging at 20: the checkpoint at 10 was not taken, the prompt's end is past the
         * cut: the empty state, replayed from 0 (nothing counts as cached) */
        p.checkpoint = 0;
        CHECK_STATUS(wlm_generate_begin(d, u, 30, &p), WLM_OK);
        CHECK_EQ_INT(d->dfr_restore[0][0], -1);
        CHECK_EQ_INT(d->dfr_restore[0][1], 0);
        CHECK_EQ_INT(wlm_generate_n_cached(d), 0);
        CHECK_EQ_INT(d->dfr_pos[0], 20); /* the batch starts at the cut: the backend replays */
        CHECK_EQ_INT(d->dfr_snap[0][P], 30);
        d->dfr_restore[0][1] = -1;
        d->dfr_snap[0][C] = d->dfr_snap[0][P] = -1; /* both taken (the replay passes 10) */
        d->dfr_n = 0;

        /* diverging at 20 again (t's tail): the checkpoint at 10 is restored, 10..19 replayed */
        CHECK_STATUS(wlm_generate_begin(d, t, 36, &p), WLM_OK);
        CHECK_EQ_INT(d->dfr_restore[0][0], C);
        CHECK_EQ_INT(d->dfr_restore[0][1], 10);
        CHECK_EQ_INT(wlm_generate_n_cached(d), 10);
        CHECK_EQ_INT(d->dfr_pos[0], 20);
        CHECK_EQ_INT(d->seqs[0].snap_pos[P], 36);
        d->dfr_restore[0][1] = -1;
        d->dfr_snap[0][P] = -1;
        d->dfr_n = 0;

        /* an extension: the state goes on from 36 (nothing to restore) */
        CHECK_STATUS(wlm_generate_begin(d, t, 40, &p), WLM_OK);
        CHECK_EQ_INT(d->dfr_restore[0][1], -1);
        CHECK_EQ_INT(wlm_generate_n_cached(d), 36);
        CHECK_EQ_INT(d->dfr_pos[0], 36);
        CHECK_EQ_INT(d->dfr_snap[0][P], 40);

        /* the batch dropped (never supplied): the copy asked for past where the sequence went
         * back is forgotten */
        wlm_context_reset_keep(d, 38);
        CHECK_EQ_INT(wlm_context_n_past(d), 36);
        CHECK_EQ_INT(d->dfr_snap[0][P], -1);
        CHECK_EQ_INT(d->seqs[0].snap_pos[P], -1);
        CHECK_EQ_INT(d->seqs[0].snap_pos[C], 10);

        /* a cut back to 25: the checkpoint restored (as the CPU's truncation restores it) */
        wlm_seq_truncate_internal(d, 0, 25);
        CHECK_EQ_INT(wlm_context_n_past(d), 25);
        CHECK_EQ_INT(d->dfr_restore[0][0], C);
        CHECK_EQ_INT(d->dfr_restore[0][1], 10);

        /* a fork's destination keeps no copy and no restore */
        d->dfr_restore[1][0] = P, d->dfr_restore[1][1] = 5;
        d->dfr_snap[1][C] = d->seqs[1].snap_pos[C] = 7;
        wlm_seq_fork_internal(d, 0, 1);
        CHECK_EQ_INT(d->dfr_restore[1][1], -1);
        CHECK_EQ_INT(d->dfr_snap[1][C], -1);
        CHECK_EQ_INT(d->seqs[1].snap_pos[C], -1);
    }
    wlm_context_free(d);
    wlm_model_free(m);
}

static void test_errors(void) {
    struct { const char *arch, *omit, *misshape, *omit_key; int bad_array, want; const char *needle; } cases[] = {
        {"qwen35", "blk.0.ssm_a", NULL, NULL, 0, WLM_ERR_FORMAT, "blk.0.ssm_a"},
        {"qwen35", NULL, "blk.1.attn_qkv.weight", NULL, 0, WLM_ERR_FORMAT, "blk.1.attn_qkv.weight"},
        {"qwen35", NULL, "blk.3.attn_q.weight", NULL, 0, WLM_ERR_FORMAT, "blk.3.attn_q.weight"},
        {"qwen35", NULL, NULL, "qwen35.ssm.state_size", 0, WLM_ERR_FORMAT, "ssm.state_size"},
        {"qwen35", NULL, NULL, "qwen35.rope.dimension_sections", 0, WLM_ERR_FORMAT,
         "dimension_sections"},
        {"qwen35", NULL, NULL, NULL, 1, WLM_ERR_FORMAT, "recurrent_layers"},
        {"lfm2", "blk.0.shortconv.conv.weight", NULL, NULL, 0, WLM_ERR_FORMAT,
         "blk.0.shortconv.conv.weight"},
        {"lfm2", NULL, "blk.1.shortconv.in_proj.weight", NULL, 0, WLM_ERR_FORMAT, "in_proj"},
        {"lfm2", NULL, NULL, "lfm2.shortconv.l_cache", 0, WLM_ERR_FORMAT, "l_cache"},
        {"lfm2", NULL, NULL, NULL, 1, WLM_ERR_FORMAT, "head_count_kv"},
        /* an attention layer marked as conv: its conv tensors are missing */
        {"lfm2", "blk.2.attn_q.weight", NULL, NULL, 0, WLM_ERR_FORMAT, "blk.2.attn_q.weight"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        spec s = base_spec(cases[i].arch);
        s.omit = cases[i].omit;
        s.misshape = cases[i].misshape;
        s.omit_key = cases[i].omit_key;
        s.bad_array = cases[i].bad_array;
        char what[96];
        snprintf(what, sizeof what, "%s error case %zu", cases[i].arch, i);
        wlm_model *m = load_spec(&s, cases[i].want, cases[i].needle, what);
        wlm_model_free(m);
    }
    /* kinds from the interval (no recurrent_layers): layers 1 and 3 of 4 are attention */
    spec s = base_spec("qwen35");
    s.explicit_kinds = 0;
    s.interval = 2;
    s.pattern = "RARA";
    wlm_model *m = load_spec(&s, WLM_OK, NULL, "qwen35 interval 2");
    wlm_model_free(m);
    s.interval = 0; /* default 4 */
    s.pattern = "RRRARRRA";
    m = load_spec(&s, WLM_OK, NULL, "qwen35 default interval");
    if (m) CHECK(m->hp.n_attn_layers == 2 && m->hp.n_rec_layers == 6);
    wlm_model_free(m);
}

int main(void) {
    const char *archs[] = {"qwen35", "lfm2"};
    const int32_t types[] = {WLM_TYPE_F32, WLM_TYPE_F16, WLM_TYPE_Q8_0};
    for (size_t a = 0; a < 2; a++)
        for (size_t ti = 0; ti < 3; ti++) {
            spec s = base_spec(archs[a]);
            s.type = types[ti];
            test_logits(s, "base");
        }
    { /* other patterns: qwen35 untied with HV = HK and no section rule at play; lfm2 untied,
         conv first and last */
        spec s = base_spec("qwen35");
        s.tied = 0, s.hv = 2, s.pattern = "ARRRRA", s.n_rot = 32;
        s.sections[0] = 11, s.sections[1] = 11, s.sections[2] = 10, s.sections[3] = 0;
        test_logits(s, "untied HV=HK");
        s = base_spec("lfm2");
        s.tied = 0, s.pattern = "RARR", s.conv = 4;
        test_logits(s, "untied RARR");
    }
    for (size_t a = 0; a < 2; a++) {
        test_state(archs[a]);
        test_rollback(archs[a]);
        test_generate(archs[a]);
        test_deferred_state(archs[a]);
    }
    test_errors();
    return TEST_FINISH();
}
