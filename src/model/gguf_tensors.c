/*
 * gguf_tensors.c — one tensor of a parsed GGUF file by name, as a weight view of the model:
 * its shape checked against what the hyperparameters say (matrices, stacks of expert matrices,
 * vectors), its type against the kernels (formats the engine can multiply, F32 / F16 vectors),
 * its alignment, and its float values finite. No copy, except F16 vectors converted into the
 * model's float block (see gguf_load.h).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "model/gguf_load.h"
#include "model/model.h"

/* Formats a tensor type for messages: "Q5_K (13)" or "99 (unknown)". */
const char *gguf_type_desc(int32_t type, char *buf, size_t n) {
    const wlm_type_traits *tr = wlm_type_get(type);
    if (tr->name) snprintf(buf, n, "%s (%d)", tr->name, (int)type);
    else snprintf(buf, n, "%d (unknown)", (int)type);
    return buf;
}

/* Looks up `name` and checks it is a matrix of `rows` × `cols` (GGUF: ne[0] = cols, ne[1] =
 * rows) of a supported type, aligned, with finite values when F32/F16/BF16. */
int gguf_get_matrices(wlm_model *m, const wlm_gguf *g, const char *name, int64_t n_mat,
                      int64_t rows, int64_t cols, wlm_tensor *out) {
    char tbuf[48];
    const wlm_gguf_tensor *t = wlm_gguf_find_tensor(g, name);
    if (!t) return wlm_set_error(m->errmsg, WLM_ERR_FORMAT, "GGUF model lacks tensor %s", name);
    if (t->ne[0] != cols || t->ne[1] != rows || t->ne[2] != n_mat || t->ne[3] != 1) {
        if (n_mat > 1)
            return wlm_set_error(m->errmsg, WLM_ERR_FORMAT,
                                 "tensor %s has shape [%lld, %lld, %lld, %lld], expected [%lld, "
                                 "%lld, %lld] (GGUF order: columns, rows, experts)",
                                 name, (long long)t->ne[0], (long long)t->ne[1],
                                 (long long)t->ne[2], (long long)t->ne[3], (long long)cols,
                                 (long long)rows, (long long)n_mat);
        return wlm_set_error(m->errmsg, WLM_ERR_FORMAT,
                             "tensor %s has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld] "
                             "(GGUF order: columns, rows)",
                             name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                             (long long)t->ne[3], (long long)cols, (long long)rows);
    }
    const wlm_type_traits *tr = wlm_type_get(t->type);
    if (!tr->name || !tr->supported || !tr->to_float || !tr->matvec_ref || !tr->matvec_simd ||
        (!t->data && !t->external))
        return wlm_set_error(m->errmsg, WLM_ERR_UNSUPPORTED,
                             "tensor %s has type %s, which is not supported", name,
                             gguf_type_desc(t->type, tbuf, sizeof tbuf));
    if (tr->vec_dot_type != WLM_TYPE_F32 && !wlm_type_get(tr->vec_dot_type)->from_float)
        return wlm_set_error(m->errmsg, WLM_ERR_UNSUPPORTED,
                             "tensor %s has type %s, whose activation type cannot be produced",
                             name, tr->name);
    const size_t row_bytes = wlm_row_bytes(t->type, cols);
    if (row_bytes == 0 || (uint64_t)row_bytes * (uint64_t)rows * (uint64_t)n_mat != t->nbytes)
        return wlm_set_error(m->errmsg, WLM_ERR_FORMAT,
                             "tensor %s: %lld columns are not whole %s blocks of %d", name,
                             (long long)cols, tr->name, (int)tr->block_size);
    if (t->external) { /* held by another backend: a placeholder view, never read here */
        out->type = t->type;
        out->rows = (int32_t)rows;
        out->cols = (int32_t)cols;
        out->row_bytes = row_bytes;
        out->data = m->external_marks + (t - g->tensors);
        return WLM_OK;
    }
    /* F32 rows are read as float*, block types through 16-bit fields. */
    const uintptr_t align = t->type == WLM_TYPE_F32 ? 4 : 2;
    if ((uintptr_t)t->data % align != 0)
        return wlm_set_error(m->errmsg, WLM_ERR_FORMAT,
                             "tensor %s at file offset %zu is not %u-byte aligned (general."
                             "alignment %u, or a misaligned buffer)",
                             name, (size_t)((const unsigned char *)t->data - g->base),
                             (unsigned)align, g->alignment);
    /* A NaN or Inf in a float weight poisons every logit; catch it at load, as llama2c.c does. */
    if (t->type == WLM_TYPE_F32 || t->type == WLM_TYPE_F16 || t->type == WLM_TYPE_BF16) {
        const uint64_t n = t->n_elements;
        const unsigned char *p = t->data;
        for (uint64_t i = 0; i < n; i++) {
            int bad;
            if (t->type == WLM_TYPE_F32) {
                uint32_t u;
                memcpy(&u, p + 4 * i, 4);
                bad = (u & 0x7f800000u) == 0x7f800000u;
            } else {
                uint16_t h;
                memcpy(&h, p + 2 * i, 2);
                const uint16_t e = t->type == WLM_TYPE_F16 ? 0x7c00u : 0x7f80u; /* exponent */
                bad = (h & e) == e;
            }
            if (bad)
                return wlm_set_error(m->errmsg, WLM_ERR_FORMAT,
                                     "corrupt model: tensor %s has a non-finite value (NaN or "
                                     "Inf) at element %llu", name, (unsigned long long)i);
        }
    }
    out->type = t->type;
    out->rows = (int32_t)rows;
    out->cols = (int32_t)cols;
    out->row_bytes = row_bytes;
    out->data = t->data;
    return WLM_OK;
}

