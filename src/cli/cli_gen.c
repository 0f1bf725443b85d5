/*
 * cli_gen.c — `wasmlm MODEL [options]`, generation from the command line. run.c's short flags
 * (-t -p -s -n -i -z -m) alone print what llama2.c's run.c prints, byte for byte; llama.cpp's
 * long flags add the whole sampler chain, stop strings, context shifting, per-token
 * log-probabilities (--json), batches (--n-samples, --prompts) and beam search (--beam).
 * This file runs and prints (the options: cli_gen_args.c); the library does the work. Every
 * argument is checked before anything is printed. Errors go to standard error with exit code 1
 * and leave standard output empty.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_gen.h"
#include "wasmlm.h"

int wlm_cli_generate(int argc, char **argv);

/* Ctrl-C ends the generation the way wlm_generate_abort does (sequences end "aborted" and are
 * printed); a second Ctrl-C kills. A handler can only reach a global, hence this one. */
static volatile sig_atomic_t interrupted = 0;

static void on_sigint(int sig) {
    interrupted = 1;
    signal(sig, SIG_DFL);
}

static long time_in_ms(void) {
    struct timespec t;
    timespec_get(&t, TIME_UTC);
    return t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* ------------------------------------------------------------------------------------------ */
/* Output                                                                                      */

/* run.c's safe_printf: skip empty pieces and single bytes that are neither printable nor
 * whitespace; print up to the first NUL. */
static void safe_print(const char *piece, size_t len) {
    if (!piece || len == 0 || piece[0] == '\0') return;
    if (len == 1 && !(isprint((unsigned char)piece[0]) || isspace((unsigned char)piece[0]))) return;
    fputs(piece, stdout);
}

/* The prompt's pieces (after BOS), as run.c prints them while it forces the prompt tokens;
 * at most `limit` of them. */
static void print_prompt(const wlm_model *m, const int32_t *tokens, int32_t n, int32_t limit) {
    for (int32_t i = 1; i < n && i <= limit; i++) {
        size_t len;
        const char *piece = wlm_token_piece(m, tokens[i - 1], tokens[i], &len);
        safe_print(piece, len);
    }
}

/* Length of the UTF-8 sequence at s[0..n) (RFC 3629: no overlongs, surrogates or code points
 * above U+10FFFF): > 0 when valid and complete, 0 when invalid, -1 when s is a valid but
 * incomplete start (more bytes could complete it). */
static int utf8_len(const unsigned char *s, size_t n) {
    const unsigned c = s[0];
    int len;
    unsigned lo = 0x80, hi = 0xBF; /* range of the second byte */
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0) lo = 0xA0; /* overlong */
        if (c == 0xED) hi = 0x9F; /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0) lo = 0x90; /* overlong */
        if (c == 0xF4) hi = 0x8F; /* above U+10FFFF */
    } else {
        return 0;
    }
    for (int k = 1; k < len; k++) {
        if ((size_t)k >= n) return -1;
        if (s[k] < (k == 1 ? lo : 0x80) || s[k] > (k == 1 ? hi : 0xBF)) return 0;
    }
    return len;
}

/* Writes bytes as the inside of a JSON string: valid UTF-8 as is, quote, backslash and control
 * characters escaped, every byte that is not part of a valid sequence as \ufffd. With `hold`,
 * an incomplete character at the end is left for later. Returns the bytes consumed. */
static size_t json_chars(FILE *f, const char *text, size_t n, int hold) {
    const unsigned char *s = (const unsigned char *)text;
    size_t i = 0;
    while (i < n) {
        const unsigned c = s[i];
        if (c == '"' || c == '\\') {
            fputc('\\', f), fputc((int)c, f), i++;
        } else if (c < 0x20) {
            const char *e = c == '\n' ? "\\n" : c == '\t' ? "\\t" : c == '\r' ? "\\r"
                          : c == '\b' ? "\\b" : c == '\f' ? "\\f" : NULL;
            if (e) fputs(e, f);
            else fprintf(f, "\\u%04x", c);
            i++;
        } else {
            int len = utf8_len(s + i, n - i);
            if (len == -1 && hold) break;
            if (len > 0) fwrite(s + i, 1, (size_t)len, f), i += (size_t)len;
            else fputs("\\ufffd", f), i++;
        }
    }
    return i;
}

static void json_str(FILE *f, const char *s, size_t n) {
    fputc('"', f);
    json_chars(f, s, n, 0);
    fputc('"', f);
}

