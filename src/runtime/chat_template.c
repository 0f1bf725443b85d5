/*
 * chat_template.c — chat template families and their formatters (see chat_template.h). Each
 * formatter appends to a growing buffer; the formats follow the reference templates named in
 * the header (Qwen3, Llama 3, Gemma 3, Phi-3, Zephyr / TinyLlama-Chat, Llama 2-chat).
 */
#include "runtime/chat_template.h"

#include <stdlib.h>
#include <string.h>

#include "runtime/errors.h"
#include "wasmlm.h"

static const char *const family_names[] = {"unknown", "chatml", "llama3", "gemma",
                                           "phi3",    "zephyr", "llama2", "gemma4"};

wlm_chat_family wlm_chat_family_from_name(const char *name) {
    if (!name) return WLM_CHAT_UNKNOWN;
    for (int f = 1; f < (int)(sizeof family_names / sizeof family_names[0]); f++)
        if (strcmp(name, family_names[f]) == 0) return (wlm_chat_family)f;
    return WLM_CHAT_UNKNOWN;
}

const char *wlm_chat_family_name(wlm_chat_family family) {
    int f = (int)family;
    return f > 0 && f < (int)(sizeof family_names / sizeof family_names[0]) ? family_names[f]
                                                                             : family_names[0];
}

const char *wlm_chat_family_names(void) {
    return "chatml, llama3, gemma, phi3, zephyr, llama2, gemma4";
}

wlm_chat_family wlm_chat_detect(const char *tmpl) {
    if (!tmpl) return WLM_CHAT_UNKNOWN;
    wlm_chat_family named = wlm_chat_family_from_name(tmpl);
    if (named != WLM_CHAT_UNKNOWN) return named;
#define HAS(s) (strstr(tmpl, (s)) != NULL)
    if (HAS("<|turn>") && HAS("<turn|>")) return WLM_CHAT_GEMMA4;
    if (HAS("<|im_start|>")) return WLM_CHAT_CHATML;
    if (HAS("<|start_header_id|>") && HAS("<|end_header_id|>")) return WLM_CHAT_LLAMA3;
    if (HAS("<start_of_turn>")) return WLM_CHAT_GEMMA;
    if (HAS("<|assistant|>") && HAS("<|end|>")) return WLM_CHAT_PHI3;
    if (HAS("<|user|>") && HAS("<|assistant|>")) return WLM_CHAT_ZEPHYR;
    if (HAS("[INST]")) return WLM_CHAT_LLAMA2;
#undef HAS
    return WLM_CHAT_UNKNOWN;
}

/* A growing string; `failed` once an allocation failed (later appends do nothing). */
typedef struct sbuf {
    char *p;
    size_t len, cap;
    int failed;
} sbuf;

static void put_n(sbuf *b, const char *s, size_t n) {
    if (b->failed) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (b->len + n + 1 > cap) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->failed = 1;
            return;
        }
        b->p = p, b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void put(sbuf *b, const char *s) { put_n(b, s ? s : "", s ? strlen(s) : 0); }

static int is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* s without ASCII white space at both ends. */
static void put_trimmed(sbuf *b, const char *s) {
    size_t start = 0, end = strlen(s);
    while (start < end && is_space(s[start])) start++;
    while (end > start && is_space(s[end - 1])) end--;
    put_n(b, s + start, end - start);
}

static int role_is(const wlm_chat_message *m, const char *role) { return strcmp(m->role, role) == 0; }

/* Gemma and Llama 2: after an optional first system message, user and assistant alternate. */
static int check_alternation(const wlm_chat_message *msgs, int32_t n, int32_t first, char *err,
                             size_t errlen) {
    for (int32_t i = first; i < n; i++) {
        int want_user = (i - first) % 2 == 0; /* the templates test just this */
        if (role_is(&msgs[i], "user") == want_user) continue;
        return wlm_errorf(err, errlen, WLM_ERR_INVALID_ARG,
                          "message %ld (%s): this template needs the roles to alternate user / "
                          "assistant / user / ..., after an optional first system message",
                          (long)i, msgs[i].role);
    }
    return WLM_OK;
}

