/*
 * mmproj.c — loading llama.cpp's mmproj GGUF (general.architecture "clip") into a wlm_vision:
 * the projector table, the clip.* / clip.vision.* keys, and the SigLIP (or Qwen2.5-VL) tower's
 * and projector's tensors (matrices as views into the file, vectors converted to float copies).
 * Every missing or misshapen key or tensor is WLM_ERR_FORMAT naming it; a projector type not in the table is
 * WLM_ERR_UNSUPPORTED naming it. Nothing here computes: see encoder.c and preprocess.c.
 * Keys and tensor names follow llama.cpp's tools/mtmd/clip-impl.h and clip.cpp (load_hparams,
 * load_tensors).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/quant.h"
#include "runtime/errors.h"
#include "vision/vision.h"

/* ---- the projector table ------------------------------------------------------------------ */

static const wlm_projector_row PROJECTORS[] = {
    /* Gemma 3: k×k average pooling of the patch grid (k = 4 when the key is absent, as real
     * files are written), RMS norm × mm.soft_emb_norm (the converter added Gemma's +1), then
     * mm.input_projection stored as [D_text, W] and applied as x·M. One letterboxed piece. */
    {.name = "gemma3", .merge = WLM_MERGE_AVG_POOL, .resize = WLM_RESIZE_BILINEAR,
     .letterbox = 1, .tiles = 0, .default_scale = 4, .norm = "mm.soft_emb_norm.weight",
     .proj = "mm.input_projection.weight", .proj_transposed = 1,
     .img_begin = "<start_of_image>", .img_end = "<end_of_image>", .non_causal = 1},
    /* Idefics3 / SmolVLM: pixel shuffle by s, then mm.model.fc [W·s², D_text]; tiles of the
     * refined image plus a stretched overview, Lanczos-3 resampling. */
    {.name = "idefics3", .merge = WLM_MERGE_PIXEL_SHUFFLE, .resize = WLM_RESIZE_LANCZOS3,
     .letterbox = 0, .tiles = 1, .default_scale = 0, .norm = NULL, .proj = "mm.model.fc.weight",
     .proj_transposed = 0},
    /* LFM2-VL (SigLIP2 NaFlex): one piece of the image's own aspect, smart-resized with Pillow's
     * bilinear to sides that are multiples of P·s within 64..256 merged tokens (llama.cpp's
     * set_limit_image_tokens(64, 256)), the positions resized to its patch grid; pixel unshuffle
     * by s (2 when the key is absent), an optional LayerNorm (eps 1e-5), then mm.1 → GELU → mm.2,
     * both with biases. Above 2·256·(P·s)² pixels: 512-pixel tiles (a grid of 2..10) + a
     * smart-resized thumbnail, each tile after <|img_row_R_col_C|>, the thumbnail after
     * <|img_thumbnail|>. */
    {.name = "lfm2", .merge = WLM_MERGE_PIXEL_SHUFFLE, .resize = WLM_RESIZE_BILINEAR,
     .letterbox = 0, .tiles = 0, .dyn_min_tokens = 64, .dyn_max_tokens = 256, .default_scale = 2,
     .norm = NULL, .in_norm_w = "mm.input_norm.weight", .in_norm_b = "mm.input_norm.bias",
     .proj = "mm.1.weight", .proj_transposed = 0, .proj_b = "mm.1.bias", .proj2 = "mm.2.weight",
     .proj2_b = "mm.2.bias", .img_begin = "<|image_start|>", .img_end = "<|image_end|>",
     .non_causal = 0, .tile_size = 512, .min_tiles = 2, .max_tiles = 10,
     .tile_fmt = "<|img_row_%d_col_%d|>", .thumb_begin = "<|img_thumbnail|>"},
    /* Qwen2.5-VL: its own ViT (vision.h, WLM_TOWER_QWEN25); one piece of the image's own
     * aspect, smart-resized to sides that are multiples of P·2 within 8..4096 merged tokens
     * (llama.cpp's set_limit_image_tokens(8, 4096)); the 2×2 groups of patches concatenated
     * (clip.vision.spatial_merge_size, 2 when absent; llama.cpp's graph takes 2 only), then
     * mm.0 → GELU → mm.2, both with biases. In the text model the rows sit between
     * <|vision_start|> and <|vision_end|>, causal, with 2-D M-RoPE positions. */
    {.name = "qwen2.5vl_merger", .tower = WLM_TOWER_QWEN25, .merge = WLM_MERGE_PIXEL_SHUFFLE,
     .resize = WLM_RESIZE_BICUBIC, .letterbox = 0, .tiles = 0, .dyn_min_tokens = 8,
     .dyn_max_tokens = 4096, .default_scale = 2, .proj = "mm.0.weight", .proj_b = "mm.0.bias",
     .proj2 = "mm.2.weight", .proj2_b = "mm.2.bias", .img_begin = "<|vision_start|>",
     .img_end = "<|vision_end|>", .non_causal = 0, .mrope = 1},
};
#define N_PROJECTORS (sizeof PROJECTORS / sizeof PROJECTORS[0])

