/*
 * grammar.c — the GBNF matcher for constrained sampling: a parse state as pushdown stacks
 * advanced code point by code point (partial UTF-8 carried between tokens), whether a token may
 * come next, and the full token mask (a walk of the vocabulary's prefix tree). It does not
 * parse GBNF (grammar_parse.c), build the trie (grammar_trie.c) or sample: sampler.c asks it
 * whether a token is allowed and for the full mask when needed.
 *
 * Ideas taken (the code is our own):
 * - llama.cpp (src/llama-grammar.cpp): a parse state as a set of stacks of element positions,
 *   each expanded until its top is a character class ("advance stack"); partial UTF-8 state
 *   carried across tokens and matched against class ranges; the sampler checks the sampled
 *   token first and builds the full mask only on rejection. (Its element encoding and the
 *   rewriting of groups and repetitions: grammar_parse.c.)
 * - Shared, hash-consed stacks: each stack is a node (top position, parent) interned in an
 *   arena, so stacks share their tails, identical stacks are one integer (deduplication is a
 *   mark per node), and the nodes made while probing tokens are rolled back in LIFO order.
 * - llguidance / XGrammar: walk a token trie against the parser state instead of each token
 *   separately (a prefix rejected once rejects every token below it; shared prefixes are
 *   advanced once), and cache masks by parser state (XGrammar's adaptive mask cache, here
 *   keyed by the exact interned stack set, which repeats inside strings and numbers).
 * Not taken: XGrammar's precompiled context-independent token sets, llguidance's lexer /
 * Earley split.
 */
#include <stdlib.h>
#include <string.h>

#include "wasmlm.h"
#include "sampling/grammar_form.h"

/* ------------------------------------------------------------------------------------------ */
/* Matcher: interned stacks                                                                    */

/* A stack node: the element position on top, and the rest of the stack (-1: empty). The top
 * of a settled stack is a character class; -1 as a whole stack means "accepted". */
typedef struct snode {
    uint32_t pos;
    int32_t parent;
    int32_t hnext; /* next node in the same hash bucket (older) */
} snode;

/* One level of the trie walk: the stack set in setbuf[start, start + len), the UTF-8 state. */
typedef struct level {
    uint32_t start, len;
    uint32_t utf_val;
    int32_t utf_rem;     /* continuation bytes still expected */
    int32_t utf_n;       /* length of the sequence in progress (for its smallest code point) */
} level;

#define MASK_CACHE 16

typedef struct mask_entry {
    uint64_t hash;
    int32_t *key;        /* (key_len) utf state then the sorted set */
    uint32_t key_len;
    uint8_t *bits;       /* (n_tokens / 8 + 1) */
    int32_t n_allowed;
} mask_entry;

struct wlm_gram_matcher {
    const wlm_gram *g;
    const wlm_gram_vocab *v;
    int32_t *eog;
    int32_t n_eog;
    /* arena */
    snode *node;
    int32_t n_node, cap_node;
    int32_t *head;       /* (hmask + 1) bucket heads */
    uint32_t hmask;
    uint32_t *mark;      /* (cap_node) epoch of the last set that took the node */
    uint32_t epoch;
    uint32_t mark_empty; /* epoch in which the empty stack was taken */
    /* the current state */
    int32_t *cur;
    uint32_t n_cur, cap_cur;
    uint32_t utf_val;
    int32_t utf_rem, utf_n;
    int strip_space;
    int ended;           /* an end-of-generation token was accepted */
    /* scratch */
    int32_t *setbuf;
    uint32_t n_set, cap_set;
    int32_t *work;
    uint32_t cap_work;
    level *lv;           /* (max token length + 2) */
    int status;          /* sticky error of a set operation */
    mask_entry cache[MASK_CACHE];
    uint32_t cache_next;
};

static uint32_t node_hash(uint32_t pos, int32_t parent) {
    uint32_t h = pos * 0x9E3779B1u ^ ((uint32_t)parent + 0x7F4A7C15u) * 0x85EBCA77u;
    return h ^ (h >> 15);
}

