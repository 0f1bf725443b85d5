/*
 * test_grammar.c — GBNF grammars (src/sampling/grammar*.c) and constrained sampling.
 * - Parser: every construct parses; each broken grammar gives its status and line:column.
 * - Matcher on byte strings: literals, classes, repetitions, recursion, UTF-8 split across
 *   tokens (byte tokens, partial characters); the trie mask equals the token-by-token check.
 * - The sampler: on designed logits the constrained distribution is exactly the unconstrained
 *   one renormalised over the allowed tokens (reported probabilities, the fallback when the
 *   filters leave no allowed token, greedy) and 40 000 draws on the check-first path follow it
 *   (chi-square-free bound: every frequency within 5 standard deviations).
 * - Generation on stories260K: for six grammars, seeded samples are checked by independent
 *   recursive-descent matchers written here (a JSON parser for the JSON grammar): complete
 *   outputs match, ended by EOS; outputs cut by max_tokens are valid prefixes. Batches equal
 *   each sequence alone; beams follow the grammar; wlm_sampler_preview only offers allowed
 *   tokens.
 * - Lazy grammars armed by a marker (a call marker inside an open <think> leaves the grammar
 *   dormant, one after </think> wakes it; harmony's header window): scripted token streams over
 *   a small vocabulary with control tokens, markers split across tokens and sharing one.
 * - The Llama 2 vocabulary (32 000 tokens): a JSON document tokenized and accepted token by
 *   token, the mask agreeing with the per-token check; with -v, the cost per token.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/model.h"
#include "sampling/grammar.h"
#include "sampling/sampler.h"
#include "tokenizer/tokenizer.h"
#include "wasmlm.h"
#include "test_util.h"

static int verbose;

/* ------------------------------------------------------------------------------------------ */
/* Grammars used throughout                                                                    */

static const char *JSON_GBNF =
    "# JSON (RFC 8259), whitespace bounded\n"
    "root   ::= object\n"
    "value  ::= object | array | string | number | (\"true\" | \"false\" | \"null\")\n"
    "object ::=\n"
    "  \"{\" ws ( string ws \":\" ws value ws\n"
    "           ( \",\" ws string ws \":\" ws value ws )* )? \"}\"\n"
    "array  ::= \"[\" ws ( value ws ( \",\" ws value ws )* )? \"]\"\n"
    "string ::= \"\\\"\" ( [^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" "
    "[0-9a-fA-F]{4} ) )* \"\\\"\"\n"
    "number ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,15} ) ( \".\" [0-9]+ )? ( [eE] [-+]? [0-9]+ )?\n"
    "ws     ::= [ \\t\\n]{0,3}\n";

/* The same with short strings and members, so that stories260K (which would rather tell a
 * story inside the first string) ends most samples within max_tokens. */
static const char *JSON_SHORT_GBNF =
    "root   ::= object\n"
    "value  ::= object | array | string | number | (\"true\" | \"false\" | \"null\")\n"
    "object ::= \"{\" ws ( string \":\" ws value ( \",\" ws string \":\" ws value ){0,2} )? \"}\"\n"
    "array  ::= \"[\" ( value ( \", \" value ){0,2} )? \"]\"\n"
    "string ::= \"\\\"\" ( [^\"\\\\\\x00-\\x1F] | \"\\\\\" [\"\\\\/bfnrt] ){0,6} \"\\\"\"\n"
    "number ::= \"-\"? [0-9]{1,4}\n"
    "ws     ::= \" \"?\n";

static const char *ENUM_GBNF =
    "root  ::= \"[\" ( color ( \", \" color ){0,4} )? \"]\"\n"
    "color ::= \"\\\"red\\\"\" | \"\\\"green\\\"\" | \"\\\"blue\\\"\"\n";

static const char *NUMBER_GBNF =
    "root ::= \"-\"? [0-9]{1,6} ( \".\" [0-9]{1,3} )? ( [eE] [-+]? [0-9]{1,2} )?\n";

static const char *STRING_GBNF = /* escapes and non-ASCII characters (byte tokens) */
    "root ::= \"\\\"\" item{1,12} \"\\\"\"\n"
    "item ::= [a-z ] | \"\\\\n\" | \"\\\\u00\" [0-9a-f]{2} | [\\u00E9-\\u00FC] | [α-ω] | \"€\"\n";

static const char *PARENS_GBNF = "root ::= p\np ::= \"(\" p* \")\"\n";

static const char *REPEAT_GBNF = "root ::= ( \"ab\" | \"c\" ){2,5} \".\"\n";

/* ------------------------------------------------------------------------------------------ */
/* Independent matchers: 1 = the whole text matches, 2 = a proper prefix of a match (the text
 * ended early), 0 = no match.                                                                 */

typedef struct cur {
    const char *s;
    size_t n, i;
} cur;

#define EOF_ 2
static int at_end(const cur *c) { return c->i >= c->n; }

/* JSON, any whitespace (RFC 8259). Returns 1 ok, 0 bad, EOF_ when the text ended inside. */
static int j_value(cur *c, int depth);
static void j_ws(cur *c) {
    while (!at_end(c) && strchr(" \t\n\r", c->s[c->i])) c->i++;
}
static int j_lit(cur *c, const char *w) {
    for (; *w; w++) {
        if (at_end(c)) return EOF_;
        if (c->s[c->i++] != *w) return 0;
    }
    return 1;
}
static int hexd(int ch) { return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F'); }
static int j_string(cur *c) {
    if (at_end(c)) return EOF_;
    if (c->s[c->i++] != '"') return 0;
    for (;;) {
        if (at_end(c)) return EOF_;
        unsigned char ch = (unsigned char)c->s[c->i++];
        if (ch == '"') return 1;
        if (ch < 0x20) return 0;
        if (ch == '\\') {
            if (at_end(c)) return EOF_;
            char e = c->s[c->i++];
            if (e == 'u') {
                for (int k = 0; k < 4; k++) {
                    if (at_end(c)) return EOF_;
                    if (!hexd((unsigned char)c->s[c->i++])) return 0;
                }
            } else if (!strchr("\"\\/bfnrt", e) || e == 0) {
                return 0;
            }
        } else if (ch >= 0x80) { /* UTF-8 sequence: lead and continuation bytes */
            int need = (ch >> 5) == 6 ? 1 : (ch >> 4) == 14 ? 2 : (ch >> 3) == 30 ? 3 : -1;
            if (need < 0) return 0;
            for (int k = 0; k < need; k++) {
                if (at_end(c)) return EOF_;
                if (((unsigned char)c->s[c->i++] & 0xC0) != 0x80) return 0;
            }
        }
    }
}
static int digits(cur *c, int *count) {
    *count = 0;
    while (!at_end(c) && c->s[c->i] >= '0' && c->s[c->i] <= '9') c->i++, (*count)++;
    return 1;
}
static int j_number(cur *c) {
    int k;
    if (!at_end(c) && c->s[c->i] == '-') c->i++;
    if (at_end(c)) return EOF_;
    if (c->s[c->i] == '0') {
        c->i++;
    } else if (c->s[c->i] >= '1' && c->s[c->i] <= '9') {
        digits(c, &k);
    } else {
        return 0;
    }
    if (at_end(c)) return EOF_;
    if (c->s[c->i] == '.') {
        c->i++;
        digits(c, &k);
        if (at_end(c)) return EOF_;
        if (k == 0) return 0;
    }
    if (c->s[c->i] == 'e' || c->s[c->i] == 'E') {
        c->i++;
        if (at_end(c)) return EOF_;
        if (c->s[c->i] == '+' || c->s[c->i] == '-') c->i++;
        digits(c, &k);
        if (at_end(c)) return EOF_;
        if (k == 0) return 0;
    }
    return 1; /* a number inside an object is always followed by something */
}
static int j_members(cur *c, char close, int depth, int object) {
    j_ws(c);
    if (at_end(c)) return EOF_;
    if (c->s[c->i] == close) {
        c->i++;
        return 1;
    }
    for (;;) {
        int r;
        if (object) {
            if ((r = j_string(c)) != 1) return r;
            j_ws(c);
            if ((r = j_lit(c, ":")) != 1) return r;
            j_ws(c);
        }
        if ((r = j_value(c, depth + 1)) != 1) return r;
        j_ws(c);
        if (at_end(c)) return EOF_;
        char ch = c->s[c->i++];
        if (ch == close) return 1;
        if (ch != ',') return 0;
        j_ws(c);
    }
}
static int j_value(cur *c, int depth) {
    if (depth > 200) return 0;
    if (at_end(c)) return EOF_;
    switch (c->s[c->i]) {
    case '{': c->i++; return j_members(c, '}', depth, 1);
    case '[': c->i++; return j_members(c, ']', depth, 0);
    case '"': return j_string(c);
    case 't': return j_lit(c, "true");
    case 'f': return j_lit(c, "false");
    case 'n': return j_lit(c, "null");
    default: return j_number(c);
    }
}
static int check_json(const char *s, size_t n) {
    cur c = {s, n, 0};
    if (n == 0) return EOF_;
    if (s[0] != '{') return 0;
    int r = j_value(&c, 0);
    if (r != 1) return r;
    return c.i == n ? 1 : 0; /* nothing after the object (the grammar allows no trailing ws) */
}

static int check_enum(const char *s, size_t n) {
    static const char *colors[] = {"\"red\"", "\"green\"", "\"blue\""};
    cur c = {s, n, 0};
    int r = j_lit(&c, "[");
    if (r != 1) return r;
    for (int k = 0; k < 5; k++) {
        if (at_end(&c)) return EOF_;
        if (k == 0 && s[c.i] == ']') return c.i + 1 == n ? 1 : 0;
        if (k > 0) {
            if (s[c.i] == ']') return c.i + 1 == n ? 1 : 0;
            if ((r = j_lit(&c, ", ")) != 1) return r;
        }
        int ok = 0;
        for (int j = 0; j < 3 && !ok; j++) {
            size_t len = strlen(colors[j]), avail = n - c.i;
            if (avail < len && memcmp(s + c.i, colors[j], avail) == 0) return EOF_;
            if (avail >= len && memcmp(s + c.i, colors[j], len) == 0) ok = 1, c.i += len;
        }
        if (!ok) return 0;
    }
    if ((r = j_lit(&c, "]")) != 1) return r;
    return c.i == n ? 1 : 0;
}

/* [-]d{1,6}(.d{1,3})?([eE][+-]?d{1,2})? as a small state machine written out. */
static int check_number(const char *s, size_t n) {
    size_t i = 0;
    int k = 0;
    if (i < n && s[i] == '-') i++;
    while (i < n && s[i] >= '0' && s[i] <= '9') i++, k++;
    if (k > 6) return 0;
    if (i == n) return k ? 1 : EOF_;
    if (k == 0) return 0;
    if (s[i] == '.') {
        i++, k = 0;
        while (i < n && s[i] >= '0' && s[i] <= '9') i++, k++;
        if (k > 3) return 0;
        if (i == n) return k ? 1 : EOF_;
        if (k == 0) return 0;
    }
    if (s[i] == 'e' || s[i] == 'E') {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-')) i++;
        k = 0;
        while (i < n && s[i] >= '0' && s[i] <= '9') i++, k++;
        if (k > 2) return 0;
        if (i == n) return k ? 1 : EOF_;
        return 0;
    }
    return 0;
}

/* "item{1,12}" with item: [a-z ] | \n (escaped) | \u00XX | U+00E9..U+00FC | α..ω | € */
static int check_string(const char *s, size_t n) {
    size_t i = 0;
    int items = 0;
    if (n == 0) return EOF_;
    if (s[i++] != '"') return 0;
    for (;;) {
        if (i == n) return EOF_;
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"') return (items >= 1 && i + 1 == n) ? 1 : 0;
        if (items == 12) return 0;
        if ((ch >= 'a' && ch <= 'z') || ch == ' ') {
            i++;
        } else if (ch == '\\') {
            const char *want = (i + 1 < n && s[i + 1] == 'n') ? "\\n" : "\\u00";
            size_t len = strlen(want);
            for (size_t k = 0; k < len; k++) {
                if (i == n) return EOF_;
                if (s[i++] != want[k]) return 0;
            }
            if (len == 4)
                for (int k = 0; k < 2; k++) {
                    if (i == n) return EOF_;
                    char h = s[i++];
                    if (!((h >= '0' && h <= '9') || (h >= 'a' && h <= 'f'))) return 0;
                }
        } else { /* decode one UTF-8 character */
            int need = (ch >> 5) == 6 ? 1 : (ch >> 4) == 14 ? 2 : -1;
            if (need < 0) return 0;
            uint32_t cp = ch & (need == 1 ? 0x1Fu : 0x0Fu);
            i++;
            for (int k = 0; k < need; k++) {
                if (i == n) return EOF_;
                if (((unsigned char)s[i] & 0xC0) != 0x80) return 0;
                cp = (cp << 6) | ((unsigned char)s[i++] & 0x3Fu);
            }
            if (!((cp >= 0xE9 && cp <= 0xFC) || (cp >= 0x3B1 && cp <= 0x3C9) || cp == 0x20AC))
                return 0;
        }
        items++;
    }
}

static int check_parens(const char *s, size_t n) {
    int depth = 0;
    if (n == 0) return EOF_;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '(') depth++;
        else if (s[i] == ')') depth--;
        else return 0;
        if (depth < 0 || (depth == 0 && i + 1 < n)) return 0;
    }
    return depth == 0 ? 1 : EOF_;
}

