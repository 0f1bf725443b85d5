/*
 * gguf_write.c — the GGUF v3 writer (see gguf_write.h): key/values and tensor infos staged in
 * memory, serialized little-endian, then streamed to a FILE* or a growing buffer with the
 * data section aligned. It checks what it is given (names, types, shapes, sizes) but knows
 * nothing about models.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf_write.h"
#include "kernels/quant.h"
#include "wasmlm.h"

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static int fail(wlm_gguf_writer *w, int status, const char *fmt, ...) {
    if (w->status != WLM_OK) return w->status; /* keep the first error */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->err, sizeof w->err, fmt, ap);
    va_end(ap);
    w->status = status;
    return status;
}

void wlm_gguf_writer_init(wlm_gguf_writer *w, FILE *f) {
    memset(w, 0, sizeof *w);
    w->file = f;
    w->alignment = WLM_GGUF_DEFAULT_ALIGNMENT;
}

void wlm_gguf_writer_free(wlm_gguf_writer *w) {
    if (!w) return;
    free(w->mem.p);
    free(w->kv.p);
    free(w->key_at);
    free(w->tensors);
    memset(w, 0, sizeof *w);
}

const char *wlm_gguf_writer_errmsg(const wlm_gguf_writer *w) { return w ? w->err : ""; }

/* ---- byte buffers -------------------------------------------------------------------------- */

/* Makes room for n more bytes in b; 0 when that would overflow or allocation fails. */
static int wbuf_reserve(wlm_gguf_wbuf *b, size_t n) {
    if (n <= b->cap - b->len) return 1;
    if (n > SIZE_MAX - b->len) return 0;
    size_t need = b->len + n, cap = b->cap ? b->cap : 4096;
    while (cap < need) cap = cap <= SIZE_MAX / 2 ? cap * 2 : need;
    unsigned char *p = realloc(b->p, cap);
    if (!p) return 0;
    b->p = p;
    b->cap = cap;
    return 1;
}

static int wbuf_put(wlm_gguf_writer *w, wlm_gguf_wbuf *b, const void *p, size_t n) {
    if (w->status != WLM_OK) return w->status;
    if (!wbuf_reserve(b, n))
        return fail(w, WLM_ERR_NOMEM, "out of memory (GGUF buffer of %zu + %zu bytes)", b->len, n);
    if (n) memcpy(b->p + b->len, p, n);
    b->len += n;
    return WLM_OK;
}

/* Little-endian encodings of 1, 2, 4 or 8 bytes of an unsigned value. */
static int put_le(wlm_gguf_writer *w, wlm_gguf_wbuf *b, uint64_t v, size_t size) {
    unsigned char s[8];
    for (size_t i = 0; i < size; i++) s[i] = (unsigned char)(v >> (8 * i));
    return wbuf_put(w, b, s, size);
}

/* Host value of a fixed-size GGUF type -> its bits, zero-extended. */
static uint64_t host_bits(int32_t type, const void *v) {
    switch (wlm_gguf_type_size(type)) {
    case 1: { uint8_t x; memcpy(&x, v, 1); return x; }
    case 2: { uint16_t x; memcpy(&x, v, 2); return x; }
    case 4: { uint32_t x; memcpy(&x, v, 4); return x; }
    default: { uint64_t x; memcpy(&x, v, 8); return x; }
    }
}

static int put_str(wlm_gguf_writer *w, wlm_gguf_wbuf *b, const char *s, size_t len) {
    int rc = put_le(w, b, (uint64_t)len, 8);
    return rc == WLM_OK ? wbuf_put(w, b, s, len) : rc;
}

/* ---- the sink ------------------------------------------------------------------------------ */

static int emit(wlm_gguf_writer *w, const void *p, size_t n) {
    if (w->status != WLM_OK) return w->status;
    if (w->file) {
        if (n && fwrite(p, 1, n, w->file) != n)
            return fail(w, WLM_ERR_INVALID_ARG, "write failed after %llu bytes (disk full?)",
                        (unsigned long long)w->written);
    } else {
        int rc = wbuf_put(w, &w->mem, p, n);
        if (rc != WLM_OK) return rc;
    }
    w->written += n;
    return WLM_OK;
}

