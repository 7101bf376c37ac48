/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The CPU backend: torchvision's detectors (docs/torchvision-inference.md, "spec"
 * below) with oneDNN convolutions and matrix products, and the plain-C small ops of
 * vd_cpu_ops.c. This file is the backend's interface: what it supports, context
 * creation, a frame's run (detect_one), the kernels' list.
 *
 * Every oneDNN call goes through vd_cpu_layers.c (oneDNN 2.x and 3.x). Each
 * backbone has its own file (vd_cpu_resnet.c, vd_cpu_mnv3.c, vd_cpu_ssd.c's) that
 * plans it, registered in cpu_backbones[] by the model's backbone type; each kind
 * of detector a cpu_detector, registered in cpu_detectors[]: the two-stage one (the
 * RPN, the RoI heads) in vd_cpu_rcnn.c over the RoI machinery of vd_cpu_roi.c, the
 * one-stage one (RetinaNet, FCOS: engine/RETINANET.md) in vd_cpu_onestage.c, SSD's
 * in vd_cpu_ssd.c. vd_cpu_fpn.c plans the FPN and the anchors the first two share;
 * vd_cpu_plan.c the plans, their tensors, convolutions and steps
 * (vd_cpu_private.h). A plan (one per padded input size) holds its run
 * from the input conversion to the heads' convolutions (the RPN's, a one-stage
 * head's) as a list of steps
 * (cpu_step: a convolution, a oneDNN primitive with its arguments, a
 * hand-written op such as the FPN's upsampling, the stream's wait), each with
 * its calibration record, which detect_one() runs in order between the
 * stages' marks and the observer's points; the RoI heads run per frame on the
 * proposals.
 *
 * Layout: activations are in oneDNN's blocked layout from the first convolution to
 * RoIAlign, so that no layer reorders its input; only the network input is NHWC
 * (pre-processing writes it). The channel block follows the ISA oneDNN runs
 * (dnnl_get_effective_cpu_isa(), which ONEDNN_MAX_CPU_ISA caps): nChw16c with
 * AVX-512, nChw8c with AVX2, AVX and SSE4.1, the layouts each ISA's kernels take
 * (any other sends oneDNN to its reference loops, hundreds of times slower; the
 * engine suite's kernels test checks every primitive's implementation at several
 * ISAs). Everything that reads the blocked tensors (upsampling, the pool level,
 * the RPN decode, RoIAlign) takes the block from the tensor.
 * Everything that depends on the padded input size (convolution primitives,
 * weights reordered into the layout each primitive wants, activation buffers,
 * anchors) lives in a "plan" built on the first frame of a size and reused until
 * the size changes. The box head's matrix products (one per linear, over all RoIs)
 * are oneDNN matmul primitives with weights packed once per context.
 *
 * Convolution algorithm: float32 3x3 stride-1 convolutions of 64 channels or more
 * (use_winograd) run Winograd: oneDNN 2.x's kernels on AVX-512 (jit_wino_4x3,
 * F(4x4, 3x3), and jit_fp32_wino_2x3, F(2x2, 3x3), which it picks for 64 channels)
 * where their scratchpad stays within 16 MB, otherwise (below AVX-512, where
 * oneDNN has none, and with oneDNN 2.x on AVX-512 for the largest maps) ours,
 * vd_cpu_winograd.c, F(4x4, 3x3): its transforms on the blocked layouts around
 * oneDNN's sgemm; on AVX-512 with oneDNN 3.x, which has no Winograd kernel, ours
 * as F(4x4, 3x3) on the points 0, +-1, +-i (see cpu_create).
 * Accuracy against a double reference on the networks' channel counts
 * (tests/engine/test_winograd.c): ours F(4x4, 3x3) at most 1.9e-6 of max |y|, as
 * oneDNN 2.x's; ours F(4x4, 3x3) on 0, +-1, +-i 3.3e-7 and F(2x2, 3x3) (the RoI
 * heads') 2.9e-7, as oneDNN's AVX-512 direct kernels.
 * VD_CPU_WINOGRAD=0 in the environment turns Winograd off,
 * =own makes every Winograd convolution ours, =2x3, =4x3 or =complex ours of that
 * kind (for measurements).
 *
 * Precision:
 * - fp32: everything in float32.
 * - bf16 (VD_PRECISION_BF16, and AUTO where the processor has it natively): every convolution
 * (backbone, FPN, RPN) reads and writes bfloat16 activations with bfloat16 weights and float32
 *   accumulation and bias (oneDNN's avx512_core_bf16 kernels: only where the
 *   processor has AVX512-BF16 or AMX; elsewhere oneDNN would emulate them, many
 *   times slower than float32, so context creation refuses bf16 there with
 *   VD_ERROR_UNSUPPORTED, and on every aarch64 CPU, where Debian's oneDNN has
 *   reference loops alone for bf16 even with BF16: refuse_bf16_aarch64); the RPN
 *   head writes float32; RoIAlign reads the
 *   bfloat16 P levels, interpolates in float32 and rounds its output to bfloat16;
 *   the box head's linears run in bfloat16 with float32 accumulation, the
 *   predictor writes float32; all small ops and post-processing are float32. This
 *   follows torch's autocast (convolutions and linears in the low precision,
 *   roi_align in float32 on the low-precision features). bf16 runs no Winograd:
 *   float32 Winograd on the large FPN/RPN maps gains too little there for its
 *   266 MB scratchpad at 800x1088 (tools/bench/CPU.md, "Figures behind choices").
 * - int8 (VD_PRECISION_INT8, on CPUs with VNNI or, on XNNPACK's layers, the dot
 *   product, for ResNet backbones of a calibrated
 *   model): post-training static quantisation. Weights s8 with one symmetric scale
 *   per output channel (max |w| / 127, computed at planning from the folded
 *   weights), activations one scale per tensor from the model's calibrated ranges
 *   (vd_calibration.c; max |x| / 255 after a ReLU, / 127 signed). The stem runs in
 *   float (three input channels gain nothing from VNNI, and quantising the
 *   normalised image would be coarser than its 8 bits); its max-pool's output is
 *   quantised to u8 and every block of the body runs in int8 with bias, ReLU and
 *   the residual sum fused (the shortcut's downsample writes s8 into the block's
 *   output, which the last convolution adds onto); the FPN's lateral convolutions
 *   read the u8 stage outputs and write the top-down sums in s8, its 3x3
 *   convolutions write real P levels (RoIAlign reads them), which are quantised
 *   again for the RPN's 3x3 convolution. Everything else (RoIAlign, the RPN head,
 *   v2's further RPN convolutions, the box and mask heads, the small ops) runs in
 *   bf16 where the processor has it natively, else fp32: these layers decide the
 *   scores and box coordinates directly, and cost a small share of the frame.
 *   Activations are NHWC (the VNNI and AMX int8 kernels' layout). Where the layers
 *   run XNNPACK (aarch64 with the dot product), the same plan runs its per-channel
 *   int8 operators (vd_cpu_xnnpack.h: the zero points, the sums, the real outputs),
 *   the rest in float32.
 * - fp16 (VD_PRECISION_FP16, never AUTO): only where XNNPACK runs the layers
 *   (vd_cpu_xnnpack.h) and has fp16 kernels for the processor (aarch64 with the
 *   FP16 arithmetic; x86 with AVX2/F16C, where the tests force XNNPACK), refused
 *   naming the cause elsewhere (refuse_fp16). As bf16: every convolution
 *   (backbone, FPN, RPN, v2's conv box head), the max-pool and the box head's
 *   linears are XNNPACK's _f16 operators with the float32 weights rounded as
 *   XNNPACK packs them, reading and writing fp16 activations (dnnl_f16); the RPN
 *   head and the predictor write float32 (widened after the layer, in the pass that
 *   also adds residuals and applies hardswish on widened values); RoIAlign reads
 *   the fp16 levels, interpolates in float32 and rounds its output to fp16; the
 *   mask branch, all small ops and post-processing are float32. No oneDNN f16
 *   reorder runs (reference loops on aarch64): the input's conversion and the RoI
 *   stacks' transposes are loops (vd_cpu_half.h).
 *
 * Memory: buffers whose lifetimes do not overlap are shared (see cpu_plan), one
 * oneDNN scratchpad serves all primitives. */
#include "vd_config.h"
#include "vd_context_private.h"
#include "cpu/vd_cpu_private.h"
#include "cpu/vd_cpu_ops.h"
#include "vd_math.h"

#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* RoIHeads.postprocess_detections (spec §6.2) and the rescale of spec §1.5. */
void write_detections(const vd_image *image, int rh, int rw, const float *boxes,
                      const float *scores, const int *labels, const int *keep, int kept,
                      vd_result *result)
{
    float ry = (float)image->height / (float)rh;
    float rx = (float)image->width / (float)rw;
    result->width = image->width;
    result->height = image->height;
    result->n_detections = kept;
    result->detections = g_new0(vd_detection, MAX(kept, 1));
    for (int j = 0; j < kept; j++) {
        const float *b = boxes + 4 * (size_t)keep[j];
        vd_detection *d = &result->detections[j];
        d->x1 = b[0] * rx;
        d->y1 = b[1] * ry;
        d->x2 = b[2] * rx;
        d->y2 = b[3] * ry;
        d->score = scores[keep[j]];
        d->label = labels[keep[j]];
    }
}

int write_nms_detections(vd_context *ctx, const vd_image *image, int rh, int rw, const float *boxes,
                         const float *scores, const int *labels, int m, int *keep,
                         vd_result *result)
{
    int kept = vd_batched_nms(boxes, scores, labels, m, ctx->params.nms_threshold, keep);
    kept = MIN(kept, ctx->params.max_detections);
    write_detections(image, rh, rw, boxes, scores, labels, keep, kept, result);
    return kept;
}

static gboolean detect_one(cpu_state *st, vd_context *ctx, const vd_image *image, vd_result *result,
                           gboolean observe, GError **error)
{
    const vd_config *cfg = &st->model->config;
    int rh, rw, ph, pw;
    if (image->width <= 0 || image->height <= 0) {
        g_set_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT, "image size %dx%d is empty",
                    image->width, image->height);
        return FALSE;
    }
    vd_context_stages_begin(ctx);
    vd_config_transform_sizes(cfg, image->height, image->width, &rh, &rw, &ph, &pw);
    if (st->plan == NULL || st->plan->padded_h != ph || st->plan->padded_w != pw) {
        plan_free(st->plan);
        st->plan = plan_new(st, ph, pw, error);
        if (st->plan == NULL || !ensure_scratchpad(st, error))
            return FALSE;
    }
    cpu_plan *plan = st->plan;

    if (!vd_cpu_preprocess(image, cfg->image_mean, cfg->image_std, cfg->resize_arithmetic, rh, rw,
                           ph, pw, plan->input->data, error))
        return FALSE;
    if (observe) {
        float size[2] = {(float)rh, (float)rw};
        int64_t shape[1] = {2};
        vd_context_observe(ctx, "image_size", size, shape, 1);
        observe_tensor(ctx, "input", plan->input);
    }
    vd_context_stage_mark(ctx, VD_STAGE_PREPROCESS);

    if (!run_steps(st, plan, 0, plan->steps_backbone, error))
        return FALSE;
    st->frames_seen += st->ranges_seen != NULL;
    vd_context_stage_add_macs(ctx, steps_macs(plan, 0, plan->steps_backbone));
    vd_context_stage_mark(ctx, VD_STAGE_BACKBONE);
    if (!run_steps(st, plan, plan->steps_backbone, plan->steps_fpn, error))
        return FALSE;
    vd_context_stage_add_macs(ctx, steps_macs(plan, plan->steps_backbone, plan->steps_fpn));
    if (observe) {
        for (int l = 0; l < plan->n_levels; l++) {
            char name[32];
            if (cfg->detector == VD_DETECTOR_SSD)
                g_snprintf(name, sizeof(name), "features.%d", l);
            else if (l < plan->n_returned)
                g_snprintf(name, sizeof(name), "fpn.%d", l);
            else if (cfg->fpn_p6p7)
                g_snprintf(name, sizeof(name), "fpn.p%d", 6 + l - plan->n_returned);
            else
                g_snprintf(name, sizeof(name), "fpn.pool");
            observe_tensor(ctx, name, plan->fpn_out[l]);
        }
        int64_t shape[2] = {plan->n_anchors, 4};
        vd_context_observe(ctx, "anchors", plan->anchors, shape, 2);
    }
    vd_context_stage_mark(ctx, VD_STAGE_FPN);

    if (!run_steps(st, plan, plan->steps_fpn, plan->steps->len, error))
        return FALSE;
    /* the RPN's (two-stage) or the dense head's (one-stage): the detector marks it */
    vd_context_stage_add_macs(ctx, steps_macs(plan, plan->steps_fpn, plan->steps->len));
    return st->detector->detect(st, ctx, plan, rh, rw, image, result, observe, error);
}

/* ------------------------------------------------------------------------ */
/* Backend interface                                                         */

static void cpu_destroy(void *p)
{
    cpu_state *st = p;
    if (st == NULL)
        return;
    plan_free(st->plan);
    box_plans_clear(st);
    roi_head_plans_clear(&st->mask_plans);
    roi_head_plans_clear(&st->keypoint_plans);
    packed_linear_clear(&st->fc6);
    packed_linear_clear(&st->fc7);
    packed_linear_clear(&st->predictor);
    free(st->pooled);
    free(st->h6);
    free(st->h7);
    free(st->head_out);
    vd_layers_memory_free(st->scratch_mem);
    free(st->scratch);
    free(st->wino_ws);
    g_free(st->rpn_head_weight);
    g_free(st->rpn_head_bias);
    if (st->detector != NULL && st->detector->clear != NULL)
        st->detector->clear(st);
    if (st->ranges_seen != NULL)
        g_hash_table_unref(st->ranges_seen);
    vd_xnn_free(st->xnn);
    vd_layers_engine_free(st->engine, st->stream);
    g_free(st);
}

/* The activations' layout (act_tag). oneDNN's convolution kernels take either
 * its blocked layout (the direct JIT kernels) or NHWC (the brgemm kernels,
 * among them AMX's, whose bf16 ones have 11x the throughput of float32 on the
 * same cores for an FPN-sized 3x3 convolution). Asked with format_tag_any about
 * a typical 3x3 convolution of the FPN and RPN (256 channels, ReLU), oneDNN says
 * which kernel it would run: where that is an AMX kernel on NHWC, every
 * activation from the stem's output to RoIAlign is NHWC, so that no layer
 * between them reorders (the upsampling, the pool level, the RPN decode,
 * squeeze-and-excitation and RoIAlign read either layout). Elsewhere the
 * blocked layout stays, also where oneDNN would pick its AVX-512 brgemm kernels
 * on NHWC (3.x), where NHWC is slower (tools/bench/CPU.md, 2026-12-06, activation
 * layouts). Winograd keeps the
 * blocked layout its transforms read; NHWC needs a multiple of 8 FPN channels
 * (RoIAlign's vectors). VD_CPU_LAYOUT ("nhwc", "blocked") overrides the
 * choice, for measurements. */
static gboolean choose_layout(cpu_state *st, GError **error)
{
    const char *forced = g_getenv("VD_CPU_LAYOUT");
    st->act_tag = st->block_tag;
    if (st->xnn != NULL) {
        /* XNNPACK's operators take NHWC only (and RoIAlign reads it in vectors of 8) */
        if (st->model->config.fpn_channels % 8 != 0) {
            g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                        "the CPU backend's layers run XNNPACK here (%s), on NHWC activations, "
                        "which need a multiple of 8 FPN channels, not %d",
                        st->layers_why, st->model->config.fpn_channels);
            return FALSE;
        }
        st->act_tag = dnnl_nhwc;
        st->winograd = st->own_winograd = FALSE;
        return TRUE;
    }
    if (st->int8) {
        /* the int8 kernels (VNNI brgemm, AMX) take NHWC; the float layers follow so
         * that nothing between them reorders */
        st->act_tag = dnnl_nhwc;
        st->winograd = st->own_winograd = FALSE;
        return TRUE;
    }
    if (g_strcmp0(forced, "nhwc") == 0 && st->model->config.fpn_channels % 8 == 0) {
        st->act_tag = dnnl_nhwc;
        st->winograd = st->own_winograd = FALSE; /* its transforms read blocks */
    }
    if (forced != NULL || st->winograd || st->own_winograd ||
        st->model->config.fpn_channels % 8 != 0)
        return TRUE;

    dnnl_data_type_t dt = act_dt(st);
    enum { C = 256, HW = 64 };
    vd_conv_desc desc = vd_layers_probe_desc(C, HW, HW, dt, dnnl_format_tag_any);
    desc.act = VD_ACT_RELU;
    dnnl_dims_t dims = {1, C, HW, HW};
    dnnl_primitive_desc_t pd = NULL;
    dnnl_memory_t nhwc = NULL;
    gboolean ok = vd_layers_conv_pd(st->engine, &desc, &pd, "the layout probe", error) &&
                  vd_layers_memory_new(st->engine, 4, dims, dt, dnnl_nhwc, DNNL_MEMORY_NONE, &nhwc,
                                       "the layout probe", error);
    if (ok && strstr(vd_layers_pd_impl(pd), "amx") != NULL &&
        vd_layers_md_equal(vd_layers_pd_md(pd, dnnl_query_dst_md), vd_layers_memory_md(nhwc)))
        st->act_tag = dnnl_nhwc;
    vd_layers_memory_free(nhwc);
    vd_layers_pd_free(pd);
    return ok;
}

