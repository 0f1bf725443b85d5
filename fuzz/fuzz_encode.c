/*
 * fuzz_encode.c — libFuzzer harness: wlm_tokenize on arbitrary bytes (any UTF-8 or not) with
 * two real vocabularies loaded once at start-up:
 *   llama2c  stories260K.bin + tok512.bin (run.c's SentencePiece BPE);
 *   spm      ggml-vocab-llama-spm.gguf, vocabulary only (llama.cpp's SPM tokenizer);
 *   phi-3    ggml-vocab-phi-3.gguf, vocabulary only: SPM with the phi-3 family's special-token
 *            rules (whitespace after a special token dropped); its one user-defined token,
 *            "</s>", is an end-of-generation text and so a control token, split out only with
 *            special-token parsing, as in llama.cpp (only the shared checks).
 * Properties checked for every input (see fz_tokenize_opt too: the count is >= 0, nothing is
 * written past it, every id is in the vocabulary, every piece decodes; and for one of the four
 * tokenizations of each input, picked by a hash of its bytes, the same count for cap 0, the exact
 * cap and half of it — those three calls for all four took two thirds of the time):
 *   llama2c  - at most one token per byte plus BOS and the dummy-prefix space;
 *            - without BOS the ids are those with BOS minus the first (merges never cross BOS);
 *            - decoding round-trips exactly: after BOS the pieces concatenate to the input, and
 *              without BOS to " " + input (the dummy prefix). tok512 has all 256 <0xNN> byte
 *              tokens and a " " piece, so every byte sequence, valid UTF-8 or not, is
 *              representable, and a merge only ever joins two pieces into the piece of their
 *              concatenated bytes. This holds for this vocabulary, not for any tokenizer.bin.
 *   spm      - at most 3 tokens per byte (a space becomes the 3-byte "▁") plus BOS and prefix;
 *            - for valid UTF-8 without "▁" (U+2581 decodes to a space), the decode after BOS
 *              equals the input when no token decodes to nothing (a merge may form the text
 *              of a control token such as "<s>", which decodes to "" as in llama.cpp).
 */
#include <string.h>

#include "fuzz_util.h"

static wlm_model *g_l2c, *g_spm, *g_phi3;
static int32_t g_l2c_vocab, g_spm_vocab, g_phi3_vocab;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    wlm_model_info info;
    g_l2c = fz_load_shared_model("models/stories260K.bin", 0);
    fz_load_shared_tokenizer(g_l2c, "models/tok512.bin");
    if (wlm_model_get_info(g_l2c, &info) != WLM_OK) abort();
    g_l2c_vocab = info.vocab_size;
    g_spm = fz_load_shared_model("models/vocab/ggml-vocab-llama-spm.gguf", WLM_LOAD_VOCAB_ONLY);
    if (wlm_model_get_info(g_spm, &info) != WLM_OK) abort();
    g_spm_vocab = info.vocab_size;
    g_phi3 = fz_load_shared_model("models/vocab/ggml-vocab-phi-3.gguf", WLM_LOAD_VOCAB_ONLY);
    if (wlm_model_get_info(g_phi3, &info) != WLM_OK) abort();
    g_phi3_vocab = info.vocab_size;
    return 0;
}

static void show(const char *what, const char *s, size_t n) {
    fprintf(stderr, "%s (%zu bytes):", what, n);
    for (size_t i = 0; i < n && i < 200; i++) fprintf(stderr, " %02x", (unsigned char)s[i]);
    fputc('\n', stderr);
}

static void check_llama2c(const char *text, size_t len, uint32_t caps) {
    int32_t *with = NULL, *without = NULL;
    int32_t n = fz_tokenize_opt(g_l2c, text, len, 0, 1, g_l2c_vocab, caps == 0, &with);
    FZ_CHECK(n >= 0, "llama2c: wlm_tokenize failed: %s", wlm_status_name(n));
    int32_t m = fz_tokenize_opt(g_l2c, text, len, 0, 0, g_l2c_vocab, caps == 1, &without);
    FZ_CHECK(m >= 0, "llama2c: wlm_tokenize without BOS failed: %s", wlm_status_name(m));
    FZ_CHECK((size_t)n <= len + 2, "llama2c: %d tokens for %zu bytes", (int)n, len);
    FZ_CHECK(n >= 1 && with[0] == 1, "llama2c: the first id with BOS is not 1");
    FZ_CHECK(m == n - 1 && memcmp(with + 1, without, sizeof(int32_t) * (size_t)m) == 0,
             "llama2c: ids without BOS (%d) are not the ids with BOS (%d) minus BOS", (int)m,
             (int)n);

    fz_buf out = {0};
    fz_decode(g_l2c, with, 1, n, &out);
    if (out.n != len || memcmp(out.p, text, len) != 0) {
        show("input", text, len);
        show("decoded", out.p, out.n);
        FZ_CHECK(0, "llama2c: decoding after BOS does not give the input back");
    }
    fz_decode(g_l2c, without, 0, m, &out);
    const size_t want = len ? len + 1 : 0;
    if (out.n != want || (len && (out.p[0] != ' ' || memcmp(out.p + 1, text, len) != 0))) {
        show("input", text, len);
        show("decoded", out.p, out.n);
        FZ_CHECK(0, "llama2c: decoding without BOS does not give \" \" + input");
    }
    free(out.p);
    free(with);
    free(without);
}

static int contains(const char *s, size_t n, const char *needle) {
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(s + i, needle, k) == 0) return 1;
    return 0;
}

static void check_spm(const char *text, size_t len, uint32_t caps) {
    int32_t *ids = NULL;
    int32_t n = fz_tokenize_opt(g_spm, text, len, 0, 1, g_spm_vocab, caps == 2, &ids);
    FZ_CHECK(n >= 0, "spm: wlm_tokenize failed: %s", wlm_status_name(n));
    FZ_CHECK((size_t)n <= 3 * len + 5, "spm: %d tokens for %zu bytes", (int)n, len);
    FZ_CHECK(n >= 1 && ids[0] == 1, "spm: the first id with BOS is not 1 (%d)",
             n >= 1 ? (int)ids[0] : -1);
    fz_buf out = {0};
    fz_decode(g_spm, ids, 1, n, &out);
    int silent = 0;
    for (int32_t i = 1; i < n; i++) {
        size_t plen = 0;
        (void)wlm_token_piece(g_spm, -1, ids[i], &plen);
        silent |= plen == 0;
    }
    if (!silent && fz_utf8_valid((const unsigned char *)text, len) &&
        !contains(text, len, "\xe2\x96\x81") && (out.n != len || memcmp(out.p, text, len) != 0)) {
        show("input", text, len);
        show("decoded", out.p, out.n);
        FZ_CHECK(0, "spm: decoding after BOS does not give the input back");
    }
    free(out.p);
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = fz_dup(data, size); /* exact size: a read past the end is an ASan report */
    const uint32_t caps = fz_touch(data, size) % 4; /* which tokenization gets the cap checks */
    check_llama2c(text, size, caps);
    check_spm(text, size, caps);
    int32_t *ids = NULL;
    int32_t n = fz_tokenize_opt(g_phi3, text, size, 0, 1, g_phi3_vocab, caps == 3, &ids);
    FZ_CHECK(n >= 0, "phi-3: wlm_tokenize failed: %s", wlm_status_name(n));
    fz_buf out = {0};
    fz_decode(g_phi3, ids, 0, n, &out);
    free(out.p);
    free(ids);
    free(text);
    return 0;
}