/* Zero bytes up to the next multiple of the alignment (of the bytes written so far). */
static int emit_padding(wlm_gguf_writer *w) {
    static const unsigned char zeros[256];
    uint64_t pad = (w->alignment - w->written % w->alignment) % w->alignment;
    while (pad > 0 && w->status == WLM_OK) {
        size_t n = pad < sizeof zeros ? (size_t)pad : sizeof zeros;
        emit(w, zeros, n);
        pad -= n;
    }
    return w->status;
}

/* ---- key/values ---------------------------------------------------------------------------- */

static int key_eq(const wlm_gguf_writer *w, size_t at, const char *key, size_t len) {
    uint64_t n = 0;
    for (int i = 0; i < 8; i++) n |= (uint64_t)w->kv.p[at + (size_t)i] << (8 * i);
    return n == len && memcmp(w->kv.p + at + 8, key, len) == 0;
}

int wlm_gguf_writer_has_key(const wlm_gguf_writer *w, const char *key) {
    if (!w || !key) return 0;
    size_t len = strlen(key);
    for (uint64_t i = 0; i < w->n_kv; i++)
        if (key_eq(w, w->key_at[i], key, len)) return 1;
    return 0;
}

/* Checks the state and the key, then stages the key and the value type. */
static int begin_kv(wlm_gguf_writer *w, const char *key, int32_t type) {
    if (w->status != WLM_OK) return w->status;
    if (w->phase != 0)
        return fail(w, WLM_ERR_STATE, "key/value %.64s added after the header was written",
                    key ? key : "(null)");
    if (!key || !key[0]) return fail(w, WLM_ERR_INVALID_ARG, "empty or NULL GGUF key");
    size_t len = strlen(key);
    if (len > WLM_GGUF_MAX_KEY)
        return fail(w, WLM_ERR_INVALID_ARG, "GGUF key of %zu bytes (at most %d)", len,
                    WLM_GGUF_MAX_KEY);
    if (wlm_gguf_writer_has_key(w, key))
        return fail(w, WLM_ERR_INVALID_ARG, "duplicate GGUF key %.200s", key);
    if (strcmp(key, "general.alignment") == 0 && type != WLM_GGUF_UINT32)
        return fail(w, WLM_ERR_INVALID_ARG, "general.alignment must be a UINT32, not %s",
                    wlm_gguf_type_name(type));
    if (w->n_kv == w->key_cap) {
        size_t cap = w->key_cap ? 2 * w->key_cap : 64;
        size_t *p = cap <= SIZE_MAX / sizeof *p ? realloc(w->key_at, cap * sizeof *p) : NULL;
        if (!p) return fail(w, WLM_ERR_NOMEM, "out of memory for GGUF keys");
        w->key_at = p;
        w->key_cap = cap;
    }
    size_t at = w->kv.len;
    int rc = put_str(w, &w->kv, key, len);
    if (rc == WLM_OK) rc = put_le(w, &w->kv, (uint32_t)type, 4);
    if (rc != WLM_OK) return rc;
    w->key_at[w->n_kv++] = at;
    return WLM_OK;
}

/* A scalar of a fixed-size type given as its bits (zero-extended). */
static int add_scalar_bits(wlm_gguf_writer *w, const char *key, int32_t type, uint64_t bits) {
    size_t size = wlm_gguf_type_size(type);
    if (w->status != WLM_OK) return w->status;
    if (size == 0)
        return fail(w, WLM_ERR_INVALID_ARG, "key %.200s: %s is not a scalar type", key ? key : "",
                    wlm_gguf_type_name(type));
    if (type == WLM_GGUF_BOOL && bits > 1)
        return fail(w, WLM_ERR_INVALID_ARG, "key %.200s: a BOOL must be 0 or 1", key ? key : "");
    const int alignment = key && strcmp(key, "general.alignment") == 0;
    if (alignment && type == WLM_GGUF_UINT32 &&
        (bits == 0 || (bits & (bits - 1)) != 0 || bits > (1u << 30)))
        return fail(w, WLM_ERR_INVALID_ARG,
                    "general.alignment %llu is not a power of two up to 2^30",
                    (unsigned long long)bits);
    int rc = begin_kv(w, key, type);
    if (rc == WLM_OK) rc = put_le(w, &w->kv, bits, size);
    if (rc == WLM_OK && alignment) w->alignment = (uint32_t)bits;
    return rc;
}

