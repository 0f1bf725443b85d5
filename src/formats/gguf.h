/*
 * gguf.h — internal: a bounds-checked reader for GGUF v2/v3 files held in a memory buffer.
 * Parsing produces views (nothing in the buffer is copied): the key/values, the tensor infos
 * and a data pointer per tensor. It knows nothing about models; gguf_model.c maps the tensors
 * and keys of an architecture onto a wlm_model, tokenizer/vocab_gguf.c reads the vocabulary.
 *
 * The file format (all integers little-endian; "str" is a u64 byte length then the bytes, no
 * NUL terminator, not necessarily valid UTF-8):
 *
 *     u32  magic         "GGUF" (0x46554747 as a little-endian u32)
 *     u32  version       2 or 3 (v1 used 32-bit counts and is refused: WLM_ERR_UNSUPPORTED)
 *     u64  n_tensors
 *     u64  n_kv
 *     n_kv ×  { str key; u32 value_type; value }
 *              value: the scalar's little-endian bytes (UINT8..FLOAT64, BOOL = one byte 0/1),
 *                     a str (STRING), or an array: u32 element_type, u64 count, count values
 *                     (elements may themselves be arrays: "nested arrays")
 *     n_tensors × { str name; u32 n_dims (1..4); u64 ne[n_dims]; u32 type; u64 offset }
 *              ne[0] is the fastest-varying dimension: for a weight matrix, the number of
 *              columns (input features); ne[1] the rows (output features). type is a ggml type
 *              id (enum wlm_type in quant.h). offset is relative to the data section.
 *     padding to general.alignment (a u32 key; default 32, must be a power of two <= 2^30)
 *     data section: each tensor at its offset, which is a multiple of the alignment.
 *
 * What parsing checks (each failure is a negative wlm_status with a message that names the
 * key or tensor and the byte offset): the magic and version; every count and length against
 * the bytes that remain (so no allocation is ever proportional to a count the file merely
 * claims); value types; that keys and tensor names are unique; general.alignment; n_dims;
 * that ne products do not overflow; for tensors whose type the library knows (quant.h), that
 * ne[0] is a multiple of the block size, that the offset is aligned and that offset + size
 * lies inside the buffer. A tensor of an unknown type id is kept (type holds the id, data is
 * NULL, nbytes 0) so that whoever wants to use it can name it in an error.
 *
 * Lifetime: a wlm_gguf borrows the buffer; every pointer it hands out (strings, arrays, tensor
 * data) points into that buffer or into the wlm_gguf's own tables, and is valid until
 * wlm_gguf_free() or until the buffer goes away, whichever is first. Not thread-safe to parse
 * into one struct from two threads; reading a parsed wlm_gguf is (nothing mutates it).
 */
#ifndef WASMLM_GGUF_H
#define WASMLM_GGUF_H

#include <stddef.h>
#include <stdint.h>

/* GGUF value types (the u32 before every value). */
enum wlm_gguf_type {
    WLM_GGUF_UINT8 = 0,
    WLM_GGUF_INT8 = 1,
    WLM_GGUF_UINT16 = 2,
    WLM_GGUF_INT16 = 3,
    WLM_GGUF_UINT32 = 4,
    WLM_GGUF_INT32 = 5,
    WLM_GGUF_FLOAT32 = 6,
    WLM_GGUF_BOOL = 7,
    WLM_GGUF_STRING = 8,
    WLM_GGUF_ARRAY = 9,
    WLM_GGUF_UINT64 = 10,
    WLM_GGUF_INT64 = 11,
    WLM_GGUF_FLOAT64 = 12,
    WLM_GGUF_TYPE_COUNT = 13
};

#define WLM_GGUF_DEFAULT_ALIGNMENT 32u
#define WLM_GGUF_MAX_DIMS 4
#define WLM_GGUF_MAX_NESTING 8   /* arrays of arrays deeper than this are refused (FORMAT) */

/* A string view into the buffer: `len` bytes at `ptr`, NOT NUL-terminated (print with
 * "%.*s", (int)len, ptr after bounding len). ptr is never NULL for a parsed string. */
typedef struct wlm_gguf_str {
    const char *ptr;
    size_t len;
} wlm_gguf_str;

/* One key/value. Scalars: `value` points at the value's little-endian bytes in the buffer
 * (read them with the accessors below, not by casting: they may be unaligned). Strings: `str`.
 * Arrays: `arr`. */
typedef struct wlm_gguf_kv {
    wlm_gguf_str key;
    int32_t type;                    /* enum wlm_gguf_type */
    const unsigned char *value;      /* scalar bytes; for STRING the first byte of str */
    wlm_gguf_str str;                /* type == STRING */
    struct {
        int32_t type;                /* element type (ARRAY for nested arrays) */
        uint64_t n;                  /* element count */
        const unsigned char *data;   /* first element's bytes (numeric elements: n × size,
                                        little-endian, possibly unaligned) */
        const size_t *str_off;       /* STRING elements: (n) offset of element i's u64 length
                                        prefix from arr.data (built at parse time, so element
                                        access is O(1)); NULL otherwise */
    } arr;                           /* type == ARRAY */
    size_t file_offset;              /* where the key/value starts in the buffer */
} wlm_gguf_kv;