const wlm_projector_row *wlm_projector_find(const char *name, size_t len) {
    for (size_t i = 0; i < N_PROJECTORS; i++)
        if (strlen(PROJECTORS[i].name) == len && memcmp(PROJECTORS[i].name, name, len) == 0)
            return &PROJECTORS[i];
    return NULL;
}

const char *wlm_projector_names(void) { return "gemma3, idefics3, lfm2, qwen2.5vl_merger"; }

/* ---- helpers ------------------------------------------------------------------------------ */

static int own(wlm_vision *v, void *p) {
    if (!p) return 0;
    if (v->n_owned == v->cap_owned) {
        const int32_t cap = v->cap_owned ? v->cap_owned * 2 : 64;
        void **n = realloc(v->owned, (size_t)cap * sizeof *n);
        if (!n) { free(p); return 0; }
        v->owned = n;
        v->cap_owned = cap;
    }
    v->owned[v->n_owned++] = p;
    return 1;
}

#define ERR(status, ...) wlm_errorf(v->errmsg, sizeof v->errmsg, status, __VA_ARGS__)

/* The tensor `name` with ne0 × ne1 (× 1 × 1) of a supported type, or an error naming it. */
static int find_tensor(wlm_vision *v, const char *name, int64_t ne0, int64_t ne1,
                       const wlm_gguf_tensor **out) {
    const wlm_gguf_tensor *t = wlm_gguf_find_tensor(&v->gguf, name);
    if (!t) return ERR(WLM_ERR_FORMAT, "mmproj: tensor '%s' is missing", name);
    if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != 1 || t->ne[3] != 1)
        return ERR(WLM_ERR_FORMAT,
                   "mmproj: tensor '%s' has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld]",
                   name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                   (long long)t->ne[3], (long long)ne0, (long long)ne1);
    const wlm_type_traits *tr = wlm_type_get(t->type);
    if (!tr->name || !tr->supported || !t->data || !tr->to_float)
        return ERR(WLM_ERR_UNSUPPORTED, "mmproj: tensor '%s' has type %s (%d), not supported",
                   name, tr->name ? tr->name : "unknown", (int)t->type);
    *out = t;
    return WLM_OK;
}

/* A vector (ne0 = n) as a float copy. */
static int load_vec(wlm_vision *v, const char *name, int64_t n, const float **out) {
    const wlm_gguf_tensor *t = NULL;
    int rc = find_tensor(v, name, n, 1, &t);
    if (rc) return rc;
    const wlm_type_traits *tr = wlm_type_get(t->type);
    if (n % tr->block_size) return ERR(WLM_ERR_FORMAT, "mmproj: tensor '%s': bad length", name);
    float *f = malloc((size_t)n * sizeof *f);
    if (!own(v, f)) return ERR(WLM_ERR_NOMEM, "mmproj: out of memory for '%s'", name);
    tr->to_float(t->data, f, n);
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(f[i]))
            return ERR(WLM_ERR_FORMAT, "mmproj: tensor '%s' holds a non-finite value at %lld",
                       name, (long long)i);
    *out = f;
    return WLM_OK;
}

/* A vector that may be absent: *out NULL then. */
static int load_vec_opt(wlm_vision *v, const char *name, int64_t n, const float **out) {
    *out = NULL;
    if (!name || !wlm_gguf_find_tensor(&v->gguf, name)) return WLM_OK;
    return load_vec(v, name, n, out);
}

