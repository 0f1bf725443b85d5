/*
 * vision.h — internal: the image side of a vision-language model, as llama.cpp's mtmd reads it
 * from an "mmproj" GGUF (general.architecture "clip"): the projector table (one row per
 * clip.projector_type, as data), the loaded encoder (SigLIP-style ViT weights as views into the
 * file), the preprocessing steps (resampling, letterboxing, Idefics3's tiles, normalisation) and
 * the encoder + projector pass. The public side (wlm_vision_load, wlm_image_encode, ...) is in
 * wasmlm.h. Sources: llama.cpp tools/mtmd (clip.cpp, clip-impl.h, mtmd.cpp, models/siglip.cpp)
 * and /work/shared/reference/vision-mmproj.md, which settles the resampling details against
 * llama.cpp b12211's outputs.
 */
#ifndef WASMLM_VISION_H
#define WASMLM_VISION_H

#include <stddef.h>
#include <stdint.h>

#include "formats/gguf.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "wasmlm.h"

/* How a projector turns the encoder's patch grid into fewer tokens. */
enum wlm_vision_merge {
    WLM_MERGE_AVG_POOL = 1,      /* k×k average pooling (Gemma 3) */
    WLM_MERGE_PIXEL_SHUFFLE = 2  /* s×s blocks concatenated, (dy, dx) order, dx fastest */
};

/* How an image is resampled to the encoder's square. */
enum wlm_vision_resize {
    WLM_RESIZE_BILINEAR = 1,     /* Pillow's bilinear (triangle filter, antialiased when
                                    downscaling), 8-bit after each pass */
    WLM_RESIZE_LANCZOS3 = 2,     /* Pillow's separable Lanczos-3, 8-bit after each pass */
    WLM_RESIZE_BICUBIC = 3       /* Pillow's bicubic (a = -0.5, support 2), 8-bit after each pass */
};

/* The vision tower. SigLIP (Gemma 3, Idefics3, LFM2): learned positions, LayerNorms, a plain
 * MLP, full attention. Qwen2.5-VL's ViT (llama.cpp: tools/mtmd/models/qwen2vl.cpp): two patch
 * kernels added (a still image through the temporal patch of 2), no patch bias or learned
 * positions, RMSNorms, 2-D RoPE over (row, column) of each patch (ggml's GGML_ROPE_TYPE_VISION:
 * the first quarter of each head's pairs by the row, the second by the column, base 10000),
 * window attention except in every n_wa_pattern-th block, a SwiGLU MLP with biases; the patches
 * in 2×2 merge groups, the groups reordered window by window (and back after the projector). */
enum wlm_vision_tower { WLM_TOWER_SIGLIP = 0, WLM_TOWER_QWEN25 = 1 };

/* One supported projector type: everything the loader, the preprocessing and the encoder need
 * to know about it, as data (cf. model/arch.c for the text architectures). */
