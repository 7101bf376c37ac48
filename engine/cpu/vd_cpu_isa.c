/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* oneDNN's effective ISA read as its architecture's, and the aarch64 processor's
 * features (see vd_cpu_isa.h). */
#include "cpu/vd_cpu_isa.h"

#include <oneapi/dnnl/dnnl_version.h>
#include <string.h>

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#include <sys/prctl.h>
#ifndef PR_SVE_GET_VL
#define PR_SVE_GET_VL 51
#endif
#ifndef PR_SVE_VL_LEN_MASK
#define PR_SVE_VL_LEN_MASK 0xffff
#endif
#endif

#if DNNL_VERSION_MAJOR < 3
#define VD_DNNL2 1
#endif

typedef struct {
    const char *name; /* ONEDNN_MAX_CPU_ISA's, lower case */
    unsigned value;
} isa_entry;

/* x86: the public enum's values (each a superset of the bits of those below it) */
static const isa_entry x86_isas[] = {
    {"sse41", dnnl_cpu_isa_sse41},
    {"avx", dnnl_cpu_isa_avx},
    {"avx2", dnnl_cpu_isa_avx2},
    {"avx2_vnni", dnnl_cpu_isa_avx2_vnni},
    {"avx512_core", dnnl_cpu_isa_avx512_core},
    {"avx512_core_vnni", dnnl_cpu_isa_avx512_core_vnni},
    {"avx512_core_bf16", dnnl_cpu_isa_avx512_core_bf16},
    {"avx512_core_amx", dnnl_cpu_isa_avx512_core_amx},
#ifdef VD_DNNL2
    {"avx512_mic", dnnl_cpu_isa_avx512_mic},
    {"avx512_mic_4ops", dnnl_cpu_isa_avx512_mic_4ops},
#else
    {"avx2_vnni_2", dnnl_cpu_isa_avx2_vnni_2},
    {"avx512_core_fp16", dnnl_cpu_isa_avx512_core_fp16},
    {"avx512_core_amx_fp16", dnnl_cpu_isa_avx512_core_amx_fp16},
#endif
};

/* aarch64: the values oneDNN's get_effective_cpu_isa() returns there (its
 * cpu/aarch64/cpu_isa_traits.hpp, not in the public header); SVE 512 changed
 * between 2.x and 3.x. */
static const isa_entry aarch64_isas[] = {
    {"advanced_simd", 0x1}, {"sve_128", 0x3}, {"sve_256", 0x7}, {"sve_384", 0xf},
#ifdef VD_DNNL2
    {"sve_512", 0x1f},
#else
    {"sve_512", 0x27},
#endif
};

static const char *isa_name(const isa_entry *table, size_t n, unsigned value)
{
    for (size_t i = 0; i < n; i++)
        if (table[i].value == value)
            return table[i].name;
    return NULL;
}

static gboolean x86_has(unsigned isa, unsigned feature)
{
    return (isa & feature) == feature;
}

static void x86_caps(unsigned isa, vd_cpu_caps *caps)
{
    caps->isa_name = isa_name(x86_isas, G_N_ELEMENTS(x86_isas), isa);
    caps->native_bf16 = x86_has(isa, dnnl_cpu_isa_avx512_core_bf16);
    caps->int8 =
        x86_has(isa, dnnl_cpu_isa_avx512_core_vnni) || x86_has(isa, dnnl_cpu_isa_avx2_vnni);
    caps->amx = x86_has(isa, dnnl_cpu_isa_avx512_core_amx);
    caps->channel_block = x86_has(isa, dnnl_cpu_isa_avx512_core) ? 16 : 8;
#ifdef VD_DNNL2
    if (x86_has(isa, dnnl_cpu_isa_avx512_mic))
        caps->channel_block = 16;
#endif
    caps->own_winograd_ok = TRUE;
    g_strlcpy(caps->description, caps->isa_name != NULL ? caps->isa_name : "an unknown ISA",
              sizeof(caps->description));
}

/* Debian's oneDNN for aarch64 is built without Arm Compute Library: its float32
 * convolutions there are the SVE JIT kernels (blocks of 16 channels at 512 bits, 8
 * below) and, on Advanced SIMD alone, few; its int8 ones are reference loops below
 * SVE at 512 bits, and its bf16 ones reference loops everywhere, BF16 processors
 * (Neoverse V1, N2) included: oneDNN 3.7.2 gives a bf16 convolution ref:any on
 * Advanced SIMD with BF16 and on SVE at 256 and 512 bits, none without BF16, and its
 * bf16 matmul ("gemm:jit:bf16") calls its reference GEMM off x86; its aarch64 brgemm
 * takes float32 and int8 only (docs/engine.md, "bf16 on arm64"). So native_bf16
 * stays FALSE here and bf16 is refused, naming what the processor has and what
 * oneDNN gave (vd_layers_probe_bf16), int8 runs on XNNPACK's operators
 * (vd_cpu_xnnpack.h) where the processor has the dot product, and our Winograd (on
 * oneDNN's sgemm) stays off until measured there. */
