/*
 * tokenizer.c — SentencePiece-style BPE over llama2.c's tokenizer.bin, following run.c's
 * encode/decode: the text is split into UTF-8 characters (unknown ones fall back to byte tokens
 * <0xNN>), a dummy-prefix space is prepended, and the adjacent pair whose concatenation is the
 * best-scoring vocabulary entry is merged until no pair is in the vocabulary (leftmost pair on
 * ties). Unlike run.c it takes explicit lengths (NUL bytes are ordinary bytes), caches pair
 * scores between merges, never merges across BOS, and bounds every read of the file.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"
#include "wasmlm.h"

static int set_err(char *err, size_t errlen, int status, const char *msg, long a, long b) {
    if (err && errlen) snprintf(err, errlen, msg, a, b);
    return status;
}

static int cmp_bytes(const char *a, size_t la, const char *b, size_t lb) {
    size_t n = la < lb ? la : lb;
    int c = memcmp(a, b, n);
    if (c) return c;
    return la < lb ? -1 : la > lb;
}

/* qsort comparator for wlm_token_index; ties (duplicate pieces) by id, so lookups find the
 * lowest id. The piece length is recovered with strlen (pieces never contain NUL: checked). */
static int cmp_index(const void *pa, const void *pb) {
    const wlm_token_index *a = pa, *b = pb;
    int c = strcmp(a->str, b->str);
    if (c) return c;
    return (a->id > b->id) - (a->id < b->id);
}

int32_t wlm_tokenizer_lookup(const wlm_tokenizer *t, const char *str, size_t len) {
    int32_t lo = 0, hi = t->vocab_size; /* first entry >= str */
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        const char *s = t->sorted[mid].str;
        if (cmp_bytes(s, t->length[t->sorted[mid].id], str, len) < 0) lo = mid + 1;
        else hi = mid;
    }
    if (lo < t->vocab_size) {
        const wlm_token_index *e = &t->sorted[lo];
        if (cmp_bytes(e->str, t->length[e->id], str, len) == 0) return e->id;
    }
    return -1;
}

static uint32_t rd_u32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int wlm_tokenizer_load_llama2c(wlm_tokenizer *t, const void *data, size_t size,
                               int32_t vocab_size, char *err, size_t errlen) {
    memset(t, 0, sizeof *t);
    const unsigned char *p = data;
    if (vocab_size <= 0)
        return set_err(err, errlen, WLM_ERR_INVALID_ARG, "bad vocab_size %ld%.0ld", vocab_size, 0);
    if (size < 4)
        return set_err(err, errlen, WLM_ERR_TRUNCATED,
                       "truncated tokenizer: %ld bytes, the header needs 4%.0ld", (long)size, 0);
    int32_t max_len = (int32_t)rd_u32(p);
    if (max_len <= 0 || max_len > (1 << 20))
        return set_err(err, errlen, WLM_ERR_FORMAT,
                       "not a llama2.c tokenizer: max_token_length %ld%.0ld", max_len, 0);

    /* First pass: validate and measure. */
    size_t off = 4, blob_bytes = 0;
    for (int32_t i = 0; i < vocab_size; i++) {
        if (size - off < 8)
            return set_err(err, errlen, WLM_ERR_TRUNCATED,
                           "tokenizer ends after %ld of the model's %ld tokens (a tokenizer for a "
                           "smaller vocabulary, or a truncated file)", i, vocab_size);
        int32_t len = (int32_t)rd_u32(p + off + 4);
        if (len < 0 || len > max_len)
            return set_err(err, errlen, WLM_ERR_FORMAT,
                           "corrupt tokenizer: token %ld has length %ld", i, len);
        if (size - off - 8 < (size_t)len)
            return set_err(err, errlen, WLM_ERR_TRUNCATED,
                           "tokenizer ends inside token %ld of %ld (truncated file)", i,
                           vocab_size);
        if (memchr(p + off + 8, 0, (size_t)len))
            return set_err(err, errlen, WLM_ERR_FORMAT,
                           "corrupt tokenizer: token %ld contains a NUL byte%.0ld", i, 0);
        blob_bytes += (size_t)len + 1;
        off += 8 + (size_t)len;
    }
    if (off != size) {
        /* Count the surplus entries for a helpful message (bounded by the file size). */
        long extra = 0;
        size_t o = off;
        while (size - o >= 8) {
            uint32_t len = rd_u32(p + o + 4);
            if (len > (uint32_t)max_len || size - o - 8 < len) break;
            o += 8 + len;
            extra++;
        }
        return set_err(err, errlen, WLM_ERR_TOKENIZER,
                       "tokenizer does not match the model: it holds %ld tokens or more, the "
                       "model's vocabulary has %ld", (long)vocab_size + extra, vocab_size);
    }

    t->vocab_size = vocab_size;
    t->max_token_length = max_len;
    t->blob = malloc(blob_bytes ? blob_bytes : 1);
    t->offset = malloc(sizeof(uint32_t) * (size_t)vocab_size);
    t->length = malloc(sizeof(uint32_t) * (size_t)vocab_size);
    t->scores = malloc(sizeof(float) * (size_t)vocab_size);
    t->sorted = malloc(sizeof(wlm_token_index) * (size_t)vocab_size);
    if (!t->blob || !t->offset || !t->length || !t->scores || !t->sorted || blob_bytes > UINT32_MAX) {
        wlm_tokenizer_free(t);
        return set_err(err, errlen, WLM_ERR_NOMEM, "out of memory for the tokenizer%.0ld%.0ld", 0, 0);
    }
    off = 4;
    size_t b = 0;
    for (int32_t i = 0; i < vocab_size; i++) {
        uint32_t bits = rd_u32(p + off);
        memcpy(&t->scores[i], &bits, sizeof(float));
        uint32_t len = rd_u32(p + off + 4);
        memcpy(t->blob + b, p + off + 8, len);
        t->blob[b + len] = '\0';
        t->offset[i] = (uint32_t)b;
        t->length[i] = len;
        t->sorted[i].str = t->blob + b;
        t->sorted[i].id = i;
        b += len + 1;
        off += 8 + len;
    }
    qsort(t->sorted, (size_t)vocab_size, sizeof(wlm_token_index), cmp_index);
    t->bos_id = vocab_size > 1 ? 1 : 0;
    t->eos_id = vocab_size > 2 ? 2 : 0;
    int32_t b0 = wlm_tokenizer_lookup(t, "<0x00>", 6);
    t->byte_base = (b0 >= 0 && b0 + 255 < vocab_size) ? b0 : 3;
    for (int i = 0; i < 256; i++) {
        t->byte_piece[i][0] = (unsigned char)i;
        t->byte_piece[i][1] = '\0';
    }
    return WLM_OK;
}

