/*
 * preprocess.c — an 8-bit RGB image → the encoder's normalised S×S pieces, the way llama.cpp
 * b12211's mtmd does it per projector (reference: /work/shared/reference/vision-mmproj.md §4,
 * settled against b12211's outputs): Gemma 3 letterboxes (aspect kept, centred on black);
 * Idefics3 cuts the image refined to a multiple of S into S×S tiles and adds an overview (the
 * refined image shrunk to S×S), resampling with Pillow's Lanczos-3. Both resample the way Pillow does (separable,
 * the filter widened by the scale factor when downscaling, each pass rounded to 8 bits); Gemma 3
 * with Pillow's bilinear (triangle) filter, which tests/c/vision_oracle.c found to match b12211
 * exactly (the reference notes' half-pixel float bilinear does not when downscaling). LFM2-VL
 * stretches the image (Pillow's bilinear) to its smart-resized size, and cuts large images into
 * 512-pixel tiles of a grid + a thumbnail.
 * Decoding the image file is not done here (the JS side decodes; the CLI too).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/errors.h"
#include "vision/vision.h"

/* ---- Pillow's resampling (libImaging/Resample.c: precompute_coeffs, 8-bit passes) ------------- */

#define LZ_PRECISION 22 /* 32 - 8 - 2: Pillow's fixed-point coefficient bits */

static double sinc(double x) {
    if (x == 0.0) return 1.0;
    x *= 3.14159265358979323846;
    return sin(x) / x;
}

static double lanczos3(double x) { return -3.0 <= x && x < 3.0 ? sinc(x) * sinc(x / 3.0) : 0.0; }

static double triangle(double x) { /* Pillow's bilinear filter */
    if (x < 0.0) x = -x;
    return x < 1.0 ? 1.0 - x : 0.0;
}

static double bicubic(double x) { /* Pillow's bicubic filter: Keys' cubic with a = -0.5 */
    const double a = -0.5;
    if (x < 0.0) x = -x;
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
    if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
    return 0.0;
}

typedef struct lz_filter {
    double (*fn)(double);
    double support;
} lz_filter;
static const lz_filter LANCZOS3 = {lanczos3, 3.0}, TRIANGLE = {triangle, 1.0},
                       BICUBIC = {bicubic, 2.0};

/* Per output pixel: the first input index, the tap count and ksize fixed-point weights. Returns
 * ksize, or 0 when out of memory. */
