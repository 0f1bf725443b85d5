/*
 * test_quant.c — the element types of quant.h: binary16 conversions on all 65536 halves, the
 * ggml block layouts against hand-built bytes, the quantizers (known vectors and error bounds),
 * every matrix-vector kernel against dequantize-then-dot in double, and the SIMD128 kernels and
 * quantizers against their scalar references on odd row counts, row ranges, padded rows and rows
 * longer than the SIMD kernels' column chunk. Natively the *_simd names are the references, so
 * the SIMD comparisons that matter run in the Emscripten build (-msimd128, node).
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/quant.h"
#include "wasmlm.h"
#include "test_util.h"

#if defined(__wasm__)
#include <stdint.h>
void *sbrk(intptr_t increment); /* emscripten's libc; hidden by -std=c11 */
#endif

static tu_rng rng = {20251122u};

static float gauss(void) {
    /* Box-Muller; u1 in (0, 1] */
    double u1 = 1.0 - (double)tu_rng_uniform(&rng, 0.0f, 1.0f),
           u2 = tu_rng_uniform(&rng, 0.0f, 1.0f);
    if (u1 < 1e-300) u1 = 1e-300;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

static uint32_t bits_from_f32(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* The exact value of a half, computed independently with ldexp. */
static double half_value(uint16_t h) {
    const int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v;
    if (e == 31)
        v = m ? NAN : INFINITY;
    else if (e == 0)
        v = ldexp((double)m, -24);
    else
        v = ldexp(1024.0 + m, e - 25);
    return s ? -v : v;
}

/* ------------------------------------------------------------------------------------------ */

static void test_fp16(void) {
    tu_section("fp16: all 65536 halves, rounding of floats");
    int bad_value = 0, bad_trip = 0, bad_nan = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        const float f = wlm_fp16_to_fp32((wlm_fp16)h);
        const double want = half_value((uint16_t)h);
        if (isnan(want)) {
            if (!isnan(f) || (bits_from_f32(f) >> 31) != (h >> 15)) bad_nan++;
            const wlm_fp16 back = wlm_fp32_to_fp16(f);
            if ((back & 0x7c00) != 0x7c00 || (back & 0x3ff) == 0 || (back >> 15) != (h >> 15))
                bad_nan++;
            continue;
        }
        if ((double)f != want || !!signbit(f) != (int)(h >> 15)) bad_value++;
        if (wlm_fp32_to_fp16(f) != h) bad_trip++;
    }
    CHECKF(bad_value == 0, "%d halves convert to the wrong float", bad_value);
    CHECKF(bad_trip == 0, "%d halves do not survive the round trip", bad_trip);
    CHECKF(bad_nan == 0, "%d NaN halves mishandled", bad_nan);

    /* Down-conversion picks the nearest half, ties to even. */
    CHECK_EQ_INT(wlm_fp32_to_fp16(65504.0f), 0x7bff);
    CHECK_EQ_INT(wlm_fp32_to_fp16(65519.99f), 0x7bff);
    CHECK_EQ_INT(wlm_fp32_to_fp16(65520.0f), 0x7c00); /* ties away to Inf (even) */
    CHECK_EQ_INT(wlm_fp32_to_fp16(-1e9f), 0xfc00);
    CHECK_EQ_INT(wlm_fp32_to_fp16(1.0f + 1.0f / 2048), 0x3c00); /* tie: to even (down) */
    CHECK_EQ_INT(wlm_fp32_to_fp16(1.0f + 3.0f / 2048), 0x3c02); /* tie: to even (up) */
    CHECK_EQ_INT(wlm_fp32_to_fp16(ldexpf(1.0f, -24)), 0x0001);  /* smallest subnormal */
    CHECK_EQ_INT(wlm_fp32_to_fp16(ldexpf(1.0f, -25)), 0x0000);  /* tie between 0 and it: 0 */
    CHECK_EQ_INT(wlm_fp32_to_fp16(ldexpf(1.5f, -25)), 0x0001);
    CHECK_EQ_INT(wlm_fp32_to_fp16(ldexpf(3.0f, -25)), 0x0002);    /* tie 1.5 ulp: to even */
    CHECK_EQ_INT(wlm_fp32_to_fp16(ldexpf(1023.5f, -24)), 0x0400); /* rounds up into normals */
    CHECK_EQ_INT(wlm_fp32_to_fp16(-0.0f), 0x8000);
    int bad_near = 0;
    for (int i = 0; i < 200000; i++) {
        /* random floats across the half range, exponents 2^-26 .. 2^16 */
        const float f =
            ldexpf(tu_rng_uniform(&rng, 1.0f, 2.0f), (int)(tu_rng_u64(&rng) % 43) - 26) *
            ((tu_rng_u64(&rng) & 1) ? -1.0f : 1.0f);
        const wlm_fp16 h = wlm_fp32_to_fp16(f);
        const double v = half_value(h);
        if (isinf(v)) {
            if (fabs((double)f) < 65520.0) bad_near++;
            continue;
        }
        /* neighbours of h in magnitude */
        const uint16_t mag = h & 0x7fff;
        const double up = half_value((uint16_t)((h & 0x8000) | (mag + 1)));
        const double dn = mag ? half_value((uint16_t)((h & 0x8000) | (mag - 1))) : -v;
        const double e = fabs((double)f - v);
        if ((!isinf(up) && fabs((double)f - up) < e) || fabs((double)f - dn) < e) bad_near++;
        if ((!isinf(up) && fabs((double)f - up) == e && (h & 1)) ||
            (fabs((double)f - dn) == e && (h & 1)))
            bad_near++; /* a tie must land on the even one */
    }
    CHECKF(bad_near == 0, "%d floats not rounded to the nearest half", bad_near);
}

/* ------------------------------------------------------------------------------------------ */

static void test_traits(void) {
    tu_section("type traits");
    static const struct {
        int32_t type;
        const char *name;
        int32_t bs;
        size_t ts;
        int32_t vdt;
    } weights[] = {
        {WLM_TYPE_F32, "F32", 1, 4, WLM_TYPE_F32},
        {WLM_TYPE_F16, "F16", 1, 2, WLM_TYPE_F32},
        {WLM_TYPE_Q8_0, "Q8_0", 32, 34, WLM_TYPE_Q8_0},
        {WLM_TYPE_Q4_0, "Q4_0", 32, 18, WLM_TYPE_Q8_0},
        {WLM_TYPE_Q4_K, "Q4_K", 256, 144, WLM_TYPE_Q8_K},
        {WLM_TYPE_Q6_K, "Q6_K", 256, 210, WLM_TYPE_Q8_K},
        {WLM_TYPE_BF16, "BF16", 1, 2, WLM_TYPE_F32},
        {WLM_TYPE_Q4_1, "Q4_1", 32, 20, WLM_TYPE_Q8_1},
        {WLM_TYPE_Q5_0, "Q5_0", 32, 22, WLM_TYPE_Q8_0},
        {WLM_TYPE_Q5_1, "Q5_1", 32, 24, WLM_TYPE_Q8_1},
        {WLM_TYPE_Q2_K, "Q2_K", 256, 84, WLM_TYPE_Q8_K},
        {WLM_TYPE_Q3_K, "Q3_K", 256, 110, WLM_TYPE_Q8_K},
        {WLM_TYPE_Q5_K, "Q5_K", 256, 176, WLM_TYPE_Q8_K},
        {WLM_TYPE_MXFP4, "MXFP4", 32, 17, WLM_TYPE_Q8_0},
    };
    for (size_t i = 0; i < sizeof weights / sizeof weights[0]; i++) {
        const wlm_type_traits *t = wlm_type_get(weights[i].type);
        CHECKF(t->name && strcmp(t->name, weights[i].name) == 0, "type %d", (int)weights[i].type);
        CHECKF(t->supported == 1, "%s supported", weights[i].name);
        CHECK_EQ_INT(t->block_size, weights[i].bs);
        CHECK_EQ_INT(t->type_size, weights[i].ts);
        CHECK_EQ_INT(t->vec_dot_type, weights[i].vdt);
        CHECKF(t->to_float && t->from_float && t->matvec_ref && t->matvec_simd, "%s functions",
               weights[i].name);
        CHECKF(weights[i].vdt == WLM_TYPE_F32 || wlm_type_get(weights[i].vdt)->from_float,
               "%s activation quantizer", weights[i].name);
    }
    const wlm_type_traits *k = wlm_type_get(WLM_TYPE_Q8_K);
    CHECK(k->name && strcmp(k->name, "Q8_K") == 0);
    CHECK(k->supported == 0); /* activations only */
    CHECK(k->to_float && k->from_float == wlm_quantize_q8_K_simd);
    CHECK(wlm_type_get(WLM_TYPE_Q8_0)->from_float == wlm_quantize_q8_0_simd);
    const wlm_type_traits *q81 = wlm_type_get(WLM_TYPE_Q8_1);
    CHECK(q81->supported == 0 && q81->block_size == 32 && q81->type_size == 36); /* activations */
    CHECK(q81->to_float && q81->from_float == wlm_quantize_q8_1_simd);
    CHECK(wlm_type_get(-1)->name == NULL && wlm_type_get(WLM_TYPE_COUNT)->name == NULL);
    CHECK(wlm_type_get(4)->name == NULL); /* a hole in ggml's ids */
    CHECK_EQ_INT(wlm_row_bytes(WLM_TYPE_Q8_0, 64), 68);
    CHECK_EQ_INT(wlm_row_bytes(WLM_TYPE_Q4_K, 768), 432);
    CHECK_EQ_INT(wlm_row_bytes(WLM_TYPE_Q6_K, 512), 420);
    CHECK_EQ_INT(wlm_row_bytes(WLM_TYPE_Q4_0, 33), 0);
    CHECK_EQ_INT(wlm_row_bytes(WLM_TYPE_Q4_K, 288), 0);
    CHECK_EQ_INT(wlm_row_bytes(WLM_TYPE_F16, 7), 14);
    printf("SIMD128 kernels compiled in: %d\n", wlm_quant_have_simd());
}

/* ------------------------------------------------------------------------------------------ */
/* Block layouts: hand-built bytes, dequantized through the traits.                           */

static void test_layouts(void) {
    tu_section("block layouts from hand-built bytes");
    float y[256];

    /* Q4_0: d = 1.0 (0x3C00, little-endian), byte j = j | (15 - j) << 4: element j = j - 8,
     * element 16 + j = 7 - j. */
    {
        uint8_t blk[18] = {0x00, 0x3C};
        for (int j = 0; j < 16; j++) blk[2 + j] = (uint8_t)(j | ((15 - j) << 4));
        wlm_type_get(WLM_TYPE_Q4_0)->to_float(blk, y, 32);
        int bad = 0;
        for (int j = 0; j < 16; j++) bad += y[j] != (float)(j - 8) || y[16 + j] != (float)(7 - j);
        CHECKF(bad == 0, "Q4_0: %d elements wrong (y[0]=%g y[15]=%g y[16]=%g)", bad, y[0], y[15],
               y[16]);
    }
    /* Q8_0: d = 2.0 (0x4000), qs = -16..15 */
    {
        uint8_t blk[34] = {0x00, 0x40};
        for (int j = 0; j < 32; j++) blk[2 + j] = (uint8_t)(int8_t)(j - 16);
        wlm_type_get(WLM_TYPE_Q8_0)->to_float(blk, y, 32);
        int bad = 0;
        for (int j = 0; j < 32; j++) bad += y[j] != 2.0f * (float)(j - 16);
        CHECKF(bad == 0, "Q8_0: %d elements wrong", bad);
    }
    /* Q4_K: d = 1.0, dmin = 0.25 (0x3400); scales (sc, m) of the 8 sub-blocks packed by hand:
     * sc = 1 2 3 4 33 50 63 17, m = 5 6 7 8 40 20 63 0. */
    {
        static const uint8_t sc[8] = {1, 2, 3, 4, 33, 50, 63, 17},
                             mn[8] = {5, 6, 7, 8, 40, 20, 63, 0};
        static const uint8_t packed[12] = {0x81, 0xC2, 0xC3, 0x44, 0x85, 0x46,
                                           0xC7, 0x08, 0x81, 0x42, 0xFF, 0x01};
        uint8_t blk[144] = {0x00, 0x3C, 0x00, 0x34};
        memcpy(blk + 4, packed, 12);
        for (int i = 0; i < 128; i++) {
            const int l = i % 16;
            blk[16 + i] = (uint8_t)(l | ((15 - l) << 4));
        }
        int bad_sm = 0;
        for (int j = 0; j < 8; j++) {
            uint8_t s, m;
            wlm_q4_K_scale_min(packed, j, &s, &m);
            bad_sm += s != sc[j] || m != mn[j];
        }
        CHECKF(bad_sm == 0, "Q4_K: %d scale/min pairs unpacked wrong", bad_sm);
        wlm_type_get(WLM_TYPE_Q4_K)->to_float(blk, y, 256);
        int bad = 0;
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) {
                const float lo = (float)sc[2 * c] * (float)(l % 16) - 0.25f * (float)mn[2 * c];
                const float hi =
                    (float)sc[2 * c + 1] * (float)(15 - l % 16) - 0.25f * (float)mn[2 * c + 1];
                bad += y[64 * c + l] != lo || y[64 * c + 32 + l] != hi;
            }
        CHECKF(bad == 0, "Q4_K: %d elements wrong (y[0]=%g y[32]=%g y[255]=%g)", bad, y[0], y[32],
               y[255]);
    }
    /* Q6_K: d = 0.5 (0x3800) at the end, scales[g] = g - 8. Levels: element 0 = 5 (ql[0] low,
     * qh[0] bits 0-1 = 0), element 32 = 12 | 1 << 4 (ql[32] low, qh[0] bits 2-3), element 64 =
     * 10 | 2 << 4 (ql[0] high, bits 4-5), element 96 = 7 | 3 << 4 (ql[32] high, bits 6-7);
     * every other level 0. value = d * scale * (level - 32). */
    {
        uint8_t blk[210] = {0};
        blk[0] = 0xA5;
        blk[32] = 0x7C;
        blk[128] = 0xE4;
        for (int g = 0; g < 16; g++) blk[192 + g] = (uint8_t)(int8_t)(g - 8);
        blk[208] = 0x00;
        blk[209] = 0x38;
        wlm_type_get(WLM_TYPE_Q6_K)->to_float(blk, y, 256);
        CHECK_NEAR(y[0], 108.0, 0);    /* 0.5 * -8 * (5 - 32) */
        CHECK_NEAR(y[32], 12.0, 0);    /* 0.5 * -6 * (28 - 32) */
        CHECK_NEAR(y[64], -20.0, 0);   /* 0.5 * -4 * (42 - 32) */
        CHECK_NEAR(y[96], -23.0, 0);   /* 0.5 * -2 * (55 - 32) */
        CHECK_NEAR(y[1], 128.0, 0);    /* 0.5 * -8 * (0 - 32) */
        CHECK_NEAR(y[17], 112.0, 0);   /* group 1: 0.5 * -7 * -32 */
        CHECK_NEAR(y[128], 0.0, 0);    /* group 8: scale 0 */
        CHECK_NEAR(y[255], -112.0, 0); /* group 15: 0.5 * 7 * -32 */
    }
    /* BF16: the high half of a float; down-conversion rounds to nearest even */
    {
        static const uint16_t h[4] = {0x3F80, 0xC0C0, 0x0001, 0x7F80};
        wlm_type_get(WLM_TYPE_BF16)->to_float(h, y, 4);
        CHECK(y[0] == 1.0f && y[1] == -6.0f && y[2] == ldexpf(1.0f, -133) && isinf(y[3]));
        const float in[4] = {1.0f + ldexpf(1.0f, -8), 1.0f + 3 * ldexpf(1.0f, -8),
                             1.0f + ldexpf(1.0f, -8) + ldexpf(1.0f, -20), NAN};
        uint16_t o[4];
        wlm_type_get(WLM_TYPE_BF16)->from_float(in, o, 4);
        CHECK_EQ_INT(o[0], 0x3F80); /* tie: to even (down) */
        CHECK_EQ_INT(o[1], 0x3F82); /* tie: to even (up) */
        CHECK_EQ_INT(o[2], 0x3F81); /* above the tie */
        CHECK((o[3] & 0x7F80) == 0x7F80 && (o[3] & 0x7F) != 0);
    }
    /* Q4_1: d = 1.0, m = -2.0 (0xC000), nibbles as Q4_0: element j = j - 2, 16 + j = 13 - j */
    {
        uint8_t blk[20] = {0x00, 0x3C, 0x00, 0xC0};
        for (int j = 0; j < 16; j++) blk[4 + j] = (uint8_t)(j | ((15 - j) << 4));
        wlm_type_get(WLM_TYPE_Q4_1)->to_float(blk, y, 32);
        int bad = 0;
        for (int j = 0; j < 16; j++) bad += y[j] != (float)(j - 2) || y[16 + j] != (float)(13 - j);
        CHECKF(bad == 0, "Q4_1: %d elements wrong (y[0]=%g y[16]=%g)", bad, y[0], y[16]);
    }
    /* Q5_0 / Q5_1: qh (little-endian uint32 after d [and m]) = bits 0, 9, 20, 31: those elements
     * get 16 on top of their nibble (byte j: j low, 15 - j high). Q5_0 value = (q - 16) * d with
     * d = 1; Q5_1 value = q * 0.5 + 1. */
    {
        static const uint8_t qh[4] = {0x01, 0x02, 0x10, 0x80};
        int want[32];
        for (int j = 0; j < 16; j++) {
            want[j] = j;
            want[16 + j] = 15 - j;
        }
        want[0] += 16, want[9] += 16, want[20] += 16, want[31] += 16;
        uint8_t b0[22] = {0x00, 0x3C}, b1[24] = {0x00, 0x38, 0x00, 0x3C};
        memcpy(b0 + 2, qh, 4);
        memcpy(b1 + 4, qh, 4);
        for (int j = 0; j < 16; j++) b0[6 + j] = b1[8 + j] = (uint8_t)(j | ((15 - j) << 4));
        float y1[32];
        wlm_type_get(WLM_TYPE_Q5_0)->to_float(b0, y, 32);
        wlm_type_get(WLM_TYPE_Q5_1)->to_float(b1, y1, 32);
        int bad0 = 0, bad1 = 0;
        for (int j = 0; j < 32; j++) {
            bad0 += y[j] != (float)(want[j] - 16);
            bad1 += y1[j] != (float)want[j] * 0.5f + 1.0f;
        }
        CHECKF(bad0 == 0, "Q5_0: %d elements wrong (y[0]=%g y[9]=%g y[20]=%g y[31]=%g)", bad0,
               y[0], y[9], y[20], y[31]);
        CHECKF(bad1 == 0, "Q5_1: %d elements wrong (y[0]=%g y[31]=%g)", bad1, y1[0], y1[31]);
        CHECK(y[9] == 9.0f && y[20] == 11.0f && y[31] == 0.0f && y[30] == -15.0f);
        /* and the quantizer: -16..15 with extreme -16 is d = 1, exact, high bits on 16..31 */
        float x[32];
        for (int j = 0; j < 32; j++) x[j] = (float)(j - 16);
        wlm_block_q5_0 q;
        wlm_type_get(WLM_TYPE_Q5_0)->from_float(x, &q, 32);
        CHECK_EQ_INT(q.d, 0x3C00);
        CHECK(q.qh[0] == 0 && q.qh[1] == 0 && q.qh[2] == 0xFF && q.qh[3] == 0xFF);
        int badq = 0;
        for (int j = 0; j < 16; j++) badq += q.qs[j] != (uint8_t)(j | (j << 4));
        CHECKF(badq == 0, "Q5_0 quantizer: %d bytes wrong", badq);
    }
    /* Q2_K: scales[g] = (g % 15 + 1) | 2 << 4 (scale g % 15 + 1, min 2), d = 1, dmin = 0.5 at
     * bytes 80 and 82; qs[0] = 0xE4 gives levels 0,1,2,3 to elements 0, 32, 64, 96 (bits 2j of
     * byte l hold element 32j + l of the first half), qs[37] = 0x1B levels 3,2,1,0 to elements
     * 133, 165, 197, 229 of the second half. value = d*sc*q - dmin*m. */
    {
        uint8_t blk[84] = {0};
        for (int g = 0; g < 16; g++) blk[g] = (uint8_t)((g % 15 + 1) | 2 << 4);
        blk[16 + 0] = 0xE4;
        blk[16 + 37] = 0x1B;
        blk[81] = 0x3C;
        blk[83] = 0x38;
        wlm_type_get(WLM_TYPE_Q2_K)->to_float(blk, y, 256);
        CHECK(y[0] == -1.0f && y[32] == 2.0f && y[64] == 9.0f && y[96] == 20.0f);
        CHECK(y[133] == 26.0f && y[165] == 21.0f && y[197] == 12.0f && y[229] == -1.0f);
        CHECK(y[1] == -1.0f && y[255] == -1.0f);
        CHECK_EQ_INT(offsetof(wlm_block_q2_K, d), 80);
    }
    /* Q3_K: scales packed by hand (raw = scale + 32; low nibbles in bytes 0..7, j < 8 low and
     * j >= 8 high; top two bits in byte 8 + j % 4 at bit 2 * (j / 4)): scale 0 = 1, 5 = -2,
     * 9 = 31, 14 = -32, the rest 0. d = 1 at byte 108. Levels low2 + 4 * hbit - 4, with the high
     * bit of element 128h + 32j + l at bit 4h + j of hmask[l]. */
    {
        static const uint8_t packed[12] = {0x01, 0xF0, 0, 0, 0, 0x0E, 0, 0, 0xAA, 0xB6, 0x2A, 0xAA};
        uint8_t blk[110] = {0};
        memcpy(blk + 96, packed, 12);
        blk[109] = 0x3C;
        blk[32 + 0] = 0x03; /* element 0: low2 3 */
        blk[0] = 0x01;      /* hmask[0] bit 0: element 0's high bit */
        blk[32 + 54] = 0x01; /* element 150 (h 1, j 0, l 22): low2 1 */
        blk[22] = 0x10;      /* hmask[22] bit 4 */
        blk[32 + 38] = 0x80; /* element 230 (h 1, j 3, l 6): low2 2 (bits 6..7) */
        blk[6] = 0x80;       /* hmask[6] bit 7 */
        blk[32 + 21] = 0x10; /* element 85 (h 0, j 2, l 21): low2 1, no high bit */
        int bad_sc = 0;
        for (int j = 0; j < 16; j++) {
            const int want = j == 0 ? 1 : j == 5 ? -2 : j == 9 ? 31 : j == 14 ? -32 : 0;
            bad_sc += wlm_q3_K_scale(packed, j) != want;
        }
        CHECKF(bad_sc == 0, "Q3_K: %d scales unpacked wrong", bad_sc);
        wlm_type_get(WLM_TYPE_Q3_K)->to_float(blk, y, 256);
        CHECK_NEAR(y[0], 3.0, 0);      /* 1 * (3 + 4 - 4) */
        CHECK_NEAR(y[1], -4.0, 0);     /* 1 * (0 - 4) */
        CHECK_NEAR(y[150], 31.0, 0);   /* 31 * (1 + 4 - 4) */
        CHECK_NEAR(y[151], -124.0, 0); /* 31 * -4 */
        CHECK_NEAR(y[230], -64.0, 0);  /* -32 * (2 + 4 - 4) */
        CHECK_NEAR(y[85], 6.0, 0);     /* -2 * (1 - 4) */
        CHECK_NEAR(y[20], 0.0, 0);     /* scale 0 */
        CHECK_EQ_INT(offsetof(wlm_block_q3_K, scales), 96);
    }
    /* Q5_K: Q4_K's hand-packed scales (sc 1 2 3 4 33 50 63 17, m 5 6 7 8 40 20 63 0), d = 1,
     * dmin = 0.25; qh at 16, qs at 48. Bit s of qh[l] is bit 4 of element 32s + l; element
     * 64c + l is the low nibble of qs[32c + l], 64c + 32 + l its high nibble. */
    {
        static const uint8_t packed[12] = {0x81, 0xC2, 0xC3, 0x44, 0x85, 0x46,
                                           0xC7, 0x08, 0x81, 0x42, 0xFF, 0x01};
        uint8_t blk[176] = {0x00, 0x3C, 0x00, 0x34};
        memcpy(blk + 4, packed, 12);
        blk[16 + 3] = 0x05;  /* elements 3 (bit 0) and 67 (bit 2) */
        blk[48 + 3] = 0x07;  /* element 3: 7; element 35: 0 */
        blk[48 + 35] = 0x90; /* element 67: 0; element 99: 9 */
        blk[16 + 31] = 0x80; /* element 255 (bit 7) */
        blk[48 + 127] = 0xF0; /* element 255: 15 */
        wlm_type_get(WLM_TYPE_Q5_K)->to_float(blk, y, 256);
        CHECK_NEAR(y[3], 21.75, 0);  /* 1 * 23 - 0.25 * 5 */
        CHECK_NEAR(y[35], -1.5, 0);  /* 2 * 0 - 0.25 * 6 */
        CHECK_NEAR(y[67], 46.25, 0); /* 3 * 16 - 0.25 * 7 */
        CHECK_NEAR(y[99], 34.0, 0);  /* 4 * 9 - 0.25 * 8 */
        CHECK_NEAR(y[255], 527.0, 0); /* 17 * 31 - 0 */
        CHECK_NEAR(y[0], -1.25, 0);
        CHECK_EQ_INT(offsetof(wlm_block_q5_K, qh), 16);
        CHECK_EQ_INT(offsetof(wlm_block_q5_K, qs), 48);
    }
    /* Q8_K: float d, then 256 int8, then 16 int16 sums */
    {
        wlm_block_q8_K b;
        b.d = 0.5f;
        for (int j = 0; j < 256; j++) b.qs[j] = (int8_t)(j - 128);
        wlm_type_get(WLM_TYPE_Q8_K)->to_float(&b, y, 256);
        int bad = 0;
        for (int j = 0; j < 256; j++) bad += y[j] != 0.5f * (float)(j - 128);
        CHECKF(bad == 0, "Q8_K: %d elements wrong", bad);
        CHECK_EQ_INT(offsetof(wlm_block_q8_K, qs), 4);
        CHECK_EQ_INT(offsetof(wlm_block_q8_K, bsums), 260);
        CHECK_EQ_INT(offsetof(wlm_block_q6_K, d), 208);
        CHECK_EQ_INT(offsetof(wlm_block_q4_K, qs), 16);
    }
}

