/*
 * test_vision.c — the mmproj loader, the image preprocessing and the vision encoder + projectors
 * (src/vision/) against independent references written here in double precision: random-weight
 * mmproj files of both projector types (gemma3, idefics3) and three weight types (F32, F16,
 * Q8_0) are synthesized in memory with the GGUF writer, encoded by the library (scalar and SIMD
 * kernels, with and without threads) and by a plain float64 SigLIP + projector that follows
 * /work/shared/reference/vision-mmproj.md §5-6 from the dequantized weights. Also: resampling
 * (exact bilinear values; Pillow's Lanczos-3 against a float64 twin), tile counts, Idefics3's
 * pieces (tiles of the refined image, the overview shrunk from it), and the
 * loader's and encoder's errors (each named).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf_write.h"
#include "kernels/quant.h"
#include "runtime/threadpool.h"
#include "test_util.h"
#include "pool_malloc.h"
#include "vision/vision.h"
#include "wasmlm.h"

#define PI 3.14159265358979323846
#define LFM2_HIDDEN 64 /* the synthetic lfm2 projector's MLP width */

/* ---- a synthetic mmproj ------------------------------------------------------------------ */

typedef struct spec {
    const char *proj;      /* clip.projector_type */
    int S, P, W, F, layers, heads, scale, L, D;
    int32_t wtype;         /* type of the block matrices and the projection */
    int gelu;              /* clip.use_gelu */
    const char *arch;      /* general.architecture (normally "clip") */
    const char *drop;      /* a tensor left out, or NULL */
    int omit_scale;        /* 1: no clip.vision.projector.scale_factor key */
    int wa, window;        /* qwen2.5vl_merger: n_wa_pattern, window_size (pixels) */
    int omit_wa;           /* 1: no clip.vision.n_wa_pattern key */
    int bad_patch1;        /* 1: v.patch_embd.weight.1 written with one channel too few */
} spec;

static int is_qwen(const spec *p) { return !strcmp(p->proj, "qwen2.5vl_merger"); }

typedef struct tens {
    char name[64];
    int nd;
    int64_t ne[4];
    int32_t type;
    float *f;              /* values as float (before the type's rounding) */
    int64_t n;
} tens;

typedef struct synth {
    tens t[256];
    int n;
} synth;

