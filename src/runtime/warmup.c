/*
 * warmup.c — a generation on a tiny built-in model (see warmup.h). Why: browsers compile a
 * WebAssembly function when it is first called (V8's lazy compilation), so the first
 * generation of a freshly started engine pays for compiling the loader, the tokenizer, the
 * forward pass and the sampler; running them once on this model while the real one downloads
 * moves that cost off the time to the first token. The bytes it builds follow the formats
 * documented in wasmlm.h (wlm_model_load, wlm_model_load_tokenizer).
 */
#include "runtime/warmup.h"

#include <stdlib.h>
#include <string.h>

#include "wasmlm.h"

enum {
    WU_DIM = 64, WU_HIDDEN = 172, WU_LAYERS = 1, WU_HEADS = 8, WU_KV_HEADS = 4,
    WU_SEQ = 32,
    WU_VOCAB = 3 + 256 + 8, /* <unk> <s> </s>, the 256 byte tokens, a few merged pieces */
};

/* Pieces above the byte tokens, so that the BPE merge loop runs on the prompt. */
static const char *const wu_pieces[8] = {"e", "a", "o", " ", "n", "t", " t", "on"};

static void put_u32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16);
    p[3] = (unsigned char)(v >> 24);
}

/* The checkpoint: the 28-byte header (positive vocab: shared classifier), then small
 * deterministic weights (not all zero, so that the values flowing through are not all 0). */
static unsigned char *build_model(size_t *size) {
    const size_t d = WU_DIM, h = WU_HIDDEN, l = WU_LAYERS, v = WU_VOCAB, s = WU_SEQ;
    const size_t head = d / WU_HEADS, kv = head * WU_KV_HEADS;
    const size_t floats = v * d + l * d + l * d * d + 2 * l * kv * d + l * d * d + l * d +
                          3 * l * h * d + d + 2 * s * head / 2;
    *size = 28 + 4 * floats;
    unsigned char *p = calloc(1, *size);
    if (!p) return NULL;
    const int32_t hdr[7] = {WU_DIM, WU_HIDDEN, WU_LAYERS, WU_HEADS, WU_KV_HEADS, WU_VOCAB, WU_SEQ};
    for (int i = 0; i < 7; i++) put_u32(p + 4 * i, (uint32_t)hdr[i]);
    float *w = (float *)(void *)(p + 28);
    for (size_t i = 0; i < floats; i++) w[i] = ((float)((i * 7u) % 13u) / 13.0f - 0.5f) * 0.25f;
    return p;
}

/* tokenizer.bin: max_token_length, then per token a float score, an int32 length, the bytes. */
static unsigned char *build_tokenizer(size_t *size) {
    char piece[8];
    size_t n = 4;
    for (int i = 0; i < WU_VOCAB; i++) n += 8 + 6; /* no piece is longer than "<0xNN>" */
    unsigned char *p = malloc(n);
    if (!p) return NULL;
    put_u32(p, 6);
    size_t off = 4;
    for (int i = 0; i < WU_VOCAB; i++) {
        const char *text;
        if (i == 0) text = "<unk>";
        else if (i == 1) text = "\n<s>\n";
        else if (i == 2) text = "\n</s>\n";
        else if (i < 3 + 256) {
            static const char hex[] = "0123456789ABCDEF";
            int b = i - 3;
            memcpy(piece, "<0x", 3);
            piece[3] = hex[b >> 4];
            piece[4] = hex[b & 15];
            piece[5] = '>';
            piece[6] = '\0';
            text = piece;
        } else {
            text = wu_pieces[i - 3 - 256];
        }
        uint32_t len = (uint32_t)strlen(text);
        float score = i < 3 + 256 ? 0.0f : -(float)(i - 3 - 256);
        uint32_t bits;
        memcpy(&bits, &score, 4);
        put_u32(p + off, bits);
        put_u32(p + off + 4, len);
        memcpy(p + off + 8, text, len);
        off += 8 + len;
    }
    *size = off;
    return p;
}

int32_t wlm_warmup_run(int32_t n_tokens) {
    if (n_tokens < 1 || n_tokens > 8) return WLM_ERR_INVALID_ARG;
    size_t model_size = 0, tok_size = 0;
    unsigned char *model_bytes = build_model(&model_size);
    unsigned char *tok_bytes = build_tokenizer(&tok_size);
    wlm_model *model = NULL;
    wlm_context *ctx = NULL;
    int32_t rc = WLM_ERR_NOMEM, made = 0;
    if (!model_bytes || !tok_bytes) {
        free(model_bytes);
        goto done;
    }
    rc = wlm_model_load(model_bytes, model_size, WLM_LOAD_OWN_BUFFER, &model); /* owns it now */
    if (rc == WLM_OK) rc = wlm_model_load_tokenizer(model, tok_bytes, tok_size);
    if (rc != WLM_OK) goto done;
    wlm_context_params cp;
    wlm_context_params_default(&cp);
    cp.n_ctx = WU_SEQ;
    rc = wlm_context_new(model, &cp, &ctx);
    if (rc != WLM_OK) goto done;
    wlm_gen_params gp;
    wlm_gen_params_default(&gp);
    gp.n_probs = 10;
    gp.max_tokens = n_tokens;
    gp.seed = 1;
    static const int32_t never[2] = {1, 2}; /* BOS and EOS would end it early */
    gp.banned = never;
    gp.n_banned = 2;
    rc = wlm_generate_begin_text(ctx, "Once upon a time", &gp);
    if (rc < 0) goto done;
    for (;;) {
        wlm_token tok;
        rc = wlm_generate_next(ctx, &tok);
        if (rc != WLM_OK) break;
        made++;
    }
    rc = rc < 0 ? rc : made;
done:
    wlm_context_free(ctx);
    wlm_model_free(model);
    free(tok_bytes);
    return rc;
}
