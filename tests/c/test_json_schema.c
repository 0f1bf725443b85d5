/*
 * test_json_schema.c — the JSON reader (formats/json.c) and JSON Schema → GBNF
 * (wlm_json_schema_to_grammar):
 * - the reader accepts RFC 8259 JSON (escapes, surrogate pairs, numbers) and refuses broken
 *   text with the right line and column;
 * - for each schema, hand-written instances that the schema accepts are complete sentences of
 *   the generated grammar and instances it refuses are not (checked with the grammar matcher
 *   byte by byte: the instances, not the converter, are the reference);
 * - unsupported keywords fail with WLM_ERR_UNSUPPORTED naming the keyword and its place, or are
 *   listed as warnings with WLM_SCHEMA_LENIENT; malformed schemas fail with INVALID_ARG.
 * - 16 seeded samples from stories260K per schema (one batch each): every one ends by itself
 *   (EOS), parses (formats/json.c) and validates with validate() below, a small validator of
 *   the keywords these schemas use, written from the JSON Schema specification and independent
 *   of the converter. Sampling from a byte-level BPE model and validating with ajv is
 *   tests/js/structured.test.mjs.
 */
#include "formats/json.h"
#include "sampling/grammar.h"
#include "test_util.h"
#include "wasmlm.h"

/* ---- the reader ---- */

static void json_ok(const char *text, int type) {
    wlm_json_doc *d = NULL;
    char err[256];
    int rc = wlm_json_parse(text, strlen(text), &d, err, sizeof err);
    CHECKF(rc == WLM_OK && wlm_json_root(d)->type == type, "'%s': %s", text, err);
    wlm_json_free(d);
}

static void json_bad(const char *text, size_t len, const char *where) {
    wlm_json_doc *d = NULL;
    char err[256];
    int rc = wlm_json_parse(text, len, &d, err, sizeof err);
    CHECKF(rc == WLM_ERR_INVALID_ARG && d == NULL && strstr(err, where),
           "'%.*s': rc %d, message '%s' (want '%s')", (int)len, text, rc, err, where);
}

static void test_reader(void) {
    json_ok("null", WLM_JSON_NULL);
    json_ok(" true ", WLM_JSON_TRUE);
    json_ok("-0.5e+3", WLM_JSON_NUMBER);
    json_ok("[1, [2, []], {}]", WLM_JSON_ARRAY);
    json_ok("{\"a\": {\"b\": [null]}}", WLM_JSON_OBJECT);
    { /* escapes and a surrogate pair decode to UTF-8 */
        const char *t = "\"a\\n\\u00e9\\ud83d\\ude00\\\"\\/\"";
        wlm_json_doc *d = NULL;
        CHECK_STATUS(wlm_json_parse(t, strlen(t), &d, NULL, 0), WLM_OK);
        const wlm_json *v = wlm_json_root(d);
        CHECK(v && v->len == 10 && memcmp(v->str, "a\n\xc3\xa9\xf0\x9f\x98\x80\"/", 10) == 0);
        wlm_json_free(d);
    }
    { /* numbers keep their text; objects their order; get finds the last key */
        const char *t = "{\"x\": 1.50, \"y\": [true], \"x\": 2}";
        wlm_json_doc *d = NULL;
        CHECK_STATUS(wlm_json_parse(t, strlen(t), &d, NULL, 0), WLM_OK);
        const wlm_json *o = wlm_json_root(d);
        CHECK(o->n == 3 && o->items[0].len == 4 && memcmp(o->items[0].str, "1.50", 4) == 0);
        CHECK(o->items[0].num == 1.5);
        CHECK(wlm_json_get(o, "x")->num == 2 && wlm_json_get(o, "z") == NULL);
        size_t line, col;
        wlm_json_line_col(d, o->items[1].at, &line, &col);
        CHECK(line == 1 && col == 18);
        wlm_json_free(d);
    }
    json_bad("", 0, "line 1, column 1: expecting a value");
    json_bad("[1,]", 4, "line 1, column 4: unexpected character ']'");
    json_bad("{\n  \"a\" 1}", 10, "line 2, column 7: expecting ':'");
    json_bad("{\"a\":1,}", 8, "line 1, column 8: expecting a key");
    json_bad("[1 2]", 5, "line 1, column 4: expecting ',' or ']'");
    json_bad("01", 2, "cannot start with 0");
    json_bad("1.", 2, "digits expected after '.'");
    json_bad("\"abc", 4, "unterminated string");
    json_bad("\"a\tb\"", 5, "control character");
    json_bad("\"\\ud800\"", 8, "high surrogate");
    json_bad("\"\\udc00\"", 8, "lone low surrogate");
    json_bad("\"\\x41\"", 6, "unknown escape");
    json_bad("\"\xc3\x28\"", 4, "invalid UTF-8");
    json_bad("\"\xc0\xaf\"", 4, "invalid UTF-8"); /* overlong */
    json_bad("nul", 3, "invalid literal");
    json_bad("[1] x", 5, "unexpected text after the value");
    json_bad("NaN", 3, "unexpected character 'N'");
    json_bad("[1, /* c */ 2]", 14, "unexpected character '/'");
    json_bad("{\"a\":1", 6, "unclosed '{'");
    json_bad("1\0", 2, "unexpected text");
    { /* nesting: 128 levels read, 129 refused */
        char deep[300];
        memset(deep, '[', 129);
        memset(deep + 129, ']', 129);
        json_bad(deep, 258, "nested deeper than 128");
        json_ok("[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]", WLM_JSON_ARRAY);
    }
}