static tens *add(synth *s, tu_rng *r, const char *name, int nd, int64_t a, int64_t b, int64_t c,
                 int64_t d, int32_t type, float scale, float offset) {
    tens *t = &s->t[s->n++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->nd = nd;
    t->ne[0] = a, t->ne[1] = b, t->ne[2] = c, t->ne[3] = d;
    t->type = type;
    t->n = a * b * c * d;
    t->f = malloc((size_t)t->n * sizeof *t->f);
    for (int64_t i = 0; i < t->n; i++) t->f[i] = offset + scale * tu_rng_uniform(r, -1.0f, 1.0f);
    return t;
}

/* The file's bytes (malloc'd), *size of them. */
static unsigned char *write_mmproj(const spec *p, synth *s, size_t *size) {
    tu_rng r = {12345u + (uint64_t)p->W * 7 + (uint64_t)p->wtype};
    const int64_t W = p->W, F = p->F, P = p->P, G = p->S / p->P, N = G * G;
    const float ws = 1.0f / sqrtf((float)W);
    s->n = 0;
    char nm[96];
    if (is_qwen(p)) { /* Qwen2.5-VL: two patch kernels, RMSNorms, a SwiGLU MLP, mm.0 / mm.2 */
        add(s, &r, "v.patch_embd.weight", 4, P, P, 3, W, WLM_TYPE_F16, 0.1f, 0);
        add(s, &r, "v.patch_embd.weight.1", 4, P, P, p->bad_patch1 ? 2 : 3, W, WLM_TYPE_F16, 0.1f, 0);
        for (int l = 0; l < p->layers; l++) {
#define N_(x) (snprintf(nm, sizeof nm, "v.blk.%d.%s", l, x), nm)
            add(s, &r, N_("ln1.weight"), 1, W, 1, 1, 1, WLM_TYPE_F32, 0.2f, 1.0f);
            const char *m[4] = {"attn_q", "attn_k", "attn_v", "attn_out"};
            for (int i = 0; i < 4; i++) {
                char b[24];
                snprintf(b, sizeof b, "%s.weight", m[i]);
                add(s, &r, N_(b), 2, W, W, 1, 1, p->wtype, 2.0f * ws, 0);
                snprintf(b, sizeof b, "%s.bias", m[i]);
                add(s, &r, N_(b), 1, W, 1, 1, 1, WLM_TYPE_F32, 0.1f, 0);
            }
            add(s, &r, N_("ln2.weight"), 1, W, 1, 1, 1, WLM_TYPE_F32, 0.2f, 1.0f);
            add(s, &r, N_("ffn_gate.weight"), 2, W, F, 1, 1, p->wtype, 2.0f * ws, 0);
            add(s, &r, N_("ffn_gate.bias"), 1, F, 1, 1, 1, WLM_TYPE_F32, 0.1f, 0);
            add(s, &r, N_("ffn_up.weight"), 2, W, F, 1, 1, p->wtype, 2.0f * ws, 0);
            add(s, &r, N_("ffn_up.bias"), 1, F, 1, 1, 1, WLM_TYPE_F32, 0.1f, 0);
            add(s, &r, N_("ffn_down.weight"), 2, F, W, 1, 1, p->wtype, 2.0f / sqrtf((float)F), 0);
            add(s, &r, N_("ffn_down.bias"), 1, W, 1, 1, 1, WLM_TYPE_F32, 0.1f, 0);
#undef N_
        }
        add(s, &r, "v.post_ln.weight", 1, W, 1, 1, 1, WLM_TYPE_F32, 0.2f, 1.0f);
        add(s, &r, "mm.0.weight", 2, 4 * W, 4 * W, 1, 1, p->wtype, 2.0f / sqrtf((float)(4 * W)), 0);
        add(s, &r, "mm.0.bias", 1, 4 * W, 1, 1, 1, WLM_TYPE_F32, 0.1f, 0);
        add(s, &r, "mm.2.weight", 2, 4 * W, p->D, 1, 1, p->wtype, 2.0f / sqrtf((float)(4 * W)), 0);
        add(s, &r, "mm.2.bias", 1, p->D, 1, 1, 1, WLM_TYPE_F32, 0.1f, 0);
    } else {
    add(s, &r, "v.patch_embd.weight", 4, P, P, 3, W, WLM_TYPE_F16, 0.1f, 0);
    add(s, &r, "v.patch_embd.bias", 1, W, 1, 1, 1, WLM_TYPE_F32, 0.1f, 0);
    add(s, &r, "v.position_embd.weight", 2, W, N, 1, 1, WLM_TYPE_F32, 0.3f, 0);
    for (int l = 0; l < p->layers; l++) {
#define N_(x) (snprintf(nm, sizeof nm, "v.blk.%d.%s", l, x), nm)
        add(s, &r, N_("ln1.weight"), 1, W, 1, 1, 1, WLM_TYPE_F32, 0.2f, 1.0f);
        add(s, &r, N_("ln1.bias"), 1, W, 1, 1, 1, WLM_TYPE_F32, 0.1f, 0);
        const char *m[4] = {"attn_q", "attn_k", "attn_v", "attn_out"};
        for (int i = 0; i < 4; i++) {
            char b[24];
            snprintf(b, sizeof b, "%s.weight", m[i]);
            add(s, &r, N_(b), 2, W, W, 1, 1, p->wtype, 2.0f * ws, 0);
            snprintf(b, sizeof b, "%s.bias", m[i]);
            add(s, &r, N_(b), 1, W, 1, 1, 1, WLM_TYPE_F32, 0.1f, 0);
        }
        add(s, &r, N_("ln2.weight"), 1, W, 1, 1, 1, WLM_TYPE_F32, 0.2f, 1.0f);
        add(s, &r, N_("ln2.bias"), 1, W, 1, 1, 1, WLM_TYPE_F32, 0.1f, 0);
        add(s, &r, N_("ffn_up.weight"), 2, W, F, 1, 1, p->wtype, 2.0f * ws, 0);
        add(s, &r, N_("ffn_up.bias"), 1, F, 1, 1, 1, WLM_TYPE_F32, 0.1f, 0);
        add(s, &r, N_("ffn_down.weight"), 2, F, W, 1, 1, p->wtype, 2.0f / sqrtf((float)F), 0);
        add(s, &r, N_("ffn_down.bias"), 1, W, 1, 1, 1, WLM_TYPE_F32, 0.1f, 0);
#undef N_
    }
    add(s, &r, "v.post_ln.weight", 1, W, 1, 1, 1, WLM_TYPE_F32, 0.2f, 1.0f);
    add(s, &r, "v.post_ln.bias", 1, W, 1, 1, 1, WLM_TYPE_F32, 0.1f, 0);
    if (!strcmp(p->proj, "idefics3")) {
        const int64_t in = W * p->scale * p->scale;
        add(s, &r, "mm.model.fc.weight", 2, in, p->D, 1, 1, p->wtype, 1.0f / sqrtf((float)in), 0);
    } else if (!strcmp(p->proj, "lfm2")) {
        const int64_t in = W * p->scale * p->scale, hd = LFM2_HIDDEN;
        add(s, &r, "mm.input_norm.weight", 1, in, 1, 1, 1, WLM_TYPE_F32, 0.2f, 1.0f);
        add(s, &r, "mm.input_norm.bias", 1, in, 1, 1, 1, WLM_TYPE_F32, 0.1f, 0);
        add(s, &r, "mm.1.weight", 2, in, hd, 1, 1, p->wtype, 2.0f / sqrtf((float)in), 0);
        add(s, &r, "mm.1.bias", 1, hd, 1, 1, 1, WLM_TYPE_F32, 0.1f, 0);
        add(s, &r, "mm.2.weight", 2, hd, p->D, 1, 1, p->wtype, 2.0f / sqrtf((float)hd), 0);
        add(s, &r, "mm.2.bias", 1, p->D, 1, 1, 1, WLM_TYPE_F32, 0.1f, 0);
    } else {
        add(s, &r, "mm.soft_emb_norm.weight", 1, W, 1, 1, 1, WLM_TYPE_F32, 0.2f, 1.0f);
        add(s, &r, "mm.input_projection.weight", 2, p->D, W, 1, 1,
            p->wtype == WLM_TYPE_Q8_0 ? WLM_TYPE_F16 : p->wtype, ws, 0);
    }
    }

    wlm_gguf_writer w;
    wlm_gguf_writer_init(&w, NULL);
    wlm_gguf_add_str(&w, "general.architecture", p->arch ? p->arch : "clip");
    wlm_gguf_add_str(&w, "general.type", "mmproj");
    wlm_gguf_add_bool(&w, "clip.has_vision_encoder", 1);
    wlm_gguf_add_str(&w, "clip.projector_type", p->proj);
    if (is_qwen(p)) wlm_gguf_add_bool(&w, "clip.use_silu", 1);
    else wlm_gguf_add_bool(&w, "clip.use_gelu", p->gelu);
    wlm_gguf_add_u32(&w, "clip.vision.image_size", (uint32_t)p->S);
    wlm_gguf_add_u32(&w, "clip.vision.patch_size", (uint32_t)p->P);
    wlm_gguf_add_u32(&w, "clip.vision.embedding_length", (uint32_t)W);
    wlm_gguf_add_u32(&w, "clip.vision.feed_forward_length", (uint32_t)F);
    wlm_gguf_add_u32(&w, "clip.vision.block_count", (uint32_t)p->layers);
    wlm_gguf_add_u32(&w, "clip.vision.attention.head_count", (uint32_t)p->heads);
    wlm_gguf_add_f32(&w, "clip.vision.attention.layer_norm_epsilon", 1e-6f);
    wlm_gguf_add_u32(&w, "clip.vision.projection_dim", (uint32_t)p->D);
    const float mean[3] = {0.5f, 0.4f, 0.3f}, std[3] = {0.5f, 0.6f, 0.7f};
    wlm_gguf_add_arr(&w, "clip.vision.image_mean", WLM_GGUF_FLOAT32, mean, 3);
    wlm_gguf_add_arr(&w, "clip.vision.image_std", WLM_GGUF_FLOAT32, std, 3);
    if (is_qwen(p)) {
        if (!p->omit_scale) wlm_gguf_add_u32(&w, "clip.vision.spatial_merge_size", (uint32_t)p->scale);
        if (!p->omit_wa) wlm_gguf_add_u32(&w, "clip.vision.n_wa_pattern", (uint32_t)p->wa);
        wlm_gguf_add_u32(&w, "clip.vision.window_size", (uint32_t)p->window);
    } else if (!p->omit_scale) {
        wlm_gguf_add_u32(&w, "clip.vision.projector.scale_factor", (uint32_t)p->scale);
    }
    if (p->L) wlm_gguf_add_u32(&w, "clip.vision.preproc_image_size", (uint32_t)p->L);
    for (int i = 0; i < s->n; i++)
        if (!p->drop || strcmp(p->drop, s->t[i].name))
            wlm_gguf_add_tensor(&w, s->t[i].name, (uint32_t)s->t[i].nd, s->t[i].ne, s->t[i].type);
    wlm_gguf_write_header(&w);
    for (int i = 0; i < s->n; i++) {
        tens *t = &s->t[i];
        if (p->drop && !strcmp(p->drop, t->name)) continue;
        const wlm_type_traits *tr = wlm_type_get(t->type);
        const size_t bytes = (size_t)(t->n / tr->block_size) * tr->type_size;
        void *q = malloc(bytes);
        if (t->type == WLM_TYPE_F32) memcpy(q, t->f, bytes);
        else tr->from_float(t->f, q, t->n);
        tr->to_float(q, t->f, t->n); /* the reference uses the stored values */
        wlm_gguf_write_data(&w, q, bytes);
        free(q);
    }
    int rc = wlm_gguf_writer_finish(&w);
    unsigned char *buf = rc == WLM_OK ? wlm_gguf_writer_take(&w, size) : NULL;
    wlm_gguf_writer_free(&w);
    return buf;
}

static void synth_free(synth *s) {
    for (int i = 0; i < s->n; i++) free(s->t[i].f);
    s->n = 0;
}

static const float *T(const synth *s, const char *name) {
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->t[i].name, name)) return s->t[i].f;
    return NULL;
}

/* ---- the float64 reference encoder ------------------------------------------------------- */

static void ref_ln(double *x, const float *w, const float *b, int n, double eps) {
    double m = 0, v = 0;
    for (int i = 0; i < n; i++) m += x[i];
    m /= n;
    for (int i = 0; i < n; i++) v += (x[i] - m) * (x[i] - m);
    v /= n;
    for (int i = 0; i < n; i++) x[i] = (x[i] - m) / sqrt(v + eps) * w[i] + b[i];
}

/* y (rows) = M (rows × cols, row-major) · x + b */
static void ref_lin(double *y, const float *M, const double *x, const float *b, int rows, int cols) {
    for (int r = 0; r < rows; r++) {
        double acc = b ? b[r] : 0;
        for (int c = 0; c < cols; c++) acc += (double)M[(size_t)r * cols + c] * x[c];
        y[r] = acc;
    }
}

/* PyTorch's bilinear antialiased resize of an n × n grid of c-vectors to gw × gh, written
 * separably in double (weights tri((src + 0.5 - (dst + 0.5) / scale) / support), support
 * max(1, 1/scale), normalised per output): the reference of wlm_resize_positions. */