/* One tensor info with its resolved data. */
typedef struct wlm_gguf_tensor {
    wlm_gguf_str name;
    uint32_t n_dims;                 /* 1..4 */
    int64_t ne[WLM_GGUF_MAX_DIMS];   /* dims beyond n_dims are 1; each >= 0 */
    int32_t type;                    /* ggml type id (enum wlm_type), possibly unknown */
    uint64_t offset;                 /* relative to the data section, as stored */
    uint64_t n_elements;             /* ne[0] × ne[1] × ne[2] × ne[3] (overflow-checked) */
    size_t nbytes;                   /* data size; 0 when the type is unknown */
    const void *data;                /* into the buffer; NULL when the type is unknown or the
                                        tensor is external */
    int external;                    /* WLM_GGUF_MATRICES_EXTERNAL: 1 for a tensor whose bytes
                                        are not in the buffer (see wlm_gguf_parse_ex) */
} wlm_gguf_tensor;

typedef struct wlm_gguf {
    const unsigned char *base;       /* the buffer passed to wlm_gguf_parse */
    size_t size;
    uint32_t version;                /* 2 or 3 */
    uint32_t alignment;              /* general.alignment or 32 */
    size_t n_kv;
    wlm_gguf_kv *kv;                 /* (n_kv) in file order */
    size_t n_tensors;
    wlm_gguf_tensor *tensors;        /* (n_tensors) in file order */
    size_t data_offset;              /* start of the data section in the buffer (aligned) */
    /* private: the lookup indexes, sorted by name (string-array offset tables belong to
       their key/values and are freed with them) */
    const wlm_gguf_kv **kv_sorted_;
    const wlm_gguf_tensor **tensor_sorted_;
} wlm_gguf;

/*
 * Parses `size` bytes at `data` into *g (which need not be initialised; it is overwritten).
 * Returns WLM_OK, or a negative wlm_status with a message in err (errlen bytes; err may be
 * NULL): WLM_ERR_FORMAT (bad magic, bad value or tensor type fields, duplicate names, bad
 * alignment, overflowing shapes, misaligned offsets), WLM_ERR_TRUNCATED (a count, string or
 * tensor reaches past the end of the buffer), WLM_ERR_UNSUPPORTED (version 1 or > 3,
 * big-endian files), WLM_ERR_NOMEM, WLM_ERR_INVALID_ARG (NULL g or data). On error *g is left
 * empty (wlm_gguf_free on it is harmless).
 */
int wlm_gguf_parse(wlm_gguf *g, const void *data, size_t size, char *err, size_t errlen);

/*
 * Flags for wlm_gguf_parse_ex. WLM_GGUF_MATRICES_EXTERNAL: the buffer holds the file's header
 * and, instead of its data section, the "resident area": every tensor of one row (ne[1], ne[2]
 * and ne[3] all 1: norms, biases, RoPE factors) and every F32/F16 tensor of two dimensions
 * whose rows are at most WLM_GGUF_RESIDENT_TAPS long (hybrids' conv kernels, K taps a channel,
 * which the C model reads as floats), and every F32 tensor of two dimensions named *_exps.bias
 * (a mixture of experts' per-expert bias rows, gpt-oss's), and the lookup tables the host
 * gathers rows of (wlm_gguf_tensor_host_lookup: Gemma 4's per_layer_token_embd) in tensor-info
 * order, each at the next multiple
 * of the alignment from the data section's start (the first at data_offset). Every other tensor
 * (the matrices, which another backend holds) is external: data NULL, external 1, its offset
 * and size checked for alignment and overflow but not against the buffer (whoever streams the
 * file checks that it is whole). js/backend/webgpu/stream.js builds such buffers.
 */
#define WLM_GGUF_MATRICES_EXTERNAL 1u
#define WLM_GGUF_RESIDENT_TAPS 16 /* (js/backend/webgpu/stream.js has the same rule) */

/* wlm_gguf_parse with flags (above); wlm_gguf_parse is flags 0. */
int wlm_gguf_parse_ex(wlm_gguf *g, const void *data, size_t size, unsigned flags, char *err,
                      size_t errlen);

/* 1 when t stays in the buffer under WLM_GGUF_MATRICES_EXTERNAL (a vector, a conv kernel, expert
 * biases). */
int wlm_gguf_tensor_resident(const wlm_gguf_tensor *t);

/* 1 when t is a lookup table that stays in the buffer under WLM_GGUF_MATRICES_EXTERNAL too,
 * though it is a matrix: Gemma 4's per_layer_token_embd.weight (vocabulary × n_layer · P, ~2.5 GB
 * at 8 bits in E2B, past most GPUs' binding limit; as llama.cpp, the host gathers the rows of a
 * pass's tokens, js/backend/webgpu/per_layer.js). Not a vector: never converted to floats. */