/* A JSON number (9 significant digits: exact for float32); null for inf / nan. */
static void json_num(FILE *f, double x) {
    if (isfinite(x)) fprintf(f, "%.9g", x);
    else fputs("null", f);
}

static const char *reason_name(int r) {
    switch (r) {
    case WLM_STOP_EOS: return "eos";
    case WLM_STOP_MAX_TOKENS: return "max_tokens";
    case WLM_STOP_STRING: return "stop_string";
    case WLM_STOP_CONTEXT_FULL: return "context_full";
    case WLM_STOP_ABORTED: return "aborted";
    default: return "none";
    }
}

/* What has been generated for one sequence. */
typedef struct seq_out {
    char *text;          /* the continuation's bytes (prompt excluded) */
    size_t len, cap;
    size_t json_done;    /* bytes of text already written in --json token lines */
    double logprob;      /* sum of the emitted tokens' log-probabilities */
    int32_t n_tokens, prev, done;
} seq_out;

static int append(seq_out *s, const char *p, size_t n) {
    if (s->len + n + 1 > s->cap) {
        size_t cap = s->cap ? s->cap : 256;
        while (cap < s->len + n + 1) cap *= 2;
        char *t = realloc(s->text, cap);
        if (!t) return 1;
        s->text = t, s->cap = cap;
    }
    if (n) memcpy(s->text + s->len, p, n);
    s->len += n;
    s->text[s->len] = '\0';
    return 0;
}

/* One --json line for a generated token. `piece` is the text released at this step, joined to
 * the sequence's UTF-8 stream: a character split across tokens is written whole, with the token
 * that completes it. */
static void json_token(const wlm_model *m, seq_out *s, const wlm_token *t) {
    FILE *f = stdout;
    fprintf(f, "{\"seq\":%d,\"id\":%d,\"piece\":\"", (int)t->seq, (int)t->id);
    s->json_done += json_chars(f, s->text + s->json_done, s->len - s->json_done, 1);
    fputs("\",\"logprob\":", f);
    json_num(f, t->logprob);
    fputs(",\"prob\":", f);
    json_num(f, t->prob);
    fputs(",\"prob_sampled\":", f);
    json_num(f, t->prob_sampled);
    if (t->n_probs > 0) {
        fputs(",\"top\":[", f);
        for (int32_t k = 0; k < t->n_probs && k < WLM_MAX_PROBS; k++) {
            const wlm_token_prob *c = &t->top[k];
            size_t len = 0;
            const char *piece = wlm_token_piece(m, s->prev, c->id, &len);
            fprintf(f, "%s{\"id\":%d,\"piece\":", k ? "," : "", (int)c->id);
            json_str(f, piece ? piece : "", piece ? len : 0);
            fputs(",\"prob\":", f);
            json_num(f, c->prob);
            fputs(",\"prob_sampled\":", f);
            json_num(f, c->prob_sampled);
            fputs(",\"logprob\":", f);
            json_num(f, c->logprob);
            fputc('}', f);
        }
        fputc(']', f);
    }
    fputs("}\n", f);
}

/* The --json line that ends a sequence (or a beam: score != NULL). */
static void json_final(int seq, const seq_out *s, const float *score, int reason) {
    FILE *f = stdout;
    fprintf(f, "{\"seq\":%d,\"final\":true,\"text\":", seq);
    json_str(f, s->text ? s->text : "", s->len);
    fputs(",\"logprob\":", f);
    json_num(f, s->logprob);
    if (score) {
        fputs(",\"score\":", f);
        json_num(f, *score);
    }
    fprintf(f, ",\"n_tokens\":%d,\"stop_reason\":\"%s\"}\n", (int)s->n_tokens, reason_name(reason));
}

/* ------------------------------------------------------------------------------------------ */
/* Runs                                                                                        */

/* New tokens for a prompt of n tokens: --n-predict (0 = no limit), else what run.c's -n leaves
 * after the prompt; -1 when nothing is left. */
static int32_t max_new_tokens(const cli_opts *o, int32_t n) {
    if (o->n_predict_given) return o->n_predict < 0 ? 0 : o->n_predict;
    return o->steps >= n ? o->steps - n + 1 : -1;
}

/* The KV cache's element type: -ctk / -ctv when given; else the arithmetic of the program whose
 * sampler order is in use. run.c keeps its cache in F32 and llama.cpp in F16; with F16 a seeded
 * sampled run parts from run.c's text once a rounded key or value moves a draw across a
 * top-p boundary (stories260K, -t 1 -p 0.9 -s 42: after about 60 tokens). */