typedef struct wlm_projector_row {
    const char *name;            /* clip.projector_type */
    int32_t merge;               /* enum wlm_vision_merge */
    int32_t resize;              /* enum wlm_vision_resize */
    int32_t letterbox;           /* 1: aspect kept, pasted centred on black (Gemma 3); 0: stretched */
    int32_t tiles;               /* 1: Idefics3's grid of S×S tiles + overview when
                                    clip.vision.preproc_image_size > 0 */
    int32_t dyn_min_tokens;      /* > 0: one piece of the image's own aspect (LFM2's smart
                                    resize): sides multiples of P·scale, between dyn_min_tokens
                                    and dyn_max_tokens merged tokens; the learned positions
                                    resized to its patch grid (SigLIP2 NaFlex). 0: S×S pieces */
    int32_t dyn_max_tokens;
    int32_t tile_size;           /* > 0 (dynamic rows): large images are cut into tiles of this
                                    many pixels a side + a thumbnail (LFM2-VL: 512) */
    int32_t min_tiles, max_tiles; /* the grid's tile count bounds (2, 10) */
    int32_t default_scale;       /* clip.vision.projector.scale_factor when absent; 0: required */
    const char *norm;            /* RMS norm of each merged token before the projection, or NULL */
    const char *in_norm_w, *in_norm_b; /* LayerNorm (eps 1e-5) of each merged token before the
                                    projection, each optional in the file; NULL: none */
    const char *proj;            /* the projection matrix */
    int32_t proj_transposed;     /* 1: stored [D_text, in] (ne0 = D_text), applied as x·M */
    const char *proj_b;          /* its bias, or NULL */
    const char *proj2, *proj2_b; /* a second matrix + bias after a GELU (a 2-layer MLP), or NULL */
    const char *img_begin, *img_end; /* the text around the image in the sequence (mtmd's
                                    img_beg / img_end); NULL: Idefics3's own layout */
    const char *tile_fmt;        /* before each tile: a printf format of (row, col), from 1 */
    const char *thumb_begin;     /* before the thumbnail of a tiled image */
    int32_t non_causal;          /* 1: the image's rows attend to each other both ways */
    int32_t tower;               /* enum wlm_vision_tower */
    int32_t dyn_pad;             /* 1: a dynamic piece is the image resized with its aspect kept
                                    (sides ceil'd) and centred on black in the smart-resized
                                    size (mtmd's img_tool::resize with PAD_CEIL); 0: stretched */
    int32_t mrope;               /* 1: the image's rows take 2-D M-RoPE positions in the text
                                    model (qwen2vl: wlm_eval_embd_grid) */
} wlm_projector_row;

/* The row of a projector type name, or NULL. */
const wlm_projector_row *wlm_projector_find(const char *name, size_t len);
/* "gemma3, idefics3": the supported names, for error messages (static string). */
const char *wlm_projector_names(void);

/* Encoder MLP activation. */
enum wlm_vision_act { WLM_VACT_GELU = 0, WLM_VACT_GELU_QUICK = 1, WLM_VACT_SILU = 2 };

typedef struct wlm_vision_layer {
    const float *ln1_w, *ln1_b;  /* (W) pre-attention LayerNorm (Qwen: RMSNorm, bias optional) */
    wlm_tensor q, k, v, o;       /* (W, W) */
    const float *q_b, *k_b, *v_b, *o_b; /* (W) */
    const float *ln2_w, *ln2_b;  /* (W) pre-MLP LayerNorm */
    wlm_tensor up;               /* (F, W) */
    wlm_tensor down;             /* (W, F) */
    const float *up_b;           /* (F) */
    const float *down_b;         /* (W) */
    wlm_tensor gate;             /* (F, W) Qwen's SwiGLU: silu(gate·x + gate_b) ⊙ (up·x + up_b) */
    const float *gate_b;         /* (F) */
} wlm_vision_layer;

/* Upper bounds the loader enforces, so that memory stays proportional to what a real model
 * needs and no size computation overflows. */
#define WLM_VISION_MAX_IMAGE_SIZE 4096  /* S */
#define WLM_VISION_MAX_PATCHES 16384    /* N = (S/P)^2 */
#define WLM_VISION_MAX_WIDTH 16384      /* W, F and D_text */
#define WLM_VISION_MAX_LAYERS 256
#define WLM_VISION_MAX_GRID 16          /* Idefics3 tiles per side (ceil(L/S)) */
#define WLM_VISION_MAX_HEAD 1024        /* Qwen2.5-VL: head size W / heads (its 2-D RoPE) */

struct wlm_vision {
    const wlm_projector_row *row;
    int32_t image_size;          /* S */
    int32_t patch_size;          /* P */
    int32_t n_embd;              /* W */
    int32_t n_ff;                /* F */
    int32_t n_layers;
    int32_t n_heads;
    int32_t proj_dim;            /* D_text: the projection's output width */
    int32_t scale;               /* pooling kernel k or pixel-shuffle factor s */
    int32_t longest_edge;        /* Idefics3's L (0: no tiles) */
    int32_t act;                 /* enum wlm_vision_act */
    float eps;                   /* LayerNorm eps (and Gemma 3's projector RMS norm eps) */
    float mean[3], std[3];       /* RGB normalisation */

