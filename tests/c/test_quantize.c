/*
 * test_quantize.c — the GGUF writer (gguf_write.c) and the quantizer (quantize.c):
 * - the writer: every value type, string and numeric arrays, tensors with padding, memory and
 *   FILE sinks byte-identical, copying key/values, general.alignment, and its errors (sticky);
 * - stories260K.bin + tok512.bin written as GGUF F32 gives exactly the .bin's logits, greedy
 *   text and token ids; Q8_0 keeps the first greedy tokens (the count is printed, >= 100
 *   asserted); Q4_0 still writes text (printed: judge it by reading); every other type and
 *   llama.cpp's mixes Q3_K_M / Q4_K_M / Q5_K_M: rows that are not whole blocks fall back as in
 *   llama.cpp and say so, each tensor has the type the rules give it (checked in the file),
 *   general.file_type is llama.cpp's, and the model generates with logits near F32's; the
 *   mixes' rules against hand-made tables for 16 and 30 layers; a GGUF source (ours and ggml-org's
 *   stories260K.gguf) quantizes like the .bin; bad requests leave no file behind.
 * Files are written into the working directory (the build directory under CTest; in the wasm
 * build NODERAWFS makes them real files) and removed at the end.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "formats/gguf_write.h"
#include "kernels/quantize.h"
#include "test_util.h"
#include "wasmlm.h"

static unsigned char *read_path(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    unsigned char *buf = NULL;
    long n;
    *size = 0;
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
        buf = malloc((size_t)n + 1);
        if (buf && fread(buf, 1, (size_t)n, f) == (size_t)n) *size = (size_t)n;
        else {
            free(buf);
            buf = NULL;
        }
    }
    fclose(f);
    return buf;
}

/* ==== the writer ========================================================================== */

/* Writes the same little file through `w` (a fresh writer); returns its status. Data is given
 * in awkward pieces to exercise the tensor boundaries. */
static int write_sample(wlm_gguf_writer *w, const float *f32, const wlm_block_q8_0 *q8,
                        const uint16_t *f16) {
    static const uint8_t u8s[3] = {1, 2, 255};
    static const int32_t i32s[4] = {-1, 0, 7, 2147483647};
    static const float f32s[2] = {0.5f, -3.25f};
    static const double f64s[2] = {1e300, -0.125};
    static const uint8_t bools[3] = {1, 0, 1};
    const char *strs[3] = {"a", "", "\xe2\x96\x81hello"};
    const size_t lens[3] = {1, 0, 8};
    int8_t i8 = -5;
    uint16_t u16 = 65535;
    int16_t i16 = -32768;
    int64_t i64 = -1234567890123LL;
    double f64 = 2.5;

    wlm_gguf_add_str(w, "general.architecture", "test");
    wlm_gguf_add_scalar(w, "t.u8", WLM_GGUF_UINT8, &u8s[2]);
    wlm_gguf_add_scalar(w, "t.i8", WLM_GGUF_INT8, &i8);
    wlm_gguf_add_scalar(w, "t.u16", WLM_GGUF_UINT16, &u16);
    wlm_gguf_add_scalar(w, "t.i16", WLM_GGUF_INT16, &i16);
    wlm_gguf_add_u32(w, "t.u32", 4000000000u);
    wlm_gguf_add_i32(w, "t.i32", -42);
    wlm_gguf_add_f32(w, "t.f32", 1e-5f);
    wlm_gguf_add_bool(w, "t.bool", 1);
    wlm_gguf_add_u64(w, "t.u64", 0xfedcba9876543210ull);
    wlm_gguf_add_scalar(w, "t.i64", WLM_GGUF_INT64, &i64);
    wlm_gguf_add_scalar(w, "t.f64", WLM_GGUF_FLOAT64, &f64);
    wlm_gguf_add_strn(w, "t.str", "x\0y", 3); /* GGUF strings may hold NUL */
    wlm_gguf_add_arr(w, "t.arr_u8", WLM_GGUF_UINT8, u8s, 3);
    wlm_gguf_add_arr(w, "t.arr_i32", WLM_GGUF_INT32, i32s, 4);
    wlm_gguf_add_arr(w, "t.arr_f32", WLM_GGUF_FLOAT32, f32s, 2);
    wlm_gguf_add_arr(w, "t.arr_f64", WLM_GGUF_FLOAT64, f64s, 2);
    wlm_gguf_add_arr(w, "t.arr_bool", WLM_GGUF_BOOL, bools, 3);
    wlm_gguf_add_arr(w, "t.arr_empty", WLM_GGUF_INT32, NULL, 0);
    wlm_gguf_add_arr_str(w, "t.arr_str", strs, lens, 3);
    const int64_t ne_a[1] = {5}, ne_b[2] = {64, 3}, ne_c[3] = {2, 3, 1};
    wlm_gguf_add_tensor(w, "a", 1, ne_a, WLM_TYPE_F32);   /* 20 bytes: 12 of padding */
    wlm_gguf_add_tensor(w, "b.weight", 2, ne_b, WLM_TYPE_Q8_0); /* 3 rows of 2 blocks */
    wlm_gguf_add_tensor(w, "c", 3, ne_c, WLM_TYPE_F16);   /* 12 bytes */
    wlm_gguf_write_header(w);
    wlm_gguf_write_data(w, f32, 7);
    wlm_gguf_write_data(w, (const char *)f32 + 7, 13);
    /* b and c back to back, written in two pieces that cross from b into c */
    unsigned char bc[6 * sizeof(wlm_block_q8_0) + 12];
    memcpy(bc, q8, 6 * sizeof *q8);
    memcpy(bc + 6 * sizeof *q8, f16, 12);
    wlm_gguf_write_data(w, bc, 100);
    wlm_gguf_write_data(w, bc + 100, sizeof bc - 100);
    return wlm_gguf_writer_finish(w);
}

static void check_sample(const unsigned char *buf, size_t size, const float *f32,
                         const wlm_block_q8_0 *q8, const uint16_t *f16) {
    wlm_gguf g;
    char err[256] = "";
    int rc = wlm_gguf_parse(&g, buf, size, err, sizeof err);
    CHECKF(rc == WLM_OK, "parse: %s", err);
    if (rc != WLM_OK) return;
    CHECK_EQ_INT(g.version, 3);
    CHECK_EQ_INT(g.alignment, 32);
    CHECK_EQ_INT(g.n_kv, 20);
    CHECK_EQ_INT(g.n_tensors, 3);
    CHECK_EQ_INT(g.data_offset % 32, 0);
    int64_t i;
    double d;
    uint32_t u;
    int32_t s32;
    float f;
    int b;
    wlm_gguf_str str;
    CHECK(wlm_gguf_get_str(&g, "general.architecture", &str, NULL, 0) == WLM_OK &&
          wlm_gguf_str_eq(str, "test"));
    CHECK(wlm_gguf_kv_i64(wlm_gguf_find_kv(&g, "t.u8"), &i) == WLM_OK && i == 255);
    CHECK(wlm_gguf_kv_i64(wlm_gguf_find_kv(&g, "t.i8"), &i) == WLM_OK && i == -5);
    CHECK(wlm_gguf_kv_i64(wlm_gguf_find_kv(&g, "t.u16"), &i) == WLM_OK && i == 65535);
    CHECK(wlm_gguf_kv_i64(wlm_gguf_find_kv(&g, "t.i16"), &i) == WLM_OK && i == -32768);
    CHECK(wlm_gguf_get_u32(&g, "t.u32", &u, NULL, 0) == WLM_OK && u == 4000000000u);
    CHECK(wlm_gguf_get_i32(&g, "t.i32", &s32, NULL, 0) == WLM_OK && s32 == -42);
    CHECK(wlm_gguf_get_f32(&g, "t.f32", &f, NULL, 0) == WLM_OK && f == 1e-5f);
    CHECK(wlm_gguf_get_bool(&g, "t.bool", &b, NULL, 0) == WLM_OK && b == 1);
    const wlm_gguf_kv *kv = wlm_gguf_find_kv(&g, "t.u64");
    CHECK(kv && kv->type == WLM_GGUF_UINT64 && kv->value[0] == 0x10 && kv->value[7] == 0xfe);
    CHECK(wlm_gguf_kv_i64(wlm_gguf_find_kv(&g, "t.i64"), &i) == WLM_OK && i == -1234567890123LL);
    CHECK(wlm_gguf_kv_f64(wlm_gguf_find_kv(&g, "t.f64"), &d) == WLM_OK && d == 2.5);
    kv = wlm_gguf_find_kv(&g, "t.str");
    CHECK(kv && kv->type == WLM_GGUF_STRING && kv->str.len == 3 && memcmp(kv->str.ptr, "x\0y", 3) == 0);
    kv = wlm_gguf_find_kv(&g, "t.arr_u8");
    CHECK(kv && kv->arr.type == WLM_GGUF_UINT8 && kv->arr.n == 3 &&
          wlm_gguf_arr_i64(kv, 2, &i) == WLM_OK && i == 255);
    kv = wlm_gguf_find_kv(&g, "t.arr_i32");
    CHECK(kv && kv->arr.n == 4 && wlm_gguf_arr_i64(kv, 0, &i) == WLM_OK && i == -1 &&
          wlm_gguf_arr_i64(kv, 3, &i) == WLM_OK && i == 2147483647);
    kv = wlm_gguf_find_kv(&g, "t.arr_f32");
    CHECK(kv && kv->arr.n == 2 && wlm_gguf_arr_f64(kv, 1, &d) == WLM_OK && d == -3.25);
    kv = wlm_gguf_find_kv(&g, "t.arr_f64");
    CHECK(kv && kv->arr.n == 2 && wlm_gguf_arr_f64(kv, 0, &d) == WLM_OK && d == 1e300);
    kv = wlm_gguf_find_kv(&g, "t.arr_bool");
    CHECK(kv && kv->arr.type == WLM_GGUF_BOOL && wlm_gguf_arr_i64(kv, 1, &i) == WLM_OK && i == 0);
    kv = wlm_gguf_find_kv(&g, "t.arr_empty");
    CHECK(kv && kv->type == WLM_GGUF_ARRAY && kv->arr.n == 0);
    kv = wlm_gguf_find_kv(&g, "t.arr_str");
    CHECK(kv && kv->arr.type == WLM_GGUF_STRING && kv->arr.n == 3 &&
          wlm_gguf_arr_str(kv, 0, &str) == WLM_OK && wlm_gguf_str_eq(str, "a") &&
          wlm_gguf_arr_str(kv, 1, &str) == WLM_OK && str.len == 0 &&
          wlm_gguf_arr_str(kv, 2, &str) == WLM_OK && wlm_gguf_str_eq(str, "\xe2\x96\x81hello"));
    const wlm_gguf_tensor *ta = wlm_gguf_find_tensor(&g, "a");
    const wlm_gguf_tensor *tb = wlm_gguf_find_tensor(&g, "b.weight");
    const wlm_gguf_tensor *tc = wlm_gguf_find_tensor(&g, "c");
    CHECK(ta && tb && tc);
    if (ta && tb && tc) {
        CHECK(ta->n_dims == 1 && ta->ne[0] == 5 && ta->type == WLM_TYPE_F32 && ta->offset == 0);
        CHECK(tb->n_dims == 2 && tb->ne[0] == 64 && tb->ne[1] == 3 && tb->offset == 32);
        CHECK(tc->n_dims == 3 && tc->ne[2] == 1 && tc->offset == 32 + 224 && tc->nbytes == 12);
        CHECK(memcmp(ta->data, f32, 20) == 0);
        CHECK(memcmp(tb->data, q8, 6 * sizeof *q8) == 0);
        CHECK(memcmp(tc->data, f16, 12) == 0);
        /* padding is zeros, and the file ends on the alignment */
        const unsigned char *pad = (const unsigned char *)ta->data + 20;
        int zero = 1;
        for (int k = 0; k < 12; k++) zero &= pad[k] == 0;
        CHECK(zero);
        CHECK_EQ_INT(size, g.data_offset + 32 + 224 + 32);
    }
    wlm_gguf_free(&g);
}

