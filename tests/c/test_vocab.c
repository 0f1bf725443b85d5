/*
 * test_vocab.c — the GGUF vocabulary tokenizer (SentencePiece BPE as llama.cpp runs it):
 * llama.cpp's own test vectors for ggml-vocab-llama-spm.gguf and ggml-vocab-phi-3.gguf, loaded
 * through wlm_model_load(WLM_LOAD_VOCAB_ONLY) and the GGUF reader; round trips (the test
 * texts, every vocabulary piece and every Unicode code point, as llama.cpp's
 * test-tokenizer-1-spm checks them, and random text); other tokenizer models refused; and small
 * vocabularies written here as GGUF bytes for merge order, user-defined tokens, byte fallback,
 * flags, decoding by token type and malformed metadata.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "wasmlm.h"
#include "test_util.h"

/* ------------------------------------------------------------------------------------------ */
/* Helpers                                                                                     */

/* Encodes through the tokenizer; returns a malloc'd array (count in *n), NULL on error. */
static int32_t *encode(const wlm_tokenizer *t, const char *s, size_t len, int special, int32_t *n) {
    int32_t need = wlm_tokenizer_encode(t, s, len, special, NULL, 0);
    *n = need;
    if (need < 0) return NULL;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(need + 1));
    if (!ids) return NULL;
    int32_t again = wlm_tokenizer_encode(t, s, len, special, ids, need);
    if (again != need) {
        free(ids);
        *n = -100;
        return NULL;
    }
    return ids;
}

/* Decodes ids as a generation would print them: pieces chained through `prev`, starting
 * after `first_prev` (BOS: the dummy-prefix space goes). Returns the byte count; out holds at
 * most cap bytes. */
static size_t decode(const wlm_tokenizer *t, int32_t first_prev, const int32_t *ids, int32_t n,
                     char *out, size_t cap) {
    size_t o = 0;
    int32_t prev = first_prev;
    for (int32_t i = 0; i < n; i++) {
        size_t len = 0;
        const char *p = wlm_tokenizer_piece(t, prev, ids[i], &len);
        if (p && o + len <= cap) memcpy(out + o, p, len);
        o += len;
        prev = ids[i];
    }
    return o;
}

static void format_ids(char *buf, size_t cap, const int32_t *ids, int32_t n) {
    size_t o = 0;
    buf[0] = 0;
    for (int32_t i = 0; i < n && o + 16 < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%d", i ? " " : "", (int)ids[i]);
}

/* A printable, bounded copy of a text for failure messages. */
static const char *show(const char *s, size_t n) {
    static char buf[200];
    size_t o = 0;
    for (size_t i = 0; i < n && o + 6 < sizeof buf; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '\\') buf[o++] = (char)c;
        else o += (size_t)snprintf(buf + o, sizeof buf - o, "\\x%02x", c);
    }
    buf[o] = 0;
    return buf;
}

/* Checks decode(encode(text)) == text, decoding after BOS. Returns 1 when it holds. */
static int round_trips(const wlm_tokenizer *t, const char *s, size_t len) {
    int32_t n;
    int32_t *ids = encode(t, s, len, 0, &n);
    if (!ids) return 0;
    size_t cap = len * 2 + 16;
    char *out = malloc(cap);
    size_t m = out ? decode(t, t->bos_id, ids, n, out, cap) : 0;
    int ok = out && m == len && memcmp(out, s, len) == 0;
    free(ids);
    free(out);
    return ok;
}

/* ------------------------------------------------------------------------------------------ */
/* llama.cpp's vectors: <vocab>.inp (texts separated by "\n__ggml_vocab_test__\n") and
 * <vocab>.out (one line of ids per text), tokenized without BOS and without special tokens.   */

typedef struct text_span {
    const char *s;
    size_t len;
} text_span;

/* Splits the .inp bytes as llama.cpp's read_tests does (a trailing separator adds nothing). */
static int split_inp(const char *d, size_t n, text_span *out, int max) {
    static const char SEP[] = "\n__ggml_vocab_test__\n";
    const size_t sl = sizeof SEP - 1;
    int k = 0;
    size_t pos = 0;
    while (pos < n && k < max) {
        size_t next = pos;
        while (next + sl <= n && memcmp(d + next, SEP, sl) != 0) next++;
        if (next + sl > n) {
            out[k].s = d + pos, out[k].len = n - pos, k++;
            break;
        }
        out[k].s = d + pos, out[k].len = next - pos, k++;
        pos = next + sl;
    }
    return k;
}

/* Parses line `line` of the .out bytes into ids; returns the count, -1 if the line is absent. */
static int parse_out_line(const char *d, size_t n, int line, int32_t *ids, int cap) {
    size_t pos = 0;
    for (int l = 0; l < line; l++) {
        while (pos < n && d[pos] != '\n') pos++;
        if (pos >= n) return -1;
        pos++;
    }
    if (pos >= n) return -1;
    int k = 0;
    while (pos < n && d[pos] != '\n') {
        if (d[pos] == ' ' || d[pos] == '\r') {
            pos++;
            continue;
        }
        long v = 0;
        while (pos < n && d[pos] >= '0' && d[pos] <= '9') v = v * 10 + (d[pos++] - '0');
        if (k < cap) ids[k] = (int32_t)v;
        k++;
        if (pos < n && d[pos] != ' ' && d[pos] != '\n' && d[pos] != '\r') return -1;
    }
    return k;
}

static wlm_model *load_vocab_model(const char *rel, unsigned char **data_out) {
    size_t size = 0;
    unsigned char *data = tu_read_shared(rel, &size);
    *data_out = data;
    if (!data) return NULL;
    wlm_model *m = NULL;
    int rc = wlm_model_load(data, size, WLM_LOAD_VOCAB_ONLY, &m);
    CHECKF(rc == WLM_OK, "%s: %s: %s", rel, wlm_status_name(rc), wlm_model_errmsg(m));
    if (rc != WLM_OK) {
        wlm_model_free(m);
        return NULL;
    }
    return m;
}

