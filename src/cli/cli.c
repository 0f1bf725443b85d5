/*
 * cli.c — the native command-line tool `wasmlm`: dispatches to its commands and prints usage.
 *     wasmlm MODEL [options]      generation (cli_gen.c): run.c's flags reproduce llama2.c's
 *                                 run.c byte for byte; llama.cpp's long flags add the sampler
 *                                 chain, --json log-probabilities, batches and beam search
 *     wasmlm quantize IN OUT TYPE [-z tokenizer.bin]   (cli_quantize.c)
 *     wasmlm tokenize MODEL [--bos]
 *     wasmlm info MODEL            the architecture and hyperparameters, one "key: value" a line
 * `tokenize` tokenizes standard input (all of it, bytes as they are) with the vocabulary of
 * MODEL — a GGUF file (vocabulary only is enough) or a llama2.c tokenizer.bin — and prints the
 * ids separated by spaces, then a newline. No BOS unless --bos (for GGUF: the vocabulary's
 * add_bos_token / add_eos_token decide, as llama.cpp's add_special). Special tokens are not
 * parsed. Used for debugging and golden files; the library itself prints nothing.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h" /* internal: a tokenizer.bin without a model */
#include "wasmlm.h"

int wlm_cli_quantize(int argc, char **argv); /* cli_quantize.c */
int wlm_cli_embed(int argc, char **argv);    /* cli_embed.c */
int wlm_cli_generate(int argc, char **argv); /* cli_gen.c */
void *wlm_cli_read_file(const char *path, size_t *size);
void wlm_cli_usage(FILE *f);

