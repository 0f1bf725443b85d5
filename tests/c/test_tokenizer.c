/*
 * test_tokenizer.c — the llama2.c tokenizer (tokenizer.h) on the two real vocabularies:
 * tok512.bin (stories260K, 512 pieces) and tokenizer.bin (Llama 2, 32000 pieces). Encodings
 * are compared with ids produced by independent tokenizers (see the tables), decoding is
 * checked by round trips, and corrupt files must fail with the documented status.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"
#include "wasmlm.h"
#include "test_util.h"

typedef struct enc_case {
    const char *text;
    int n;           /* expected ids, without BOS */
    int32_t ids[40];
} enc_case;

/*
 * tok512 expectations, produced offline with Google's SentencePiece 0.1.97 (Debian's
 * python3-sentencepiece) from ../shared/models/tok512.model:
 *     sp = sentencepiece.SentencePieceProcessor(model_file="tok512.model"); sp.encode(text)
 * with one change to the model: normalizer_spec.remove_extra_whitespaces set to false, because
 * run.c (and so wasmlm) keeps runs of spaces where stock SentencePiece collapses them (that
 * flag only changes "hello  world" and " leading" below). The same ids came out of a separate
 * Python port of run.c's encode(). Cross-check: the last sentence's ids equal the reference
 * logits file's input_tokens[1..31] (../shared/reference/stories260K_logits_OnceUponATime_32.json).
 */
static const enc_case TOK512_CASES[] = {
    {"Once upon a time", 4, {403, 407, 261, 378}},
    {"Hello world", 6, {346, 306, 414, 263, 304, 341}},
    {"The quick brown fox jumps over the lazy dog.", 29, {291, 410, 456, 425, 417, 340, 268, 420, 327, 416, 272, 414, 444, 410, 449, 425, 423, 427, 419, 334, 330, 265, 278, 412, 451, 422, 400, 428, 426}},
    {"Lily and her mom went to the park.", 12, {317, 269, 311, 357, 263, 377, 267, 265, 282, 295, 433, 426}},
    {"One day, Timmy saw a big red ball!", 12, {385, 328, 432, 405, 394, 261, 370, 352, 266, 268, 388, 443}},
    {"a\nb", 3, {261, 13, 430}},
    {"\xc3\xa9\xe2\x9c\x93\xf0\x9f\x98\x80", 9, {410, 485, 229, 159, 150, 243, 162, 155, 131}}, /* é ✓ 😀 */
    {"hello  world", 7, {281, 306, 414, 410, 263, 304, 341}},
    {" leading", 5, {410, 278, 411, 380, 299}},
    {"tab\there", 6, {259, 412, 430, 12, 260, 276}},
    {"x", 2, {410, 444}},
    {"\n", 2, {410, 13}},
    {"F\xc3\xbc\xc3\x9f" "e", 7, {410, 453, 198, 191, 198, 162, 411}}, /* Füße */
    {"12345", 6, {410, 475, 479, 472, 484, 480}},
    {"don't", 4, {279, 289, 439, 413}},
    {"Zebra {quiz} ~ #7 @home", 23, {410, 469, 411, 430, 420, 412, 410, 126, 456, 425, 417, 451, 128, 410, 510, 410, 38, 491, 410, 67, 415, 287, 411}},
    {"Once upon a time, there was a little girl named Lily. She loved to play outside in the park.", 31, {403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337, 410, 408, 419, 292, 411, 322, 265, 282, 295, 433, 426}},
};

/*
 * tokenizer.bin (Llama 2) expectations: llama.cpp's tokenizer test vectors for the same
 * vocabulary, ../shared/models/vocab/ggml-vocab-llama-spm.gguf.inp/.out (texts tokenized
 * without BOS; "#n" is the text's index in those files). Every one of the 47 vectors also
 * matched a Python port of run.c's encode() on tokenizer.bin; a representative subset is here.
 */