static void test_writer(void) {
    tu_section("writer: every value type, tensors, memory and FILE sinks");
    float f32[5] = {1, -2, 3.5f, 1e-30f, 7};
    wlm_block_q8_0 q8[6];
    uint16_t f16[6];
    tu_rng rng = {7};
    for (int k = 0; k < 6; k++) {
        q8[k].d = wlm_fp32_to_fp16(tu_rng_uniform(&rng, 0.01f, 1));
        for (int j = 0; j < 32; j++) q8[k].qs[j] = (int8_t)(tu_rng_u64(&rng) & 0xff);
        f16[k] = wlm_fp32_to_fp16((float)k - 2.5f);
    }
    wlm_gguf_writer w;
    wlm_gguf_writer_init(&w, NULL);
    CHECK_STATUS(write_sample(&w, f32, q8, f16), WLM_OK);
    CHECKF(w.err[0] == '\0', "%s", w.err);
    const uint64_t total = wlm_gguf_writer_total_bytes(&w);
    size_t size = 0;
    unsigned char *mem = wlm_gguf_writer_take(&w, &size);
    CHECK(mem != NULL && size == total);
    size_t again = 0;
    CHECK(wlm_gguf_writer_take(&w, &again) == NULL && again == 0); /* taken once */
    wlm_gguf_writer_free(&w);
    if (mem) check_sample(mem, size, f32, q8, f16);

    /* The same through a FILE: byte-identical. */
    const char *path = "test_quantize_writer.gguf";
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (f) {
        wlm_gguf_writer_init(&w, f);
        CHECK_STATUS(write_sample(&w, f32, q8, f16), WLM_OK);
        CHECK(wlm_gguf_writer_take(&w, &size) == NULL); /* FILE mode has nothing to take */
        wlm_gguf_writer_free(&w);
        fclose(f);
        size_t fsize = 0;
        unsigned char *fb = read_path(path, &fsize);
        CHECK(fb && mem && fsize == total && memcmp(fb, mem, fsize) == 0);
        free(fb);
        remove(path);
    }

    tu_section("writer: copying key/values of a parsed file");
    if (mem) {
        wlm_gguf g;
        CHECK_STATUS(wlm_gguf_parse(&g, mem, (size_t)total, NULL, 0), WLM_OK);
        wlm_gguf_writer_init(&w, NULL);
        for (size_t k = 0; k < g.n_kv; k++) CHECK_STATUS(wlm_gguf_add_kv_copy(&w, &g.kv[k]), WLM_OK);
        CHECK(wlm_gguf_writer_has_key(&w, "t.arr_str") && !wlm_gguf_writer_has_key(&w, "t.nope"));
        /* The copy's key/value section equals the original's bytes. */
        size_t kv_start = g.kv[0].file_offset;
        CHECK(w.kv.len > 0 && memcmp(w.kv.p, mem + kv_start, w.kv.len) == 0);
        CHECK_STATUS(wlm_gguf_add_kv_copy(&w, &g.kv[0]), WLM_ERR_INVALID_ARG); /* duplicate */
        wlm_gguf_writer_free(&w);
        wlm_gguf_free(&g);
    }
    free(mem);

    tu_section("writer: general.alignment 64");
    wlm_gguf_writer_init(&w, NULL);
    wlm_gguf_add_u32(&w, "general.alignment", 64);
    const int64_t ne[1] = {3};
    wlm_gguf_add_tensor(&w, "x", 1, ne, WLM_TYPE_F32);
    wlm_gguf_add_tensor(&w, "y", 1, ne, WLM_TYPE_F32);
    wlm_gguf_write_header(&w);
    wlm_gguf_write_data(&w, f32, 12);
    wlm_gguf_write_data(&w, f32, 12);
    CHECK_STATUS(wlm_gguf_writer_finish(&w), WLM_OK);
    mem = wlm_gguf_writer_take(&w, &size);
    wlm_gguf_writer_free(&w);
    if (mem) {
        wlm_gguf g;
        CHECK_STATUS(wlm_gguf_parse(&g, mem, size, NULL, 0), WLM_OK);
        CHECK(g.alignment == 64 && g.data_offset % 64 == 0 && g.n_tensors == 2 &&
              g.tensors[1].offset == 64 && size == g.data_offset + 128);
        wlm_gguf_free(&g);
    }
    free(mem);

    tu_section("writer: errors are reported and sticky");
    wlm_gguf_writer_init(&w, NULL);
    CHECK_STATUS(wlm_gguf_add_u32(&w, "k", 1), WLM_OK);
    CHECK_STATUS(wlm_gguf_add_u32(&w, "k", 2), WLM_ERR_INVALID_ARG);
    CHECK(strstr(wlm_gguf_writer_errmsg(&w), "duplicate") != NULL);
    CHECK_STATUS(wlm_gguf_add_u32(&w, "other", 2), WLM_ERR_INVALID_ARG); /* sticky */
    CHECK_STATUS(wlm_gguf_write_header(&w), WLM_ERR_INVALID_ARG);
    CHECK_STATUS(wlm_gguf_writer_finish(&w), WLM_ERR_INVALID_ARG);
    CHECK(wlm_gguf_writer_take(&w, &size) == NULL);
    wlm_gguf_writer_free(&w);

    struct { const char *what; int want; } cases[] = {
        {"empty key", WLM_ERR_INVALID_ARG},
        {"alignment 3", WLM_ERR_INVALID_ARG},
        {"alignment as string", WLM_ERR_INVALID_ARG},
        {"bool 2", WLM_ERR_INVALID_ARG},
        {"unknown tensor type", WLM_ERR_INVALID_ARG},
        {"partial block", WLM_ERR_INVALID_ARG},
        {"zero dimension", WLM_ERR_INVALID_ARG},
        {"5 dimensions", WLM_ERR_INVALID_ARG},
        {"long tensor name", WLM_ERR_INVALID_ARG},
        {"duplicate tensor", WLM_ERR_INVALID_ARG},
        {"key after header", WLM_ERR_STATE},
        {"data before header", WLM_ERR_STATE},
        {"too much data", WLM_ERR_INVALID_ARG},
        {"too little data", WLM_ERR_STATE},
        {"no header", WLM_ERR_STATE},
        {"nested array copy", WLM_ERR_UNSUPPORTED},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const char *what = cases[c].what;
        const int64_t ne2[2] = {33, 2}, ne0[2] = {4, 0}, ne5[5] = {1, 1, 1, 1, 1};
        uint8_t two = 2;
        wlm_gguf_writer_init(&w, NULL);
        int rc = WLM_OK;
        if (!strcmp(what, "empty key")) rc = wlm_gguf_add_u32(&w, "", 1);
        else if (!strcmp(what, "alignment 3")) rc = wlm_gguf_add_u32(&w, "general.alignment", 3);
        else if (!strcmp(what, "alignment as string"))
            rc = wlm_gguf_add_str(&w, "general.alignment", "32");
        else if (!strcmp(what, "bool 2")) rc = wlm_gguf_add_scalar(&w, "b", WLM_GGUF_BOOL, &two);
        else if (!strcmp(what, "unknown tensor type")) rc = wlm_gguf_add_tensor(&w, "t", 1, ne, 99);
        else if (!strcmp(what, "partial block"))
            rc = wlm_gguf_add_tensor(&w, "t", 2, ne2, WLM_TYPE_Q8_0);
        else if (!strcmp(what, "zero dimension"))
            rc = wlm_gguf_add_tensor(&w, "t", 2, ne0, WLM_TYPE_F32);
        else if (!strcmp(what, "5 dimensions"))
            rc = wlm_gguf_add_tensor(&w, "t", 5, ne5, WLM_TYPE_F32);
        else if (!strcmp(what, "long tensor name"))
            rc = wlm_gguf_add_tensor(&w, "0123456789012345678901234567890123456789012345678901234567890123",
                                     1, ne, WLM_TYPE_F32);
        else if (!strcmp(what, "duplicate tensor")) {
            wlm_gguf_add_tensor(&w, "t", 1, ne, WLM_TYPE_F32);
            rc = wlm_gguf_add_tensor(&w, "t", 1, ne, WLM_TYPE_F16);
        } else if (!strcmp(what, "key after header")) {
            wlm_gguf_write_header(&w);
            rc = wlm_gguf_add_u32(&w, "late", 1);
        } else if (!strcmp(what, "data before header")) {
            wlm_gguf_add_tensor(&w, "t", 1, ne, WLM_TYPE_F32);
            rc = wlm_gguf_write_data(&w, f32, 12);
        } else if (!strcmp(what, "too much data")) {
            wlm_gguf_add_tensor(&w, "t", 1, ne, WLM_TYPE_F32);
            wlm_gguf_write_header(&w);
            rc = wlm_gguf_write_data(&w, f32, 16);
        } else if (!strcmp(what, "too little data")) {
            wlm_gguf_add_tensor(&w, "t", 1, ne, WLM_TYPE_F32);
            wlm_gguf_write_header(&w);
            wlm_gguf_write_data(&w, f32, 8);
            rc = wlm_gguf_writer_finish(&w);
        } else if (!strcmp(what, "no header")) {
            rc = wlm_gguf_writer_finish(&w);
        } else if (!strcmp(what, "nested array copy")) {
            wlm_gguf_kv kv;
            memset(&kv, 0, sizeof kv);
            kv.key.ptr = "nested";
            kv.key.len = 6;
            kv.type = WLM_GGUF_ARRAY;
            kv.arr.type = WLM_GGUF_ARRAY;
            rc = wlm_gguf_add_kv_copy(&w, &kv);
        }
        CHECKF(rc == cases[c].want, "%s: got %s, want %s (%s)", what, wlm_status_name(rc),
               wlm_status_name(cases[c].want), wlm_gguf_writer_errmsg(&w));
        CHECKF(wlm_gguf_writer_errmsg(&w)[0] != '\0', "%s: no message", what);
        CHECK(wlm_gguf_writer_finish(&w) != WLM_OK);
        wlm_gguf_writer_free(&w);
    }
}

/* ==== the quantizer ======================================================================= */

#define N_GEN 200

static wlm_model *load_gguf_path(const char *path) {
    size_t size = 0;
    unsigned char *buf = read_path(path, &size);
    wlm_model *m = NULL;
    if (!CHECKF(buf != NULL, "cannot read %s", path)) return NULL;
    int rc = wlm_model_load(buf, size, WLM_LOAD_OWN_BUFFER, &m);
    if (!CHECKF(rc == WLM_OK, "%s: %s", path, wlm_model_errmsg(m))) {
        wlm_model_free(m);
        return NULL;
    }
    return m;
}

/* Greedy argmax for n steps after `prompt`, never stopping; ids into out, and the text the
 * pieces make into text (cap bytes, NUL-terminated). Returns the number of tokens (n, or 0). */
