/*
 * tokenizer.c — the vocabulary tables shared by every flavour of tokenizer.h (pieces, scores,
 * token types, a hash index for lookups by bytes, the end-of-generation set) and the dispatch
 * to the flavours:
 *   llama2c — vocab_llama2c.c: run.c's tokenizer.bin and its encode/decode, byte for byte;
 *   spm     — vocab_gguf.c loads a GGUF vocabulary, spm.c encodes: llama.cpp's SPM tokenizer;
 *   bpe     — vocab_gguf.c loads, bpe.c encodes: byte-level BPE with a pre-tokenizer
 *             (pretokenize.c); spm.c splits out special tokens for all GGUF flavours;
 *   wpm     — vocab_gguf.c loads, wordpiece.c encodes: BERT's WordPiece.
 * Every flavour takes explicit lengths (NUL is an ordinary byte), bounds every read of its
 * input and allocates nothing proportional to a count it has not checked.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"
#include "wasmlm.h"

/* ------------------------------------------------------------------------------------------ */
/* The shared tables, the piece index, freeing                                                */

int wlm_vocab_cmp_bytes(const char *a, size_t la, const char *b, size_t lb) {
    size_t n = la < lb ? la : lb;
    int c = n ? memcmp(a, b, n) : 0;
    if (c) return c;
    return la < lb ? -1 : la > lb;
}

/* The piece index hashes with FNV-1a (a byte stream, so the hash of a concatenation needs no
 * copy of it) finished by MurmurHash3's fmix32, so that the low bits that pick the slot depend
 * on every byte. */
#define PIECE_HASH_BASIS 2166136261u
static uint32_t piece_hash_bytes(uint32_t h, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}
static uint32_t piece_hash_final(uint32_t h) {
    h ^= h >> 16;
    h *= 0x85EBCA6Bu;
    h ^= h >> 13;
    h *= 0xC2B2AE35u;
    return h ^ (h >> 16);
}

int32_t wlm_tokenizer_lookup2(const wlm_tokenizer *t, const char *a, size_t la, const char *b,
                              size_t lb) {
    if (!t->piece_tab) return -1;
    const size_t len = la + lb;
    uint32_t h = piece_hash_bytes(piece_hash_bytes(PIECE_HASH_BASIS, a, la), b, lb);
    /* the table always has empty slots (more slots than tokens): the probe ends */
    for (uint32_t s = piece_hash_final(h) & t->piece_mask;; s = (s + 1) & t->piece_mask) {
        int32_t id = t->piece_tab[s];
        if (id < 0) return -1;
        if ((size_t)t->length[id] != len) continue;
        const char *p = t->blob + t->offset[id];
        if ((la == 0 || memcmp(p, a, la) == 0) && (lb == 0 || memcmp(p + la, b, lb) == 0))
            return id;
    }
}

int32_t wlm_tokenizer_lookup(const wlm_tokenizer *t, const char *str, size_t len) {
    return wlm_tokenizer_lookup2(t, str, len, NULL, 0);
}

/* See tokenizer.h. */
int wlm_vocab_build_index(wlm_tokenizer *t, int32_t *dup_a, int32_t *dup_b) {
    const int32_t n = t->vocab_size;
    uint32_t slots = 16;
    while (slots < (uint32_t)n + (uint32_t)n / 2) slots *= 2; /* n <= 2^24: no overflow */
    t->piece_tab = malloc(sizeof(int32_t) * (size_t)slots);
    if (!t->piece_tab) return -1;
    memset(t->piece_tab, 0xFF, sizeof(int32_t) * (size_t)slots);
    t->piece_mask = slots - 1;
    for (int32_t i = 0; i < n; i++) {
        const char *p = t->blob + t->offset[i];
        const uint32_t len = t->length[i];
        uint32_t s = piece_hash_final(piece_hash_bytes(PIECE_HASH_BASIS, p, len)) & t->piece_mask;
        for (;; s = (s + 1) & t->piece_mask) {
            int32_t id = t->piece_tab[s];
            if (id < 0) break;
            if (t->length[id] == len && (len == 0 || memcmp(t->blob + t->offset[id], p, len) == 0)) {
                if (!dup_a) goto next; /* keep the lowest id */
                *dup_a = id, *dup_b = i;
                return 1;
            }
        }
        t->piece_tab[s] = i;
    next:;
    }
    return 0;
}

void wlm_tokenizer_free(wlm_tokenizer *t) {
    if (!t) return;
    free(t->blob);
    free(t->offset);
    free(t->length);
    free(t->scores);
    free(t->piece_tab);
    free(t->type);
    free(t->text);
    free(t->text_offset);
    free(t->text_length);
    free(t->user);
    free(t->user_rstrip);
    free(t->user_control);
    free(t->merge_tab);
    wlm_pretok_free(&t->pre);
    memset(t, 0, sizeof *t);
}

