/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* oneDNN's effective ISA read as its architecture's (engine/cpu/vd_cpu_isa.c): the
 * same value means sse41 on x86 and Advanced SIMD on aarch64, and each decision the
 * CPU backend takes from it (channel block, bf16, int8, Winograd) follows the
 * architecture's meaning. The aarch64 cases run on every machine: the reading is a
 * function of the value and the kernel's feature bits. */
#include "cpu/vd_cpu_isa.h"

#include <string.h>

/* Neoverse N1 / Cortex-A76: Advanced SIMD, dot product, FP16; no SVE, BF16, I8MM */
#define N1_HWCAP (VD_HWCAP_ASIMD | VD_HWCAP_ASIMDDP | VD_HWCAP_FPHP | VD_HWCAP_ASIMDHP)
/* Neoverse V1: N1's and SVE (256 bits), BF16, I8MM */
#define V1_HWCAP (N1_HWCAP | VD_HWCAP_SVE)
#define V1_HWCAP2 (VD_HWCAP2_BF16 | VD_HWCAP2_I8MM)

static void test_x86(void)
{
    vd_cpu_caps c;

    vd_cpu_caps_for(VD_CPU_ARCH_X86_64, vd_cpu_isa_value(VD_CPU_ARCH_X86_64, "SSE41"), 0, 0, 0, &c);
    g_assert_cmpstr(c.description, ==, "sse41");
    g_assert_cmpint(c.channel_block, ==, 8);
    g_assert_false(c.native_bf16 || c.int8 || c.amx);
    g_assert_true(c.own_winograd_ok);

    vd_cpu_caps_for(VD_CPU_ARCH_X86_64, dnnl_cpu_isa_avx2, 0, 0, 0, &c);
    g_assert_cmpstr(c.isa_name, ==, "avx2");
    g_assert_cmpint(c.channel_block, ==, 8);
    g_assert_false(c.int8);

    vd_cpu_caps_for(VD_CPU_ARCH_X86_64, dnnl_cpu_isa_avx2_vnni, 0, 0, 0, &c);
    g_assert_true(c.int8);
    g_assert_cmpint(c.channel_block, ==, 8);

    vd_cpu_caps_for(VD_CPU_ARCH_X86_64, dnnl_cpu_isa_avx512_core_bf16, 0, 0, 0, &c);
    g_assert_cmpstr(c.description, ==, "avx512_core_bf16");
    g_assert_cmpint(c.channel_block, ==, 16);
    g_assert_true(c.native_bf16 && c.int8);
    g_assert_false(c.amx);

    vd_cpu_caps_for(VD_CPU_ARCH_X86_64, dnnl_cpu_isa_avx512_core_amx, 0, 0, 0, &c);
    g_assert_true(c.native_bf16 && c.int8 && c.amx);
}

static void test_aarch64(void)
{
    vd_cpu_caps c;

    /* Advanced SIMD: the value of x86's sse41, read as what it is */
    unsigned asimd = vd_cpu_isa_value(VD_CPU_ARCH_AARCH64, "ADVANCED_SIMD");
    g_assert_cmpuint(asimd, ==, dnnl_cpu_isa_sse41);
    vd_cpu_caps_for(VD_CPU_ARCH_AARCH64, asimd, N1_HWCAP, 0, 0, &c);
    g_assert_cmpstr(c.isa_name, ==, "advanced_simd");
    g_assert_cmpstr(c.description, ==, "advanced_simd (asimd dotprod fp16)");
    g_assert_null(strstr(c.description, "sse"));
    g_assert_true(c.asimd && c.dotprod && c.fp16);
    g_assert_false(c.bf16 || c.i8mm || c.sve || c.sve2);
    g_assert_cmpint(c.sve_bits, ==, 0);
    g_assert_cmpint(c.channel_block, ==, 8);
    g_assert_false(c.native_bf16 || c.int8 || c.amx || c.own_winograd_ok);

    /* SVE at 256 bits (Neoverse V1): the features named, the block of 8, and still
     * no bf16 or int8 kernel in oneDNN without Arm Compute Library */
    unsigned sve256 = vd_cpu_isa_value(VD_CPU_ARCH_AARCH64, "sve_256");
    vd_cpu_caps_for(VD_CPU_ARCH_AARCH64, sve256, V1_HWCAP, V1_HWCAP2, 256, &c);
    g_assert_cmpstr(c.description, ==,
                    "sve_256 (asimd dotprod fp16 bf16 i8mm sve, 256-bit vectors)");
    g_assert_true(c.bf16 && c.i8mm && c.sve);
    g_assert_cmpint(c.sve_bits, ==, 256);
    g_assert_cmpint(c.channel_block, ==, 8);
    g_assert_false(c.native_bf16 || c.int8);

    /* SVE at 512 bits: the value oneDNN 3.x shares with x86's avx512_core (2.x: with
     * avx512_mic_4ops); blocks of 16, as its SVE-512 kernels take */
    unsigned sve512 = vd_cpu_isa_value(VD_CPU_ARCH_AARCH64, "SVE_512");
    g_assert_cmpuint(sve512, !=, 0);
    vd_cpu_caps_for(VD_CPU_ARCH_AARCH64, sve512, V1_HWCAP | 0, V1_HWCAP2 | VD_HWCAP2_SVE2, 512, &c);
    g_assert_cmpstr(c.isa_name, ==, "sve_512");
    g_assert_null(strstr(c.description, "avx"));
    g_assert_true(c.sve2);
    g_assert_cmpint(c.channel_block, ==, 16);
    g_assert_false(c.native_bf16 || c.int8 || c.amx);

    /* the kernel reports SVE but the cap keeps oneDNN to Advanced SIMD: the block
     * follows oneDNN's ISA, the features stay the processor's */
    vd_cpu_caps_for(VD_CPU_ARCH_AARCH64, asimd, V1_HWCAP, V1_HWCAP2, 256, &c);
    g_assert_cmpstr(c.isa_name, ==, "advanced_simd");
    g_assert_cmpint(c.channel_block, ==, 8);
    g_assert_true(c.sve);

    /* names of the other architecture are not this one's */
    g_assert_cmpuint(vd_cpu_isa_value(VD_CPU_ARCH_AARCH64, "AVX2"), ==, 0);
    g_assert_cmpuint(vd_cpu_isa_value(VD_CPU_ARCH_X86_64, "ADVANCED_SIMD"), ==, 0);
}

/* this machine: a known name for oneDNN's ISA, and a description that starts with it */
static void test_native(void)
{
    vd_cpu_caps c;
    vd_cpu_caps_get(&c);
    g_test_message("this CPU: %s", c.description);
    g_assert_cmpint(c.arch, ==, vd_cpu_arch_native());
    if (c.arch != VD_CPU_ARCH_OTHER) {
        g_assert_nonnull(c.isa_name);
        g_assert_true(g_str_has_prefix(c.description, c.isa_name));
        g_assert_cmpuint(vd_cpu_isa_value(c.arch, c.isa_name), ==, c.isa);
    }
    if (c.arch == VD_CPU_ARCH_AARCH64)
        g_assert_true(c.asimd);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/cpu-isa/x86", test_x86);
    g_test_add_func("/cpu-isa/aarch64", test_aarch64);
    g_test_add_func("/cpu-isa/native", test_native);
    return g_test_run();
}