/* ---- the converter ---- */

static char *convert(const char *schema, unsigned flags, int want_rc, const char *want_msg) {
    char *g = NULL;
    size_t glen = 0;
    char msg[512];
    int rc = wlm_json_schema_to_grammar(schema, strlen(schema), flags, &g, &glen, msg, sizeof msg);
    CHECKF(rc == want_rc, "%s: rc %d (want %d): %s", schema, rc, want_rc, msg);
    if (want_msg) CHECKF(strstr(msg, want_msg) != NULL, "%s: message '%s' lacks '%s'", schema, msg,
                         want_msg);
    else CHECKF(msg[0] == '\0', "%s: unexpected message '%s'", schema, msg);
    if (rc == WLM_OK) CHECK(g && strlen(g) == glen);
    else CHECK(g == NULL);
    return g;
}

/* 1: text is a complete sentence of grammar g; 2: a proper prefix; 0: refused. */
static int accepts(const char *g, const char *text) {
    const char *piece = "a";
    size_t len = 1;
    wlm_gram_vocab *v = NULL;
    wlm_gram *gr = NULL;
    wlm_gram_matcher *m = NULL;
    int r = -1;
    if (wlm_gram_vocab_new(1, &piece, &len, &v) == WLM_OK &&
        wlm_gram_parse(g, strlen(g), &gr, NULL, 0) == WLM_OK &&
        wlm_gram_matcher_new(gr, v, NULL, 0, &m) == WLM_OK) {
        int rc = wlm_gram_accept_bytes(m, text, strlen(text));
        r = rc != WLM_OK ? 0 : wlm_gram_is_complete(m) ? 1 : 2;
    }
    wlm_gram_matcher_free(m);
    wlm_gram_free(gr);
    wlm_gram_vocab_free(v);
    return r;
}

typedef struct schema_case {
    const char *schema;
    const char *valid[8];   /* instances the schema accepts (and the grammar can generate) */
    const char *invalid[8]; /* instances the grammar must refuse (prefixes allowed: not 1) */
} schema_case;

