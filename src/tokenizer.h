/*
 * tokenizer.h — internal: SentencePiece-style BPE over a scored vocabulary, as llama2.c's
 * tokenizer.bin defines it (run.c's encode/decode). Byte fallback through the <0xNN> tokens at
 * ids 3..258, dummy-prefix space, BOS = 1, EOS = 2. GGUF vocabularies come later (issue 3).
 */
#ifndef WASMLM_TOKENIZER_H
#define WASMLM_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

typedef struct wlm_token_index {
    const char *str;   /* points into wlm_tokenizer.pieces */
    int32_t id;
} wlm_token_index;

typedef struct wlm_tokenizer {
    int32_t vocab_size;
    int32_t max_token_length;  /* longest piece in bytes, from the file header */
    char *blob;                /* every piece, NUL-terminated, back to back */
    uint32_t *offset;          /* (vocab_size) start of piece i in blob */
    uint32_t *length;          /* (vocab_size) bytes of piece i */
    float *scores;             /* (vocab_size) merge priority; higher merges first */
    wlm_token_index *sorted;   /* (vocab_size) pieces sorted by bytes, for binary search */
    int32_t bos_id, eos_id;
    int32_t byte_base;         /* id of <0x00>; byte b is byte_base + b (3 in llama2.c) */
    unsigned char byte_piece[256][2]; /* single-byte strings for decoding <0xNN> */
} wlm_tokenizer;

/* Parses tokenizer.bin for a model with `vocab_size` tokens. On error returns a negative
 * wlm_status, writes a message to err (errlen bytes) and leaves *t zeroed. */
int wlm_tokenizer_load_llama2c(wlm_tokenizer *t, const void *data, size_t size,
                               int32_t vocab_size, char *err, size_t errlen);
void wlm_tokenizer_free(wlm_tokenizer *t);

/* See wlm_tokenize in wasmlm.h: returns the count needed (may exceed cap) or a negative status. */
int32_t wlm_tokenizer_encode(const wlm_tokenizer *t, const char *text, size_t len, int add_bos,
                             int32_t *tokens, int32_t cap);

/* See wlm_token_piece in wasmlm.h. */
const char *wlm_tokenizer_piece(const wlm_tokenizer *t, int32_t prev, int32_t token,
                                size_t *len);

/* Id of the piece with exactly these bytes, or -1. */
int32_t wlm_tokenizer_lookup(const wlm_tokenizer *t, const char *str, size_t len);

#endif