static int greedy(const wlm_model *m, const int32_t *prompt, int n_prompt, int n, int32_t *out,
                  char *text, size_t cap) {
    wlm_context *ctx = NULL;
    size_t len = 0;
    if (text) text[0] = '\0';
    if (wlm_context_new(m, NULL, &ctx) != WLM_OK || wlm_eval(ctx, prompt, n_prompt) != WLM_OK) {
        CHECKF(0, "context: %s", wlm_context_errmsg(ctx));
        wlm_context_free(ctx);
        return 0;
    }
    wlm_model_info info;
    wlm_model_get_info(m, &info);
    int32_t prev = prompt[n_prompt - 1];
    for (int i = 0; i < n; i++) {
        const float *logits = wlm_logits(ctx);
        int32_t best = 0;
        for (int32_t v = 1; v < info.vocab_size; v++)
            if (logits[v] > logits[best]) best = v;
        out[i] = best;
        size_t pl = 0;
        const char *piece = wlm_token_piece(m, prev, best, &pl);
        if (text && piece && len + pl < cap) {
            memcpy(text + len, piece, pl);
            len += pl;
            text[len] = '\0';
        }
        prev = best;
        if (i + 1 < n && wlm_eval(ctx, &best, 1) != WLM_OK) {
            CHECKF(0, "eval: %s", wlm_context_errmsg(ctx));
            wlm_context_free(ctx);
            return 0;
        }
    }
    wlm_context_free(ctx);
    return n;
}

/* The text of the public greedy generation (temperature 0, stops at EOS/BOS). */
static void generate_text(const wlm_model *m, const char *prompt, int max_tokens, char *text,
                          size_t cap) {
    wlm_context *ctx = NULL;
    size_t len = 0;
    text[0] = '\0';
    if (wlm_context_new(m, NULL, &ctx) != WLM_OK) {
        CHECKF(0, "context: %s", wlm_context_errmsg(ctx));
        wlm_context_free(ctx);
        return;
    }
    wlm_gen_params gp;
    wlm_gen_params_default(&gp);
    gp.temperature = 0;
    gp.max_tokens = max_tokens;
    wlm_token tok;
    int rc = wlm_generate_begin_text(ctx, prompt, &gp);
    while (rc == WLM_OK && (rc = wlm_generate_next(ctx, &tok)) == WLM_OK) {
        if (len + tok.piece_len < cap) {
            memcpy(text + len, tok.piece, tok.piece_len);
            len += tok.piece_len;
            text[len] = '\0';
        }
    }
    CHECKF(rc == WLM_DONE, "generate: %s", wlm_context_errmsg(ctx));
    wlm_context_free(ctx);
}

/* Messages from the quantizer, collected for checks. */
typedef struct log_buf {
    char text[2048];
} log_buf;

static void collect(void *user, const char *msg) {
    log_buf *l = user;
    size_t n = strlen(l->text);
    snprintf(l->text + n, sizeof l->text - n, "%s\n", msg);
}

static int quantize_to(const wlm_model *m, const char *path, int32_t type, const wlm_gguf *src,
                       log_buf *log) {
    wlm_quantize_params p;
    wlm_quantize_params_default(&p);
    p.type = type;
    p.name = src ? NULL : "stories260K";
    p.src = src;
    p.log = collect;
    p.user = log;
    if (log) log->text[0] = '\0';
    else p.log = NULL;
    char err[512] = "";
    int rc = wlm_quantize_model(m, path, &p, err, sizeof err);
    CHECKF(rc == WLM_OK, "quantize to %s: %s", wlm_type_get(type)->name, err);
    return rc;
}

static int printable_text(const char *s) {
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 && c != '\n' && c != '\t') return 0;
        if (c == 0x7f) return 0;
    }
    return 1;
}

static int common_prefix(const int32_t *a, const int32_t *b, int n) {
    int k = 0;
    while (k < n && a[k] == b[k]) k++;
    return k;
}

static int same_positions(const int32_t *a, const int32_t *b, int n) {
    int k = 0;
    for (int i = 0; i < n; i++) k += a[i] == b[i];
    return k;
}

/* max over positions of max |logit_a - logit_b| / max |logit_b|, tokens fed one at a time */
static double logit_rel_diff(const wlm_model *a, const wlm_model *b, const int32_t *toks, int n,
                             int vocab) {
    wlm_context *ca = NULL, *cb = NULL;
    double worst = -1;
    if (wlm_context_new(a, NULL, &ca) == WLM_OK && wlm_context_new(b, NULL, &cb) == WLM_OK) {
        worst = 0;
        for (int i = 0; i < n; i++) {
            if (wlm_eval(ca, &toks[i], 1) != WLM_OK || wlm_eval(cb, &toks[i], 1) != WLM_OK) {
                worst = INFINITY;
                break;
            }
            const float *la = wlm_logits(ca), *lb = wlm_logits(cb);
            double scale = 0, d = 0;
            for (int v = 0; v < vocab; v++) {
                scale = fmax(scale, fabs((double)lb[v]));
                d = fmax(d, fabs((double)la[v] - lb[v]));
            }
            if (!(d / scale <= worst)) worst = d / scale;
        }
    }
    wlm_context_free(ca);
    wlm_context_free(cb);
    return worst;
}

/* The type of tensor `name` in the GGUF file at path, or -1. */
static int32_t file_tensor_type(const wlm_gguf *g, const char *name) {
    const wlm_gguf_tensor *t = wlm_gguf_find_tensor(g, name);
    return t ? (int32_t)t->type : -1;
}

/* The mixes' per-tensor rules (llama.cpp's llama_tensor_get_type for a dense llama model),
 * against tables worked out by hand for the layer counts of real models. */
static void test_mix_rules(void) {
    tu_section("mixes: llama.cpp's per-tensor types");
    /* use_more_bits over 16 layers (Llama-3.2-1B): i < 2, i >= 14, (i - 2) % 3 == 2 */
    static const int more16[16] = {1, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 1, 1};
    /* over 30 layers (SmolLM2-135M): i < 3, i >= 26, (i - 3) % 3 == 2 */
    static const int more30[30] = {1, 1, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1,
                                   0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 1, 1, 1};
    const int32_t q4m = WLM_QUANT_MIX_Q4_K_M, q5m = WLM_QUANT_MIX_Q5_K_M,
                  q3m = WLM_QUANT_MIX_Q3_K_M;
    int bad = 0;
    for (int l = 0; l < 16; l++) {
        /* Llama-3.2-1B: dim 2048, kv 512, hidden 8192 */
        bad += wlm_quantize_mix_tensor_type(q4m, WLM_QUANT_ATTN_V, l, 16, 2048, 1) !=
               (more16[l] ? WLM_TYPE_Q6_K : WLM_TYPE_Q4_K);
        bad += wlm_quantize_mix_tensor_type(q4m, WLM_QUANT_FFN_DOWN, l, 16, 8192, 1) !=
               (more16[l] ? WLM_TYPE_Q6_K : WLM_TYPE_Q4_K);
        bad += wlm_quantize_mix_tensor_type(q5m, WLM_QUANT_ATTN_V, l, 16, 2048, 1) !=
               (more16[l] ? WLM_TYPE_Q6_K : WLM_TYPE_Q5_K);
        bad += wlm_quantize_mix_tensor_type(q4m, WLM_QUANT_ATTN_Q, l, 16, 2048, 1) != WLM_TYPE_Q4_K;
        bad += wlm_quantize_mix_tensor_type(q4m, WLM_QUANT_ATTN_OUTPUT, l, 16, 2048, 1) !=
               WLM_TYPE_Q4_K;
        /* Q3_K_M: attn_v Q5_K in layers 0-1 else Q4_K; ffn_down Q5_K below 16/16 = 1 else
         * Q4_K; attn_output Q4_K; the rest Q3_K */
        bad += wlm_quantize_mix_tensor_type(q3m, WLM_QUANT_ATTN_V, l, 16, 2048, 1) !=
               (l < 2 ? WLM_TYPE_Q5_K : WLM_TYPE_Q4_K);
        bad += wlm_quantize_mix_tensor_type(q3m, WLM_QUANT_FFN_DOWN, l, 16, 8192, 1) !=
               (l < 1 ? WLM_TYPE_Q5_K : WLM_TYPE_Q4_K);
        bad += wlm_quantize_mix_tensor_type(q3m, WLM_QUANT_ATTN_OUTPUT, l, 16, 2048, 1) !=
               WLM_TYPE_Q4_K;
        bad += wlm_quantize_mix_tensor_type(q3m, WLM_QUANT_FFN_UP, l, 16, 2048, 1) != WLM_TYPE_Q3_K;
    }
    CHECKF(bad == 0, "16 layers: %d tensor types differ from llama.cpp's rules", bad);
    bad = 0;
    for (int l = 0; l < 30; l++) {
        /* SmolLM2-135M: dim 576, hidden 1536: rows of 576 fall back (Q4_K -> Q5_0, Q6_K ->
         * Q8_0), rows of 1536 (ffn_down) are whole blocks */
        bad += wlm_quantize_mix_tensor_type(q4m, WLM_QUANT_ATTN_V, l, 30, 576, 1) !=
               (more30[l] ? WLM_TYPE_Q8_0 : WLM_TYPE_Q5_0);
        bad += wlm_quantize_mix_tensor_type(q4m, WLM_QUANT_FFN_DOWN, l, 30, 1536, 1) !=
               (more30[l] ? WLM_TYPE_Q6_K : WLM_TYPE_Q4_K);
        bad += wlm_quantize_mix_tensor_type(q5m, WLM_QUANT_FFN_GATE, l, 30, 576, 1) != WLM_TYPE_Q5_1;
        bad += wlm_quantize_mix_tensor_type(q3m, WLM_QUANT_ATTN_K, l, 30, 576, 1) != WLM_TYPE_Q4_0;
    }
    CHECKF(bad == 0, "30 layers: %d tensor types differ from llama.cpp's rules", bad);
    /* the classifier, and the token embedding when tied to it */
    CHECK(wlm_quantize_mix_tensor_type(q4m, WLM_QUANT_OUTPUT, 0, 16, 2048, 0) == WLM_TYPE_Q6_K);
    CHECK(wlm_quantize_mix_tensor_type(q3m, WLM_QUANT_OUTPUT, 0, 16, 2048, 0) == WLM_TYPE_Q6_K);
    CHECK(wlm_quantize_mix_tensor_type(q4m, WLM_QUANT_TOKEN_EMBD, 0, 16, 2048, 1) ==
          WLM_TYPE_Q6_K);
    CHECK(wlm_quantize_mix_tensor_type(q4m, WLM_QUANT_TOKEN_EMBD, 0, 16, 2048, 0) ==
          WLM_TYPE_Q4_K);
    CHECK(wlm_quantize_mix_tensor_type(q4m, WLM_QUANT_TOKEN_EMBD, 0, 30, 576, 1) ==
          WLM_TYPE_Q8_0);
    CHECK(wlm_quantize_mix_tensor_type(q4m, WLM_QUANT_OUTPUT, 0, 30, 576, 0) == WLM_TYPE_Q8_0);
    CHECK(wlm_quantize_mix_tensor_type(14, WLM_QUANT_OUTPUT, 0, 30, 576, 0) == -1); /* Q4_K_S */
    /* names */
    CHECK(wlm_quantize_mix_from_name("q4_k_m") == q4m && wlm_quantize_mix_from_name("Q5_K_M") == q5m &&
          wlm_quantize_mix_from_name("Q3_K_M") == q3m && wlm_quantize_mix_from_name("Q4_K") == -1 &&
          wlm_quantize_mix_from_name("Q4_K_S") == -1 && wlm_quantize_mix_from_name(NULL) == -1);
    CHECK(wlm_quantize_mix_name(q4m) && strcmp(wlm_quantize_mix_name(q4m), "Q4_K_M") == 0);
    CHECK(wlm_quantize_mix_name(14) == NULL && wlm_quantize_mix_name(0) == NULL);
    /* the row-length fallbacks: llama.cpp's table, then F16 */
    CHECK(wlm_quantize_tensor_type(WLM_TYPE_Q2_K, 576) == WLM_TYPE_Q4_0 &&
          wlm_quantize_tensor_type(WLM_TYPE_Q3_K, 960) == WLM_TYPE_Q4_0 &&
          wlm_quantize_tensor_type(WLM_TYPE_Q4_K, 960) == WLM_TYPE_Q5_0 &&
          wlm_quantize_tensor_type(WLM_TYPE_Q5_K, 576) == WLM_TYPE_Q5_1 &&
          wlm_quantize_tensor_type(WLM_TYPE_Q6_K, 576) == WLM_TYPE_Q8_0 &&
          wlm_quantize_tensor_type(WLM_TYPE_Q5_K, 172) == WLM_TYPE_F16 &&
          wlm_quantize_tensor_type(WLM_TYPE_Q5_0, 172) == WLM_TYPE_F16 &&
          wlm_quantize_tensor_type(WLM_TYPE_BF16, 172) == WLM_TYPE_BF16 &&
          wlm_quantize_tensor_type(WLM_TYPE_Q5_K, 512) == WLM_TYPE_Q5_K);
}