static const enc_case LLAMA_CASES[] = {
    {"F\xc3\xbchrer", 3, {383, 4000, 261}}, /* #1 */
    {" ", 1, {259}}, /* #3 */
    {"  ", 1, {1678}}, /* #4 */
    {"\n", 2, {29871, 13}}, /* #7 */
    {"\n\n", 3, {29871, 13, 13}}, /* #8 */
    {"Hello world", 2, {15043, 3186}}, /* #11 */
    {" Hello world", 3, {29871, 15043, 3186}}, /* #12 */
    {"Hello, world!", 4, {15043, 29892, 3186, 29991}}, /* #16 */
    {" this is \xf0\x9f\xa6\x99.cpp", 10, {29871, 445, 338, 29871, 243, 162, 169, 156, 29889, 8223}}, /* #18 */
    {"\xd0\xbd\xd0\xb5\xd1\x89\xd0\xbe \xd0\xbd\xd0\xb0 \xd0\x91\xd1\x8a\xd0\xbb\xd0\xb3\xd0\xb0\xd1\x80\xd1\x81\xd0\xba\xd0\xb8", 6, {1538, 4851, 665, 1386, 29713, 1305}}, /* #20 */
    {"    Hello\n    Hello", 5, {268, 15043, 13, 1678, 15043}}, /* #28 */
    {"' era", 2, {525, 3152}}, /* #31 */
    {"!!!!!!", 3, {1738, 6824, 21004}}, /* #33 */
    {"3333", 5, {29871, 29941, 29941, 29941, 29941}}, /* #37 */
    {"C\xe1\xbb\xad" "a Vi\xe1\xbb\x87t", 8, {315, 228, 190, 176, 29874, 10630, 30529, 29873}}, /* #43 */
    /* the well-known Llama 2 ids of the prompt, from the same run.c port */
    {"Once upon a time", 4, {9038, 2501, 263, 931}},
};

static int ids_equal(const int32_t *a, const int32_t *b, int n) {
    for (int i = 0; i < n; i++)
        if (a[i] != b[i]) return 0;
    return 1;
}

static void format_ids(char *buf, size_t cap, const int32_t *ids, int n) {
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < n && o + 16 < cap; i++) o += (size_t)snprintf(buf + o, cap - o, "%s%d", i ? " " : "", ids[i]);
}

static void check_cases(const wlm_tokenizer *t, const char *vocab, const enc_case *cases,
                        int n_cases) {
    int32_t got[256];
    char a[1024], b[1024];
    for (int c = 0; c < n_cases; c++) {
        const enc_case *k = &cases[c];
        size_t len = strlen(k->text);
        for (int bos = 0; bos <= 1; bos++) {
            for (int i = 0; i < 256; i++) got[i] = -7;
            int32_t n = wlm_tokenizer_encode(t, k->text, len, bos, got, 256);
            int ok = n == k->n + bos && (!bos || got[0] == 1) && ids_equal(got + bos, k->ids, k->n) &&
                     got[n] == -7; /* nothing written past the count */
            format_ids(a, sizeof a, got, n > 0 && n < 256 ? n : 0);
            format_ids(b, sizeof b, k->ids, k->n);
            CHECKF(ok, "%s case %d (bos %d): got %d ids [%s], want %d%s [%s]", vocab, c, bos, n, a,
                   k->n + bos, bos ? " (BOS first)" : "", b);
        }
    }
}

/* Decodes ids[from..n) as a stream whose previous token is ids[from-1] (or -1). */
static size_t decode(const wlm_tokenizer *t, const int32_t *ids, int n, int from, char *out,
                     size_t cap) {
    size_t o = 0;
    for (int i = from; i < n; i++) {
        size_t len = 0;
        const char *p = wlm_tokenizer_piece(t, i > 0 ? ids[i - 1] : -1, ids[i], &len);
        if (!p) return (size_t)-1;
        if (o + len > cap) return (size_t)-1;
        memcpy(out + o, p, len);
        o += len;
    }
    return o;
}

