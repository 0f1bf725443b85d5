/*
 * json_schema.c — JSON Schema → GBNF (wlm_json_schema_to_grammar, documented in wasmlm.h).
 * The schema is read with formats/json.c, walked once, and every sub-schema becomes a rule;
 * the result is compiled with wlm_gram_parse before it is returned, so a grammar handed out
 * always compiles. It does not sample or validate instances.
 *
 * Why in C and not in JS: the native CLI needs it (-j / --json-schema, as llama.cpp's), and the
 * JS API then gets the same converter through one wasm export instead of a second
 * implementation; the JS libraries that exist either validate (ajv) rather than generate, or
 * are llama.cpp's script ported without its tests.
 *
 * The grammar's shape (ideas from llama.cpp's json-schema-to-grammar, the code and the rule
 * layout our own): whitespace is `ws ::= ( " " | "\n" [ \t]{0,20} )?` between tokens, so a
 * model cannot pad without end; numbers have at most 16 integer and 16 fraction digits and a
 * two-digit exponent (always finite); strings exclude escapes of UTF-16 surrogates (so that
 * minLength / maxLength count code points as validators do); object properties come in the
 * schema's order, the optional ones skippable, through a chain of rules that places commas
 * correctly; `additionalProperties` absent or false beside `properties` admits no other key
 * (the output then validates whichever the schema meant).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/json.h"
#include "sampling/gbnf_text.h"
#include "sampling/grammar.h"
#include "sampling/json_pattern.h"
#include "wasmlm.h"

#define MAX_REFS 4096     /* distinct $ref targets */
#define MAX_NEST 200      /* sub-schemas being converted at once (JSON nesting and $ref chains) */

/* ------------------------------------------------------------------------------------------ */
/* Converter state                                                                             */

enum { P_WS = 1, P_VALUE = 2, P_STRING = 4, P_NUMBER = 8, P_INTEGER = 16, P_BOOLEAN = 32,
       P_NULL = 64, P_CHAR = 128, P_OBJECT = 256, P_ARRAY = 512 };

typedef struct ref_memo {
    const wlm_json *target;
    char name[16];
} ref_memo;

typedef struct conv {
    const wlm_json_doc *doc;
    const wlm_json *root;
    unsigned flags;
    sbuf out;            /* the rules, root first */
    unsigned prims;      /* P_* rules used */
    uint32_t counter;    /* for unique rule names */
    ref_memo *refs;
    uint32_t n_refs;
    sbuf path;           /* JSON pointer of the schema being converted */
    int nest;
    int status;
    char *msg;
    size_t msglen;
    sbuf warn;           /* lenient mode: what was ignored */
    uint32_t n_warn;
} conv;

/* An error about the schema value at `at` (byte offset) — or a warning in lenient mode when
 * `ignorable`. Returns the status (WLM_OK for a warning). */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 5, 6)))