    wlm_tensor patch;            /* (W, 3·P·P): conv kernel, each row in (c, ky, kx) order */
    wlm_tensor patch1;           /* Qwen: the second kernel (v.patch_embd.weight.1), added */
    const float *patch_b;        /* (W), NULL for Qwen */
    const float *pos;            /* (N, W) learned positions, raster order; NULL for Qwen */
    const float *pre_w, *pre_b;  /* (W) Qwen: optional RMSNorm before the blocks (v.pre_ln) */
    int32_t n_wa_pattern;        /* Qwen: blocks l with (l + 1) % n_wa_pattern == 0 attend to
                                    the whole image, the others within their window; 0: all whole */
    int32_t window;              /* Qwen: window side in pixels (clip.vision.window_size, 112) */
    wlm_vision_layer *layers;    /* (n_layers) */
    const float *post_w, *post_b; /* (W) final LayerNorm */
    const float *mm_norm;        /* (W) or NULL */
    const float *in_norm_w, *in_norm_b; /* (W·s²) or NULL */
    wlm_tensor proj;             /* (D_text, W) or (D_text, W·s²); with proj2: (hidden, W·s²) */
    const float *proj_b;         /* (proj.rows) or NULL */
    wlm_tensor proj2;            /* (D_text, hidden) when the row has a second matrix */
    const float *proj2_b;        /* (D_text) or NULL */
    int32_t min_pixels, max_pixels; /* dynamic pieces: the area bounds, tokens × (P·s)² */

    wlm_gguf gguf;
    void *buffer;                /* owned when loaded with WLM_LOAD_OWN_BUFFER */
    void **owned;                /* float copies of vectors, the transposed projection */
    int32_t n_owned, cap_owned;
    int32_t loaded;              /* 1 once wlm_vision_load succeeded */
    char errmsg[512];
};

/* ---- preprocessing (preprocess.c) -------------------------------------------------------- */

/* Pillow's Lanczos-3 resampling of an interleaved 8-bit RGB image (sw × sh) to dw × dh:
 * separable, horizontal pass then vertical, each rounded to 8 bits with Pillow's 22-bit
 * fixed-point coefficients; a pass whose size does not change is skipped. tmp: at least
 * dw·sh·3 bytes. Returns 1, or 0 when out of memory (for the coefficients). */
int wlm_resize_lanczos3(const uint8_t *src, int sw, int sh, uint8_t *dst, int dw, int dh,
                        uint8_t *tmp);
/* The same with Pillow's bilinear (triangle) filter: support 1, widened by the scale factor
 * when downscaling (an area average), 8-bit after each pass. */
int wlm_resize_bilinear_pillow(const uint8_t *src, int sw, int sh, uint8_t *dst, int dw, int dh,
                               uint8_t *tmp);
/* The same with Pillow's bicubic filter (a = -0.5, support 2, widened when downscaling; mtmd's
 * resize_pillow with RESIZE_ALGO_BICUBIC). */
int wlm_resize_bicubic_pillow(const uint8_t *src, int sw, int sh, uint8_t *dst, int dw, int dh,
                              uint8_t *tmp);

/* How an image of w × h pixels is cut: pieces = cols·rows tiles (row-major) + 1 overview; cols =
 * rows = 0 when the projector has no tiles. */
void wlm_vision_grid(const struct wlm_vision *v, int w, int h, int *cols, int *rows);

/* The pixel size (*pw × *ph) of each piece of a w × h image: S × S, or for a dynamic row
 * (dyn_min_tokens > 0) the smart-resized size (wlm_smart_resize). */
void wlm_vision_piece_size(const struct wlm_vision *v, int w, int h, int *pw, int *ph);

