/*
 * sequence.c — where an encoded image goes in the text model's sequence, as llama.cpp's mtmd
 * (mtmd.cpp: mtmd_tokenize and the per-projector image wrappers) lays it out: a prompt is cut
 * at the media markers, each text piece tokenized on its own (special tokens parsed, BOS only
 * before the first), and each image replaced by its projector's begin / end tokens around its
 * rows — Gemma 3: <start_of_image> rows <end_of_image>, the rows non-causal among themselves;
 * LFM2 (one piece): <|image_start|> rows <|image_end|>, causal;
 * Qwen2.5-VL: <|vision_start|> rows <|vision_end|>, causal, each row at (t, t + row, t + column)
 * of M-RoPE and the text after it at t + max(columns, rows) (mtmd's set_position_mrope_2d and
 * n_pos; context.c keeps the positions);
 * Idefics3: per tile <fake_token_around_image><row_r_col_c> rows, "\n" after each tile row but
 * the last, then "\n\n"<fake_token_around_image><global-img> overview <fake_token_around_image>
 * (reference: /work/shared/reference/vision-mmproj.md §7). The wrapper texts are tokenized with
 * the model's vocabulary (special tokens parsed), so a vocabulary without those tokens spells
 * them as text, as llama.cpp does.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "vision/vision.h"

/* Tokenizes text (special tokens parsed; flags adds ADD_SPECIAL) and evaluates it on seq. */
static int eval_text(wlm_context *c, int32_t seq, const char *text, size_t len, unsigned flags) {
    int32_t n = wlm_tokenize_ex(c->model, text, len, flags | WLM_TOKENIZE_PARSE_SPECIAL, NULL, 0);
    if (n < 0) return wlm_set_error(c->errmsg, n, "media prompt: the text could not be tokenized");
    if (n == 0) return WLM_OK;
    int32_t *t = malloc(sizeof(int32_t) * (size_t)n);
    if (!t) return wlm_set_error(c->errmsg, WLM_ERR_NOMEM, "media prompt: out of memory");
    wlm_tokenize_ex(c->model, text, len, flags | WLM_TOKENIZE_PARSE_SPECIAL, t, n);
    int32_t *seqs = malloc(sizeof(int32_t) * (size_t)n);
    int rc = WLM_ERR_NOMEM;
    if (seqs) {
        for (int32_t i = 0; i < n; i++) seqs[i] = seq;
        if (c->model->hp.state_floats) {
            /* a recurrent hybrid: the state before the piece's last token is kept, so that a
             * generation can start again from there (begin_on_sequence evaluates the prompt's
             * last token anew; the image rows before it cannot be replayed) */
            rc = n > 1 ? wlm_eval_batch(c, t, seqs, NULL, n - 1) : WLM_OK;
            if (rc == WLM_OK) {
                wlm_state_snapshot(c, seq, WLM_SNAP_PROMPT);
                rc = wlm_eval_batch(c, t + n - 1, seqs, NULL, 1);
            }
        } else {
            rc = wlm_eval_batch(c, t, seqs, NULL, n);
        }
    } else {
        wlm_set_error(c->errmsg, rc, "media prompt: out of memory");
    }
    free(t);
    free(seqs);
    return rc;
}

static int eval_str(wlm_context *c, int32_t seq, const char *s) {
    return eval_text(c, seq, s, strlen(s), 0);
}

/* Where an image's positions go: evaluated on sequence seq of c, or (c NULL) only counted in n,
 * tokenized with model m. One layout for both, so the count is what evaluation takes. */
typedef struct {
    wlm_context *c;
    const wlm_model *m;
    int32_t seq;
    int64_t n;
} image_sink;

static int put_text(image_sink *k, const char *text) {
    if (k->c) return eval_str(k->c, k->seq, text);
    int32_t n = wlm_tokenize_ex(k->m, text, strlen(text), WLM_TOKENIZE_PARSE_SPECIAL, NULL, 0);
    if (n < 0) return n;
    k->n += n;
    return WLM_OK;
}

static int put_rows(image_sink *k, const float *rows, int32_t n, int32_t d, int non_causal) {
    if (k->c) return wlm_eval_embd(k->c, k->seq, rows, n, d, non_causal);
    k->n += n;
    return WLM_OK;
}

