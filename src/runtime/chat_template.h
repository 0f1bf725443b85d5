/*
 * chat_template.h — chat prompts for the CLI's --chat without a Jinja engine: the template
 * family is recognised from the GGUF's tokenizer.chat_template by the markers it writes (the
 * approach of llama.cpp's llm_chat_detect_template; the rules here are this project's own),
 * and each family's formatter writes what the family's reference Jinja template renders for a
 * conversation of system / user / assistant messages. The JS API renders the real template
 * with @huggingface/jinja instead (js/chat/chat.js); tests check both agree. Internal.
 */
#ifndef WASMLM_CHAT_TEMPLATE_H
#define WASMLM_CHAT_TEMPLATE_H

#include <stddef.h>
#include <stdint.h>

typedef enum wlm_chat_family {
    WLM_CHAT_UNKNOWN = 0,
    WLM_CHAT_CHATML, /* <|im_start|>role\n...<|im_end|>\n: Qwen 2/2.5/3, SmolLM2 */
    WLM_CHAT_LLAMA3, /* <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|>: Llama 3.x */
    WLM_CHAT_GEMMA,  /* <start_of_turn>user|model\n...<end_of_turn>\n: Gemma 1-3 */
    WLM_CHAT_PHI3,   /* <|role|>\n...<|end|>\n: Phi-3 */
    WLM_CHAT_ZEPHYR, /* <|role|>\n...EOS\n: Zephyr, TinyLlama-Chat */
    WLM_CHAT_LLAMA2, /* <s>[INST] <<SYS>>...<</SYS>> ... [/INST] ... </s>: Llama 2-chat */
    WLM_CHAT_GEMMA4, /* <|turn>role\n...<turn|>\n: Gemma 4 */
} wlm_chat_family;

typedef struct wlm_chat_message {
    const char *role;    /* "system", "user" or "assistant" */
    const char *content; /* UTF-8, NUL-terminated */
} wlm_chat_message;

/* The family a --chat-template NAME names ("chatml", "llama3", "gemma", "phi3", "zephyr",
 * "llama2", "gemma4"), or WLM_CHAT_UNKNOWN. */
wlm_chat_family wlm_chat_family_from_name(const char *name);

/* The family's name (as above), "unknown" for WLM_CHAT_UNKNOWN. */
const char *wlm_chat_family_name(wlm_chat_family family);

/* The names, comma-separated, for messages ("chatml, llama3, gemma, phi3, zephyr, llama2, gemma4"). */
const char *wlm_chat_family_names(void);

/*
 * The family of a Jinja chat template (tokenizer.chat_template), recognised by the special
 * tokens it writes: <|turn> with <turn|> → gemma4; <|im_start|> → chatml; <|start_header_id|>
 * with <|end_header_id|> → llama3; <start_of_turn> → gemma; <|assistant|> with <|end|> → phi3; <|user|> with <|assistant|> →
 * zephyr; [INST] → llama2. A template that is itself a family name is that family.
 * WLM_CHAT_UNKNOWN for NULL or anything else.
 */
wlm_chat_family wlm_chat_detect(const char *tmpl);

/*
 * Writes the prompt for `n` messages in `family`'s format, then, when add_generation_prompt,
 * the opening of the assistant's turn. `bos` and `eos` are the texts of the model's BOS and
 * EOS tokens (wlm_token_text), written where the family's template writes bos_token /
 * eos_token (llama3, gemma and llama2 begin with BOS; zephyr and llama2 close turns with EOS;
 * NULL = ""). What each writes, as its reference template renders it:
 *  chatml: "<|im_start|>ROLE\nCONTENT<|im_end|>\n" per message; an assistant message before the
 *          last user message that holds "</think>" keeps only what follows it, leading newlines
 *          dropped (Qwen3's rule); prompt "<|im_start|>assistant\n".
 *  llama3: BOS, then "<|start_header_id|>ROLE<|end_header_id|>\n\n" + trim(CONTENT) +
 *          "<|eot_id|>"; prompt "<|start_header_id|>assistant<|end_header_id|>\n\n".
 *  gemma:  BOS; a first system message is prefixed, with "\n\n", to the first turn after it;
 *          then "<start_of_turn>ROLE\n" + trim(CONTENT) + "<end_of_turn>\n" with assistant
 *          written "model"; the turns must alternate user / assistant starting with user
 *          (else WLM_ERR_INVALID_ARG, as the template raises); prompt "<start_of_turn>model\n".
 *  phi3:   "<|ROLE|>\nCONTENT<|end|>\n"; prompt "<|assistant|>\n".
 *  zephyr: "<|ROLE|>\nCONTENT" + EOS + "\n"; prompt "<|assistant|>\n".
 *  gemma4: BOS, then "<|turn>ROLE\n" + trim(CONTENT) + "<turn|>\n" per message (a system message
 *          a turn of its own, assistant written "model", an assistant's earlier reasoning
 *          <|channel>…<channel|> cut before the trim); prompt "<|turn>model\n" and an empty
 *          thought channel "<|channel>thought\n<channel|>" (its template with thinking off, the
 *          default; read from llama.cpp's models/templates/gemma4.jinja).
 *  llama2: per user turn BOS + "[INST] " + strip(CONTENT) + " [/INST]", the first one's content
 *          prefixed by "<<SYS>>\nSYSTEM\n<</SYS>>\n\n" when a system message comes first; per
 *          assistant turn " " + strip(CONTENT) + " " + EOS; alternation as gemma; no prompt
 *          text (the user turn ends with [/INST]).
 * trim / strip remove ASCII white space at both ends, as Jinja's trim and Python's strip() do
 * for it. Roles other than system / user / assistant are WLM_ERR_INVALID_ARG.
 * On success stores a malloc'd NUL-terminated string in *out (the caller frees it) and returns
 * WLM_OK; else a negative status (WLM_ERR_INVALID_ARG with a reason in err, WLM_ERR_NOMEM) and
 * *out = NULL.
 */
int wlm_chat_format(wlm_chat_family family, const wlm_chat_message *msgs, int32_t n,
                    int add_generation_prompt, const char *bos, const char *eos, char **out,
                    char *err, size_t errlen);

#endif
