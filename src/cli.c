/*
 * cli.c — the native command-line tool, compatible with llama2.c's run.c:
 *     wasmlm model.bin -z tokenizer.bin [-i PROMPT] [-t TEMP] [-p TOPP] [-s SEED] [-n STEPS]
 * prints what run.c prints for the same arguments, byte for byte: the prompt's pieces, then the
 * generated ones (single non-printable bytes dropped as run.c's safe_printf does), a newline,
 * and "achieved tok/s" on standard error. -n counts positions, prompt included (0 = seq_len).
 *     wasmlm quantize IN OUT TYPE [-z tokenizer.bin]   (cli_quantize.c)
 *     wasmlm tokenize MODEL [--bos]
 * tokenizes standard input (all of it, bytes as they are) with the vocabulary of MODEL — a GGUF
 * file (vocabulary only is enough) or a llama2.c tokenizer.bin — and prints the ids separated by
 * spaces, then a newline. No BOS unless --bos (for GGUF: the vocabulary's add_bos_token /
 * add_eos_token decide, as llama.cpp's add_special). Special tokens are not parsed.
 * Used for debugging and golden files; the library itself prints nothing.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tokenizer.h" /* internal: a tokenizer.bin without a model */
#include "wasmlm.h"

static void usage(void) {
    fprintf(stderr,
            "Usage:   wasmlm <checkpoint> [options]\n"
            "Example: wasmlm stories260K.bin -z tok512.bin -n 256 -i \"Once upon a time\"\n"
            "Options (as llama2.c's run.c):\n"
            "  -t <float>  temperature in [0,inf), default 1.0 (0 = greedy)\n"
            "  -p <float>  p value in top-p (nucleus) sampling in [0,1], default 0.9\n"
            "  -s <int>    random seed, default time(NULL)\n"
            "  -n <int>    number of steps to run for, default 256. 0 = max_seq_len\n"
            "  -i <string> input prompt\n"
            "  -z <string> path to the tokenizer, default tokenizer.bin (not needed for GGUF)\n"
            "  -m <string> mode: generate (chat is not supported)\n"
            "Tokenizer:  wasmlm tokenize <model.gguf | tokenizer.bin> [--bos] < text\n"
            "            prints the token ids of standard input, separated by spaces\n"
            "Quantize:   wasmlm quantize IN OUT TYPE [-z tokenizer.bin] [--name NAME]\n"
            "            llama2.c checkpoint or GGUF in, GGUF out; TYPE: F32 F16 Q8_0 Q4_0 Q4_K Q6_K\n");
}

/* Reads a whole file into a malloc'd buffer (malloc alignment suits float views). */
static void *read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    void *buf = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long n = ftell(f);
        if (n >= 0 && fseek(f, 0, SEEK_SET) == 0) {
            buf = malloc(n ? (size_t)n : 1);
            if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
                free(buf);
                buf = NULL;
            }
            *size = (size_t)n;
        }
    }
    fclose(f);
    return buf;
}

/* run.c's safe_printf: skip empty pieces and single bytes that are neither printable nor
 * whitespace; print up to the first NUL. */