static int arena_grow(wlm_gram_matcher *m) {
    if (m->cap_node >= WLM_GRAM_MAX_NODES) return WLM_ERR_UNSUPPORTED;
    int32_t cap = m->cap_node ? m->cap_node * 2 : 1024;
    if (cap > WLM_GRAM_MAX_NODES) cap = WLM_GRAM_MAX_NODES;
    snode *n = realloc(m->node, sizeof *n * (size_t)cap);
    if (!n) return WLM_ERR_NOMEM;
    m->node = n;
    uint32_t *mk = realloc(m->mark, sizeof *mk * (size_t)cap);
    if (!mk) return WLM_ERR_NOMEM;
    memset(mk + m->cap_node, 0, sizeof *mk * (size_t)(cap - m->cap_node));
    m->mark = mk;
    m->cap_node = cap;
    /* buckets: about one per node; rehash in id order so every chain stays newest-first */
    uint32_t nb = 1;
    while (nb < (uint32_t)cap) nb *= 2;
    if (nb - 1 != m->hmask || !m->head) {
        int32_t *h = malloc(sizeof *h * nb);
        if (!h) return WLM_ERR_NOMEM;
        for (uint32_t b = 0; b < nb; b++) h[b] = -1;
        free(m->head);
        m->head = h;
        m->hmask = nb - 1;
        for (int32_t i = 0; i < m->n_node; i++) {
            uint32_t b = node_hash(m->node[i].pos, m->node[i].parent) & m->hmask;
            m->node[i].hnext = h[b];
            h[b] = i;
        }
    }
    return WLM_OK;
}

/* The interned node (pos, parent); a negative status when the arena is full. */
static int32_t cons(wlm_gram_matcher *m, uint32_t pos, int32_t parent) {
    if (m->head) {
        uint32_t b = node_hash(pos, parent) & m->hmask;
        for (int32_t i = m->head[b]; i >= 0; i = m->node[i].hnext)
            if (m->node[i].pos == pos && m->node[i].parent == parent) return i;
    }
    if (m->n_node == m->cap_node) {
        int rc = arena_grow(m);
        if (rc != WLM_OK) return rc;
    }
    uint32_t b = node_hash(pos, parent) & m->hmask;
    int32_t id = m->n_node++;
    m->node[id] = (snode){pos, parent, m->head[b]};
    m->head[b] = id;
    m->mark[id] = 0;
    return id;
}

/* Forgets every node made after the arena had `keep` (they are the newest of their buckets). */
static void arena_truncate(wlm_gram_matcher *m, int32_t keep) {
    for (int32_t i = m->n_node - 1; i >= keep; i--) {
        uint32_t b = node_hash(m->node[i].pos, m->node[i].parent) & m->hmask;
        m->head[b] = m->node[i].hnext;
    }
    if (keep < m->n_node) m->n_node = keep;
}

/* The stack "continue at element p, then the rest": the rest itself when p ends an
 * alternative. */
static int32_t after(wlm_gram_matcher *m, uint32_t p, int32_t rest) {
    return is_rule_end(m->g->el[p].type) ? rest : cons(m, p, rest);
}

static int set_push(wlm_gram_matcher *m, int32_t x) {
    if (m->n_set - 0 >= m->cap_set) {
        uint32_t cap = m->cap_set ? m->cap_set * 2 : 256;
        int32_t *s = realloc(m->setbuf, sizeof *s * cap);
        if (!s) return WLM_ERR_NOMEM;
        m->setbuf = s;
        m->cap_set = cap;
    }
    m->setbuf[m->n_set++] = x;
    return WLM_OK;
}

/* Expands stack x (and every stack pushed while expanding) until each top is a character
 * class or the stack is empty, appending the settled stacks not yet in the set being built
 * (epoch m->epoch) to setbuf. Iterative: the grammar has no left recursion, and the marks stop
 * any repeated expansion. */