static int check_repeat(const char *s, size_t n) {
    size_t i = 0;
    int items = 0;
    for (;;) {
        if (i == n) return EOF_;
        if (s[i] == '.') return (items >= 2 && i + 1 == n) ? 1 : 0;
        if (items == 5) return 0;
        if (s[i] == 'c') {
            i++;
        } else if (s[i] == 'a') {
            if (++i == n) return EOF_;
            if (s[i++] != 'b') return 0;
        } else {
            return 0;
        }
        items++;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Parser                                                                                      */

static int parse_ok(const char *text) {
    char err[256];
    wlm_gram *g = NULL;
    int rc = wlm_gram_parse(text, strlen(text), &g, err, sizeof err);
    CHECKF(rc == WLM_OK && g, "grammar %s: %s (%s)", text, wlm_status_name(rc), err);
    wlm_gram_free(g);
    return rc == WLM_OK;
}

/* The grammar fails with INVALID_ARG and a message holding `where` ("line L, column C") and
 * `what`. */
static void parse_bad(const char *text, size_t len, const char *where, const char *what) {
    char err[256] = "";
    wlm_gram *g = (wlm_gram *)1;
    int rc = wlm_gram_parse(text, len, &g, err, sizeof err);
    CHECKF(rc == WLM_ERR_INVALID_ARG && g == NULL, "%s: %s", text, wlm_status_name(rc));
    CHECKF(strstr(err, where) != NULL, "grammar %s: message '%s' lacks '%s'", text, err, where);
    CHECKF(strstr(err, what) != NULL, "grammar %s: message '%s' lacks '%s'", text, err, what);
}
#define BAD(text, where, what) parse_bad(text, strlen(text), where, what)

static void test_parser(void) {
    parse_ok(JSON_GBNF);
    parse_ok(JSON_SHORT_GBNF);
    parse_ok(ENUM_GBNF);
    parse_ok(NUMBER_GBNF);
    parse_ok(STRING_GBNF);
    parse_ok(PARENS_GBNF);
    parse_ok(REPEAT_GBNF);
    parse_ok("root ::= \"\"");                           /* the empty sentence */
    parse_ok("root ::= \"a\" | ");                        /* an empty alternative */
    parse_ok("root ::= [^a-z\\]\\[\\n\\t\\r\\\\\\\"] .\n"); /* negation and escapes */
    parse_ok("root ::= \"\\x41\\u00e9\\U0001F600\"");
    parse_ok("root ::= x{3} x{2,} x{,4} x{0} x{1,1}\nx ::= \"x\"");
    parse_ok("# comment\n\nroot ::= a # trailing\na ::= (\n \"x\" |\n \"y\"\n)+\n");
    parse_ok("root::=\"a\"\r\nb ::= root \"b\"\r\n");
    parse_ok("root ::= r-1 r_2\nr-1 ::= \"a\"\nr_2 ::= \"b\"");
    parse_ok("root ::= [a-a] [-] [a-] \"x\"*\n");
    parse_ok("root ::= a\na ::= b? \"x\" a?\nb ::= \"y\"\n"); /* right recursion */

    {
        char err[256];
        wlm_gram *g = NULL;
        const char *t = "root ::= \"ab\" [c-e]\n";
        CHECK_STATUS(wlm_gram_parse(t, strlen(t), &g, err, sizeof err), WLM_OK);
        CHECK_EQ_INT(wlm_gram_n_rules(g), 1);
        /* CHAR a, CHAR b, CHAR c, CHAR_UPPER e, END */
        CHECK_EQ_INT(wlm_gram_n_elements(g), 5);
        wlm_gram_free(g);
    }

    BAD("", "line 1, column 1", "empty");
    BAD("  # nothing\n\n", "line 1, column 1", "empty");
    BAD("root ::= foo\n", "line 1, column 10", "undefined rule 'foo'");
    BAD("root ::= a\na ::= \"x\" bar\n", "line 2, column 11", "undefined rule 'bar'");
    BAD("root ::= \"abc\n", "line 1, column 10", "unterminated string");
    BAD("root ::= [abc\n", "line 1, column 10", "unterminated character class");
    BAD("root ::= []", "line 1, column 10", "empty character class");
    BAD("root ::= \"a\\qb\"", "line 1, column 12", "unknown escape");
    BAD("root ::= \"\\x4\"", "line 1, column 11", "hexadecimal");
    BAD("root ::= \"\\U00110000\"", "line 1, column 11", "beyond U+10FFFF");
    BAD("a ::= \"x\"\n", "line 1, column 1", "root");
    BAD("root ::= root \"x\" | \"y\"\n", "line 1, column 1", "left-recursive");
    BAD("root ::= a\na ::= b \"x\"\nb ::= a | \"y\"\n", "line 3, column 1",
        "rule 'b' is left-recursive");
    BAD("root ::= a\na ::= n a \"x\" | \"y\"\nn ::= \"z\"?\n", "line 2, column 1",
        "left-recursive"); /* through a rule that can be empty */
    BAD("root ::= (\"a\"?)*\n", "line 1, column 16", "empty string");
    BAD("root ::= \"a\" )\n", "line 1, column 14", "unexpected ')'");
    BAD("root ::= (\"a\"\n", "line 1, column 10", "unclosed '('");
    BAD("root ::= (\"a\" @)\n", "line 1, column 15", "unexpected character '@'");
    BAD("root ::= * \"a\"\n", "line 1, column 10", "no item before it");
    BAD("root ::= \"a\"{2,1}\n", "line 1, column 13", "maximum below");
    BAD("root ::= \"a\"{99999}\n", "line 1, column 18", "above 10000");
    BAD("root ::= \"a\"{2\n", "line 1, column 13", "unterminated repetition");
    BAD("root ::= \"a\"\nroot ::= \"b\"\n", "line 2, column 1", "defined twice");
    BAD("root = \"a\"\n", "line 1, column 6", "'::='");
    BAD("root ::= \"a\" $\n", "line 1, column 14", "unexpected character '$'");
    BAD("root ::= \"\xff\"", "line 1, column 11", "UTF-8");
    BAD("root ::= x{2}{2}\nx ::= \"ab\"", "line 1, column 14", "no item before it");
    {
        char big[400] = "root ::=";
        for (int k = 0; k < 3; k++) strcat(big, " \"0123456789012345678901234567890123456789\"{9000}");
        BAD(big, "line 1, column 150", "too large");
    }
    {
        char deep[400] = "root ::= ";
        for (int k = 0; k < 70; k++) strcat(deep, "(");
        strcat(deep, "\"a\"");
        for (int k = 0; k < 70; k++) strcat(deep, ")");
        BAD(deep, "line 1, column 74", "nested deeper than 64");
    }
    parse_bad("root ::= \"a\"\0\"b\"", 16, "line 1, column 13", "unexpected character");
}

/* ------------------------------------------------------------------------------------------ */
/* Matcher on a small synthetic vocabulary                                                     */

typedef struct tvocab {
    int32_t n;
    const char *piece[64];
    size_t len[64];
    wlm_gram_vocab *v;
} tvocab;

static void tvocab_make(tvocab *tv, const char *const *pieces, int32_t n) {
    tv->n = n;
    for (int32_t i = 0; i < n; i++) {
        tv->piece[i] = pieces[i];
        tv->len[i] = strlen(pieces[i]);
    }
    CHECK_STATUS(wlm_gram_vocab_new(n, tv->piece, tv->len, &tv->v), WLM_OK);
}

static wlm_gram_matcher *matcher_for(const char *text, const tvocab *tv, int32_t eog,
                                     wlm_gram **g) {
    char err[256];
    wlm_gram_matcher *m = NULL;
    *g = NULL;
    int rc = wlm_gram_parse(text, strlen(text), g, err, sizeof err);
    CHECKF(rc == WLM_OK, "%s: %s", text, err);
    if (rc != WLM_OK) return NULL;
    rc = wlm_gram_matcher_new(*g, tv->v, &eog, eog >= 0, &m);
    CHECK_STATUS(rc, WLM_OK);
    return m;
}

/* The mask agrees with the token-by-token check; returns the allowed set as a bit string. */
static uint64_t mask_bits(wlm_gram_matcher *m, const tvocab *tv) {
    uint8_t allowed[64];
    int32_t na = wlm_gram_mask(m, allowed);
    uint64_t bits = 0;
    int32_t count = 0;
    for (int32_t t = 0; t < tv->n; t++) {
        int a = wlm_gram_allows(m, t);
        CHECKF(a == allowed[t], "token %d '%s': mask %d, check %d", (int)t, tv->piece[t],
               allowed[t], a);
        if (allowed[t]) bits |= 1ull << t, count++;
    }
    CHECK_EQ_INT(na, count);
    return bits;
}

static int accepts(const char *grammar, const char *text) {
    static const char *pieces[] = {"a"};
    tvocab tv;
    tvocab_make(&tv, pieces, 1);
    wlm_gram *g;
    wlm_gram_matcher *m = matcher_for(grammar, &tv, -1, &g);
    int r = -1;
    if (m) {
        int rc = wlm_gram_accept_bytes(m, text, strlen(text));
        r = rc != WLM_OK ? 0 : wlm_gram_is_complete(m) ? 1 : 2;
    }
    wlm_gram_matcher_free(m);
    wlm_gram_free(g);
    wlm_gram_vocab_free(tv.v);
    return r;
}

static void test_matcher(void) {
    /* whole strings: 1 complete, 2 a proper prefix, 0 refused — against the checkers */
    static const char *json_cases[] = {
        "{}", "{\"a\": 1}", "{\"a\":[1, 2.5e-3, true, null, {\"b\": \"x\\u00e9\\n\"}]}",
        "{\"a\"", "{\"a\":}", "{'a': 1}", "{\"a\": 01}", "{\"a\": \"\x01\"}", "{\"k\": -0.0E+12}",
        "{\"a\": [\"\xc3\xa9\xe2\x82\xac\"]}", "{\"a\": [,]}", "{} ", "[1]", "{\"a\":1,}"};
    for (size_t k = 0; k < sizeof json_cases / sizeof *json_cases; k++) {
        const char *s = json_cases[k];
        CHECKF(accepts(JSON_GBNF, s) == check_json(s, strlen(s)), "JSON '%s': grammar %d, "
               "checker %d", s, accepts(JSON_GBNF, s), check_json(s, strlen(s)));
    }
    CHECK_EQ_INT(accepts(ENUM_GBNF, "[\"red\", \"blue\"]"), 1);
    CHECK_EQ_INT(accepts(ENUM_GBNF, "[\"red\",\"blue\"]"), 0);
    CHECK_EQ_INT(accepts(ENUM_GBNF, "[\"gr"), 2);
    CHECK_EQ_INT(accepts(ENUM_GBNF, "[\"red\", \"red\", \"red\", \"red\", \"red\", \"red\"]"), 0);
    CHECK_EQ_INT(accepts(NUMBER_GBNF, "-12.5e+3"), 1);
    CHECK_EQ_INT(accepts(NUMBER_GBNF, "1234567"), 0);
    CHECK_EQ_INT(accepts(NUMBER_GBNF, "12."), 2);
    CHECK_EQ_INT(accepts(STRING_GBNF, "\"a\\u00ff\xce\xb1\xe2\x82\xac\""), 1);
    CHECK_EQ_INT(accepts(STRING_GBNF, "\"\xce\xa9\""), 0); /* Ω is not in α-ω */
    CHECK_EQ_INT(accepts(STRING_GBNF, "\"\xe2\x82"), 2);   /* half a € */
    CHECK_EQ_INT(accepts(STRING_GBNF, "\"\xe2\x82\xad"), 0); /* U+20AD */
    CHECK_EQ_INT(accepts(PARENS_GBNF, "(()(()))"), 1);
    CHECK_EQ_INT(accepts(PARENS_GBNF, "(()"), 2);
    CHECK_EQ_INT(accepts(PARENS_GBNF, "())"), 0);
    CHECK_EQ_INT(accepts(REPEAT_GBNF, "abcab."), 1);
    CHECK_EQ_INT(accepts(REPEAT_GBNF, "c."), 0);
    CHECK_EQ_INT(accepts(REPEAT_GBNF, "ccccc"), 2);
    CHECK_EQ_INT(accepts(REPEAT_GBNF, "cccccc"), 0);
    CHECK_EQ_INT(accepts("root ::= \"\"", ""), 1);
    CHECK_EQ_INT(accepts("root ::= [^abc]+", "xyz\xe2\x82\xac"), 1);
    CHECK_EQ_INT(accepts("root ::= [^abc]+", "xaz"), 0);
    CHECK_EQ_INT(accepts("root ::= . \"x\"", "\xf0\x9f\x98\x80x"), 1);
    CHECK_EQ_INT(accepts("root ::= x{3}\nx ::= \"ab\" | \"a\"", "aab"), 2);
    CHECK_EQ_INT(accepts("root ::= x{3}\nx ::= \"ab\" | \"a\"", "aabab"), 1);
    CHECK_EQ_INT(accepts("root ::= [a-c]{2,3} \"x\"", "abcx"), 1);
    CHECK_EQ_INT(accepts("root ::= [a-c]{2,3} \"x\"", "abcax"), 0);
    CHECK_EQ_INT(accepts("root ::= (\"a\" | \"ab\") \"bc\"", "abbc"), 1); /* ambiguity */

    /* tokens over UTF-8: byte tokens and a token ending inside a character */
    static const char *pieces[] = {"\xc3", "\xa9", "\xc3\xa9", "e", "\xa9\xc3", "\xc3\xa9\xc3",
                                   "", "x", "\xa8", "\xe2"};
    tvocab tv;
    tvocab_make(&tv, pieces, 10);
    wlm_gram *g;
    wlm_gram_matcher *m = matcher_for("root ::= \"\xc3\xa9\"+ \"x\"?", &tv, 6, &g);
    /* start: é... tokens; EOS (6) not yet; the empty-text token never */
    CHECK_EQ_INT(mask_bits(m, &tv), (1 << 0) | (1 << 2) | (1 << 5));
    CHECK_STATUS(wlm_gram_accept_token(m, 0), WLM_OK); /* half of é */
    CHECK_EQ_INT(wlm_gram_is_complete(m), 0);
    CHECK_EQ_INT(mask_bits(m, &tv), (1 << 1) | (1 << 4));
    CHECK_STATUS(wlm_gram_accept_token(m, 8), WLM_ERR_INVALID_ARG); /* C3 A8 = è */
    CHECK_STATUS(wlm_gram_accept_token(m, 4), WLM_OK);             /* A9 C3: é and half */
    CHECK_STATUS(wlm_gram_accept_token(m, 1), WLM_OK);
    CHECK_EQ_INT(wlm_gram_is_complete(m), 1);
    CHECK_EQ_INT(mask_bits(m, &tv), (1 << 0) | (1 << 2) | (1 << 5) | (1 << 6) | (1 << 7));
    wlm_gram_matcher *c = NULL;
    CHECK_STATUS(wlm_gram_matcher_clone(m, &c), WLM_OK);
    CHECK_STATUS(wlm_gram_accept_token(m, 7), WLM_OK);
    CHECK_EQ_INT(wlm_gram_can_continue(m), 0);
    CHECK_EQ_INT(mask_bits(m, &tv), 1 << 6); /* only the end */
    CHECK_EQ_INT(mask_bits(c, &tv), (1 << 0) | (1 << 2) | (1 << 5) | (1 << 6) | (1 << 7));
    CHECK_STATUS(wlm_gram_accept_token(m, 6), WLM_OK);
    CHECK_EQ_INT(mask_bits(m, &tv), 0); /* ended */
    wlm_gram_matcher_free(c);
    wlm_gram_matcher_free(m);
    wlm_gram_free(g);
    /* a negated class mid-character: [^é] takes any 2-byte character but é, so C3 passes and
     * A9 after it does not */
    m = matcher_for("root ::= [^\xc3\xa9]", &tv, 6, &g);
    CHECK_EQ_INT(mask_bits(m, &tv), (1 << 0) | (1 << 3) | (1 << 7) | (1 << 9));
    CHECK_STATUS(wlm_gram_accept_token(m, 0), WLM_OK);
    CHECK_EQ_INT(mask_bits(m, &tv), 1 << 8);
    wlm_gram_matcher_free(m);
    wlm_gram_free(g);
    /* leading space dropped after BOS */
    static const char *sp[] = {" a", "a", " ", "b"};
    tvocab ts;
    tvocab_make(&ts, sp, 4);
    m = matcher_for("root ::= \"a\" \" \"? \"b\"?", &ts, -1, &g);
    wlm_gram_matcher_strip_space(m, 1);
    CHECK_EQ_INT(mask_bits(m, &ts), (1 << 0) | (1 << 1));
    CHECK_STATUS(wlm_gram_accept_token(m, 0), WLM_OK);
    CHECK_EQ_INT(mask_bits(m, &ts), (1 << 2) | (1 << 3)); /* " a" no longer loses its space */
    wlm_gram_matcher_free(m);
    wlm_gram_free(g);
    wlm_gram_vocab_free(ts.v);
    wlm_gram_vocab_free(tv.v);
}

/* ------------------------------------------------------------------------------------------ */
/* Repetitions of items that can match the empty string                                        */

/* Feeds `text` byte by byte to grammars a and b: after each byte both agree on refusal,
 * completeness and can_continue. Returns 1 when they agreed throughout. */
static int same_language(const char *ga, const char *gb, const char *text) {
    static const char *pieces[] = {"a"};
    tvocab tv;
    tvocab_make(&tv, pieces, 1);
    wlm_gram *g1, *g2;
    wlm_gram_matcher *m1 = matcher_for(ga, &tv, -1, &g1), *m2 = matcher_for(gb, &tv, -1, &g2);
    int same = m1 && m2;
    for (size_t k = 0; same; k++) {
        same = wlm_gram_is_complete(m1) == wlm_gram_is_complete(m2) &&
               wlm_gram_can_continue(m1) == wlm_gram_can_continue(m2);
        if (!same || !text[k]) break;
        const int r1 = wlm_gram_accept_bytes(m1, text + k, 1);
        const int r2 = wlm_gram_accept_bytes(m2, text + k, 1);
        same = r1 == r2;
        if (r1 != WLM_OK) break;
    }
    wlm_gram_matcher_free(m1), wlm_gram_matcher_free(m2);
    wlm_gram_free(g1), wlm_gram_free(g2);
    wlm_gram_vocab_free(tv.v);
    return same;
}

static void test_nullable_repeats(void) {
    /* fuzz_grammar's slow input (36 s under the sanitizers): 2228 copies of an item that can
     * be empty. Rewritten as up to 2228 non-empty copies it is the grammar with the class
     * repeated {0,2228}: the same masks and the same 2 stacks (one per copy before: 2229). */
    char a[256], b[256];
    snprintf(a, sizeof a, "root ::= \"\\\"\" item{2228} \"\\\"\"\nitem ::= [roQ-z] |\n");
    snprintf(b, sizeof b, "root ::= \"\\\"\" [roQ-z]{0,2228} \"\\\"\"\n");
    static const char *pieces[] = {"\"", "r", "s", "a", "rs", "\"r", "z\"", "", "Q"};
    tvocab tv;
    tvocab_make(&tv, pieces, 9);
    wlm_gram *g1, *g2;
    wlm_gram_matcher *m1 = matcher_for(a, &tv, 7, &g1), *m2 = matcher_for(b, &tv, 7, &g2);
    if (m1 && m2) {
        static const int32_t walk[] = {0, 1, 4, 8, 2, 1, 6};
        for (size_t k = 0; k < sizeof walk / sizeof *walk; k++) {
            CHECK_EQ_INT(mask_bits(m1, &tv), mask_bits(m2, &tv));
            CHECK_EQ_INT(wlm_gram_matcher_n_stacks(m1), wlm_gram_matcher_n_stacks(m2));
            CHECKF(wlm_gram_matcher_n_stacks(m1) <= 2, "step %zu: %u stacks", k,
                   wlm_gram_matcher_n_stacks(m1));
            CHECK_STATUS(wlm_gram_accept_token(m1, walk[k]), WLM_OK);
            CHECK_STATUS(wlm_gram_accept_token(m2, walk[k]), WLM_OK);
        }
        CHECK_EQ_INT(wlm_gram_is_complete(m1), 1);
        CHECK_EQ_INT(mask_bits(m1, &tv), 1 << 7);
    }
    wlm_gram_matcher_free(m1), wlm_gram_matcher_free(m2);
    wlm_gram_free(g1), wlm_gram_free(g2);
    /* the same copies written out by hand: a run of references, rewritten the same way */
    {
        static char seq[2228 * 5 + 64];
        char *q = seq;
        q += sprintf(q, "root ::= \"\\\"\"");
        for (int k = 0; k < 2228; k++) q += sprintf(q, " item");
        sprintf(q, " \"\\\"\"\nitem ::= [roQ-z] |\n");
        wlm_gram_matcher *m3 = matcher_for(seq, &tv, 7, &g1);
        for (int k = 0; m3 && k < 3; k++) {
            CHECKF(wlm_gram_matcher_n_stacks(m3) <= 2, "written out, step %d: %u stacks", k,
                   wlm_gram_matcher_n_stacks(m3));
            CHECK_STATUS(wlm_gram_accept_token(m3, k == 0 ? 0 : 1), WLM_OK);
        }
        wlm_gram_matcher_free(m3);
        wlm_gram_free(g1);
    }
    wlm_gram_vocab_free(tv.v);
    /* exactly 2228 letters, not 2229 */
    char *text = malloc(2232);
    if (text) {
        memset(text, 'r', 2231);
        text[0] = '"';
        text[2229] = '"';
        text[2230] = '\0';
        CHECK_EQ_INT(accepts(a, text), 1);
        text[2229] = 'r';
        text[2231] = '\0';
        CHECK_EQ_INT(accepts(a, text), 0);
        free(text);
    }

    /* Against the same repetitions written out by hand (a sequence, which is not rewritten):
     * every string over {a, b, c} up to 6 bytes gets the same answers after every byte. */
    static const struct { const char *rep, *seq; } cases[] = {
        {"root ::= x{2,4} \"c\"\nx ::= y \"b\"? | \"\"\ny ::= \"a\"? \"c\"?",
         "root ::= x x x x \"c\"\nx ::= y \"b\"? | \"\"\ny ::= \"a\"? \"c\"?"},
        {"root ::= (\"a\"? \"b\"?){3}", "root ::= (\"a\"? \"b\"?) (\"a\"? \"b\"?) (\"a\"? \"b\"?)"},
        {"root ::= x{0,3} \"a\"\nx ::= y z\ny ::= \"a\"?\nz ::= w? \"c\"?\nw ::= \"b\"",
         "root ::= x x x \"a\"\nx ::= y z\ny ::= \"a\"?\nz ::= w? \"c\"?\nw ::= \"b\""},
        {"root ::= \"a\" x{3} \"b\"?\nx ::= \"\" | (\"\")", "root ::= \"a\" \"b\"?"},
        {"root ::= x{2} | \"c\" x{1,2} \"c\"\nx ::= \"ab\"? | \"b\"+",
         "root ::= x x | \"c\" x x \"c\"\nx ::= \"ab\"? | \"b\"+"},
        {"root ::= x? x{2}\nx ::= (\"a\" | \"\") \"b\"?", "root ::= x x x\nx ::= (\"a\" | \"\") \"b\"?"},
        {"root ::= x x x \"c\" x x | y y\nx ::= \"a\"? \"b\"?\ny ::= x \"c\"?",
         "root ::= w? w? w? \"c\" w? w? | (w? \"c\"?) (w? \"c\"?)\nw ::= \"ab\" | \"a\" | \"b\""},
    };
    char s[8];
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        int bad = 0;
        for (int len = 0; len <= 6 && !bad; len++) {
            int n = 1;
            for (int k = 0; k < len; k++) n *= 3;
            for (int v = 0; v < n && !bad; v++) {
                int x = v;
                for (int k = 0; k < len; k++, x /= 3) s[k] = (char)('a' + x % 3);
                s[len] = '\0';
                if (!same_language(cases[c].rep, cases[c].seq, s)) {
                    CHECKF(0, "'%s' vs '%s': differ on '%s'", cases[c].rep, cases[c].seq, s);
                    bad = 1;
                }
            }
        }
    }
}

/* ------------------------------------------------------------------------------------------ */
/* The sampler on designed logits                                                              */

static void test_distribution(void) {
    /* tokens: 0 "a", 1 "b", 2 "ab", 3 "x", 4 "y", 5 "xy", 6 EOS (no text), 7 "ba" */
    static const char *pieces[] = {"a", "b", "ab", "x", "y", "xy", "", "ba"};
    const int32_t V = 8;
    tvocab tv;
    tvocab_make(&tv, pieces, V);
    const char *gtext = "root ::= [ab]+";
    const float logits[8] = {0.5f, -1.0f, 0.2f, 2.0f, 1.5f, 1.0f, 0.0f, -0.3f};
    const uint8_t allowed[8] = {1, 1, 1, 0, 0, 0, 0, 1};
    double q[8], sum = 0, qa = 0;
    for (int t = 0; t < V; t++) sum += exp(logits[t]);
    for (int t = 0; t < V; t++) {
        q[t] = exp(logits[t]) / sum;
        if (allowed[t]) qa += q[t];
    }
    wlm_gen_params p;
    wlm_gen_params_default(&p);
    p.top_p = 1.0f;
    p.n_probs = 8;
    wlm_sampler s;
    memset(&s, 0, sizeof s);
    /* reported distribution: q / Q on the allowed tokens, 0 elsewhere */
    for (int seed = 1; seed <= 3; seed++) {
        wlm_gram *g;
        p.seed = (uint64_t)seed;
        CHECK_STATUS(wlm_sampler_init(&s, V, &p), WLM_OK);
        wlm_gram_matcher *m = matcher_for(gtext, &tv, 6, &g);
        wlm_sampler_set_grammar(&s, g, m);
        wlm_token info;
        memset(&info, 0, sizeof info);
        int32_t t = wlm_sampler_sample(&s, logits, NULL, 0, &info);
        CHECKF(t >= 0 && allowed[t], "sampled %d", (int)t);
        CHECK_EQ_INT(info.n_probs, 8);
        for (int k = 0; k < info.n_probs; k++) {
            const int32_t id = info.top[k].id;
            CHECK_NEAR(info.top[k].prob_sampled, allowed[id] ? q[id] / qa : 0.0, 2e-6);
            CHECK_NEAR(info.top[k].prob, q[id], 2e-6);
        }
        CHECK_NEAR(info.prob_sampled, q[t] / qa, 2e-6);
    }
    /* top-k 2 keeps "x" and "y", both refused: the chain reruns with the mask, so top-k picks
     * the two best allowed tokens "a" and "ab" */
    {
        wlm_gram *g;
        p.top_k = 2;
        p.seed = 7;
        CHECK_STATUS(wlm_sampler_init(&s, V, &p), WLM_OK);
        wlm_sampler_set_grammar(&s, NULL, NULL);
        wlm_gram_matcher *m = matcher_for(gtext, &tv, 6, &g);
        wlm_sampler_set_grammar(&s, g, m);
        wlm_token info;
        memset(&info, 0, sizeof info);
        int32_t t = wlm_sampler_sample(&s, logits, NULL, 0, &info);
        CHECKF(t == 0 || t == 2, "top-k fallback sampled %d", (int)t);
        const double z = exp(0.5) + exp(0.2);
        for (int k = 0; k < info.n_probs; k++) {
            const int32_t id = info.top[k].id;
            const double want = id == 0 ? exp(0.5) / z : id == 2 ? exp(0.2) / z : 0.0;
            CHECK_NEAR(info.top[k].prob_sampled, want, 2e-6);
        }
        p.top_k = 0;
    }
    /* greedy: the argmax "x" is refused, the best allowed is "a" */
    {
        wlm_gram *g;
        p.temperature = 0.0f;
        p.n_probs = 0;
        CHECK_STATUS(wlm_sampler_init(&s, V, &p), WLM_OK);
        wlm_gram_matcher *m = matcher_for(gtext, &tv, 6, &g);
        wlm_sampler_set_grammar(&s, g, m);
        CHECK_EQ_INT(wlm_sampler_sample(&s, logits, NULL, 0, NULL), 0);
        p.temperature = 1.0f;
    }
    /* the check-first path (n_probs 0): 40 000 draws follow q / Q; the matcher accepts "a"
     * first so that the end (6) becomes allowed too */
    {
        const int N = 40000;
        long count[8] = {0};
        uint8_t ok2[8] = {1, 1, 1, 0, 0, 0, 1, 1};
        double qb = 0;
        for (int t = 0; t < V; t++) qb += ok2[t] ? q[t] : 0;
        wlm_gram *g;
        p.seed = 12345;
        CHECK_STATUS(wlm_sampler_init(&s, V, &p), WLM_OK);
        wlm_gram_matcher *m = matcher_for(gtext, &tv, 6, &g);
        CHECK_STATUS(wlm_gram_accept_token(m, 0), WLM_OK);
        wlm_sampler_set_grammar(&s, g, m);
        for (int k = 0; k < N; k++) {
            int32_t t = wlm_sampler_sample(&s, logits, NULL, 0, NULL);
            if (t >= 0 && t < V) count[t]++;
        }
        for (int t = 0; t < V; t++) {
            const double want = ok2[t] ? q[t] / qb : 0.0;
            const double sd = sqrt(N * want * (1 - want)) + 1e-9;
            CHECKF(fabs(count[t] - N * want) <= 5 * sd, "token %d: %ld draws, expected %.1f", t,
                   count[t], N * want);
        }
    }
    /* nothing allowed: an error, with n_allowed 0 */
    {
        wlm_gram *g;
        CHECK_STATUS(wlm_sampler_init(&s, V, &p), WLM_OK);
        wlm_gram_matcher *m = matcher_for("root ::= \"z\"", &tv, 6, &g);
        wlm_sampler_set_grammar(&s, g, m);
        CHECK_STATUS(wlm_sampler_sample(&s, logits, NULL, 0, NULL), WLM_ERR_INVALID_ARG);
        CHECK_EQ_INT(s.n_allowed, 0);
    }
    wlm_sampler_free(&s);
    wlm_gram_vocab_free(tv.v);
}

/* ------------------------------------------------------------------------------------------ */
/* Generation on stories260K                                                                   */

typedef int (*checker)(const char *s, size_t n);

typedef struct gen_out {
    char text[8192];
    size_t len;
    int32_t stop;
    int32_t ids[1024];
    int32_t n_ids;
} gen_out;

static int generate(wlm_context *ctx, const char *grammar, const wlm_gen_params *base,
                    uint64_t seed, gen_out *o) {
    wlm_gen_params p = *base;
    p.seed = seed;
    p.grammar = grammar;
    p.grammar_len = strlen(grammar);
    o->len = 0;
    o->n_ids = 0;
    o->stop = -1;
    int rc = wlm_generate_begin_text(ctx, "", &p);
    if (!CHECKF(rc == WLM_OK, "begin: %s %s", wlm_status_name(rc), wlm_context_errmsg(ctx)))
        return rc;
    wlm_token tok;
    while ((rc = wlm_generate_next(ctx, &tok)) == WLM_OK) {
        if (o->len + tok.piece_len < sizeof o->text) {
            memcpy(o->text + o->len, tok.piece, tok.piece_len);
            o->len += tok.piece_len;
        }
        if (o->n_ids < 1024) o->ids[o->n_ids++] = tok.id;
    }
    if (rc == WLM_DONE) {
        if (o->len + tok.piece_len < sizeof o->text) {
            memcpy(o->text + o->len, tok.piece, tok.piece_len);
            o->len += tok.piece_len;
        }
        o->stop = tok.stop_reason;
        return WLM_OK;
    }
    CHECKF(0, "next: %s %s", wlm_status_name(rc), wlm_context_errmsg(ctx));
    return rc;
}

static void test_generation(wlm_model *model) {
    static const struct {
        const char *name;
        const char **grammar;
        checker check;
        int min_complete; /* of 24 samples */
    } cases[] = {{"json", &JSON_GBNF, check_json, 0},
                 {"json-short", &JSON_SHORT_GBNF, check_json, 8},
                 {"enum", &ENUM_GBNF, check_enum, 8},
                 {"number", &NUMBER_GBNF, check_number, 8},
                 {"string", &STRING_GBNF, check_string, 8},
                 {"parens", &PARENS_GBNF, check_parens, 8},
                 {"repeat", &REPEAT_GBNF, check_repeat, 8}};
    wlm_context_params cp;
    wlm_context_params_default(&cp);
    cp.n_seq_max = 8;
    wlm_context *ctx = NULL;
    CHECK_STATUS(wlm_context_new(model, &cp, &ctx), WLM_OK);
    if (!ctx) return;
    static gen_out o, alone[3];
    wlm_gen_params base;
    wlm_gen_params_default(&base);
    base.max_tokens = 200;
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        int complete = 0, cut = 0;
        for (uint64_t seed = 1; seed <= 24; seed++) {
            wlm_gen_params p = base;
            if (seed % 4 == 1) p.top_k = 3;         /* the fallback path, often */
            if (seed % 4 == 2) p.temperature = 0.0f; /* greedy */
            if (seed % 4 == 3) p.n_probs = 5, p.temperature = 1.5f;
            if (generate(ctx, *cases[c].grammar, &p, seed, &o) != WLM_OK) break;
            const int r = cases[c].check(o.text, o.len);
            if (o.stop == WLM_STOP_EOS) {
                complete++;
                CHECKF(r == 1, "%s seed %d: complete output does not match: '%.*s'",
                       cases[c].name, (int)seed, (int)o.len, o.text);
            } else {
                cut++;
                CHECKF(o.stop == WLM_STOP_MAX_TOKENS && r == EOF_,
                       "%s seed %d: stop %d, output '%.*s' (checker %d)", cases[c].name,
                       (int)seed, (int)o.stop, (int)o.len, o.text, r);
            }
            if (verbose && seed <= 3)
                printf("  %s seed %d (%s): %.*s\n", cases[c].name, (int)seed,
                       wlm_stop_reason_name(o.stop), (int)(o.len > 160 ? 160 : o.len), o.text);
        }
        CHECKF(complete >= cases[c].min_complete, "%s: only %d of 24 samples completed",
               cases[c].name, complete);
        if (verbose) printf("%s: %d complete, %d cut by max_tokens\n", cases[c].name, complete, cut);
    }
    /* a batch of three sequences (two share a prompt) equals each sequence alone */
    {
        wlm_gen_params ps[3];
        const char *gs[3] = {JSON_GBNF, ENUM_GBNF, JSON_GBNF};
        for (int i = 0; i < 3; i++) {
            ps[i] = base;
            ps[i].seed = 100 + (uint64_t)i;
            ps[i].grammar = gs[i];
            ps[i].grammar_len = strlen(gs[i]);
            ps[i].max_tokens = 60;
            generate(ctx, gs[i], &ps[i], ps[i].seed, &alone[i]);
        }
        int32_t bos = 1;
        const int32_t *prompts[3] = {&bos, &bos, &bos};
        int32_t n_tok[3] = {1, 1, 1};
        int rc = wlm_generate_batch_begin(ctx, 3, prompts, n_tok, ps);
        CHECKF(rc == WLM_OK, "batch begin: %s", wlm_context_errmsg(ctx));
        int32_t n_ids[3] = {0}, ids[3][1024], stop[3] = {-1, -1, -1};
        wlm_token out[3];
        while (rc == WLM_OK && (rc = wlm_generate_batch_next(ctx, out)) >= 0) {
            for (int i = 0; i < 3; i++) {
                if (out[i].status == WLM_OK && n_ids[i] < 1024) ids[i][n_ids[i]++] = out[i].id;
                if (out[i].status == WLM_DONE && stop[i] < 0) stop[i] = out[i].stop_reason;
            }
            if (rc == WLM_DONE) break;
        }
        for (int i = 0; i < 3; i++) {
            CHECKF(n_ids[i] == alone[i].n_ids &&
                       memcmp(ids[i], alone[i].ids, sizeof(int32_t) * (size_t)n_ids[i]) == 0,
                   "batch sequence %d differs from its run alone (%d vs %d tokens)", i,
                   (int)n_ids[i], (int)alone[i].n_ids);
            CHECK_EQ_INT(stop[i], alone[i].stop);
        }
    }
    /* beams: every result follows the grammar; EOS-ended ones are complete */
    {
        wlm_beam_params bp;
        wlm_beam_params_default(&bp);
        bp.width = 3;
        bp.max_tokens = 40;
        bp.grammar = ENUM_GBNF;
        bp.grammar_len = strlen(ENUM_GBNF);
        int32_t bos = 1;
        int rc = wlm_beam_begin(ctx, &bos, 1, &bp);
        CHECKF(rc == WLM_OK, "beam begin: %s", wlm_context_errmsg(ctx));
        while (rc == WLM_OK) rc = wlm_beam_step(ctx);
        CHECK_STATUS(rc, WLM_DONE);
        const int32_t nb = wlm_beam_count(ctx);
        CHECK(nb >= 1);
        for (int32_t i = 0; i < nb; i++) {
            wlm_beam b;
            CHECK_STATUS(wlm_beam_get(ctx, i, &b), WLM_OK);
            char text[2048];
            size_t len = 0;
            int32_t prev = bos;
            for (int32_t k = 0; k < b.n_tokens; k++) {
                size_t pl = 0;
                const char *pc = wlm_token_piece(model, prev, b.tokens[k], &pl);
                if (len + pl < sizeof text) memcpy(text + len, pc, pl), len += pl;
                prev = b.tokens[k];
            }
            const int r = check_enum(text, len);
            CHECKF(b.stop_reason == WLM_STOP_EOS ? r == 1 : r == EOF_,
                   "beam %d (stop %d): '%.*s' checker %d", (int)i, (int)b.stop_reason, (int)len,
                   text, r);
            if (verbose) printf("  beam %d %s: %.*s\n", (int)i, wlm_stop_reason_name(b.stop_reason), (int)len, text);
        }
        /* an invalid grammar fails at begin with its position */
        bp.grammar = "root ::= x";
        bp.grammar_len = strlen(bp.grammar);
        CHECK_STATUS(wlm_beam_begin(ctx, &bos, 1, &bp), WLM_ERR_INVALID_ARG);
        CHECKF(strstr(wlm_context_errmsg(ctx), "line 1, column 10") != NULL, "%s",
               wlm_context_errmsg(ctx));
    }
    /* preview: in the middle of a JSON generation, every candidate it gives a weight is
     * allowed: the text so far plus its piece stays a prefix of JSON */
    {
        wlm_gen_params p = base;
        p.grammar = JSON_GBNF;
        p.grammar_len = strlen(JSON_GBNF);
        p.seed = 5;
        p.n_probs = 20;
        p.temperature = 1.5f;
        p.top_p = 1.0f;
        CHECK_STATUS(wlm_generate_begin_text(ctx, "", &p), WLM_OK);
        char text[4096];
        size_t len = 0;
        wlm_token tok, pv;
        int32_t prev = 1;
        for (int step = 0; step < 12; step++) {
            if (wlm_generate_next(ctx, &tok) != WLM_OK) break;
            /* the state before tok: its logits; the text before it */
            CHECK_STATUS(wlm_sampler_preview(ctx, 0, &p, &pv), WLM_OK);
            int positive = 0;
            for (int k = 0; k < pv.n_probs; k++) {
                if (!(pv.top[k].prob_sampled > 0)) continue;
                positive++;
                size_t pl = 0;
                const char *pc = wlm_token_piece(model, prev, pv.top[k].id, &pl);
                char buf[4200];
                memcpy(buf, text, len);
                memcpy(buf + len, pc, pl);
                const int r = check_json(buf, len + pl);
                CHECKF(r != 0, "preview offers token %d ('%.*s') after '%.*s'",
                       (int)pv.top[k].id, (int)pl, pc, (int)len, text);
            }
            CHECK(positive > 0);
            memcpy(text + len, tok.piece, tok.piece_len);
            len += tok.piece_len;
            prev = tok.id;
        }
        /* an invalid grammar in begin: the message gives the place */
        p.grammar = "root ::= \"a\"\n  b ::= [x";
        p.grammar_len = strlen(p.grammar);
        CHECK_STATUS(wlm_generate_begin_text(ctx, "", &p), WLM_ERR_INVALID_ARG);
        CHECKF(strstr(wlm_context_errmsg(ctx), "line 2, column 9") != NULL, "%s",
               wlm_context_errmsg(ctx));
    }
    wlm_context_free(ctx);
}

