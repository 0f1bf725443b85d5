/*
 * quant_kquants.c — the K-quants, 256-element super-blocks: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K
 * (weights) and Q8_K (their activations): conversions (quant_formats.h), ggml's quantizers
 * (the scale fits of quantize_row_q*_K_ref) and scalar reference kernels (quant.h); the SIMD
 * twins are in quant_simd/ (kquants.inc, relaxed_kquants.inc). The type table is quant.c's.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "kernels/quant_formats.h"
#include "wasmlm.h"

/* ---- Q8_K (activations of the K-quants) ---------------------------------------------------- */

void wlm_q8_K_to_float(const void *src, float *dst, int64_t n) {
    const wlm_block_q8_K *b = src;
    for (int64_t i = 0; i < n / WLM_QK_K; i++, dst += WLM_QK_K)
        for (int j = 0; j < WLM_QK_K; j++) dst[j] = b[i].d * (float)b[i].qs[j];
}

void wlm_quantize_q8_K_ref(const float *x, void *dst, int64_t n) {
    wlm_block_q8_K *y = dst;
    for (int64_t i = 0; i < n / WLM_QK_K; i++, x += WLM_QK_K) {
        float amax = 0.0f, max = 0.0f; /* the first element of largest magnitude */
        for (int j = 0; j < WLM_QK_K; j++) {
            const float a = fabsf(x[j]);
            if (a > amax) {
                amax = a;
                max = x[j];
            }
        }
        if (amax == 0.0f) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        /* -127/max maps the extreme element to -127: every quant lies in [-127, 127]. */
        const float iscale = -127.0f / max;
        for (int j = 0; j < WLM_QK_K; j++)
            y[i].qs[j] = (int8_t)clamp_int(nearest_int(iscale * x[j]), -128, 127);
        for (int g = 0; g < WLM_QK_K / 16; g++) {
            int sum = 0;
            for (int j = 0; j < 16; j++) sum += y[i].qs[16 * g + j];
            y[i].bsums[g] = (int16_t)sum;
        }
        y[i].d = 1.0f / iscale;
    }
}

/* ---- Q4_K ---------------------------------------------------------------------------------- */

void wlm_q4_K_to_float(const void *src, float *dst, int64_t n) {
    const wlm_block_q4_K *b = src;
    for (int64_t i = 0; i < n / WLM_QK_K; i++) {
        const float d = wlm_fp16_to_fp32(b[i].d), dmin = wlm_fp16_to_fp32(b[i].dmin);
        const uint8_t *q = b[i].qs;
        for (int j = 0; j < WLM_QK_K / 64; j++, q += 32) { /* 64 elements: 2 sub-blocks */
            uint8_t sc, m;
            wlm_q4_K_scale_min(b[i].scales, 2 * j, &sc, &m);
            const float d1 = d * sc, m1 = dmin * m;
            wlm_q4_K_scale_min(b[i].scales, 2 * j + 1, &sc, &m);
            const float d2 = d * sc, m2 = dmin * m;
            for (int l = 0; l < 32; l++) *dst++ = d1 * (float)(q[l] & 0xF) - m1;
            for (int l = 0; l < 32; l++) *dst++ = d2 * (float)(q[l] >> 4) - m2;
        }
    }
}

/*
 * Fits x[i] ~ scale * L[i] + min over L[i] in 0..nmax with min <= 0, minimising the weighted
 * squared error: first the plain min/max grid, then nstep+1 candidate step sizes around it
 * (nmax + rmin + rdelta*k levels over the range), each refined by a weighted least-squares
 * solve for (scale, min); use_mad weighs absolute instead of squared errors (Q2_K). Returns
 * the scale and stores -min in *neg_min. This is the algorithm
 * of ggml's reference Q4_K quantizer (make_qkx2_quants), written out again with the same
 * arithmetic so that our files match llama.cpp's byte for byte.
 */
