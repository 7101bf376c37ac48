/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* IEEE 754 binary16 (fp16) <-> float32 in plain C, bit-exact on every compiler and
 * architecture: the CPU backend's fp16 activations (XNNPACK's layers) are
 * converted with these where a small op, RoIAlign or the network input meets them,
 * rather than with oneDNN's f16 reorders (reference loops on aarch64). On aarch64
 * the compiler's __fp16 (the FCVT instructions), elsewhere plain C. */
#ifndef VD_CPU_HALF_H
#define VD_CPU_HALF_H

#include <stdint.h>
#include <string.h>

#if defined(__aarch64__) && defined(__ARM_FP16_FORMAT_IEEE)
/* aarch64: the hardware's conversions (FCVT, which the compilers vectorise), the
 * same results as the loops below in the default rounding mode */
static inline uint16_t vd_f32_to_f16(float f)
{
    __fp16 h = (__fp16)f;
    uint16_t u;
    memcpy(&u, &h, sizeof(u));
    return u;
}

static inline float vd_f16_to_f32(uint16_t u)
{
    __fp16 h;
    memcpy(&h, &u, sizeof(h));
    return (float)h;
}
#else
/* float32 -> fp16, round to nearest even; overflow to infinity, NaN kept quiet
 * (what a hardware conversion does in the default rounding mode). */
static inline uint16_t vd_f32_to_f16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    u &= 0x7fffffffu;
    if (u > 0x7f800000u) /* NaN */
        return (uint16_t)(sign | 0x7e00u | ((u >> 13) & 0x3ffu));
    if (u >= 0x477ff000u) /* 65520 and above round to infinity */
        return (uint16_t)(sign | 0x7c00u);
    if (u < 0x38800000u) {
        /* below 2^-14: subnormal or zero; adding 0.5 puts the fp16 subnormal's
         * bits in the low mantissa bits, rounded by the FPU (to nearest even) */
        float a;
        memcpy(&a, &u, sizeof(a));
        a += 0.5f;
        memcpy(&u, &a, sizeof(u));
        return (uint16_t)(sign | (uint16_t)(u - 0x3f000000u));
    }
    /* normal: rebias the exponent, round the 13 dropped bits to nearest even */
    uint32_t odd = (u >> 13) & 1u;
    u += 0xc8000fffu + odd; /* ((15 - 127) << 23) + 0xfff, modulo 2^32 */
    return (uint16_t)(sign | (u >> 13));
}

/* fp16 -> float32, exact. */
static inline float vd_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    uint32_t u;
    if (exp == 0) {
        float f = (float)mant * 0x1p-24f; /* zero or subnormal, exact */
        memcpy(&u, &f, sizeof(u));
        u |= sign;
    } else if (exp == 31) {
        u = sign | 0x7f800000u | (mant << 13);
    } else {
        u = sign | ((exp + 112u) << 23) | (mant << 13);
    }
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}
#endif

#endif /* VD_CPU_HALF_H */
