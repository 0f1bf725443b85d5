/*
 * gguf.c — GGUF v2/v3 reader over a memory buffer (see gguf.h for the format and contract):
 * a cursor that checks every read against the bytes that remain, then key/values, tensor infos,
 * alignment, tensor data views and sorted indexes for the lookups. Nothing about models here.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/errors.h"
#include "formats/gguf.h"
#include "kernels/quant.h"
#include "wasmlm.h"

/* ---- errors and little-endian reads --------------------------------------------------------- */

#define fail wlm_errorf /* errors.h */

static uint16_t rd16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const unsigned char *p) { return rd32(p) | (uint64_t)rd32(p + 4) << 32; }

/* A printable copy of a name for messages: at most 80 bytes, control and non-ASCII bytes as
 * '?', "..." when cut. */
typedef struct { char s[88]; } name_buf;
static name_buf printable(wlm_gguf_str v) {
    name_buf b;
    size_t n = v.len < 80 ? v.len : 80, i;
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)v.ptr[i];
        b.s[i] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    if (v.len > 80) memcpy(b.s + i, "...", 3), i += 3;
    b.s[i] = '\0';
    return b;
}

int wlm_gguf_str_eq(wlm_gguf_str a, const char *s) {
    size_t n = strlen(s);
    return a.len == n && (n == 0 || memcmp(a.ptr, s, n) == 0);
}

static const struct { const char *name; size_t size; } type_info[WLM_GGUF_TYPE_COUNT] = {
    [WLM_GGUF_UINT8] = {"UINT8", 1},   [WLM_GGUF_INT8] = {"INT8", 1},
    [WLM_GGUF_UINT16] = {"UINT16", 2}, [WLM_GGUF_INT16] = {"INT16", 2},
    [WLM_GGUF_UINT32] = {"UINT32", 4}, [WLM_GGUF_INT32] = {"INT32", 4},
    [WLM_GGUF_FLOAT32] = {"FLOAT32", 4}, [WLM_GGUF_BOOL] = {"BOOL", 1},
    [WLM_GGUF_STRING] = {"STRING", 0}, [WLM_GGUF_ARRAY] = {"ARRAY", 0},
    [WLM_GGUF_UINT64] = {"UINT64", 8}, [WLM_GGUF_INT64] = {"INT64", 8},
    [WLM_GGUF_FLOAT64] = {"FLOAT64", 8},
};

const char *wlm_gguf_type_name(int32_t type) {
    return type >= 0 && type < WLM_GGUF_TYPE_COUNT ? type_info[type].name : "?";
}

size_t wlm_gguf_type_size(int32_t type) {
    return type >= 0 && type < WLM_GGUF_TYPE_COUNT ? type_info[type].size : 0;
}

/* ---- the cursor ---------------------------------------------------------------------------- */

typedef struct cursor {
    const unsigned char *base;
    size_t size, pos;
    char *err;
    size_t errlen;
} cursor;

static size_t remaining(const cursor *c) { return c->size - c->pos; }

/* Reads fixed-size fields; `what` names the field in the TRUNCATED message. */
static int take(cursor *c, size_t n, const unsigned char **p, const char *what) {
    if (remaining(c) < n)
        return fail(c->err, c->errlen, WLM_ERR_TRUNCATED,
                    "truncated GGUF: %s at byte %zu needs %zu bytes, the file has %zu", what,
                    c->pos, n, c->size);
    *p = c->base + c->pos;
    c->pos += n;
    return WLM_OK;
}

static int take_u32(cursor *c, uint32_t *v, const char *what) {
    const unsigned char *p = NULL;
    int rc = take(c, 4, &p, what);
    if (rc == WLM_OK) *v = rd32(p);
    return rc;
}

static int take_u64(cursor *c, uint64_t *v, const char *what) {
    const unsigned char *p = NULL;
    int rc = take(c, 8, &p, what);
    if (rc == WLM_OK) *v = rd64(p);
    return rc;
}

static int take_str(cursor *c, wlm_gguf_str *s, const char *what) {
    uint64_t len = 0;
    size_t at = c->pos;
    int rc = take_u64(c, &len, what);
    if (rc != WLM_OK) return rc;
    if (len > remaining(c))
        return fail(c->err, c->errlen, WLM_ERR_TRUNCATED,
                    "truncated GGUF: %s at byte %zu has length %llu, only %zu bytes follow", what,
                    at, (unsigned long long)len, remaining(c));
    s->ptr = (const char *)c->base + c->pos;
    s->len = (size_t)len;
    c->pos += (size_t)len;
    return WLM_OK;
}

/* ---- values --------------------------------------------------------------------------------- */