static const char *texts[] = {
    "Once upon a time",
    "",
    " ",
    "  two  spaces  ",
    "Lily and Tom went to the park.\nThey played!",
    "caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x98\x80 \xe4\xb8\xad\xe6\x96\x87", /* byte fallback */
    "\t tabs\tand\r\nCRLF",
    "<s> is not parsed </s>",
    "1234567890 !@#$%^&*()",
};

static void test_models(void) {
    size_t bin_size = 0, tok_size = 0;
    unsigned char *bin = tu_read_shared("models/stories260K.bin", &bin_size);
    unsigned char *tok = tu_read_shared("models/tok512.bin", &tok_size);
    wlm_model *ref = NULL;
    if (!bin || !tok) {
        free(bin);
        free(tok);
        return;
    }
    CHECK_STATUS(wlm_model_load(bin, bin_size, WLM_LOAD_OWN_BUFFER, &ref), WLM_OK);
    CHECK_STATUS(wlm_model_load_tokenizer(ref, tok, tok_size), WLM_OK);
    free(tok);
    wlm_model_info ri;
    if (wlm_model_get_info(ref, &ri) != WLM_OK) {
        wlm_model_free(ref);
        return;
    }
    const int32_t bos = 1;
    static int32_t ids_ref[N_GEN], ids[N_GEN], ids_f32[N_GEN], ids_q8[N_GEN];
    static char text_ref[8192], text[8192];

    tu_section("F32: the same logits, greedy text and token ids as the .bin");
    log_buf log;
    const char *f32_path = "test_quantize_f32.gguf";
    wlm_model *m = NULL;
    if (quantize_to(ref, f32_path, WLM_TYPE_F32, NULL, &log) == WLM_OK &&
        (m = load_gguf_path(f32_path)) != NULL) {
        CHECK(!tu_file_exists("test_quantize_f32.gguf.tmp"));
        CHECKF(log.text[0] == '\0', "unexpected messages: %s", log.text);
        wlm_model_info gi;
        CHECK_STATUS(wlm_model_get_info(m, &gi), WLM_OK);
        CHECK(gi.dim == ri.dim && gi.hidden_dim == ri.hidden_dim && gi.n_layers == ri.n_layers &&
              gi.n_heads == ri.n_heads && gi.n_kv_heads == ri.n_kv_heads &&
              gi.vocab_size == ri.vocab_size && gi.seq_len == ri.seq_len &&
              gi.shared_classifier == ri.shared_classifier && gi.has_tokenizer &&
              gi.bos_id == ri.bos_id && gi.eos_id == ri.eos_id &&
              gi.weight_bytes == ri.weight_bytes);
        /* Logits of a few positions, bit for bit. */
        wlm_context *a = NULL, *b = NULL;
        CHECK_STATUS(wlm_context_new(ref, NULL, &a), WLM_OK);
        CHECK_STATUS(wlm_context_new(m, NULL, &b), WLM_OK);
        const int32_t seq[6] = {1, 403, 407, 261, 378, 290};
        int same = 1;
        for (int i = 0; i < 6 && a && b; i++) {
            wlm_eval(a, &seq[i], 1);
            wlm_eval(b, &seq[i], 1);
            same &= memcmp(wlm_logits(a), wlm_logits(b), sizeof(float) * (size_t)ri.vocab_size) == 0;
        }
        CHECK(same);
        wlm_context_free(a);
        wlm_context_free(b);
        /* Greedy: 200 tokens after BOS, and the public generation with a prompt. */
        greedy(ref, &bos, 1, N_GEN, ids_ref, text_ref, sizeof text_ref);
        greedy(m, &bos, 1, N_GEN, ids_f32, text, sizeof text);
        CHECK(memcmp(ids_ref, ids_f32, sizeof ids_ref) == 0);
        CHECKF(strcmp(text_ref, text) == 0, "\n.bin: %s\nGGUF: %s", text_ref, text);
        generate_text(ref, "Once upon a time", 400, text_ref, sizeof text_ref);
        generate_text(m, "Once upon a time", 400, text, sizeof text);
        CHECKF(text_ref[0] && strcmp(text_ref, text) == 0, "\n.bin: %s\nGGUF: %s", text_ref, text);
        /* The vocabulary: the same ids for every text, with and without BOS. */
        for (size_t t = 0; t < sizeof texts / sizeof texts[0]; t++) {
            for (int with_bos = 0; with_bos < 2; with_bos++) {
                int32_t x[256], y[256];
                int32_t nx = wlm_tokenize(ref, texts[t], strlen(texts[t]), with_bos, x, 256);
                int32_t ny = wlm_tokenize(m, texts[t], strlen(texts[t]), with_bos, y, 256);
                CHECKF(nx == ny && nx >= 0 && nx <= 256 &&
                           memcmp(x, y, sizeof(int32_t) * (size_t)(nx > 0 ? nx : 0)) == 0,
                       "text %zu (bos %d): %d vs %d tokens", t, with_bos, (int)nx, (int)ny);
            }
        }
        /* Every piece decodes to the same bytes, after BOS and after another token. */
        int pieces_ok = 1;
        for (int32_t id = 0; id < ri.vocab_size; id++) {
            for (int32_t prev = 1; prev <= 3; prev += 2) {
                size_t la = 0, lb = 0;
                const char *pa = wlm_token_piece(ref, prev, id, &la);
                const char *pb = wlm_token_piece(m, prev, id, &lb);
                /* BOS/EOS/UNK: llama2.c prints "\n<s>\n"-style text, GGUF control tokens none.
                 * <0x20> right after BOS: run.c prints the space, llama.cpp's SPM decoding
                 * strips it like any leading space (tokenizer.c follows each). */
                if (id <= 2 || (prev == 1 && id == 3 + ' ')) continue;
                if (!pa || !pb || la != lb || memcmp(pa, pb, la) != 0) {
                    if (pieces_ok) CHECKF(0, "piece %d after %d differs", (int)id, (int)prev);
                    pieces_ok = 0;
                }
            }
        }
        CHECK(pieces_ok);
        printf("F32 GGUF: 200 greedy tokens and the 'Once upon a time' text identical to the .bin\n");
    }

    tu_section("F32 in memory: the same bytes as the file");
    {
        size_t fsize = 0;
        unsigned char *fb = read_path(f32_path, &fsize);
        wlm_gguf_writer w;
        wlm_gguf_writer_init(&w, NULL);
        wlm_quantize_params p;
        wlm_quantize_params_default(&p);
        p.name = "stories260K";
        char err[256] = "";
        CHECK_STATUS(wlm_quantize_write(ref, &w, &p, err, sizeof err), WLM_OK);
        size_t msize = 0;
        unsigned char *mb = wlm_gguf_writer_take(&w, &msize);
        CHECK(fb && mb && msize == fsize && memcmp(fb, mb, msize) == 0);
        /* The metadata a llama.cpp loader looks for. */
        wlm_gguf g;
        if (mb && wlm_gguf_parse(&g, mb, msize, err, sizeof err) == WLM_OK) {
            uint32_t u = 0;
            float f = 0;
            wlm_gguf_str s;
            const wlm_gguf_kv *kv;
            int64_t i;
            CHECK(wlm_gguf_get_str(&g, "general.architecture", &s, NULL, 0) == 0 && wlm_gguf_str_eq(s, "llama"));
            CHECK(wlm_gguf_get_str(&g, "general.name", &s, NULL, 0) == 0 && wlm_gguf_str_eq(s, "stories260K"));
            CHECK(wlm_gguf_get_u32(&g, "general.file_type", &u, NULL, 0) == 0 && u == 0);
            CHECK(wlm_gguf_get_u32(&g, "llama.context_length", &u, NULL, 0) == 0 && u == 512);
            CHECK(wlm_gguf_get_u32(&g, "llama.embedding_length", &u, NULL, 0) == 0 && u == 64);
            CHECK(wlm_gguf_get_u32(&g, "llama.feed_forward_length", &u, NULL, 0) == 0 && u == 172);
            CHECK(wlm_gguf_get_u32(&g, "llama.block_count", &u, NULL, 0) == 0 && u == 5);
            CHECK(wlm_gguf_get_u32(&g, "llama.attention.head_count", &u, NULL, 0) == 0 && u == 8);
            CHECK(wlm_gguf_get_u32(&g, "llama.attention.head_count_kv", &u, NULL, 0) == 0 && u == 4);
            CHECK(wlm_gguf_get_u32(&g, "llama.rope.dimension_count", &u, NULL, 0) == 0 && u == 8);
            CHECK(wlm_gguf_get_f32(&g, "llama.rope.freq_base", &f, NULL, 0) == 0 && f == 10000.0f);
            CHECK(wlm_gguf_get_f32(&g, "llama.attention.layer_norm_rms_epsilon", &f, NULL, 0) == 0 &&
                  f == 1e-5f);
            CHECK(wlm_gguf_get_str(&g, "tokenizer.ggml.model", &s, NULL, 0) == 0 && wlm_gguf_str_eq(s, "llama"));
            /* tokens and types as ggml-org's stories260K.gguf has them */
            kv = wlm_gguf_find_kv(&g, "tokenizer.ggml.tokens");
            CHECK(kv && kv->arr.n == 512 && wlm_gguf_arr_str(kv, 0, &s) == 0 && wlm_gguf_str_eq(s, "<unk>") &&
                  wlm_gguf_arr_str(kv, 1, &s) == 0 && wlm_gguf_str_eq(s, "<s>") &&
                  wlm_gguf_arr_str(kv, 2, &s) == 0 && wlm_gguf_str_eq(s, "</s>") &&
                  wlm_gguf_arr_str(kv, 3, &s) == 0 && wlm_gguf_str_eq(s, "<0x00>") &&
                  wlm_gguf_arr_str(kv, 259, &s) == 0 && wlm_gguf_str_eq(s, "\xe2\x96\x81t"));
            kv = wlm_gguf_find_kv(&g, "tokenizer.ggml.token_type");
            CHECK(kv && kv->arr.n == 512 && wlm_gguf_arr_i64(kv, 0, &i) == 0 && i == 2 &&
                  wlm_gguf_arr_i64(kv, 1, &i) == 0 && i == 3 && wlm_gguf_arr_i64(kv, 2, &i) == 0 &&
                  i == 3 && wlm_gguf_arr_i64(kv, 3, &i) == 0 && i == 6 &&
                  wlm_gguf_arr_i64(kv, 258, &i) == 0 && i == 6 &&
                  wlm_gguf_arr_i64(kv, 259, &i) == 0 && i == 1);
            /* The same vocabulary as ggml-org's file, token for token (scores included). */
            size_t ref_size = 0;
            unsigned char *refg = tu_read_shared("models/stories260K.gguf", &ref_size);
            wlm_gguf r;
            if (refg && wlm_gguf_parse(&r, refg, ref_size, NULL, 0) == WLM_OK) {
                const char *keys[] = {"tokenizer.ggml.tokens", "tokenizer.ggml.token_type",
                                      "tokenizer.ggml.scores"};
                for (int k = 0; k < 3; k++) {
                    const wlm_gguf_kv *a = wlm_gguf_find_kv(&g, keys[k]);
                    const wlm_gguf_kv *b = wlm_gguf_find_kv(&r, keys[k]);
                    int eq = a && b && a->arr.n == b->arr.n && a->arr.type == b->arr.type;
                    for (uint64_t e = 0; eq && e < a->arr.n; e++) {
                        wlm_gguf_str sa, sb;
                        double da, db;
                        if (a->arr.type == WLM_GGUF_STRING)
                            eq = wlm_gguf_arr_str(a, e, &sa) == 0 && wlm_gguf_arr_str(b, e, &sb) == 0 &&
                                 sa.len == sb.len && memcmp(sa.ptr, sb.ptr, sa.len) == 0;
                        else
                            eq = wlm_gguf_arr_f64(a, e, &da) == 0 && wlm_gguf_arr_f64(b, e, &db) == 0 &&
                                 da == db;
                    }
                    CHECKF(eq, "%s differs from ggml-org's stories260K.gguf", keys[k]);
                }
                /* and the weights: ours token_embd = theirs token_embd (and their output) */
                const wlm_gguf_tensor *ta = wlm_gguf_find_tensor(&g, "blk.3.attn_k.weight");
                const wlm_gguf_tensor *tb = wlm_gguf_find_tensor(&r, "blk.3.attn_k.weight");
                CHECK(ta && tb && ta->nbytes == tb->nbytes && memcmp(ta->data, tb->data, ta->nbytes) == 0);
                CHECK(wlm_gguf_find_tensor(&g, "output.weight") == NULL); /* shared */
                wlm_gguf_free(&r);
            }
            free(refg);
            wlm_gguf_free(&g);
        }
        wlm_gguf_writer_free(&w);
        free(mb);
        free(fb);
    }

    tu_section("Q8_0: greedy tokens kept");
    const char *q8_path = "test_quantize_q8_0.gguf";
    wlm_model *q8 = NULL;
    if (m && quantize_to(ref, q8_path, WLM_TYPE_Q8_0, NULL, &log) == WLM_OK &&
        (q8 = load_gguf_path(q8_path)) != NULL) {
        /* stories260K: hidden 172 is not whole blocks of 32, so ffn_down stays F16 */
        CHECKF(strstr(log.text, "rows of 172") && strstr(log.text, "written as F16"), "%s", log.text);
        printf("%s", log.text);
        greedy(q8, &bos, 1, N_GEN, ids_q8, text, sizeof text);
        int prefix = common_prefix(ids_f32, ids_q8, N_GEN);
        printf("Q8_0: %d of the first %d greedy tokens (after BOS) identical to F32 before the "
               "first difference; %d identical position by position\n",
               prefix, N_GEN, same_positions(ids_f32, ids_q8, N_GEN));
        CHECKF(prefix >= 100, "only %d identical greedy tokens", prefix);
        int32_t p[64];
        int32_t np = wlm_tokenize(ref, "Once upon a time", 16, 1, p, 64);
        if (np > 0 && np <= 64) {
            greedy(m, p, np, N_GEN, ids_ref, NULL, 0);
            greedy(q8, p, np, N_GEN, ids, NULL, 0);
            printf("Q8_0 after \"Once upon a time\": %d identical before the first difference\n",
                   common_prefix(ids_ref, ids, N_GEN));
        }
    }

    tu_section("Q4_0: still writes text");
    const char *q4_path = "test_quantize_q4_0.gguf";
    wlm_model *q4 = NULL;
    if (quantize_to(ref, q4_path, WLM_TYPE_Q4_0, NULL, &log) == WLM_OK &&
        (q4 = load_gguf_path(q4_path)) != NULL) {
        int32_t p[64];
        int32_t np = wlm_tokenize(q4, "Once upon a time", 16, 1, p, 64);
        CHECK(np > 0 && np <= 64);
        if (np > 0 && np <= 64 && greedy(q4, p, np, N_GEN, ids, text, sizeof text) == N_GEN) {
            printf("Q4_0 greedy, %d tokens after \"Once upon a time\":\nOnce upon a time%s\n",
                   N_GEN, text);
            CHECK(strlen(text) > 100 && printable_text(text));
            printf("Q4_0: %d of %d identical to F32 before the first difference\n",
                   common_prefix(ids_ref, ids, N_GEN), N_GEN);
        }
    }

    tu_section("every other type and mix: fallbacks reported, the files load, generate, and "
               "give logits near F32's");
    {
        /* the fallback each type's 64-column rows get (0: none needed); 172 columns (hidden)
         * are never whole blocks of 32: F16 */
        /* stories260K (dim 64) is small enough for 4- and 5-bit weights to move its logits a
         * lot: measured 0.05 (Q8_0) to 0.42 (Q4_0) of the largest logit; the bounds are those
         * plus a margin, against ~1 for a tensor read wrongly (and the text must stay text) */
        static const struct {
            int32_t type, mix, fb64;
            double tol; /* max |logit - F32 logit| / max |F32 logit| over the prompt */
        } others[] = {
            {WLM_TYPE_F16, 0, 0, 0.002},       {WLM_TYPE_BF16, 0, 0, 0.02},
            {WLM_TYPE_Q8_0, 0, 0, 0.08},       {WLM_TYPE_Q4_0, 0, 0, 0.6},
            {WLM_TYPE_Q4_1, 0, 0, 0.5},        {WLM_TYPE_Q5_0, 0, 0, 0.35},
            {WLM_TYPE_Q5_1, 0, 0, 0.35},       {WLM_TYPE_Q2_K, 0, WLM_TYPE_Q4_0, 0.6},
            {WLM_TYPE_Q3_K, 0, WLM_TYPE_Q4_0, 0.6}, {WLM_TYPE_Q4_K, 0, WLM_TYPE_Q5_0, 0.35},
            {WLM_TYPE_Q5_K, 0, WLM_TYPE_Q5_1, 0.35}, {WLM_TYPE_Q6_K, 0, WLM_TYPE_Q8_0, 0.08},
            {WLM_TYPE_MXFP4, 0, 0, 0.6},
            {0, WLM_QUANT_MIX_Q3_K_M, 0, 0.55}, {0, WLM_QUANT_MIX_Q4_K_M, 0, 0.35},
            {0, WLM_QUANT_MIX_Q5_K_M, 0, 0.35},
        };
        const int32_t seq[8] = {1, 403, 407, 261, 378, 290, 300, 411};
        for (size_t k = 0; k < sizeof others / sizeof others[0]; k++) {
            const char *path = "test_quantize_other.gguf";
            const int32_t type = others[k].type, mix = others[k].mix;
            const char *name = mix ? wlm_quantize_mix_name(mix) : wlm_type_get(type)->name;
            wlm_quantize_params p;
            wlm_quantize_params_default(&p);
            p.type = type;
            p.mix = mix;
            p.name = "stories260K";
            p.log = collect;
            p.user = &log;
            log.text[0] = '\0';
            char err[512] = "";
            if (!CHECKF(wlm_quantize_model(ref, path, &p, err, sizeof err) == WLM_OK, "%s: %s",
                        name, err))
                continue;
            if (type == WLM_TYPE_F16 || type == WLM_TYPE_BF16) { /* any row length */
                CHECKF(log.text[0] == '\0', "%s: %s", name, log.text);
            } else if (!mix) {
                char want[64];
                snprintf(want, sizeof want, "written as %s",
                         wlm_type_get(others[k].fb64 ? others[k].fb64 : WLM_TYPE_F16)->name);
                CHECKF(strstr(log.text, "rows of 172") && strstr(log.text, "written as F16") &&
                           strstr(log.text, want) &&
                           (others[k].fb64 != 0) == (strstr(log.text, "rows of 64") != NULL),
                       "%s: %s", name, log.text);
            }
            /* the file's types, tensor by tensor, and general.file_type */
            size_t fsize = 0;
            unsigned char *fb = read_path(path, &fsize);
            wlm_gguf g;
            if (fb && wlm_gguf_parse(&g, fb, fsize, NULL, 0) == WLM_OK) {
                uint32_t ft = 0;
                static const uint32_t ftypes[][2] = {
                    {WLM_TYPE_F16, 1},   {WLM_TYPE_BF16, 32}, {WLM_TYPE_Q4_1, 3},
                    {WLM_TYPE_Q5_0, 8},  {WLM_TYPE_Q5_1, 9},  {WLM_TYPE_Q2_K, 10},
                    {WLM_TYPE_Q3_K, 11}, {WLM_TYPE_Q4_K, 14}, {WLM_TYPE_Q5_K, 16},
                    {WLM_TYPE_Q6_K, 18}, {WLM_TYPE_Q8_0, 7},  {WLM_TYPE_Q4_0, 2},
                    {WLM_TYPE_MXFP4, 38}};
                uint32_t want_ft = (uint32_t)mix;
                for (size_t i = 0; !mix && i < sizeof ftypes / sizeof ftypes[0]; i++)
                    if (ftypes[i][0] == (uint32_t)type) want_ft = ftypes[i][1];
                CHECKF(wlm_gguf_get_u32(&g, "general.file_type", &ft, NULL, 0) == 0 &&
                           ft == want_ft,
                       "%s: general.file_type %u, want %u", name, ft, want_ft);
                int bad = 0;
                for (int l = 0; l < ri.n_layers; l++) {
                    static const char *const mats[] = {"attn_q", "attn_k", "attn_v",
                                                       "attn_output", "ffn_gate", "ffn_up",
                                                       "ffn_down"};
                    for (int j = 0; j < 7; j++) {
                        char tn[64];
                        snprintf(tn, sizeof tn, "blk.%d.%s.weight", l, mats[j]);
                        int32_t want = others[k].fb64 ? others[k].fb64 : type;
                        if (j == 6 && (mix || wlm_type_get(type)->block_size != 1))
                            want = WLM_TYPE_F16;
                        /* stories260K in the mixes (5 layers, rows of 64 and 172):
                         * Q4_K_M / Q5_K_M: base Q4_K / Q5_K -> Q5_0 / Q5_1, attn_v of the
                         * use_more_bits layers 2 and 4 Q6_K -> Q8_0; Q3_K_M: base Q3_K ->
                         * Q4_0, attn_v Q5_K (layers 0, 1) -> Q5_1 else Q4_K -> Q5_0,
                         * attn_output Q4_K -> Q5_0; ffn_down F16 throughout */
                        if (mix == WLM_QUANT_MIX_Q4_K_M || mix == WLM_QUANT_MIX_Q5_K_M) {
                            const int32_t base = mix == WLM_QUANT_MIX_Q4_K_M ? WLM_TYPE_Q5_0
                                                                            : WLM_TYPE_Q5_1;
                            if (j != 6) want = j == 2 && (l == 2 || l == 4) ? WLM_TYPE_Q8_0 : base;
                        } else if (mix == WLM_QUANT_MIX_Q3_K_M && j != 6) {
                            want = j == 2 ? (l < 2 ? WLM_TYPE_Q5_1 : WLM_TYPE_Q5_0)
                                 : j == 3 ? WLM_TYPE_Q5_0
                                          : WLM_TYPE_Q4_0;
                        }
                        if (file_tensor_type(&g, tn) != want) {
                            if (bad++ < 3)
                                printf("%s: %s is %d, want %d\n", name, tn,
                                       (int)file_tensor_type(&g, tn), (int)want);
                        }
                    }
                    char tn[64];
                    snprintf(tn, sizeof tn, "blk.%d.ffn_norm.weight", l);
                    bad += file_tensor_type(&g, tn) != WLM_TYPE_F32;
                }
                /* the tied token embedding: the classifier's Q6_K, whose fallback is Q8_0,
                 * in the mixes; the type (or its fallback) otherwise */
                const int32_t emb = mix ? WLM_TYPE_Q8_0 : others[k].fb64 ? others[k].fb64 : type;
                bad += file_tensor_type(&g, "token_embd.weight") != emb;
                CHECKF(bad == 0, "%s: %d tensors of the wrong type", name, bad);
                wlm_gguf_free(&g);
            } else {
                CHECKF(0, "%s: cannot parse the file", name);
            }
            free(fb);
            wlm_model *o = load_gguf_path(path);
            if (o && greedy(o, &bos, 1, N_GEN, ids, text, sizeof text) == N_GEN) {
                const double d = logit_rel_diff(o, m, seq, 8, ri.vocab_size);
                printf("%s: logits within %.4f of F32's (largest logit = 1); %d of %d greedy "
                       "tokens identical to F32 before the first difference\n",
                       name, d, common_prefix(ids_f32, ids, N_GEN), N_GEN);
                CHECKF(d <= others[k].tol, "%s: logits differ from F32 by %.4f > %.4f", name, d,
                       others[k].tol);
                CHECKF(strlen(text) > 100 && printable_text(text), "%s: greedy text: %s", name,
                       text);
            }
            wlm_model_free(o);
            remove(path);
        }
    }

    tu_section("GGUF sources: ours (F32) and ggml-org's stories260K.gguf, to Q8_0");
    const char *srcs[2] = {f32_path, NULL};
    size_t ggml_size = 0;
    unsigned char *ggml = tu_read_shared("models/stories260K.gguf", &ggml_size);
    for (int k = 0; k < 2 && q8; k++) {
        size_t size = 0;
        unsigned char *buf = k == 0 ? read_path(srcs[k], &size) : ggml;
        if (k == 1) size = ggml_size;
        if (!buf) continue;
        wlm_model *s = NULL;
        wlm_gguf g;
        const char *path = "test_quantize_from_gguf.gguf";
        if (wlm_model_load(buf, size, 0, &s) == WLM_OK &&
            wlm_gguf_parse(&g, buf, size, NULL, 0) == WLM_OK) {
            if (quantize_to(s, path, WLM_TYPE_Q8_0, &g, &log) == WLM_OK) {
                wlm_model *o = load_gguf_path(path);
                if (o && greedy(o, &bos, 1, N_GEN, ids, NULL, 0) == N_GEN)
                    CHECKF(memcmp(ids, ids_q8, sizeof ids) == 0,
                           "source %d: Q8_0 greedy differs from the .bin's Q8_0", k);
                /* the source's own keys came along */
                size_t osize = 0;
                unsigned char *ob = read_path(path, &osize);
                wlm_gguf og;
                if (ob && wlm_gguf_parse(&og, ob, osize, NULL, 0) == WLM_OK) {
                    uint32_t u = 0;
                    wlm_gguf_str nm;
                    CHECK(wlm_gguf_get_u32(&og, "general.file_type", &u, NULL, 0) == 0 && u == 7);
                    CHECK(wlm_gguf_get_str(&og, "general.name", &nm, NULL, 0) == 0 &&
                          wlm_gguf_str_eq(nm, k == 0 ? "stories260K" : "llama"));
                    if (k == 1) {
                        CHECK(wlm_gguf_find_kv(&og, "tokenizer.ggml.padding_token_id") != NULL);
                        CHECK(wlm_gguf_find_tensor(&og, "output.weight") != NULL);
                    }
                    wlm_gguf_free(&og);
                }
                free(ob);
                wlm_model_free(o);
            }
            wlm_gguf_free(&g);
        }
        wlm_model_free(s);
        remove(path);
        if (k == 0) free(buf);
    }
    free(ggml);

    tu_section("errors leave no file");
    {
        char err[256] = "";
        wlm_quantize_params p;
        wlm_quantize_params_default(&p);
        p.type = WLM_TYPE_Q8_K; /* a type ggml knows, but activations only */
        CHECK_STATUS(wlm_quantize_model(ref, "test_quantize_bad.gguf", &p, err, sizeof err),
                     WLM_ERR_INVALID_ARG);
        CHECK(strstr(err, "not a quantize target") != NULL);
        p.type = WLM_TYPE_Q4_K;
        p.mix = 14; /* Q4_K_S: not offered as a mix */
        CHECK_STATUS(wlm_quantize_model(ref, "test_quantize_bad.gguf", &p, err, sizeof err),
                     WLM_ERR_INVALID_ARG);
        CHECK(strstr(err, "mix 14") != NULL);
        p.mix = 0;
        p.type = 99;
        CHECK_STATUS(wlm_quantize_model(ref, "test_quantize_bad.gguf", &p, err, sizeof err),
                     WLM_ERR_INVALID_ARG);
        CHECK(!tu_file_exists("test_quantize_bad.gguf") && !tu_file_exists("test_quantize_bad.gguf.tmp"));
        p.type = WLM_TYPE_Q8_0;
        CHECK(wlm_quantize_model(ref, "no_such_dir/x.gguf", &p, err, sizeof err) != WLM_OK);
        CHECK(strstr(err, "cannot create") != NULL);
        CHECK(wlm_quantize_model(ref, "", &p, err, sizeof err) == WLM_ERR_INVALID_ARG);
        CHECK(wlm_quantize_model(NULL, "x.gguf", &p, err, sizeof err) == WLM_ERR_INVALID_ARG);
        CHECK(!tu_file_exists("x.gguf") && !tu_file_exists("x.gguf.tmp"));
        /* A vocabulary-only model has nothing to write. */
        size_t vs = 0;
        unsigned char *vb = tu_read_shared("models/vocab/ggml-vocab-llama-spm.gguf", &vs);
        wlm_model *v = NULL;
        if (vb && wlm_model_load(vb, vs, WLM_LOAD_VOCAB_ONLY, &v) == WLM_OK) {
            CHECK_STATUS(wlm_quantize_model(v, "test_quantize_bad.gguf", &p, err, sizeof err),
                         WLM_ERR_STATE);
            CHECK(!tu_file_exists("test_quantize_bad.gguf") &&
                  !tu_file_exists("test_quantize_bad.gguf.tmp"));
        }
        wlm_model_free(v);
        free(vb);
        CHECK(wlm_quantize_type_from_name("q4_k") == WLM_TYPE_Q4_K &&
              wlm_quantize_type_from_name("F16") == WLM_TYPE_F16 &&
              wlm_quantize_type_from_name("Q5_K") == WLM_TYPE_Q5_K &&
              wlm_quantize_type_from_name("bf16") == WLM_TYPE_BF16 &&
              wlm_quantize_type_from_name("Q8_K") == -1 &&
              wlm_quantize_type_from_name("Q4_K_M") == -1 && wlm_quantize_type_from_name("Q8") == -1 &&
              wlm_quantize_type_from_name("") == -1);
        CHECK(wlm_quantize_tensor_type(WLM_TYPE_Q4_K, 2048) == WLM_TYPE_Q4_K &&
              wlm_quantize_tensor_type(WLM_TYPE_Q4_K, 288) == WLM_TYPE_Q5_0 &&
              wlm_quantize_tensor_type(WLM_TYPE_Q6_K, 172) == WLM_TYPE_F16 &&
              wlm_quantize_tensor_type(WLM_TYPE_F32, 172) == WLM_TYPE_F32 &&
              wlm_quantize_tensor_type(WLM_TYPE_Q4_0, 64) == WLM_TYPE_Q4_0);
    }

    wlm_model_free(q4);
    wlm_model_free(q8);
    wlm_model_free(m);
    wlm_model_free(ref);
    remove(f32_path);
    remove(q8_path);
    remove(q4_path);
}