/* ------------------------------------------------------------------------------------------ */
/* Lazy grammars (grammar_lazy.c) on stories260K                                               */

/* Generates from BOS with params p into o (no grammar added, unlike generate()). */
static int generate_with(wlm_context *ctx, const wlm_gen_params *p, gen_out *o) {
    o->len = 0;
    o->n_ids = 0;
    o->stop = -1;
    int rc = wlm_generate_begin_text(ctx, "", p);
    if (!CHECKF(rc == WLM_OK, "begin: %s %s", wlm_status_name(rc), wlm_context_errmsg(ctx)))
        return rc;
    wlm_token tok;
    while ((rc = wlm_generate_next(ctx, &tok)) == WLM_OK || rc == WLM_DONE) {
        if (o->len + tok.piece_len < sizeof o->text) {
            memcpy(o->text + o->len, tok.piece, tok.piece_len);
            o->len += tok.piece_len;
        }
        if (rc == WLM_DONE) {
            o->stop = tok.stop_reason;
            return WLM_OK;
        }
        if (o->n_ids < 1024) o->ids[o->n_ids++] = tok.id;
    }
    CHECKF(0, "next: %s %s", wlm_status_name(rc), wlm_context_errmsg(ctx));
    return rc;
}

/* Position of the first `w` in o's text, or -1. */
static long find_word(const gen_out *o, const char *w) {
    const size_t wl = strlen(w);
    for (size_t at = 0; at + wl <= o->len; at++)
        if (memcmp(o->text + at, w, wl) == 0) return (long)at;
    return -1;
}