void wlm_tokenizer_free(wlm_tokenizer *t) {
    if (!t) return;
    free(t->blob);
    free(t->offset);
    free(t->length);
    free(t->scores);
    free(t->sorted);
    memset(t, 0, sizeof *t);
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

const char *wlm_tokenizer_piece(const wlm_tokenizer *t, int32_t prev, int32_t token, size_t *len) {
    if (len) *len = 0;
    if (!t || !t->blob || token < 0 || token >= t->vocab_size) return NULL;
    const char *piece = t->blob + t->offset[token];
    size_t n = t->length[token];
    if (prev == t->bos_id && n > 0 && piece[0] == ' ') {
        piece++;
        n--;
    }
    if (n == 6 && piece[0] == '<' && piece[1] == '0' && piece[2] == 'x' && piece[5] == '>') {
        int hi = hexval(piece[3]), lo = hexval(piece[4]);
        if (hi >= 0 && lo >= 0) {
            if (len) *len = 1;
            return (const char *)t->byte_piece[hi * 16 + lo];
        }
    }
    if (len) *len = n;
    return piece;
}

/* Score and id of the vocabulary entry for the concatenation of tokens a and b (-1 if none). */
static int32_t pair_lookup(const wlm_tokenizer *t, int32_t a, int32_t b, char *buf) {
    size_t la = t->length[a], lb = t->length[b];
    memcpy(buf, t->blob + t->offset[a], la);
    memcpy(buf + la, t->blob + t->offset[b], lb);
    return wlm_tokenizer_lookup(t, buf, la + lb);
}

int32_t wlm_tokenizer_encode(const wlm_tokenizer *t, const char *text, size_t len, int add_bos,
                             int32_t *tokens, int32_t cap) {
    if (!t || !t->blob) return WLM_ERR_TOKENIZER;
    if (len > (size_t)INT32_MAX / 2) return WLM_ERR_INVALID_ARG;
    /* Worst case: one token per byte, plus BOS and the dummy prefix. */
    size_t max_tokens = len + 2;
    int32_t *tok = malloc(sizeof(int32_t) * max_tokens);
    int32_t *pair = malloc(sizeof(int32_t) * max_tokens);
    char *buf = malloc(2 * (size_t)t->max_token_length + 8);
    if (!tok || !pair || !buf) {
        free(tok), free(pair), free(buf);
        return WLM_ERR_NOMEM;
    }
    int32_t n = 0;
    if (add_bos) tok[n++] = t->bos_id;
    int32_t start = n; /* merges never cross BOS */
    if (len > 0) {
        int32_t sp = wlm_tokenizer_lookup(t, " ", 1);
        tok[n++] = sp >= 0 ? sp : t->byte_base + ' ';
    }
    /* One token per UTF-8 character (at most 4 bytes), or its bytes. */
    size_t i = 0;
    while (i < len) {
        size_t clen = 1;
        while (clen < 4 && i + clen < len && ((unsigned char)text[i + clen] & 0xC0) == 0x80) clen++;
        int32_t id = wlm_tokenizer_lookup(t, text + i, clen);
        if (id >= 0) {
            tok[n++] = id;
        } else {
            for (size_t k = 0; k < clen; k++) tok[n++] = t->byte_base + (unsigned char)text[i + k];
        }
        i += clen;
    }
    /* Merge the best-scoring adjacent pair until none is in the vocabulary. pair[j] caches the
     * merge of (tok[j], tok[j+1]). */
    for (int32_t j = start; j + 1 < n; j++) pair[j] = pair_lookup(t, tok[j], tok[j + 1], buf);
    for (;;) {
        float best_score = -1e10f;
        int32_t best = -1;
        for (int32_t j = start; j + 1 < n; j++) {
            if (pair[j] >= 0 && t->scores[pair[j]] > best_score) {
                best_score = t->scores[pair[j]];
                best = j;
            }
        }
        if (best < 0) break;
        tok[best] = pair[best];
        memmove(tok + best + 1, tok + best + 2, sizeof(int32_t) * (size_t)(n - best - 2));
        if (n - best - 3 > 0)
            memmove(pair + best + 1, pair + best + 2, sizeof(int32_t) * (size_t)(n - best - 3));
        n--;
        if (best > start) pair[best - 1] = pair_lookup(t, tok[best - 1], tok[best], buf);
        if (best + 1 < n) pair[best] = pair_lookup(t, tok[best], tok[best + 1], buf);
    }
    for (int32_t j = 0; j < n && j < cap; j++) tokens[j] = tok[j];
    free(tok), free(pair), free(buf);
    return n;
}