static int expand(wlm_gram_matcher *m, int32_t x, uint32_t set_start) {
    const wlm_gram *g = m->g;
    uint32_t nw = 0;
    if (x < -1) return x; /* an error from cons */
    if (m->cap_work == 0) {
        m->work = malloc(sizeof *m->work * 64);
        if (!m->work) return WLM_ERR_NOMEM;
        m->cap_work = 64;
    }
    m->work[nw++] = x;
    while (nw > 0) {
        int32_t s = m->work[--nw];
        if (s == -1) {
            if (m->mark_empty != m->epoch) {
                m->mark_empty = m->epoch;
                int rc = set_push(m, -1);
                if (rc != WLM_OK) return rc;
            }
            continue;
        }
        if (m->mark[s] == m->epoch) continue;
        m->mark[s] = m->epoch;
        const uint32_t pos = m->node[s].pos;
        const gel e = g->el[pos];
        if (e.type != GE_REF) {
            if (m->n_set - set_start >= WLM_GRAM_MAX_STACKS) return WLM_ERR_UNSUPPORTED;
            int rc = set_push(m, s);
            if (rc != WLM_OK) return rc;
            continue;
        }
        const int32_t parent = m->node[s].parent;
        const int32_t rest = after(m, pos + 1, parent);
        if (rest < -1) return rest;
        for (uint32_t a = g->alt_first[e.value]; a < g->alt_first[e.value + 1]; a++) {
            const int32_t y = after(m, g->alt_pos[a], rest);
            if (y < -1) return y;
            if (nw == m->cap_work) {
                if (m->cap_work >= (1u << 24)) return WLM_ERR_UNSUPPORTED;
                int32_t *w = realloc(m->work, sizeof *w * m->cap_work * 2);
                if (!w) return WLM_ERR_NOMEM;
                m->work = w;
                m->cap_work *= 2;
            }
            m->work[nw++] = y;
        }
    }
    return WLM_OK;
}

static void new_epoch(wlm_gram_matcher *m) {
    if (++m->epoch == 0) { /* wrapped: clear the marks */
        memset(m->mark, 0, sizeof *m->mark * (size_t)m->cap_node);
        m->mark_empty = 0;
        m->epoch = 1;
    }
}

/* Does the class starting at element p contain code point c? *next: the element after it. */
static int class_match(const gel *el, uint32_t p, uint32_t c, uint32_t *next) {
    const uint32_t t = el[p].type;
    if (t == GE_ANY) {
        *next = p + 1;
        return c <= 0x10FFFF;
    }
    int in = 0;
    uint32_t q = p;
    do {
        uint32_t lo = el[q].value, hi = lo;
        if (el[q + 1].type == GE_CHAR_UPPER) {
            hi = el[q + 1].value;
            q++;
        }
        if (c >= lo && c <= hi) in = 1;
        q++;
    } while (el[q].type == GE_CHAR_ALT);
    *next = q;
    if (t == GE_CHAR_NOT) return !in && c <= 0x10FFFF;
    return in;
}

/* Can the class at p match some code point in [lo, hi]? (a partial UTF-8 sequence) */
static int class_match_range_1(const gel *el, uint32_t p, uint32_t lo, uint32_t hi);
static int class_match_range(const gel *el, uint32_t p, uint32_t lo, uint32_t hi) {
    /* surrogates are never characters */
    if (lo < 0xD800 && class_match_range_1(el, p, lo, hi < 0xD7FF ? hi : 0xD7FF)) return 1;
    return hi > 0xDFFF && class_match_range_1(el, p, lo > 0xE000 ? lo : 0xE000, hi);
}
static int class_match_range_1(const gel *el, uint32_t p, uint32_t lo, uint32_t hi) {
    const uint32_t t = el[p].type;
    if (hi > 0x10FFFF) hi = 0x10FFFF;
    if (lo > hi) return 0;
    if (t == GE_ANY) return 1;
    if (t == GE_CHAR) {
        uint32_t q = p;
        do {
            uint32_t a = el[q].value, b = a;
            if (el[q + 1].type == GE_CHAR_UPPER) b = el[++q].value;
            if (a <= hi && b >= lo) return 1;
            q++;
        } while (el[q].type == GE_CHAR_ALT);
        return 0;
    }
    /* negated: is some x in [lo, hi] outside every range? step x past the range holding it */
    uint32_t x = lo;
    for (;;) {
        int moved = 0;
        uint32_t q = p;
        do {
            uint32_t a = el[q].value, b = a;
            if (el[q + 1].type == GE_CHAR_UPPER) b = el[++q].value;
            if (x >= a && x <= b) {
                if (b >= hi) return 0;
                x = b + 1;
                moved = 1;
            }
            q++;
        } while (el[q].type == GE_CHAR_ALT);
        if (!moved) return 1;
    }
}

