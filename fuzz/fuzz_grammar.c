/*
 * fuzz_grammar.c — libFuzzer harness for GBNF grammars (src/sampling/grammar.h, internal API):
 * the input is grammar text, then a NUL byte, then token choices. The text is parsed (any
 * bytes: it must parse or fail with INVALID_ARG and a "grammar line L, column C:" message, never
 * crash or hang); a grammar that parses drives a matcher over a synthetic vocabulary of all 256
 * single bytes plus multi-byte pieces (ASCII words, whole and split UTF-8 characters, an empty
 * piece and an end-of-generation token), one token per input byte after the NUL. Properties:
 *   - the trie mask equals the token-by-token check (every token, every 4th step; the sampled
 *     token at every step), and its count equals the number of ones;
 *   - an allowed token is accepted, a refused one is refused and leaves the state unchanged;
 *   - the end-of-generation token is allowed exactly when the parse is complete;
 *   - inside a UTF-8 character the mask is never empty (a partial character always has a
 *     valid completion: byte tokens exist for every byte);
 *   - a clone allows exactly what its original allows.
 * Then the same grammar as a lazy grammar (src/sampling/grammar_lazy.c, through a sampler): the
 * same tokens fed to wlm_sampler_accept with two trigger words ("\"" and "ab") and one trigger
 * token (byte '{'): it wakes only once a trigger has been generated, and, awake, refuses
 * exactly what the grammar's own check refuses; then again armed (grammar_arms: the word "()"
 * and the token '!', disarmed by the word "))"): it never wakes before an arm was generated;
 * and once more starting armed, "))" disarming only as the text's first non-whitespace.
 */
#include <string.h>

#include "fuzz_util.h"
#include "sampling/grammar.h"
#include "sampling/sampler.h"

#define N_BYTES 256
static const char *g_extra[] = {
    "ab", "true", "null", "123", " {", "\"", "\":", "\\n", "\\u00e9", "\xc3\xa9", "\xc3",
    "\xa9", "\xe2\x82", "\x82\xac", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xa9\xc3", "()", "))",
    "  ", "a b", "\xed\xa0\x80", "\xc0\xaf", ""};
#define N_EXTRA ((int32_t)(sizeof g_extra / sizeof *g_extra))
#define V (N_BYTES + N_EXTRA + 1) /* the last token is the end of generation */

static wlm_gram_vocab *g_vocab;
static char g_bytes[N_BYTES];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    static const char *piece[V];
    static size_t len[V];
    for (int32_t b = 0; b < N_BYTES; b++) {
        g_bytes[b] = (char)b;
        piece[b] = &g_bytes[b];
        len[b] = 1;
    }
    for (int32_t k = 0; k < N_EXTRA; k++) {
        piece[N_BYTES + k] = g_extra[k];
        len[N_BYTES + k] = strlen(g_extra[k]);
    }
    piece[V - 1] = "";
    len[V - 1] = 0;
    if (wlm_gram_vocab_new(V, piece, len, &g_vocab) != WLM_OK) abort();
    return 0;
}

