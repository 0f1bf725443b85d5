/*
 * fuzz_gguf_vocab.c — libFuzzer harness: wlm_model_load with WLM_LOAD_VOCAB_ONLY on arbitrary
 * bytes (GGUF vocabularies such as llama.cpp's ggml-vocab-*.gguf), then, when it loads, fixed
 * strings are tokenized with and without BOS (ids in the vocabulary, counts stable across
 * caps) and decoded, every piece of the vocabulary (up to 65536) is decoded after no token
 * and after BOS, and a context must be refused (a vocabulary has no weights).
 * Checks: no crash, leak, ASan/UBSan report or hang; documented status codes; messages on error.
 */
#include <string.h>

#include "fuzz_util.h"

static void exercise(wlm_model *m) {
    wlm_model_info info;
    int rc = wlm_model_get_info(m, &info);
    FZ_CHECK(rc == WLM_OK, "wlm_model_get_info: %s", wlm_status_name(rc));
    FZ_CHECK(info.has_tokenizer == 1 && info.vocab_size > 0,
             "vocab-only model: has_tokenizer %d, vocab_size %d", (int)info.has_tokenizer,
             (int)info.vocab_size);
    FZ_CHECK(info.bos_id >= -1 && info.bos_id < info.vocab_size && info.eos_id >= -1 &&
                 info.eos_id < info.vocab_size,
             "bos %d / eos %d outside the vocabulary of %d", (int)info.bos_id, (int)info.eos_id,
             (int)info.vocab_size);

    static const char *const texts[] = {
        "", " ", "  ", "Hello world", " Hello World!\n\n\t  x",
        "<s></s><unk><|endoftext|><|end|><|user|><|im_start|>[INST]",
        "\xc3\xa9\xe6\x97\xa5\xf0\x9f\x98\x80\xe2\x96\x81\xff\xfe\x80\xc0\xaf",
        "3333333333 1+1=2 <0x41> \xe1\x84\x80\xe1\x85\xa1",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        for (int bos = 0; bos <= 1; bos++) {
            int32_t *ids = NULL;
            int32_t n = fz_tokenize(m, texts[i], strlen(texts[i]), bos, info.vocab_size, &ids);
            /* A vocabulary without byte tokens or <unk> cannot encode every text. */
            FZ_CHECK(n >= 0 || n == WLM_ERR_TOKENIZER || n == WLM_ERR_NOMEM,
                     "tokenizing fixed text %zu: %s", i, wlm_status_name(n));
            if (n > 0) {
                fz_buf out = {0};
                fz_decode(m, ids, 0, n, &out);
                free(out.p);
            }
            free(ids);
        }
    }
    for (int32_t t = 0; t < info.vocab_size && t < 65536; t++) {
        fz_piece(m, -1, t, NULL);
        if (info.bos_id >= 0) fz_piece(m, info.bos_id, t, NULL);
    }
    fz_piece_out_of_range(m, info.vocab_size);

    /* wasmlm.h: wlm_context_new fails on a vocabulary-only model (it has no weights). Found
     * by this harness (regressions/fuzz_gguf_vocab/context-on-vocab-only.gguf). */
    wlm_context *ctx = NULL;
    rc = wlm_context_new(m, NULL, &ctx);
    FZ_CHECK(rc == WLM_ERR_STATE, "wlm_context_new on a vocabulary-only model returned %s",
             wlm_status_name(rc));
    wlm_context_free(ctx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
#ifdef WLM_LOAD_VOCAB_ONLY
    void *buf = fz_dup(data, size);
    wlm_model *m = NULL;
    int rc = wlm_model_load(buf, size, WLM_LOAD_VOCAB_ONLY, &m);
    FZ_CHECK(fz_known_status(rc) && rc != WLM_DONE, "wlm_model_load returned %d", rc);
    FZ_CHECK(m != NULL, "wlm_model_load gave no handle (%s)", wlm_status_name(rc));
    fz_check_msg(wlm_model_errmsg(m), rc != WLM_OK, "wlm_model_load(VOCAB_ONLY)");
    if (rc == WLM_OK) exercise(m);
    wlm_model_free(m);
    free(buf); /* after the model, as wasmlm.h requires */
#else
    (void)data, (void)size;
    (void)exercise;
#endif
    return 0;
}
