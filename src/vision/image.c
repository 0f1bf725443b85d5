/*
 * image.c — the public entry of image encoding (wlm_image_encode): checks the image, asks the
 * projector's preprocessing for its pieces (preprocess.c) and runs each through the encoder
 * (encoder.c), one piece at a time so that memory stays at one piece's activations; or wraps
 * rows encoded elsewhere (the GPU encoder, js/backend/webgpu/vision.js) in the same structure.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/errors.h"
#include "vision/vision.h"

/* How an image of width × height lays out in pieces and rows (wlm_image_embd's fields, embd NULL),
 * with the tile's and the last piece's pixel sizes; or INVALID_ARG / STATE with the message. */
typedef struct image_layout {
    wlm_image_embd e;
    int tw, th, lw, lh;
} image_layout;

static int layout_of(wlm_vision *v, int32_t width, int32_t height, const char *who, image_layout *L) {
    if (!v->loaded)
        return wlm_errorf(v->errmsg, sizeof v->errmsg, WLM_ERR_STATE, "%s: the mmproj did not load", who);
    if (width < 1 || height < 1 || width > WLM_IMAGE_MAX_SIDE || height > WLM_IMAGE_MAX_SIDE ||
        (int64_t)width * height > WLM_IMAGE_MAX_PIXELS)
        return wlm_errorf(v->errmsg, sizeof v->errmsg, WLM_ERR_INVALID_ARG,
                          "image: %d×%d pixels is outside 1..%d a side and %d in all", (int)width,
                          (int)height, WLM_IMAGE_MAX_SIDE, WLM_IMAGE_MAX_PIXELS);
    int cols, rows;
    wlm_vision_grid(v, width, height, &cols, &rows);
    const int32_t P = v->patch_size, s = v->scale, pieces = cols * rows + 1;
    /* the pieces' sizes: every tile alike, the last piece (overview / thumbnail) its own */
    wlm_vision_piece_dims(v, width, height, cols, rows, 0, &L->tw, &L->th);
    wlm_vision_piece_dims(v, width, height, cols, rows, pieces - 1, &L->lw, &L->lh);
    const int32_t tpp = (L->tw / P / s) * (L->th / P / s), last = (L->lw / P / s) * (L->lh / P / s);
    L->e = (wlm_image_embd){(pieces - 1) * tpp + last, v->proj_dim, pieces, pieces > 1 ? tpp : last,
                            cols, rows, last, NULL, L->lw / P / s, L->lh / P / s};
    return WLM_OK;
}

int wlm_image_encode(wlm_vision *v, const uint8_t *rgb, int32_t width, int32_t height,
                     wlm_threadpool *pool, int32_t use_simd, wlm_image_embd *out) {
    if (out) memset(out, 0, sizeof *out);
    if (!v) return WLM_ERR_INVALID_ARG;
    if (!out || !rgb)
        return wlm_errorf(v->errmsg, sizeof v->errmsg, WLM_ERR_INVALID_ARG,
                          "wlm_image_encode: %s is NULL", out ? "rgb" : "out");
    image_layout L;
    int rc = layout_of(v, width, height, "wlm_image_encode", &L);
    if (rc) return rc;
    const int32_t pieces = L.e.n_pieces, tpp = L.e.tokens_per_piece, D = v->proj_dim;
    const size_t tsz = (size_t)3 * L.tw * L.th, lsz = (size_t)3 * L.lw * L.lh;
    float *pix = malloc(((size_t)(pieces - 1) * tsz + lsz) * sizeof *pix);
    float *embd = malloc((size_t)L.e.n_tokens * D * sizeof *embd);
    if (!pix || !embd) {
        free(pix), free(embd);
        return wlm_errorf(v->errmsg, sizeof v->errmsg, WLM_ERR_NOMEM, "image: out of memory");
    }
    rc = wlm_vision_preprocess(v, rgb, width, height, pix);
    for (int32_t p = 0; !rc && p < pieces; p++) {
        const int lastp = p == pieces - 1;
        rc = wlm_vision_encode_piece(v, pix + (size_t)p * tsz, lastp ? L.lw : L.tw, lastp ? L.lh : L.th,
                                     embd + (size_t)p * tpp * D, pool, use_simd);
    }
    free(pix);
    if (rc) {
        free(embd);
        return rc;
    }
    *out = L.e;
    out->embd = embd;
    v->errmsg[0] = 0;
    return WLM_OK;
}

int wlm_image_embd_from_rows(wlm_vision *v, int32_t width, int32_t height, const float *rows,
                             size_t n_floats, wlm_image_embd *out) {
    if (out) memset(out, 0, sizeof *out);
    if (!v) return WLM_ERR_INVALID_ARG;
    if (!out || !rows)
        return wlm_errorf(v->errmsg, sizeof v->errmsg, WLM_ERR_INVALID_ARG,
                          "wlm_image_embd_from_rows: %s is NULL", out ? "rows" : "out");
    image_layout L;
    int rc = layout_of(v, width, height, "wlm_image_embd_from_rows", &L);
    if (rc) return rc;
    const size_t want = (size_t)L.e.n_tokens * (size_t)L.e.n_embd;
    if (n_floats != want)
        return wlm_errorf(v->errmsg, sizeof v->errmsg, WLM_ERR_INVALID_ARG,
                          "image: %zu floats of rows given, a %d×%d image takes %d rows of %d = %zu",
                          n_floats, (int)width, (int)height, (int)L.e.n_tokens, (int)L.e.n_embd, want);
    float *embd = malloc(want * sizeof *embd);
    if (!embd) return wlm_errorf(v->errmsg, sizeof v->errmsg, WLM_ERR_NOMEM, "image: out of memory");
    for (size_t i = 0; i < want; i++) {
        if (!isfinite(rows[i])) {
            free(embd);
            return wlm_errorf(v->errmsg, sizeof v->errmsg, WLM_ERR_INVALID_ARG,
                              "image: row %zu holds a non-finite value", i / (size_t)L.e.n_embd);
        }
        embd[i] = rows[i];
    }
    *out = L.e;
    out->embd = embd;
    v->errmsg[0] = 0;
    return WLM_OK;
}

void wlm_image_embd_free(wlm_image_embd *e) {
    if (!e) return;
    free(e->embd);
    memset(e, 0, sizeof *e);
}
