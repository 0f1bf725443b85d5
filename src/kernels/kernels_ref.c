/*
 * kernels_ref.c — scalar reference kernels: plain loops in the order llama2.c's run.c sums,
 * so the native CLI reproduces run.c bit for bit. They are the oracle the SIMD128 kernels are
 * tested against, and the fallback in builds without SIMD.
 */
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/quant.h"

void wlm_matvec_ref(float *out, const float *w, const float *x, int n, int r0, int r1) {
    for (int r = r0; r < r1; r++) {
        const float *row = w + (size_t)r * (size_t)n;
        float val = 0.0f;
        for (int j = 0; j < n; j++) val += row[j] * x[j];
        out[r] = val;
    }
}

/* ggml's ggml_compute_forward_rms_norm_f32 (then ggml_mul by the weight), operation for
 * operation: each square rounded to float and added in order to a double sum, mean =
 * (float)(sum / n), scale = 1 / sqrtf(mean + eps) in float, out = weight * (scale * x). A float
 * sum is ~1 ulp off the double one now and then, and that ulp can move a Q8_0 activation that
 * sits on a rounding tie of the next product to the other level (gemma4 tiny Q4_K_M: one such
 * tie in the BOS token's layer-2 attention input moved every prompt by ~0.2 nats). */
void wlm_rmsnorm_ref(float *out, const float *x, const float *weight, int n, float eps) {
    double sum = 0.0;
    for (int j = 0; j < n; j++) sum += (double)(x[j] * x[j]);
    const float mean = (float)(sum / (double)n);
    const float ss = 1.0f / sqrtf(mean + eps);
    for (int j = 0; j < n; j++) out[j] = weight[j] * (ss * x[j]);
}

void wlm_softmax_ref(float *x, int n) {
    float max_val = x[0];
    for (int i = 1; i < n; i++)
        if (x[i] > max_val) max_val = x[i];
    float sum = 0.0f;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - max_val);
        sum += x[i];
    }
    for (int i = 0; i < n; i++) x[i] /= sum;
}

void wlm_rope_ref(float *x, int n_heads, int head_size, int n_rot, const float *cos_t,
                  const float *sin_t) {
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * (size_t)head_size;
        for (int i = 0; i < n_rot / 2; i++) {
            float a = v[2 * i], b = v[2 * i + 1];
            v[2 * i] = a * cos_t[i] - b * sin_t[i];
            v[2 * i + 1] = a * sin_t[i] + b * cos_t[i];
        }
    }
}

void wlm_swiglu_ref(float *h, const float *g, int n) {
    for (int i = 0; i < n; i++) {
        float val = h[i];
        val *= (1.0f / (1.0f + expf(-val)));
        h[i] = val * g[i];
    }
}

float wlm_dot_ref(const float *a, const float *b, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

void wlm_axpy_ref(float *out, float s, const float *x, int n) {
    for (int i = 0; i < n; i++) out[i] += s * x[i];
}

/* Position t's row in a paged cache. */
static const float *paged_row(const float *const *b, int block, int t, int stride) {
    return b[t / block] + (size_t)(t % block) * (size_t)stride;
}

/* Head by head, position by position: the textbook order (llama2.c's run.c). */
void wlm_attention_ref(float *out, const float *q, const float *const *kb,
                       const float *const *vb, int block, int n, int h0, int h1, int kv_mul,
                       int head_size, int stride, float *scratch) {
    const float scale = sqrtf((float)head_size); /* run.c divides by it */
    for (int h = h0; h < h1; h++) {
        const size_t off = (size_t)(h / kv_mul) * (size_t)head_size;
        const float *qh = q + (size_t)h * (size_t)head_size;
        float *oh = out + (size_t)h * (size_t)head_size;
        float *att = scratch + (size_t)(h - h0) * (size_t)n;
        for (int t = 0; t < n; t++)
            att[t] = wlm_dot_ref(qh, paged_row(kb, block, t, stride) + off, head_size) / scale;
        wlm_softmax_ref(att, n);
        memset(oh, 0, (size_t)head_size * sizeof(float));
        for (int t = 0; t < n; t++)
            wlm_axpy_ref(oh, att[t], paged_row(vb, block, t, stride) + off, head_size);
    }
}

/* The F16 cache: wlm_attention_ref's loops, each K/V element widened (exactly) as it is read. */
void wlm_attention_f16_ref(float *out, const float *q, const uint16_t *const *kb,
                           const uint16_t *const *vb, int block, int n, int h0, int h1,
                           int kv_mul, int head_size, int stride, float *scratch) {
    const float scale = sqrtf((float)head_size);
    for (int h = h0; h < h1; h++) {
        const size_t off = (size_t)(h / kv_mul) * (size_t)head_size;
        const float *qh = q + (size_t)h * (size_t)head_size;
        float *oh = out + (size_t)h * (size_t)head_size;
        float *att = scratch + (size_t)(h - h0) * (size_t)n;
        for (int t = 0; t < n; t++) {
            const uint16_t *k = kb[t / block] + (size_t)(t % block) * (size_t)stride + off;
            float s = 0.0f;
            for (int i = 0; i < head_size; i++) s += qh[i] * wlm_fp16_to_fp32(k[i]);
            att[t] = s / scale;
        }
        wlm_softmax_ref(att, n);
        memset(oh, 0, (size_t)head_size * sizeof(float));
        for (int t = 0; t < n; t++) {
            const uint16_t *v = vb[t / block] + (size_t)(t % block) * (size_t)stride + off;
            for (int i = 0; i < head_size; i++) oh[i] += att[t] * wlm_fp16_to_fp32(v[i]);
        }
    }
}

void wlm_matmat_ref(float *out, size_t out_stride, const float *w, const float *x,
                    size_t x_stride, int n, int r0, int r1, int nb) {
    for (int b = 0; b < nb; b++)
        wlm_matvec_ref(out + (size_t)b * out_stride, w, x + (size_t)b * x_stride, n, r0, r1);
}

void wlm_rope_neox_ref(float *x, int n_heads, int head_size, int n_rot, const float *cos_t,
                       const float *sin_t) {
    const int half = n_rot / 2;
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * (size_t)head_size;
        for (int i = 0; i < half; i++) {
            float a = v[i], b = v[i + half];
            v[i] = a * cos_t[i] - b * sin_t[i];
            v[i + half] = a * sin_t[i] + b * cos_t[i];
        }
    }
}