/* setbuf gets, from `n` stacks at setbuf[from..), the set after code point c; returns the
 * new set's start (its length in *len) or a negative status. */
static int64_t step_cp(wlm_gram_matcher *m, uint32_t from, uint32_t n, uint32_t c, uint32_t *len) {
    const uint32_t start = m->n_set;
    new_epoch(m);
    const gel *el = m->g->el;
    for (uint32_t k = 0; k < n; k++) {
        const int32_t s = m->setbuf[from + k];
        if (s < 0) continue;
        uint32_t next;
        if (!class_match(el, m->node[s].pos, c, &next)) continue;
        int rc = expand(m, after(m, next, m->node[s].parent), start);
        if (rc != WLM_OK) return rc;
    }
    *len = m->n_set - start;
    return start;
}

/* The stacks of setbuf[from, from + n) whose class can take a code point in [lo, hi]. */
static int64_t step_partial(wlm_gram_matcher *m, uint32_t from, uint32_t n, uint32_t lo,
                            uint32_t hi, uint32_t *len) {
    const uint32_t start = m->n_set;
    for (uint32_t k = 0; k < n; k++) {
        const int32_t s = m->setbuf[from + k];
        if (s < 0 || !class_match_range(m->g->el, m->node[s].pos, lo, hi)) continue;
        int rc = set_push(m, s);
        if (rc != WLM_OK) return rc;
    }
    *len = m->n_set - start;
    return start;
}

/* One byte from level `a` into level `b`: 1 when the parse survives, 0 when not, < 0 error.
 * UTF-8 is decoded strictly (RFC 3629): no overlong forms, surrogates or code points above
 * U+10FFFF, so no byte sequence can spell a character the grammar refuses; a partial sequence
 * survives when some valid completion of it is taken by some stack. */
static int step_byte(wlm_gram_matcher *m, const level *a, level *b, uint8_t byte) {
    uint32_t val;
    int32_t rem, nb;
    if (a->utf_rem == 0) {
        if (byte < 0x80) val = byte, rem = 0;
        else if ((byte >> 5) == 6) val = byte & 0x1Fu, rem = 1;
        else if ((byte >> 4) == 14) val = byte & 0x0Fu, rem = 2;
        else if ((byte >> 3) == 30) val = byte & 0x07u, rem = 3;
        else return 0; /* a continuation byte or 0xF8.. where a character must start */
        nb = rem + 1;
    } else {
        if ((byte & 0xC0) != 0x80) return 0;
        val = (a->utf_val << 6) | (byte & 0x3Fu);
        rem = a->utf_rem - 1;
        nb = a->utf_n;
    }
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    uint32_t len = 0;
    int64_t start;
    if (rem == 0) {
        if (val < min_cp[nb] || val > 0x10FFFF || (val >= 0xD800 && val <= 0xDFFF)) return 0;
        start = step_cp(m, a->start, a->len, val, &len);
    } else {
        uint32_t lo = val << (6 * rem), hi = lo | ((1u << (6 * rem)) - 1);
        if (lo < min_cp[nb]) lo = min_cp[nb];
        if (hi > 0x10FFFF) hi = 0x10FFFF;
        if (lo >= 0xD800 && hi <= 0xDFFF) return 0;
        if (lo > hi) return 0;
        start = step_partial(m, a->start, a->len, lo, hi, &len);
    }
    if (start < 0) return (int)start;
    b->start = (uint32_t)start;
    b->len = len;
    b->utf_val = val;
    b->utf_rem = rem;
    b->utf_n = nb;
    return len > 0;
}

