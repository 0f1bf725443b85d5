/*
 * cli_chat.c — `wasmlm MODEL --chat` (llama.cpp's -cnv): an interactive conversation on
 * standard input / output. Each line read is a user message; the whole conversation is
 * formatted with the model's chat template family (src/runtime/chat_template.h: recognised
 * from tokenizer.chat_template, or named by --chat-template), tokenized with special tokens
 * parsed, and the reply generated until an end-of-generation token (<|im_end|>, <|eot_id|>,
 * <end_of_turn>, EOS, ...: wlm_token_is_eog). The KV cache of the part of the conversation
 * already evaluated is kept between turns (gen_params.cache_prompt), so a turn prefills only
 * what is new. The reply is printed as it is generated, then a newline; "> " is written to
 * standard error before each line when standard input is a terminal. End of input ends it.
 * --verbose-prompt writes, per turn, the formatted prompt and the reply as JSON strings and a
 * line of counts on standard error (for tests and debugging).
 */
#define _POSIX_C_SOURCE 200809L /* getline, isatty, fileno */

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_chat.h"
#include "runtime/chat_template.h" /* internal: template families and formatters */
#include "wasmlm.h"

static int chat_fail(const char *fmt, const char *a, const char *b) {
    fputs("wasmlm: ", stderr);
    fprintf(stderr, fmt, a, b);
    fputc('\n', stderr);
    return 1;
}

/* `s` as a JSON string (UTF-8 bytes as they are; quotes, backslashes, controls escaped). */
static void json_string(FILE *f, const char *s, size_t n) {
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c == '\n') fputs("\\n", f);
        else if (c < 0x20 || c == 0x7f) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

typedef struct chat_log {
    wlm_chat_message *msgs;
    int32_t n, cap;
} chat_log;

/* Appends a message; takes ownership of `content` (malloc'd). 0, or 1 when out of memory. */
static int add_message(chat_log *log, const char *role, char *content) {
    if (!content) return 1;
    if (log->n == log->cap) {
        int32_t cap = log->cap ? 2 * log->cap : 8;
        wlm_chat_message *p = realloc(log->msgs, sizeof *p * (size_t)cap);
        if (!p) {
            free(content);
            return 1;
        }
        log->msgs = p, log->cap = cap;
    }
    log->msgs[log->n].role = role;
    log->msgs[log->n].content = content;
    log->n++;
    return 0;
}