static void check_round_trip(const wlm_tokenizer *t, const char *vocab, const char *text,
                             size_t len) {
    int32_t *ids = (int32_t *)malloc(sizeof(int32_t) * (len * 2 + 8));
    char *out = (char *)malloc(len + 64);
    int32_t n = wlm_tokenizer_encode(t, text, len, 1, ids, (int32_t)(len * 2 + 8));
    int bad_ids = 0;
    CHECKF(n >= 1 && ids[0] == t->bos_id, "%s: encode of a %zu-byte text returned %d", vocab, len, n);
    if (n < 1) goto done;
    for (int i = 1; i < n; i++) bad_ids += ids[i] < 0 || ids[i] >= t->vocab_size || ids[i] == t->bos_id;
    CHECKF(bad_ids == 0, "%s: %d ids out of range", vocab, bad_ids);
    /* with BOS: the first piece loses its dummy-prefix space, the text comes back exactly */
    size_t m = decode(t, ids, n, 1, out, len + 64);
    CHECKF(m == len && memcmp(out, text, len) == 0, "%s: round trip of \"%.40s\" (%zu bytes) gave "
           "%zu bytes \"%.40s\"", vocab, text, len, m == (size_t)-1 ? 0 : m,
           m == (size_t)-1 ? "(decode failed)" : out);
    /* without BOS: the dummy prefix stays, so the text comes back after one space */
    if (len > 0) {
        int32_t n2 = wlm_tokenizer_encode(t, text, len, 0, ids, (int32_t)(len * 2 + 8));
        m = decode(t, ids, n2, 0, out, len + 64);
        CHECKF(n2 == n - 1 && m == len + 1 && out[0] == ' ' && memcmp(out + 1, text, len) == 0,
               "%s: round trip without BOS of \"%.40s\"", vocab, text);
    }
done:
    free(ids);
    free(out);
}

static const struct {
    const char *text;
    size_t len; /* 0: strlen */
} ROUND_TRIPS[] = {
    {"Once upon a time", 0},
    {"The quick brown fox jumps over the lazy dog. 0123456789 !?@#$%^&*()[]{}<>/\\|~`'\";:,.", 0},
    {"", 0},
    {" ", 0},
    {"   ", 0},
    {"  two leading, two trailing  ", 0},
    {"\n", 0},
    {"\n\nline one\nline two\n\n", 0},
    {"a\tb\r\nc\fd\ve", 0},
    {"caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x98\x80 \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82", 0}, /* café ✓ 😀 日本語 Привет */
    {"\xf0\x9f\xa6\x99\xf0\x9f\xa6\x99\xf0\x9f\xa6\x99", 0},            /* three llamas */
    {"\x01\x02\x1b[0m\x7f", 0},                                          /* control bytes */
    {"\xff\xfe\x80\xbf raw \xc3 bytes \xe2\x9c", 0},                     /* invalid UTF-8 */
    {"\xf0\x9f\x98", 0},                                                 /* truncated 4-byte char */
    {"nul\0inside", 10},                                                 /* NUL is an ordinary byte */
};

