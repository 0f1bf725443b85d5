/* cli_chat.h — `wasmlm MODEL --chat` (cli_chat.c), called by cli_gen.c. */
#ifndef WASMLM_CLI_CHAT_H
#define WASMLM_CLI_CHAT_H

#include <signal.h>
#include <stdint.h>

#include "wasmlm.h"

typedef struct wlm_cli_chat_opts {
    const char *template_name; /* --chat-template NAME, or NULL: from the model's template */
    const char *system;        /* --system-prompt TEXT, or NULL */
    int verbose_prompt;        /* --verbose-prompt: per turn, prompt / reply / counts on stderr */
    int32_t max_tokens;        /* per reply; 0 = until the end of the turn or of the context */
} wlm_cli_chat_opts;

/* Runs the conversation on standard input / output with `ctx` (a fresh context of `m`) and the
 * sampler `gp`; Ctrl-C (*interrupted) ends the reply and the conversation. Returns the exit
 * code: 0 at the end of input, 1 after printing an error (no or unknown template, a full
 * context, out of memory). */
int wlm_cli_chat(const wlm_model *m, wlm_context *ctx, const wlm_gen_params *gp,
                 const wlm_cli_chat_opts *o, volatile sig_atomic_t *interrupted);

#endif
