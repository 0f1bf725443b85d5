/*
 * json_pattern.c — a JSON Schema `pattern` → GBNF (json_pattern.h): the regular expression is
 * parsed by recursive descent (alternation, sequence, quantified atoms), each character class
 * becomes code point ranges emitted as the JSON encoding of any member (escapes included), and
 * quantifiers become GBNF repetitions. It does not build rules or report schema positions:
 * json_schema.c does.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wasmlm.h"
#include "sampling/grammar.h"
#include "sampling/json_pattern.h"

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
        wlm_sb_fmt(b, cp > 0xFFFF ? "\\U%08X" : cp > 0xFF ? "\\u%04X" : "\\x%02X", (unsigned)cp);
    else if (cp < 0x80)
        wlm_sb_fmt(b, "%c", (char)cp);
    else
        wlm_sb_fmt(b, cp > 0xFFFF ? "\\U%08X" : "\\u%04X", (unsigned)cp);
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
    wlm_sb_add(&cls, "[", 1);
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
                    wlm_sb_add(&cls, "-", 1);
                    class_char(&cls, end);
                }
                any = 1;
            }
            if (j < 2) a = cuts[j] + 1;
        }
    }
    wlm_sb_add(&cls, "]", 1);
    int alts = 0;
    wlm_sb_add(b, "(", 1);
    if (any) {
        wlm_sb_add(b, cls.p, cls.n);
        alts++;
    }
    if (cset_has(s, '"')) wlm_sb_str(b, alts++ ? " | \"\\\\\\\"\"" : " \"\\\\\\\"\"");
    if (cset_has(s, '\\')) wlm_sb_str(b, alts++ ? " | \"\\\\\\\\\"" : " \"\\\\\\\\\"");
    for (uint32_t cp = 0; cp < 0x20; cp++) {
        if (!cset_has(s, cp)) continue;
        sbuf t = {0};
        char ch = (char)cp;
        wlm_json_quote(&t, &ch, 1);
        if (t.p) {
            wlm_sb_str(b, alts++ ? " | " : " ");
            wlm_gbnf_literal(b, t.p + 1, t.n - 2);
        }
        free(t.p);
    }
    if (!alts) wlm_sb_str(b, "[^\\x00-\\U0010FFFF]"); /* nothing: never matches */
    wlm_sb_add(b, " )", 2);
    if (cls.oom) b->oom = 1;
    free(cls.p);
}

/* ------------------------------------------------------------------------------------------ */
/* `pattern`: a regular-expression subset → GBNF over the JSON string's text                   */

typedef struct rx {
    char *msg; /* the first error's message (msglen bytes) */
    size_t msglen;
    int failed;
    const char *s;
    size_t n, i;
    int depth;
} rx;

static int rx_err(rx *r, const char *what) {
    if (!r->failed && r->msg && r->msglen)
        snprintf(r->msg, r->msglen,
                 "pattern '%.60s': %s at character %zu (the supported subset: literals, . "
                 "[classes] \\d \\w \\s \\D \\W \\S, ( ) (?: ) |, * + ? {m} {m,} {m,n}, ^ at "
                 "the start and $ at the end)",
                 r->s, what, r->i + 1);
    r->failed = 1;
    return WLM_ERR_UNSUPPORTED;
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
            wlm_sb_add(&atom, "(", 1);
            ok = rx_alt(r, &atom);
            if (ok && (r->i >= r->n || r->s[r->i] != ')')) ok = (rx_err(r, "an unclosed '('"), 0);
            if (ok) r->i++;
            wlm_sb_add(&atom, " )", 2);
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
            wlm_sb_add(&atom, r->s + r->i, 1);
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
            if (!comma) wlm_sb_fmt(&atom, "{%lu}", m);
            else if (!has_x) wlm_sb_fmt(&atom, "{%lu,}", m);
            else wlm_sb_fmt(&atom, "{%lu,%lu}", m, x);
            r->i = j + 1;
        }
        if (r->i < r->n && r->s[r->i] == '?' && atom.n && strchr("*+?}", atom.p[atom.n - 1]))
            r->i++; /* lazy: the same language */
        if (r->i < r->n && (r->s[r->i] == '*' || r->s[r->i] == '+' || r->s[r->i] == '{')) {
            free(atom.p);
            return rx_err(r, "a quantifier after a quantifier"), 0;
        }
        wlm_sb_add(b, " ", 1);
        if (atom.p) wlm_sb_add(b, atom.p, atom.n);
        if (atom.oom) b->oom = 1;
        free(atom.p);
        items++;
    }
    if (!items) wlm_sb_str(b, " \"\"");
    return 1;
}

static int rx_alt(rx *r, sbuf *b) {
    if (!rx_seq(r, b)) return 0;
    while (r->i < r->n && r->s[r->i] == '|') {
        r->i++;
        wlm_sb_str(b, " |");
        if (!rx_seq(r, b)) return 0;
    }
    return 1;
}

int wlm_json_pattern(const char *pattern, size_t len, sbuf *body, char *msg, size_t msglen) {
    rx r = {msg, msglen, 0, pattern, len, 0, 0};
    int start = len > 0 && pattern[0] == '^';
    int end = 0;
    if (len > (size_t)start && pattern[len - 1] == '$') {
        size_t bs = 0; /* an escaped '$' is a literal */
        for (size_t k = len - 1; k-- > 0 && pattern[k] == '\\';) bs++;
        end = bs % 2 == 0;
    }
    r.i = (size_t)start;
    r.n = len - (size_t)end;
    sbuf re = {0};
    int ok = rx_alt(&r, &re);
    if (ok && r.i < r.n) ok = (rx_err(&r, "an unmatched ')'"), 0);
    if (ok) { /* top-level '|' with one anchor changes meaning: refuse */
        int depth = 0, top_alt = 0;
        for (size_t k = (size_t)start; k < r.n; k++) {
            if (pattern[k] == '\\') k++;
            else if (pattern[k] == '(') depth++;
            else if (pattern[k] == ')') depth--;
            else if (pattern[k] == '|' && depth == 0) top_alt = 1;
        }
        if (top_alt && (start || end))
            ok = (rx_err(&r, "'|' at the top level with an anchor (write ^(a|b)$)"), 0);
    }
    if (ok) {
        wlm_sb_str(body, "\"\\\"\" ");
        if (!start) wlm_sb_str(body, "char* ");
        wlm_sb_str(body, "(");
        if (re.p) wlm_sb_add(body, re.p, re.n);
        wlm_sb_str(body, " ) ");
        if (!end) wlm_sb_str(body, "char* ");
        wlm_sb_str(body, "\"\\\"\"");
    }
    if (re.oom) body->oom = 1;
    free(re.p);
    return ok;
}