static const schema_case cases[] = {
    {"{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\"}, \"age\": "
     "{\"type\": \"integer\"}, \"tags\": {\"type\": \"array\", \"items\": {\"enum\": [\"a\", "
     "\"b c\", 3]}}}, \"required\": [\"name\"]}",
     {"{\"name\": \"x\"}", "{\"name\":\"\",\"age\":-12}", "{\"name\": \"q\", \"tags\": [3, \"b c\"]}",
      "{\n  \"name\": \"\\u00e9\\\"\",\n  \"age\": 0,\n  \"tags\": []\n}", "{\"name\":\"a\",\"tags\":[\"a\"]}"},
     {"{}", "{\"age\": 1}", "{\"name\": 1}", "{\"name\": \"x\", \"age\": 1.5}",
      "{\"name\": \"x\", \"other\": 1}", "{\"name\": \"x\", \"tags\": [\"c\"]}",
      "{\"age\": 1, \"name\": \"x\"}", "{\"name\": \"x\",}"}},
    {"{\"type\": \"array\", \"items\": {\"type\": \"number\"}, \"minItems\": 2, \"maxItems\": 3}",
     {"[1, 2]", "[0.5,-3e7,1E-2]", "[ 0 , 1 ]"},
     {"[]", "[1]", "[1,2,3,4]", "[01, 2]", "[1.]", "[1, 2e999]", "[NaN, 1]", "[1, +2]"}},
    {"{\"type\": \"string\", \"minLength\": 2, \"maxLength\": 3}",
     {"\"ab\"", "\"\\n\\t\"", "\"\xf0\x9f\x98\x80\xc3\xa9\x7a\"", "\"\\u00e9x\""},
     {"\"a\"", "\"abcd\"", "\"\\ud83d\\ude00\"", "\"a\nb\"", "ab"}},
    {"{\"type\": \"string\", \"pattern\": \"^[A-Z][a-z]+-\\\\d{2,3}$\"}",
     {"\"Ab-12\"", "\"Xyz-999\""},
     {"\"ab-12\"", "\"A-12\"", "\"Ab-1\"", "\"Ab-1234\"", "\" Ab-12\""}},
    {"{\"pattern\": \"a\\\"b|\\\\\\\\\"}", /* unanchored, " and \ in the pattern */
     {"\"xa\\\"by\"", "\"\\\\\"", "\"a\\\"b\""},
     {"\"ab\"", "\"\"", "\"a\"b\""}},
    {"{\"type\": \"string\", \"pattern\": \"^(?:[^a-c\\\\s]|x)*?$\"}",
     {"\"\"", "\"dx\\\"\"", "\"\xe2\x82\xac\""},
     {"\"a\"", "\"d e\"", "\"\\n\""}},
    {"{\"$defs\": {\"node\": {\"type\": \"object\", \"properties\": {\"v\": {\"type\": "
     "\"integer\"}, \"kids\": {\"type\": \"array\", \"items\": {\"$ref\": \"#/$defs/node\"}}}, "
     "\"required\": [\"v\"], \"additionalProperties\": false}}, \"$ref\": \"#/$defs/node\"}",
     {"{\"v\": 1}", "{\"v\": 1, \"kids\": [{\"v\": 2, \"kids\": [{\"v\": 3}]}, {\"v\": 4}]}"},
     {"{\"kids\": []}", "{\"v\": 1, \"kids\": [{}]}", "{\"v\": 1, \"kids\": [1]}"}},
    {"{\"anyOf\": [{\"type\": \"null\"}, {\"type\": \"boolean\"}, {\"const\": {\"k\": [1, "
     "\"\\u00e9\"]}}]}",
     {"null", "true", "false", "{\"k\":[1,\"\xc3\xa9\"]}"},
     {"1", "\"null\"", "{\"k\": [1, \"\xc3\xa9\"]}"}},
    {"{\"oneOf\": [{\"type\": \"integer\"}, {\"type\": \"string\", \"maxLength\": 1}]}",
     {"5", "\"a\""},
     {"5.5", "\"ab\""}},
    {"{\"type\": [\"string\", \"null\"], \"enum\": [\"x\", null, 1]}",
     {"\"x\"", "null"},
     {"1", "\"y\""}},
    {"{}", {"{\"a\": [1, {\"b\": null}]}", "\"s\"", "-1.5e10", "[]"}, {"{a: 1}", "[1,]", "tru"}},
    {"true", {"{\"a\": 1}", "0"}, {"'a'"}},
    {"{\"type\": \"object\", \"additionalProperties\": {\"type\": \"integer\"}}",
     {"{}", "{\"a\": 1, \"b\": -2}"},
     {"{\"a\": \"x\"}", "{\"a\": 1.5}"}},
    {"{\"type\": \"object\", \"properties\": {\"a\": {\"const\": 1}, \"b\": {\"const\": 2}, "
     "\"c\": {\"const\": 3}}, \"required\": [\"b\"]}",
     {"{\"b\": 2}", "{\"a\": 1, \"b\": 2}", "{\"b\": 2, \"c\": 3}", "{\"a\":1,\"b\":2,\"c\":3}"},
     {"{\"a\": 1}", "{\"a\": 1, \"c\": 3}", "{\"c\": 3, \"b\": 2}", "{, \"b\": 2}",
      "{\"a\": 1 \"b\": 2}"}},
    {"{\"type\": \"object\", \"properties\": {\"a/b~c\": {\"type\": \"boolean\"}, \"q\\\"\\n\": "
     "{\"type\": \"null\"}}}",
     {"{}", "{\"a/b~c\": true, \"q\\\"\\n\": null}"},
     {"{\"q\\\"\n\": null}"}},
    {"{\"type\": \"integer\"}", {"0", "-7", "1234567890123456"}, {"1.0", "00", "-", "12345678901234567"}},
    {"{\"type\": \"array\", \"maxItems\": 0}", {"[]", "[ ]"}, {"[1]"}},
    {"{\"type\": \"object\"}", {"{}", "{\"a\": [1, {\"b\": []}], \"a\": null}"}, {"[]", "{1: 2}"}},
    {"{\"type\": \"array\"}", {"[]", "[{}, [\"x\"], -0.5]"}, {"{}", "[,]"}},
};