static void test_vocab(const char *file, int32_t vocab, const enc_case *cases, int n_cases) {
    size_t size = 0;
    unsigned char *data = tu_read_shared(file, &size);
    wlm_tokenizer t;
    char err[256] = "";
    if (!data) return;
    int rc = wlm_tokenizer_load_llama2c(&t, data, size, vocab, err, sizeof err);
    CHECKF(rc == WLM_OK, "%s: %d (%s) %s", file, rc, wlm_status_name(rc), err);
    free(data); /* the tokenizer copies what it needs */
    if (rc != WLM_OK) return;
    CHECK_EQ_INT(t.vocab_size, vocab);
    CHECK_EQ_INT(t.bos_id, 1);
    CHECK_EQ_INT(t.eos_id, 2);
    CHECK_EQ_INT(t.byte_base, 3);
    if (vocab == 512) CHECK_EQ_INT(t.max_token_length, 7);

    check_cases(&t, file, cases, n_cases);

    /* lookup */
    CHECK_EQ_INT(wlm_tokenizer_lookup(&t, "<0x0A>", 6), 13);
    CHECK_EQ_INT(wlm_tokenizer_lookup(&t, "<0x00>", 6), 3);
    CHECK_EQ_INT(wlm_tokenizer_lookup(&t, "<0xFF>", 6), 258);
    CHECK_EQ_INT(wlm_tokenizer_lookup(&t, " Once", 5), vocab == 512 ? 403 : 9038);
    CHECK_EQ_INT(wlm_tokenizer_lookup(&t, " Once upon", 5), vocab == 512 ? 403 : 9038); /* len counts */
    CHECK_EQ_INT(wlm_tokenizer_lookup(&t, "no such piece at all", 20), -1);
    CHECK_EQ_INT(wlm_tokenizer_lookup(&t, "", 0), -1);

    /* pieces */
    size_t len = 99;
    const char *p = wlm_tokenizer_piece(&t, -1, 13, &len);
    CHECKF(p && len == 1 && p[0] == '\n' && p[1] == 0, "<0x0A> decodes to \"\\n\"");
    p = wlm_tokenizer_piece(&t, 1, 13, &len);
    CHECKF(p && len == 1 && p[0] == '\n', "<0x0A> after BOS is still \"\\n\"");
    p = wlm_tokenizer_piece(&t, -1, 3, &len);
    CHECKF(p && len == 1 && p[0] == 0, "<0x00> is one NUL byte, counted in len");
    p = wlm_tokenizer_piece(&t, -1, 258, &len);
    CHECKF(p && len == 1 && (unsigned char)p[0] == 0xFF, "<0xFF> decodes to the byte 0xFF");
    p = wlm_tokenizer_piece(&t, -1, 3 + 'A', &len);
    CHECKF(p && len == 1 && p[0] == 'A', "<0x41> decodes to \"A\"");
    int32_t once = vocab == 512 ? 403 : 9038;
    p = wlm_tokenizer_piece(&t, -1, once, &len);
    CHECKF(p && len == 5 && memcmp(p, " Once", 6) == 0, "\" Once\" without BOS before it");
    p = wlm_tokenizer_piece(&t, 1, once, &len);
    CHECKF(p && len == 4 && memcmp(p, "Once", 5) == 0, "after BOS the leading space goes");
    p = wlm_tokenizer_piece(&t, once, once, &len);
    CHECKF(p && len == 5 && memcmp(p, " Once", 6) == 0, "after another token the space stays");
    p = wlm_tokenizer_piece(&t, 2, once, &len);
    CHECKF(p && len == 5, "after EOS the space stays (only BOS strips it)");
    int32_t space = wlm_tokenizer_lookup(&t, " ", 1);
    CHECK(space > 258);
    p = wlm_tokenizer_piece(&t, 1, space, &len);
    CHECKF(p && len == 0 && p[0] == 0, "\" \" after BOS is empty");
    len = 99;
    CHECK(wlm_tokenizer_piece(&t, -1, vocab, &len) == NULL);
    CHECK(wlm_tokenizer_piece(&t, -1, -1, &len) == NULL);
    CHECK(wlm_tokenizer_piece(&t, -1, 0x7fffffff, &len) == NULL);

    /* cap smaller than needed: the count needed comes back, at most cap ids are written */
    int32_t buf[8];
    for (int i = 0; i < 8; i++) buf[i] = -7;
    CHECK_EQ_INT(wlm_tokenizer_encode(&t, "Once upon a time", 16, 1, buf, 2), 5);
    CHECK(buf[0] == 1 && buf[2] == -7 && buf[3] == -7);
    CHECK_EQ_INT(wlm_tokenizer_encode(&t, "Once upon a time", 16, 1, buf, 0), 5);
    for (int i = 0; i < 8; i++) buf[i] = -7;
    CHECK_EQ_INT(wlm_tokenizer_encode(&t, "Once upon a time", 16, 0, buf, 1), 4);
    CHECK(buf[0] == once && buf[1] == -7);
    CHECK_EQ_INT(wlm_tokenizer_encode(&t, "Once upon a time", 16, 1, buf, 5), 5);
    CHECK(buf[4] == (vocab == 512 ? 378 : 931) && buf[5] == -7); /* " time" */
    /* empty text: BOS alone, or nothing (no dummy prefix for an empty text) */
    CHECK_EQ_INT(wlm_tokenizer_encode(&t, "", 0, 1, buf, 8), 1);
    CHECK_EQ_INT(buf[0], 1);
    CHECK_EQ_INT(wlm_tokenizer_encode(&t, "", 0, 0, buf, 8), 0);
    /* len is honoured: the bytes after it are not read */
    {
        int32_t x1[8], x2[8];
        int32_t n1 = wlm_tokenizer_encode(&t, "x junk after", 1, 0, x1, 8);
        int32_t n2 = wlm_tokenizer_encode(&t, "x", 1, 0, x2, 8);
        CHECK(n1 >= 1 && n1 <= 2 && n1 == n2 && ids_equal(x1, x2, n1));
    }

    for (unsigned i = 0; i < sizeof ROUND_TRIPS / sizeof ROUND_TRIPS[0]; i++) {
        const char *s = ROUND_TRIPS[i].text;
        check_round_trip(&t, file, s, ROUND_TRIPS[i].len ? ROUND_TRIPS[i].len : strlen(s));
    }
    /* every byte value, each alone and all in one text */
    {
        char all[256];
        for (int b = 0; b < 256; b++) {
            char one = (char)b;
            all[b] = (char)b;
            check_round_trip(&t, file, &one, 1);
        }
        check_round_trip(&t, file, all, 256);
    }
    /* a long text (the reference story), and through it the quadratic merge loop */
    {
        size_t n = 0;
        unsigned char *story = tu_read_shared("reference/stories260K_run.c_greedy_OnceUponATime_404.txt", &n);
        if (story) {
            check_round_trip(&t, file, (const char *)story, n);
            free(story);
        }
    }
    wlm_tokenizer_free(&t);
}

