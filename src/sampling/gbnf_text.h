/*
 * gbnf_text.h — internal: growable text and the literal writers shared by the JSON Schema →
 * GBNF converter (json_schema.c) and its `pattern` translator (json_pattern.c). Out of memory
 * is sticky: a buffer whose `oom` is set ignores further appends, and the caller checks `oom`
 * once at the end.
 */
#ifndef WASMLM_GBNF_TEXT_H
#define WASMLM_GBNF_TEXT_H

#include <stddef.h>

/* A NUL-terminated growable string (p is NULL until the first append; the owner frees p). */
typedef struct sbuf {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

void wlm_sb_add(sbuf *b, const char *s, size_t n);
void wlm_sb_str(sbuf *b, const char *s);
/* printf-style; one append is at most 511 bytes (longer output is cut). */
void wlm_sb_fmt(sbuf *b, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* `s` (n bytes) as a JSON string, quotes included: " \ and control characters escaped
 * (RFC 8259 section 7). */
void wlm_json_quote(sbuf *b, const char *s, size_t n);

/* Bytes as a GBNF string literal (llama.cpp's grammars/README.md: \" \\ \n \r \t, other
 * control bytes and DEL as \xHH). */
void wlm_gbnf_literal(sbuf *b, const char *s, size_t n);

#endif