static void aarch64_caps(unsigned isa, unsigned long hwcap, unsigned long hwcap2, int sve_bits,
                         vd_cpu_caps *caps)
{
    caps->isa_name = isa_name(aarch64_isas, G_N_ELEMENTS(aarch64_isas), isa);
    caps->asimd = (hwcap & VD_HWCAP_ASIMD) != 0;
    caps->dotprod = (hwcap & VD_HWCAP_ASIMDDP) != 0;
    caps->fp16 = (hwcap & VD_HWCAP_FPHP) != 0 && (hwcap & VD_HWCAP_ASIMDHP) != 0;
    caps->sve = (hwcap & VD_HWCAP_SVE) != 0;
    caps->sve2 = (hwcap2 & VD_HWCAP2_SVE2) != 0;
    caps->bf16 = (hwcap2 & VD_HWCAP2_BF16) != 0;
    caps->i8mm = (hwcap2 & VD_HWCAP2_I8MM) != 0;
    caps->sve_bits = caps->sve ? sve_bits : 0;
    caps->channel_block = g_strcmp0(caps->isa_name, "sve_512") == 0 ? 16 : 8;

    GString *s = g_string_new(caps->isa_name != NULL ? caps->isa_name : "an unknown ISA");
    g_string_append(s, " (");
    gsize open = s->len;
    static const struct {
        size_t offset;
        const char *name;
    } flags[] = {
        {G_STRUCT_OFFSET(vd_cpu_caps, asimd), "asimd"},
        {G_STRUCT_OFFSET(vd_cpu_caps, dotprod), "dotprod"},
        {G_STRUCT_OFFSET(vd_cpu_caps, fp16), "fp16"},
        {G_STRUCT_OFFSET(vd_cpu_caps, bf16), "bf16"},
        {G_STRUCT_OFFSET(vd_cpu_caps, i8mm), "i8mm"},
        {G_STRUCT_OFFSET(vd_cpu_caps, sve), "sve"},
        {G_STRUCT_OFFSET(vd_cpu_caps, sve2), "sve2"},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(flags); i++)
        if (G_STRUCT_MEMBER(gboolean, caps, flags[i].offset))
            g_string_append_printf(s, "%s%s", s->len > open ? " " : "", flags[i].name);
    if (caps->sve_bits > 0)
        g_string_append_printf(s, ", %d-bit vectors", caps->sve_bits);
    if (s->len == open)
        g_string_truncate(s, open - 2);
    else
        g_string_append_c(s, ')');
    g_strlcpy(caps->description, s->str, sizeof(caps->description));
    g_string_free(s, TRUE);
}

void vd_cpu_caps_for(vd_cpu_arch arch, unsigned isa, unsigned long hwcap, unsigned long hwcap2,
                     int sve_bits, vd_cpu_caps *caps)
{
    memset(caps, 0, sizeof(*caps));
    caps->arch = arch;
    caps->isa = isa;
    switch (arch) {
    case VD_CPU_ARCH_X86_64:
        x86_caps(isa, caps);
        break;
    case VD_CPU_ARCH_AARCH64:
        aarch64_caps(isa, hwcap, hwcap2, sve_bits, caps);
        break;
    default:
        caps->channel_block = 8;
        g_strlcpy(caps->description, "oneDNN's default ISA", sizeof(caps->description));
        break;
    }
}

vd_cpu_arch vd_cpu_arch_native(void)
{
#if defined(__x86_64__)
    return VD_CPU_ARCH_X86_64;
#elif defined(__aarch64__)
    return VD_CPU_ARCH_AARCH64;
#else
    return VD_CPU_ARCH_OTHER;
#endif
}

void vd_cpu_caps_get(vd_cpu_caps *caps)
{
    unsigned long hwcap = 0, hwcap2 = 0;
    int sve_bits = 0;
#if defined(__aarch64__) && defined(__linux__)
    hwcap = getauxval(AT_HWCAP);
    hwcap2 = getauxval(AT_HWCAP2);
    if (hwcap & VD_HWCAP_SVE) {
        int vl = prctl(PR_SVE_GET_VL);
        if (vl > 0)
            sve_bits = (vl & PR_SVE_VL_LEN_MASK) * 8;
    }
#endif
    vd_cpu_caps_for(vd_cpu_arch_native(), (unsigned)dnnl_get_effective_cpu_isa(), hwcap, hwcap2,
                    sve_bits, caps);
}

unsigned vd_cpu_isa_value(vd_cpu_arch arch, const char *name)
{
    const isa_entry *table = arch == VD_CPU_ARCH_AARCH64 ? aarch64_isas : x86_isas;
    size_t n = arch == VD_CPU_ARCH_AARCH64 ? G_N_ELEMENTS(aarch64_isas) : G_N_ELEMENTS(x86_isas);
    if (arch == VD_CPU_ARCH_OTHER || name == NULL)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (g_ascii_strcasecmp(table[i].name, name) == 0)
            return table[i].value;
    return 0;
}