/* Any architecture (wlm_quantize_gguf_write): a small gpt2-like file — keys of several types,
 * 2-D weight matrices, 1-D norms and biases, learned positions — converted to Q8_0 and to
 * Q4_K_M keeps every key/value and every tensor in order; only the weight matrices change type
 * (and dequantize close to the originals); norms, biases and position_embd keep their bytes. */
static void test_any_architecture(void) {
    enum { D = 64, V = 40, CTX = 16, F = 256 };
    static float emb[V * D], pos[CTX * D], qkv[3 * D * D], qkv_b[3 * D], norm[D], up[F * D],
        down[D * F];
    uint32_t seed = 7;
    float *all[] = {emb, pos, qkv, qkv_b, norm, up, down};
    const size_t cnt[] = {V * D, CTX * D, 3 * D * D, 3 * D, D, F * D, D * F};
    for (size_t k = 0; k < 7; k++)
        for (size_t i = 0; i < cnt[k]; i++) {
            seed = seed * 1664525u + 1013904223u;
            all[k][i] = ((float)(seed >> 8) / 16777216.0f - 0.5f) * (k == 4 ? 0.2f : 2.0f) +
                        (k == 4 ? 1.0f : 0.0f);
        }
    const struct {
        const char *name;
        uint32_t nd;
        int64_t ne[2];
        const float *data;
        int matrix; /* converted */
    } t[] = {
        {"token_embd.weight", 2, {D, V}, emb, 1},      {"position_embd.weight", 2, {D, CTX}, pos, 0},
        {"blk.0.attn_norm.weight", 1, {D, 1}, norm, 0}, {"blk.0.attn_norm.bias", 1, {D, 1}, qkv_b, 0},
        {"blk.0.attn_qkv.weight", 2, {D, 3 * D}, qkv, 1}, {"blk.0.attn_qkv.bias", 1, {3 * D, 1}, qkv_b, 0},
        {"blk.0.ffn_up.weight", 2, {D, F}, up, 1},      {"blk.0.ffn_down.weight", 2, {F, D}, down, 1},
        {"output_norm.weight", 1, {D, 1}, norm, 0},
    };
    const size_t nt = sizeof t / sizeof t[0];
    wlm_gguf_writer w;
    wlm_gguf_writer_init(&w, NULL);
    wlm_gguf_add_str(&w, "general.architecture", "gpt2");
    wlm_gguf_add_u32(&w, "general.file_type", 0);
    wlm_gguf_add_u32(&w, "gpt2.embedding_length", D);
    wlm_gguf_add_f32(&w, "gpt2.attention.layer_norm_epsilon", 1e-5f);
    wlm_gguf_add_bool(&w, "tokenizer.ggml.add_bos_token", 0);
    const float arr[3] = {1.5f, -2.0f, 4.0f};
    wlm_gguf_add_arr(&w, "gpt2.some_factors", WLM_GGUF_FLOAT32, arr, 3);
    const char *toks[2] = {"a", "bc"};
    const size_t lens[2] = {1, 2};
    wlm_gguf_add_arr_str(&w, "tokenizer.ggml.tokens", toks, lens, 2);
    for (size_t i = 0; i < nt; i++) wlm_gguf_add_tensor(&w, t[i].name, t[i].nd, t[i].ne, WLM_TYPE_F32);
    wlm_gguf_write_header(&w);
    for (size_t i = 0; i < nt; i++)
        wlm_gguf_write_data(&w, t[i].data, (size_t)(t[i].ne[0] * t[i].ne[1]) * sizeof(float));
    CHECK_STATUS(wlm_gguf_writer_finish(&w), WLM_OK);
    size_t in_size = 0;
    unsigned char *in_mem = wlm_gguf_writer_take(&w, &in_size);
    wlm_gguf_writer_free(&w);
    char err[256] = "";
    wlm_gguf src;
    CHECK_STATUS(wlm_gguf_parse(&src, in_mem, in_size, err, sizeof err), WLM_OK);

    const int32_t mixes_or_types[2][2] = {{WLM_TYPE_Q8_0, 0}, {WLM_TYPE_F32, WLM_QUANT_MIX_Q4_K_M}};
    for (int run = 0; run < 2; run++) {
        wlm_quantize_params qp;
        wlm_quantize_params_default(&qp);
        qp.type = mixes_or_types[run][0];
        qp.mix = mixes_or_types[run][1];
        wlm_gguf_writer_init(&w, NULL);
        CHECK_STATUS(wlm_quantize_gguf_write(&src, &w, &qp, err, sizeof err), WLM_OK);
        size_t size = 0;
        unsigned char *mem = wlm_gguf_writer_take(&w, &size);
        wlm_gguf_writer_free(&w);
        wlm_gguf out;
        if (!CHECK(mem && wlm_gguf_parse(&out, mem, size, err, sizeof err) == WLM_OK)) {
            free(mem);
            continue;
        }
        /* every key of the source, with its value; file_type rewritten */
        uint32_t ft = 0, d = 0;
        float eps = 0;
        int bos = 1;
        wlm_gguf_str arch = {NULL, 0};
        CHECK(wlm_gguf_get_str(&out, "general.architecture", &arch, err, sizeof err) == WLM_OK &&
              arch.len == 4 && memcmp(arch.ptr, "gpt2", 4) == 0);
        CHECK(wlm_gguf_get_u32(&out, "general.file_type", &ft, err, sizeof err) == WLM_OK &&
              ft == (run ? 15u : 7u));
        CHECK(wlm_gguf_get_u32(&out, "gpt2.embedding_length", &d, err, sizeof err) == WLM_OK && d == D);
        CHECK(wlm_gguf_get_f32(&out, "gpt2.attention.layer_norm_epsilon", &eps, err, sizeof err) == WLM_OK &&
              eps == 1e-5f);
        CHECK(wlm_gguf_get_bool(&out, "tokenizer.ggml.add_bos_token", &bos, err, sizeof err) == WLM_OK && !bos);
        const wlm_gguf_kv *a = NULL;
        CHECK(wlm_gguf_get_arr(&out, "gpt2.some_factors", WLM_GGUF_FLOAT32, &a, err, sizeof err) == WLM_OK &&
              a->arr.n == 3 && memcmp(a->arr.data, arr, sizeof arr) == 0);
        CHECK(wlm_gguf_get_arr(&out, "tokenizer.ggml.tokens", WLM_GGUF_STRING, &a, err, sizeof err) == WLM_OK &&
              a->arr.n == 2);
        CHECK_EQ_INT((int)out.n_tensors, (int)nt);
        for (size_t i = 0; i < nt && i < out.n_tensors; i++) {
            const wlm_gguf_tensor *o = &out.tensors[i];
            CHECKF(o->name.len == strlen(t[i].name) && memcmp(o->name.ptr, t[i].name, o->name.len) == 0,
                   "tensor %zu is %s", i, t[i].name);
            CHECK(o->n_dims == t[i].nd && o->ne[0] == t[i].ne[0] && o->ne[1] == t[i].ne[1]);
            const size_t n = (size_t)(t[i].ne[0] * t[i].ne[1]);
            if (!t[i].matrix) { /* kept: F32, the same bytes */
                CHECKF(o->type == WLM_TYPE_F32 && memcmp(o->data, t[i].data, n * 4) == 0,
                       "%s keeps its type and bytes", t[i].name);
                continue;
            }
            int32_t want = WLM_TYPE_Q8_0;
            if (run) { /* Q4_K_M: the tied classifier Q8_0 (rows of 64), fused QKV Q5_K -> Q5_0
                        * (rows of 64), ffn_up Q4_K -> Q5_0, ffn_down (rows of 256, layer 0 of
                        * 1: use_more_bits) Q6_K */
                want = i == 0 ? WLM_TYPE_Q8_0 : i == 7 ? WLM_TYPE_Q6_K : WLM_TYPE_Q5_0;
                if (i == 4) want = wlm_quantize_tensor_type(WLM_TYPE_Q5_K, D);
            }
            CHECKF(o->type == want, "%s: type %d, want %d", t[i].name, (int)o->type, (int)want);
            const wlm_type_traits *tt = wlm_type_get(o->type);
            float *back = malloc(n * sizeof *back);
            if (!back) continue;
            const size_t rb = wlm_row_bytes(o->type, o->ne[0]);
            for (int64_t r = 0; r < o->ne[1]; r++)
                tt->to_float((const unsigned char *)o->data + (size_t)r * rb, back + r * o->ne[0], o->ne[0]);
            double worst = 0;
            for (size_t k = 0; k < n; k++) worst = fmax(worst, fabs(back[k] - t[i].data[k]));
            CHECKF(worst < 0.1, "%s dequantizes within 0.1 of the original (%g)", t[i].name, worst);
            free(back);
        }
        wlm_gguf_free(&out);
        free(mem);
    }
    wlm_gguf_free(&src);
    free(in_mem);
}

