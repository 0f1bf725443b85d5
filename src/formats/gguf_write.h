/*
 * gguf_write.h — internal: a small GGUF v3 writer, to a FILE* (streamed) or to a growing
 * memory buffer. It knows the container only (gguf.h describes the format field by field);
 * quantize.c decides which keys and tensors a model gets.
 *
 * Use, in this order:
 *
 *     wlm_gguf_writer w;
 *     wlm_gguf_writer_init(&w, f);                  // f == NULL: into memory
 *     wlm_gguf_add_str(&w, "general.architecture", "llama");
 *     wlm_gguf_add_u32(&w, "llama.block_count", 5); // ... every key/value
 *     wlm_gguf_add_tensor(&w, "token_embd.weight", 2, ne, WLM_TYPE_Q8_0); // ... every tensor
 *     wlm_gguf_write_header(&w);                    // header, key/values, tensor infos, padding
 *     wlm_gguf_write_data(&w, bytes, n);            // tensor data in the order of add_tensor,
 *                                                   // in pieces of any size
 *     rc = wlm_gguf_writer_finish(&w);              // every tensor complete? flush
 *     buf = wlm_gguf_writer_take(&w, &size);        // memory mode only: the file's bytes
 *     wlm_gguf_writer_free(&w);
 *
 * Key/values and tensor infos are staged in memory (small: a 32000-token vocabulary is under
 * 1 MB) until write_header; tensor data goes straight to the sink, so a file of any size is
 * written without holding its weights. Each tensor starts at a multiple of the alignment (32,
 * or the value of a general.alignment key added before write_header: a power of two), and the
 * data after each tensor is zero-padded to the next multiple, the last one included.
 *
 * Errors are sticky: the first failure (bad argument, duplicate key or tensor name, out of
 * memory, short write) is remembered with a message, and every later call returns the same
 * status without doing anything — so a caller may check only finish(). Status values are
 * wlm_status codes; the message is wlm_gguf_writer_errmsg(). A failed fwrite/fflush (disk
 * full) is WLM_ERR_INVALID_ARG with a message saying so: wlm_status has no I/O code.
 *
 * Byte order: the writer emits little-endian metadata on any host; tensor data is copied as
 * given (ggml's block layouts are little-endian, as every host this library runs on).
 * Keys are non-empty, at most 65535 bytes; tensor names 1..63 bytes (ggml's GGML_MAX_NAME).
 * Strings are written as given (GGUF expects UTF-8; the writer does not check).
 */
#ifndef WASMLM_GGUF_WRITE_H
#define WASMLM_GGUF_WRITE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "formats/gguf.h"

#define WLM_GGUF_MAX_KEY 65535
#define WLM_GGUF_MAX_TENSOR_NAME 63

/* A growing byte buffer (the staged metadata, or the memory sink). */
typedef struct wlm_gguf_wbuf {
    unsigned char *p;
    size_t len, cap;
} wlm_gguf_wbuf;

typedef struct wlm_gguf_wtensor {
    char name[WLM_GGUF_MAX_TENSOR_NAME + 1];
    uint32_t n_dims;
    int64_t ne[WLM_GGUF_MAX_DIMS];
    int32_t type;
    uint64_t nbytes;     /* data bytes, without padding */
    uint64_t offset;     /* from the start of the data section */
} wlm_gguf_wtensor;

typedef struct wlm_gguf_writer {
    FILE *file;                  /* the sink, or NULL: `mem` */
    wlm_gguf_wbuf mem;
    uint64_t written;            /* bytes sent to the sink */
    wlm_gguf_wbuf kv;            /* staged key/values, serialized */
    uint64_t n_kv;
    size_t *key_at;              /* (n_kv) offset in kv of each key's length prefix */
    size_t key_cap;
    wlm_gguf_wtensor *tensors;   /* (n_tensors) */
    size_t n_tensors, tensor_cap;
    uint32_t alignment;
    uint64_t data_bytes;         /* size of the data section, padding included */
    int phase;                   /* 0 adding metadata, 1 writing data, 2 finished */
    size_t cur;                  /* tensor receiving data */
    uint64_t cur_done;           /* its bytes received so far */
    int status;                  /* first error, sticky; WLM_OK while fine */
    char err[256];
} wlm_gguf_writer;