/* Level (0..63) of element e of a Q6_K block, straight from the layout. */
static int q6_level(const wlm_block_q6_K *b, int e) {
    const int h = e / 128, l = e % 32, k = e % 128 / 32;
    const int lo = (b->ql[64 * h + l + 32 * (k & 1)] >> (4 * (k >> 1))) & 0xF;
    return lo | (((b->qh[32 * h + l] >> (2 * k)) & 3) << 4);
}

/* ------------------------------------------------------------------------------------------ */
/* Quantizers: known vectors.                                                                 */

static void test_known_vectors(void) {
    tu_section("quantizers: known vectors");
    float x[256];
    /* Q8_0: amax 127 -> d = 1; roundf: half away from zero */
    {
        static const float in[8] = {127.0f, -63.5f, 0.5f, -0.5f, 1.49f, 2.5f, -2.5f, -127.0f};
        static const int8_t want[8] = {127, -64, 1, -1, 1, 3, -3, -127};
        memset(x, 0, sizeof x);
        memcpy(x, in, sizeof in);
        wlm_block_q8_0 r, s;
        wlm_quantize_q8_0_ref(x, &r, 32);
        wlm_quantize_q8_0_simd(x, &s, 32);
        CHECK_EQ_INT(r.d, 0x3C00);
        int bad = 0;
        for (int j = 0; j < 32; j++) bad += r.qs[j] != (j < 8 ? want[j] : 0);
        CHECKF(bad == 0, "Q8_0: %d quants wrong", bad);
        CHECK(memcmp(&r, &s, sizeof r) == 0);
    }
    /* Q4_0: the extreme -8 gives d = 1; level = min(15, trunc(x + 8.5)) */
    {
        static const float in[8] = {-8.0f, 7.5f, 0.5f, -0.5f, 3.2f, 7.9f, -7.6f, 0.0f};
        static const int want[8] = {0, 15, 9, 8, 11, 15, 0, 8};
        memset(x, 0, sizeof x);
        memcpy(x, in, sizeof in);
        wlm_block_q4_0 b;
        wlm_type_get(WLM_TYPE_Q4_0)->from_float(x, &b, 32);
        CHECK_EQ_INT(b.d, 0x3C00);
        int bad = 0;
        for (int j = 0; j < 16; j++) {
            bad += (b.qs[j] & 0xF) != (j < 8 ? want[j] : 8);
            bad += (b.qs[j] >> 4) != 8;
        }
        CHECKF(bad == 0, "Q4_0: %d levels wrong", bad);
        /* a positive extreme gives a negative d */
        memset(x, 0, sizeof x);
        x[0] = 8.0f;
        x[17] = -4.0f;
        wlm_type_get(WLM_TYPE_Q4_0)->from_float(x, &b, 32);
        CHECK_EQ_INT(b.d, 0xBC00);
        CHECK_EQ_INT(b.qs[0] & 0xF, 0);
        CHECK_EQ_INT(b.qs[1] >> 4, 12);
        float y[32];
        wlm_type_get(WLM_TYPE_Q4_0)->to_float(&b, y, 32);
        CHECK(y[0] == 8.0f && y[17] == -4.0f && y[5] == 0.0f);
    }
    /* Q8_K: the element of largest magnitude (-2, at 5) maps to -127: iscale = -127 / -2 = 63.5,
     * ties to even */
    {
        memset(x, 0, sizeof x);
        x[5] = -2.0f;
        x[6] = 1.0f;          /* 63.5 -> 64 (even) */
        x[7] = 0.5f;          /* 31.75 -> 32 */
        x[8] = 3.0f / 127.0f; /* 1.5 -> 2 (even) */
        x[200] = -1.0f;       /* -63.5 -> -64 */
        wlm_block_q8_K r, s;
        wlm_quantize_q8_K_ref(x, &r, 256);
        wlm_quantize_q8_K_simd(x, &s, 256);
        CHECK_NEAR(r.d, 1.0 / 63.5, 1e-9);
        CHECK(r.qs[5] == -127 && r.qs[6] == 64 && r.qs[7] == 32 && r.qs[8] == 2 &&
              r.qs[200] == -64);
        CHECK_EQ_INT(r.bsums[0], -127 + 64 + 32 + 2);
        CHECK_EQ_INT(r.bsums[12], -64);
        CHECK(memcmp(&r, &s, sizeof r) == 0);
        /* a tie in magnitude between +2 and -2: the first one decides the sign */
        x[3] = 2.0f;
        wlm_quantize_q8_K_ref(x, &r, 256);
        wlm_quantize_q8_K_simd(x, &s, 256);
        CHECK(r.qs[3] == -127 && r.qs[5] == 127 && r.d < 0);
        CHECK(memcmp(&r, &s, sizeof r) == 0);
        x[3] = -2.0f;
        x[5] = 2.0f;
        wlm_quantize_q8_K_ref(x, &r, 256);
        wlm_quantize_q8_K_simd(x, &s, 256);
        CHECK(r.qs[3] == -127 && r.qs[5] == 127 && r.d > 0);
        CHECK(memcmp(&r, &s, sizeof r) == 0);
        memset(x, 0, sizeof x);
        wlm_quantize_q8_K_ref(x, &r, 256);
        CHECK(r.d == 0.0f && r.qs[0] == 0 && r.bsums[15] == 0);
    }
    /* Q4_K: a sub-block holding 0..15 fits scale 1, min 0 exactly; the 6-bit scale against the
     * fp16 d = 1/63 costs at most 15 * 2^-12 */
    {
        for (int i = 0; i < 256; i++) x[i] = (float)(i % 16);
        wlm_block_q4_K b;
        wlm_type_get(WLM_TYPE_Q4_K)->from_float(x, &b, 256);
        float y[256];
        wlm_type_get(WLM_TYPE_Q4_K)->to_float(&b, y, 256);
        double worst = 0;
        for (int i = 0; i < 256; i++) worst = fmax(worst, fabs((double)y[i] - x[i]));
        CHECKF(worst <= 15.0 / 4096, "Q4_K ramp: worst error %g", worst);
        uint8_t s, m;
        wlm_q4_K_scale_min(b.scales, 3, &s, &m);
        CHECK(s == 63 && m == 0);
        CHECK_EQ_INT(b.qs[0] & 0xF, 0);
        CHECK_EQ_INT(b.qs[15] & 0xF, 15);
    }
    /* Q6_K: every sub-block holds -4..3.5 in steps of 1/2: the extreme -4 maps to level -32
     * with step 1/8, the super-block d = -2^-10 and scale -128 are exact: lossless */
    {
        for (int i = 0; i < 256; i++) x[i] = (float)(i % 16 - 8) * 0.5f;
        wlm_block_q6_K b;
        wlm_type_get(WLM_TYPE_Q6_K)->from_float(x, &b, 256);
        float y[256];
        wlm_type_get(WLM_TYPE_Q6_K)->to_float(&b, y, 256);
        int bad = 0;
        for (int i = 0; i < 256; i++) bad += y[i] != x[i];
        CHECKF(bad == 0, "Q6_K: %d elements not reproduced (y[0]=%g y[15]=%g)", bad, y[0], y[15]);
        CHECK_EQ_INT(b.d, 0x9400); /* -2^-10 */
        CHECK_EQ_INT(b.scales[0], -128);
        CHECK_EQ_INT(q6_level(&b, 0), 0);   /* -4 / (1/8) + 32 */
        CHECK_EQ_INT(q6_level(&b, 15), 60); /* 3.5 / (1/8) + 32 */
        memset(x, 0, sizeof x);
        wlm_type_get(WLM_TYPE_Q6_K)->from_float(x, &b, 256);
        wlm_type_get(WLM_TYPE_Q6_K)->to_float(&b, y, 256);
        CHECK(b.d == 0 && y[0] == 0.0f && y[255] == 0.0f);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Matrix-vector products on tiny hand-computed inputs.                                       */

static void test_tiny_matvec(void) {
    tu_section("matvec: hand-computed blocks");
    /* Q8_0: w = 0.5 * (j - 16), x = 0.25 * 1: sum (j - 16) = -16, times 0.125 = -2 */
    {
        wlm_block_q8_0 w = {0x3800, {0}}, x = {0x3400, {0}};
        for (int j = 0; j < 32; j++) {
            w.qs[j] = (int8_t)(j - 16);
            x.qs[j] = 1;
        }
        float o1 = 0, o2 = 0;
        wlm_q8_0_matvec_ref(&o1, &w, sizeof w, &x, 32, 0, 1);
        wlm_q8_0_matvec_simd(&o2, &w, sizeof w, &x, 32, 0, 1);
        CHECK(o1 == -2.0f && o2 == -2.0f);
    }
    /* Q4_0: w = j - 8 (j < 16) and 7 - j (16 + j), x = element index: 280 - 528 = -248 */
    {
        wlm_block_q4_0 w = {0x3C00, {0}};
        wlm_block_q8_0 x = {0x3C00, {0}};
        for (int j = 0; j < 16; j++) w.qs[j] = (uint8_t)(j | ((15 - j) << 4));
        for (int j = 0; j < 32; j++) x.qs[j] = (int8_t)j;
        float o1 = 0, o2 = 0;
        wlm_q4_0_matvec_ref(&o1, &w, sizeof w, &x, 32, 0, 1);
        wlm_q4_0_matvec_simd(&o2, &w, sizeof w, &x, 32, 0, 1);
        CHECK(o1 == -248.0f && o2 == -248.0f);
    }
    /* Q4_K: d = 1, dmin = 0.5, every scale 1 and min 2, nibbles 1 (low) and 2 (high): values 0
     * and 1; x = 0.5 * 2 everywhere: 128 ones times 1 = 128 */
    {
        wlm_block_q4_K w;
        memset(&w, 0, sizeof w);
        w.d = 0x3C00;
        w.dmin = 0x3800;
        static const uint8_t packed[12] = {1, 1, 1, 1, 2, 2, 2, 2, 0x21, 0x21, 0x21, 0x21};
        memcpy(w.scales, packed, 12);
        memset(w.qs, 0x21, sizeof w.qs);
        wlm_block_q8_K x;
        x.d = 0.5f;
        memset(x.qs, 2, sizeof x.qs);
        for (int g = 0; g < 16; g++) x.bsums[g] = 32;
        float o1 = 0, o2 = 0, y[256];
        wlm_type_get(WLM_TYPE_Q4_K)->to_float(&w, y, 256);
        CHECK(y[0] == 0.0f && y[32] == 1.0f && y[200] == 0.0f && y[255] == 1.0f);
        wlm_q4_K_matvec_ref(&o1, &w, sizeof w, &x, 256, 0, 1);
        wlm_q4_K_matvec_simd(&o2, &w, sizeof w, &x, 256, 0, 1);
        CHECK(o1 == 128.0f && o2 == 128.0f);
    }
    /* Q6_K: d = 1, scales 1, every level 33 (value 1: ql nibbles 1, qh bits 0b10); x = 0.25 * 4 */
    {
        wlm_block_q6_K w;
        memset(w.ql, 0x11, sizeof w.ql);
        memset(w.qh, 0xAA, sizeof w.qh);
        memset(w.scales, 1, sizeof w.scales);
        w.d = 0x3C00;
        wlm_block_q8_K x;
        x.d = 0.25f;
        memset(x.qs, 4, sizeof x.qs);
        for (int g = 0; g < 16; g++) x.bsums[g] = 64;
        float o1 = 0, o2 = 0, y[256];
        wlm_type_get(WLM_TYPE_Q6_K)->to_float(&w, y, 256);
        CHECK(y[0] == 1.0f && y[127] == 1.0f && y[255] == 1.0f);
        wlm_q6_K_matvec_ref(&o1, &w, sizeof w, &x, 256, 0, 1);
        wlm_q6_K_matvec_simd(&o2, &w, sizeof w, &x, 256, 0, 1);
        CHECK(o1 == 256.0f && o2 == 256.0f);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Quantize -> dequantize: per-element bounds and overall quality on Gaussian data.           */

static double dist_to_range(double v, double lo, double hi) {
    if (lo > hi) {
        const double t = lo;
        lo = hi;
        hi = t;
    }
    return v < lo ? lo - v : v > hi ? v - hi : 0.0;
}

static void test_roundtrip(int32_t type, double max_rel_rmse) {
    const wlm_type_traits *t = wlm_type_get(type);
    const int n = 4096;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    void *q = malloc(wlm_row_bytes(type, n));
    int bad = 0, first = -1;
    double se = 0, sx = 0;
    for (int trial = 0; trial < 4; trial++) {
        for (int i = 0; i < n; i++) {
            x[i] = gauss() * (trial == 1 ? 1e-3f : trial == 2 ? 30.0f : 1.0f);
            if (trial == 3 && i % 97 == 0) x[i] *= 20.0f;         /* outliers */
            if (trial == 3 && i >= 1024 && i < 1536) x[i] = 0.0f; /* all-zero blocks */
            if (trial == 3 && i >= 2048 && i < 2304) x[i] = fabsf(x[i]) + 1.0f; /* one sign */
        }
        t->from_float(x, q, n);
        t->to_float(q, y, n);
        for (int i = 0; i < n; i++) {
            const double e = fabs((double)x[i] - y[i]);
            double bound;
            if (type == WLM_TYPE_Q8_0) {
                const wlm_block_q8_0 *b = (const wlm_block_q8_0 *)q + i / 32;
                float amax = 0;
                for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[i / 32 * 32 + j]));
                const double d = amax / 127.0f, d16 = wlm_fp16_to_fp32(b->d);
                bound = d / 2 + 127 * fabs(d - d16) + 1e-6 * fabs(x[i]);
            } else if (type == WLM_TYPE_Q4_0) {
                const wlm_block_q4_0 *b = (const wlm_block_q4_0 *)q + i / 32;
                float amax = 0, max = 0;
                for (int j = 0; j < 32; j++)
                    if (fabsf(x[i / 32 * 32 + j]) > amax) {
                        amax = fabsf(x[i / 32 * 32 + j]);
                        max = x[i / 32 * 32 + j];
                    }
                const double d = max / -8.0f, d16 = wlm_fp16_to_fp32(b->d);
                const int lvl = i % 32 < 16 ? (b->qs[i % 32] & 0xF) : (b->qs[i % 32 - 16] >> 4);
                /* the positive end (level 15) is one step short of the extreme: error up to d */
                bound = (lvl == 15 ? fabs(d) : fabs(d) / 2) + 8 * fabs(d - d16) + 1e-6 * fabs(x[i]);
            } else if (type == WLM_TYPE_Q4_K) {
                const wlm_block_q4_K *b = (const wlm_block_q4_K *)q + i / 256;
                uint8_t sc, m;
                wlm_q4_K_scale_min(b->scales, i % 256 / 32, &sc, &m);
                const double dj = wlm_fp16_to_fp32(b->d) * sc, dm = wlm_fp16_to_fp32(b->dmin) * m;
                const double slack = 1e-5 * (fabs(x[i]) + dm + 15 * dj);
                if (dj == 0)
                    bound = (y[i] == (float)-dm) ? INFINITY : -1; /* value is -dm */
                else
                    bound = dist_to_range(x[i], -dm, 15 * dj - dm) + dj / 2 + slack;
            } else if (type == WLM_TYPE_Q6_K) {
                const wlm_block_q6_K *b = (const wlm_block_q6_K *)q + i / 256;
                const double dg = wlm_fp16_to_fp32(b->d) * b->scales[i % 256 / 16];
                if (dg == 0)
                    bound = y[i] == 0.0f ? INFINITY : -1;
                else
                    bound = dist_to_range(x[i], -32 * dg, 31 * dg) + fabs(dg) / 2 +
                            1e-5 * (fabs(x[i]) + 32 * fabs(dg));
            } else if (type == WLM_TYPE_BF16) {
                bound = ldexp(fabs(x[i]), -8); /* half an ulp of an 8-bit significand */
            } else if (type == WLM_TYPE_Q4_1 || type == WLM_TYPE_Q5_1) {
                const int top = type == WLM_TYPE_Q4_1 ? 15 : 31;
                const size_t bs = type == WLM_TYPE_Q4_1 ? sizeof(wlm_block_q4_1)
                                                        : sizeof(wlm_block_q5_1);
                const wlm_block_q4_1 *b = (const void *)((const char *)q + i / 32 * bs);
                const double d = wlm_fp16_to_fp32(b->d), m = wlm_fp16_to_fp32(b->m);
                /* levels chosen against the unrounded d and min: fp16 costs 2^-11 of each */
                bound = dist_to_range(x[i], m, m + top * d) + d / 2 +
                        ldexp(fabs(m) + top * d, -10) + 1e-6 * fabs(x[i]);
            } else if (type == WLM_TYPE_Q5_0) {
                const wlm_block_q5_0 *b = (const wlm_block_q5_0 *)q + i / 32;
                float amax = 0, max = 0;
                for (int j = 0; j < 32; j++)
                    if (fabsf(x[i / 32 * 32 + j]) > amax) {
                        amax = fabsf(x[i / 32 * 32 + j]);
                        max = x[i / 32 * 32 + j];
                    }
                const double d = max / -16.0f, d16 = wlm_fp16_to_fp32(b->d);
                const double top = fabs(y[i] - (float)(15 * d16)) == 0 && d16 != 0;
                bound = (top ? fabs(d) : fabs(d) / 2) + 16 * fabs(d - d16) + 1e-6 * fabs(x[i]);
            } else if (type == WLM_TYPE_Q2_K) {
                const wlm_block_q2_K *b = (const wlm_block_q2_K *)q + i / 256;
                const uint8_t sc = b->scales[i % 256 / 16];
                const double dj = wlm_fp16_to_fp32(b->d) * (sc & 0xF),
                             dm = wlm_fp16_to_fp32(b->dmin) * (sc >> 4);
                if (dj == 0)
                    bound = (y[i] == (float)-dm) ? INFINITY : -1;
                else
                    bound = dist_to_range(x[i], -dm, 3 * dj - dm) + dj / 2 +
                            1e-5 * (fabs(x[i]) + dm + 3 * dj);
            } else if (type == WLM_TYPE_Q3_K) {
                const wlm_block_q3_K *b = (const wlm_block_q3_K *)q + i / 256;
                const double dg = wlm_fp16_to_fp32(b->d) * wlm_q3_K_scale(b->scales, i % 256 / 16);
                if (dg == 0)
                    bound = y[i] == 0.0f ? INFINITY : -1;
                else
                    bound = dist_to_range(x[i], -4 * dg, 3 * dg) + fabs(dg) / 2 +
                            1e-5 * (fabs(x[i]) + 4 * fabs(dg));
            } else if (type == WLM_TYPE_Q5_K) {
                const wlm_block_q5_K *b = (const wlm_block_q5_K *)q + i / 256;
                uint8_t sc, m;
                wlm_q4_K_scale_min(b->scales, i % 256 / 32, &sc, &m);
                const double dj = wlm_fp16_to_fp32(b->d) * sc, dm = wlm_fp16_to_fp32(b->dmin) * m;
                if (dj == 0)
                    bound = (y[i] == (float)-dm) ? INFINITY : -1;
                else
                    bound = dist_to_range(x[i], -dm, 31 * dj - dm) + dj / 2 +
                            1e-5 * (fabs(x[i]) + dm + 31 * dj);
            } else if (type == WLM_TYPE_MXFP4) {
                /* the nearest of K x d, d = 2^(e - 128): half the gap between neighbouring
                 * values (1, 1, 1, 1, 2, 2, 4 steps up to 12), beyond 12 steps the distance to
                 * 12 (max |x| < 16 steps) */
                const wlm_block_mxfp4 *b = (const wlm_block_mxfp4 *)q + i / 32;
                const double d = ldexp(1.0, b->e - 128), a = fabs(x[i]) / d;
                bound = d * (a <= 4 ? 0.5 : a <= 8 ? 1.0 : a <= 12 ? 2.0 : a - 12) * (1 + 1e-6);
            } else { /* Q8_K */
                const wlm_block_q8_K *b = (const wlm_block_q8_K *)q + i / 256;
                bound = fabs(b->d) * 0.5 * (1 + 1e-5) + 1e-7 * fabs(x[i]);
            }
            if (!(e <= bound)) {
                bad++;
                if (first < 0) first = i + n * trial;
            }
            if (trial == 0) {
                se += e * e;
                sx += (double)x[i] * x[i];
            }
        }
        if (type == WLM_TYPE_Q8_K) { /* the group sums are the sums of the stored quants */
            const wlm_block_q8_K *b = q;
            for (int k = 0; k < n / 256; k++)
                for (int g = 0; g < 16; g++) {
                    int s = 0;
                    for (int j = 0; j < 16; j++) s += b[k].qs[16 * g + j];
                    if (s != b[k].bsums[g]) bad++;
                }
        }
    }
    const double rel = sqrt(se / sx);
    CHECKF(bad == 0, "%s: %d elements beyond their bound (first %d)", t->name, bad, first);
    CHECKF(rel <= max_rel_rmse, "%s: rms error %.4f of rms value, want <= %.4f", t->name, rel,
           max_rel_rmse);
    printf("%s: quantize->dequantize rms error %.4f of rms value (Gaussian data)\n", t->name, rel);
    free(x);
    free(y);
    free(q);
}

/* Q8_1 activations and the Q4_1 / Q5_1 dot products against ggml's arithmetic, written out
 * here from its definitions (quantize_row_q8_1_ref; ggml_vec_dot_q4_1_q8_1 / q5_1_q8_1, the C
 * versions llama.cpp's wasm build runs): d = amax / 127, q = roundf(x / d), s = fp16(sum(q) * d)
 * with the unrounded d; per block in block order sumf += (dw * dx) * sumi + m * s. Bitwise, for
 * the reference and the build's kernels, rows longer than one column chunk included. */
static void test_q8_1_ggml(void) {
    tu_section("Q8_1 activations, Q4_1 / Q5_1 dot products: ggml's arithmetic, bitwise");
    const int n = WLM_QUANT_XCHUNK + 64, nb = n / 32, rows = 5;
    float *x = malloc((size_t)n * sizeof(float)), *row = malloc((size_t)n * sizeof(float));
    wlm_block_q8_1 *mine = malloc((size_t)nb * sizeof *mine), *want = malloc((size_t)nb * sizeof *want);
    for (int j = 0; j < n; j++) x[j] = gauss() * (j % 5 == 0 ? 3.0f : 1.0f);
    int s_rounding = 0; /* blocks where fp16(sum * d) != fp16(sum * fp16(d)): the test can tell */
    for (int b = 0; b < nb; b++) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[32 * b + j]));
        const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        int sum = 0;
        for (int j = 0; j < 32; j++) {
            want[b].qs[j] = (int8_t)roundf(x[32 * b + j] * id);
            sum += want[b].qs[j];
        }
        want[b].d = wlm_fp32_to_fp16(d);
        want[b].s = wlm_fp32_to_fp16((float)sum * d);
        s_rounding += want[b].s != wlm_fp32_to_fp16((float)sum * wlm_fp16_to_fp32(want[b].d));
    }
    wlm_quantize_q8_1_ref(x, mine, n);
    CHECKF(memcmp(mine, want, (size_t)nb * sizeof *mine) == 0, "Q8_1 reference bytes != ggml's");
    wlm_quantize_q8_1_simd(x, mine, n);
    CHECKF(memcmp(mine, want, (size_t)nb * sizeof *mine) == 0, "Q8_1 SIMD bytes != ggml's");
    CHECKF(s_rounding > 0, "no block where s's rounding matters (%d of %d)", s_rounding, nb);
    printf("Q8_1: %d of %d blocks where fp16(sum * d) != fp16(sum * fp16(d))\n", s_rounding, nb);
    static const int32_t types[] = {WLM_TYPE_Q4_1, WLM_TYPE_Q5_1};
    for (int ti = 0; ti < 2; ti++) {
        const wlm_type_traits *t = wlm_type_get(types[ti]);
        const size_t rb = wlm_row_bytes(types[ti], n);
        unsigned char *w = malloc((size_t)rows * rb);
        for (int r = 0; r < rows; r++) {
            for (int j = 0; j < n; j++) row[j] = gauss() * (r + 1) + (r % 2 ? 0.5f : -0.25f);
            t->from_float(row, w + (size_t)r * rb, n);
        }
        float expect[5], ref[5], simd[5];
        for (int r = 0; r < rows; r++) {
            float sumf = 0.0f;
            for (int b = 0; b < nb; b++) {
                const unsigned char *blk = w + (size_t)r * rb + (size_t)b * t->type_size;
                wlm_fp16 dw, mw;
                memcpy(&dw, blk, 2);
                memcpy(&mw, blk + 2, 2);
                uint32_t qh = 0;
                const unsigned char *qs = blk + 4;
                if (types[ti] == WLM_TYPE_Q5_1) {
                    memcpy(&qh, blk + 4, 4);
                    qs = blk + 8;
                }
                int sumi0 = 0, sumi1 = 0;
                for (int j = 0; j < 16; j++) {
                    const int v0 = (qs[j] & 0x0F) | (int)((qh >> j) & 1u) << 4;
                    const int v1 = (qs[j] >> 4) | (int)((qh >> (j + 16)) & 1u) << 4;
                    sumi0 += v0 * want[b].qs[j];
                    sumi1 += v1 * want[b].qs[j + 16];
                }
                const int sumi = sumi0 + sumi1;
                sumf += (wlm_fp16_to_fp32(dw) * wlm_fp16_to_fp32(want[b].d)) * (float)sumi +
                        wlm_fp16_to_fp32(mw) * wlm_fp16_to_fp32(want[b].s);
            }
            expect[r] = sumf;
        }
        t->matvec_ref(ref, w, rb, want, n, 0, rows);
        t->matvec_simd(simd, w, rb, want, n, 0, rows);
        CHECKF(memcmp(ref, expect, sizeof ref) == 0, "%s reference != ggml's arithmetic (%.9g vs %.9g)",
               t->name, ref[0], expect[0]);
        CHECKF(memcmp(simd, expect, sizeof simd) == 0, "%s SIMD != ggml's arithmetic (%.9g vs %.9g)",
               t->name, simd[0], expect[0]);
        free(w);
    }
    free(x), free(row), free(mine), free(want);
}