/* A matrix (ne0 = cols, ne1 = rows) as a view. */
static int load_mat(wlm_vision *v, const char *name, int64_t cols, int64_t rows, wlm_tensor *m) {
    const wlm_gguf_tensor *t = NULL;
    int rc = find_tensor(v, name, cols, rows, &t);
    if (rc) return rc;
    const size_t rb = wlm_row_bytes(t->type, cols);
    if (!rb)
        return ERR(WLM_ERR_FORMAT, "mmproj: tensor '%s': %lld columns are not whole %s blocks",
                   name, (long long)cols, wlm_type_get(t->type)->name);
    *m = (wlm_tensor){t->type, (int32_t)rows, (int32_t)cols, rb, t->data};
    return WLM_OK;
}

static int get_u32(wlm_vision *v, const char *key, int32_t lo, int32_t hi, int32_t *out) {
    uint32_t x;
    int rc = wlm_gguf_get_u32(&v->gguf, key, &x, v->errmsg, sizeof v->errmsg);
    if (rc) return ERR(WLM_ERR_FORMAT, "mmproj: key '%s' is missing or not an integer", key);
    if (x < (uint32_t)lo || x > (uint32_t)hi)
        return ERR(WLM_ERR_FORMAT, "mmproj: key '%s' = %u is outside %d..%d", key, x, lo, hi);
    *out = (int32_t)x;
    return WLM_OK;
}

static int get_rgb(wlm_vision *v, const char *key, float *out, int positive) {
    const wlm_gguf_kv *kv;
    if (wlm_gguf_get_arr(&v->gguf, key, -1, &kv, NULL, 0) || kv->arr.n != 3)
        return ERR(WLM_ERR_FORMAT, "mmproj: key '%s' must be an array of 3 floats", key);
    for (int c = 0; c < 3; c++) {
        double d;
        if (wlm_gguf_arr_f64(kv, (uint64_t)c, &d) || !isfinite(d) || (positive && !(d > 0)))
            return ERR(WLM_ERR_FORMAT, "mmproj: key '%s' element %d is not a %sfinite number",
                       key, c, positive ? "positive " : "");
        out[c] = (float)d;
    }
    return WLM_OK;
}

/* ---- the loader --------------------------------------------------------------------------- */

