/*
 * gbnf_text.c — growable text and the JSON / GBNF literal writers (gbnf_text.h).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sampling/gbnf_text.h"

void wlm_sb_add(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

void wlm_sb_str(sbuf *b, const char *s) { wlm_sb_add(b, s, strlen(s)); }

void wlm_sb_fmt(sbuf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (k > 0) wlm_sb_add(b, tmp, (size_t)k < sizeof tmp ? (size_t)k : sizeof tmp - 1);
}

/* `s` as a JSON string (quotes included): " \ and control characters escaped. */
void wlm_json_quote(sbuf *b, const char *s, size_t n) {
    wlm_sb_add(b, "\"", 1);
    for (size_t k = 0; k < n; k++) {
        unsigned char ch = (unsigned char)s[k];
        switch (ch) {
        case '"': wlm_sb_add(b, "\\\"", 2); break;
        case '\\': wlm_sb_add(b, "\\\\", 2); break;
        case '\n': wlm_sb_add(b, "\\n", 2); break;
        case '\r': wlm_sb_add(b, "\\r", 2); break;
        case '\t': wlm_sb_add(b, "\\t", 2); break;
        case '\b': wlm_sb_add(b, "\\b", 2); break;
        case '\f': wlm_sb_add(b, "\\f", 2); break;
        default:
            if (ch < 0x20) wlm_sb_fmt(b, "\\u%04x", ch);
            else wlm_sb_add(b, s + k, 1);
        }
    }
    wlm_sb_add(b, "\"", 1);
}

/* Bytes as a GBNF string literal. */
void wlm_gbnf_literal(sbuf *b, const char *s, size_t n) {
    wlm_sb_add(b, "\"", 1);
    for (size_t k = 0; k < n; k++) {
        unsigned char ch = (unsigned char)s[k];
        if (ch == '"') wlm_sb_add(b, "\\\"", 2);
        else if (ch == '\\') wlm_sb_add(b, "\\\\", 2);
        else if (ch == '\n') wlm_sb_add(b, "\\n", 2);
        else if (ch == '\r') wlm_sb_add(b, "\\r", 2);
        else if (ch == '\t') wlm_sb_add(b, "\\t", 2);
        else if (ch < 0x20 || ch == 0x7F) wlm_sb_fmt(b, "\\x%02X", ch);
        else wlm_sb_add(b, s + k, 1);
    }
    wlm_sb_add(b, "\"", 1);
}