/* An image's positions in the sequence, as its projector lays them out (see the file's head). */
static int image_layout(image_sink *k, const wlm_vision *v, const wlm_image_embd *e) {
    const int32_t T = e->tokens_per_piece, D = e->n_embd;
    int rc;
    if (v->row->img_begin) { /* between the row's begin and end texts: one piece, or tiles + thumbnail */
        if ((rc = put_text(k, v->row->img_begin))) return rc;
        if (e->n_pieces > 1 && v->row->tile_fmt) {
            for (int32_t p = 0; p < e->n_pieces - 1; p++) {
                char tag[64];
                snprintf(tag, sizeof tag, v->row->tile_fmt, (int)(p / e->grid_cols) + 1,
                         (int)(p % e->grid_cols) + 1);
                if ((rc = put_text(k, tag)) ||
                    (rc = put_rows(k, e->embd + (size_t)p * (size_t)T * (size_t)D, T, D,
                                   v->row->non_causal)))
                    return rc;
            }
            if ((rc = put_text(k, v->row->thumb_begin)) ||
                (rc = put_rows(k, e->embd + (size_t)(e->n_pieces - 1) * (size_t)T * (size_t)D,
                               e->last_tokens, D, v->row->non_causal)))
                return rc;
        } else if (v->row->mrope) { /* Qwen2.5-VL: the rows' 2-D M-RoPE positions (qwen2vl) */
            if (k->c) rc = wlm_eval_embd_grid(k->c, k->seq, e->embd, e->n_tokens, D, v->row->non_causal,
                                              e->last_cols, e->last_rows);
            else rc = put_rows(k, e->embd, e->n_tokens, D, v->row->non_causal);
            if (rc) return rc;
        } else if ((rc = put_rows(k, e->embd, e->n_tokens, D, v->row->non_causal))) {
            return rc;
        }
        return put_text(k, v->row->img_end);
    }
    /* idefics3 */
    for (int32_t r = 0; r < e->grid_rows; r++) {
        for (int32_t col = 0; col < e->grid_cols; col++) {
            char tag[96];
            snprintf(tag, sizeof tag, "<fake_token_around_image><row_%d_col_%d>", (int)r + 1, (int)col + 1);
            const float *rows = e->embd + (size_t)(r * e->grid_cols + col) * (size_t)T * (size_t)D;
            if ((rc = put_text(k, tag)) || (rc = put_rows(k, rows, T, D, 0))) return rc;
        }
        if (r + 1 < e->grid_rows && (rc = put_text(k, "\n"))) return rc;
    }
    const float *overview = e->embd + (size_t)(e->n_pieces - 1) * (size_t)T * (size_t)D;
    if (e->grid_rows && (rc = put_text(k, "\n\n"))) return rc;
    if ((rc = put_text(k, "<fake_token_around_image><global-img>")) ||
        (rc = put_rows(k, overview, T, D, 0)))
        return rc;
    return put_text(k, "<fake_token_around_image>");
}

int wlm_eval_image(wlm_context *ctx, int32_t seq, const wlm_vision *v, const wlm_image_embd *e) {
    if (!ctx) return WLM_ERR_INVALID_ARG;
    ctx->errmsg[0] = '\0';
    if (!v || !v->loaded || !e || !e->embd)
        return wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG,
                             "wlm_eval_image: %s", !v || !v->loaded ? "no loaded vision model" : "no image");
    if (!ctx->model) return wlm_set_error(ctx->errmsg, WLM_ERR_STATE, "context has no model");
    if (e->n_embd != ctx->model->hp.dim)
        return wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG,
                             "the image's rows are %d wide but the text model's embeddings are %d: "
                             "this mmproj belongs to another model", (int)e->n_embd,
                             (int)ctx->model->hp.dim);
    image_sink k = {ctx, ctx->model, seq, 0};
    return image_layout(&k, v, e);
}

int32_t wlm_image_positions(const wlm_model *model, const wlm_vision *v, const wlm_image_embd *e) {
    if (!model || !model->loaded || !model->has_tokenizer || !v || !v->loaded || !e || !e->embd ||
        e->n_embd != model->hp.dim)
        return WLM_ERR_INVALID_ARG;
    image_sink k = {NULL, model, 0, 0};
    int rc = image_layout(&k, v, e);
    if (rc != WLM_OK) return rc;
    return k.n > INT32_MAX ? WLM_ERR_INVALID_ARG : (int32_t)k.n;
}