/* The kinds of detector, by the model's (vd_cpu_private.h). */
static const cpu_detector *const cpu_detectors[] = {&vd_cpu_two_stage, &vd_cpu_one_stage,
                                                    &vd_cpu_ssd};

static const cpu_detector *detector_of(const vd_model *model)
{
    for (size_t i = 0; i < G_N_ELEMENTS(cpu_detectors); i++)
        if (cpu_detectors[i]->kind == model->config.detector)
            return cpu_detectors[i];
    return &vd_cpu_two_stage;
}

/* The backbones, by the model's backbone type (vd_cpu_private.h). */
static const cpu_backbone *const cpu_backbones[] = {&vd_cpu_resnet, &vd_cpu_mnv3,
                                                    &vd_cpu_ssd_backbone};

static const cpu_backbone *backbone_of(const vd_model *model)
{
    for (size_t i = 0; i < G_N_ELEMENTS(cpu_backbones); i++)
        if (cpu_backbones[i]->type == model->config.backbone_type)
            return cpu_backbones[i];
    return NULL;
}

/* The precision a CPU context runs for @params: AUTO is fp32 when calibrating
 * (calibration records float32 activations), else bf16 where the processor has
 * it natively (@native_bf16: AVX512-BF16, AMX), where it is faster than fp32 and
 * keeps the bundled model's accuracy (tools/bench/CPU.md, models/README.md), and
 * fp32 elsewhere. */