static void ref_resize_positions(const float *src, int n, int c, double *dst, int gw, int gh) {
    double *wx = calloc((size_t)gw * n, sizeof *wx), *wy = calloc((size_t)gh * n, sizeof *wy);
    for (int pass = 0; pass < 2; pass++) {
        const int out = pass ? gh : gw;
        double *w = pass ? wy : wx;
        const double sc = (double)out / n, sup = sc < 1 ? 1 / sc : 1;
        for (int o = 0; o < out; o++) {
            const double centre = (o + 0.5) / sc;
            double tot = 0;
            for (int i = 0; i < n; i++) {
                const double d = fabs((i + 0.5 - centre) / sup);
                tot += w[(size_t)o * n + i] = d < 1 ? 1 - d : 0;
            }
            for (int i = 0; i < n; i++) w[(size_t)o * n + i] /= tot;
        }
    }
    for (int y = 0; y < gh; y++)
        for (int x = 0; x < gw; x++)
            for (int ch = 0; ch < c; ch++) {
                double acc = 0;
                for (int sy = 0; sy < n; sy++)
                    for (int sx = 0; sx < n; sx++)
                        acc += wy[(size_t)y * n + sy] * wx[(size_t)x * n + sx] * src[((size_t)sy * n + sx) * c + ch];
                dst[((size_t)y * gw + x) * c + ch] = acc;
            }
    free(wx), free(wy);
}

static void ref_encode(const spec *p, const synth *s, const float *pix, int pw, int ph, double *out) {
    const int P = p->P, GW = pw / P, GH = ph / P, N = GW * GH, W = p->W, F = p->F, K = 3 * P * P;
    const int G0 = p->S / P;
    double *pos = malloc((size_t)N * W * sizeof *pos);
    if (GW == G0 && GH == G0)
        for (size_t i = 0; i < (size_t)N * W; i++) pos[i] = T(s, "v.position_embd.weight")[i];
    else
        ref_resize_positions(T(s, "v.position_embd.weight"), G0, W, pos, GW, GH);
    const int hd = W / p->heads;
    double *x = calloc((size_t)N * W, sizeof *x), *h = calloc((size_t)N * W, sizeof *h);
    double *q = calloc((size_t)N * W, sizeof *q), *k = calloc((size_t)N * W, sizeof *k);
    double *v = calloc((size_t)N * W, sizeof *v), *a = calloc((size_t)N * W, sizeof *a);
    double *f = calloc((size_t)F, sizeof *f), *patch = calloc((size_t)K, sizeof *patch);
    double *sc = calloc((size_t)N, sizeof *sc), *tmp = calloc((size_t)W, sizeof *tmp);
    for (int py = 0; py < GH; py++)
        for (int px = 0; px < GW; px++) {
            int i = 0;
            for (int c = 0; c < 3; c++)
                for (int ky = 0; ky < P; ky++)
                    for (int kx = 0; kx < P; kx++)
                        patch[i++] = pix[((size_t)c * ph + py * P + ky) * pw + px * P + kx];
            const int t = py * GW + px;
            ref_lin(x + (size_t)t * W, T(s, "v.patch_embd.weight"), patch, T(s, "v.patch_embd.bias"), W, K);
            for (int c = 0; c < W; c++) x[(size_t)t * W + c] += pos[(size_t)t * W + c];
        }
    free(pos);
    char nm[96];
#define L_(x) (snprintf(nm, sizeof nm, "v.blk.%d.%s", l, x), T(s, nm))
    for (int l = 0; l < p->layers; l++) {
        for (int t = 0; t < N; t++) {
            memcpy(h + (size_t)t * W, x + (size_t)t * W, (size_t)W * sizeof *h);
            ref_ln(h + (size_t)t * W, L_("ln1.weight"), L_("ln1.bias"), W, 1e-6);
            ref_lin(q + (size_t)t * W, L_("attn_q.weight"), h + (size_t)t * W, L_("attn_q.bias"), W, W);
            ref_lin(k + (size_t)t * W, L_("attn_k.weight"), h + (size_t)t * W, L_("attn_k.bias"), W, W);
            ref_lin(v + (size_t)t * W, L_("attn_v.weight"), h + (size_t)t * W, L_("attn_v.bias"), W, W);
        }
        for (int t = 0; t < N; t++)
            for (int hh = 0; hh < p->heads; hh++) {
                double mx = -1e300, sum = 0;
                for (int u = 0; u < N; u++) {
                    double d = 0;
                    for (int c = 0; c < hd; c++)
                        d += q[(size_t)t * W + hh * hd + c] * k[(size_t)u * W + hh * hd + c];
                    sc[u] = d / sqrt((double)hd);
                    if (sc[u] > mx) mx = sc[u];
                }
                for (int u = 0; u < N; u++) sum += sc[u] = exp(sc[u] - mx);
                for (int c = 0; c < hd; c++) {
                    double o = 0;
                    for (int u = 0; u < N; u++) o += sc[u] / sum * v[(size_t)u * W + hh * hd + c];
                    a[(size_t)t * W + hh * hd + c] = o;
                }
            }
        for (int t = 0; t < N; t++) {
            ref_lin(tmp, L_("attn_out.weight"), a + (size_t)t * W, L_("attn_out.bias"), W, W);
            for (int c = 0; c < W; c++) x[(size_t)t * W + c] += tmp[c];
            memcpy(h, x + (size_t)t * W, (size_t)W * sizeof *h);
            ref_ln(h, L_("ln2.weight"), L_("ln2.bias"), W, 1e-6);
            ref_lin(f, L_("ffn_up.weight"), h, L_("ffn_up.bias"), F, W);
            for (int c = 0; c < F; c++)
                f[c] = p->gelu ? 0.5 * f[c] * (1 + tanh(0.7978845608028654 * (f[c] + 0.044715 * f[c] * f[c] * f[c])))
                               : f[c] / (1 + exp(-1.702 * f[c]));
            ref_lin(tmp, L_("ffn_down.weight"), f, L_("ffn_down.bias"), W, F);
            for (int c = 0; c < W; c++) x[(size_t)t * W + c] += tmp[c];
        }
    }
#undef L_
    for (int t = 0; t < N; t++) ref_ln(x + (size_t)t * W, T(s, "v.post_ln.weight"), T(s, "v.post_ln.bias"), W, 1e-6);
    const int sf = p->scale, gx = GW / sf, gy = GH / sf, G = GW;
    for (int R = 0; R < gy; R++)
        for (int C = 0; C < gx; C++) {
            double *o = out + ((size_t)R * gx + C) * p->D;
            if (strcmp(p->proj, "gemma3")) {
                const int in = W * sf * sf;
                double *cat = calloc((size_t)in, sizeof *cat);
                for (int dy = 0; dy < sf; dy++)
                    for (int dx = 0; dx < sf; dx++)
                        for (int c = 0; c < W; c++)
                            cat[c + W * (dx + sf * dy)] = x[((size_t)(R * sf + dy) * G + C * sf + dx) * W + c];
                if (!strcmp(p->proj, "idefics3")) {
                    ref_lin(o, T(s, "mm.model.fc.weight"), cat, NULL, p->D, in);
                } else { /* lfm2: LayerNorm (1e-5), mm.1, GELU (tanh), mm.2 */
                    double hid[LFM2_HIDDEN];
                    ref_ln(cat, T(s, "mm.input_norm.weight"), T(s, "mm.input_norm.bias"), in, 1e-5);
                    ref_lin(hid, T(s, "mm.1.weight"), cat, T(s, "mm.1.bias"), LFM2_HIDDEN, in);
                    for (int c = 0; c < LFM2_HIDDEN; c++)
                        hid[c] = 0.5 * hid[c] * (1 + tanh(0.7978845608028654 * (hid[c] + 0.044715 * hid[c] * hid[c] * hid[c])));
                    ref_lin(o, T(s, "mm.2.weight"), hid, T(s, "mm.2.bias"), p->D, LFM2_HIDDEN);
                }
                free(cat);
            } else {
                double ms = 0;
                for (int c = 0; c < W; c++) {
                    double m = 0;
                    for (int dy = 0; dy < sf; dy++)
                        for (int dx = 0; dx < sf; dx++)
                            m += x[((size_t)(R * sf + dy) * G + C * sf + dx) * W + c];
                    tmp[c] = m / (sf * sf);
                    ms += tmp[c] * tmp[c];
                }
                const double rs = 1.0 / sqrt(ms / W + 1e-6);
                for (int c = 0; c < W; c++) tmp[c] *= rs * T(s, "mm.soft_emb_norm.weight")[c];
                const float *M = T(s, "mm.input_projection.weight"); /* [D, W]: x·M */
                for (int d = 0; d < p->D; d++) {
                    double acc = 0;
                    for (int c = 0; c < W; c++) acc += tmp[c] * M[(size_t)c * p->D + d];
                    o[d] = acc;
                }
            }
        }
    free(x), free(h), free(q), free(k), free(v), free(a), free(f), free(patch), free(sc), free(tmp);
}