static void test_cases(void) {
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const schema_case *sc = &cases[k];
        char *g = convert(sc->schema, 0, WLM_OK, NULL);
        if (!g) continue;
        for (int i = 0; i < 8 && sc->valid[i]; i++)
            CHECKF(accepts(g, sc->valid[i]) == 1, "schema %zu: valid %s is refused (%d)\n%s", k,
                   sc->valid[i], accepts(g, sc->valid[i]), g);
        for (int i = 0; i < 8 && sc->invalid[i]; i++)
            CHECKF(accepts(g, sc->invalid[i]) != 1, "schema %zu: invalid %s is accepted\n%s", k,
                   sc->invalid[i], g);
        free(g);
    }
}

static void test_errors(void) {
    /* unsupported keywords: an error naming them and where they are, or warnings if lenient */
    const char *s = "{\"type\": \"object\",\n \"properties\": {\"age\": {\"type\": \"integer\", "
                    "\"minimum\": 0}}}";
    free(convert(s, 0, WLM_ERR_UNSUPPORTED,
                 "schema line 2, column 44 (at '/properties/age'): keyword 'minimum' is not "
                 "supported"));
    char *g = convert(s, WLM_SCHEMA_LENIENT, WLM_OK, "keyword 'minimum' is not supported (ignored)");
    if (g) CHECK(accepts(g, "{\"age\": -3}") == 1);
    free(g);
    free(convert("{\"format\": \"date\"}", 0, WLM_ERR_UNSUPPORTED, "'format'"));
    free(convert("{\"allOf\": [{}]}", 0, WLM_ERR_UNSUPPORTED, "'allOf'"));
    free(convert("{\"items\": [{}, {}]}", 0, WLM_ERR_UNSUPPORTED, "tuples"));
    free(convert("{\"properties\": {\"a\": {}}, \"additionalProperties\": true}", 0,
                 WLM_ERR_UNSUPPORTED, "additionalProperties"));
    free(convert("{\"$ref\": \"#/$defs/a\", \"type\": \"string\", \"$defs\": {\"a\": {}}}", 0,
                 WLM_ERR_UNSUPPORTED, "beside '$ref'"));
    free(convert("{\"pattern\": \"(a)\\\\1\"}", 0, WLM_ERR_UNSUPPORTED, "backreference"));
    free(convert("{\"pattern\": \"(?=a)\"}", 0, WLM_ERR_UNSUPPORTED, "lookaround"));
    free(convert("{\"pattern\": \"^a|b\"}", 0, WLM_ERR_UNSUPPORTED, "top level"));
    free(convert("{\"pattern\": \"a**\"}", 0, WLM_ERR_UNSUPPORTED, "quantifier after"));
    free(convert("{\"pattern\": \"(a*)*\"}", 0, WLM_ERR_UNSUPPORTED, "empty string"));
    free(convert("{\"maxLength\": 20000}", 0, WLM_ERR_UNSUPPORTED, "above 10000"));
    /* counts beyond long's range are integers too (fuzz/regressions/fuzz_json_schema/
     * max-items-beyond-long: the old cast to long was undefined behaviour, natively "must be a
     * non-negative integer") */
    free(convert("{\"type\": \"array\", \"maxItems\": 4.4e88}", 0, WLM_ERR_UNSUPPORTED,
                 "'maxItems' above 10000"));
    free(convert("{\"minLength\": 1e300}", 0, WLM_ERR_UNSUPPORTED, "'minLength' above 10000"));
    free(convert("{\"$ref\": \"http://x/y\"}", 0, WLM_ERR_UNSUPPORTED, "only references"));
    /* malformed schemas */
    free(convert("{\"type\": \"strin\"}", 0, WLM_ERR_INVALID_ARG, "unknown type 'strin'"));
    free(convert("{\"type\": \"object\", \"properties\": {}, \"required\": [\"a\"]}", 0,
                 WLM_ERR_UNSUPPORTED, "required property 'a'"));
    free(convert("{\"minLength\": -1}", 0, WLM_ERR_INVALID_ARG, "non-negative integer"));
    free(convert("{\"minLength\": 2.5}", 0, WLM_ERR_INVALID_ARG, "non-negative integer"));
    free(convert("{\"maxItems\": 1e-300}", 0, WLM_ERR_INVALID_ARG, "non-negative integer"));
    free(convert("{\"minItems\": 3, \"maxItems\": 2}", 0, WLM_ERR_INVALID_ARG, "above maxItems"));
    free(convert("{\"$ref\": \"#/$defs/none\"}", 0, WLM_ERR_INVALID_ARG, "points at nothing"));
    free(convert("{\"$ref\": \"#\"}", 0, WLM_ERR_UNSUPPORTED, "left-recursive"));
    free(convert("{\"enum\": []}", 0, WLM_ERR_INVALID_ARG, "non-empty array"));
    free(convert("{\"type\": \"integer\", \"enum\": [\"a\"]}", 0, WLM_ERR_INVALID_ARG,
                 "no 'enum' value"));
    free(convert("false", 0, WLM_ERR_INVALID_ARG, "admits no value"));
    free(convert("[1]", 0, WLM_ERR_INVALID_ARG, "must be an object or a boolean"));
    free(convert("{\"type\": ", 0, WLM_ERR_INVALID_ARG, "not JSON: JSON line 1, column 10"));
    /* NULL arguments */
    char *out = (char *)1;
    CHECK_STATUS(wlm_json_schema_to_grammar("{}", 2, 0, NULL, NULL, NULL, 0), WLM_ERR_INVALID_ARG);
    CHECK_STATUS(wlm_json_schema_to_grammar(NULL, 5, 0, &out, NULL, NULL, 0), WLM_ERR_INVALID_ARG);
    CHECK(out == NULL);
}