int wlm_gguf_add_scalar(wlm_gguf_writer *w, const char *key, int32_t type, const void *v) {
    if (w->status != WLM_OK) return w->status;
    if (!v || wlm_gguf_type_size(type) == 0)
        return fail(w, WLM_ERR_INVALID_ARG, "key %.200s: %s is not a scalar type", key ? key : "",
                    wlm_gguf_type_name(type));
    return add_scalar_bits(w, key, type, host_bits(type, v));
}

int wlm_gguf_add_u32(wlm_gguf_writer *w, const char *key, uint32_t v) {
    return add_scalar_bits(w, key, WLM_GGUF_UINT32, v);
}
int wlm_gguf_add_i32(wlm_gguf_writer *w, const char *key, int32_t v) {
    return add_scalar_bits(w, key, WLM_GGUF_INT32, (uint32_t)v);
}
int wlm_gguf_add_u64(wlm_gguf_writer *w, const char *key, uint64_t v) {
    return add_scalar_bits(w, key, WLM_GGUF_UINT64, v);
}
int wlm_gguf_add_f32(wlm_gguf_writer *w, const char *key, float v) {
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    return add_scalar_bits(w, key, WLM_GGUF_FLOAT32, bits);
}
int wlm_gguf_add_bool(wlm_gguf_writer *w, const char *key, int v) {
    return add_scalar_bits(w, key, WLM_GGUF_BOOL, v ? 1 : 0);
}

int wlm_gguf_add_strn(wlm_gguf_writer *w, const char *key, const char *s, size_t len) {
    if (w->status != WLM_OK) return w->status;
    if (!s && len) return fail(w, WLM_ERR_INVALID_ARG, "key %.200s: NULL string", key ? key : "");
    int rc = begin_kv(w, key, WLM_GGUF_STRING);
    return rc == WLM_OK ? put_str(w, &w->kv, s ? s : "", len) : rc;
}

int wlm_gguf_add_str(wlm_gguf_writer *w, const char *key, const char *s) {
    return wlm_gguf_add_strn(w, key, s, s ? strlen(s) : 0);
}

int wlm_gguf_add_arr(wlm_gguf_writer *w, const char *key, int32_t elem_type, const void *data,
                     uint64_t n) {
    size_t size = wlm_gguf_type_size(elem_type);
    if (w->status != WLM_OK) return w->status;
    if (size == 0)
        return fail(w, WLM_ERR_INVALID_ARG, "key %.200s: arrays of %s need wlm_gguf_add_arr_str",
                    key ? key : "", wlm_gguf_type_name(elem_type));
    if (!data && n) return fail(w, WLM_ERR_INVALID_ARG, "key %.200s: NULL array", key ? key : "");
    if (n > SIZE_MAX / size)
        return fail(w, WLM_ERR_NOMEM, "key %.200s: array of %llu elements is too large",
                    key ? key : "", (unsigned long long)n);
    int rc = begin_kv(w, key, WLM_GGUF_ARRAY);
    if (rc == WLM_OK) rc = put_le(w, &w->kv, (uint32_t)elem_type, 4);
    if (rc == WLM_OK) rc = put_le(w, &w->kv, n, 8);
    if (rc == WLM_OK && !wbuf_reserve(&w->kv, (size_t)n * size))
        return fail(w, WLM_ERR_NOMEM, "out of memory for the array %.200s", key);
    const unsigned char *p = data;
    for (uint64_t i = 0; i < n && rc == WLM_OK; i++) {
        uint64_t bits = host_bits(elem_type, p + i * size);
        if (elem_type == WLM_GGUF_BOOL && bits > 1)
            return fail(w, WLM_ERR_INVALID_ARG, "key %.200s: BOOL element %llu is not 0 or 1",
                        key, (unsigned long long)i);
        rc = put_le(w, &w->kv, bits, size);
    }
    return rc;
}