/* Prepares *w to write to `f` (opened for binary writing; the writer never closes it), or to
 * memory when f is NULL. Cannot fail. */
void wlm_gguf_writer_init(wlm_gguf_writer *w, FILE *f);

/* Frees the writer's buffers (also the memory sink's, unless taken). NULL is fine. */
void wlm_gguf_writer_free(wlm_gguf_writer *w);

/* The first error's message, "" when none. */
const char *wlm_gguf_writer_errmsg(const wlm_gguf_writer *w);

/* ---- key/values (before write_header) ----------------------------------------------------- */

int wlm_gguf_add_u32(wlm_gguf_writer *w, const char *key, uint32_t v);
int wlm_gguf_add_i32(wlm_gguf_writer *w, const char *key, int32_t v);
int wlm_gguf_add_u64(wlm_gguf_writer *w, const char *key, uint64_t v);
int wlm_gguf_add_f32(wlm_gguf_writer *w, const char *key, float v);
int wlm_gguf_add_bool(wlm_gguf_writer *w, const char *key, int v);
int wlm_gguf_add_str(wlm_gguf_writer *w, const char *key, const char *s);   /* NUL-terminated */
int wlm_gguf_add_strn(wlm_gguf_writer *w, const char *key, const char *s, size_t len);

/* A scalar of any fixed-size type (UINT8 .. FLOAT64, BOOL) from a host value of that type. */
int wlm_gguf_add_scalar(wlm_gguf_writer *w, const char *key, int32_t type, const void *v);

/* An array of n fixed-size elements (host values of elem_type, e.g. float for FLOAT32). */
int wlm_gguf_add_arr(wlm_gguf_writer *w, const char *key, int32_t elem_type, const void *data,
                     uint64_t n);

/* An array of n strings: element i is len[i] bytes at s[i]. */
int wlm_gguf_add_arr_str(wlm_gguf_writer *w, const char *key, const char *const *s,
                         const size_t *len, uint64_t n);

/* Copies a key/value of a parsed file (gguf.h) under its own key. Nested arrays are refused
 * (WLM_ERR_UNSUPPORTED): no model key uses them. */
int wlm_gguf_add_kv_copy(wlm_gguf_writer *w, const wlm_gguf_kv *kv);

/* 1 when `key` has been added. */
int wlm_gguf_writer_has_key(const wlm_gguf_writer *w, const char *key);

/* ---- tensors ------------------------------------------------------------------------------ */

/* Declares a tensor: ne[0] (the row length, a multiple of the type's block size) first, as in
 * GGUF; every ne >= 1. Its data must later be written in this order. The type must be one
 * quant.h knows (name != NULL). */
int wlm_gguf_add_tensor(wlm_gguf_writer *w, const char *name, uint32_t n_dims,
                        const int64_t *ne, int32_t type);

/* The size the file will have, from the key/values and tensors added so far (for progress
 * reports and the memory sink's allocation). */
uint64_t wlm_gguf_writer_total_bytes(const wlm_gguf_writer *w);

/* Writes the header, the staged key/values and tensor infos, and the padding to the data
 * section. After it no key or tensor can be added. */
int wlm_gguf_write_header(wlm_gguf_writer *w);

/* Appends n bytes of tensor data: they fill the current tensor, then the next (padding is
 * inserted between tensors). More bytes than the declared tensors hold is WLM_ERR_INVALID_ARG. */
int wlm_gguf_write_data(wlm_gguf_writer *w, const void *data, size_t n);

/* Checks that every tensor received all its bytes, pads the last one and flushes the FILE.
 * Returns WLM_OK or the (first) error. */
int wlm_gguf_writer_finish(wlm_gguf_writer *w);

/* Memory mode, after a successful finish: hands over the malloc'd file bytes (*size of them);
 * the caller frees them. NULL otherwise. */
void *wlm_gguf_writer_take(wlm_gguf_writer *w, size_t *size);

#endif