static int load_hparams(wlm_vision *v) {
    wlm_gguf *g = &v->gguf;
    wlm_gguf_str arch;
    if (wlm_gguf_get_str(g, "general.architecture", &arch, NULL, 0))
        return ERR(WLM_ERR_FORMAT, "mmproj: general.architecture is missing (not a GGUF mmproj)");
    if (!wlm_gguf_str_eq(arch, "clip"))
        return ERR(WLM_ERR_FORMAT,
                   "mmproj: general.architecture is '%.*s', expected 'clip' (is this the text "
                   "model rather than its mmproj?)", (int)(arch.len > 64 ? 64 : arch.len), arch.ptr);
    int has_vision = 0;
    if (wlm_gguf_get_bool_or(g, "clip.has_vision_encoder", 0, &has_vision, NULL, 0) || !has_vision)
        return ERR(WLM_ERR_UNSUPPORTED,
                   "mmproj: the file has no vision encoder (clip.has_vision_encoder is not true)");
    wlm_gguf_str pt;
    if (wlm_gguf_get_str(g, "clip.projector_type", &pt, NULL, 0) &&
        wlm_gguf_get_str(g, "clip.vision.projector_type", &pt, NULL, 0))
        return ERR(WLM_ERR_FORMAT, "mmproj: clip.projector_type is missing");
    v->row = wlm_projector_find(pt.ptr, pt.len);
    if (!v->row)
        return ERR(WLM_ERR_UNSUPPORTED, "mmproj: projector type '%.*s' is not supported (supported: %s)",
                   (int)(pt.len > 64 ? 64 : pt.len), pt.ptr, wlm_projector_names());

    int rc;
    if ((rc = get_u32(v, "clip.vision.image_size", 1, WLM_VISION_MAX_IMAGE_SIZE, &v->image_size)) ||
        (rc = get_u32(v, "clip.vision.patch_size", 1, WLM_VISION_MAX_IMAGE_SIZE, &v->patch_size)) ||
        (rc = get_u32(v, "clip.vision.embedding_length", 1, WLM_VISION_MAX_WIDTH, &v->n_embd)) ||
        (rc = get_u32(v, "clip.vision.feed_forward_length", 1, WLM_VISION_MAX_WIDTH, &v->n_ff)) ||
        (rc = get_u32(v, "clip.vision.block_count", 1, WLM_VISION_MAX_LAYERS, &v->n_layers)) ||
        (rc = get_u32(v, "clip.vision.attention.head_count", 1, WLM_VISION_MAX_WIDTH, &v->n_heads)))
        return rc;
    if (wlm_gguf_get_f32(g, "clip.vision.attention.layer_norm_epsilon", &v->eps, NULL, 0) ||
        !(v->eps > 0) || !isfinite(v->eps))
        return ERR(WLM_ERR_FORMAT,
                   "mmproj: clip.vision.attention.layer_norm_epsilon is missing or not positive");
    if ((rc = get_rgb(v, "clip.vision.image_mean", v->mean, 0)) ||
        (rc = get_rgb(v, "clip.vision.image_std", v->std, 1)))
        return rc;
    int gelu = 0, silu = 0;
    if (wlm_gguf_get_bool_or(g, "clip.use_gelu", 0, &gelu, NULL, 0) ||
        wlm_gguf_get_bool_or(g, "clip.use_silu", 0, &silu, NULL, 0))
        return ERR(WLM_ERR_FORMAT, "mmproj: clip.use_gelu / clip.use_silu must be booleans");
    /* llama.cpp: use_gelu → GELU, else use_silu → SiLU, else quick GELU */
    v->act = gelu ? WLM_VACT_GELU : silu ? WLM_VACT_SILU : WLM_VACT_GELU_QUICK;

    const int qwen = v->row->tower == WLM_TOWER_QWEN25;
    const char *scale_key = qwen ? "clip.vision.spatial_merge_size" : "clip.vision.projector.scale_factor";
    const wlm_gguf_kv *sf = wlm_gguf_find_kv(g, scale_key);
    if (sf) {
        if ((rc = get_u32(v, scale_key, 1, 64, &v->scale))) return rc;
    } else if (v->row->default_scale) {
        v->scale = v->row->default_scale;
    } else {
        return ERR(WLM_ERR_FORMAT, "mmproj: clip.vision.projector.scale_factor is missing "
                                   "(projector '%s' needs it)", v->row->name);
    }
    if (qwen) {
        if (v->scale != 2) /* llama.cpp's qwen2vl graph merges 2×2 groups, whatever the key says */
            return ERR(WLM_ERR_UNSUPPORTED, "mmproj: spatial_merge_size %d is not supported "
                                            "(qwen2.5vl merges 2×2 patches)", v->scale);
        if ((rc = get_u32(v, "clip.vision.n_wa_pattern", 0, WLM_VISION_MAX_LAYERS, &v->n_wa_pattern)))
            return rc;
        v->window = 112; /* llama.cpp's default when clip.vision.window_size is absent */
        if (wlm_gguf_find_kv(g, "clip.vision.window_size") &&
            (rc = get_u32(v, "clip.vision.window_size", 1, WLM_VISION_MAX_IMAGE_SIZE, &v->window)))
            return rc;
        if (v->window / v->patch_size / 2 < 1)
            return ERR(WLM_ERR_FORMAT, "mmproj: window_size %d is smaller than one 2×2 group of "
                                       "%d-pixel patches", v->window, v->patch_size);
        if ((v->n_embd / v->n_heads) % 4 || v->n_embd / v->n_heads > WLM_VISION_MAX_HEAD)
            return ERR(WLM_ERR_FORMAT, "mmproj: head size %d is not a multiple of 4 within "
                                       "4..%d (2-D RoPE turns a quarter of each head's pairs by "
                                       "each axis)", v->n_embd / v->n_heads,
                       WLM_VISION_MAX_HEAD);
    }
    v->longest_edge = 0;
    if (v->row->tiles && wlm_gguf_find_kv(g, "clip.vision.preproc_image_size") &&
        (rc = get_u32(v, "clip.vision.preproc_image_size", 0,
                      WLM_VISION_MAX_GRID * WLM_VISION_MAX_IMAGE_SIZE, &v->longest_edge)))
        return rc;

    const int32_t S = v->image_size, P = v->patch_size;
    if (S % P)
        return ERR(WLM_ERR_FORMAT, "mmproj: image_size %d is not a multiple of patch_size %d", S, P);
    const int32_t G = S / P;
    if ((int64_t)G * G > WLM_VISION_MAX_PATCHES)
        return ERR(WLM_ERR_UNSUPPORTED, "mmproj: %d×%d patches exceed the limit of %d", G, G,
                   WLM_VISION_MAX_PATCHES);
    if (G % v->scale)
        return ERR(WLM_ERR_FORMAT, "mmproj: the %d×%d patch grid is not divisible by the "
                                   "projector's scale factor %d", G, G, v->scale);
    if (v->n_embd % v->n_heads)
        return ERR(WLM_ERR_FORMAT, "mmproj: embedding_length %d is not a multiple of head_count %d",
                   v->n_embd, v->n_heads);
    if (v->longest_edge && (v->longest_edge + S - 1) / S > WLM_VISION_MAX_GRID)
        return ERR(WLM_ERR_UNSUPPORTED, "mmproj: preproc_image_size %d gives more than %d tiles a side",
                   v->longest_edge, WLM_VISION_MAX_GRID);
    if (v->row->dyn_min_tokens) {
        /* the area bounds of a dynamic piece: tokens × (P·s)² pixels */
        const int64_t area = (int64_t)P * v->scale * P * v->scale;
        const int64_t hi = (int64_t)v->row->dyn_max_tokens * area;
        if (hi > (int64_t)WLM_VISION_MAX_PATCHES * P * P || hi > INT32_MAX / 4)
            return ERR(WLM_ERR_UNSUPPORTED, "mmproj: patch_size %d and scale factor %d give pieces "
                       "of more than %d patches", P, v->scale, WLM_VISION_MAX_PATCHES);
        v->min_pixels = (int32_t)(v->row->dyn_min_tokens * area);
        v->max_pixels = (int32_t)hi;
    }
    return WLM_OK;
}

