/*
 * fuzz_mmproj.c — libFuzzer harness: wlm_vision_load on arbitrary bytes (llama.cpp's mmproj GGUF:
 * the clip.* keys, the SigLIP tower's and projector's tensors), copied into an exact-size malloc'd
 * buffer first. When a file loads, its info must be plausible, and when it is small (bounded work:
 * image side <= 128, widths <= 512, <= 4 blocks, idefics3 edge <= 256) an image whose size comes
 * from the input's last bytes (1..200 a side, pixels from the input) is encoded with the scalar
 * or SIMD kernels: the embeddings must have the documented count and shape. Images of
 * impossible sizes must be refused with a message. The seeds are tools/synth_mmproj.mjs's files
 * of the four projectors (gemma3, idefics3, lfm2, qwen2.5vl_merger) in F32, F16 and Q8_0, and
 * qwen2.5vl_merger's without its own keys or second patch kernel (fuzz/make-corpus.mjs).
 * Checks: no crash, leak, ASan/UBSan report or hang; only documented status codes; an error
 * always has a message.
 */
#include <string.h>

#include "fuzz_util.h"

static void exercise(wlm_vision *v, const uint8_t *data, size_t size) {
    wlm_vision_info info;
    int rc = wlm_vision_get_info(v, &info);
    FZ_CHECK(rc == WLM_OK, "wlm_vision_get_info on a loaded mmproj: %s", wlm_status_name(rc));
    FZ_CHECK(info.projector && info.image_size > 0 && info.patch_size > 0 &&
                 info.image_size % info.patch_size == 0 && info.n_embd > 0 && info.n_heads > 0 &&
                 info.n_embd % info.n_heads == 0 && info.proj_dim > 0 && info.piece_tokens > 0,
             "implausible info: %s S %d P %d W %d heads %d D %d tokens %d",
             info.projector ? info.projector : "(null)", (int)info.image_size,
             (int)info.patch_size, (int)info.n_embd, (int)info.n_heads, (int)info.proj_dim,
             (int)info.piece_tokens);
    unsigned char px[3] = {1, 2, 3};
    wlm_image_embd e;
    rc = wlm_image_encode(v, px, 0, 1, NULL, 0, &e);
    FZ_CHECK(rc == WLM_ERR_INVALID_ARG && e.embd == NULL, "a 0×1 image: %s", wlm_status_name(rc));
    fz_check_msg(wlm_vision_errmsg(v), 1, "wlm_image_encode of a 0×1 image");
    /* qwen2.5vl_merger: one piece of the image's own size whatever image_size says; the
     * image's ≤ 200² pixels bound its work once patches are ≥ 8 pixels */
    const int qwen = !strcmp(info.projector, "qwen2.5vl_merger");
    if ((qwen ? info.patch_size < 8 : info.image_size > 128) || info.n_embd > 512 ||
        info.n_ff > 512 || info.n_layers > 4 || info.longest_edge > 256 || info.proj_dim > 1024)
        return;
    const int w = 1 + (size ? data[size - 1] : 0) % 200, h = 1 + (size > 1 ? data[size - 2] : 0) % 200;
    /* lfm2 cuts an image of more than 2·256·(P·s)² pixels into 512-pixel tiles: (512/P)² patches
     * each, too much work for a fuzzer at a tiny P (the tests cover tiles) */
    if (!strcmp(info.projector, "lfm2") &&
        (int64_t)w * h > 2 * 256 * (int64_t)(info.patch_size * info.scale_factor) *
                             (info.patch_size * info.scale_factor))
        return;
    unsigned char *rgb = malloc((size_t)w * h * 3);
    if (!rgb) abort();
    for (size_t i = 0; i < (size_t)w * h * 3; i++) rgb[i] = size ? data[(i * 7919) % size] : 0;
    rc = wlm_image_encode(v, rgb, w, h, NULL, (int32_t)(size & 1), &e);
    /* lfm2, qwen2.5vl_merger: one piece of the image's own size (its token count varies) */
    const int dynamic = !strcmp(info.projector, "lfm2") || qwen;
    FZ_CHECK(rc == WLM_OK || rc == WLM_ERR_NOMEM,
             "wlm_image_encode %dx%d: %s %s", w, h, wlm_status_name(rc), wlm_vision_errmsg(v));
    if (rc == WLM_OK) {
        FZ_CHECK(e.n_embd == info.proj_dim &&
                     (dynamic ? e.tokens_per_piece > 0 : e.tokens_per_piece == info.piece_tokens) &&
                     e.n_tokens == (e.n_pieces - 1) * e.tokens_per_piece + e.last_tokens &&
                     e.n_pieces == e.grid_cols * e.grid_rows + 1 && e.embd != NULL &&
                     e.last_cols * e.last_rows == e.last_tokens,
                 "embeddings of %dx%d: %d tokens (%d pieces of %d, grid %dx%d) of %d", w, h,
                 (int)e.n_tokens, (int)e.n_pieces, (int)e.tokens_per_piece, (int)e.grid_cols,
                 (int)e.grid_rows, (int)e.n_embd);
        (void)fz_touch(e.embd, sizeof(float) * (size_t)e.n_tokens * (size_t)e.n_embd);
    } else {
        fz_check_msg(wlm_vision_errmsg(v), 1, "wlm_image_encode");
    }
    wlm_image_embd_free(&e);
    free(rgb);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    void *buf = fz_dup(data, size);
    wlm_vision *v = NULL;
    int rc = wlm_vision_load(buf, size, 0, &v);
    FZ_CHECK(fz_known_status(rc) && rc != WLM_DONE, "wlm_vision_load returned %d", rc);
    FZ_CHECK(v != NULL, "wlm_vision_load gave no handle (%s)", wlm_status_name(rc));
    fz_check_msg(wlm_vision_errmsg(v), rc != WLM_OK, "wlm_vision_load");
    if (rc == WLM_OK) {
        exercise(v, data, size);
    } else {
        wlm_vision_info info;
        FZ_CHECK(wlm_vision_get_info(v, &info) == WLM_ERR_STATE,
                 "wlm_vision_get_info on a failed mmproj is not WLM_ERR_STATE");
    }
    wlm_vision_free(v);
    free(buf);
    return 0;
}
