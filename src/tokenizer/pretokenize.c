/*
 * pretokenize.c — the BPE pre-tokenizers: a table of llama.cpp's regexes per
 * tokenizer.ggml.pre name, and the small regex engine that runs them on code points.
 *
 * Why an engine rather than hand-written splitters: the pre-tokenizers are a dozen variations
 * of the same seven alternatives; as data, a new model family is one table row, and each row
 * can be read against the model's tokenizer.json. The engine is a parser to a syntax tree, a
 * compiler to a small instruction list (counted repetitions unrolled), and a backtracking VM
 * with an explicit stack (no recursion on the input length) and a step budget, so no input can
 * make it hang. Classes test the general category and White_Space from unicode.c.
 *
 * Semantics are the regexes' own (ECMAScript / HF tokenizers). llama.cpp runs two of them (the
 * GPT-2 and Llama 3 regexes) through hand-written splitters that differ on unassigned code
 * points (Cn): they do not count as [^\s\p{L}\p{N}] there. Nothing here does that.
 */
#include "tokenizer/pretokenize.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/errors.h"
#include "tokenizer/unicode.h"
#include "wasmlm.h"

/* ------------------------------------------------------------------------------------------ */
/* Compiled form                                                                               */

enum { I_CHAR, I_CHARI, I_CLASS, I_SPLIT, I_JMP, I_MATCH, I_END, I_LOOK };

typedef struct inst {
    uint8_t op, neg;
    int32_t x, y;   /* SPLIT: preferred, other; JMP: target; LOOK: sub-program, continuation */
    uint32_t c;     /* CHAR: code point (CHARI: lower-case ASCII); CLASS: class index */
} inst;

#define CAT_SPACE (1u << 8)
#define CAT_NOTSPACE (1u << 9)

typedef struct rclass {
    uint16_t cats;  /* bit k: general-category class k (unicode.h); CAT_SPACE, CAT_NOTSPACE */
    uint8_t neg;
    uint32_t first, n; /* ranges[first .. first+n) */
} rclass;

struct wlm_regex {
    inst *prog;
    int32_t n_prog;
    rclass *cls;
    int32_t n_cls;
    uint32_t (*ranges)[2];
    uint32_t n_ranges;
};

void wlm_regex_free(wlm_regex *re) {
    if (!re) return;
    free(re->prog);
    free(re->cls);
    free(re->ranges);
    free(re);
}

/* ------------------------------------------------------------------------------------------ */
/* Parser: pattern → syntax tree                                                               */

enum { N_CHAR, N_CLASS, N_CAT, N_ALT, N_REP, N_LOOK, N_END };

typedef struct node {
    int type;
    uint32_t c;          /* CHAR: code point; CLASS: class index */
    int icase;           /* CHAR: ASCII case-insensitive */
    int first, next;     /* CAT / ALT: first child; every node: next sibling (-1 ends) */
    int child;           /* REP / LOOK */
    int min, max;        /* REP: max -1 = unbounded */
    int neg;             /* LOOK: (?!...) */
} node;

#define MAX_NODES 4096
#define MAX_PROG 65536
#define MAX_REPEAT 64

typedef struct parser {
    uint32_t *pat;       /* the pattern's code points */
    size_t n, pos;
    node *nodes;
    int n_nodes;
    wlm_regex *re;
    uint32_t cap_ranges;
    int32_t cap_cls;
    int depth;
    char *err;
    size_t errlen;
    int rc;
} parser;

static int perr(parser *p, const char *what) {
    if (p->rc == WLM_OK)
        p->rc = wlm_errorf(p->err, p->errlen, WLM_ERR_UNSUPPORTED,
                           "pre-tokenizer regex: %s at code point %zu", what, p->pos);
    return -1;
}

static int new_node(parser *p, int type) {
    if (p->n_nodes == MAX_NODES) return perr(p, "too many nodes");
    node *x = &p->nodes[p->n_nodes];
    memset(x, 0, sizeof *x);
    x->type = type;
    x->first = x->next = x->child = -1;
    return p->n_nodes++;
}