/* A GGUF in memory with these F32 tensors (values all 0.25) and general.architecture `arch`;
 * parsed into *g, its bytes returned (free after wlm_gguf_free). */
typedef struct {
    const char *name;
    uint32_t nd;
    int64_t ne[2];
} tensor_shape;
static unsigned char *hybrid_file(const char *arch, const tensor_shape *t, size_t nt, wlm_gguf *g) {
    wlm_gguf_writer w;
    wlm_gguf_writer_init(&w, NULL);
    wlm_gguf_add_str(&w, "general.architecture", arch);
    for (size_t i = 0; i < nt; i++) wlm_gguf_add_tensor(&w, t[i].name, t[i].nd, t[i].ne, WLM_TYPE_F32);
    wlm_gguf_write_header(&w);
    for (size_t i = 0; i < nt; i++) {
        const size_t n = (size_t)(t[i].ne[0] * (t[i].nd > 1 ? t[i].ne[1] : 1));
        float *v = malloc(n * sizeof *v);
        if (!v) break;
        for (size_t k = 0; k < n; k++) v[k] = 0.25f;
        wlm_gguf_write_data(&w, v, n * sizeof *v);
        free(v);
    }
    size_t size = 0;
    unsigned char *mem = wlm_gguf_writer_finish(&w) == WLM_OK ? wlm_gguf_writer_take(&w, &size) : NULL;
    wlm_gguf_writer_free(&w);
    char err[256] = "";
    if (!mem || wlm_gguf_parse(g, mem, size, err, sizeof err) != WLM_OK) {
        CHECKF(0, "%s test file: %s", arch, err);
        free(mem);
        return NULL;
    }
    return mem;
}