static void test_vectors(const char *vocab, int32_t n_vocab, int32_t eos) {
    char rel[256];
    unsigned char *data = NULL;
    snprintf(rel, sizeof rel, "models/vocab/%s", vocab);
    tu_section(vocab);
    wlm_model *m = load_vocab_model(rel, &data);
    if (!m) {
        free(data);
        return;
    }
    const wlm_tokenizer *t = &m->tok;
    wlm_model_info info;
    CHECK_STATUS(wlm_model_get_info(m, &info), WLM_OK);
    CHECK_EQ_INT(info.vocab_size, n_vocab);
    CHECK_EQ_INT(info.has_tokenizer, 1);
    CHECK_EQ_INT(info.bos_id, 1);
    CHECK_EQ_INT(info.eos_id, eos);
    CHECK_EQ_INT(t->kind, WLM_TOKENIZER_SPM);
    CHECK_EQ_INT(t->unk_id, 0);
    CHECK_EQ_INT(t->add_bos, 1);
    CHECK_EQ_INT(t->add_eos, 0);
    CHECK_EQ_INT(t->add_space_prefix, 1);

    size_t in_size = 0, out_size = 0;
    snprintf(rel, sizeof rel, "models/vocab/%s.inp", vocab);
    char *inp = (char *)tu_read_shared(rel, &in_size);
    snprintf(rel, sizeof rel, "models/vocab/%s.out", vocab);
    char *outf = (char *)tu_read_shared(rel, &out_size);
    if (inp && outf) {
        text_span texts[256];
        int n = split_inp(inp, in_size, texts, 256);
        int exact = 0, trips = 0;
        CHECKF(n >= 40, "only %d texts in %s.inp", n, vocab);
        CHECKF(parse_out_line(outf, out_size, n, NULL, 0) < 0 ||
                   parse_out_line(outf, out_size, n, NULL, 0) == 0,
               "%s.out has more lines than %s.inp has texts", vocab, vocab);
        for (int i = 0; i < n; i++) {
            int32_t want[512], got_n = 0;
            int want_n = parse_out_line(outf, out_size, i, want, 512);
            if (!CHECKF(want_n >= 0 && want_n <= 512, "%s.out line %d missing or too long", vocab, i))
                continue;
            /* through the public API */
            int32_t need = wlm_tokenize(m, texts[i].s, texts[i].len, 0, NULL, 0);
            int32_t *got = need >= 0 ? malloc(sizeof(int32_t) * (size_t)(need + 1)) : NULL;
            if (got) got_n = wlm_tokenize(m, texts[i].s, texts[i].len, 0, got, need);
            int same = got && got_n == want_n;
            for (int k = 0; same && k < want_n; k++) same = got[k] == want[k];
            if (same) {
                exact++;
            } else {
                char a[2048], b[2048];
                format_ids(a, sizeof a, got ? got : want, got ? got_n : 0);
                format_ids(b, sizeof b, want, want_n);
                CHECKF(same, "%s text #%d \"%s\":\n  got  %s\n  want %s", vocab, i,
                       show(texts[i].s, texts[i].len), a, b);
            }
            free(got);
            /* with add_special: BOS first, same ids after it */
            {
                int32_t n2;
                int32_t *ids = encode(t, texts[i].s, texts[i].len, 1, &n2);
                int ok = ids && n2 == want_n + 1 && ids[0] == 1;
                for (int k = 0; ok && k < want_n; k++) ok = ids[k + 1] == want[k];
                CHECKF(ok, "%s text #%d with BOS", vocab, i);
                free(ids);
            }
            if (round_trips(t, texts[i].s, texts[i].len)) trips++;
            else CHECKF(0, "%s text #%d \"%s\" does not round-trip", vocab, i,
                        show(texts[i].s, texts[i].len));
        }
        printf("%s: %d of %d texts exact, %d of %d round-trip\n", vocab, exact, n, trips, n);
        CHECK_EQ_INT(exact, n);
    }
    free(inp);
    free(outf);

    /* Every piece round-trips (llama.cpp's test-tokenizer-1-spm, without special-token parsing:
     * control, unknown and unused tokens decode to nothing and are skipped). */
    {
        int bad = 0, tried = 0;
        for (int32_t id = 0; id < t->vocab_size; id++) {
            size_t len = 0;
            const char *p = wlm_tokenizer_piece(t, t->bos_id, id, &len);
            if (!p || len == 0) continue;
            tried++;
            if (!round_trips(t, p, len) && bad++ < 5)
                CHECKF(0, "%s: piece %d \"%s\" does not round-trip", vocab, (int)id, show(p, len));
        }
        printf("%s: %d of %d decodable pieces round-trip\n", vocab, tried - bad, tried);
        CHECK_EQ_INT(bad, 0);
        CHECK(tried > 31000);
    }
    /* Every code point (but surrogates, the unassigned planes 4..13 and U+2581 itself, which
     * decodes to a space), as the same llama.cpp test does. */
    {
        int bad = 0, tried = 0;
        for (uint32_t cp = 0; cp < 0x110000; cp++) {
            if ((cp >= 0xD800 && cp <= 0xDFFF) || (cp >= 0x40000 && cp <= 0xE0000) || cp == 0x2581)
                continue;
            char s[4];
            size_t n;
            if (cp < 0x80) s[0] = (char)cp, n = 1;
            else if (cp < 0x800) s[0] = (char)(0xC0 | cp >> 6), s[1] = (char)(0x80 | (cp & 63)), n = 2;
            else if (cp < 0x10000)
                s[0] = (char)(0xE0 | cp >> 12), s[1] = (char)(0x80 | (cp >> 6 & 63)),
                s[2] = (char)(0x80 | (cp & 63)), n = 3;
            else
                s[0] = (char)(0xF0 | cp >> 18), s[1] = (char)(0x80 | (cp >> 12 & 63)),
                s[2] = (char)(0x80 | (cp >> 6 & 63)), s[3] = (char)(0x80 | (cp & 63)), n = 4;
            tried++;
            if (!round_trips(t, s, n) && bad++ < 5)
                CHECKF(0, "%s: code point U+%04X does not round-trip", vocab, (unsigned)cp);
        }
        printf("%s: %d of %d code points round-trip\n", vocab, tried - bad, tried);
        CHECK_EQ_INT(bad, 0);
    }
    /* Random valid UTF-8 (ASCII-heavy, spaces, newlines, multi-byte characters) round-trips;
     * random bytes encode without harm, and the count-only call agrees. */
    {
        tu_rng r = {0x5eed0000u + (uint64_t)n_vocab};
        char s[300];
        int bad = 0;
        for (int iter = 0; iter < 400; iter++) {
            size_t n = 0, target = (size_t)(tu_rng_u64(&r) % 200);
            while (n < target) {
                uint64_t k = tu_rng_u64(&r) % 100;
                uint32_t cp = k < 50 ? (uint32_t)(0x61 + tu_rng_u64(&r) % 26)
                            : k < 65 ? 0x20
                            : k < 70 ? 0x0A
                            : k < 80 ? (uint32_t)(0x21 + tu_rng_u64(&r) % 94)
                            : k < 90 ? (uint32_t)(0xA0 + tu_rng_u64(&r) % 0x700)
                            : k < 97 ? (uint32_t)(0x3000 + tu_rng_u64(&r) % 0x6000)
                                     : (uint32_t)(0x1F300 + tu_rng_u64(&r) % 0x300);
                if (cp < 0x80) s[n++] = (char)cp;
                else if (cp < 0x800) s[n++] = (char)(0xC0 | cp >> 6), s[n++] = (char)(0x80 | (cp & 63));
                else if (cp < 0x10000) {
                    if (cp == 0x2581 || (cp >= 0xD800 && cp <= 0xDFFF)) continue;
                    s[n++] = (char)(0xE0 | cp >> 12), s[n++] = (char)(0x80 | (cp >> 6 & 63));
                    s[n++] = (char)(0x80 | (cp & 63));
                } else {
                    s[n++] = (char)(0xF0 | cp >> 18), s[n++] = (char)(0x80 | (cp >> 12 & 63));
                    s[n++] = (char)(0x80 | (cp >> 6 & 63)), s[n++] = (char)(0x80 | (cp & 63));
                }
            }
            if (!round_trips(t, s, n) && bad++ < 5)
                CHECKF(0, "%s: random text \"%s\" does not round-trip", vocab, show(s, n));
        }
        CHECK_EQ_INT(bad, 0);
        for (int iter = 0; iter < 300; iter++) {
            size_t n = (size_t)(tu_rng_u64(&r) % 64);
            for (size_t i = 0; i < n; i++) s[i] = (char)tu_rng_u64(&r);
            int32_t cnt = wlm_tokenizer_encode(t, s, n, 0, NULL, 0);
            int32_t ids[300];
            int32_t got = wlm_tokenizer_encode(t, s, n, 0, ids, 300);
            if (!CHECKF(cnt >= 0 && cnt == got && cnt <= 3 * (int32_t)n + 3,
                        "random bytes: %d then %d tokens", (int)cnt, (int)got))
                break;
            for (int32_t i = 0; i < got; i++)
                if (!CHECK(ids[i] >= 0 && ids[i] < t->vocab_size)) break;
        }
    }
    wlm_model_free(m);
    free(data);
}