/* The images of a media prompt: a contiguous array or an array of pointers (one is NULL). */
typedef struct {
    const wlm_image_embd *arr;
    const wlm_image_embd *const *ptrs;
} media_images;

static const wlm_image_embd *media_image(media_images im, int32_t i) {
    return im.ptrs ? im.ptrs[i] : &im.arr[i];
}

/* Checks a media prompt against its images: one WLM_MEDIA_MARKER per image, a loaded vision
 * model when there are images. Returns the status, with the message in ctx's errmsg. */
static int media_check(wlm_context *ctx, const wlm_vision *v, const char *prompt, size_t len,
                       int32_t n_images) {
    const size_t ml = strlen(WLM_MEDIA_MARKER);
    int32_t markers = 0;
    for (size_t i = 0; i + ml <= len; i++)
        if (!memcmp(prompt + i, WLM_MEDIA_MARKER, ml)) markers++, i += ml - 1;
    if (markers != n_images)
        return wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG,
                             "the prompt has %d %s marker%s but %d image%s %s given", (int)markers,
                             WLM_MEDIA_MARKER, markers == 1 ? "" : "s", (int)n_images,
                             n_images == 1 ? "" : "s", n_images == 1 ? "was" : "were");
    if (n_images > 0 && (!v || !v->loaded))
        return wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG,
                             "the prompt has images but no vision model (mmproj) is loaded");
    return WLM_OK;
}

/* Evaluates a checked media prompt on seq: the text pieces and images from image `skip` on (the
 * text before image `skip` and the images before it are taken as already in the sequence; skip 0
 * evaluates everything, BOS first). ends (NULL, or one int per image) receives the position after
 * each evaluated image's last token. */
static int media_eval(wlm_context *ctx, int32_t seq, const wlm_vision *v, const char *prompt,
                      size_t len, media_images im, int32_t skip, int32_t *ends) {
    const size_t ml = strlen(WLM_MEDIA_MARKER);
    size_t at = 0;
    int32_t img = 0;
    int rc = WLM_OK;
    /* a deferred context (the WebGPU backend) records the whole prompt as one batch */
    const int accum = ctx->dfr_accum;
    if (ctx->deferred) ctx->dfr_accum = 1;
    for (int first = 1; rc == WLM_OK; first = 0) {
        size_t next = at;
        while (next + ml <= len && memcmp(prompt + next, WLM_MEDIA_MARKER, ml)) next++;
        const int last = next + ml > len;
        if (last) next = len;
        if (img >= skip)
            rc = eval_text(ctx, seq, prompt + at, next - at, first ? WLM_TOKENIZE_ADD_SPECIAL : 0);
        if (rc || last) break;
        if (img >= skip) {
            rc = wlm_eval_image(ctx, seq, v, media_image(im, img));
            if (ends) ends[img] = ctx->seqs[seq].n_past;
        }
        img++;
        at = next + ml;
    }
    ctx->dfr_accum = accum;
    /* a deferred context's prompt recorded in part: its positions were never computed */
    if (rc != WLM_OK && ctx->deferred && !accum) wlm_deferred_drop(ctx);
    return rc;
}

int wlm_eval_media_prompt(wlm_context *ctx, int32_t seq, const wlm_vision *v, const char *prompt,
                          size_t len, const wlm_image_embd *images, int32_t n_images) {
    if (!ctx) return WLM_ERR_INVALID_ARG;
    ctx->errmsg[0] = '\0';
    if (!prompt || n_images < 0 || (n_images > 0 && !images))
        return wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG, "wlm_eval_media_prompt: bad arguments");
    int rc = media_check(ctx, v, prompt, len, n_images);
    if (rc != WLM_OK) return rc;
    return media_eval(ctx, seq, v, prompt, len, (media_images){images, NULL}, 0, NULL);
}

/* Begins a generation on sequence 0 as it stands (the prompt, WLM_TOKEN_EMBD at the image rows,
 * ending with a token: every wrapper does) as a cached prompt: only its last token is evaluated
 * again, for the logits that start the generation. */
