/*
 * fuzz_tokenizer_bin.c — libFuzzer harness: wlm_model_load_tokenizer on arbitrary bytes
 * (llama2.c's tokenizer.bin format), against
 *   - a model of stories260K's vocabulary size (512), whatever the input holds, and
 *   - a tiny synthetic llama2.c model whose vocabulary has exactly as many tokens as the input
 *     holds entries (counted here, independently of the library), so that every well-formed
 *     input loads whatever its size; plus models one token smaller and larger, which must give
 *     WLM_ERR_TOKENIZER and WLM_ERR_TRUNCATED as wasmlm.h documents.
 * When a tokenizer loads: fixed texts are tokenized (ids must be in the vocabulary) and every
 * piece is decoded (after no token and after BOS). Only safety properties are asserted: an
 * arbitrary vocabulary need not round-trip text.
 *
 * The models are tiny synthetic checkpoints (dim 2, zero weights): wlm_model_load_tokenizer
 * reads nothing of a model but its vocabulary size. (Loading the real stories260K.bin for every
 * input, as the harness first did, spent 85% of its time in the loader's scan of 260K weights
 * for NaN / Inf: 83 inputs/s.)
 */
#include <string.h>

#include "fuzz_util.h"

static uint32_t rd_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Entries in a well-formed tokenizer.bin (header max_len in 1..2^20, each entry's length in
 * 0..max_len, the last entry ending exactly at the end), else -1. *has_nul: some piece holds
 * a NUL byte (the library refuses those with WLM_ERR_FORMAT). */
static int32_t count_entries(const uint8_t *data, size_t size, int *has_nul) {
    *has_nul = 0;
    if (size < 4) return -1;
    int32_t max_len = (int32_t)rd_u32(data);
    if (max_len <= 0 || max_len > (1 << 20)) return -1;
    size_t off = 4;
    int32_t n = 0;
    while (off < size) {
        if (size - off < 8) return -1;
        int32_t len = (int32_t)rd_u32(data + off + 4);
        if (len < 0 || len > max_len || size - off - 8 < (size_t)len) return -1;
        if (memchr(data + off + 8, 0, (size_t)len)) *has_nul = 1;
        off += 8 + (size_t)len;
        if (++n > (1 << 20)) return -1;
    }
    return n > 0 ? n : -1;
}

/* A llama2.c checkpoint with dim 2, hidden 2, 1 layer, 1 head, `vocab` tokens, seq_len 8 and
 * zero weights (the tokenizer only needs the vocabulary size). */
static void *tiny_model(int32_t vocab, size_t *size) {
    const int32_t hdr[7] = {2, 2, 1, 1, 1, vocab, 8};
    const size_t floats = 2 * (size_t)vocab + 2 + 4 * 4 + 2 + 3 * 4 + 2 + 2 * 8;
    *size = 28 + 4 * floats;
    unsigned char *p = calloc(1, *size);
    if (!p) abort();
    for (int i = 0; i < 7; i++) {
        uint32_t u = (uint32_t)hdr[i];
        for (int b = 0; b < 4; b++) p[4 * i + b] = (unsigned char)(u >> (8 * b));
    }
    return p;
}

static void exercise(wlm_model *m, int32_t vocab) {
    static const char *const texts[] = {
        "", " ", "Once upon a time, there was a little girl.",
        "\xc3\xa9\xe6\x97\xa5\xf0\x9f\x98\x80\xff\xfe\x80 \n\t", "<0x41><s></s><unk>",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        for (int bos = 0; bos <= 1; bos++) {
            int32_t *ids = NULL;
            int32_t n = fz_tokenize(m, texts[i], strlen(texts[i]), bos, vocab, &ids);
            FZ_CHECK(n >= 0, "tokenizing fixed text %zu: %s", i, wlm_status_name(n));
            fz_buf out = {0};
            fz_decode(m, ids, 0, n, &out);
            free(out.p);
            free(ids);
        }
    }
    wlm_model_info info;
    FZ_CHECK(wlm_model_get_info(m, &info) == WLM_OK, "wlm_model_get_info");
    FZ_CHECK(info.has_tokenizer == 1, "has_tokenizer is %d", (int)info.has_tokenizer);
    for (int32_t t = 0; t < vocab; t++) {
        fz_piece(m, -1, t, NULL);
        fz_piece(m, info.bos_id, t, NULL);
    }
    fz_piece_out_of_range(m, vocab);
}

/* Loads the input as the tokenizer of a model; returns the status (checked to be one that
 * wlm_model_load_tokenizer documents). */
static int try_load(wlm_model *m, const uint8_t *data, size_t size, int32_t vocab) {
    void *copy = fz_dup(data, size);
    int rc = wlm_model_load_tokenizer(m, copy, size);
    free(copy); /* the bytes are copied: the model must not keep pointers into them */
    FZ_CHECK(rc == WLM_OK || rc == WLM_ERR_TRUNCATED || rc == WLM_ERR_TOKENIZER ||
                 rc == WLM_ERR_FORMAT || rc == WLM_ERR_NOMEM,
             "wlm_model_load_tokenizer returned %d (%s)", rc, wlm_status_name(rc));
    fz_check_msg(wlm_model_errmsg(m), rc != WLM_OK, "wlm_model_load_tokenizer");
    if (rc == WLM_OK) {
        exercise(m, vocab);
        int again = wlm_model_load_tokenizer(m, data, size);
        FZ_CHECK(again == WLM_ERR_STATE, "a second tokenizer load returned %s",
                 wlm_status_name(again));
    } else {
        int32_t tok;
        int32_t n = wlm_tokenize(m, "a", 1, 1, &tok, 1);
        FZ_CHECK(n == WLM_ERR_TOKENIZER, "wlm_tokenize after a failed tokenizer load: %d", n);
    }
    return rc;
}

static int with_model(const void *model_bytes, size_t model_size, const uint8_t *data,
                      size_t size, int32_t vocab) {
    wlm_model *m = NULL;
    int rc = wlm_model_load(model_bytes, model_size, 0, &m);
    FZ_CHECK(rc == WLM_OK, "fixed model (vocab %d) does not load: %s", (int)vocab,
             wlm_model_errmsg(m));
    rc = try_load(m, data, size, vocab);
    wlm_model_free(m);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    {
        size_t msize = 0;
        void *model = tiny_model(512, &msize); /* stories260K's vocabulary size */
        with_model(model, msize, data, size, 512);
        free(model);
    }

    int has_nul = 0;
    int32_t n = count_entries(data, size, &has_nul);
    if (n < 1 || n > (1 << 17)) return 0;
    for (int32_t delta = -1; delta <= 1; delta++) {
        int32_t vocab = n + delta;
        if (vocab < 1) continue;
        size_t msize = 0;
        void *model = tiny_model(vocab, &msize);
        int rc = with_model(model, msize, data, size, vocab);
        free(model);
        const int want = has_nul ? WLM_ERR_FORMAT
                         : delta < 0 ? WLM_ERR_TOKENIZER
                         : delta > 0 ? WLM_ERR_TRUNCATED
                                     : WLM_OK;
        /* A NUL in an entry the smaller vocabulary never reaches is reported as surplus. */
        if (!(has_nul && delta < 0))
            FZ_CHECK(rc == want || rc == WLM_ERR_NOMEM,
                     "well-formed tokenizer of %d entries%s with a vocabulary of %d: %s, "
                     "expected %s",
                     (int)n, has_nul ? " (a piece holds NUL)" : "", (int)vocab,
                     wlm_status_name(rc), wlm_status_name(want));
    }
    return 0;
}
