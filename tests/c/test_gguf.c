/*
 * test_gguf.c — the GGUF reader (gguf.h) and GGUF "llama" model loading. Real files: the
 * stories260K.gguf model and llama.cpp's vocab-only GGUFs must parse, and stories260K.gguf must
 * give the same logits and greedy text as stories260K.bin. Synthetic files built here: a tiny
 * valid GGUF and llama model, then one corruption at a time (bad magic and version, every
 * truncation, huge counts, lengths past the end, nested arrays, bad alignment, misaligned or
 * out-of-bounds tensors, overflowing shapes, unknown and unsupported types, wrong shapes, NaN
 * weights) — each must be an error with a useful message, never a crash (the sanitizer build
 * runs this file).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "kernels/quant.h"
#include "wasmlm.h"
#include "test_util.h"

#define ERRLEN 256

/* ------------------------------------------------------------------------------------------ */
/* A growable byte buffer and GGUF writers.                                                   */

typedef struct buf {
    unsigned char *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *src, size_t n) {
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n) cap *= 2;
        b->p = (unsigned char *)realloc(b->p, cap);
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void put_u8(buf *b, uint8_t v) { put(b, &v, 1); }
static void put_u32(buf *b, uint32_t v) {
    unsigned char x[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    put(b, x, 4);
}
static void put_u64(buf *b, uint64_t v) {
    put_u32(b, (uint32_t)v);
    put_u32(b, (uint32_t)(v >> 32));
}
static void put_f32(buf *b, float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    put_u32(b, u);
}
static void put_str(buf *b, const char *s) {
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}

/* Key/values go into their own buffer with a counter; gguf_file() assembles the file. */
typedef struct kvs {
    buf b;
    uint64_t n;
} kvs;

static void kv_key(kvs *k, const char *key, uint32_t type) {
    put_str(&k->b, key);
    put_u32(&k->b, type);
    k->n++;
}
static void kv_u32(kvs *k, const char *key, uint32_t v) { kv_key(k, key, WLM_GGUF_UINT32), put_u32(&k->b, v); }
static void kv_i32(kvs *k, const char *key, int32_t v) { kv_key(k, key, WLM_GGUF_INT32), put_u32(&k->b, (uint32_t)v); }
static void kv_u64(kvs *k, const char *key, uint64_t v) { kv_key(k, key, WLM_GGUF_UINT64), put_u64(&k->b, v); }
static void kv_f32(kvs *k, const char *key, float v) { kv_key(k, key, WLM_GGUF_FLOAT32), put_f32(&k->b, v); }
static void kv_f64(kvs *k, const char *key, double v) {
    uint64_t u;
    memcpy(&u, &v, 8);
    kv_key(k, key, WLM_GGUF_FLOAT64), put_u64(&k->b, u);
}
static void kv_bool(kvs *k, const char *key, uint8_t v) { kv_key(k, key, WLM_GGUF_BOOL), put_u8(&k->b, v); }
static void kv_str(kvs *k, const char *key, const char *v) { kv_key(k, key, WLM_GGUF_STRING), put_str(&k->b, v); }

typedef struct tensor_spec {
    const char *name;
    uint32_t n_dims;
    uint64_t ne[4];
    uint32_t type;
    const void *data;     /* nbytes of data (may be NULL: zeros) */
    size_t nbytes;
    int64_t offset;       /* -1: next aligned position; otherwise written as is */
} tensor_spec;

typedef struct file_opts {
    uint32_t version;     /* 0: 3 */
    uint32_t alignment;   /* for placing the data: 0 = 32 (the key is written by the caller) */
} file_opts;

/* Writes a GGUF file: header, the key/values, tensor infos, padding, data. Returns the size. */
static unsigned char *gguf_file(const file_opts *o, const kvs *k, const tensor_spec *t, size_t nt,
                                size_t *size) {
    const uint32_t align = o && o->alignment ? o->alignment : 32;
    buf b = {0};
    put(&b, "GGUF", 4);
    put_u32(&b, o && o->version ? o->version : 3);
    put_u64(&b, nt);
    put_u64(&b, k ? k->n : 0);
    if (k) put(&b, k->b.p, k->b.n);
    uint64_t off = 0;
    uint64_t *offs = (uint64_t *)calloc(nt ? nt : 1, sizeof *offs);
    for (size_t i = 0; i < nt; i++) {
        put_str(&b, t[i].name);
        put_u32(&b, t[i].n_dims);
        for (uint32_t d = 0; d < t[i].n_dims; d++) put_u64(&b, t[i].ne[d]);
        put_u32(&b, t[i].type);
        offs[i] = t[i].offset >= 0 ? (uint64_t)t[i].offset : off;
        put_u64(&b, offs[i]);
        if (t[i].offset < 0) off = (off + t[i].nbytes + align - 1) / align * align;
    }
    if (nt)
        while (b.n % align) put_u8(&b, 0); /* no data section without tensors */
    size_t data_start = b.n;
    for (size_t i = 0; i < nt; i++) {
        if (t[i].offset >= 0) continue;
        while (b.n < data_start + offs[i]) put_u8(&b, 0);
        if (t[i].data) put(&b, t[i].data, t[i].nbytes);
        else
            for (size_t j = 0; j < t[i].nbytes; j++) put_u8(&b, 0);
    }
    free(offs);
    *size = b.n;
    return b.p;
}

static void kvs_free(kvs *k) { free(k->b.p); }

/* Parses an exact-size copy (so ASan sees any overrun) and returns the status; the message
 * goes to err. */
static int parse_copy(const unsigned char *data, size_t size, char *err) {
    unsigned char *copy = tu_dup(data, size);
    wlm_gguf g;
    err[0] = 0;
    int rc = wlm_gguf_parse(&g, copy, size, err, ERRLEN);
    if (rc == WLM_OK) {
        /* touch everything the parse produced */
        for (size_t i = 0; i < g.n_kv; i++) {
            const wlm_gguf_kv *kv = &g.kv[i];
            if (kv->type == WLM_GGUF_ARRAY)
                for (uint64_t j = 0; j < kv->arr.n && j < 4; j++) {
                    wlm_gguf_str s;
                    int64_t v;
                    double d;
                    (void)wlm_gguf_arr_str(kv, j, &s);
                    (void)wlm_gguf_arr_i64(kv, j, &v);
                    (void)wlm_gguf_arr_f64(kv, j, &d);
                }
        }
        volatile unsigned char sink = 0;
        for (size_t i = 0; i < g.n_tensors; i++)
            if (g.tensors[i].data && g.tensors[i].nbytes)
                sink ^= ((const unsigned char *)g.tensors[i].data)[g.tensors[i].nbytes - 1];
        (void)sink;
    }
    wlm_gguf_free(&g);
    free(copy);
    return rc;
}

#define EXPECT_PARSE(data, size, want, needle)                                                \
    do {                                                                                      \
        char e_[ERRLEN];                                                                      \
        int r_ = parse_copy(data, size, e_);                                                  \
        CHECKF(r_ == (want), "got %s (%s), want %s", wlm_status_name(r_), e_,                 \
               wlm_status_name(want));                                                        \
        if ((needle) != NULL)                                                                 \
            CHECKF(strstr(e_, (needle) ? (needle) : "") != NULL,                              \
                   "message \"%s\" lacks \"%s\"", e_, (needle) ? (needle) : "");              \
    } while (0)

/* ------------------------------------------------------------------------------------------ */
/* The reader on hand-made files.                                                             */

static unsigned char *small_valid(size_t *size) {
    kvs k = {0};
    kv_str(&k, "general.architecture", "test");
    kv_u32(&k, "general.alignment", 32);
    kv_key(&k, "tokenizer.ggml.tokens", WLM_GGUF_ARRAY);
    put_u32(&k.b, WLM_GGUF_STRING);
    put_u64(&k.b, 3);
    put_str(&k.b, "a");
    put_str(&k.b, "");
    put_str(&k.b, "hello");
    kv_key(&k, "scores", WLM_GGUF_ARRAY);
    put_u32(&k.b, WLM_GGUF_FLOAT32);
    put_u64(&k.b, 2);
    put_f32(&k.b, 0.5f);
    put_f32(&k.b, -2.0f);
    static const float data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    tensor_spec t[] = {
        {"a", 2, {4, 2, 1, 1}, WLM_TYPE_F32, data, sizeof data, -1},
        {"b", 1, {8, 1, 1, 1}, WLM_TYPE_F16, NULL, 16, -1},
    };
    unsigned char *p = gguf_file(NULL, &k, t, 2, size);
    kvs_free(&k);
    return p;
}

static void test_reader_valid(void) {
    tu_section("reader: a small valid file");
    size_t size;
    unsigned char *p = small_valid(&size);
    wlm_gguf g;
    char err[ERRLEN];
    int rc = wlm_gguf_parse(&g, p, size, err, sizeof err);
    CHECKF(rc == WLM_OK, "%s: %s", wlm_status_name(rc), err);
    if (rc == WLM_OK) {
        CHECK_EQ_INT(g.version, 3);
        CHECK_EQ_INT(g.n_kv, 4);
        CHECK_EQ_INT(g.n_tensors, 2);
        CHECK_EQ_INT(g.alignment, 32);
        CHECK_EQ_INT(g.data_offset % 32, 0);
        wlm_gguf_str s;
        CHECK_STATUS(wlm_gguf_get_str(&g, "general.architecture", &s, err, sizeof err), WLM_OK);
        CHECK(wlm_gguf_str_eq(s, "test"));
        const wlm_gguf_kv *kv = NULL;
        CHECK_STATUS(wlm_gguf_get_arr(&g, "tokenizer.ggml.tokens", WLM_GGUF_STRING, &kv, err, sizeof err), WLM_OK);
        if (kv) {
            CHECK_EQ_INT(kv->arr.n, 3);
            CHECK(wlm_gguf_arr_str(kv, 0, &s) == WLM_OK && wlm_gguf_str_eq(s, "a"));
            CHECK(wlm_gguf_arr_str(kv, 1, &s) == WLM_OK && s.len == 0 && s.ptr != NULL);
            CHECK(wlm_gguf_arr_str(kv, 2, &s) == WLM_OK && wlm_gguf_str_eq(s, "hello"));
            CHECK_STATUS(wlm_gguf_arr_str(kv, 3, &s), WLM_ERR_INVALID_ARG);
            int64_t v;
            CHECK_STATUS(wlm_gguf_arr_i64(kv, 0, &v), WLM_ERR_INVALID_ARG);
        }
        CHECK_STATUS(wlm_gguf_get_arr(&g, "tokenizer.ggml.tokens", WLM_GGUF_FLOAT32, &kv, err, sizeof err), WLM_ERR_FORMAT);
        CHECKF(strstr(err, "tokenizer.ggml.tokens") && strstr(err, "STRING"), "%s", err);
        CHECK_STATUS(wlm_gguf_get_arr(&g, "scores", -1, &kv, err, sizeof err), WLM_OK);
        double d;
        CHECK(wlm_gguf_arr_f64(kv, 0, &d) == WLM_OK && d == 0.5);
        CHECK(wlm_gguf_arr_f64(kv, 1, &d) == WLM_OK && d == -2.0);
        CHECK_STATUS(wlm_gguf_arr_f64(kv, 2, &d), WLM_ERR_INVALID_ARG);
        CHECK_STATUS(wlm_gguf_arr_str(kv, 0, &s), WLM_ERR_INVALID_ARG);
        CHECK_STATUS(wlm_gguf_get_arr(&g, "general.architecture", -1, &kv, err, sizeof err), WLM_ERR_FORMAT);
        CHECK_STATUS(wlm_gguf_get_arr(&g, "nope", -1, &kv, err, sizeof err), WLM_ERR_FORMAT);
        CHECKF(strstr(err, "nope") != NULL, "%s", err);

        const wlm_gguf_tensor *a = wlm_gguf_find_tensor(&g, "a"), *b = wlm_gguf_find_tensor(&g, "b");
        CHECK(a && b && !wlm_gguf_find_tensor(&g, "c") && !wlm_gguf_find_tensor(&g, ""));
        if (a && b) {
            CHECK(a->n_dims == 2 && a->ne[0] == 4 && a->ne[1] == 2 && a->ne[2] == 1 && a->ne[3] == 1);
            CHECK(a->n_elements == 8 && a->nbytes == 32 && a->type == WLM_TYPE_F32);
            CHECK(a->data && ((const float *)a->data)[7] == 8.0f);
            CHECK((const unsigned char *)a->data == p + g.data_offset);
            CHECK(b->n_dims == 1 && b->ne[0] == 8 && b->nbytes == 16 && b->offset == 32);
            CHECK((const unsigned char *)b->data == p + g.data_offset + 32);
        }
        CHECK(wlm_gguf_find_kv(&g, "general.alignment") != NULL);
        CHECK(wlm_gguf_find_kv(&g, "general.alignmen") == NULL);
        CHECK(wlm_gguf_find_kv(&g, "general.alignment2") == NULL);
        CHECK(wlm_gguf_find_kv(NULL, "x") == NULL && wlm_gguf_find_kv(&g, NULL) == NULL);
        wlm_gguf_free(&g);
        wlm_gguf_free(&g); /* a freed struct is empty: freeing again is harmless */
    }
    wlm_gguf_free(NULL);
    CHECK_STATUS(wlm_gguf_parse(NULL, p, size, err, sizeof err), WLM_ERR_INVALID_ARG);
    CHECK_STATUS(wlm_gguf_parse(&g, NULL, size, err, sizeof err), WLM_ERR_INVALID_ARG);
    CHECK_STATUS(wlm_gguf_parse(&g, p, size, NULL, 0), WLM_OK); /* err is optional */
    wlm_gguf_free(&g);

    /* version 2 reads the same */
    p[4] = 2;
    EXPECT_PARSE(p, size, WLM_OK, NULL);
    free(p);
}

static void test_getters(void) {
    tu_section("reader: typed getters");
    kvs k = {0};
    kv_u32(&k, "u32", 4000000000u);
    kv_i32(&k, "neg", -5);
    kv_i32(&k, "i32", 77);
    kv_u64(&k, "u64small", 123);
    kv_u64(&k, "u64big", 0xffffffffffffffffull);
    kv_key(&k, "u8", WLM_GGUF_UINT8), put_u8(&k.b, 200);
    kv_key(&k, "i16", WLM_GGUF_INT16), put_u8(&k.b, 0xfe), put_u8(&k.b, 0xff); /* -2 */
    kv_f32(&k, "f32", 1.5f);
    kv_f64(&k, "f64", 1e-6);
    kv_f64(&k, "f64huge", 1e300);
    kv_bool(&k, "t", 1);
    kv_bool(&k, "bad_bool", 7);
    kv_str(&k, "s", "x");
    kv_key(&k, "bools", WLM_GGUF_ARRAY), put_u32(&k.b, WLM_GGUF_BOOL), put_u64(&k.b, 2),
        put_u8(&k.b, 1), put_u8(&k.b, 0);
    kv_key(&k, "i64s", WLM_GGUF_ARRAY), put_u32(&k.b, WLM_GGUF_INT64), put_u64(&k.b, 1),
        put_u64(&k.b, (uint64_t)-9);
    size_t size;
    unsigned char *p = gguf_file(NULL, &k, NULL, 0, &size);
    kvs_free(&k);
    wlm_gguf g;
    char err[ERRLEN];
    int rc = wlm_gguf_parse(&g, p, size, err, sizeof err);
    CHECKF(rc == WLM_OK, "%s", err);
    if (rc != WLM_OK) {
        free(p);
        return;
    }
    uint32_t u = 0;
    int32_t i = 0;
    float f = 0;
    int b = -1;
    CHECK(wlm_gguf_get_u32(&g, "u32", &u, err, sizeof err) == WLM_OK && u == 4000000000u);
    CHECK_STATUS(wlm_gguf_get_i32(&g, "u32", &i, err, sizeof err), WLM_ERR_FORMAT);
    CHECKF(strstr(err, "u32") && strstr(err, "4000000000"), "%s", err);
    CHECK_STATUS(wlm_gguf_get_u32(&g, "neg", &u, err, sizeof err), WLM_ERR_FORMAT);
    CHECKF(strstr(err, "-5") != NULL, "%s", err);
    CHECK(wlm_gguf_get_i32(&g, "neg", &i, err, sizeof err) == WLM_OK && i == -5);
    CHECK(wlm_gguf_get_u32(&g, "i32", &u, err, sizeof err) == WLM_OK && u == 77);
    CHECK(wlm_gguf_get_u32(&g, "u64small", &u, err, sizeof err) == WLM_OK && u == 123);
    CHECK_STATUS(wlm_gguf_get_u32(&g, "u64big", &u, err, sizeof err), WLM_ERR_FORMAT);
    CHECK(wlm_gguf_get_u32(&g, "u8", &u, err, sizeof err) == WLM_OK && u == 200);
    CHECK(wlm_gguf_get_i32(&g, "i16", &i, err, sizeof err) == WLM_OK && i == -2);
    CHECK_STATUS(wlm_gguf_get_u32(&g, "f32", &u, err, sizeof err), WLM_ERR_FORMAT);
    CHECKF(strstr(err, "FLOAT32") != NULL, "%s", err);
    CHECK_STATUS(wlm_gguf_get_u32(&g, "t", &u, err, sizeof err), WLM_ERR_FORMAT);
    CHECK(wlm_gguf_get_f32(&g, "f32", &f, err, sizeof err) == WLM_OK && f == 1.5f);
    CHECK(wlm_gguf_get_f32(&g, "f64", &f, err, sizeof err) == WLM_OK && f == (float)1e-6);
    CHECK_STATUS(wlm_gguf_get_f32(&g, "f64huge", &f, err, sizeof err), WLM_ERR_FORMAT);
    CHECK_STATUS(wlm_gguf_get_f32(&g, "i32", &f, err, sizeof err), WLM_ERR_FORMAT);
    CHECK(wlm_gguf_get_bool(&g, "t", &b, err, sizeof err) == WLM_OK && b == 1);
    CHECK_STATUS(wlm_gguf_get_bool(&g, "bad_bool", &b, err, sizeof err), WLM_ERR_FORMAT);
    CHECK_STATUS(wlm_gguf_get_bool(&g, "u8", &b, err, sizeof err), WLM_ERR_FORMAT);
    wlm_gguf_str s;
    CHECK(wlm_gguf_get_str(&g, "s", &s, err, sizeof err) == WLM_OK && wlm_gguf_str_eq(s, "x"));
    CHECK_STATUS(wlm_gguf_get_str(&g, "u8", &s, err, sizeof err), WLM_ERR_FORMAT);
    CHECK_STATUS(wlm_gguf_get_u32(&g, "missing", &u, err, sizeof err), WLM_ERR_FORMAT);
    CHECKF(strstr(err, "missing") != NULL, "%s", err);
    CHECK_STATUS(wlm_gguf_get_u32(&g, "missing", &u, NULL, 0), WLM_ERR_FORMAT);
    /* the _or forms: defaults for absent keys only */
    CHECK(wlm_gguf_get_u32_or(&g, "missing", 9, &u, err, sizeof err) == WLM_OK && u == 9);
    CHECK(wlm_gguf_get_i32_or(&g, "missing", -9, &i, err, sizeof err) == WLM_OK && i == -9);
    CHECK(wlm_gguf_get_f32_or(&g, "missing", 2.5f, &f, err, sizeof err) == WLM_OK && f == 2.5f);
    CHECK(wlm_gguf_get_bool_or(&g, "missing", 1, &b, err, sizeof err) == WLM_OK && b == 1);
    CHECK(wlm_gguf_get_u32_or(&g, "i32", 9, &u, err, sizeof err) == WLM_OK && u == 77);
    CHECK_STATUS(wlm_gguf_get_u32_or(&g, "s", 9, &u, err, sizeof err), WLM_ERR_FORMAT);
    /* kv-level conversions */
    int64_t v;
    double d;
    CHECK(wlm_gguf_kv_i64(wlm_gguf_find_kv(&g, "u64small"), &v) == WLM_OK && v == 123);
    CHECK_STATUS(wlm_gguf_kv_i64(wlm_gguf_find_kv(&g, "u64big"), &v), WLM_ERR_FORMAT);
    CHECK(wlm_gguf_kv_f64(wlm_gguf_find_kv(&g, "u64big"), &d) == WLM_OK && d > 1.8e19);
    CHECK(wlm_gguf_kv_f64(wlm_gguf_find_kv(&g, "neg"), &d) == WLM_OK && d == -5.0);
    CHECK_STATUS(wlm_gguf_kv_f64(wlm_gguf_find_kv(&g, "s"), &d), WLM_ERR_FORMAT);
    CHECK_STATUS(wlm_gguf_kv_i64(NULL, &v), WLM_ERR_INVALID_ARG);
    /* arrays of bools and int64 */
    const wlm_gguf_kv *kv = wlm_gguf_find_kv(&g, "bools");
    CHECK(wlm_gguf_arr_i64(kv, 0, &v) == WLM_OK && v == 1);
    CHECK(wlm_gguf_arr_i64(kv, 1, &v) == WLM_OK && v == 0);
    kv = wlm_gguf_find_kv(&g, "i64s");
    CHECK(wlm_gguf_arr_i64(kv, 0, &v) == WLM_OK && v == -9);
    CHECK(wlm_gguf_arr_f64(kv, 0, &d) == WLM_OK && d == -9.0);
    CHECK_STATUS(wlm_gguf_arr_i64(wlm_gguf_find_kv(&g, "u32"), 0, &v), WLM_ERR_INVALID_ARG);
    CHECK(strcmp(wlm_gguf_type_name(WLM_GGUF_FLOAT64), "FLOAT64") == 0);
    CHECK(strcmp(wlm_gguf_type_name(99), "?") == 0 && strcmp(wlm_gguf_type_name(-1), "?") == 0);
    CHECK(wlm_gguf_type_size(WLM_GGUF_UINT16) == 2 && wlm_gguf_type_size(WLM_GGUF_STRING) == 0);
    wlm_gguf_free(&g);
    free(p);
}

/* A file with one key/value whose bytes after the key are `value` (type included). */
static unsigned char *one_kv(const char *key, const buf *value, size_t *size) {
    kvs k = {0};
    put_str(&k.b, key);
    put(&k.b, value->p, value->n);
    k.n = 1;
    unsigned char *p = gguf_file(NULL, &k, NULL, 0, size);
    kvs_free(&k);
    return p;
}

static void test_reader_corrupt(void) {
    tu_section("reader: corrupt headers and key/values");
    size_t size;
    unsigned char *p = small_valid(&size);
    char err[ERRLEN];

    /* magic and version */
    unsigned char *q = tu_dup(p, size);
    q[0] = 'g';
    EXPECT_PARSE(q, size, WLM_ERR_FORMAT, "magic");
    memcpy(q, p, size);
    q[4] = 1;
    EXPECT_PARSE(q, size, WLM_ERR_UNSUPPORTED, "version 1");
    q[4] = 4;
    EXPECT_PARSE(q, size, WLM_ERR_UNSUPPORTED, "version 4");
    q[4] = 0, q[7] = 3;
    EXPECT_PARSE(q, size, WLM_ERR_UNSUPPORTED, "big-endian");
    free(q);
    EXPECT_PARSE((const unsigned char *)"GG", 2, WLM_ERR_TRUNCATED, NULL);
    EXPECT_PARSE((const unsigned char *)"GX", 2, WLM_ERR_FORMAT, NULL);
    EXPECT_PARSE((const unsigned char *)"", 0, WLM_ERR_TRUNCATED, NULL);

    /* every truncation of the whole file is an error, never a crash */
    int all_errors = 1;
    for (size_t n = 0; n < size; n++) {
        int rc = parse_copy(p, n, err);
        if (rc >= 0 || !err[0]) {
            all_errors = 0;
            printf("   prefix %zu: %s \"%s\"\n", n, wlm_status_name(rc), err);
        }
    }
    CHECKF(all_errors, "every prefix of a %zu-byte file must fail with a message", size);

    /* huge counts: refused before any allocation proportional to them */
    q = tu_dup(p, size);
    for (int which = 0; which < 2; which++) {
        static const uint64_t huge[] = {0xffffffffffffffffull, 1ull << 60, 1ull << 31, 100000};
        for (size_t h = 0; h < sizeof huge / sizeof huge[0]; h++) {
            memcpy(q, p, size);
            for (int i = 0; i < 8; i++) q[8 + 8 * which + i] = (unsigned char)(huge[h] >> (8 * i));
            EXPECT_PARSE(q, size, WLM_ERR_TRUNCATED, "announces");
        }
    }
    free(q);
    free(p);

    /* string lengths past the end: in a key, a value, an array element */
    buf v = {0};
    put_u32(&v, WLM_GGUF_STRING);
    put_u64(&v, 1000);
    put(&v, "abc", 3);
    p = one_kv("k", &v, &size);
    EXPECT_PARSE(p, size, WLM_ERR_TRUNCATED, "length 1000");
    free(p);
    v.n = 0;
    put_u32(&v, WLM_GGUF_STRING);
    put_u64(&v, 0xffffffffffffffffull);
    p = one_kv("k", &v, &size);
    EXPECT_PARSE(p, size, WLM_ERR_TRUNCATED, NULL);
    free(p);
    {
        buf f = {0};
        put(&f, "GGUF", 4);
        put_u32(&f, 3);
        put_u64(&f, 0);
        put_u64(&f, 1);
        put_u64(&f, 0xfffffffffffffff0ull); /* key length */
        put(&f, "keykeykeykeykey", 15);
        EXPECT_PARSE(f.p, f.n, WLM_ERR_TRUNCATED, "key");
        free(f.p);
    }
    v.n = 0;
    put_u32(&v, WLM_GGUF_ARRAY);
    put_u32(&v, WLM_GGUF_STRING);
    put_u64(&v, 2);
    put_str(&v, "ok");
    put_u64(&v, 99);
    put(&v, "short", 5);
    p = one_kv("tokens", &v, &size);
    EXPECT_PARSE(p, size, WLM_ERR_TRUNCATED, NULL);
    free(p);

    /* array counts whose byte size overflows or passes the end */
    static const uint32_t elem_types[] = {WLM_GGUF_UINT8, WLM_GGUF_UINT32, WLM_GGUF_FLOAT64,
                                          WLM_GGUF_STRING, WLM_GGUF_ARRAY, WLM_GGUF_BOOL};
    static const uint64_t counts[] = {0xffffffffffffffffull, 1ull << 62, 1ull << 61, 1ull << 32, 1000};
    for (size_t e = 0; e < sizeof elem_types / sizeof elem_types[0]; e++)
        for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
            v.n = 0;
            put_u32(&v, WLM_GGUF_ARRAY);
            put_u32(&v, elem_types[e]);
            put_u64(&v, counts[c]);
            for (int i = 0; i < 16; i++) put_u32(&v, 0); /* a few bytes of "elements" */
            p = one_kv("arr", &v, &size);
            EXPECT_PARSE(p, size, WLM_ERR_TRUNCATED, "arr");
            free(p);
        }

    /* invalid value and element types */
    v.n = 0;
    put_u32(&v, 13);
    put_u32(&v, 0);
    p = one_kv("bad.type", &v, &size);
    EXPECT_PARSE(p, size, WLM_ERR_FORMAT, "bad.type");
    free(p);
    v.n = 0;
    put_u32(&v, 0x80000000u);
    put_u32(&v, 0);
    p = one_kv("bad.type", &v, &size);
    EXPECT_PARSE(p, size, WLM_ERR_FORMAT, "bad.type");
    free(p);
    v.n = 0;
    put_u32(&v, WLM_GGUF_ARRAY);
    put_u32(&v, 77);
    put_u64(&v, 1);
    put_u32(&v, 0);
    p = one_kv("bad.elem", &v, &size);
    EXPECT_PARSE(p, size, WLM_ERR_FORMAT, "bad.elem");
    free(p);

    /* nested arrays: [[1, 2], ["x"], []] parses, elements are not accessible */
    v.n = 0;
    put_u32(&v, WLM_GGUF_ARRAY);
    put_u32(&v, WLM_GGUF_ARRAY);
    put_u64(&v, 3);
    put_u32(&v, WLM_GGUF_INT32), put_u64(&v, 2), put_u32(&v, 1), put_u32(&v, 2);
    put_u32(&v, WLM_GGUF_STRING), put_u64(&v, 1), put_str(&v, "x");
    put_u32(&v, WLM_GGUF_UINT8), put_u64(&v, 0);
    p = one_kv("nested", &v, &size);
    {
        wlm_gguf g;
        int rc = wlm_gguf_parse(&g, p, size, err, sizeof err);
        CHECKF(rc == WLM_OK, "nested: %s", err);
        const wlm_gguf_kv *kv = wlm_gguf_find_kv(&g, "nested");
        CHECK(kv && kv->type == WLM_GGUF_ARRAY && kv->arr.type == WLM_GGUF_ARRAY && kv->arr.n == 3);
        int64_t x;
        wlm_gguf_str s;
        CHECK_STATUS(wlm_gguf_arr_i64(kv, 0, &x), WLM_ERR_INVALID_ARG);
        CHECK_STATUS(wlm_gguf_arr_str(kv, 0, &s), WLM_ERR_INVALID_ARG);
        wlm_gguf_free(&g);
    }
    /* ... every truncation of it fails */
    int all_errors2 = 1;
    for (size_t n = 0; n < size; n++)
        if (parse_copy(p, n, err) >= 0) all_errors2 = 0;
    CHECK(all_errors2);
    free(p);
    /* inner array running past the end */
    v.n = 0;
    put_u32(&v, WLM_GGUF_ARRAY);
    put_u32(&v, WLM_GGUF_ARRAY);
    put_u64(&v, 1);
    put_u32(&v, WLM_GGUF_UINT64), put_u64(&v, 1ull << 61);
    p = one_kv("nested", &v, &size);
    EXPECT_PARSE(p, size, WLM_ERR_TRUNCATED, "nested");
    free(p);
    /* nesting depth: 7 levels parse, 9 do not */
    for (int depth = 7; depth <= 9; depth += 2) {
        v.n = 0;
        put_u32(&v, WLM_GGUF_ARRAY);
        for (int d = 0; d < depth - 1; d++) put_u32(&v, WLM_GGUF_ARRAY), put_u64(&v, 1);
        put_u32(&v, WLM_GGUF_UINT8), put_u64(&v, 1), put_u8(&v, 5);
        p = one_kv("deep", &v, &size);
        EXPECT_PARSE(p, size, depth == 7 ? WLM_OK : WLM_ERR_FORMAT, depth == 7 ? NULL : "nested");
        free(p);
    }
    /* a deep chain of arrays that would blow the stack of a recursive reader without a limit */
    v.n = 0;
    put_u32(&v, WLM_GGUF_ARRAY);
    for (int d = 0; d < 20000; d++) put_u32(&v, WLM_GGUF_ARRAY), put_u64(&v, 1);
    p = one_kv("deep", &v, &size);
    EXPECT_PARSE(p, size, WLM_ERR_FORMAT, "nested");
    free(p);
    free(v.p);

    /* duplicate keys */
    {
        kvs k = {0};
        kv_u32(&k, "a", 1);
        kv_u32(&k, "b", 1);
        kv_str(&k, "a", "again");
        p = gguf_file(NULL, &k, NULL, 0, &size);
        EXPECT_PARSE(p, size, WLM_ERR_FORMAT, "duplicate key a");
        free(p);
        kvs_free(&k);
    }

    /* general.alignment: 0, 3, a string, too large; 64 and 1 work */
    static const uint32_t bad_align[] = {0, 3, 48, 0x80000000u};
    for (size_t i = 0; i < sizeof bad_align / sizeof bad_align[0]; i++) {
        kvs k = {0};
        kv_u32(&k, "general.alignment", bad_align[i]);
        p = gguf_file(NULL, &k, NULL, 0, &size);
        EXPECT_PARSE(p, size, WLM_ERR_FORMAT, "general.alignment");
        free(p);
        kvs_free(&k);
    }
    {
        kvs k = {0};
        kv_str(&k, "general.alignment", "32");
        p = gguf_file(NULL, &k, NULL, 0, &size);
        EXPECT_PARSE(p, size, WLM_ERR_FORMAT, "general.alignment");
        free(p);
        kvs_free(&k);
    }
    for (uint32_t al = 1; al <= 64; al *= 64) {
        kvs k = {0};
        kv_u32(&k, "general.alignment", al);
        static const float data[3] = {1, 2, 3};
        tensor_spec t[] = {{"x", 1, {3, 1, 1, 1}, WLM_TYPE_F32, data, 12, -1},
                           {"y", 1, {1, 1, 1, 1}, WLM_TYPE_F32, data, 4, -1}};
        file_opts o = {3, al};
        p = gguf_file(&o, &k, t, 2, &size);
        wlm_gguf g;
        int rc = wlm_gguf_parse(&g, p, size, err, sizeof err);
        CHECKF(rc == WLM_OK, "alignment %u: %s", al, err);
        if (rc == WLM_OK) {
            CHECK_EQ_INT(g.alignment, al);
            CHECK_EQ_INT(g.data_offset % al, 0);
            const wlm_gguf_tensor *y = wlm_gguf_find_tensor(&g, "y");
            float x2 = 0;
            memcpy(&x2, (const unsigned char *)g.tensors[0].data + 8, 4); /* may be unaligned */
            CHECK(y && y->offset == (al == 1 ? 12u : 64u) && x2 == 3.0f);
        }
        wlm_gguf_free(&g);
        free(p);
        kvs_free(&k);
    }
}