static void ref_rms(double *x, const float *w, int n, double eps) {
    double ms = 0;
    for (int i = 0; i < n; i++) ms += x[i] * x[i];
    const double r = 1.0 / sqrt(ms / n + eps);
    for (int i = 0; i < n; i++) x[i] *= r * w[i];
}

/* Qwen2.5-VL's tower and merger in float64, written from the model's definition rather than
 * llama.cpp's graph: patches in raster order (no reordering); in a window block patch (py, px)
 * attends to the patches of its window, the (window / P / 2)-group squares of the 2×2 group
 * grid; 2-D RoPE on the pairs (i, i + hd/2): the first hd/4 by the row, the next by the column,
 * frequency 10000^(-4j/hd) for the j-th pair of a quarter; output token (R, C) = the MLP of the
 * group (2R + dy, 2C + dx) concatenated, dy major. */
static void ref_encode_qwen(const spec *p, const synth *s, const float *pix, int pw, int ph, double *out) {
    const int P = p->P, GW = pw / P, GH = ph / P, N = GW * GH, W = p->W, F = p->F, K = 3 * P * P;
    const int hd = W / p->heads, g = p->window / P / 2;
    double *x = calloc((size_t)N * W, sizeof *x), *h = calloc((size_t)W, sizeof *h);
    double *q = calloc((size_t)N * W, sizeof *q), *k = calloc((size_t)N * W, sizeof *k);
    double *v = calloc((size_t)N * W, sizeof *v), *a = calloc((size_t)N * W, sizeof *a);
    double *f = calloc((size_t)F, sizeof *f), *u = calloc((size_t)F, sizeof *u);
    double *patch = calloc((size_t)K, sizeof *patch), *tmp = calloc((size_t)W, sizeof *tmp);
    double *sc = calloc((size_t)N, sizeof *sc), *tmp2 = calloc((size_t)W, sizeof *tmp2);
    for (int py = 0; py < GH; py++)
        for (int px = 0; px < GW; px++) {
            int i = 0;
            for (int c = 0; c < 3; c++)
                for (int ky = 0; ky < P; ky++)
                    for (int kx = 0; kx < P; kx++)
                        patch[i++] = pix[((size_t)c * ph + py * P + ky) * pw + px * P + kx];
            const int t = py * GW + px;
            ref_lin(x + (size_t)t * W, T(s, "v.patch_embd.weight"), patch, NULL, W, K);
            ref_lin(tmp, T(s, "v.patch_embd.weight.1"), patch, NULL, W, K);
            for (int c = 0; c < W; c++) x[(size_t)t * W + c] += tmp[c];
        }
    char nm[96];
#define L_(x) (snprintf(nm, sizeof nm, "v.blk.%d.%s", l, x), T(s, nm))
    for (int l = 0; l < p->layers; l++) {
        const int full = p->wa <= 0 || (l + 1) % p->wa == 0;
        for (int t = 0; t < N; t++) {
            memcpy(h, x + (size_t)t * W, (size_t)W * sizeof *h);
            ref_rms(h, L_("ln1.weight"), W, 1e-6);
            double *qt = q + (size_t)t * W, *kt = k + (size_t)t * W;
            ref_lin(qt, L_("attn_q.weight"), h, L_("attn_q.bias"), W, W);
            ref_lin(kt, L_("attn_k.weight"), h, L_("attn_k.bias"), W, W);
            ref_lin(v + (size_t)t * W, L_("attn_v.weight"), h, L_("attn_v.bias"), W, W);
            const int py = t / GW, px = t % GW;
            for (int hh = 0; hh < p->heads; hh++)
                for (int i = 0; i < hd / 2; i++) {
                    const int j = i < hd / 4 ? i : i - hd / 4;
                    const double ang = (i < hd / 4 ? py : px) * pow(10000.0, -4.0 * j / hd);
                    double *xs[2] = {qt, kt};
                    for (int z = 0; z < 2; z++) {
                        double *e = xs[z] + hh * hd;
                        const double x0 = e[i], x1 = e[i + hd / 2];
                        e[i] = x0 * cos(ang) - x1 * sin(ang);
                        e[i + hd / 2] = x0 * sin(ang) + x1 * cos(ang);
                    }
                }
        }
        for (int t = 0; t < N; t++) {
            const int wy = (t / GW) / 2 / g, wx = (t % GW) / 2 / g;
            for (int hh = 0; hh < p->heads; hh++) {
                double mx = -1e300, sum = 0;
                for (int o = 0; o < N; o++) {
                    const int in = full || ((o / GW) / 2 / g == wy && (o % GW) / 2 / g == wx);
                    double d = 0;
                    for (int c = 0; c < hd; c++)
                        d += q[(size_t)t * W + hh * hd + c] * k[(size_t)o * W + hh * hd + c];
                    sc[o] = in ? d / sqrt((double)hd) : -INFINITY;
                    if (sc[o] > mx) mx = sc[o];
                }
                for (int o = 0; o < N; o++) sum += sc[o] = exp(sc[o] - mx);
                for (int c = 0; c < hd; c++) {
                    double acc = 0;
                    for (int o = 0; o < N; o++) acc += sc[o] / sum * v[(size_t)o * W + hh * hd + c];
                    a[(size_t)t * W + hh * hd + c] = acc;
                }
            }
        }
        for (int t = 0; t < N; t++) {
            ref_lin(tmp, L_("attn_out.weight"), a + (size_t)t * W, L_("attn_out.bias"), W, W);
            for (int c = 0; c < W; c++) x[(size_t)t * W + c] += tmp[c];
            memcpy(h, x + (size_t)t * W, (size_t)W * sizeof *h);
            ref_rms(h, L_("ln2.weight"), W, 1e-6);
            ref_lin(f, L_("ffn_gate.weight"), h, L_("ffn_gate.bias"), F, W);
            ref_lin(u, L_("ffn_up.weight"), h, L_("ffn_up.bias"), F, W);
            for (int c = 0; c < F; c++) f[c] = f[c] / (1 + exp(-f[c])) * u[c];
            ref_lin(tmp2, L_("ffn_down.weight"), f, L_("ffn_down.bias"), W, F);
            for (int c = 0; c < W; c++) x[(size_t)t * W + c] += tmp2[c];
        }
    }
#undef L_
    for (int t = 0; t < N; t++) ref_rms(x + (size_t)t * W, T(s, "v.post_ln.weight"), W, 1e-6);
    const int in = 4 * W, gx = GW / 2, gy = GH / 2;
    double *cat = calloc((size_t)in, sizeof *cat), *hid = calloc((size_t)in, sizeof *hid);
    for (int R = 0; R < gy; R++)
        for (int C = 0; C < gx; C++) {
            for (int dy = 0; dy < 2; dy++)
                for (int dx = 0; dx < 2; dx++)
                    for (int c = 0; c < W; c++)
                        cat[c + W * (dx + 2 * dy)] = x[((size_t)(R * 2 + dy) * GW + C * 2 + dx) * W + c];
            ref_lin(hid, T(s, "mm.0.weight"), cat, T(s, "mm.0.bias"), in, in);
            for (int c = 0; c < in; c++)
                hid[c] = 0.5 * hid[c] * (1 + tanh(0.7978845608028654 * (hid[c] + 0.044715 * hid[c] * hid[c] * hid[c])));
            ref_lin(out + ((size_t)R * gx + C) * p->D, T(s, "mm.2.weight"), hid, T(s, "mm.2.bias"), p->D, in);
        }
    free(cat), free(hid);
    free(x), free(h), free(q), free(k), free(v), free(a), free(f), free(u), free(patch), free(tmp);
    free(sc), free(tmp2);
}

static double cosine(const float *a, const double *b, int n) {
    double ab = 0, aa = 0, bb = 0;
    for (int i = 0; i < n; i++) ab += a[i] * b[i], aa += (double)a[i] * a[i], bb += b[i] * b[i];
    return ab / sqrt(aa * bb + 1e-300);
}