int wlm_gguf_add_arr_str(wlm_gguf_writer *w, const char *key, const char *const *s,
                         const size_t *len, uint64_t n) {
    if (w->status != WLM_OK) return w->status;
    if ((!s || !len) && n)
        return fail(w, WLM_ERR_INVALID_ARG, "key %.200s: NULL string array", key ? key : "");
    for (uint64_t i = 0; i < n; i++)
        if (!s[i] && len[i])
            return fail(w, WLM_ERR_INVALID_ARG, "key %.200s: string %llu is NULL",
                        key ? key : "", (unsigned long long)i);
    int rc = begin_kv(w, key, WLM_GGUF_ARRAY);
    if (rc == WLM_OK) rc = put_le(w, &w->kv, WLM_GGUF_STRING, 4);
    if (rc == WLM_OK) rc = put_le(w, &w->kv, n, 8);
    for (uint64_t i = 0; i < n && rc == WLM_OK; i++) rc = put_str(w, &w->kv, s[i] ? s[i] : "", len[i]);
    return rc;
}

int wlm_gguf_add_kv_copy(wlm_gguf_writer *w, const wlm_gguf_kv *kv) {
    if (w->status != WLM_OK) return w->status;
    if (!kv) return fail(w, WLM_ERR_INVALID_ARG, "NULL key/value to copy");
    /* The key is a view without NUL: copy it (bounded by the writer's key limit). */
    if (kv->key.len == 0 || kv->key.len > WLM_GGUF_MAX_KEY || memchr(kv->key.ptr, 0, kv->key.len))
        return fail(w, WLM_ERR_INVALID_ARG, "cannot copy a key/value with an empty, oversized "
                    "or NUL-containing key");
    char *key = malloc(kv->key.len + 1);
    if (!key) return fail(w, WLM_ERR_NOMEM, "out of memory");
    memcpy(key, kv->key.ptr, kv->key.len);
    key[kv->key.len] = '\0';
    int rc;
    if (kv->type == WLM_GGUF_STRING) {
        rc = wlm_gguf_add_strn(w, key, kv->str.ptr, kv->str.len);
    } else if (kv->type != WLM_GGUF_ARRAY) {
        /* The stored bytes are little-endian. */
        size_t size = wlm_gguf_type_size(kv->type);
        uint64_t bits = 0;
        for (size_t i = 0; i < size; i++) bits |= (uint64_t)kv->value[i] << (8 * i);
        rc = size ? add_scalar_bits(w, key, kv->type, bits)
                  : fail(w, WLM_ERR_FORMAT, "key %.200s: bad value type %d", key, (int)kv->type);
    } else if (kv->arr.type == WLM_GGUF_STRING) {
        rc = begin_kv(w, key, WLM_GGUF_ARRAY);
        if (rc == WLM_OK) rc = put_le(w, &w->kv, WLM_GGUF_STRING, 4);
        if (rc == WLM_OK) rc = put_le(w, &w->kv, kv->arr.n, 8);
        for (uint64_t i = 0; i < kv->arr.n && rc == WLM_OK; i++) {
            wlm_gguf_str s;
            if (wlm_gguf_arr_str(kv, i, &s) != WLM_OK) {
                rc = fail(w, WLM_ERR_FORMAT, "key %.200s: cannot read string element %llu", key,
                          (unsigned long long)i);
                break;
            }
            rc = put_str(w, &w->kv, s.ptr, s.len);
        }
    } else if (kv->arr.type == WLM_GGUF_ARRAY) {
        rc = fail(w, WLM_ERR_UNSUPPORTED, "key %.200s: nested arrays are not copied", key);
    } else {
        /* Numeric elements: already little-endian in the buffer, copied as they are. */
        size_t size = wlm_gguf_type_size(kv->arr.type);
        if (size == 0 || kv->arr.n > SIZE_MAX / size) {
            rc = fail(w, WLM_ERR_FORMAT, "key %.200s: bad array", key);
        } else {
            rc = begin_kv(w, key, WLM_GGUF_ARRAY);
            if (rc == WLM_OK) rc = put_le(w, &w->kv, (uint32_t)kv->arr.type, 4);
            if (rc == WLM_OK) rc = put_le(w, &w->kv, kv->arr.n, 8);
            if (rc == WLM_OK) rc = wbuf_put(w, &w->kv, kv->arr.data, (size_t)kv->arr.n * size);
        }
    }
    free(key);
    return rc;
}

/* ---- tensors ------------------------------------------------------------------------------- */

