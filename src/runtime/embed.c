/*
 * embed.c — embeddings and reranking scores: tokenized texts through the one batched forward
 * pass (forward.c), each text its own sequence (bidirectional attention over the whole text for
 * an encoder, causal for a decoder), the final hidden states pooled as llama.cpp's build_pooling
 * (none, mean, cls, last, rank: a reranker's classifier head), projected by the optional dense
 * layers (build_dense_out: EmbeddingGemma) and normalized as llama.cpp's common_embd_normalize. It does not tokenize texts (the caller does, or wlm_tokenize_pair for a
 * reranker's pair) and keeps nothing between calls: the KV cache is only the pass's scratch.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"

int wlm_model_embed_info(const wlm_model *model, wlm_embed_info *info) {
    if (!model || !info) return WLM_ERR_INVALID_ARG;
    if (!model->loaded || model->vocab_only) return WLM_ERR_STATE;
    const wlm_hparams *p = &model->hp;
    const wlm_weights *w = &model->w;
    memset(info, 0, sizeof *info);
    info->n_embd = p->dim;
    info->pooling = p->pooling;
    info->causal = !p->bidirectional;
    info->generative = !p->bidirectional && w->wcls.data != NULL;
    info->n_rank_out = w->cls_out.data ? p->n_cls_out : w->cls.data ? p->dim : 0;
    return WLM_OK;
}

/* Every "{key}" of s (n bytes) replaced by v (vn bytes), as llama.cpp's string_replace_all: a
 * new buffer (*out_len bytes + NUL) or NULL when out of memory. */
static char *replace_all(const char *s, size_t n, const char *key, const char *v, size_t vn,
                         size_t *out_len) {
    const size_t kn = strlen(key);
    size_t count = 0;
    for (size_t i = 0; i + kn <= n;) {
        if (memcmp(s + i, key, kn) == 0) count++, i += kn;
        else i++;
    }
    if (vn > kn && count > (SIZE_MAX - n - 1) / (vn - kn)) return NULL;
    const size_t len = n + count * vn - count * kn;
    char *o = malloc(len + 1);
    if (!o) return NULL;
    size_t j = 0;
    for (size_t i = 0; i < n;) {
        if (i + kn <= n && memcmp(s + i, key, kn) == 0) {
            if (vn) memcpy(o + j, v, vn);
            j += vn, i += kn;
        } else {
            o[j++] = s[i++];
        }
    }
    o[j] = 0;
    *out_len = j;
    return o;
}

/* A decoder reranker's input (Qwen3-Reranker): the file's tokenizer.chat_template.rerank with
 * "{query}" and then "{document}" replaced, tokenized with its control tokens parsed and nothing
 * added — llama.cpp's format_prompt_rerank when the model has a "rerank" template. */
static int32_t tokenize_rerank_template(const wlm_tokenizer *t, const char *tpl, size_t tpl_len,
                                        const char *query, size_t query_len, const char *doc,
                                        size_t doc_len, int32_t *tokens, int32_t cap) {
    size_t n1 = 0, n2 = 0;
    char *s1 = replace_all(tpl, tpl_len, "{query}", query ? query : "", query_len, &n1);
    char *s2 = s1 ? replace_all(s1, n1, "{document}", doc ? doc : "", doc_len, &n2) : NULL;
    free(s1);
    if (!s2) return WLM_ERR_NOMEM;
    const int32_t n = wlm_tokenizer_encode(t, s2, n2, WLM_TOKENIZE_PARSE_SPECIAL, tokens, cap);
    free(s2);
    return n;
}