static vd_precision cpu_precision(const vd_context_params *params, gboolean native_bf16)
{
    if (params->precision != VD_PRECISION_AUTO)
        return params->precision;
    if (params->calibrate)
        return VD_PRECISION_FP32;
    return native_bf16 ? VD_PRECISION_BF16 : VD_PRECISION_FP32;
}

/* Refuses @precision, which oneDNN has no kernel for on this CPU, naming what the
 * CPU runs (its ISA as its architecture's, and the cap): on x86 what it needs
 * (@x86_needs) and @why; on aarch64, where oneDNN has none, what the processor has
 * that this oneDNN does not use (@unused, or NULL). bf16 on aarch64:
 * refuse_bf16_aarch64. */
static void refuse_precision(GError **error, const vd_cpu_caps *caps, const char *precision,
                             const char *x86_needs, const char *why, const char *instead,
                             const char *unused)
{
    const char *cap = g_getenv("ONEDNN_MAX_CPU_ISA");
    char *runs = g_strdup_printf("%s%s%s", caps->description,
                                 cap != NULL ? ", capped by ONEDNN_MAX_CPU_ISA=" : "",
                                 cap != NULL ? cap : "");
    if (caps->arch == VD_CPU_ARCH_AARCH64)
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "precision %s has no oneDNN kernel on this aarch64 CPU, which runs %s%s%s "
                    "(%s runs on x86 with %s): use fp32",
                    precision, runs, unused != NULL ? "; the processor has " : "",
                    unused != NULL ? unused : "", precision, x86_needs);
    else
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "precision %s needs a CPU with %s, and this one runs %s (%s): use %s",
                    precision, x86_needs, runs, why, instead);
    g_free(runs);
}