/* A patch kernel [P, P, 3, W]: W rows of 3·P·P in (c, ky, kx) order. */
static int load_patch(wlm_vision *v, const char *name, wlm_tensor *out) {
    const int64_t W = v->n_embd, P = v->patch_size;
    const wlm_gguf_tensor *pt = wlm_gguf_find_tensor(&v->gguf, name);
    if (!pt) return ERR(WLM_ERR_FORMAT, "mmproj: tensor '%s' is missing", name);
    if (pt->ne[0] != P || pt->ne[1] != P || pt->ne[2] != 3 || pt->ne[3] != W)
        return ERR(WLM_ERR_FORMAT, "mmproj: tensor '%s' has shape [%lld, %lld, %lld, %lld], "
                   "expected [%lld, %lld, 3, %lld]", name, (long long)pt->ne[0],
                   (long long)pt->ne[1], (long long)pt->ne[2], (long long)pt->ne[3], (long long)P,
                   (long long)P, (long long)W);
    const wlm_type_traits *ptr = wlm_type_get(pt->type);
    const size_t prb = wlm_row_bytes(pt->type, 3 * P * P);
    if (!ptr->name || !ptr->supported || !pt->data || !prb)
        return ERR(WLM_ERR_UNSUPPORTED, "mmproj: tensor '%s' has type %s (%d), not supported for "
                   "a %lld-element kernel", name, ptr->name ? ptr->name : "unknown",
                   (int)pt->type, (long long)(3 * P * P));
    *out = (wlm_tensor){pt->type, (int32_t)W, (int32_t)(3 * P * P), prb, pt->data};
    return WLM_OK;
}

/* Block l's tensor `fmt` ("v.blk.<l>.<fmt>") into the caller's `name` buffer. */
#define NAME(fmt) (snprintf(name, sizeof name, "v.blk.%d." fmt, l), name)

/* Block l's SwiGLU MLP with biases (Qwen2.5-VL): gate and up [W, F], down [F, W]. */
static int load_swiglu_mlp(wlm_vision *v, int l) {
    const int64_t W = v->n_embd, F = v->n_ff;
    wlm_vision_layer *L = &v->layers[l];
    char name[96];
    int rc;
    if ((rc = load_mat(v, NAME("ffn_gate.weight"), W, F, &L->gate)) ||
        (rc = load_mat(v, NAME("ffn_up.weight"), W, F, &L->up)) ||
        (rc = load_mat(v, NAME("ffn_down.weight"), F, W, &L->down)) ||
        (rc = load_vec(v, NAME("ffn_gate.bias"), F, &L->gate_b)) ||
        (rc = load_vec(v, NAME("ffn_up.bias"), F, &L->up_b)) ||
        (rc = load_vec(v, NAME("ffn_down.bias"), W, &L->down_b)))
        return rc;
    return WLM_OK;
}

