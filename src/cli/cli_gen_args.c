/*
 * cli_gen_args.c — the options of `wasmlm MODEL [options]` (cli_gen.h, run by cli_gen.c):
 * run.c's short flags and llama.cpp's long ones into a cli_opts. Numbers must be whole (no
 * trailing characters) and in range, run.c's flags included (run.c itself clamps them
 * silently); the sampler's ranges are checked with the library's own wlm_sampler_check (its
 * messages name the field); the grammar flags are compiled here, before the model is read.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_gen.h"
#include "sampling/grammar.h" /* internal: wlm_gram_parse, to report a grammar early */
#include "sampling/sampler.h" /* internal: wlm_sampler_check, to validate before printing */

int wlm_cli_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("wasmlm: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}


/* Structured output (llama.cpp's flags), numbered apart from the others. */
enum { O_GRAMMAR = 1000, O_GRAMMAR_FILE, O_SCHEMA, O_SCHEMA_FILE };

enum {
    O_T, O_P, O_S, O_N, O_I, O_Z, O_M, O_CTX, O_PROMPT, O_N_PREDICT, O_TEMP, O_TOP_K, O_TOP_P,
    O_MIN_P, O_TYPICAL, O_REPEAT_PENALTY, O_REPEAT_LAST_N, O_PRESENCE, O_FREQUENCY, O_LOGIT_BIAS,
    O_ORDER, O_SEED, O_STOP, O_KEEP, O_N_PROBS, O_BEAM, O_LENGTH_PENALTY, O_N_SAMPLES, O_PROMPTS,
    O_THREADS, O_CACHE_K, O_CACHE_V, O_CHAT_TEMPLATE, O_SYSTEM, O_MODEL_DRAFT, O_DRAFT_MAX,
    O_DRAFT_P_MIN, O_LOOKUP_NGRAM, O_MMPROJ, O_IMAGE
};

/* Options that take a value. */
static const struct {
    const char *name;
    int id;
} value_opts[] = {
    {"--grammar", O_GRAMMAR}, {"--grammar-file", O_GRAMMAR_FILE}, {"-j", O_SCHEMA},
    {"--json-schema", O_SCHEMA}, {"-jf", O_SCHEMA_FILE}, {"--json-schema-file", O_SCHEMA_FILE},
    {"-t", O_T}, {"-p", O_P}, {"-s", O_S}, {"-n", O_N}, {"-i", O_I}, {"-z", O_Z}, {"-m", O_M},
    {"-c", O_CTX}, {"--ctx-size", O_CTX}, {"--prompt", O_PROMPT}, {"--n-predict", O_N_PREDICT},
    {"--temp", O_TEMP}, {"--top-k", O_TOP_K}, {"--top-p", O_TOP_P}, {"--min-p", O_MIN_P},
    {"--typical", O_TYPICAL}, {"--repeat-penalty", O_REPEAT_PENALTY},
    {"--repeat-last-n", O_REPEAT_LAST_N}, {"--presence-penalty", O_PRESENCE},
    {"--frequency-penalty", O_FREQUENCY}, {"--logit-bias", O_LOGIT_BIAS},
    {"--sampler-order", O_ORDER}, {"--seed", O_SEED}, {"--stop", O_STOP}, {"--keep", O_KEEP},
    {"--n-probs", O_N_PROBS}, {"--beam", O_BEAM}, {"--length-penalty", O_LENGTH_PENALTY},
    {"--n-samples", O_N_SAMPLES}, {"--prompts", O_PROMPTS}, {"--threads", O_THREADS},
    {"-ctk", O_CACHE_K}, {"--cache-type-k", O_CACHE_K}, {"-ctv", O_CACHE_V},
    {"--cache-type-v", O_CACHE_V}, {"--chat-template", O_CHAT_TEMPLATE},
    {"-sys", O_SYSTEM}, {"--system-prompt", O_SYSTEM},
    {"-md", O_MODEL_DRAFT}, {"--model-draft", O_MODEL_DRAFT}, {"--draft-max", O_DRAFT_MAX},
    {"--draft", O_DRAFT_MAX}, {"--draft-p-min", O_DRAFT_P_MIN}, {"--lookup-ngram", O_LOOKUP_NGRAM},
    {"--mmproj", O_MMPROJ}, {"--image", O_IMAGE},
};

/* Parses a whole decimal integer; on error prints a message naming the flag and returns 1. */
static int get_int(const char *flag, const char *v, int *out) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end != '\0' || isspace((unsigned char)v[0]) || errno != 0 || x < INT_MIN ||
        x > INT_MAX)
        return wlm_cli_fail("%s: '%s' is not an integer", flag, v);
    *out = (int)x;
    return 0;
}