static int32_t kv_type(const cli_opts *o) {
    if (o->cache_type[1] >= 0) return o->cache_type[1];
    if (o->cache_type[0] >= 0) return o->cache_type[0];
    return o->order == WLM_ORDER_RUNC ? WLM_KV_F32 : WLM_KV_F16;
}

static int new_context(const wlm_model *m, const cli_opts *o, int32_t n_seq, wlm_context **ctx) {
    wlm_context_params cp;
    wlm_context_params_default(&cp);
    cp.n_ctx = o->n_ctx;
    cp.n_seq_max = n_seq;
    cp.kv_type = kv_type(o);
    if (wlm_context_new(m, &cp, ctx) != WLM_OK || wlm_context_set_threadpool(*ctx, o->pool) != WLM_OK) {
        wlm_cli_fail("%s", *ctx ? wlm_context_errmsg(*ctx) : "out of memory for the context");
        wlm_context_free(*ctx);
        *ctx = NULL;
        return 1;
    }
    return 0;
}

/* Loads --model-draft into o->draft_model (a llama2.c draft takes the -z tokenizer, as the
 * target) and checks its vocabulary against the target's. */
static int load_draft(cli_opts *o, const wlm_model *target, const void *tok, size_t tok_size) {
    size_t size = 0;
    void *bytes = wlm_cli_read_file(o->draft_path, &size);
    if (!bytes) return wlm_cli_fail("cannot read %s: %s", o->draft_path, strerror(errno));
    if (wlm_model_load(bytes, size, WLM_LOAD_OWN_BUFFER, &o->draft_model) != WLM_OK)
        return wlm_cli_fail("%s: %s", o->draft_path, wlm_model_errmsg(o->draft_model));
    wlm_model_info info;
    wlm_model_get_info(o->draft_model, &info);
    if (!info.has_tokenizer) {
        size_t tsize = tok_size;
        void *tbytes = tok ? NULL : wlm_cli_read_file(o->tokenizer_path, &tsize);
        if (!tok && !tbytes)
            return wlm_cli_fail("cannot read %s (the draft model's tokenizer): %s", o->tokenizer_path,
                        strerror(errno));
        int rc = wlm_model_load_tokenizer(o->draft_model, tok ? tok : tbytes, tsize);
        free(tbytes);
        if (rc != WLM_OK) return wlm_cli_fail("%s: %s", o->draft_path, wlm_model_errmsg(o->draft_model));
    }
    char msg[256];
    if (wlm_vocab_match(target, o->draft_model, msg, sizeof msg) != WLM_OK)
        return wlm_cli_fail("--model-draft %s: %s", o->draft_path, msg);
    return 0;
}

/* One sequence, plain text: run.c's output (prompt pieces, generated pieces through run.c's
 * printer, a newline) and "achieved tok/s" on standard error. */
static int run_single(const wlm_model *m, const cli_opts *o, const int32_t *tokens, int32_t n) {
    wlm_context *ctx = NULL, *dctx = NULL;
    if (new_context(m, o, 1, &ctx)) return 1;
    wlm_spec_params spec = o->spec;
    if (o->draft_model) { /* the draft's context: the target's length, as far as the draft's goes */
        wlm_model_info di;
        wlm_model_get_info(o->draft_model, &di);
        cli_opts dopts = *o;
        dopts.n_ctx = o->n_ctx < di.seq_len ? o->n_ctx : di.seq_len;
        if (new_context(o->draft_model, &dopts, 1, &dctx)) {
            wlm_context_free(ctx);
            return 1;
        }
        spec.draft = dctx;
    }
    int rc = 1;
    int positions = n - 1 < o->steps ? n - 1 : o->steps; /* forward passes run.c makes so far */
    long start = 0;
    const int32_t max_new = max_new_tokens(o, n);
    /* begin (it checks the parameters, then prefills) before anything is printed: an error
     * leaves standard output empty */
    if (max_new >= 0) {
        wlm_gen_params gp = o->gp;
        gp.max_tokens = max_new;
        if (o->keep_prompt) gp.n_keep = n;
        if (wlm_generate_begin(ctx, tokens, n, &gp) != WLM_OK ||
            ((spec.draft || spec.ngram) && wlm_generate_speculate(ctx, &spec) != WLM_OK)) {
            wlm_cli_fail("%s", wlm_context_errmsg(ctx));
            goto out;
        }
    }
    print_prompt(m, tokens, n, o->n_predict_given ? INT32_MAX : o->steps);
    fflush(stdout);
    if (max_new >= 0) {
        start = time_in_ms();
        wlm_token tok;
        int s;
        while ((s = wlm_generate_next(ctx, &tok)) == WLM_OK) {
            safe_print(tok.piece, tok.piece_len);
            fflush(stdout);
            positions++;
            if (interrupted) wlm_generate_abort(ctx);
        }
        if (s < 0) {
            wlm_cli_fail("%s", wlm_context_errmsg(ctx));
            goto out;
        }
        safe_print(tok.piece, tok.piece_len); /* text held back for a stop string that failed */
        if (tok.stop_reason == WLM_STOP_EOS) positions++; /* run.c counts the BOS step too */
    }
    if (spec.draft || spec.ngram) {
        wlm_spec_stats st;
        wlm_spec_stats_get(ctx, &st);
        fprintf(stderr, "speculative decoding: %d rounds, %d tokens drafted, %d accepted (%.1f %%)\n",
                (int)st.n_rounds, (int)st.n_drafted, (int)st.n_accepted,
                st.n_drafted ? 100.0 * st.n_accepted / st.n_drafted : 0.0);
    }
    printf("\n");
    if (positions > 1 && start) {
        double secs = (double)(time_in_ms() - start) / 1000.0;
        fprintf(stderr, "achieved tok/s: %f\n", secs > 0 ? (positions - 1) / secs : 0.0);
    }
    rc = 0;
out:
    wlm_context_free(ctx);
    wlm_context_free(dctx);
    return rc;
}

