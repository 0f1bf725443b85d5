/*
 * vocab_gguf.c — a GGUF vocabulary (tokenizer.ggml.*) into the shared tables, for the SPM
 * (model "llama"), byte-level BPE (model "gpt2") and WordPiece (model "bert") flavours: pieces, scores and token types,
 * special ids and flags, llama.cpp's token-type fix-ups and end-of-generation set, user-defined
 * tokens (longest first), each token's decoded text, and (BPE) the merges and pre-tokenizer.
 * It does not encode: spm.c, bpe.c and wordpiece.c do.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/errors.h"
#include "tokenizer/tokenizer.h"
#include "wasmlm.h"

#define fail wlm_errorf /* errors.h */

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
    "</s>", "<eos>", "<turn|>", "<|tool_response>", NULL}; /* (the last two: Gemma 4's) */

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
        for (size_t k = 3; k < 5 && k < n && wlm_hexval(p[k]) >= 0; k++) v = v * 16 + wlm_hexval(p[k]);
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
            if (wlm_vocab_cmp_bytes(r[i - 1].str, r[i - 1].len, r[i].str, r[i].len) == 0) {
                a = r[i - 1].id, b = r[i].id;
                break;
            }
        free(r);
    }
    wlm_printable(name, sizeof name, t->blob + t->offset[a], t->length[a]);
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
    /* "gemma4": llama.cpp's BPE over raw UTF-8 with the gemma4 pre-tokenizer (spm_bpe) */
    const int spm_bpe = wlm_gguf_str_eq(model->str, "gemma4");
    int bpe = wlm_gguf_str_eq(model->str, "gpt2") || spm_bpe, wpm = wlm_gguf_str_eq(model->str, "bert");
    if (!bpe && !wpm && !wlm_gguf_str_eq(model->str, "llama")) {
        wlm_printable(name, sizeof name, model->str.ptr, model->str.len);
        return fail(err, errlen, WLM_ERR_UNSUPPORTED,
                    "tokenizer model \"%s\" is not supported (only \"llama\", SentencePiece BPE, "
                    "\"gpt2\", byte-level BPE, \"gemma4\", BPE over UTF-8, and \"bert\", "
                    "WordPiece)", name);
    }

    const wlm_gguf_kv *tokens, *scores = NULL, *types = NULL;
    rc = wlm_gguf_get_arr(g, "tokenizer.ggml.tokens", WLM_GGUF_STRING, &tokens, err, errlen);
    if (rc != WLM_OK) return rc;
    uint64_t n64 = tokens->arr.n;
    if (n64 == 0 || n64 > WLM_TOKENIZER_MAX_VOCAB)
        return fail(err, errlen, WLM_ERR_FORMAT, "tokenizer.ggml.tokens holds %llu tokens "
                    "(1 to %d supported)", (unsigned long long)n64, WLM_TOKENIZER_MAX_VOCAB);
    int32_t n = (int32_t)n64;
    if (!bpe && !wpm && wlm_gguf_find_kv(g, "tokenizer.ggml.scores")) {
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
    if (!wlm_vocab_alloc(t, n, blob_bytes)) goto nomem;
    t->kind = bpe ? WLM_TOKENIZER_BPE : wpm ? WLM_TOKENIZER_WPM : WLM_TOKENIZER_SPM;
    t->sep_id = -1;
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
        wlm_vocab_put_piece(t, i, s.ptr, (uint32_t)s.len, &b);
        double score = 0.0;
        if (scores) wlm_gguf_arr_f64(scores, (uint64_t)i, &score);
        t->scores[i] = (float)score;
        int64_t ty = WLM_TOKEN_NORMAL;
        if (types) wlm_gguf_arr_i64(types, (uint64_t)i, &ty);
        t->type[i] = (uint8_t)(ty >= WLM_TOKEN_NORMAL && ty <= WLM_TOKEN_BYTE ? ty : WLM_TOKEN_UNDEFINED);
    }
    int32_t dup_a = -1, dup_b = -1;
    rc = wlm_vocab_build_index(t, &dup_a, &dup_b);
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
        if ((rc = opt_str(g, "tokenizer.ggml.pre", &pre, &has_pre, err, errlen))) goto fail;
        if (spm_bpe) pre.ptr = "gemma4", pre.len = 6; /* llama.cpp sets it whatever the file says */
        if ((rc = wlm_pretok_init(&t->pre, pre.ptr, pre.len, err, errlen))) goto fail;
        t->spm_bpe = spm_bpe;
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
    } else if (wpm) {
        /* llama.cpp's defaults for "bert" ([CLS] 101, [UNK] 100, [SEP] 102; ids outside the
         * vocabulary keep them); [CLS] is BOS. add_special adds [CLS] and [SEP] whatever
         * add_bos_token says, as llama.cpp does; there is no space prefix. */
        int set = 0;
        t->bos_id = 101, t->eos_id = -1, t->unk_id = 100, t->sep_id = 102;
        if ((rc = special_id(g, "tokenizer.ggml.bos_token_id", n, &t->bos_id, &set, err, errlen)) ||
            (!set && (rc = special_id(g, "tokenizer.ggml.cls_token_id", n, &t->bos_id, NULL, err,
                                      errlen))) ||
            (rc = special_id(g, "tokenizer.ggml.eos_token_id", n, &t->eos_id, NULL, err, errlen)) ||
            (rc = special_id(g, "tokenizer.ggml.seperator_token_id", n, &t->sep_id, NULL, err,
                             errlen)) ||
            (rc = special_id(g, "tokenizer.ggml.unknown_token_id", n, &t->unk_id, NULL, err,
                             errlen)))
            goto fail;
        const char *missing = t->bos_id >= n ? "[CLS] (tokenizer.ggml.cls_token_id)"
                              : t->sep_id >= n ? "[SEP] (tokenizer.ggml.seperator_token_id)"
                              : t->unk_id >= n ? "[UNK] (tokenizer.ggml.unknown_token_id)" : NULL;
        if (missing) {
            rc = fail(err, errlen, WLM_ERR_FORMAT, "the WordPiece vocabulary of %ld tokens has "
                      "no %s", (long)n, missing);
            goto fail;
        }
        add_bos = 1, add_space = 0;
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
    if (wpm) add_bos = 1, add_eos = 0, add_space = 0; /* llama.cpp's WPM ignores these keys */
    if (spm_bpe) add_bos = 1; /* llama.cpp's "workaround for Gemma 4" */
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
        size_t m = bpe ? wlm_bpe_decoded(t, i, t->text + b) : spm_decoded(t, i, t->text + b); /* wpm: as spm */
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
