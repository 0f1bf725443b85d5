/*
 * gguf_load.h — internal to the GGUF model loader, which maps a parsed GGUF file onto a
 * wlm_model by its architecture's row of arch.c, in four files:
 *   gguf_model.c    the entry points (model.h): metadata, the architecture, the vocabulary
 *   gguf_hparams.c  the <arch>.* keys into wlm_hparams, and the per-layer tables (gguf_layers)
 *   gguf_weights.c  every weight of the model by llama.cpp's tensor names (m->w)
 *   gguf_tensors.c  one tensor by name as a weight view, its shape, type and values checked
 * None parses bytes (formats/gguf.c does) or does arithmetic on weights (forward.c does).
 * Every function returns WLM_OK or a status with the message in m->errmsg, naming the key or
 * tensor at fault.
 */
#ifndef WASMLM_GGUF_LOAD_H
#define WASMLM_GGUF_LOAD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "formats/gguf.h"
#include "model/model.h"

/* Bounds on hyperparameters: far above any real Llama, low enough that products of them fit
 * in 64 bits and each matrix dimension in int32. */
#define MAX_DIM 65536
#define MAX_HIDDEN 262144
#define MAX_LAYERS 1024
#define MAX_HEADS 1024
#define MAX_VOCAB (1 << 24)
#define MAX_SEQ (1 << 24)

/* The key "<arch>.<suffix>" in buf. */
static inline const char *akey(char *buf, size_t n, const wlm_arch *a, const char *suffix) {
    snprintf(buf, n, "%s.%s", a->name, suffix);
    return buf;
}

/* ---- gguf_hparams.c ---- */

/* The per-layer tables the hyperparameters give, which gguf_map_weights consumes. All owned;
 * gguf_layers_free releases them. */
typedef struct {
    int32_t *swa;   /* [n_layers] 1 where the layer attends through a sliding window */
    int32_t *mixer; /* [n_layers] the layer's sequence mixer (WLM_MIX_*) */
    /* Per-layer shapes where the architecture has them (arch->per_layer: Gemma 4), else NULL;
     * one allocation at n_ff: */
    int32_t *n_ff;  /* [n_layers] feed-forward width */
    int32_t *n_kvh; /* [n_layers] KV heads */
    int32_t *head;  /* [n_layers] head size */
} gguf_layers;

/* Reads m->hp (hp.arch already set) and fills *t (zeroed first; the caller frees it with
 * gguf_layers_free whatever the result). */
int gguf_read_hparams(wlm_model *m, const wlm_gguf *g, gguf_layers *t);
void gguf_layers_free(gguf_layers *t);
/* Floats of one layer's recurrent state: its conv's last K - 1 inputs, and DeltaNet's HV
 * matrices of D × D; 0 for attention. */
size_t gguf_layer_state_floats(const wlm_hparams *hp, int32_t mixer);

/* ---- gguf_weights.c ---- */

/* Maps every weight onto m->w (the layer tables from gguf_read_hparams), sets hp.vocab_size from
 * token_embd.weight and m->weight_bytes; F16 vectors are converted into m->owned_floats. */
int gguf_map_weights(wlm_model *m, const wlm_gguf *g, const gguf_layers *t);

/* ---- gguf_tensors.c ---- */

/* Formats a tensor type for messages: "Q5_K (13)" or "99 (unknown)". */
const char *gguf_type_desc(int32_t type, char *buf, size_t n);
/* A stack of n_mat matrices `name` of rows × cols (GGUF: ne[0] = cols, ne[1] = rows, ne[2] =
 * n_mat) of a type the kernels multiply, aligned, with finite values when F32 / F16 / BF16; a
 * view into the file (a placeholder when the tensor is held by another backend). */
int gguf_get_matrices(wlm_model *m, const wlm_gguf *g, const char *name, int64_t n_mat,
                      int64_t rows, int64_t cols, wlm_tensor *out);
/* One matrix (gguf_get_matrices' checks). */
int gguf_get_matrix(wlm_model *m, const wlm_gguf *g, const char *name, int64_t rows, int64_t cols,
                    wlm_tensor *out);
/* rows × cols floats: F32 used in place, F16 converted into *spare (advanced by rows × cols). */
int gguf_get_floats(wlm_model *m, const wlm_gguf *g, const char *name, int32_t rows, int32_t cols,
                    float **spare, const float **out);
/* A norm or bias vector of dim floats (gguf_get_floats). */
int gguf_get_norm(wlm_model *m, const wlm_gguf *g, const char *name, int32_t dim, float **spare,
                  const float **out);

#endif
