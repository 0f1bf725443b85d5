/*
 * grammar_form.h — internal to the grammar files: the compiled form of a GBNF grammar (written
 * by grammar_parse.c, read by the matcher in grammar.c) and the vocabulary's token trie
 * (built by grammar_trie.c, walked by the mask in grammar.c). grammar.h is the interface the
 * rest of the engine sees.
 */
#ifndef WASMLM_GRAMMAR_FORM_H
#define WASMLM_GRAMMAR_FORM_H

#include <stdint.h>
#include <stddef.h>

#include "sampling/grammar.h"

/* A grammar: rules of elements. An element encoding after llama.cpp's (src/llama-grammar.h):
 * a character class is CHAR or CHAR_NOT followed by CHAR_ALT singles and CHAR_UPPER range
 * ends; a rule's alternatives are separated by ALT and the rule ends with END. */
enum {
    GE_END = 0,    /* end of a rule */
    GE_ALT,        /* start of another alternative */
    GE_REF,        /* value: rule id */
    GE_CHAR,       /* value: code point; starts a class */
    GE_CHAR_NOT,   /* value: code point; starts a negated class */
    GE_CHAR_ALT,   /* value: another code point of the class */
    GE_CHAR_UPPER, /* value: upper end of a range starting at the previous element */
    GE_ANY         /* `.`: any code point */
};

typedef struct gel {
    uint32_t type;
    uint32_t value;
} gel;

struct wlm_gram {
    gel *el;             /* (n_el) every rule's elements, END-terminated, back to back */
    uint32_t n_el;
    uint32_t n_rules;
    uint32_t *alt_first; /* (n_rules + 1) range of rule r's alternatives in alt_pos */
    uint32_t *alt_pos;   /* element index where each alternative starts */
    uint32_t root;
};

static inline int is_rule_end(uint32_t t) { return t == GE_END || t == GE_ALT; }

/* The vocabulary as byte strings and their prefix tree (preorder), shared read-only by every
 * matcher of a context. */
struct wlm_gram_vocab {
    int32_t n_tokens;
    char *blob;          /* every token's bytes back to back */
    uint32_t *off, *len; /* (n_tokens) */
    /* trie in preorder: node 0 is the root; node i's subtree is [i, end[i]) */
    uint32_t n_nodes;
    uint8_t *byte;       /* (n_nodes) byte of the edge into node i */
    uint16_t *depth;     /* (n_nodes) */
    uint32_t *end;       /* (n_nodes) */
    uint32_t *tok_first; /* (n_nodes + 1) tokens ending at node i: tok_ids[tok_first[i] ..
                            tok_first[i + 1]) */
    int32_t *tok_ids;
    uint32_t max_len;
    size_t bytes;
};


#endif
