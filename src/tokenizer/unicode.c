/*
 * unicode.c — code-point classes and White_Space from the generated UCD tables (binary search
 * over runs), and UTF-8 decoding / encoding with llama.cpp's treatment of invalid input.
 */
#include "tokenizer/unicode.h"

#include "tokenizer/unicode_tables.h"

int wlm_ucd_class(uint32_t cp) {
    if (cp > 0x10FFFF) return WLM_UCD_UNASSIGNED;
    /* last run whose first code point is <= cp (the first run starts at U+0000) */
    uint32_t lo = 0, hi = WLM_UCD_N_RUNS;
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if ((WLM_UCD_RUNS[mid] >> 3) <= cp) lo = mid;
        else hi = mid;
    }
    return (int)(WLM_UCD_RUNS[lo] & 7u);
}

int wlm_ucd_is_space(uint32_t cp) {
    for (int i = 0; i < WLM_UCD_N_SPACE && WLM_UCD_SPACE[i][0] <= cp; i++)
        if (cp <= WLM_UCD_SPACE[i][1]) return 1;
    return 0;
}

uint32_t wlm_utf8_decode(const unsigned char *s, size_t n, size_t *used) {
    unsigned char c = s[0];
    *used = 1;
    if (c < 0x80) return c;
    size_t len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (len == 0 || len > n) return 0xFFFD;
    uint32_t cp = c & (0x7F >> len);
    for (size_t k = 1; k < len; k++) {
        if ((s[k] & 0xC0) != 0x80) return 0xFFFD;
        cp = cp << 6 | (s[k] & 0x3F);
    }
    if (cp > 0x10FFFF) return 0xFFFD;
    *used = len;
    return cp;
}

size_t wlm_utf8_encode(uint32_t cp, char *out) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}