static int begin_on_sequence(wlm_context *ctx, const wlm_gen_params *params) {
    const wlm_seq *s = &ctx->seqs[0];
    const int32_t n = s->n_past;
    if (n < 1) return wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG, "the prompt is empty");
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)n);
    wlm_gen_params *gp = malloc(sizeof *gp);
    if (!tok || !gp) {
        free(tok), free(gp);
        return wlm_set_error(ctx->errmsg, WLM_ERR_NOMEM, "out of memory for the prompt");
    }
    memcpy(tok, s->tokens, sizeof(int32_t) * (size_t)n);
    *gp = *params;
    gp->cache_prompt = 1;
    int rc = wlm_generate_begin(ctx, tok, n, gp);
    free(tok);
    free(gp);
    return rc;
}

int wlm_generate_begin_media(wlm_context *ctx, const wlm_vision *v, const char *prompt, size_t len,
                             const wlm_image_embd *images, int32_t n_images,
                             const wlm_gen_params *params) {
    if (!ctx) return WLM_ERR_INVALID_ARG;
    ctx->errmsg[0] = '\0';
    if (!params) return wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG, "params is NULL");
    if (!ctx->model || !ctx->seqs) return wlm_set_error(ctx->errmsg, WLM_ERR_STATE, "context has no model");
    wlm_context_reset(ctx);
    int rc = wlm_eval_media_prompt(ctx, 0, v, prompt, len, images, n_images);
    if (rc != WLM_OK) return rc;
    if (ctx->deferred && ctx->dfr_n > 0) return WLM_NEED_LOGITS; /* see _cached */
    return begin_on_sequence(ctx, params);
}

int wlm_generate_begin_media_cached(wlm_context *ctx, const wlm_vision *v, const char *prompt,
                                    size_t len, const wlm_image_embd *const *images,
                                    int32_t n_images, const wlm_gen_params *params, int32_t keep,
                                    int32_t skip, int32_t *ends, int32_t *kept) {
    if (!ctx) return WLM_ERR_INVALID_ARG;
    ctx->errmsg[0] = '\0';
    if (kept) *kept = 0;
    if (!params) return wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG, "params is NULL");
    if (!ctx->model || !ctx->seqs) return wlm_set_error(ctx->errmsg, WLM_ERR_STATE, "context has no model");
    if (!prompt || !kept || n_images < 0 || skip < 0 || skip > n_images ||
        (n_images > 0 && (!images || !ends)))
        return wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG, "wlm_generate_begin_media_cached: bad arguments");
    for (int32_t i = 0; i < n_images; i++)
        if (!images[i])
            return wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG, "wlm_generate_begin_media_cached: image %d is NULL", (int)i);
    int rc = media_check(ctx, v, prompt, len, n_images);
    if (rc != WLM_OK) return rc;
    const wlm_seq *s0 = &ctx->seqs[0];
    if (skip > 0 && (keep < 1 || keep > s0->n_past || keep > s0->exact)) skip = 0;
    wlm_context_reset_keep(ctx, skip > 0 ? keep : 0);
    if (skip > 0 && s0->n_past != keep) {
        wlm_context_reset(ctx);
        skip = 0;
    }
    *kept = skip > 0 ? keep : 0;
    rc = media_eval(ctx, 0, v, prompt, len, (media_images){NULL, images}, skip, ends);
    if (rc != WLM_OK) return rc;
    /* a deferred context recorded the prompt: its backend runs the batch, then the caller
     * begins the generation (wlm_generate_begin_media_finish) */
    if (ctx->deferred && ctx->dfr_n > 0) return WLM_NEED_LOGITS;
    return begin_on_sequence(ctx, params);
}

int wlm_generate_begin_media_finish(wlm_context *ctx, const wlm_gen_params *params) {
    if (!ctx) return WLM_ERR_INVALID_ARG;
    ctx->errmsg[0] = '\0';
    if (!params) return wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG, "params is NULL");
    if (!ctx->model || !ctx->seqs) return wlm_set_error(ctx->errmsg, WLM_ERR_STATE, "context has no model");
    if (ctx->dfr_n > 0)
        return wlm_set_error(ctx->errmsg, WLM_ERR_STATE,
                             "the media prompt's recorded batch has not run on the backend yet");
    return begin_on_sequence(ctx, params);
}