/* ---- images (--mmproj, --image) ------------------------------------------------------------ */

/* A binary PPM (P6, maxval 255) into malloc'd RGB bytes. The native CLI reads no PNG or JPEG
 * (the JS API decodes those); returns NULL after printing why. */
static unsigned char *read_ppm(const char *path, int *w, int *h) {
    size_t size = 0;
    unsigned char *b = wlm_cli_read_file(path, &size);
    if (!b) {
        wlm_cli_fail("cannot read %s: %s", path, strerror(errno));
        return NULL;
    }
    size_t at = 2;
    long v[3] = {0, 0, 0};
    int ok = size >= 2 && b[0] == 'P' && b[1] == '6';
    for (int k = 0; ok && k < 3; k++) {
        while (at < size && (b[at] == ' ' || b[at] == '\t' || b[at] == '\n' || b[at] == '\r' || b[at] == '#')) {
            if (b[at] == '#') while (at < size && b[at] != '\n') at++;
            else at++;
        }
        if (at >= size || b[at] < '0' || b[at] > '9') ok = 0;
        while (ok && at < size && b[at] >= '0' && b[at] <= '9' && v[k] < 1000000) v[k] = v[k] * 10 + (b[at++] - '0');
    }
    at++; /* the single whitespace byte before the pixels */
    if (!ok || v[2] != 255 || v[0] < 1 || v[1] < 1 || v[0] > WLM_IMAGE_MAX_SIDE || v[1] > WLM_IMAGE_MAX_SIDE ||
        at > size || size - at < (size_t)v[0] * (size_t)v[1] * 3) {
        free(b);
        wlm_cli_fail("%s: not a binary PPM image (P6, 8 bits, whole; at most %d pixels a side): the "
                     "native CLI reads PPM only (convert a PNG or JPEG with e.g. `convert in.png "
                     "out.ppm`; the JS API decodes PNG and JPEG itself)", path, WLM_IMAGE_MAX_SIDE);
        return NULL;
    }
    memmove(b, b + at, (size_t)v[0] * (size_t)v[1] * 3);
    *w = (int)v[0];
    *h = (int)v[1];
    return b;
}

/* One plain sequence with images: the mmproj, each --image encoded, the prompt's <__media__>
 * markers (or, without any, the images before the prompt) replaced by them
 * (wlm_generate_begin_media), the continuation printed. */