void wlm_cli_usage(FILE *f) {
    fputs(
        "Usage:   wasmlm <model.bin | model.gguf> [options]\n"
        "Example: wasmlm stories260K.bin -z tok512.bin -n 256 -i \"Once upon a time\"\n"
        "Options of llama2.c's run.c (alone, they print what run.c prints):\n"
        "  -t <float>  temperature in [0,inf), default 1.0 (0 = greedy)\n"
        "  -p <float>  p value in top-p (nucleus) sampling in [0,1], default 0.9\n"
        "  -s <int>    random seed, default time(NULL)\n"
        "  -n <int>    number of steps to run for, prompt included, default 256. 0 = n_ctx\n"
        "  -i <string> input prompt\n"
        "  -z <string> path to the tokenizer, default tokenizer.bin (not needed for GGUF)\n"
        "  -m <string> mode: generate (run.c's chat mode: use --chat)\n"
        "Options as llama.cpp spells them:\n"
        "  --prompt TEXT          the prompt, as -i (-p is run.c's top-p)\n"
        "  --n-predict N          new tokens to generate, -1 = no limit (instead of -n)\n"
        "  --temp F               temperature, 0 = greedy\n"
        "  --top-k N              keep the N most probable tokens, 0 = off\n"
        "  --top-p F              nucleus, (0,1], 1 = off\n"
        "  --min-p F              keep tokens with p >= F * max p, [0,1], 0 = off\n"
        "  --typical F            locally typical sampling, (0,1], 1 = off\n"
        "  --repeat-penalty F     CTRL repetition penalty, 1 = off\n"
        "  --repeat-last-n N      window of the penalties, default 64, -1 = the context size\n"
        "  --presence-penalty F   OpenAI's presence penalty, 0 = off\n"
        "  --frequency-penalty F  OpenAI's frequency penalty, 0 = off\n"
        "  --logit-bias ID+B|ID-B add B to token ID's logit; ID-inf bans it (repeatable)\n"
        "  --sampler-order O      runc (temperature, then the filters) or llamacpp (the\n"
        "                         filters, then temperature)\n"
        "  --seed N               RNG seed, -1 = time; sequence i of a batch uses N+i\n"
        "  --stop S               stop before the text S, not printed (repeatable, up to 8)\n"
        "  --grammar GBNF         constrain the output to a GBNF grammar (llama.cpp's syntax)\n"
        "  --grammar-file FILE    the same, read from FILE\n"
        "  -j, --json-schema S    constrain the output to JSON valid for the JSON Schema S\n"
        "  -jf, --json-schema-file FILE   the same, read from FILE (supported keywords: README)\n"
        "  -c, --ctx-size N       context length, default the model's\n"
        "  --threads N            threads for the matrix products (1..16, default 1; results are\n"
        "                         identical for any N)\n"
        "  -ctk, -ctv T           KV cache type, f16 or f32 (K and V alike; llama.cpp's\n"
        "                         --cache-type-k/-v); default f32 (run.c's arithmetic) with\n"
        "                         run.c's sampler order, f16 (llama.cpp's) with llama.cpp's\n"
        "  --context-shift        on a full context, drop the older half after --keep; go on\n"
        "  --keep N               tokens a context shift keeps, default 0, -1 = the prompt\n"
        "  --json                 one JSON line per token and one per finished sequence\n"
        "  --n-probs N            --json: the N most probable alternatives per token (<= 20)\n"
        "  --n-samples N          N samples of the prompt, decoded together as a batch\n"
        "  --prompts FILE         one prompt per line (blank lines skipped), as a batch\n"
        "  --mmproj FILE          a vision model's mmproj GGUF (llama.cpp's; gemma3, idefics3)\n"
        "  --image FILE           an image (binary PPM, P6) for the next <__media__> marker of\n"
        "                         the prompt, up to 8; without markers they go before the prompt\n"
        "  -md, --model-draft F   speculative decoding with the draft model F (same vocabulary;\n"
        "                         greedy output is unchanged, sampled output keeps its distribution)\n"
        "  --draft-max N          tokens drafted per round, 1..32 (default 8; also --draft)\n"
        "  --draft-p-min P        stop a round's drafting below draft probability P (default 0)\n"
        "  --lookup-ngram N       speculative decoding by prompt lookup: drafts follow the last\n"
        "                         N..1 tokens' latest earlier occurrence (1..8); no draft model\n"
        "  --beam W               beam search of width W (ignores the sampler flags)\n"
        "  --length-penalty A     beam score = logprob / length^A, default 1.0\n"
        "  --chat, -cnv           a conversation: each line of standard input is a user\n"
        "                         message, the reply is printed as it is generated\n"
        "  --chat-template NAME   chatml, llama3, gemma, phi3, zephyr, llama2 or gemma4\n"
        "                         (default: the family of the model's tokenizer.chat_template)\n"
        "  -sys, --system-prompt TEXT  --chat: a system message first\n"
        "  --verbose-prompt       --chat: each turn's prompt and reply (JSON) on standard error\n"
        "Sampler order: with run.c's flags alone, temperature is applied before top-p (run.c's\n"
        "  order, so seeds reproduce run.c); any of --temp --top-k --top-p --min-p --typical\n"
        "  --repeat-penalty --repeat-last-n --presence-penalty --frequency-penalty --logit-bias\n"
        "  selects llama.cpp's order (penalties, bias, top-k, typical, top-p, min-p, then\n"
        "  temperature) unless --sampler-order says otherwise. Defaults stay run.c's\n"
        "  (temperature 1.0, top-p 0.9, the rest off), not llama.cpp's. The KV cache follows\n"
        "  the order: F32 as run.c's, F16 as llama.cpp's (-ctk/-ctv to choose).\n"
        "Output: plain text as run.c prints it; a batch prints \"[i] text\" per sequence when it\n"
        "  ends; beams print \"[rank] score=S logprob=L: text\", best first. --json: see README.\n"
        "Tokenizer:  wasmlm tokenize <model.gguf | tokenizer.bin> [--bos] < text\n"
        "            prints the token ids of standard input, separated by spaces\n"
        "Info:       wasmlm info <model.gguf | model.bin>\n"
        "            prints the architecture and the hyperparameters\n"
        "Quantize:   wasmlm quantize IN OUT TYPE [-z tokenizer.bin] [--name NAME]\n"
        "            llama2.c checkpoint or GGUF in, GGUF out; TYPE: F32 F16 Q8_0 Q4_0 Q4_K Q6_K\n"
        "Embed:      wasmlm embed MODEL -p TEXT [-f FILE] [--pooling none|mean|cls|last|rank]\n"
        "            [--embd-normalize N] [--embd-output-format json|array]: embeddings or\n"
        "            reranking scores (llama-embedding's flags; wasmlm embed --help)\n",
        f);
}

