/*
 * preprocess.c — an 8-bit RGB image → the encoder's normalised S×S pieces, the way llama.cpp
 * b12211's mtmd does it per projector (reference: /work/shared/reference/vision-mmproj.md §4,
 * settled against b12211's outputs): Gemma 3 letterboxes with half-pixel bilinear resampling
 * (values kept as float); Idefics3 cuts the image refined to a multiple of S into S×S tiles and
 * adds a stretched overview, resampling with Pillow's Lanczos-3 (each pass rounded to 8 bits).
 * Decoding the image file is not done here (the JS side decodes; the CLI too).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/errors.h"
#include "vision/vision.h"

void wlm_resize_bilinear(const float *src, int sw, int sh, float *dst, int dw, int dh) {
    const float xs = (float)sw / (float)dw, ys = (float)sh / (float)dh;
    for (int y = 0; y < dh; y++) {
        const float sy = ((float)y + 0.5f) * ys - 0.5f;
        const float fy0 = floorf(sy);
        const float fy = sy - fy0;
        int y0 = (int)fy0, y1 = y0 + 1;
        if (y0 < 0) y0 = 0;
        if (y1 < 0) y1 = 0;
        if (y0 > sh - 1) y0 = sh - 1;
        if (y1 > sh - 1) y1 = sh - 1;
        for (int x = 0; x < dw; x++) {
            const float sx = ((float)x + 0.5f) * xs - 0.5f;
            const float fx0 = floorf(sx);
            const float fx = sx - fx0;
            int x0 = (int)fx0, x1 = x0 + 1;
            if (x0 < 0) x0 = 0;
            if (x1 < 0) x1 = 0;
            if (x0 > sw - 1) x0 = sw - 1;
            if (x1 > sw - 1) x1 = sw - 1;
            for (int c = 0; c < 3; c++) {
                const float a = src[((size_t)y0 * sw + x0) * 3 + c];
                const float b = src[((size_t)y0 * sw + x1) * 3 + c];
                const float d = src[((size_t)y1 * sw + x0) * 3 + c];
                const float e = src[((size_t)y1 * sw + x1) * 3 + c];
                const float top = a + (b - a) * fx, bot = d + (e - d) * fx;
                dst[((size_t)y * dw + x) * 3 + c] = top + (bot - top) * fy;
            }
        }
    }
}

/* ---- Pillow's Lanczos-3 (libImaging/Resample.c: precompute_coeffs, 8-bit passes) ---------- */

#define LZ_PRECISION 22 /* 32 - 8 - 2: Pillow's fixed-point coefficient bits */

static double sinc(double x) {
    if (x == 0.0) return 1.0;
    x *= 3.14159265358979323846;
    return sin(x) / x;
}

static double lanczos3(double x) { return -3.0 <= x && x < 3.0 ? sinc(x) * sinc(x / 3.0) : 0.0; }

/* Per output pixel: the first input index, the tap count and ksize fixed-point weights. Returns
 * ksize, or 0 when out of memory. */
static int lz_coeffs(int in, int out, int **bounds, int32_t **kk) {
    double scale = (double)in / out, fscale = scale < 1.0 ? 1.0 : scale;
    const double support = 3.0 * fscale;
    const int ksize = (int)ceil(support) * 2 + 1;
    double *pre = malloc((size_t)ksize * sizeof *pre);
    *bounds = malloc((size_t)out * 2 * sizeof **bounds);
    *kk = calloc((size_t)out * (size_t)ksize, sizeof **kk);
    if (!pre || !*bounds || !*kk) {
        free(pre), free(*bounds), free(*kk);
        *bounds = NULL, *kk = NULL;
        return 0;
    }
    for (int xx = 0; xx < out; xx++) {
        const double center = (xx + 0.5) * scale, ss = 1.0 / fscale;
        int xmin = (int)(center - support + 0.5);
        if (xmin < 0) xmin = 0;
        int xmax = (int)(center + support + 0.5);
        if (xmax > in) xmax = in;
        xmax -= xmin;
        if (xmax > ksize) xmax = ksize;
        double ww = 0.0;
        for (int x = 0; x < xmax; x++) {
            pre[x] = lanczos3((x + xmin - center + 0.5) * ss);
            ww += pre[x];
        }
        int32_t *k = *kk + (size_t)xx * (size_t)ksize;
        for (int x = 0; x < xmax; x++) {
            const double w = ww != 0.0 ? pre[x] / ww : pre[x];
            k[x] = (int32_t)(w < 0 ? -0.5 + w * (1 << LZ_PRECISION) : 0.5 + w * (1 << LZ_PRECISION));
        }
        (*bounds)[2 * xx] = xmin;
        (*bounds)[2 * xx + 1] = xmax;
    }
    free(pre);
    return ksize;
}