/* Well-known ids and pieces of the Llama 2 vocabulary (ids as in tokenizer.bin). */
static void test_llama_spm_details(void) {
    unsigned char *data = NULL;
    tu_section("llama-spm details");
    wlm_model *m = load_vocab_model("models/vocab/ggml-vocab-llama-spm.gguf", &data);
    if (!m) {
        free(data);
        return;
    }
    int32_t ids[16];
    CHECK_EQ_INT(wlm_tokenize(m, "Once upon a time", 16, 1, ids, 16), 5);
    CHECK(ids[0] == 1 && ids[1] == 9038 && ids[2] == 2501 && ids[3] == 263 && ids[4] == 931);
    /* cap smaller than needed: count back, at most cap written */
    for (int i = 0; i < 16; i++) ids[i] = -7;
    CHECK_EQ_INT(wlm_tokenize(m, "Once upon a time", 16, 1, ids, 2), 5);
    CHECK(ids[0] == 1 && ids[1] == 9038 && ids[2] == -7);
    CHECK_EQ_INT(wlm_tokenize(m, "", 0, 1, ids, 16), 1);
    CHECK_EQ_INT(wlm_tokenize(m, "", 0, 0, ids, 16), 0);
    CHECK_EQ_INT(wlm_tokenize(m, NULL, 0, 0, ids, 16), 0);
    /* NUL is an ordinary byte: <0x00> = id 3 */
    CHECK_EQ_INT(wlm_tokenize(m, "a\0b", 3, 0, ids, 16), 3);
    CHECK(ids[0] == 263 && ids[1] == 3 && ids[2] == 29890);
    /* pieces: "▁" is a space, removed after BOS; bytes; control tokens are empty */
    size_t len = 99;
    const char *p = wlm_token_piece(m, -1, 9038, &len);
    CHECKF(p && len == 5 && memcmp(p, " Once", 6) == 0, "\"▁Once\" decodes to \" Once\"");
    p = wlm_token_piece(m, 1, 9038, &len);
    CHECKF(p && len == 4 && memcmp(p, "Once", 5) == 0, "after BOS the space goes");
    p = wlm_token_piece(m, 9038, 9038, &len);
    CHECK(p && len == 5);
    p = wlm_token_piece(m, -1, 13, &len);
    CHECKF(p && len == 1 && p[0] == '\n' && p[1] == 0, "<0x0A> is a newline");
    p = wlm_token_piece(m, -1, 3, &len);
    CHECKF(p && len == 1 && p[0] == 0, "<0x00> is a NUL byte, counted");
    p = wlm_token_piece(m, 1, 3 + ' ', &len);
    CHECKF(p && len == 0, "<0x20> after BOS loses its space too (llama.cpp strips the output)");
    for (int32_t id = 0; id < 3; id++) {
        p = wlm_token_piece(m, -1, id, &len);
        CHECKF(p && len == 0 && p[0] == 0, "token %d (unknown/control) decodes to \"\"", (int)id);
    }
    p = wlm_token_piece(m, -1, 29871, &len);
    CHECKF(p && len == 1 && p[0] == ' ', "\"▁\" alone is a space");
    CHECK(wlm_token_piece(m, -1, 32000, &len) == NULL && len == 0);
    CHECK(wlm_token_piece(m, -1, -1, &len) == NULL);
    /* a tokenizer is already there: tokenizer.bin cannot be added */
    {
        size_t tsize = 0;
        unsigned char *tb = tu_read_shared("models/tokenizer.bin", &tsize);
        if (tb) CHECK_STATUS(wlm_model_load_tokenizer(m, tb, tsize), WLM_ERR_STATE);
        free(tb);
    }
    /* the same vocabulary as tokenizer.bin, but llama.cpp's algorithm: both agree on text
     * where run.c's greedy rescan and the queue make the same choices */
    {
        size_t tsize = 0;
        unsigned char *tb = tu_read_shared("models/tokenizer.bin", &tsize);
        wlm_tokenizer l2;
        char err[256] = "";
        int32_t count = tb ? wlm_tokenizer_count_llama2c(tb, tsize, err, sizeof err) : -1;
        CHECKF(count == 32000, "tokenizer.bin holds %d entries (%s)", (int)count, err);
        if (tb && count > 0 && wlm_tokenizer_load_llama2c(&l2, tb, tsize, count, err, sizeof err) == WLM_OK) {
            static const char *const S[] = {"Hello world", "The quick brown fox jumps over the lazy dog.",
                                            "Lily and Ben played in the park."};
            for (int i = 0; i < 3; i++) {
                int32_t a[64], b[64];
                int32_t na = wlm_tokenizer_encode(&l2, S[i], strlen(S[i]), 1, a, 64);
                int32_t nb = wlm_tokenize(m, S[i], strlen(S[i]), 1, b, 64);
                int same = na == nb && na > 0;
                for (int k = 0; same && k < na; k++) same = a[k] == b[k];
                CHECKF(same, "tokenizer.bin and the GGUF vocabulary disagree on \"%s\"", S[i]);
            }
            wlm_tokenizer_free(&l2);
        }
        free(tb);
    }
    wlm_model_free(m);
    free(data);
}

/* WordPiece (tokenizer.ggml.model "bert", llama.cpp's WPM): special ids, [CLS] ... [SEP] with
 * the special tokens, pieces that decode to " word" / "continuation", [UNK] for a word no piece
 * starts, control tokens split out only with parse_special. An unknown tokenizer model (the same
 * file with its model renamed) is refused with a message naming it. */