static void test_lazy(wlm_model *model) {
    wlm_context_params cp;
    wlm_context_params_default(&cp);
    wlm_context *ctx = NULL;
    CHECK_STATUS(wlm_context_new(model, &cp, &ctx), WLM_OK);
    if (!ctx) return;
    static gen_out free_, lazy;
    wlm_gen_params base;
    wlm_gen_params_default(&base);
    base.max_tokens = 120;
    /* A trigger word: the text before it is exactly the free generation's (same seed: the
     * dormant grammar changes nothing), from it on the grammar holds: "the" then 3 digits and
     * "!", which this model never writes by itself, then the end. */
    const char *digits = "root ::= \"the\" [0-9] [0-9] [0-9] \"!\"";
    int triggered = 0;
    for (uint64_t seed = 1; seed <= 16; seed++) {
        wlm_gen_params p = base;
        p.seed = seed;
        if (seed % 4 == 2) p.temperature = 0.0f;
        if (seed % 4 == 3) p.n_probs = 3, p.top_k = 5;
        if (generate_with(ctx, &p, &free_) != WLM_OK) break;
        p.grammar = digits;
        p.grammar_len = strlen(digits);
        p.grammar_lazy = 1;
        p.n_grammar_triggers = 1;
        p.grammar_triggers[0].token = -1;
        strcpy(p.grammar_triggers[0].word, "the");
        if (generate_with(ctx, &p, &lazy) != WLM_OK) break;
        const long at = find_word(&free_, "the");
        if (at < 0) { /* never triggered: the same text and stop */
            CHECKF(lazy.len == free_.len && memcmp(lazy.text, free_.text, lazy.len) == 0 &&
                       lazy.stop == free_.stop,
                   "seed %d: no trigger, yet the text differs", (int)seed);
            continue;
        }
        /* the grammar woke at the last "the" ("the" inside "there" was refused: the token's
         * text after it does not follow the grammar, so it stayed dormant) */
        const size_t lat = lazy.len >= 7 ? lazy.len - 7 : 0;
        const char *tail = lazy.text + lat;
        int ok = lazy.len >= 7 && memcmp(tail, "the", 3) == 0 && tail[6] == '!';
        for (int k = 3; ok && k < 6; k++) ok = tail[k] >= '0' && tail[k] <= '9';
        if (!ok && lazy.stop == WLM_STOP_MAX_TOKENS) continue; /* cut before the end */
        ok = ok && (lazy.stop == WLM_STOP_EOS || lazy.stop == WLM_STOP_MAX_TOKENS);
        triggered++;
        CHECKF(ok, "seed %d: after the trigger: '%.*s' (stop %d)", (int)seed, 7, tail,
               (int)lazy.stop);
        CHECKF(lat + 3 <= free_.len && memcmp(lazy.text, free_.text, lat + 3) == 0,
               "seed %d: the free text up to the trigger differs ('%.*s' vs '%.*s')", (int)seed,
               (int)lazy.len, lazy.text, (int)free_.len, free_.text);
        if (verbose) printf("  lazy seed %d: %.*s\n", (int)seed, (int)lazy.len, lazy.text);
    }
    CHECKF(triggered >= 8, "only %d of 16 free generations wrote the trigger word", triggered);

    /* A trigger token: the free run's 4th token; the grammar starts with its piece. */
    {
        wlm_gen_params p = base;
        p.seed = 3;
        generate_with(ctx, &p, &free_);
        CHECK(free_.n_ids > 6);
        const int32_t trig = free_.ids[3];
        size_t pl = 0;
        const char *pc = wlm_token_piece(model, free_.ids[2], trig, &pl);
        char g[256] = "root ::= \"";
        size_t gl = strlen(g);
        for (size_t k = 0; k < pl && gl < 200; k++) { /* a GBNF literal of the piece */
            if (pc[k] == '"' || pc[k] == '\\') g[gl++] = '\\';
            g[gl++] = pc[k];
        }
        strcpy(g + gl, "\" \"###\"");
        p.grammar = g;
        p.grammar_len = strlen(g);
        p.grammar_lazy = 1;
        p.n_grammar_triggers = 1;
        p.grammar_triggers[0].token = trig;
        generate_with(ctx, &p, &lazy);
        int32_t first = 0;
        while (free_.ids[first] != trig) first++;
        CHECKF(lazy.n_ids >= first + 1 &&
                   memcmp(lazy.ids, free_.ids, sizeof(int32_t) * (size_t)(first + 1)) == 0,
               "trigger token: the tokens up to it differ");
        CHECKF(lazy.len >= 3 && memcmp(lazy.text + lazy.len - 3, "###", 3) == 0 &&
                   lazy.stop == WLM_STOP_EOS,
               "trigger token: '%.*s' stop %d", (int)lazy.len, lazy.text, (int)lazy.stop);
        /* a trigger whose text the grammar refuses leaves it dormant: the free text */
        p.grammar = "root ::= \"zzz\"";
        p.grammar_len = strlen(p.grammar);
        generate_with(ctx, &p, &lazy);
        CHECKF(lazy.n_ids == free_.n_ids &&
                   memcmp(lazy.ids, free_.ids, sizeof(int32_t) * (size_t)lazy.n_ids) == 0 &&
                   lazy.stop == free_.stop,
               "a refused trigger changed the text");
        /* preview after the trigger offers only what the grammar allows */
        p.grammar = g;
        p.grammar_len = strlen(g);
        p.n_probs = 10;
        CHECK_STATUS(wlm_generate_begin_text(ctx, "", &p), WLM_OK);
        wlm_token tok, pv;
        for (int32_t k = 0; k <= first + 1; k++) CHECK_STATUS(wlm_generate_next(ctx, &tok), WLM_OK);
        CHECK_STATUS(wlm_sampler_preview(ctx, 0, &p, &pv), WLM_OK);
        for (int k = 0; k < pv.n_probs; k++) {
            if (!(pv.top[k].prob_sampled > 0)) continue;
            size_t ql = 0;
            const char *q = wlm_token_piece(model, -1, pv.top[k].id, &ql);
            CHECKF(ql >= 1 && ql <= 3 && memcmp(q, "###", ql) == 0,
                   "preview after the trigger offers '%.*s'", (int)ql, q);
        }
        wlm_generate_abort(ctx);
        wlm_generate_next(ctx, &tok);
    }

    /* Errors, named. */
    {
        static const struct {
            int lazy, n, token;
            const char *word, *grammar, *msg;
        } bad[] = {
            {2, 1, -1, "x", "root ::= \"x\"", "grammar_lazy must be 0 or 1"},
            {1, 0, -1, "x", "root ::= \"x\"", "at least one trigger"},
            {1, 1, -1, "x", NULL, "needs a grammar"},
            {1, 1, 512, "", "root ::= \"x\"", "outside the vocabulary"},
            {1, 1, -2, "", "root ::= \"x\"", "token must be an id or -1"},
            {1, 1, -1, "", "root ::= \"x\"", "the word is empty"},
            {1, 9, 5, "", "root ::= \"x\"", "n_grammar_triggers must be in 0..8"},
        };
        for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
            wlm_gen_params p = base;
            p.grammar = bad[i].grammar;
            p.grammar_len = bad[i].grammar ? strlen(bad[i].grammar) : 0;
            p.grammar_lazy = bad[i].lazy;
            p.n_grammar_triggers = bad[i].n;
            for (int k = 0; k < WLM_MAX_GRAMMAR_TRIGGERS; k++) {
                p.grammar_triggers[k].token = bad[i].token;
                strcpy(p.grammar_triggers[k].word, bad[i].word);
            }
            CHECK_STATUS(wlm_generate_begin_text(ctx, "", &p), WLM_ERR_INVALID_ARG);
            CHECKF(strstr(wlm_context_errmsg(ctx), bad[i].msg) != NULL, "case %d: %s", (int)i,
                   wlm_context_errmsg(ctx));
        }
        wlm_gen_params p = base; /* an unterminated word */
        p.grammar = "root ::= \"x\"";
        p.grammar_len = strlen(p.grammar);
        p.grammar_lazy = 1;
        p.n_grammar_triggers = 1;
        p.grammar_triggers[0].token = -1;
        memset(p.grammar_triggers[0].word, 'a', WLM_MAX_STOP_LEN);
        CHECK_STATUS(wlm_generate_begin_text(ctx, "", &p), WLM_ERR_INVALID_ARG);
    }
    wlm_context_free(ctx);
}

