/*
 * grammar_lazy.c — lazy grammars: a sampler's grammar that stays dormant (sampling is free)
 * until a trigger token is generated or a trigger word appears in the generated text, and
 * from then on constrains as any grammar (wasmlm.h, "Lazy grammars", has the rules). This is
 * what lets a model write free text or start a tool call whose syntax a grammar then holds.
 * It does not match grammars (grammar.c) or sample (sampler.c); it decides when the grammar
 * wakes and advances it over the text that woke it.
 *
 * The idea is llama.cpp's (src/llama-grammar.cpp: "lazy" grammars with trigger tokens and
 * trigger words/patterns, the text from the trigger on fed to the grammar); the code is ours,
 * with two differences: words only (no regular expressions), and a trigger whose text does not
 * follow the grammar leaves it dormant instead of raising an error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "runtime/errors.h"
#include "sampling/sampler.h"

/* A message into err (when given), returning WLM_ERR_INVALID_ARG: runtime/errors.h's wlm_errorf. */
#define invalid(err, errlen, ...) wlm_errorf((err), (errlen), WLM_ERR_INVALID_ARG, __VA_ARGS__)

int wlm_grammar_lazy_check(const wlm_gen_params *p, int32_t vocab_size, char *err,
                           size_t errlen) {
    if (p->grammar_lazy != 0 && p->grammar_lazy != 1)
        return invalid(err, errlen, "grammar_lazy must be 0 or 1 (got %d)",
                             (int)p->grammar_lazy);
    if (p->n_grammar_triggers < 0 || p->n_grammar_triggers > WLM_MAX_GRAMMAR_TRIGGERS)
        return invalid(err, errlen,
                             "n_grammar_triggers must be in 0..%d (got %d)",
                             WLM_MAX_GRAMMAR_TRIGGERS, (int)p->n_grammar_triggers);
    if (!p->grammar_lazy) return WLM_OK;
    if (!p->grammar)
        return invalid(err, errlen, "grammar_lazy needs a grammar");
    if (p->n_grammar_triggers == 0)
        return invalid(err, errlen,
                             "grammar_lazy needs at least one trigger (a token or a word)");
    for (int32_t i = 0; i < p->n_grammar_triggers; i++) {
        const wlm_grammar_trigger *t = &p->grammar_triggers[i];
        if (t->token >= 0) {
            if (t->token >= vocab_size)
                return invalid(err, errlen,
                                     "grammar trigger %d: token %d is outside the vocabulary "
                                     "0..%d",
                                     (int)i, (int)t->token, (int)vocab_size - 1);
            continue;
        }
        if (t->token != -1)
            return invalid(err, errlen,
                                 "grammar trigger %d: token must be an id or -1 (a word), got %d",
                                 (int)i, (int)t->token);
        const char *nul = memchr(t->word, '\0', WLM_MAX_STOP_LEN);
        if (!nul || nul == t->word)
            return invalid(err, errlen,
                                 "grammar trigger %d: the word is empty or not NUL-terminated "
                                 "within %d bytes",
                                 (int)i, WLM_MAX_STOP_LEN);
    }
    return WLM_OK;
}

int wlm_sampler_set_lazy(wlm_sampler *s, const wlm_gen_params *p) {
    if (!p->grammar_lazy || !s->matcher) return WLM_OK;
    s->n_triggers = p->n_grammar_triggers;
    memcpy(s->triggers, p->grammar_triggers, sizeof s->triggers);
    s->max_word = 0;
    for (int32_t i = 0; i < s->n_triggers; i++) {
        s->triggers[i].word[WLM_MAX_STOP_LEN - 1] = '\0';
        if (s->triggers[i].token < 0) {
            size_t n = strlen(s->triggers[i].word);
            if (n > s->max_word) s->max_word = n;
        }
    }
    s->recent_len = 0;
    s->dormant = 1;
    return WLM_OK;
}

int wlm_sampler_grammar_active(const wlm_sampler *s) { return s->matcher && !s->dormant; }

/* Wakes the grammar over `text` (n bytes): 1 when it follows the grammar (now active), 0 when
 * not (still dormant, the parse unchanged), or a negative status. */
static int wake(wlm_sampler *s, const char *text, size_t n) {
    int rc = n ? wlm_gram_accept_bytes(s->matcher, text, n) : WLM_OK;
    if (rc == WLM_ERR_INVALID_ARG) return 0;
    if (rc != WLM_OK) return rc;
    s->dormant = 0;
    s->recent_len = 0;
    return 1;
}

int wlm_sampler_accept(wlm_sampler *s, int32_t t, const char *piece, size_t len) {
    if (!s->matcher) return WLM_OK;
    if (!s->dormant) return wlm_gram_accept_token(s->matcher, t);
    if (!piece) len = 0;
    for (int32_t i = 0; i < s->n_triggers; i++) {
        if (s->triggers[i].token != t) continue;
        int rc = wake(s, piece, len);
        if (rc != 0) return rc < 0 ? rc : WLM_OK;
        s->recent_len = 0; /* refused: the search goes on after this token */
        return WLM_OK;
    }
    if (s->max_word == 0) return WLM_OK;
    /* recent = the kept tail + this piece; search it for the earliest trigger word */
    size_t need = s->recent_len + len;
    if (need > s->recent_cap) {
        size_t cap = s->recent_cap ? s->recent_cap : 128;
        while (cap < need) cap *= 2;
        char *p = realloc(s->recent, cap);
        if (!p) return WLM_ERR_NOMEM;
        s->recent = p;
        s->recent_cap = cap;
    }
    if (len) memcpy(s->recent + s->recent_len, piece, len);
    s->recent_len = need;
    size_t best = need;
    for (int32_t i = 0; i < s->n_triggers; i++) {
        if (s->triggers[i].token >= 0) continue;
        const char *w = s->triggers[i].word;
        const size_t wl = strlen(w);
        for (size_t at = 0; at + wl <= need && at < best; at++) {
            if (memcmp(s->recent + at, w, wl) == 0) {
                best = at;
                break;
            }
        }
    }
    if (best < need) {
        int rc = wake(s, s->recent + best, need - best);
        if (rc < 0) return rc;
        if (rc == 1) return WLM_OK;
        s->recent_len = 0; /* refused: forget it, search what comes next */
        return WLM_OK;
    }
    /* keep the bytes that may still begin a word: fewer than the longest word */
    const size_t keep = need < s->max_word - 1 ? need : s->max_word - 1;
    memmove(s->recent, s->recent + need - keep, keep);
    s->recent_len = keep;
    return WLM_OK;
}
