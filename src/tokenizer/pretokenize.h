/*
 * pretokenize.h — internal: BPE pre-tokenizers. A pre-tokenizer is data: the list of regexes
 * llama.cpp (llama-vocab.cpp, llm_tokenizer_bpe) uses for a tokenizer.ggml.pre name, run by one
 * small backtracking regex engine over code points (pretokenize.c) that supports exactly the
 * subset those regexes use. Each regex splits every piece left by the previous one into its
 * matches and the text between them (llama.cpp's unicode_regex_split, HF's Split "isolated").
 */
#ifndef WASMLM_PRETOKENIZE_H
#define WASMLM_PRETOKENIZE_H

#include <stddef.h>
#include <stdint.h>

typedef struct wlm_regex wlm_regex;

/*
 * Compiles a UTF-8 pattern. The subset: literals; escapes \r \n \t \s \S \d \p{L} \p{M} \p{N}
 * \p{P} \p{S} and escaped punctuation; classes [...] with ranges, those escapes and negation;
 * groups (...), (?:...), (?i:...) (ASCII letters only: case-insensitive), lookaheads (?=...) and
 * (?!...); quantifiers ? * + {m} {m,} {m,n} (greedy); alternation |; $ (end of the piece).
 * Matching follows ECMAScript / std::regex: alternatives are tried in order, quantifiers
 * backtrack, the first match found wins. Returns NULL (with a message in err) for anything
 * else or on allocation failure.
 */
wlm_regex *wlm_regex_compile(const char *pattern, char *err, size_t errlen);
void wlm_regex_free(wlm_regex *re);

/* Work memory of matching (a backtracking stack and a step budget); zero-initialize, free with
 * wlm_regex_work_free. The budget bounds the work of one call to wlm_regex_match / _split. */
typedef struct wlm_regex_work {
    uint32_t *stack; /* (cap × 2) pending alternatives: program counter, position */
    size_t n, cap;
    uint64_t steps;  /* instructions left before WLM_ERR_UNSUPPORTED */
} wlm_regex_work;
void wlm_regex_work_free(wlm_regex_work *w);

/* Tries to match re at cps[pos] (cps holds n code points; $ and lookaheads see only [0, n)).
 * Returns the end of the match (>= pos), -1 when there is none, or a negative status - 1
 * (i.e. < -1) when the step budget ran out or memory failed. */
int64_t wlm_regex_match(const wlm_regex *re, const uint32_t *cps, size_t n, size_t pos,
                        wlm_regex_work *w);

/* A pre-tokenizer: the compiled regex list of one tokenizer.ggml.pre name. */
typedef struct wlm_pretok {
    int n;
    wlm_regex *re[8];
    int ignore_merges; /* llama.cpp's ignore_merges: a piece that is a whole token is taken as is */
    int add_bos;       /* llama.cpp's default add_bos for this pre-tokenizer (before the GGUF key) */
} wlm_pretok;

/*
 * Builds the pre-tokenizer named `pre` (tokenizer.ggml.pre; NULL or "" means llama.cpp's
 * fallback, "default"). An unknown name is WLM_ERR_UNSUPPORTED with a message naming it.
 */
int wlm_pretok_init(wlm_pretok *p, const char *pre, size_t pre_len, char *err, size_t errlen);
void wlm_pretok_free(wlm_pretok *p);

/* Every name wlm_pretok_init accepts, NULL-terminated (for tests). */
extern const char *const wlm_pretok_names[];

/*
 * Splits cps[0..n) into pieces: writes the length (in code points) of each piece, in order, to
 * *lens (realloc'd; *n_lens pieces, *cap_lens capacity). Returns WLM_OK, WLM_ERR_NOMEM, or
 * WLM_ERR_UNSUPPORTED when the regexes needed more than their step budget (an input built to
 * make them backtrack: refused rather than hanging).
 */
int wlm_pretok_split(const wlm_pretok *p, const uint32_t *cps, size_t n, uint32_t **lens,
                     size_t *n_lens, size_t *cap_lens, wlm_regex_work *w);

#endif
