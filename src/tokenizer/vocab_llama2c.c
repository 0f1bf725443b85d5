/*
 * vocab_llama2c.c — the llama2c flavour: karpathy's tokenizer.bin (max_token_length, then per
 * piece a float score, an int32 length and the bytes) and run.c's algorithm over it, byte for
 * byte (the golden tests depend on it): byte fallback per UTF-8 character, then the
 * best-scoring pair merged by rescanning (pair lookups cached between merges; merges never
 * cross BOS).
 */
#include <stdlib.h>
#include <string.h>

#include "runtime/errors.h"
#include "tokenizer/tokenizer.h"
#include "wasmlm.h"

#define fail wlm_errorf /* errors.h */

static uint32_t rd_u32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Header check shared by count and load: the int32 max_token_length. */
static int llama2c_header(const unsigned char *p, size_t size, int32_t *max_len, char *err,
                          size_t errlen) {
    if (size < 4)
        return fail(err, errlen, WLM_ERR_TRUNCATED,
                    "truncated tokenizer: %zu bytes, the header needs 4", size);
    *max_len = (int32_t)rd_u32(p);
    if (*max_len <= 0 || *max_len > (1 << 20))
        return fail(err, errlen, WLM_ERR_FORMAT,
                    "not a llama2.c tokenizer: max_token_length %ld", (long)*max_len);
    return WLM_OK;
}

int32_t wlm_tokenizer_count_llama2c(const void *data, size_t size, char *err, size_t errlen) {
    const unsigned char *p = data;
    int32_t max_len = 0;
    if (!data) return fail(err, errlen, WLM_ERR_INVALID_ARG, "tokenizer data is NULL");
    int rc = llama2c_header(p, size, &max_len, err, errlen);
    if (rc != WLM_OK) return rc;
    size_t off = 4;
    int32_t n = 0;
    while (off < size) {
        if (size - off < 8)
            return fail(err, errlen, WLM_ERR_TRUNCATED,
                        "tokenizer ends inside the header of entry %ld", (long)n);
        int32_t len = (int32_t)rd_u32(p + off + 4);
        if (len < 0 || len > max_len)
            return fail(err, errlen, WLM_ERR_FORMAT, "corrupt tokenizer: token %ld has length %ld",
                        (long)n, (long)len);
        if (size - off - 8 < (size_t)len)
            return fail(err, errlen, WLM_ERR_TRUNCATED, "tokenizer ends inside token %ld",
                        (long)n);
        if (n == WLM_TOKENIZER_MAX_VOCAB)
            return fail(err, errlen, WLM_ERR_FORMAT, "tokenizer holds more than %d tokens",
                        WLM_TOKENIZER_MAX_VOCAB);
        off += 8 + (size_t)len;
        n++;
    }
    if (n == 0) return fail(err, errlen, WLM_ERR_FORMAT, "tokenizer holds no tokens");
    return n;
}

int wlm_tokenizer_load_llama2c(wlm_tokenizer *t, const void *data, size_t size,
                               int32_t vocab_size, char *err, size_t errlen) {
    memset(t, 0, sizeof *t);
    const unsigned char *p = data;
    int32_t max_len = 0;
    if (!data) return fail(err, errlen, WLM_ERR_INVALID_ARG, "tokenizer data is NULL");
    if (vocab_size <= 0 || vocab_size > WLM_TOKENIZER_MAX_VOCAB)
        return fail(err, errlen, WLM_ERR_INVALID_ARG, "bad vocab_size %ld", (long)vocab_size);
    int rc = llama2c_header(p, size, &max_len, err, errlen);
    if (rc != WLM_OK) return rc;

    /* First pass: validate and measure. */
    size_t off = 4, blob_bytes = 0;
    for (int32_t i = 0; i < vocab_size; i++) {
        if (size - off < 8)
            return fail(err, errlen, WLM_ERR_TRUNCATED,
                        "tokenizer ends after %ld of the model's %ld tokens (a tokenizer for a "
                        "smaller vocabulary, or a truncated file)", (long)i, (long)vocab_size);
        int32_t len = (int32_t)rd_u32(p + off + 4);
        if (len < 0 || len > max_len)
            return fail(err, errlen, WLM_ERR_FORMAT, "corrupt tokenizer: token %ld has length %ld",
                        (long)i, (long)len);
        if (size - off - 8 < (size_t)len)
            return fail(err, errlen, WLM_ERR_TRUNCATED,
                        "tokenizer ends inside token %ld of %ld (truncated file)", (long)i,
                        (long)vocab_size);
        if (memchr(p + off + 8, 0, (size_t)len))
            return fail(err, errlen, WLM_ERR_FORMAT, "corrupt tokenizer: token %ld contains a NUL byte",
                        (long)i);
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
        return fail(err, errlen, WLM_ERR_TOKENIZER,
                    "tokenizer does not match the model: it holds %ld tokens or more, the "
                    "model's vocabulary has %ld", (long)vocab_size + extra, (long)vocab_size);
    }
    if (blob_bytes > UINT32_MAX || !wlm_vocab_alloc(t, vocab_size, blob_bytes)) {
        wlm_tokenizer_free(t);
        return fail(err, errlen, WLM_ERR_NOMEM, "out of memory for the tokenizer");
    }
    t->kind = WLM_TOKENIZER_LLAMA2C;
    off = 4;
    size_t b = 0;
    for (int32_t i = 0; i < vocab_size; i++) {
        uint32_t bits = rd_u32(p + off);
        memcpy(&t->scores[i], &bits, sizeof(float));
        uint32_t len = rd_u32(p + off + 4);
        wlm_vocab_put_piece(t, i, (const char *)p + off + 8, len, &b);
        off += 8 + len;
    }
    t->max_token_length = max_len; /* run.c sizes its merge buffer from the header */
    if (wlm_vocab_build_index(t, NULL, NULL) != 0) {
        wlm_tokenizer_free(t);
        return fail(err, errlen, WLM_ERR_NOMEM, "out of memory for the tokenizer");
    }
    t->bos_id = vocab_size > 1 ? 1 : 0;
    t->eos_id = vocab_size > 2 ? 2 : 0;
    t->unk_id = -1;
    int32_t b0 = wlm_tokenizer_lookup(t, "<0x00>", 6);
    t->byte_base = (b0 >= 0 && b0 + 255 < vocab_size) ? b0 : 3;
    for (int i = 0; i < 256; i++) {
        t->byte_piece[i][0] = (unsigned char)i;
        t->byte_piece[i][1] = '\0';
    }
    return WLM_OK;
}

