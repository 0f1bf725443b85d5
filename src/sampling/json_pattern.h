/*
 * json_pattern.h — internal: a JSON Schema `pattern` (a regular-expression subset) → the body of
 * a GBNF rule over the JSON string's text, for json_schema.c.
 */
#ifndef WASMLM_JSON_PATTERN_H
#define WASMLM_JSON_PATTERN_H

#include <stddef.h>

#include "sampling/gbnf_text.h"

/*
 * Appends to `body` a GBNF expression matching the JSON encoding of the strings that contain a
 * match of pattern[0..len) (valid UTF-8, as the JSON reader returns it; ECMA-262 syntax, the
 * subset: literals, `.`, [classes], \d \w \s \D \W \S, ( ) (?: ) |, * + ? {m} {m,} {m,n}, ^ at the
 * start and $ at the end; unanchored sides admit any characters). The expression, quotes
 * included, refers to a rule named `char` (one JSON string character) that the caller defines.
 * Returns 1, or 0 with a message naming the unsupported construct and its position in
 * msg (msglen bytes); body->oom is set when memory ran out.
 */
int wlm_json_pattern(const char *pattern, size_t len, sbuf *body, char *msg, size_t msglen);

#endif