static void test_wordpiece_and_other_models(void) {
    tu_section("WordPiece (bert-bge) and other tokenizer models");
    size_t size = 0;
    unsigned char *data = tu_read_shared("models/vocab/ggml-vocab-bert-bge.gguf", &size);
    if (!data) return;
    wlm_model *m = NULL;
    int rc = wlm_model_load(data, size, WLM_LOAD_VOCAB_ONLY, &m);
    CHECK_STATUS(rc, WLM_OK);
    if (rc == WLM_OK) {
        wlm_model_info info;
        CHECK_STATUS(wlm_model_get_info(m, &info), WLM_OK);
        CHECK_EQ_INT(info.bos_id, 101); /* [CLS] */
        int32_t ids[32];
        const char *t = "Hello, unaffable world!";
        int32_t n = wlm_tokenize(m, t, strlen(t), 1, ids, 32);
        /* [CLS] hello , una ##ffa ##ble world ! [SEP] (bert-base-uncased's pieces, as Hugging Face) */
        static const int32_t want[] = {101, 7592, 1010, 14477, 20961, 3468, 2088, 999, 102};
        CHECK_EQ_INT(n, 9);
        CHECK(n == 9 && memcmp(ids, want, sizeof want) == 0);
        char text[64] = "";
        size_t o = 0, len;
        for (int32_t i = 0; i < n && o < 48; i++) {
            const char *p = wlm_token_piece(m, i ? ids[i - 1] : -1, ids[i], &len);
            memcpy(text + o, p, len);
            o += len;
        }
        text[o] = 0;
        CHECKF(strcmp(text, " hello , unaffable world !") == 0, "decoded \"%s\"", text);
        /* a word made of a character the vocabulary lacks is one [UNK] */
        static const char khmer[] = "a \xe1\x9e\x80\xe1\x9e\x80 b";
        n = wlm_tokenize(m, khmer, sizeof khmer - 1, 0, ids, 32);
        CHECK(n == 3 && ids[1] == 100);
        /* [MASK] in the text: plain text, or the control token with parse_special */
        n = wlm_tokenize_ex(m, "[MASK]", 6, 0, ids, 32);
        CHECK(n > 1 && ids[0] != 103);
        n = wlm_tokenize_ex(m, "[MASK]", 6, WLM_TOKENIZE_PARSE_SPECIAL, ids, 32);
        CHECK(n == 1 && ids[0] == 103);
        /* accents stripped, case folded: "Café" is "cafe" */
        int32_t a[8], b[8];
        int32_t na = wlm_tokenize(m, "Caf\xc3\xa9", 5, 0, a, 8), nb = wlm_tokenize(m, "cafe", 4, 0, b, 8);
        CHECK(na == nb && na > 0 && memcmp(a, b, sizeof(int32_t) * (size_t)na) == 0);
    }
    wlm_model_free(m);
    /* the same vocabulary under an unknown model name */
    static const char key[] = "tokenizer.ggml.model";
    unsigned char *k = NULL;
    for (size_t i = 0; i + sizeof key + 12 + 4 <= size && !k; i++)
        if (memcmp(data + i, key, sizeof key - 1) == 0) k = data + i + sizeof key - 1 + 4 + 8;
    CHECK(k && memcmp(k, "bert", 4) == 0);
    if (k) {
        memcpy(k, "wxyz", 4);
        m = NULL;
        CHECK_STATUS(wlm_model_load(data, size, WLM_LOAD_VOCAB_ONLY, &m), WLM_ERR_UNSUPPORTED);
        CHECKF(strstr(wlm_model_errmsg(m), "\"wxyz\"") != NULL, "message \"%s\"", wlm_model_errmsg(m));
        wlm_model_free(m);
    }
    free(data);
}

/* ------------------------------------------------------------------------------------------ */
/* Synthetic vocabularies: a minimal GGUF writer (key/values only, no tensors)                 */

typedef struct gw {
    unsigned char *p;
    size_t n, cap;
    uint64_t n_kv;
} gw;

static void gw_bytes(gw *w, const void *b, size_t n) {
    if (w->n + n > w->cap) {
        size_t cap = (w->cap + n) * 2;
        unsigned char *p = realloc(w->p, cap);
        if (!p) abort(); /* test harness only */
        w->p = p, w->cap = cap;
    }
    if (n) memcpy(w->p + w->n, b, n);
    w->n += n;
}
static void gw_u32(gw *w, uint32_t v) {
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    gw_bytes(w, b, 4);
}
static void gw_u64(gw *w, uint64_t v) {
    gw_u32(w, (uint32_t)v);
    gw_u32(w, (uint32_t)(v >> 32));
}
static void gw_strn(gw *w, const char *s, size_t n) {
    gw_u64(w, n);
    gw_bytes(w, s, n);
}
static void gw_str(gw *w, const char *s) { gw_strn(w, s, strlen(s)); }
static void gw_begin(gw *w) {
    memset(w, 0, sizeof *w);
    gw_bytes(w, "GGUF", 4);
    gw_u32(w, 3);
    gw_u64(w, 0); /* tensors */
    gw_u64(w, 0); /* n_kv, patched by gw_end */
}
static void gw_key(gw *w, const char *key, uint32_t type) {
    gw_str(w, key);
    gw_u32(w, type);
    w->n_kv++;
}
static void kv_str(gw *w, const char *key, const char *v) {
    gw_key(w, key, WLM_GGUF_STRING);
    gw_str(w, v);
}
static void kv_u32(gw *w, const char *key, uint32_t v) {
    gw_key(w, key, WLM_GGUF_UINT32);
    gw_u32(w, v);
}
static void kv_bool(gw *w, const char *key, int v) {
    unsigned char b = (unsigned char)v;
    gw_key(w, key, WLM_GGUF_BOOL);
    gw_bytes(w, &b, 1);
}
/* A STRING array; pieces may contain NUL when lens is given. */
static void kv_pieces(gw *w, const char *key, const char *const *s, const size_t *lens, int n) {
    gw_key(w, key, WLM_GGUF_ARRAY);
    gw_u32(w, WLM_GGUF_STRING);
    gw_u64(w, (uint64_t)n);
    for (int i = 0; i < n; i++) gw_strn(w, s[i], lens ? lens[i] : strlen(s[i]));
}
static void kv_f32s(gw *w, const char *key, const float *v, int n) {
    gw_key(w, key, WLM_GGUF_ARRAY);
    gw_u32(w, WLM_GGUF_FLOAT32);
    gw_u64(w, (uint64_t)n);
    for (int i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        gw_u32(w, u);
    }
}
static void kv_i32s(gw *w, const char *key, uint32_t elem_type, const int32_t *v, int n) {
    gw_key(w, key, WLM_GGUF_ARRAY);
    gw_u32(w, elem_type);
    gw_u64(w, (uint64_t)n);
    for (int i = 0; i < n; i++) gw_u32(w, (uint32_t)v[i]);
}
static void gw_end(gw *w) {
    for (int i = 0; i < 8; i++) w->p[16 + i] = (unsigned char)(w->n_kv >> (8 * i));
}