const char *wlm_llama2c_piece(const wlm_tokenizer *t, int32_t prev, int32_t token,
                                 size_t *len) {
    const char *piece = t->blob + t->offset[token];
    size_t n = t->length[token];
    if (prev == t->bos_id && n > 0 && piece[0] == ' ') {
        piece++;
        n--;
    }
    if (n == 6 && piece[0] == '<' && piece[1] == '0' && piece[2] == 'x' && piece[5] == '>') {
        int hi = wlm_hexval(piece[3]), lo = wlm_hexval(piece[4]);
        if (hi >= 0 && lo >= 0) {
            if (len) *len = 1;
            return (const char *)t->byte_piece[hi * 16 + lo];
        }
    }
    if (len) *len = n;
    return piece;
}

/* Score and id of the vocabulary entry for the concatenation of tokens a and b (-1 if none). */
static int32_t pair_lookup(const wlm_tokenizer *t, int32_t a, int32_t b) {
    return wlm_tokenizer_lookup2(t, t->blob + t->offset[a], t->length[a],
                                 t->blob + t->offset[b], t->length[b]);
}

/* run.c's byte fallback: byte b is token byte_base + b. A vocabulary too small to hold the 256
 * byte tokens (run.c would index past its arrays) gets id 0, <unk> in llama2.c vocabularies. */
static int32_t byte_token(const wlm_tokenizer *t, unsigned char b) {
    const int32_t id = t->byte_base + b;
    return id < t->vocab_size ? id : 0;
}

/* run.c's encode(), with a cache of pair merges: returns the count or a negative status. */
int32_t wlm_llama2c_encode(const wlm_tokenizer *t, const char *text, size_t len, int add_bos,
                              int32_t *tokens, int32_t cap) {
    if (len > (size_t)INT32_MAX / 2) return WLM_ERR_INVALID_ARG;
    /* Worst case: one token per byte, plus BOS and the dummy prefix. */
    size_t max_tokens = len + 2;
    int32_t *tok = malloc(sizeof(int32_t) * max_tokens);
    int32_t *pair = malloc(sizeof(int32_t) * max_tokens);
    if (!tok || !pair) {
        free(tok), free(pair);
        return WLM_ERR_NOMEM;
    }
    int32_t n = 0;
    if (add_bos) tok[n++] = t->bos_id;
    int32_t start = n; /* merges never cross BOS */
    if (len > 0) {
        int32_t sp = wlm_tokenizer_lookup(t, " ", 1);
        tok[n++] = sp >= 0 ? sp : byte_token(t, ' ');
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
            for (size_t k = 0; k < clen; k++) tok[n++] = byte_token(t, (unsigned char)text[i + k]);
        }
        i += clen;
    }
    /* Merge the best-scoring adjacent pair until none is in the vocabulary. pair[j] caches the
     * merge of (tok[j], tok[j+1]). */
    for (int32_t j = start; j + 1 < n; j++) pair[j] = pair_lookup(t, tok[j], tok[j + 1]);
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
        if (best > start) pair[best - 1] = pair_lookup(t, tok[best - 1], tok[best]);
        if (best + 1 < n) pair[best] = pair_lookup(t, tok[best], tok[best + 1]);
    }
    for (int32_t j = 0; j < n && j < cap; j++) tokens[j] = tok[j];
    free(tok), free(pair);
    return n;
}