static char *dup_n(const char *s, size_t n) {
    char *p = malloc(n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

/* The text of token `id` (for BOS / EOS in templates), "" when there is none. */
static const char *token_text(const wlm_model *m, int32_t id) {
    const char *t = id >= 0 ? wlm_token_text(m, id, NULL) : NULL;
    return t ? t : "";
}

/* One turn: formats, tokenizes, generates and prints the reply; returns it (malloc'd) in
 * *reply. 0 on success, 1 after printing why not. */
static int chat_turn(const wlm_model *m, wlm_context *ctx, const wlm_gen_params *gp,
                     const wlm_cli_chat_opts *o, wlm_chat_family family, const chat_log *log,
                     int turn, volatile sig_atomic_t *interrupted, char **reply) {
    wlm_model_info info;
    wlm_model_get_info(m, &info);
    const char *bos = token_text(m, info.bos_id), *eos = token_text(m, info.eos_id);
    char err[256] = "", *text = NULL, *out = NULL;
    int32_t *ids = NULL;
    size_t out_len = 0, out_cap = 0;
    int rc = 1;
    *reply = NULL;
    if (wlm_chat_format(family, log->msgs, log->n, 1, bos, eos, &text, err, sizeof err) != WLM_OK) {
        chat_fail("chat template %s: %s", wlm_chat_family_name(family), err);
        goto out;
    }
    if (o->verbose_prompt) {
        fputs("prompt: ", stderr);
        json_string(stderr, text, strlen(text));
        fputc('\n', stderr);
    }
    /* BOS once: templates that write it (llama3, gemma, llama2) get no second one */
    unsigned flags = WLM_TOKENIZE_PARSE_SPECIAL;
    if (!(bos[0] && strncmp(text, bos, strlen(bos)) == 0)) flags |= WLM_TOKENIZE_ADD_SPECIAL;
    int32_t n = wlm_tokenize_ex(m, text, strlen(text), flags, NULL, 0);
    ids = n > 0 ? malloc(sizeof *ids * (size_t)n) : NULL;
    if (!ids || wlm_tokenize_ex(m, text, strlen(text), flags, ids, n) != n) {
        chat_fail("cannot tokenize the conversation: %s%s", wlm_status_name(n < 0 ? n : WLM_ERR_NOMEM), "");
        goto out;
    }
    wlm_gen_params p = *gp;
    p.cache_prompt = 1;
    p.max_tokens = o->max_tokens;
    if (wlm_generate_begin(ctx, ids, n, &p) != WLM_OK) {
        chat_fail("%s%s", wlm_context_errmsg(ctx),
                  turn > 1 ? " (the conversation has outgrown the context: start again, with a "
                             "larger -c if the model allows)" : "");
        goto out;
    }
    int32_t cached = wlm_generate_n_cached(ctx), generated = 0;
    wlm_token tok;
    int s;
    for (;;) {
        s = wlm_generate_next(ctx, &tok);
        if (s < 0) {
            chat_fail("%s%s", wlm_context_errmsg(ctx), "");
            goto out;
        }
        if (tok.piece_len > 0) {
            fwrite(tok.piece, 1, tok.piece_len, stdout);
            fflush(stdout);
            if (out_len + tok.piece_len + 1 > out_cap) {
                size_t cap = out_cap ? out_cap : 256;
                while (out_len + tok.piece_len + 1 > cap) cap *= 2;
                char *q = realloc(out, cap);
                if (!q) {
                    chat_fail("out of memory%s%s", "", "");
                    goto out;
                }
                out = q, out_cap = cap;
            }
            memcpy(out + out_len, tok.piece, tok.piece_len);
            out_len += tok.piece_len;
            out[out_len] = '\0';
        }
        if (s == WLM_DONE) break;
        generated++;
        if (*interrupted) wlm_generate_abort(ctx);
    }
    fputc('\n', stdout);
    fflush(stdout);
    if (o->verbose_prompt) {
        fputs("reply: ", stderr);
        json_string(stderr, out ? out : "", out_len);
        fprintf(stderr, "\nturn %d: %ld prompt tokens, %ld from the KV cache, %ld generated, %s\n",
                turn, (long)n, (long)cached, (long)generated, wlm_stop_reason_name(tok.stop_reason));
    }
    *reply = out ? out : dup_n("", 0);
    out = NULL;
    rc = *reply ? 0 : chat_fail("out of memory%s%s", "", "");
out:
    free(out);
    free(ids);
    free(text);
    return rc;
}

int wlm_cli_chat(const wlm_model *m, wlm_context *ctx, const wlm_gen_params *gp,
                 const wlm_cli_chat_opts *o, volatile sig_atomic_t *interrupted) {
    wlm_chat_family family;
    if (o->template_name) {
        family = wlm_chat_family_from_name(o->template_name);
        if (family == WLM_CHAT_UNKNOWN)
            return chat_fail("--chat-template: '%s' is not a template this CLI knows (%s)",
                             o->template_name, wlm_chat_family_names());
    } else {
        const char *tmpl = wlm_model_meta_string(m, "tokenizer.chat_template", NULL);
        if (!tmpl)
            return chat_fail("--chat: this model has no chat template (tokenizer.chat_template); "
                             "name its format with --chat-template NAME (%s)%s",
                             wlm_chat_family_names(), "");
        family = wlm_chat_detect(tmpl);
        if (family == WLM_CHAT_UNKNOWN)
            return chat_fail("--chat: the model's chat template (tokenizer.chat_template) is not "
                             "one of the formats this CLI writes without a Jinja engine; if it "
                             "is one of them, name it with --chat-template NAME (%s)%s",
                             wlm_chat_family_names(), "");
    }
    chat_log log = {0};
    char *line = NULL;
    size_t line_cap = 0;
    int rc = 0, turn = 0, tty = isatty(fileno(stdin));
    if (o->system && add_message(&log, "system", dup_n(o->system, strlen(o->system)))) {
        rc = chat_fail("out of memory%s%s", "", "");
        goto out;
    }
    for (;;) {
        if (tty) fputs("> ", stderr);
        ssize_t len = getline(&line, &line_cap, stdin);
        if (len < 0) break; /* end of input */
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = '\0';
        if (len == 0) continue;
        if (add_message(&log, "user", dup_n(line, (size_t)len))) {
            rc = chat_fail("out of memory%s%s", "", "");
            break;
        }
        char *reply = NULL;
        if (chat_turn(m, ctx, gp, o, family, &log, ++turn, interrupted, &reply)) {
            rc = 1;
            break;
        }
        if (add_message(&log, "assistant", reply)) {
            rc = chat_fail("out of memory%s%s", "", "");
            break;
        }
        if (*interrupted) break; /* Ctrl-C ended the reply, and the conversation */
    }
out:
    free(line);
    for (int32_t i = 0; i < log.n; i++) free((char *)log.msgs[i].content);
    free(log.msgs);
    return rc;
}