/* get_int for a count that must lie in 1..max. */
static int get_count(const char *flag, const char *v, int max, int *out) {
    int x = 0;
    if (get_int(flag, v, &x)) return 1;
    if (x < 1 || x > max) return wlm_cli_fail("%s must be in 1..%d (got %d)", flag, max, x);
    *out = x;
    return 0;
}

/* Parses a whole number (inf and nan pass through: the library rejects them by field name);
 * a finite value beyond float's range is an error. */
static int get_float(const char *flag, const char *v, float *out) {
    char *end;
    errno = 0;
    float x = strtof(v, &end);
    if (end == v || *end != '\0' || isspace((unsigned char)v[0]))
        return wlm_cli_fail("%s: '%s' is not a number", flag, v);
    if (errno == ERANGE && isinf(x)) return wlm_cli_fail("%s: '%s' is out of range", flag, v);
    *out = x;
    return 0;
}

/* Parses a whole non-negative integer (a seed); on error prints why and returns 1. */
static int get_seed(const char *flag, const char *v, int allow_minus_one, long long *out) {
    char *end;
    errno = 0;
    long long s = strtoll(v, &end, 10);
    if (end == v || *end != '\0' || isspace((unsigned char)v[0]) || errno != 0 ||
        s < (allow_minus_one ? -1 : 0))
        return wlm_cli_fail(allow_minus_one
                        ? "%s: expected an integer >= 0, or -1 for a random seed, got '%s'"
                        : "%s: expected an integer >= 0 (0 = a seed from the clock), got '%s'",
                    flag, v);
    *out = s;
    return 0;
}

/* llama.cpp's --logit-bias syntax: TOKEN+BIAS or TOKEN-BIAS, BIAS a number or inf
 * ("15043-inf" bans the token). Returns 0 on success. */
static int parse_logit_bias(const char *v, wlm_logit_bias *out) {
    char *end;
    errno = 0;
    long id = strtol(v, &end, 10);
    if (end == v || errno != 0 || id < INT32_MIN || id > INT32_MAX || (*end != '+' && *end != '-'))
        return 1;
    const char sign = *end++;
    if (*end == '\0' || *end == '+' || *end == '-' || isspace((unsigned char)*end)) return 1;
    char *e2;
    float x = strtof(end, &e2);
    if (e2 == end || *e2 != '\0' || isnan(x)) return 1;
    out->token = (int32_t)id;
    out->bias = sign == '-' ? -x : x;
    return 0;
}

/* Checks the sampling parameters with the library's own check; 1 after printing why not. */
int wlm_cli_gen_check_sampler(const cli_opts *o, int32_t vocab_size) {
    char msg[256];
    if (wlm_sampler_check(&o->gp, vocab_size, msg, sizeof msg) != WLM_OK) return wlm_cli_fail("%s", msg);
    return 0;
}

