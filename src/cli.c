/*
 * cli.c — the native command-line tool, compatible with llama2.c's run.c:
 *     wasmlm model.bin -z tokenizer.bin [-i PROMPT] [-t TEMP] [-p TOPP] [-s SEED] [-n STEPS]
 * prints what run.c prints for the same arguments, byte for byte: the prompt's pieces, then the
 * generated ones (single non-printable bytes dropped as run.c's safe_printf does), a newline,
 * and "achieved tok/s" on standard error. -n counts positions, prompt included (0 = seq_len).
 * Used for debugging and golden files; the library itself prints nothing.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
            "  -z <string> path to the tokenizer, default tokenizer.bin\n"
            "  -m <string> mode: generate (chat is not supported)\n");
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

static long time_in_ms(void) {
    struct timespec t;
    timespec_get(&t, TIME_UTC);
    return t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

int main(int argc, char **argv) {
    const char *checkpoint = NULL, *tokenizer_path = "tokenizer.bin", *prompt = NULL;
    const char *mode = "generate";
    float temperature = 1.0f, topp = 0.9f;
    int steps = 256;
    unsigned long long seed = 0;
    if (argc < 2) {
        usage();
        return 1;
    }
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
        case 'z': tokenizer_path = v; break;
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
    tbytes = read_file(tokenizer_path, &tsize);
    if (!tbytes) {
        fprintf(stderr, "wasmlm: cannot read %s\n", tokenizer_path);
        goto out;
    }
    if (wlm_model_load_tokenizer(model, tbytes, tsize) != WLM_OK) {
        fprintf(stderr, "wasmlm: %s: %s\n", tokenizer_path, wlm_model_errmsg(model));
        goto out;
    }
    wlm_model_info info;
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
