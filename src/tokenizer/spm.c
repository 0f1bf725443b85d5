/*
 * spm.c — encoding text with a GGUF vocabulary: special and user-defined tokens split out first
 * (shared by every GGUF flavour), then each raw fragment by llama.cpp's SPM algorithm ("▁" for
 * spaces, a priority queue of bigram merges, byte fallback per symbol), bpe.c or wordpiece.c; and the
 * SPM flavour's piece for a token.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"
#include "wasmlm.h"

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

/* Every GGUF flavour: BOS ([CLS]), special tokens split out, each raw fragment through SPM, BPE
 * or WordPiece, EOS ([SEP]) (llama.cpp's llama_vocab::impl::tokenize). */
int32_t wlm_gguf_encode(const wlm_tokenizer *t, const char *text, size_t len, unsigned flags,
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
    if (rc == WLM_OK && frags.n > 0 && t->kind == WLM_TOKENIZER_WPM) {
        for (size_t f = 0; rc == WLM_OK && f < frags.n; f++) {
            const spm_fragment *fr = &frags.v[f];
            if (fr->id >= 0) rc = wlm_id_vec_push(&out, fr->id);
            else rc = wlm_wpm_encode_fragment(t, text + fr->off, fr->len, &out);
        }
    } else if (rc == WLM_OK && frags.n > 0 && t->kind == WLM_TOKENIZER_BPE) {
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
    if (rc == WLM_OK && add_special && t->kind == WLM_TOKENIZER_WPM) rc = wlm_id_vec_push(&out, t->sep_id);
    if (rc == WLM_OK && out.n > (size_t)INT32_MAX) rc = WLM_ERR_NOMEM;
    if (rc == WLM_OK)
        for (size_t j = 0; j < out.n && j < (size_t)cap; j++) tokens[j] = out.v[j];
    int32_t n = rc == WLM_OK ? (int32_t)out.n : rc;
    free(out.v), free(frags.v), free(w.esc), free(w.sym), free(w.heap);
    wlm_bpe_work_free(&bw);
    return n;
}

const char *wlm_spm_piece(const wlm_tokenizer *t, int32_t prev, int32_t token, size_t *len) {
    const char *p = t->text + t->text_offset[token];
    size_t n = t->text_length[token];
    if (prev >= 0 && prev == t->bos_id && t->add_space_prefix && n > 0 && p[0] == ' ') {
        p++;
        n--;
    }
    if (len) *len = n;
    return p;
}