/*
 * A small vocabulary: <unk> <s> </s>, the 256 byte tokens <0x00>..<0xFF> (ids 3..258), then
 * the pieces below from id 259. Options change single entries.
 */
#define MAXV 300
typedef struct vocab {
    const char *piece[MAXV];
    size_t len[MAXV];
    float score[MAXV];
    int32_t type[MAXV];
    int n;
} vocab;

static char byte_names[256][7];

static void vocab_base(vocab *v, int with_bytes) {
    memset(v, 0, sizeof *v);
    static const char *const SPECIAL[] = {"<unk>", "<s>", "</s>"};
    static const int32_t SPECIAL_TYPE[] = {WLM_TOKEN_UNKNOWN, WLM_TOKEN_CONTROL, WLM_TOKEN_CONTROL};
    for (int i = 0; i < 3; i++) {
        v->piece[v->n] = SPECIAL[i], v->len[v->n] = strlen(SPECIAL[i]);
        v->type[v->n] = SPECIAL_TYPE[i], v->n++;
    }
    if (with_bytes)
        for (int b = 0; b < 256; b++) {
            snprintf(byte_names[b], sizeof byte_names[b], "<0x%02X>", b);
            v->piece[v->n] = byte_names[b], v->len[v->n] = 6, v->type[v->n] = WLM_TOKEN_BYTE;
            v->n++;
        }
}

static int32_t vocab_add(vocab *v, const char *piece, float score, int32_t type) {
    v->piece[v->n] = piece, v->len[v->n] = strlen(piece), v->score[v->n] = score;
    v->type[v->n] = type;
    return v->n++;
}

typedef struct vocab_opts {
    const char *model;        /* default "llama" */
    const char *name;         /* general.name, optional */
    int add_space_prefix;     /* -1: key absent */
    int add_bos, add_eos;     /* -1: key absent */
    int no_scores, no_types;
} vocab_opts;

static const vocab_opts DEFAULTS = {NULL, NULL, -1, -1, -1, 0, 0};

static unsigned char *vocab_gguf(const vocab *v, const vocab_opts *o, size_t *size) {
    gw w;
    gw_begin(&w);
    kv_str(&w, "general.architecture", "llama");
    if (o->name) kv_str(&w, "general.name", o->name);
    kv_str(&w, "tokenizer.ggml.model", o->model ? o->model : "llama");
    kv_pieces(&w, "tokenizer.ggml.tokens", v->piece, v->len, v->n);
    if (!o->no_scores) kv_f32s(&w, "tokenizer.ggml.scores", v->score, v->n);
    if (!o->no_types) kv_i32s(&w, "tokenizer.ggml.token_type", WLM_GGUF_INT32, v->type, v->n);
    kv_u32(&w, "tokenizer.ggml.bos_token_id", 1);
    kv_u32(&w, "tokenizer.ggml.eos_token_id", 2);
    kv_u32(&w, "tokenizer.ggml.unknown_token_id", 0);
    if (o->add_bos >= 0) kv_bool(&w, "tokenizer.ggml.add_bos_token", o->add_bos);
    if (o->add_eos >= 0) kv_bool(&w, "tokenizer.ggml.add_eos_token", o->add_eos);
    if (o->add_space_prefix >= 0) kv_bool(&w, "tokenizer.ggml.add_space_prefix", o->add_space_prefix);
    gw_end(&w);
    *size = w.n;
    return w.p;
}

/* Parses GGUF bytes and loads the tokenizer; returns the status (message in err). */
static int load_bytes(wlm_tokenizer *t, const unsigned char *bytes, size_t size, char *err,
                      size_t errlen) {
    wlm_gguf g;
    int rc = wlm_gguf_parse(&g, bytes, size, err, errlen);
    CHECKF(rc == WLM_OK, "synthetic GGUF does not parse: %s", err);
    if (rc != WLM_OK) return rc;
    memset(t, 0x5a, sizeof *t);
    rc = wlm_tokenizer_load_gguf(t, &g, err, errlen);
    wlm_gguf_free(&g);
    return rc;
}

static int load_vocab(wlm_tokenizer *t, const vocab *v, const vocab_opts *o) {
    size_t size;
    char err[256] = "";
    unsigned char *bytes = vocab_gguf(v, o, &size);
    int rc = load_bytes(t, bytes, size, err, sizeof err);
    CHECKF(rc == WLM_OK, "synthetic vocabulary: %s (%s)", wlm_status_name(rc), err);
    free(bytes);
    return rc;
}

/* Expects text to encode to exactly the ids given (terminated by -1). */
static void expect_ids(const wlm_tokenizer *t, const char *what, const char *s, size_t len,
                       int special, ...) {
    int32_t want[64];
    int nw = 0;
    va_list ap;
    va_start(ap, special);
    for (int v; (v = va_arg(ap, int)) != -1 && nw < 64;) want[nw++] = v;
    va_end(ap);
    int32_t n;
    int32_t *got = encode(t, s, len, special, &n);
    int same = got && n == nw;
    for (int i = 0; same && i < nw; i++) same = got[i] == want[i];
    char a[512], b[512];
    format_ids(a, sizeof a, got ? got : want, got ? n : 0);
    format_ids(b, sizeof b, want, nw);
    CHECKF(same, "%s: \"%s\" gives [%s], want [%s]", what, show(s, len), a, b);
    free(got);
}

#define SP "\xe2\x96\x81"