/* The types `mix` (or `type`) gives the tensors of g, written through wlm_quantize_gguf_write
 * and read back (out[i] for tensor i), so the whole path is checked, not only the rule. */
static int quantized_types(const wlm_gguf *g, int32_t type, int32_t mix, int32_t *out) {
    wlm_quantize_params qp;
    wlm_quantize_params_default(&qp);
    qp.type = type;
    qp.mix = mix;
    wlm_gguf_writer w;
    wlm_gguf_writer_init(&w, NULL);
    char err[256] = "";
    int rc = wlm_quantize_gguf_write(g, &w, &qp, err, sizeof err);
    size_t size = 0;
    unsigned char *mem = rc == WLM_OK ? wlm_gguf_writer_take(&w, &size) : NULL;
    wlm_gguf_writer_free(&w);
    wlm_gguf o;
    if (!mem || wlm_gguf_parse(&o, mem, size, err, sizeof err) != WLM_OK) {
        CHECKF(0, "quantize: %s", err);
        free(mem);
        return 0;
    }
    for (size_t i = 0; i < o.n_tensors; i++) out[i] = (int32_t)o.tensors[i].type;
    wlm_gguf_free(&o);
    free(mem);
    return 1;
}

/* Hybrid architectures (llama.cpp b12211's llama-quant.cpp): the recurrent blocks' conv kernels
 * and every 1-D tensor stay F32; the DeltaNet's attn_qkv takes the attn_v rule; the attn_v
 * rule counts attn_v-like matrices, not blocks (lfm2's conv blocks have none); the other new
 * matrices take the base type with the row-length fallback. Shapes: the tiny synthetic files
 * (tools/synth_gguf.mjs) with a 256-wide embedding so that Q4_K and Q6_K fit whole rows. */
