/*
 * grammar_vocab.c — the glue between grammars and a model: the vocabulary as byte strings
 * (each token's decoded text, byte tokens as their byte) and its token trie, built once per
 * context on the first grammar and kept with it; and a matcher for a new generation (which
 * tokens end it, whether the first token loses its leading space after BOS). It does not
 * parse or match: grammar_parse.c and grammar.c do.
 */
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "sampling/grammar.h"

/* The end-of-generation tokens a complete parse admits: the tokenizer's set (wlm_token_is_eog:
 * EOS, EOT, <|im_end|>, ...) plus EOS and BOS, at which generation also stops (run.c's rule).
 * At most 17 ids. */
#define MAX_EOG 17
static int32_t eog_tokens(const wlm_model *m, int32_t eog[MAX_EOG]) {
    int32_t n = 0;
    if (!m->has_tokenizer) {
        eog[n++] = 2;
        eog[n++] = 1;
        return n;
    }
    for (int32_t k = 0; k < m->tok.n_eog && n < MAX_EOG - 2; k++) eog[n++] = m->tok.eog[k];
    const int32_t more[2] = {m->tok.eos_id, m->tok.bos_id}; /* llama2.c vocabularies list none */
    for (int i = 0; i < 2; i++) {
        int have = more[i] < 0;
        for (int32_t k = 0; k < n; k++) have |= eog[k] == more[i];
        if (!have) eog[n++] = more[i];
    }
    return n;
}

/* Does the tokenizer drop a token's leading space after BOS? (asked of the first token that
 * has one) */
static int strips_after_bos(const wlm_model *m) {
    const int32_t bos = m->tok.bos_id;
    if (bos < 0) return 0;
    for (int32_t t = 0; t < m->hp.vocab_size; t++) {
        size_t a = 0, b = 0;
        const char *p = wlm_token_piece(m, -1, t, &a);
        if (!p || a == 0 || p[0] != ' ') continue;
        wlm_token_piece(m, bos, t, &b);
        return b < a;
    }
    return 0;
}

static int build_vocab(const wlm_model *m, wlm_gram_vocab **out) {
    const int32_t n = m->hp.vocab_size;
    const char **piece = malloc(sizeof *piece * (size_t)n);
    size_t *len = malloc(sizeof *len * (size_t)n);
    if (!piece || !len) {
        free(piece), free(len);
        return WLM_ERR_NOMEM;
    }
    for (int32_t t = 0; t < n; t++) {
        len[t] = 0;
        piece[t] = wlm_token_piece(m, -1, t, &len[t]);
        if (!piece[t]) len[t] = 0;
    }
    int rc = wlm_gram_vocab_new(n, piece, len, out);
    free(piece), free(len);
    return rc;
}

int wlm_grammar_setup(wlm_context *c, const char *text, size_t len, int32_t prev,
                      const char *who, wlm_gram **gram, wlm_gram_matcher **matcher) {
    *gram = NULL;
    *matcher = NULL;
    const wlm_model *m = c->model;
    char msg[WLM_ERRMSG_SIZE];
    if (!m->has_tokenizer)
        return wlm_set_error(c->errmsg, WLM_ERR_TOKENIZER,
                             "%sa grammar needs the model's tokenizer (the tokens' text)", who);
    int rc = wlm_gram_parse(text, len, gram, msg, sizeof msg);
    if (rc != WLM_OK) return wlm_set_error(c->errmsg, rc, "%s%s", who, msg);
    if (!c->gram_vocab) {
        rc = build_vocab(m, &c->gram_vocab);
        if (rc != WLM_OK) {
            wlm_gram_free(*gram);
            *gram = NULL;
            return wlm_set_error(c->errmsg, rc, "%sout of memory for the grammar's token trie",
                                 who);
        }
    }
    int32_t eog[MAX_EOG];
    rc = wlm_gram_matcher_new(*gram, c->gram_vocab, eog, eog_tokens(m, eog), matcher);
    if (rc != WLM_OK) {
        wlm_gram_free(*gram);
        *gram = NULL;
        return wlm_set_error(c->errmsg, rc,
                             rc == WLM_ERR_NOMEM ? "%sout of memory for the grammar"
                                                 : "%sthe grammar is too ambiguous (more than "
                                                   "8192 parse stacks at once)",
                             who);
    }
    if (prev >= 0 && prev == m->tok.bos_id && strips_after_bos(m))
        wlm_gram_matcher_strip_space(*matcher, 1);
    return WLM_OK;
}

int wlm_grammar_is_eog(const wlm_model *m, int32_t t) {
    int32_t eog[MAX_EOG];
    const int32_t n = eog_tokens(m, eog);
    for (int32_t k = 0; k < n; k++)
        if (eog[k] == t) return 1;
    return 0;
}