static void test_merges(void) {
    wlm_tokenizer t;
    vocab v;
    tu_section("synthetic: merge order");
    /* "abc": bigrams ▁a, ab, bc. ab and bc tie: the leftmost (ab) merges first, then abc. */
    vocab_base(&v, 1);
    int32_t sp = vocab_add(&v, SP, -100, WLM_TOKEN_NORMAL);
    int32_t a = vocab_add(&v, "a", -50, WLM_TOKEN_NORMAL);
    int32_t b = vocab_add(&v, "b", -50, WLM_TOKEN_NORMAL);
    int32_t c = vocab_add(&v, "c", -50, WLM_TOKEN_NORMAL);
    int32_t ab = vocab_add(&v, "ab", -1, WLM_TOKEN_NORMAL);
    int32_t bc = vocab_add(&v, "bc", -1, WLM_TOKEN_NORMAL);
    int32_t spa = vocab_add(&v, SP "a", -5, WLM_TOKEN_NORMAL);
    int32_t abc = vocab_add(&v, "abc", -10, WLM_TOKEN_NORMAL);
    if (load_vocab(&t, &v, &DEFAULTS) == WLM_OK) {
        expect_ids(&t, "tie goes left", "abc", 3, 0, sp, abc, -1);
        expect_ids(&t, "tie goes left (2)", "bcbc", 4, 0, sp, bc, bc, -1);
        expect_ids(&t, "merge inside", "cab", 3, 0, sp, c, ab, -1);
        expect_ids(&t, "dummy prefix", "a", 1, 0, spa, -1);
        expect_ids(&t, "spaces are ▁", "a a", 3, 0, spa, spa, -1);
        expect_ids(&t, "BOS with add_special", "a", 1, 1, 1, spa, -1);
        expect_ids(&t, "empty text", "", 0, 0, -1);
        expect_ids(&t, "empty text, BOS", "", 0, 1, 1, -1);
        /* bytes not in the vocabulary fall back to <0xNN> (id 3 + byte) */
        expect_ids(&t, "byte fallback", "a\xc3\xa9", 3, 0, spa, 3 + 0xc3, 3 + 0xa9, -1);
        /* a lead byte takes its continuation bytes even when they are not (invalid UTF-8) */
        expect_ids(&t, "invalid UTF-8", "\xe0" "ab", 3, 0, sp, 3 + 0xe0, 3 + 'a', 3 + 'b', -1);
        expect_ids(&t, "truncated at the end", "a\xf0\x9f", 3, 0, spa, 3 + 0xf0, 3 + 0x9f, -1);
        wlm_tokenizer_free(&t);
    }
    /* bc above ab: ▁ a bc, then ▁a (the only pair left in the vocabulary besides abc: a+bc) —
     * ▁a scores -5 over abc's -10. */
    v.score[bc] = 0;
    if (load_vocab(&t, &v, &DEFAULTS) == WLM_OK) {
        expect_ids(&t, "higher score first", "abc", 3, 0, spa, bc, -1);
        wlm_tokenizer_free(&t);
    }
    (void)b;
    /* without add_space_prefix: no dummy prefix */
    v.score[bc] = -1;
    vocab_opts o = DEFAULTS;
    o.add_space_prefix = 0;
    if (load_vocab(&t, &v, &o) == WLM_OK) {
        CHECK_EQ_INT(t.add_space_prefix, 0);
        expect_ids(&t, "no prefix", "abc", 3, 0, abc, -1);
        expect_ids(&t, "no prefix, space inside", "a abc", 5, 0, a, sp, abc, -1);
        size_t len;
        const char *p = wlm_tokenizer_piece(&t, 1, spa, &len);
        CHECKF(p && len == 2 && memcmp(p, " a", 2) == 0, "no prefix: the space stays after BOS");
        wlm_tokenizer_free(&t);
    }
    /* add_bos_token false, add_eos_token true: add_special follows them */
    o = DEFAULTS;
    o.add_bos = 0, o.add_eos = 1;
    if (load_vocab(&t, &v, &o) == WLM_OK) {
        expect_ids(&t, "no BOS, EOS", "a", 1, 1, spa, 2, -1);
        expect_ids(&t, "empty: EOS alone", "", 0, 1, 2, -1);
        expect_ids(&t, "no special", "a", 1, 0, spa, -1);
        wlm_tokenizer_free(&t);
    }
    /* without scores every merge ties: leftmost first */
    o = DEFAULTS;
    o.no_scores = 1;
    if (load_vocab(&t, &v, &o) == WLM_OK) {
        expect_ids(&t, "no scores", "abc", 3, 0, spa, bc, -1);
        wlm_tokenizer_free(&t);
    }
}

static void test_fallback(void) {
    wlm_tokenizer t;
    vocab v;
    tu_section("synthetic: no byte tokens");
    /* No <0xNN> tokens: one-byte pieces serve as bytes, else <unk>. No "▁" either. */
    vocab_base(&v, 0);
    int32_t x = vocab_add(&v, "x", 0, WLM_TOKEN_NORMAL);
    int32_t e2 = vocab_add(&v, "\xe2", 0, WLM_TOKEN_NORMAL);
    if (load_vocab(&t, &v, &DEFAULTS) == WLM_OK) {
        CHECK_EQ_INT(t.byte_id['x'], x);
        CHECK_EQ_INT(t.byte_id[0], -1);
        /* "▁x": the prefix's bytes e2 96 81 — e2 is a piece, 96 and 81 are <unk> */
        expect_ids(&t, "unk fallback", "x", 1, 0, e2, 0, 0, x, -1);
        size_t len;
        const char *p = wlm_tokenizer_piece(&t, -1, 0, &len);
        CHECKF(p && len == 0, "<unk> decodes to nothing");
        wlm_tokenizer_free(&t);
    }
}