/* Allocates the tables shared by both flavours for n pieces of blob_bytes (NULs included). */
int wlm_vocab_alloc(wlm_tokenizer *t, int32_t n, size_t blob_bytes) {
    t->vocab_size = n;
    t->blob = malloc(blob_bytes ? blob_bytes : 1);
    t->offset = malloc(sizeof(uint32_t) * (size_t)n);
    t->length = malloc(sizeof(uint32_t) * (size_t)n);
    t->scores = malloc(sizeof(float) * (size_t)n);
    return t->blob && t->offset && t->length && t->scores;
}

/* Appends piece i (len bytes) to the blob at *b. */
void wlm_vocab_put_piece(wlm_tokenizer *t, int32_t i, const char *piece, uint32_t len, size_t *b) {
    if (len) memcpy(t->blob + *b, piece, len);
    t->blob[*b + len] = '\0';
    t->offset[i] = (uint32_t)*b;
    t->length[i] = len;
    if ((int32_t)len > t->max_token_length) t->max_token_length = (int32_t)len;
    *b += (size_t)len + 1;
}

int wlm_hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

void wlm_printable(char *out, size_t cap, const char *s, size_t n) {
    size_t o = 0;
    for (size_t i = 0; i < n && o + 4 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        out[o++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    if (o + 4 >= cap && n > o) memcpy(out + o, "...", 3), o += 3;
    out[o] = '\0';
}

int wlm_id_vec_push(wlm_id_vec *o, int32_t id) {
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 64;
        if (cap > (size_t)INT32_MAX) return WLM_ERR_NOMEM;
        int32_t *v = realloc(o->v, sizeof(int32_t) * cap);
        if (!v) return WLM_ERR_NOMEM;
        o->v = v;
        o->cap = cap;
    }
    o->v[o->n++] = id;
    return WLM_OK;
}

/* qsort comparator of wlm_piece_ref (tokenizer.h). */
int wlm_piece_ref_cmp(const void *pa, const void *pb) {
    const wlm_piece_ref *a = pa, *b = pb;
    int c = wlm_vocab_cmp_bytes(a->str, a->len, b->str, b->len);
    if (c) return c;
    return (a->id > b->id) - (a->id < b->id);
}

int wlm_tokenizer_is_eog(const wlm_tokenizer *t, int32_t token) {
    if (!t || token < 0) return 0;
    if (t->kind == WLM_TOKENIZER_LLAMA2C) return token == t->eos_id || token == t->bos_id;
    for (int32_t i = 0; i < t->n_eog; i++)
        if (t->eog[i] == token) return 1;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Dispatch                                                                                     */

int32_t wlm_tokenizer_encode(const wlm_tokenizer *t, const char *text, size_t len, unsigned flags,
                             int32_t *tokens, int32_t cap) {
    if (!t || !t->blob) return WLM_ERR_TOKENIZER;
    if ((!text && len) || cap < 0 || (!tokens && cap)) return WLM_ERR_INVALID_ARG;
    if (flags & ~(unsigned)(WLM_TOKENIZE_ADD_SPECIAL | WLM_TOKENIZE_PARSE_SPECIAL))
        return WLM_ERR_INVALID_ARG;
    if (!text) text = "";
    switch (t->kind) {
    case WLM_TOKENIZER_LLAMA2C:
        return wlm_llama2c_encode(t, text, len, (flags & WLM_TOKENIZE_ADD_SPECIAL) != 0, tokens, cap);
    case WLM_TOKENIZER_SPM:
    case WLM_TOKENIZER_BPE:
    case WLM_TOKENIZER_WPM: return wlm_gguf_encode(t, text, len, flags, tokens, cap);
    default: return WLM_ERR_TOKENIZER;
    }
}

const char *wlm_tokenizer_piece(const wlm_tokenizer *t, int32_t prev, int32_t token, size_t *len) {
    if (len) *len = 0;
    if (!t || !t->blob || token < 0 || token >= t->vocab_size) return NULL;
    switch (t->kind) {
    case WLM_TOKENIZER_LLAMA2C: return wlm_llama2c_piece(t, prev, token, len);
    case WLM_TOKENIZER_SPM:
    case WLM_TOKENIZER_WPM: return wlm_spm_piece(t, prev, token, len);
    case WLM_TOKENIZER_BPE:
        if (len) *len = t->text_length[token];
        return t->text + t->text_offset[token];
    default: return NULL;
    }
}

