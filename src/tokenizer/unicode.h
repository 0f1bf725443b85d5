/*
 * unicode.h — internal: the few Unicode facts the BPE pre-tokenizer needs — a code point's
 * general-category class and whether it is White_Space (tables generated from the UCD by
 * tools/gen_unicode.mjs into unicode_tables.h) — and UTF-8 decoding / encoding.
 * No normalization, no case mapping.
 */
#ifndef WASMLM_UNICODE_H
#define WASMLM_UNICODE_H

#include <stddef.h>
#include <stdint.h>

/* General-category classes (the first letter of the category; Cn apart). */
enum wlm_ucd_class {
    WLM_UCD_UNASSIGNED = 0, /* Cn */
    WLM_UCD_LETTER = 1,     /* L*: \p{L} */
    WLM_UCD_MARK = 2,       /* M*: \p{M} */
    WLM_UCD_NUMBER = 3,     /* N*: \p{N} */
    WLM_UCD_PUNCT = 4,      /* P*: \p{P} */
    WLM_UCD_SYMBOL = 5,     /* S*: \p{S} */
    WLM_UCD_SEPARATOR = 6,  /* Z* */
    WLM_UCD_OTHER = 7       /* Cc Cf Cs Co */
};

/* The class of code point cp (UNASSIGNED above U+10FFFF). */
int wlm_ucd_class(uint32_t cp);

/* 1 when cp has the White_Space property (what the pre-tokenizers' \s matches). */
int wlm_ucd_is_space(uint32_t cp);

/*
 * Decodes one code point from s[0..n) (n >= 1) as llama.cpp's unicode_cpts_from_utf8 does: the
 * lead byte fixes the length, continuation bytes must be 10xxxxxx and present; overlong forms and
 * surrogates are accepted. Anything else (a stray continuation byte, a truncated sequence, a lead
 * byte 0xF8..0xFF, a value above U+10FFFF) yields U+FFFD and consumes one byte.
 * Sets *used to the bytes consumed (1..4).
 */
uint32_t wlm_utf8_decode(const unsigned char *s, size_t n, size_t *used);

/* Writes the UTF-8 form of cp (<= U+10FFFF) to out (4 bytes of room); returns its length. */
size_t wlm_utf8_encode(uint32_t cp, char *out);

#endif