static void format_chatml(sbuf *b, const wlm_chat_message *msgs, int32_t n) {
    int32_t last_user = -1;
    for (int32_t i = 0; i < n; i++)
        if (role_is(&msgs[i], "user")) last_user = i;
    for (int32_t i = 0; i < n; i++) {
        const char *content = msgs[i].content;
        const char *end_think = strstr(content, "</think>");
        if (role_is(&msgs[i], "assistant") && i < last_user && end_think) {
            /* Qwen3: earlier turns keep their answer, not their reasoning */
            for (const char *p = end_think; p; p = strstr(p + 1, "</think>")) end_think = p;
            content = end_think + strlen("</think>");
            while (*content == '\n') content++;
        }
        put(b, "<|im_start|>");
        put(b, msgs[i].role);
        put(b, "\n");
        put(b, content);
        put(b, "<|im_end|>\n");
    }
}

static void format_llama3(sbuf *b, const wlm_chat_message *msgs, int32_t n, const char *bos) {
    put(b, bos);
    for (int32_t i = 0; i < n; i++) {
        put(b, "<|start_header_id|>");
        put(b, msgs[i].role);
        put(b, "<|end_header_id|>\n\n");
        put_trimmed(b, msgs[i].content);
        put(b, "<|eot_id|>");
    }
}

static void format_gemma(sbuf *b, const wlm_chat_message *msgs, int32_t n, const char *bos) {
    int32_t first = n > 0 && role_is(&msgs[0], "system") ? 1 : 0;
    put(b, bos);
    for (int32_t i = first; i < n; i++) {
        put(b, "<start_of_turn>");
        put(b, role_is(&msgs[i], "assistant") ? "model" : msgs[i].role);
        put(b, "\n");
        if (i == first && first == 1) {
            put(b, msgs[0].content);
            put(b, "\n\n");
        }
        put_trimmed(b, msgs[i].content);
        put(b, "<end_of_turn>\n");
    }
}

/* Gemma 4: every message a turn; a model turn's earlier reasoning cut as its template's
 * strip_thinking does (of the text between two <channel|> marks, what precedes a <|channel>). */
static void format_gemma4(sbuf *b, const wlm_chat_message *msgs, int32_t n, const char *bos) {
    put(b, bos);
    for (int32_t i = 0; i < n; i++) {
        const int model = role_is(&msgs[i], "assistant");
        put(b, "<|turn>");
        put(b, model ? "model" : msgs[i].role);
        put(b, "\n");
        if (!model) {
            put_trimmed(b, msgs[i].content);
        } else {
            sbuf c = {0};
            put(&c, ""); /* (a content of nothing but reasoning is "") */
            for (const char *p = msgs[i].content;;) {
                const char *close = strstr(p, "<channel|>");
                const char *stop = close ? close : p + strlen(p);
                const char *open = strstr(p, "<|channel>");
                put_n(&c, p, (size_t)((open && open < stop ? open : stop) - p));
                if (!close) break;
                p = close + strlen("<channel|>");
            }
            if (c.failed) b->failed = 1;
            else put_trimmed(b, c.p);
            free(c.p);
        }
        put(b, "<turn|>\n");
    }
}

static void format_tagged(sbuf *b, const wlm_chat_message *msgs, int32_t n, const char *end) {
    for (int32_t i = 0; i < n; i++) {
        put(b, "<|");
        put(b, msgs[i].role);
        put(b, "|>\n");
        put(b, msgs[i].content);
        put(b, end);
        put(b, "\n");
    }
}