/* ---- generation: samples validate ---- */

static size_t code_points(const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xC0) != 0x80;
    return k;
}

static int json_equal(const wlm_json *a, const wlm_json *b) {
    if (a->type != b->type) return 0;
    if (a->type == WLM_JSON_NUMBER) return a->num == b->num;
    if (a->type == WLM_JSON_STRING) return a->len == b->len && memcmp(a->str, b->str, a->len) == 0;
    if (a->type == WLM_JSON_ARRAY || a->type == WLM_JSON_OBJECT) {
        if (a->n != b->n) return 0;
        for (uint32_t k = 0; k < a->n; k++) {
            if (a->type == WLM_JSON_OBJECT && !json_equal(&a->keys[k], &b->keys[k])) return 0;
            if (!json_equal(&a->items[k], &b->items[k])) return 0;
        }
    }
    return 1;
}

static double kw_num(const wlm_json *s, const char *kw, double dflt) {
    const wlm_json *v = wlm_json_get(s, kw);
    return v && v->type == WLM_JSON_NUMBER ? v->num : dflt;
}

/* JSON Schema validation of v against s for: type, properties, required, additionalProperties
 * false, items, enum, const, anyOf, minItems, maxItems, minLength, maxLength, $ref "#/$defs/x".
 * root: the whole schema (for $ref). */
