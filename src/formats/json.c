/*
 * json.c — a strict JSON reader (RFC 8259) into an arena-allocated tree. Recursive descent with
 * a depth limit; arrays and objects collect their children on a shared stack and move them into
 * the arena when they close, so every value is one allocation-free struct in place. It does not
 * write JSON (json_schema.c serialises what it needs).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/json.h"
#include "runtime/errors.h"
#include "wasmlm.h"

typedef struct chunk {
    struct chunk *next;
    size_t used, cap;
    max_align_t data[];
} chunk;

struct wlm_json_doc {
    chunk *chunks;
    wlm_json root;
    size_t *lines;    /* offsets where each line starts (n_lines) */
    size_t n_lines;
};

typedef struct jparser {
    const char *s;
    size_t n, i;
    wlm_json_doc *doc;
    wlm_json *stack; /* children of the open arrays / objects (keys and values interleaved) */
    size_t sp, cap;
    int status;
    char *err;
    size_t errlen;
} jparser;

static void *arena_alloc(jparser *p, size_t bytes) {
    bytes = (bytes + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    chunk *c = p->doc->chunks;
    if (!c || c->cap - c->used < bytes) {
        size_t cap = bytes > 65536 ? bytes : 65536;
        c = malloc(sizeof *c + cap);
        if (!c) return NULL;
        c->cap = cap;
        c->used = 0;
        c->next = p->doc->chunks;
        p->doc->chunks = c;
    }
    void *r = (char *)c->data + c->used;
    c->used += bytes;
    return r;
}

#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 3, 4)))
#endif
static int jerr(jparser *p, size_t at, const char *fmt, ...) {
    if (p->status != WLM_OK) return p->status;
    p->status = WLM_ERR_INVALID_ARG;
    if (p->err && p->errlen) {
        va_list ap;
        va_start(ap, fmt);
        wlm_verrorf_at(p->err, p->errlen, p->status, "JSON", p->s, p->n, at, fmt, ap);
        va_end(ap);
    }
    return p->status;
}

static int jnomem(jparser *p) {
    if (p->status == WLM_OK) {
        p->status = WLM_ERR_NOMEM;
        if (p->err && p->errlen) snprintf(p->err, p->errlen, "out of memory for the JSON");
    }
    return p->status;
}

static void skip_ws(jparser *p) {
    while (p->i < p->n) {
        char c = p->s[p->i];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->i++;
    }
}

static int push(jparser *p, const wlm_json *v) {
    if (p->sp == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 64;
        wlm_json *s = realloc(p->stack, sizeof *s * cap);
        if (!s) return jnomem(p);
        p->stack = s;
        p->cap = cap;
    }
    p->stack[p->sp++] = *v;
    return WLM_OK;
}

static int hex4(const char *s, uint32_t *v) {
    *v = 0;
    for (int k = 0; k < 4; k++) {
        char c = s[k];
        int h = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (h < 0) return 0;
        *v = *v * 16 + (uint32_t)h;
    }
    return 1;
}

static size_t put_utf8(char *o, uint32_t cp) {
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Length of the valid UTF-8 sequence at s (1..4), 0 when invalid (overlong, surrogate,
 * beyond U+10FFFF, truncated). */
static size_t utf8_valid(const unsigned char *s, size_t n) {
    unsigned char c = s[0];
    if (c < 0x80) return 1;
    size_t need;
    uint32_t cp, min;
    if ((c & 0xE0) == 0xC0) need = 1, cp = c & 0x1Fu, min = 0x80;
    else if ((c & 0xF0) == 0xE0) need = 2, cp = c & 0x0Fu, min = 0x800;
    else if ((c & 0xF8) == 0xF0) need = 3, cp = c & 0x07u, min = 0x10000;
    else return 0;
    if (n < need + 1) return 0;
    for (size_t k = 1; k <= need; k++) {
        if ((s[k] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[k] & 0x3Fu);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return need + 1;
}

/* A string starting at the opening quote. */
static int parse_string(jparser *p, wlm_json *v) {
    const size_t at = p->i;
    size_t end = p->i + 1;
    while (end < p->n && p->s[end] != '"') end += p->s[end] == '\\' ? 2 : 1;
    if (end >= p->n) return jerr(p, at, "unterminated string");
    char *o = arena_alloc(p, end - at);
    if (!o) return jnomem(p);
    size_t k = 0, i = at + 1;
    while (i < end) {
        const unsigned char c = (unsigned char)p->s[i];
        if (c < 0x20) return jerr(p, i, "control character 0x%02X in a string (write it as an "
                                        "escape)", (unsigned)c);
        if (c != '\\') {
            size_t m = utf8_valid((const unsigned char *)p->s + i, end - i);
            if (!m) return jerr(p, i, "invalid UTF-8 in a string");
            memcpy(o + k, p->s + i, m);
            k += m;
            i += m;
            continue;
        }
        const char e = p->s[i + 1];
        i += 2;
        switch (e) {
        case '"': o[k++] = '"'; break;
        case '\\': o[k++] = '\\'; break;
        case '/': o[k++] = '/'; break;
        case 'b': o[k++] = '\b'; break;
        case 'f': o[k++] = '\f'; break;
        case 'n': o[k++] = '\n'; break;
        case 'r': o[k++] = '\r'; break;
        case 't': o[k++] = '\t'; break;
        case 'u': {
            uint32_t cp, lo;
            if (end - i < 4 || !hex4(p->s + i, &cp))
                return jerr(p, i - 2, "\\u needs four hexadecimal digits");
            i += 4;
            if (cp >= 0xDC00 && cp <= 0xDFFF) return jerr(p, i - 6, "lone low surrogate");
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (end - i < 6 || p->s[i] != '\\' || p->s[i + 1] != 'u' ||
                    !hex4(p->s + i + 2, &lo) || lo < 0xDC00 || lo > 0xDFFF)
                    return jerr(p, i - 6, "high surrogate without its low surrogate");
                i += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            k += put_utf8(o + k, cp); /* never longer than its escape */
            break;
        }
        default:
            return jerr(p, i - 2, "unknown escape '\\%c'", (e >= 32 && e < 127) ? e : '?');
        }
    }
    o[k] = '\0';
    v->type = WLM_JSON_STRING;
    v->str = o;
    v->len = k;
    p->i = end + 1;
    return WLM_OK;
}

static int is_digit(int c) { return c >= '0' && c <= '9'; }

static int parse_number(jparser *p, wlm_json *v) {
    const size_t at = p->i;
    size_t i = p->i;
    if (i < p->n && p->s[i] == '-') i++;
    if (i >= p->n || !is_digit(p->s[i])) return jerr(p, at, "invalid number");
    if (p->s[i] == '0') {
        i++;
        if (i < p->n && is_digit(p->s[i])) return jerr(p, at, "a number cannot start with 0");
    } else {
        while (i < p->n && is_digit(p->s[i])) i++;
    }
    if (i < p->n && p->s[i] == '.') {
        i++;
        if (i >= p->n || !is_digit(p->s[i])) return jerr(p, at, "digits expected after '.'");
        while (i < p->n && is_digit(p->s[i])) i++;
    }
    if (i < p->n && (p->s[i] == 'e' || p->s[i] == 'E')) {
        i++;
        if (i < p->n && (p->s[i] == '+' || p->s[i] == '-')) i++;
        if (i >= p->n || !is_digit(p->s[i])) return jerr(p, at, "digits expected in exponent");
        while (i < p->n && is_digit(p->s[i])) i++;
    }
    char *o = arena_alloc(p, i - at + 1);
    if (!o) return jnomem(p);
    memcpy(o, p->s + at, i - at);
    o[i - at] = '\0';
    v->type = WLM_JSON_NUMBER;
    v->str = o;
    v->len = i - at;
    v->num = strtod(o, NULL);
    p->i = i;
    return WLM_OK;
}

static int parse_value(jparser *p, wlm_json *v, int depth);

/* Moves the last n (or 2n for objects) stacked children into the arena. */
static int close_container(jparser *p, wlm_json *v, size_t base, int object) {
    const size_t count = p->sp - base;
    const size_t n = object ? count / 2 : count;
    if (n > UINT32_MAX) return jerr(p, v->at, "too many items");
    v->n = (uint32_t)n;
    if (n) {
        wlm_json *items = arena_alloc(p, sizeof *items * n);
        wlm_json *keys = object ? arena_alloc(p, sizeof *keys * n) : NULL;
        if (!items || (object && !keys)) return jnomem(p);
        for (size_t k = 0; k < n; k++) {
            if (object) {
                keys[k] = p->stack[base + 2 * k];
                items[k] = p->stack[base + 2 * k + 1];
            } else {
                items[k] = p->stack[base + k];
            }
        }
        v->items = items;
        v->keys = keys;
    }
    p->sp = base;
    return WLM_OK;
}

static int parse_container(jparser *p, wlm_json *v, int depth, int object) {
    const char close = object ? '}' : ']';
    if (depth >= WLM_JSON_MAX_DEPTH)
        return jerr(p, p->i, "nested deeper than %d", WLM_JSON_MAX_DEPTH);
    v->type = object ? WLM_JSON_OBJECT : WLM_JSON_ARRAY;
    const size_t base = p->sp;
    p->i++;
    skip_ws(p);
    if (p->i < p->n && p->s[p->i] == close) {
        p->i++;
        return close_container(p, v, base, object);
    }
    for (;;) {
        wlm_json item;
        memset(&item, 0, sizeof item);
        if (object) {
            skip_ws(p);
            if (p->i >= p->n || p->s[p->i] != '"')
                return jerr(p, p->i, "expecting a key (a string)");
            item.at = p->i;
            if (parse_string(p, &item) != WLM_OK || push(p, &item) != WLM_OK) return p->status;
            skip_ws(p);
            if (p->i >= p->n || p->s[p->i] != ':') return jerr(p, p->i, "expecting ':'");
            p->i++;
            memset(&item, 0, sizeof item);
        }
        if (parse_value(p, &item, depth + 1) != WLM_OK || push(p, &item) != WLM_OK)
            return p->status;
        skip_ws(p);
        if (p->i >= p->n)
            return jerr(p, v->at, "unclosed '%c' (expecting '%c')", object ? '{' : '[', close);
        if (p->s[p->i] == ',') {
            p->i++;
            continue;
        }
        if (p->s[p->i] == close) {
            p->i++;
            return close_container(p, v, base, object);
        }
        return jerr(p, p->i, "expecting ',' or '%c'", close);
    }
}

static int parse_value(jparser *p, wlm_json *v, int depth) {
    skip_ws(p);
    v->at = p->i;
    if (p->i >= p->n) return jerr(p, p->i, "expecting a value");
    const char c = p->s[p->i];
    static const struct { const char *word; int type; } words[3] = {
        {"null", WLM_JSON_NULL}, {"true", WLM_JSON_TRUE}, {"false", WLM_JSON_FALSE}};
    for (int k = 0; k < 3; k++) {
        size_t len = strlen(words[k].word);
        if (c == words[k].word[0]) {
            if (p->n - p->i < len || memcmp(p->s + p->i, words[k].word, len) != 0)
                return jerr(p, p->i, "invalid literal (expecting %s)", words[k].word);
            v->type = words[k].type;
            p->i += len;
            return WLM_OK;
        }
    }
    if (c == '"') return parse_string(p, v);
    if (c == '-' || is_digit(c)) return parse_number(p, v);
    if (c == '[' || c == '{') return parse_container(p, v, depth, c == '{');
    return jerr(p, p->i, "unexpected character '%c' (expecting a value)",
                (c >= 32 && c < 127) ? c : '?');
}

void wlm_json_free(wlm_json_doc *doc) {
    if (!doc) return;
    for (chunk *c = doc->chunks; c;) {
        chunk *next = c->next;
        free(c);
        c = next;
    }
    free(doc->lines);
    free(doc);
}

const wlm_json *wlm_json_root(const wlm_json_doc *doc) { return doc ? &doc->root : NULL; }

int wlm_json_parse(const char *text, size_t len, wlm_json_doc **out, char *err, size_t errlen) {
    if (err && errlen) err[0] = '\0';
    if (!out) return WLM_ERR_INVALID_ARG;
    *out = NULL;
    jparser p;
    memset(&p, 0, sizeof p);
    p.s = text ? text : "";
    p.n = text ? len : 0;
    p.err = err;
    p.errlen = errlen;
    if (p.n > WLM_JSON_MAX_TEXT) {
        p.n = 0;
        return jerr(&p, 0, "the text is %zu bytes (at most %u)", len, (unsigned)WLM_JSON_MAX_TEXT);
    }
    p.doc = calloc(1, sizeof *p.doc);
    if (!p.doc) return jnomem(&p);
    int rc = parse_value(&p, &p.doc->root, 0);
    if (rc == WLM_OK) {
        skip_ws(&p);
        if (p.i < p.n) rc = jerr(&p, p.i, "unexpected text after the value");
    }
    if (rc == WLM_OK) { /* line starts, for wlm_json_line_col after the text is gone */
        size_t n_lines = 1;
        for (size_t k = 0; k < p.n; k++) n_lines += p.s[k] == '\n';
        p.doc->lines = malloc(sizeof *p.doc->lines * n_lines);
        if (!p.doc->lines) {
            rc = jnomem(&p);
        } else {
            p.doc->lines[0] = 0;
            p.doc->n_lines = 1;
            for (size_t k = 0; k < p.n; k++)
                if (p.s[k] == '\n') p.doc->lines[p.doc->n_lines++] = k + 1;
        }
    }
    free(p.stack);
    if (rc != WLM_OK) {
        wlm_json_free(p.doc);
        return rc;
    }
    *out = p.doc;
    return WLM_OK;
}

const wlm_json *wlm_json_get(const wlm_json *o, const char *key) {
    if (!o || o->type != WLM_JSON_OBJECT) return NULL;
    const size_t len = strlen(key);
    for (uint32_t k = o->n; k-- > 0;)
        if (o->keys[k].len == len && memcmp(o->keys[k].str, key, len) == 0) return &o->items[k];
    return NULL;
}

void wlm_json_line_col(const wlm_json_doc *doc, size_t at, size_t *line, size_t *col) {
    size_t lo = 0, hi = doc->n_lines; /* the last line start <= at */
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (doc->lines[mid] <= at) lo = mid;
        else hi = mid;
    }
    *line = lo + 1;
    *col = at - doc->lines[lo] + 1;
}