/* Reads a whole file into a malloc'd buffer (malloc alignment suits float views), with a NUL
 * after the last byte (not counted in *size) so that text files are C strings. On failure
 * returns NULL with errno saying why (strerror(errno) for the message; EIO when the system
 * gave no reason, e.g. the file shrank while it was read). */
void *wlm_cli_read_file(const char *path, size_t *size) {
    errno = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    void *buf = NULL;
    int err = 0;
    long n = -1;
    /* one byte first: a directory opens, then fails here with EISDIR (not a huge size) */
    if (fgetc(f) == EOF && ferror(f)) n = -2;
    else if (fseek(f, 0, SEEK_END) == 0) n = ftell(f);
    if (n < 0 || fseek(f, 0, SEEK_SET) != 0) {
        err = errno;
    } else if (!(buf = malloc((size_t)n + 1))) {
        err = ENOMEM;
    } else if (fread(buf, 1, (size_t)n, f) != (size_t)n || ferror(f)) {
        err = errno;
        free(buf);
        buf = NULL;
    } else {
        ((char *)buf)[n] = '\0';
        *size = (size_t)n;
    }
    fclose(f);
    errno = buf ? 0 : (err ? err : EIO);
    return buf;
}

/* Reads all of standard input into a malloc'd buffer; NULL on error. */
static char *read_stdin(size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, stdin);
        if (n < cap) break;
        char *bigger = cap <= ((size_t)-1) / 2 ? realloc(buf, cap * 2) : NULL;
        if (!bigger) free(buf);
        buf = bigger;
        cap *= 2;
    }
    if (!buf || ferror(stdin)) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

/* wasmlm tokenize MODEL [--bos] */
static int cmd_tokenize(int argc, char **argv) {
    const char *path = NULL;
    int bos = 0, rc = 1;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--bos") == 0) bos = 1;
        else if (!path && argv[i][0] != '-') path = argv[i];
        else path = NULL, argc = -1;
    }
    if (!path) {
        fprintf(stderr, "Usage: wasmlm tokenize <model.gguf | tokenizer.bin> [--bos] < text\n");
        return 1;
    }
    size_t size = 0, len = 0;
    char *text = NULL, err[256] = "";
    int32_t *ids = NULL;
    wlm_model *model = NULL;
    wlm_tokenizer tok;
    memset(&tok, 0, sizeof tok);
    void *bytes = wlm_cli_read_file(path, &size);
    if (!bytes) {
        fprintf(stderr, "wasmlm: cannot read %s: %s\n", path, strerror(errno));
        return 1;
    }
    if (size >= 4 && memcmp(bytes, "GGUF", 4) == 0) {
        /* the model owns (and frees) the buffer, on failure too */
        int s = wlm_model_load(bytes, size, WLM_LOAD_OWN_BUFFER | WLM_LOAD_VOCAB_ONLY, &model);
        bytes = NULL;
        if (s != WLM_OK) {
            fprintf(stderr, "wasmlm: %s: %s\n", path, wlm_model_errmsg(model));
            goto out;
        }
    } else {
        /* tokenizer.bin does not say how many entries it holds: all of them, to the end */
        int32_t n = wlm_tokenizer_count_llama2c(bytes, size, err, sizeof err);
        int s = n < 0 ? n : wlm_tokenizer_load_llama2c(&tok, bytes, size, n, err, sizeof err);
        if (s != WLM_OK) {
            fprintf(stderr, "wasmlm: %s: %s\n", path, err);
            goto out;
        }
    }
    text = read_stdin(&len);
    if (!text) {
        fprintf(stderr, "wasmlm: cannot read standard input: %s\n", strerror(errno ? errno : EIO));
        goto out;
    }
    int32_t n = model ? wlm_tokenize(model, text, len, bos, NULL, 0)
                      : wlm_tokenizer_encode(&tok, text, len, bos, NULL, 0);
    ids = n >= 0 ? malloc(sizeof(int32_t) * (size_t)(n ? n : 1)) : NULL;
    if (!ids) {
        fprintf(stderr, "wasmlm: cannot tokenize the input: %s\n", wlm_status_name(n));
        goto out;
    }
    if (model) wlm_tokenize(model, text, len, bos, ids, n);
    else wlm_tokenizer_encode(&tok, text, len, bos, ids, n);
    for (int32_t i = 0; i < n; i++) printf(i ? " %d" : "%d", (int)ids[i]);
    printf("\n");
    rc = fflush(stdout) == 0 ? 0 : 1;