/* Q8_0 / Q4_0 / Q5_0 weights with Q8_0 activations: ggml's C fallbacks (ggml_vec_dot_q8_0_q8_0,
 * q4_0_q8_0, q5_0_q8_0 in llama.cpp's ggml/src/ggml-cpu/quants.c, what its wasm build runs)
 * written out here: per block the exact integer sum (ggml splits it into the two halves; integers,
 * so any split), then sumf += sumi * (dx * dy) for Q8_0, sumi * dx * dy (left to right) for Q4_0,
 * (dx * dy) * sumi for Q5_0, x the weight block and y the activation's; blocks in order over the
 * whole row (past the kernels' column chunk, WLM_QUANT_XCHUNK). Reference and SIMD kernels must
 * give these bits; and the Q4_0 association must matter somewhere, or the test could not tell. */
static void test_q8_0_ggml(void) {
    tu_section("Q8_0 / Q4_0 / Q5_0 dot products: ggml's arithmetic, bitwise");
    /* long rows (past the column chunk), and one-block rows, whose result is the block's float
     * step alone (where the association shows most) */
    static const int shapes[2][2] = {{WLM_QUANT_XCHUNK + 64, 7}, {32, 512}};
    for (int si = 0; si < 2; si++) {
        const int n = shapes[si][0], nb = n / 32, rows = shapes[si][1];
        float *x = malloc((size_t)n * sizeof(float)), *row = malloc((size_t)n * sizeof(float));
        wlm_block_q8_0 *y = malloc((size_t)nb * sizeof *y);
        float *expect = malloc((size_t)rows * sizeof(float)), *ref = malloc((size_t)rows * sizeof(float)),
              *simd = malloc((size_t)rows * sizeof(float));
        /* every fourth block of near-constant magnitude (quants near +-127): large block sums */
        for (int j = 0; j < n; j++)
            x[j] = j / 32 % 4 == 0 ? (gauss() < 0 ? -1.0f : 1.0f) * (1.0f + 0.05f * fabsf(gauss()))
                                   : gauss() * (j % 5 == 0 ? 3.0f : 1.0f);
        wlm_quantize_q8_0_ref(x, y, n);
        static const int32_t types[] = {WLM_TYPE_Q8_0, WLM_TYPE_Q4_0, WLM_TYPE_Q5_0};
        for (int ti = 0; ti < 3; ti++) {
            const int32_t type = types[ti];
            const wlm_type_traits *t = wlm_type_get(type);
            const size_t rb = wlm_row_bytes(type, n);
            unsigned char *w = malloc((size_t)rows * rb);
            for (int r = 0; r < rows; r++) {
                /* rows following the activation's signs: block sums of 13+ bits, where
                 * (sumi * dx) * dy and sumi * (dx * dy) round differently (dx * dy of two fp16
                 * is exact in float, and so is sumi * dx for smaller sums) */
                const int follow = r % 3 == 0 || nb == 1;
                const float sc = 1.0f + (float)(r % 17) * 0.37f;
                for (int j = 0; j < n; j++)
                    row[j] = follow ? (x[j] < 0 ? -sc : sc) * (1.0f + 0.1f * fabsf(gauss()))
                                    : gauss() * (float)(r % 7 + 1) * (r % 2 ? 0.01f : 1.0f);
                t->from_float(row, w + (size_t)r * rb, n);
                /* one-block rows: some scales zero or subnormal (the kernels' exact path) */
                if (nb == 1 && r % 8 >= 6) {
                    const wlm_fp16 h = r % 8 == 6 ? (wlm_fp16)(1 + r % 1023) : (wlm_fp16)(r % 16 ? 0 : 0x8000);
                    memcpy(w + (size_t)r * rb, &h, 2);
                }
            }
            int assoc = 0; /* blocks where sumi * dx * dy != sumi * (dx * dy): the test can tell */
            for (int r = 0; r < rows; r++) {
                float sumf = 0.0f;
                for (int b = 0; b < nb; b++) {
                    const unsigned char *blk = w + (size_t)r * rb + (size_t)b * t->type_size;
                    wlm_fp16 dh;
                    memcpy(&dh, blk, 2);
                    const float dx = wlm_fp16_to_fp32(dh), dy = wlm_fp16_to_fp32(y[b].d);
                    int sumi0 = 0, sumi1 = 0;
                    if (type == WLM_TYPE_Q8_0) {
                        for (int j = 0; j < 32; j++) sumi0 += (int8_t)blk[2 + j] * y[b].qs[j];
                    } else if (type == WLM_TYPE_Q4_0) {
                        for (int j = 0; j < 16; j++) {
                            sumi0 += ((blk[2 + j] & 0x0F) - 8) * y[b].qs[j];
                            sumi1 += ((blk[2 + j] >> 4) - 8) * y[b].qs[j + 16];
                        }
                    } else {
                        uint32_t qh;
                        memcpy(&qh, blk + 2, 4);
                        for (int j = 0; j < 16; j++) {
                            const int x0 = ((blk[6 + j] & 0x0F) | (int)((qh >> j) & 1u) << 4) - 16;
                            const int x1 = ((blk[6 + j] >> 4) | (int)((qh >> (j + 16)) & 1u) << 4) - 16;
                            sumi0 += x0 * y[b].qs[j];
                            sumi1 += x1 * y[b].qs[j + 16];
                        }
                    }
                    const int sumi = sumi0 + sumi1;
                    if (type == WLM_TYPE_Q8_0)
                        sumf += (float)sumi * (dx * dy);
                    else if (type == WLM_TYPE_Q4_0)
                        sumf += (float)sumi * dx * dy;
                    else
                        sumf += (dx * dy) * (float)sumi;
                    assoc += (float)sumi * dx * dy != (float)sumi * (dx * dy);
                }
                expect[r] = sumf;
            }
            t->matvec_ref(ref, w, rb, y, n, 0, rows);
            t->matvec_simd(simd, w, rb, y, n, 0, rows);
            int bad_ref = 0, bad_simd = 0;
            for (int r = 0; r < rows; r++) {
                bad_ref += memcmp(&ref[r], &expect[r], sizeof(float)) != 0;
                bad_simd += memcmp(&simd[r], &expect[r], sizeof(float)) != 0;
            }
            CHECKF(bad_ref == 0, "%s, n = %d: reference != ggml's arithmetic in %d of %d rows",
                   t->name, n, bad_ref, rows);
            CHECKF(bad_simd == 0, "%s, n = %d: SIMD != ggml's arithmetic in %d of %d rows", t->name,
                   n, bad_simd, rows);
            CHECKF(assoc > 0, "%s, n = %d: no block where the association matters", t->name, n);
            printf("%s, n = %d: %d of %d blocks where sumi * dx * dy != sumi * (dx * dy)\n", t->name,
                   n, assoc, rows * nb);
            free(w);
        }
        free(x), free(row), free(y), free(expect), free(ref), free(simd);
    }
}