static void format_llama2(sbuf *b, const wlm_chat_message *msgs, int32_t n, const char *bos,
                          const char *eos) {
    int32_t first = n > 0 && role_is(&msgs[0], "system") ? 1 : 0;
    for (int32_t i = first; i < n; i++) {
        if (role_is(&msgs[i], "user")) {
            sbuf c = {0};
            if (i == first && first == 1) {
                put(&c, "<<SYS>>\n");
                put(&c, msgs[0].content);
                put(&c, "\n<</SYS>>\n\n");
            }
            put(&c, msgs[i].content);
            put(b, bos);
            put(b, "[INST] ");
            if (c.failed) b->failed = 1;
            else put_trimmed(b, c.p);
            put(b, " [/INST]");
            free(c.p);
        } else if (role_is(&msgs[i], "assistant")) {
            put(b, " ");
            put_trimmed(b, msgs[i].content);
            put(b, " ");
            put(b, eos);
        }
    }
}

int wlm_chat_format(wlm_chat_family family, const wlm_chat_message *msgs, int32_t n,
                    int add_generation_prompt, const char *bos, const char *eos, char **out,
                    char *err, size_t errlen) {
    if (!out) return wlm_errorf(err, errlen, WLM_ERR_INVALID_ARG, "out is NULL");
    *out = NULL;
    if (n < 0 || (n > 0 && !msgs))
        return wlm_errorf(err, errlen, WLM_ERR_INVALID_ARG, "no messages");
    for (int32_t i = 0; i < n; i++) {
        if (!msgs[i].role || !msgs[i].content)
            return wlm_errorf(err, errlen, WLM_ERR_INVALID_ARG, "message %ld has no role or content",
                              (long)i);
        if (!role_is(&msgs[i], "system") && !role_is(&msgs[i], "user") &&
            !role_is(&msgs[i], "assistant"))
            return wlm_errorf(err, errlen, WLM_ERR_INVALID_ARG,
                              "message %ld: role '%s' is not system, user or assistant", (long)i,
                              msgs[i].role);
    }
    if (!bos) bos = "";
    if (!eos) eos = "";
    sbuf b = {0};
    put(&b, ""); /* an empty conversation is an empty string, not NULL */
    switch (family) {
    case WLM_CHAT_CHATML:
        format_chatml(&b, msgs, n);
        if (add_generation_prompt) put(&b, "<|im_start|>assistant\n");
        break;
    case WLM_CHAT_LLAMA3:
        format_llama3(&b, msgs, n, bos);
        if (add_generation_prompt) put(&b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
        break;
    case WLM_CHAT_GEMMA:
    case WLM_CHAT_LLAMA2: {
        int32_t first = n > 0 && role_is(&msgs[0], "system") ? 1 : 0;
        int rc = check_alternation(msgs, n, first, err, errlen);
        if (rc != WLM_OK) {
            free(b.p);
            return rc;
        }
        if (family == WLM_CHAT_GEMMA) {
            format_gemma(&b, msgs, n, bos);
            if (add_generation_prompt) put(&b, "<start_of_turn>model\n");
        } else {
            format_llama2(&b, msgs, n, bos, eos);
        }
        break;
    }
    case WLM_CHAT_GEMMA4:
        format_gemma4(&b, msgs, n, bos);
        if (add_generation_prompt) put(&b, "<|turn>model\n<|channel>thought\n<channel|>");
        break;
    case WLM_CHAT_PHI3:
        format_tagged(&b, msgs, n, "<|end|>");
        if (add_generation_prompt) put(&b, "<|assistant|>\n");
        break;
    case WLM_CHAT_ZEPHYR:
        format_tagged(&b, msgs, n, eos);
        if (add_generation_prompt) put(&b, "<|assistant|>\n");
        break;
    default:
        free(b.p);
        return wlm_errorf(err, errlen, WLM_ERR_INVALID_ARG, "unknown chat template family");
    }
    if (b.failed) {
        free(b.p);
        return wlm_errorf(err, errlen, WLM_ERR_NOMEM, "out of memory for the chat prompt");
    }
    *out = b.p;
    return WLM_OK;
}