/* Evaluates a checked media prompt whole into sequence seq (recorded, on a deferred context)
 * and checks that it ends with a token: the one that starts its generation, evaluated again
 * once the sequence is cut before it (media_cut). */
static int media_record(wlm_context *ctx, int32_t seq, const wlm_vision *v, const char *prompt,
                        size_t len, media_images im) {
    int rc = media_eval(ctx, seq, v, prompt, len, im, 0, NULL);
    if (rc != WLM_OK) return rc;
    const wlm_seq *s = &ctx->seqs[seq];
    if (s->n_past < 1 || s->tokens[s->n_past - 1] < 0)
        return wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG,
                             "the prompt is empty or does not end with a token");
    return WLM_OK;
}

/* Cuts sequence seq (a media prompt recorded whole, computed) before its last token, into
 * *last, as wlm_generate_begin_media does before its generation starts: a recurrent state is
 * restored from its snapshot before that token (eval_text asked for it). On a deferred context
 * the backend must have run the prompt, so that it took that snapshot; a cut that would stop
 * short (the state replayed over image rows: deferred.c) is WLM_ERR_UNSUPPORTED. */
static int media_cut(wlm_context *ctx, int32_t seq, int32_t *last) {
    const wlm_seq *s = &ctx->seqs[seq];
    const int32_t n = s->n_past; /* >= 1, ending with a token: media_record checked it */
    *last = s->tokens[n - 1];
    wlm_seq_truncate_internal(ctx, seq, n - 1);
    if (s->n_past != n - 1)
        return wlm_set_error(ctx->errmsg, WLM_ERR_UNSUPPORTED,
                             "the recurrent state before the prompt's last token was not kept "
                             "(the backend did not take its snapshot), and image rows are not "
                             "replayed");
    return WLM_OK;
}

/* Evaluates all of a media prompt but its last token (in *last) into sequence seq, as
 * wlm_generate_begin_media does before its generation starts (the last position evaluated and
 * then dropped, so a recurrent state is restored from before it as there). Not for a deferred
 * context, whose cut waits until the backend ran the prompt. */
static int media_prefill(wlm_context *ctx, int32_t seq, const wlm_vision *v, const char *prompt,
                         size_t len, media_images im, int32_t *last) {
    int rc = media_record(ctx, seq, v, prompt, len, im);
    return rc != WLM_OK ? rc : media_cut(ctx, seq, last);
}

/* ctx's message prefixed with "sequence i: "; returns rc. */
static int seq_error(wlm_context *ctx, int32_t i, int rc) {
    char msg[WLM_ERRMSG_SIZE];
    snprintf(msg, sizeof msg, "%s", ctx->errmsg);
    return wlm_set_error(ctx->errmsg, rc, "sequence %d: %s", (int)i, msg);
}