/* Which tensors stay in the buffer under WLM_GGUF_MATRICES_EXTERNAL (js/backend/webgpu/stream.js
 * has the same rule): vectors, short F32/F16 rows (conv kernels), F32 per-expert bias rows. */
static void test_resident_rule(void) {
    tu_section("resident rule (WLM_GGUF_MATRICES_EXTERNAL)");
    static const struct {
        const char *name;
        int64_t ne[4];
        int32_t type;
        int want;
    } cases[] = {
        {"blk.0.attn_norm.weight", {64, 1, 1, 1}, WLM_TYPE_F32, 1},
        {"blk.0.attn_q.weight", {64, 64, 1, 1}, WLM_TYPE_F32, 0},
        {"blk.0.shortconv.conv.weight", {3, 64, 1, 1}, WLM_TYPE_F16, 1},
        {"blk.0.shortconv.conv.weight", {3, 64, 1, 1}, WLM_TYPE_Q8_0, 0},
        {"blk.0.ffn_gate_exps.bias", {64, 6, 1, 1}, WLM_TYPE_F32, 1},
        {"blk.0.ffn_down_exps.bias", {2880, 32, 1, 1}, WLM_TYPE_F32, 1},
        {"blk.0.ffn_gate_exps.bias", {64, 6, 1, 1}, WLM_TYPE_F16, 0}, /* (moe.c reads F32 only) */
        {"blk.0.ffn_gate_exps.bias", {64, 6, 2, 1}, WLM_TYPE_F32, 0},
        {"blk.0.ffn_gate_exps.weight", {64, 32, 6, 1}, WLM_TYPE_F32, 0},
        {"exps.bias", {64, 6, 1, 1}, WLM_TYPE_F32, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        wlm_gguf_tensor t;
        memset(&t, 0, sizeof t);
        t.name.ptr = cases[i].name;
        t.name.len = strlen(cases[i].name);
        memcpy(t.ne, cases[i].ne, sizeof t.ne);
        t.type = cases[i].type;
        CHECKF(wlm_gguf_tensor_resident(&t) == cases[i].want, "%s (type %d, ne1 %lld, ne2 %lld)",
               cases[i].name, (int)cases[i].type, (long long)cases[i].ne[1], (long long)cases[i].ne[2]);
    }
    /* Gemma 4's per-layer embedding table: a matrix the host keeps (wlm_gguf_tensor_host_lookup),
     * not a vector (never converted to floats) */
    static const struct {
        const char *name;
        int64_t ne[4];
        int want;
    } tables[] = {
        {"per_layer_token_embd.weight", {8960, 262144, 1, 1}, 1},
        {"per_layer_token_embd.weight", {8960, 262144, 2, 1}, 0},
        {"per_layer_token_embd.bias", {8960, 1, 1, 1}, 0},
        {"token_embd.weight", {1536, 262144, 1, 1}, 0},
        {"per_layer_token_embd.weightx", {64, 64, 1, 1}, 0},
    };
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
        wlm_gguf_tensor t;
        memset(&t, 0, sizeof t);
        t.name.ptr = tables[i].name;
        t.name.len = strlen(tables[i].name);
        memcpy(t.ne, tables[i].ne, sizeof t.ne);
        t.type = WLM_TYPE_Q8_0;
        CHECKF(wlm_gguf_tensor_host_lookup(&t) == tables[i].want, "host lookup %s (ne2 %lld)",
               tables[i].name, (long long)tables[i].ne[2]);
        CHECKF(!wlm_gguf_tensor_resident(&t) || tables[i].ne[1] == 1, "%s is not a vector", tables[i].name);
    }
}