int wlm_gguf_tensor_host_lookup(const wlm_gguf_tensor *t);

/* Frees the tables of *g (not the buffer) and zeroes it. NULL and empty structs are fine. */
void wlm_gguf_free(wlm_gguf *g);

/* Name of a value type ("UINT32", "STRING", ...; "?" when out of range). */
const char *wlm_gguf_type_name(int32_t type);

/* Size in bytes of one value of a fixed-size type; 0 for STRING, ARRAY and bad ids. */
size_t wlm_gguf_type_size(int32_t type);

/* ---- key/values ------------------------------------------------------------------------- */

/* The key/value with this exact key (NUL-terminated), or NULL. O(log n_kv). */
const wlm_gguf_kv *wlm_gguf_find_kv(const wlm_gguf *g, const char *key);

/*
 * Typed getters. Each returns WLM_OK and sets *out, or WLM_ERR_FORMAT with a message in err
 * (may be NULL) naming the key: when the key is missing, or its value has another type or
 * does not fit. For optional keys test wlm_gguf_find_kv() first (or use the _or forms).
 *   u32 / i32: any integer type whose value is in range (bool is not an integer here).
 *   f32:       FLOAT32 or FLOAT64 (a finite double that fits, rounded to float).
 *   bool:      BOOL (the stored byte must be 0 or 1).
 *   str:       STRING; a view into the buffer, see wlm_gguf_str.
 */
int wlm_gguf_get_u32(const wlm_gguf *g, const char *key, uint32_t *out, char *err, size_t errlen);
int wlm_gguf_get_i32(const wlm_gguf *g, const char *key, int32_t *out, char *err, size_t errlen);
int wlm_gguf_get_f32(const wlm_gguf *g, const char *key, float *out, char *err, size_t errlen);
int wlm_gguf_get_bool(const wlm_gguf *g, const char *key, int *out, char *err, size_t errlen);
int wlm_gguf_get_str(const wlm_gguf *g, const char *key, wlm_gguf_str *out, char *err,
                     size_t errlen);

/* The same, but a missing key is not an error: *out = def and WLM_OK. A present key with the
 * wrong type still fails. */
int wlm_gguf_get_u32_or(const wlm_gguf *g, const char *key, uint32_t def, uint32_t *out,
                        char *err, size_t errlen);
int wlm_gguf_get_i32_or(const wlm_gguf *g, const char *key, int32_t def, int32_t *out,
                        char *err, size_t errlen);
int wlm_gguf_get_f32_or(const wlm_gguf *g, const char *key, float def, float *out, char *err,
                        size_t errlen);
int wlm_gguf_get_bool_or(const wlm_gguf *g, const char *key, int def, int *out, char *err,
                         size_t errlen);

/* A key/value's scalar as int64 (any integer type; UINT64 above INT64_MAX fails) or as double
 * (FLOAT32, FLOAT64, or any integer type). WLM_OK or WLM_ERR_FORMAT (no message). */
int wlm_gguf_kv_i64(const wlm_gguf_kv *kv, int64_t *out);
int wlm_gguf_kv_f64(const wlm_gguf_kv *kv, double *out);

/*
 * Arrays. wlm_gguf_get_arr finds `key`, checks it is an array and, unless elem_type is -1,
 * that its elements have type elem_type; *out is the key/value (use kv->arr.n for the count).
 * WLM_OK, or WLM_ERR_FORMAT with a message naming the key.
 */
int wlm_gguf_get_arr(const wlm_gguf *g, const char *key, int32_t elem_type,
                     const wlm_gguf_kv **out, char *err, size_t errlen);

/* Element i of an array, O(1). Return WLM_OK, or WLM_ERR_INVALID_ARG when kv is not an array,
 * i >= n, or the element type does not convert (no message; the caller knows the key):
 *   arr_i64: integer elements (UINT64 above INT64_MAX fails) and BOOL (0/1).
 *   arr_f64: FLOAT32/FLOAT64 and integer elements.
 *   arr_str: STRING elements, as a view into the buffer.
 * Elements of nested arrays are not accessible (parsing only validates them). */
int wlm_gguf_arr_i64(const wlm_gguf_kv *kv, uint64_t i, int64_t *out);
int wlm_gguf_arr_f64(const wlm_gguf_kv *kv, uint64_t i, double *out);
int wlm_gguf_arr_str(const wlm_gguf_kv *kv, uint64_t i, wlm_gguf_str *out);

/* ---- tensors ---------------------------------------------------------------------------- */

/* The tensor with this exact name (NUL-terminated), or NULL. O(log n_tensors). */
const wlm_gguf_tensor *wlm_gguf_find_tensor(const wlm_gguf *g, const char *name);

/* 1 when the view equals the NUL-terminated string s. */
int wlm_gguf_str_eq(wlm_gguf_str a, const char *s);

#endif