static void safe_print(const char *piece, size_t len) {
    if (!piece || len == 0 || piece[0] == '\0') return;
    if (len == 1 && !(isprint((unsigned char)piece[0]) || isspace((unsigned char)piece[0]))) return;
    fputs(piece, stdout);
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
int wlm_cli_quantize(int argc, char **argv); /* cli_quantize.c */

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
    void *bytes = read_file(path, &size);
    if (!bytes) {
        fprintf(stderr, "wasmlm: cannot read %s\n", path);
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
        fprintf(stderr, "wasmlm: cannot read standard input\n");
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

static long time_in_ms(void) {
    struct timespec t;
    timespec_get(&t, TIME_UTC);
    return t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

int main(int argc, char **argv) {
    const char *checkpoint = NULL, *tokenizer_path = "tokenizer.bin", *prompt = NULL;
    int tokenizer_given = 0;
    const char *mode = "generate";
    float temperature = 1.0f, topp = 0.9f;
    int steps = 256;
    unsigned long long seed = 0;
    if (argc < 2) {
        usage();
        return 1;
    }
    if (strcmp(argv[1], "tokenize") == 0) return cmd_tokenize(argc - 2, argv + 2);
    if (strcmp(argv[1], "quantize") == 0) return wlm_cli_quantize(argc - 2, argv + 2);
    checkpoint = argv[1];
    for (int i = 2; i < argc; i += 2) {
        if (i + 1 >= argc || argv[i][0] != '-' || strlen(argv[i]) != 2) {
            usage();
            return 1;
        }
        const char *v = argv[i + 1];
        switch (argv[i][1]) {
        case 't': temperature = (float)atof(v); break;
        case 'p': topp = (float)atof(v); break;
        case 's': seed = (unsigned long long)atoi(v); break;
        case 'n': steps = atoi(v); break;
        case 'i': prompt = v; break;
        case 'z': tokenizer_path = v, tokenizer_given = 1; break;
        case 'm': mode = v; break;
        default: usage(); return 1;
        }
    }
    if (strcmp(mode, "generate") != 0) {
        fprintf(stderr, "wasmlm: mode '%s' is not supported (only generate)\n", mode);
        return 1;
    }
    /* run.c's parameter clamping */
    if (seed == 0) seed = (unsigned int)time(NULL);
    if (temperature < 0.0f) temperature = 0.0f;
    if (topp < 0.0f || 1.0f < topp) topp = 0.9f;
    if (steps < 0) steps = 0;

    int rc = 1;
    size_t msize = 0, tsize = 0;
    void *tbytes = NULL;
    wlm_model *model = NULL;
    wlm_context *ctx = NULL;
    int32_t *tokens = NULL;
    void *mbytes = read_file(checkpoint, &msize);
    if (!mbytes) {
        fprintf(stderr, "wasmlm: cannot read %s\n", checkpoint);
        goto out;
    }
    if (wlm_model_load(mbytes, msize, WLM_LOAD_OWN_BUFFER, &model) != WLM_OK) {
        fprintf(stderr, "wasmlm: %s: %s\n", checkpoint, wlm_model_errmsg(model));
        goto out;
    }
    wlm_model_info info;
    wlm_model_get_info(model, &info);
    /* GGUF files carry their vocabulary; a llama2.c checkpoint needs tokenizer.bin (-z). */
    if (!info.has_tokenizer || tokenizer_given) {
        tbytes = read_file(tokenizer_path, &tsize);
        if (!tbytes) {
            fprintf(stderr, "wasmlm: cannot read %s\n", tokenizer_path);
            goto out;
        }
        if (wlm_model_load_tokenizer(model, tbytes, tsize) != WLM_OK) {
            fprintf(stderr, "wasmlm: %s: %s\n", tokenizer_path, wlm_model_errmsg(model));
            goto out;
        }
    }
    wlm_model_get_info(model, &info);
    if (steps == 0 || steps > info.seq_len) steps = info.seq_len;

    if (wlm_context_new(model, NULL, &ctx) != WLM_OK) {
        fprintf(stderr, "wasmlm: %s\n", wlm_context_errmsg(ctx));
        goto out;
    }
    if (!prompt) prompt = "";
    int32_t n = wlm_tokenize(model, prompt, strlen(prompt), 1, NULL, 0);
    tokens = malloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1));
    if (n < 1 || !tokens) {
        fprintf(stderr, "wasmlm: cannot tokenize the prompt\n");
        goto out;
    }
    wlm_tokenize(model, prompt, strlen(prompt), 1, tokens, n);

    /* The prompt's pieces, as run.c prints them while it forces the prompt tokens. */
    for (int32_t i = 1; i < n && i <= steps; i++) {
        size_t len;
        const char *piece = wlm_token_piece(model, tokens[i - 1], tokens[i], &len);
        safe_print(piece, len);
    }
    fflush(stdout);
    int positions = n - 1 < steps ? n - 1 : steps; /* forward passes run.c makes so far */
    long start = 0;
    if (steps >= n) {
        wlm_gen_params gp;
        wlm_gen_params_default(&gp);
        gp.temperature = temperature;
        gp.top_p = (topp <= 0.0f || topp >= 1.0f) ? 1.0f : topp;
        gp.seed = seed;
        gp.max_tokens = steps - n + 1;
        if (wlm_generate_begin(ctx, tokens, n, &gp) != WLM_OK) {
            fprintf(stderr, "wasmlm: %s\n", wlm_context_errmsg(ctx));
            goto out;
        }
        start = time_in_ms();
        wlm_token tok;
        int s;
        while ((s = wlm_generate_next(ctx, &tok)) == WLM_OK) {
            safe_print(tok.piece, tok.piece_len);
            fflush(stdout);
            positions++;
        }
        if (s < 0) {
            fprintf(stderr, "wasmlm: %s\n", wlm_context_errmsg(ctx));
            goto out;
        }
        if (tok.stop_reason == WLM_STOP_EOS) positions++; /* run.c counts the BOS step too */
    }
    printf("\n");
    if (positions > 1 && start) {
        long end = time_in_ms();
        double secs = (double)(end - start) / 1000.0;
        fprintf(stderr, "achieved tok/s: %f\n", secs > 0 ? (positions - 1) / secs : 0.0);
    }
    rc = 0;
out:
    free(tokens);
    free(tbytes);
    wlm_context_free(ctx);
    wlm_model_free(model);
    return rc;
}