/* Block l's up/down MLP with biases (SigLIP): up [W, F], down [F, W]. */
static int load_up_down_mlp(wlm_vision *v, int l) {
    const int64_t W = v->n_embd, F = v->n_ff;
    wlm_vision_layer *L = &v->layers[l];
    char name[96];
    int rc;
    /* llama.cpp swaps up and down when a file has them exchanged (ffn_down's ne0 == W) */
    const wlm_gguf_tensor *dn = wlm_gguf_find_tensor(&v->gguf, NAME("ffn_down.weight"));
    const int swapped = F != W && dn && dn->ne[0] == W && dn->ne[1] == F;
    if ((rc = load_mat(v, NAME("ffn_up.weight"), swapped ? F : W, swapped ? W : F,
                       swapped ? &L->down : &L->up)) ||
        (rc = load_mat(v, NAME("ffn_down.weight"), swapped ? W : F, swapped ? F : W,
                       swapped ? &L->up : &L->down)) ||
        (rc = load_vec(v, NAME("ffn_up.bias"), swapped ? W : F, swapped ? &L->down_b : &L->up_b)) ||
        (rc = load_vec(v, NAME("ffn_down.bias"), swapped ? F : W, swapped ? &L->up_b : &L->down_b)))
        return rc;
    return WLM_OK;
}

/* The blocks and the final norm, as either tower has them: per block the two norms, the
 * attention's Q/K/V/O weights [W, W] and biases [W], then the tower's MLP (Qwen2.5-VL's SwiGLU,
 * else SigLIP's up/down); then v.post_ln. The norms' biases are optional in the Qwen2.5-VL tower
 * (RMSNorms: llama.cpp's build_norm takes a bias where there is one), required in SigLIP's. */
static int load_blocks(wlm_vision *v, int qwen) {
    const int64_t W = v->n_embd;
    int (*const load_bias)(wlm_vision *, const char *, int64_t, const float **) =
        qwen ? load_vec_opt : load_vec;
    v->layers = calloc((size_t)v->n_layers, sizeof *v->layers);
    if (!own(v, v->layers)) return ERR(WLM_ERR_NOMEM, "mmproj: out of memory");
    char name[96];
    int rc;
    for (int l = 0; l < v->n_layers; l++) {
        wlm_vision_layer *L = &v->layers[l];
        if ((rc = load_vec(v, NAME("ln1.weight"), W, &L->ln1_w)) ||
            (rc = load_bias(v, NAME("ln1.bias"), W, &L->ln1_b)) ||
            (rc = load_vec(v, NAME("ln2.weight"), W, &L->ln2_w)) ||
            (rc = load_bias(v, NAME("ln2.bias"), W, &L->ln2_b)) ||
            (rc = load_mat(v, NAME("attn_q.weight"), W, W, &L->q)) ||
            (rc = load_mat(v, NAME("attn_k.weight"), W, W, &L->k)) ||
            (rc = load_mat(v, NAME("attn_v.weight"), W, W, &L->v)) ||
            (rc = load_mat(v, NAME("attn_out.weight"), W, W, &L->o)) ||
            (rc = load_vec(v, NAME("attn_q.bias"), W, &L->q_b)) ||
            (rc = load_vec(v, NAME("attn_k.bias"), W, &L->k_b)) ||
            (rc = load_vec(v, NAME("attn_v.bias"), W, &L->v_b)) ||
            (rc = load_vec(v, NAME("attn_out.bias"), W, &L->o_b)) ||
            (rc = qwen ? load_swiglu_mlp(v, l) : load_up_down_mlp(v, l)))
            return rc;
    }
    if ((rc = load_vec(v, "v.post_ln.weight", W, &v->post_w)) ||
        (rc = load_bias(v, "v.post_ln.bias", W, &v->post_b)))
        return rc;
    return WLM_OK;
}
#undef NAME

/* Qwen2.5-VL's tower (vision.h, WLM_TOWER_QWEN25): two patch kernels, an optional pre-norm,
 * RMSNorms (biases optional), Q/K/V/O and the SwiGLU MLP with biases. */
