/*
 * grammar.h — internal: GBNF grammars (llama.cpp's syntax, grammars/README.md there) compiled
 * to a compact element array, and the matcher that constrains sampling to them: which tokens
 * can continue the text generated so far, and the state after accepting one.
 * It does not sample, tokenize or know the model: the vocabulary comes in as byte strings
 * (wlm_gram_vocab), end-of-generation tokens as a list of ids. The algorithms, and which ideas
 * come from llama.cpp, XGrammar and llguidance, are described at the top of grammar_parse.c
 * (the parser), grammar_trie.c (the token trie) and grammar.c (the matcher and the mask).
 *
 * Lifetimes: a wlm_gram and a wlm_gram_vocab are immutable after construction and may be
 * shared by any number of matchers, which borrow them (they must outlive the matchers).
 */
#ifndef WASMLM_GRAMMAR_H
#define WASMLM_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

/* Limits, checked with an error (never an abort): */
#define WLM_GRAM_MAX_TEXT (1u << 20)      /* bytes of GBNF text */
#define WLM_GRAM_MAX_DEPTH 64             /* nesting of ( ) groups */
#define WLM_GRAM_MAX_REPEAT 10000         /* m and n in {m,n} */
#define WLM_GRAM_MAX_ELEMENTS (1u << 20)  /* compiled elements, repetitions expanded */
#define WLM_GRAM_MAX_RULES (1u << 17)     /* rules, groups and repetitions included */
#define WLM_GRAM_MAX_STACKS 8192          /* parser stacks alive at one point of a parse */
#define WLM_GRAM_MAX_NODES (1 << 21)      /* stack nodes of one matcher (about 24 MB) */

typedef struct wlm_gram wlm_gram;
typedef struct wlm_gram_vocab wlm_gram_vocab;
typedef struct wlm_gram_matcher wlm_gram_matcher;

/*
 * Parses GBNF `text` (len bytes, need not be NUL-terminated) into *out. Errors:
 * WLM_ERR_INVALID_ARG with a message "grammar line L, column C: ..." in err (columns count
 * bytes from 1) for a syntax error, an undefined or twice-defined rule, a missing `root`, left
 * recursion (direct, indirect, or through rules that can match the empty string), an empty
 * grammar, nesting deeper than WLM_GRAM_MAX_DEPTH, a repetition count above
 * WLM_GRAM_MAX_REPEAT or a grammar above the element / rule / text limits; WLM_ERR_NOMEM.
 * *out is NULL on error.
 */
int wlm_gram_parse(const char *text, size_t len, wlm_gram **out, char *err, size_t errlen);
void wlm_gram_free(wlm_gram *g);

/* Number of rules and elements of a compiled grammar (tests, diagnostics). */
uint32_t wlm_gram_n_rules(const wlm_gram *g);
uint32_t wlm_gram_n_elements(const wlm_gram *g);

/*
 * The vocabulary as byte strings: token i is piece[i] (len[i] bytes, copied). Builds the
 * token trie (prefix tree in preorder) the mask walks. A token with no bytes never matches a
 * grammar (control tokens); end-of-generation tokens are given to the matcher separately.
 * Errors: WLM_ERR_INVALID_ARG (n < 1, NULL arrays), WLM_ERR_NOMEM.
 */
int wlm_gram_vocab_new(int32_t n, const char *const *piece, const size_t *len,
                       wlm_gram_vocab **out);
void wlm_gram_vocab_free(wlm_gram_vocab *v);
size_t wlm_gram_vocab_bytes(const wlm_gram_vocab *v); /* memory held */

/*
 * A parse in progress, at the start of g's root. eog[0..n_eog) are the end-of-generation
 * tokens (copied; ids outside the vocabulary are ignored): allowed exactly when the text so far
 * is a complete sentence of the grammar. Errors: WLM_ERR_INVALID_ARG, WLM_ERR_NOMEM,
 * WLM_ERR_UNSUPPORTED (the grammar needs more than WLM_GRAM_MAX_STACKS stacks).
 */
int wlm_gram_matcher_new(const wlm_gram *g, const wlm_gram_vocab *v, const int32_t *eog,
                         int32_t n_eog, wlm_gram_matcher **out);
void wlm_gram_matcher_free(wlm_gram_matcher *m);

/* A copy of m's parse state (for a beam that forks), compacted. Errors: NOMEM. */
int wlm_gram_matcher_clone(const wlm_gram_matcher *m, wlm_gram_matcher **out);

/* Drops a leading space of the next token's bytes (the tokenizer removes it after BOS, so the
 * text the grammar sees is the text the user sees). Cleared by the next accepted token. */
void wlm_gram_matcher_strip_space(wlm_gram_matcher *m, int on);

/* 1 when token t can continue the parse (its bytes, or end of generation), 0 when not,
 * negative status on an error (NOMEM, UNSUPPORTED). The state is unchanged. */
int wlm_gram_allows(wlm_gram_matcher *m, int32_t t);

/* allowed[t] = 1 for every token that can continue the parse, 0 otherwise (vocabulary size
 * entries). Returns the number allowed, or a negative status. */
int32_t wlm_gram_mask(wlm_gram_matcher *m, uint8_t *allowed);

/* Advances the parse over token t. WLM_ERR_INVALID_ARG when t cannot continue it (the state
 * is then unchanged); other negative statuses on errors. An end-of-generation token ends the
 * parse (further tokens are refused). */
int wlm_gram_accept_token(wlm_gram_matcher *m, int32_t t);

/* Advances over raw bytes (a token's text need not end on a character boundary).
 * WLM_ERR_INVALID_ARG when they cannot continue the parse (state unchanged). */
int wlm_gram_accept_bytes(wlm_gram_matcher *m, const char *bytes, size_t n);

/* 1 when the text so far is a complete sentence (end of generation allowed). */
int wlm_gram_is_complete(const wlm_gram_matcher *m);

/* 1 when some text could still continue the parse (a stack waits for a character). */
int wlm_gram_can_continue(const wlm_gram_matcher *m);

/* Number of parser stacks in the current state (tests, diagnostics: the work of each step and
 * of each trie node of a mask is proportional to it). */
uint32_t wlm_gram_matcher_n_stacks(const wlm_gram_matcher *m);

/* grammar_vocab.c — the glue with a model and context (wasmlm.h types). */
#include "wasmlm.h"

/*
 * Compiles GBNF `text` for a generation of context c and starts its parse: builds the
 * context's vocabulary trie on first use (kept in c->gram_vocab), makes a matcher whose
 * end-of-generation tokens are the ones generate.c stops on (EOS, BOS), and drops the first
 * token's leading space when prev is BOS and the tokenizer does so. Both results are owned by
 * the caller (the matcher borrows *gram and c->gram_vocab). Errors go to c->errmsg, prefixed
 * by `who`: WLM_ERR_INVALID_ARG (the grammar, with line and column), WLM_ERR_TOKENIZER,
 * WLM_ERR_NOMEM, WLM_ERR_UNSUPPORTED.
 */
int wlm_grammar_setup(wlm_context *c, const char *text, size_t len, int32_t prev,
                      const char *who, wlm_gram **gram, wlm_gram_matcher **matcher);

/* 1 when t ends a generation (the matcher's end-of-generation tokens). */
int wlm_grammar_is_eog(const wlm_model *m, int32_t t);

#endif