static unsigned char *test_image(int w, int h, uint64_t seed) {
    tu_rng r = {seed};
    unsigned char *img = malloc((size_t)w * h * 3);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < 3; c++) /* smooth gradient + noise: resampling matters */
                img[((size_t)y * w + x) * 3 + c] =
                    (unsigned char)((x * 255 / (w > 1 ? w - 1 : 1) + y * 97 / (h > 1 ? h - 1 : 1) * (c + 1) +
                                     (int)tu_rng_uniform(&r, 0, 40)) % 256);
    return img;
}

/* Encodes images of several sizes with the library and the reference, checks token counts and
 * per-token cosines; SIMD vs scalar, threads vs none. */
static void check_model(const spec *p, const int (*sizes)[2], int n_sizes, double min_cos) {
    synth s;
    size_t size = 0;
    unsigned char *file = write_mmproj(p, &s, &size);
    if (!CHECK(file != NULL)) return;
    wlm_vision *v = NULL;
    int rc = wlm_vision_load(file, size, WLM_LOAD_OWN_BUFFER, &v);
    if (!CHECKF(rc == WLM_OK, "%s %s: %s", p->proj, wlm_type_get(p->wtype)->name, wlm_vision_errmsg(v))) {
        wlm_vision_free(v);
        synth_free(&s);
        return;
    }
    wlm_vision_info info;
    CHECK_EQ_INT(wlm_vision_get_info(v, &info), WLM_OK);
    CHECK(!strcmp(info.projector, p->proj));
    const int g0 = p->S / p->P / p->scale;
    CHECK_EQ_INT(info.piece_tokens, g0 * g0);
    CHECK_EQ_INT(info.proj_dim, p->D);
    wlm_threadpool *pool = NULL;
    const int prc = wlm_threadpool_new(3, &pool); /* a wasm build without threads: none */
    CHECKF(prc == WLM_OK || prc == WLM_ERR_UNSUPPORTED, "wlm_threadpool_new: %s", wlm_status_name(prc));
    for (int i = 0; i < n_sizes; i++) {
        const int w = sizes[i][0], h = sizes[i][1];
        unsigned char *img = test_image(w, h, (uint64_t)(w * 131 + h));
        wlm_image_embd e, e_simd, e_mt;
        CHECK_EQ_INT(wlm_image_encode(v, img, w, h, NULL, 0, &e), WLM_OK);
        CHECK_EQ_INT(wlm_image_encode(v, img, w, h, NULL, 1, &e_simd), WLM_OK);
#if !defined(__EMSCRIPTEN__)
        wlm_threadpool_helpers_only(pool, pool != NULL); /* every chunk on a helper */
#endif
        pm_arm();
        CHECK_EQ_INT(wlm_image_encode(v, img, w, h, pool, 1, &e_mt), WLM_OK);
        const long calls = pm_disarm();
        CHECKF(calls == 0, "%s %s %dx%d: %ld heap calls on the pool's helper threads", p->proj,
               wlm_type_get(p->wtype)->name, w, h, calls);
        int cols = 0, rows = 0, pw = 0, ph = 0, lw = 0, lh = 0;
        wlm_vision_grid(v, w, h, &cols, &rows);
        wlm_vision_piece_dims(v, w, h, cols, rows, 0, &pw, &ph);
        wlm_vision_piece_dims(v, w, h, cols, rows, cols * rows, &lw, &lh);
        const int tpp = (pw / p->P / p->scale) * (ph / p->P / p->scale);
        const int last = (lw / p->P / p->scale) * (lh / p->P / p->scale);
        CHECK_EQ_INT(e.n_pieces, cols * rows + 1);
        CHECK_EQ_INT(e.n_tokens, (e.n_pieces - 1) * tpp + last);
        CHECK_EQ_INT(e.tokens_per_piece, e.n_pieces > 1 ? tpp : last);
        CHECK_EQ_INT(e.last_tokens, last);
        CHECK_EQ_INT(e.n_embd, p->D);
        CHECK_EQ_INT(e.last_cols * e.last_rows, last);
        CHECK(e.last_cols == lw / p->P / p->scale && e.last_rows == lh / p->P / p->scale);
        CHECK(e_mt.n_tokens == e_simd.n_tokens && e_mt.embd && e_simd.embd &&
              !memcmp(e_mt.embd, e_simd.embd, (size_t)e.n_tokens * p->D * sizeof(float)));
        { /* rows encoded elsewhere (the GPU encoder) wrapped as this image: the same layout, the
             rows copied as given; another count or a non-finite value refused */
            const size_t nf = (size_t)e.n_tokens * p->D;
            wlm_image_embd r;
            CHECK_EQ_INT(wlm_image_embd_from_rows(v, w, h, e.embd, nf, &r), WLM_OK);
            CHECK(r.n_tokens == e.n_tokens && r.n_embd == e.n_embd && r.n_pieces == e.n_pieces &&
                  r.tokens_per_piece == e.tokens_per_piece && r.grid_cols == e.grid_cols &&
                  r.grid_rows == e.grid_rows && r.last_tokens == e.last_tokens &&
                  r.last_cols == e.last_cols && r.last_rows == e.last_rows);
            CHECK(r.embd && r.embd != e.embd && !memcmp(r.embd, e.embd, nf * sizeof(float)));
            wlm_image_embd_free(&r);
            CHECK_EQ_INT(wlm_image_embd_from_rows(v, w, h, e.embd, nf - 1, &r), WLM_ERR_INVALID_ARG);
            CHECK(r.embd == NULL && strstr(wlm_vision_errmsg(v), "floats of rows given") != NULL);
            const float keep = e.embd[nf - 1];
            e.embd[nf - 1] = NAN;
            CHECK_EQ_INT(wlm_image_embd_from_rows(v, w, h, e.embd, nf, &r), WLM_ERR_INVALID_ARG);
            e.embd[nf - 1] = keep;
            CHECK_EQ_INT(wlm_image_embd_from_rows(v, 0, h, e.embd, nf, &r), WLM_ERR_INVALID_ARG);
        }
        /* reference on the library's preprocessed pieces (preprocessing is checked apart) */
        float *pix = malloc(((size_t)(e.n_pieces - 1) * 3 * pw * ph + (size_t)3 * lw * lh) * sizeof *pix);
        CHECK_EQ_INT(wlm_vision_preprocess(v, img, w, h, pix), WLM_OK);
        double *ref = malloc((size_t)e.n_tokens * p->D * sizeof *ref);
        for (int k = 0; k < e.n_pieces; k++) {
            const int lastp = k == e.n_pieces - 1;
            (is_qwen(p) ? ref_encode_qwen : ref_encode)(p, &s, pix + (size_t)k * 3 * pw * ph,
                                                        lastp ? lw : pw, lastp ? lh : ph,
                                                        ref + (size_t)k * tpp * p->D);
        }
        double worst = 1, worst_simd = 1;
        for (int t = 0; t < e.n_tokens; t++) {
            const double c0 = cosine(e.embd + (size_t)t * p->D, ref + (size_t)t * p->D, p->D);
            const double c1 = cosine(e_simd.embd + (size_t)t * p->D, ref + (size_t)t * p->D, p->D);
            if (c0 < worst) worst = c0;
            if (c1 < worst_simd) worst_simd = c1;
        }
        if (getenv("VISION_TEST_VERBOSE")) printf("%s %s %dx%d: worst cosine %.7f\n", p->proj, wlm_type_get(p->wtype)->name, w, h, worst);
        CHECKF(worst >= min_cos && worst_simd >= min_cos, "%s %s %dx%d: worst cosine %.7f (simd %.7f)",
               p->proj, wlm_type_get(p->wtype)->name, w, h, worst, worst_simd);
        free(pix), free(ref), free(img);
        wlm_image_embd_free(&e), wlm_image_embd_free(&e_simd), wlm_image_embd_free(&e_mt);
    }
    wlm_threadpool_free(pool);
    wlm_vision_free(v);
    synth_free(&s);
}

/* ---- preprocessing ------------------------------------------------------------------------ */

static double lanczos3_f64(double x) {
    if (x <= -3 || x >= 3) return 0;
    return x == 0 ? 1 : sin(PI * x) / (PI * x) * sin(PI * x / 3) / (PI * x / 3);
}