/* The SIMD activation quantizers write the reference's bytes. */
static void test_quantizer_simd(void) {
    tu_section("activation quantizers: SIMD bytes == reference bytes");
    const int n = 8192;
    float *x = malloc(n * sizeof(float));
    void *a = malloc(wlm_row_bytes(WLM_TYPE_Q8_K, n) + 64),
         *b = malloc(wlm_row_bytes(WLM_TYPE_Q8_K, n) + 64);
    for (int trial = 0; trial < 6; trial++) {
        for (int i = 0; i < n; i++) {
            switch (trial) {
            case 0:
                x[i] = gauss();
                break;
            case 1:
                x[i] = (float)((int)(tu_rng_u64(&rng) % 255) - 127) * 0.5f;
                break; /* .5 ties */
            case 2:
                x[i] = (i / 256) % 2 ? 0.0f : gauss() * 1e-30f;
                break; /* zero and tiny blocks */
            case 3:
                x[i] = (float)(i % 7) - 3.0f;
                break; /* +-3 ties in magnitude */
            case 4:
                x[i] = gauss() * 1e4f;
                break;
            default: /* specials: no crash, same bytes */
                x[i] = gauss();
                if (i % 50 == 1) x[i] = NAN;
                if (i % 333 == 2) x[i] = INFINITY;
                if (i % 777 == 3) x[i] = -INFINITY;
                if (i % 91 == 4) x[i] = 1e-42f; /* subnormal */
                break;
            }
        }
        for (int pass = 0; pass < 3; pass++) {
            const int32_t type = pass == 2 ? WLM_TYPE_Q8_1 : pass ? WLM_TYPE_Q8_K : WLM_TYPE_Q8_0;
            const size_t bytes = wlm_row_bytes(type, n);
            memset(a, 0x55, bytes);
            memset(b, 0xAA, bytes);
            if (pass == 2) {
                wlm_quantize_q8_1_ref(x, a, n);
                wlm_quantize_q8_1_simd(x, b, n);
            } else if (pass) {
                wlm_quantize_q8_K_ref(x, a, n);
                wlm_quantize_q8_K_simd(x, b, n);
            } else {
                wlm_quantize_q8_0_ref(x, a, n);
                wlm_quantize_q8_0_simd(x, b, n);
            }
            if (trial < 5) {
                CHECKF(memcmp(a, b, bytes) == 0, "%s trial %d: SIMD bytes differ",
                       wlm_type_get(type)->name, trial);
            } else { /* with NaN and Inf only the finite blocks must agree */
                const size_t bs = wlm_type_get(type)->type_size,
                             per = (size_t)wlm_type_get(type)->block_size;
                int diff = 0, finite_blocks = 0;
                for (size_t k = 0; k < (size_t)n / per; k++) {
                    int finite = 1;
                    for (size_t j = 0; j < per; j++) finite &= isfinite(x[k * per + j]) != 0;
                    if (!finite) continue;
                    finite_blocks++;
                    diff += memcmp((char *)a + k * bs, (char *)b + k * bs, bs) != 0;
                }
                CHECKF(diff == 0, "%s: %d of %d finite blocks differ", wlm_type_get(type)->name,
                       diff, finite_blocks);
            }
        }
    }
    free(x);
    free(a);
    free(b);
}