int wlm_cli_gen_parse(int argc, char **argv, cli_opts *o) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            wlm_cli_usage(stdout);
            return 2;
        }
        if (strcmp(a, "--json") == 0) {
            o->json = 1;
            continue;
        }
        if (strcmp(a, "--context-shift") == 0) {
            o->gp.context_shift = 1;
            continue;
        }
        if (strcmp(a, "--chat") == 0 || strcmp(a, "-cnv") == 0 || strcmp(a, "--conversation") == 0) {
            o->chat = 1;
            continue;
        }
        if (strcmp(a, "--verbose-prompt") == 0) {
            o->chat_opts.verbose_prompt = 1;
            continue;
        }
        int id = -1;
        for (size_t k = 0; k < sizeof value_opts / sizeof value_opts[0]; k++)
            if (strcmp(a, value_opts[k].name) == 0) id = value_opts[k].id;
        if (id < 0) return wlm_cli_fail("unknown option '%s' (wasmlm --help lists the options)", a);
        if (i + 1 >= argc) return wlm_cli_fail("%s needs a value", a);
        const char *v = argv[++i];
        wlm_gen_params *gp = &o->gp;
        int x = 0;
        float f = 0.0f;
        long long ll = 0;
        switch (id) {
        case O_GRAMMAR: case O_GRAMMAR_FILE: case O_SCHEMA: case O_SCHEMA_FILE:
            if (o->grammar_flag)
                return wlm_cli_fail("%s: give one of --grammar, --grammar-file, -j, -jf (%s was given)",
                            a, o->grammar_flag);
            o->grammar_flag = a, o->grammar_arg = v;
            break;
        /* run.c's flags, with run.c's meanings; values run.c would clamp are errors here */
        case O_T:
            if (get_float(a, v, &f)) return 1;
            if (!(f >= 0.0f) || isinf(f))
                return wlm_cli_fail("%s: the temperature must be a finite number >= 0, 0 = greedy "
                            "(got %s)", a, v);
            gp->temperature = f;
            break;
        case O_P: /* run.c: top-p applies only strictly inside (0, 1); 0 and 1 turn it off */
            if (get_float(a, v, &f)) return 1;
            if (!(f >= 0.0f && f <= 1.0f))
                return wlm_cli_fail("%s: top-p must be in [0, 1], 0 or 1 = off (got %s)", a, v);
            gp->top_p = (f <= 0.0f || f >= 1.0f) ? 1.0f : f;
            break;
        case O_S: /* run.c: 0 = a seed from the clock */
            if (get_seed(a, v, 0, &ll)) return 1;
            gp->seed = (uint64_t)ll, o->seed_random = ll == 0;
            break;
        case O_N:
            if (get_int(a, v, &x)) return 1;
            if (x < 0) return wlm_cli_fail("%s must be >= 0, 0 = the context length (got %d)", a, x);
            o->steps = x;
            break;
        case O_I: case O_PROMPT: o->prompt = v; break;
        case O_Z: o->tokenizer_path = v, o->tokenizer_given = 1; break;
        case O_M: o->mode = v; break;
        /* llama.cpp's flags */
        case O_CTX:
            if (get_int(a, v, &o->n_ctx)) return 1;
            if (o->n_ctx < 0) return wlm_cli_fail("%s must be >= 0, 0 = the model's (got %d)", a, o->n_ctx);
            break;
        case O_CACHE_K: case O_CACHE_V: {
            int32_t t = strcmp(v, "f16") == 0 ? WLM_KV_F16 : strcmp(v, "f32") == 0 ? WLM_KV_F32 : -1;
            if (t < 0) return wlm_cli_fail("%s: '%s' is not a supported KV cache type (f16, f32)", a, v);
            o->cache_type[id == O_CACHE_V] = t;
            break;
        }
        case O_THREADS:
            if (get_count(a, v, WLM_MAX_THREADS, &o->threads)) return 1;
            break;
        case O_N_PREDICT:
            if (get_int(a, v, &o->n_predict)) return 1;
            if (o->n_predict == 0 || o->n_predict < -1)
                return wlm_cli_fail("%s must be >= 1, or -1 for no limit (got %s)", a, v);
            o->n_predict_given = 1;
            break;
        case O_TEMP: if (get_float(a, v, &gp->temperature)) return 1; o->llama_sampling = 1; break;
        case O_TOP_K: if (get_int(a, v, &x)) return 1; gp->top_k = x, o->llama_sampling = 1; break;
        case O_TOP_P: if (get_float(a, v, &gp->top_p)) return 1; o->llama_sampling = 1; break;
        case O_MIN_P: if (get_float(a, v, &gp->min_p)) return 1; o->llama_sampling = 1; break;
        case O_TYPICAL: if (get_float(a, v, &gp->typical_p)) return 1; o->llama_sampling = 1; break;
        case O_REPEAT_PENALTY:
            if (get_float(a, v, &gp->repeat_penalty)) return 1;
            o->llama_sampling = 1;
            break;
        case O_REPEAT_LAST_N:
            if (get_int(a, v, &x)) return 1;
            o->repeat_last_n_ctx = x == -1;
            gp->repeat_last_n = x == -1 ? 0 : x;
            o->llama_sampling = 1;
            break;
        case O_PRESENCE:
            if (get_float(a, v, &gp->presence_penalty)) return 1;
            o->llama_sampling = 1;
            break;
        case O_FREQUENCY:
            if (get_float(a, v, &gp->frequency_penalty)) return 1;
            o->llama_sampling = 1;
            break;
        case O_LOGIT_BIAS:
            if (gp->n_logit_bias >= WLM_MAX_LOGIT_BIAS)
                return wlm_cli_fail("%s: at most %d entries", a, WLM_MAX_LOGIT_BIAS);
            if (parse_logit_bias(v, &o->bias[gp->n_logit_bias]))
                return wlm_cli_fail("%s: expected TOKEN+BIAS or TOKEN-BIAS (e.g. 15043+1, 15043-inf), "
                            "got '%s'", a, v);
            gp->n_logit_bias++;
            o->llama_sampling = 1;
            break;
        case O_ORDER:
            if (strcmp(v, "runc") == 0) o->order = WLM_ORDER_RUNC;
            else if (strcmp(v, "llamacpp") == 0) o->order = WLM_ORDER_LLAMACPP;
            else return wlm_cli_fail("%s: expected runc or llamacpp, got '%s'", a, v);
            break;
        case O_SEED:
            if (get_seed(a, v, 1, &ll)) return 1;
            o->seed_random = ll == -1;
            gp->seed = ll == -1 ? 0 : (uint64_t)ll;
            break;
        case O_STOP:
            if (gp->n_stop >= WLM_MAX_STOP_STRINGS)
                return wlm_cli_fail("%s: at most %d stop strings", a, WLM_MAX_STOP_STRINGS);
            if (v[0] == '\0' || strlen(v) >= WLM_MAX_STOP_LEN)
                return wlm_cli_fail("%s: a stop string has 1 to %d bytes (got %zu)", a,
                            WLM_MAX_STOP_LEN - 1, strlen(v));
            memcpy(gp->stop[gp->n_stop++], v, strlen(v) + 1);
            break;
        case O_KEEP:
            if (get_int(a, v, &x)) return 1;
            if (x < -1) return wlm_cli_fail("%s must be >= 0, or -1 for the whole prompt (got %d)", a, x);
            o->keep_prompt = x == -1;
            gp->n_keep = x == -1 ? 0 : x;
            break;
        case O_N_PROBS: if (get_int(a, v, &x)) return 1; gp->n_probs = x; break;
        case O_BEAM: if (get_int(a, v, &o->beam_width)) return 1; o->beam_given = 1; break;
        case O_LENGTH_PENALTY: if (get_float(a, v, &o->length_penalty)) return 1; break;
        case O_N_SAMPLES:
            if (get_count(a, v, WLM_MAX_SEQ, &o->n_samples)) return 1;
            break;
        case O_PROMPTS: o->prompts_file = v; break;
        case O_CHAT_TEMPLATE: o->chat_opts.template_name = v; break;
        case O_SYSTEM: o->chat_opts.system = v; break;
        case O_MODEL_DRAFT: o->draft_path = v; break;
        case O_DRAFT_MAX:
            if (get_count(a, v, WLM_MAX_DRAFT, &o->spec.n_draft)) return 1;
            break;
        case O_DRAFT_P_MIN:
            if (get_float(a, v, &f)) return 1;
            if (!(f >= 0.0f && f <= 1.0f)) return wlm_cli_fail("%s must be in [0, 1] (got %s)", a, v);
            o->spec.p_min = f;
            break;
        case O_LOOKUP_NGRAM:
            if (get_count(a, v, WLM_MAX_NGRAM, &o->spec.ngram)) return 1;
            break;
        case O_MMPROJ: o->mmproj_path = v; break;
        case O_IMAGE:
            if (o->n_images == (int)(sizeof o->image_paths / sizeof o->image_paths[0]))
                return wlm_cli_fail("--image: at most %d images", o->n_images);
            o->image_paths[o->n_images++] = v;
            break;
        }
    }
    if (strcmp(o->mode, "generate") != 0)
        return wlm_cli_fail("mode '%s' is not supported (only generate)", o->mode);
    if (o->prompt && o->prompts_file) return wlm_cli_fail("give either a prompt (-i) or --prompts FILE");
    if (o->chat && (o->prompt || o->prompts_file || o->json || o->n_samples || o->beam_given))
        return wlm_cli_fail("--chat reads the conversation from standard input: it does not combine "
                    "with -i / --prompt, --prompts, --json, --n-samples or --beam");
    if (!o->chat && (o->chat_opts.template_name || o->chat_opts.system))
        return wlm_cli_fail("--chat-template and --system-prompt need --chat");
    if (o->draft_path && o->spec.ngram)
        return wlm_cli_fail("give either --model-draft or --lookup-ngram, not both");
    if ((o->draft_path || o->spec.ngram) &&
        (o->chat || o->json || o->n_samples || o->prompts_file || o->beam_given || o->grammar_flag))
        return wlm_cli_fail("speculative decoding (%s) decodes one plain sequence: it does not combine "
                    "with --chat, --json, --n-samples, --prompts, --beam or a grammar",
                    o->draft_path ? "--model-draft" : "--lookup-ngram");
    if (o->n_images && !o->mmproj_path)
        return wlm_cli_fail("--image needs the model's --mmproj file (its vision encoder)");
    if (o->mmproj_path && (o->chat || o->json || o->n_samples || o->prompts_file || o->beam_given ||
                           o->draft_path || o->spec.ngram))
        return wlm_cli_fail("--mmproj generates one plain sequence: it does not combine with --chat, "
                            "--json, --n-samples, --prompts, --beam or speculative decoding");
    if (o->cache_type[0] >= 0 && o->cache_type[1] >= 0 && o->cache_type[0] != o->cache_type[1])
        return wlm_cli_fail("-ctk and -ctv differ: K and V caches have one type (f16 or f32)");
    if (o->beam_given) {
        if (o->n_samples || o->prompts_file)
            return wlm_cli_fail("--beam searches one prompt: it does not combine with --n-samples or "
                        "--prompts");
        if (o->gp.n_stop || o->gp.context_shift)
            return wlm_cli_fail("--beam does not support --stop or --context-shift");
    }
    /* The sampler's ranges now, before the model is read (token ids of --logit-bias are checked
     * against the vocabulary once it is known). */
    if (o->order < 0) o->order = o->llama_sampling ? WLM_ORDER_LLAMACPP : WLM_ORDER_RUNC;
    o->gp.order = o->order;
    return wlm_cli_gen_check_sampler(o, INT32_MAX);
}