int wlm_gguf_add_tensor(wlm_gguf_writer *w, const char *name, uint32_t n_dims,
                        const int64_t *ne, int32_t type) {
    if (w->status != WLM_OK) return w->status;
    if (w->phase != 0)
        return fail(w, WLM_ERR_STATE, "tensor %.64s added after the header was written",
                    name ? name : "(null)");
    size_t len = name ? strlen(name) : 0;
    if (len == 0 || len > WLM_GGUF_MAX_TENSOR_NAME)
        return fail(w, WLM_ERR_INVALID_ARG, "tensor name of %zu bytes (1..%d)", len,
                    WLM_GGUF_MAX_TENSOR_NAME);
    if (n_dims < 1 || n_dims > WLM_GGUF_MAX_DIMS || !ne)
        return fail(w, WLM_ERR_INVALID_ARG, "tensor %s: %u dimensions (1..%d)", name,
                    (unsigned)n_dims, WLM_GGUF_MAX_DIMS);
    const wlm_type_traits *tr = wlm_type_get(type);
    if (!tr->name) return fail(w, WLM_ERR_INVALID_ARG, "tensor %s: unknown type %d", name, (int)type);
    uint64_t rows = 1;
    for (uint32_t i = 0; i < n_dims; i++) {
        if (ne[i] < 1 || ne[i] > ((int64_t)1 << 40))
            return fail(w, WLM_ERR_INVALID_ARG, "tensor %s: dimension %u is %lld", name,
                        (unsigned)i, (long long)ne[i]);
        if (i > 0) {
            if ((uint64_t)ne[i] > (((uint64_t)1 << 62) / rows))
                return fail(w, WLM_ERR_INVALID_ARG, "tensor %s: too many elements", name);
            rows *= (uint64_t)ne[i];
        }
    }
    size_t row_bytes = wlm_row_bytes(type, ne[0]);
    if (row_bytes == 0)
        return fail(w, WLM_ERR_INVALID_ARG, "tensor %s: a row of %lld elements is not whole %s "
                    "blocks of %d", name, (long long)ne[0], tr->name, (int)tr->block_size);
    if ((uint64_t)row_bytes > (((uint64_t)1 << 62) / rows))
        return fail(w, WLM_ERR_INVALID_ARG, "tensor %s: too many bytes", name);
    for (size_t i = 0; i < w->n_tensors; i++)
        if (strcmp(w->tensors[i].name, name) == 0)
            return fail(w, WLM_ERR_INVALID_ARG, "duplicate tensor name %s", name);
    if (w->n_tensors == w->tensor_cap) {
        size_t cap = w->tensor_cap ? 2 * w->tensor_cap : 64;
        wlm_gguf_wtensor *p =
            cap <= SIZE_MAX / sizeof *p ? realloc(w->tensors, cap * sizeof *p) : NULL;
        if (!p) return fail(w, WLM_ERR_NOMEM, "out of memory for tensor infos");
        w->tensors = p;
        w->tensor_cap = cap;
    }
    wlm_gguf_wtensor *t = &w->tensors[w->n_tensors++];
    memset(t, 0, sizeof *t);
    memcpy(t->name, name, len + 1);
    t->n_dims = n_dims;
    for (int i = 0; i < WLM_GGUF_MAX_DIMS; i++) t->ne[i] = i < (int)n_dims ? ne[i] : 1;
    t->type = type;
    t->nbytes = (uint64_t)row_bytes * rows;
    return WLM_OK;
}

static uint64_t align_up(uint64_t x, uint32_t a) { return (x + a - 1) / a * a; }

/* Bytes of the header, key/values and tensor infos, before padding. */
static uint64_t meta_bytes(const wlm_gguf_writer *w) {
    uint64_t n = 4 + 4 + 8 + 8 + w->kv.len;
    for (size_t i = 0; i < w->n_tensors; i++)
        n += 8 + strlen(w->tensors[i].name) + 4 + 8 * (uint64_t)w->tensors[i].n_dims + 4 + 8;
    return n;
}

uint64_t wlm_gguf_writer_total_bytes(const wlm_gguf_writer *w) {
    uint64_t n = align_up(meta_bytes(w), w->alignment);
    for (size_t i = 0; i < w->n_tensors; i++) n += align_up(w->tensors[i].nbytes, w->alignment);
    return n;
}