/* ------------------------------------------------------------------------------------------ */
/* Matrix-vector kernels: reference vs dequantize-then-dot in double, SIMD vs reference.      */

typedef struct {
    int bad_exact, bad_act, bad_simd, bad_outside, bad_bits, bad_simd128, near_checked;
    double worst_simd;
} mv_stats;

/* One matrix: `rows` x n of `type` (rows padded by `pad` bytes), rows [r0, r1). */
static void check_matvec(int32_t type, int rows, int n, int r0, int r1, size_t pad, mv_stats *st) {
    const wlm_type_traits *t = wlm_type_get(type);
    const int32_t vdt = t->vec_dot_type;
    const wlm_type_traits *vt = wlm_type_get(vdt);
    const size_t row_bytes = wlm_row_bytes(type, n) + pad;
    unsigned char *w = malloc((size_t)rows * row_bytes + 1);
    float *wf = malloc((size_t)n * sizeof(float)), *row = malloc((size_t)n * sizeof(float));
    float *x = malloc((size_t)n * sizeof(float)), *xf = malloc((size_t)n * sizeof(float));
    float *o1 = malloc((size_t)(rows + 2) * sizeof(float)),
          *o2 = malloc((size_t)(rows + 2) * sizeof(float));
    const size_t xq_bytes = vdt == WLM_TYPE_F32 ? (size_t)n * sizeof(float) : wlm_row_bytes(vdt, n);
    void *xq = malloc(xq_bytes), *xq_ref = malloc(xq_bytes);
    memset(w, 0x5A, (size_t)rows * row_bytes + 1);
    for (int r = 0; r < rows; r++) {
        const float s = r % 3 == 0 ? 0.02f : r % 3 == 1 ? 1.0f : 7.0f;
        for (int j = 0; j < n; j++) row[j] = gauss() * s;
        if (r == 1) memset(row, 0, (size_t)n * sizeof(float)); /* an all-zero row */
        t->from_float(row, w + (size_t)r * row_bytes, n);
    }
    for (int j = 0; j < n; j++) x[j] = gauss() * (j % 5 == 0 ? 3.0f : 1.0f);
    if (vdt == WLM_TYPE_F32) {
        memcpy(xq, x, xq_bytes);
        memcpy(xf, x, xq_bytes);
    } else {
        vt->from_float(x, xq, n);
        if (vdt == WLM_TYPE_Q8_0)
            wlm_quantize_q8_0_ref(x, xq_ref, n);
        else if (vdt == WLM_TYPE_Q8_1)
            wlm_quantize_q8_1_ref(x, xq_ref, n);
        else
            wlm_quantize_q8_K_ref(x, xq_ref, n);
        if (memcmp(xq, xq_ref, xq_bytes) != 0) st->bad_exact += 1000000; /* loud */
        vt->to_float(xq, xf, n);
    }
    /* per-element bound of |x - xf|, from the activation format */
    float *xerr = malloc((size_t)n * sizeof(float));
    for (int j = 0; j < n; j++) {
        if (vdt == WLM_TYPE_F32)
            xerr[j] = 0;
        else if (vdt == WLM_TYPE_Q8_0 || vdt == WLM_TYPE_Q8_1) {
            const int b0 = j / 32 * 32;
            float amax = 0;
            for (int k = 0; k < 32; k++) amax = fmaxf(amax, fabsf(x[b0 + k]));
            const wlm_fp16 h = vdt == WLM_TYPE_Q8_0 ? ((const wlm_block_q8_0 *)xq)[j / 32].d
                                                    : ((const wlm_block_q8_1 *)xq)[j / 32].d;
            const double d = amax / 127.0f, d16 = wlm_fp16_to_fp32(h);
            xerr[j] = (float)(d / 2 + 127 * fabs(d - d16) + 1e-6 * fabs(x[j]));
        } else {
            xerr[j] = (float)(fabs(((const wlm_block_q8_K *)xq)[j / 256].d) * 0.5 * (1 + 1e-5) +
                              1e-7 * fabs(x[j]));
        }
    }
    const float sentinel = -12345.5f;
    for (int r = 0; r < rows + 2; r++) o1[r] = o2[r] = sentinel;
    t->matvec_ref(o1 + 1, w, row_bytes, xq, n, r0, r1);
    t->matvec_simd(o2 + 1, w, row_bytes, xq, n, r0, r1);
    {   /* the relaxed build's kernels give the SIMD128 kernels' bits (the same function else) */
        float *o3 = malloc((size_t)(rows + 2) * sizeof(float));
        for (int r = 0; r < rows + 2; r++) o3[r] = sentinel;
        wlm_quant_matvec_simd128(type)(o3 + 1, w, row_bytes, xq, n, r0, r1);
        if (memcmp(o2, o3, (size_t)(rows + 2) * sizeof(float)) != 0) st->bad_simd128++;
        const wlm_qmatvec_fn split = wlm_quant_matvec_split(type); /* relaxed build: the split form */
        if (split) {
            for (int r = 0; r < rows + 2; r++) o3[r] = sentinel;
            split(o3 + 1, w, row_bytes, xq, n, r0, r1);
            if (memcmp(o2, o3, (size_t)(rows + 2) * sizeof(float)) != 0) st->bad_simd128++;
        }
        /* without read-ahead (read_ahead 0): the same bits, both forms (SIMD builds) */
        const wlm_qmatvec_fn near[2] = {wlm_quant_matvec_near(type), wlm_quant_matvec_split_near(type)};
        for (int k = 0; k < 2; k++) {
            if (!near[k]) continue;
            for (int r = 0; r < rows + 2; r++) o3[r] = sentinel;
            near[k](o3 + 1, w, row_bytes, xq, n, r0, r1);
            if (memcmp(o2, o3, (size_t)(rows + 2) * sizeof(float)) != 0) st->bad_simd128++;
            st->near_checked++;
        }
        free(o3);
    }
    const int nb = n / t->block_size;
    for (int r = -1; r <= rows; r++) {
        const float a = o1[r + 1], b = o2[r + 1];
        if (r < r0 || r >= r1) {
            if (a != sentinel || b != sentinel) st->bad_outside++;
            continue;
        }
        t->to_float(w + (size_t)r * row_bytes, wf, n);
        double exact = 0, mag = 0, exact_x = 0, act = 0;
        for (int j = 0; j < n; j++) {
            exact += (double)wf[j] * xf[j];
            mag += fabs((double)wf[j] * xf[j]);
            exact_x += (double)wf[j] * x[j];
            act += fabs((double)wf[j]) * xerr[j];
        }
        /* Q8_1: the min term is m * s, s = fp16(sum of the quants * unrounded d), not the
         * dequantized m * d16 * sum: their exact difference per block (and a rounding of each) */
        double s_err = 0;
        if (vdt == WLM_TYPE_Q8_1)
            for (int k = 0; k < nb; k++) {
                const wlm_block_q8_1 *xb = (const wlm_block_q8_1 *)xq + k;
                wlm_fp16 m;
                memcpy(&m, w + (size_t)r * row_bytes + (size_t)k * t->type_size + 2, sizeof m);
                int32_t sq = 0;
                for (int j = 0; j < 32; j++) sq += xb->qs[j];
                const double sd = (double)wlm_fp16_to_fp32(xb->s),
                             dq = (double)wlm_fp16_to_fp32(xb->d) * sq;
                s_err += fabs((double)wlm_fp16_to_fp32(m)) * (fabs(sd - dq) + 1.2e-7 * fabs(sd));
            }
        /* float: one rounding per block product and per addition of the running sum */
        const double tol = (type == WLM_TYPE_F16 ? 1e-5 : (nb + 4) * 1.2e-7) * mag + 1e-30 + s_err;
        if (!(fabs(a - exact) <= tol)) st->bad_exact++;
        if (!(fabs(a - exact_x) <= act + tol + 1e-6 * fabs(exact_x))) st->bad_act++;
        const double ds = fabs((double)a - b);
        if (!(ds <= tol)) st->bad_simd++;
        /* K-quant kernels do the reference's float arithmetic per block, in block order: the
         * same bits while a row fits one column chunk of the SIMD drivers */
        if (t->block_size == 256 && n <= WLM_QUANT_XCHUNK && memcmp(&a, &b, sizeof a) != 0)
            st->bad_bits++;
        /* Q8_0 / Q4_0 / Q5_0 (Q8_0 activations), Q4_1 / Q5_1 (Q8_1): ggml's arithmetic in its
         * order, as the reference, any length */
        if ((vdt == WLM_TYPE_Q8_0 || vdt == WLM_TYPE_Q8_1) && memcmp(&a, &b, sizeof a) != 0)
            st->bad_bits++;
        if (mag > 0 && ds / mag > st->worst_simd) st->worst_simd = ds / mag;
    }
    free(w), free(wf), free(row), free(x), free(xf), free(o1), free(o2), free(xq), free(xq_ref),
        free(xerr);
}