int32_t wlm_tokenize_pair(const wlm_model *model, const char *query, size_t query_len,
                          const char *doc, size_t doc_len, int32_t *tokens, int32_t cap) {
    if (!model || (!query && query_len) || (!doc && doc_len) || cap < 0 || (!tokens && cap))
        return WLM_ERR_INVALID_ARG;
    if (!model->has_tokenizer) return WLM_ERR_TOKENIZER;
    const wlm_tokenizer *t = &model->tok;
    size_t tpl_len = 0;
    const char *tpl = wlm_model_meta_string(model, "tokenizer.chat_template.rerank", &tpl_len);
    if (tpl) return tokenize_rerank_template(t, tpl, tpl_len, query, query_len, doc, doc_len,
                                             tokens, cap);
    /* llama.cpp's format_prompt_rerank: BOS if the vocabulary adds one, the query, EOS (or SEP
     * when there is no EOS) if it adds EOS, SEP if it adds SEP (WordPiece does), the document,
     * EOS if it adds EOS. For BERT: [CLS] query [SEP] document. */
    const int wpm = t->kind == WLM_TOKENIZER_WPM;
    const int32_t eos = t->eos_id >= 0 ? t->eos_id : wpm ? t->sep_id : -1;
    const int32_t head = t->add_bos && t->bos_id >= 0;
    const int32_t tail = t->add_eos && eos >= 0;
    const int32_t sep = wpm;
    int32_t nq = wlm_tokenizer_encode(t, query ? query : "", query_len, 0, NULL, 0);
    if (nq < 0) return nq;
    int32_t nd = wlm_tokenizer_encode(t, doc ? doc : "", doc_len, 0, NULL, 0);
    if (nd < 0) return nd;
    const int64_t total = (int64_t)head + nq + tail + sep + nd + tail;
    if (total > INT32_MAX) return WLM_ERR_INVALID_ARG;
    if (total > cap) return (int32_t)total;
    int32_t o = 0;
    if (head) tokens[o++] = t->bos_id;
    wlm_tokenizer_encode(t, query ? query : "", query_len, 0, tokens + o, nq);
    o += nq;
    if (tail) tokens[o++] = eos;
    if (sep) tokens[o++] = t->sep_id;
    wlm_tokenizer_encode(t, doc ? doc : "", doc_len, 0, tokens + o, nd);
    o += nd;
    if (tail) tokens[o++] = eos;
    return o;
}

/* llama.cpp's common_embd_normalize: -1 none, 0 max |x| as 32760 (int16), 2 Euclidean, any
 * other p the p-norm (1: taxicab); sums in double, the scale applied in float. */
static void normalize(float *v, int32_t n, int32_t norm) {
    double sum = 0.0;
    if (norm < 0) return;
    if (norm == 0) {
        for (int32_t i = 0; i < n; i++)
            if (sum < fabs((double)v[i])) sum = fabs((double)v[i]);
        sum /= 32760.0;
    } else if (norm == 2) {
        for (int32_t i = 0; i < n; i++) sum += (double)(v[i] * v[i]);
        sum = sqrt(sum);
    } else {
        for (int32_t i = 0; i < n; i++) sum += pow(fabs((double)v[i]), (double)norm);
        sum = pow(sum, 1.0 / (double)norm);
    }
    const float scale = sum > 0.0 ? (float)(1.0 / sum) : 0.0f;
    for (int32_t i = 0; i < n; i++) v[i] *= scale;
}

/* A reranker's head on one hidden state h (dim floats): tanh(cls·h + cls_b) when cls exists,
 * then cls_out·y + cls_out_b when cls.output exists, then a softmax over those scores for a
 * decoder reranker (arch rank_last_softmax) (llama.cpp's LLAMA_POOLING_TYPE_RANK).
 * tmp holds 2 × dim floats; the n_rank_out scores go to out. */
static void rank_head(wlm_context *c, const float *h, float *tmp, float *out) {
    const wlm_weights *w = &c->model->w;
    const int32_t D = c->model->hp.dim;
    const float *y = h;
    if (w->cls.data) {
        wlm_matmul(c, tmp, (size_t)D, &w->cls, h, (size_t)D, 1);
        for (int32_t i = 0; i < D; i++) tmp[i] = tanhf(w->cls_b ? tmp[i] + w->cls_b[i] : tmp[i]);
        y = tmp;
    }
    if (w->cls_out.data) {
        const int32_t n = w->cls_out.rows;
        wlm_matmul(c, tmp + D, (size_t)n, &w->cls_out, y, (size_t)D, 1);
        for (int32_t i = 0; i < n; i++) out[i] = w->cls_out_b ? tmp[D + i] + w->cls_out_b[i] : tmp[D + i];
        if (c->model->hp.arch->rank_last_softmax) wlm_softmax_ggml(out, n);
    } else {
        memcpy(out, y, sizeof(float) * (size_t)D);
    }
}

