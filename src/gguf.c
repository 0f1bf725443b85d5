/* gguf.c — GGUF v2/v3 reader (in progress). */
#include "model.h"