static void test_user_defined(void) {
    wlm_tokenizer t;
    vocab v;
    tu_section("synthetic: user-defined tokens");
    vocab_base(&v, 1);
    int32_t sp = vocab_add(&v, SP, -100, WLM_TOKEN_NORMAL);
    int32_t a = vocab_add(&v, "a", -50, WLM_TOKEN_NORMAL);
    int32_t spa = vocab_add(&v, SP "a", -5, WLM_TOKEN_NORMAL);
    int32_t spsp = vocab_add(&v, SP SP, -5, WLM_TOKEN_NORMAL);
    int32_t u = vocab_add(&v, "<u>", 0, WLM_TOKEN_USER_DEFINED);
    int32_t uu = vocab_add(&v, "<uu>", 0, WLM_TOKEN_USER_DEFINED);
    int32_t ctl = vocab_add(&v, "<c>", 0, WLM_TOKEN_CONTROL);
    int32_t end = vocab_add(&v, "<|end|>", 0, WLM_TOKEN_USER_DEFINED);  /* forced to control */
    int32_t chan = vocab_add(&v, "<|channel|>", 0, WLM_TOKEN_NORMAL);   /* forced to user-defined */
    int32_t unused = vocab_add(&v, "zz", 0, WLM_TOKEN_UNUSED);
    int32_t odd = vocab_add(&v, "qq", 0, 42);                           /* undefined type */
    v.piece[1] = "<s>";
    if (load_vocab(&t, &v, &DEFAULTS) == WLM_OK) {
        CHECK_EQ_INT(t.type[end], WLM_TOKEN_CONTROL);
        CHECK_EQ_INT(t.type[chan], WLM_TOKEN_USER_DEFINED);
        CHECK_EQ_INT(t.type[odd], WLM_TOKEN_UNDEFINED);
        /* the special-token list: user-defined ones (always split out), longest first, and
         * the control / unknown ones (only with parse_special) */
        int32_t ud[8], n_ud = 0;
        for (int32_t k = 0; k < t.n_user; k++)
            if (!t.user_control[k] && n_ud < 8) ud[n_ud++] = t.user[k];
        CHECK_EQ_INT(n_ud, 3);
        if (n_ud == 3) CHECK(ud[0] == chan && ud[1] == uu && ud[2] == u);
        /* split out before merging; the text after one gets the dummy prefix again */
        expect_ids(&t, "user token", "a<u>a", 5, 0, spa, u, spa, -1);
        expect_ids(&t, "user token first", "<u>a", 4, 0, u, spa, -1);
        expect_ids(&t, "user token last", "a<u>", 4, 0, spa, u, -1);
        expect_ids(&t, "two in a row", "<u><u>", 6, 0, u, u, -1);
        expect_ids(&t, "longest first", "<uu><u>", 7, 0, uu, u, -1);
        expect_ids(&t, "space after (kept)", "<u> a", 5, 0, u, spsp, a, -1);
        /* control tokens are not parsed out of the text */
        expect_ids(&t, "control not parsed", "<c>", 3, 0, sp, 3 + '<', 3 + 'c', 3 + '>', -1);
        /* decoding by type */
        size_t len;
        const char *p = wlm_tokenizer_piece(&t, -1, u, &len);
        CHECKF(p && len == 3 && memcmp(p, "<u>", 3) == 0, "user-defined decodes verbatim");
        p = wlm_tokenizer_piece(&t, -1, ctl, &len);
        CHECKF(p && len == 0, "control decodes to nothing");
        p = wlm_tokenizer_piece(&t, -1, end, &len);
        CHECKF(p && len == 0, "<|end|> was forced to control");
        p = wlm_tokenizer_piece(&t, -1, unused, &len);
        CHECKF(p && len == 0, "unused decodes to nothing");
        p = wlm_tokenizer_piece(&t, -1, odd, &len);
        CHECKF(p && len == 0, "undefined decodes to nothing");
        p = wlm_tokenizer_piece(&t, -1, spsp, &len);
        CHECKF(p && len == 2 && memcmp(p, "  ", 3) == 0, "\"▁▁\" decodes to two spaces");
        p = wlm_tokenizer_piece(&t, 1, spsp, &len);
        CHECKF(p && len == 1 && memcmp(p, " ", 2) == 0, "after BOS one space goes");
        /* as in llama.cpp, text after a user-defined token gets the dummy prefix, so a
         * space there decodes doubled */
        {
            int32_t n;
            int32_t *ids = encode(&t, "a<u> a<uu>", 10, 0, &n);
            char out[64];
            size_t m = ids ? decode(&t, t.bos_id, ids, n, out, sizeof out) : 0;
            CHECKF(m == 11 && memcmp(out, "a<u>  a<uu>", 11) == 0, "decoded \"%s\"", show(out, m));
            free(ids);
        }
        wlm_tokenizer_free(&t);
    }
    /* phi-3 (by general.name): whitespace after a user-defined token is dropped */
    vocab_opts o = DEFAULTS;
    o.name = "Phi3 mini";
    if (load_vocab(&t, &v, &o) == WLM_OK) {
        expect_ids(&t, "phi-3 rstrip", "<u> \n a", 7, 0, u, spa, -1);
        expect_ids(&t, "phi-3 rstrip to the end", "a<u>  ", 6, 0, spa, u, -1);
        wlm_tokenizer_free(&t);
    }
}

