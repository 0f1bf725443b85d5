/*
 * bpe.c — byte-level BPE (tokenizer.ggml.model = "gpt2": GPT-2, Llama 3, Qwen, SmolLM…), as
 * llama.cpp's llm_tokenizer_bpe_session does it: the pre-tokenizer (pretokenize.c) cuts the
 * text into pieces, each piece's UTF-8 bytes are written as GPT-2's printable stand-ins
 * (bytes_to_unicode: the 188 printable Latin-1 bytes stand for themselves, the other 68 become
 * U+0100…U+0143), then adjacent symbols are merged lowest merge rank first (leftmost on ties)
 * until no ranked pair is left; a symbol that is not a token falls back to its single bytes.
 * Also here: the merge table and the decoded text of each token. Loading of the vocabulary
 * itself, special-token splitting and dispatch live in tokenizer.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/errors.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"
#include "wasmlm.h"

#define fail wlm_errorf

/* ---- GPT-2's byte ↔ code point mapping ------------------------------------------------------ */

static int printable_byte(int b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

/* The code point that stands for byte b. */
static uint32_t byte_cp(int b) {
    if (printable_byte(b)) return (uint32_t)b;
    int k = 0; /* the others, in byte order, take U+0100, U+0101, ... */
    for (int c = 0; c < b; c++) k += !printable_byte(c);
    return 0x100u + (uint32_t)k;
}

void wlm_bpe_init_bytes(wlm_tokenizer *t) {
    for (int b = 0; b < 256; b++) {
        uint32_t cp = byte_cp(b);
        t->byte_enc_len[b] = (uint8_t)wlm_utf8_encode(cp, t->byte_enc[b]);
    }
}

/* The byte a stand-in code point means, or -1 (code points outside the mapping). The 68
 * non-printable bytes, in order, are 0x00-0x20 (33), 0x7F-0xA0 (34) and 0xAD: U+0100 + k is
 * the k-th of them. */
static int cp_byte(uint32_t cp) {
    if (cp < 0x100) return printable_byte((int)cp) ? (int)cp : -1;
    if (cp > 0x143) return -1;
    uint32_t k = cp - 0x100;
    if (k < 33) return (int)k;
    if (k < 67) return (int)(0x7F + (k - 33));
    return 0xAD;
}

/* ---- decoded text ---------------------------------------------------------------------------- */

/* The bytes token i decodes to (llama.cpp's token_to_piece for BPE without special rendering):
 * normal tokens mapped back through the byte mapping (a code point outside it is kept as its
 * UTF-8), user-defined tokens verbatim, every other type nothing. */
size_t wlm_bpe_decoded(const wlm_tokenizer *t, int32_t i, char *out) {
    const unsigned char *p = (const unsigned char *)t->blob + t->offset[i];
    size_t n = t->length[i], o = 0;
    if (t->type[i] == WLM_TOKEN_USER_DEFINED) {
        if (out) memcpy(out, p, n);
        return n;
    }
    if (t->spm_bpe) { /* Gemma 4: "▁" is a space, <0xNN> its byte, the rest raw UTF-8 */
        if (t->type[i] == WLM_TOKEN_BYTE) {
            unsigned v = 0;
            if (n != 6 || sscanf((const char *)p, "<0x%2X>", &v) != 1) return 0;
            if (out) out[0] = (char)v;
            return 1;
        }
        if (t->type[i] != WLM_TOKEN_NORMAL) return 0;
        for (size_t k = 0; k < n;) {
            if (k + 3 <= n && p[k] == 0xE2 && p[k + 1] == 0x96 && p[k + 2] == 0x81) {
                if (out) out[o] = ' ';
                o++, k += 3;
                continue;
            }
            if (out) out[o] = (char)p[k];
            o++, k++;
        }
        return o;
    }
    if (t->type[i] != WLM_TOKEN_NORMAL) return 0;
    for (size_t k = 0; k < n;) {
        size_t used;
        uint32_t cp = wlm_utf8_decode(p + k, n - k, &used);
        int b = cp_byte(cp);
        if (b >= 0) {
            if (out) out[o] = (char)b;
            o++;
        } else {
            if (out) memcpy(out + o, p + k, used);
            o += used;
        }
        k += used;
    }
    return o;
}

/* ---- merges ---------------------------------------------------------------------------------- */

static uint32_t pair_hash(int32_t a, int32_t b) {
    uint32_t h = (uint32_t)a * 0x9E3779B1u ^ ((uint32_t)b + 0x7F4A7C15u) * 0x85EBCA77u;
    return h ^ (h >> 15);
}

/* Rank and result of merging tokens a and b: 1 when ranked, else 0. */
static int find_merge(const wlm_tokenizer *t, int32_t a, int32_t b, uint32_t *rank,
                      int32_t *result) {
    if (!t->merge_tab) return 0;
    for (uint32_t s = pair_hash(a, b) & t->merge_mask;; s = (s + 1) & t->merge_mask) {
        const uint32_t *e = &t->merge_tab[4 * (size_t)s];
        if (e[0] == 0) return 0;
        if (e[0] == (uint32_t)a + 1 && e[1] == (uint32_t)b) {
            *rank = e[2];
            *result = (int32_t)e[3];
            return 1;
        }
    }
}

int wlm_bpe_load_merges(wlm_tokenizer *t, const wlm_gguf *g, char *err, size_t errlen) {
    static const char *key = "tokenizer.ggml.merges";
    const wlm_gguf_kv *merges;
    if (!wlm_gguf_find_kv(g, key))
        return fail(err, errlen, WLM_ERR_FORMAT, "%s is missing (a BPE vocabulary needs it)", key);
    int rc = wlm_gguf_get_arr(g, key, WLM_GGUF_STRING, &merges, err, errlen);
    if (rc != WLM_OK) return rc;
    uint64_t n = merges->arr.n;
    if (n > WLM_TOKENIZER_MAX_VOCAB)
        return fail(err, errlen, WLM_ERR_FORMAT, "%s holds %llu merges (at most %d supported)",
                    key, (unsigned long long)n, WLM_TOKENIZER_MAX_VOCAB);
    /* at least 1.5 slots per merge (16 bytes each): 24 to 48 bytes per merge */
    uint32_t slots = 16;
    while (slots < n + n / 2) slots *= 2;
    t->merge_tab = calloc((size_t)slots * 4, sizeof(uint32_t));
    if (!t->merge_tab) return fail(err, errlen, WLM_ERR_NOMEM, "out of memory for %llu merges",
                                   (unsigned long long)n);
    t->merge_mask = slots - 1;
    t->n_merges = (int32_t)n;
    char name[64];
    for (uint64_t i = 0; i < n; i++) {
        wlm_gguf_str s;
        if (wlm_gguf_arr_str(merges, i, &s) != WLM_OK)
            return fail(err, errlen, WLM_ERR_FORMAT, "%s: bad element %llu", key,
                        (unsigned long long)i);
        /* llama.cpp splits at the first space after the first byte */
        const char *sp = s.len > 1 ? memchr(s.ptr + 1, ' ', s.len - 1) : NULL;
        if (!sp) {
            wlm_printable(name, sizeof name, s.ptr, s.len);
            return fail(err, errlen, WLM_ERR_FORMAT, "%s[%llu] \"%s\" is not two tokens "
                        "separated by a space", key, (unsigned long long)i, name);
        }
        size_t la = (size_t)(sp - s.ptr), lb = s.len - la - 1;
        int32_t a = wlm_tokenizer_lookup(t, s.ptr, la), b = wlm_tokenizer_lookup(t, sp + 1, lb);
        if (a < 0 || b < 0) {
            wlm_printable(name, sizeof name, a < 0 ? s.ptr : sp + 1, a < 0 ? la : lb);
            return fail(err, errlen, WLM_ERR_FORMAT, "%s[%llu] names \"%s\", which is not a "
                        "token of tokenizer.ggml.tokens", key, (unsigned long long)i, name);
        }
        /* the merged piece: a token (-1 if the vocabulary lacks it: such a symbol falls back to
         * bytes, as in llama.cpp) */
        int32_t result = la + lb <= (size_t)t->max_token_length
                             ? wlm_tokenizer_lookup2(t, s.ptr, la, sp + 1, lb) : -1;
        uint32_t slot = pair_hash(a, b) & t->merge_mask;
        uint32_t *e = &t->merge_tab[4 * (size_t)slot];
        while (e[0] && !(e[0] == (uint32_t)a + 1 && e[1] == (uint32_t)b)) {
            slot = (slot + 1) & t->merge_mask;
            e = &t->merge_tab[4 * (size_t)slot];
        }
        if (e[0]) continue; /* a repeated pair keeps its first rank */
        e[0] = (uint32_t)a + 1, e[1] = (uint32_t)b, e[2] = (uint32_t)i, e[3] = (uint32_t)result;
    }
    return WLM_OK;
}

/* ---- encoding -------------------------------------------------------------------------------- */

typedef struct bpe_symbol {
    int32_t prev, next;  /* live neighbours, -1 at the ends */
    uint32_t off, n;     /* bytes [off, off+n) of the encoded word; n = 0 once merged away */
    int32_t id;          /* the token these bytes are, or -1 */
} bpe_symbol;

typedef struct bpe_bigram {
    uint32_t rank;
    int32_t left, right;
    uint32_t size;       /* bytes of left + right when queued (stale entries differ) */
    int32_t result;
} bpe_bigram;

static int bigram_before(const bpe_bigram *a, const bpe_bigram *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static void heap_push(wlm_bpe_work *w, bpe_bigram e) {
    bpe_bigram *h = w->heap;
    size_t i = w->n_heap++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!bigram_before(&e, &h[parent])) break;
        h[i] = h[parent];
        i = parent;
    }
    h[i] = e;
}