static void test_matvec_type(int32_t type) {
    const wlm_type_traits *t = wlm_type_get(type);
    static const int n32[] = {32, 64, 96, 128, 160, 288, 768, 4192, 8256, WLM_QUANT_XCHUNK + 96};
    static const int nK[] = {256, 512, 768, 1280, 4352, 8448, WLM_QUANT_XCHUNK + 512};
    static const int n16[] = {1, 7, 15, 16, 17, 33, 100, 288, 768, 4097};
    const int *ns = t->block_size == 1 ? n16 : t->block_size == 32 ? n32 : nK;
    const int count = t->block_size == 1 ? 10 : t->block_size == 32 ? 10 : 7;
    mv_stats st = {0, 0, 0, 0, 0, 0, 0, 0.0};
    int cases = 0;
    for (int i = 0; i < count; i++) {
        const int n = ns[i];
        const int rows = n >= 4096 ? 5 : 9;
        check_matvec(type, rows, n, 0, rows, 0, &st);                    /* all rows */
        check_matvec(type, rows, n, 2, rows - 1, 0, &st);                /* a range inside */
        check_matvec(type, 1, n, 0, 1, 0, &st);                          /* one row */
        check_matvec(type, 7, n, 3, 4, t->block_size == 1 ? 6 : 2, &st); /* padded rows */
        check_matvec(type, 6, n, 4, 4, 0, &st);                          /* empty range */
        cases += 5;
    }
    CHECKF(st.bad_exact == 0, "%s: %d rows differ from dequantize-then-dot", t->name, st.bad_exact);
    CHECKF(st.bad_act == 0, "%s: %d rows beyond the activation quantization bound", t->name,
           st.bad_act);
    CHECKF(st.bad_simd == 0, "%s: %d SIMD rows differ from the reference beyond float order",
           t->name, st.bad_simd);
    CHECKF(st.bad_outside == 0, "%s: %d rows outside the range written", t->name, st.bad_outside);
    CHECKF(st.bad_bits == 0, "%s: %d SIMD rows not bitwise equal to the reference", t->name,
           st.bad_bits);
    CHECKF(st.bad_simd128 == 0,
           "%s: %d matrices where the kernel's (or its split dot form's, or either one's without "
           "read-ahead) bits differ from SIMD128's",
           t->name, st.bad_simd128);
    /* the quantized types have kernels without read-ahead wherever there is SIMD */
    if (wlm_quant_have_simd() && t->block_size > 1 && type != WLM_TYPE_BF16)
        CHECKF(st.near_checked > 0, "%s: no kernel without read-ahead was compared", t->name);
    printf("%s: %d matrices; worst |simd - ref| / sum|terms| = %.3g\n", t->name, cases,
           st.worst_simd);
}

/* The value of an MXFP4 code, from the E2M1 definition (sign bit 3, exponent bits 2..1 with
 * bias 1, mantissa bit 0; exponent 0: subnormal m x 0.5), independent of the kernels' table. */
static double e2m1_value(int code) {
    const int s = code >> 3, e = (code >> 1) & 3, m = code & 1;
    const double v = e == 0 ? 0.5 * m : ldexp(1.0 + 0.5 * m, e - 1);
    return s ? -v : v;
}

/* MXFP4: every 4-bit code under every exponent byte (0 and 1: the subnormal scales, 255: 2^127)
 * decoded against e2m1_value(code) x 2^(e - 127); the quantizer on known vectors (exact E2M1
 * values, ties to the lower code, the exponent of a block's largest magnitude, all-zero
 * blocks); and the matrix-vector kernels under every exponent: one block per row with exponent
 * e = row, the reference against the exact product (the float step of ggml: one rounding of
 * dx * dw, one of the product) and the SIMD kernels bitwise. */
static void test_mxfp4(void) {
    tu_section("MXFP4: every code x every exponent, quantizer, kernels under every exponent");
    const wlm_type_traits *t = wlm_type_get(WLM_TYPE_MXFP4);
    int bad = 0;
    for (int e = 0; e < 256; e++) {
        wlm_block_mxfp4 b;
        b.e = (uint8_t)e;
        for (int j = 0; j < 16; j++) b.qs[j] = (uint8_t)(j | (15 - j) << 4);
        float y[32];
        t->to_float(&b, y, 32);
        for (int j = 0; j < 32; j++) {
            const int code = j < 16 ? j : 15 - (j - 16);
            double want = e2m1_value(code) * ldexp(1.0, e - 127);
            if (fabs(want) > FLT_MAX) want = want > 0 ? INFINITY : -INFINITY; /* 8 x 2^125 up */
            if ((double)y[j] != want) {
                if (bad < 5) printf("  e=%d code=%d: %g, want %g\n", e, code, y[j], want);
                bad++;
            }
        }
    }
    CHECKF(bad == 0, "MXFP4: %d of 256 x 32 decoded values wrong", bad);
    {   /* the E2M1 values themselves (largest 6: e = floor(log2 6) - 2 + 127 = 127, step 0.5) */
        float x[32];
        for (int j = 0; j < 16; j++) x[j] = (float)e2m1_value(j), x[j + 16] = (float)-e2m1_value(j);
        wlm_block_mxfp4 b;
        t->from_float(x, &b, 32);
        CHECK_EQ_INT(b.e, 127);
        int badc = 0;
        for (int j = 0; j < 16; j++) {
            const int lo = b.qs[j] & 15, hi = b.qs[j] >> 4;
            /* -0 and +0 are one value: the lower code (0) wins the tie */
            const int want_lo = j == 8 ? 0 : j, want_hi = j == 0 || j == 8 ? 0 : j ^ 8;
            badc += lo != want_lo || hi != want_hi;
        }
        CHECKF(badc == 0, "MXFP4 quantizer: %d of 16 bytes of exact E2M1 values wrong", badc);
        /* ties between two values go to the lower code: 2.5 (codes 4, 5) -> 4, -2.5 (12, 13)
         * -> 12, 5 (6, 7) -> 6, +-0.25 (0, 1 / 0, 9) -> 0; 6 (the block's largest) -> 7 */
        const float tie[6] = {2.5f, -2.5f, 5.0f, 0.25f, -0.25f, 6.0f};
        const int want[6] = {4, 12, 6, 0, 0, 7};
        memset(x, 0, sizeof x);
        for (int k = 0; k < 6; k++) x[k] = tie[k];
        t->from_float(x, &b, 32);
        CHECK_EQ_INT(b.e, 127);
        int badt = 0;
        for (int k = 0; k < 6; k++) badt += (b.qs[k] & 15) != want[k];
        CHECKF(badt == 0, "MXFP4 quantizer: %d of 6 ties wrong", badt);
        /* the exponent follows the largest magnitude: 1.0 -> 0 - 2 + 127 = 125 (step 2^-3: 1.0
         * is K = 8, code 6), 1000 -> floor(log2 1000) = 9 -> 134; an all-zero block -> 0 */
        memset(x, 0, sizeof x);
        x[3] = 1.0f;
        t->from_float(x, &b, 32);
        CHECK_EQ_INT(b.e, 125);
        CHECK_EQ_INT(b.qs[3] & 15, 6); /* K = 8: 8 x 2^(125 - 128) = 1 */
        x[3] = -1000.0f;
        t->from_float(x, &b, 32);
        CHECK_EQ_INT(b.e, 134);
        memset(x, 0, sizeof x);
        t->from_float(x, &b, 32);
        CHECK(b.e == 0);
    }
    {   /* kernels: 256 rows of one block, row r with exponent r, codes and activation random */
        enum { ROWS = 256 };
        wlm_block_mxfp4 w[ROWS];
        for (int r = 0; r < ROWS; r++) {
            w[r].e = (uint8_t)r;
            for (int j = 0; j < 16; j++) w[r].qs[j] = (uint8_t)tu_rng_u64(&rng);
        }
        float x[32], o1[ROWS], o2[ROWS], o3[ROWS];
        for (int j = 0; j < 32; j++) x[j] = gauss();
        wlm_block_q8_0 xq;
        wlm_quantize_q8_0_simd(x, &xq, 32);
        t->matvec_ref(o1, w, sizeof w[0], &xq, 32, 0, ROWS);
        t->matvec_simd(o2, w, sizeof w[0], &xq, 32, 0, ROWS);
        wlm_quant_matvec_simd128(WLM_TYPE_MXFP4)(o3, w, sizeof w[0], &xq, 32, 0, ROWS);
        int bad_ref = 0, bad_simd = 0;
        for (int r = 0; r < ROWS; r++) {
            int32_t isum = 0;
            for (int j = 0; j < 16; j++)
                isum += (int32_t)(e2m1_value(w[r].qs[j] & 15) * 2) * xq.qs[j] +
                        (int32_t)(e2m1_value(w[r].qs[j] >> 4) * 2) * xq.qs[j + 16];
            /* ggml's float step: d = dx * 2^(e - 128) rounded to float (subnormal for small e),
             * then d * isum rounded */
            const float d = (float)((double)wlm_fp16_to_fp32(xq.d) * ldexp(1.0, r - 128));
            const float want = (float)((double)d * isum);
            if (memcmp(&o1[r], &want, sizeof want) != 0) {
                if (bad_ref < 5) printf("  e=%d: %g, want %g\n", r, o1[r], want);
                bad_ref++;
            }
            bad_simd += memcmp(&o1[r], &o2[r], sizeof(float)) != 0 ||
                        memcmp(&o1[r], &o3[r], sizeof(float)) != 0;
        }
        CHECKF(bad_ref == 0, "MXFP4 matvec reference: %d of 256 exponents differ from ggml's step",
               bad_ref);
        CHECKF(bad_simd == 0, "MXFP4 matvec SIMD: %d of 256 exponents differ from the reference",
               bad_simd);
        CHECK(isinf(o1[255]) || o1[255] == 0.0f || fabsf(o1[255]) > 1e30f); /* 2^127 scale */
    }
}