static int validate(const wlm_json *root, const wlm_json *s, const wlm_json *v) {
    if (s->type == WLM_JSON_TRUE) return 1;
    const wlm_json *ref = wlm_json_get(s, "$ref");
    if (ref) return validate(root, wlm_json_get(wlm_json_get(root, "$defs"), ref->str + 8), v);
    const wlm_json *t = wlm_json_get(s, "type");
    if (t) {
        const char *n = t->str;
        int ok = !strcmp(n, "object") ? v->type == WLM_JSON_OBJECT
               : !strcmp(n, "array") ? v->type == WLM_JSON_ARRAY
               : !strcmp(n, "string") ? v->type == WLM_JSON_STRING
               : !strcmp(n, "number") ? v->type == WLM_JSON_NUMBER
               : !strcmp(n, "integer") ? v->type == WLM_JSON_NUMBER && v->num == floor(v->num)
               : !strcmp(n, "boolean") ? v->type == WLM_JSON_TRUE || v->type == WLM_JSON_FALSE
               : !strcmp(n, "null") ? v->type == WLM_JSON_NULL : 0;
        if (!ok) return 0;
    }
    const wlm_json *e = wlm_json_get(s, "enum"), *c = wlm_json_get(s, "const");
    if (c && !json_equal(c, v)) return 0;
    if (e) {
        int found = 0;
        for (uint32_t k = 0; k < e->n; k++) found |= json_equal(&e->items[k], v);
        if (!found) return 0;
    }
    const wlm_json *any = wlm_json_get(s, "anyOf");
    if (any) {
        int found = 0;
        for (uint32_t k = 0; k < any->n; k++) found |= validate(root, &any->items[k], v);
        if (!found) return 0;
    }
    if (v->type == WLM_JSON_STRING) {
        size_t cp = code_points(v->str, v->len);
        if (cp < kw_num(s, "minLength", 0) || cp > kw_num(s, "maxLength", 1e18)) return 0;
    }
    if (v->type == WLM_JSON_ARRAY) {
        if (v->n < kw_num(s, "minItems", 0) || v->n > kw_num(s, "maxItems", 1e18)) return 0;
        const wlm_json *items = wlm_json_get(s, "items");
        for (uint32_t k = 0; items && k < v->n; k++)
            if (!validate(root, items, &v->items[k])) return 0;
    }
    if (v->type == WLM_JSON_OBJECT) {
        const wlm_json *props = wlm_json_get(s, "properties"), *req = wlm_json_get(s, "required");
        const wlm_json *add = wlm_json_get(s, "additionalProperties");
        for (uint32_t k = 0; req && k < req->n; k++)
            if (!wlm_json_get(v, req->items[k].str)) return 0;
        for (uint32_t k = 0; k < v->n; k++) {
            const wlm_json *ps = wlm_json_get(props, v->keys[k].str);
            if (ps ? !validate(root, ps, &v->items[k])
                   : add && (add->type == WLM_JSON_FALSE ||
                             (add->type == WLM_JSON_OBJECT && !validate(root, add, &v->items[k]))))
                return 0;
        }
    }
    return 1;
}

static const char *const gen_schemas[] = {
    "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\", \"minLength\": 1, "
    "\"maxLength\": 10}, \"age\": {\"type\": \"integer\"}, \"pets\": {\"type\": \"array\", \"items\": "
    "{\"enum\": [\"cat\", \"dog\", null]}, \"maxItems\": 3}}, \"required\": [\"name\", \"age\"], "
    "\"additionalProperties\": false}",
    "{\"type\": \"array\", \"items\": {\"type\": \"number\"}, \"minItems\": 1, \"maxItems\": 4}",
    "{\"type\": \"object\", \"properties\": {\"s\": {\"type\": \"string\", \"maxLength\": 5}, "
    "\"u\": {\"const\": \"\u00e9\\n\\\"\"}}, \"required\": [\"s\", \"u\"]}",
    "{\"$defs\": {\"t\": {\"type\": \"object\", \"properties\": {\"v\": {\"type\": \"boolean\"}, "
    "\"k\": {\"type\": \"array\", \"items\": {\"$ref\": \"#/$defs/t\"}, \"maxItems\": 2}}, "
    "\"required\": [\"v\"]}}, \"$ref\": \"#/$defs/t\"}",
    "{\"anyOf\": [{\"type\": \"null\"}, {\"type\": \"string\", \"maxLength\": 3}, "
    "{\"type\": \"integer\"}]}",
};

#define N_GEN 16