static bpe_bigram heap_pop(wlm_bpe_work *w) {
    bpe_bigram *h = w->heap;
    bpe_bigram top = h[0], last = h[--w->n_heap];
    size_t i = 0, n = w->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && bigram_before(&h[c + 1], &h[c])) c++;
        if (!bigram_before(&h[c], &last)) break;
        h[i] = h[c];
        i = c;
    }
    if (n) h[i] = last;
    return top;
}

static void try_bigram(const wlm_tokenizer *t, wlm_bpe_work *w, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const bpe_symbol *l = &w->sym[left], *r = &w->sym[right];
    if (l->id < 0 || r->id < 0) return; /* merges only join tokens (checked at load) */
    bpe_bigram e;
    if (!find_merge(t, l->id, r->id, &e.rank, &e.result)) return;
    e.left = left, e.right = right, e.size = l->n + r->n;
    heap_push(w, e);
}

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return WLM_OK;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *x = realloc(*p, c * elem);
    if (!x) return WLM_ERR_NOMEM;
    *p = x;
    *cap = c;
    return WLM_OK;
}

void wlm_bpe_work_free(wlm_bpe_work *w) {
    if (!w) return;
    free(w->cps), free(w->lens), free(w->word), free(w->sym), free(w->heap);
    wlm_regex_work_free(&w->re);
    memset(w, 0, sizeof *w);
}