/* F16 weights with zeros, subnormals, Inf and NaN take the SIMD kernel's slow path. */
static void test_f16_specials(void) {
    tu_section("F16 matvec: zeros, subnormals, Inf, NaN");
    const int n = 200, rows = 4;
    wlm_fp16 *w = malloc((size_t)rows * n * sizeof(wlm_fp16));
    float x[200], o1[4], o2[4];
    for (int j = 0; j < n; j++) x[j] = gauss();
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < n; j++) {
            float v = gauss();
            if (j % 3 == 0) v = 0.0f;
            if (j % 5 == 1) v = ldexpf(gauss(), -20); /* subnormal halves */
            w[r * n + j] = wlm_fp32_to_fp16(v);
        }
    w[2 * n + 40] = 0x7c00; /* +Inf in row 2 */
    w[3 * n + 70] = 0x7e01; /* NaN in row 3 */
    wlm_f16_matvec_ref(o1, w, n * sizeof(wlm_fp16), x, n, 0, rows);
    wlm_f16_matvec_simd(o2, w, n * sizeof(wlm_fp16), x, n, 0, rows);
    for (int r = 0; r < 2; r++) CHECK_NEAR(o1[r], o2[r], 1e-5 * (1 + fabs(o1[r])));
    CHECK(isinf(o1[2]) && isinf(o2[2]) && (o1[2] > 0) == (o2[2] > 0));
    CHECK(isnan(o1[3]) && isnan(o2[3]));
    free(w);
}

/* The kernels read ahead of the rows they compute (Q8_0 and Q4_0 touch blocks further on, the
 * K-quant drivers sweep a row pair first), but never past the last row of their range: a model's
 * last tensor may end where linear memory ends, and a read one byte further traps. Checked for
 * real in wasm: the matrix is placed so that its last row ends exactly at the end of memory
 * (above the allocator's break, where nothing else lives), with whole ranges and ranges that
 * end at the last row; results must equal the same matrix's elsewhere. */
static void test_matvec_memory_end(void) {
    tu_section("matvec: rows ending exactly at the end of linear memory");
#if defined(__wasm__)
    static const int32_t types[] = {WLM_TYPE_F32,  WLM_TYPE_F16,  WLM_TYPE_Q8_0, WLM_TYPE_Q4_0,
                                    WLM_TYPE_Q4_K, WLM_TYPE_Q6_K, WLM_TYPE_BF16, WLM_TYPE_Q4_1,
                                    WLM_TYPE_Q5_0, WLM_TYPE_Q5_1, WLM_TYPE_Q2_K, WLM_TYPE_Q3_K,
                                    WLM_TYPE_Q5_K, WLM_TYPE_MXFP4};
    const int rows = 37, n = 2048;
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const wlm_type_traits *t = wlm_type_get(types[ti]);
        const int32_t vdt = t->vec_dot_type;
        const size_t row_bytes = wlm_row_bytes(types[ti], n), bytes = (size_t)rows * row_bytes;
        unsigned char *w = malloc(bytes);
        float *row = malloc((size_t)n * sizeof(float)), *x = malloc((size_t)n * sizeof(float));
        const size_t xq_bytes =
            vdt == WLM_TYPE_F32 ? (size_t)n * sizeof(float) : wlm_row_bytes(vdt, n);
        void *xq = malloc(xq_bytes);
        float *want = malloc((size_t)rows * sizeof(float));
        float *got = malloc((size_t)rows * sizeof(float));
        for (int r = 0; r < rows; r++) {
            for (int j = 0; j < n; j++) row[j] = gauss();
            t->from_float(row, w + (size_t)r * row_bytes, n);
        }
        for (int j = 0; j < n; j++) x[j] = gauss();
        if (vdt == WLM_TYPE_F32)
            memcpy(xq, x, xq_bytes);
        else
            wlm_type_get(vdt)->from_float(x, xq, n);
        t->matvec_simd(want, w, row_bytes, xq, n, 0, rows);
        /* the end of memory, grown by sbrk if the room above the break is too small; no
         * allocation happens from here to the end of the checks */
        uintptr_t brk = (uintptr_t)sbrk(0), end = __builtin_wasm_memory_size(0) * 65536;
        if (end - brk < bytes) {
            CHECKF(sbrk((intptr_t)bytes) != (void *)-1, "%s: sbrk failed", t->name);
            end = __builtin_wasm_memory_size(0) * 65536;
        }
        unsigned char *tail = (unsigned char *)(end - bytes);
        memcpy(tail, w, bytes);
        int diff = 0;
        static const int ranges[][2] = {{0, 37}, {36, 37}, {20, 37}, {5, 30}};
        for (int k = 0; k < 4; k++) {
            const int r0 = ranges[k][0], r1 = ranges[k][1];
            t->matvec_simd(got, tail, row_bytes, xq, n, r0, r1);
            for (int r = r0; r < r1; r++) diff += memcmp(&got[r], &want[r], sizeof(float)) != 0;
            t->matvec_ref(got, tail, row_bytes, xq, n, r0, r1); /* the reference, too */
        }
        CHECKF(diff == 0, "%s: %d rows differ at the end of memory", t->name, diff);
        free(w), free(row), free(x), free(xq), free(want), free(got);
    }
#else
    printf("(wasm only: natively the SIMD kernels are the references)\n");
#endif
}

/* Arbitrary quant bytes (every bit pattern, Q8_0's -128 included) under sane fp16 scales: the
 * relaxed build's kernels must give the SIMD128 kernels' bits exactly (in the other builds the
 * two are one function, and this checks nothing new). Offsets of each block's fp16 fields. */
static void test_simd128_bits(void) {
    static const struct {
        int32_t type;
        int f16[2]; /* byte offsets of the block's fp16 scales (-1: none) */
    } cases[] = {{WLM_TYPE_Q8_0, {0, -1}},  {WLM_TYPE_Q4_0, {0, -1}},  {WLM_TYPE_Q4_1, {0, 2}},
                 {WLM_TYPE_Q5_0, {0, -1}},  {WLM_TYPE_Q5_1, {0, 2}},   {WLM_TYPE_Q2_K, {80, 82}},
                 {WLM_TYPE_Q3_K, {108, -1}}, {WLM_TYPE_Q4_K, {0, 2}},  {WLM_TYPE_Q5_K, {0, 2}},
                 {WLM_TYPE_Q6_K, {208, -1}}, {WLM_TYPE_MXFP4, {-1, -1}}};
    static const int ns32[] = {32, 416, 4160, WLM_QUANT_XCHUNK + 64};
    static const int nsK[] = {256, 1536, 4352, WLM_QUANT_XCHUNK + 256};
    printf("relaxed-SIMD kernels compiled in: %d\n", wlm_quant_have_relaxed());
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const wlm_type_traits *t = wlm_type_get(cases[c].type);
        const wlm_type_traits *vt = wlm_type_get(t->vec_dot_type);
        /* the split dot form's kernel: in the relaxed build for every type, else none */
        const wlm_qmatvec_fn split = wlm_quant_matvec_split(cases[c].type);
        CHECKF((split != NULL) == (wlm_quant_have_relaxed() != 0),
               "%s: a split-form kernel %s in a build %s relaxed SIMD", t->name,
               split ? "exists" : "is missing", wlm_quant_have_relaxed() ? "with" : "without");
        int bad = 0, bad_split = 0;
        for (int k = 0; k < 4; k++) {
            const int n = t->block_size == 32 ? ns32[k] : nsK[k], rows = 7;
            const size_t rb = wlm_row_bytes(cases[c].type, n);
            const int nb = n / t->block_size;
            unsigned char *w = malloc((size_t)rows * rb);
            for (size_t i = 0; i < (size_t)rows * rb; i++) w[i] = (unsigned char)tu_rng_u64(&rng);
            for (int b = 0; b < rows * nb; b++)
                for (int f = 0; f < 2; f++)
                    if (cases[c].f16[f] >= 0) {
                        const uint16_t h = (uint16_t)(0x1C00 + tu_rng_u64(&rng) % 0x2000);
                        memcpy(w + (size_t)b * t->type_size + cases[c].f16[f], &h, 2);
                    }
            if (cases[c].type == WLM_TYPE_MXFP4) /* exponents 2^-28 .. 2^3: no Inf, no NaN */
                for (int b = 0; b < rows * nb; b++)
                    w[(size_t)b * t->type_size] = (unsigned char)(100 + tu_rng_u64(&rng) % 32);
            float *x = malloc((size_t)n * sizeof(float));
            for (int j = 0; j < n; j++) x[j] = gauss() * (j % 7 == 0 ? 4.0f : 1.0f);
            void *xq = malloc(wlm_row_bytes(t->vec_dot_type, n));
            vt->from_float(x, xq, n);
            float o1[7], o2[7], o3[7];
            t->matvec_simd(o1, w, rb, xq, n, 0, rows);
            wlm_quant_matvec_simd128(cases[c].type)(o2, w, rb, xq, n, 0, rows);
            bad += memcmp(o1, o2, sizeof o1) != 0;
            if (split) {
                split(o3, w, rb, xq, n, 0, rows);
                bad_split += memcmp(o3, o2, sizeof o3) != 0;
            }
            free(w), free(x), free(xq);
        }
        CHECKF(bad == 0, "%s: %d of 3 matrices of arbitrary quants differ from SIMD128's bits",
               t->name, bad);
        CHECKF(bad_split == 0,
               "%s: %d of 3 matrices of arbitrary quants: the split dot form differs from SIMD128's bits",
               t->name, bad_split);
    }
}

/* The build's matrix-matrix kernels (relaxed SIMD: Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, MXFP4 and the
 * K-quants; SIMD128: Q8_0, Q4_0, Q5_0, MXFP4) against the matrix-vector kernel per entry, bitwise: batch sizes around the
 * four-entry step, odd row ranges, rows over several column chunks, arbitrary quant bytes. */
