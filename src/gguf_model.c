/* gguf_model.c — GGUF "llama" models (in progress). */
#include "model.h"

int wlm_gguf_load_model(wlm_model *m, const unsigned char *data, size_t size, int vocab_only) {
    (void)data, (void)size, (void)vocab_only;
    return wlm_set_error(m->errmsg, WLM_ERR_UNSUPPORTED, "GGUF files are not supported yet");
}