/* Refuses bf16 on aarch64, naming what the processor has and what oneDNN gives
 * the bf16 layers when asked (vd_layers_probe_bf16). Debian 13's oneDNN (3.7.2,
 * without Arm Compute Library) has reference loops alone there, BF16 processor or
 * not: a bf16 convolution is ref:any in the layouts of its choice and in NHWC, on
 * Advanced SIMD and on SVE at 256 and 512 bits (its SVE brgemm kernels take float32
 * and int8 only, and ignore the bf16 fpmath mode), and its bf16 matmul,
 * "gemm:jit:bf16", calls its reference GEMM off x86; XNNPACK (2024-11) has no bf16
 * operator (docs/engine.md, "bf16 on arm64"). */
static void refuse_bf16_aarch64(GError **error, const vd_cpu_caps *caps)
{
    const char *cap = g_getenv("ONEDNN_MAX_CPU_ISA");
    char *version = vd_layers_version();
    vd_layers_bf16_probe probe;
    GError *probe_error = NULL;
    GString *s = g_string_new(NULL);

    g_string_printf(s,
                    "precision bf16 has no oneDNN kernel on this aarch64 CPU, which runs %s%s%s: ",
                    caps->description, cap != NULL ? ", capped by ONEDNN_MAX_CPU_ISA=" : "",
                    cap != NULL ? cap : "");
    g_string_append(s, caps->bf16 ? "the processor has BF16, but "
                                  : "the processor has no BF16 (Neoverse V1, N2 and later have "
                                    "it), and ");
    if (!vd_layers_probe_bf16(&probe, &probe_error))
        g_string_append_printf(s, "oneDNN %s could not be asked (%s)", version,
                               probe_error->message);
    else
        g_string_append_printf(
            s,
            "oneDNN %s, asked for a bf16 3x3 convolution in the layouts of its choice, gives %s, "
            "and for a bf16 matmul %s%s",
            version, probe.conv, probe.matmul,
            probe.native ? ", which the engine does not run bf16 with on aarch64 (its bf16 is "
                           "checked on x86 alone)"
                         : ": reference loops or none (its SVE kernels take float32 and int8 "
                           "only; its bf16 matmul is its reference GEMM off x86)");
    g_string_append(s, "; XNNPACK has no bf16 operator; bf16 runs on x86 with AVX512_BF16 or "
                       "AMX: use fp32");
    g_set_error_literal(error, VD_ERROR, VD_ERROR_UNSUPPORTED, s->str);
    g_string_free(s, TRUE);
    g_clear_error(&probe_error);
    g_free(version);
}