static uint8_t clip8(int64_t v) {
    v >>= LZ_PRECISION;
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* One separable pass along x (horizontal) or y. Returns 0 when out of memory. */
static int lz_pass(const uint8_t *src, int sw, int sh, uint8_t *dst, int dw, int dh, int horiz) {
    int *bounds;
    int32_t *kk;
    const int ksize = lz_coeffs(horiz ? sw : sh, horiz ? dw : dh, &bounds, &kk);
    if (!ksize) return 0;
    for (int y = 0; y < dh; y++)
        for (int x = 0; x < dw; x++) {
            const int o = horiz ? x : y;
            const int min = bounds[2 * o], n = bounds[2 * o + 1];
            const int32_t *k = kk + (size_t)o * (size_t)ksize;
            for (int c = 0; c < 3; c++) {
                int64_t ss = (int64_t)1 << (LZ_PRECISION - 1);
                for (int i = 0; i < n; i++) {
                    const size_t at = horiz ? ((size_t)y * sw + (size_t)(min + i)) * 3
                                            : ((size_t)(min + i) * sw + (size_t)x) * 3;
                    ss += (int64_t)src[at + c] * k[i];
                }
                dst[((size_t)y * dw + x) * 3 + c] = clip8(ss);
            }
        }
    free(bounds);
    free(kk);
    return 1;
}

int wlm_resize_lanczos3(const uint8_t *src, int sw, int sh, uint8_t *dst, int dw, int dh,
                        uint8_t *tmp) {
    /* Pillow skips a pass whose size does not change */
    if (sw == dw && sh == dh) {
        memcpy(dst, src, (size_t)sw * sh * 3);
        return 1;
    }
    if (sw == dw) return lz_pass(src, sw, sh, dst, dw, dh, 0);
    if (sh == dh) return lz_pass(src, sw, sh, dst, dw, dh, 1);
    return lz_pass(src, sw, sh, tmp, dw, sh, 1) && lz_pass(tmp, dw, sh, dst, dw, dh, 0);
}

/* ---- per projector ------------------------------------------------------------------------ */

void wlm_vision_grid(const wlm_vision *v, int w, int h, int *cols, int *rows) {
    *cols = *rows = 0;
    if (!v->row->tiles || v->longest_edge <= 0) return;
    const double L = v->longest_edge, S = v->image_size;
    const double sw = L / w, sh = L / h, scale = sw < sh ? sw : sh;
    *cols = (int)ceil(w * scale / S);
    *rows = (int)ceil(h * scale / S);
    if (*cols < 1) *cols = 1;
    if (*rows < 1) *rows = 1;
}

/* out (3 planes S×S) = normalise(img), img interleaved 8-bit or float RGB. */
static void normalise_u8(const wlm_vision *v, const uint8_t *img, float *out) {
    const size_t n = (size_t)v->image_size * v->image_size;
    for (size_t i = 0; i < n; i++)
        for (int c = 0; c < 3; c++)
            out[c * n + i] = ((float)img[i * 3 + c] / 255.0f - v->mean[c]) / v->std[c];
}

static int lanczos(wlm_vision *v, const uint8_t *src, int sw, int sh, uint8_t *dst, int dw, int dh) {
    uint8_t *tmp = malloc((size_t)dw * sh * 3);
    if (!tmp) return wlm_errorf(v->errmsg, sizeof v->errmsg, WLM_ERR_NOMEM, "image: out of memory");
    const int ok = wlm_resize_lanczos3(src, sw, sh, dst, dw, dh, tmp);
    free(tmp);
    return ok ? WLM_OK : wlm_errorf(v->errmsg, sizeof v->errmsg, WLM_ERR_NOMEM, "image: out of memory");
}

static int preprocess_gemma3(wlm_vision *v, const uint8_t *rgb, int w, int h, float *out) {
    const int S = v->image_size;
    const size_t n = (size_t)S * S;
    float *img = malloc((size_t)w * h * 3 * sizeof *img);
    float *canvas = calloc(n * 3, sizeof *canvas); /* black */
    if (!img || !canvas) {
        free(img), free(canvas);
        return wlm_errorf(v->errmsg, sizeof v->errmsg, WLM_ERR_NOMEM, "image: out of memory");
    }
    for (size_t i = 0; i < (size_t)w * h * 3; i++) img[i] = rgb[i];
    if (w == S && h == S) {
        memcpy(canvas, img, n * 3 * sizeof *img);
    } else {
        const float sx = (float)S / (float)w, sy = (float)S / (float)h, sc = sx < sy ? sx : sy;
        int nw = (int)ceilf((float)w * sc), nh = (int)ceilf((float)h * sc);
        if (nw > S) nw = S;
        if (nh > S) nh = S;
        if (nw < 1) nw = 1;
        if (nh < 1) nh = 1;
        float *r = malloc((size_t)nw * nh * 3 * sizeof *r);
        if (!r) {
            free(img), free(canvas);
            return wlm_errorf(v->errmsg, sizeof v->errmsg, WLM_ERR_NOMEM, "image: out of memory");
        }
        wlm_resize_bilinear(img, w, h, r, nw, nh);
        const int ox = (S - nw) / 2, oy = (S - nh) / 2;
        for (int y = 0; y < nh; y++)
            memcpy(canvas + ((size_t)(y + oy) * S + (size_t)ox) * 3, r + (size_t)y * nw * 3,
                   (size_t)nw * 3 * sizeof *r);
        free(r);
    }
    for (size_t i = 0; i < n; i++)
        for (int c = 0; c < 3; c++)
            out[c * n + i] = (canvas[i * 3 + c] / 255.0f - v->mean[c]) / v->std[c];
    free(img);
    free(canvas);
    return WLM_OK;
}

static int preprocess_tiles(wlm_vision *v, const uint8_t *rgb, int w, int h, float *out) {
    const int S = v->image_size;
    const size_t n = (size_t)S * S;
    int cols, rows, rc;
    wlm_vision_grid(v, w, h, &cols, &rows);
    uint8_t *piece = malloc(n * 3);
    if (!piece) return wlm_errorf(v->errmsg, sizeof v->errmsg, WLM_ERR_NOMEM, "image: out of memory");
    if (cols > 0) {
        /* aspect-preserving resize to the longest edge L (short side even), then a stretch to
         * the refined size (HF's Idefics3 processor) */
        const int L = v->longest_edge;
        int aw, ah;
        if (w >= h) {
            aw = L;
            ah = (int)((double)L / ((double)w / h));
            if (ah % 2) ah++;
        } else {
            ah = L;
            aw = (int)((double)L * ((double)w / h));
            if (aw % 2) aw++;
        }
        if (aw < 1) aw = 1;
        if (ah < 1) ah = 1;
        const int rw = cols * S, rh = rows * S;
        uint8_t *a = malloc((size_t)aw * ah * 3), *r = malloc((size_t)rw * rh * 3);
        if (!a || !r) {
            free(a), free(r), free(piece);
            return wlm_errorf(v->errmsg, sizeof v->errmsg, WLM_ERR_NOMEM, "image: out of memory");
        }
        if ((rc = lanczos(v, rgb, w, h, a, aw, ah)) || (rc = lanczos(v, a, aw, ah, r, rw, rh))) {
            free(a), free(r), free(piece);
            return rc;
        }
        free(a);
        for (int ty = 0; ty < rows; ty++)
            for (int tx = 0; tx < cols; tx++) {
                for (int y = 0; y < S; y++)
                    memcpy(piece + (size_t)y * S * 3,
                           r + ((size_t)(ty * S + y) * rw + (size_t)tx * S) * 3, (size_t)S * 3);
                normalise_u8(v, piece, out);
                out += 3 * n;
            }
        free(r);
    }
    rc = lanczos(v, rgb, w, h, piece, S, S); /* the overview */
    if (!rc) normalise_u8(v, piece, out);
    free(piece);
    return rc;
}

int wlm_vision_preprocess(wlm_vision *v, const uint8_t *rgb, int w, int h, float *out) {
    return v->row->letterbox ? preprocess_gemma3(v, rgb, w, h, out)
                             : preprocess_tiles(v, rgb, w, h, out);
}