static int load_qwen_tower(wlm_vision *v) {
    const int64_t W = v->n_embd;
    int rc;
    if ((rc = load_patch(v, "v.patch_embd.weight", &v->patch)) ||
        (rc = load_patch(v, "v.patch_embd.weight.1", &v->patch1)) ||
        (rc = load_vec_opt(v, "v.pre_ln.weight", W, &v->pre_w)) ||
        (rc = load_vec_opt(v, "v.pre_ln.bias", W, &v->pre_b)))
        return rc;
    return load_blocks(v, 1);
}

/* The SigLIP tower: the patch kernel + bias, learned positions, LayerNorm blocks. */
static int load_siglip_tower(wlm_vision *v) {
    const int64_t W = v->n_embd, P = v->patch_size;
    const int64_t N = (int64_t)(v->image_size / P) * (v->image_size / P);
    int rc;
    if ((rc = load_patch(v, "v.patch_embd.weight", &v->patch))) return rc;
    if ((rc = load_vec(v, "v.patch_embd.bias", W, &v->patch_b))) return rc;
    {
        const wlm_gguf_tensor *t = NULL;
        if ((rc = find_tensor(v, "v.position_embd.weight", W, N, &t))) return rc;
        const wlm_type_traits *tr = wlm_type_get(t->type);
        if ((N * W) % tr->block_size)
            return ERR(WLM_ERR_FORMAT, "mmproj: tensor 'v.position_embd.weight': bad length");
        float *f = malloc((size_t)(N * W) * sizeof *f);
        if (!own(v, f)) return ERR(WLM_ERR_NOMEM, "mmproj: out of memory for the positions");
        tr->to_float(t->data, f, N * W);
        v->pos = f;
    }
    return load_blocks(v, 0);
}

static int load_tensors(wlm_vision *v) {
    const int64_t W = v->n_embd;
    int rc = v->row->tower == WLM_TOWER_QWEN25 ? load_qwen_tower(v) : load_siglip_tower(v);
    if (rc) return rc;

    /* the projector */
    const wlm_projector_row *r = v->row;
    if (r->norm && (rc = load_vec(v, r->norm, W, &v->mm_norm))) return rc;
    const int64_t in = r->merge == WLM_MERGE_PIXEL_SHUFFLE ? W * v->scale * v->scale : W;
    const wlm_gguf_tensor *t = wlm_gguf_find_tensor(&v->gguf, r->proj);
    if (!t) return ERR(WLM_ERR_FORMAT, "mmproj: tensor '%s' is missing", r->proj);
    const int64_t D = r->proj_transposed ? t->ne[0] : t->ne[1];
    if (D < 1 || D > WLM_VISION_MAX_WIDTH)
        return ERR(WLM_ERR_FORMAT, "mmproj: tensor '%s' gives a %s width of %lld", r->proj,
                   r->proj2 ? "hidden" : "text", (long long)D);
    v->proj_dim = (int32_t)D;
    if ((rc = load_vec_opt(v, r->in_norm_w, in, &v->in_norm_w)) ||
        (rc = load_vec_opt(v, r->in_norm_b, in, &v->in_norm_b)))
        return rc;
    if (r->proj2) { /* a 2-layer MLP: (hidden, in) then (D_text, hidden), both with biases */
        if ((rc = load_mat(v, r->proj, in, D, &v->proj)) ||
            (rc = load_vec(v, r->proj_b, D, &v->proj_b)))
            return rc;
        const wlm_gguf_tensor *t2 = wlm_gguf_find_tensor(&v->gguf, r->proj2);
        if (!t2) return ERR(WLM_ERR_FORMAT, "mmproj: tensor '%s' is missing", r->proj2);
        const int64_t D2 = t2->ne[1];
        if (D2 < 1 || D2 > WLM_VISION_MAX_WIDTH)
            return ERR(WLM_ERR_FORMAT, "mmproj: tensor '%s' gives a text width of %lld", r->proj2,
                       (long long)D2);
        if ((rc = load_mat(v, r->proj2, D, D2, &v->proj2)) ||
            (rc = load_vec(v, r->proj2_b, D2, &v->proj2_b)))
            return rc;
        v->proj_dim = (int32_t)D2;
        return WLM_OK;
    }
    if (!r->proj_transposed) return load_mat(v, r->proj, in, D, &v->proj);
    /* stored (in rows of D): transposed once to D rows of `in`, the element type kept where it
     * has one element per block (F32, F16, BF16), else as float */
    if ((rc = find_tensor(v, r->proj, D, in, &t))) return rc;
    const wlm_type_traits *tr = wlm_type_get(t->type);
    if (tr->block_size == 1) {
        const size_t es = tr->type_size;
        unsigned char *m = malloc((size_t)(D * in) * es);
        if (!own(v, m)) return ERR(WLM_ERR_NOMEM, "mmproj: out of memory for '%s'", r->proj);
        const unsigned char *s = t->data;
        for (int64_t i = 0; i < in; i++)
            for (int64_t d = 0; d < D; d++)
                memcpy(m + ((size_t)d * (size_t)in + (size_t)i) * es,
                       s + ((size_t)i * (size_t)D + (size_t)d) * es, es);
        v->proj = (wlm_tensor){t->type, (int32_t)D, (int32_t)in, (size_t)in * es, m};
    } else {
        float *row = malloc((size_t)D * sizeof *row);
        float *m = malloc((size_t)(D * in) * sizeof *m);
        if (!row || !own(v, m)) {
            free(row);
            return ERR(WLM_ERR_NOMEM, "mmproj: out of memory for '%s'", r->proj);
        }
        const size_t rb = wlm_row_bytes(t->type, D);
        for (int64_t i = 0; i < in; i++) {
            tr->to_float((const unsigned char *)t->data + (size_t)i * rb, row, D);
            for (int64_t d = 0; d < D; d++) m[(size_t)d * (size_t)in + (size_t)i] = row[d];
        }
        free(row);
        v->proj = (wlm_tensor){WLM_TYPE_F32, (int32_t)D, (int32_t)in, (size_t)in * sizeof(float), m};
    }
    return WLM_OK;
}