/* Refuses fp16 (where fp16_runs() says no), naming the cause: oneDNN's layers
 * (@layers_why says why they run), an aarch64 CPU without the FP16 arithmetic, or
 * XNNPACK without fp16 kernels for this processor (@f16_why). */
static void refuse_fp16(GError **error, const vd_cpu_caps *caps, gboolean xnn,
                        const char *layers_why, const char *f16_why)
{
    const char *head = "precision fp16 needs XNNPACK's layers and the CPU's FP16 arithmetic "
                       "(aarch64 asimdhp, Cortex-A76 and later; on x86 XNNPACK's AVX2 and F16C "
                       "kernels)";
    if (!xnn)
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "%s; the CPU backend's layers run oneDNN here (%s%s), which has no fp16 "
                    "kernels for this CPU (%s): use fp32%s",
                    head, layers_why, vd_xnn_built() ? "" : "; this build has no XNNPACK",
                    caps->description, caps->native_bf16 ? " or bf16" : "");
    else if (caps->arch == VD_CPU_ARCH_AARCH64 && !caps->fp16)
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "%s; this aarch64 CPU runs %s, without the FP16 arithmetic: use fp32", head,
                    caps->description);
    else
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "%s; the layers run XNNPACK here (%s), but %s (%s): use fp32", head, layers_why,
                    f16_why, caps->description);
}

/* Whether fp16 runs here: XNNPACK's layers (@xnn), on an aarch64 CPU with the
 * FP16 arithmetic, where XNNPACK has fp16 kernels (*@f16_why says why not). */
static gboolean fp16_runs(const vd_cpu_caps *caps, gboolean xnn, const char **f16_why)
{
    *f16_why = "";
    return xnn && (caps->arch != VD_CPU_ARCH_AARCH64 || caps->fp16) &&
           vd_xnn_f16_supported(f16_why);
}

