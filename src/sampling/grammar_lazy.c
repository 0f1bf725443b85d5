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
 * follow the grammar leaves it dormant instead of raising an error. Where llama.cpp anchors its
 * whole-output trigger patterns after the reasoning (common/chat.cpp: "[\s\S]*?(</think>\s*)"
 * before the call when the prompt forces thinking open, an optional leading
 * "<think>[\s\S]*?</think>" otherwise), this file arms the trigger search with markers: the
 * triggers count only after an arming marker (and before a disarming one), the text read in order.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "runtime/errors.h"
#include "sampling/sampler.h"

/* A message into err (when given), returning WLM_ERR_INVALID_ARG: runtime/errors.h's wlm_errorf. */
#define invalid(err, errlen, ...) wlm_errorf((err), (errlen), WLM_ERR_INVALID_ARG, __VA_ARGS__)

/* Checks one list of triggers, arms or disarms (`what` names it in messages). */
static int check_list(const wlm_grammar_trigger *list, int32_t n, int32_t max, const char *what,
                      const char *count, int32_t vocab_size, char *err, size_t errlen) {
    if (n < 0 || n > max)
        return invalid(err, errlen, "%s must be in 0..%d (got %d)", count, (int)max, (int)n);
    for (int32_t i = 0; i < n; i++) {
        const wlm_grammar_trigger *t = &list[i];
        if (t->token >= 0) {
            if (t->token >= vocab_size)
                return invalid(err, errlen,
                                     "%s %d: token %d is outside the vocabulary 0..%d", what,
                                     (int)i, (int)t->token, (int)vocab_size - 1);
            continue;
        }
        if (t->token != -1)
            return invalid(err, errlen, "%s %d: token must be an id or -1 (a word), got %d",
                                 what, (int)i, (int)t->token);
        const char *nul = memchr(t->word, '\0', WLM_MAX_STOP_LEN);
        if (!nul || nul == t->word)
            return invalid(err, errlen,
                                 "%s %d: the word is empty or not NUL-terminated within %d bytes",
                                 what, (int)i, WLM_MAX_STOP_LEN);
    }
    return WLM_OK;
}

int wlm_grammar_lazy_check(const wlm_gen_params *p, int32_t vocab_size, char *err,
                           size_t errlen) {
    if (p->grammar_lazy != 0 && p->grammar_lazy != 1)
        return invalid(err, errlen, "grammar_lazy must be 0 or 1 (got %d)",
                             (int)p->grammar_lazy);
    if (p->n_grammar_triggers < 0 || p->n_grammar_triggers > WLM_MAX_GRAMMAR_TRIGGERS)
        return invalid(err, errlen,
                             "n_grammar_triggers must be in 0..%d (got %d)",
                             WLM_MAX_GRAMMAR_TRIGGERS, (int)p->n_grammar_triggers);
    if (p->n_grammar_arms < 0 || p->n_grammar_arms > WLM_MAX_GRAMMAR_ARMS)
        return invalid(err, errlen, "n_grammar_arms must be in 0..%d (got %d)",
                             WLM_MAX_GRAMMAR_ARMS, (int)p->n_grammar_arms);
    if (p->n_grammar_disarms < 0 || p->n_grammar_disarms > WLM_MAX_GRAMMAR_ARMS)
        return invalid(err, errlen, "n_grammar_disarms must be in 0..%d (got %d)",
                             WLM_MAX_GRAMMAR_ARMS, (int)p->n_grammar_disarms);
    if (p->grammar_start_armed < 0 || p->grammar_start_armed > 2)
        return invalid(err, errlen, "grammar_start_armed must be 0, 1 or 2 (got %d)",
                             (int)p->grammar_start_armed);
    if (!p->grammar_lazy) {
        if (p->n_grammar_arms || p->n_grammar_disarms || p->grammar_start_armed)
            return invalid(err, errlen,
                                 "grammar_arms, grammar_disarms and grammar_start_armed need "
                                 "grammar_lazy 1");
        return WLM_OK;
    }
    if (!p->grammar)
        return invalid(err, errlen, "grammar_lazy needs a grammar");
    if (p->n_grammar_triggers == 0)
        return invalid(err, errlen,
                             "grammar_lazy needs at least one trigger (a token or a word)");
    if (p->n_grammar_disarms > 0 && p->n_grammar_arms == 0)
        return invalid(err, errlen, "grammar_disarms need at least one of grammar_arms");
    int rc = check_list(p->grammar_triggers, p->n_grammar_triggers, WLM_MAX_GRAMMAR_TRIGGERS,
                        "grammar trigger", "n_grammar_triggers", vocab_size, err, errlen);
    if (rc == WLM_OK)
        rc = check_list(p->grammar_arms, p->n_grammar_arms, WLM_MAX_GRAMMAR_ARMS, "grammar arm",
                        "n_grammar_arms", vocab_size, err, errlen);
    if (rc == WLM_OK)
        rc = check_list(p->grammar_disarms, p->n_grammar_disarms, WLM_MAX_GRAMMAR_ARMS,
                        "grammar disarm", "n_grammar_disarms", vocab_size, err, errlen);
    return rc;
}

/* Copies n entries of src into dst (their words NUL-terminated), returning the longest word. */
static size_t copy_list(wlm_grammar_trigger *dst, const wlm_grammar_trigger *src, int32_t n) {
    size_t max = 0;
    for (int32_t i = 0; i < n; i++) {
        dst[i] = src[i];
        dst[i].word[WLM_MAX_STOP_LEN - 1] = '\0';
        if (dst[i].token < 0) {
            size_t len = strlen(dst[i].word);
            if (len > max) max = len;
        }
    }
    return max;
}