out:
    free(ids);
    free(text);
    free(bytes);
    wlm_tokenizer_free(&tok);
    wlm_model_free(model);
    return rc;
}

/* wasmlm info MODEL: "key: value" lines; the architecture is general.architecture (llama2.c
 * checkpoints: llama). */
static int cmd_info(int argc, char **argv) {
    if (argc != 1) {
        fprintf(stderr, "Usage: wasmlm info <model.gguf | model.bin>\n");
        return 1;
    }
    size_t size = 0;
    void *bytes = wlm_cli_read_file(argv[0], &size);
    if (!bytes) {
        fprintf(stderr, "wasmlm: cannot read %s: %s\n", argv[0], strerror(errno));
        return 1;
    }
    wlm_model *m = NULL;
    wlm_model_info info;
    if (wlm_model_load(bytes, size, WLM_LOAD_OWN_BUFFER, &m) != WLM_OK ||
        wlm_model_get_info(m, &info) != WLM_OK) {
        fprintf(stderr, "wasmlm: %s: %s\n", argv[0], wlm_model_errmsg(m));
        wlm_model_free(m);
        return 1;
    }
    const char *arch = wlm_model_meta_string(m, "general.architecture", NULL);
    const char *name = wlm_model_meta_string(m, "general.name", NULL);
    printf("architecture: %s\n", arch ? arch : "llama (llama2.c checkpoint)");
    if (name) printf("name: %s\n", name);
    printf("embedding_length: %d\nfeed_forward_length: %d\nblock_count: %d\n"
           "head_count: %d\nhead_count_kv: %d\nvocab_size: %d\ncontext_length: %d\n"
           "shared_classifier: %d\ntokenizer: %d\nchat_template: %d\nweight_bytes: %zu\n",
           (int)info.dim, (int)info.hidden_dim, (int)info.n_layers, (int)info.n_heads,
           (int)info.n_kv_heads, (int)info.vocab_size, (int)info.seq_len,
           (int)info.shared_classifier, (int)info.has_tokenizer, (int)info.has_chat_template,
           info.weight_bytes);
    wlm_model_free(m);
    return fflush(stdout) == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        wlm_cli_usage(stderr);
        return 1;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        wlm_cli_usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "tokenize") == 0) return cmd_tokenize(argc - 2, argv + 2);
    if (strcmp(argv[1], "quantize") == 0) return wlm_cli_quantize(argc - 2, argv + 2);
    if (strcmp(argv[1], "info") == 0) return cmd_info(argc - 2, argv + 2);
    if (strcmp(argv[1], "embed") == 0) return wlm_cli_embed(argc - 2, argv + 2);
    return wlm_cli_generate(argc - 1, argv + 1);
}