/* ------------------------------------------------------------------------------------------ */
/* Lazy grammars armed by a marker (grammar_lazy.c, "Arming"): scripted token streams          */

/* Scripted vocabulary: control tokens have empty pieces (SmolLM3's </think> and <tool_call>). */
static const char *const ARM_PIECES[] = {
    /* 0 */ "",  /* control </think> */      /* 1 */ "</think>",
    /* 2 */ "<tool_call>",                    /* 3 */ "",  /* control <tool_call> */
    /* 4 */ "</thi",  /* 5 */ "nk>",          /* 6 */ "<tool_",  /* 7 */ "call>",
    /* 8 */ "x",  /* 9 */ "\n",  /* 10 */ "{}",  /* 11 */ "<|channel|>",  /* 12 */ "<|message|>",
    /* 13 */ "to=functions.",  /* 14 */ "f",  /* 15 */ "</think>\n\n<tool_call>",
    /* 16 */ "<tool_call></think>",  /* 17 */ "analysis",  /* 18 */ "commentary ",
    /* 19 */ "<think>",  /* 20 */ "<tool_call>x<tool_call>{",  /* 21 */ "<|end|>",
    /* 22 */ "<thi",  /* 23 */ ""  /* control <think> */};
#define ARM_V ((int32_t)(sizeof ARM_PIECES / sizeof *ARM_PIECES))