/* ------------------------------------------------------------------------------------------ */
/* Corrupt files                                                                               */

static void expect_load_error(const void *data, size_t size, int32_t vocab, int want1, int want2,
                              const char *what) {
    wlm_tokenizer t;
    char err[256];
    memset(&t, 0x5a, sizeof t);
    err[0] = 0;
    unsigned char *copy = tu_dup(data, size); /* exact size: an overread is a real overrun */
    int rc = wlm_tokenizer_load_llama2c(&t, copy, size, vocab, err, sizeof err);
    CHECKF(rc == want1 || rc == want2, "%s: got %d (%s), want %s%s%s; message \"%s\"", what, rc,
           wlm_status_name(rc), wlm_status_name(want1), want2 != want1 ? " or " : "",
           want2 != want1 ? wlm_status_name(want2) : "", err);
    CHECKF(err[0] != 0, "%s: empty error message", what);
    CHECKF(t.vocab_size == 0 && t.blob == NULL && t.offset == NULL && t.piece_tab == NULL,
           "%s: the tokenizer is not left zeroed", what);
    if (rc == WLM_OK) wlm_tokenizer_free(&t);
    free(copy);
}

static void test_errors(void) {
    size_t size = 0, big_size = 0;
    unsigned char *data = tu_read_shared("models/tok512.bin", &size);
    unsigned char *big = tu_read_shared("models/tokenizer.bin", &big_size);
    char what[128];
    tu_section("corrupt tokenizer files");
    if (data) {
        /* truncated: every cut inside the file (TRUNCATED; a cut inside the 4-byte header
         * may also be called FORMAT) */
        const size_t cuts[] = {0, 1, 3, 4, 5, 8, 11, 12, 13, 100, size / 2, size - 7, size - 2, size - 1};
        for (unsigned i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
            snprintf(what, sizeof what, "tok512.bin cut to %zu of %zu bytes", cuts[i], size);
            expect_load_error(data, cuts[i], 512, WLM_ERR_TRUNCATED,
                              cuts[i] < 4 ? WLM_ERR_FORMAT : WLM_ERR_TRUNCATED, what);
        }
        /* more entries than the vocabulary: a tokenizer for another model */
        expect_load_error(data, size, 500, WLM_ERR_TOKENIZER, WLM_ERR_TOKENIZER,
                          "tok512.bin for a 500-token model");
        expect_load_error(data, size, 1, WLM_ERR_TOKENIZER, WLM_ERR_TOKENIZER,
                          "tok512.bin for a 1-token model");
        /* fewer entries than the vocabulary */
        expect_load_error(data, size, 513, WLM_ERR_TRUNCATED, WLM_ERR_TRUNCATED,
                          "tok512.bin for a 513-token model");
        /* bad vocab_size from the caller */
        {
            wlm_tokenizer t;
            char err[128] = "";
            int rc = wlm_tokenizer_load_llama2c(&t, data, size, 0, err, sizeof err);
            CHECKF(rc < 0, "vocab_size 0 accepted (%d)", rc);
            rc = wlm_tokenizer_load_llama2c(&t, data, size, -5, err, sizeof err);
            CHECKF(rc < 0, "vocab_size -5 accepted (%d)", rc);
        }
        /* a negative length in the first entry: FORMAT */
        {
            unsigned char *c = tu_dup(data, size);
            tu_put_i32(c + 8, -1);
            expect_load_error(c, size, 512, WLM_ERR_FORMAT, WLM_ERR_FORMAT, "token 0 length -1");
            tu_put_i32(c + 8, INT32_MIN);
            expect_load_error(c, size, 512, WLM_ERR_FORMAT, WLM_ERR_FORMAT, "token 0 length INT32_MIN");
            /* huge lengths: oversized (FORMAT) or past the end (TRUNCATED), never a crash */
            tu_put_i32(c + 8, INT32_MAX);
            expect_load_error(c, size, 512, WLM_ERR_FORMAT, WLM_ERR_TRUNCATED, "token 0 length INT32_MAX");
            tu_put_i32(c + 8, 0x7ffffff0);
            expect_load_error(c, size, 512, WLM_ERR_FORMAT, WLM_ERR_TRUNCATED, "token 0 length 0x7ffffff0");
            free(c);
        }
        /* a negative length in the last entry */
        {
            /* find the offset of the last entry's length */
            size_t off = 4, last = 0;
            for (int i = 0; i < 512 && off + 8 <= size; i++) {
                int32_t l;
                memcpy(&l, data + off + 4, 4); /* little-endian hosts only (x86, wasm) */
                last = off + 4;
                off += 8 + (size_t)l;
            }
            CHECK_EQ_INT(off, size);
            unsigned char *c = tu_dup(data, size);
            tu_put_i32(c + last, -3);
            expect_load_error(c, size, 512, WLM_ERR_FORMAT, WLM_ERR_FORMAT, "token 511 length -3");
            free(c);
        }
        /* a header with a negative max_token_length: not a tokenizer */
        {
            unsigned char *c = tu_dup(data, size);
            tu_put_i32(c, -7);
            expect_load_error(c, size, 512, WLM_ERR_FORMAT, WLM_ERR_FORMAT, "max_token_length -7");
            free(c);
        }
        free(data);
    }
    if (big) {
        expect_load_error(big, big_size, 512, WLM_ERR_TOKENIZER, WLM_ERR_TOKENIZER,
                          "tokenizer.bin (32000) for a 512-token model");
        expect_load_error(big, big_size / 2, 32000, WLM_ERR_TRUNCATED, WLM_ERR_TRUNCATED,
                          "tokenizer.bin cut in half");
        free(big);
    }
}

int main(int argc, char **argv) {
    tu_find_shared(argc, argv);
    printf("shared files: %s\n", tu_shared_dir);
    tu_section("tok512.bin");
    test_vocab("models/tok512.bin", 512, TOK512_CASES,
               (int)(sizeof TOK512_CASES / sizeof TOK512_CASES[0]));
    tu_section("tokenizer.bin");
    test_vocab("models/tokenizer.bin", 32000, LLAMA_CASES,
               (int)(sizeof LLAMA_CASES / sizeof LLAMA_CASES[0]));
    test_errors();
    return TEST_FINISH();
}