/* What the CPU backend runs on this machine (oneDNN's ISA, capped by
 * ONEDNN_MAX_CPU_ISA): fp32, bf16 where the processor has it natively, fp16 on
 * XNNPACK's layers with the CPU's FP16 arithmetic, int8 with VNNI (on XNNPACK's
 * layers: with the dot product) on a calibrated ResNet model, calibration in fp32
 * on a ResNet model, and a box head whose fc6 takes the pooler's output. */
static gboolean cpu_supports(const vd_model *model, const vd_context_params *params, GError **error)
{
    vd_cpu_caps caps;
    vd_cpu_caps_get(&caps);
    const vd_config *cfg = &model->config;
    const cpu_backbone *backbone = backbone_of(model);
    /* XNNPACK's layers (vd_cpu_xnnpack.h) run float32, fp16 or int8: AUTO is fp32 there */
    gboolean xnn = FALSE;
    const char *why = NULL;
    if (!vd_xnn_choose_for(params->precision == VD_PRECISION_INT8, &xnn, &why, error))
        return FALSE;
    vd_precision precision = cpu_precision(params, caps.native_bf16 && !xnn);
    if (backbone == NULL) {
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "the CPU backend does not support the backbone of this model (%s)",
                    vd_model_description(model));
        return FALSE;
    }
    if (precision != VD_PRECISION_FP32 && precision != VD_PRECISION_BF16 &&
        precision != VD_PRECISION_FP16 && precision != VD_PRECISION_INT8) {
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "precision %s is not supported on the CPU backend (fp32, bf16, fp16 or int8)",
                    vd_precision_name(precision));
        return FALSE;
    }
    if (!detector_of(model)->supports(model, precision, params, error))
        return FALSE;
    if ((params->calibrate || precision == VD_PRECISION_INT8) && !backbone->int8) {
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "int8 covers the ResNet backbones, not %s (%s): use fp32 or bf16",
                    model->backbone_name, vd_model_description(model));
        return FALSE;
    }
    if (params->calibrate && precision != VD_PRECISION_FP32) {
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED, "int8 calibration runs in fp32, not %s",
                    vd_precision_name(precision));
        return FALSE;
    }
    if (precision == VD_PRECISION_INT8) {
        const char *int8_why = NULL;
        if (xnn && !vd_xnn_int8_supported(&int8_why)) {
            const char *head = "precision int8 on XNNPACK's layers needs the CPU's dot product "
                               "(aarch64 asimddp: Cortex-A76, Neoverse N1 and later)";
            if (caps.arch == VD_CPU_ARCH_AARCH64 && !caps.dotprod)
                g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                            "%s; the layers run XNNPACK here (%s), and this CPU runs %s, without "
                            "the dot product: use fp32",
                            head, why, caps.description);
            else
                g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                            "%s; the layers run XNNPACK here (%s), but %s (%s): use fp32", head,
                            why, int8_why, caps.description);
            return FALSE;
        }
        if (!xnn && !caps.int8) {
            refuse_precision(error, &caps, "int8", "VNNI (AVX512-VNNI, AVX-VNNI or AMX)",
                             "without it int8 products are emulated in 16 bits and saturate",
                             "fp32 or bf16",
                             caps.dotprod ? "the dot product, which this oneDNN does not use for "
                                            "int8 (XNNPACK's int8 layers do, where they run)"
                                          : NULL);
            return FALSE;
        }
        if (model->int8_ranges == NULL) {
            g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                        "precision int8 needs a calibrated model, and %s has no int8 calibration: "
                        "make one with vd-detect --calibrate",
                        vd_model_description(model));
            return FALSE;
        }
        if (cfg->fpn_channels % 8 != 0) {
            g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                        "precision int8 needs a multiple of 8 FPN channels, not %d",
                        cfg->fpn_channels);
            return FALSE;
        }
    }

    if (precision == VD_PRECISION_BF16 && caps.arch == VD_CPU_ARCH_AARCH64) {
        refuse_bf16_aarch64(error, &caps);
        return FALSE;
    }
    if (precision == VD_PRECISION_BF16 && !caps.native_bf16) {
        refuse_precision(error, &caps, "bf16", "AVX512_BF16 or AMX",
                         "without it bf16 would be emulated, many times slower than fp32", "fp32",
                         NULL);
        return FALSE;
    }
    const char *f16_why = NULL;
    if (precision == VD_PRECISION_FP16 && !fp16_runs(&caps, xnn, &f16_why)) {
        refuse_fp16(error, &caps, xnn, why, f16_why);
        return FALSE;
    }
    if (xnn && precision != VD_PRECISION_FP32 && precision != VD_PRECISION_FP16 &&
        precision != VD_PRECISION_INT8) {
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "precision %s: the CPU backend's layers run XNNPACK here (%s), in fp32, fp16 "
                    "(with the CPU's FP16 arithmetic) or int8 (with its dot product): use fp32",
                    vd_precision_name(precision), why);
        return FALSE;
    }
    return TRUE;
}