static double bicubic_f64(double x) {
    x = fabs(x);
    return x < 1 ? 1.5 * x * x * x - 2.5 * x * x + 1 : x < 2 ? -0.5 * x * x * x + 2.5 * x * x - 4 * x + 2 : 0;
}

/* A float64 twin of Pillow's separable resampling with kernel k of the given support (widened by
 * the scale when shrinking; horizontal pass rounded to 8 bits, then vertical) of img (sw × sh RGB)
 * to dw × dh: the largest difference in levels from out. */
static int twin_worst(const unsigned char *img, int sw, int sh, const unsigned char *out, int dw,
                      int dh, double (*k)(double), double support) {
    double *hp = malloc((size_t)dw * sh * 3 * sizeof *hp);
    int worst = 0;
    for (int pass = 0; pass < 2; pass++) {
        const int in = pass ? sh : sw, on = pass ? dh : dw;
        const double scale = (double)in / on, fs = scale < 1 ? 1 : scale, sup = support * fs;
        for (int o = 0; o < on; o++) {
            const double center = (o + 0.5) * scale;
            int lo = (int)(center - sup + 0.5), hi = (int)(center + sup + 0.5);
            if (lo < 0) lo = 0;
            if (hi > in) hi = in;
            double wsum = 0, wts[64];
            for (int i = lo; i < hi; i++) wsum += wts[i - lo] = k((i - center + 0.5) / fs);
            const int other = pass ? dw : sh;
            for (int j = 0; j < other; j++)
                for (int c = 0; c < 3; c++) {
                    double acc = 0;
                    for (int i = lo; i < hi; i++)
                        acc += wts[i - lo] / wsum *
                               (pass ? hp[((size_t)i * dw + j) * 3 + c] : img[((size_t)j * sw + i) * 3 + c]);
                    acc = floor(acc + 0.5);
                    acc = acc < 0 ? 0 : acc > 255 ? 255 : acc;
                    if (!pass) {
                        hp[((size_t)j * dw + o) * 3 + c] = acc;
                    } else {
                        const int d = abs((int)acc - out[((size_t)o * dw + j) * 3 + c]);
                        if (d > worst) worst = d;
                    }
                }
        }
    }
    free(hp);
    return worst;
}

static void test_resampling(void) {
    tu_section("resampling");
    /* Pillow's bilinear, upscaling 2 → 4: half-pixel centres, edges clamped */
    const unsigned char src[6] = {0, 10, 20, 100, 110, 120}; /* 2×1 RGB */
    unsigned char dst[12], t0[12];
    CHECK(wlm_resize_bilinear_pillow(src, 2, 1, dst, 4, 1, t0));
    const int want[4] = {0, 25, 75, 100}; /* x = -0.25, 0.25, 0.75, 1.25 */
    for (int i = 0; i < 4; i++) CHECK_EQ_INT(dst[i * 3], want[i]);
    CHECK_EQ_INT(dst[1 * 3 + 2], 45);
    /* downscaling 4 → 2: the triangle widened to support 2, weights (.75, .75, .25) / 1.75 */
    const unsigned char four[12] = {0, 0, 0, 100, 0, 0, 200, 0, 0, 255, 0, 0};
    CHECK(wlm_resize_bilinear_pillow(four, 4, 1, dst, 2, 1, t0));
    CHECKF(dst[0] == 71 && dst[3] == 209, "bilinear 4 → 2: %d %d", dst[0], dst[3]);

    /* Lanczos-3: identity, constants, and a float64 twin of Pillow's filter within 1 level */
    unsigned char *img = test_image(37, 23, 7), *out = malloc(64 * 64 * 3), *tmp = malloc(64 * 64 * 3);
    CHECK(wlm_resize_lanczos3(img, 37, 23, out, 37, 23, tmp) && !memcmp(out, img, 37 * 23 * 3));
    unsigned char flat[30 * 20 * 3];
    memset(flat, 77, sizeof flat);
    CHECK(wlm_resize_lanczos3(flat, 30, 20, out, 13, 41, tmp));
    int all77 = 1;
    for (int i = 0; i < 13 * 41 * 3; i++) all77 &= out[i] == 77;
    CHECK(all77);
    const int sizes[3][2] = {{16, 11}, {64, 50}, {37, 9}};
    for (int k = 0; k < 3; k++) {
        const int dw = sizes[k][0], dh = sizes[k][1];
        CHECK(wlm_resize_lanczos3(img, 37, 23, out, dw, dh, tmp));
        const int worst = twin_worst(img, 37, 23, out, dw, dh, lanczos3_f64, 3);
        CHECKF(worst <= 1, "lanczos %dx%d: off by %d levels", dw, dh, worst);
    }
    /* Pillow's bicubic (Qwen2.5-VL): identity, constants, the same float64 twin with Keys' cubic
     * (a = -0.5, support 2), up and down */
    CHECK(wlm_resize_bicubic_pillow(img, 37, 23, out, 37, 23, tmp) && !memcmp(out, img, 37 * 23 * 3));
    CHECK(wlm_resize_bicubic_pillow(flat, 30, 20, out, 13, 41, tmp));
    all77 = 1;
    for (int i = 0; i < 13 * 41 * 3; i++) all77 &= out[i] == 77;
    CHECK(all77);
    for (int k = 0; k < 3; k++) {
        const int dw = sizes[k][0], dh = sizes[k][1];
        CHECK(wlm_resize_bicubic_pillow(img, 37, 23, out, dw, dh, tmp));
        const int worst = twin_worst(img, 37, 23, out, dw, dh, bicubic_f64, 2);
        CHECKF(worst <= 1, "bicubic %dx%d: off by %d levels", dw, dh, worst);
    }
    free(img), free(out), free(tmp);
}

static void test_gemma3_letterbox(void) {
    tu_section("gemma3 letterbox");
    spec p = {.proj = "gemma3", .S = 28, .P = 7, .W = 32, .F = 64, .layers = 1, .heads = 4,
              .scale = 2, .D = 24, .wtype = WLM_TYPE_F32, .gelu = 1};
    synth s;
    size_t size;
    unsigned char *file = write_mmproj(&p, &s, &size);
    wlm_vision *v = NULL;
    CHECK_EQ_INT(wlm_vision_load(file, size, WLM_LOAD_OWN_BUFFER, &v), WLM_OK);
    /* 14×7 → scale 2 → 28×14 pasted at y = 7 on black: rows 0..6 and 21..27 are black, i.e.
     * (0 - mean) / std after normalisation */
    unsigned char *img = test_image(14, 7, 3);
    float *pix = malloc(3 * 28 * 28 * sizeof *pix);
    CHECK_EQ_INT(wlm_vision_preprocess(v, img, 14, 7, pix), WLM_OK);
    CHECK_NEAR(pix[0], (0 - 0.5f) / 0.5f, 1e-6);
    CHECK_NEAR(pix[28 * 28 + 27 * 28 + 5], (0 - 0.4f) / 0.6f, 1e-6);
    CHECK(fabsf(pix[10 * 28 + 5] - (0 - 0.5f) / 0.5f) > 1e-3 || img[0] == 0);
    /* an S×S image is used as is */
    unsigned char *sq = test_image(28, 28, 4);
    CHECK_EQ_INT(wlm_vision_preprocess(v, sq, 28, 28, pix), WLM_OK);
    CHECK_NEAR(pix[2 * 28 * 28 + 3 * 28 + 4], (sq[(3 * 28 + 4) * 3 + 2] / 255.0f - 0.3f) / 0.7f, 1e-6);
    free(img), free(sq), free(pix);
    wlm_vision_free(v);
    synth_free(&s);
}