static void test_reader_tensors(void) {
    tu_section("reader: corrupt tensor infos");
    size_t size;
    unsigned char *p;
    static float data[64];
    for (int i = 0; i < 64; i++) data[i] = (float)i;

    /* misaligned offset, offset and size past the end, offsets that overflow */
    tensor_spec t = {"blk.0.attn_q.weight", 2, {8, 8, 1, 1}, WLM_TYPE_F32, data, 256, 4};
    p = gguf_file(NULL, NULL, &t, 1, &size);
    EXPECT_PARSE(p, size, WLM_ERR_FORMAT, "blk.0.attn_q.weight");
    EXPECT_PARSE(p, size, WLM_ERR_FORMAT, "alignment");
    free(p);
    static const int64_t bad_offsets[] = {1 << 20, 32, 0x7fffffffffffffe0ll};
    for (size_t i = 0; i < sizeof bad_offsets / sizeof bad_offsets[0]; i++) {
        t.offset = bad_offsets[i];
        p = gguf_file(NULL, NULL, &t, 1, &size);
        /* the file holds no data at all: every tensor ends past it */
        EXPECT_PARSE(p, size, WLM_ERR_TRUNCATED, "blk.0.attn_q.weight");
        free(p);
    }
    t.offset = -1;
    p = gguf_file(NULL, NULL, &t, 1, &size);
    EXPECT_PARSE(p, size, WLM_OK, NULL);
    EXPECT_PARSE(p, size - 1, WLM_ERR_TRUNCATED, "blk.0.attn_q.weight");
    free(p);
    /* a tensor that overlaps the end by one element */
    tensor_spec two[2] = {{"a", 1, {64, 1, 1, 1}, WLM_TYPE_F32, data, 256, -1},
                          {"b", 1, {9, 1, 1, 1}, WLM_TYPE_F32, NULL, 32, 224}};
    p = gguf_file(NULL, NULL, two, 2, &size);
    EXPECT_PARSE(p, size, WLM_ERR_TRUNCATED, "tensor b");
    free(p);

    /* n_dims 0 and 5 */
    for (uint32_t nd = 0; nd <= 5; nd += 5) {
        buf f = {0};
        put(&f, "GGUF", 4);
        put_u32(&f, 3);
        put_u64(&f, 1);
        put_u64(&f, 0);
        put_str(&f, "t");
        put_u32(&f, nd);
        for (uint32_t d = 0; d < nd; d++) put_u64(&f, 1);
        put_u32(&f, 0);
        put_u64(&f, 0);
        for (int i = 0; i < 64; i++) put_u8(&f, 0);
        EXPECT_PARSE(f.p, f.n, WLM_ERR_FORMAT, "dimensions");
        free(f.p);
    }

    /* element counts that overflow */
    static const uint64_t ne_bad[][4] = {
        {1ull << 32, 1ull << 32, 1, 1},
        {0xffffffffffffffffull, 1, 1, 1},
        {1ull << 62, 4, 1, 1},
        {1ull << 16, 1ull << 16, 1ull << 16, 1ull << 16},
    };
    for (size_t i = 0; i < sizeof ne_bad / sizeof ne_bad[0]; i++) {
        tensor_spec o = {"big", 4, {ne_bad[i][0], ne_bad[i][1], ne_bad[i][2], ne_bad[i][3]},
                         WLM_TYPE_F32, NULL, 0, 0};
        p = gguf_file(NULL, NULL, &o, 1, &size);
        EXPECT_PARSE(p, size, WLM_ERR_FORMAT, "big");
        free(p);
    }
    /* a product that fits in 64 bits but whose byte size does not fit the file */
    {
        tensor_spec o = {"big", 2, {1ull << 31, 1ull << 30, 1, 1}, WLM_TYPE_F32, NULL, 0, 0};
        p = gguf_file(NULL, NULL, &o, 1, &size);
        EXPECT_PARSE(p, size, WLM_ERR_TRUNCATED, "big");
        free(p);
        o.ne[0] = 1ull << 62, o.ne[1] = 1;
        p = gguf_file(NULL, NULL, &o, 1, &size);
        EXPECT_PARSE(p, size, WLM_ERR_FORMAT, "big"); /* 2^62 floats: bytes overflow */
        free(p);
    }
    /* zero-sized dimension: a valid empty tensor */
    {
        tensor_spec o = {"empty", 2, {0, 5, 1, 1}, WLM_TYPE_F32, NULL, 0, -1};
        p = gguf_file(NULL, NULL, &o, 1, &size);
        EXPECT_PARSE(p, size, WLM_OK, NULL);
        free(p);
    }

    /* a row that is not whole blocks */
    {
        tensor_spec o = {"q", 2, {40, 2, 1, 1}, WLM_TYPE_Q8_0, NULL, 34 * 3, -1};
        p = gguf_file(NULL, NULL, &o, 1, &size);
        EXPECT_PARSE(p, size, WLM_ERR_FORMAT, "block size");
        free(p);
    }
    /* MXFP4 (17-byte blocks of 32): 48 columns are not whole blocks, 64 are */
    {
        tensor_spec o = {"ffn_up", 2, {48, 2, 1, 1}, WLM_TYPE_MXFP4, NULL, 17 * 3, -1};
        p = gguf_file(NULL, NULL, &o, 1, &size);
        EXPECT_PARSE(p, size, WLM_ERR_FORMAT, "ne[0] = 48 is not a multiple of the MXFP4 block size 32");
        free(p);
        tensor_spec ok = {"ffn_up", 2, {64, 2, 1, 1}, WLM_TYPE_MXFP4, NULL, 17 * 4, -1};
        p = gguf_file(NULL, NULL, &ok, 1, &size);
        EXPECT_PARSE(p, size, WLM_OK, NULL);
        free(p);
    }

    /* unknown type ids are kept (the model loader names them); absurd ids are refused */
    {
        tensor_spec o[2] = {{"known", 1, {8, 1, 1, 1}, WLM_TYPE_F32, data, 32, -1},
                            {"weird", 2, {8, 8, 1, 1}, 99, NULL, 0, 0}};
        p = gguf_file(NULL, NULL, o, 2, &size);
        wlm_gguf g;
        char err[ERRLEN];
        int rc = wlm_gguf_parse(&g, p, size, err, sizeof err);
        CHECKF(rc == WLM_OK, "unknown type: %s", err);
        const wlm_gguf_tensor *w = wlm_gguf_find_tensor(&g, "weird");
        CHECK(w && w->type == 99 && w->data == NULL && w->nbytes == 0 && w->n_elements == 64);
        wlm_gguf_free(&g);
        free(p);
        o[1].type = 0x80000001u;
        p = gguf_file(NULL, NULL, o, 2, &size);
        EXPECT_PARSE(p, size, WLM_ERR_FORMAT, "weird");
        free(p);
    }

    /* duplicate tensor names */
    {
        tensor_spec o[2] = {{"same", 1, {8, 1, 1, 1}, WLM_TYPE_F32, data, 32, -1},
                            {"same", 1, {8, 1, 1, 1}, WLM_TYPE_F32, data, 32, -1}};
        p = gguf_file(NULL, NULL, o, 2, &size);
        EXPECT_PARSE(p, size, WLM_ERR_FORMAT, "duplicate tensor name same");
        free(p);
    }
    /* names with control bytes are printed safely */
    {
        tensor_spec o = {"bad\n\x01name", 1, {8, 1, 1, 1}, WLM_TYPE_F32, data, 32, 7};
        p = gguf_file(NULL, NULL, &o, 1, &size);
        char err[ERRLEN];
        int rc = parse_copy(p, size, err);
        CHECK(rc == WLM_ERR_FORMAT && strstr(err, "bad??name") != NULL);
        free(p);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Real files.                                                                                */

static const char *const VOCAB_FILES[] = {
    "ggml-vocab-baichuan.gguf", "ggml-vocab-bert-bge.gguf", "ggml-vocab-deepseek-coder.gguf",
    "ggml-vocab-deepseek-llm.gguf", "ggml-vocab-falcon.gguf", "ggml-vocab-gpt-2.gguf",
    "ggml-vocab-gpt-neox.gguf", "ggml-vocab-llama-spm.gguf", "ggml-vocab-mpt.gguf",
    "ggml-vocab-phi-3.gguf", "ggml-vocab-refact.gguf", "ggml-vocab-starcoder.gguf",
};

static void test_real_files(const unsigned char *model, size_t model_size) {
    tu_section("real files parse");
    char err[ERRLEN];
    wlm_gguf g;
    int rc = wlm_gguf_parse(&g, model, model_size, err, sizeof err);
    CHECKF(rc == WLM_OK, "stories260K.gguf: %s", err);
    if (rc == WLM_OK) {
        printf("   stories260K.gguf: v%u, %zu key/values, %zu tensors, data at %zu\n", g.version,
               g.n_kv, g.n_tensors, g.data_offset);
        CHECK_EQ_INT(g.n_kv, 19);
        CHECK_EQ_INT(g.n_tensors, 48);
        uint32_t u = 0;
        CHECK(wlm_gguf_get_u32(&g, "llama.embedding_length", &u, err, sizeof err) == WLM_OK && u == 64);
        CHECK(wlm_gguf_get_u32(&g, "llama.context_length", &u, err, sizeof err) == WLM_OK && u == 2048);
        const wlm_gguf_kv *tok = NULL;
        CHECK(wlm_gguf_get_arr(&g, "tokenizer.ggml.tokens", WLM_GGUF_STRING, &tok, err, sizeof err) == WLM_OK);
        wlm_gguf_str s;
        CHECK(tok && tok->arr.n == 512 && wlm_gguf_arr_str(tok, 1, &s) == WLM_OK && wlm_gguf_str_eq(s, "<s>"));
        CHECK(tok && wlm_gguf_arr_str(tok, 3, &s) == WLM_OK && wlm_gguf_str_eq(s, "<0x00>"));
        const wlm_gguf_tensor *t = wlm_gguf_find_tensor(&g, "blk.4.ffn_down.weight");
        CHECK(t && t->ne[0] == 172 && t->ne[1] == 64 && t->type == WLM_TYPE_F32 && t->nbytes == 172 * 64 * 4);
        CHECK(t && (const unsigned char *)t->data + t->nbytes <= model + model_size);
        size_t header_end = g.data_offset;
        wlm_gguf_free(&g);

        /* every truncation inside the header and into the first tensor fails cleanly */
        int all_errors = 1;
        for (size_t n = 0; n < header_end + 64 && n < model_size; n++)
            if (parse_copy(model, n, err) >= 0) all_errors = 0;
        CHECKF(all_errors, "a prefix of stories260K.gguf parsed");
    }

    for (size_t i = 0; i < sizeof VOCAB_FILES / sizeof VOCAB_FILES[0]; i++) {
        char rel[128];
        size_t size = 0;
        snprintf(rel, sizeof rel, "models/vocab/%s", VOCAB_FILES[i]);
        unsigned char *p = tu_read_shared(rel, &size);
        if (!p) continue;
        rc = wlm_gguf_parse(&g, p, size, err, sizeof err);
        CHECKF(rc == WLM_OK, "%s: %s", VOCAB_FILES[i], err);
        if (rc == WLM_OK) {
            const wlm_gguf_kv *tok = wlm_gguf_find_kv(&g, "tokenizer.ggml.tokens");
            wlm_gguf_str model_name = {"", 0}, last = {"", 0};
            (void)wlm_gguf_get_str(&g, "tokenizer.ggml.model", &model_name, NULL, 0);
            CHECK(tok && tok->type == WLM_GGUF_ARRAY && tok->arr.type == WLM_GGUF_STRING && tok->arr.n > 1000);
            CHECK(tok && wlm_gguf_arr_str(tok, tok->arr.n - 1, &last) == WLM_OK);
            printf("   %-32s v%u, %2zu key/values, %zu tensors, %llu tokens (%.*s)\n",
                   VOCAB_FILES[i], g.version, g.n_kv, g.n_tensors,
                   (unsigned long long)(tok ? tok->arr.n : 0), (int)model_name.len, model_name.ptr);
            wlm_gguf_free(&g);
        }
        free(p);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Model loading: stories260K.gguf against stories260K.bin.                                   */

static wlm_context *new_ctx(const wlm_model *m, int n_ctx) {
    wlm_context_params cp;
    wlm_context_params_default(&cp);
    cp.n_ctx = n_ctx;
    wlm_context *c = NULL;
    int rc = wlm_context_new(m, &cp, &c);
    CHECKF(rc == WLM_OK, "wlm_context_new: %s", c ? wlm_context_errmsg(c) : "");
    if (rc != WLM_OK) {
        wlm_context_free(c);
        return NULL;
    }
    return c;
}

/* Feeds the same tokens through both models and compares the logits after each: |a - b| <=
 * tol, or with `relative`, <= tol × the largest |b| at that position. */
static void compare_logits_rel(const wlm_model *a, const wlm_model *b, const int32_t *tokens, int n,
                               int vocab, float tol, int relative, const char *what) {
    wlm_context *ca = new_ctx(a, 64), *cb = new_ctx(b, 64);
    if (ca && cb) {
        float worst = 0;
        int worst_pos = -1;
        for (int pos = 0; pos < n; pos++) {
            CHECK_STATUS(wlm_eval(ca, &tokens[pos], 1), WLM_OK);
            CHECK_STATUS(wlm_eval(cb, &tokens[pos], 1), WLM_OK);
            const float *la = wlm_logits(ca), *lb = wlm_logits(cb);
            if (!la || !lb) break;
            float scale = 0;
            for (int i = 0; i < vocab; i++) scale = fmaxf(scale, fabsf(lb[i]));
            if (!relative || scale == 0) scale = 1;
            for (int i = 0; i < vocab; i++) {
                float d = fabsf(la[i] - lb[i]) / scale;
                if (!(d <= worst)) worst = d, worst_pos = pos;
            }
        }
        CHECKF(worst <= tol, "%s: logits differ by %g%s at position %d", what, (double)worst,
               relative ? " (relative to the largest)" : "", worst_pos);
        printf("   %s: max |logit difference| %.3g%s over %d positions\n", what, (double)worst,
               relative ? " of the largest logit" : "", n);
    }
    wlm_context_free(ca);
    wlm_context_free(cb);
}

static void compare_logits(const wlm_model *a, const wlm_model *b, const int32_t *tokens, int n,
                           int vocab, float tol, const char *what) {
    compare_logits_rel(a, b, tokens, n, vocab, tol, 0, what);
}

static void test_stories_gguf(const unsigned char *gguf, size_t gguf_size) {
    tu_section("stories260K.gguf as a model");
    size_t bin_size = 0, tok_size = 0, ref_size = 0;
    unsigned char *bin = tu_read_shared("models/stories260K.bin", &bin_size);
    unsigned char *tok = tu_read_shared("models/tok512.bin", &tok_size);
    unsigned char *ref = tu_read_shared("reference/stories260K_run.c_greedy_OnceUponATime_404.txt", &ref_size);
    if (!bin || !tok || !ref) {
        free(bin), free(tok), free(ref);
        return;
    }
    wlm_model *mg = NULL, *mb = NULL;
    int rc = wlm_model_load(gguf, gguf_size, 0, &mg);
    CHECKF(rc == WLM_OK, "load stories260K.gguf: %s %s", wlm_status_name(rc), wlm_model_errmsg(mg));
    CHECK_STATUS(wlm_model_load(bin, bin_size, 0, &mb), WLM_OK);
    if (rc != WLM_OK) goto done;
    CHECK_STATUS(wlm_model_load_tokenizer(mb, tok, tok_size), WLM_OK);

    wlm_model_info ig, ib;
    CHECK_STATUS(wlm_model_get_info(mg, &ig), WLM_OK);
    CHECK_STATUS(wlm_model_get_info(mb, &ib), WLM_OK);
    CHECK(ig.dim == 64 && ig.hidden_dim == 172 && ig.n_layers == 5 && ig.n_heads == 8 &&
          ig.n_kv_heads == 4 && ig.vocab_size == 512);
    CHECK_EQ_INT(ig.seq_len, 2048);
    CHECK_EQ_INT(ig.shared_classifier, 0); /* the converter wrote output.weight */
    /* the same matrices as the .bin, plus the separate classifier instead of the shared one */
    CHECKF(ig.weight_bytes == ib.weight_bytes + 64 * 4, "weight_bytes %zu vs .bin %zu",
           ig.weight_bytes, ib.weight_bytes);
    /* the vocabulary came with the file: no tokenizer.bin needed, none accepted */
    CHECK_EQ_INT(ig.has_tokenizer, 1);
    CHECK(ig.bos_id == 1 && ig.eos_id == 2);
    CHECK_STATUS(wlm_model_load_tokenizer(mg, tok, tok_size), WLM_ERR_STATE);

    /* logits, position by position, over a prompt and a greedy continuation */
    int32_t ids[48];
    int n = wlm_tokenize(mb, "Once upon a time", 16, 1, ids, 48);
    CHECK_EQ_INT(n, 5);
    int32_t idg[8];
    CHECK_EQ_INT(wlm_tokenize(mg, "Once upon a time", 16, 1, idg, 8), 5);
    CHECK(memcmp(ids, idg, 5 * sizeof(int32_t)) == 0);
    {
        wlm_context *c = new_ctx(mb, 64);
        if (c) {
            CHECK_STATUS(wlm_eval(c, ids, n), WLM_OK);
            while (n < 40) {
                const float *l = wlm_logits(c);
                int best = 0;
                for (int i = 1; i < 512; i++)
                    if (l[i] > l[best]) best = i;
                ids[n++] = best;
                CHECK_STATUS(wlm_eval(c, &ids[n - 1], 1), WLM_OK);
            }
            wlm_context_free(c);
        }
    }
    compare_logits(mg, mb, ids, n, 512, 1e-5f, "GGUF vs .bin");

    /* greedy generation: run.c's text byte for byte */
    {
        wlm_context *c = new_ctx(mg, 0);
        wlm_gen_params gp;
        wlm_gen_params_default(&gp);
        gp.temperature = 0.0f;
        gp.max_tokens = 404 - 5;
        static char text[8192];
        size_t len = 0;
        if (c && wlm_generate_begin_text(c, "Once upon a time", &gp) == WLM_OK) {
            wlm_token t;
            memcpy(text, "Once upon a time", 16);
            len = 16;
            while ((rc = wlm_generate_next(c, &t)) == WLM_OK)
                if (len + t.piece_len < sizeof text) memcpy(text + len, t.piece, t.piece_len), len += t.piece_len;
            CHECK_STATUS(rc, WLM_DONE);
            /* run.c prints a final newline */
            CHECKF(len + 1 == ref_size && memcmp(text, ref, len) == 0,
                   "greedy text from stories260K.gguf differs from run.c's (%zu vs %zu bytes): "
                   "\"%.80s\"", len + 1, ref_size, text);
            printf("   greedy \"Once upon a time\": %zu bytes, %s run.c's\n", len,
                   len + 1 == ref_size && memcmp(text, ref, len) == 0 ? "identical to" : "DIFFERENT from");
        } else {
            CHECKF(0, "generation did not begin: %s", c ? wlm_context_errmsg(c) : "");
        }
        wlm_context_free(c);
    }

    /* an owned copy, freed with the model; a misaligned buffer is refused */
    {
        wlm_model *m = NULL;
        CHECK_STATUS(wlm_model_load(tu_dup(gguf, gguf_size), gguf_size, WLM_LOAD_OWN_BUFFER, &m), WLM_OK);
        wlm_model_free(m);
        unsigned char *mis = (unsigned char *)malloc(gguf_size + 1);
        memcpy(mis + 1, gguf, gguf_size);
        m = NULL;
        CHECK_STATUS(wlm_model_load(mis + 1, gguf_size, 0, &m), WLM_ERR_INVALID_ARG);
        wlm_model_free(m);
        free(mis);
    }
done:
    wlm_model_free(mg);
    wlm_model_free(mb);
    free(bin), free(tok), free(ref);
}

static void test_vocab_only(const unsigned char *gguf, size_t gguf_size) {
    tu_section("WLM_LOAD_VOCAB_ONLY");
    size_t size = 0;
    unsigned char *p = tu_read_shared("models/vocab/ggml-vocab-llama-spm.gguf", &size);
    wlm_model *m = NULL;
    if (p) {
        /* without the flag: not a model (no architecture weights) */
        int rc = wlm_model_load(p, size, 0, &m);
        CHECKF(rc == WLM_ERR_FORMAT || rc == WLM_ERR_UNSUPPORTED, "%s", wlm_model_errmsg(m));
        wlm_model_free(m);
        m = NULL;
        rc = wlm_model_load(p, size, WLM_LOAD_VOCAB_ONLY, &m);
        {
            CHECKF(rc == WLM_OK, "vocab-only llama-spm: %s %s", wlm_status_name(rc), wlm_model_errmsg(m));
            wlm_model_info info;
            CHECK_STATUS(wlm_model_get_info(m, &info), WLM_OK);
            CHECK(info.vocab_size == 32000 && info.has_tokenizer == 1 && info.dim == 0 && info.n_layers == 0);
            int32_t ids[16];
            int n = wlm_tokenize(m, "Hello world", 11, 0, ids, 16);
            CHECKF(n > 0, "tokenize: %d", n);
            /* no weights: a context cannot evaluate anything */
            wlm_context *c = NULL;
            wlm_context_params cp;
            wlm_context_params_default(&cp);
            rc = wlm_context_new(m, &cp, &c);
            if (rc == WLM_OK) {
                int32_t one = 1;
                CHECK(wlm_eval(c, &one, 1) < 0);
            }
            wlm_context_free(c);
        }
        wlm_model_free(m);
        free(p);
    }
    /* every vocab file: SentencePiece ("llama"), byte-level BPE ("gpt2") and WordPiece ("bert")
     * vocabularies load, any other would be refused */
    for (size_t i = 0; i < sizeof VOCAB_FILES / sizeof VOCAB_FILES[0]; i++) {
        char rel[128];
        snprintf(rel, sizeof rel, "models/vocab/%s", VOCAB_FILES[i]);
        p = tu_read_shared(rel, &size);
        if (!p) continue;
        wlm_gguf g;
        wlm_gguf_str kind = {"", 0};
        int is_spm = 0; /* a supported tokenizer model */
        if (wlm_gguf_parse(&g, p, size, NULL, 0) == WLM_OK) {
            is_spm = wlm_gguf_get_str(&g, "tokenizer.ggml.model", &kind, NULL, 0) == WLM_OK &&
                     (wlm_gguf_str_eq(kind, "llama") || wlm_gguf_str_eq(kind, "gpt2") ||
                      wlm_gguf_str_eq(kind, "bert"));
            wlm_gguf_free(&g);
        }
        m = NULL;
        int rc = wlm_model_load(p, size, WLM_LOAD_VOCAB_ONLY, &m);
        CHECKF(is_spm ? rc == WLM_OK : rc == WLM_ERR_UNSUPPORTED, "%s: %s %s", VOCAB_FILES[i],
               wlm_status_name(rc), wlm_model_errmsg(m));
        wlm_model_free(m);
        free(p);
    }

    /* a llama2.c file cannot be loaded vocab-only; the stories GGUF can */
    size_t bsize = 0;
    unsigned char *bin = tu_read_shared("models/stories260K.bin", &bsize);
    if (bin) {
        m = NULL;
        CHECK_STATUS(wlm_model_load(bin, bsize, WLM_LOAD_VOCAB_ONLY, &m), WLM_ERR_UNSUPPORTED);
        wlm_model_free(m);
        free(bin);
    }
    m = NULL;
    int rc = wlm_model_load(gguf, gguf_size, WLM_LOAD_VOCAB_ONLY, &m);
    CHECKF(rc == WLM_OK, "%s", wlm_model_errmsg(m));
    wlm_model_info info;
    if (rc == WLM_OK && wlm_model_get_info(m, &info) == WLM_OK)
        CHECK(info.vocab_size == 512 && info.has_tokenizer && info.n_layers == 0 && info.weight_bytes == 0);
    wlm_model_free(m);
    m = NULL;
    CHECK_STATUS(wlm_model_load(gguf, gguf_size, 8u, &m), WLM_ERR_INVALID_ARG);
    wlm_model_free(m);
}

/* ------------------------------------------------------------------------------------------ */
/* A synthetic llama model, for the loader's checks.                                          */

enum { SD = 32, SH = 64, SL = 2, SNH = 4, SNKV = 2, SV = 40, SKV = SD / SNH * SNKV };

typedef struct synth_opts {
    int dim;                    /* 0: SD */
    const char *arch;           /* NULL: "llama" */
    uint32_t mat_type;          /* F32 or F16 for every matrix */
    uint32_t norm_type;         /* F32 or F16 */
    int with_output;            /* separate output.weight */
    const char *retype;         /* this tensor gets type retype_id (data left as zeros) */
    uint32_t retype_id;
    const char *omit;           /* leave this tensor out */
    const char *reshape;        /* give this tensor one more row */
    const char *nan_in;         /* put a NaN into this tensor */
    int rope_dims;              /* 0: key absent; else written */
    int bad_eps;                /* write a string for the epsilon */
    const char *extra_key;      /* write this key (u32 2) */
    int hidden;                 /* 0: SH */
    uint32_t quant;             /* nonzero: every matrix in this block type (0 = off; F32 is 0) */
    int mixed;                  /* matrices cycle through every supported type */
    int dequant;                /* store F32 values as they read back from `quant`/`mixed` */
    float rope_scaling;         /* nonzero: llama.rope.scaling.type "linear" with this factor */
    int rope_freqs;             /* add a rope_freqs.weight tensor (Llama 3.1) */
} synth_opts;

static const uint32_t MIXED_TYPES[] = {WLM_TYPE_Q4_K, WLM_TYPE_Q6_K, WLM_TYPE_Q8_0, WLM_TYPE_Q4_0,
                                       WLM_TYPE_F16,  WLM_TYPE_F32,  WLM_TYPE_BF16, WLM_TYPE_Q4_1,
                                       WLM_TYPE_Q5_0, WLM_TYPE_Q5_1, WLM_TYPE_Q2_K, WLM_TYPE_Q3_K,
                                       WLM_TYPE_Q5_K};

static const char *const LAYER_MATS[] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_down", "ffn_up"};

static unsigned char *synth_model(const synth_opts *o, size_t *size) {
    const uint64_t D = o->dim ? (uint64_t)o->dim : SD, KV = D / SNH * SNKV;
    const uint64_t HID = o->hidden ? (uint64_t)o->hidden : SH;
    int mat_index = 0;
    kvs k = {0};
    kv_str(&k, "general.architecture", o->arch ? o->arch : "llama");
    kv_u32(&k, "llama.context_length", 64);
    kv_u32(&k, "llama.embedding_length", (uint32_t)D);
    kv_u32(&k, "llama.block_count", SL);
    kv_u32(&k, "llama.feed_forward_length", (uint32_t)HID);
    kv_u32(&k, "llama.attention.head_count", SNH);
    kv_u32(&k, "llama.attention.head_count_kv", SNKV);
    kv_f32(&k, "llama.rope.freq_base", 10000.0f);
    if (o->rope_dims) kv_u32(&k, "llama.rope.dimension_count", (uint32_t)o->rope_dims);
    if (o->bad_eps) kv_str(&k, "llama.attention.layer_norm_rms_epsilon", "1e-5");
    else kv_f32(&k, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    if (o->extra_key) kv_u32(&k, o->extra_key, 2);
    if (o->rope_scaling != 0) {
        kv_str(&k, "llama.rope.scaling.type", "linear");
        kv_f32(&k, "llama.rope.scaling.factor", o->rope_scaling);
    }

    tensor_spec t[64];
    void *bufs[64];
    size_t nt = 0;
    tu_rng rng = {1234};
    char names[64][48];
    for (int l = -1; l <= SL; l++) {
        int count = l == -1 ? 1 : l == SL ? (o->with_output ? 2 : 1) : 9;
        for (int j = 0; j < count; j++) {
            uint64_t ne0, ne1;
            int norm = 0;
            if (l == -1) snprintf(names[nt], 48, "token_embd.weight"), ne0 = D, ne1 = SV;
            else if (l == SL && j == 0) snprintf(names[nt], 48, "output_norm.weight"), ne0 = D, ne1 = 1, norm = 1;
            else if (l == SL) snprintf(names[nt], 48, "output.weight"), ne0 = D, ne1 = SV;
            else if (j >= 7) snprintf(names[nt], 48, "blk.%d.%s.weight", l, j == 7 ? "attn_norm" : "ffn_norm"), ne0 = D, ne1 = 1, norm = 1;
            else {
                snprintf(names[nt], 48, "blk.%d.%s.weight", l, LAYER_MATS[j]);
                ne0 = j == 5 ? HID : D;
                ne1 = j == 1 || j == 2 ? KV : j == 4 || j == 6 ? HID : D;
            }
            if (o->omit && strcmp(o->omit, names[nt]) == 0) continue;
            int reshaped = o->reshape && strcmp(o->reshape, names[nt]) == 0;
            if (reshaped) ne1 += 1;
            uint32_t type = norm ? o->norm_type : o->mat_type;
            size_t n = (size_t)(ne0 * ne1);
            /* values exact in binary16, so F16 and F32 files hold the same numbers */
            float *f = (float *)malloc(n * sizeof(float));
            /* matrices scaled by 1/sqrt(columns), as trained models are, so that activations stay
             * O(1) and small errors are not amplified layer after layer */
            const float amp = 1.7f / sqrtf((float)ne0);
            for (size_t i = 0; i < n; i++) {
                float v = norm ? 1.0f + tu_rng_uniform(&rng, -0.25f, 0.25f) : tu_rng_uniform(&rng, -amp, amp);
                f[i] = wlm_fp16_to_fp32(wlm_fp32_to_fp16(v));
            }
            if (o->nan_in && strcmp(o->nan_in, names[nt]) == 0) f[n / 2] = NAN;
            void *data = f;
            size_t nbytes = n * 4;
            uint32_t qt = 0;
            int stored_quant = 0;
            if (!norm && o->mixed) qt = MIXED_TYPES[mat_index++ % (sizeof MIXED_TYPES / sizeof MIXED_TYPES[0])];
            else if (!norm) qt = o->quant;
            if (qt) {
                const wlm_type_traits *tr = wlm_type_get((int32_t)qt);
                size_t qbytes = wlm_row_bytes((int32_t)qt, (int64_t)ne0) * (size_t)ne1;
                void *q = malloc(qbytes);
                tr->from_float(f, q, (int64_t)n);
                if (o->dequant) {
                    tr->to_float(q, f, (int64_t)n); /* the values the quantized file holds */
                    free(q);
                } else {
                    free(f);
                    data = q, nbytes = qbytes, type = qt, stored_quant = 1;
                }
            }
            if (type == WLM_TYPE_F16 && !stored_quant) {
                uint16_t *h = (uint16_t *)malloc(n * 2);
                for (size_t i = 0; i < n; i++) h[i] = wlm_fp32_to_fp16(f[i]);
                free(f);
                data = h, nbytes = n * 2;
            }
            if (o->retype && strcmp(o->retype, names[nt]) == 0) {
                type = o->retype_id;
                const wlm_type_traits *tr = wlm_type_get((int32_t)type);
                nbytes = tr->name ? wlm_row_bytes((int32_t)type, (int64_t)ne0) * ne1 : 0;
                free(data);
                data = calloc(nbytes ? nbytes : 1, 1);
            }
            t[nt] = (tensor_spec){names[nt], norm && !reshaped ? 1u : 2u, {ne0, ne1, 1, 1}, type, data, nbytes, -1};
            bufs[nt] = data;
            nt++;
        }
    }
    if (o->rope_freqs) {
        bufs[nt] = calloc(D / SNH / 2, sizeof(float));
        t[nt] = (tensor_spec){"rope_freqs.weight", 1, {D / SNH / 2, 1, 1, 1}, WLM_TYPE_F32, bufs[nt], D / SNH / 2 * 4, -1};
        nt++;
    }
    unsigned char *p = gguf_file(NULL, &k, t, nt, size);
    for (size_t i = 0; i < nt; i++) free(bufs[i]);
    kvs_free(&k);
    return p;
}

static void expect_load(const synth_opts *o, int want, const char *needle, const char *what) {
    size_t size;
    unsigned char *p = synth_model(o, &size);
    wlm_model *m = NULL;
    int rc = wlm_model_load(p, size, 0, &m);
    const char *msg = wlm_model_errmsg(m);
    CHECKF(rc == want, "%s: got %s (%s), want %s", what, wlm_status_name(rc), msg, wlm_status_name(want));
    if (needle) CHECKF(strstr(msg, needle) != NULL, "%s: message \"%s\" lacks \"%s\"", what, msg, needle);
    if (rc != WLM_OK) {
        wlm_model_info info;
        CHECK_STATUS(wlm_model_get_info(m, &info), WLM_ERR_STATE);
    }
    wlm_model_free(m);
    free(p);
}

static void test_synthetic_models(void) {
    tu_section("synthetic llama GGUFs");
    synth_opts base = {0};
    base.mat_type = WLM_TYPE_F32;
    base.norm_type = WLM_TYPE_F32;
    base.rope_dims = SD / SNH;

    size_t s32, s16, s16n;
    unsigned char *f32 = synth_model(&base, &s32);
    synth_opts o = base;
    o.mat_type = WLM_TYPE_F16;
    unsigned char *f16 = synth_model(&o, &s16);
    o.mat_type = WLM_TYPE_F32;
    o.norm_type = WLM_TYPE_F16;
    unsigned char *f16n = synth_model(&o, &s16n);
    wlm_model *m32 = NULL, *m16 = NULL, *m16n = NULL;
    CHECKF(wlm_model_load(f32, s32, 0, &m32) == WLM_OK, "F32: %s", wlm_model_errmsg(m32));
    CHECKF(wlm_model_load(f16, s16, 0, &m16) == WLM_OK, "F16: %s", wlm_model_errmsg(m16));
    CHECKF(wlm_model_load(f16n, s16n, 0, &m16n) == WLM_OK, "F16 norms: %s", wlm_model_errmsg(m16n));
    wlm_model_info info;
    if (wlm_model_get_info(m32, &info) == WLM_OK) {
        CHECK(info.dim == SD && info.hidden_dim == SH && info.n_layers == SL && info.n_heads == SNH &&
              info.n_kv_heads == SNKV && info.vocab_size == SV && info.seq_len == 64 &&
              info.shared_classifier == 1 && info.has_tokenizer == 0);
        size_t mats = (size_t)SL * (2 * SD * SD + 2 * SKV * SD + 3 * SH * SD) + (size_t)SV * SD;
        size_t norms = (size_t)(2 * SL + 1) * SD;
        CHECK_EQ_INT(info.weight_bytes, 4 * (mats + norms));
        wlm_model_info i16;
        if (wlm_model_get_info(m16, &i16) == WLM_OK) CHECK_EQ_INT(i16.weight_bytes, 2 * mats + 4 * norms);
    }
    int32_t toks[12] = {1, 5, 9, 39, 0, 17, 17, 3, 22, 38, 2, 11};
    if (m32 && m16) compare_logits(m32, m16, toks, 12, SV, 1e-4f, "synthetic F16 vs F32 matrices");
    if (m32 && m16n) compare_logits(m32, m16n, toks, 12, SV, 0.0f, "synthetic F16 vs F32 norms");
    wlm_model_free(m32), wlm_model_free(m16), wlm_model_free(m16n);
    free(f16), free(f16n);

    /* quantized matrices: the same logits as an F32 file holding the dequantized values, up to
     * the 8-bit quantization of the activations; weight_bytes counts the blocks */
    {
        struct { uint32_t type; int dim, hidden, mixed; } qs[] = {
            {WLM_TYPE_Q8_0, 32, 64, 0}, {WLM_TYPE_Q4_0, 32, 64, 0}, {WLM_TYPE_Q4_K, 256, 256, 0},
            {WLM_TYPE_Q6_K, 256, 256, 0}, {WLM_TYPE_BF16, 32, 64, 0}, {WLM_TYPE_Q4_1, 32, 64, 0},
            {WLM_TYPE_Q5_0, 32, 64, 0}, {WLM_TYPE_Q5_1, 32, 64, 0}, {WLM_TYPE_Q2_K, 256, 256, 0},
            {WLM_TYPE_Q3_K, 256, 256, 0}, {WLM_TYPE_Q5_K, 256, 256, 0}, {0, 256, 256, 1},
        };
        for (size_t i = 0; i < sizeof qs / sizeof qs[0]; i++) {
            const wlm_type_traits *tr = wlm_type_get((int32_t)qs[i].type);
            if (!qs[i].mixed && (!tr->supported || !tr->from_float)) continue;
            o = base;
            o.dim = qs[i].dim, o.hidden = qs[i].hidden, o.rope_dims = qs[i].dim / SNH;
            o.quant = qs[i].type, o.mixed = qs[i].mixed;
            size_t sq, sf;
            unsigned char *pq = synth_model(&o, &sq);
            o.dequant = 1;
            unsigned char *pf = synth_model(&o, &sf);
            wlm_model *mq = NULL, *mf = NULL;
            char what[64];
            snprintf(what, sizeof what, "synthetic %s vs its dequantized F32", qs[i].mixed ? "mixed types" : tr->name);
            int rq = wlm_model_load(pq, sq, 0, &mq), rf = wlm_model_load(pf, sf, 0, &mf);
            CHECKF(rq == WLM_OK && rf == WLM_OK, "%s: %s / %s", what, wlm_model_errmsg(mq), wlm_model_errmsg(mf));
            if (rq == WLM_OK && rf == WLM_OK) {
                /* 8-bit activations cost ~3% of the largest logit here; a tensor mapped wrongly
                 * would cost ~100% */
                compare_logits_rel(mq, mf, toks, 12, SV, 0.08f, 1, what);
                wlm_model_info iq;
                wlm_model_get_info(mq, &iq);
                if (!qs[i].mixed) {
                    const int64_t D = qs[i].dim, H = qs[i].hidden, KVD = D / SNH * SNKV;
                    const int32_t t = (int32_t)qs[i].type;
                    size_t want = (size_t)SL * (wlm_row_bytes(t, D) * (size_t)(2 * D + 2 * KVD + 2 * H) + wlm_row_bytes(t, H) * (size_t)D) +
                                  wlm_row_bytes(t, D) * SV + (size_t)(2 * SL + 1) * (size_t)D * 4;
                    CHECKF(iq.weight_bytes == want, "%s: weight_bytes %zu, want %zu", what, iq.weight_bytes, want);
                }
            }
            wlm_model_free(mq), wlm_model_free(mf);
            free(pq), free(pf);
        }
    }

    /* a separate classifier */
    o = base;
    o.with_output = 1;
    {
        size_t size;
        unsigned char *p = synth_model(&o, &size);
        wlm_model *m = NULL;
        CHECKF(wlm_model_load(p, size, 0, &m) == WLM_OK, "%s", wlm_model_errmsg(m));
        if (wlm_model_get_info(m, &info) == WLM_OK) CHECK_EQ_INT(info.shared_classifier, 0);
        wlm_model_free(m);
        free(p);
    }
    /* rope.dimension_count absent: defaults to the head size */
    o = base;
    o.rope_dims = 0;
    expect_load(&o, WLM_OK, NULL, "no rope.dimension_count");

    o = base;
    o.arch = "mamba";
    expect_load(&o, WLM_ERR_UNSUPPORTED, "\"mamba\"", "architecture mamba");
    o.arch = "";
    expect_load(&o, WLM_ERR_UNSUPPORTED, "architecture", "empty architecture");
    o = base;
    o.rope_dims = 4; /* partial rotary embeddings load (tests/c/test_llama3.c runs them) */
    expect_load(&o, WLM_OK, NULL, "partial rotary");
    o.rope_dims = 3;
    expect_load(&o, WLM_ERR_FORMAT, "rope.dimension_count 3", "odd rope.dimension_count");
    o.rope_dims = SD / SNH + 2;
    expect_load(&o, WLM_ERR_FORMAT, "rope.dimension_count", "rope.dimension_count > head size");
    o = base;
    o.rope_scaling = 1.0f;
    expect_load(&o, WLM_OK, NULL, "RoPE scaling factor 1");
    o.rope_scaling = 4.0f;
    expect_load(&o, WLM_OK, NULL, "linear RoPE scaling factor 4");
    o = base;
    o.rope_freqs = 1; /* all-zero factors */
    expect_load(&o, WLM_ERR_FORMAT, "rope_freqs.weight", "rope_freqs of zeros");
    o = base;
    o.bad_eps = 1;
    expect_load(&o, WLM_ERR_FORMAT, "layer_norm_rms_epsilon", "string epsilon");
    o = base;
    o.extra_key = "llama.expert_count";
    expect_load(&o, WLM_ERR_UNSUPPORTED, "expert", "mixture of experts");
    o.extra_key = "llama.attention.value_length"; /* differs from key_length */
    expect_load(&o, WLM_ERR_UNSUPPORTED, "value_length", "value_length");
    o.extra_key = "llama.attention.key_length"; /* head size 2: Q and the RoPE width misfit */
    expect_load(&o, WLM_ERR_FORMAT, "dimension_count", "key_length");
    o.extra_key = "llama.block_count"; /* duplicate key */
    expect_load(&o, WLM_ERR_FORMAT, "duplicate key llama.block_count", "duplicate");
    o = base;
    o.omit = "blk.1.ffn_up.weight";
    expect_load(&o, WLM_ERR_FORMAT, "blk.1.ffn_up.weight", "missing tensor");
    o.omit = "token_embd.weight";
    expect_load(&o, WLM_ERR_FORMAT, "token_embd.weight", "missing embedding");
    o.omit = "output_norm.weight";
    expect_load(&o, WLM_ERR_FORMAT, "output_norm.weight", "missing final norm");
    o = base;
    o.reshape = "blk.0.attn_k.weight";
    expect_load(&o, WLM_ERR_FORMAT, "blk.0.attn_k.weight has shape [32, 17", "wrong shape");
    o.reshape = "blk.1.attn_norm.weight";
    expect_load(&o, WLM_ERR_FORMAT, "blk.1.attn_norm.weight", "2-D norm");
    o = base;
    o.nan_in = "blk.1.ffn_down.weight";
    expect_load(&o, WLM_ERR_FORMAT, "non-finite", "NaN in F32");
    o.mat_type = WLM_TYPE_F16;
    expect_load(&o, WLM_ERR_FORMAT, "blk.1.ffn_down.weight", "NaN in F16");
    o.mat_type = WLM_TYPE_F32;
    o.quant = WLM_TYPE_BF16; /* the NaN survives the conversion to BF16 */
    expect_load(&o, WLM_ERR_FORMAT, "blk.1.ffn_down.weight", "NaN in BF16");

    /* unsupported and unknown tensor types: the message names the tensor and the type */
    o = base;
    o.retype = "blk.0.attn_q.weight";
    o.retype_id = WLM_TYPE_Q5_K;
    /* 32 columns are not whole Q5_K blocks (256): the reader refuses the shape first */
    expect_load(&o, WLM_ERR_FORMAT, "blk.0.attn_q.weight: ne[0] = 32 is not a multiple of the Q5_K block size 256", "Q5_K, 32 columns");
    o.dim = 256;
    o.rope_dims = 256 / SNH;
    o.retype_id = WLM_TYPE_Q8_K; /* known to ggml, activations only here */
    expect_load(&o, WLM_ERR_UNSUPPORTED, "tensor blk.0.attn_q.weight has type Q8_K (15), which is not supported", "Q8_K");
    o.retype_id = 99;
    expect_load(&o, WLM_ERR_UNSUPPORTED, "tensor blk.0.attn_q.weight has type 99 (unknown), which is not supported", "unknown type");
    o.retype_id = 1000000;
    expect_load(&o, WLM_ERR_UNSUPPORTED, "tensor blk.0.attn_q.weight has type 1000000 (unknown)", "unknown type 10^6");
    o.retype_id = WLM_TYPE_BF16;
    if (!wlm_type_get(WLM_TYPE_BF16)->supported)
        expect_load(&o, WLM_ERR_UNSUPPORTED, "tensor blk.0.attn_q.weight has type BF16 (30), which is not supported", "BF16");
    o = base;
    o.retype = "blk.1.ffn_norm.weight"; /* quantized norms: never (forward.c reads floats) */
    o.retype_id = WLM_TYPE_Q8_0;
    expect_load(&o, WLM_ERR_UNSUPPORTED, "blk.1.ffn_norm.weight", "quantized norm");
    o.retype = "token_embd.weight";
    o.retype_id = 77;
    expect_load(&o, WLM_ERR_UNSUPPORTED, "token_embd.weight has type 77 (unknown)", "unknown embedding type");

    /* every truncation of a whole model, and random byte flips in its header: errors, no crash */
    {
        size_t hdr = 0;
        wlm_gguf g;
        char err[ERRLEN];
        if (wlm_gguf_parse(&g, f32, s32, err, sizeof err) == WLM_OK) hdr = g.data_offset;
        wlm_gguf_free(&g);
        int all_errors = 1;
        for (size_t n = 0; n < s32; n += n < hdr + 64 ? 1 : 97) {
            unsigned char *q = tu_dup(f32, n);
            wlm_model *m = NULL;
            if (wlm_model_load(q, n, 0, &m) >= 0) all_errors = 0;
            wlm_model_free(m);
            free(q);
        }
        CHECKF(all_errors, "a truncated synthetic model loaded");
        tu_rng r = {99};
        int loaded = 0;
        for (int i = 0; i < 3000; i++) {
            unsigned char *q = tu_dup(f32, s32);
            int flips = 1 + (int)(tu_rng_u64(&r) % 4);
            for (int j = 0; j < flips; j++) {
                size_t at = (size_t)(tu_rng_u64(&r) % (hdr ? hdr : s32));
                q[at] = (unsigned char)tu_rng_u64(&r);
            }
            wlm_model *m = NULL;
            if (wlm_model_load(q, s32, 0, &m) == WLM_OK) {
                loaded++;
                wlm_context *c = NULL;
                wlm_context_params cp;
                wlm_context_params_default(&cp);
                cp.n_ctx = 4; /* a flipped context_length must not make this test allocate GBs */
                if (wlm_context_new(m, &cp, &c) == WLM_OK) {
                    int32_t one = 1;
                    (void)wlm_eval(c, &one, 1);
                }
                wlm_context_free(c);
            }
            wlm_model_free(m);
            free(q);
        }
        printf("   3000 corrupted headers: %d still loaded (harmless flips), none crashed\n", loaded);
        CHECK(1);
    }
    free(f32);
}

int main(int argc, char **argv) {
    tu_find_shared(argc, argv);
    printf("shared files: %s\n", tu_shared_dir);
    test_reader_valid();
    test_getters();
    test_reader_corrupt();
    test_reader_tensors();
    test_resident_rule();
    size_t size = 0;
    unsigned char *gguf = tu_read_shared("models/stories260K.gguf", &size);
    if (gguf) {
        test_real_files(gguf, size);
        test_stories_gguf(gguf, size);
        test_vocab_only(gguf, size);
        free(gguf);
    }
    test_synthetic_models();
    return TEST_FINISH();
}
