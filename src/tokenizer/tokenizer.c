/*
 * tokenizer.c — the vocabulary tables shared by every flavour of tokenizer.h (pieces, scores,
 * token types, a hash index for lookups by bytes, special tokens, end-of-generation set), the
 * GGUF vocabulary loader for SPM and BPE, special-token splitting, and two SentencePiece-style
 * BPE flavours (byte-level BPE proper is in bpe.c):
 *   llama2c — run.c's encode/decode over tokenizer.bin, byte for byte (the golden tests depend
 *             on it): byte fallback per UTF-8 character, then the best-scoring pair merged by
 *             rescanning (pair lookups cached between merges; merges never cross BOS).
 *   spm     — llama.cpp's SPM tokenizer over GGUF metadata: user-defined tokens split out first,
 *             "▁" for spaces, a priority queue of bigram merges, byte fallback per symbol.
 * Both take explicit lengths (NUL is an ordinary byte), bound every read of their input and
 * allocate nothing proportional to a count they have not checked.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/errors.h"
#include "tokenizer/tokenizer.h"
#include "wasmlm.h"

/* ------------------------------------------------------------------------------------------ */
/* Shared: errors, the piece index, freeing                                                    */

#define fail wlm_errorf /* errors.h */

static int cmp_bytes(const char *a, size_t la, const char *b, size_t lb) {
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

/* Builds the piece index over the vocabulary's pieces, inserted in id order so that a piece
 * held twice is found as its lowest id. Returns 0, -1 when out of memory, or 1 when a piece
 * repeats and *dup_a < *dup_b are the first such pair met (the index is then incomplete). With
 * dup_a NULL, repeats are allowed (llama2c: run.c does not check them). Memory: the smallest
 * power of two >= 1.5 × vocab_size int32 slots, 6 to 12 bytes per token. */
static int build_piece_index(wlm_tokenizer *t, int32_t *dup_a, int32_t *dup_b) {
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
static int alloc_tables(wlm_tokenizer *t, int32_t n, size_t blob_bytes) {
    t->vocab_size = n;
    t->blob = malloc(blob_bytes ? blob_bytes : 1);
    t->offset = malloc(sizeof(uint32_t) * (size_t)n);
    t->length = malloc(sizeof(uint32_t) * (size_t)n);
    t->scores = malloc(sizeof(float) * (size_t)n);
    return t->blob && t->offset && t->length && t->scores;
}

/* Appends piece i (len bytes) to the blob at *b. */
static void put_piece(wlm_tokenizer *t, int32_t i, const char *piece, uint32_t len, size_t *b) {
    if (len) memcpy(t->blob + *b, piece, len);
    t->blob[*b + len] = '\0';
    t->offset[i] = (uint32_t)*b;
    t->length[i] = len;
    if ((int32_t)len > t->max_token_length) t->max_token_length = (int32_t)len;
    *b += (size_t)len + 1;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
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

/* ------------------------------------------------------------------------------------------ */
/* llama2c: tokenizer.bin, run.c's algorithm                                                   */

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
    if (blob_bytes > UINT32_MAX || !alloc_tables(t, vocab_size, blob_bytes)) {
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
        put_piece(t, i, (const char *)p + off + 8, len, &b);
        off += 8 + len;
    }
    t->max_token_length = max_len; /* run.c sizes its merge buffer from the header */
    if (build_piece_index(t, NULL, NULL) != 0) {
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

static const char *llama2c_piece(const wlm_tokenizer *t, int32_t prev, int32_t token,
                                 size_t *len) {
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
static int32_t llama2c_encode(const wlm_tokenizer *t, const char *text, size_t len, int add_bos,
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

/* ------------------------------------------------------------------------------------------ */
/* spm: GGUF vocabulary (tokenizer.ggml.model = "llama"), llama.cpp's algorithm                 */

#define SPM_SPACE "\xe2\x96\x81" /* U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's space */

/* A printable, bounded copy of a GGUF string for messages. */
static void printable(char *out, size_t cap, const char *s, size_t n) {
    size_t o = 0;
    for (size_t i = 0; i < n && o + 4 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        out[o++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    if (o + 4 >= cap && n > o) memcpy(out + o, "...", 3), o += 3;
    out[o] = '\0';
}

/* An optional integer key: WLM_OK with *present = 0 when missing, FORMAT when not an integer. */
static int opt_int(const wlm_gguf *g, const char *key, int64_t *v, int *present, char *err,
                   size_t errlen) {
    const wlm_gguf_kv *kv = wlm_gguf_find_kv(g, key);
    *present = 0;
    if (!kv) return WLM_OK;
    if (wlm_gguf_kv_i64(kv, v) != WLM_OK)
        return fail(err, errlen, WLM_ERR_FORMAT, "%s has type %s, not an integer", key,
                    wlm_gguf_type_name(kv->type));
    *present = 1;
    return WLM_OK;
}

/* A special-token id key: an id inside the vocabulary replaces *id (llama.cpp keeps the
 * default for ids outside it); *set says whether the key gave an id. */
static int special_id(const wlm_gguf *g, const char *key, int32_t n, int32_t *id, int *set,
                      char *err, size_t errlen) {
    int64_t v;
    int present, rc = opt_int(g, key, &v, &present, err, errlen);
    if (set) *set = 0;
    if (rc != WLM_OK) return rc;
    if (present && v >= 0 && v < n) {
        *id = (int32_t)v;
        if (set) *set = 1;
    }
    return WLM_OK;
}

/*
 * llama.cpp's fix-ups of token types by piece text (llama_vocab::impl::load), which decide how
 * those tokens decode and whether they are split out of text:
 *  - end-of-generation pieces are forced to CONTROL;
 *  - for each of EOT and the FIM roles whose id no key gives, the first piece from its list
 *    (llama.cpp takes the first in hash order; we take the lowest id) is forced to CONTROL;
 *  - gpt-oss's channel pieces become USER_DEFINED, and so does "<|end|>" when the vocabulary
 *    also has "<|return|>" and "<|call|>" (the o200k_harmony workaround).
 */
static const char *const EOG_PIECES[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<end_of_turn>",
    "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>", "<|end_of_text|>", "<end_of_utterance>",
    "</s>", "<eos>", NULL};

static const struct {
    const char *key, *key_old;     /* the id keys that make a text search unnecessary */
    const char *pieces[11];
} ROLE_PIECES[] = {
    {"tokenizer.ggml.eot_token_id", NULL,
     {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
      "<EOT>", "_<EOT>", "<\xef\xbd\x9c" "end" SPM_SPACE "of" SPM_SPACE "sentence\xef\xbd\x9c>",
      "<end_of_utterance>", NULL}},
    {"tokenizer.ggml.eom_token_id", NULL, {"<|eom_id|>", NULL}},
    {"tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.prefix_token_id",
     {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
      "<\xef\xbd\x9c" "fim" SPM_SPACE "begin\xef\xbd\x9c>", "<PRE>", SPM_SPACE "<PRE>",
      "<|code_prefix|>", NULL}},
    {"tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.suffix_token_id",
     {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
      "<\xef\xbd\x9c" "fim" SPM_SPACE "hole\xef\xbd\x9c>", "<SUF>", SPM_SPACE "<SUF>",
      "<|code_suffix|>", NULL}},
    {"tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.middle_token_id",
     {"<|fim_middle|>", "<fim-middle>", "<fim_middle>",
      "<\xef\xbd\x9c" "fim" SPM_SPACE "end\xef\xbd\x9c>", "<MID>", SPM_SPACE "<MID>",
      "<|code_middle|>", NULL}},
    {"tokenizer.ggml.fim_pad_token_id", NULL, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", NULL}},
    {"tokenizer.ggml.fim_rep_token_id", NULL,
     {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", NULL}},
    {"tokenizer.ggml.fim_sep_token_id", NULL, {"<|file_sep|>", NULL}},
};

static int32_t lookup_cstr(const wlm_tokenizer *t, const char *s) {
    return wlm_tokenizer_lookup(t, s, strlen(s));
}

static void add_eog(wlm_tokenizer *t, int32_t id) {
    if (id < 0 || t->n_eog == (int32_t)(sizeof t->eog / sizeof t->eog[0])) return;
    int32_t i = t->n_eog;
    for (int32_t k = 0; k < t->n_eog; k++)
        if (t->eog[k] == id) return;
    while (i > 0 && t->eog[i - 1] > id) { /* keep sorted */
        t->eog[i] = t->eog[i - 1];
        i--;
    }
    t->eog[i] = id;
    t->n_eog++;
}

/* Token-type fix-ups and the end-of-generation set, as llama.cpp builds them. */
static int fix_types(wlm_tokenizer *t, const wlm_gguf *g, char *err, size_t errlen) {
    int32_t role_id[sizeof ROLE_PIECES / sizeof ROLE_PIECES[0]];
    for (size_t r = 0; r < sizeof ROLE_PIECES / sizeof ROLE_PIECES[0]; r++) {
        int32_t id = -1;
        int set = 0, set_old = 0, rc;
        rc = special_id(g, ROLE_PIECES[r].key, t->vocab_size, &id, &set, err, errlen);
        if (rc == WLM_OK && ROLE_PIECES[r].key_old)
            rc = special_id(g, ROLE_PIECES[r].key_old, t->vocab_size, &id, &set_old, err, errlen);
        if (rc != WLM_OK) return rc;
        role_id[r] = id;
        if (set || set_old) continue;
        int32_t first = -1;
        for (int k = 0; ROLE_PIECES[r].pieces[k]; k++) {
            int32_t c = lookup_cstr(t, ROLE_PIECES[r].pieces[k]);
            if (c >= 0 && (first < 0 || c < first)) first = c;
        }
        if (first >= 0) t->type[first] = WLM_TOKEN_CONTROL;
        role_id[r] = first;
    }
    t->eot_id = role_id[0];
    t->eom_id = role_id[1];
    t->n_eog = 0;
    add_eog(t, role_id[5]); /* fim pad, repo, file separator */
    add_eog(t, role_id[6]);
    add_eog(t, role_id[7]);
    for (int k = 0; EOG_PIECES[k]; k++) {
        int32_t c = lookup_cstr(t, EOG_PIECES[k]);
        if (c >= 0) t->type[c] = WLM_TOKEN_CONTROL;
        add_eog(t, c);
    }
    add_eog(t, t->eos_id);
    add_eog(t, t->eot_id);
    add_eog(t, t->eom_id);
    static const char *const CHANNEL[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"};
    for (int k = 0; k < 4; k++) {
        int32_t c = lookup_cstr(t, CHANNEL[k]);
        if (c >= 0) t->type[c] = WLM_TOKEN_USER_DEFINED;
    }
    /* o200k_harmony: "<|end|>" ends a message, not the generation */
    int32_t end = lookup_cstr(t, "<|end|>");
    if (end >= 0 && lookup_cstr(t, "<|return|>") >= 0 && lookup_cstr(t, "<|call|>") >= 0) {
        t->type[end] = WLM_TOKEN_USER_DEFINED;
        int32_t k = 0;
        for (int32_t i = 0; i < t->n_eog; i++)
            if (t->eog[i] != end) t->eog[k++] = t->eog[i];
        t->n_eog = k;
    }
    return WLM_OK;
}

int wlm_tokenizer_is_eog(const wlm_tokenizer *t, int32_t token) {
    if (!t || token < 0) return 0;
    if (t->kind == WLM_TOKENIZER_LLAMA2C) return token == t->eos_id || token == t->bos_id;
    for (int32_t i = 0; i < t->n_eog; i++)
        if (t->eog[i] == token) return 1;
    return 0;
}

/* The bytes token i decodes to (llama.cpp's token_to_piece without special rendering). */
static size_t spm_decoded(const wlm_tokenizer *t, int32_t i, char *out) {
    const char *p = t->blob + t->offset[i];
    size_t n = t->length[i], o = 0;
    switch (t->type[i]) {
    case WLM_TOKEN_NORMAL:
        for (size_t k = 0; k < n; k++) {
            if (k + 3 <= n && memcmp(p + k, SPM_SPACE, 3) == 0) {
                if (out) out[o] = ' ';
                o++;
                k += 2;
            } else {
                if (out) out[o] = p[k];
                o++;
            }
        }
        return o;
    case WLM_TOKEN_USER_DEFINED:
        if (out) memcpy(out, p, n);
        return n;
    case WLM_TOKEN_BYTE: {
        /* llama.cpp parses the two characters after "<0x" as hex (strtol: up to the first
         * non-hex character). */
        int v = 0;
        for (size_t k = 3; k < 5 && k < n && hexval(p[k]) >= 0; k++) v = v * 16 + hexval(p[k]);
        if (out) out[0] = (char)v;
        return 1;
    }
    default: /* control, unknown, unused, undefined: nothing */
        return 0;
    }
}

/* User-defined tokens, longest piece first (ties by id), with phi-3's right-strip flag. */
static int user_before(const wlm_tokenizer *t, int32_t a, int32_t b) {
    if (t->length[a] != t->length[b]) return t->length[a] > t->length[b];
    return a < b;
}

/* Sorts t->user by user_before: a bottom-up merge sort (qsort has no context argument in
 * C11; Gemma 3 has thousands of special tokens, too many for an insertion sort). 0, or -1 when
 * out of memory. */
static int sort_user(wlm_tokenizer *t) {
    const size_t n = (size_t)t->n_user;
    int32_t *tmp = malloc(sizeof(int32_t) * (n ? n : 1));
    if (!tmp) return -1;
    int32_t *src = t->user, *dst = tmp;
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                dst[k++] = user_before(t, src[j], src[i]) ? src[j++] : src[i++];
            while (i < mid) dst[k++] = src[i++];
            while (j < hi) dst[k++] = src[j++];
        }
        int32_t *x = src;
        src = dst, dst = x;
    }
    if (src != t->user) memcpy(t->user, src, sizeof(int32_t) * n);
    free(tmp);
    return 0;
}

static int contains_ci(const char *s, size_t n, const char *needle) {
    size_t m = strlen(needle);
    for (size_t i = 0; i + m <= n; i++) {
        size_t k = 0;
        while (k < m) {
            char c = s[i + k];
            if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
            if (c != needle[k]) break;
            k++;
        }
        if (k == m) return 1;
    }
    return 0;
}

/* An optional STRING key: WLM_OK with *present = 0 when missing, FORMAT when another type. */
static int opt_str(const wlm_gguf *g, const char *key, wlm_gguf_str *v, int *present, char *err,
                   size_t errlen) {
    const wlm_gguf_kv *kv = wlm_gguf_find_kv(g, key);
    *present = 0;
    if (!kv) return WLM_OK;
    if (kv->type != WLM_GGUF_STRING)
        return fail(err, errlen, WLM_ERR_FORMAT, "%s has type %s, not STRING", key,
                    wlm_gguf_type_name(kv->type));
    *v = kv->str;
    *present = 1;
    return WLM_OK;
}

/* A BPE special-token id: must lie inside the vocabulary (an error naming the key otherwise). */
static int bpe_special_id(const wlm_gguf *g, const char *key, int32_t n, int32_t *id, char *err,
                          size_t errlen) {
    int64_t v;
    int present, rc = opt_int(g, key, &v, &present, err, errlen);
    if (rc != WLM_OK || !present) return rc;
    if (v < 0 || v >= n)
        return fail(err, errlen, WLM_ERR_FORMAT, "%s = %lld is outside the vocabulary of %ld "
                    "tokens", key, (long long)v, (long)n);
    *id = (int32_t)v;
    return WLM_OK;
}

/* The error for a vocabulary that holds a piece twice, naming the first such pair in byte
 * order (lowest ids first), as the loader reported it when its index was a sorted array; the
 * pair a < b found by the hash index when there is no memory to sort. */
int wlm_piece_ref_cmp(const void *pa, const void *pb) {
    const wlm_piece_ref *a = pa, *b = pb;
    int c = cmp_bytes(a->str, a->len, b->str, b->len);
    if (c) return c;
    return (a->id > b->id) - (a->id < b->id);
}

static int duplicate_error(const wlm_tokenizer *t, int32_t a, int32_t b, char *err,
                           size_t errlen) {
    char name[64];
    const int32_t n = t->vocab_size;
    wlm_piece_ref *r = malloc(sizeof *r * (size_t)n);
    if (r) {
        for (int32_t i = 0; i < n; i++)
            r[i] = (wlm_piece_ref){t->blob + t->offset[i], t->length[i], i};
        qsort(r, (size_t)n, sizeof *r, wlm_piece_ref_cmp);
        for (int32_t i = 1; i < n; i++)
            if (cmp_bytes(r[i - 1].str, r[i - 1].len, r[i].str, r[i].len) == 0) {
                a = r[i - 1].id, b = r[i].id;
                break;
            }
        free(r);
    }
    printable(name, sizeof name, t->blob + t->offset[a], t->length[a]);
    return fail(err, errlen, WLM_ERR_FORMAT, "tokens %ld and %ld are the same piece \"%s\"",
                (long)a, (long)b, name);
}

int wlm_tokenizer_load_gguf(wlm_tokenizer *t, const wlm_gguf *g, char *err, size_t errlen) {
    char name[64];
    int rc;
    if (!t || !g) return fail(err, errlen, WLM_ERR_INVALID_ARG, "no tokenizer or GGUF file");
    memset(t, 0, sizeof *t);

    const wlm_gguf_kv *model = wlm_gguf_find_kv(g, "tokenizer.ggml.model");
    if (!model) return fail(err, errlen, WLM_ERR_FORMAT, "the GGUF file has no tokenizer "
                                                          "(tokenizer.ggml.model is missing)");
    if (model->type != WLM_GGUF_STRING)
        return fail(err, errlen, WLM_ERR_FORMAT, "tokenizer.ggml.model has type %s, not STRING",
                    wlm_gguf_type_name(model->type));
    int bpe = wlm_gguf_str_eq(model->str, "gpt2");
    if (!bpe && !wlm_gguf_str_eq(model->str, "llama")) {
        printable(name, sizeof name, model->str.ptr, model->str.len);
        return fail(err, errlen, WLM_ERR_UNSUPPORTED,
                    "tokenizer model \"%s\" is not supported (only \"llama\", SentencePiece BPE, "
                    "and \"gpt2\", byte-level BPE)", name);
    }

    const wlm_gguf_kv *tokens, *scores = NULL, *types = NULL;
    rc = wlm_gguf_get_arr(g, "tokenizer.ggml.tokens", WLM_GGUF_STRING, &tokens, err, errlen);
    if (rc != WLM_OK) return rc;
    uint64_t n64 = tokens->arr.n;
    if (n64 == 0 || n64 > WLM_TOKENIZER_MAX_VOCAB)
        return fail(err, errlen, WLM_ERR_FORMAT, "tokenizer.ggml.tokens holds %llu tokens "
                    "(1 to %d supported)", (unsigned long long)n64, WLM_TOKENIZER_MAX_VOCAB);
    int32_t n = (int32_t)n64;
    if (!bpe && wlm_gguf_find_kv(g, "tokenizer.ggml.scores")) {
        rc = wlm_gguf_get_arr(g, "tokenizer.ggml.scores", WLM_GGUF_FLOAT32, &scores, err, errlen);
        if (rc != WLM_OK) return rc;
        if (scores->arr.n != n64)
            return fail(err, errlen, WLM_ERR_FORMAT, "tokenizer.ggml.scores holds %llu values "
                        "for %ld tokens", (unsigned long long)scores->arr.n, (long)n);
    }
    if (wlm_gguf_find_kv(g, "tokenizer.ggml.token_type")) {
        rc = wlm_gguf_get_arr(g, "tokenizer.ggml.token_type", -1, &types, err, errlen);
        if (rc != WLM_OK) return rc;
        if (types->arr.type != WLM_GGUF_INT32 && types->arr.type != WLM_GGUF_UINT32)
            return fail(err, errlen, WLM_ERR_FORMAT, "tokenizer.ggml.token_type holds %s values, "
                        "not INT32", wlm_gguf_type_name(types->arr.type));
        if (types->arr.n != n64)
            return fail(err, errlen, WLM_ERR_FORMAT, "tokenizer.ggml.token_type holds %llu values "
                        "for %ld tokens", (unsigned long long)types->arr.n, (long)n);
    }

    /* Measure the pieces (an empty piece becomes "[EMPTY_<id>]", as in llama.cpp). */
    size_t blob_bytes = 0;
    for (int32_t i = 0; i < n; i++) {
        wlm_gguf_str s;
        if (wlm_gguf_arr_str(tokens, (uint64_t)i, &s) != WLM_OK)
            return fail(err, errlen, WLM_ERR_FORMAT, "tokenizer.ggml.tokens: bad element %ld",
                        (long)i);
        size_t len = s.len ? s.len : 20;
        if (len > (1u << 20))
            return fail(err, errlen, WLM_ERR_FORMAT, "token %ld is %zu bytes long", (long)i, len);
        blob_bytes += len + 1;
        if (blob_bytes > UINT32_MAX / 2)
            return fail(err, errlen, WLM_ERR_FORMAT, "the vocabulary's pieces exceed 2 GB");
    }
    if (!alloc_tables(t, n, blob_bytes)) goto nomem;
    t->kind = bpe ? WLM_TOKENIZER_BPE : WLM_TOKENIZER_SPM;
    t->type = malloc((size_t)n);
    t->text_offset = malloc(sizeof(uint32_t) * (size_t)n);
    t->text_length = malloc(sizeof(uint32_t) * (size_t)n);
    if (!t->type || !t->text_offset || !t->text_length) goto nomem;
    size_t b = 0;
    for (int32_t i = 0; i < n; i++) {
        wlm_gguf_str s;
        char empty[24];
        wlm_gguf_arr_str(tokens, (uint64_t)i, &s);
        if (s.len == 0) {
            s.len = (size_t)snprintf(empty, sizeof empty, "[EMPTY_%ld]", (long)i);
            s.ptr = empty;
        }
        put_piece(t, i, s.ptr, (uint32_t)s.len, &b);
        double score = 0.0;
        if (scores) wlm_gguf_arr_f64(scores, (uint64_t)i, &score);
        t->scores[i] = (float)score;
        int64_t ty = WLM_TOKEN_NORMAL;
        if (types) wlm_gguf_arr_i64(types, (uint64_t)i, &ty);
        t->type[i] = (uint8_t)(ty >= WLM_TOKEN_NORMAL && ty <= WLM_TOKEN_BYTE ? ty : WLM_TOKEN_UNDEFINED);
    }
    int32_t dup_a = -1, dup_b = -1;
    rc = build_piece_index(t, &dup_a, &dup_b);
    if (rc < 0) goto nomem;
    if (rc > 0) {
        rc = duplicate_error(t, dup_a, dup_b, err, errlen);
        goto fail;
    }

    /* Special tokens and flags. */
    int add_bos = 1, add_eos = 0, add_space = 1;
    if (bpe) {
        /* No default BOS / EOS: llama.cpp's BPE default, 11, is "," in the GPT-2, Llama 3 and
         * Qwen vocabularies (a Qwen file without bos_token_id would make "," BOS, and
         * generation stops at BOS). Ids given by keys must lie inside the vocabulary. */
        wlm_gguf_str pre = {0};
        int has_pre;
        if ((rc = opt_str(g, "tokenizer.ggml.pre", &pre, &has_pre, err, errlen)) ||
            (rc = wlm_pretok_init(&t->pre, pre.ptr, pre.len, err, errlen)))
            goto fail;
        t->bos_id = t->eos_id = -1;
        t->unk_id = -1;
        if ((rc = bpe_special_id(g, "tokenizer.ggml.bos_token_id", n, &t->bos_id, err, errlen)) ||
            (rc = bpe_special_id(g, "tokenizer.ggml.eos_token_id", n, &t->eos_id, err, errlen)) ||
            (rc = bpe_special_id(g, "tokenizer.ggml.unknown_token_id", n, &t->unk_id, err,
                                 errlen)))
            goto fail;
        add_bos = t->pre.add_bos, add_space = 0;
        if ((rc = wlm_bpe_load_merges(t, g, err, errlen)) != WLM_OK) goto fail;
        wlm_bpe_init_bytes(t);
    } else {
        t->bos_id = 1, t->eos_id = 2, t->unk_id = 0;
        if ((rc = special_id(g, "tokenizer.ggml.bos_token_id", n, &t->bos_id, NULL, err, errlen)) ||
            (rc = special_id(g, "tokenizer.ggml.eos_token_id", n, &t->eos_id, NULL, err, errlen)) ||
            (rc = special_id(g, "tokenizer.ggml.unknown_token_id", n, &t->unk_id, NULL, err,
                             errlen)))
            goto fail;
        if (t->bos_id >= n) t->bos_id = -1;
        if (t->eos_id >= n) t->eos_id = -1;
        if (t->unk_id >= n) t->unk_id = -1;
    }
    if ((rc = wlm_gguf_get_bool_or(g, "tokenizer.ggml.add_bos_token", add_bos, &add_bos, err,
                                   errlen)) ||
        (rc = wlm_gguf_get_bool_or(g, "tokenizer.ggml.add_eos_token", 0, &add_eos, err, errlen)) ||
        (rc = wlm_gguf_get_bool_or(g, "tokenizer.ggml.add_space_prefix", add_space, &add_space,
                                   err, errlen)))
        goto fail;
    if ((add_bos && t->bos_id < 0) || (add_eos && t->eos_id < 0)) {
        rc = fail(err, errlen, WLM_ERR_FORMAT, "tokenizer.ggml.add_%s_token is true but the "
                  "vocabulary has no %s (tokenizer.ggml.%s_token_id)", add_bos && t->bos_id < 0
                  ? "bos" : "eos", add_bos && t->bos_id < 0 ? "BOS" : "EOS",
                  add_bos && t->bos_id < 0 ? "bos" : "eos");
        goto fail;
    }
    t->add_bos = add_bos, t->add_eos = add_eos, t->add_space_prefix = bpe ? 0 : add_space;
    if ((rc = fix_types(t, g, err, errlen)) != WLM_OK) goto fail;

    /* Byte fallback (SPM): "<0xNN>", else the one-byte piece (llama.cpp's byte_to_token). */
    for (int c = 0; c < 256; c++) {
        char hex[7] = {'<', '0', 'x', "0123456789ABCDEF"[c >> 4], "0123456789ABCDEF"[c & 15], '>', 0};
        char one = (char)c;
        int32_t id = wlm_tokenizer_lookup(t, hex, 6);
        t->byte_id[c] = id >= 0 ? id : wlm_tokenizer_lookup(t, &one, 1);
    }

    /* Decoded pieces: in one pass, as no token decodes to more bytes than its piece (SPM: "▁"
     * to " ", "<0xNN>" to 1 byte; BPE: a stand-in code point to its byte, others kept) — the
     * blob's size bounds the text, which is then trimmed to its size. */
    t->text = malloc(blob_bytes);
    if (!t->text) goto nomem;
    b = 0;
    for (int32_t i = 0; i < n; i++) {
        size_t m = bpe ? wlm_bpe_decoded(t, i, t->text + b) : spm_decoded(t, i, t->text + b);
        t->text[b + m] = '\0';
        t->text_offset[i] = (uint32_t)b;
        t->text_length[i] = (uint32_t)m;
        b += m + 1;
    }
    if (b < blob_bytes) {
        char *shrunk = realloc(t->text, b);
        if (shrunk) t->text = shrunk;
    }

    /* Special tokens split out of the text before merging (llama.cpp's cache_special_tokens):
     * user-defined ones always, control and unknown ones with parse_special. The phi-3 family
     * (by general.name) drops whitespace after them, except after <unk>, <s> and <|endoftext|>. */
    for (int32_t i = 0; i < n; i++)
        t->n_user += t->type[i] == WLM_TOKEN_USER_DEFINED || t->type[i] == WLM_TOKEN_CONTROL ||
                     t->type[i] == WLM_TOKEN_UNKNOWN;
    if (t->n_user) {
        t->user = malloc(sizeof(int32_t) * (size_t)t->n_user);
        t->user_rstrip = calloc((size_t)t->n_user, 1);
        t->user_control = calloc((size_t)t->n_user, 1);
        if (!t->user || !t->user_rstrip || !t->user_control) goto nomem;
        int32_t k = 0;
        for (int32_t i = 0; i < n; i++)
            if (t->type[i] == WLM_TOKEN_USER_DEFINED || t->type[i] == WLM_TOKEN_CONTROL ||
                t->type[i] == WLM_TOKEN_UNKNOWN)
                t->user[k++] = i;
        if (sort_user(t) != 0) goto nomem;
        for (k = 0; k < t->n_user; k++) t->user_control[k] = t->type[t->user[k]] != WLM_TOKEN_USER_DEFINED;
        const wlm_gguf_kv *gn = wlm_gguf_find_kv(g, "general.name");
        if (gn && gn->type == WLM_GGUF_STRING &&
            (contains_ci(gn->str.ptr, gn->str.len, "phi-3") ||
             contains_ci(gn->str.ptr, gn->str.len, "phi3"))) {
            for (k = 0; k < t->n_user; k++) {
                int32_t id = t->user[k];
                t->user_rstrip[k] = id != lookup_cstr(t, "<unk>") && id != lookup_cstr(t, "<s>") &&
                                    id != lookup_cstr(t, "<|endoftext|>");
            }
        }
    }
    return WLM_OK;

nomem:
    rc = fail(err, errlen, WLM_ERR_NOMEM, "out of memory for the tokenizer (%ld tokens)", (long)n);
fail:
    wlm_tokenizer_free(t);
    return rc;
}

/* ---- spm encoding ---- */

/* A piece of the input: raw text [off, off+len), or a user-defined token (id >= 0). */
typedef struct spm_fragment {
    int32_t id;
    size_t off, len;
} spm_fragment;

typedef struct frag_vec {
    spm_fragment *v;
    size_t n, cap;
} frag_vec;

static int push_frag(frag_vec *f, int32_t id, size_t off, size_t len) {
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 16;
        spm_fragment *v = realloc(f->v, sizeof(spm_fragment) * cap);
        if (!v) return WLM_ERR_NOMEM;
        f->v = v;
        f->cap = cap;
    }
    f->v[f->n].id = id;
    f->v[f->n].off = off;
    f->v[f->n].len = len;
    f->n++;
    return WLM_OK;
}

static int is_c_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

/* llama.cpp's tokenizer_st_partition: for each special token, longest first (control and
 * unknown ones only with parse_special), every raw fragment is cut at each non-overlapping
 * occurrence, left to right. */
static int partition(const wlm_tokenizer *t, const char *text, size_t len, int parse_special,
                     frag_vec *out) {
    frag_vec cur = {0}, next = {0};
    int rc = push_frag(&cur, -1, 0, len);
    for (int32_t u = 0; rc == WLM_OK && u < t->n_user; u++) {
        int32_t id = t->user[u];
        if (t->user_control[u] && !parse_special) continue;
        const char *piece = t->blob + t->offset[id];
        size_t plen = t->length[id];
        next.n = 0;
        for (size_t f = 0; rc == WLM_OK && f < cur.n; f++) {
            spm_fragment fr = cur.v[f];
            if (fr.id >= 0 || fr.len < plen) {
                rc = push_frag(&next, fr.id, fr.off, fr.len);
                continue;
            }
            size_t pos = fr.off, end = fr.off + fr.len, p = pos;
            while (rc == WLM_OK && p + plen <= end) {
                const char *q = memchr(text + p, piece[0], end - plen + 1 - p);
                if (!q) break;
                p = (size_t)(q - text);
                if (memcmp(text + p, piece, plen) != 0) {
                    p++;
                    continue;
                }
                if (p > pos) rc = push_frag(&next, -1, pos, p - pos);
                if (rc == WLM_OK) rc = push_frag(&next, id, p, plen);
                pos = p + plen;
                if (t->user_rstrip[u])
                    while (pos < end && is_c_space(text[pos])) pos++;
                p = pos;
            }
            if (rc == WLM_OK && pos < end) rc = push_frag(&next, -1, pos, end - pos);
        }
        frag_vec tmp = cur;
        cur = next;
        next = tmp;
    }
    free(next.v);
    if (rc != WLM_OK) {
        free(cur.v);
        return rc;
    }
    *out = cur;
    return WLM_OK;
}

/* Working memory of one fragment's merge: the escaped text, its symbols, the bigram queue. */
typedef struct spm_symbol {
    int32_t prev, next;   /* neighbours in the list of live symbols, -1 at the ends */
    uint32_t off, n;      /* bytes [off, off+n) of the escaped text; n = 0 once merged away */
} spm_symbol;

typedef struct spm_bigram {
    int32_t left, right;  /* symbol indexes */
    float score;          /* of the merged piece */
    uint32_t size;        /* bytes of left + right when queued (stale entries differ) */
} spm_bigram;

typedef struct spm_work {
    char *esc;            /* (esc_cap) */
    spm_symbol *sym;      /* (esc_cap) at most one symbol per byte */
    spm_bigram *heap;     /* (3 × esc_cap) n - 1 initial bigrams + at most 2 per merge */
    size_t n_heap;
} spm_work;

/* Heap order: higher score first, then the leftmost pair (llama.cpp's comparator). */
static int bigram_before(const spm_bigram *a, const spm_bigram *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static void heap_push(spm_work *w, spm_bigram e) {
    size_t i = w->n_heap++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!bigram_before(&e, &w->heap[parent])) break;
        w->heap[i] = w->heap[parent];
        i = parent;
    }
    w->heap[i] = e;
}

static spm_bigram heap_pop(spm_work *w) {
    spm_bigram top = w->heap[0], last = w->heap[--w->n_heap];
    size_t i = 0, n = w->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && bigram_before(&w->heap[c + 1], &w->heap[c])) c++;
        if (!bigram_before(&w->heap[c], &last)) break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (n) w->heap[i] = last;
    return top;
}

/* Queues the merge of two neighbouring symbols when their bytes are a vocabulary piece. */
static void try_bigram(const wlm_tokenizer *t, spm_work *w, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    uint32_t size = w->sym[left].n + w->sym[right].n;
    int32_t id = wlm_tokenizer_lookup(t, w->esc + w->sym[left].off, size);
    if (id < 0) return;
    spm_bigram e = {left, right, t->scores[id], size};
    heap_push(w, e);
}

/*
 * One raw fragment through llama.cpp's llm_tokenizer_spm_session: escape spaces (with the
 * "▁" prefix when asked), one symbol per UTF-8 character (length from the lead byte alone, as
 * unicode_len_utf8: invalid sequences are not validated), merge the best queued bigram while
 * any is queued, then emit each remaining symbol: its token, or its bytes as byte tokens.
 * llama.cpp would re-split a symbol that is not a piece along its merge history, but every
 * merged symbol is a piece by construction (a merge happens only when the concatenation is
 * one) and an unmerged one cannot equal any bigram's bytes (a symbol's first byte fixes its
 * length), so only the byte fallback can apply.
 */
static int spm_session(const wlm_tokenizer *t, const char *s, size_t n, int prefix,
                       spm_work *w, wlm_id_vec *out) {
    static const unsigned char utf8_len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    size_t m = 0;
    if (prefix) memcpy(w->esc, SPM_SPACE, 3), m = 3;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ') memcpy(w->esc + m, SPM_SPACE, 3), m += 3;
        else w->esc[m++] = s[i];
    }
    int32_t n_sym = 0;
    for (size_t off = 0; off < m;) {
        size_t len = utf8_len[(unsigned char)w->esc[off] >> 4];
        if (len > m - off) len = m - off;
        spm_symbol *y = &w->sym[n_sym];
        y->prev = n_sym - 1;
        y->off = (uint32_t)off;
        y->n = (uint32_t)len;
        off += len;
        y->next = off == m ? -1 : n_sym + 1;
        n_sym++;
    }
    w->n_heap = 0;
    for (int32_t i = 1; i < n_sym; i++) try_bigram(t, w, i - 1, i);
    while (w->n_heap > 0) {
        spm_bigram e = heap_pop(w);
        spm_symbol *l = &w->sym[e.left], *r = &w->sym[e.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != e.size) continue; /* stale */
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) w->sym[r->next].prev = e.left;
        try_bigram(t, w, l->prev, e.left);
        try_bigram(t, w, e.left, l->next);
    }
    for (int32_t i = n_sym ? 0 : -1; i >= 0; i = w->sym[i].next) {
        const spm_symbol *y = &w->sym[i];
        int32_t id = wlm_tokenizer_lookup(t, w->esc + y->off, y->n);
        if (id >= 0) {
            if (wlm_id_vec_push(out, id) != WLM_OK) return WLM_ERR_NOMEM;
            continue;
        }
        for (uint32_t k = 0; k < y->n; k++) {
            int32_t bid = t->byte_id[(unsigned char)w->esc[y->off + k]];
            if (bid < 0) bid = t->unk_id; /* llama.cpp throws here; we fall back to <unk> */
            if (bid < 0) return WLM_ERR_TOKENIZER;
            if (wlm_id_vec_push(out, bid) != WLM_OK) return WLM_ERR_NOMEM;
        }
    }
    return WLM_OK;
}

/* Both GGUF flavours: BOS, special tokens split out, each raw fragment through SPM or BPE, EOS
 * (llama.cpp's llama_vocab::impl::tokenize). */
static int32_t gguf_encode(const wlm_tokenizer *t, const char *text, size_t len, unsigned flags,
                           int32_t *tokens, int32_t cap) {
    if (len > (size_t)INT32_MAX / 4) return WLM_ERR_INVALID_ARG;
    const int add_special = (flags & WLM_TOKENIZE_ADD_SPECIAL) != 0;
    wlm_id_vec out = {0};
    frag_vec frags = {0};
    spm_work w = {0};
    wlm_bpe_work bw;
    memset(&bw, 0, sizeof bw);
    int rc = WLM_OK;
    if (add_special && t->add_bos && t->bos_id >= 0) rc = wlm_id_vec_push(&out, t->bos_id);
    if (rc == WLM_OK && len > 0)
        rc = partition(t, text, len, (flags & WLM_TOKENIZE_PARSE_SPECIAL) != 0, &frags);
    if (rc == WLM_OK && frags.n > 0 && t->kind == WLM_TOKENIZER_BPE) {
        for (size_t f = 0; rc == WLM_OK && f < frags.n; f++) {
            const spm_fragment *fr = &frags.v[f];
            if (fr->id >= 0) rc = wlm_id_vec_push(&out, fr->id);
            else rc = wlm_bpe_encode_fragment(t, text + fr->off, fr->len, &bw, &out);
        }
    } else if (rc == WLM_OK && frags.n > 0) {
        /* Size the work buffers for the longest escaped fragment. */
        size_t esc_cap = 0;
        for (size_t f = 0; f < frags.n; f++) {
            if (frags.v[f].id >= 0) continue;
            size_t m = 3 + frags.v[f].len;
            for (size_t i = 0; i < frags.v[f].len; i++) m += text[frags.v[f].off + i] == ' ' ? 2 : 0;
            if (m > esc_cap) esc_cap = m;
        }
        if (esc_cap) {
            w.esc = malloc(esc_cap);
            w.sym = malloc(sizeof(spm_symbol) * esc_cap);
            w.heap = esc_cap <= SIZE_MAX / (3 * sizeof(spm_bigram))
                         ? malloc(sizeof(spm_bigram) * 3 * esc_cap) : NULL;
            if (!w.esc || !w.sym || !w.heap) rc = WLM_ERR_NOMEM;
        }
        int prev_special = 1; /* the text start counts as after a special token */
        for (size_t f = 0; rc == WLM_OK && f < frags.n; f++) {
            const spm_fragment *fr = &frags.v[f];
            if (fr->id >= 0) {
                rc = wlm_id_vec_push(&out, fr->id);
                prev_special = 1;
            } else {
                rc = spm_session(t, text + fr->off, fr->len, t->add_space_prefix && prev_special,
                                 &w, &out);
                prev_special = 0;
            }
        }
    }
    if (rc == WLM_OK && add_special && t->add_eos && t->eos_id >= 0) rc = wlm_id_vec_push(&out, t->eos_id);
    if (rc == WLM_OK && out.n > (size_t)INT32_MAX) rc = WLM_ERR_NOMEM;
    if (rc == WLM_OK)
        for (size_t j = 0; j < out.n && j < (size_t)cap; j++) tokens[j] = out.v[j];
    int32_t n = rc == WLM_OK ? (int32_t)out.n : rc;
    free(out.v), free(frags.v), free(w.esc), free(w.sym), free(w.heap);
    wlm_bpe_work_free(&bw);
    return n;
}

static const char *spm_piece(const wlm_tokenizer *t, int32_t prev, int32_t token, size_t *len) {
    const char *p = t->text + t->text_offset[token];
    size_t n = t->text_length[token];
    if (prev >= 0 && prev == t->bos_id && t->add_space_prefix && n > 0 && p[0] == ' ') {
        p++;
        n--;
    }
    if (len) *len = n;
    return p;
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
        return llama2c_encode(t, text, len, (flags & WLM_TOKENIZE_ADD_SPECIAL) != 0, tokens, cap);
    case WLM_TOKENIZER_SPM:
    case WLM_TOKENIZER_BPE: return gguf_encode(t, text, len, flags, tokens, cap);
    default: return WLM_ERR_TOKENIZER;
    }
}

const char *wlm_tokenizer_piece(const wlm_tokenizer *t, int32_t prev, int32_t token, size_t *len) {
    if (len) *len = 0;
    if (!t || !t->blob || token < 0 || token >= t->vocab_size) return NULL;
    switch (t->kind) {
    case WLM_TOKENIZER_LLAMA2C: return llama2c_piece(t, prev, token, len);
    case WLM_TOKENIZER_SPM: return spm_piece(t, prev, token, len);
    case WLM_TOKENIZER_BPE:
        if (len) *len = t->text_length[token];
        return t->text + t->text_offset[token];
    default: return NULL;
    }
}

