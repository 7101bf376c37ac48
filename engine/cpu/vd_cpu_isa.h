/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What the CPU backend's per-processor decisions read: oneDNN's effective ISA
 * (capped by ONEDNN_MAX_CPU_ISA) read as the ISA of the architecture it runs on,
 * and, on aarch64, the processor's own features as the kernel reports them
 * (AT_HWCAP, AT_HWCAP2, the SVE vector length). oneDNN gives its aarch64 ISAs
 * values of the x86 enum (asimd is sse41's 0x1), so nothing outside this file
 * reads the raw value. */
#ifndef VD_CPU_ISA_H
#define VD_CPU_ISA_H

#include <glib.h>
#include <oneapi/dnnl/dnnl.h>

typedef enum {
    VD_CPU_ARCH_X86_64,
    VD_CPU_ARCH_AARCH64,
    VD_CPU_ARCH_OTHER,
} vd_cpu_arch;

/* aarch64 features (Linux's AT_HWCAP and AT_HWCAP2 bits, asm/hwcap.h), defined here
 * so that every architecture builds and tests their reading. */
#define VD_HWCAP_ASIMD (1UL << 1)
#define VD_HWCAP_FPHP (1UL << 9)
#define VD_HWCAP_ASIMDHP (1UL << 10)
#define VD_HWCAP_ASIMDDP (1UL << 20)
#define VD_HWCAP_SVE (1UL << 22)
#define VD_HWCAP2_SVE2 (1UL << 1)
#define VD_HWCAP2_I8MM (1UL << 13)
#define VD_HWCAP2_BF16 (1UL << 14)

typedef struct {
    vd_cpu_arch arch;
    unsigned isa;         /* oneDNN's effective ISA value, in @arch's meaning */
    const char *isa_name; /* what ONEDNN_MAX_CPU_ISA calls it, lower case: "avx2",
                           * "avx512_core_bf16", "advanced_simd", "sve_256" */
    /* aarch64, from the kernel: Advanced SIMD, the dot product (SDOT/UDOT), FP16
     * arithmetic (scalar and vector), BF16, I8MM, SVE, SVE2; the SVE vector length in
     * bits (0: none) */
    gboolean asimd, dotprod, fp16, bf16, i8mm, sve, sve2;
    int sve_bits;
    /* what oneDNN runs here */
    gboolean native_bf16;     /* bfloat16 convolutions on native instructions */
    gboolean int8;            /* int8 convolutions on dot-product instructions */
    gboolean amx;             /* Intel AMX (its kernels take NHWC) */
    int channel_block;        /* the block of the layout oneDNN's direct kernels take: 16 or 8 */
    gboolean own_winograd_ok; /* ours (vd_cpu_winograd.c) runs on oneDNN's sgemm here */
    /* "avx2", or on aarch64 "advanced_simd (asimd dotprod fp16)": for logs and
     * messages */
    char description[96];
} vd_cpu_caps;

/* @caps for this process: oneDNN's effective ISA and, on aarch64, the kernel's
 * feature bits. Thread-safe. */
void vd_cpu_caps_get(vd_cpu_caps *caps);

/* @caps for oneDNN's ISA value @isa on @arch with the kernel's feature bits
 * @hwcap, @hwcap2 and an SVE vector length of @sve_bits (aarch64; ignored
 * elsewhere): the part of vd_cpu_caps_get() that reads nothing, for tests. */
void vd_cpu_caps_for(vd_cpu_arch arch, unsigned isa, unsigned long hwcap, unsigned long hwcap2,
                     int sve_bits, vd_cpu_caps *caps);

/* The value of oneDNN's effective ISA that ONEDNN_MAX_CPU_ISA=@name gives on @arch
 * (case-insensitive), or 0 when @name is none of @arch's. */
unsigned vd_cpu_isa_value(vd_cpu_arch arch, const char *name);

/* The architecture this code was built for. */
vd_cpu_arch vd_cpu_arch_native(void);

#endif /* VD_CPU_ISA_H */