static int run_media(const wlm_model *m, const cli_opts *o) {
    int rc = 1;
    size_t vsize = 0;
    void *vbytes = wlm_cli_read_file(o->mmproj_path, &vsize);
    wlm_vision *vision = NULL;
    wlm_context *ctx = NULL;
    wlm_image_embd img[8];
    memset(img, 0, sizeof img);
    char *prompt = NULL;
    if (!vbytes) {
        wlm_cli_fail("cannot read %s: %s", o->mmproj_path, strerror(errno));
        return 1;
    }
    if (wlm_vision_load(vbytes, vsize, WLM_LOAD_OWN_BUFFER, &vision) != WLM_OK) {
        wlm_cli_fail("%s: %s", o->mmproj_path, wlm_vision_errmsg(vision));
        goto out;
    }
    for (int i = 0; i < o->n_images; i++) {
        int w = 0, h = 0;
        unsigned char *rgb = read_ppm(o->image_paths[i], &w, &h);
        if (!rgb) goto out;
        const int s = wlm_image_encode(vision, rgb, w, h, o->pool, 1, &img[i]);
        free(rgb);
        if (s != WLM_OK) {
            wlm_cli_fail("%s: %s", o->image_paths[i], wlm_vision_errmsg(vision));
            goto out;
        }
    }
    const char *text = o->prompt ? o->prompt : "";
    const size_t ml = strlen(WLM_MEDIA_MARKER), tl = strlen(text);
    prompt = malloc(tl + (size_t)o->n_images * (ml + 1) + 1);
    if (!prompt) {
        wlm_cli_fail("out of memory");
        goto out;
    }
    prompt[0] = 0;
    if (!strstr(text, WLM_MEDIA_MARKER)) /* llama.cpp's mtmd-cli: the images first */
        for (int i = 0; i < o->n_images; i++) strcat(prompt, WLM_MEDIA_MARKER "\n");
    strcat(prompt, text);
    if (new_context(m, o, 1, &ctx)) goto out;
    wlm_gen_params gp = o->gp;
    gp.max_tokens = o->n_predict_given && o->n_predict > 0 ? o->n_predict : 0;
    if (!o->n_predict_given) gp.max_tokens = o->steps;
    if (wlm_generate_begin_media(ctx, vision, prompt, strlen(prompt), img, o->n_images, &gp) != WLM_OK) {
        wlm_cli_fail("%s", wlm_context_errmsg(ctx));
        goto out;
    }
    fputs(text, stdout);
    fflush(stdout);
    wlm_token tok;
    int s;
    while ((s = wlm_generate_next(ctx, &tok)) == WLM_OK) {
        safe_print(tok.piece, tok.piece_len);
        fflush(stdout);
        if (interrupted) wlm_generate_abort(ctx);
    }
    if (s < 0) {
        wlm_cli_fail("%s", wlm_context_errmsg(ctx));
        goto out;
    }
    safe_print(tok.piece, tok.piece_len);
    printf("\n");
    rc = 0;
out:
    for (int i = 0; i < 8; i++) wlm_image_embd_free(&img[i]);
    free(prompt);
    wlm_context_free(ctx);
    wlm_vision_free(vision);
    return rc;
}

/* n_seqs sequences decoded together (a batch of one for --json without --n-samples/--prompts).
 * --json: token lines as they come and a final line per sequence when it ends; plain: "[i] "
 * and the sequence's text (prompt and continuation) when it ends. */
static int run_batch(const wlm_model *m, const cli_opts *o, int32_t n_seqs,
                     const int32_t *const *prompts, const int32_t *n_tokens) {
    wlm_context *ctx = NULL;
    if (new_context(m, o, n_seqs, &ctx)) return 1;
    int rc = 1, s = WLM_OK;
    wlm_gen_params *gp = calloc((size_t)n_seqs, sizeof *gp);
    seq_out *so = calloc((size_t)n_seqs, sizeof *so);
    wlm_token *out = calloc((size_t)n_seqs, sizeof *out);
    if (!gp || !so || !out) {
        wlm_cli_fail("out of memory");
        goto out;
    }
    for (int32_t i = 0; i < n_seqs; i++) {
        const int32_t max_new = max_new_tokens(o, n_tokens[i]);
        if (max_new < 0) {
            wlm_cli_fail("-n %d leaves nothing to generate after the %d-token prompt%s (use --n-predict)",
                 o->steps, (int)n_tokens[i], n_seqs > 1 ? " of a sequence" : "");
            goto out;
        }
        gp[i] = o->gp;
        gp[i].seed = o->gp.seed + (uint64_t)i;
        gp[i].max_tokens = max_new;
        if (o->keep_prompt) gp[i].n_keep = n_tokens[i];
        so[i].prev = prompts[i][n_tokens[i] - 1];
    }
    if (wlm_generate_batch_begin(ctx, n_seqs, prompts, n_tokens, gp) != WLM_OK) {
        wlm_cli_fail("%s", wlm_context_errmsg(ctx));
        goto out;
    }
    const long start = time_in_ms();
    long n_generated = 0;
    while (s == WLM_OK) {
        s = wlm_generate_batch_next(ctx, out);
        if (s < 0) break;
        for (int32_t i = 0; i < n_seqs; i++) {
            seq_out *q = &so[i];
            const wlm_token *t = &out[i];
            if (q->done) continue;
            if (append(q, t->piece, t->piece_len)) {
                s = WLM_ERR_NOMEM;
                break;
            }
            if (t->status == WLM_OK) {
                q->n_tokens++;
                q->logprob += t->logprob;
                n_generated++;
                if (o->json) json_token(m, q, t);
                q->prev = t->id;
                continue;
            }
            q->done = 1;
            if (o->json) {
                json_final(i, q, NULL, t->stop_reason);
            } else {
                printf("[%d] ", (int)i);
                print_prompt(m, prompts[i], n_tokens[i], INT32_MAX);
                fwrite(q->text, 1, q->len, stdout);
                printf("\n");
            }
        }
        fflush(stdout);
        if (interrupted) wlm_generate_abort(ctx);
    }
    if (s < 0) {
        wlm_cli_fail("%s", s == WLM_ERR_NOMEM && !wlm_context_errmsg(ctx)[0] ? "out of memory"
                                                                    : wlm_context_errmsg(ctx));
        goto out;
    }
    double secs = (double)(time_in_ms() - start) / 1000.0;
    fprintf(stderr, "achieved tok/s: %f (%d sequences, %ld tokens)\n",
            secs > 0 ? (double)n_generated / secs : 0.0, (int)n_seqs, n_generated);
    rc = 0;
out:
    if (so)
        for (int32_t i = 0; i < n_seqs; i++) free(so[i].text);
    free(so);
    free(gp);
    free(out);
    wlm_context_free(ctx);
    return rc;
}