int wlm_vision_load(const void *data, size_t size, unsigned flags, wlm_vision **out) {
    if (!out) {
        if (flags & WLM_LOAD_OWN_BUFFER) free((void *)data);
        return WLM_ERR_INVALID_ARG;
    }
    *out = NULL;
    wlm_vision *v = calloc(1, sizeof *v);
    if (!v) {
        if (flags & WLM_LOAD_OWN_BUFFER) free((void *)data);
        return WLM_ERR_NOMEM;
    }
    *out = v;
    if (flags & WLM_LOAD_OWN_BUFFER) v->buffer = (void *)data;
    if (flags & ~(unsigned)WLM_LOAD_OWN_BUFFER)
        return ERR(WLM_ERR_INVALID_ARG, "wlm_vision_load: unknown flags 0x%x", flags);
    if (!data) return ERR(WLM_ERR_INVALID_ARG, "wlm_vision_load: data is NULL");
    if ((uintptr_t)data % 4)
        return ERR(WLM_ERR_INVALID_ARG, "wlm_vision_load: data is not 4-byte aligned");
    int rc = wlm_gguf_parse(&v->gguf, data, size, v->errmsg, sizeof v->errmsg);
    if (rc) {
        char m[sizeof v->errmsg];
        memcpy(m, v->errmsg, sizeof m);
        return ERR(rc, "mmproj: %s", m);
    }
    if ((rc = load_hparams(v)) || (rc = load_tensors(v))) return rc;
    v->loaded = 1;
    v->errmsg[0] = 0;
    return WLM_OK;
}

void wlm_vision_free(wlm_vision *v) {
    if (!v) return;
    for (int32_t i = 0; i < v->n_owned; i++) free(v->owned[i]);
    free(v->owned);
    wlm_gguf_free(&v->gguf);
    free(v->buffer);
    free(v);
}

const char *wlm_vision_errmsg(const wlm_vision *v) {
    return v ? v->errmsg : "no vision model (NULL handle)";
}

int wlm_vision_get_info(const wlm_vision *v, wlm_vision_info *info) {
    if (!v || !info) return WLM_ERR_INVALID_ARG;
    if (!v->loaded) return WLM_ERR_STATE;
    memset(info, 0, sizeof *info);
    info->projector = v->row->name;
    info->image_size = v->image_size;
    info->patch_size = v->patch_size;
    info->n_embd = v->n_embd;
    info->n_ff = v->n_ff;
    info->n_layers = v->n_layers;
    info->n_heads = v->n_heads;
    info->proj_dim = v->proj_dim;
    info->scale_factor = v->scale;
    info->longest_edge = v->longest_edge;
    info->piece_tokens = wlm_vision_piece_tokens(v);
    return WLM_OK;
}