/*
 * Skips (and validates) one array's body after its element type and count: the elements of
 * a nested array are arrays themselves. Used for nested arrays only; top-level arrays are
 * walked by parse_value so that string arrays get their offset tables. `key` is for messages.
 */
static int skip_array(cursor *c, const char *key, int depth);

static int check_array_header(cursor *c, const char *key, uint32_t et, uint64_t n, size_t at,
                              int depth) {
    if (et >= WLM_GGUF_TYPE_COUNT)
        return fail(c->err, c->errlen, WLM_ERR_FORMAT,
                    "key %s: array at byte %zu has invalid element type %u", key, at, et);
    if (et == WLM_GGUF_ARRAY && depth + 1 >= WLM_GGUF_MAX_NESTING)
        return fail(c->err, c->errlen, WLM_ERR_FORMAT,
                    "key %s: arrays nested more than %d deep at byte %zu", key,
                    WLM_GGUF_MAX_NESTING, at);
    /* Every element takes at least this many bytes: the count must fit in what remains. */
    uint64_t min_elem = et == WLM_GGUF_STRING ? 8 : et == WLM_GGUF_ARRAY ? 12 : type_info[et].size;
    if (n > remaining(c) / min_elem)
        return fail(c->err, c->errlen, WLM_ERR_TRUNCATED,
                    "truncated GGUF: key %s: array at byte %zu claims %llu elements of type %s, "
                    "only %zu bytes follow",
                    key, at, (unsigned long long)n, type_info[et].name, remaining(c));
    return WLM_OK;
}

static int skip_elements(cursor *c, const char *key, uint32_t et, uint64_t n, int depth) {
    int rc = WLM_OK;
    if (et == WLM_GGUF_STRING) {
        wlm_gguf_str s;
        for (uint64_t i = 0; i < n && rc == WLM_OK; i++) rc = take_str(c, &s, "array string");
    } else if (et == WLM_GGUF_ARRAY) {
        for (uint64_t i = 0; i < n && rc == WLM_OK; i++) rc = skip_array(c, key, depth + 1);
    } else {
        c->pos += (size_t)(n * type_info[et].size); /* bounded by check_array_header */
    }
    return rc;
}

static int skip_array(cursor *c, const char *key, int depth) {
    uint32_t et = 0;
    uint64_t n = 0;
    size_t at = c->pos;
    int rc = take_u32(c, &et, "nested array type");
    if (rc == WLM_OK) rc = take_u64(c, &n, "nested array count");
    if (rc == WLM_OK) rc = check_array_header(c, key, et, n, at, depth);
    if (rc == WLM_OK) rc = skip_elements(c, key, et, n, depth);
    return rc;
}

static int parse_value(cursor *c, wlm_gguf_kv *kv) {
    name_buf key = printable(kv->key);
    const size_t at = c->pos;
    const uint32_t t = (uint32_t)kv->type;
    int rc;
    if (t >= WLM_GGUF_TYPE_COUNT)
        return fail(c->err, c->errlen, WLM_ERR_FORMAT,
                    "key %s at byte %zu has invalid value type %u", key.s, kv->file_offset, t);
    if (t == WLM_GGUF_STRING) {
        rc = take_str(c, &kv->str, "string value");
        kv->value = (const unsigned char *)kv->str.ptr;
        return rc;
    }
    if (t != WLM_GGUF_ARRAY) return take(c, type_info[t].size, &kv->value, "value");

    uint32_t et = 0;
    uint64_t n = 0;
    rc = take_u32(c, &et, "array element type");
    if (rc == WLM_OK) rc = take_u64(c, &n, "array count");
    if (rc == WLM_OK) rc = check_array_header(c, key.s, et, n, at, 0);
    if (rc != WLM_OK) return rc;
    kv->arr.type = (int32_t)et;
    kv->arr.n = n;
    kv->arr.data = c->base + c->pos;
    if (et == WLM_GGUF_STRING && n > 0) {
        /* n <= remaining / 8 was checked: the table is bounded by the file size. */
        size_t *off = malloc((size_t)n * sizeof *off);
        const size_t start = c->pos;
        if (!off)
            return fail(c->err, c->errlen, WLM_ERR_NOMEM,
                        "out of memory for the %llu strings of key %s", (unsigned long long)n,
                        key.s);
        kv->arr.str_off = off;
        wlm_gguf_str s;
        for (uint64_t i = 0; i < n; i++) {
            off[i] = c->pos - start;
            rc = take_str(c, &s, "array string");
            if (rc != WLM_OK) return rc;
        }
        return WLM_OK;
    }
    return skip_elements(c, key.s, et, n, 0);
}

