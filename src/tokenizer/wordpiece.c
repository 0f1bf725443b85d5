/*
 * wordpiece.c — BERT's WordPiece encoding of one raw fragment (no special tokens in it), as
 * llama.cpp's WPM tokenizer (llama-vocab.cpp, llm_tokenizer_wpm_session) does it, for a GGUF
 * vocabulary with tokenizer.ggml.model = "bert". It does not load the vocabulary (vocab_gguf.c)
 * or add [CLS] / [SEP] (spm.c's wlm_gguf_encode).
 *
 * BERT's basic tokenizer (Devlin et al. 2018; Hugging Face's BasicTokenizer), in llama.cpp's form:
 *  - the text's code points (invalid UTF-8: U+FFFD, then dropped) are each replaced by the first
 *    code point of their canonical decomposition (é → e: accents are stripped) and lower-cased
 *    (simple mapping); NUL, U+FFFD and control / format characters (category C) are dropped;
 *  - whitespace (White_Space) ends a word; punctuation (P*), ASCII symbols (S* below U+007F) and
 *    CJK ideographs are words of their own.
 * Then each word, written with a leading "▁" (the converter stores word-start pieces as "▁word"
 * and continuations "##ing" as "ing"), is cut greedily into the longest pieces of the
 * vocabulary from left to right; a word with a position no piece starts at becomes one [UNK].
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"
#include "tokenizer/unicode_case_tables.h"
#include "wasmlm.h"

/* The simple lowercase mapping of cp (itself when it has none). */
static uint32_t ucd_lower(uint32_t cp) {
    size_t lo = 0, hi = WLM_UCD_N_LOWER;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (WLM_UCD_LOWER[mid][0] < cp) lo = mid + 1;
        else hi = mid;
    }
    return lo < WLM_UCD_N_LOWER && WLM_UCD_LOWER[lo][0] == cp ? WLM_UCD_LOWER[lo][1] : cp;
}

/* The first code point of cp's canonical decomposition (itself when it has none). */
static uint32_t ucd_nfd_first(uint32_t cp) {
    size_t lo = 0, hi = WLM_UCD_N_NFD;
    while (lo < hi) { /* the first run whose last code point is >= cp */
        size_t mid = lo + (hi - lo) / 2;
        if (WLM_UCD_NFD[mid][1] < cp) lo = mid + 1;
        else hi = mid;
    }
    return lo < WLM_UCD_N_NFD && WLM_UCD_NFD[lo][0] <= cp ? WLM_UCD_NFD[lo][2] : cp;
}

/* The CJK ideograph blocks of BERT's _is_chinese_char, with llama.cpp's (and Hugging Face's
 * Rust tokenizers') upper end 0x2CEAF for Extension E. */
static int is_cjk(uint32_t cp) {
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
           (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
           (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

/* Greedy longest-match of one word (bytes w[0..n), "▁" included) into pieces, appended to out;
 * one [UNK] instead when some position starts no piece (llama.cpp: the word's pieces so far are
 * discarded). Positions are bytes, as llama.cpp's; a piece never ends inside a character that
 * the vocabulary does not hold whole, as every piece is valid UTF-8. */
static int encode_word(const wlm_tokenizer *t, const char *w, size_t n, wlm_id_vec *out) {
    const size_t start = out->n, max_len = (size_t)t->max_token_length;
    for (size_t i = 0; i < n;) {
        size_t j = n - i > max_len ? i + max_len : n;
        int32_t id = -1;
        for (; j > i; j--)
            if ((id = wlm_tokenizer_lookup(t, w + i, j - i)) >= 0) break;
        if (id < 0) {
            out->n = start;
            break;
        }
        if (wlm_id_vec_push(out, id) != WLM_OK) return WLM_ERR_NOMEM;
        i = j;
    }
    if (out->n == start) return wlm_id_vec_push(out, t->unk_id);
    return WLM_OK;
}

int wlm_wpm_encode_fragment(const wlm_tokenizer *t, const char *s, size_t n, wlm_id_vec *out) {
    /* A word in bytes: "▁" then at most 4 bytes per code point of the fragment. */
    if (n > (SIZE_MAX - 3) / 4) return WLM_ERR_NOMEM;
    char *w = malloc(3 + 4 * n);
    if (!w) return WLM_ERR_NOMEM;
    memcpy(w, SPM_SPACE, 3);
    size_t wn = 3; /* bytes of the current word, "▁" included */
    int rc = WLM_OK;
    for (size_t i = 0; i < n && rc == WLM_OK;) {
        size_t used;
        uint32_t cp = ucd_nfd_first(wlm_utf8_decode((const unsigned char *)s + i, n - i, &used));
        i += used;
        if (wlm_ucd_is_space(cp)) {
            if (wn > 3) rc = encode_word(t, w, wn, out);
            wn = 3;
            continue;
        }
        const int cls = wlm_ucd_class(cp);
        if (cp == 0 || cp == 0xFFFD || cls == WLM_UCD_OTHER) continue;
        char u[4];
        size_t un = wlm_utf8_encode(ucd_lower(cp), u);
        if (cls == WLM_UCD_PUNCT || (cp < 0x7F && cls == WLM_UCD_SYMBOL) || is_cjk(cp)) {
            if (wn > 3) rc = encode_word(t, w, wn, out);
            memcpy(w + 3, u, un);
            if (rc == WLM_OK) rc = encode_word(t, w, 3 + un, out);
            wn = 3;
        } else {
            memcpy(w + wn, u, un);
            wn += un;
        }
    }
    if (rc == WLM_OK && wn > 3) rc = encode_word(t, w, wn, out);
    free(w);
    return rc;
}
