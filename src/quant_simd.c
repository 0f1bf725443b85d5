/* quant_simd.c — SIMD128 kernels for quantized types (in progress). */
#include "quant.h"