static int add_class(parser *p) {
    wlm_regex *re = p->re;
    if (re->n_cls == p->cap_cls) {
        int32_t cap = p->cap_cls ? p->cap_cls * 2 : 8;
        rclass *v = realloc(re->cls, sizeof(rclass) * (size_t)cap);
        if (!v) {
            p->rc = WLM_ERR_NOMEM;
            return -1;
        }
        re->cls = v;
        p->cap_cls = cap;
    }
    rclass *k = &re->cls[re->n_cls];
    memset(k, 0, sizeof *k);
    k->first = re->n_ranges;
    return re->n_cls++;
}

/* Appends a range to the class being built (always the last one). */
static int add_range(parser *p, uint32_t lo, uint32_t hi) {
    wlm_regex *re = p->re;
    if (hi < lo) return perr(p, "reversed range");
    if (re->n_ranges == p->cap_ranges) {
        uint32_t cap = p->cap_ranges ? p->cap_ranges * 2 : 32;
        uint32_t(*v)[2] = realloc(re->ranges, sizeof(uint32_t[2]) * cap);
        if (!v) {
            p->rc = WLM_ERR_NOMEM;
            return -1;
        }
        re->ranges = v;
        p->cap_ranges = cap;
    }
    re->ranges[re->n_ranges][0] = lo;
    re->ranges[re->n_ranges][1] = hi;
    re->n_ranges++;
    re->cls[re->n_cls - 1].n++;
    return 0;
}

/* \p{X}: the category bit, or -1. */
static int category(parser *p) {
    /* at "p{" */
    if (p->pos + 3 >= p->n || p->pat[p->pos + 1] != '{' || p->pat[p->pos + 3] != '}')
        return perr(p, "unsupported \\p{...}");
    switch (p->pat[p->pos + 2]) {
    case 'L': p->pos += 4; return 1 << WLM_UCD_LETTER;
    case 'M': p->pos += 4; return 1 << WLM_UCD_MARK;
    case 'N': p->pos += 4; return 1 << WLM_UCD_NUMBER;
    case 'P': p->pos += 4; return 1 << WLM_UCD_PUNCT;
    case 'S': p->pos += 4; return 1 << WLM_UCD_SYMBOL;
    default: return perr(p, "unsupported \\p{...}");
    }
}

/* An escape after '\\' (p->pos at the letter). Sets *cats (class escapes: \s \S \d \p) or *cp
 * (a literal); returns 1 for a class, 0 for a literal, -1 on error. */
