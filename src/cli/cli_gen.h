/*
 * cli_gen.h — internal to src/cli/: the options of `wasmlm MODEL [options]`, which
 * cli_gen_args.c parses and checks and cli_gen.c runs, and the helpers both use.
 */
#ifndef WLM_CLI_GEN_H
#define WLM_CLI_GEN_H

#include <stdio.h>

#include "cli_chat.h"
#include "wasmlm.h"

/* The command line, parsed (wlm_cli_gen_parse). Owned: grammar, pool, draft_model. */
typedef struct cli_opts {
    const char *checkpoint, *tokenizer_path, *prompt, *prompts_file, *mode;
    int tokenizer_given;
    int steps;              /* run.c's -n: positions, prompt included; 0 = the context length */
    int n_predict_given;
    int n_predict;          /* --n-predict: new tokens, -1 = no limit */
    int n_ctx;              /* --ctx-size; 0 (default) = the model's seq_len */
    int keep_prompt;        /* --keep -1: n_keep = the prompt's length */
    int json;
    int n_samples;          /* --n-samples; 0 = not given */
    int beam_given, beam_width;
    float length_penalty;
    int order;              /* --sampler-order, -1 = chosen by the flags used */
    int llama_sampling;     /* a llama.cpp sampling flag was given */
    int repeat_last_n_ctx;  /* --repeat-last-n -1: the context size */
    int seed_random;        /* seed from the clock */
    int threads;            /* --threads: threads for the matrix products, default 1 */
    int32_t cache_type[2];  /* -ctk / -ctv: KV cache element type of K and V (one type for
                               both), -1 = not given: run.c's F32 with run.c's sampler order,
                               llama.cpp's F16 with llama.cpp's (see kv_type) */
    const char *grammar_flag, *grammar_arg; /* --grammar / --grammar-file / -j / -jf and its
                                               value (the last one given) */
    char *grammar;          /* the GBNF text in use (owned), NULL = none */
    wlm_threadpool *pool;   /* NULL for one thread */
    int chat;               /* --chat / -cnv: a conversation on standard input (cli_chat.c) */
    wlm_cli_chat_opts chat_opts; /* --chat-template, --system-prompt, --verbose-prompt */
    wlm_gen_params gp;
    wlm_logit_bias bias[WLM_MAX_LOGIT_BIAS];
    /* speculative decoding (llama.cpp's -md / --draft-max / --draft-p-min; --lookup-ngram) */
    const char *draft_path;
    wlm_spec_params spec;   /* .draft set once the draft model's context exists */
    wlm_model *draft_model;
    /* images (llama.cpp's --mmproj / --image): the mmproj file and up to 8 binary PPM images */
    const char *mmproj_path;
    const char *image_paths[8];
    int n_images;
} cli_opts;

/* ---- cli_gen_args.c ----------------------------------------------------------------------- */

/* Prints "wasmlm: <message>" on standard error; returns the exit code 1. */
int wlm_cli_fail(const char *fmt, ...);

/* Fills *o from argv[1..argc) (argv[0] is the model). Returns 0, 1 after printing why not, or
 * 2 after printing the usage (-h, --help). */
int wlm_cli_gen_parse(int argc, char **argv, cli_opts *o);

/* The sampler parameters checked by the library's wlm_sampler_check against a vocabulary of
 * vocab_size tokens (--logit-bias ids): 0, or 1 after printing its message. */
int wlm_cli_gen_check_sampler(const cli_opts *o, int32_t vocab_size);

/* The grammar of --grammar / --grammar-file / -j / -jf into o->grammar, compiled once so that
 * a mistake is reported (with its line and column) before the model is read. Returns 0, or 1
 * after printing why not. */
int wlm_cli_gen_load_grammar(cli_opts *o);

/* ---- cli.c -------------------------------------------------------------------------------- */

void *wlm_cli_read_file(const char *path, size_t *size);
void wlm_cli_usage(FILE *f);

#endif