/* One pre-token (encoded as w->word[0..m)) through the merges. */
static int bpe_word(const wlm_tokenizer *t, wlm_bpe_work *w, size_t m, wlm_id_vec *out) {
    if (t->pre.ignore_merges) {
        int32_t id = wlm_tokenizer_lookup(t, w->word, m);
        if (id >= 0) return wlm_id_vec_push(out, id);
    }
    if (grow((void **)&w->sym, &w->cap_sym, m, sizeof(bpe_symbol)) ||
        grow((void **)&w->heap, &w->cap_heap, 3 * m, sizeof(bpe_bigram)))
        return WLM_ERR_NOMEM;
    static const unsigned char utf8_len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    int32_t n_sym = 0;
    for (size_t off = 0; off < m;) {
        size_t len = utf8_len[(unsigned char)w->word[off] >> 4];
        if (len > m - off) len = m - off;
        bpe_symbol *y = &w->sym[n_sym];
        y->prev = n_sym - 1;
        y->off = (uint32_t)off;
        y->n = (uint32_t)len;
        y->id = wlm_tokenizer_lookup(t, w->word + off, len);
        off += len;
        y->next = off == m ? -1 : n_sym + 1;
        n_sym++;
    }
    w->n_heap = 0;
    for (int32_t i = 1; i < n_sym; i++) try_bigram(t, w, i - 1, i);
    while (w->n_heap > 0) {
        bpe_bigram e = heap_pop(w);
        bpe_symbol *l = &w->sym[e.left], *r = &w->sym[e.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != e.size) continue; /* stale */
        l->n += r->n;
        l->id = e.result;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) w->sym[r->next].prev = e.left;
        try_bigram(t, w, l->prev, e.left);
        try_bigram(t, w, e.left, l->next);
    }
    for (int32_t i = n_sym ? 0 : -1; i >= 0; i = w->sym[i].next) {
        const bpe_symbol *y = &w->sym[i];
        if (y->id >= 0) {
            if (wlm_id_vec_push(out, y->id) != WLM_OK) return WLM_ERR_NOMEM;
            continue;
        }
        /* not a token: its single bytes that are tokens (llama.cpp drops the others) */
        for (uint32_t k = 0; k < y->n; k++) {
            int32_t id = wlm_tokenizer_lookup(t, w->word + y->off + k, 1);
            if (id >= 0 && wlm_id_vec_push(out, id) != WLM_OK) return WLM_ERR_NOMEM;
        }
    }
    return WLM_OK;
}

