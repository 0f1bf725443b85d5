/*
 * tokenizer.h — internal: SentencePiece-style BPE over a scored vocabulary, in two flavours
 * that share the vocabulary tables (pieces, scores, a sorted index for lookups):
 *
 *   WLM_TOKENIZER_LLAMA2C  llama2.c's tokenizer.bin, encoded and decoded exactly as run.c does:
 *                          a dummy-prefix " ", UTF-8 characters (unknown ones as <0xNN> bytes,
 *                          id byte+3), then the best-scoring adjacent pair is merged until no
 *                          pair is in the vocabulary (leftmost on ties). BOS = 1, EOS = 2.
 *   WLM_TOKENIZER_SPM      a GGUF vocabulary with tokenizer.ggml.model = "llama", encoded and
 *                          decoded as llama.cpp's SPM tokenizer (llama-vocab.cpp) does: spaces
 *                          escaped to U+2581 "▁", user-defined tokens split out of the text first,
 *                          a priority queue of bigram merges (higher score first, leftmost on
 *                          ties), byte-token fallback; token types decide how pieces decode.
 *
 * Both flavours keep the same contracts for wlm_tokenizer_encode / _piece (see wasmlm.h).
 */
#ifndef WASMLM_TOKENIZER_H
#define WASMLM_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "formats/gguf.h"

typedef enum wlm_tokenizer_kind {
    WLM_TOKENIZER_NONE = 0,
    WLM_TOKENIZER_LLAMA2C = 1,
    WLM_TOKENIZER_SPM = 2
} wlm_tokenizer_kind;

/* tokenizer.ggml.token_type values (llama.cpp's llama_token_type). */
enum wlm_token_type {
    WLM_TOKEN_UNDEFINED = 0,
    WLM_TOKEN_NORMAL = 1,
    WLM_TOKEN_UNKNOWN = 2,
    WLM_TOKEN_CONTROL = 3,
    WLM_TOKEN_USER_DEFINED = 4,
    WLM_TOKEN_UNUSED = 5,
    WLM_TOKEN_BYTE = 6
};

/* Largest vocabulary either loader accepts (real ones are at most a few hundred thousand). */
#define WLM_TOKENIZER_MAX_VOCAB (1 << 24)

typedef struct wlm_token_index {
    const char *str;   /* points into wlm_tokenizer.blob */
    uint32_t len;      /* bytes of the piece (pieces may hold NUL bytes in GGUF) */
    int32_t id;
} wlm_token_index;

typedef struct wlm_tokenizer {
    wlm_tokenizer_kind kind;
    int32_t vocab_size;
    int32_t max_token_length;  /* longest piece in bytes */
    char *blob;                /* every piece, NUL-terminated, back to back */
    uint32_t *offset;          /* (vocab_size) start of piece i in blob */
    uint32_t *length;          /* (vocab_size) bytes of piece i */
    float *scores;             /* (vocab_size) merge priority; higher merges first */
    wlm_token_index *sorted;   /* (vocab_size) pieces sorted by bytes, for binary search */
    int32_t bos_id, eos_id;    /* -1 when the vocabulary has none */
    /* llama2c */
    int32_t byte_base;         /* id of <0x00>; byte b is byte_base + b (3 in llama2.c) */
    unsigned char byte_piece[256][2]; /* single-byte strings for decoding <0xNN> */
    /* spm */
    int32_t unk_id;            /* -1 if none */
    int add_bos, add_eos;      /* what add_bos in wlm_tokenizer_encode adds (llama.cpp's
                                  add_special): BOS if add_bos, EOS if add_eos */
    int add_space_prefix;      /* "▁" before the text (and after each user-defined token) */
    uint8_t *type;             /* (vocab_size) enum wlm_token_type, after llama.cpp's fix-ups */
    char *text;                /* every token's decoded bytes, NUL-terminated, back to back */
    uint32_t *text_offset;     /* (vocab_size) */
    uint32_t *text_length;     /* (vocab_size) */
    int32_t byte_id[256];      /* token of each byte: <0xNN>, else the one-byte piece, else -1 */
    int32_t n_user;            /* user-defined tokens, split out of the text before merging */
    int32_t *user;             /* (n_user) their ids, longest piece first */
    uint8_t *user_rstrip;      /* (n_user) 1: whitespace after a match is dropped (phi-3) */
} wlm_tokenizer;

/* Parses tokenizer.bin for a model with `vocab_size` tokens. On error returns a negative
 * wlm_status, writes a message to err (errlen bytes) and leaves *t zeroed. */
int wlm_tokenizer_load_llama2c(wlm_tokenizer *t, const void *data, size_t size,
                               int32_t vocab_size, char *err, size_t errlen);

/* The number of entries in a tokenizer.bin (the file does not say: entries are read until
 * the end), or a negative wlm_status (message in err) when the bytes are not a well-formed
 * tokenizer.bin ending on an entry boundary. */
int32_t wlm_tokenizer_count_llama2c(const void *data, size_t size, char *err, size_t errlen);

/*
 * Reads the vocabulary of a parsed GGUF file: tokenizer.ggml.model (must be "llama"; other
 * models are WLM_ERR_UNSUPPORTED naming the model), tokens (STRING array), scores (FLOAT32
 * array, optional: 0), token_type (INT32 array, optional: normal), bos/eos/unknown_token_id
 * (defaults 1, 2, 0; ids outside the vocabulary keep the default, as llama.cpp does),
 * add_bos_token (default 1), add_eos_token (default 0), add_space_prefix (default 1), and
 * general.name (the phi-3 family strips whitespace after user-defined tokens). Everything is
 * copied: g and its buffer may go away afterwards. On error returns a negative wlm_status with
 * a message in err and leaves *t zeroed.
 */
int wlm_tokenizer_load_gguf(wlm_tokenizer *t, const wlm_gguf *g, char *err, size_t errlen);

void wlm_tokenizer_free(wlm_tokenizer *t);

/* See wlm_tokenize in wasmlm.h: returns the count needed (may exceed cap) or a negative status.
 * With the SPM flavour add_bos means llama.cpp's add_special: BOS when the vocabulary's
 * add_bos_token is set, EOS when add_eos_token is. Special (control) tokens are never parsed
 * out of the text; user-defined ones always are, as in llama.cpp. */
int32_t wlm_tokenizer_encode(const wlm_tokenizer *t, const char *text, size_t len, int add_bos,
                             int32_t *tokens, int32_t cap);

/* See wlm_token_piece in wasmlm.h. SPM: normal pieces with "▁" as spaces, byte tokens as the
 * byte, user-defined tokens verbatim, control / unknown / unused tokens as "" — and, as with
 * llama2c, one leading space removed after BOS (when the vocabulary adds a space prefix). */
const char *wlm_tokenizer_piece(const wlm_tokenizer *t, int32_t prev, int32_t token,
                                size_t *len);

/* Id of the piece with exactly these bytes, or -1. */
int32_t wlm_tokenizer_lookup(const wlm_tokenizer *t, const char *str, size_t len);

#endif
