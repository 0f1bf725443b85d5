/*
 * fuzz_bpe.c — libFuzzer harness for byte-level BPE and its pre-tokenizer regex engine, with
 * three real vocabularies loaded once (llama.cpp's ggml-vocab-*.gguf, vocabulary only):
 *   gpt-2         the GPT-2 regex alone;
 *   deepseek-llm  six regexes, literal Unicode ranges, "\s+$" (backtracking);
 *   falcon        the "default"-like list with punctuation runs and digit triples (this
 *                 vocabulary lacks 14 of the byte stand-ins, e.g. for 0x13: those bytes are
 *                 dropped, as in llama.cpp, so no round trip is checked for it).
 * For every input (see fz_tokenize_opt too: the count is >= 0, nothing is written past it,
 * every id is in the vocabulary, every piece decodes; and for one of the six tokenizations of
 * each input, picked by a hash of its bytes, the same count for cap 0, the exact cap and half
 * of it — those three calls for all six took most of the time):
 *   - tokenizing succeeds (inputs are at most 1024 bytes: far inside the step budget);
 *   - without parse_special, for valid UTF-8, gpt-2 and deepseek-llm decode back to the input
 *     when no piece is empty (they hold a token for each of the 256 byte stand-ins, so
 *     every byte sequence is representable; invalid UTF-8 is read as U+FFFD, as llama.cpp);
 *   - with parse_special the same checks minus the round trip;
 *   - the regex engine on the input itself: the bytes before the first NUL as a pattern, the
 *     rest as text; compiling either fails with a message or the pattern runs at each of the
 *     first 64 positions of the text under a step budget (no crash, no hang, ends inside it).
 */
#include <string.h>

#include "fuzz_util.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/unicode.h"

#define N_VOCABS 3
static const char *const NAMES[N_VOCABS] = {"gpt-2", "deepseek-llm", "falcon"};
static const int ALL_BYTES[N_VOCABS] = {1, 1, 0};
static wlm_model *g_m[N_VOCABS];
static int32_t g_vocab[N_VOCABS];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    for (int i = 0; i < N_VOCABS; i++) {
        char rel[128];
        wlm_model_info info;
        snprintf(rel, sizeof rel, "models/vocab/ggml-vocab-%s.gguf", NAMES[i]);
        g_m[i] = fz_load_shared_model(rel, WLM_LOAD_VOCAB_ONLY);
        if (wlm_model_get_info(g_m[i], &info) != WLM_OK) abort();
        g_vocab[i] = info.vocab_size;
    }
    return 0;
}

static void check_vocab(int v, const char *text, size_t len, int valid, uint32_t caps) {
    int32_t *ids = NULL;
    int32_t n = fz_tokenize_opt(g_m[v], text, len, 0, 0, g_vocab[v], caps == 2u * (uint32_t)v, &ids);
    FZ_CHECK(n >= 0, "%s: wlm_tokenize failed: %s", NAMES[v], wlm_status_name(n));
    FZ_CHECK((size_t)n <= 3 * len, "%s: %d tokens for %zu bytes", NAMES[v], (int)n, len);
    fz_buf out = {0};
    int empty = 0;
    for (int32_t i = 0; i < n; i++) {
        size_t pl;
        wlm_token_piece(g_m[v], i ? ids[i - 1] : -1, ids[i], &pl);
        empty |= pl == 0;
    }
    fz_decode(g_m[v], ids, 0, n, &out);
    if (valid && !empty && ALL_BYTES[v])
        FZ_CHECK(out.n == len && memcmp(out.p, text, len) == 0,
                 "%s: decoding does not give the input back (%zu bytes, %zu decoded)", NAMES[v],
                 len, out.n);
    free(ids);
    /* parse_special: the same shared checks through wlm_tokenize_ex */
    int32_t *sp = NULL;
    int32_t m = fz_tokenize_opt(g_m[v], text, len, 1, WLM_TOKENIZE_PARSE_SPECIAL, g_vocab[v],
                                caps == 2u * (uint32_t)v + 1, &sp);
    FZ_CHECK(m >= 0, "%s: parse_special failed: %s", NAMES[v], wlm_status_name(m));
    fz_decode(g_m[v], sp, 0, m, &out);
    free(sp);
    free(out.p);
}

static void check_regex(const char *data, size_t size) {
    const char *nul = memchr(data, 0, size);
    if (!nul) return;
    char err[160] = "";
    wlm_regex *re = wlm_regex_compile(data, err, sizeof err);
    if (!re) {
        FZ_CHECK(err[0] != '\0', "wlm_regex_compile failed without a message");
        return;
    }
    const unsigned char *t = (const unsigned char *)nul + 1;
    size_t tn = size - (size_t)(t - (const unsigned char *)data), n = 0;
    uint32_t *cps = malloc(sizeof(uint32_t) * (tn + 1));
    if (!cps) abort();
    for (size_t i = 0; i < tn;) {
        size_t used;
        cps[n++] = wlm_utf8_decode(t + i, tn - i, &used);
        i += used;
    }
    wlm_regex_work w = {0};
    for (size_t pos = 0; pos <= n && pos < 64; pos++) {
        w.steps = 4000;
        int64_t e = wlm_regex_match(re, cps, n, pos, &w);
        FZ_CHECK(e == -1 || e == -2 || (e >= (int64_t)pos && e <= (int64_t)n),
                 "regex match at %zu of %zu returned %lld", pos, n, (long long)e);
    }
    wlm_regex_work_free(&w);
    wlm_regex_free(re);
    free(cps);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = fz_dup(data, size);
    int valid = fz_utf8_valid(data, size);
    const uint32_t caps = fz_touch(data, size) % (2 * N_VOCABS); /* gets the cap checks */
    for (int v = 0; v < N_VOCABS; v++) check_vocab(v, text, size, valid, caps);
    check_regex(text, size);
    free(text);
    return 0;
}
