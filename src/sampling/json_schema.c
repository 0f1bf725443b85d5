/*
 * json_schema.c — JSON Schema → GBNF (wlm_json_schema_to_grammar, documented in wasmlm.h).
 * The schema is read with formats/json.c, walked once, and every sub-schema becomes a rule;
 * the result is compiled with wlm_gram_parse before it is returned, so a grammar handed out
 * always compiles. It does not sample or validate instances.
 *
 * Why in C and not in JS: the native CLI needs it (-j / --json-schema, as llama.cpp's), and the
 * JS API then gets the same converter through one wasm export instead of a second
 * implementation; the JS libraries that exist either validate (ajv) rather than generate, or
 * are llama.cpp's script ported without its tests.
 *
 * The grammar's shape (ideas from llama.cpp's json-schema-to-grammar, the code and the rule
 * layout our own): whitespace is `ws ::= ( " " | "\n" [ \t]{0,20} )?` between tokens, so a
 * model cannot pad without end; numbers have at most 16 integer and 16 fraction digits and a
 * two-digit exponent (always finite); strings exclude escapes of UTF-16 surrogates (so that
 * minLength / maxLength count code points as validators do); object properties come in the
 * schema's order, the optional ones skippable, through a chain of rules that places commas
 * correctly; `additionalProperties` absent or false beside `properties` admits no other key
 * (the output then validates whichever the schema meant).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/json.h"
#include "sampling/grammar.h"
#include "wasmlm.h"

#define MAX_REFS 4096     /* distinct $ref targets */
#define MAX_NEST 200      /* sub-schemas being converted at once (JSON nesting and $ref chains) */

/* ------------------------------------------------------------------------------------------ */
/* Growable text                                                                               */

typedef struct sbuf {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n) {
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

static void sb_str(sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 2, 3)))
#endif
static void sb_fmt(sbuf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (k > 0) sb_add(b, tmp, (size_t)k < sizeof tmp ? (size_t)k : sizeof tmp - 1);
}

/* ------------------------------------------------------------------------------------------ */
/* Converter state                                                                             */

enum { P_WS = 1, P_VALUE = 2, P_STRING = 4, P_NUMBER = 8, P_INTEGER = 16, P_BOOLEAN = 32,
       P_NULL = 64, P_CHAR = 128, P_OBJECT = 256, P_ARRAY = 512 };

typedef struct ref_memo {
    const wlm_json *target;
    char name[16];
} ref_memo;

typedef struct conv {
    const wlm_json_doc *doc;
    const wlm_json *root;
    unsigned flags;
    sbuf out;            /* the rules, root first */
    unsigned prims;      /* P_* rules used */
    uint32_t counter;    /* for unique rule names */
    ref_memo *refs;
    uint32_t n_refs;
    sbuf path;           /* JSON pointer of the schema being converted */
    int nest;
    int status;
    char *msg;
    size_t msglen;
    sbuf warn;           /* lenient mode: what was ignored */
    uint32_t n_warn;
} conv;

/* An error about the schema value at `at` (byte offset) — or a warning in lenient mode when
 * `ignorable`. Returns the status (WLM_OK for a warning). */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 5, 6)))