typedef struct arm_setup {
    const char *grammar;
    int32_t n_trig, n_arm, n_disarm, start_armed;
    wlm_grammar_trigger trig[4], arm[4], disarm[4];
} arm_setup;

/* Feeds ids[0..n) to a dormant lazy sampler; returns the index of the token after which the
 * grammar became active, or -1 when it stayed dormant. */
static int arm_run(const tvocab *tv, const arm_setup *a, const int32_t *ids, int n) {
    wlm_gram *g = NULL;
    wlm_gram_matcher *m = matcher_for(a->grammar, tv, -1, &g);
    if (!m) return -2;
    wlm_sampler s;
    memset(&s, 0, sizeof s);
    wlm_sampler_set_grammar(&s, g, m);
    wlm_gen_params p;
    wlm_gen_params_default(&p);
    p.grammar = a->grammar;
    p.grammar_len = strlen(a->grammar);
    p.grammar_lazy = 1;
    p.n_grammar_triggers = a->n_trig;
    memcpy(p.grammar_triggers, a->trig, sizeof a->trig);
    p.n_grammar_arms = a->n_arm;
    memcpy(p.grammar_arms, a->arm, sizeof a->arm);
    p.n_grammar_disarms = a->n_disarm;
    memcpy(p.grammar_disarms, a->disarm, sizeof a->disarm);
    p.grammar_start_armed = a->start_armed;
    char err[256] = "";
    CHECKF(wlm_grammar_lazy_check(&p, tv->n, err, sizeof err) == WLM_OK, "check: %s", err);
    CHECK_STATUS(wlm_sampler_set_lazy(&s, &p), WLM_OK);
    int woke = -1;
    for (int k = 0; k < n && woke < 0; k++) {
        CHECK_STATUS(wlm_sampler_accept(&s, ids[k], tv->piece[ids[k]], tv->len[ids[k]]), WLM_OK);
        if (wlm_sampler_grammar_active(&s)) woke = k;
    }
    wlm_sampler_free(&s);
    return woke;
}

