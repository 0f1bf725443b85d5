/*
 * fuzz_json_schema.c — libFuzzer harness for the JSON reader (src/formats/json.h, internal)
 * and JSON Schema → GBNF (wlm_json_schema_to_grammar). The input is JSON text, any bytes.
 * Properties:
 *   - the reader parses it or fails with INVALID_ARG and a "JSON line L, column C:" message;
 *     on success every string it decoded is valid UTF-8;
 *   - the converter returns OK, INVALID_ARG, UNSUPPORTED (or NOMEM), never crashes or hangs;
 *     an error leaves *grammar NULL and a non-empty message; success gives a NUL-terminated
 *     grammar of the reported length that wlm_gram_parse compiles;
 *   - lenient mode fails only where strict mode fails, and when strict succeeds the lenient
 *     grammar is the same text.
 */
#include <string.h>

#include "fuzz_util.h"
#include "formats/json.h"
#include "sampling/grammar.h"

/* Walks the tree: strings valid UTF-8, counts within bounds. */
static void walk(const wlm_json *v, int depth) {
    FZ_CHECK(depth <= WLM_JSON_MAX_DEPTH + 1, "depth %d", depth);
    if (v->type == WLM_JSON_STRING)
        FZ_CHECK(fz_utf8_valid((const unsigned char *)v->str, v->len) && v->str[v->len] == '\0',
                 "string not valid UTF-8 / not terminated");
    if (v->type == WLM_JSON_NUMBER) FZ_CHECK(v->len > 0, "empty number");
    for (uint32_t k = 0; (v->type == WLM_JSON_ARRAY || v->type == WLM_JSON_OBJECT) && k < v->n; k++) {
        if (v->type == WLM_JSON_OBJECT) walk(&v->keys[k], depth + 1);
        walk(&v->items[k], depth + 1);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *text = (const char *)data;
    char err[256];
    wlm_json_doc *d = NULL;
    int rc = wlm_json_parse(text, size, &d, err, sizeof err);
    if (rc == WLM_OK) {
        walk(wlm_json_root(d), 0);
    } else {
        FZ_CHECK(rc == WLM_ERR_INVALID_ARG && d == NULL, "parse: %s", wlm_status_name(rc));
        FZ_CHECK(strncmp(err, "JSON line ", 10) == 0 && strstr(err, ", column "), "message '%s'",
                 err);
    }
    wlm_json_free(d);

    char *g[2] = {NULL, NULL};
    size_t glen[2] = {0, 0};
    int grc[2];
    char msg[2][512];
    for (int lenient = 0; lenient < 2; lenient++) {
        grc[lenient] = wlm_json_schema_to_grammar(text, size, lenient ? WLM_SCHEMA_LENIENT : 0,
                                                  &g[lenient], &glen[lenient], msg[lenient], 512);
        const int r = grc[lenient];
        FZ_CHECK(r == WLM_OK || r == WLM_ERR_INVALID_ARG || r == WLM_ERR_UNSUPPORTED ||
                     r == WLM_ERR_NOMEM, "convert: %s", wlm_status_name(r));
        if (r != WLM_OK) {
            FZ_CHECK(g[lenient] == NULL && msg[lenient][0] != '\0', "error without message");
            continue;
        }
        FZ_CHECK(g[lenient] && strlen(g[lenient]) == glen[lenient], "grammar length");
        wlm_gram *gr = NULL;
        char gerr[256];
        int prc = wlm_gram_parse(g[lenient], glen[lenient], &gr, gerr, sizeof gerr);
        FZ_CHECK(prc == WLM_OK, "generated grammar does not compile: %s\n%s", gerr, g[lenient]);
        wlm_gram_free(gr);
    }
    if (grc[0] == WLM_OK)
        FZ_CHECK(grc[1] == WLM_OK && glen[0] == glen[1] && memcmp(g[0], g[1], glen[0]) == 0,
                 "lenient differs from strict");
    if (grc[1] != WLM_OK && grc[1] != WLM_ERR_NOMEM)
        FZ_CHECK(grc[0] != WLM_OK, "strict succeeds where lenient fails");
    free(g[0]);
    free(g[1]);
    return 0;
}