int wlm_generate_batch_begin_media(wlm_context *ctx, const wlm_vision *v, int32_t n_seqs,
                                   const int32_t *const *tokens, const int32_t *n_tokens,
                                   const char *const *prompts, const size_t *lens,
                                   const wlm_image_embd *const *images, const int32_t *n_images,
                                   const wlm_gen_params *params) {
    if (!ctx) return WLM_ERR_INVALID_ARG;
    ctx->errmsg[0] = '\0';
    int rc = wlm_batch_begin_check(ctx, n_seqs,
                                   params && tokens && n_tokens && prompts && lens && n_images,
                                   "wlm_generate_batch_begin_media: bad arguments");
    if (rc != WLM_OK) return rc;
    int32_t total = 0;
    for (int32_t i = 0; i < n_seqs; i++) { /* everything checked before anything is evaluated */
        rc = WLM_OK;
        if (tokens[i]) {
            if (n_tokens[i] < 1)
                rc = wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG,
                                   "the prompt is empty: give at least one token (BOS)");
            for (int32_t j = 0; rc == WLM_OK && j < n_tokens[i]; j++)
                if (tokens[i][j] < 0 || tokens[i][j] >= ctx->model->hp.vocab_size)
                    rc = wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG,
                                       "prompt token %d at index %d is outside the vocabulary 0..%d",
                                       (int)tokens[i][j], (int)j, (int)ctx->model->hp.vocab_size - 1);
        } else if (!prompts[i] || n_images[i] < 0 || (n_images[i] > 0 && !images)) {
            rc = wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG, "no prompt, or a bad image count");
        } else {
            for (int32_t k = 0; rc == WLM_OK && k < n_images[i]; k++)
                if (!images[total + k])
                    rc = wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG, "image %d is NULL", (int)k);
            if (rc == WLM_OK) rc = media_check(ctx, v, prompts[i], lens[i], n_images[i]);
            total += n_images[i];
        }
        if (rc != WLM_OK) return n_seqs > 1 ? seq_error(ctx, i, rc) : rc;
    }
    wlm_context_reset(ctx);
    ctx->dfr_last_n = 0;
    if (n_seqs == 1 && !tokens[0]) { /* one sequence: wlm_generate_begin_media's path itself */
        rc = media_eval(ctx, 0, v, prompts[0], lens[0], (media_images){NULL, images}, 0, NULL);
        if (rc == WLM_OK && ctx->deferred && ctx->dfr_n > 0) return WLM_NEED_LOGITS; /* see _finish */
        return rc != WLM_OK ? rc : begin_on_sequence(ctx, params);
    }
    int32_t last[WLM_MAX_SEQ];
    total = 0;
    /* a deferred context records every prompt into one batch, which the backend runs before
     * wlm_generate_batch_begin_media_finish begins the batch on the last tokens; a media
     * prompt is recorded whole (last -1) and cut before its last token there, after the run:
     * a hybrid's state is restored from the snapshot the backend took before that token
     * (eval_text asks for it), which a cut now would find not yet taken */
    ctx->dfr_accum = ctx->deferred;
    for (int32_t i = 0; i < n_seqs; i++) {
        if (tokens[i]) { /* a text prompt: all but its last token now, as a prefill would */
            const int32_t n = n_tokens[i];
            last[i] = tokens[i][n - 1];
            rc = WLM_OK;
            if (n > ctx->n_ctx)
                rc = wlm_set_error(ctx->errmsg, WLM_ERR_CONTEXT_FULL,
                                   "the prompt is %d tokens; the context holds %d", (int)n, (int)ctx->n_ctx);
            if (rc == WLM_OK && n > 1) {
                int32_t *seqs = malloc(sizeof(int32_t) * (size_t)(n - 1));
                if (!seqs) {
                    rc = wlm_set_error(ctx->errmsg, WLM_ERR_NOMEM, "out of memory for the prompt");
                } else {
                    for (int32_t j = 0; j < n - 1; j++) seqs[j] = i;
                    rc = wlm_eval_batch(ctx, tokens[i], seqs, NULL, n - 1);
                    free(seqs);
                }
            }
        } else {
            const media_images im = {NULL, images + total};
            if (ctx->deferred) {
                rc = media_record(ctx, i, v, prompts[i], lens[i], im);
                last[i] = -1;
            } else {
                rc = media_prefill(ctx, i, v, prompts[i], lens[i], im, &last[i]);
            }
            total += n_images[i];
        }
        if (rc != WLM_OK) {
            ctx->dfr_accum = 0;
            rc = n_seqs > 1 ? seq_error(ctx, i, rc) : rc;
            wlm_context_reset(ctx);
            return rc;
        }
    }
    ctx->dfr_accum = 0;
    if (ctx->deferred && ctx->dfr_n > 0) {
        memcpy(ctx->dfr_last, last, sizeof(int32_t) * (size_t)n_seqs);
        ctx->dfr_last_n = n_seqs;
        return WLM_NEED_LOGITS;
    }
    rc = wlm_generate_batch_begin_prefilled(ctx, n_seqs, last, params);
    if (rc != WLM_OK) wlm_context_reset(ctx);
    return rc;
}

