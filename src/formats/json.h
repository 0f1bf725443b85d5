/*
 * json.h — internal: a strict JSON reader (RFC 8259) into an immutable tree, for JSON Schemas
 * (sampling/json_schema.c). No comments, trailing commas, NaN or lone surrogates; strings are
 * validated UTF-8 and decoded (escapes and surrogate pairs → UTF-8); numbers keep their source
 * text. It does not write JSON or keep key order beyond the source's (objects are arrays of
 * key/value pairs in source order; a repeated key is kept twice, wlm_json_get finds the last).
 */
#ifndef WASMLM_JSON_H
#define WASMLM_JSON_H

#include <stddef.h>
#include <stdint.h>

#define WLM_JSON_MAX_TEXT (1u << 24)  /* bytes of JSON text */
#define WLM_JSON_MAX_DEPTH 128        /* nesting of arrays and objects */

enum wlm_json_type {
    WLM_JSON_NULL, WLM_JSON_FALSE, WLM_JSON_TRUE, WLM_JSON_NUMBER, WLM_JSON_STRING,
    WLM_JSON_ARRAY, WLM_JSON_OBJECT
};

typedef struct wlm_json wlm_json;
struct wlm_json {
    int type;                 /* enum wlm_json_type */
    const char *str;          /* STRING: decoded UTF-8, NUL-terminated (may hold NULs from
                                 \u0000; len counts them); NUMBER: the source text */
    size_t len;               /* bytes of str */
    double num;               /* NUMBER: its value (strtod) */
    uint32_t n;               /* ARRAY: items; OBJECT: key/value pairs */
    const wlm_json *items;    /* ARRAY: n values; OBJECT: n values, keys[k] names items[k] */
    const wlm_json *keys;     /* OBJECT: n STRING values */
    size_t at;                /* byte offset of the value in the source text */
};

typedef struct wlm_json_doc wlm_json_doc;

/*
 * Parses `len` bytes of JSON into *out (one value, surrounded by optional whitespace). Errors:
 * WLM_ERR_INVALID_ARG with "JSON line L, column C: ..." in err (columns count bytes from 1),
 * WLM_ERR_NOMEM. *out is NULL on error.
 */
int wlm_json_parse(const char *text, size_t len, wlm_json_doc **out, char *err, size_t errlen);
void wlm_json_free(wlm_json_doc *doc);
const wlm_json *wlm_json_root(const wlm_json_doc *doc);

/* The value of the last `key` in object o, or NULL (o not an object, key absent). */
const wlm_json *wlm_json_get(const wlm_json *o, const char *key);

/* Line and column (from 1, bytes) of byte offset `at` in the source text. */
void wlm_json_line_col(const wlm_json_doc *doc, size_t at, size_t *line, size_t *col);

#endif
