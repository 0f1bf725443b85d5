/*
 * fuzz_wordpiece.c — libFuzzer harness for BERT's WordPiece (src/tokenizer/wordpiece.c) with a
 * real vocabulary loaded once: llama.cpp's ggml-vocab-bert-bge.gguf (30522 tokens, vocabulary
 * only). For every input (see fz_tokenize too: the count is >= 0 and the same for every cap,
 * nothing is written past cap, every id is in the vocabulary, every piece decodes):
 *   - tokenizing succeeds; at most one token per output byte of the basic tokenizer, i.e.
 *     4 per input byte (a lower-cased character can be longer than its source), plus 2;
 *   - with add_special the ids are [CLS], the ids without it, then [SEP];
 *   - for ASCII input whose ids hold no [UNK] (which decodes to nothing), the decode is the
 *     basic tokenizer's words, computed here independently for ASCII (whitespace splits,
 *     punctuation and symbols are words of their own, other control bytes vanish, letters are
 *     lower-cased), each after one space: every word-start piece decodes to " " + its text,
 *     every continuation to its text;
 *   - with parse_special the shared checks.
 */
#include <ctype.h>
#include <string.h>

#include "fuzz_util.h"

static wlm_model *g_m;
static int32_t g_vocab, g_cls, g_sep, g_unk;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    wlm_model_info info;
    g_m = fz_load_shared_model("models/vocab/ggml-vocab-bert-bge.gguf", WLM_LOAD_VOCAB_ONLY);
    if (wlm_model_get_info(g_m, &info) != WLM_OK) abort();
    g_vocab = info.vocab_size;
    g_cls = 101, g_sep = 102, g_unk = 100; /* the file's [CLS], [SEP], [UNK] */
    return 0;
}

/* The expected decode of ASCII text (see above). */
static void ascii_words(const char *s, size_t n, fz_buf *out) {
    out->n = 0;
    fz_buf_put(out, "", 0);
    int in_word = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == ' ' || (c >= 9 && c <= 13)) {
            in_word = 0;
        } else if (c < 0x20 || c == 0x7f) {
            /* a control character: dropped, the word goes on */
        } else if (ispunct(c)) {
            char w[2] = {' ', (char)c};
            fz_buf_put(out, w, 2);
            in_word = 0;
        } else {
            char lc = (char)tolower(c);
            if (!in_word) fz_buf_put(out, " ", 1);
            fz_buf_put(out, &lc, 1);
            in_word = 1;
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = fz_dup(data, size);
    int32_t *with = NULL, *without = NULL;
    int32_t n = fz_tokenize(g_m, text, size, 1, g_vocab, &with);
    FZ_CHECK(n >= 0, "wlm_tokenize failed: %s", wlm_status_name(n));
    int32_t m = fz_tokenize(g_m, text, size, 0, g_vocab, &without);
    FZ_CHECK(m >= 0, "wlm_tokenize without special tokens failed: %s", wlm_status_name(m));
    FZ_CHECK((size_t)m <= 4 * size, "%d tokens for %zu bytes", (int)m, size);
    FZ_CHECK(n == m + 2 && with[0] == g_cls && with[n - 1] == g_sep &&
             (m == 0 || memcmp(with + 1, without, sizeof(int32_t) * (size_t)m) == 0),
             "with add_special (%d ids) is not [CLS] + the %d ids without + [SEP]", (int)n, (int)m);
    int ascii = 1, unk = 0;
    for (size_t i = 0; i < size; i++) ascii &= data[i] < 0x80;
    for (int32_t i = 0; i < m; i++) unk |= without[i] == g_unk;
    fz_buf got = {0}, want = {0};
    fz_decode(g_m, without, 0, m, &got);
    if (ascii && !unk) {
        ascii_words(text, size, &want);
        FZ_CHECK(got.n == want.n && memcmp(got.p, want.p, got.n) == 0,
                 "the decode (%zu bytes) is not the basic tokenizer's words (%zu bytes)", got.n,
                 want.n);
    }
    /* parse_special: [CLS], [SEP], [MASK], [PAD] and [UNK] written in the text become ids */
    int32_t k = wlm_tokenize_ex(g_m, text, size, WLM_TOKENIZE_PARSE_SPECIAL, NULL, 0);
    FZ_CHECK(k >= 0, "parse_special failed: %s", wlm_status_name(k));
    int32_t *sp = malloc(sizeof(int32_t) * ((size_t)k + 1));
    if (!sp) abort();
    sp[k] = 0x7eadbeef;
    FZ_CHECK(wlm_tokenize_ex(g_m, text, size, WLM_TOKENIZE_PARSE_SPECIAL, sp, k) == k,
             "parse_special count changed");
    FZ_CHECK(sp[k] == 0x7eadbeef, "parse_special wrote past cap");
    for (int32_t i = 0; i < k; i++)
        FZ_CHECK(sp[i] >= 0 && sp[i] < g_vocab, "parse_special id %d", sp[i]);
    fz_decode(g_m, sp, 0, k, &got);
    free(sp);
    free(got.p), free(want.p);
    free(with), free(without), free(text);
    return 0;
}
