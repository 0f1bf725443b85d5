/*
 * grammar_trie.c — the vocabulary as byte strings and its token trie (a prefix tree stored in
 * preorder, each node's subtree a contiguous range), built once from the sorted token pieces;
 * the mask in grammar.c walks it against the parser state (llguidance's and XGrammar's idea:
 * a prefix rejected once rejects every token below it). It does not know grammars.
 */
#include <stdlib.h>
#include <string.h>

#include "wasmlm.h"
#include "sampling/grammar_form.h"
#include "tokenizer/tokenizer.h"

void wlm_gram_vocab_free(wlm_gram_vocab *v) {
    if (!v) return;
    free(v->blob);
    free(v->off);
    free(v->len);
    free(v->byte);
    free(v->depth);
    free(v->end);
    free(v->tok_first);
    free(v->tok_ids);
    free(v);
}

size_t wlm_gram_vocab_bytes(const wlm_gram_vocab *v) { return v ? v->bytes : 0; }

#define VOCAB_MAX_TOKEN_LEN 4096 /* longer pieces are never allowed (no real vocabulary has) */

int wlm_gram_vocab_new(int32_t n, const char *const *piece, const size_t *len,
                       wlm_gram_vocab **out) {
    if (!out) return WLM_ERR_INVALID_ARG;
    *out = NULL;
    if (n < 1 || !piece || !len) return WLM_ERR_INVALID_ARG;
    wlm_gram_vocab *v = calloc(1, sizeof *v);
    if (!v) return WLM_ERR_NOMEM;
    v->n_tokens = n;
    size_t total = 0;
    int32_t n_ref = 0;
    for (int32_t t = 0; t < n; t++) {
        size_t l = piece[t] ? len[t] : 0;
        if (l > VOCAB_MAX_TOKEN_LEN) l = 0;
        total += l;
        n_ref += l > 0;
    }
    if (total > UINT32_MAX / 2) {
        free(v);
        return WLM_ERR_INVALID_ARG;
    }
    v->blob = malloc(total ? total : 1);
    v->off = malloc(sizeof *v->off * (size_t)n);
    v->len = malloc(sizeof *v->len * (size_t)n);
    wlm_piece_ref *refs = malloc(sizeof *refs * (size_t)(n_ref ? n_ref : 1));
    /* nodes: at most one per byte, plus the root */
    v->byte = malloc(total + 1);
    v->depth = malloc(sizeof *v->depth * (total + 1));
    v->end = malloc(sizeof *v->end * (total + 1));
    v->tok_first = calloc(total + 2, sizeof *v->tok_first);
    v->tok_ids = malloc(sizeof *v->tok_ids * (size_t)(n_ref ? n_ref : 1));
    uint32_t *path = malloc(sizeof *path * (VOCAB_MAX_TOKEN_LEN + 1));
    uint32_t *count = calloc(total + 1, sizeof *count);
    if (!v->blob || !v->off || !v->len || !refs || !v->byte || !v->depth || !v->end ||
        !v->tok_first || !v->tok_ids || !path || !count) {
        free(refs), free(path), free(count);
        wlm_gram_vocab_free(v);
        return WLM_ERR_NOMEM;
    }
    size_t at = 0;
    int32_t k = 0;
    for (int32_t t = 0; t < n; t++) {
        size_t l = piece[t] ? len[t] : 0;
        if (l > VOCAB_MAX_TOKEN_LEN) l = 0;
        memcpy(v->blob + at, piece[t], l);
        v->off[t] = (uint32_t)at;
        v->len[t] = (uint32_t)l;
        if (l) refs[k++] = (wlm_piece_ref){v->blob + at, (uint32_t)l, t};
        if (l > v->max_len) v->max_len = (uint32_t)l;
        at += l;
    }
    qsort(refs, (size_t)n_ref, sizeof *refs, wlm_piece_ref_cmp);
    /* preorder construction from the sorted strings: new nodes for the part after the longest
     * common prefix with the previous string */
    uint32_t nn = 1;
    v->byte[0] = 0;
    v->depth[0] = 0;
    path[0] = 0;
    uint32_t *node_of = (uint32_t *)v->tok_ids; /* reuse: node of refs[i], as uint32 */
    for (int32_t i = 0; i < n_ref; i++) {
        uint32_t lcp = 0;
        if (i > 0) {
            const wlm_piece_ref *a = &refs[i - 1], *b = &refs[i];
            uint32_t m = a->len < b->len ? a->len : b->len;
            while (lcp < m && a->str[lcp] == b->str[lcp]) lcp++;
        }
        for (uint32_t d = lcp; d < refs[i].len; d++) {
            v->byte[nn] = (uint8_t)refs[i].str[d];
            v->depth[nn] = (uint16_t)(d + 1);
            path[d + 1] = nn;
            nn++;
        }
        node_of[i] = path[refs[i].len];
        count[node_of[i]]++;
    }
    v->n_nodes = nn;
    /* token ranges per node: refs are already in node (preorder) order */
    uint32_t run = 0;
    for (uint32_t i = 0; i < nn; i++) {
        v->tok_first[i] = run;
        run += count[i];
    }
    v->tok_first[nn] = run;
    for (int32_t i = 0; i < n_ref; i++) v->tok_ids[i] = refs[i].id;
    /* end[i]: the first node after i whose depth is <= depth[i] */
    uint32_t sp = 0;
    for (uint32_t i = 0; i < nn; i++) {
        while (sp > 0 && v->depth[path[sp - 1]] >= v->depth[i]) v->end[path[--sp]] = i;
        path[sp++] = i;
    }
    while (sp > 0) v->end[path[--sp]] = nn;
    free(refs), free(path), free(count);
    v->bytes = sizeof *v + total + (size_t)n * 8 + (size_t)nn * 11 + (size_t)n_ref * 4;
    *out = v;
    return WLM_OK;
}