/* Beam search of one prompt: the beams, best first, as --json finals or
 * "[rank] score=S logprob=L: text"; the KV cache memory on standard error. */
static int run_beam(const wlm_model *m, const cli_opts *o, const int32_t *tokens, int32_t n) {
    wlm_context *ctx = NULL;
    /* 2 × width sequences; an out-of-range width gets a valid context and the library's
     * message from wlm_beam_begin */
    int32_t n_seq = o->beam_width < 1 ? 1 : o->beam_width > WLM_MAX_SEQ / 2 ? WLM_MAX_SEQ
                                                                             : 2 * o->beam_width;
    if (new_context(m, o, n_seq, &ctx)) return 1;
    int rc = 1, s;
    seq_out so;
    memset(&so, 0, sizeof so);
    wlm_beam_params bp;
    wlm_beam_params_default(&bp);
    bp.width = o->beam_width;
    bp.length_penalty = o->length_penalty;
    bp.grammar = o->gp.grammar;
    bp.grammar_len = o->gp.grammar_len;
    bp.max_tokens = max_new_tokens(o, n);
    if (bp.max_tokens == 0) /* no limit: the context's */
        bp.max_tokens = o->n_ctx - n + 1 > 1 ? o->n_ctx - n + 1 : 1;
    if (bp.max_tokens < 0) {
        wlm_cli_fail("-n %d leaves nothing to generate after the %d-token prompt (use --n-predict)",
             o->steps, (int)n);
        goto out;
    }
    if (wlm_beam_begin(ctx, tokens, n, &bp) != WLM_OK) {
        wlm_cli_fail("%s", wlm_context_errmsg(ctx));
        goto out;
    }
    while ((s = wlm_beam_step(ctx)) == WLM_OK)
        if (interrupted) wlm_generate_abort(ctx);
    if (s < 0) {
        wlm_cli_fail("%s", wlm_context_errmsg(ctx));
        goto out;
    }
    const int32_t count = wlm_beam_count(ctx);
    for (int32_t r = 0; r < count; r++) {
        wlm_beam b;
        if (wlm_beam_get(ctx, r, &b) != WLM_OK) continue;
        so.len = 0;
        int32_t prev = tokens[n - 1];
        for (int32_t k = 0; k < b.n_tokens; k++) {
            size_t len = 0;
            const char *piece = wlm_token_piece(m, prev, b.tokens[k], &len);
            if (piece && append(&so, piece, len)) {
                wlm_cli_fail("out of memory");
                goto out;
            }
            prev = b.tokens[k];
        }
        so.logprob = b.logprob;
        so.n_tokens = b.n_tokens;
        if (o->json) {
            json_final(r, &so, &b.score, b.stop_reason);
        } else {
            printf("[%d] score=%.4f logprob=%.4f: ", (int)r, (double)b.score, (double)b.logprob);
            print_prompt(m, tokens, n, INT32_MAX);
            fwrite(so.text ? so.text : "", 1, so.len, stdout);
            printf("\n");
        }
    }
    size_t kv = 0, kv_unshared = 0;
    wlm_beam_memory(ctx, &kv, &kv_unshared);
    fprintf(stderr,
            "beam search: %d results; KV cache at its largest %.1f KiB (%.1f KiB per beam), "
            "%.1f KiB without shared prefixes\n",
            (int)count, (double)kv / 1024.0, (double)kv / 1024.0 / o->beam_width,
            (double)kv_unshared / 1024.0);
    rc = 0;
out:
    free(so.text);
    wlm_context_free(ctx);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* wasmlm MODEL [options]                                                                      */

/* Tokenizes `text` with BOS into a malloc'd array; NULL after printing why not. */
static int32_t *tokenize_prompt(const wlm_model *m, const char *text, int32_t *n) {
    int32_t need = wlm_tokenize(m, text, strlen(text), 1, NULL, 0);
    int32_t *ids = need >= 1 ? malloc(sizeof(int32_t) * (size_t)need) : NULL;
    if (!ids) {
        wlm_cli_fail("cannot tokenize the prompt: %s", wlm_status_name(need < 0 ? need : WLM_ERR_NOMEM));
        return NULL;
    }
    wlm_tokenize(m, text, strlen(text), 1, ids, need);
    *n = need;
    return ids;
}

/* Splits a --prompts file into lines (in place; '\r' before '\n' dropped, blank lines skipped).
 * Returns the number of prompts, or -1 when there are more than `cap`. */
static int32_t split_lines(char *buf, size_t size, const char **lines, int32_t cap) {
    int32_t n = 0;
    char *p = buf, *end = buf + size;
    while (p < end) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *e = nl ? nl : end;
        char *line = p;
        p = nl ? nl + 1 : end;
        if (e > line && e[-1] == '\r') e--;
        *e = '\0';
        if (e == line) continue;
        if (n == cap) return -1;
        lines[n++] = line;
    }
    return n;
}