int32_t wlm_embed(wlm_context *ctx, const int32_t *tokens, const int32_t *lengths,
                  int32_t n_texts, int32_t pooling, int32_t normalize_p, float *out, size_t cap) {
    if (!ctx) return WLM_ERR_INVALID_ARG;
    wlm_context *c = ctx;
    c->errmsg[0] = '\0';
    const wlm_model *m = c->model;
    const wlm_hparams *p = &m->hp;
    const int32_t D = p->dim;
    if (!tokens || !lengths || n_texts < 1 || (!out && cap))
        return wlm_set_error(c->errmsg, WLM_ERR_INVALID_ARG,
                             "wlm_embed needs tokens, lengths and at least one text");
    int active = c->beam.active;
    for (int32_t i = 0; i < c->n_gen; i++) active |= c->gens[i].active;
    if (active)
        return wlm_set_error(c->errmsg, WLM_ERR_STATE,
                             "a generation or beam search is in progress (reset the context)");
    if (pooling == WLM_POOLING_UNSPECIFIED) pooling = p->pooling;
    if (pooling < WLM_POOLING_NONE || pooling > WLM_POOLING_RANK)
        return wlm_set_error(c->errmsg, WLM_ERR_INVALID_ARG,
                             "pooling %d is not one of none (0), mean (1), cls (2), last (3), "
                             "rank (4)", (int)pooling);
    wlm_embed_info info = {0};
    wlm_model_embed_info(m, &info);
    if (pooling == WLM_POOLING_RANK && info.n_rank_out == 0)
        return wlm_set_error(c->errmsg, WLM_ERR_INVALID_ARG,
                             "rank pooling needs a reranker's classifier head (tensors cls / "
                             "cls.output), which this %s model does not have", p->arch->name);
    const int32_t n_out = pooling == WLM_POOLING_RANK ? info.n_rank_out : D;
    uint64_t n_tok = 0;
    for (int32_t t = 0; t < n_texts; t++) {
        if (lengths[t] < 1)
            return wlm_set_error(c->errmsg, WLM_ERR_INVALID_ARG,
                                 "text %d has %d tokens (at least 1: tokenize with the special "
                                 "tokens)", (int)t, (int)lengths[t]);
        if (lengths[t] > c->n_ctx)
            return wlm_set_error(c->errmsg, WLM_ERR_CONTEXT_FULL,
                                 "text %d has %d tokens; the context holds %d", (int)t,
                                 (int)lengths[t], (int)c->n_ctx);
        n_tok += (uint64_t)lengths[t];
    }
    for (uint64_t i = 0; i < n_tok; i++)
        if (tokens[i] < 0 || tokens[i] >= p->vocab_size)
            return wlm_set_error(c->errmsg, WLM_ERR_INVALID_ARG,
                                 "token id %d at index %llu is outside the vocabulary 0..%d",
                                 (int)tokens[i], (unsigned long long)i, (int)p->vocab_size - 1);
    const uint64_t need = pooling == WLM_POOLING_NONE ? n_tok * (uint64_t)D
                                                      : (uint64_t)n_texts * (uint64_t)n_out;
    if (need > (uint64_t)INT32_MAX)
        return wlm_set_error(c->errmsg, WLM_ERR_NOMEM, "%llu floats of embeddings are too many",
                             (unsigned long long)need);
    if (need > cap) return (int32_t)need;

    const int32_t B = c->batch_cap;
    float *hidden = malloc(sizeof(float) * (size_t)B * (size_t)D);
    float *tmp = malloc(sizeof(float) * (2 * (size_t)D + (size_t)n_out));
    int32_t *no_logits = malloc(sizeof(int32_t) * (size_t)B);
    int32_t *ent_len = !p->bidirectional ? NULL : malloc(sizeof(int32_t) * (size_t)B);
    int rc = WLM_OK;
    if (!hidden || !tmp || !no_logits || (p->bidirectional && !ent_len)) {
        rc = wlm_set_error(c->errmsg, WLM_ERR_NOMEM, "out of memory for %d hidden states",
                           (int)B);
        goto done;
    }
    for (int32_t i = 0; i < B; i++) no_logits[i] = -1;
    if (pooling == WLM_POOLING_MEAN) memset(out, 0, sizeof(float) * (size_t)need);
    c->hidden = hidden;
    c->ent_len = ent_len;

    /* Groups of consecutive texts, one sequence each: at most n_seq_max texts, and for a
     * bidirectional model at most batch_cap (= n_ctx) tokens, so each text passes whole. A causal
     * model's group may be longer: it runs in chunks of batch_cap entries, each attending to the
     * cache of the earlier ones, as a prompt's prefill. */
    size_t off = 0;       /* first token of the group in `tokens` */
    size_t tok_out = 0;   /* NONE: tokens output so far */
    for (int32_t t0 = 0; t0 < n_texts && rc == WLM_OK;) {
        int32_t k = 0;
        int64_t group = 0;
        while (t0 + k < n_texts && k < c->n_seq_max &&
               (k == 0 || !p->bidirectional || group + lengths[t0 + k] <= B))
            group += lengths[t0 + k++];
        wlm_context_reset(c);
        for (int32_t s = 0; s < k && rc == WLM_OK; s++) {
            rc = wlm_kv_reserve(c, s, 0, lengths[t0 + s]);
            if (rc == WLM_OK) rc = wlm_state_reset(c, s); /* a hybrid's recurrent state, empty */
        }
        int32_t s = 0, pos = 0;   /* the text and position of the next entry */
        for (int64_t e0 = 0; e0 < group && rc == WLM_OK; e0 += B) {
            const int32_t n = group - e0 < B ? (int32_t)(group - e0) : B;
            int32_t s_first = s, pos_first = pos;
            for (int32_t j = 0; j < n; j++) {
                c->ent_seq[j] = s;
                c->ent_pos[j] = pos;
                if (c->ent_rpos) /* M-RoPE: a text token turns by its position in every section */
                    c->ent_rpos[3 * j] = c->ent_rpos[3 * j + 1] = c->ent_rpos[3 * j + 2] = pos;
                if (ent_len) ent_len[j] = lengths[t0 + s];
                c->seqs[s].tokens[pos] = tokens[off + (size_t)(e0 + j)];
                if (++pos == lengths[t0 + s]) s++, pos = 0;
            }
            wlm_forward_batch(c, tokens + off + (size_t)e0, n, no_logits);
            s = s_first, pos = pos_first;
            for (int32_t j = 0; j < n; j++) {
                const float *h = hidden + (size_t)j * D;
                const int32_t len = lengths[t0 + s], t = t0 + s;
                c->seqs[s].n_past = pos + 1;
                float *o = out + (size_t)t * (size_t)n_out;
                switch (pooling) {
                case WLM_POOLING_NONE:
                    memcpy(out + tok_out++ * (size_t)D, h, sizeof(float) * (size_t)D);
                    break;
                case WLM_POOLING_MEAN: { /* llama.cpp: a product with a matrix of 1/len */
                    const float inv = 1.0f / (float)len;
                    for (int32_t i = 0; i < D; i++) o[i] += h[i] * inv;
                    break;
                }
                case WLM_POOLING_CLS:
                    if (pos == 0) memcpy(o, h, sizeof(float) * (size_t)D);
                    break;
                case WLM_POOLING_LAST:
                    if (pos == len - 1) memcpy(o, h, sizeof(float) * (size_t)D);
                    break;
                case WLM_POOLING_RANK: /* the first token, or the last for a decoder reranker */
                    if (pos == (p->arch->rank_last_softmax ? len - 1 : 0)) rank_head(c, h, tmp, o);
                    break;
                }
                if (++pos == len) s++, pos = 0;
            }
        }
        off += (size_t)group;
        t0 += k;
    }
    if (rc == WLM_OK && pooling != WLM_POOLING_RANK) {
        const uint64_t n_vec = pooling == WLM_POOLING_NONE ? n_tok : (uint64_t)n_texts;
        const wlm_weights *w = &m->w;
        float *d2 = w->dense2.data ? malloc(sizeof(float) * (size_t)w->dense2.rows) : NULL;
        if (w->dense2.data && !d2)
            rc = wlm_set_error(c->errmsg, WLM_ERR_NOMEM, "out of memory for the dense layers");
        for (uint64_t v = 0; rc == WLM_OK && v < n_vec; v++) {
            float *e = out + v * (uint64_t)D;
            if (d2) { /* Sentence Transformers' Dense modules: dense_3 · (dense_2 · e) */
                wlm_matmul(c, d2, (size_t)w->dense2.rows, &w->dense2, e, (size_t)D, 1);
                wlm_matmul(c, e, (size_t)D, &w->dense3, d2, (size_t)w->dense2.rows, 1);
            }
            normalize(e, D, normalize_p);
        }
        free(d2);
    }
done:
    c->hidden = NULL;
    c->ent_len = NULL;
    wlm_context_reset(c);
    free(hidden), free(tmp), free(no_logits), free(ent_len);
    return rc == WLM_OK ? (int32_t)need : rc;
}