static void test_hybrid_rules(void) {
    tu_section("quantize: qwen35 and lfm2 tensors, as llama.cpp picks their types");
    enum { D = 256, F = 512, V = 300, S = 16, HK = 2, HV = 4, C = 2 * HK * S + HV * S, HD = 32 };
    const int32_t Q8 = WLM_TYPE_Q8_0, Q4K = WLM_TYPE_Q4_K, Q6K = WLM_TYPE_Q6_K, Q5_0 = WLM_TYPE_Q5_0,
                  F32 = WLM_TYPE_F32;
    /* qwen35, 4 blocks, DeltaNet at 0 and 2, attention at 1 and 3, tied */
    const tensor_shape q[] = {
        {"token_embd.weight", 2, {D, V}},                 /* 0 */
        {"blk.0.attn_norm.weight", 1, {D, 1}},            /* 1 */
        {"blk.0.attn_qkv.weight", 2, {D, C}},             /* 2 */
        {"blk.0.attn_gate.weight", 2, {D, HV * S}},       /* 3 */
        {"blk.0.ssm_conv1d.weight", 2, {4, C}},           /* 4 */
        {"blk.0.ssm_dt.bias", 1, {HV, 1}},                /* 5 */
        {"blk.0.ssm_a", 1, {HV, 1}},                      /* 6 */
        {"blk.0.ssm_beta.weight", 2, {D, HV}},            /* 7 */
        {"blk.0.ssm_alpha.weight", 2, {D, HV}},           /* 8 */
        {"blk.0.ssm_norm.weight", 1, {S, 1}},             /* 9 */
        {"blk.0.ssm_out.weight", 2, {HV * S, D}},         /* 10 */
        {"blk.0.post_attention_norm.weight", 1, {D, 1}},  /* 11 */
        {"blk.0.ffn_down.weight", 2, {F, D}},             /* 12 */
        {"blk.1.attn_q.weight", 2, {D, 2 * 4 * HD}},      /* 13 */
        {"blk.1.attn_k.weight", 2, {D, 2 * HD}},          /* 14 */
        {"blk.1.attn_v.weight", 2, {D, 2 * HD}},          /* 15 */
        {"blk.1.attn_q_norm.weight", 1, {HD, 1}},         /* 16 */
        {"blk.1.attn_output.weight", 2, {4 * HD, D}},     /* 17 */
        {"blk.1.ffn_down.weight", 2, {F, D}},             /* 18 */
        {"blk.2.attn_qkv.weight", 2, {D, C}},             /* 19 */
        {"blk.2.ffn_down.weight", 2, {F, D}},             /* 20 */
        {"blk.3.attn_v.weight", 2, {D, 2 * HD}},          /* 21 */
        {"blk.3.ffn_down.weight", 2, {F, D}},             /* 22 */
        {"output_norm.weight", 1, {D, 1}},                /* 23 */
    };
    const size_t nq = sizeof q / sizeof q[0];
    /* Q4_K_M: the attn_v-like ones are qkv 0, v 1, qkv 2, v 3 of 4: use_more_bits(i, 4) holds
     * for i = 2 (i % 3 == 2) and i = 3 (>= 7·4/8); ffn_down by block, the same here. ssm_out's
     * rows of 64 and attn_output's of 128 fall back to Q5_0; the tied embedding Q6_K. */
    const int32_t want_q4m[] = {Q6K, F32, Q4K, Q4K, F32, F32, F32, Q4K, Q4K, F32, Q5_0, F32, Q4K,
                                Q4K, Q4K, Q4K, F32, Q5_0, Q4K, Q6K, Q6K, Q6K, Q6K, F32};
    int32_t got[32];
    wlm_gguf g;
    unsigned char *mem = hybrid_file("qwen35", q, nq, &g);
    if (mem) {
        if (quantized_types(&g, WLM_TYPE_F32, WLM_QUANT_MIX_Q4_K_M, got))
            for (size_t i = 0; i < nq; i++)
                CHECKF(got[i] == want_q4m[i], "qwen35 Q4_K_M %s: type %d, want %d", q[i].name,
                       (int)got[i], (int)want_q4m[i]);
        if (quantized_types(&g, WLM_TYPE_Q8_0, 0, got))
            for (size_t i = 0; i < nq; i++) {
                const int32_t want = want_q4m[i] == F32 ? F32 : Q8;
                CHECKF(got[i] == want, "qwen35 Q8_0 %s: type %d, want %d", q[i].name, (int)got[i],
                       (int)want);
            }
        /* the same file under another architecture name: attn_qkv takes the fused-QKV rule */
        wlm_quantize_file f;
        wlm_quantize_file_of(&g, &f);
        CHECK(f.n_layers == 4 && f.tied && f.n_attn_v == 4 && f.qkv_as_v);
        wlm_quantize_params qp;
        wlm_quantize_params_default(&qp);
        qp.mix = WLM_QUANT_MIX_Q4_K_M;
        f.qkv_as_v = 0;
        CHECK(wlm_quantize_gguf_tensor_type(&g.tensors[19], &qp, &f, 2) == WLM_TYPE_Q5_K);
        f.qkv_as_v = 1;
        CHECK(wlm_quantize_gguf_tensor_type(&g.tensors[19], &qp, &f, 2) == Q6K);
        CHECK(wlm_quantize_gguf_tensor_type(&g.tensors[19], &qp, &f, 1) == Q4K);
        wlm_gguf_free(&g);
        free(mem);
    }
    CHECK(wlm_quantize_qkv_as_v("qwen35", 6) && !wlm_quantize_qkv_as_v("phi3", 4) &&
          !wlm_quantize_qkv_as_v("qwen3", 5) && !wlm_quantize_qkv_as_v(NULL, 0));
    CHECK(wlm_quantize_attn_v_like("blk.3.attn_v.weight", 19) &&
          wlm_quantize_attn_v_like("blk.0.attn_qkv.weight", 21) &&
          !wlm_quantize_attn_v_like("blk.0.attn_q.weight", 19) &&
          !wlm_quantize_attn_v_like("blk.0.attn_v.bias", 17));

    /* lfm2, 6 blocks, attention at 2 and 4 (the attn_v-like ones 0 and 1 of 2), untied */
    const tensor_shape l[] = {
        {"token_embd.weight", 2, {D, V}},                  /* 0 */
        {"token_embd_norm.weight", 1, {D, 1}},             /* 1 */
        {"blk.0.shortconv.in_proj.weight", 2, {D, 3 * D}}, /* 2 */
        {"blk.0.shortconv.conv.weight", 2, {3, D}},        /* 3 */
        {"blk.0.shortconv.out_proj.weight", 2, {D, D}},    /* 4 */
        {"blk.0.ffn_down.weight", 2, {F, D}},              /* 5 */
        {"blk.1.ffn_down.weight", 2, {F, D}},              /* 6 */
        {"blk.2.attn_v.weight", 2, {D, 2 * HD}},           /* 7 */
        {"blk.2.ffn_down.weight", 2, {F, D}},              /* 8 */
        {"blk.3.ffn_down.weight", 2, {F, D}},              /* 9 */
        {"blk.4.attn_v.weight", 2, {D, 2 * HD}},           /* 10 */
        {"blk.4.ffn_down.weight", 2, {F, D}},              /* 11 */
        {"blk.5.ffn_down.weight", 2, {F, D}},              /* 12 */
        {"output.weight", 2, {D, V}},                      /* 13 */
    };
    const size_t nl = sizeof l / sizeof l[0];
    /* attn_v: use_more_bits(0, 2) no, (1, 2) yes (a block rule would say the opposite: blocks
     * 2 of 6 yes, 4 of 6 no); ffn_down by block over 6 (n/8 = 0, 7n/8 = 5): 2 and 5; the
     * separate embedding the base type, the classifier Q6_K */
    const int32_t want_l[] = {Q4K, F32, Q4K, F32, Q4K, Q4K, Q4K, Q4K, Q6K, Q4K, Q6K, Q4K, Q6K, Q6K};
    mem = hybrid_file("lfm2", l, nl, &g);
    if (mem) {
        if (quantized_types(&g, WLM_TYPE_F32, WLM_QUANT_MIX_Q4_K_M, got))
            for (size_t i = 0; i < nl; i++)
                CHECKF(got[i] == want_l[i], "lfm2 Q4_K_M %s: type %d, want %d", l[i].name,
                       (int)got[i], (int)want_l[i]);
        if (quantized_types(&g, WLM_TYPE_Q4_0, 0, got))
            CHECK(got[3] == F32 && got[1] == F32 && got[2] == WLM_TYPE_Q4_0 && got[7] == WLM_TYPE_Q4_0);
        wlm_gguf_free(&g);
        free(mem);
    }
}

/* llama.cpp's MOSTLY_MXFP4_MOE (llama-quant.cpp): stacked expert matrices (3-D, ne[2] > 1) MXFP4,
 * every other matrix Q8_0 (the classifier and the embedding too), norms F32; general.file_type
 * 38. The experts' bytes are the MXFP4 quantizer's on the source rows, all experts in a row; the
 * name and the shape are kept. */
static void test_mxfp4_moe(void) {
    tu_section("MXFP4_MOE: experts MXFP4, the other matrices Q8_0, as llama.cpp's rule");
    enum { D = 64, F = 32, E = 4, V = 40 };
    static float emb[D * V], norm[D], q[D * D], gate[D * F * E], down[F * D * E], out_w[D * V];
    float *all[6] = {emb, norm, q, gate, down, out_w};
    const size_t counts[6] = {D * V, D, D * D, D * F * E, F * D * E, D * V};
    uint32_t seed = 99;
    for (int k = 0; k < 6; k++)
        for (size_t i = 0; i < counts[k]; i++) {
            seed = seed * 1664525u + 1013904223u;
            all[k][i] = ((float)(seed >> 8) / 16777216.0f - 0.5f) * (k == 1 ? 0.1f : 2.0f) + (k == 1);
        }
    const struct {
        const char *name;
        uint32_t nd;
        int64_t ne[3];
        int32_t want;
    } t[] = {
        {"token_embd.weight", 2, {D, V, 1}, WLM_TYPE_Q8_0},
        {"blk.0.attn_norm.weight", 1, {D, 1, 1}, WLM_TYPE_F32},
        {"blk.0.attn_q.weight", 2, {D, D, 1}, WLM_TYPE_Q8_0},
        {"blk.0.ffn_gate_exps.weight", 3, {D, F, E}, WLM_TYPE_MXFP4},
        {"blk.0.ffn_down_exps.weight", 3, {F, D, E}, WLM_TYPE_MXFP4},
        {"output.weight", 2, {D, V, 1}, WLM_TYPE_Q8_0},
    };
    wlm_gguf_writer w;
    wlm_gguf_writer_init(&w, NULL);
    wlm_gguf_add_str(&w, "general.architecture", "gpt-oss");
    for (int i = 0; i < 6; i++) wlm_gguf_add_tensor(&w, t[i].name, t[i].nd, t[i].ne, WLM_TYPE_F32);
    wlm_gguf_write_header(&w);
    for (int i = 0; i < 6; i++) wlm_gguf_write_data(&w, all[i], counts[i] * sizeof(float));
    CHECK_STATUS(wlm_gguf_writer_finish(&w), WLM_OK);
    size_t in_size = 0, size = 0;
    unsigned char *in_mem = wlm_gguf_writer_take(&w, &in_size);
    wlm_gguf_writer_free(&w);
    char err[256] = "";
    wlm_gguf src, out;
    CHECK_STATUS(wlm_gguf_parse(&src, in_mem, in_size, err, sizeof err), WLM_OK);
    CHECK(wlm_quantize_mix_from_name("mxfp4_moe") == WLM_QUANT_MIX_MXFP4_MOE);
    wlm_quantize_params qp;
    wlm_quantize_params_default(&qp);
    qp.mix = WLM_QUANT_MIX_MXFP4_MOE;
    wlm_gguf_writer_init(&w, NULL);
    CHECK_STATUS(wlm_quantize_gguf_write(&src, &w, &qp, err, sizeof err), WLM_OK);
    unsigned char *mem = wlm_gguf_writer_take(&w, &size);
    wlm_gguf_writer_free(&w);
    if (CHECKF(mem && wlm_gguf_parse(&out, mem, size, err, sizeof err) == WLM_OK, "%s", err) &&
        CHECKF(out.n_tensors == 6, "%zu tensors", (size_t)out.n_tensors)) {
        uint32_t ft = 0;
        CHECK(wlm_gguf_get_u32(&out, "general.file_type", &ft, err, sizeof err) == WLM_OK && ft == 38);
        unsigned char *want = malloc(wlm_row_bytes(WLM_TYPE_MXFP4, (int64_t)F * D * E));
        for (int i = 0; i < 6; i++) {
            const wlm_gguf_tensor *o = &out.tensors[i];
            CHECKF(o->type == t[i].want, "%s: type %d, want %d", t[i].name, (int)o->type,
                   (int)t[i].want);
            CHECKF(o->n_dims == t[i].nd && o->ne[0] == t[i].ne[0] && o->ne[1] == t[i].ne[1] &&
                       o->ne[2] == t[i].ne[2],
                   "%s: shape kept", t[i].name);
            if (t[i].want != WLM_TYPE_MXFP4) continue;
            wlm_type_get(WLM_TYPE_MXFP4)->from_float(all[i], want, (int64_t)counts[i]);
            CHECKF(o->data && o->nbytes == wlm_row_bytes(WLM_TYPE_MXFP4, (int64_t)counts[i]) &&
                       memcmp(o->data, want, o->nbytes) == 0,
                   "%s: the MXFP4 quantizer's bytes", t[i].name);
        }
        free(want);
        wlm_gguf_free(&out);
    }
    wlm_gguf_free(&src);
    free(mem);
    free(in_mem);
}

int main(int argc, char **argv) {
    tu_find_shared(argc, argv);
    test_writer();
    test_mix_rules();
    test_models();
    test_any_architecture();
    test_hybrid_rules();
    test_mxfp4_moe();
    return TEST_FINISH();
}