static wlm_grammar_trigger arm_word(const char *w) {
    wlm_grammar_trigger t;
    memset(&t, 0, sizeof t);
    t.token = -1;
    strcpy(t.word, w);
    return t;
}
static wlm_grammar_trigger arm_token(int32_t id) {
    wlm_grammar_trigger t;
    memset(&t, 0, sizeof t);
    t.token = id;
    return t;
}

static void test_lazy_arming(void) {
    tvocab tv;
    tvocab_make(&tv, ARM_PIECES, ARM_V);
    /* a prompt ending in an open <think>: "</think>" (word, and the control token 0) arms */
    arm_setup think = {.grammar = "root ::= \"<tool_call>\"? ( \"x\" | \"\\n\" )* \"{\" [a-z]* \"}\"",
                       .n_trig = 2, .n_arm = 2};
    think.trig[0] = arm_word("<tool_call>");
    think.trig[1] = arm_token(3);
    think.arm[0] = arm_word("</think>");
    think.arm[1] = arm_token(0);
    static const struct {
        int32_t ids[8];
        int n, woke;
        const char *what;
    } cases[] = {
        {{8, 2, 8, 10}, 4, -1, "a call marker inside the reasoning"},
        {{8, 2, 8, 1, 9, 2}, 6, 5, "the marker after </think> (text)"},
        {{3, 8, 0, 9, 3}, 5, 4, "control tokens: <tool_call> inside, </think>, <tool_call>"},
        {{3, 8, 0}, 3, -1, "a control trigger before the control </think>"},
        {{4, 5, 6, 7}, 4, 3, "</think> and the marker split across tokens"},
        {{4, 6, 7, 5}, 4, -1, "a marker in the middle of a split </think>"},
        {{6, 1, 7}, 3, -1, "a marker begun before </think> and ended after it"},
        {{15}, 1, 0, "</think> and the marker in one token"},
        {{16, 8}, 2, -1, "the marker before </think> in one token"},
        {{16, 2}, 2, 1, "the marker before </think> in one token, then after it"},
        {{1, 1, 2}, 3, 2, "</think> twice (armed stays armed)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int w = arm_run(&tv, &think, cases[i].ids, cases[i].n);
        CHECKF(w == cases[i].woke, "arming, %s: woke after %d, expected %d", cases[i].what, w,
               cases[i].woke);
    }
    /* without arms the same markers wake at once (the default, unchanged) */
    arm_setup plain = think;
    plain.n_arm = 0;
    {
        static const int32_t ids[] = {8, 2, 8};
        CHECK_EQ_INT(arm_run(&tv, &plain, ids, 3), 1);
        static const int32_t ctl[] = {8, 3, 8};
        CHECK_EQ_INT(arm_run(&tv, &plain, ctl, 3), 1);
        /* a refused trigger word: the search goes on after it, in the same piece */
        static const int32_t twice[] = {20};
        arm_setup strict = plain;
        strict.grammar = "root ::= \"<tool_call>{\" [a-z]* \"}\"";
        CHECK_EQ_INT(arm_run(&tv, &strict, twice, 1), 0);
    }
    /* a model that may open <think> itself: start armed, "<think>" disarms only as the answer's
     * first non-whitespace (start 2), "</think>" re-arms */
    arm_setup self = think;
    self.n_disarm = 2;
    self.disarm[0] = arm_word("<think>");
    self.disarm[1] = arm_token(23);
    self.start_armed = 2;
    {
        static const struct {
            int32_t ids[8];
            int n, woke;
            const char *what;
        } lead[] = {
            {{2}, 1, 0, "a call first"},
            {{19, 8, 2, 8, 1, 9, 2}, 7, 6, "<think>, a marker inside, </think>, a marker"},
            {{9, 9, 19, 2, 1, 2}, 6, 5, "whitespace, then <think>"},
            {{22, 5, 2, 1, 2}, 5, 4, "<think> split across tokens"},
            {{23, 3, 8, 0, 3}, 5, 4, "control <think>, <tool_call>, </think>, <tool_call>"},
            {{8, 19, 2}, 3, 2, "a <think> after text is text: the marker wakes"},
            {{9, 22, 8, 2}, 4, 3, "a partial <think> that is not one"},
            {{19, 1, 19, 2}, 4, 3, "a second <think> after </think> is text"},
            {{8, 23, 3}, 3, 2, "a control <think> after text"},
        };
        for (size_t i = 0; i < sizeof lead / sizeof *lead; i++) {
            int w = arm_run(&tv, &self, lead[i].ids, lead[i].n);
            CHECKF(w == lead[i].woke, "leading disarm, %s: woke after %d, expected %d",
                   lead[i].what, w, lead[i].woke);
        }
        /* start 1: a disarm counts anywhere */
        arm_setup any = self;
        any.start_armed = 1;
        static const int32_t later[] = {8, 19, 2, 1, 2};
        CHECK_EQ_INT(arm_run(&tv, &any, later, 5), 4);
    }
    /* harmony: "<|channel|>" arms, "<|message|>" disarms: only a header holds a call */
    arm_setup harmony = {.grammar = "root ::= \"to=functions.f\" \" \"? \"{}\"", .n_trig = 1,
                         .n_arm = 1, .n_disarm = 1};
    harmony.trig[0] = arm_word("to=functions.");
    harmony.arm[0] = arm_word("<|channel|>");
    harmony.disarm[0] = arm_word("<|message|>");
    {
        static const int32_t body[] = {11, 17, 12, 8, 13, 14, 10, 21};
        CHECK_EQ_INT(arm_run(&tv, &harmony, body, 8), -1);
        static const int32_t header[] = {11, 17, 12, 13, 21, 11, 18, 13, 14};
        CHECK_EQ_INT(arm_run(&tv, &harmony, header, 9), 7);
        static const int32_t first[] = {13, 11, 13};
        CHECK_EQ_INT(arm_run(&tv, &harmony, first, 3), 2);
    }
    /* errors, named */
    {
        static const struct {
            int lazy, n_arm, n_disarm, start, arm_token;
            const char *msg;
        } bad[] = {
            {1, 5, 0, 0, -1, "n_grammar_arms must be in 0..4"},
            {1, 1, 5, 0, -1, "n_grammar_disarms must be in 0..4"},
            {1, 0, 1, 1, -1, "grammar_disarms need at least one of grammar_arms"},
            {1, 1, 0, 3, -1, "grammar_start_armed must be 0, 1 or 2"},
            {1, 1, 0, -1, -1, "grammar_start_armed must be 0, 1 or 2"},
            {0, 1, 0, 0, -1, "need grammar_lazy 1"},
            {0, 0, 0, 1, -1, "need grammar_lazy 1"},
            {1, 1, 0, 0, ARM_V, "grammar arm 0: token"},
            {1, 1, 0, 0, -3, "grammar arm 0: token must be an id or -1"},
        };
        for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
            wlm_gen_params p;
            wlm_gen_params_default(&p);
            p.grammar = "root ::= \"x\"";
            p.grammar_len = strlen(p.grammar);
            p.grammar_lazy = bad[i].lazy;
            p.n_grammar_triggers = bad[i].lazy;
            p.grammar_triggers[0] = arm_word("x");
            p.n_grammar_arms = bad[i].n_arm;
            p.n_grammar_disarms = bad[i].n_disarm;
            p.grammar_start_armed = bad[i].start;
            for (int k = 0; k < WLM_MAX_GRAMMAR_ARMS; k++) {
                p.grammar_arms[k] = arm_word("</think>");
                p.grammar_disarms[k] = arm_word("<think>");
            }
            p.grammar_arms[0].token = bad[i].arm_token;
            char err[256] = "";
            CHECK_STATUS(wlm_grammar_lazy_check(&p, ARM_V, err, sizeof err), WLM_ERR_INVALID_ARG);
            CHECKF(strstr(err, bad[i].msg) != NULL, "arming error %d: %s", (int)i, err);
        }
        wlm_gen_params p; /* an empty disarming word */
        wlm_gen_params_default(&p);
        p.grammar = "root ::= \"x\"";
        p.grammar_len = strlen(p.grammar);
        p.grammar_lazy = 1;
        p.n_grammar_triggers = 1;
        p.grammar_triggers[0] = arm_word("x");
        p.n_grammar_arms = 1;
        p.grammar_arms[0] = arm_word("a");
        p.n_grammar_disarms = 1;
        p.grammar_disarms[0] = arm_word("");
        char err[256] = "";
        CHECK_STATUS(wlm_grammar_lazy_check(&p, ARM_V, err, sizeof err), WLM_ERR_INVALID_ARG);
        CHECKF(strstr(err, "grammar disarm 0: the word is empty") != NULL, "%s", err);
    }
    wlm_gram_vocab_free(tv.v);
}