/* ---- lookups -------------------------------------------------------------------------------- */

static int cmp_str(wlm_gguf_str a, wlm_gguf_str b) {
    size_t n = a.len < b.len ? a.len : b.len;
    int r = n ? memcmp(a.ptr, b.ptr, n) : 0;
    if (r) return r;
    return a.len < b.len ? -1 : a.len > b.len;
}

static int cmp_kv(const void *a, const void *b) {
    return cmp_str((*(const wlm_gguf_kv *const *)a)->key, (*(const wlm_gguf_kv *const *)b)->key);
}

static int cmp_tensor(const void *a, const void *b) {
    return cmp_str((*(const wlm_gguf_tensor *const *)a)->name,
                   (*(const wlm_gguf_tensor *const *)b)->name);
}

const wlm_gguf_kv *wlm_gguf_find_kv(const wlm_gguf *g, const char *key) {
    if (!g || !key || !g->kv_sorted_) return NULL;
    wlm_gguf_str k = {key, strlen(key)};
    size_t lo = 0, hi = g->n_kv;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int r = cmp_str(g->kv_sorted_[mid]->key, k);
        if (r == 0) return g->kv_sorted_[mid];
        if (r < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

const wlm_gguf_tensor *wlm_gguf_find_tensor(const wlm_gguf *g, const char *name) {
    if (!g || !name || !g->tensor_sorted_) return NULL;
    wlm_gguf_str k = {name, strlen(name)};
    size_t lo = 0, hi = g->n_tensors;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int r = cmp_str(g->tensor_sorted_[mid]->name, k);
        if (r == 0) return g->tensor_sorted_[mid];
        if (r < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

/* ---- scalar conversions --------------------------------------------------------------------- */

/* Integer value of `type` stored at p: into *i (signed types and small unsigned ones) or *u
 * (UINT64). Returns 0 for non-integer types, 1 signed, 2 unsigned-64. */
static int read_int(int32_t type, const unsigned char *p, int64_t *i, uint64_t *u) {
    switch (type) {
    case WLM_GGUF_UINT8: *i = p[0]; return 1;
    case WLM_GGUF_INT8: *i = (int8_t)p[0]; return 1;
    case WLM_GGUF_UINT16: *i = rd16(p); return 1;
    case WLM_GGUF_INT16: *i = (int16_t)rd16(p); return 1;
    case WLM_GGUF_UINT32: *i = rd32(p); return 1;
    case WLM_GGUF_INT32: *i = (int32_t)rd32(p); return 1;
    case WLM_GGUF_INT64: *i = (int64_t)rd64(p); return 1;
    case WLM_GGUF_UINT64: *u = rd64(p); return 2;
    default: return 0;
    }
}

static int value_i64(int32_t type, const unsigned char *p, int64_t *out) {
    int64_t i = 0;
    uint64_t u = 0;
    switch (read_int(type, p, &i, &u)) {
    case 1: *out = i; return WLM_OK;
    case 2:
        if (u > (uint64_t)INT64_MAX) return WLM_ERR_FORMAT;
        *out = (int64_t)u;
        return WLM_OK;
    default: return WLM_ERR_FORMAT;
    }
}

static int value_f64(int32_t type, const unsigned char *p, double *out) {
    if (type == WLM_GGUF_FLOAT32) {
        uint32_t b = rd32(p);
        float f;
        memcpy(&f, &b, sizeof f);
        *out = f;
        return WLM_OK;
    }
    if (type == WLM_GGUF_FLOAT64) {
        uint64_t b = rd64(p);
        memcpy(out, &b, sizeof *out);
        return WLM_OK;
    }
    int64_t i = 0;
    uint64_t u = 0;
    switch (read_int(type, p, &i, &u)) {
    case 1: *out = (double)i; return WLM_OK;
    case 2: *out = (double)u; return WLM_OK;
    default: return WLM_ERR_FORMAT;
    }
}

int wlm_gguf_kv_i64(const wlm_gguf_kv *kv, int64_t *out) {
    if (!kv || !out) return WLM_ERR_INVALID_ARG;
    return value_i64(kv->type, kv->value, out);
}

int wlm_gguf_kv_f64(const wlm_gguf_kv *kv, double *out) {
    if (!kv || !out) return WLM_ERR_INVALID_ARG;
    return value_f64(kv->type, kv->value, out);
}

/* ---- typed getters -------------------------------------------------------------------------- */

static const wlm_gguf_kv *need_kv(const wlm_gguf *g, const char *key, char *err, size_t errlen) {
    const wlm_gguf_kv *kv = wlm_gguf_find_kv(g, key);
    if (!kv) fail(err, errlen, WLM_ERR_FORMAT, "GGUF metadata lacks key %s", key ? key : "(null)");
    return kv;
}

static int int_in_range(const wlm_gguf_kv *kv, const char *key, int64_t lo, int64_t hi,
                        int64_t *v, char *err, size_t errlen) {
    uint64_t u = 0;
    int64_t i = 0;
    int kind = read_int(kv->type, kv->value, &i, &u);
    if (kind == 0)
        return fail(err, errlen, WLM_ERR_FORMAT, "key %s has type %s, expected an integer", key,
                    wlm_gguf_type_name(kv->type));
    if (kind == 2 && u > (uint64_t)hi)
        return fail(err, errlen, WLM_ERR_FORMAT, "key %s = %llu is out of range [%lld, %lld]",
                    key, (unsigned long long)u, (long long)lo, (long long)hi);
    if (kind == 1 && (i < lo || i > hi))
        return fail(err, errlen, WLM_ERR_FORMAT, "key %s = %lld is out of range [%lld, %lld]",
                    key, (long long)i, (long long)lo, (long long)hi);
    *v = kind == 2 ? (int64_t)u : i;
    return WLM_OK;
}

int wlm_gguf_get_u32(const wlm_gguf *g, const char *key, uint32_t *out, char *err, size_t errlen) {
    const wlm_gguf_kv *kv = need_kv(g, key, err, errlen);
    int64_t v = 0;
    if (!kv) return WLM_ERR_FORMAT;
    int rc = int_in_range(kv, key, 0, UINT32_MAX, &v, err, errlen);
    if (rc == WLM_OK) *out = (uint32_t)v;
    return rc;
}

int wlm_gguf_get_i32(const wlm_gguf *g, const char *key, int32_t *out, char *err, size_t errlen) {
    const wlm_gguf_kv *kv = need_kv(g, key, err, errlen);
    int64_t v = 0;
    if (!kv) return WLM_ERR_FORMAT;
    int rc = int_in_range(kv, key, INT32_MIN, INT32_MAX, &v, err, errlen);
    if (rc == WLM_OK) *out = (int32_t)v;
    return rc;
}

int wlm_gguf_get_f32(const wlm_gguf *g, const char *key, float *out, char *err, size_t errlen) {
    const wlm_gguf_kv *kv = need_kv(g, key, err, errlen);
    if (!kv) return WLM_ERR_FORMAT;
    if (kv->type != WLM_GGUF_FLOAT32 && kv->type != WLM_GGUF_FLOAT64)
        return fail(err, errlen, WLM_ERR_FORMAT, "key %s has type %s, expected FLOAT32", key,
                    wlm_gguf_type_name(kv->type));
    double d = 0;
    value_f64(kv->type, kv->value, &d);
    if (kv->type == WLM_GGUF_FLOAT64 && isfinite(d) && fabs(d) > 3.4028234663852886e38)
        return fail(err, errlen, WLM_ERR_FORMAT, "key %s = %g does not fit a float", key, d);
    *out = (float)d;
    return WLM_OK;
}

int wlm_gguf_get_bool(const wlm_gguf *g, const char *key, int *out, char *err, size_t errlen) {
    const wlm_gguf_kv *kv = need_kv(g, key, err, errlen);
    if (!kv) return WLM_ERR_FORMAT;
    if (kv->type != WLM_GGUF_BOOL)
        return fail(err, errlen, WLM_ERR_FORMAT, "key %s has type %s, expected BOOL", key,
                    wlm_gguf_type_name(kv->type));
    if (kv->value[0] > 1)
        return fail(err, errlen, WLM_ERR_FORMAT, "key %s holds %u, not a bool (0 or 1)", key,
                    kv->value[0]);
    *out = kv->value[0];
    return WLM_OK;
}

int wlm_gguf_get_str(const wlm_gguf *g, const char *key, wlm_gguf_str *out, char *err,
                     size_t errlen) {
    const wlm_gguf_kv *kv = need_kv(g, key, err, errlen);
    if (!kv) return WLM_ERR_FORMAT;
    if (kv->type != WLM_GGUF_STRING)
        return fail(err, errlen, WLM_ERR_FORMAT, "key %s has type %s, expected STRING", key,
                    wlm_gguf_type_name(kv->type));
    *out = kv->str;
    return WLM_OK;
}

int wlm_gguf_get_u32_or(const wlm_gguf *g, const char *key, uint32_t def, uint32_t *out,
                        char *err, size_t errlen) {
    if (!wlm_gguf_find_kv(g, key)) return *out = def, WLM_OK;
    return wlm_gguf_get_u32(g, key, out, err, errlen);
}

int wlm_gguf_get_i32_or(const wlm_gguf *g, const char *key, int32_t def, int32_t *out,
                        char *err, size_t errlen) {
    if (!wlm_gguf_find_kv(g, key)) return *out = def, WLM_OK;
    return wlm_gguf_get_i32(g, key, out, err, errlen);
}

int wlm_gguf_get_f32_or(const wlm_gguf *g, const char *key, float def, float *out, char *err,
                        size_t errlen) {
    if (!wlm_gguf_find_kv(g, key)) return *out = def, WLM_OK;
    return wlm_gguf_get_f32(g, key, out, err, errlen);
}

int wlm_gguf_get_bool_or(const wlm_gguf *g, const char *key, int def, int *out, char *err,
                         size_t errlen) {
    if (!wlm_gguf_find_kv(g, key)) return *out = def, WLM_OK;
    return wlm_gguf_get_bool(g, key, out, err, errlen);
}

/* ---- arrays --------------------------------------------------------------------------------- */

int wlm_gguf_get_arr(const wlm_gguf *g, const char *key, int32_t elem_type,
                     const wlm_gguf_kv **out, char *err, size_t errlen) {
    const wlm_gguf_kv *kv = need_kv(g, key, err, errlen);
    if (!kv) return WLM_ERR_FORMAT;
    if (kv->type != WLM_GGUF_ARRAY)
        return fail(err, errlen, WLM_ERR_FORMAT, "key %s has type %s, expected ARRAY", key,
                    wlm_gguf_type_name(kv->type));
    if (elem_type >= 0 && kv->arr.type != elem_type)
        return fail(err, errlen, WLM_ERR_FORMAT, "key %s is an array of %s, expected %s", key,
                    wlm_gguf_type_name(kv->arr.type), wlm_gguf_type_name(elem_type));
    *out = kv;
    return WLM_OK;
}

/* Element i of a fixed-size-element array, or NULL. */
static const unsigned char *arr_elem(const wlm_gguf_kv *kv, uint64_t i) {
    if (!kv || kv->type != WLM_GGUF_ARRAY || i >= kv->arr.n) return NULL;
    size_t sz = wlm_gguf_type_size(kv->arr.type);
    return sz ? kv->arr.data + (size_t)i * sz : NULL;
}

int wlm_gguf_arr_i64(const wlm_gguf_kv *kv, uint64_t i, int64_t *out) {
    const unsigned char *p = arr_elem(kv, i);
    if (!p || !out) return WLM_ERR_INVALID_ARG;
    if (kv->arr.type == WLM_GGUF_BOOL) {
        if (p[0] > 1) return WLM_ERR_INVALID_ARG;
        *out = p[0];
        return WLM_OK;
    }
    return value_i64(kv->arr.type, p, out) == WLM_OK ? WLM_OK : WLM_ERR_INVALID_ARG;
}

int wlm_gguf_arr_f64(const wlm_gguf_kv *kv, uint64_t i, double *out) {
    const unsigned char *p = arr_elem(kv, i);
    if (!p || !out) return WLM_ERR_INVALID_ARG;
    return value_f64(kv->arr.type, p, out) == WLM_OK ? WLM_OK : WLM_ERR_INVALID_ARG;
}

int wlm_gguf_arr_str(const wlm_gguf_kv *kv, uint64_t i, wlm_gguf_str *out) {
    if (!kv || !out || kv->type != WLM_GGUF_ARRAY || kv->arr.type != WLM_GGUF_STRING ||
        i >= kv->arr.n || !kv->arr.str_off)
        return WLM_ERR_INVALID_ARG;
    /* The table was built while checking every length against the buffer. */
    const unsigned char *p = kv->arr.data + kv->arr.str_off[i];
    out->len = (size_t)rd64(p);
    out->ptr = (const char *)p + 8;
    return WLM_OK;
}

/* ---- parse ---------------------------------------------------------------------------------- */

void wlm_gguf_free(wlm_gguf *g) {
    if (!g) return;
    if (g->kv)
        for (size_t i = 0; i < g->n_kv; i++) free((void *)g->kv[i].arr.str_off);
    free(g->kv);
    free(g->tensors);
    free(g->kv_sorted_);
    free(g->tensor_sorted_);
    memset(g, 0, sizeof *g);
}

/* Smallest encodings, used to bound the counts in the header before anything is allocated:
 * a key/value is a key length (8), a type (4) and at least one value byte; a tensor info is a
 * name length (8), n_dims (4), one dimension (8), a type (4) and an offset (8). */
#define MIN_KV_BYTES 13u
#define MIN_TENSOR_BYTES 32u

static int parse_header(cursor *c, wlm_gguf *g, uint64_t *n_tensors, uint64_t *n_kv) {
    static const unsigned char magic[4] = {'G', 'G', 'U', 'F'};
    if (memcmp(c->base, magic, c->size < 4 ? c->size : 4) != 0)
        return fail(c->err, c->errlen, WLM_ERR_FORMAT, "not a GGUF file (bad magic)");
    const unsigned char *p = NULL;
    int rc = take(c, 4, &p, "magic");
    if (rc == WLM_OK) rc = take_u32(c, &g->version, "version");
    if (rc != WLM_OK) return rc;
    if (g->version == 1)
        return fail(c->err, c->errlen, WLM_ERR_UNSUPPORTED,
                    "GGUF version 1 is not supported (32-bit counts); convert the file to v3");
    if (g->version == 0x02000000u || g->version == 0x03000000u)
        return fail(c->err, c->errlen, WLM_ERR_UNSUPPORTED,
                    "big-endian GGUF files are not supported");
    if (g->version != 2 && g->version != 3)
        return fail(c->err, c->errlen, WLM_ERR_UNSUPPORTED, "GGUF version %u is not supported",
                    g->version);
    rc = take_u64(c, n_tensors, "tensor count");
    if (rc == WLM_OK) rc = take_u64(c, n_kv, "key/value count");
    if (rc != WLM_OK) return rc;
    const uint64_t rem = remaining(c);
    if (*n_kv > rem / MIN_KV_BYTES || *n_tensors > rem / MIN_TENSOR_BYTES ||
        *n_kv * MIN_KV_BYTES + *n_tensors * MIN_TENSOR_BYTES > rem)
        return fail(c->err, c->errlen, WLM_ERR_TRUNCATED,
                    "truncated GGUF: the header announces %llu key/values and %llu tensors, "
                    "but only %llu bytes follow it",
                    (unsigned long long)*n_kv, (unsigned long long)*n_tensors,
                    (unsigned long long)rem);
    return WLM_OK;
}

static int parse_tensor_info(cursor *c, wlm_gguf_tensor *t, size_t index) {
    size_t at = c->pos;
    int rc = take_str(c, &t->name, "tensor name");
    if (rc != WLM_OK) return rc;
    name_buf name = printable(t->name);
    rc = take_u32(c, &t->n_dims, "tensor n_dims");
    if (rc != WLM_OK) return rc;
    if (t->n_dims < 1 || t->n_dims > WLM_GGUF_MAX_DIMS)
        return fail(c->err, c->errlen, WLM_ERR_FORMAT,
                    "tensor %s (#%zu, byte %zu) has %u dimensions; 1 to %d are allowed", name.s,
                    index, at, t->n_dims, WLM_GGUF_MAX_DIMS);
    uint64_t count = 1;
    for (int d = 0; d < WLM_GGUF_MAX_DIMS; d++) {
        uint64_t ne = 1;
        if ((uint32_t)d < t->n_dims && (rc = take_u64(c, &ne, "tensor dimension")) != WLM_OK)
            return rc;
        if (ne > (uint64_t)INT64_MAX || (ne != 0 && count > (uint64_t)INT64_MAX / ne))
            return fail(c->err, c->errlen, WLM_ERR_FORMAT,
                        "tensor %s has a shape whose element count overflows (ne[%d] = %llu)",
                        name.s, d, (unsigned long long)ne);
        t->ne[d] = (int64_t)ne;
        count *= ne;
    }
    t->n_elements = count;
    uint32_t type = 0;
    rc = take_u32(c, &type, "tensor type");
    if (rc == WLM_OK) rc = take_u64(c, &t->offset, "tensor offset");
    if (rc != WLM_OK) return rc;
    if (type > (uint32_t)INT32_MAX)
        return fail(c->err, c->errlen, WLM_ERR_FORMAT, "tensor %s has invalid type id %u",
                    name.s, type);
    t->type = (int32_t)type;
    return WLM_OK;
}

/* Sizes and places one tensor's data, given the data section [data_offset, size). Unknown
 * types keep data NULL. */
static int place_tensor(cursor *c, wlm_gguf *g, wlm_gguf_tensor *t, uint64_t data_offset,
                        unsigned flags, uint64_t *resident_at) {
    const wlm_type_traits *tr = wlm_type_get(t->type);
    name_buf name = printable(t->name);
    if (!tr->name || tr->block_size <= 0 || tr->type_size == 0) return WLM_OK; /* unknown */
    const uint64_t bs = (uint64_t)tr->block_size;
    if ((uint64_t)t->ne[0] % bs != 0)
        return fail(c->err, c->errlen, WLM_ERR_FORMAT,
                    "tensor %s: ne[0] = %lld is not a multiple of the %s block size %llu", name.s,
                    (long long)t->ne[0], tr->name, (unsigned long long)bs);
    const uint64_t blocks = t->n_elements / bs;
    if (blocks > UINT64_MAX / tr->type_size)
        return fail(c->err, c->errlen, WLM_ERR_FORMAT, "tensor %s: byte size overflows", name.s);
    const uint64_t nbytes = blocks * tr->type_size;
    if (t->offset % g->alignment != 0)
        return fail(c->err, c->errlen, WLM_ERR_FORMAT,
                    "tensor %s: data offset %llu is not a multiple of the alignment %u", name.s,
                    (unsigned long long)t->offset, g->alignment);
    uint64_t at = t->offset; /* where the bytes are, from the data section's start */
    if (flags & WLM_GGUF_MATRICES_EXTERNAL) {
        if (!wlm_gguf_tensor_resident(t) && !wlm_gguf_tensor_host_lookup(t)) {
            /* not in the buffer: only its extent is checked */
            if (t->offset > UINT64_MAX - data_offset || nbytes > UINT64_MAX - data_offset - t->offset ||
                nbytes > SIZE_MAX)
                return fail(c->err, c->errlen, WLM_ERR_FORMAT,
                            "tensor %s: data offset %llu + %llu bytes overflows", name.s,
                            (unsigned long long)t->offset, (unsigned long long)nbytes);
            t->nbytes = (size_t)nbytes;
            t->external = 1;
            return WLM_OK;
        }
        at = *resident_at;
        *resident_at = (at + nbytes + g->alignment - 1) / g->alignment * g->alignment;
    }
    const uint64_t avail = data_offset <= c->size ? c->size - data_offset : 0;
    if (data_offset > c->size || at > avail || nbytes > avail - at)
        return fail(c->err, c->errlen, WLM_ERR_TRUNCATED,
                    "truncated GGUF: tensor %s (%s, %llu bytes at data offset %llu, file offset "
                    "%llu) ends past the end of the file (%zu bytes)",
                    name.s, tr->name, (unsigned long long)nbytes, (unsigned long long)t->offset,
                    (unsigned long long)(data_offset + t->offset), c->size);
    t->nbytes = (size_t)nbytes;
    t->data = c->base + (size_t)(data_offset + at);
    return WLM_OK;
}

int wlm_gguf_tensor_resident(const wlm_gguf_tensor *t) {
    if (t->ne[2] != 1 || t->ne[3] != 1) return 0;
    static const char exps_bias[] = "_exps.bias"; /* a row of biases per expert (moe.c) */
    const size_t nb = sizeof exps_bias - 1;
    if (t->type == WLM_TYPE_F32 && t->name.len >= nb &&
        memcmp(t->name.ptr + t->name.len - nb, exps_bias, nb) == 0)
        return 1;
    return t->ne[1] == 1 || ((t->type == WLM_TYPE_F32 || t->type == WLM_TYPE_F16) &&
                             t->ne[0] <= WLM_GGUF_RESIDENT_TAPS);
}

int wlm_gguf_tensor_host_lookup(const wlm_gguf_tensor *t) {
    static const char table[] = "per_layer_token_embd.weight";
    return t->ne[2] == 1 && t->ne[3] == 1 && t->name.len == sizeof table - 1 &&
           memcmp(t->name.ptr, table, sizeof table - 1) == 0;
}

static int parse_all(cursor *c, wlm_gguf *g, unsigned flags) {
    uint64_t n_tensors = 0, n_kv = 0;
    int rc = parse_header(c, g, &n_tensors, &n_kv);
    if (rc != WLM_OK) return rc;

    /* Both counts are bounded by the file size now (at most size / 13 entries). */
    g->kv = calloc(n_kv ? (size_t)n_kv : 1, sizeof *g->kv);
    g->tensors = calloc(n_tensors ? (size_t)n_tensors : 1, sizeof *g->tensors);
    g->kv_sorted_ = malloc((n_kv ? (size_t)n_kv : 1) * sizeof *g->kv_sorted_);
    g->tensor_sorted_ = malloc((n_tensors ? (size_t)n_tensors : 1) * sizeof *g->tensor_sorted_);
    if (!g->kv || !g->tensors || !g->kv_sorted_ || !g->tensor_sorted_)
        return fail(c->err, c->errlen, WLM_ERR_NOMEM,
                    "out of memory for %llu key/values and %llu tensors",
                    (unsigned long long)n_kv, (unsigned long long)n_tensors);

    for (size_t i = 0; i < (size_t)n_kv; i++) {
        wlm_gguf_kv *kv = &g->kv[i];
        uint32_t type = 0;
        kv->file_offset = c->pos;
        rc = take_str(c, &kv->key, "key");
        if (rc == WLM_OK) rc = take_u32(c, &type, "value type");
        if (rc != WLM_OK) return rc;
        kv->type = type < WLM_GGUF_TYPE_COUNT ? (int32_t)type : WLM_GGUF_TYPE_COUNT;
        g->n_kv = i + 1; /* from here on, wlm_gguf_free releases this entry's table */
        if (type >= WLM_GGUF_TYPE_COUNT) {
            name_buf key = printable(kv->key);
            return fail(c->err, c->errlen, WLM_ERR_FORMAT,
                        "key %s at byte %zu has invalid value type %u", key.s, kv->file_offset,
                        type);
        }
        rc = parse_value(c, kv);
        if (rc != WLM_OK) return rc;
    }
    for (size_t i = 0; i < g->n_kv; i++) g->kv_sorted_[i] = &g->kv[i];
    qsort(g->kv_sorted_, g->n_kv, sizeof *g->kv_sorted_, cmp_kv);
    for (size_t i = 1; i < g->n_kv; i++)
        if (cmp_str(g->kv_sorted_[i - 1]->key, g->kv_sorted_[i]->key) == 0) {
            name_buf key = printable(g->kv_sorted_[i]->key);
            return fail(c->err, c->errlen, WLM_ERR_FORMAT, "duplicate key %s", key.s);
        }

    g->alignment = WLM_GGUF_DEFAULT_ALIGNMENT;
    const wlm_gguf_kv *al = wlm_gguf_find_kv(g, "general.alignment");
    if (al) {
        int64_t a = 0;
        if (value_i64(al->type, al->value, &a) != WLM_OK || a <= 0 || a > (int64_t)1 << 30 ||
            (a & (a - 1)) != 0)
            return fail(c->err, c->errlen, WLM_ERR_FORMAT,
                        "general.alignment must be a power of two up to 2^30 (got %lld, type %s)",
                        (long long)a, wlm_gguf_type_name(al->type));
        g->alignment = (uint32_t)a;
    }

    for (size_t i = 0; i < (size_t)n_tensors; i++) {
        rc = parse_tensor_info(c, &g->tensors[i], i);
        if (rc != WLM_OK) return rc;
        g->n_tensors = i + 1;
    }
    for (size_t i = 0; i < g->n_tensors; i++) g->tensor_sorted_[i] = &g->tensors[i];
    qsort(g->tensor_sorted_, g->n_tensors, sizeof *g->tensor_sorted_, cmp_tensor);
    for (size_t i = 1; i < g->n_tensors; i++)
        if (cmp_str(g->tensor_sorted_[i - 1]->name, g->tensor_sorted_[i]->name) == 0) {
            name_buf name = printable(g->tensor_sorted_[i]->name);
            return fail(c->err, c->errlen, WLM_ERR_FORMAT, "duplicate tensor name %s", name.s);
        }

    /* The data section starts at the next multiple of the alignment. */
    const uint64_t data_offset = ((uint64_t)c->pos + g->alignment - 1) / g->alignment *
                                 g->alignment;
    g->data_offset = data_offset <= c->size ? (size_t)data_offset : c->size;
    uint64_t resident_at = 0;
    for (size_t i = 0; i < g->n_tensors; i++) {
        rc = place_tensor(c, g, &g->tensors[i], data_offset, flags, &resident_at);
        if (rc != WLM_OK) return rc;
    }
    return WLM_OK;
}

int wlm_gguf_parse(wlm_gguf *g, const void *data, size_t size, char *err, size_t errlen) {
    return wlm_gguf_parse_ex(g, data, size, 0, err, errlen);
}

int wlm_gguf_parse_ex(wlm_gguf *g, const void *data, size_t size, unsigned flags, char *err,
                      size_t errlen) {
    if (err && errlen) err[0] = '\0';
    if (!g) return fail(err, errlen, WLM_ERR_INVALID_ARG, "wlm_gguf_parse: NULL result");
    memset(g, 0, sizeof *g);
    if (!data) return fail(err, errlen, WLM_ERR_INVALID_ARG, "wlm_gguf_parse: NULL data");
    cursor c = {data, size, 0, err, errlen};
    g->base = data;
    g->size = size;
    int rc = parse_all(&c, g, flags);
    if (rc != WLM_OK) wlm_gguf_free(g);
    return rc;
}