static void test_idefics3_grid(void) {
    tu_section("idefics3 grid");
    spec p = {.proj = "idefics3", .S = 32, .P = 8, .W = 32, .F = 64, .layers = 1, .heads = 2,
              .scale = 2, .L = 64, .D = 24, .wtype = WLM_TYPE_F32, .gelu = 1};
    synth s;
    size_t size;
    unsigned char *file = write_mmproj(&p, &s, &size);
    wlm_vision *v = NULL;
    CHECK_EQ_INT(wlm_vision_load(file, size, WLM_LOAD_OWN_BUFFER, &v), WLM_OK);
    int c, r;
    wlm_vision_grid(v, 50, 30, &c, &r); /* scale 1.28: 64 × 38.4 → 2 × 2 */
    CHECK(c == 2 && r == 2);
    wlm_vision_grid(v, 10, 100, &c, &r); /* scale 0.64: 6.4 × 64 → 1 × 2 */
    CHECK(c == 1 && r == 2);
    wlm_vision_grid(v, 64, 64, &c, &r);
    CHECK(c == 2 && r == 2);

    /* the pieces of a 20×24 image (scale 2.67: 53.3 × 64 → 2 × 2 tiles of the 64×64 refined
     * image, itself Lanczos to 54×64 then stretched), and the overview: that refined image shrunk
     * to 32×32 (as llama.cpp b12211), not the original resampled once */
    const int w = 20, h = 24, S = 32, n = S * S;
    const float mean[3] = {0.5f, 0.4f, 0.3f}, sd[3] = {0.5f, 0.6f, 0.7f}; /* write_mmproj's */
    unsigned char *img = test_image(w, h, 5), *a = malloc(54 * 64 * 3), *ref = malloc(64 * 64 * 3);
    unsigned char *ov = malloc(n * 3), *tmp = malloc(64 * 64 * 3);
    float *pix = malloc(5 * 3 * (size_t)n * sizeof *pix);
    CHECK_EQ_INT(wlm_vision_preprocess(v, img, w, h, pix), WLM_OK);
    CHECK(wlm_resize_lanczos3(img, w, h, a, 54, 64, tmp) && wlm_resize_lanczos3(a, 54, 64, ref, 64, 64, tmp));
    int bad_tile = 0, bad_ov = 0;
    for (int t = 0; t < 4; t++) /* tile t = (row t / 2, column t % 2), planes R, G, B */
        for (int y = 0; y < S; y++)
            for (int x = 0; x < S; x++)
                for (int ch = 0; ch < 3; ch++) {
                    const unsigned char u = ref[(((t / 2) * S + y) * 64 + (t % 2) * S + x) * 3 + ch];
                    const float want = ((float)u / 255.0f - mean[ch]) / sd[ch];
                    bad_tile += fabsf(pix[(size_t)t * 3 * n + (size_t)ch * n + y * S + x] - want) > 1e-6f;
                }
    CHECK(wlm_resize_lanczos3(ref, 64, 64, ov, S, S, tmp));
    for (int i = 0; i < n; i++)
        for (int ch = 0; ch < 3; ch++)
            bad_ov += fabsf(pix[4 * 3 * (size_t)n + (size_t)ch * n + i] -
                            ((float)ov[i * 3 + ch] / 255.0f - mean[ch]) / sd[ch]) > 1e-6f;
    CHECK_EQ_INT(bad_tile, 0);
    CHECK_EQ_INT(bad_ov, 0);
    /* and the original resampled once differs (the check above can fail) */
    CHECK(wlm_resize_lanczos3(img, w, h, ov, S, S, tmp));
    int differ = 0;
    for (int i = 0; i < n; i++)
        differ += fabsf(pix[4 * 3 * (size_t)n + i] - ((float)ov[i * 3] / 255.0f - 0.5f) / 0.5f) > 1e-6f;
    CHECK(differ > 0);
    free(img), free(a), free(ref), free(ov), free(tmp), free(pix);
    wlm_vision_free(v);
    synth_free(&s);
}

/* ---- errors ------------------------------------------------------------------------------- */

static void expect_load_error(const spec *p, int status, const char *needle) {
    synth s;
    size_t size;
    unsigned char *file = write_mmproj(p, &s, &size);
    wlm_vision *v = NULL;
    const int rc = wlm_vision_load(file, size, WLM_LOAD_OWN_BUFFER, &v);
    CHECKF(rc == status && strstr(wlm_vision_errmsg(v), needle), "got %s '%s', want %s with '%s'",
           wlm_status_name(rc), wlm_vision_errmsg(v), wlm_status_name(status), needle);
    wlm_vision_info info;
    CHECK_EQ_INT(wlm_vision_get_info(v, &info), WLM_ERR_STATE);
    unsigned char px[3] = {1, 2, 3};
    wlm_image_embd e;
    CHECK_EQ_INT(wlm_image_encode(v, px, 1, 1, NULL, 0, &e), WLM_ERR_STATE);
    wlm_vision_free(v);
    synth_free(&s);
}

static void test_errors(void) {
    tu_section("errors");
    const spec base = {.proj = "gemma3", .S = 28, .P = 7, .W = 32, .F = 64, .layers = 1,
                       .heads = 4, .scale = 2, .D = 24, .wtype = WLM_TYPE_F32, .gelu = 1};
    spec p = base;
    p.proj = "qwen2vl_merger"; /* Qwen2-VL's (LayerNorm, no windows): not in the table */
    expect_load_error(&p, WLM_ERR_UNSUPPORTED, "projector type 'qwen2vl_merger' is not supported");
    const spec qbase = {.proj = "qwen2.5vl_merger", .S = 32, .P = 4, .W = 32, .F = 64, .layers = 2,
                        .heads = 2, .scale = 2, .D = 24, .wtype = WLM_TYPE_F32, .wa = 2, .window = 16};
    p = qbase;
    p.omit_wa = 1; /* llama.cpp requires it for qwen2.5vl */
    expect_load_error(&p, WLM_ERR_FORMAT, "'clip.vision.n_wa_pattern' is missing");
    p = qbase;
    p.scale = 3;
    expect_load_error(&p, WLM_ERR_UNSUPPORTED, "spatial_merge_size 3 is not supported");
    p = qbase;
    p.window = 4; /* smaller than one 2×2 group of 4-pixel patches */
    expect_load_error(&p, WLM_ERR_FORMAT, "window_size 4 is smaller");
    p = qbase;
    p.heads = 16; /* head size 32 / 16 = 2: not a multiple of 4 */
    expect_load_error(&p, WLM_ERR_FORMAT, "head size 2 is not a multiple of 4");
    p = qbase;
    p.bad_patch1 = 1;
    expect_load_error(&p, WLM_ERR_FORMAT, "'v.patch_embd.weight.1' has shape [4, 4, 2, 32]");
    p = qbase;
    p.drop = "v.blk.1.ffn_gate.bias";
    expect_load_error(&p, WLM_ERR_FORMAT, "'v.blk.1.ffn_gate.bias' is missing");
    p = qbase;
    p.drop = "mm.2.weight";
    expect_load_error(&p, WLM_ERR_FORMAT, "'mm.2.weight' is missing");
    p = base;
    p.arch = "llama";
    expect_load_error(&p, WLM_ERR_FORMAT, "'llama', expected 'clip'");
    p = base;
    p.drop = "v.blk.0.attn_k.weight";
    expect_load_error(&p, WLM_ERR_FORMAT, "'v.blk.0.attn_k.weight' is missing");
    p = base;
    p.scale = 3; /* a 4×4 grid is not divisible by 3 */
    expect_load_error(&p, WLM_ERR_FORMAT, "scale factor 3");
    p = base;
    p.proj = "idefics3";
    p.omit_scale = 1; /* idefics3 has no default */
    expect_load_error(&p, WLM_ERR_FORMAT, "scale_factor is missing");

    /* truncated files: an error, never a crash */
    synth s;
    size_t size;
    unsigned char *file = write_mmproj(&base, &s, &size);
    int failures = 0;
    for (size_t cut = 0; cut < size; cut += size / 97 + 1) {
        unsigned char *b = malloc(cut + 4);
        memcpy(b, file, cut);
        wlm_vision *v = NULL;
        if (wlm_vision_load(b, cut, WLM_LOAD_OWN_BUFFER, &v) == WLM_OK) failures++;
        wlm_vision_free(v);
    }
    CHECKF(failures == 0, "%d truncated files loaded", failures);

    wlm_vision *v = NULL;
    CHECK_EQ_INT(wlm_vision_load(file, size, 0, &v), WLM_OK);
    wlm_image_embd e;
    unsigned char px[12] = {0};
    CHECK_EQ_INT(wlm_image_encode(v, px, 0, 4, NULL, 0, &e), WLM_ERR_INVALID_ARG);
    CHECK(strstr(wlm_vision_errmsg(v), "0×4") != NULL);
    CHECK_EQ_INT(wlm_image_encode(v, px, WLM_IMAGE_MAX_SIDE + 1, 1, NULL, 0, &e), WLM_ERR_INVALID_ARG);
    CHECK_EQ_INT(wlm_image_encode(v, px, 10000, 10000, NULL, 0, &e), WLM_ERR_INVALID_ARG);
    CHECK_EQ_INT(wlm_image_encode(v, NULL, 2, 2, NULL, 0, &e), WLM_ERR_INVALID_ARG);
    CHECK(e.embd == NULL && e.n_tokens == 0);
    wlm_vision_free(v);
    CHECK_EQ_INT(wlm_vision_load(file, size, 8, &v), WLM_ERR_INVALID_ARG);
    wlm_vision_free(v);
    free(file);
    synth_free(&s);
    wlm_vision_free(NULL);
    wlm_image_embd_free(NULL);
}