static int escape(parser *p, uint32_t *cp, unsigned *cats, int *digit) {
    if (p->pos >= p->n) return perr(p, "dangling backslash");
    uint32_t c = p->pat[p->pos];
    *digit = 0;
    switch (c) {
    case 'r': p->pos++; *cp = '\r'; return 0;
    case 'n': p->pos++; *cp = '\n'; return 0;
    case 't': p->pos++; *cp = '\t'; return 0;
    case 's': p->pos++; *cats = CAT_SPACE; return 1;
    case 'S': p->pos++; *cats = CAT_NOTSPACE; return 1;
    case 'd': p->pos++; *cats = 0; *digit = 1; return 1;
    case 'p': {
        int k = category(p);
        if (k < 0) return -1;
        *cats = (unsigned)k;
        return 1;
    }
    default:
        if (c < 0x80 && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')))
            return perr(p, "unsupported escape");
        p->pos++;
        *cp = c; /* escaped punctuation stands for itself */
        return 0;
    }
}

static int parse_class(parser *p) {
    /* at the character after '[' */
    int k = add_class(p);
    if (k < 0) return -1;
    int id = new_node(p, N_CLASS);
    if (id < 0) return -1;
    p->nodes[id].c = (uint32_t)k;
    if (p->pos < p->n && p->pat[p->pos] == '^') {
        p->re->cls[k].neg = 1;
        p->pos++;
    }
    int first = 1;
    for (;;) {
        if (p->pos >= p->n) return perr(p, "unterminated class");
        uint32_t c = p->pat[p->pos];
        if (c == ']' && !first) {
            p->pos++;
            break;
        }
        first = 0;
        uint32_t lo;
        p->pos++;
        if (c == '\\') {
            unsigned cats = 0;
            int digit, r = escape(p, &lo, &cats, &digit);
            if (r < 0) return -1;
            if (r == 1) {
                p->re->cls[k].cats |= (uint16_t)cats;
                if (digit && add_range(p, '0', '9') < 0) return -1;
                continue;
            }
        } else {
            lo = c;
        }
        uint32_t hi = lo;
        if (p->pos + 1 < p->n && p->pat[p->pos] == '-' && p->pat[p->pos + 1] != ']') {
            p->pos++;
            uint32_t d = p->pat[p->pos++];
            if (d == '\\') {
                unsigned cats = 0;
                int digit, r = escape(p, &hi, &cats, &digit);
                if (r != 0) return r < 0 ? -1 : perr(p, "class escape as a range end");
            } else {
                hi = d;
            }
        }
        if (add_range(p, lo, hi) < 0) return -1;
    }
    return id;
}

static int parse_alt(parser *p, int icase);

static int parse_atom(parser *p, int icase) {
    uint32_t c = p->pat[p->pos];
    if (c == '(') {
        if (++p->depth > 32) return perr(p, "groups nested too deep");
        p->pos++;
        int look = -1, inner_icase = icase;
        if (p->pos < p->n && p->pat[p->pos] == '?') {
            uint32_t d = p->pos + 1 < p->n ? p->pat[p->pos + 1] : 0;
            if (d == ':') p->pos += 2;
            else if (d == '=' || d == '!') look = d == '!', p->pos += 2;
            else if (d == 'i' && p->pos + 2 < p->n && p->pat[p->pos + 2] == ':')
                inner_icase = 1, p->pos += 3;
            else return perr(p, "unsupported group");
        }
        int inner = parse_alt(p, inner_icase);
        if (inner < 0) return -1;
        if (p->pos >= p->n || p->pat[p->pos] != ')') return perr(p, "missing )");
        p->pos++;
        p->depth--;
        if (look < 0) return inner;
        int id = new_node(p, N_LOOK);
        if (id < 0) return -1;
        p->nodes[id].child = inner;
        p->nodes[id].neg = look;
        return id;
    }
    if (c == '[') {
        p->pos++;
        return parse_class(p);
    }
    if (c == '$') {
        p->pos++;
        return new_node(p, N_END);
    }
    if (c == '.' || c == '^' || c == '*' || c == '+' || c == '?' || c == '{' || c == ')' ||
        c == ']')
        return perr(p, "unsupported or misplaced operator");
    p->pos++;
    uint32_t cp = c;
    if (c == '\\') {
        unsigned cats = 0;
        int digit, r = escape(p, &cp, &cats, &digit);
        if (r < 0) return -1;
        if (r == 1) {
            int k = add_class(p);
            if (k < 0) return -1;
            p->re->cls[k].cats = (uint16_t)cats;
            if (digit && add_range(p, '0', '9') < 0) return -1;
            int id = new_node(p, N_CLASS);
            if (id >= 0) p->nodes[id].c = (uint32_t)k;
            return id;
        }
    }
    int id = new_node(p, N_CHAR);
    if (id < 0) return -1;
    int letter = (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
    p->nodes[id].icase = icase && letter;
    p->nodes[id].c = p->nodes[id].icase ? (cp | 0x20) : cp;
    return id;
}

static int parse_number(parser *p, int *v) {
    int got = 0;
    *v = 0;
    while (p->pos < p->n && p->pat[p->pos] >= '0' && p->pat[p->pos] <= '9') {
        *v = *v * 10 + (int)(p->pat[p->pos++] - '0');
        if (*v > MAX_REPEAT) return perr(p, "repetition count too large");
        got = 1;
    }
    return got ? 0 : perr(p, "bad repetition");
}

static int parse_repeat(parser *p, int icase) {
    int atom = parse_atom(p, icase);
    if (atom < 0) return -1;
    if (p->pos >= p->n) return atom;
    uint32_t c = p->pat[p->pos];
    int min, max;
    if (c == '?') min = 0, max = 1;
    else if (c == '*') min = 0, max = -1;
    else if (c == '+') min = 1, max = -1;
    else if (c == '{') {
        p->pos++;
        if (parse_number(p, &min) < 0) return -1;
        max = min;
        if (p->pos < p->n && p->pat[p->pos] == ',') {
            p->pos++;
            if (p->pos < p->n && p->pat[p->pos] == '}') max = -1;
            else if (parse_number(p, &max) < 0) return -1;
        }
        if (p->pos >= p->n || p->pat[p->pos] != '}') return perr(p, "missing }");
        if (max >= 0 && max < min) return perr(p, "bad repetition");
    } else {
        return atom;
    }
    p->pos++;
    if (p->pos < p->n && (p->pat[p->pos] == '?' || p->pat[p->pos] == '+' ||
                          p->pat[p->pos] == '*' || p->pat[p->pos] == '{'))
        return perr(p, "lazy, possessive or stacked quantifiers are not supported");
    int id = new_node(p, N_REP);
    if (id < 0) return -1;
    p->nodes[id].child = atom;
    p->nodes[id].min = min;
    p->nodes[id].max = max;
    return id;
}

static int parse_cat(parser *p, int icase) {
    int id = new_node(p, N_CAT), last = -1;
    if (id < 0) return -1;
    while (p->pos < p->n && p->pat[p->pos] != '|' && p->pat[p->pos] != ')') {
        int k = parse_repeat(p, icase);
        if (k < 0) return -1;
        if (last < 0) p->nodes[id].first = k;
        else p->nodes[last].next = k;
        last = k;
    }
    return id;
}

static int parse_alt(parser *p, int icase) {
    int first = parse_cat(p, icase);
    if (first < 0 || p->pos >= p->n || p->pat[p->pos] != '|') return first;
    int id = new_node(p, N_ALT), last = first;
    if (id < 0) return -1;
    p->nodes[id].first = first;
    while (p->pos < p->n && p->pat[p->pos] == '|') {
        p->pos++;
        int k = parse_cat(p, icase);
        if (k < 0) return -1;
        p->nodes[last].next = k;
        last = k;
    }
    return id;
}

/* ------------------------------------------------------------------------------------------ */
/* Compiler: syntax tree → instructions                                                        */

static int emit(parser *p, int op) {
    wlm_regex *re = p->re;
    if (re->n_prog == MAX_PROG) return perr(p, "program too long");
    inst *i = &re->prog[re->n_prog];
    memset(i, 0, sizeof *i);
    i->op = (uint8_t)op;
    return re->n_prog++;
}

static int gen(parser *p, int id) {
    const node *x = &p->nodes[id];
    inst *prog;
    int k;
    switch (x->type) {
    case N_CHAR:
        if ((k = emit(p, x->icase ? I_CHARI : I_CHAR)) < 0) return -1;
        p->re->prog[k].c = x->c;
        return 0;
    case N_CLASS:
        if ((k = emit(p, I_CLASS)) < 0) return -1;
        p->re->prog[k].c = x->c;
        return 0;
    case N_END: return emit(p, I_END) < 0 ? -1 : 0;
    case N_CAT:
        for (int c = x->first; c >= 0; c = p->nodes[c].next)
            if (gen(p, c) < 0) return -1;
        return 0;
    case N_ALT: {
        int jumps[256], n_jumps = 0;
        for (int c = x->first; c >= 0; c = p->nodes[c].next) {
            if (p->nodes[c].next < 0) {
                if (gen(p, c) < 0) return -1;
                break;
            }
            int s = emit(p, I_SPLIT);
            if (s < 0) return -1;
            p->re->prog[s].x = s + 1;
            if (gen(p, c) < 0) return -1;
            if (n_jumps == 256) return perr(p, "too many alternatives");
            if ((jumps[n_jumps++] = emit(p, I_JMP)) < 0) return -1;
            p->re->prog[s].y = p->re->n_prog;
        }
        for (int j = 0; j < n_jumps; j++) p->re->prog[jumps[j]].x = p->re->n_prog;
        return 0;
    }
    case N_REP: {
        for (int r = 0; r < x->min; r++)
            if (gen(p, x->child) < 0) return -1;
        if (x->max < 0) {
            int s = emit(p, I_SPLIT);
            if (s < 0) return -1;
            p->re->prog[s].x = s + 1;
            if (gen(p, x->child) < 0) return -1;
            if ((k = emit(p, I_JMP)) < 0) return -1;
            prog = p->re->prog;
            prog[k].x = s;
            prog[s].y = p->re->n_prog;
            return 0;
        }
        int splits[MAX_REPEAT], n_splits = 0;
        for (int r = x->min; r < x->max; r++) {
            int s = emit(p, I_SPLIT);
            if (s < 0) return -1;
            p->re->prog[s].x = s + 1;
            splits[n_splits++] = s;
            if (gen(p, x->child) < 0) return -1;
        }
        for (int j = 0; j < n_splits; j++) p->re->prog[splits[j]].y = p->re->n_prog;
        return 0;
    }
    case N_LOOK: {
        int l = emit(p, I_LOOK);
        if (l < 0) return -1;
        p->re->prog[l].neg = (uint8_t)x->neg;
        p->re->prog[l].x = l + 1;
        if (gen(p, x->child) < 0 || emit(p, I_MATCH) < 0) return -1;
        p->re->prog[l].y = p->re->n_prog;
        return 0;
    }
    }
    return perr(p, "internal: unknown node");
}

wlm_regex *wlm_regex_compile(const char *pattern, char *err, size_t errlen) {
    parser p;
    memset(&p, 0, sizeof p);
    p.err = err, p.errlen = errlen;
    size_t len = strlen(pattern);
    p.pat = malloc(sizeof(uint32_t) * (len + 1));
    p.nodes = malloc(sizeof(node) * MAX_NODES);
    p.re = calloc(1, sizeof(wlm_regex));
    if (p.re) p.re->prog = malloc(sizeof(inst) * MAX_PROG);
    if (!p.pat || !p.nodes || !p.re || !p.re->prog) {
        wlm_errorf(err, errlen, WLM_ERR_NOMEM, "out of memory compiling a regex");
        goto fail;
    }
    for (size_t i = 0; i < len;) {
        size_t used;
        p.pat[p.n++] = wlm_utf8_decode((const unsigned char *)pattern + i, len - i, &used);
        i += used;
    }
    int root = parse_alt(&p, 0);
    if (root >= 0 && p.pos != p.n) root = perr(&p, "unbalanced )");
    if (root < 0 || gen(&p, root) < 0 || emit(&p, I_MATCH) < 0) {
        if (p.rc == WLM_ERR_NOMEM) wlm_errorf(err, errlen, WLM_ERR_NOMEM, "out of memory compiling a regex");
        goto fail;
    }
    inst *shrunk = realloc(p.re->prog, sizeof(inst) * (size_t)p.re->n_prog);
    if (shrunk) p.re->prog = shrunk;
    free(p.pat);
    free(p.nodes);
    return p.re;
fail:
    free(p.pat);
    free(p.nodes);
    wlm_regex_free(p.re);
    return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Matching                                                                                    */

void wlm_regex_work_free(wlm_regex_work *w) {
    if (!w) return;
    free(w->stack);
    memset(w, 0, sizeof *w);
}

static int class_has(const wlm_regex *re, const rclass *k, uint32_t cp) {
    int in = 0;
    if (k->cats & 0xFF) in = (k->cats >> wlm_ucd_class(cp)) & 1;
    if (!in && (k->cats & (CAT_SPACE | CAT_NOTSPACE))) {
        int sp = wlm_ucd_is_space(cp);
        in = ((k->cats & CAT_SPACE) && sp) || ((k->cats & CAT_NOTSPACE) && !sp);
    }
    for (uint32_t r = 0; !in && r < k->n; r++)
        in = cp >= re->ranges[k->first + r][0] && cp <= re->ranges[k->first + r][1];
    return in != k->neg;
}

static int push(wlm_regex_work *w, uint32_t pc, size_t pos) {
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 256;
        uint32_t *s = realloc(w->stack, sizeof(uint32_t) * 2 * cap);
        if (!s) return -1;
        w->stack = s;
        w->cap = cap;
    }
    w->stack[2 * w->n] = pc;
    w->stack[2 * w->n + 1] = (uint32_t)pos;
    w->n++;
    return 0;
}

/* -1 no match, -2 step budget exhausted, -3 out of memory; else the end of the match. */
static int64_t run(const wlm_regex *re, const uint32_t *cps, size_t n, uint32_t pc0, size_t pos0,
                   wlm_regex_work *w) {
    const size_t base = w->n;
    if (push(w, pc0, pos0) < 0) return -3;
    while (w->n > base) {
        w->n--;
        uint32_t pc = w->stack[2 * w->n];
        size_t pos = w->stack[2 * w->n + 1];
        for (;;) {
            if (w->steps == 0) {
                w->n = base;
                return -2;
            }
            w->steps--;
            const inst *I = &re->prog[pc];
            switch (I->op) {
            case I_CHAR:
                if (pos < n && cps[pos] == I->c) {
                    pc++, pos++;
                    continue;
                }
                break;
            case I_CHARI:
                if (pos < n && (cps[pos] == I->c || cps[pos] == (I->c & ~0x20u))) {
                    pc++, pos++;
                    continue;
                }
                break;
            case I_CLASS:
                if (pos < n && class_has(re, &re->cls[I->c], cps[pos])) {
                    pc++, pos++;
                    continue;
                }
                break;
            case I_SPLIT:
                if (push(w, (uint32_t)I->y, pos) < 0) {
                    w->n = base;
                    return -3;
                }
                pc = (uint32_t)I->x;
                continue;
            case I_JMP:
                pc = (uint32_t)I->x;
                continue;
            case I_MATCH:
                w->n = base;
                return (int64_t)pos;
            case I_END:
                if (pos == n) {
                    pc++;
                    continue;
                }
                break;
            case I_LOOK: {
                int64_t r = run(re, cps, n, (uint32_t)I->x, pos, w);
                if (r < -1) {
                    w->n = base;
                    return r;
                }
                if ((r >= 0) != I->neg) {
                    pc = (uint32_t)I->y;
                    continue;
                }
                break;
            }
            }
            break; /* this thread failed: take the next pending alternative */
        }
    }
    return -1;
}

int64_t wlm_regex_match(const wlm_regex *re, const uint32_t *cps, size_t n, size_t pos,
                        wlm_regex_work *w) {
    return run(re, cps, n, 0, pos, w);
}

/* ------------------------------------------------------------------------------------------ */
/* The pre-tokenizers (llama.cpp's llm_tokenizer_bpe, by tokenizer.ggml.pre)                  */

/* GPT-2's regex, as in its encoder.py (llama.cpp drops the final |\s+, unreachable anyway). */
#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
/* Llama 3 / tiktoken cl100k: tokenizer.json has (?i:'s|'t|...); llama.cpp spells the case
 * folding out as [sS] (std::regex has no (?i:)); the same for Qwen 2 with single digits. */
#define RE_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define RE_LLAMA3 RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+" \
    "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN2 RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+" \
    "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* Qwen 3.5 / 3.6: the Qwen 2 expression with combining marks (\p{M}) counted with letters — a
 * letter run takes them, the punctuation run does not — so "e" + U+0301 or a Devanagari vowel
 * sign stays inside its word instead of starting a punctuation piece. */
#define RE_QWEN35 RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}" \
    "\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_BLOOM " ?[^(\\s|.,!?…。，、।۔،)]+"
/* GPT-4o / Llama 4 / Tekken: letter runs split at case changes through lookaheads. */
#define RE_UPPER_LOWER "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+"
#define RE_UPPER "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*"

typedef struct pretok_def {
    const char *names;      /* space-separated tokenizer.ggml.pre values */
    int ignore_merges, add_bos;
    const char *re[6];
} pretok_def;

static const pretok_def PRETOKS[] = {
    {"default", 0, 0,
     {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"}},
    {"llama3 llama-v3 llama-bpe falcon3 falcon-h1 pixtral midm-2.0 lfm2", 1, 1, {RE_LLAMA3}},
    {"dbrx smaug-bpe chatglm-bpe glm4", 0, 0, {RE_LLAMA3}},
    /* deepseek-llm: literal Unicode in the regexes, UTF-8 in this file; the code points that
     * Unicode normalization would change (Greek Extended, Ohm, Kelvin) as \u escapes */
    {"deepseek-llm", 0, 0,
     {"[\r\n]",
      "\\s?"
      "[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ"
      "-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-\u1F7Dᾀ-ᾴᾶ-ᾼ\u1FBEῂ-ῄῆ-"
      "ῌῐ-\u1FD3ῖ-\u1FDBῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤ\u2126ℨ\u212A-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ"
      "-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
      "\\s?[!-/:-~！-／：-～‘-‟　-。]+",
      "\\s+$", "[一-龥ࠀ-一가-퟿]+", "\\p{N}+"}},
    {"deepseek-coder", 0, 0,
     {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", "[一-龥ࠀ-一가-퟿]+", "\\p{N}"}},
    {"falcon", 0, 0, {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, "[0-9][0-9][0-9]"}},
    {"starcoder refact command-r smollm codeshell exaone minerva-7b", 0, 0, {"\\p{N}", RE_GPT2}},
    {"gpt-2 phi-2 jina-es jina-de gigachat jina-v2-es jina-v2-de a.x-4.0 mellum modern-bert "
     "exaone4 jina-v1-en jina-v2-code roberta-bpe mpt olmo jais trillion granite-docling",
     0, 0, {RE_GPT2}},
    {"qwen2 deepseek-r1-qwen kormo f2llmv2 megrez stablelm2 hunyuan grok-2 solar-open", 0, 0,
     {RE_QWEN2}},
    {"qwen35", 0, 0, {RE_QWEN35}},
    {"poro-chat bloom gpt3-finnish", 0, 0, {RE_BLOOM}},
    {"viking", 0, 0, {RE_BLOOM, "\\p{N}"}},
    {"gpt-4o llama4", 0, 0,
     {RE_UPPER_LOWER RE_CONTRACTIONS "?|" RE_UPPER RE_CONTRACTIONS "?|\\p{N}{1,3}| ?[^\\s\\p{L}"
      "\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    /* Gemma 4 (tokenizer.ggml.model "gemma4" forces it): runs of newlines and runs of anything
     * else; llama.cpp turns its add_bos on whatever the file says */
    {"gemma4", 0, 1, {"[^\\n]+|[\\n]+"}},
    {"tekken", 1, 1,
     {RE_UPPER_LOWER "|" RE_UPPER "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!"
      "\\S)|\\s+"}},
};

const char *const wlm_pretok_names[] = {
    "default", "llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0",
    "lfm2", "dbrx", "smaug-bpe", "chatglm-bpe", "glm4", "deepseek-llm", "deepseek-coder",
    "falcon", "starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b",
    "gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0",
    "mellum", "modern-bert", "exaone4", "jina-v1-en", "jina-v2-code", "roberta-bpe", "mpt",
    "olmo", "jais", "trillion", "granite-docling", "qwen2", "deepseek-r1-qwen", "kormo",
    "f2llmv2", "megrez", "stablelm2", "hunyuan", "grok-2", "solar-open", "qwen35", "poro-chat",
    "bloom", "gpt3-finnish", "viking", "gpt-4o", "llama4", "gemma4", "tekken", NULL};

static int names_contain(const char *names, const char *s, size_t n) {
    for (const char *p = names; *p;) {
        size_t w = strcspn(p, " ");
        if (w == n && memcmp(p, s, n) == 0) return 1;
        p += w;
        while (*p == ' ') p++;
    }
    return 0;
}

void wlm_pretok_free(wlm_pretok *p) {
    if (!p) return;
    for (int i = 0; i < p->n; i++) wlm_regex_free(p->re[i]);
    memset(p, 0, sizeof *p);
}

int wlm_pretok_init(wlm_pretok *p, const char *pre, size_t pre_len, char *err, size_t errlen) {
    memset(p, 0, sizeof *p);
    if (!pre || pre_len == 0) pre = "default", pre_len = 7; /* llama.cpp's fallback */
    const pretok_def *d = NULL;
    for (size_t i = 0; i < sizeof PRETOKS / sizeof PRETOKS[0] && !d; i++)
        if (names_contain(PRETOKS[i].names, pre, pre_len)) d = &PRETOKS[i];
    if (!d) {
        char name[48];
        size_t k = 0;
        for (size_t i = 0; i < pre_len && k + 4 < sizeof name; i++)
            name[k++] = pre[i] >= 0x20 && pre[i] < 0x7f ? pre[i] : '?';
        if (k + 4 >= sizeof name) memcpy(name + k, "...", 3), k += 3;
        name[k] = '\0';
        return wlm_errorf(err, errlen, WLM_ERR_UNSUPPORTED,
                          "tokenizer.ggml.pre \"%s\" is not a known pre-tokenizer", name);
    }
    p->ignore_merges = d->ignore_merges;
    p->add_bos = d->add_bos;
    for (int i = 0; i < 6 && d->re[i]; i++) {
        p->re[i] = wlm_regex_compile(d->re[i], err, errlen);
        if (!p->re[i]) {
            wlm_pretok_free(p);
            return WLM_ERR_NOMEM; /* the table's regexes compile (test_pretokenize checks) */
        }
        p->n = i + 1;
    }
    return WLM_OK;
}

static int push_len(uint32_t **v, size_t *n, size_t *cap, size_t len) {
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 64;
        uint32_t *x = realloc(*v, sizeof(uint32_t) * c);
        if (!x) return WLM_ERR_NOMEM;
        *v = x;
        *cap = c;
    }
    (*v)[(*n)++] = (uint32_t)len;
    return WLM_OK;
}

int wlm_pretok_split(const wlm_pretok *p, const uint32_t *cps, size_t n, uint32_t **lens,
                     size_t *n_lens, size_t *cap_lens, wlm_regex_work *w) {
    uint32_t *next = NULL;
    size_t n_next = 0, cap_next = 0;
    int rc = WLM_OK;
    *n_lens = 0;
    if (n == 0) return WLM_OK;
    if (n > UINT32_MAX / 2) return WLM_ERR_INVALID_ARG;
    if ((rc = push_len(lens, n_lens, cap_lens, n)) != WLM_OK) return rc;
    for (int r = 0; r < p->n && rc == WLM_OK; r++) {
        /* The budget: ample for text (a few dozen steps per code point), small enough that a
         * quadratic backtracking case (e.g. "\s+$" over a long run of spaces) ends quickly. */
        w->steps = ((uint64_t)1 << 24) + (uint64_t)2048 * n;
        n_next = 0;
        size_t off = 0;
        for (size_t k = 0; k < *n_lens && rc == WLM_OK; k++) {
            const uint32_t *s = cps + off;
            size_t len = (*lens)[k], pos = 0;
            while (pos < len && rc == WLM_OK) {
                size_t st = pos;
                int64_t e = -1;
                for (; st < len; st++) {
                    e = wlm_regex_match(p->re[r], s, len, st, w);
                    if (e < -1 || e > (int64_t)st) break;
                }
                if (e < -1) {
                    rc = e == -2 ? WLM_ERR_UNSUPPORTED : WLM_ERR_NOMEM;
                    break;
                }
                if (st >= len) break;
                if (st > pos) rc = push_len(&next, &n_next, &cap_next, st - pos);
                if (rc == WLM_OK) rc = push_len(&next, &n_next, &cap_next, (size_t)e - st);
                pos = (size_t)e;
            }
            if (rc == WLM_OK && pos < len) rc = push_len(&next, &n_next, &cap_next, len - pos);
            off += len;
        }
        if (rc != WLM_OK) break;
        uint32_t *t = *lens;
        size_t tc = *cap_lens;
        *lens = next, *n_lens = n_next, *cap_lens = cap_next;
        next = t, cap_next = tc;
    }
    free(next);
    return rc;
}