static int lz_coeffs(const lz_filter *f, int in, int out, int **bounds, int32_t **kk) {
    double scale = (double)in / out, fscale = scale < 1.0 ? 1.0 : scale;
    const double support = f->support * fscale;
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
            pre[x] = f->fn((x + xmin - center + 0.5) * ss);
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
static int lz_pass(const lz_filter *f, const uint8_t *src, int sw, int sh, uint8_t *dst, int dw,
                   int dh, int horiz) {
    int *bounds;
    int32_t *kk;
    const int ksize = lz_coeffs(f, horiz ? sw : sh, horiz ? dw : dh, &bounds, &kk);
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

static int pillow_resize(const lz_filter *f, const uint8_t *src, int sw, int sh, uint8_t *dst,
                         int dw, int dh, uint8_t *tmp) {
    /* Pillow skips a pass whose size does not change */
    if (sw == dw && sh == dh) {
        memcpy(dst, src, (size_t)sw * sh * 3);
        return 1;
    }
    if (sw == dw) return lz_pass(f, src, sw, sh, dst, dw, dh, 0);
    if (sh == dh) return lz_pass(f, src, sw, sh, dst, dw, dh, 1);
    return lz_pass(f, src, sw, sh, tmp, dw, sh, 1) && lz_pass(f, tmp, dw, sh, dst, dw, dh, 0);
}

int wlm_resize_lanczos3(const uint8_t *src, int sw, int sh, uint8_t *dst, int dw, int dh,
                        uint8_t *tmp) {
    return pillow_resize(&LANCZOS3, src, sw, sh, dst, dw, dh, tmp);
}

int wlm_resize_bilinear_pillow(const uint8_t *src, int sw, int sh, uint8_t *dst, int dw, int dh,
                               uint8_t *tmp) {
    return pillow_resize(&TRIANGLE, src, sw, sh, dst, dw, dh, tmp);
}

int wlm_resize_bicubic_pillow(const uint8_t *src, int sw, int sh, uint8_t *dst, int dw, int dh,
                              uint8_t *tmp) {
    return pillow_resize(&BICUBIC, src, sw, sh, dst, dw, dh, tmp);
}

/* The row's resampling filter (preprocess_dynamic): bicubic, or bilinear. */
static int row_resize(const wlm_vision *v, const uint8_t *src, int sw, int sh, uint8_t *dst,
                      int dw, int dh, uint8_t *tmp) {
    if (v->row->resize == WLM_RESIZE_BICUBIC) return wlm_resize_bicubic_pillow(src, sw, sh, dst, dw, dh, tmp);
    return wlm_resize_bilinear_pillow(src, sw, sh, dst, dw, dh, tmp);
}

/* ---- per projector ------------------------------------------------------------------------ */

/* LFM2's grid (mtmd's lfm2 get_grid_layout, transformers' find_closest_aspect_ratio): of the
 * cols × rows with min_tiles <= cols·rows <= max_tiles, in order of area, the one whose aspect
 * is closest to the image's; on a tie the later one when the image's area exceeds half the
 * tiles'. */
static void lfm2_grid(const wlm_projector_row *r, int w, int h, int *cols, int *rows) {
    int rc[128][2], n = 0; /* the candidates in mtmd's order, each once, then sorted by area */
    for (int k = r->min_tiles; k <= r->max_tiles; k++)
        for (int c = 1; c <= k; c++)
            for (int rr = 1; rr <= k; rr++) {
                if (c * rr < r->min_tiles || c * rr > r->max_tiles) continue;
                int seen = 0;
                for (int i = 0; i < n && !seen; i++) seen = rc[i][0] == c && rc[i][1] == rr;
                if (!seen && n < 128) rc[n][0] = c, rc[n][1] = rr, n++;
            }
    for (int i = 1; i < n; i++) /* insertion sort: stable */
        for (int j = i; j > 0 && rc[j][0] * rc[j][1] < rc[j - 1][0] * rc[j - 1][1]; j--) {
            const int c = rc[j][0], rr = rc[j][1];
            rc[j][0] = rc[j - 1][0], rc[j][1] = rc[j - 1][1];
            rc[j - 1][0] = c, rc[j - 1][1] = rr;
        }
    const float aspect = (float)w / (float)h, area = (float)((int64_t)w * h);
    float best = 3.4e38f;
    int bc = 1, br = 1;
    for (int i = 0; i < n; i++) {
        const float d = fabsf(aspect - (float)rc[i][0] / (float)rc[i][1]);
        if (d < best) {
            best = d, bc = rc[i][0], br = rc[i][1];
        } else if (d == best && area > 0.5f * (float)r->tile_size * (float)r->tile_size *
                                           (float)(rc[i][0] * rc[i][1])) {
            bc = rc[i][0], br = rc[i][1];
        }
    }
    *cols = bc;
    *rows = br;
}

void wlm_vision_grid(const wlm_vision *v, int w, int h, int *cols, int *rows) {
    *cols = *rows = 0;
    if (v->row->tile_size > 0) {
        if (wlm_vision_needs_tiles(v, w, h)) lfm2_grid(v->row, w, h, cols, rows);
        return;
    }
    if (!v->row->tiles || v->longest_edge <= 0) return;
    const double L = v->longest_edge, S = v->image_size;
    const double sw = L / w, sh = L / h, scale = sw < sh ? sw : sh;
    *cols = (int)ceil(w * scale / S);
    *rows = (int)ceil(h * scale / S);
    if (*cols < 1) *cols = 1;
    if (*rows < 1) *rows = 1;
}

void wlm_smart_resize(int w, int h, int align, int min_pixels, int max_pixels, int *ow, int *oh) {
    /* as mtmd's img_tool::calc_size_preserved_ratio: the first rounding half to even (Python's
     * round, as transformers' smart_resize: b12211 makes 500×400 at 32 → 512×384), the
     * scaled sizes in float */
    const float f = (float)align;
    int hb = (int)rint((double)h / align) * align, wb = (int)rint((double)w / align) * align;
    if (hb < align) hb = align;
    if (wb < align) wb = align;
    if ((int64_t)hb * wb > max_pixels) {
        const float beta = sqrtf((float)((int64_t)h * w) / (float)max_pixels);
        hb = (int)floorf(((float)h / beta) / f) * align;
        wb = (int)floorf(((float)w / beta) / f) * align;
        if (hb < align) hb = align;
        if (wb < align) wb = align;
    } else if ((int64_t)hb * wb < min_pixels) {
        const float beta = sqrtf((float)min_pixels / (float)((int64_t)h * w));
        hb = (int)ceilf(((float)h * beta) / f) * align;
        wb = (int)ceilf(((float)w * beta) / f) * align;
    }
    *ow = wb;
    *oh = hb;
}

void wlm_vision_piece_size(const wlm_vision *v, int w, int h, int *pw, int *ph) {
    if (!v->row->dyn_min_tokens) {
        *pw = *ph = v->image_size;
        return;
    }
    wlm_smart_resize(w, h, v->patch_size * v->scale, v->min_pixels, v->max_pixels, pw, ph);
}

void wlm_vision_piece_dims(const wlm_vision *v, int w, int h, int cols, int rows, int i, int *pw,
                           int *ph) {
    if (i < cols * rows) {
        *pw = *ph = v->row->tile_size > 0 ? v->row->tile_size : v->image_size;
        return;
    }
    wlm_vision_piece_size(v, w, h, pw, ph);
}

int wlm_vision_needs_tiles(const wlm_vision *v, int w, int h) {
    /* b12211: the image's own pixels against twice max_pixels (800×700 = 560000 is tiled at
     * P·s 32, 1300×400 = 520000 is not, though its sides rounded to 32 cover 545792) */
    if (!v->row->dyn_min_tokens || v->row->tile_size <= 0) return 0;
    return (int64_t)w * h > 2 * (int64_t)v->max_pixels;
}

/* out (3 planes n pixels) = normalise(img), img interleaved 8-bit RGB of n pixels. */
static void normalise_n(const wlm_vision *v, const uint8_t *img, size_t n, float *out) {
    for (size_t i = 0; i < n; i++)
        for (int c = 0; c < 3; c++)
            out[c * n + i] = ((float)img[i * 3 + c] / 255.0f - v->mean[c]) / v->std[c];
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
    uint8_t *canvas = calloc((size_t)S * S * 3, 1); /* black */
    if (!canvas) return wlm_errorf(v->errmsg, sizeof v->errmsg, WLM_ERR_NOMEM, "image: out of memory");
    if (w == S && h == S) {
        memcpy(canvas, rgb, (size_t)S * S * 3);
    } else { /* letterbox: the aspect kept, centred */
        const float sx = (float)S / (float)w, sy = (float)S / (float)h, sc = sx < sy ? sx : sy;
        int nw = (int)ceilf((float)w * sc), nh = (int)ceilf((float)h * sc);
        if (nw > S) nw = S;
        if (nh > S) nh = S;
        if (nw < 1) nw = 1;
        if (nh < 1) nh = 1;
        uint8_t *r = malloc((size_t)nw * nh * 3), *tmp = malloc((size_t)nw * h * 3);
        const int ok = r && tmp && wlm_resize_bilinear_pillow(rgb, w, h, r, nw, nh, tmp);
        if (ok) {
            const int ox = (S - nw) / 2, oy = (S - nh) / 2;
            for (int y = 0; y < nh; y++)
                memcpy(canvas + ((size_t)(y + oy) * S + (size_t)ox) * 3, r + (size_t)y * nw * 3,
                       (size_t)nw * 3);
        }
        free(r), free(tmp);
        if (!ok) {
            free(canvas);
            return wlm_errorf(v->errmsg, sizeof v->errmsg, WLM_ERR_NOMEM, "image: out of memory");
        }
    }
    normalise_u8(v, canvas, out);
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
        /* the overview is the refined image shrunk to S×S, not the original resampled once
         * (b12211: from the original it is 0.2-1.5 off in log-probability wherever the
         * refined image was an upscale; from the refined one it agrees to 0.01) */
        rc = lanczos(v, r, rw, rh, piece, S, S);
        free(r);
    } else {
        rc = lanczos(v, rgb, w, h, piece, S, S); /* the overview */
    }
    if (!rc) normalise_u8(v, piece, out);
    free(piece);
    return rc;
}

/* LFM2: the tiles of a large image (the image stretched with Pillow's bilinear to the grid's
 * size, cut row by row), then one piece stretched to its smart-resized size (the thumbnail, or
 * the whole image when there are no tiles). */
static int preprocess_dynamic(wlm_vision *v, const uint8_t *rgb, int w, int h, float *out) {
    int cols, rows, pw, ph;
    wlm_vision_grid(v, w, h, &cols, &rows);
    if (cols > 0) {
        const int T = v->row->tile_size, rw = cols * T, rh = rows * T;
        uint8_t *r = malloc((size_t)rw * rh * 3), *tmp = malloc((size_t)rw * h * 3);
        uint8_t *tile = malloc((size_t)T * T * 3);
        const int ok = r && tmp && tile && wlm_resize_bilinear_pillow(rgb, w, h, r, rw, rh, tmp);
        for (int ty = 0; ok && ty < rows; ty++)
            for (int tx = 0; tx < cols; tx++) {
                for (int y = 0; y < T; y++)
                    memcpy(tile + (size_t)y * T * 3, r + ((size_t)(ty * T + y) * rw + (size_t)tx * T) * 3,
                           (size_t)T * 3);
                normalise_n(v, tile, (size_t)T * T, out);
                out += (size_t)3 * T * T;
            }
        free(r), free(tmp), free(tile);
        if (!ok) return wlm_errorf(v->errmsg, sizeof v->errmsg, WLM_ERR_NOMEM, "image: out of memory");
    }
    wlm_vision_piece_size(v, w, h, &pw, &ph);
    /* stretched to the piece, or (dyn_pad) resized with the aspect kept, sides ceil'd, and
     * centred on black (mtmd's img_tool::resize, PAD_CEIL); the same size: copied */
    int nw = pw, nh = ph;
    if (v->row->dyn_pad && (w != pw || h != ph)) {
        const float sx = (float)pw / (float)w, sy = (float)ph / (float)h, sc = sx < sy ? sx : sy;
        nw = (int)ceilf((float)w * sc), nh = (int)ceilf((float)h * sc);
        if (nw > pw) nw = pw;
        if (nh > ph) nh = ph;
        if (nw < 1) nw = 1;
        if (nh < 1) nh = 1;
    }
    uint8_t *r = calloc((size_t)pw * ph * 3, 1), *tmp = malloc((size_t)nw * h * 3);
    uint8_t *s = nw == pw && nh == ph ? r : malloc((size_t)nw * nh * 3);
    const int ok = r && tmp && s && row_resize(v, rgb, w, h, s, nw, nh, tmp);
    if (ok && s != r) {
        const int ox = (pw - nw) / 2, oy = (ph - nh) / 2;
        for (int y = 0; y < nh; y++)
            memcpy(r + ((size_t)(y + oy) * pw + (size_t)ox) * 3, s + (size_t)y * nw * 3, (size_t)nw * 3);
    }
    if (ok) normalise_n(v, r, (size_t)pw * ph, out);
    if (s != r) free(s);
    free(r), free(tmp);
    return ok ? WLM_OK : wlm_errorf(v->errmsg, sizeof v->errmsg, WLM_ERR_NOMEM, "image: out of memory");
}

int wlm_vision_preprocess(wlm_vision *v, const uint8_t *rgb, int w, int h, float *out) {
    if (v->row->dyn_min_tokens) return preprocess_dynamic(v, rgb, w, h, out);
    return v->row->letterbox ? preprocess_gemma3(v, rgb, w, h, out)
                             : preprocess_tiles(v, rgb, w, h, out);
}