static void test_matmat(void) {
    static const int32_t types[] = {WLM_TYPE_Q8_0, WLM_TYPE_Q4_0, WLM_TYPE_Q5_0, WLM_TYPE_Q4_K,
                                    WLM_TYPE_Q6_K, WLM_TYPE_Q4_1, WLM_TYPE_Q5_1, WLM_TYPE_Q2_K,
                                    WLM_TYPE_Q3_K, WLM_TYPE_Q5_K, WLM_TYPE_MXFP4};
    /* one block, a few, past the matrix-matrix kernels' 4096-column chunk, and past the
     * matrix-vector kernels' (WLM_QUANT_XCHUNK: the K-quants' chunk sums) */
    static const int ns32[] = {64, 768, 4160, WLM_QUANT_XCHUNK + 64};
    static const int nsK[] = {256, 768, 4352, WLM_QUANT_XCHUNK + 256};
    for (size_t c = 0; c < sizeof types / sizeof types[0]; c++) {
        const wlm_type_traits *t = wlm_type_get(types[c]);
        const wlm_type_traits *vt = wlm_type_get(t->vec_dot_type);
        wlm_qmatmat_fn mm = wlm_quant_matmat_simd(types[c]);
        printf("%s: matrix-matrix kernel: %s\n", t->name, mm ? "yes" : "none (per-entry matvec)");
        /* the split dot form's: where the fused one exists, in the relaxed build */
        wlm_qmatmat_fn mms = wlm_quant_matmat_split(types[c]);
        CHECKF((mms != NULL) == (mm != NULL && wlm_quant_have_relaxed()),
               "%s: the split form's matrix-matrix kernel %s", t->name, mms ? "exists" : "is missing");
        if (!mm) continue;
        int bad = 0, bad_split = 0, cases = 0;
        for (int k = 0; k < 4; k++) {
            /* entries 1..9, and 67: past a group of the panel kernels' 64 (relaxed_blocks32.inc) */
            const int n = t->block_size == 32 ? ns32[k] : nsK[k], rows = 11, ne_max = 67;
            const size_t rb = wlm_row_bytes(types[c], n), xs = wlm_row_bytes(t->vec_dot_type, n) + 6;
            unsigned char *w = malloc((size_t)rows * rb);
            for (size_t i = 0; i < (size_t)rows * rb; i++) w[i] = (unsigned char)tu_rng_u64(&rng);
            /* the 32-element types' odd rows at large levels of one sign (bytes | 0xCC), against
             * activations of one sign (entries 2, 3, 6, 7, ...; below): block sums past 2^13,
             * whose float steps round differently in another order ((isum dw) dx against
             * isum (dw dx): a kernel that swapped them passed on small sums, where both are
             * exact; seen failing so) */
            if (t->block_size == 32)
                for (int r = 1; r < rows; r += 2)
                    for (size_t i = 0; i < rb; i++) w[(size_t)r * rb + i] |= 0xCC;
            /* finite fp16 scales: d at offset 0 (Q6_K's and Q3_K's at the end, Q2_K's before
             * its dmin at the end), then Q4_K's / Q5_K's / Q2_K's dmin or the min of Q4_1 /
             * Q5_1 (whose activations are Q8_1) */
            const int32_t ty = types[c];
            const size_t doff = ty == WLM_TYPE_Q6_K || ty == WLM_TYPE_Q3_K ? t->type_size - 2
                                : ty == WLM_TYPE_Q2_K                     ? t->type_size - 4
                                                                          : 0;
            const int nd = ty == WLM_TYPE_Q4_K || ty == WLM_TYPE_Q5_K || ty == WLM_TYPE_Q2_K ||
                                   t->vec_dot_type == WLM_TYPE_Q8_1
                               ? 2
                               : 1;
            for (int b = 0; b < rows * (n / t->block_size); b++)
                for (int f = 0; f < nd; f++) {
                    const uint16_t h = (uint16_t)(0x1C00 + tu_rng_u64(&rng) % 0x2000);
                    memcpy(w + (size_t)b * t->type_size + doff + 2 * f, &h, 2);
                }
            if (ty == WLM_TYPE_MXFP4) /* E8M0 exponents 100..131 (no Inf: none or NaN sums) */
                for (int b = 0; b < rows * (n / t->block_size); b++)
                    w[(size_t)b * t->type_size] = (unsigned char)(100 + tu_rng_u64(&rng) % 32);
            unsigned char *xq = malloc(xs * ne_max);
            float *x = malloc((size_t)n * sizeof(float));
            for (int e = 0; e < ne_max; e++) {
                for (int j = 0; j < n; j++) x[j] = (e & 2 ? fabsf(gauss()) : gauss()) * (e + 1);
                vt->from_float(x, xq + (size_t)e * xs, n);
            }
            const size_t os = rows + 3;
            float *o1 = malloc(os * ne_max * sizeof(float)), *o2 = malloc(os * ne_max * sizeof(float));
            static const int ranges[][2] = {{0, 11}, {3, 10}, {5, 6}};
            for (int ne = 1; ne <= ne_max; ne = ne == 9 ? ne_max : ne + 1)
                for (int g = 0; g < 3; g++) {
                    const int r0 = ranges[g][0], r1 = ranges[g][1];
                    for (size_t i = 0; i < os * ne_max; i++) o1[i] = o2[i] = -7.25f;
                    mm(o1, os, w, rb, xq, xs, n, r0, r1, ne);
                    for (int e = 0; e < ne; e++)
                        t->matvec_simd(o2 + (size_t)e * os, w, rb, xq + (size_t)e * xs, n, r0, r1);
                    bad += memcmp(o1, o2, os * ne_max * sizeof(float)) != 0;
                    if (mms) { /* the split form's batch kernel: the fused per-entry bits too */
                        for (size_t i = 0; i < os * ne_max; i++) o1[i] = -7.25f;
                        mms(o1, os, w, rb, xq, xs, n, r0, r1, ne);
                        bad_split += memcmp(o1, o2, os * ne_max * sizeof(float)) != 0;
                    }
                    cases++;
                }
            free(w), free(xq), free(x), free(o1), free(o2);
        }
        CHECKF(bad == 0, "%s: %d of %d batches differ from the per-entry matvec's bits", t->name,
               bad, cases);
        CHECKF(bad_split == 0, "%s: %d of %d split-form batches differ from the per-entry matvec's bits",
               t->name, bad_split, cases);
    }
}

/* The batch kernels at the edges of their integer ranges (issue 25: the split form sums a
 * block's products in int16 before widening): weights at the largest and smallest levels (every
 * quant byte 0xFF, 0x7F, 0x80 or 0x00: Q4 / Q5 levels 15 / 31 and 0, Q8_0 quants 127, -128, -1
 * and 0) against activations whose quants are all +127, all -127 or alternate, in both dot forms
 * and against the scalar reference per entry, bitwise: a sum that wrapped or saturated in int16
 * would show here (with these weights and activations every product has the same sign). */
static void test_matmat_extremes(void) {
    static const int32_t types[] = {WLM_TYPE_Q8_0, WLM_TYPE_Q4_0, WLM_TYPE_Q5_0, WLM_TYPE_Q4_1,
                                    WLM_TYPE_Q5_1};
    static const unsigned char fill[4] = {0xFF, 0x7F, 0x80, 0x00};
    enum { N = 256, ROWS = 4, NE = 8 };
    for (size_t c = 0; c < sizeof types / sizeof types[0]; c++) {
        const wlm_type_traits *t = wlm_type_get(types[c]);
        const wlm_type_traits *vt = wlm_type_get(t->vec_dot_type);
        const wlm_qmatmat_fn forms[2] = {wlm_quant_matmat_simd(types[c]),
                                         wlm_quant_matmat_split(types[c])};
        if (!forms[0]) continue;
        const size_t rb = wlm_row_bytes(types[c], N), xs = wlm_row_bytes(t->vec_dot_type, N);
        unsigned char *w = malloc(ROWS * rb), *xq = malloc(NE * xs);
        /* scale (and Q4_1 / Q5_1's min) 1.0 at the block's start, the rest the row's byte */
        const int nd = t->vec_dot_type == WLM_TYPE_Q8_1 ? 2 : 1;
        for (int r = 0; r < ROWS; r++)
            for (int b = 0; b < N / 32; b++) {
                unsigned char *blk = w + (size_t)r * rb + (size_t)b * t->type_size;
                memset(blk, fill[r], t->type_size);
                for (int f = 0; f < nd; f++) blk[2 * f] = 0x00, blk[2 * f + 1] = 0x3C;
            }
        float x[N];
        for (int e = 0; e < NE; e++) {
            for (int j = 0; j < N; j++)
                x[j] = e % 4 == 0 ? 1.0f : e % 4 == 1 ? -1.0f : e % 4 == 2 ? (j & 1 ? 1.0f : -1.0f) : gauss();
            vt->from_float(x, xq + (size_t)e * xs, N);
        }
        float ref[NE * ROWS], o[NE * ROWS];
        for (int e = 0; e < NE; e++)
            t->matvec_ref(ref + e * ROWS, w, rb, xq + (size_t)e * xs, N, 0, ROWS);
        for (int f = 0; f < 2; f++) {
            if (!forms[f]) continue;
            for (int i = 0; i < NE * ROWS; i++) o[i] = -7.25f;
            forms[f](o, ROWS, w, rb, xq, xs, N, 0, ROWS, NE);
            int bad = 0;
            for (int i = 0; i < NE * ROWS; i++) bad += memcmp(&o[i], &ref[i], sizeof(float)) != 0;
            CHECKF(bad == 0, "%s: %s form, extreme levels and activations: %d of %d results differ "
                   "from the scalar reference (e.g. %.9g vs %.9g)", t->name, f ? "split" : "fused",
                   bad, NE * ROWS, o[0], ref[0]);
        }
        free(w), free(xq);
    }
}

/* The dot-form probe, matrix-vector and batch: both forms give the same checksum in the relaxed
 * build; -1 for a form that this build does not have, and for an unknown one. */
static void test_dot_probe(void) {
    for (int batch = 0; batch < 2; batch++) {
        const double f = wlm_quant_dot_probe(WLM_DOT_FUSED, batch, 3);
        const double s = wlm_quant_dot_probe(WLM_DOT_SPLIT, batch, 3);
        if (wlm_quant_have_relaxed()) {
            CHECKF(f > 0 && f == s, "dot probe (batch %d): fused %.9g, split %.9g (the same expected)",
                   batch, f, s);
            CHECKF(wlm_quant_dot_probe(WLM_DOT_SPLIT, batch, 0) == 0, "dot probe: 0 iterations give 0");
        } else {
            CHECKF(f == -1 && s == -1,
                   "dot probe (batch %d) without relaxed SIMD: fused %g, split %g (-1 expected)", batch,
                   f, s);
        }
        CHECKF(wlm_quant_dot_probe(2, batch, 3) == -1 && wlm_quant_dot_probe(-1, batch, 3) == -1,
               "dot probe: an unknown form gives -1");
    }
}

int main(void) {
    test_fp16();
    test_traits();
    test_layouts();
    test_known_vectors();
    test_tiny_matvec();
    tu_section("quantize -> dequantize bounds");
    test_roundtrip(WLM_TYPE_Q8_0, 0.006);
    test_roundtrip(WLM_TYPE_Q4_0, 0.10);
    test_roundtrip(WLM_TYPE_Q4_K, 0.08);
    test_roundtrip(WLM_TYPE_Q6_K, 0.022);
    test_roundtrip(WLM_TYPE_Q8_K, 0.008);
    test_roundtrip(WLM_TYPE_BF16, 0.003);
    test_roundtrip(WLM_TYPE_Q4_1, 0.10);
    test_roundtrip(WLM_TYPE_Q5_0, 0.05);
    test_roundtrip(WLM_TYPE_Q5_1, 0.05);
    test_roundtrip(WLM_TYPE_Q2_K, 0.40);
    test_roundtrip(WLM_TYPE_Q3_K, 0.20);
    test_roundtrip(WLM_TYPE_Q5_K, 0.04);
    test_roundtrip(WLM_TYPE_MXFP4, 0.13);
    test_quantizer_simd();
    test_q8_1_ggml();
    test_q8_0_ggml();
    tu_section("matvec: reference vs dequantize-then-dot, SIMD vs reference");
    test_matvec_type(WLM_TYPE_F16);
    test_matvec_type(WLM_TYPE_Q8_0);
    test_matvec_type(WLM_TYPE_Q4_0);
    test_matvec_type(WLM_TYPE_Q4_K);
    test_matvec_type(WLM_TYPE_Q6_K);
    test_matvec_type(WLM_TYPE_BF16);
    test_matvec_type(WLM_TYPE_Q4_1);
    test_matvec_type(WLM_TYPE_Q5_0);
    test_matvec_type(WLM_TYPE_Q5_1);
    test_matvec_type(WLM_TYPE_Q2_K);
    test_matvec_type(WLM_TYPE_Q3_K);
    test_matvec_type(WLM_TYPE_Q5_K);
    test_matvec_type(WLM_TYPE_MXFP4);
    test_mxfp4();
    test_f16_specials();
    test_matvec_memory_end();
    tu_section("matvec: the build's kernels give the SIMD128 kernels' bits");
    test_simd128_bits();
    tu_section("matmat: the build's batch kernels give the per-entry matvec's bits");
    test_matmat();
    test_matmat_extremes();
    tu_section("the relaxed build's dot forms: the probe");
    test_dot_probe();
    return TEST_FINISH();
}