/* LFM2's pieces: smart-resize sizes worked by hand, the tiles it refuses, pixel unshuffle and
 * the position resize against their references (exact / 1e-5). */
static void test_lfm2_pieces(void) {
    tu_section("lfm2 pieces");
    int w, h;
    /* P·s = 32, 64..256 tokens (LFM2-VL-450M) */
    wlm_smart_resize(704, 704, 32, 64 * 1024, 256 * 1024, &w, &h); /* 484 tokens: beta 1.375 */
    CHECK(w == 512 && h == 512);
    wlm_smart_resize(1056, 384, 32, 64 * 1024, 256 * 1024, &w, &h); /* 33×12 → 396 > 256 */
    CHECK(w == 832 && h == 288);  /* beta = sqrt(405504/262144) = 1.2437 */
    wlm_smart_resize(100, 60, 32, 64 * 1024, 256 * 1024, &w, &h); /* 96×64 < 65536: up */
    CHECK(w == 352 && h == 224);  /* beta = sqrt(65536/6000) = 3.305 */
    wlm_smart_resize(500, 400, 32, 64 * 1024, 256 * 1024, &w, &h); /* 12.5 → 12: half to even */
    CHECK(w == 512 && h == 384);
    wlm_smart_resize(720, 720, 32, 64 * 1024, 256 * 1024, &w, &h); /* 22.5 → 22, then > 256 */
    CHECK(w == 512 && h == 512);
    wlm_smart_resize(800, 700, 32, 64 * 1024, 256 * 1024, &w, &h); /* the thumbnail */
    CHECK(w == 544 && h == 448);
    wlm_smart_resize(90, 50, 8, 4096, 16384, &w, &h);
    CHECK(w == 88 && h == 48);
    /* pixel unshuffle of a 4 × 2 grid of 2-vectors by 2: token (0, C) = (0, 2C), (0, 2C+1),
     * (1, 2C), (1, 2C+1) */
    float g[16], u[16];
    for (int i = 0; i < 16; i++) g[i] = (float)i;
    wlm_pixel_unshuffle(g, 4, 2, 2, 2, u);
    const float want[16] = {0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15};
    CHECK(!memcmp(u, want, sizeof want));
    /* position resize: up, down, mixed, against the separable float64 reference */
    tu_rng r = {77};
    const int n = 6, c = 3;
    float src[6 * 6 * 3];
    for (int i = 0; i < n * n * c; i++) src[i] = tu_rng_uniform(&r, -1, 1);
    const int dims[][2] = {{9, 4}, {3, 3}, {6, 6}, {11, 13}, {2, 17}};
    for (int d = 0; d < 5; d++) {
        const int gw = dims[d][0], gh = dims[d][1];
        float *o = malloc((size_t)gw * gh * c * sizeof *o);
        double *ref = malloc((size_t)gw * gh * c * sizeof *ref);
        wlm_resize_positions(src, n, c, o, gw, gh);
        ref_resize_positions(src, n, c, ref, gw, gh);
        double worst = 0;
        for (int i = 0; i < gw * gh * c; i++)
            if (fabs(o[i] - ref[i]) > worst) worst = fabs(o[i] - ref[i]);
        CHECKF(worst < 1e-5, "resize_positions 6x6 -> %dx%d: max error %g", gw, gh, worst);
        free(o), free(ref);
    }
}

int main(void) {
    test_resampling();
    test_gemma3_letterbox();
    test_idefics3_grid();
    test_errors();
    test_lfm2_pieces();
    const int g3sizes[][2] = {{28, 28}, {20, 13}, {9, 31}, {60, 45}};
    const int idsizes[][2] = {{50, 30}, {32, 32}, {13, 70}};
    const int lfsizes[][2] = {{90, 50}, {64, 64}, {30, 130}, {200, 150}};
    const int32_t types[3] = {WLM_TYPE_F32, WLM_TYPE_F16, WLM_TYPE_Q8_0};
    /* F32 / F16 weights: the float products differ from float64 only by rounding; Q8_0 also
     * quantizes the activations (as ggml does), which costs more */
    const double tol[3] = {0.99999, 0.99999, 0.999};
    for (int i = 0; i < 3; i++) {
        tu_section(wlm_type_get(types[i])->name);
        spec g = {.proj = "gemma3", .S = 28, .P = 7, .W = 32, .F = 64, .layers = 2, .heads = 4,
                  .scale = 2, .D = 24, .wtype = types[i], .gelu = 1};
        check_model(&g, g3sizes, 4, tol[i]);
        spec d = {.proj = "idefics3", .S = 32, .P = 8, .W = 32, .F = 64, .layers = 2, .heads = 2,
                  .scale = 2, .L = 64, .D = 24, .wtype = types[i], .gelu = i != 1};
        check_model(&d, idsizes, 3, tol[i]);
        /* lfm2: 16×16 learned positions; 90×50 → 88×48 (x up, y down), 64×64 kept (no
         * resize), 30×130 → 32×128 (x down, y up), 200×150 → 144×104 (the area bound) */
        spec l = {.proj = "lfm2", .S = 64, .P = 4, .W = 32, .F = 64, .layers = 2, .heads = 2,
                  .scale = 2, .D = 24, .wtype = types[i], .gelu = 1, .omit_scale = i == 2};
        check_model(&l, lfsizes, 4, tol[i]);
    }
    /* qwen2.5vl_merger: windows of 2×2 groups (16 pixels / P 4 / 2); 40×24 → 5×3 groups
     * (partial windows), 32×32 kept, 17×30 → 16×32 (the lower bound: 8 tokens), 57×41 → 56×40;
     * blocks 0 and 2 windowed, 1 whole */
    {
        const int qsizes[][2] = {{40, 24}, {32, 32}, {17, 30}, {57, 41}};
        for (int i = 0; i < 3; i++) {
            tu_section(i == 0 ? "qwen2.5vl F32" : i == 1 ? "qwen2.5vl F16" : "qwen2.5vl Q8_0");
            spec qv = {.proj = "qwen2.5vl_merger", .S = 32, .P = 4, .W = 32, .F = 64, .layers = 3,
                       .heads = 2, .scale = 2, .D = 24, .wtype = types[i], .wa = 2, .window = 16};
            /* Q8_0: three blocks, each with two quantized products more (gate, up) and the
             * 4W-wide merger: measured 0.9989 on the 16×32 piece */
            check_model(&qv, qsizes, 4, i == 2 ? 0.998 : tol[i]);
        }
    }
    /* lfm2 at LFM2-VL's P 16 / s 2: 800×700 (560000 pixels > 2·256·32²) → 2×2 tiles of 512 +
     * a 544×448 thumbnail; 1300×400 (520000) stays one 896×256 piece */
    {
        tu_section("lfm2 tiles");
        const int tsizes[][2] = {{800, 700}, {1300, 400}};
        spec t = {.proj = "lfm2", .S = 256, .P = 16, .W = 32, .F = 64, .layers = 1, .heads = 2,
                  .scale = 2, .D = 24, .wtype = WLM_TYPE_F16, .gelu = 1};
        check_model(&t, tsizes, 2, tol[1]);
    }
    return TEST_FINISH();
}