/* ------------------------------------------------------------------------------------------ */
/* The Llama 2 vocabulary                                                                      */

static double now_us(void) {
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void test_llama2_vocab(void) {
    size_t size = 0;
    unsigned char *data = tu_read_shared("models/tokenizer.bin", &size);
    if (!data) return;
    wlm_tokenizer tok;
    memset(&tok, 0, sizeof tok);
    char err[256];
    int rc = wlm_tokenizer_load_llama2c(&tok, data, size, 32000, err, sizeof err);
    CHECKF(rc == WLM_OK, "tokenizer.bin: %s", err);
    free(data);
    if (rc != WLM_OK) return;
    const int32_t V = tok.vocab_size;
    const char **pieces = malloc(sizeof *pieces * (size_t)V);
    size_t *lens = malloc(sizeof *lens * (size_t)V);
    for (int32_t t = 0; t < V; t++) pieces[t] = wlm_tokenizer_piece(&tok, -1, t, &lens[t]);
    wlm_gram_vocab *v = NULL;
    double t0 = now_us();
    CHECK_STATUS(wlm_gram_vocab_new(V, pieces, lens, &v), WLM_OK);
    const double build_us = now_us() - t0;
    wlm_gram *g = NULL;
    CHECK_STATUS(wlm_gram_parse(JSON_GBNF, strlen(JSON_GBNF), &g, err, sizeof err), WLM_OK);
    int32_t eog[2] = {2, 1};
    wlm_gram_matcher *m = NULL;
    CHECK_STATUS(wlm_gram_matcher_new(g, v, eog, 2, &m), WLM_OK);
    const char *doc = "{\"name\": \"Zoë\", \"tags\": [\"a\\n\", \"naïve € ✓\"], \"n\": -12.5e3, "
                      "\"ok\": true, \"nested\": {\"x\": null, \"y\": [1, 2, {\"z\": \"\"}]}}";
    int32_t ids[256];
    const int32_t n = wlm_tokenizer_encode(&tok, doc, strlen(doc), 0, ids, 256);
    CHECK(n > 10 && n < 256);
    uint8_t *mask = malloc((size_t)V);
    double check_us[256], mask_us[256];
    int32_t n_timed = 0;
    for (int32_t k = 0; k < n && k < 256; k++) {
        int32_t t = ids[k];
        if (k == 0 && lens[t] > 0 && pieces[t][0] == ' ') wlm_gram_matcher_strip_space(m, 1);
        t0 = now_us();
        const int a = wlm_gram_allows(m, t);
        const double t1 = now_us();
        /* a fresh clone: no cached mask for this state */
        wlm_gram_matcher *c = NULL;
        wlm_gram_matcher_clone(m, &c);
        const double t2 = now_us();
        const int32_t na = wlm_gram_mask(c, mask);
        const double t3 = now_us();
        check_us[n_timed] = t1 - t0;
        mask_us[n_timed] = t3 - t2;
        n_timed++;
        CHECKF(a == 1 && mask[t] == 1, "token %d ('%.*s') at %d: check %d, mask %d", (int)t,
               (int)lens[t], pieces[t], (int)k, a, mask[t]);
        CHECK(na > 0);
        /* the mask agrees with the per-token check on every 7th token */
        int bad = 0;
        for (int32_t u = k % 7; u < V; u += 7)
            if (wlm_gram_allows(c, u) != mask[u]) bad++;
        CHECKF(bad == 0, "step %d: %d tokens where the mask and the check disagree", (int)k, bad);
        wlm_gram_matcher_free(c);
        CHECK_STATUS(wlm_gram_accept_token(m, t), WLM_OK);
    }
    CHECK_EQ_INT(wlm_gram_is_complete(m), 1);
    CHECK_EQ_INT(wlm_gram_allows(m, 2), 1);
    if (verbose) {
        qsort(check_us, (size_t)n_timed, sizeof(double), cmp_double);
        qsort(mask_us, (size_t)n_timed, sizeof(double), cmp_double);
        printf("Llama 2 vocabulary (%d tokens): trie of %zu KiB built in %.1f ms; JSON grammar, "
               "%d tokens: median %.2f us for the check of the sampled token, %.0f us for the "
               "full mask (uncached; max %.0f us)\n",
               (int)V, wlm_gram_vocab_bytes(v) / 1024, build_us / 1000, (int)n_timed,
               check_us[n_timed / 2], mask_us[n_timed / 2], mask_us[n_timed - 1]);
    }
    free(mask);
    wlm_gram_matcher_free(m);
    wlm_gram_free(g);
    wlm_gram_vocab_free(v);
    free(pieces);
    free(lens);
    wlm_tokenizer_free(&tok);
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "-v") == 0) {
            verbose = 1;
            argv[i] = argv[argc - 1];
            argc--;
            break;
        }
    tu_find_shared(argc, argv);
    test_parser();
    test_matcher();
    test_nullable_repeats();
    test_distribution();
    test_lazy_arming();
    size_t ms = 0, ts = 0;
    unsigned char *mb = tu_read_shared("models/stories260K.bin", &ms);
    unsigned char *tb = tu_read_shared("models/tok512.bin", &ts);
    wlm_model *model = NULL;
    if (mb && tb) {
        int rc = wlm_model_load(mb, ms, 0, &model);
        if (rc == WLM_OK) rc = wlm_model_load_tokenizer(model, tb, ts);
        CHECKF(rc == WLM_OK, "stories260K: %s", model ? wlm_model_errmsg(model) : "");
        if (rc == WLM_OK) test_generation(model);
        if (rc == WLM_OK) test_lazy(model);
    }
    wlm_model_free(model);
    free(mb);
    free(tb);
    test_llama2_vocab();
    return TEST_FINISH();
}