#endif
static int report(conv *c, int status, int ignorable, size_t at, const char *fmt, ...) {
    char text[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    size_t line, col;
    wlm_json_line_col(c->doc, at, &line, &col);
    const char *path = c->path.n ? c->path.p : "/";
    if (ignorable && (c->flags & WLM_SCHEMA_LENIENT)) {
        if (c->n_warn++ < 32)
            sb_fmt(&c->warn, "%sschema line %zu, column %zu (at '%.80s'): %s (ignored)",
                   c->warn.n ? "; " : "", line, col, path, text);
        return WLM_OK;
    }
    if (c->status == WLM_OK) {
        c->status = status;
        if (c->msg && c->msglen)
            snprintf(c->msg, c->msglen, "schema line %zu, column %zu (at '%.80s'): %s", line, col,
                     path, text);
    }
    return c->status;
}

static int conv_nomem(conv *c) {
    if (c->status == WLM_OK) {
        c->status = WLM_ERR_NOMEM;
        if (c->msg && c->msglen) snprintf(c->msg, c->msglen, "out of memory for the schema");
    }
    return c->status;
}

/* Appends a JSON-pointer segment (~ and / escaped as ~0 ~1); returns the old length. */
static size_t path_push(conv *c, const char *seg, size_t n) {
    size_t old = c->path.n;
    sb_add(&c->path, "/", 1);
    for (size_t k = 0; k < n; k++) {
        if (seg[k] == '~') sb_add(&c->path, "~0", 2);
        else if (seg[k] == '/') sb_add(&c->path, "~1", 2);
        else sb_add(&c->path, seg + k, 1);
    }
    return old;
}

static size_t path_push_index(conv *c, uint32_t i) {
    char tmp[16];
    int k = snprintf(tmp, sizeof tmp, "%u", (unsigned)i);
    return path_push(c, tmp, (size_t)k);
}

static void path_pop(conv *c, size_t old) {
    c->path.n = old;
    if (c->path.p) c->path.p[old] = '\0';
}

/* A new unique rule name from a hint: [a-z0-9-] of the hint, at most 32, then "-N". */
static void rule_name(conv *c, const char *hint, char name[48]) {
    size_t k = 0;
    for (const char *h = hint; *h && k < 32; h++) {
        char ch = *h;
        if (ch >= 'A' && ch <= 'Z') ch = (char)(ch - 'A' + 'a');
        if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9'))) ch = '-';
        if (ch == '-' && (k == 0 || name[k - 1] == '-')) continue;
        name[k++] = ch;
    }
    if (k == 0) name[k++] = 'r';
    snprintf(name + k, 48 - k, "%s%u", name[k - 1] == '-' ? "" : "-", (unsigned)++c->counter);
}

/* ------------------------------------------------------------------------------------------ */
/* Literals                                                                                    */

/* `s` as a JSON string (quotes included): " \ and control characters escaped. */
static void json_quote(sbuf *b, const char *s, size_t n) {
    sb_add(b, "\"", 1);
    for (size_t k = 0; k < n; k++) {
        unsigned char ch = (unsigned char)s[k];
        switch (ch) {
        case '"': sb_add(b, "\\\"", 2); break;
        case '\\': sb_add(b, "\\\\", 2); break;
        case '\n': sb_add(b, "\\n", 2); break;
        case '\r': sb_add(b, "\\r", 2); break;
        case '\t': sb_add(b, "\\t", 2); break;
        case '\b': sb_add(b, "\\b", 2); break;
        case '\f': sb_add(b, "\\f", 2); break;
        default:
            if (ch < 0x20) sb_fmt(b, "\\u%04x", ch);
            else sb_add(b, s + k, 1);
        }
    }
    sb_add(b, "\"", 1);
}

/* A value as compact JSON (const / enum). */
static void json_write(sbuf *b, const wlm_json *v) {
    switch (v->type) {
    case WLM_JSON_NULL: sb_str(b, "null"); break;
    case WLM_JSON_TRUE: sb_str(b, "true"); break;
    case WLM_JSON_FALSE: sb_str(b, "false"); break;
    case WLM_JSON_NUMBER: sb_add(b, v->str, v->len); break;
    case WLM_JSON_STRING: json_quote(b, v->str, v->len); break;
    case WLM_JSON_ARRAY:
        sb_add(b, "[", 1);
        for (uint32_t k = 0; k < v->n; k++) {
            if (k) sb_add(b, ",", 1);
            json_write(b, &v->items[k]);
        }
        sb_add(b, "]", 1);
        break;
    default:
        sb_add(b, "{", 1);
        for (uint32_t k = 0; k < v->n; k++) {
            if (k) sb_add(b, ",", 1);
            json_quote(b, v->keys[k].str, v->keys[k].len);
            sb_add(b, ":", 1);
            json_write(b, &v->items[k]);
        }
        sb_add(b, "}", 1);
    }
}

/* Bytes as a GBNF string literal. */
static void gbnf_literal(sbuf *b, const char *s, size_t n) {
    sb_add(b, "\"", 1);
    for (size_t k = 0; k < n; k++) {
        unsigned char ch = (unsigned char)s[k];
        if (ch == '"') sb_add(b, "\\\"", 2);
        else if (ch == '\\') sb_add(b, "\\\\", 2);
        else if (ch == '\n') sb_add(b, "\\n", 2);
        else if (ch == '\r') sb_add(b, "\\r", 2);
        else if (ch == '\t') sb_add(b, "\\t", 2);
        else if (ch < 0x20 || ch == 0x7F) sb_fmt(b, "\\x%02X", ch);
        else sb_add(b, s + k, 1);
    }
    sb_add(b, "\"", 1);
}

/* The GBNF literal of a value's compact JSON. */
static void value_literal(sbuf *b, const wlm_json *v) {
    sbuf t = {0};
    json_write(&t, v);
    if (t.oom) b->oom = 1;
    else gbnf_literal(b, t.p ? t.p : "", t.n);
    free(t.p);
}

/* ------------------------------------------------------------------------------------------ */
/* Character sets (for `pattern`): code point ranges, emitted as the JSON encoding of any member */

typedef struct cset {
    uint32_t lo[64], hi[64];
    int n;
    int negated;
} cset;

static int cset_add(cset *s, uint32_t lo, uint32_t hi) {
    if (s->n >= 64) return 0;
    s->lo[s->n] = lo;
    s->hi[s->n] = hi;
    s->n++;
    return 1;
}

static int cset_has(const cset *s, uint32_t cp) {
    int in = 0;
    for (int k = 0; k < s->n; k++) in |= cp >= s->lo[k] && cp <= s->hi[k];
    return in != s->negated;
}

static void class_char(sbuf *b, uint32_t cp) {
    if (cp == ']' || cp == '[' || cp == '\\' || cp == '^' || cp == '-' || cp == '"' || cp < 0x20 ||
        cp == 0x7F)
        sb_fmt(b, cp > 0xFFFF ? "\\U%08X" : cp > 0xFF ? "\\u%04X" : "\\x%02X", (unsigned)cp);
    else if (cp < 0x80)
        sb_fmt(b, "%c", (char)cp);
    else
        sb_fmt(b, cp > 0xFFFF ? "\\U%08X" : "\\u%04X", (unsigned)cp);
}

/* `( [printable members] | "\\\"" | "\\\\" | escapes of control members )`: the JSON text of
 * one character of s. */
static void cset_emit(sbuf *b, const cset *s) {
    sbuf cls = {0};
    /* printable part: the ranges (sorted, merged; or their complement) minus " \ and C0
     * controls */
    uint32_t lo[65], hi[65];
    int n = 0;
    {
        uint32_t sl[64], sh[64];
        int m = s->n;
        memcpy(sl, s->lo, sizeof sl[0] * (size_t)m);
        memcpy(sh, s->hi, sizeof sh[0] * (size_t)m);
        for (int i = 1; i < m; i++) /* insertion sort by start */
            for (int j = i; j > 0 && sl[j - 1] > sl[j]; j--) {
                uint32_t t = sl[j]; sl[j] = sl[j - 1]; sl[j - 1] = t;
                t = sh[j]; sh[j] = sh[j - 1]; sh[j - 1] = t;
            }
        int k = 0;
        for (int i = 0; i < m; i++) { /* merge overlapping or adjacent */
            if (k > 0 && sl[i] <= sh[k - 1] + 1) {
                if (sh[i] > sh[k - 1]) sh[k - 1] = sh[i];
            } else {
                sl[k] = sl[i];
                sh[k] = sh[i];
                k++;
            }
        }
        if (!s->negated) {
            for (int i = 0; i < k; i++) lo[n] = sl[i], hi[n] = sh[i], n++;
        } else {
            uint32_t at = 0;
            for (int i = 0; i < k; i++) {
                if (sl[i] > at) lo[n] = at, hi[n] = sl[i] - 1, n++;
                at = sh[i] + 1;
            }
            if (at <= 0x10FFFF) lo[n] = at, hi[n] = 0x10FFFF, n++;
        }
    }
    int any = 0;
    sb_add(&cls, "[", 1);
    for (int k = 0; k < n; k++) {
        /* cut out 0x00-0x1F, '"' (0x22) and '\' (0x5C) */
        uint32_t a = lo[k] < 0x20 ? 0x20 : lo[k], z = hi[k];
        const uint32_t cuts[2] = {0x22, 0x5C};
        for (int j = 0; j <= 2 && a <= z; j++) {
            uint32_t end = j < 2 ? (cuts[j] - 1 < z ? cuts[j] - 1 : z) : z;
            if (j < 2 && cuts[j] < a) continue;
            if (a <= end) {
                class_char(&cls, a);
                if (end > a) {
                    sb_add(&cls, "-", 1);
                    class_char(&cls, end);
                }
                any = 1;
            }
            if (j < 2) a = cuts[j] + 1;
        }
    }
    sb_add(&cls, "]", 1);
    int alts = 0;
    sb_add(b, "(", 1);
    if (any) {
        sb_add(b, cls.p, cls.n);
        alts++;
    }
    if (cset_has(s, '"')) sb_str(b, alts++ ? " | \"\\\\\\\"\"" : " \"\\\\\\\"\"");
    if (cset_has(s, '\\')) sb_str(b, alts++ ? " | \"\\\\\\\\\"" : " \"\\\\\\\\\"");
    for (uint32_t cp = 0; cp < 0x20; cp++) {
        if (!cset_has(s, cp)) continue;
        sbuf t = {0};
        char ch = (char)cp;
        json_quote(&t, &ch, 1);
        if (t.p) {
            sb_str(b, alts++ ? " | " : " ");
            gbnf_literal(b, t.p + 1, t.n - 2);
        }
        free(t.p);
    }
    if (!alts) sb_str(b, "[^\\x00-\\U0010FFFF]"); /* nothing: never matches */
    sb_add(b, " )", 2);
    if (cls.oom) b->oom = 1;
    free(cls.p);
}

/* ------------------------------------------------------------------------------------------ */
/* `pattern`: a regular-expression subset → GBNF over the JSON string's text                   */

typedef struct rx {
    conv *c;
    const wlm_json *at; /* the pattern value, for messages */
    const char *s;
    size_t n, i;
    int depth;
} rx;

static int rx_err(rx *r, const char *what) {
    return report(r->c, WLM_ERR_UNSUPPORTED, 0, r->at->at,
                  "pattern '%.60s': %s at character %zu (the supported subset: literals, . "
                  "[classes] \\d \\w \\s \\D \\W \\S, ( ) (?: ) |, * + ? {m} {m,} {m,n}, ^ at "
                  "the start and $ at the end)",
                  r->s, what, r->i + 1);
}

/* One UTF-8 code point at r->i (the pattern is valid UTF-8: it came from the JSON reader). */
static uint32_t rx_cp(rx *r) {
    const unsigned char *s = (const unsigned char *)r->s + r->i;
    uint32_t cp;
    int len;
    if (s[0] < 0x80) cp = s[0], len = 1;
    else if ((s[0] & 0xE0) == 0xC0) cp = s[0] & 0x1Fu, len = 2;
    else if ((s[0] & 0xF0) == 0xE0) cp = s[0] & 0x0Fu, len = 3;
    else cp = s[0] & 0x07u, len = 4;
    for (int k = 1; k < len; k++) cp = (cp << 6) | (s[k] & 0x3Fu);
    r->i += (size_t)len;
    return cp;
}

/* An escape after '\' into set s (class shorthands) or a single code point. 0 on error. */
static int rx_escape(rx *r, cset *s) {
    if (r->i >= r->n) return rx_err(r, "a trailing '\\'"), 0;
    char e = r->s[r->i];
    int neg = 0;
    switch (e) {
    case 'D': neg = 1; /* fall through */
    case 'd': r->i++; s->negated = neg; return cset_add(s, '0', '9');
    case 'W': neg = 1; /* fall through */
    case 'w':
        r->i++;
        s->negated = neg;
        return cset_add(s, 'a', 'z') && cset_add(s, 'A', 'Z') && cset_add(s, '0', '9') &&
               cset_add(s, '_', '_');
    case 'S': neg = 1; /* fall through */
    case 's':
        r->i++;
        s->negated = neg;
        return cset_add(s, '\t', '\r') && cset_add(s, ' ', ' ');
    case 'n': r->i++; return cset_add(s, '\n', '\n');
    case 't': r->i++; return cset_add(s, '\t', '\t');
    case 'r': r->i++; return cset_add(s, '\r', '\r');
    case 'f': r->i++; return cset_add(s, '\f', '\f');
    case 'v': r->i++; return cset_add(s, '\v', '\v');
    case 'u': {
        uint32_t v = 0;
        if (r->n - r->i < 5) return rx_err(r, "\\u needs four hexadecimal digits"), 0;
        for (int k = 1; k <= 4; k++) {
            char h = r->s[r->i + (size_t)k];
            int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
                    : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
            if (d < 0) return rx_err(r, "\\u needs four hexadecimal digits"), 0;
            v = v * 16 + (uint32_t)d;
        }
        r->i += 5;
        return cset_add(s, v, v);
    }
    default:
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9'))
            return rx_err(r, "an unsupported escape (backreference, boundary or class)"), 0;
        {
            uint32_t cp = rx_cp(r);
            return cset_add(s, cp, cp);
        }
    }
}

static int rx_alt(rx *r, sbuf *b);

/* [ ... ] after the '['. */
static int rx_class(rx *r, cset *s) {
    if (r->i < r->n && r->s[r->i] == '^') {
        s->negated = 1;
        r->i++;
    }
    int first = 1;
    for (;;) {
        if (r->i >= r->n) return rx_err(r, "an unterminated '['"), 0;
        if (r->s[r->i] == ']' && !first) {
            r->i++;
            return 1;
        }
        first = 0;
        uint32_t lo;
        if (r->s[r->i] == '\\') {
            r->i++;
            cset one = {.n = 0};
            if (!rx_escape(r, &one)) return 0;
            if (one.negated || one.n != 1 || one.lo[0] != one.hi[0]) { /* \d inside [ ] */
                if (one.negated) return rx_err(r, "\\D \\W \\S inside [ ]"), 0;
                for (int k = 0; k < one.n; k++)
                    if (!cset_add(s, one.lo[k], one.hi[k])) return rx_err(r, "a class too large"), 0;
                continue;
            }
            lo = one.lo[0];
        } else {
            lo = rx_cp(r);
        }
        uint32_t hi = lo;
        if (r->i + 1 < r->n && r->s[r->i] == '-' && r->s[r->i + 1] != ']') {
            r->i++;
            if (r->s[r->i] == '\\') {
                r->i++;
                cset one = {.n = 0};
                if (!rx_escape(r, &one)) return 0;
                if (one.negated || one.n != 1 || one.lo[0] != one.hi[0])
                    return rx_err(r, "a class shorthand as a range end"), 0;
                hi = one.lo[0];
            } else {
                hi = rx_cp(r);
            }
            if (hi < lo) return rx_err(r, "a range whose end is below its start"), 0;
        }
        if (!cset_add(s, lo, hi)) return rx_err(r, "a class too large"), 0;
    }
}

/* A sequence of quantified atoms up to '|', ')' or the end. */
static int rx_seq(rx *r, sbuf *b) {
    int items = 0;
    while (r->i < r->n && r->s[r->i] != '|' && r->s[r->i] != ')') {
        sbuf atom = {0};
        const char ch = r->s[r->i];
        int ok = 1;
        if (ch == '(') {
            if (++r->depth > 32) {
                free(atom.p);
                return rx_err(r, "groups nested too deeply"), 0;
            }
            r->i++;
            if (r->i + 1 < r->n && r->s[r->i] == '?') {
                if (r->s[r->i + 1] != ':') {
                    free(atom.p);
                    return rx_err(r, "lookaround and named groups"), 0;
                }
                r->i += 2;
            }
            sb_add(&atom, "(", 1);
            ok = rx_alt(r, &atom);
            if (ok && (r->i >= r->n || r->s[r->i] != ')')) ok = (rx_err(r, "an unclosed '('"), 0);
            if (ok) r->i++;
            sb_add(&atom, " )", 2);
            r->depth--;
        } else if (ch == '[') {
            r->i++;
            cset s = {.n = 0};
            ok = rx_class(r, &s);
            if (ok) cset_emit(&atom, &s);
        } else if (ch == '.') {
            r->i++;
            cset s = {.n = 0};
            s.negated = 1;
            cset_add(&s, '\n', '\n');
            cset_emit(&atom, &s);
        } else if (ch == '\\') {
            r->i++;
            cset s = {.n = 0};
            ok = rx_escape(r, &s);
            if (ok) cset_emit(&atom, &s);
        } else if (ch == '*' || ch == '+' || ch == '?' || ch == '{') {
            ok = (rx_err(r, "a quantifier with nothing to repeat"), 0);
        } else if (ch == '^' || ch == '$') {
            ok = (rx_err(r, "an anchor inside the pattern"), 0);
        } else {
            cset s = {.n = 0};
            uint32_t cp = rx_cp(r);
            cset_add(&s, cp, cp);
            cset_emit(&atom, &s);
        }
        if (!ok) {
            free(atom.p);
            return 0;
        }
        /* quantifier */
        if (r->i < r->n && (r->s[r->i] == '*' || r->s[r->i] == '+' || r->s[r->i] == '?')) {
            sb_add(&atom, r->s + r->i, 1);
            r->i++;
        } else if (r->i < r->n && r->s[r->i] == '{') {
            size_t j = r->i + 1;
            unsigned long m = 0, x = 0;
            int has_m = 0, has_x = 0, comma = 0;
            while (j < r->n && r->s[j] >= '0' && r->s[j] <= '9' && m <= 100000)
                m = m * 10 + (unsigned long)(r->s[j++] - '0'), has_m = 1;
            if (j < r->n && r->s[j] == ',') {
                comma = 1;
                j++;
                while (j < r->n && r->s[j] >= '0' && r->s[j] <= '9' && x <= 100000)
                    x = x * 10 + (unsigned long)(r->s[j++] - '0'), has_x = 1;
            }
            if (!has_m || j >= r->n || r->s[j] != '}') {
                free(atom.p);
                return rx_err(r, "a '{' that is not a repetition {m}, {m,} or {m,n}"), 0;
            }
            if (m > WLM_GRAM_MAX_REPEAT || x > WLM_GRAM_MAX_REPEAT || (has_x && x < m)) {
                free(atom.p);
                return rx_err(r, "a repetition count above 10000 or reversed"), 0;
            }
            if (!comma) sb_fmt(&atom, "{%lu}", m);
            else if (!has_x) sb_fmt(&atom, "{%lu,}", m);
            else sb_fmt(&atom, "{%lu,%lu}", m, x);
            r->i = j + 1;
        }
        if (r->i < r->n && r->s[r->i] == '?' && atom.n && strchr("*+?}", atom.p[atom.n - 1]))
            r->i++; /* lazy: the same language */
        if (r->i < r->n && (r->s[r->i] == '*' || r->s[r->i] == '+' || r->s[r->i] == '{')) {
            free(atom.p);
            return rx_err(r, "a quantifier after a quantifier"), 0;
        }
        sb_add(b, " ", 1);
        if (atom.p) sb_add(b, atom.p, atom.n);
        if (atom.oom) b->oom = 1;
        free(atom.p);
        items++;
    }
    if (!items) sb_str(b, " \"\"");
    return 1;
}

static int rx_alt(rx *r, sbuf *b) {
    if (!rx_seq(r, b)) return 0;
    while (r->i < r->n && r->s[r->i] == '|') {
        r->i++;
        sb_str(b, " |");
        if (!rx_seq(r, b)) return 0;
    }
    return 1;
}

/* The string rule body for `pattern` p. */
static int pattern_body(conv *c, const wlm_json *p, sbuf *body) {
    rx r = {c, p, p->str, p->len, 0, 0};
    int start = p->len > 0 && p->str[0] == '^';
    int end = 0;
    if (p->len > (size_t)start && p->str[p->len - 1] == '$') {
        size_t bs = 0; /* an escaped '$' is a literal */
        for (size_t k = p->len - 1; k-- > 0 && p->str[k] == '\\';) bs++;
        end = bs % 2 == 0;
    }
    r.i = (size_t)start;
    r.n = p->len - (size_t)end;
    sbuf re = {0};
    int ok = rx_alt(&r, &re);
    if (ok && r.i < r.n) ok = (rx_err(&r, "an unmatched ')'"), 0);
    if (ok) { /* top-level '|' with one anchor changes meaning: refuse */
        int depth = 0, top_alt = 0;
        for (size_t k = (size_t)start; k < r.n; k++) {
            if (p->str[k] == '\\') k++;
            else if (p->str[k] == '(') depth++;
            else if (p->str[k] == ')') depth--;
            else if (p->str[k] == '|' && depth == 0) top_alt = 1;
        }
        if (top_alt && (start || end))
            ok = (rx_err(&r, "'|' at the top level with an anchor (write ^(a|b)$)"), 0);
    }
    if (ok) {
        c->prims |= P_CHAR;
        sb_str(body, "\"\\\"\" ");
        if (!start) sb_str(body, "char* ");
        sb_str(body, "(");
        if (re.p) sb_add(body, re.p, re.n);
        sb_str(body, " ) ");
        if (!end) sb_str(body, "char* ");
        sb_str(body, "\"\\\"\"");
    }
    if (re.oom) body->oom = 1;
    free(re.p);
    return ok;
}

/* ------------------------------------------------------------------------------------------ */
/* Schemas                                                                                     */

static int gen(conv *c, const wlm_json *s, const char *hint, sbuf *ref);

/* Appends `name ::= body` to the output. */
static void add_rule(conv *c, const char *name, const sbuf *body) {
    sb_str(&c->out, name);
    sb_str(&c->out, " ::= ");
    if (body->p) sb_add(&c->out, body->p, body->n);
    sb_str(&c->out, "\n");
    if (body->oom) c->out.oom = 1;
}

/* Writes a new rule from body and appends its name to ref. */
static void emit_named(conv *c, const char *hint, const sbuf *body, sbuf *ref) {
    char name[48];
    rule_name(c, hint, name);
    add_rule(c, name, body);
    sb_str(ref, name);
}

static const char *const annotations[] = {
    "$schema", "$id", "$comment", "$anchor", "$defs", "definitions", "title", "description",
    "default", "examples", "deprecated", "readOnly", "writeOnly", "contentEncoding",
    "contentMediaType", NULL};
static const char *const supported[] = {
    "type", "properties", "required", "additionalProperties", "items", "enum", "const",
    "anyOf", "oneOf", "minItems", "maxItems", "minLength", "maxLength", "pattern", "$ref", NULL};

static int in_list(const char *const *list, const wlm_json *key) {
    for (int k = 0; list[k]; k++)
        if (strlen(list[k]) == key->len && memcmp(list[k], key->str, key->len) == 0) return 1;
    return 0;
}

/* A non-negative integer keyword (minLength...), -1 when absent; error when malformed. */
static int count_kw(conv *c, const wlm_json *s, const char *kw, long *out) {
    const wlm_json *v = wlm_json_get(s, kw);
    *out = -1;
    if (!v) return WLM_OK;
    if (v->type != WLM_JSON_NUMBER || v->num < 0 || v->num != (double)(long)v->num)
        return report(c, WLM_ERR_INVALID_ARG, 0, v->at, "'%s' must be a non-negative integer", kw);
    if (v->num > WLM_GRAM_MAX_REPEAT)
        return report(c, WLM_ERR_UNSUPPORTED, 0, v->at, "'%s' above %d is not supported", kw,
                      WLM_GRAM_MAX_REPEAT);
    *out = (long)v->num;
    return WLM_OK;
}

/* `{m,n}` for min m (or 0 when -1) and max n (-1: unbounded) */
static void repeat_suffix(sbuf *b, long lo, long hi) {
    if (lo < 0) lo = 0;
    if (hi < 0) sb_fmt(b, "{%ld,}", lo);
    else sb_fmt(b, "{%ld,%ld}", lo, hi);
}

static int gen_string(conv *c, const wlm_json *s, const char *hint, sbuf *ref) {
    long lo, hi;
    if (count_kw(c, s, "minLength", &lo) || count_kw(c, s, "maxLength", &hi)) return c->status;
    const wlm_json *pat = wlm_json_get(s, "pattern");
    if (pat && pat->type != WLM_JSON_STRING)
        return report(c, WLM_ERR_INVALID_ARG, 0, pat->at, "'pattern' must be a string");
    if (hi >= 0 && lo > hi)
        return report(c, WLM_ERR_INVALID_ARG, 0, s->at, "minLength is above maxLength");
    if (pat && (lo >= 0 || hi >= 0)) {
        if (report(c, WLM_ERR_UNSUPPORTED, 1, pat->at,
                   "'pattern' together with minLength / maxLength is not supported"))
            return c->status;
    }
    if (pat) {
        sbuf body = {0};
        if (pattern_body(c, pat, &body)) emit_named(c, hint, &body, ref);
        free(body.p);
        return c->status;
    }
    if (lo <= 0 && hi < 0) {
        c->prims |= P_STRING;
        sb_str(ref, "string");
        return WLM_OK;
    }
    c->prims |= P_CHAR;
    sbuf body = {0};
    sb_str(&body, "\"\\\"\" char");
    repeat_suffix(&body, lo, hi);
    sb_str(&body, " \"\\\"\"");
    emit_named(c, hint, &body, ref);
    free(body.p);
    return WLM_OK;
}

static int gen_array(conv *c, const wlm_json *s, const char *hint, sbuf *ref) {
    long lo, hi;
    if (count_kw(c, s, "minItems", &lo) || count_kw(c, s, "maxItems", &hi)) return c->status;
    if (hi >= 0 && lo > hi)
        return report(c, WLM_ERR_INVALID_ARG, 0, s->at, "minItems is above maxItems");
    const wlm_json *items = wlm_json_get(s, "items");
    if (items && items->type == WLM_JSON_ARRAY)
        return report(c, WLM_ERR_UNSUPPORTED, 0, items->at,
                      "'items' as an array (tuples) is not supported");
    sbuf item = {0}, body = {0};
    if (items) {
        char h[48];
        snprintf(h, sizeof h, "%s-item", hint);
        size_t old = path_push(c, "items", 5);
        gen(c, items, h, &item);
        path_pop(c, old);
    } else {
        c->prims |= P_VALUE;
        sb_str(&item, "value");
    }
    if (c->status == WLM_OK) {
        c->prims |= P_WS;
        sb_str(&body, "\"[\" ws ");
        if (hi != 0) {
            const char *it = item.p ? item.p : "value";
            if (lo <= 0) sb_str(&body, "( ");
            sb_fmt(&body, "%s ws", it);
            if (hi != 1) {
                sb_fmt(&body, " ( \",\" ws %s ws )", it);
                repeat_suffix(&body, lo > 0 ? lo - 1 : 0, hi > 0 ? hi - 1 : -1);
            }
            if (lo <= 0) sb_str(&body, " )?");
        }
        sb_str(&body, " \"]\"");
        if (item.oom) body.oom = 1;
        emit_named(c, hint, &body, ref);
    }
    free(item.p);
    free(body.p);
    return c->status;
}

/* kv ::= "\"key\"" ws ":" ws value ws  (the key a literal, or `string` when NULL) */
static void kv_expr(sbuf *b, const wlm_json *key, const char *value) {
    if (key) {
        sbuf q = {0};
        json_quote(&q, key->str, key->len);
        if (q.oom) b->oom = 1;
        else gbnf_literal(b, q.p, q.n);
        free(q.p);
    } else {
        sb_str(b, "string");
    }
    sb_fmt(b, " ws \":\" ws ");
    sb_str(b, value);
    sb_str(b, " ws");
}

static int gen_object(conv *c, const wlm_json *s, const char *hint, sbuf *ref) {
    const wlm_json *props = wlm_json_get(s, "properties");
    const wlm_json *req = wlm_json_get(s, "required");
    const wlm_json *add = wlm_json_get(s, "additionalProperties");
    if (props && props->type != WLM_JSON_OBJECT)
        return report(c, WLM_ERR_INVALID_ARG, 0, props->at, "'properties' must be an object");
    if (req && req->type != WLM_JSON_ARRAY)
        return report(c, WLM_ERR_INVALID_ARG, 0, req->at, "'required' must be an array");
    for (uint32_t k = 0; req && k < req->n; k++) {
        if (req->items[k].type != WLM_JSON_STRING)
            return report(c, WLM_ERR_INVALID_ARG, 0, req->items[k].at,
                          "'required' must list strings");
        if (!wlm_json_get(props, req->items[k].str) || strlen(req->items[k].str) != req->items[k].len)
            return report(c, WLM_ERR_UNSUPPORTED, 0, req->items[k].at,
                          "required property '%.60s' is not in 'properties' (only the listed "
                          "properties can be generated)",
                          req->items[k].str);
    }
    const int n_props = props ? (int)props->n : 0;
    c->prims |= P_WS;
    if (n_props == 0) { /* free keys: values per additionalProperties (any when absent / true) */
        if (add && add->type == WLM_JSON_FALSE) {
            sbuf body = {0};
            sb_str(&body, "\"{\" ws \"}\"");
            emit_named(c, hint, &body, ref);
            free(body.p);
            return WLM_OK;
        }
        if (!add || add->type == WLM_JSON_TRUE) {
            c->prims |= P_OBJECT;
            sb_str(ref, "object");
            return WLM_OK;
        }
        sbuf v = {0}, body = {0};
        char h[48];
        snprintf(h, sizeof h, "%s-additional", hint);
        size_t old = path_push(c, "additionalProperties", 20);
        gen(c, add, h, &v);
        path_pop(c, old);
        if (c->status == WLM_OK) {
            c->prims |= P_STRING;
            sbuf kv = {0};
            kv_expr(&kv, NULL, v.p ? v.p : "value");
            sb_fmt(&body, "\"{\" ws ( %s ( \",\" ws %s )* )? \"}\"", kv.p ? kv.p : "",
                   kv.p ? kv.p : "");
            if (kv.oom || v.oom) body.oom = 1;
            /* sb_fmt truncates at 255 bytes: rebuild without it when long */
            if (kv.n > 100) {
                body.n = 0;
                sb_str(&body, "\"{\" ws ( ");
                if (kv.p) sb_add(&body, kv.p, kv.n);
                sb_str(&body, " ( \",\" ws ");
                if (kv.p) sb_add(&body, kv.p, kv.n);
                sb_str(&body, " )* )? \"}\"");
            }
            emit_named(c, hint, &body, ref);
            free(kv.p);
        }
        free(v.p);
        free(body.p);
        return c->status;
    }
    if (add && add->type != WLM_JSON_FALSE &&
        report(c, WLM_ERR_UNSUPPORTED, 1, add->at,
               "'additionalProperties' other than false beside 'properties' is not supported "
               "(no other key is generated)"))
        return c->status;
    /* one value rule per property, then the comma chain from the last property back:
     *   after_i ::= ( "," ws kv_i )? after_{i+1}     (kv_i required: without the ?)
     *   first_i ::= kv_i after_{i+1} | first_{i+1}   (kv_i required: kv_i after_{i+1} only)  */
    char (*val)[48] = calloc((size_t)n_props, sizeof *val);
    char (*after)[48] = calloc((size_t)n_props + 1, sizeof *after);
    char (*first)[48] = calloc((size_t)n_props + 1, sizeof *first);
    if (!val || !after || !first) {
        free(val), free(after), free(first);
        return conv_nomem(c);
    }
    for (int k = 0; k < n_props && c->status == WLM_OK; k++) {
        char h[48];
        snprintf(h, sizeof h, "%.20s-%.20s", hint, props->keys[k].str);
        size_t old = path_push(c, "properties", 10);
        path_push(c, props->keys[k].str, props->keys[k].len);
        sbuf v = {0};
        gen(c, &props->items[k], h, &v);
        path_pop(c, old);
        if (v.oom) conv_nomem(c);
        if (c->status == WLM_OK) snprintf(val[k], sizeof val[k], "%s", v.p ? v.p : "value");
        free(v.p);
    }
    for (uint32_t k = 0; k + 1 < props->n && c->status == WLM_OK; k++)
        for (uint32_t j = k + 1; j < props->n; j++)
            if (props->keys[k].len == props->keys[j].len &&
                memcmp(props->keys[k].str, props->keys[j].str, props->keys[k].len) == 0)
                report(c, WLM_ERR_INVALID_ARG, 0, props->keys[j].at, "property '%.60s' twice",
                       props->keys[j].str);
    if (c->status == WLM_OK) {
        int any_optional = 0;
        for (int k = n_props; k-- > 0;) {
            int required = 0;
            for (uint32_t j = 0; req && j < req->n; j++)
                required |= req->items[j].len == props->keys[k].len &&
                            memcmp(req->items[j].str, props->keys[k].str, props->keys[k].len) == 0;
            any_optional |= !required;
            sbuf kv = {0}, body = {0};
            kv_expr(&kv, &props->keys[k], val[k]);
            /* after_k */
            sb_str(&body, required ? "\",\" ws " : "( \",\" ws ");
            if (kv.p) sb_add(&body, kv.p, kv.n);
            sb_str(&body, required ? " " : " )? ");
            sb_str(&body, after[k + 1][0] ? after[k + 1] : "");
            if (k > 0) {
                rule_name(c, "after", after[k]);
                add_rule(c, after[k], &body);
            }
            /* first_k */
            body.n = 0;
            if (kv.p) sb_add(&body, kv.p, kv.n);
            sb_str(&body, " ");
            sb_str(&body, after[k + 1]);
            if (!required) {
                sb_str(&body, first[k + 1][0] ? " | " : " | \"\"");
                sb_str(&body, first[k + 1]);
            }
            if (kv.oom) body.oom = 1;
            rule_name(c, "first", first[k]);
            add_rule(c, first[k], &body);
            free(kv.p);
            free(body.p);
        }
        (void)any_optional;
        sbuf body = {0};
        sb_str(&body, "\"{\" ws ");
        sb_str(&body, first[0]);
        sb_str(&body, " \"}\"");
        emit_named(c, hint, &body, ref);
        free(body.p);
    }
    free(val), free(after), free(first);
    return c->status;
}

static int type_is(const wlm_json *t, const char *name) {
    return t->type == WLM_JSON_STRING && strlen(name) == t->len && memcmp(t->str, name, t->len) == 0;
}

/* Does value v have JSON type `t` ("integer": a number with no fraction)? */
static int value_has_type(const wlm_json *v, const wlm_json *t) {
    if (type_is(t, "null")) return v->type == WLM_JSON_NULL;
    if (type_is(t, "boolean")) return v->type == WLM_JSON_TRUE || v->type == WLM_JSON_FALSE;
    if (type_is(t, "number")) return v->type == WLM_JSON_NUMBER;
    if (type_is(t, "integer")) return v->type == WLM_JSON_NUMBER && v->num == (double)(long long)v->num;
    if (type_is(t, "string")) return v->type == WLM_JSON_STRING;
    if (type_is(t, "array")) return v->type == WLM_JSON_ARRAY;
    if (type_is(t, "object")) return v->type == WLM_JSON_OBJECT;
    return 0;
}

static int value_allowed(const wlm_json *v, const wlm_json *type) {
    if (!type) return 1;
    if (type->type == WLM_JSON_STRING) return value_has_type(v, type);
    for (uint32_t k = 0; type->type == WLM_JSON_ARRAY && k < type->n; k++)
        if (value_has_type(v, &type->items[k])) return 1;
    return 0;
}

/* One type name → its rule. */
static int gen_type(conv *c, const wlm_json *s, const wlm_json *t, const char *hint, sbuf *ref) {
    static const struct { const char *name; unsigned prim; } prims[] = {
        {"integer", P_INTEGER}, {"number", P_NUMBER}, {"boolean", P_BOOLEAN}, {"null", P_NULL}};
    if (t->type != WLM_JSON_STRING)
        return report(c, WLM_ERR_INVALID_ARG, 0, t->at, "a type must be a string");
    for (int k = 0; k < 4; k++)
        if (type_is(t, prims[k].name)) {
            c->prims |= prims[k].prim;
            sb_str(ref, prims[k].name);
            return WLM_OK;
        }
    if (type_is(t, "string")) return gen_string(c, s, hint, ref);
    if (type_is(t, "array")) return gen_array(c, s, hint, ref);
    if (type_is(t, "object")) return gen_object(c, s, hint, ref);
    return report(c, WLM_ERR_INVALID_ARG, 0, t->at, "unknown type '%.40s'", t->str);
}

/* Resolves "#" or "#/a/b~1c" against the root document. */
static const wlm_json *resolve(conv *c, const wlm_json *ref) {
    if (ref->type != WLM_JSON_STRING)
        return report(c, WLM_ERR_INVALID_ARG, 0, ref->at, "'$ref' must be a string"), NULL;
    if (ref->len == 0 || ref->str[0] != '#')
        return report(c, WLM_ERR_UNSUPPORTED, 0, ref->at,
                      "'$ref' '%.60s': only references inside the schema ('#/...') are "
                      "supported", ref->str), NULL;
    const wlm_json *v = c->root;
    size_t i = 1;
    if (i < ref->len && ref->str[i] != '/')
        return report(c, WLM_ERR_UNSUPPORTED, 0, ref->at,
                      "'$ref' '%.60s': only JSON pointers ('#/$defs/name') are supported",
                      ref->str), NULL;
    while (i < ref->len && v) {
        i++; /* '/' */
        char seg[256];
        size_t n = 0;
        while (i < ref->len && ref->str[i] != '/') {
            char ch = ref->str[i++];
            if (ch == '~' && i < ref->len && (ref->str[i] == '0' || ref->str[i] == '1'))
                ch = ref->str[i++] == '0' ? '~' : '/';
            if (n + 1 < sizeof seg) seg[n++] = ch;
        }
        seg[n] = '\0';
        if (v->type == WLM_JSON_OBJECT) {
            v = wlm_json_get(v, seg);
        } else if (v->type == WLM_JSON_ARRAY) {
            char *end;
            unsigned long k = strtoul(seg, &end, 10);
            v = (n && *end == '\0' && k < v->n) ? &v->items[k] : NULL;
        } else {
            v = NULL;
        }
    }
    if (!v)
        report(c, WLM_ERR_INVALID_ARG, 0, ref->at, "'$ref' '%.60s' points at nothing", ref->str);
    return v;
}

static int gen_ref(conv *c, const wlm_json *refv, sbuf *ref) {
    const wlm_json *target = resolve(c, refv);
    if (!target) return c->status;
    for (uint32_t k = 0; k < c->n_refs; k++)
        if (c->refs[k].target == target) {
            sb_str(ref, c->refs[k].name);
            return WLM_OK;
        }
    if (c->n_refs >= MAX_REFS)
        return report(c, WLM_ERR_UNSUPPORTED, 0, refv->at, "more than %d '$ref' targets",
                      MAX_REFS);
    if (!c->refs) {
        c->refs = malloc(sizeof *c->refs * MAX_REFS);
        if (!c->refs) return conv_nomem(c);
    }
    ref_memo *m = &c->refs[c->n_refs++];
    m->target = target;
    snprintf(m->name, sizeof m->name, "ref-%u", (unsigned)++c->counter);
    /* the rule exists before its body is converted, so a recursive schema refers to it */
    char hint[48];
    const char *slash = strrchr(refv->str, '/');
    snprintf(hint, sizeof hint, "%.30s", slash ? slash + 1 : "root");
    sbuf body = {0};
    gen(c, target, hint, &body);
    if (c->status == WLM_OK) add_rule(c, m->name, &body);
    sb_str(ref, m->name);
    free(body.p);
    return c->status;
}

static int gen_alternatives(conv *c, const wlm_json *list, const char *kw, const char *hint,
                            sbuf *ref) {
    if (list->type != WLM_JSON_ARRAY || list->n == 0)
        return report(c, WLM_ERR_INVALID_ARG, 0, list->at, "'%s' must be a non-empty array", kw);
    sbuf body = {0};
    for (uint32_t k = 0; k < list->n && c->status == WLM_OK; k++) {
        size_t old = path_push(c, kw, strlen(kw));
        path_push_index(c, k);
        char h[48];
        snprintf(h, sizeof h, "%.30s-%u", hint, (unsigned)k);
        if (k) sb_str(&body, " | ");
        gen(c, &list->items[k], h, &body);
        path_pop(c, old);
    }
    if (c->status == WLM_OK) emit_named(c, hint, &body, ref);
    free(body.p);
    return c->status;
}

static int gen(conv *c, const wlm_json *s, const char *hint, sbuf *ref) {
    if (c->status != WLM_OK) return c->status;
    if (c->nest >= MAX_NEST)
        return report(c, WLM_ERR_UNSUPPORTED, 0, s->at,
                      "schemas nested deeper than %d (through properties, items or $ref)",
                      MAX_NEST);
    if (s->type == WLM_JSON_TRUE) {
        c->prims |= P_VALUE;
        sb_str(ref, "value");
        return WLM_OK;
    }
    if (s->type == WLM_JSON_FALSE)
        return report(c, WLM_ERR_INVALID_ARG, 0, s->at, "the schema 'false' admits no value");
    if (s->type != WLM_JSON_OBJECT)
        return report(c, WLM_ERR_INVALID_ARG, 0, s->at, "a schema must be an object or a boolean");
    c->nest++;
    int constraining = 0; /* supported keywords other than $ref */
    for (uint32_t k = 0; k < s->n && c->status == WLM_OK; k++) {
        const wlm_json *key = &s->keys[k];
        if (in_list(annotations, key)) continue;
        if (in_list(supported, key)) {
            constraining += !(key->len == 4 && memcmp(key->str, "$ref", 4) == 0);
            continue;
        }
        report(c, WLM_ERR_UNSUPPORTED, 1, key->at, "keyword '%.60s' is not supported", key->str);
    }
    const wlm_json *refv = wlm_json_get(s, "$ref");
    const wlm_json *cnst = wlm_json_get(s, "const");
    const wlm_json *en = wlm_json_get(s, "enum");
    const wlm_json *type = wlm_json_get(s, "type");
    const wlm_json *any = wlm_json_get(s, "anyOf");
    const wlm_json *one = wlm_json_get(s, "oneOf");
    if (c->status != WLM_OK) {
    } else if (refv) {
        if (constraining)
            report(c, WLM_ERR_UNSUPPORTED, 1, refv->at,
                   "keywords beside '$ref' are not supported (the reference alone is used)");
        if (c->status == WLM_OK) gen_ref(c, refv, ref);
    } else if (cnst || en) {
        if (cnst && en)
            report(c, WLM_ERR_UNSUPPORTED, 1, en->at, "'enum' beside 'const' (const is used)");
        sbuf body = {0};
        if (cnst) {
            value_literal(&body, cnst);
        } else if (en->type != WLM_JSON_ARRAY || en->n == 0) {
            report(c, WLM_ERR_INVALID_ARG, 0, en->at, "'enum' must be a non-empty array");
        } else {
            int n = 0;
            for (uint32_t k = 0; k < en->n; k++) {
                if (!value_allowed(&en->items[k], type)) continue; /* type filters the enum */
                if (n++) sb_str(&body, " | ");
                value_literal(&body, &en->items[k]);
            }
            if (!n) report(c, WLM_ERR_INVALID_ARG, 0, en->at, "no 'enum' value has the 'type'");
        }
        if (c->status == WLM_OK) emit_named(c, hint, &body, ref);
        free(body.p);
    } else if (any || one) {
        if (any && one)
            report(c, WLM_ERR_UNSUPPORTED, 0, one->at, "'anyOf' and 'oneOf' together");
        else if (constraining > 1)
            report(c, WLM_ERR_UNSUPPORTED, 1, (any ? any : one)->at,
                   "keywords beside '%s' are not supported (the alternatives alone are used)",
                   any ? "anyOf" : "oneOf");
        if (c->status == WLM_OK)
            gen_alternatives(c, any ? any : one, any ? "anyOf" : "oneOf", hint, ref);
    } else if (type && type->type == WLM_JSON_ARRAY) {
        if (type->n == 0) {
            report(c, WLM_ERR_INVALID_ARG, 0, type->at, "'type' is an empty array");
        } else {
            sbuf body = {0};
            for (uint32_t k = 0; k < type->n && c->status == WLM_OK; k++) {
                if (k) sb_str(&body, " | ");
                gen_type(c, s, &type->items[k], hint, &body);
            }
            if (c->status == WLM_OK) emit_named(c, hint, &body, ref);
            free(body.p);
        }
    } else if (type) {
        gen_type(c, s, type, hint, ref);
    } else { /* no type: inferred from the keywords, else any value */
        static const struct { const char *kw, *type; } infer[] = {
            {"properties", "object"}, {"required", "object"}, {"additionalProperties", "object"},
            {"items", "array"}, {"minItems", "array"}, {"maxItems", "array"},
            {"minLength", "string"}, {"maxLength", "string"}, {"pattern", "string"}};
        const char *t = NULL;
        for (size_t k = 0; k < sizeof infer / sizeof infer[0] && !t; k++)
            if (wlm_json_get(s, infer[k].kw)) t = infer[k].type;
        if (t) {
            wlm_json tv = {.type = WLM_JSON_STRING, .str = t, .len = strlen(t), .at = s->at};
            gen_type(c, s, &tv, hint, ref);
        } else {
            c->prims |= P_VALUE;
            sb_str(ref, "value");
        }
    }
    c->nest--;
    if (ref->oom || c->out.oom) conv_nomem(c);
    return c->status;
}

/* The shared rules, appended once each when used. */
static void add_primitives(conv *c) {
    unsigned p = c->prims;
    if (p & (P_OBJECT | P_ARRAY)) p |= P_VALUE; /* their members are any values */
    if (p & P_VALUE) p |= P_OBJECT | P_ARRAY | P_STRING | P_NUMBER | P_BOOLEAN | P_NULL | P_WS;
    if (p & P_STRING) p |= P_CHAR;
    static const struct { unsigned bit; const char *rule; } rules[] = {
        {P_VALUE, "value ::= object | array | string | number | boolean | null\n"},
        {P_OBJECT, "object ::= \"{\" ws ( string ws \":\" ws value ws ( \",\" ws string ws \":\" "
                   "ws value ws )* )? \"}\"\n"},
        {P_ARRAY, "array ::= \"[\" ws ( value ws ( \",\" ws value ws )* )? \"]\"\n"},
        {P_STRING, "string ::= \"\\\"\" char* \"\\\"\"\n"},
        {P_CHAR, "char ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" "
                 "( [0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2} ) )\n"},
        {P_NUMBER, "number ::= integer ( \".\" [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,2} )?\n"},
        {P_INTEGER | P_NUMBER, "integer ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,15} )\n"},
        {P_BOOLEAN, "boolean ::= \"true\" | \"false\"\n"},
        {P_NULL, "null ::= \"null\"\n"},
        {P_WS, "ws ::= ( \" \" | \"\\n\" [ \\t]{0,20} )?\n"},
    };
    for (size_t k = 0; k < sizeof rules / sizeof rules[0]; k++)
        if (p & rules[k].bit) sb_str(&c->out, rules[k].rule);
}

int wlm_json_schema_to_grammar(const char *schema, size_t schema_len, unsigned flags,
                               char **grammar, size_t *grammar_len, char *msg, size_t msg_size) {
    if (msg && msg_size) msg[0] = '\0';
    if (!grammar) return WLM_ERR_INVALID_ARG;
    *grammar = NULL;
    if (grammar_len) *grammar_len = 0;
    if (!schema && schema_len) return WLM_ERR_INVALID_ARG;
    wlm_json_doc *doc = NULL;
    char jerr[256];
    int rc = wlm_json_parse(schema, schema_len, &doc, jerr, sizeof jerr);
    if (rc != WLM_OK) {
        if (msg && msg_size) snprintf(msg, msg_size, "the schema is not JSON: %s", jerr);
        return rc;
    }
    conv c;
    memset(&c, 0, sizeof c);
    c.doc = doc;
    c.root = wlm_json_root(doc);
    c.flags = flags;
    c.msg = msg;
    c.msglen = msg_size;
    sbuf root = {0};
    gen(&c, c.root, "root", &root);
    if (c.status == WLM_OK && !root.oom) { /* root's rule goes first, before the others */
        sbuf all = {0};
        sb_str(&all, "root ::= ");
        sb_str(&all, root.p ? root.p : "value");
        sb_str(&all, "\n");
        if (c.out.p) sb_str(&all, c.out.p);
        if (c.out.oom) all.oom = 1;
        free(c.out.p);
        c.out = all;
        add_primitives(&c);
    }
    if (c.status == WLM_OK && (c.out.oom || root.oom || c.path.oom)) conv_nomem(&c);
    if (c.status == WLM_OK && c.out.n > WLM_GRAM_MAX_TEXT)
        report(&c, WLM_ERR_UNSUPPORTED, 0, 0, "the grammar would be %zu bytes (at most %u)",
               c.out.n, (unsigned)WLM_GRAM_MAX_TEXT);
    if (c.status == WLM_OK) { /* the grammar handed out always compiles */
        wlm_gram *g = NULL;
        char gerr[256];
        int grc = wlm_gram_parse(c.out.p, c.out.n, &g, gerr, sizeof gerr);
        wlm_gram_free(g);
        if (grc != WLM_OK) {
            c.status = grc == WLM_ERR_NOMEM ? grc : WLM_ERR_UNSUPPORTED;
            if (msg && msg_size)
                snprintf(msg, msg_size, "the schema leads to a grammar the engine refuses (a "
                                        "$ref / anyOf cycle that never reaches a value, a "
                                        "pattern repeating the empty string, or a grammar too "
                                        "large): %s", gerr);
        }
    }
    if (c.status == WLM_OK) {
        *grammar = c.out.p;
        if (grammar_len) *grammar_len = c.out.n;
        c.out.p = NULL;
        if (msg && msg_size && c.warn.n) {
            snprintf(msg, msg_size, "%s%s", c.warn.p, c.n_warn > 32 ? "; ..." : "");
        }
    }
    free(c.out.p);
    free(root.p);
    free(c.path.p);
    free(c.warn.p);
    free(c.refs);
    wlm_json_free(doc);
    return c.status;
}