int wlm_cli_gen_load_grammar(cli_opts *o) {
    const char *flag = o->grammar_flag, *arg = o->grammar_arg;
    if (!flag) return 0;
    const int from_file = strcmp(flag, "--grammar-file") == 0 || strcmp(flag, "-jf") == 0 ||
                          strcmp(flag, "--json-schema-file") == 0;
    const int schema = strcmp(flag, "-j") == 0 || strcmp(flag, "--json-schema") == 0 ||
                       strcmp(flag, "-jf") == 0 || strcmp(flag, "--json-schema-file") == 0;
    size_t len = strlen(arg);
    char *text = NULL;
    if (from_file) {
        text = wlm_cli_read_file(arg, &len);
        if (!text) return wlm_cli_fail("%s: cannot read %s: %s", flag, arg, strerror(errno));
    }
    const char *src = text ? text : arg;
    const char *where = from_file ? arg : flag; /* messages name the file, or the flag */
    char msg[512];
    if (schema) {
        size_t glen = 0;
        int rc = wlm_json_schema_to_grammar(src, len, 0, &o->grammar, &glen, msg, sizeof msg);
        free(text);
        if (rc != WLM_OK) return wlm_cli_fail("%s: %s", where, msg);
        o->gp.grammar = o->grammar;
        o->gp.grammar_len = glen;
        return 0;
    }
    wlm_gram *g = NULL;
    int rc = wlm_gram_parse(src, len, &g, msg, sizeof msg);
    wlm_gram_free(g);
    if (rc != WLM_OK) {
        free(text);
        return wlm_cli_fail("%s: %s", where, msg);
    }
    if (!text) {
        text = malloc(len + 1);
        if (!text) return wlm_cli_fail("out of memory");
        memcpy(text, arg, len + 1);
    }
    o->grammar = text;
    o->gp.grammar = o->grammar;
    o->gp.grammar_len = len;
    return 0;
}
