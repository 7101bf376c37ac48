/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Helpers shared by the GPU tests and the GPU benchmark: device presence (exit
 * 77 when absent, as meson expects for a skipped test), checked CUDA calls,
 * fp16 <-> fp32 on the host, ulp distances, a small deterministic RNG. */
#ifndef VD_GPU_TEST_UTIL_H
#define VD_GPU_TEST_UTIL_H

#include <cuda_runtime_api.h>
#include <glib.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VD_TEST_SKIP 77

/* Exits 77 (skipped) with the reason when no CUDA device can run our kernels. */
static inline void gpu_require_device(const char *program)
{
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess || n == 0) {
        printf("SKIP: %s needs a CUDA device: %s\n", program,
               err != cudaSuccess ? cudaGetErrorString(err) : "no device found");
        exit(VD_TEST_SKIP);
    }
    int major = 0, minor = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0);
    if (major * 10 + minor < VD_CUDA_MIN_ARCH) {
        printf("SKIP: %s: device 0 has compute capability %d.%d, the kernels are built for "
               "%d.%d\n",
               program, major, minor, VD_CUDA_MIN_ARCH / 10, VD_CUDA_MIN_ARCH % 10);
        exit(VD_TEST_SKIP);
    }
}

#define CU(call)                                                                                   \
    do {                                                                                           \
        cudaError_t cu_err_ = (call);                                                              \
        if (cu_err_ != cudaSuccess) {                                                              \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,                          \
                    cudaGetErrorString(cu_err_));                                                  \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static inline void *dev_alloc(size_t bytes)
{
    void *p = NULL;
    CU(cudaMalloc(&p, bytes ? bytes : 1));
    /* poison: unwritten outputs show up as NaN-like garbage, never as zeros */
    CU(cudaMemset(p, 0x7f, bytes ? bytes : 1));
    return p;
}

static inline void *dev_upload(const void *host, size_t bytes)
{
    void *p = dev_alloc(bytes);
    CU(cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice));
    return p;
}

static inline void dev_download(void *host, const void *dev, size_t bytes)
{
    CU(cudaDeviceSynchronize());
    CU(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost));
}

/* IEEE binary16 <-> binary32, round to nearest even (host side) */
static inline float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    uint32_t bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else {
            int e = -1;
            do {
                e++;
                mant <<= 1;
            } while ((mant & 0x400) == 0);
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((mant & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static inline uint16_t float_to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u) /* inf / nan */
        return (uint16_t)(sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 : 0));
    if (absx >= 0x477ff000u) /* rounds to >= 65520: inf */
        return (uint16_t)(sign | 0x7c00);
    if (absx < 0x38800000u) { /* subnormal half (or zero) */
        if (absx < 0x33000000u)
            return (uint16_t)sign;
        uint32_t e = absx >> 23;
        uint32_t m = (absx & 0x7fffff) | 0x800000;
        int shift = 126 - (int)e; /* 14 + (113 - e) ... */
        shift = (int)(113 - e) + 13;
        uint32_t r = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1), halfway = 1u << (shift - 1);
        if (rem > halfway || (rem == halfway && (r & 1)))
            r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = ((absx >> 13) - (112u << 10));
    uint32_t rem = absx & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (r & 1)))
        r++;
    return (uint16_t)(sign | r);
}

static inline float round_half(float f)
{
    return half_to_float(float_to_half(f));
}

/* Distance in units in the last place between two floats (0 when equal, huge
 * for NaN against a number). */
static inline int64_t ulp_distance(float a, float b)
{
    if (a == b)
        return 0;
    if (isnan(a) || isnan(b))
        return INT64_MAX;
    int32_t ia, ib;
    memcpy(&ia, &a, 4);
    memcpy(&ib, &b, 4);
    int64_t la = ia < 0 ? (int64_t)INT32_MIN - ia : ia;
    int64_t lb = ib < 0 ? (int64_t)INT32_MIN - ib : ib;
    return la > lb ? la - lb : lb - la;
}

/* xorshift64*: the same sequence on every machine */
typedef struct {
    uint64_t s;
} test_rng;

static inline uint64_t rng_next(test_rng *r)
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 2685821657736338717ULL;
}

static inline float rng_uniform(test_rng *r, float lo, float hi)
{
    return lo + (hi - lo) * (float)((rng_next(r) >> 40) / (double)(1ULL << 24));
}

static inline int rng_int(test_rng *r, int n)
{
    return (int)(rng_next(r) % (uint64_t)n);
}

static inline float rng_normal(test_rng *r)
{
    float u1 = rng_uniform(r, 1e-7f, 1.0f), u2 = rng_uniform(r, 0.0f, 1.0f);
    return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
}

/* A binary PPM (P6, maxval 255) as packed RGB; NULL with a message on failure. */
static inline uint8_t *load_ppm(const char *path, int *width, int *height)
{
    gchar *data = NULL;
    gsize len = 0;
    if (!g_file_get_contents(path, &data, &len, NULL) || len < 2 || data[0] != 'P' ||
        data[1] != '6') {
        fprintf(stderr, "%s: not a binary PPM\n", path);
        g_free(data);
        return NULL;
    }
    int fields[3], n = 0;
    gsize i = 2;
    while (n < 3 && i < len) {
        while (i < len && (g_ascii_isspace(data[i]) || data[i] == '#')) {
            if (data[i] == '#')
                while (i < len && data[i] != '\n')
                    i++;
            else
                i++;
        }
        int v = 0;
        while (i < len && g_ascii_isdigit(data[i]))
            v = v * 10 + (data[i++] - '0');
        fields[n++] = v;
    }
    i++; /* the one whitespace after maxval */
    if (n < 3 || fields[2] != 255 || fields[0] <= 0 || fields[1] <= 0 ||
        len - i < (gsize)fields[0] * fields[1] * 3) {
        fprintf(stderr, "%s: unsupported or truncated PPM\n", path);
        g_free(data);
        return NULL;
    }
    *width = fields[0];
    *height = fields[1];
    uint8_t *pixels = g_memdup2(data + i, (gsize)fields[0] * fields[1] * 3);
    g_free(data);
    return pixels;
}

#endif /* VD_GPU_TEST_UTIL_H */