/* After cpu_supports(). */
static void *cpu_create(vd_context *ctx, GError **error)
{
    /* What oneDNN runs here: the machine's ISA, capped by ONEDNN_MAX_CPU_ISA. */
    vd_cpu_caps caps;
    vd_cpu_caps_get(&caps);
    gboolean xnn = FALSE;
    const char *layers_why = NULL;
    if (!vd_xnn_choose_for(ctx->params.precision == VD_PRECISION_INT8, &xnn, &layers_why, error))
        return NULL;
    gboolean native_bf16 = caps.native_bf16 && !xnn; /* XNNPACK's layers: no bf16 */
    ctx->params.precision = cpu_precision(&ctx->params, native_bf16);

    cpu_state *st = g_new0(cpu_state, 1);
    st->layers_why = layers_why;
    st->model = ctx->model;
    st->backbone = backbone_of(ctx->model);
    st->detector = detector_of(ctx->model);
    st->caps = caps;
    st->cb = caps.channel_block;
    st->block_tag = st->cb == 16 ? dnnl_nChw16c : dnnl_nChw8c;
    st->act_tag = st->block_tag;
    st->int8 = ctx->params.precision == VD_PRECISION_INT8;
    /* int8 runs its float layers in bf16 where the processor has it natively */
    st->bf16 = ctx->params.precision == VD_PRECISION_BF16 || (st->int8 && native_bf16);
    /* fp16: XNNPACK's layers only (cpu_supports) */
    st->fp16 = ctx->params.precision == VD_PRECISION_FP16;
    if (ctx->params.calibrate)
        st->ranges_seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    st->n_threads = ctx->params.n_threads > 0 ? ctx->params.n_threads : omp_get_num_procs();
    /* the weight reorders below run OpenMP too */
    omp_set_num_threads(st->n_threads);
    if (!vd_layers_engine_new(&st->engine, &st->stream, error) ||
        (xnn && (st->xnn = vd_xnn_new(st->n_threads, error)) == NULL)) {
        cpu_destroy(st);
        return NULL;
    }
    /* oneDNN 2.x has float32 Winograd kernels for AVX-512 only, 3.x none. Ours
     * runs wherever oneDNN has none: F(4x4, 3x3) on real points below AVX-512
     * (blocks of 8), as accurate as oneDNN's AVX2 direct kernels, and on AVX-512
     * (3.x) F(4x4, 3x3) on the points 0, +-1, +-i, as accurate as oneDNN's AVX-512
     * direct kernels: the real points' F(4x4, 3x3) there moves Keypoint R-CNN's
     * keypoints and Mask R-CNN v2's masks (two sizes) past the parity tolerances in
     * the Debian 13 root (docs/engine.md). VD_CPU_WINOGRAD (for measurements): 0
     * none, "own" ours on every ISA; "2x3", "4x3" or "complex": ours of that kind
     * on every ISA. */
    const char *winograd = g_getenv("VD_CPU_WINOGRAD");
    gboolean onednn_winograd = vd_layers_has_winograd(st->engine, st->block_tag);
    vd_wino_kind forced_kind = g_strcmp0(winograd, "2x3") == 0       ? VD_WINO_2X3
                               : g_strcmp0(winograd, "4x3") == 0     ? VD_WINO_4X3
                               : g_strcmp0(winograd, "complex") == 0 ? VD_WINO_4X3_COMPLEX
                                                                     : 0;
    gboolean own = g_strcmp0(winograd, "own") == 0 || forced_kind != 0;
    st->winograd = g_strcmp0(winograd, "0") != 0 && !own && onednn_winograd;
    st->own_winograd =
        own || (g_strcmp0(winograd, "0") != 0 && !st->winograd && caps.own_winograd_ok);
    st->wino_kind = forced_kind != 0                   ? forced_kind
                    : st->cb == 16 && !onednn_winograd ? VD_WINO_4X3_COMPLEX
                                                       : VD_WINO_4X3;
    /* the RoI heads' float32 convolutions (roi_convs_init), whatever the context's
     * precision and whichever Winograd the rest runs: ours F(2x2, 3x3) */
    st->roi_winograd = g_strcmp0(winograd, "0") != 0 && caps.own_winograd_ok && !xnn;
    if (st->bf16 || st->fp16) /* float32 only (use_winograd) */
        st->winograd = st->own_winograd = FALSE;
    if (!choose_layout(st, error) || !st->detector->prepare(st, error)) {
        cpu_destroy(st);
        return NULL;
    }
    return st;
}

static gboolean cpu_detect(void *p, vd_context *ctx, const vd_image *images, int n_images,
                           vd_result *results, GError **error)
{
    cpu_state *st = p;
    /* OpenMP's thread count is per calling thread: set it for this one. */
    omp_set_num_threads(st->n_threads);
    for (int i = 0; i < n_images; i++)
        if (!detect_one(st, ctx, &images[i], &results[i], i == 0 && vd_context_observing(ctx),
                        error))
            return FALSE;
    return TRUE;
}