int wlm_sampler_set_lazy(wlm_sampler *s, const wlm_gen_params *p) {
    if (!p->grammar_lazy || !s->matcher) return WLM_OK;
    s->n_triggers = p->n_grammar_triggers;
    s->max_word = copy_list(s->triggers, p->grammar_triggers, s->n_triggers);
    s->n_arms = p->n_grammar_arms;
    s->max_arm = copy_list(s->arms, p->grammar_arms, s->n_arms);
    s->n_disarms = p->n_grammar_disarms;
    s->max_disarm = copy_list(s->disarms, p->grammar_disarms, s->n_disarms);
    s->armed = s->n_arms == 0 || p->grammar_start_armed;
    s->lead_disarm = p->grammar_start_armed == 2;
    s->seen_text = 0;
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

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
static int all_ws(const char *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!is_ws(p[i])) return 0;
    return 1;
}

/* Whether a disarm counts here (grammar_start_armed 2: only as the generated text's first
 * non-whitespace, `before` the n bytes in front of it since the search's start). */
static int disarm_counts(const wlm_sampler *s, const char *before, size_t n) {
    return !s->lead_disarm || (!s->seen_text && all_ws(before, n));
}

static int has_token(const wlm_grammar_trigger *list, int32_t n, int32_t t) {
    for (int32_t i = 0; i < n; i++)
        if (list[i].token == t) return 1;
    return 0;
}

/* The earliest start at or after `from` of a word of `list` in buf[0..n): its offset (n when
 * none), its length in *wl. */
static size_t earliest(const wlm_grammar_trigger *list, int32_t count, const char *buf,
                       size_t from, size_t n, size_t *wl) {
    size_t best = n;
    for (int32_t i = 0; i < count; i++) {
        if (list[i].token >= 0) continue;
        const char *w = list[i].word;
        const size_t len = strlen(w);
        for (size_t at = from; at + len <= n && at < best; at++) {
            if (memcmp(buf + at, w, len) == 0) {
                best = at;
                *wl = len;
                break;
            }
        }
    }
    return best;
}

int wlm_sampler_accept(wlm_sampler *s, int32_t t, const char *piece, size_t len) {
    if (!s->matcher) return WLM_OK;
    if (!s->dormant) return wlm_gram_accept_token(s->matcher, t);
    if (!piece) len = 0;
    /* tokens first: an arming / disarming token, then (armed) a trigger token */
    if (!s->armed && has_token(s->arms, s->n_arms, t)) {
        s->armed = 1;
        s->recent_len = 0;
        return WLM_OK;
    }
    if (s->armed && has_token(s->disarms, s->n_disarms, t) &&
        disarm_counts(s, s->recent, s->recent_len)) {
        s->armed = 0;
        s->seen_text = 1;
        s->recent_len = 0;
        return WLM_OK;
    }
    if (s->armed && has_token(s->triggers, s->n_triggers, t)) {
        int rc = wake(s, piece, len);
        if (rc != 0) return rc < 0 ? rc : WLM_OK;
        s->recent_len = 0; /* refused: the search goes on after this token */
        return WLM_OK;
    }
    if (s->max_word == 0 && s->max_arm == 0 && s->max_disarm == 0) return WLM_OK;
    /* recent = the kept tail + this piece, read in order from `from` */
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
    size_t from = 0;
    for (;;) {
        size_t wl = 0, dl = 0;
        if (!s->armed) {
            const size_t at = earliest(s->arms, s->n_arms, s->recent, from, need, &wl);
            if (at == need) break;
            s->armed = 1; /* a trigger counts from the end of the arming word on */
            from = at + wl;
            continue;
        }
        const size_t at = earliest(s->triggers, s->n_triggers, s->recent, from, need, &wl);
        size_t dat = earliest(s->disarms, s->n_disarms, s->recent, from, need, &dl);
        if (dat < need && !disarm_counts(s, s->recent + from, dat - from)) dat = need;
        if (at < need && at <= dat) {
            int rc = wake(s, s->recent + at, need - at);
            if (rc < 0) return rc;
            if (rc == 1) return WLM_OK;
            from = at + wl; /* refused: the search goes on after the word */
            continue;
        }
        if (dat == need) break;
        s->armed = 0;
        s->seen_text = 1;
        from = dat + dl;
    }
    if (s->lead_disarm && !s->seen_text) {
        /* decided once the text (after whitespace) can no longer begin with a disarm */
        size_t i = from;
        while (i < need && is_ws(s->recent[i])) i++;
        int pending = i == need;
        for (int32_t k = 0; k < s->n_disarms && !pending; k++) {
            if (s->disarms[k].token >= 0) continue;
            const size_t wl = strlen(s->disarms[k].word);
            pending = need - i < wl && memcmp(s->recent + i, s->disarms[k].word, need - i) == 0;
        }
        if (!pending) s->seen_text = 1;
    }
    /* keep the bytes that may still begin a word of the current state: fewer than its longest */
    size_t longest = s->armed ? (s->max_word > s->max_disarm ? s->max_word : s->max_disarm)
                              : s->max_arm;
    size_t keep = need - from;
    if (longest == 0) keep = 0;
    else if (keep > longest - 1) keep = longest - 1;
    if (keep) memmove(s->recent, s->recent + need - keep, keep);
    s->recent_len = keep;
    return WLM_OK;
}