#endif
static int report(conv *c, int status, int ignorable, size_t at, const char *fmt, ...) {
    char text[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    size_t line, col;
    wlm_json_line_col(c->doc, at, &line, &col);
    const char *path = c->path.n ? c->path.p : "/";
    if (ignorable && (c->flags & WLM_SCHEMA_LENIENT)) {
        if (c->n_warn++ < 32)
            wlm_sb_fmt(&c->warn, "%sschema line %zu, column %zu (at '%.80s'): %s (ignored)",
                   c->warn.n ? "; " : "", line, col, path, text);
        return WLM_OK;
    }
    if (c->status == WLM_OK) {
        c->status = status;
        if (c->msg && c->msglen)
            snprintf(c->msg, c->msglen, "schema line %zu, column %zu (at '%.80s'): %s", line, col,
                     path, text);
    }
    return c->status;
}

static int conv_nomem(conv *c) {
    if (c->status == WLM_OK) {
        c->status = WLM_ERR_NOMEM;
        if (c->msg && c->msglen) snprintf(c->msg, c->msglen, "out of memory for the schema");
    }
    return c->status;
}

/* Appends a JSON-pointer segment (~ and / escaped as ~0 ~1); returns the old length. */
static size_t path_push(conv *c, const char *seg, size_t n) {
    size_t old = c->path.n;
    wlm_sb_add(&c->path, "/", 1);
    for (size_t k = 0; k < n; k++) {
        if (seg[k] == '~') wlm_sb_add(&c->path, "~0", 2);
        else if (seg[k] == '/') wlm_sb_add(&c->path, "~1", 2);
        else wlm_sb_add(&c->path, seg + k, 1);
    }
    return old;
}

static size_t path_push_index(conv *c, uint32_t i) {
    char tmp[16];
    int k = snprintf(tmp, sizeof tmp, "%u", (unsigned)i);
    return path_push(c, tmp, (size_t)k);
}

static void path_pop(conv *c, size_t old) {
    c->path.n = old;
    if (c->path.p) c->path.p[old] = '\0';
}

/* A new unique rule name from a hint: [a-z0-9-] of the hint, at most 32, then "-N". */
static void rule_name(conv *c, const char *hint, char name[48]) {
    size_t k = 0;
    for (const char *h = hint; *h && k < 32; h++) {
        char ch = *h;
        if (ch >= 'A' && ch <= 'Z') ch = (char)(ch - 'A' + 'a');
        if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9'))) ch = '-';
        if (ch == '-' && (k == 0 || name[k - 1] == '-')) continue;
        name[k++] = ch;
    }
    if (k == 0) name[k++] = 'r';
    snprintf(name + k, 48 - k, "%s%u", name[k - 1] == '-' ? "" : "-", (unsigned)++c->counter);
}

/* ------------------------------------------------------------------------------------------ */
/* Literals                                                                                    */


/* A value as compact JSON (const / enum). */
static void json_write(sbuf *b, const wlm_json *v) {
    switch (v->type) {
    case WLM_JSON_NULL: wlm_sb_str(b, "null"); break;
    case WLM_JSON_TRUE: wlm_sb_str(b, "true"); break;
    case WLM_JSON_FALSE: wlm_sb_str(b, "false"); break;
    case WLM_JSON_NUMBER: wlm_sb_add(b, v->str, v->len); break;
    case WLM_JSON_STRING: wlm_json_quote(b, v->str, v->len); break;
    case WLM_JSON_ARRAY:
        wlm_sb_add(b, "[", 1);
        for (uint32_t k = 0; k < v->n; k++) {
            if (k) wlm_sb_add(b, ",", 1);
            json_write(b, &v->items[k]);
        }
        wlm_sb_add(b, "]", 1);
        break;
    default:
        wlm_sb_add(b, "{", 1);
        for (uint32_t k = 0; k < v->n; k++) {
            if (k) wlm_sb_add(b, ",", 1);
            wlm_json_quote(b, v->keys[k].str, v->keys[k].len);
            wlm_sb_add(b, ":", 1);
            json_write(b, &v->items[k]);
        }
        wlm_sb_add(b, "}", 1);
    }
}


/* The GBNF literal of a value's compact JSON. */
static void value_literal(sbuf *b, const wlm_json *v) {
    sbuf t = {0};
    json_write(&t, v);
    if (t.oom) b->oom = 1;
    else wlm_gbnf_literal(b, t.p ? t.p : "", t.n);
    free(t.p);
}


/* ------------------------------------------------------------------------------------------ */
/* Schemas                                                                                     */

static int gen(conv *c, const wlm_json *s, const char *hint, sbuf *ref);

/* Appends `name ::= body` to the output. */
static void add_rule(conv *c, const char *name, const sbuf *body) {
    wlm_sb_str(&c->out, name);
    wlm_sb_str(&c->out, " ::= ");
    if (body->p) wlm_sb_add(&c->out, body->p, body->n);
    wlm_sb_str(&c->out, "\n");
    if (body->oom) c->out.oom = 1;
}

/* Writes a new rule from body and appends its name to ref. */
static void emit_named(conv *c, const char *hint, const sbuf *body, sbuf *ref) {
    char name[48];
    rule_name(c, hint, name);
    add_rule(c, name, body);
    wlm_sb_str(ref, name);
}

static const char *const annotations[] = {
    "$schema", "$id", "$comment", "$anchor", "$defs", "definitions", "title", "description",
    "default", "examples", "deprecated", "readOnly", "writeOnly", "contentEncoding",
    "contentMediaType", NULL};
static const char *const supported[] = {
    "type", "properties", "required", "additionalProperties", "items", "enum", "const",
    "anyOf", "oneOf", "minItems", "maxItems", "minLength", "maxLength", "pattern", "$ref", NULL};

static int in_list(const char *const *list, const wlm_json *key) {
    for (int k = 0; list[k]; k++)
        if (strlen(list[k]) == key->len && memcmp(list[k], key->str, key->len) == 0) return 1;
    return 0;
}

/* A non-negative integer keyword (minLength...), -1 when absent; error when malformed. */
static int count_kw(conv *c, const wlm_json *s, const char *kw, long *out) {
    const wlm_json *v = wlm_json_get(s, kw);
    *out = -1;
    if (!v) return WLM_OK;
    /* floor, not a cast to long: 4.4e88 is an integer too, and casting a double beyond long's
     * range is undefined behaviour (found by fuzz_json_schema: maxItems 444...43). */
    if (v->type != WLM_JSON_NUMBER || !(v->num >= 0) || v->num != floor(v->num))
        return report(c, WLM_ERR_INVALID_ARG, 0, v->at, "'%s' must be a non-negative integer", kw);
    if (v->num > WLM_GRAM_MAX_REPEAT)
        return report(c, WLM_ERR_UNSUPPORTED, 0, v->at, "'%s' above %d is not supported", kw,
                      WLM_GRAM_MAX_REPEAT);
    *out = (long)v->num;
    return WLM_OK;
}

/* `{m,n}` for min m (or 0 when -1) and max n (-1: unbounded) */
static void repeat_suffix(sbuf *b, long lo, long hi) {
    if (lo < 0) lo = 0;
    if (hi < 0) wlm_sb_fmt(b, "{%ld,}", lo);
    else wlm_sb_fmt(b, "{%ld,%ld}", lo, hi);
}

static int gen_string(conv *c, const wlm_json *s, const char *hint, sbuf *ref) {
    long lo, hi;
    if (count_kw(c, s, "minLength", &lo) || count_kw(c, s, "maxLength", &hi)) return c->status;
    const wlm_json *pat = wlm_json_get(s, "pattern");
    if (pat && pat->type != WLM_JSON_STRING)
        return report(c, WLM_ERR_INVALID_ARG, 0, pat->at, "'pattern' must be a string");
    if (hi >= 0 && lo > hi)
        return report(c, WLM_ERR_INVALID_ARG, 0, s->at, "minLength is above maxLength");
    if (pat && (lo >= 0 || hi >= 0)) {
        if (report(c, WLM_ERR_UNSUPPORTED, 1, pat->at,
                   "'pattern' together with minLength / maxLength is not supported"))
            return c->status;
    }
    if (pat) {
        sbuf body = {0};
        char why[320];
        if (wlm_json_pattern(pat->str, pat->len, &body, why, sizeof why)) {
            c->prims |= P_CHAR;
            emit_named(c, hint, &body, ref);
        } else if (!body.oom) {
            report(c, WLM_ERR_UNSUPPORTED, 0, pat->at, "%s", why);
        }
        if (body.oom) conv_nomem(c);
        free(body.p);
        return c->status;
    }
    if (lo <= 0 && hi < 0) {
        c->prims |= P_STRING;
        wlm_sb_str(ref, "string");
        return WLM_OK;
    }
    c->prims |= P_CHAR;
    sbuf body = {0};
    wlm_sb_str(&body, "\"\\\"\" char");
    repeat_suffix(&body, lo, hi);
    wlm_sb_str(&body, " \"\\\"\"");
    emit_named(c, hint, &body, ref);
    free(body.p);
    return WLM_OK;
}

static int gen_array(conv *c, const wlm_json *s, const char *hint, sbuf *ref) {
    long lo, hi;
    if (count_kw(c, s, "minItems", &lo) || count_kw(c, s, "maxItems", &hi)) return c->status;
    if (hi >= 0 && lo > hi)
        return report(c, WLM_ERR_INVALID_ARG, 0, s->at, "minItems is above maxItems");
    const wlm_json *items = wlm_json_get(s, "items");
    if (items && items->type == WLM_JSON_ARRAY)
        return report(c, WLM_ERR_UNSUPPORTED, 0, items->at,
                      "'items' as an array (tuples) is not supported");
    sbuf item = {0}, body = {0};
    if (items) {
        char h[48];
        snprintf(h, sizeof h, "%s-item", hint);
        size_t old = path_push(c, "items", 5);
        gen(c, items, h, &item);
        path_pop(c, old);
    } else {
        c->prims |= P_VALUE;
        wlm_sb_str(&item, "value");
    }
    if (c->status == WLM_OK) {
        c->prims |= P_WS;
        wlm_sb_str(&body, "\"[\" ws ");
        if (hi != 0) {
            const char *it = item.p ? item.p : "value";
            if (lo <= 0) wlm_sb_str(&body, "( ");
            wlm_sb_fmt(&body, "%s ws", it);
            if (hi != 1) {
                wlm_sb_fmt(&body, " ( \",\" ws %s ws )", it);
                repeat_suffix(&body, lo > 0 ? lo - 1 : 0, hi > 0 ? hi - 1 : -1);
            }
            if (lo <= 0) wlm_sb_str(&body, " )?");
        }
        wlm_sb_str(&body, " \"]\"");
        if (item.oom) body.oom = 1;
        emit_named(c, hint, &body, ref);
    }
    free(item.p);
    free(body.p);
    return c->status;
}

/* kv ::= "\"key\"" ws ":" ws value ws  (the key a literal, or `string` when NULL) */
static void kv_expr(sbuf *b, const wlm_json *key, const char *value) {
    if (key) {
        sbuf q = {0};
        wlm_json_quote(&q, key->str, key->len);
        if (q.oom) b->oom = 1;
        else wlm_gbnf_literal(b, q.p, q.n);
        free(q.p);
    } else {
        wlm_sb_str(b, "string");
    }
    wlm_sb_fmt(b, " ws \":\" ws ");
    wlm_sb_str(b, value);
    wlm_sb_str(b, " ws");
}

static int gen_object(conv *c, const wlm_json *s, const char *hint, sbuf *ref) {
    const wlm_json *props = wlm_json_get(s, "properties");
    const wlm_json *req = wlm_json_get(s, "required");
    const wlm_json *add = wlm_json_get(s, "additionalProperties");
    if (props && props->type != WLM_JSON_OBJECT)
        return report(c, WLM_ERR_INVALID_ARG, 0, props->at, "'properties' must be an object");
    if (req && req->type != WLM_JSON_ARRAY)
        return report(c, WLM_ERR_INVALID_ARG, 0, req->at, "'required' must be an array");
    for (uint32_t k = 0; req && k < req->n; k++) {
        if (req->items[k].type != WLM_JSON_STRING)
            return report(c, WLM_ERR_INVALID_ARG, 0, req->items[k].at,
                          "'required' must list strings");
        if (!wlm_json_get(props, req->items[k].str) || strlen(req->items[k].str) != req->items[k].len)
            return report(c, WLM_ERR_UNSUPPORTED, 0, req->items[k].at,
                          "required property '%.60s' is not in 'properties' (only the listed "
                          "properties can be generated)",
                          req->items[k].str);
    }
    const int n_props = props ? (int)props->n : 0;
    c->prims |= P_WS;
    if (n_props == 0) { /* free keys: values per additionalProperties (any when absent / true) */
        if (add && add->type == WLM_JSON_FALSE) {
            sbuf body = {0};
            wlm_sb_str(&body, "\"{\" ws \"}\"");
            emit_named(c, hint, &body, ref);
            free(body.p);
            return WLM_OK;
        }
        if (!add || add->type == WLM_JSON_TRUE) {
            c->prims |= P_OBJECT;
            wlm_sb_str(ref, "object");
            return WLM_OK;
        }
        sbuf v = {0}, body = {0};
        char h[48];
        snprintf(h, sizeof h, "%s-additional", hint);
        size_t old = path_push(c, "additionalProperties", 20);
        gen(c, add, h, &v);
        path_pop(c, old);
        if (c->status == WLM_OK) {
            c->prims |= P_STRING;
            sbuf kv = {0};
            kv_expr(&kv, NULL, v.p ? v.p : "value");
            wlm_sb_fmt(&body, "\"{\" ws ( %s ( \",\" ws %s )* )? \"}\"", kv.p ? kv.p : "",
                   kv.p ? kv.p : "");
            if (kv.oom || v.oom) body.oom = 1;
            /* sb_fmt truncates at 255 bytes: rebuild without it when long */
            if (kv.n > 100) {
                body.n = 0;
                wlm_sb_str(&body, "\"{\" ws ( ");
                if (kv.p) wlm_sb_add(&body, kv.p, kv.n);
                wlm_sb_str(&body, " ( \",\" ws ");
                if (kv.p) wlm_sb_add(&body, kv.p, kv.n);
                wlm_sb_str(&body, " )* )? \"}\"");
            }
            emit_named(c, hint, &body, ref);
            free(kv.p);
        }
        free(v.p);
        free(body.p);
        return c->status;
    }
    if (add && add->type != WLM_JSON_FALSE &&
        report(c, WLM_ERR_UNSUPPORTED, 1, add->at,
               "'additionalProperties' other than false beside 'properties' is not supported "
               "(no other key is generated)"))
        return c->status;
    /* one value rule per property, then the comma chain from the last property back:
     *   after_i ::= ( "," ws kv_i )? after_{i+1}     (kv_i required: without the ?)
     *   first_i ::= kv_i after_{i+1} | first_{i+1}   (kv_i required: kv_i after_{i+1} only)  */
    char (*val)[48] = calloc((size_t)n_props, sizeof *val);
    char (*after)[48] = calloc((size_t)n_props + 1, sizeof *after);
    char (*first)[48] = calloc((size_t)n_props + 1, sizeof *first);
    if (!val || !after || !first) {
        free(val), free(after), free(first);
        return conv_nomem(c);
    }
    for (int k = 0; k < n_props && c->status == WLM_OK; k++) {
        char h[48];
        snprintf(h, sizeof h, "%.20s-%.20s", hint, props->keys[k].str);
        size_t old = path_push(c, "properties", 10);
        path_push(c, props->keys[k].str, props->keys[k].len);
        sbuf v = {0};
        gen(c, &props->items[k], h, &v);
        path_pop(c, old);
        if (v.oom) conv_nomem(c);
        if (c->status == WLM_OK) snprintf(val[k], sizeof val[k], "%s", v.p ? v.p : "value");
        free(v.p);
    }
    for (uint32_t k = 0; k + 1 < props->n && c->status == WLM_OK; k++)
        for (uint32_t j = k + 1; j < props->n; j++)
            if (props->keys[k].len == props->keys[j].len &&
                memcmp(props->keys[k].str, props->keys[j].str, props->keys[k].len) == 0)
                report(c, WLM_ERR_INVALID_ARG, 0, props->keys[j].at, "property '%.60s' twice",
                       props->keys[j].str);
    if (c->status == WLM_OK) {
        int any_optional = 0;
        for (int k = n_props; k-- > 0;) {
            int required = 0;
            for (uint32_t j = 0; req && j < req->n; j++)
                required |= req->items[j].len == props->keys[k].len &&
                            memcmp(req->items[j].str, props->keys[k].str, props->keys[k].len) == 0;
            any_optional |= !required;
            sbuf kv = {0}, body = {0};
            kv_expr(&kv, &props->keys[k], val[k]);
            /* after_k */
            wlm_sb_str(&body, required ? "\",\" ws " : "( \",\" ws ");
            if (kv.p) wlm_sb_add(&body, kv.p, kv.n);
            wlm_sb_str(&body, required ? " " : " )? ");
            wlm_sb_str(&body, after[k + 1][0] ? after[k + 1] : "");
            if (k > 0) {
                rule_name(c, "after", after[k]);
                add_rule(c, after[k], &body);
            }
            /* first_k */
            body.n = 0;
            if (kv.p) wlm_sb_add(&body, kv.p, kv.n);
            wlm_sb_str(&body, " ");
            wlm_sb_str(&body, after[k + 1]);
            if (!required) {
                wlm_sb_str(&body, first[k + 1][0] ? " | " : " | \"\"");
                wlm_sb_str(&body, first[k + 1]);
            }
            if (kv.oom) body.oom = 1;
            rule_name(c, "first", first[k]);
            add_rule(c, first[k], &body);
            free(kv.p);
            free(body.p);
        }
        (void)any_optional;
        sbuf body = {0};
        wlm_sb_str(&body, "\"{\" ws ");
        wlm_sb_str(&body, first[0]);
        wlm_sb_str(&body, " \"}\"");
        emit_named(c, hint, &body, ref);
        free(body.p);
    }
    free(val), free(after), free(first);
    return c->status;
}

static int type_is(const wlm_json *t, const char *name) {
    return t->type == WLM_JSON_STRING && strlen(name) == t->len && memcmp(t->str, name, t->len) == 0;
}

/* Does value v have JSON type `t` ("integer": a number with no fraction)? */
static int value_has_type(const wlm_json *v, const wlm_json *t) {
    if (type_is(t, "null")) return v->type == WLM_JSON_NULL;
    if (type_is(t, "boolean")) return v->type == WLM_JSON_TRUE || v->type == WLM_JSON_FALSE;
    if (type_is(t, "number")) return v->type == WLM_JSON_NUMBER;
    if (type_is(t, "integer")) return v->type == WLM_JSON_NUMBER && v->num == (double)(long long)v->num;
    if (type_is(t, "string")) return v->type == WLM_JSON_STRING;
    if (type_is(t, "array")) return v->type == WLM_JSON_ARRAY;
    if (type_is(t, "object")) return v->type == WLM_JSON_OBJECT;
    return 0;
}

static int value_allowed(const wlm_json *v, const wlm_json *type) {
    if (!type) return 1;
    if (type->type == WLM_JSON_STRING) return value_has_type(v, type);
    for (uint32_t k = 0; type->type == WLM_JSON_ARRAY && k < type->n; k++)
        if (value_has_type(v, &type->items[k])) return 1;
    return 0;
}

/* One type name → its rule. */
static int gen_type(conv *c, const wlm_json *s, const wlm_json *t, const char *hint, sbuf *ref) {
    static const struct { const char *name; unsigned prim; } prims[] = {
        {"integer", P_INTEGER}, {"number", P_NUMBER}, {"boolean", P_BOOLEAN}, {"null", P_NULL}};
    if (t->type != WLM_JSON_STRING)
        return report(c, WLM_ERR_INVALID_ARG, 0, t->at, "a type must be a string");
    for (int k = 0; k < 4; k++)
        if (type_is(t, prims[k].name)) {
            c->prims |= prims[k].prim;
            wlm_sb_str(ref, prims[k].name);
            return WLM_OK;
        }
    if (type_is(t, "string")) return gen_string(c, s, hint, ref);
    if (type_is(t, "array")) return gen_array(c, s, hint, ref);
    if (type_is(t, "object")) return gen_object(c, s, hint, ref);
    return report(c, WLM_ERR_INVALID_ARG, 0, t->at, "unknown type '%.40s'", t->str);
}

/* Resolves "#" or "#/a/b~1c" against the root document. */
static const wlm_json *resolve(conv *c, const wlm_json *ref) {
    if (ref->type != WLM_JSON_STRING)
        return report(c, WLM_ERR_INVALID_ARG, 0, ref->at, "'$ref' must be a string"), NULL;
    if (ref->len == 0 || ref->str[0] != '#')
        return report(c, WLM_ERR_UNSUPPORTED, 0, ref->at,
                      "'$ref' '%.60s': only references inside the schema ('#/...') are "
                      "supported", ref->str), NULL;
    const wlm_json *v = c->root;
    size_t i = 1;
    if (i < ref->len && ref->str[i] != '/')
        return report(c, WLM_ERR_UNSUPPORTED, 0, ref->at,
                      "'$ref' '%.60s': only JSON pointers ('#/$defs/name') are supported",
                      ref->str), NULL;
    while (i < ref->len && v) {
        i++; /* '/' */
        char seg[256];
        size_t n = 0;
        while (i < ref->len && ref->str[i] != '/') {
            char ch = ref->str[i++];
            if (ch == '~' && i < ref->len && (ref->str[i] == '0' || ref->str[i] == '1'))
                ch = ref->str[i++] == '0' ? '~' : '/';
            if (n + 1 < sizeof seg) seg[n++] = ch;
        }
        seg[n] = '\0';
        if (v->type == WLM_JSON_OBJECT) {
            v = wlm_json_get(v, seg);
        } else if (v->type == WLM_JSON_ARRAY) {
            char *end;
            unsigned long k = strtoul(seg, &end, 10);
            v = (n && *end == '\0' && k < v->n) ? &v->items[k] : NULL;
        } else {
            v = NULL;
        }
    }
    if (!v)
        report(c, WLM_ERR_INVALID_ARG, 0, ref->at, "'$ref' '%.60s' points at nothing", ref->str);
    return v;
}

static int gen_ref(conv *c, const wlm_json *refv, sbuf *ref) {
    const wlm_json *target = resolve(c, refv);
    if (!target) return c->status;
    for (uint32_t k = 0; k < c->n_refs; k++)
        if (c->refs[k].target == target) {
            wlm_sb_str(ref, c->refs[k].name);
            return WLM_OK;
        }
    if (c->n_refs >= MAX_REFS)
        return report(c, WLM_ERR_UNSUPPORTED, 0, refv->at, "more than %d '$ref' targets",
                      MAX_REFS);
    if (!c->refs) {
        c->refs = malloc(sizeof *c->refs * MAX_REFS);
        if (!c->refs) return conv_nomem(c);
    }
    ref_memo *m = &c->refs[c->n_refs++];
    m->target = target;
    snprintf(m->name, sizeof m->name, "ref-%u", (unsigned)++c->counter);
    /* the rule exists before its body is converted, so a recursive schema refers to it */
    char hint[48];
    const char *slash = strrchr(refv->str, '/');
    snprintf(hint, sizeof hint, "%.30s", slash ? slash + 1 : "root");
    sbuf body = {0};
    gen(c, target, hint, &body);
    if (c->status == WLM_OK) add_rule(c, m->name, &body);
    wlm_sb_str(ref, m->name);
    free(body.p);
    return c->status;
}

static int gen_alternatives(conv *c, const wlm_json *list, const char *kw, const char *hint,
                            sbuf *ref) {
    if (list->type != WLM_JSON_ARRAY || list->n == 0)
        return report(c, WLM_ERR_INVALID_ARG, 0, list->at, "'%s' must be a non-empty array", kw);
    sbuf body = {0};
    for (uint32_t k = 0; k < list->n && c->status == WLM_OK; k++) {
        size_t old = path_push(c, kw, strlen(kw));
        path_push_index(c, k);
        char h[48];
        snprintf(h, sizeof h, "%.30s-%u", hint, (unsigned)k);
        if (k) wlm_sb_str(&body, " | ");
        gen(c, &list->items[k], h, &body);
        path_pop(c, old);
    }
    if (c->status == WLM_OK) emit_named(c, hint, &body, ref);
    free(body.p);
    return c->status;
}

static int gen(conv *c, const wlm_json *s, const char *hint, sbuf *ref) {
    if (c->status != WLM_OK) return c->status;
    if (c->nest >= MAX_NEST)
        return report(c, WLM_ERR_UNSUPPORTED, 0, s->at,
                      "schemas nested deeper than %d (through properties, items or $ref)",
                      MAX_NEST);
    if (s->type == WLM_JSON_TRUE) {
        c->prims |= P_VALUE;
        wlm_sb_str(ref, "value");
        return WLM_OK;
    }
    if (s->type == WLM_JSON_FALSE)
        return report(c, WLM_ERR_INVALID_ARG, 0, s->at, "the schema 'false' admits no value");
    if (s->type != WLM_JSON_OBJECT)
        return report(c, WLM_ERR_INVALID_ARG, 0, s->at, "a schema must be an object or a boolean");
    c->nest++;
    int constraining = 0; /* supported keywords other than $ref */
    for (uint32_t k = 0; k < s->n && c->status == WLM_OK; k++) {
        const wlm_json *key = &s->keys[k];
        if (in_list(annotations, key)) continue;
        if (in_list(supported, key)) {
            constraining += !(key->len == 4 && memcmp(key->str, "$ref", 4) == 0);
            continue;
        }
        report(c, WLM_ERR_UNSUPPORTED, 1, key->at, "keyword '%.60s' is not supported", key->str);
    }
    const wlm_json *refv = wlm_json_get(s, "$ref");
    const wlm_json *cnst = wlm_json_get(s, "const");
    const wlm_json *en = wlm_json_get(s, "enum");
    const wlm_json *type = wlm_json_get(s, "type");
    const wlm_json *any = wlm_json_get(s, "anyOf");
    const wlm_json *one = wlm_json_get(s, "oneOf");
    if (c->status != WLM_OK) {
    } else if (refv) {
        if (constraining)
            report(c, WLM_ERR_UNSUPPORTED, 1, refv->at,
                   "keywords beside '$ref' are not supported (the reference alone is used)");
        if (c->status == WLM_OK) gen_ref(c, refv, ref);
    } else if (cnst || en) {
        if (cnst && en)
            report(c, WLM_ERR_UNSUPPORTED, 1, en->at, "'enum' beside 'const' (const is used)");
        sbuf body = {0};
        if (cnst) {
            value_literal(&body, cnst);
        } else if (en->type != WLM_JSON_ARRAY || en->n == 0) {
            report(c, WLM_ERR_INVALID_ARG, 0, en->at, "'enum' must be a non-empty array");
        } else {
            int n = 0;
            for (uint32_t k = 0; k < en->n; k++) {
                if (!value_allowed(&en->items[k], type)) continue; /* type filters the enum */
                if (n++) wlm_sb_str(&body, " | ");
                value_literal(&body, &en->items[k]);
            }
            if (!n) report(c, WLM_ERR_INVALID_ARG, 0, en->at, "no 'enum' value has the 'type'");
        }
        if (c->status == WLM_OK) emit_named(c, hint, &body, ref);
        free(body.p);
    } else if (any || one) {
        if (any && one)
            report(c, WLM_ERR_UNSUPPORTED, 0, one->at, "'anyOf' and 'oneOf' together");
        else if (constraining > 1)
            report(c, WLM_ERR_UNSUPPORTED, 1, (any ? any : one)->at,
                   "keywords beside '%s' are not supported (the alternatives alone are used)",
                   any ? "anyOf" : "oneOf");
        if (c->status == WLM_OK)
            gen_alternatives(c, any ? any : one, any ? "anyOf" : "oneOf", hint, ref);
    } else if (type && type->type == WLM_JSON_ARRAY) {
        if (type->n == 0) {
            report(c, WLM_ERR_INVALID_ARG, 0, type->at, "'type' is an empty array");
        } else {
            sbuf body = {0};
            for (uint32_t k = 0; k < type->n && c->status == WLM_OK; k++) {
                if (k) wlm_sb_str(&body, " | ");
                gen_type(c, s, &type->items[k], hint, &body);
            }
            if (c->status == WLM_OK) emit_named(c, hint, &body, ref);
            free(body.p);
        }
    } else if (type) {
        gen_type(c, s, type, hint, ref);
    } else { /* no type: inferred from the keywords, else any value */
        static const struct { const char *kw, *type; } infer[] = {
            {"properties", "object"}, {"required", "object"}, {"additionalProperties", "object"},
            {"items", "array"}, {"minItems", "array"}, {"maxItems", "array"},
            {"minLength", "string"}, {"maxLength", "string"}, {"pattern", "string"}};
        const char *t = NULL;
        for (size_t k = 0; k < sizeof infer / sizeof infer[0] && !t; k++)
            if (wlm_json_get(s, infer[k].kw)) t = infer[k].type;
        if (t) {
            wlm_json tv = {.type = WLM_JSON_STRING, .str = t, .len = strlen(t), .at = s->at};
            gen_type(c, s, &tv, hint, ref);
        } else {
            c->prims |= P_VALUE;
            wlm_sb_str(ref, "value");
        }
    }
    c->nest--;
    if (ref->oom || c->out.oom) conv_nomem(c);
    return c->status;
}

/* The shared rules, appended once each when used. */
static void add_primitives(conv *c) {
    unsigned p = c->prims;
    if (p & (P_OBJECT | P_ARRAY)) p |= P_VALUE; /* their members are any values */
    if (p & P_VALUE) p |= P_OBJECT | P_ARRAY | P_STRING | P_NUMBER | P_BOOLEAN | P_NULL | P_WS;
    if (p & P_STRING) p |= P_CHAR;
    static const struct { unsigned bit; const char *rule; } rules[] = {
        {P_VALUE, "value ::= object | array | string | number | boolean | null\n"},
        {P_OBJECT, "object ::= \"{\" ws ( string ws \":\" ws value ws ( \",\" ws string ws \":\" "
                   "ws value ws )* )? \"}\"\n"},
        {P_ARRAY, "array ::= \"[\" ws ( value ws ( \",\" ws value ws )* )? \"]\"\n"},
        {P_STRING, "string ::= \"\\\"\" char* \"\\\"\"\n"},
        {P_CHAR, "char ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" "
                 "( [0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2} ) )\n"},
        {P_NUMBER, "number ::= integer ( \".\" [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,2} )?\n"},
        {P_INTEGER | P_NUMBER, "integer ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,15} )\n"},
        {P_BOOLEAN, "boolean ::= \"true\" | \"false\"\n"},
        {P_NULL, "null ::= \"null\"\n"},
        {P_WS, "ws ::= ( \" \" | \"\\n\" [ \\t]{0,20} )?\n"},
    };
    for (size_t k = 0; k < sizeof rules / sizeof rules[0]; k++)
        if (p & rules[k].bit) wlm_sb_str(&c->out, rules[k].rule);
}

int wlm_json_schema_to_grammar(const char *schema, size_t schema_len, unsigned flags,
                               char **grammar, size_t *grammar_len, char *msg, size_t msg_size) {
    if (msg && msg_size) msg[0] = '\0';
    if (!grammar) return WLM_ERR_INVALID_ARG;
    *grammar = NULL;
    if (grammar_len) *grammar_len = 0;
    if (!schema && schema_len) return WLM_ERR_INVALID_ARG;
    wlm_json_doc *doc = NULL;
    char jerr[256];
    int rc = wlm_json_parse(schema, schema_len, &doc, jerr, sizeof jerr);
    if (rc != WLM_OK) {
        if (msg && msg_size) snprintf(msg, msg_size, "the schema is not JSON: %s", jerr);
        return rc;
    }
    conv c;
    memset(&c, 0, sizeof c);
    c.doc = doc;
    c.root = wlm_json_root(doc);
    c.flags = flags;
    c.msg = msg;
    c.msglen = msg_size;
    sbuf root = {0};
    gen(&c, c.root, "root", &root);
    if (c.status == WLM_OK && !root.oom) { /* root's rule goes first, before the others */
        sbuf all = {0};
        wlm_sb_str(&all, "root ::= ");
        wlm_sb_str(&all, root.p ? root.p : "value");
        wlm_sb_str(&all, "\n");
        if (c.out.p) wlm_sb_str(&all, c.out.p);
        if (c.out.oom) all.oom = 1;
        free(c.out.p);
        c.out = all;
        add_primitives(&c);
    }
    if (c.status == WLM_OK && (c.out.oom || root.oom || c.path.oom)) conv_nomem(&c);
    if (c.status == WLM_OK && c.out.n > WLM_GRAM_MAX_TEXT)
        report(&c, WLM_ERR_UNSUPPORTED, 0, 0, "the grammar would be %zu bytes (at most %u)",
               c.out.n, (unsigned)WLM_GRAM_MAX_TEXT);
    if (c.status == WLM_OK) { /* the grammar handed out always compiles */
        wlm_gram *g = NULL;
        char gerr[256];
        int grc = wlm_gram_parse(c.out.p, c.out.n, &g, gerr, sizeof gerr);
        wlm_gram_free(g);
        if (grc != WLM_OK) {
            c.status = grc == WLM_ERR_NOMEM ? grc : WLM_ERR_UNSUPPORTED;
            if (msg && msg_size)
                snprintf(msg, msg_size, "the schema leads to a grammar the engine refuses (a "
                                        "$ref / anyOf cycle that never reaches a value, a "
                                        "pattern repeating the empty string, or a grammar too "
                                        "large): %s", gerr);
        }
    }
    if (c.status == WLM_OK) {
        *grammar = c.out.p;
        if (grammar_len) *grammar_len = c.out.n;
        c.out.p = NULL;
        if (msg && msg_size && c.warn.n) {
            snprintf(msg, msg_size, "%s%s", c.warn.p, c.n_warn > 32 ? "; ..." : "");
        }
    }
    free(c.out.p);
    free(root.p);
    free(c.path.p);
    free(c.warn.p);
    free(c.refs);
    wlm_json_free(doc);
    return c.status;
}