/* The bytes token t contributes at this step (a leading space dropped after BOS). */
static const char *token_bytes(const wlm_gram_matcher *m, int32_t t, uint32_t *len) {
    const char *p = m->v->blob + m->v->off[t];
    uint32_t n = m->v->len[t];
    if (m->strip_space && n > 0 && p[0] == ' ') p++, n--;
    *len = n;
    return p;
}

static int is_eog(const wlm_gram_matcher *m, int32_t t) {
    for (int32_t k = 0; k < m->n_eog; k++)
        if (m->eog[k] == t) return 1;
    return 0;
}

static int set_has_empty(const int32_t *s, uint32_t n) {
    for (uint32_t k = 0; k < n; k++)
        if (s[k] == -1) return 1;
    return 0;
}

int wlm_gram_is_complete(const wlm_gram_matcher *m) {
    return m && !m->ended && m->utf_rem == 0 && set_has_empty(m->cur, m->n_cur);
}

int wlm_gram_can_continue(const wlm_gram_matcher *m) {
    if (!m || m->ended) return 0;
    for (uint32_t k = 0; k < m->n_cur; k++)
        if (m->cur[k] >= 0) return 1;
    return 0;
}

uint32_t wlm_gram_matcher_n_stacks(const wlm_gram_matcher *m) { return m ? m->n_cur : 0; }

void wlm_gram_matcher_strip_space(wlm_gram_matcher *m, int on) {
    if (m) m->strip_space = on != 0;
}

/* Runs `n` bytes from the current state: the final level in *out (stacks in setbuf). Returns
 * 1 (survives), 0 (rejected) or a negative status. The caller resets n_set / the arena. */
static int run_bytes(wlm_gram_matcher *m, const char *bytes, uint32_t n, level *out) {
    m->n_set = 0;
    for (uint32_t k = 0; k < m->n_cur; k++) {
        int rc = set_push(m, m->cur[k]);
        if (rc != WLM_OK) return rc;
    }
    level a = {0, m->n_cur, m->utf_val, m->utf_rem, m->utf_n}, b;
    for (uint32_t k = 0; k < n; k++) {
        int rc = step_byte(m, &a, &b, (uint8_t)bytes[k]);
        if (rc <= 0) return rc;
        a = b;
    }
    *out = a;
    return 1;
}

int wlm_gram_allows(wlm_gram_matcher *m, int32_t t) {
    if (!m || t < 0 || t >= m->v->n_tokens || m->ended) return 0;
    if (is_eog(m, t)) return wlm_gram_is_complete(m);
    uint32_t n;
    const char *p = token_bytes(m, t, &n);
    if (n == 0) return 0;
    const int32_t keep = m->n_node;
    level out;
    int rc = run_bytes(m, p, n, &out);
    arena_truncate(m, keep);
    return rc;
}

static int commit(wlm_gram_matcher *m, const level *lv);

int wlm_gram_accept_bytes(wlm_gram_matcher *m, const char *bytes, size_t n) {
    if (!m || (!bytes && n)) return WLM_ERR_INVALID_ARG;
    if (m->ended || n > UINT32_MAX) return WLM_ERR_INVALID_ARG;
    const int32_t keep = m->n_node;
    level out;
    int rc = run_bytes(m, bytes, (uint32_t)n, &out);
    if (rc <= 0) {
        arena_truncate(m, keep);
        return rc == 0 ? WLM_ERR_INVALID_ARG : rc;
    }
    return commit(m, &out);
}