static float fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L,
                           float *neg_min, uint8_t *Laux, float rmin, float rdelta, int nstep,
                           int use_mad) {
    float lo = x[0], hi = x[0];
    float sum_w = w[0], sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < lo) lo = x[i];
        if (x[i] > hi) hi = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (lo > 0) lo = 0;
    if (hi == lo) {
        memset(L, 0, (size_t)n);
        *neg_min = -lo;
        return 0.0f;
    }
    float iscale = (float)nmax / (hi - lo);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)clamp_int(nearest_int(iscale * (x[i] - lo)), 0, nmax);
        float diff = scale * L[i] + lo - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        best_error += w[i] * diff;
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * (float)is + (float)nmax) / (hi - lo);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            const int l = clamp_int(nearest_int(iscale * (x[i] - lo)), 0, nmax);
            Laux[i] = (uint8_t)l;
            sum_l += w[i] * (float)l;
            sum_l2 += w[i] * (float)l * (float)l;
            sum_xl += w[i] * (float)l * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; i++) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                diff = use_mad ? fabsf(diff) : diff * diff;
                cur_error += w[i] * diff;
            }
            if (cur_error < best_error) {
                memcpy(L, Laux, (size_t)n);
                best_error = cur_error;
                scale = this_scale;
                lo = this_min;
            }
        }
    }
    *neg_min = -lo;
    return scale;
}

/*
 * The 6-bit scales and mins of a Q4_K / Q5_K block against the super-block's d and dmin (fp16,
 * max / 63), packed: sub-blocks 0..3 in the low 6 bits of bytes 0..3 (scales) and 4..7 (mins);
 * sub-blocks 4..7 as nibbles in bytes 8..11 with their top two bits in bits 6..7 of bytes 0..7.
 */