int wlm_cli_generate(int argc, char **argv) {
    cli_opts *o = calloc(1, sizeof *o);
    if (!o) return wlm_cli_fail("out of memory");
    o->checkpoint = argv[0];
    o->tokenizer_path = "tokenizer.bin";
    o->mode = "generate";
    o->steps = 256;
    o->order = -1;
    o->seed_random = 1;
    o->length_penalty = 1.0f;
    o->threads = 1;
    o->cache_type[0] = o->cache_type[1] = -1;
    wlm_gen_params_default(&o->gp);
    wlm_spec_params_default(&o->spec);
    o->gp.logit_bias = o->bias;

    int rc = 1;
    size_t msize = 0, tsize = 0, psize = 0;
    void *mbytes = NULL, *tbytes = NULL;
    char *pbytes = NULL;
    wlm_model *model = NULL;
    const char *texts[WLM_MAX_SEQ];
    int32_t *ids[WLM_MAX_SEQ] = {NULL};     /* per prompt, owned */
    int32_t *prompts[WLM_MAX_SEQ] = {NULL}; /* per sequence, views of ids */
    int32_t n_tokens[WLM_MAX_SEQ], n_prompts = 1, n_seqs = 0, per_prompt = 1, n_ctx = 0;
    switch (wlm_cli_gen_parse(argc, argv, o)) {
    case 0: break;
    case 2: rc = 0; goto out;
    default: goto out;
    }

    /* run.c's flags alone sample in run.c's order (parse_args chose it); a llama.cpp sampling
     * flag in llama.cpp's */
    if (o->seed_random) o->gp.seed = (unsigned int)time(NULL);
    if (wlm_cli_gen_load_grammar(o)) goto out;

    mbytes = wlm_cli_read_file(o->checkpoint, &msize);
    if (!mbytes) {
        wlm_cli_fail("cannot read %s: %s", o->checkpoint, strerror(errno));
        goto out;
    }
    if (wlm_model_load(mbytes, msize, WLM_LOAD_OWN_BUFFER, &model) != WLM_OK) {
        wlm_cli_fail("%s: %s", o->checkpoint, wlm_model_errmsg(model));
        goto out;
    }
    wlm_model_info info;
    wlm_model_get_info(model, &info);
    /* GGUF files carry their vocabulary; a llama2.c checkpoint needs tokenizer.bin (-z). */
    if (!info.has_tokenizer || o->tokenizer_given) {
        tbytes = wlm_cli_read_file(o->tokenizer_path, &tsize);
        if (!tbytes) {
            wlm_cli_fail("cannot read %s: %s", o->tokenizer_path, strerror(errno));
            goto out;
        }
        if (wlm_model_load_tokenizer(model, tbytes, tsize) != WLM_OK) {
            wlm_cli_fail("%s: %s", o->tokenizer_path, wlm_model_errmsg(model));
            goto out;
        }
    }
    wlm_model_get_info(model, &info);
    /* run.c: -n 0 or beyond the context means the whole context (unless it shifts) */
    n_ctx = o->n_ctx != 0 ? o->n_ctx : info.seq_len; /* negative: wlm_context_new says so */
    o->n_ctx = n_ctx; /* wlm_context_new checks it against the model */
    if (o->steps == 0 || (!o->gp.context_shift && o->steps > n_ctx)) o->steps = n_ctx;
    if (o->repeat_last_n_ctx) o->gp.repeat_last_n = n_ctx;
    if (wlm_cli_gen_check_sampler(o, info.vocab_size)) goto out; /* --logit-bias ids against the vocabulary */
    if (o->draft_path && load_draft(o, model, tbytes, tsize)) goto out;

    if (o->mmproj_path) {
        if (o->threads > 1 && wlm_threadpool_new(o->threads, &o->pool) != WLM_OK) {
            wlm_cli_fail("--threads %d: cannot start the threads", o->threads);
            goto out;
        }
        signal(SIGINT, on_sigint);
        rc = run_media(model, o);
        signal(SIGINT, SIG_DFL);
        goto out;
    }

    if (o->chat) {
        wlm_context *ctx = NULL;
        if (o->threads > 1 && wlm_threadpool_new(o->threads, &o->pool) != WLM_OK) {
            wlm_cli_fail("--threads %d: cannot start the threads", o->threads);
            goto out;
        }
        if (new_context(model, o, 1, &ctx)) goto out;
        o->chat_opts.max_tokens = o->n_predict_given && o->n_predict > 0 ? o->n_predict : 0;
        signal(SIGINT, on_sigint);
        rc = wlm_cli_chat(model, ctx, &o->gp, &o->chat_opts, &interrupted);
        signal(SIGINT, SIG_DFL);
        wlm_context_free(ctx);
        goto out;
    }

    if (o->prompts_file) {
        pbytes = wlm_cli_read_file(o->prompts_file, &psize);
        if (!pbytes) {
            wlm_cli_fail("cannot read %s: %s", o->prompts_file, strerror(errno));
            goto out;
        }
        n_prompts = split_lines(pbytes, psize, texts, WLM_MAX_SEQ);
        if (n_prompts <= 0) {
            wlm_cli_fail("--prompts %s: %s", o->prompts_file,
                 n_prompts == 0 ? "no prompts (one per line)" : "more than 64 prompts");
            goto out;
        }
    } else {
        texts[0] = o->prompt ? o->prompt : "";
    }
    per_prompt = o->n_samples ? o->n_samples : 1;
    if (n_prompts * per_prompt > WLM_MAX_SEQ) {
        wlm_cli_fail("%d prompts x %d samples is more than %d sequences", (int)n_prompts, (int)per_prompt,
             WLM_MAX_SEQ);
        goto out;
    }
    /* sequence p * per_prompt + k is sample k of prompt p (the library prefills each once) */
    for (int32_t p = 0; p < n_prompts; p++) {
        int32_t n = 0;
        ids[p] = tokenize_prompt(model, texts[p], &n);
        if (!ids[p]) goto out;
        for (int32_t k = 0; k < per_prompt; k++) {
            prompts[n_seqs] = ids[p];
            n_tokens[n_seqs++] = n;
        }
    }

    if (o->threads > 1 && wlm_threadpool_new(o->threads, &o->pool) != WLM_OK) {
        wlm_cli_fail("--threads %d: cannot start the threads", o->threads);
        goto out;
    }
    signal(SIGINT, on_sigint);
    if (o->beam_given) rc = run_beam(model, o, prompts[0], n_tokens[0]);
    else if (o->json || o->n_samples || o->prompts_file)
        rc = run_batch(model, o, n_seqs, (const int32_t *const *)prompts, n_tokens);
    else rc = run_single(model, o, prompts[0], n_tokens[0]);
    signal(SIGINT, SIG_DFL);
out:
    for (int32_t p = 0; p < WLM_MAX_SEQ; p++) free(ids[p]);
    free(pbytes);
    free(tbytes);
    wlm_model_free(o->draft_model);
    wlm_model_free(model);
    wlm_threadpool_free(o->pool); /* after every context that used it */
    free(o->grammar);
    free(o);
    return rc;
}