int wlm_bpe_encode_fragment(const wlm_tokenizer *t, const char *s, size_t n, wlm_bpe_work *w,
                            wlm_id_vec *out) {
    if (n == 0) return WLM_OK;
    if (grow((void **)&w->cps, &w->cap_cps, n, sizeof(uint32_t))) return WLM_ERR_NOMEM;
    size_t n_cps = 0;
    for (size_t i = 0; i < n;) {
        size_t used;
        uint32_t cp = wlm_utf8_decode((const unsigned char *)s + i, n - i, &used);
        if (t->spm_bpe && cp == ' ') cp = 0x2581; /* Gemma 4: spaces escaped to "▁" */
        w->cps[n_cps++] = cp;
        i += used;
    }
    int rc = wlm_pretok_split(&t->pre, w->cps, n_cps, &w->lens, &w->n_lens, &w->cap_lens, &w->re);
    if (rc != WLM_OK) return rc;
    size_t off = 0;
    for (size_t k = 0; k < w->n_lens; k++) {
        size_t len = w->lens[k];
        /* each code point: its UTF-8 bytes (invalid input became U+FFFD, as in llama.cpp),
         * each byte as its stand-in (at most 2 bytes of UTF-8) */
        if (grow((void **)&w->word, &w->cap_word, 8 * len, 1)) return WLM_ERR_NOMEM;
        size_t m = 0;
        int newlines = 1; /* a run of newlines only */
        for (size_t j = 0; j < len; j++) {
            char u[4];
            size_t ul = wlm_utf8_encode(w->cps[off + j], u);
            newlines &= w->cps[off + j] == '\n';
            if (t->spm_bpe) { /* raw UTF-8 */
                memcpy(w->word + m, u, ul);
                m += ul;
                continue;
            }
            for (size_t b = 0; b < ul; b++) {
                unsigned char c = (unsigned char)u[b];
                memcpy(w->word + m, t->byte_enc[c], t->byte_enc_len[c]);
                m += t->byte_enc_len[c];
            }
        }
        off += len;
        if (t->spm_bpe && newlines) { /* Gemma 4: a newline run that is a token stays whole */
            const int32_t id = wlm_tokenizer_lookup(t, w->word, m);
            if (id >= 0) {
                if ((rc = wlm_id_vec_push(out, id)) != WLM_OK) return rc;
                continue;
            }
        }
        if ((rc = bpe_word(t, w, m, out)) != WLM_OK) return rc;
    }
    return WLM_OK;
}