int wlm_gram_accept_token(wlm_gram_matcher *m, int32_t t) {
    if (!m || t < 0 || t >= m->v->n_tokens || m->ended) return WLM_ERR_INVALID_ARG;
    if (is_eog(m, t)) {
        if (!wlm_gram_is_complete(m)) return WLM_ERR_INVALID_ARG;
        m->ended = 1;
        return WLM_OK;
    }
    uint32_t n;
    const char *p = token_bytes(m, t, &n);
    if (n == 0) return WLM_ERR_INVALID_ARG;
    int rc = wlm_gram_accept_bytes(m, p, n);
    if (rc == WLM_OK) m->strip_space = 0;
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* Matcher: lifetime, compaction, clone                                                        */

static void cache_clear(wlm_gram_matcher *m) {
    for (int k = 0; k < MASK_CACHE; k++) {
        free(m->cache[k].key);
        free(m->cache[k].bits);
        memset(&m->cache[k], 0, sizeof m->cache[k]);
    }
    m->cache_next = 0;
}

void wlm_gram_matcher_free(wlm_gram_matcher *m) {
    if (!m) return;
    cache_clear(m);
    free(m->eog);
    free(m->node);
    free(m->head);
    free(m->mark);
    free(m->cur);
    free(m->setbuf);
    free(m->work);
    free(m->lv);
    free(m);
}

static int matcher_alloc(const wlm_gram *g, const wlm_gram_vocab *v, const int32_t *eog,
                         int32_t n_eog, wlm_gram_matcher **out) {
    wlm_gram_matcher *m = calloc(1, sizeof *m);
    if (!m) return WLM_ERR_NOMEM;
    m->g = g;
    m->v = v;
    m->eog = malloc(sizeof *m->eog * (size_t)(n_eog > 0 ? n_eog : 1));
    m->lv = malloc(sizeof *m->lv * ((size_t)v->max_len + 2));
    if (!m->eog || !m->lv || arena_grow(m) != WLM_OK) {
        wlm_gram_matcher_free(m);
        return WLM_ERR_NOMEM;
    }
    for (int32_t k = 0; k < n_eog; k++)
        if (eog[k] >= 0 && eog[k] < v->n_tokens) m->eog[m->n_eog++] = eog[k];
    m->epoch = 1;
    *out = m;
    return WLM_OK;
}

/* Copies stack s of `src` into m's arena (memo: old id → new id, -2 unknown). */
static int32_t copy_stack(wlm_gram_matcher *m, const wlm_gram_matcher *src, int32_t s,
                          int32_t *memo, int32_t *path) {
    int32_t n = 0, x = s;
    while (x >= 0 && memo[x] == -2) {
        path[n++] = x;
        x = src->node[x].parent;
    }
    int32_t below = x < 0 ? -1 : memo[x];
    while (n > 0) {
        const int32_t y = path[--n];
        below = cons(m, src->node[y].pos, below);
        if (below < -1) return below;
        memo[y] = below;
    }
    return below;
}

/* Sets m's current state to the stacks of setbuf[lv) (from src's arena, which may be m). */
static int adopt(wlm_gram_matcher *m, const wlm_gram_matcher *src, const int32_t *set,
                 uint32_t n, uint32_t utf_val, int32_t utf_rem) {
    int32_t *memo = NULL, *path = NULL;
    if (src != m) {
        memo = malloc(sizeof *memo * (size_t)(src->n_node ? src->n_node : 1));
        path = malloc(sizeof *path * (size_t)(src->n_node ? src->n_node : 1));
        if (!memo || !path) {
            free(memo), free(path);
            return WLM_ERR_NOMEM;
        }
        for (int32_t k = 0; k < src->n_node; k++) memo[k] = -2;
    }
    if (n > m->cap_cur) {
        int32_t *c = malloc(sizeof *c * n);
        if (!c) {
            free(memo), free(path);
            return WLM_ERR_NOMEM;
        }
        free(m->cur);
        m->cur = c;
        m->cap_cur = n;
    }
    int rc = WLM_OK;
    for (uint32_t k = 0; k < n && rc == WLM_OK; k++) {
        int32_t s = set[k];
        if (src != m && s >= 0) s = copy_stack(m, src, s, memo, path);
        if (s < -1) rc = s;
        m->cur[k] = s;
    }
    free(memo), free(path);
    if (rc != WLM_OK) return rc;
    m->n_cur = n;
    m->utf_val = utf_val;
    m->utf_rem = utf_rem;
    return WLM_OK;
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

/* Makes the level reached by run_bytes the current state; compacts the arena when the dead
 * nodes dominate. */
static int commit(wlm_gram_matcher *m, const level *lv) {
    int rc = adopt(m, m, m->setbuf + lv->start, lv->len, lv->utf_val, lv->utf_rem);
    m->utf_n = lv->utf_n;
    if (rc != WLM_OK) return rc;
    qsort(m->cur, m->n_cur, sizeof *m->cur, cmp_i32); /* canonical: the mask cache's key */
    if (m->n_node > 4096 && m->n_node > 64 * (int32_t)(m->n_cur + 1)) {
        wlm_gram_matcher *c;
        rc = wlm_gram_matcher_clone(m, &c);
        if (rc != WLM_OK) return rc;
        /* swap: m takes the compact copy (with an empty mask cache, whose keys would name old
         * node ids); the old arena and cache go with c */
        wlm_gram_matcher tmp = *m;
        *m = *c;
        *c = tmp;
        wlm_gram_matcher_free(c);
    }
    return WLM_OK;
}

int wlm_gram_matcher_clone(const wlm_gram_matcher *m, wlm_gram_matcher **out) {
    if (!m || !out) return WLM_ERR_INVALID_ARG;
    *out = NULL;
    wlm_gram_matcher *c;
    int rc = matcher_alloc(m->g, m->v, m->eog, m->n_eog, &c);
    if (rc != WLM_OK) return rc;
    rc = adopt(c, m, m->cur, m->n_cur, m->utf_val, m->utf_rem);
    if (rc == WLM_OK) qsort(c->cur, c->n_cur, sizeof *c->cur, cmp_i32);
    if (rc != WLM_OK) {
        wlm_gram_matcher_free(c);
        return rc;
    }
    c->strip_space = m->strip_space;
    c->utf_n = m->utf_n;
    c->ended = m->ended;
    *out = c;
    return WLM_OK;
}

int wlm_gram_matcher_new(const wlm_gram *g, const wlm_gram_vocab *v, const int32_t *eog,
                         int32_t n_eog, wlm_gram_matcher **out) {
    if (!out) return WLM_ERR_INVALID_ARG;
    *out = NULL;
    if (!g || !v || (n_eog > 0 && !eog) || n_eog < 0) return WLM_ERR_INVALID_ARG;
    wlm_gram_matcher *m;
    int rc = matcher_alloc(g, v, eog, n_eog, &m);
    if (rc != WLM_OK) return rc;
    /* the start: every alternative of root on an empty stack */
    m->n_set = 0;
    new_epoch(m);
    for (uint32_t a = g->alt_first[g->root]; a < g->alt_first[g->root + 1] && rc == WLM_OK; a++)
        rc = expand(m, after(m, g->alt_pos[a], -1), 0);
    if (rc == WLM_OK) {
        level lv = {0, m->n_set, 0, 0, 0};
        rc = commit(m, &lv);
    }
    if (rc != WLM_OK) {
        wlm_gram_matcher_free(m);
        return rc;
    }
    *out = m;
    return WLM_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* The mask                                                                                    */

static uint64_t key_hash(const int32_t *k, uint32_t n) {
    uint64_t h = 1469598103934665603ull;
    for (uint32_t i = 0; i < n; i++) h = (h ^ (uint32_t)k[i]) * 1099511628211ull;
    return h;
}

/* The walk of the token trie: a subtree is skipped as soon as its prefix cannot continue the
 * parse; every token ending at a surviving node is allowed. */
static int32_t trie_mask(wlm_gram_matcher *m, uint8_t *allowed) {
    const wlm_gram_vocab *v = m->v;
    level *lv = m->lv;
    int32_t count = 0;
    m->n_set = 0;
    for (uint32_t k = 0; k < m->n_cur; k++) {
        int rc = set_push(m, m->cur[k]);
        if (rc != WLM_OK) return rc;
    }
    lv[0] = (level){0, m->n_cur, m->utf_val, m->utf_rem, m->utf_n};
    const int32_t keep = m->n_node;
    uint32_t i = 1;
    while (i < v->n_nodes) {
        const uint32_t d = v->depth[i];
        m->n_set = lv[d - 1].start + lv[d - 1].len; /* drop the sets of deeper levels */
        int rc = step_byte(m, &lv[d - 1], &lv[d], v->byte[i]);
        if (rc < 0) {
            arena_truncate(m, keep);
            return rc;
        }
        if (rc == 0) {
            i = v->end[i];
            continue;
        }
        for (uint32_t k = v->tok_first[i]; k < v->tok_first[i + 1]; k++) {
            const int32_t t = v->tok_ids[k];
            if (m->n_eog && is_eog(m, t)) continue; /* allowed by completeness alone */
            allowed[t] = 1;
            count++;
        }
        i++;
        /* the arena: nodes made under a finished subtree are garbage; keep it small */
        if (m->n_node > keep + (1 << 16) && (i >= v->n_nodes || v->depth[i] == 1))
            arena_truncate(m, keep);
    }
    arena_truncate(m, keep);
    return count;
}

int32_t wlm_gram_mask(wlm_gram_matcher *m, uint8_t *allowed) {
    if (!m || !allowed) return WLM_ERR_INVALID_ARG;
    const int32_t n = m->v->n_tokens;
    memset(allowed, 0, (size_t)n);
    if (m->ended) return 0;
    int32_t count = 0;
    if (m->strip_space) { /* one step after BOS: token by token */
        for (int32_t t = 0; t < n; t++) {
            int a = is_eog(m, t) ? 0 : wlm_gram_allows(m, t);
            if (a < 0) return a;
            allowed[t] = (uint8_t)a;
            count += a;
        }
    } else {
        /* the cache: key = UTF-8 state + the (sorted) stack ids */
        const uint32_t klen = m->n_cur + 3;
        int32_t *key = malloc(sizeof *key * klen);
        if (!key) return WLM_ERR_NOMEM;
        key[0] = (int32_t)m->utf_val;
        key[1] = m->utf_rem;
        key[2] = m->utf_n;
        memcpy(key + 3, m->cur, sizeof *key * m->n_cur);
        const uint64_t h = key_hash(key, klen);
        mask_entry *hit = NULL;
        for (int k = 0; k < MASK_CACHE; k++) {
            mask_entry *e = &m->cache[k];
            if (e->bits && e->hash == h && e->key_len == klen &&
                memcmp(e->key, key, sizeof *key * klen) == 0)
                hit = e;
        }
        if (hit) {
            free(key);
            for (int32_t t = 0; t < n; t++) allowed[t] = (hit->bits[t >> 3] >> (t & 7)) & 1;
            count = hit->n_allowed;
        } else {
            count = trie_mask(m, allowed);
            if (count < 0) {
                free(key);
                return count;
            }
            mask_entry *e = &m->cache[m->cache_next];
            m->cache_next = (m->cache_next + 1) % MASK_CACHE;
            free(e->key);
            if (!e->bits) e->bits = malloc((size_t)n / 8 + 1);
            e->key = key;
            e->key_len = klen;
            e->hash = h;
            e->n_allowed = count;
            if (e->bits) {
                memset(e->bits, 0, (size_t)n / 8 + 1);
                for (int32_t t = 0; t < n; t++)
                    if (allowed[t]) e->bits[t >> 3] |= (uint8_t)(1u << (t & 7));
            } else {
                e->key = NULL;
                free(key);
            }
        }
    }
    if (wlm_gram_is_complete(m))
        for (int32_t k = 0; k < m->n_eog; k++)
            if (!allowed[m->eog[k]]) {
                allowed[m->eog[k]] = 1;
                count++;
            }
    return count;
}