int wlm_generate_batch_begin_media_finish(wlm_context *ctx, int32_t n_seqs, const wlm_gen_params *params) {
    if (!ctx) return WLM_ERR_INVALID_ARG;
    ctx->errmsg[0] = '\0';
    const int32_t pending = ctx->dfr_last_n;
    ctx->dfr_last_n = 0;
    if (!params || n_seqs < 1 || (pending > 0 ? n_seqs != pending : n_seqs != 1))
        return wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG,
                             "wlm_generate_batch_begin_media_finish: bad arguments");
    if (pending == 0) return wlm_generate_begin_media_finish(ctx, params);
    if (!ctx->model || !ctx->seqs) return wlm_set_error(ctx->errmsg, WLM_ERR_STATE, "context has no model");
    if (ctx->dfr_n > 0)
        return wlm_set_error(ctx->errmsg, WLM_ERR_STATE,
                             "the media prompts' recorded batch has not run on the backend yet");
    int32_t last[WLM_MAX_SEQ];
    memcpy(last, ctx->dfr_last, sizeof(int32_t) * (size_t)n_seqs);
    int rc = WLM_OK;
    for (int32_t i = 0; i < n_seqs && rc == WLM_OK; i++) /* the media prompts recorded whole */
        if (last[i] < 0 && (rc = media_cut(ctx, i, &last[i])) != WLM_OK && n_seqs > 1)
            rc = seq_error(ctx, i, rc);
    if (rc == WLM_OK) rc = wlm_generate_batch_begin_prefilled(ctx, n_seqs, last, params);
    if (rc != WLM_OK) wlm_context_reset(ctx);
    return rc;
}

int32_t wlm_generate_batch_add_media(wlm_context *ctx, const wlm_vision *v, const char *prompt,
                                     size_t len, const wlm_image_embd *const *images,
                                     int32_t n_images, const wlm_gen_params *params) {
    if (!ctx) return WLM_ERR_INVALID_ARG;
    ctx->errmsg[0] = '\0';
    if (!prompt || !params || n_images < 0 || (n_images > 0 && !images))
        return wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG, "wlm_generate_batch_add_media: bad arguments");
    for (int32_t k = 0; k < n_images; k++)
        if (!images[k]) return wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG, "image %d is NULL", (int)k);
    int rc = media_check(ctx, v, prompt, len, n_images);
    if (rc != WLM_OK) return rc;
    const int32_t slot = wlm_batch_add_slot(ctx);
    if (slot < 0) return slot;
    int32_t last = 0;
    const media_images im = {NULL, images};
    ctx->prefilling = 1; /* its own, emptied slot: the running sequences are not touched */
    rc = ctx->deferred ? media_record(ctx, slot, v, prompt, len, im)
                       : media_prefill(ctx, slot, v, prompt, len, im, &last);
    ctx->prefilling = 0;
    if (rc != WLM_OK) {
        rc = seq_error(ctx, slot, rc);
        wlm_deferred_drop(ctx); /* a recorded part: its positions were never computed */
        wlm_seq_release(ctx, slot);
        return rc;
    }
    if (ctx->deferred) { /* the backend runs the prompt, then _finish cuts and joins it */
        ctx->dfr_join = slot + 1;
        return WLM_NEED_LOGITS;
    }
    return wlm_batch_add_prefilled(ctx, slot, last, params);
}

int32_t wlm_generate_batch_add_media_finish(wlm_context *ctx, const wlm_gen_params *params) {
    if (!ctx) return WLM_ERR_INVALID_ARG;
    ctx->errmsg[0] = '\0';
    if (!ctx->model || !ctx->seqs) return wlm_set_error(ctx->errmsg, WLM_ERR_STATE, "context has no model");
    if (ctx->dfr_join < 1)
        return wlm_set_error(ctx->errmsg, WLM_ERR_STATE,
                             "wlm_generate_batch_add_media_finish: no media sequence is joining "
                             "(wlm_generate_batch_add_media did not return WLM_NEED_LOGITS)");
    const int32_t slot = ctx->dfr_join - 1;
    ctx->dfr_join = 0;
    int rc = WLM_OK;
    int32_t last = 0;
    if (ctx->dfr_n > 0) {
        wlm_deferred_drop(ctx);
        rc = wlm_set_error(ctx->errmsg, WLM_ERR_STATE,
                           "the joining media prompt's recorded batch has not run on the backend: "
                           "the sequence was dropped");
    } else if (!params) {
        rc = wlm_set_error(ctx->errmsg, WLM_ERR_INVALID_ARG, "params is NULL");
    } else if ((rc = media_cut(ctx, slot, &last)) != WLM_OK) {
        rc = seq_error(ctx, slot, rc);
    }
    if (rc != WLM_OK) {
        wlm_seq_release(ctx, slot);
        return rc;
    }
    return wlm_batch_add_prefilled(ctx, slot, last, params);
}