static void test_generation(wlm_model *model) {
    wlm_context_params cp;
    wlm_context_params_default(&cp);
    cp.n_seq_max = N_GEN;
    wlm_context *ctx = NULL;
    CHECK_STATUS(wlm_context_new(model, &cp, &ctx), WLM_OK);
    if (!ctx) return;
    for (size_t k = 0; k < sizeof gen_schemas / sizeof gen_schemas[0]; k++) {
        char *g = convert(gen_schemas[k], 0, WLM_OK, NULL);
        wlm_json_doc *sd = NULL;
        CHECK_STATUS(wlm_json_parse(gen_schemas[k], strlen(gen_schemas[k]), &sd, NULL, 0), WLM_OK);
        if (!g || !sd) {
            free(g);
            wlm_json_free(sd);
            continue;
        }
        wlm_gen_params ps[N_GEN];
        const int32_t bos = 1;
        const int32_t *prompts[N_GEN];
        int32_t n_tok[N_GEN];
        for (int i = 0; i < N_GEN; i++) {
            wlm_gen_params_default(&ps[i]);
            ps[i].top_p = 1.0f;
            ps[i].seed = 1000 + (uint64_t)i;
            ps[i].max_tokens = 400;
            ps[i].grammar = g;
            ps[i].grammar_len = strlen(g);
            prompts[i] = &bos;
            n_tok[i] = 1;
        }
        int rc = wlm_generate_batch_begin(ctx, N_GEN, prompts, n_tok, ps);
        CHECKF(rc == WLM_OK, "schema %zu: %s", k, wlm_context_errmsg(ctx));
        static char text[N_GEN][4096];
        size_t len[N_GEN] = {0};
        int32_t stop[N_GEN];
        for (int i = 0; i < N_GEN; i++) stop[i] = -1;
        wlm_token out[N_GEN];
        while (rc == WLM_OK && (rc = wlm_generate_batch_next(ctx, out)) >= 0) {
            for (int i = 0; i < N_GEN; i++) {
                if (out[i].status < 0 || stop[i] >= 0) continue;
                if (len[i] + out[i].piece_len < sizeof text[i]) {
                    memcpy(text[i] + len[i], out[i].piece, out[i].piece_len);
                    len[i] += out[i].piece_len;
                }
                if (out[i].status == WLM_DONE) stop[i] = out[i].stop_reason;
            }
            if (rc == WLM_DONE) break;
        }
        CHECKF(rc == WLM_DONE, "schema %zu: %s", k, wlm_context_errmsg(ctx));
        int distinct = 0;
        for (int i = 0; i < N_GEN; i++) {
            CHECKF(stop[i] == WLM_STOP_EOS, "schema %zu sample %d ended by %d: %.*s", k, i,
                   (int)stop[i], (int)len[i], text[i]);
            wlm_json_doc *d = NULL;
            char err[256];
            int prc = wlm_json_parse(text[i], len[i], &d, err, sizeof err);
            CHECKF(prc == WLM_OK, "schema %zu sample %d is not JSON (%s): %.*s", k, i, err,
                   (int)len[i], text[i]);
            if (d)
                CHECKF(validate(wlm_json_root(sd), wlm_json_root(sd), wlm_json_root(d)),
                       "schema %zu sample %d fails the schema: %.*s", k, i, (int)len[i], text[i]);
            wlm_json_free(d);
            distinct += i > 0 && (len[i] != len[0] || memcmp(text[i], text[0], len[i]) != 0);
        }
        CHECKF(distinct > 0, "schema %zu: 16 identical samples", k);
        free(g);
        wlm_json_free(sd);
    }
    wlm_context_free(ctx);
}

int main(int argc, char **argv) {
    test_reader();
    test_cases();
    test_errors();
    tu_find_shared(argc, argv);
    size_t ms = 0, ts = 0;
    unsigned char *mb = tu_read_shared("models/stories260K.bin", &ms);
    unsigned char *tb = tu_read_shared("models/tok512.bin", &ts);
    wlm_model *model = NULL;
    CHECK(mb && tb);
    if (mb && tb) {
        int rc = wlm_model_load(mb, ms, 0, &model);
        if (rc == WLM_OK) rc = wlm_model_load_tokenizer(model, tb, ts);
        CHECKF(rc == WLM_OK, "stories260K: %s", model ? wlm_model_errmsg(model) : "");
        if (rc == WLM_OK) test_generation(model);
    }
    wlm_model_free(model);
    free(mb);
    free(tb);
    return TEST_FINISH();
}