/* ggml_soft_max's order on one row: the max subtracted, exp, the sum in double, one scale
 * (the MoE router's softmax, a decoder reranker's scores). n >= 1. */
void wlm_softmax_ggml(float *x, int n) {
    float mx = x[0];
    for (int i = 1; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += (double)(x[i] = expf(x[i] - mx));
    const float inv = (float)(1.0 / sum);
    for (int i = 0; i < n; i++) x[i] *= inv;
}

/* ggml_norm's order: the mean and the variance summed in double, then (x - mean) scaled by
 * 1 / sqrt(var + eps), then the weight and the bias (llama.cpp's build_norm). */
void wlm_layernorm_ref(float *out, const float *x, const float *weight, const float *bias, int n,
                       float eps) {
    double sum = 0.0;
    for (int j = 0; j < n; j++) sum += (double)x[j];
    const float mean = (float)(sum / n);
    double sum2 = 0.0;
    for (int j = 0; j < n; j++) {
        const float v = x[j] - mean;
        out[j] = v;
        sum2 += (double)(v * v);
    }
    const float scale = 1.0f / sqrtf((float)(sum2 / n) + eps);
    for (int j = 0; j < n; j++) {
        const float v = (out[j] * scale) * weight[j];
        out[j] = bias ? v + bias[j] : v;
    }
}

/* GELU as ggml's CPU backend computes it (GGML_GELU_FP16): for -10 < x < 10 the input is
 * rounded to binary16, the tanh formula evaluated in float, and the result rounded to binary16
 * (ggml reads it from a 64 Ki-entry table of exactly these values); x <= -10 gives 0, x >= 10
 * gives x. */
float wlm_gelu1_ref(float x) {
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    const float v = wlm_fp16_to_fp32(wlm_fp32_to_fp16(x));
    const float y = 0.5f * v *
                    (1.0f + tanhf(0.79788456080286535587989211986876f * v * (1.0f + 0.044715f * v * v)));
    return wlm_fp16_to_fp32(wlm_fp32_to_fp16(y));
}

void wlm_gelu_ref(float *h, const float *g, int n) {
    for (int i = 0; i < n; i++) {
        const float y = wlm_gelu1_ref(h[i]);
        h[i] = g ? y * g[i] : y;
    }
}

void wlm_deltanet_ref(float *S, const float *q, const float *k, const float *v, float decay,
                      float beta, float *out, int d) {
    float dv[256];
    for (int b = 0; b < d; b++) out[b] = 0.0f;
    for (int a = 0; a < d; a++) { /* decay, and r = Sᵀ k into out */
        float *row = S + (size_t)a * (size_t)d;
        for (int b = 0; b < d; b++) {
            row[b] *= decay;
            out[b] += row[b] * k[a];
        }
    }
    for (int b = 0; b < d; b++) {
        dv[b] = beta * (v[b] - out[b]);
        out[b] = 0.0f;
    }
    for (int a = 0; a < d; a++) { /* S += k dvᵀ, and out = Sᵀ q */
        float *row = S + (size_t)a * (size_t)d;
        for (int b = 0; b < d; b++) {
            row[b] += k[a] * dv[b];
            out[b] += row[b] * q[a];
        }
    }
}

const wlm_kernels wlm_kernels_ref = {
    "scalar",
    wlm_matvec_ref, wlm_rmsnorm_ref, wlm_softmax_ref, wlm_rope_ref,
    wlm_swiglu_ref, wlm_dot_ref, wlm_axpy_ref, wlm_attention_ref, wlm_matmat_ref,
    wlm_attention_f16_ref, wlm_rope_neox_ref, wlm_layernorm_ref, wlm_gelu_ref,
    wlm_deltanet_ref,
};
