/*
 * tokenizer.h — internal: the tokenizers, in three flavours that share the vocabulary tables
 * (pieces, scores, a hash index for lookups by bytes):
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
 *   WLM_TOKENIZER_BPE      a GGUF vocabulary with tokenizer.ggml.model = "gpt2": byte-level BPE
 *                          (bpe.c) after the pre-tokenizer named by tokenizer.ggml.pre
 *                          (pretokenize.c), merges ranked by their order in tokenizer.ggml.merges.
 *   WLM_TOKENIZER_WPM      a GGUF vocabulary with tokenizer.ggml.model = "bert": BERT's WordPiece
 *                          (wordpiece.c) as llama.cpp's WPM tokenizer; [CLS] text [SEP] with
 *                          add_special.
 *
 * All flavours keep the same contracts for wlm_tokenizer_encode / _piece (see wasmlm.h). The GGUF
 * flavours split special tokens out of the text first: user-defined ones always, control and
 * unknown ones only when asked (WLM_TOKENIZE_PARSE_SPECIAL), as llama.cpp's parse_special.
 */
#ifndef WASMLM_TOKENIZER_H
#define WASMLM_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "formats/gguf.h"
#include "tokenizer/pretokenize.h"

typedef enum wlm_tokenizer_kind {
    WLM_TOKENIZER_NONE = 0,
    WLM_TOKENIZER_LLAMA2C = 1,
    WLM_TOKENIZER_SPM = 2,
    WLM_TOKENIZER_BPE = 3,
    WLM_TOKENIZER_WPM = 4
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

typedef struct wlm_tokenizer {
    wlm_tokenizer_kind kind;
    int32_t vocab_size;
    int32_t max_token_length;  /* longest piece in bytes */
    char *blob;                /* every piece, NUL-terminated, back to back */
    uint32_t *offset;          /* (vocab_size) start of piece i in blob */
    uint32_t *length;          /* (vocab_size) bytes of piece i */
    float *scores;             /* (vocab_size) merge priority; higher merges first */
    int32_t *piece_tab;        /* (piece_mask + 1) open-addressing hash index of the pieces
                                  by their bytes (linear probing, -1 = empty slot; equal pieces:
                                  the lowest id only); between 1.5 and 3 slots per token, i.e.
                                  6 to 12 bytes per token */
    uint32_t piece_mask;
    int32_t bos_id, eos_id;    /* -1 when the vocabulary has none */
    int32_t sep_id;            /* wpm only: [SEP], appended with add_special */
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
    int32_t n_user;            /* special tokens split out of the text before merging: */
    int32_t *user;             /* (n_user) their ids, longest piece first */
    uint8_t *user_rstrip;      /* (n_user) 1: whitespace after a match is dropped (phi-3) */
    uint8_t *user_control;     /* (n_user) 1: control / unknown, split only with parse_special;
                                  0: user-defined, always split */
    /* end of generation (llama.cpp's special_eog_ids): eos, eot, eom, fim pad/rep/sep and the
     * pieces that end a turn (<|im_end|>, <|eot_id|>, <end_of_turn>, ...) */
    int32_t n_eog;
    int32_t eog[16];           /* sorted, distinct */
    int32_t eot_id, eom_id;    /* -1 when none */
    /* bpe */
    wlm_pretok pre;            /* the pre-tokenizer of tokenizer.ggml.pre */
    uint32_t *merge_tab;       /* (4 × (merge_mask + 1)) open-addressing table keyed by the pair
                                  of token ids: id_a + 1 (0 = empty slot), id_b, rank, merged id */
    uint32_t merge_mask;
    int32_t n_merges;
    char byte_enc[256][4];     /* GPT-2's stand-in code point of each byte, as UTF-8 */
    uint8_t byte_enc_len[256];
    int spm_bpe;               /* tokenizer.ggml.model "gemma4" (llama.cpp's SPM-style BPE,
                                  LLAMA_VOCAB_PRE_TYPE_GEMMA4): spaces escaped to "▁" before the
                                  pre-tokenizer, symbols are raw UTF-8 characters (no byte
                                  mapping), a run of newlines that is a token stays whole; tokens
                                  decode with "▁" as a space and <0xNN> as its byte */
} wlm_tokenizer;

/* A growable array of token ids (the encoders' output). */
typedef struct wlm_id_vec {
    int32_t *v;
    size_t n, cap;
} wlm_id_vec;
int wlm_id_vec_push(wlm_id_vec *o, int32_t id);

/* Parses tokenizer.bin for a model with `vocab_size` tokens. On error returns a negative
 * wlm_status, writes a message to err (errlen bytes) and leaves *t zeroed. */
int wlm_tokenizer_load_llama2c(wlm_tokenizer *t, const void *data, size_t size,
                               int32_t vocab_size, char *err, size_t errlen);

/* The number of entries in a tokenizer.bin (the file does not say: entries are read until
 * the end), or a negative wlm_status (message in err) when the bytes are not a well-formed
 * tokenizer.bin ending on an entry boundary. */
int32_t wlm_tokenizer_count_llama2c(const void *data, size_t size, char *err, size_t errlen);

/*
 * Reads the vocabulary of a parsed GGUF file: tokenizer.ggml.model ("llama": SPM, "gpt2":
 * byte-level BPE, "bert": WordPiece; other models are WLM_ERR_UNSUPPORTED naming the model), tokens (STRING
 * array), token_type (INT32 array of the tokens' length, optional: normal), and
 *  - SPM: scores (FLOAT32, optional: 0), bos/eos/unknown_token_id (defaults 1, 2, 0; ids outside
 *    the vocabulary keep the default, as llama.cpp does), add_bos_token (default 1),
 *    add_space_prefix (default 1);
 *  - BPE: merges (STRING array "left right", ranked by position; each side must be a token),
 *    pre (the pre-tokenizer, pretokenize.h; absent: "default", unknown: WLM_ERR_UNSUPPORTED),
 *    bos/eos/unknown_token_id (no defaults: llama.cpp's 11 is "," in most BPE vocabularies; a
 *    key outside the vocabulary is WLM_ERR_FORMAT naming it), add_bos_token (default: the
 *    pre-tokenizer's, true for Llama 3);
 *  - WPM: bos_token_id (else cls_token_id; default 101, [CLS]), seperator_token_id (llama.cpp's
 *    spelling; default 102, [SEP]), unknown_token_id (default 100; must be a token);
 *  - all: add_eos_token (default 0; add_bos/add_eos without that token: WLM_ERR_FORMAT),
 *    eot/eom/fim ids (for the end-of-generation set), general.name (the phi-3 family strips
 *    whitespace after special tokens).
 * Everything is copied: g and its buffer may go away afterwards. On error returns a negative
 * wlm_status with a message in err naming the key, and leaves *t zeroed.
 */
int wlm_tokenizer_load_gguf(wlm_tokenizer *t, const wlm_gguf *g, char *err, size_t errlen);

void wlm_tokenizer_free(wlm_tokenizer *t);

/* See wlm_tokenize_ex in wasmlm.h: returns the count needed (may exceed cap) or a negative
 * status. flags: WLM_TOKENIZE_ADD_SPECIAL (llama2c: BOS; GGUF: llama.cpp's add_special, BOS when
 * the vocabulary's add_bos_token is set, EOS when add_eos_token is), WLM_TOKENIZE_PARSE_SPECIAL
 * (GGUF: control tokens written in the text become their ids; user-defined ones always do). */
int32_t wlm_tokenizer_encode(const wlm_tokenizer *t, const char *text, size_t len, unsigned flags,
                             int32_t *tokens, int32_t cap);

/* 1 when token ends a generation (see wlm_token_is_eog); llama2c: EOS and BOS (run.c). */
int wlm_tokenizer_is_eog(const wlm_tokenizer *t, int32_t token);

/* See wlm_token_piece in wasmlm.h. SPM: normal pieces with "▁" as spaces, byte tokens as the
 * byte, user-defined tokens verbatim, control / unknown / unused tokens as "" — and, as with
 * llama2c, one leading space removed after BOS (when the vocabulary adds a space prefix). */
const char *wlm_tokenizer_piece(const wlm_tokenizer *t, int32_t prev, int32_t token,
                                size_t *len);

/* Id of the piece with exactly these bytes (the lowest id if several), or -1. O(len) expected:
 * a probe of the hash index. */
int32_t wlm_tokenizer_lookup(const wlm_tokenizer *t, const char *str, size_t len);
/* Id of the piece whose bytes are a (la bytes) followed by b (lb bytes), or -1; the same as
 * wlm_tokenizer_lookup of the concatenation, without building it. */
int32_t wlm_tokenizer_lookup2(const wlm_tokenizer *t, const char *a, size_t la, const char *b,
                              size_t lb);

/* ---- between the tokenizer files (tokenizer.c, vocab_llama2c.c, vocab_gguf.c, spm.c) ---- */

#define SPM_SPACE "\xe2\x96\x81" /* U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's space */

/* memcmp order of two byte strings, a prefix before the longer string. */
int wlm_vocab_cmp_bytes(const char *a, size_t la, const char *b, size_t lb);
/* Allocates the tables shared by every flavour (blob, offset, length, scores) for n pieces of
 * blob_bytes (NULs included); 0 when out of memory (wlm_tokenizer_free releases what was
 * allocated). */
int wlm_vocab_alloc(wlm_tokenizer *t, int32_t n, size_t blob_bytes);
/* Appends piece i (len bytes, then a NUL) to the blob at byte *b, advancing *b. */
void wlm_vocab_put_piece(wlm_tokenizer *t, int32_t i, const char *piece, uint32_t len, size_t *b);
/* Builds the piece index over the vocabulary's pieces, inserted in id order so that a piece
 * held twice is found as its lowest id. Returns 0, -1 when out of memory, or 1 when a piece
 * repeats and *dup_a < *dup_b are the first such pair met (the index is then incomplete). With
 * dup_a NULL, repeats are allowed (llama2c: run.c does not check them). Memory: the smallest
 * power of two >= 1.5 x vocab_size int32 slots, 6 to 12 bytes per token. */
int wlm_vocab_build_index(wlm_tokenizer *t, int32_t *dup_a, int32_t *dup_b);
/* The value of one hexadecimal digit, or -1. */
int wlm_hexval(char c);
/* A printable, bounded copy of n bytes of s for messages: bytes outside 0x20..0x7e as '?', cut
 * with "..." to fit cap bytes (NUL included; cap >= 5). */
void wlm_printable(char *out, size_t cap, const char *s, size_t n);

/* The flavours' encoders and pieces, for wlm_tokenizer_encode / wlm_tokenizer_piece (arguments
 * checked there). */
int32_t wlm_llama2c_encode(const wlm_tokenizer *t, const char *text, size_t len, int add_bos,
                           int32_t *tokens, int32_t cap);
const char *wlm_llama2c_piece(const wlm_tokenizer *t, int32_t prev, int32_t token, size_t *len);
int32_t wlm_gguf_encode(const wlm_tokenizer *t, const char *text, size_t len, unsigned flags,
                        int32_t *tokens, int32_t cap);
const char *wlm_spm_piece(const wlm_tokenizer *t, int32_t prev, int32_t token, size_t *len);

/* ---- wordpiece.c, for spm.c ---- */

/* Encodes one raw fragment (no special tokens in it) by BERT's WordPiece and appends the ids to
 * out (t->unk_id must be a token). WLM_OK or WLM_ERR_NOMEM. */
int wlm_wpm_encode_fragment(const wlm_tokenizer *t, const char *s, size_t n, wlm_id_vec *out);

/* ---- bpe.c, for spm.c and vocab_gguf.c ---- */

/* Work memory of BPE encoding, reused across the fragments of one call; zero-initialize. */
typedef struct wlm_bpe_work {
    uint32_t *cps; size_t cap_cps;          /* the fragment's code points */
    uint32_t *lens; size_t n_lens, cap_lens; /* pre-token lengths in code points */
    char *word; size_t cap_word;            /* one pre-token in GPT-2's byte encoding */
    struct bpe_symbol *sym; size_t cap_sym;
    struct bpe_bigram *heap; size_t cap_heap, n_heap;
    wlm_regex_work re;
} wlm_bpe_work;
void wlm_bpe_work_free(wlm_bpe_work *w);

/* Fills byte_enc / byte_enc_len (GPT-2's bytes_to_unicode). */
void wlm_bpe_init_bytes(wlm_tokenizer *t);
/* Reads tokenizer.ggml.merges into the merge table (pieces must already be indexed). Errors
 * (WLM_ERR_FORMAT, naming the key and the merge): missing key, a merge without a space, a merge
 * naming a piece that is not a token. */
int wlm_bpe_load_merges(wlm_tokenizer *t, const wlm_gguf *g, char *err, size_t errlen);
/* The bytes token i decodes to (out may be NULL to measure). */
size_t wlm_bpe_decoded(const wlm_tokenizer *t, int32_t i, char *out);
/* Encodes one raw fragment (no special tokens in it) and appends the ids to out. */
int wlm_bpe_encode_fragment(const wlm_tokenizer *t, const char *s, size_t n, wlm_bpe_work *w,
                            wlm_id_vec *out);

/* A piece of a vocabulary by reference (bytes not owned), for sorting pieces. */
typedef struct wlm_piece_ref {
    const char *str;
    uint32_t len;
    int32_t id;
} wlm_piece_ref;

/* qsort comparator of wlm_piece_ref: byte order, a prefix before the longer piece, then the lower
 * id first. */
int wlm_piece_ref_cmp(const void *a, const void *b);

#endif