static void test_metadata(void) {
    tu_section("synthetic: metadata");
    vocab v;
    wlm_tokenizer t;
    vocab_base(&v, 1);
    vocab_add(&v, SP, 0, WLM_TOKEN_NORMAL);
    /* empty pieces become "[EMPTY_<id>]" */
    int32_t empty = vocab_add(&v, "", 0, WLM_TOKEN_NORMAL);
    /* NUL bytes inside a piece are fine */
    int32_t nul = vocab_add(&v, "n", 0, WLM_TOKEN_NORMAL);
    v.piece[nul] = "n\0n", v.len[nul] = 3;
    if (load_vocab(&t, &v, &DEFAULTS) == WLM_OK) {
        CHECK_EQ_INT(wlm_tokenizer_lookup(&t, "[EMPTY_260]", 11), empty);
        CHECK_EQ_INT(wlm_tokenizer_lookup(&t, "n\0n", 3), nul);
        CHECK_EQ_INT(wlm_tokenizer_lookup(&t, "n", 1), -1);
        wlm_tokenizer_free(&t);
    }
    /* no token_type: every token is normal, so <0xNN> pieces decode as text */
    vocab_opts o = DEFAULTS;
    o.no_types = 1;
    if (load_vocab(&t, &v, &o) == WLM_OK) {
        size_t len;
        const char *p = wlm_tokenizer_piece(&t, -1, 3 + 'A', &len);
        CHECKF(p && len == 6 && memcmp(p, "<0x41>", 6) == 0, "untyped byte piece stays text");
        wlm_tokenizer_free(&t);
    }

    /* Malformed metadata: each must fail with the status given, leaving *t zeroed. */
    static const char *const P3[] = {"<unk>", "<s>", "</s>"};
    static const char *const DUP[] = {"<unk>", "<s>", "<s>"};
    static const float S3[] = {0, 0, 0};
    static const int32_t T3[] = {2, 3, 3};
    static const int32_t T4[] = {2, 3, 3, 1};
    struct bad {
        const char *what;
        int status;
        const char *needle; /* in the message */
    };
    /* two pieces repeat: the message names the first pair in byte order ("b" before "z"), not
     * the first repeat met in id order */
    static const char *const DUP2[] = {"z", "b", "z", "b"};
    for (int k = 0; k < 13; k++) {
        gw w;
        struct bad b = {"(no case)", WLM_OK, ""};
        gw_begin(&w);
        switch (k) {
        case 0:
            b = (struct bad){"model t5", WLM_ERR_UNSUPPORTED, "\"t5\""};
            kv_str(&w, "tokenizer.ggml.model", "t5");
            kv_pieces(&w, "tokenizer.ggml.tokens", P3, NULL, 3);
            break;
        case 1:
            b = (struct bad){"no model key", WLM_ERR_FORMAT, "tokenizer.ggml.model"};
            kv_pieces(&w, "tokenizer.ggml.tokens", P3, NULL, 3);
            break;
        case 2:
            b = (struct bad){"model not a string", WLM_ERR_FORMAT, "tokenizer.ggml.model"};
            kv_u32(&w, "tokenizer.ggml.model", 1);
            break;
        case 3:
            b = (struct bad){"no tokens", WLM_ERR_FORMAT, "tokenizer.ggml.tokens"};
            kv_str(&w, "tokenizer.ggml.model", "llama");
            break;
        case 4:
            b = (struct bad){"tokens not strings", WLM_ERR_FORMAT, "tokenizer.ggml.tokens"};
            kv_str(&w, "tokenizer.ggml.model", "llama");
            kv_i32s(&w, "tokenizer.ggml.tokens", WLM_GGUF_INT32, T3, 3);
            break;
        case 5:
            b = (struct bad){"zero tokens", WLM_ERR_FORMAT, "tokenizer.ggml.tokens"};
            kv_str(&w, "tokenizer.ggml.model", "llama");
            kv_pieces(&w, "tokenizer.ggml.tokens", P3, NULL, 0);
            break;
        case 6:
            b = (struct bad){"scores count", WLM_ERR_FORMAT, "tokenizer.ggml.scores"};
            kv_str(&w, "tokenizer.ggml.model", "llama");
            kv_pieces(&w, "tokenizer.ggml.tokens", P3, NULL, 3);
            kv_f32s(&w, "tokenizer.ggml.scores", S3, 2);
            break;
        case 7:
            b = (struct bad){"scores type", WLM_ERR_FORMAT, "tokenizer.ggml.scores"};
            kv_str(&w, "tokenizer.ggml.model", "llama");
            kv_pieces(&w, "tokenizer.ggml.tokens", P3, NULL, 3);
            kv_i32s(&w, "tokenizer.ggml.scores", WLM_GGUF_INT32, T3, 3);
            break;
        case 8:
            b = (struct bad){"token_type type", WLM_ERR_FORMAT, "tokenizer.ggml.token_type"};
            kv_str(&w, "tokenizer.ggml.model", "llama");
            kv_pieces(&w, "tokenizer.ggml.tokens", P3, NULL, 3);
            kv_f32s(&w, "tokenizer.ggml.token_type", S3, 3);
            break;
        case 9:
            b = (struct bad){"token_type count", WLM_ERR_FORMAT, "tokenizer.ggml.token_type"};
            kv_str(&w, "tokenizer.ggml.model", "llama");
            kv_pieces(&w, "tokenizer.ggml.tokens", P3, NULL, 3);
            kv_i32s(&w, "tokenizer.ggml.token_type", WLM_GGUF_INT32, T4, 4);
            break;
        case 10:
            b = (struct bad){"duplicate piece", WLM_ERR_FORMAT, "<s>"};
            kv_str(&w, "tokenizer.ggml.model", "llama");
            kv_pieces(&w, "tokenizer.ggml.tokens", DUP, NULL, 3);
            break;
        case 11:
            b = (struct bad){"bos id not an integer", WLM_ERR_FORMAT, "bos_token_id"};
            kv_str(&w, "tokenizer.ggml.model", "llama");
            kv_pieces(&w, "tokenizer.ggml.tokens", P3, NULL, 3);
            kv_str(&w, "tokenizer.ggml.bos_token_id", "1");
            break;
        case 12:
            b = (struct bad){"two duplicate pieces", WLM_ERR_FORMAT,
                             "tokens 1 and 3 are the same piece \"b\""};
            kv_str(&w, "tokenizer.ggml.model", "llama");
            kv_pieces(&w, "tokenizer.ggml.tokens", DUP2, NULL, 4);
            break;
        }
        gw_end(&w);
        char err[256] = "";
        int rc = load_bytes(&t, w.p, w.n, err, sizeof err);
        CHECKF(rc == b.status, "%s: got %s, want %s (%s)", b.what, wlm_status_name(rc),
               wlm_status_name(b.status), err);
        CHECKF(strstr(err, b.needle) != NULL, "%s: message \"%s\" lacks \"%s\"", b.what, err, b.needle);
        CHECKF(t.vocab_size == 0 && t.blob == NULL && t.piece_tab == NULL && t.type == NULL,
               "%s: the tokenizer is not left zeroed", b.what);
        if (rc == WLM_OK) wlm_tokenizer_free(&t);
        free(w.p);
    }
    /* Special ids outside the vocabulary keep the defaults (llama.cpp warns and does the same);
     * defaults outside a tiny vocabulary mean "none". */
    {
        gw w;
        static const char *const P2[] = {"<unk>", "a"};
        gw_begin(&w);
        kv_str(&w, "tokenizer.ggml.model", "llama");
        kv_pieces(&w, "tokenizer.ggml.tokens", P2, NULL, 2);
        kv_u32(&w, "tokenizer.ggml.bos_token_id", 7);
        kv_u32(&w, "tokenizer.ggml.eos_token_id", 0);
        gw_end(&w);
        char err[256] = "";
        if (load_bytes(&t, w.p, w.n, err, sizeof err) == WLM_OK) {
            CHECK_EQ_INT(t.bos_id, 1);
            CHECK_EQ_INT(t.eos_id, 0);
            CHECK_EQ_INT(t.unk_id, 0);
            expect_ids(&t, "tiny", "a", 1, 1, 1, 0, 0, 0, 1, -1); /* BOS, ▁ → 3 × <unk>, a */
            wlm_tokenizer_free(&t);
        } else {
            CHECKF(0, "tiny vocabulary: %s", err);
        }
        free(w.p);
    }
    /* the struct and its NULLs */
    CHECK(wlm_tokenizer_load_gguf(&t, NULL, NULL, 0) == WLM_ERR_INVALID_ARG);
    wlm_tokenizer_free(NULL);
    memset(&t, 0, sizeof t);
    CHECK_STATUS(wlm_tokenizer_encode(&t, "a", 1, 0, NULL, 0), WLM_ERR_TOKENIZER);
    CHECK(wlm_tokenizer_piece(&t, -1, 0, NULL) == NULL);
}

/* tokenizer.bin: counting its entries (the CLI reads them until the end). */
static void test_count_llama2c(void) {
    tu_section("tokenizer.bin entry count");
    size_t size = 0;
    unsigned char *d = tu_read_shared("models/tok512.bin", &size);
    char err[256] = "";
    if (!d) return;
    CHECK_EQ_INT(wlm_tokenizer_count_llama2c(d, size, err, sizeof err), 512);
    CHECK_STATUS(wlm_tokenizer_count_llama2c(d, size - 1, err, sizeof err), WLM_ERR_TRUNCATED);
    CHECK_STATUS(wlm_tokenizer_count_llama2c(d, 2, err, sizeof err), WLM_ERR_TRUNCATED);
    CHECK_STATUS(wlm_tokenizer_count_llama2c(d, 4, err, sizeof err), WLM_ERR_FORMAT);
    CHECK_STATUS(wlm_tokenizer_count_llama2c(NULL, 4, err, sizeof err), WLM_ERR_INVALID_ARG);
    unsigned char *c = tu_dup(d, size);
    tu_put_i32(c + 8, -1);
    CHECK_STATUS(wlm_tokenizer_count_llama2c(c, size, err, sizeof err), WLM_ERR_FORMAT);
    free(c);
    for (size_t cut = 0; cut < 64; cut++) {
        c = tu_dup(d, cut);
        int32_t n = wlm_tokenizer_count_llama2c(c, cut, err, sizeof err);
        CHECKF(n < 0 || (n > 0 && n < 10), "cut %zu: %d", cut, (int)n);
        free(c);
    }
    free(d);
}

int main(int argc, char **argv) {
    tu_find_shared(argc, argv);
    printf("shared files: %s\n", tu_shared_dir);
    test_vectors("ggml-vocab-llama-spm.gguf", 32000, 2);
    test_vectors("ggml-vocab-phi-3.gguf", 32064, 32000);
    test_llama_spm_details();
    test_wordpiece_and_other_models();
    test_merges();
    test_fallback();
    test_user_defined();
    test_metadata();
    test_count_llama2c();
    return TEST_FINISH();
}