/* llama.cpp's calc_size_preserved_ratio with pixel bounds (transformers' smart_resize): each
 * side rounded (half to even, as Python) to a multiple of align (at least align); when the area exceeds max_pixels both sides are scaled by 1/sqrt(w·h / max) and
 * floored to multiples, when under min_pixels scaled up and ceiled. */
void wlm_smart_resize(int w, int h, int align, int min_pixels, int max_pixels, int *ow, int *oh);

/* 1 when llama.cpp's LFM2 preprocessing cuts a w × h image into tiles: w·h above twice
 * max_pixels (b12211's outputs: the image's own area, not its sides rounded to P·s). */
int wlm_vision_needs_tiles(const struct wlm_vision *v, int w, int h);

/* The pixel size of piece i (0-based; tiles first, row-major, the overview last) of an image
 * whose grid is cols × rows: tiles S × S (Idefics3) or tile_size² (lfm2), the last piece
 * wlm_vision_piece_size's. */
void wlm_vision_piece_dims(const struct wlm_vision *v, int w, int h, int cols, int rows, int i,
                           int *pw, int *ph);

/* ggml_interpolate's bilinear + antialias mode (PyTorch's bilinear, align_corners false,
 * antialias true: a triangle filter widened by the scale when shrinking, weights normalised per
 * output, all in float) of a square n × n grid of c-float vectors to gw × gh (raster order). */
void wlm_resize_positions(const float *src, int n, int c, float *dst, int gw, int gh);

/* Pixel unshuffle of a gw × gh grid of c-float vectors by s (gw, gh multiples of s): token
 * (R, C) of the (gw/s) × (gh/s) result, raster order, is patches (R·s + dy, C·s + dx) concatenated
 * in (dy, dx) order, dx fastest (llama.cpp's build_patch_merge_permute). */
void wlm_pixel_unshuffle(const float *src, int gw, int gh, int c, int s, float *dst);

/*
 * The normalised pieces of an image: out holds n_pieces × 3 × pw × ph floats (wlm_vision_piece_size),
 * each piece three planes R, G, B, row-major. rgb: w × h × 3 bytes. Returns WLM_OK or a negative status (NOMEM)
 * with a message in v->errmsg. Gemma 3: one piece (letterboxed). Idefics3: the tiles, then the
 * overview.
 */
int wlm_vision_preprocess(struct wlm_vision *v, const uint8_t *rgb, int w, int h, float *out);

/* ---- encoder (encoder.c) ---------------------------------------------------------------- */

/* Tokens one S×S piece yields: (S/P/scale)². */
int32_t wlm_vision_piece_tokens(const struct wlm_vision *v);

/* One piece (3 × pw × ph floats, normalised; pw, ph multiples of P·scale) through the encoder
 * and the projector: out = (pw/P/scale)·(ph/P/scale) × proj_dim floats. use_simd picks the
 * kernel set. WLM_OK or NOMEM. */
int wlm_vision_encode_piece(struct wlm_vision *v, const float *pixels, int pw, int ph, float *out,
                            wlm_threadpool *pool, int use_simd);

/* ---- image rows (image.c) --------------------------------------------------------------- */

/* An encoded image from rows computed elsewhere (the GPU encoder: js/backend/webgpu/vision.js,
 * fed by the pieces of wlm_vision_preprocess): `rows` must hold the n_tokens × proj_dim floats
 * wlm_image_encode would give for a width × height image, pieces in its order; they are copied.
 * *out as wlm_image_encode's (release with wlm_image_embd_free), zeroed on error. Errors:
 * WLM_ERR_INVALID_ARG (NULL, an image outside the limits, another number of floats, a non-finite
 * value), WLM_ERR_STATE (the mmproj did not load), WLM_ERR_NOMEM; the message in v->errmsg. */
int wlm_image_embd_from_rows(struct wlm_vision *v, int32_t width, int32_t height, const float *rows,
                             size_t n_floats, wlm_image_embd *out);

#endif