static char *cpu_describe(void *p, const vd_context *ctx)
{
    cpu_state *st = p;
    char *version = vd_layers_version();
    char block[16];
    g_snprintf(block, sizeof(block), "nChw%dc", st->cb);
    /* which library runs the layers, and why: where XNNPACK does, and where oneDNN
     * runs its reference kernels (XNNPACK absent or not starting) */
    gboolean layers = st->xnn != NULL || strstr(st->layers_why, "reference") != NULL;
    char *s = g_strdup_printf("cpu: oneDNN %s, ISA %s, %s%s, %d threads, layout %s, "
                              "Winograd %s%s%s%s",
                              version, st->caps.description, st->int8 ? "int8 + " : "",
                              st->fp16   ? "fp16"
                              : st->bf16 ? "bf16"
                                         : "fp32",
                              st->n_threads, st->act_tag == dnnl_nhwc ? "nhwc" : block,
                              st->winograd       ? "oneDNN"
                              : st->own_winograd ? "own"
                                                 : "off",
                              !layers           ? ""
                              : st->xnn != NULL ? ", layers XNNPACK ("
                                                : ", layers oneDNN (",
                              layers ? st->layers_why : "", layers ? ")" : "");
    g_free(version);
    return s;
}

static void kernel_add_v(GArray *out, GStringChunk *strings, dnnl_primitive_t prim,
                         const vd_xnn_op *op, const char *kind, const char *layer_fmt, va_list ap)
{
    if (prim == NULL && op == NULL)
        return;
    const char *impl =
        prim != NULL ? vd_layers_pd_impl(vd_layers_primitive_pd(prim)) : vd_xnn_op_impl(op);
    char *layer = g_strdup_vprintf(layer_fmt, ap);
    vd_kernel_info k = {
        .layer = g_string_chunk_insert_const(strings, layer),
        .kind = kind,
        .implementation = g_string_chunk_insert_const(strings, impl),
    };
    g_free(layer);
    g_array_append_val(out, k);
}

void kernel_add(GArray *out, GStringChunk *strings, dnnl_primitive_t prim, const char *kind,
                const char *layer_fmt, ...)
{
    va_list ap;
    va_start(ap, layer_fmt);
    kernel_add_v(out, strings, prim, NULL, kind, layer_fmt, ap);
    va_end(ap);
}

void kernel_add_op(GArray *out, GStringChunk *strings, dnnl_primitive_t prim, const vd_xnn_op *op,
                   const char *kind, const char *layer_fmt, ...)
{
    va_list ap;
    va_start(ap, layer_fmt);
    kernel_add_v(out, strings, prim, op, kind, layer_fmt, ap);
    va_end(ap);
}

void kernel_add_wino(GArray *out, GStringChunk *strings, const vd_wino *wino, const char *kind,
                     const char *layer)
{
    vd_kernel_info k = {
        .layer = g_string_chunk_insert_const(strings, layer),
        .kind = kind,
        .implementation = vd_wino_name(wino),
    };
    g_array_append_val(out, k);
}

/* A convolution's primitive, or our Winograd. */
void conv_kernels(GArray *out, GStringChunk *strings, const cpu_conv *cv, const char *layer)
{
    if (cv->wino != NULL)
        kernel_add_wino(out, strings, cv->wino, "convolution", layer);
    else
        kernel_add_op(out, strings, cv->prim, cv->xnn, "convolution", "%s", layer);
}

static void cpu_kernels(void *p, GArray *out, GStringChunk *strings)
{
    cpu_state *st = p;
    cpu_plan *plan = st->plan;
    char name[96];
    if (plan != NULL) {
        kernel_add(out, strings, plan->input_convert, "reorder", "transform.input");
        plan->backbone->kernels(st, plan, out, strings);
        /* SSD has no FPN: its n_returned counts the feature maps its heads read */
        int n_fpn = st->model->config.detector == VD_DETECTOR_SSD ? 0 : plan->n_returned;
        for (int i = 0; i < n_fpn; i++) {
            g_snprintf(name, sizeof(name), "backbone.fpn.inner_blocks.%d", i);
            conv_kernels(out, strings, &plan->fpn_inner[i], name);
            g_snprintf(name, sizeof(name), "backbone.fpn.layer_blocks.%d", i);
            conv_kernels(out, strings, &plan->fpn_layer[i], name);
        }
        if (st->model->config.fpn_p6p7) {
            conv_kernels(out, strings, &plan->fpn_p6, "backbone.fpn.extra_blocks.p6");
            conv_kernels(out, strings, &plan->fpn_p7, "backbone.fpn.extra_blocks.p7");
        }
    }
    st->detector->kernels(st, plan, out, strings);
}

static char *cpu_calibration(void *p, GError **error)
{
    cpu_state *st = p;
    if (st->ranges_seen == NULL || st->frames_seen == 0) {
        g_set_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT,
                    "no frame has been run to calibrate on");
        return NULL;
    }
    return vd_calibration_to_json(st->ranges_seen, st->frames_seen);
}

const vd_backend vd_cpu_backend = {
    .name = "cpu",
    .supports = cpu_supports,
    .create = cpu_create,
    .destroy = cpu_destroy,
    .detect = cpu_detect,
    .describe = cpu_describe,
    .kernels = cpu_kernels,
    .calibration = cpu_calibration,
};