static void pack_k4_scales(const float *scales, const float *mins, float max_scale, float max_min,
                           uint8_t *s, wlm_fp16 *d, wlm_fp16 *dmin) {
    const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
    for (int j = 0; j < 8; j++) {
        uint8_t ls = (uint8_t)(unsigned)nearest_int(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)(unsigned)nearest_int(inv_min * mins[j]);
        if (ls > 63) ls = 63;
        if (lm > 63) lm = 63;
        if (j < 4) {
            s[j] = ls;
            s[j + 4] = lm;
        } else {
            s[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
            s[j - 4] |= (uint8_t)((ls >> 4) << 6);
            s[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    *d = wlm_fp32_to_fp16(max_scale / 63.0f);
    *dmin = wlm_fp32_to_fp16(max_min / 63.0f);
}

void wlm_q4_K_from_float(const float *x, void *dst, int64_t n) {
    wlm_block_q4_K *y = dst;
    for (int64_t i = 0; i < n / WLM_QK_K; i++, x += WLM_QK_K) {
        uint8_t L[WLM_QK_K], Laux[32];
        float w[32], scales[8], mins[8];
        float max_scale = 0, max_min = 0; /* scales and mins come out >= 0 */
        for (int j = 0; j < 8; j++) {
            const float *xs = x + 32 * j;
            float sum_x2 = 0;
            for (int l = 0; l < 32; l++) sum_x2 += xs[l] * xs[l];
            const float av_x = sqrtf(sum_x2 / 32);
            for (int l = 0; l < 32; l++) w[l] = av_x + fabsf(xs[l]);
            scales[j] =
                fit_scale_min(32, 15, xs, w, L + 32 * j, &mins[j], Laux, -1.0f, 0.1f, 20, 0);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        pack_k4_scales(scales, mins, max_scale, max_min, y[i].scales, &y[i].d, &y[i].dmin);
        const uint8_t *s = y[i].scales;
        /* Requantize against the rounded scales (sub-blocks whose scale rounds to 0 keep the
         * levels of the fit, as ggml's do: they dequantize to -dmin*m whatever they are). */
        const float d = wlm_fp16_to_fp32(y[i].d), dmin = wlm_fp16_to_fp32(y[i].dmin);
        for (int j = 0; j < 8; j++) {
            uint8_t sc, m;
            wlm_q4_K_scale_min(s, j, &sc, &m);
            const float dj = d * sc;
            if (dj == 0.0f) continue;
            const float dm = dmin * m;
            for (int l = 0; l < 32; l++)
                L[32 * j + l] = (uint8_t)clamp_int(nearest_int((x[32 * j + l] + dm) / dj), 0, 15);
        }
        /* each 32 bytes hold 64 elements: the first 32 in the low nibbles, the next 32 high */
        uint8_t *q = y[i].qs;
        for (int j = 0; j < WLM_QK_K; j += 64, q += 32)
            for (int l = 0; l < 32; l++) q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
    }
}

void wlm_q4_K_matvec_ref(float *out, const void *w, size_t row_bytes, const void *xq, int n, int r0,
                         int r1) {
    const wlm_block_q8_K *x = xq;
    const int nb = n / WLM_QK_K;
    for (int r = r0; r < r1; r++) {
        const wlm_block_q4_K *row =
            (const wlm_block_q4_K *)(const void *)((const char *)w + (size_t)r * row_bytes);
        float sum = 0.0f;
        for (int b = 0; b < nb; b++) {
            const uint8_t *q = row[b].qs;
            const int8_t *y = x[b].qs;
            int32_t isum = 0, msum = 0;
            for (int j = 0; j < 4; j++, q += 32, y += 64) {
                uint8_t sc1, m1, sc2, m2;
                wlm_q4_K_scale_min(row[b].scales, 2 * j, &sc1, &m1);
                wlm_q4_K_scale_min(row[b].scales, 2 * j + 1, &sc2, &m2);
                int32_t s1 = 0, s2 = 0;
                for (int l = 0; l < 32; l++) {
                    s1 += (q[l] & 0xF) * y[l];
                    s2 += (q[l] >> 4) * y[l + 32];
                }
                isum += sc1 * s1 + sc2 * s2;
                msum += m1 * (x[b].bsums[4 * j] + x[b].bsums[4 * j + 1]) +
                        m2 * (x[b].bsums[4 * j + 2] + x[b].bsums[4 * j + 3]);
            }
            sum += x[b].d * (wlm_fp16_to_fp32(row[b].d) * (float)isum -
                             wlm_fp16_to_fp32(row[b].dmin) * (float)msum);
        }
        out[r] = sum;
    }
}

/* ---- Q6_K ---------------------------------------------------------------------------------- */

/* Element l + 32k (l < 32, k < 4) of a 128-element half: 4 low bits from ql (bytes l for k even,
 * l + 32 for k odd; low nibble for k < 2, high for k >= 2), 2 high bits from bits 2k..2k+1 of
 * qh[l]; value 0..63, offset by 32. */
static inline int q6_K_level(const uint8_t *ql, const uint8_t *qh, int l, int k) {
    const int lo = (ql[l + 32 * (k & 1)] >> (4 * (k >> 1))) & 0xF;
    return lo | (((qh[l] >> (2 * k)) & 3) << 4);
}

void wlm_q6_K_to_float(const void *src, float *dst, int64_t n) {
    const wlm_block_q6_K *b = src;
    for (int64_t i = 0; i < n / WLM_QK_K; i++) {
        const float d = wlm_fp16_to_fp32(b[i].d);
        for (int h = 0; h < 2; h++, dst += 128) {
            const uint8_t *ql = b[i].ql + 64 * h, *qh = b[i].qh + 32 * h;
            const int8_t *sc = b[i].scales + 8 * h;
            for (int k = 0; k < 4; k++)
                for (int l = 0; l < 32; l++)
                    dst[32 * k + l] =
                        d * (float)sc[2 * k + l / 16] * (float)(q6_K_level(ql, qh, l, k) - 32);
        }
    }
}

/*
 * Fits x[i] ~ scale * L[i] with L[i] in -nmax..nmax-1, minimising the error weighted by x[i]^2:
 * the step that maps the extreme element to -nmax, then 18 nearby steps (nmax +- 0.1k levels),
 * keeping the best least-squares scale. Stores L + nmax. ggml's make_qx_quants (rmse_type 1).
 */
static float fit_scale_sym(int n, int nmax, const float *x, int8_t *L) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++) {
        const float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < 1e-15f) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    float iscale = (float)-nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)(l + nmax);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -((float)nmax + 0.1f * (float)is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
            const float w = x[i] * x[i];
            sumlx += w * x[i] * (float)l;
            suml2 += w * (float)l * (float)l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++)
                L[i] = (int8_t)(nmax + clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

void wlm_q6_K_from_float(const float *x, void *dst, int64_t n) {
    wlm_block_q6_K *y = dst;
    for (int64_t i = 0; i < n / WLM_QK_K; i++, x += WLM_QK_K) {
        int8_t L[WLM_QK_K];
        float scales[16];
        float max_scale = 0, max_abs_scale = 0;
        for (int g = 0; g < 16; g++) {
            scales[g] = fit_scale_sym(16, 32, x + 16 * g, L + 16 * g);
            if (fabsf(scales[g]) > max_abs_scale) {
                max_abs_scale = fabsf(scales[g]);
                max_scale = scales[g];
            }
        }
        memset(&y[i], 0, sizeof y[i]);
        if (max_abs_scale < 1e-15f) continue; /* all (near) zero: d = 0 */
        const float iscale = -128.0f / max_scale;
        y[i].d = wlm_fp32_to_fp16(1 / iscale);
        for (int g = 0; g < 16; g++)
            y[i].scales[g] = (int8_t)clamp_int(nearest_int(iscale * scales[g]), -128, 127);
        const float d = wlm_fp16_to_fp32(y[i].d);
        for (int g = 0; g < 16; g++) {
            const float dg = d * (float)y[i].scales[g];
            if (dg == 0.0f) continue;
            for (int l = 0; l < 16; l++)
                L[16 * g + l] = (int8_t)(32 + clamp_int(nearest_int(x[16 * g + l] / dg), -32, 31));
        }
        for (int h = 0; h < 2; h++) {
            uint8_t *ql = y[i].ql + 64 * h, *qh = y[i].qh + 32 * h;
            const int8_t *Lh = L + 128 * h;
            for (int l = 0; l < 32; l++) {
                ql[l] = (uint8_t)((Lh[l] & 0xF) | ((Lh[l + 64] & 0xF) << 4));
                ql[l + 32] = (uint8_t)((Lh[l + 32] & 0xF) | ((Lh[l + 96] & 0xF) << 4));
                qh[l] = (uint8_t)((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) |
                                  ((Lh[l + 64] >> 4) << 4) | ((Lh[l + 96] >> 4) << 6));
            }
        }
    }
}

void wlm_q6_K_matvec_ref(float *out, const void *w, size_t row_bytes, const void *xq, int n, int r0,
                         int r1) {
    const wlm_block_q8_K *x = xq;
    const int nb = n / WLM_QK_K;
    for (int r = r0; r < r1; r++) {
        const wlm_block_q6_K *row =
            (const wlm_block_q6_K *)(const void *)((const char *)w + (size_t)r * row_bytes);
        float sum = 0.0f;
        for (int b = 0; b < nb; b++) {
            int32_t isum = 0;
            for (int h = 0; h < 2; h++) {
                const uint8_t *ql = row[b].ql + 64 * h, *qh = row[b].qh + 32 * h;
                const int8_t *sc = row[b].scales + 8 * h, *y = x[b].qs + 128 * h;
                for (int k = 0; k < 4; k++) {
                    int32_t s0 = 0, s1 = 0; /* the two 16-element sub-blocks of this quarter */
                    for (int l = 0; l < 16; l++) {
                        s0 += (q6_K_level(ql, qh, l, k) - 32) * y[32 * k + l];
                        s1 += (q6_K_level(ql, qh, l + 16, k) - 32) * y[32 * k + l + 16];
                    }
                    isum += sc[2 * k] * s0 + sc[2 * k + 1] * s1;
                }
            }
            sum += (wlm_fp16_to_fp32(row[b].d) * x[b].d) * (float)isum;
        }
        out[r] = sum;
    }
}

/* ---- Q2_K ---------------------------------------------------------------------------------- */

/* The 2-bit level of element e (0..255) of a Q2_K / Q3_K qs array. */
static inline int k2_level(const uint8_t *qs, int e) {
    return (qs[32 * (e / 128) + e % 32] >> (2 * (e % 128 / 32))) & 3;
}

/* Levels L (0..3) of a super-block into the qs layout shared by Q2_K and Q3_K. */
static void k2_pack(const uint8_t *L, uint8_t *qs) {
    for (int h = 0; h < 2; h++, L += 128)
        for (int l = 0; l < 32; l++)
            qs[32 * h + l] =
                (uint8_t)(L[l] | L[l + 32] << 2 | L[l + 64] << 4 | L[l + 96] << 6);
}

void wlm_q2_K_to_float(const void *src, float *dst, int64_t n) {
    const wlm_block_q2_K *b = src;
    for (int64_t i = 0; i < n / WLM_QK_K; i++, dst += WLM_QK_K) {
        const float d = wlm_fp16_to_fp32(b[i].d), dmin = wlm_fp16_to_fp32(b[i].dmin);
        for (int e = 0; e < WLM_QK_K; e++) {
            const uint8_t sc = b[i].scales[e / 16];
            dst[e] = d * (float)(sc & 0xF) * (float)k2_level(b[i].qs, e) - dmin * (float)(sc >> 4);
        }
    }
}

/* ggml's reference Q2_K: per 16-element sub-block a (scale, min) fit over levels 0..3 weighted
 * by |x| with absolute errors, both quantized to 4 bits against fp16 d = max scale / 15 and
 * dmin = max min / 15, then the levels again against the rounded scales. */
void wlm_q2_K_from_float(const float *x, void *dst, int64_t n) {
    wlm_block_q2_K *y = dst;
    for (int64_t i = 0; i < n / WLM_QK_K; i++, x += WLM_QK_K) {
        uint8_t L[WLM_QK_K], Laux[16];
        float w[16], scales[16], mins[16], max_scale = 0, max_min = 0;
        for (int g = 0; g < 16; g++) {
            for (int l = 0; l < 16; l++) w[l] = fabsf(x[16 * g + l]);
            scales[g] = fit_scale_min(16, 3, x + 16 * g, w, L + 16 * g, &mins[g], Laux, -0.5f,
                                      0.1f, 15, 1);
            if (scales[g] > max_scale) max_scale = scales[g];
            if (mins[g] > max_min) max_min = mins[g];
        }
        memset(&y[i], 0, sizeof y[i]);
        if (max_scale > 0) {
            const float is = 15.0f / max_scale;
            for (int g = 0; g < 16; g++)
                y[i].scales[g] = (uint8_t)clamp_int(nearest_int(is * scales[g]), 0, 15);
            y[i].d = wlm_fp32_to_fp16(max_scale / 15.0f);
        }
        if (max_min > 0) {
            const float is = 15.0f / max_min;
            for (int g = 0; g < 16; g++)
                y[i].scales[g] |= (uint8_t)(clamp_int(nearest_int(is * mins[g]), 0, 15) << 4);
            y[i].dmin = wlm_fp32_to_fp16(max_min / 15.0f);
        }
        const float d = wlm_fp16_to_fp32(y[i].d), dmin = wlm_fp16_to_fp32(y[i].dmin);
        for (int g = 0; g < 16; g++) {
            const float dg = d * (float)(y[i].scales[g] & 0xF);
            if (dg == 0.0f) continue;
            const float dm = dmin * (float)(y[i].scales[g] >> 4);
            for (int l = 0; l < 16; l++)
                L[16 * g + l] = (uint8_t)clamp_int(nearest_int((x[16 * g + l] + dm) / dg), 0, 3);
        }
        k2_pack(L, y[i].qs);
    }
}

void wlm_q2_K_matvec_ref(float *out, const void *w, size_t row_bytes, const void *xq, int n,
                         int r0, int r1) {
    const wlm_block_q8_K *x = xq;
    const int nb = n / WLM_QK_K;
    for (int r = r0; r < r1; r++) {
        const wlm_block_q2_K *row =
            (const wlm_block_q2_K *)(const void *)((const char *)w + (size_t)r * row_bytes);
        float sum = 0.0f;
        for (int b = 0; b < nb; b++) {
            int32_t isum = 0, msum = 0;
            for (int g = 0; g < 16; g++) {
                int32_t s = 0;
                for (int l = 0; l < 16; l++)
                    s += k2_level(row[b].qs, 16 * g + l) * x[b].qs[16 * g + l];
                isum += (row[b].scales[g] & 0xF) * s;
                msum += (row[b].scales[g] >> 4) * x[b].bsums[g];
            }
            sum += x[b].d * (wlm_fp16_to_fp32(row[b].d) * (float)isum -
                             wlm_fp16_to_fp32(row[b].dmin) * (float)msum);
        }
        out[r] = sum;
    }
}

/* ---- Q3_K ---------------------------------------------------------------------------------- */

/* The level (-4..3) of element e of a Q3_K block. */
static inline int q3_K_level(const wlm_block_q3_K *b, int e) {
    const int hbit = (b->hmask[e % 32] >> (e / 32)) & 1;
    return k2_level(b->qs, e) + 4 * hbit - 4;
}

void wlm_q3_K_to_float(const void *src, float *dst, int64_t n) {
    const wlm_block_q3_K *b = src;
    for (int64_t i = 0; i < n / WLM_QK_K; i++, dst += WLM_QK_K) {
        const float d = wlm_fp16_to_fp32(b[i].d);
        for (int e = 0; e < WLM_QK_K; e++)
            dst[e] = d * (float)wlm_q3_K_scale(b[i].scales, e / 16) * (float)q3_K_level(&b[i], e);
    }
}

/*
 * Fits x[i] ~ scale * L[i] with L[i] in -nmax..nmax-1, errors weighted by x[i]^2: the step that
 * maps the extreme element to -nmax, then up to five passes that move single elements to the
 * level the least-squares scale of the others asks for, when that improves the fit. Stores
 * L + nmax. The algorithm of ggml's make_q3_quants (with its rmse option), for Q3_K.
 */
static float fit_scale_sym_iter(int n, int nmax, const float *x, uint8_t *Lout) {
    int L[16];
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    if (amax < 1e-15f) {
        memset(Lout, 0, (size_t)n);
        return 0.0f;
    }
    const float iscale = (float)-nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        L[i] = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * (float)L[i];
        suml2 += w * (float)L[i] * (float)L[i];
    }
    for (int pass = 0; pass < 5; pass++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            const float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * (float)L[i];
            if (!(slx > 0)) continue;
            float sl2 = suml2 - w * (float)L[i] * (float)L[i];
            const int nl = clamp_int(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
            if (nl == L[i]) continue;
            slx += w * x[i] * (float)nl;
            sl2 += w * (float)nl * (float)nl;
            if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                L[i] = nl;
                sumlx = slx;
                suml2 = sl2;
                changed++;
            }
        }
        if (!changed) break;
    }
    for (int i = 0; i < n; i++) Lout[i] = (uint8_t)(L[i] + nmax);
    return suml2 > 0 ? sumlx / suml2 : 0.0f;
}

/* ggml's reference Q3_K: per 16-element sub-block a signed scale (fit_scale_sym_iter over levels
 * -4..3), quantized to 6 bits (-32..31) against fp16 d = -(max |scale|, signed) / 32, then the
 * levels again against the rounded scales; high bits to hmask, low 2 bits as in Q2_K. */
void wlm_q3_K_from_float(const float *x, void *dst, int64_t n) {
    wlm_block_q3_K *y = dst;
    for (int64_t i = 0; i < n / WLM_QK_K; i++, x += WLM_QK_K) {
        uint8_t L[WLM_QK_K];
        float scales[16], max_scale = 0, amax = 0;
        for (int g = 0; g < 16; g++) {
            scales[g] = fit_scale_sym_iter(16, 4, x + 16 * g, L + 16 * g);
            if (fabsf(scales[g]) > amax) {
                amax = fabsf(scales[g]);
                max_scale = scales[g];
            }
        }
        memset(&y[i], 0, sizeof y[i]);
        if (max_scale != 0.0f) {
            const float iscale = -32.0f / max_scale;
            for (int g = 0; g < 16; g++) {
                const int l = clamp_int(nearest_int(iscale * scales[g]), -32, 31) + 32;
                if (g < 8) y[i].scales[g] = (uint8_t)(l & 0xF);
                else y[i].scales[g - 8] |= (uint8_t)((l & 0xF) << 4);
                y[i].scales[8 + g % 4] |= (uint8_t)((l >> 4) << (2 * (g / 4)));
            }
            y[i].d = wlm_fp32_to_fp16(1.0f / iscale);
        }
        const float d = wlm_fp16_to_fp32(y[i].d);
        for (int g = 0; g < 16; g++) {
            const float dg = d * (float)wlm_q3_K_scale(y[i].scales, g);
            if (dg == 0.0f) continue;
            for (int l = 0; l < 16; l++)
                L[16 * g + l] = (uint8_t)(clamp_int(nearest_int(x[16 * g + l] / dg), -4, 3) + 4);
        }
        for (int e = 0; e < WLM_QK_K; e++)
            if (L[e] > 3) {
                y[i].hmask[e % 32] |= (uint8_t)(1u << (e / 32));
                L[e] -= 4;
            }
        k2_pack(L, y[i].qs);
    }
}

void wlm_q3_K_matvec_ref(float *out, const void *w, size_t row_bytes, const void *xq, int n,
                         int r0, int r1) {
    const wlm_block_q8_K *x = xq;
    const int nb = n / WLM_QK_K;
    for (int r = r0; r < r1; r++) {
        const wlm_block_q3_K *row =
            (const wlm_block_q3_K *)(const void *)((const char *)w + (size_t)r * row_bytes);
        float sum = 0.0f;
        for (int b = 0; b < nb; b++) {
            int32_t isum = 0;
            for (int g = 0; g < 16; g++) {
                int32_t s = 0;
                for (int l = 0; l < 16; l++)
                    s += q3_K_level(&row[b], 16 * g + l) * x[b].qs[16 * g + l];
                isum += wlm_q3_K_scale(row[b].scales, g) * s;
            }
            sum += (wlm_fp16_to_fp32(row[b].d) * x[b].d) * (float)isum;
        }
        out[r] = sum;
    }
}

/* ---- Q5_K ---------------------------------------------------------------------------------- */

/* The 5-bit level of element e of a Q5_K block. */
static inline int q5_K_level(const wlm_block_q5_K *b, int e) {
    const int lo = (b->qs[32 * (e / 64) + e % 32] >> (4 * (e / 32 % 2))) & 0xF;
    return lo | ((b->qh[e % 32] >> (e / 32)) & 1) << 4;
}

void wlm_q5_K_to_float(const void *src, float *dst, int64_t n) {
    const wlm_block_q5_K *b = src;
    for (int64_t i = 0; i < n / WLM_QK_K; i++, dst += WLM_QK_K) {
        const float d = wlm_fp16_to_fp32(b[i].d), dmin = wlm_fp16_to_fp32(b[i].dmin);
        for (int e = 0; e < WLM_QK_K; e++) {
            uint8_t sc, m;
            wlm_q4_K_scale_min(b[i].scales, e / 32, &sc, &m);
            dst[e] = d * (float)sc * (float)q5_K_level(&b[i], e) - dmin * (float)m;
        }
    }
}

/* ggml's reference Q5_K: Q4_K's algorithm with levels 0..31 (fit_scale_min with its Q5_K
 * search grid), the 6-bit scales and mins packed as in Q4_K, bit 4 of each level in qh. */
void wlm_q5_K_from_float(const float *x, void *dst, int64_t n) {
    wlm_block_q5_K *y = dst;
    for (int64_t i = 0; i < n / WLM_QK_K; i++, x += WLM_QK_K) {
        uint8_t L[WLM_QK_K], Laux[32];
        float w[32], scales[8], mins[8], max_scale = 0, max_min = 0;
        for (int j = 0; j < 8; j++) {
            const float *xs = x + 32 * j;
            float sum_x2 = 0;
            for (int l = 0; l < 32; l++) sum_x2 += xs[l] * xs[l];
            const float av_x = sqrtf(sum_x2 / 32);
            for (int l = 0; l < 32; l++) w[l] = av_x + fabsf(xs[l]);
            scales[j] =
                fit_scale_min(32, 31, xs, w, L + 32 * j, &mins[j], Laux, -0.5f, 0.1f, 15, 0);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        memset(&y[i], 0, sizeof y[i]);
        pack_k4_scales(scales, mins, max_scale, max_min, y[i].scales, &y[i].d, &y[i].dmin);
        const float d = wlm_fp16_to_fp32(y[i].d), dmin = wlm_fp16_to_fp32(y[i].dmin);
        for (int j = 0; j < 8; j++) {
            uint8_t sc, m;
            wlm_q4_K_scale_min(y[i].scales, j, &sc, &m);
            const float dj = d * sc;
            if (dj == 0.0f) continue;
            const float dm = dmin * m;
            for (int l = 0; l < 32; l++)
                L[32 * j + l] = (uint8_t)clamp_int(nearest_int((x[32 * j + l] + dm) / dj), 0, 31);
        }
        for (int e = 0; e < WLM_QK_K; e++) {
            y[i].qs[32 * (e / 64) + e % 32] |= (uint8_t)((L[e] & 0xF) << (4 * (e / 32 % 2)));
            y[i].qh[e % 32] |= (uint8_t)((L[e] >> 4) << (e / 32));
        }
    }
}

void wlm_q5_K_matvec_ref(float *out, const void *w, size_t row_bytes, const void *xq, int n,
                         int r0, int r1) {
    const wlm_block_q8_K *x = xq;
    const int nb = n / WLM_QK_K;
    for (int r = r0; r < r1; r++) {
        const wlm_block_q5_K *row =
            (const wlm_block_q5_K *)(const void *)((const char *)w + (size_t)r * row_bytes);
        float sum = 0.0f;
        for (int b = 0; b < nb; b++) {
            int32_t isum = 0, msum = 0;
            for (int j = 0; j < 8; j++) {
                uint8_t sc, m;
                wlm_q4_K_scale_min(row[b].scales, j, &sc, &m);
                int32_t s = 0;
                for (int l = 0; l < 32; l++)
                    s += q5_K_level(&row[b], 32 * j + l) * x[b].qs[32 * j + l];
                isum += sc * s;
                msum += m * (x[b].bsums[2 * j] + x[b].bsums[2 * j + 1]);
            }
            sum += x[b].d * (wlm_fp16_to_fp32(row[b].d) * (float)isum -
                             wlm_fp16_to_fp32(row[b].dmin) * (float)msum);
        }
        out[r] = sum;
    }
}
