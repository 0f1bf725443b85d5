/*
 * image.c — the public entry of image encoding (wlm_image_encode): checks the image, asks the
 * projector's preprocessing for its pieces (preprocess.c) and runs each through the encoder
 * (encoder.c), one piece at a time so that memory stays at one piece's activations.
 */
#include <stdlib.h>
#include <string.h>

#include "runtime/errors.h"
#include "vision/vision.h"

int wlm_image_encode(wlm_vision *v, const uint8_t *rgb, int32_t width, int32_t height,
                     wlm_threadpool *pool, int32_t use_simd, wlm_image_embd *out) {
    if (out) memset(out, 0, sizeof *out);
    if (!v) return WLM_ERR_INVALID_ARG;
    if (!out || !rgb)
        return wlm_errorf(v->errmsg, sizeof v->errmsg, WLM_ERR_INVALID_ARG,
                          "wlm_image_encode: %s is NULL", out ? "rgb" : "out");
    if (!v->loaded)
        return wlm_errorf(v->errmsg, sizeof v->errmsg, WLM_ERR_STATE,
                          "wlm_image_encode: the mmproj did not load");
    if (width < 1 || height < 1 || width > WLM_IMAGE_MAX_SIDE || height > WLM_IMAGE_MAX_SIDE ||
        (int64_t)width * height > WLM_IMAGE_MAX_PIXELS)
        return wlm_errorf(v->errmsg, sizeof v->errmsg, WLM_ERR_INVALID_ARG,
                          "image: %d×%d pixels is outside 1..%d a side and %d in all", (int)width,
                          (int)height, WLM_IMAGE_MAX_SIDE, WLM_IMAGE_MAX_PIXELS);
    int cols, rows;
    wlm_vision_grid(v, width, height, &cols, &rows);
    const int32_t P = v->patch_size, s = v->scale, pieces = cols * rows + 1, D = v->proj_dim;
    /* the pieces' sizes: every tile alike, the last piece (overview / thumbnail) its own */
    int tw, th, lw, lh;
    wlm_vision_piece_dims(v, width, height, cols, rows, 0, &tw, &th);
    wlm_vision_piece_dims(v, width, height, cols, rows, pieces - 1, &lw, &lh);
    const int32_t tpp = (tw / P / s) * (th / P / s), last = (lw / P / s) * (lh / P / s);
    const int32_t n_tokens = (pieces - 1) * tpp + last;
    const size_t tsz = (size_t)3 * tw * th, lsz = (size_t)3 * lw * lh;
    float *pix = malloc(((size_t)(pieces - 1) * tsz + lsz) * sizeof *pix);
    float *embd = malloc((size_t)n_tokens * D * sizeof *embd);
    if (!pix || !embd) {
        free(pix), free(embd);
        return wlm_errorf(v->errmsg, sizeof v->errmsg, WLM_ERR_NOMEM, "image: out of memory");
    }
    int rc = wlm_vision_preprocess(v, rgb, width, height, pix);
    for (int32_t p = 0; !rc && p < pieces; p++) {
        const int lastp = p == pieces - 1;
        rc = wlm_vision_encode_piece(v, pix + (size_t)p * tsz, lastp ? lw : tw, lastp ? lh : th,
                                     embd + (size_t)p * tpp * D, pool, use_simd);
    }
    free(pix);
    if (rc) {
        free(embd);
        return rc;
    }
    *out = (wlm_image_embd){n_tokens, D, pieces, pieces > 1 ? tpp : last, cols, rows, last, embd,
                            lw / P / s, lh / P / s};
    v->errmsg[0] = 0;
    return WLM_OK;
}

void wlm_image_embd_free(wlm_image_embd *e) {
    if (!e) return;
    free(e->embd);
    memset(e, 0, sizeof *e);
}