/* A matrix `name` of rows × cols (gguf_get_matrices' checks, one matrix). */
int gguf_get_matrix(wlm_model *m, const wlm_gguf *g, const char *name, int64_t rows, int64_t cols,
                    wlm_tensor *out) {
    return gguf_get_matrices(m, g, name, 1, rows, cols, out);
}

/* A (rows × cols) tensor of floats — a norm or bias vector (rows 1), a conv kernel: F32 used in
 * place, F16 converted into *spare (advanced by rows × cols). Other types are refused. GGUF stores
 * vectors with n_dims 1, whose ne[1] reads as 1, so gguf_get_matrix checks them as 1 × cols. */
int gguf_get_floats(wlm_model *m, const wlm_gguf *g, const char *name, int32_t rows, int32_t cols,
                    float **spare, const float **out) {
    wlm_tensor t = {0};
    int rc = gguf_get_matrix(m, g, name, rows, cols, &t);
    if (rc != WLM_OK) return rc;
    if (wlm_gguf_find_tensor(g, name)->external) /* (wlm_gguf_tensor_resident's rule) */
        return wlm_set_error(m->errmsg, WLM_ERR_UNSUPPORTED,
                             "float tensor %s (%d × %d) is held outside the model's memory, where "
                             "it cannot be read as floats", name, (int)rows, (int)cols);
    if (t.type == WLM_TYPE_F32) {
        *out = t.data;
        return WLM_OK;
    }
    if (t.type != WLM_TYPE_F16) {
        char tbuf[48];
        return wlm_set_error(m->errmsg, WLM_ERR_UNSUPPORTED,
                             "%s tensor %s has type %s; only F32 and F16 are supported",
                             rows == 1 ? "vector" : "float", name,
                             gguf_type_desc(t.type, tbuf, sizeof tbuf));
    }
    wlm_type_get(WLM_TYPE_F16)->to_float(t.data, *spare, rows * cols);
    *out = *spare;
    *spare += (size_t)rows * (size_t)cols;
    return WLM_OK;
}

/* A norm (or bias) vector of `dim` weights (gguf_get_floats). */
int gguf_get_norm(wlm_model *m, const wlm_gguf *g, const char *name, int32_t dim, float **spare,
                  const float **out) {
    return gguf_get_floats(m, g, name, 1, dim, spare, out);
}