/* Do the bytes end inside a UTF-8 character (a lead byte still missing continuations)? */
static int mid_char(const char *s, size_t n) {
    for (size_t back = 1; back <= 4 && back <= n; back++) {
        const unsigned char c = (unsigned char)s[n - back];
        if ((c & 0xC0) == 0x80) continue;
        const size_t need = (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
        return need > back;
    }
    return 0;
}

static int32_t mask_checked(wlm_gram_matcher *m, uint8_t *mask, int full) {
    const int32_t na = wlm_gram_mask(m, mask);
    FZ_CHECK(na >= 0 || na == WLM_ERR_UNSUPPORTED, "mask: %s", wlm_status_name(na));
    if (na < 0) return na;
    int32_t ones = 0;
    for (int32_t t = 0; t < V; t++) ones += mask[t];
    FZ_CHECK(ones == na, "mask count %d, ones %d", (int)na, (int)ones);
    FZ_CHECK(mask[V - 1] == wlm_gram_is_complete(m), "EOG %d, complete %d", mask[V - 1],
             wlm_gram_is_complete(m));
    if (full)
        for (int32_t t = 0; t < V; t++) {
            const int a = wlm_gram_allows(m, t);
            if (a < 0) return a;
            FZ_CHECK(a == mask[t], "token %d: mask %d, check %d", (int)t, mask[t], a);
        }
    return na;
}

static int has_ab(const char *p, size_t n) {
    for (size_t i = 0; i + 1 < n; i++)
        if (p[i] == 'a' && p[i + 1] == 'b') return 1;
    return 0;
}

/* The lazy pass (see the top): g's matcher dormant in a sampler until a trigger. */
static void lazy_pass(const wlm_gram *g, const uint8_t *steps, size_t n_steps, int arming) {
    const int32_t eog = V - 1;
    wlm_gram_matcher *m = NULL;
    if (wlm_gram_matcher_new(g, g_vocab, &eog, 1, &m) != WLM_OK) return;
    wlm_sampler s;
    memset(&s, 0, sizeof s);
    wlm_sampler_set_grammar(&s, NULL, m); /* s owns m now */
    wlm_gen_params p;
    wlm_gen_params_default(&p);
    p.grammar = "root ::= x"; /* (only checked for presence) */
    p.grammar_len = 10;
    p.grammar_lazy = 1;
    p.n_grammar_triggers = 3;
    p.grammar_triggers[0].token = -1;
    strcpy(p.grammar_triggers[0].word, "\"");
    p.grammar_triggers[1].token = -1;
    strcpy(p.grammar_triggers[1].word, "ab");
    p.grammar_triggers[2].token = '{';
    if (arming) {
        p.n_grammar_arms = 2;
        p.grammar_arms[0].token = -1;
        strcpy(p.grammar_arms[0].word, "()");
        p.grammar_arms[1].token = '!';
        p.n_grammar_disarms = 1;
        p.grammar_disarms[0].token = -1;
        strcpy(p.grammar_disarms[0].word, "))");
        p.grammar_start_armed = arming == 2 ? 2 : 0;
    }
    FZ_CHECK(wlm_grammar_lazy_check(&p, V, NULL, 0) == WLM_OK, "lazy check refused valid triggers");
    FZ_CHECK(wlm_sampler_set_lazy(&s, &p) == WLM_OK && !wlm_sampler_grammar_active(&s), "lazy set-up");
    int seen = 0; /* a trigger has been generated (a word possibly across tokens) */
    int armed = arming != 1; /* an arm has been generated (a word possibly across tokens) */
    char last = 0;
    for (size_t k = 0; k < n_steps; k++) {
        const int32_t t = steps[k] % V;
        if (t == eog) break;
        const char *piece = t < N_BYTES ? &g_bytes[t] : g_extra[t - N_BYTES];
        const size_t pl = t < N_BYTES ? 1 : strlen(g_extra[t - N_BYTES]);
        const int was_active = wlm_sampler_grammar_active(&s);
        const int allowed = was_active ? wlm_gram_allows(s.matcher, t) : 1;
        if (allowed < 0) break;
        const int rc = wlm_sampler_accept(&s, t, piece, pl);
        if (was_active) {
            FZ_CHECK(allowed ? rc == WLM_OK || rc == WLM_ERR_UNSUPPORTED : rc == WLM_ERR_INVALID_ARG,
                     "awake: token %d allowed %d, accept %s", (int)t, allowed, wlm_status_name(rc));
            if (rc == WLM_ERR_UNSUPPORTED) break;
            continue;
        }
        FZ_CHECK(rc == WLM_OK || rc == WLM_ERR_UNSUPPORTED, "dormant accept: %s", wlm_status_name(rc));
        if (rc != WLM_OK) break;
        if (t == '{' || memchr(piece, '"', pl) || (pl && last == 'a' && piece[0] == 'b') ||
            has_ab(piece, pl))
            seen = 1;
        FZ_CHECK(!wlm_sampler_grammar_active(&s) || seen, "woke without a trigger at step %d", (int)k);
        if (t == '!' || (pl && last == '(' && piece[0] == ')')) armed = 1;
        for (size_t i = 0; i + 1 < pl; i++)
            if (piece[i] == '(' && piece[i + 1] == ')') armed = 1;
        FZ_CHECK(!wlm_sampler_grammar_active(&s) || armed, "woke before an arm at step %d", (int)k);
        if (pl) last = piece[pl - 1];
    }
    wlm_sampler_free(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    const size_t glen = nul ? (size_t)(nul - data) : size;
    char *text = fz_dup(data, glen);
    char err[256];
    wlm_gram *g = NULL;
    int rc = wlm_gram_parse(text, glen, &g, err, sizeof err);
    free(text);
    if (rc != WLM_OK) {
        FZ_CHECK(rc == WLM_ERR_INVALID_ARG && g == NULL, "parse: %s", wlm_status_name(rc));
        FZ_CHECK(strncmp(err, "grammar line ", 13) == 0 && strstr(err, ", column "),
                 "parse message '%s'", err);
        return 0;
    }
    FZ_CHECK(g != NULL, "parse OK without a grammar");
    const int32_t eog = V - 1;
    wlm_gram_matcher *m = NULL;
    rc = wlm_gram_matcher_new(g, g_vocab, &eog, 1, &m);
    FZ_CHECK(rc == WLM_OK || rc == WLM_ERR_UNSUPPORTED, "matcher: %s", wlm_status_name(rc));
    uint8_t mask[V];
    char text_so_far[64 * 8];
    size_t n_text = 0;
    const uint8_t *steps = nul ? nul + 1 : data + size;
    const size_t n_steps = (size_t)(data + size - steps) < 64 ? (size_t)(data + size - steps) : 64;
    for (size_t k = 0; m && k < n_steps; k++) {
        const int32_t na = mask_checked(m, mask, k % 4 == 0);
        if (na < 0) break;
        FZ_CHECK(na > 0 || !mid_char(text_so_far, n_text),
                 "no token allowed inside a UTF-8 character");
        int32_t t = steps[k] % V;
        if (steps[k] >= 0xF0 && na > 0) { /* pick an allowed token now and then */
            int32_t skip = steps[k] & 0x0F;
            for (t = 0; t < V; t++)
                if (mask[t] && skip-- <= 0) break;
            if (t == V) t = 0;
        }
        const int a = wlm_gram_allows(m, t);
        if (a < 0) break;
        FZ_CHECK(a == mask[t], "step %d token %d: check %d, mask %d", (int)k, (int)t, a, mask[t]);
        if (k % 8 == 3) {
            wlm_gram_matcher *c = NULL;
            rc = wlm_gram_matcher_clone(m, &c);
            FZ_CHECK(rc == WLM_OK, "clone: %s", wlm_status_name(rc));
            uint8_t mc[V];
            const int32_t nc = mask_checked(c, mc, 0);
            FZ_CHECK(nc < 0 || memcmp(mc, mask, V) == 0, "the clone allows other tokens");
            wlm_gram_matcher_free(c);
        }
        const int complete = wlm_gram_is_complete(m);
        rc = wlm_gram_accept_token(m, t);
        if (a) {
            FZ_CHECK(rc == WLM_OK || rc == WLM_ERR_UNSUPPORTED, "accept allowed %d: %s", (int)t,
                     wlm_status_name(rc));
            if (rc != WLM_OK) break;
            if (t == eog) break;
            const size_t pl = t < N_BYTES ? 1 : strlen(g_extra[t - N_BYTES]);
            memcpy(text_so_far + n_text, t < N_BYTES ? &g_bytes[t] : g_extra[t - N_BYTES], pl);
            n_text += pl;
            /* inside a character: never a dead end */
            if (!wlm_gram_is_complete(m) && !wlm_gram_can_continue(m))
                FZ_CHECK(0, "after token %d the parse can neither continue nor end", (int)t);
        } else {
            FZ_CHECK(rc == WLM_ERR_INVALID_ARG, "accept refused %d: %s", (int)t,
                     wlm_status_name(rc));
            FZ_CHECK(complete == wlm_gram_is_complete(m), "a refused token changed the state");
        }
    }
    wlm_gram_matcher_free(m);
    lazy_pass(g, steps, n_steps, 0);
    lazy_pass(g, steps, n_steps, 1);
    lazy_pass(g, steps, n_steps, 2);
    wlm_gram_free(g);
    return 0;
}
