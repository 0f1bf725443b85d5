/*
 * test_warmup.c — the start-up warm-up (src/runtime/warmup.h): its built-in model and tokenizer
 * load, every requested token is generated (BOS and EOS are banned, so none ends it early), bad
 * counts are refused, and nothing leaks (the sanitizer build checks that).
 */
#include "runtime/warmup.h"
#include "test_util.h"
#include "wasmlm.h"

int main(void) {
    for (int32_t n = 1; n <= 8; n++) CHECK_EQ_INT(wlm_warmup_run(n), n);
    CHECK_STATUS(wlm_warmup_run(0), WLM_ERR_INVALID_ARG);
    CHECK_STATUS(wlm_warmup_run(9), WLM_ERR_INVALID_ARG);
    CHECK_STATUS(wlm_warmup_run(-1), WLM_ERR_INVALID_ARG);
    return TEST_FINISH();
}