int wlm_gguf_write_header(wlm_gguf_writer *w) {
    if (w->status != WLM_OK) return w->status;
    if (w->phase != 0) return fail(w, WLM_ERR_STATE, "the GGUF header was already written");
    /* Offsets, now that the alignment is final. */
    uint64_t off = 0;
    for (size_t i = 0; i < w->n_tensors; i++) {
        w->tensors[i].offset = off;
        off += align_up(w->tensors[i].nbytes, w->alignment);
    }
    w->data_bytes = off;
    if (!w->file) {
        /* Memory sink: one allocation for the whole file, when it fits in size_t. */
        uint64_t total = wlm_gguf_writer_total_bytes(w);
        if (total > SIZE_MAX || !wbuf_reserve(&w->mem, (size_t)total))
            return fail(w, WLM_ERR_NOMEM, "out of memory for a GGUF file of %llu bytes",
                        (unsigned long long)total);
    }
    wlm_gguf_wbuf h = {0};
    put_le(w, &h, 0x46554747u, 4); /* "GGUF" */
    put_le(w, &h, 3, 4);
    put_le(w, &h, (uint64_t)w->n_tensors, 8);
    put_le(w, &h, w->n_kv, 8);
    wbuf_put(w, &h, w->kv.p, w->kv.len);
    for (size_t i = 0; i < w->n_tensors && w->status == WLM_OK; i++) {
        const wlm_gguf_wtensor *t = &w->tensors[i];
        put_str(w, &h, t->name, strlen(t->name));
        put_le(w, &h, t->n_dims, 4);
        for (uint32_t d = 0; d < t->n_dims; d++) put_le(w, &h, (uint64_t)t->ne[d], 8);
        put_le(w, &h, (uint32_t)t->type, 4);
        put_le(w, &h, t->offset, 8);
    }
    emit(w, h.p, h.len);
    free(h.p);
    emit_padding(w);
    w->phase = 1;
    w->cur = 0;
    w->cur_done = 0;
    return w->status;
}

int wlm_gguf_write_data(wlm_gguf_writer *w, const void *data, size_t n) {
    if (w->status != WLM_OK) return w->status;
    if (w->phase != 1)
        return fail(w, WLM_ERR_STATE, "tensor data written %s the header",
                    w->phase == 0 ? "before" : "after finishing");
    if (!data && n) return fail(w, WLM_ERR_INVALID_ARG, "NULL tensor data");
    const unsigned char *p = data;
    while (n > 0) {
        if (w->cur >= w->n_tensors)
            return fail(w, WLM_ERR_INVALID_ARG, "%zu bytes of tensor data beyond the last tensor",
                        n);
        const wlm_gguf_wtensor *t = &w->tensors[w->cur];
        uint64_t left = t->nbytes - w->cur_done;
        size_t take = left < n ? (size_t)left : n;
        if (emit(w, p, take) != WLM_OK) return w->status;
        p += take;
        n -= take;
        w->cur_done += take;
        if (w->cur_done == t->nbytes) {
            if (emit_padding(w) != WLM_OK) return w->status;
            w->cur++;
            w->cur_done = 0;
        }
    }
    return WLM_OK;
}

int wlm_gguf_writer_finish(wlm_gguf_writer *w) {
    if (w->status != WLM_OK) return w->status;
    if (w->phase != 1)
        return fail(w, WLM_ERR_STATE, w->phase == 0 ? "the GGUF header was never written"
                                                    : "the GGUF file was already finished");
    if (w->cur < w->n_tensors)
        return fail(w, WLM_ERR_STATE, "tensor %s received %llu of its %llu bytes",
                    w->tensors[w->cur].name, (unsigned long long)w->cur_done,
                    (unsigned long long)w->tensors[w->cur].nbytes);
    if (w->file && fflush(w->file) != 0)
        return fail(w, WLM_ERR_INVALID_ARG, "write failed at the end (disk full?)");
    w->phase = 2;
    return WLM_OK;
}

void *wlm_gguf_writer_take(wlm_gguf_writer *w, size_t *size) {
    if (size) *size = 0;
    if (!w || w->status != WLM_OK || w->phase != 2 || w->file) return NULL;
    void *p = w->mem.p;
    if (size) *size = w->mem.len;
    memset(&w->mem, 0, sizeof w->mem);
    return p;
}
