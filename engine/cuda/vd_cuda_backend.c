/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The CUDA backend: torchvision's Faster R-CNN inference (docs/torchvision-inference.md,
 * "spec" below)
 * with cuDNN convolutions, cuBLASLt linear layers and the kernels of kernels/,
 * in the stage structure of the CPU backend (preprocess, backbone, FPN, RPN,
 * RoIAlign, box head, postprocess) and with its observer tensor names, so that
 * the two can be compared tensor by tensor. Each backbone has its own file
 * (vd_cuda_resnet.c, vd_cuda_mnv3.c: what it supports, its weights, its plan,
 * its enqueueing), registered in cuda_backbones[] by the model's backbone type;
 * this file runs the rest and holds what they share (vd_cuda_backbone.h).
 *
 * One stream per context. Everything that depends on the padded input size
 * (activations, convolution algorithms, anchors, NMS workspaces) lives in a plan
 * built on the first frame of a size. A frame then is: its pixels copied into
 * pinned memory and uploaded once, every stage enqueued with device-side counts
 * between them (proposals kept by NMS, detections), one asynchronous copy of the
 * result (count + detections) into pinned memory, and one event wait: exactly
 * one host synchronisation per frame, through the counted wrapper of
 * vd_cuda_util.c. From the second frame of a size (and set of thresholds) on,
 * the device work of a frame is captured once into a CUDA graph and replayed
 * (VD_CUDA_GRAPHS=0 in the environment keeps every frame eager). A capture or
 * instantiation that fails (a transient out-of-memory, say) is tried again
 * after 1, 2, 4, ... eager frames, at most VD_GRAPH_RETRY_MAX_FRAMES, each
 * graph (single image, each batch size) backing off on its own; the context's
 * run status says so for the graph of the last batch, and why
 * (vd_context_run_status()).
 *
 * Precision: fp16 (default) stores activations and weights in half with fp32
 * accumulation in cuDNN and cuBLASLt, RoIAlign interpolates and accumulates in
 * fp32, and the box head's last layer, softmax, box decoding and NMS are fp32.
 * fp32 mode is fp32 throughout (no TF32), to compare with the CPU backend.
 *
 * Batches: a batch of images of one size and format runs as one unit through
 * a plan of several image slots (every activation and cuDNN descriptor with
 * N > 1, per-image offsets everywhere else), with its own graph, one readback
 * and one host synchronisation per batch; engine/cuda/BATCHING.md. A single
 * image, a batch mixing sizes or formats, and any batch while an observer is
 * attached run image by image through the one-slot plan.
 *
 * Mask R-CNN: the mask branch runs on the device after the postprocess, image
 * by image, over a fixed number of rows (the result capacity), and its 28x28
 * probabilities come back in the same one copy; the host pastes them with the
 * CPU's vd_paste_mask (engine/MASKRCNN.md §4). */
#include "vd_config.h"
#include "cpu/vd_cpu_ops.h"
#include "cuda/vd_cuda_debug.h"
#include "cuda/vd_cuda_backbone.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define VD_CUDA_LT_WORKSPACE ((size_t)32 << 20)

/* ------------------------------------------------------------------------ */
/* Device availability                                                       */

static gboolean device_usable(int device_index, GError **error)
{
    int count = 0, major = 0, minor = 0;
    cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
        cudaGetLastError();
        g_set_error(error, VD_ERROR, VD_ERROR_DEVICE, "no usable CUDA device: %s",
                    cudaGetErrorString(status));
        return FALSE;
    }
    if (device_index < 0 || device_index >= count) {
        g_set_error(error, VD_ERROR, VD_ERROR_DEVICE,
                    "CUDA device %d requested but %d device%s found", device_index, count,
                    count == 1 ? " was" : "s were");
        return FALSE;
    }
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device_index) !=
            cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device_index) !=
            cudaSuccess) {
        cudaGetLastError();
        g_set_error(error, VD_ERROR, VD_ERROR_DEVICE, "cannot query CUDA device %d", device_index);
        return FALSE;
    }
    if (major * 10 + minor < VD_CUDA_MIN_ARCH) {
        g_set_error(error, VD_ERROR, VD_ERROR_DEVICE,
                    "CUDA device %d has compute capability %d.%d; this build needs %d.%d or "
                    "newer (meson option gpu_arch)",
                    device_index, major, minor, VD_CUDA_MIN_ARCH / 10, VD_CUDA_MIN_ARCH % 10);
        return FALSE;
    }
    return TRUE;
}

gboolean vd_cuda_available(int device_index, GError **error)
{
    return device_usable(device_index, error);
}

/* ------------------------------------------------------------------------ */
/* Creation                                                                  */

static void cuda_destroy(void *p)
{
    cuda_state *st = p;
    if (st == NULL)
        return;
    cudaSetDevice(st->device);
    if (st->layers.stream != NULL)
        cudaStreamSynchronize(st->layers.stream);
    forget_graph(st);
    cuda_plan_free(st->plan);
    cuda_plan_free(st->batch_plan);
    mask_free(&st->mask);
    vd_cuda_linear_clear(&st->fc6);
    vd_cuda_linear_clear(&st->fc7);
    vd_cuda_linear_clear(&st->predictor);
    vd_cuda_pool_free(&st->weights_pool);
    vd_cuda_upload_done(&st->layers);
    cudaFree(st->observe_scratch);
    cudaFree(st->layers.workspace);
    cudaFree(st->layers.lt_workspace);
    cudaFree(st->raw);
    cudaFreeHost(st->staging);
    cudaFree(st->result_device);
    cudaFreeHost(st->result_host);
    cudaFree(st->box_keep);
    if (st->frame_done != NULL)
        cudaEventDestroy(st->frame_done);
    for (int i = 0; i <= VD_MAX_STAGES; i++)
        if (st->stage_events[i] != NULL)
            cudaEventDestroy(st->stage_events[i]);
    if (st->layers.relu != NULL)
        cudnnDestroyActivationDescriptor(st->layers.relu);
    if (st->layers.identity != NULL)
        cudnnDestroyActivationDescriptor(st->layers.identity);
    if (st->layers.cudnn != NULL)
        cudnnDestroy(st->layers.cudnn);
    if (st->layers.cublaslt != NULL)
        cublasLtDestroy(st->layers.cublaslt);
    if (st->layers.stream != NULL)
        cudaStreamDestroy(st->layers.stream);
    cudaGetLastError();
    g_free(st);
}

gboolean cuda_upload_conv(cuda_state *st, vd_cuda_conv_weights *dst, const vd_conv *c,
                          int padded_in, int padded_out, GError **error)
{
    return vd_cuda_conv_weights_upload(&st->layers, &st->weights_pool, dst, c->weight, c->bias,
                                       c->out_channels, c->in_channels, c->kernel, c->stride,
                                       c->padding, padded_out, padded_in, error);
}

/* The mask head's weights (engine/MASKRCNN.md §2): the 3x3 convolutions (v2's
 * batch-norm folded at load), the ConvTranspose2d (torch's [in][out][2][2],
 * no kernel flip) as a 1x1 convolution whose output channel
 * (2 ky + kx) * deconv_channels + o is tap (ky, kx) of output channel o, with
 * o's bias, and the 1x1 logits convolution. Output channels padded to
 * multiples of 8 with zeros (fp16 tensor cores; the padding stays zero
 * through the ReLUs and meets zero weights). */
static gboolean upload_mask_weights(cuda_state *st, GError **error)
{
    const vd_model *m = st->model;
    const vd_config *cfg = &m->config;
    int in_p = cfg->fpn_channels;
    st->n_mask_convs = cfg->n_mask_convs;
    for (int j = 0; j < cfg->n_mask_convs; j++) {
        int out_p = round_up(m->mask_convs[j].out_channels, 8);
        if (!cuda_upload_conv(st, &st->mask_convs[j], &m->mask_convs[j], in_p, out_p, error))
            return FALSE;
        in_p = out_p;
    }
    const vd_conv *d = &m->mask_deconv;
    int R = d->out_channels, Rp = round_up(R, 8), in = d->in_channels;
    st->deconv_channels = Rp;
    float *w = g_try_malloc((size_t)4 * Rp * in * sizeof(float));
    float *b = g_try_malloc((size_t)4 * Rp * sizeof(float));
    gboolean ok = FALSE;
    if (w == NULL || b == NULL) {
        g_set_error(error, VD_ERROR, VD_ERROR_OUT_OF_MEMORY, "out of memory preparing weights");
        goto out_free;
    }
    vd_deconv2x2_as_conv1x1(d->weight, d->bias, in, R, Rp, w, b);
    ok = vd_cuda_conv_weights_upload(&st->layers, &st->weights_pool, &st->mask_deconv, w, b, 4 * Rp,
                                     in, 1, 1, 0, 4 * Rp, in_p, error) &&
         cuda_upload_conv(st, &st->mask_logits, &m->mask_logits, Rp,
                          round_up(m->mask_logits.out_channels, 8), error);
out_free:
    g_free(w);
    g_free(b);
    return ok;
}

/* Names every convolution's weights after torchvision's module, for errors and
 * vd_context_kernels(). */
static void name_conv_weights(cuda_state *st)
{
    st->backbone->name(st);
#define NAME(w, ...) g_snprintf((w).name, sizeof((w).name), __VA_ARGS__)
    for (int i = 0; i < 4; i++) {
        NAME(st->fpn_inner[i], "backbone.fpn.inner_blocks.%d", i);
        NAME(st->fpn_layer[i], "backbone.fpn.layer_blocks.%d", i);
    }
    NAME(st->rpn_conv, "rpn.head.conv.0");
    for (int j = 1; j < VD_MAX_RPN_CONVS; j++)
        NAME(st->rpn_conv_more[j - 1], "rpn.head.conv.%d", j);
    NAME(st->rpn_head, "rpn.head.cls_logits+bbox_pred");
    for (int j = 0; j < VD_MAX_BOX_CONVS; j++)
        NAME(st->box_convs[j], "roi_heads.box_head.%d", j);
    for (int j = 0; j < VD_MAX_MASK_CONVS; j++)
        NAME(st->mask_convs[j], "roi_heads.mask_head.%d", j);
    NAME(st->mask_deconv, "roi_heads.mask_predictor.conv5_mask");
    NAME(st->mask_logits, "roi_heads.mask_predictor.mask_fcn_logits");
#undef NAME
}

/* Size-independent weights: every convolution as NHWC filters in the context's
 * dtype, the RPN head's two 1x1 convolutions merged (as the CPU does), fc6
 * permuted to the NHWC flatten order of our RoIAlign output, the box predictor
 * merged into one product with fp32 output. */
static gboolean upload_weights(cuda_state *st, GError **error)
{
    const vd_model *m = st->model;
    const vd_config *cfg = &m->config;
    int A = cfg->anchors_per_location, C = cfg->fpn_channels;
    int P = cfg->roi_output_size, K = cfg->num_classes, rep = cfg->representation_size;
    gboolean ok = FALSE;
    float *rpn_w = NULL, *rpn_b = NULL, *fc6_w = NULL, *pred_w = NULL, *pred_b = NULL;

    if (!cuda_upload_conv(st, &st->stem, &m->stem, st->input_channels, m->stem.out_channels, error))
        return FALSE;
    if (!st->backbone->upload(st, error))
        return FALSE;
    for (int i = 0; i < cfg->n_returned_layers; i++)
        if (!cuda_upload_conv(st, &st->fpn_inner[i], &m->fpn_inner[i], m->fpn_inner[i].in_channels,
                              m->fpn_inner[i].out_channels, error) ||
            !cuda_upload_conv(st, &st->fpn_layer[i], &m->fpn_layer[i], m->fpn_layer[i].in_channels,
                              m->fpn_layer[i].out_channels, error))
            return FALSE;
    if (!cuda_upload_conv(st, &st->rpn_conv, &m->rpn_conv, C, C, error))
        return FALSE;
    /* v2: the RPN head's further 3x3 convolutions (C -> C, with their biases) */
    for (int j = 1; j < cfg->rpn_conv_depth; j++)
        if (!cuda_upload_conv(st, &st->rpn_conv_more[j - 1], &m->rpn_conv_more[j - 1], C, C, error))
            return FALSE;
    /* v2's conv box head: batch-norm folded at load (weight and bias), output
     * channels padded to multiples of 8 with zeros as the mask head's are */
    int head_c = C, head_cp = C; /* fc6's input channels, and as laid out */
    st->n_box_convs = cfg->n_box_convs;
    st->has_fc7 = cfg->n_box_convs == 0;
    for (int j = 0; j < cfg->n_box_convs; j++) {
        int out_p = round_up(m->box_convs[j].out_channels, 8);
        if (!cuda_upload_conv(st, &st->box_convs[j], &m->box_convs[j], head_cp, out_p, error))
            return FALSE;
        head_c = m->box_convs[j].out_channels;
        head_cp = out_p;
    }
    size_t fc6_in = (size_t)P * P * head_cp;

    rpn_w = g_try_malloc((size_t)5 * A * C * sizeof(float));
    rpn_b = g_try_malloc((size_t)5 * A * sizeof(float));
    fc6_w = g_try_malloc0((size_t)m->fc6.out_features * fc6_in * sizeof(float));
    pred_w = g_try_malloc((size_t)5 * K * rep * sizeof(float));
    pred_b = g_try_malloc((size_t)5 * K * sizeof(float));
    if (rpn_w == NULL || rpn_b == NULL || fc6_w == NULL || pred_w == NULL || pred_b == NULL) {
        g_set_error(error, VD_ERROR, VD_ERROR_OUT_OF_MEMORY, "out of memory preparing weights");
        goto out_free;
    }
    memcpy(rpn_w, m->rpn_cls.weight, sizeof(float) * A * C);
    memcpy(rpn_w + (size_t)A * C, m->rpn_bbox.weight, sizeof(float) * 4 * A * C);
    memcpy(rpn_b, m->rpn_cls.bias, sizeof(float) * A);
    memcpy(rpn_b + A, m->rpn_bbox.bias, sizeof(float) * 4 * A);
    if (!vd_cuda_conv_weights_upload(&st->layers, &st->weights_pool, &st->rpn_head, rpn_w, rpn_b,
                                     5 * A, C, 1, 1, 0, st->head_stride, C, error))
        goto out_free;

    vd_fc6_weight_to_nhwc(m->fc6.weight, m->fc6.out_features, head_c, P * P, head_cp, fc6_w);
    memcpy(pred_w, m->cls_score.weight, sizeof(float) * K * rep);
    memcpy(pred_w + (size_t)K * rep, m->bbox_pred.weight, sizeof(float) * 4 * K * rep);
    memcpy(pred_b, m->cls_score.bias, sizeof(float) * K);
    memcpy(pred_b + K, m->bbox_pred.bias, sizeof(float) * 4 * K);
    ok = vd_cuda_linear_upload(&st->layers, &st->weights_pool, &st->fc6, fc6_w, m->fc6.bias,
                               m->fc6.out_features, (int)fc6_in, round_up(m->fc6.out_features, 8),
                               st->dtype, TRUE, error) &&
         (!st->has_fc7 ||
          vd_cuda_linear_upload(&st->layers, &st->weights_pool, &st->fc7, m->fc7.weight,
                                m->fc7.bias, m->fc7.out_features, m->fc7.in_features,
                                round_up(m->fc7.out_features, 8), st->dtype, TRUE, error)) &&
         vd_cuda_linear_upload(&st->layers, &st->weights_pool, &st->predictor, pred_w, pred_b,
                               5 * K, rep, st->predictor_stride, VD_DTYPE_F32, FALSE, error);
    ok = ok && (!st->has_masks || upload_mask_weights(st, error));
out_free:
    g_free(rpn_w);
    g_free(rpn_b);
    g_free(fc6_w);
    g_free(pred_w);
    g_free(pred_b);
    return ok;
}

/* The mask head's shapes as the CUDA branch runs them (the loader checks
 * each tensor; this, that they chain). */
static gboolean mask_head_chains(const vd_model *m, GError **error)
{
    const vd_config *cfg = &m->config;
    int in = cfg->fpn_channels;
    gboolean ok = cfg->n_mask_roi_levels >= 1 && cfg->n_mask_roi_levels <= cfg->n_fpn_levels &&
                  cfg->n_mask_roi_levels <= VD_KERNEL_MAX_LEVELS && cfg->mask_output_size >= 1 &&
                  cfg->n_mask_convs >= 0 && cfg->n_mask_convs <= VD_MAX_MASK_CONVS;
    for (int j = 0; ok && j < cfg->n_mask_convs; j++) {
        const vd_conv *c = &m->mask_convs[j];
        ok = c->in_channels == in && c->kernel == 3 && c->stride == 1 && c->padding == 1 &&
             c->groups == 1;
        in = c->out_channels;
    }
    ok = ok && m->mask_deconv.in_channels == in && m->mask_deconv.kernel == 2 &&
         m->mask_deconv.stride == 2 && m->mask_deconv.padding == 0 &&
         m->mask_logits.in_channels == m->mask_deconv.out_channels && m->mask_logits.kernel == 1 &&
         m->mask_logits.out_channels == cfg->num_classes;
    if (!ok)
        g_set_error(error, VD_ERROR, VD_ERROR_FORMAT,
                    "the mask head's shapes do not chain (%d convolutions from %d channels, "
                    "transposed convolution %d->%d, logits %d->%d)",
                    cfg->n_mask_convs, cfg->fpn_channels, m->mask_deconv.in_channels,
                    m->mask_deconv.out_channels, m->mask_logits.in_channels,
                    m->mask_logits.out_channels);
    return ok;
}

/* v2's FastRCNNConvFCHead and RPN head as the CUDA backend runs them (the
 * loader checks each tensor; this, that they chain): 3x3 pad 1 convolutions
 * from the pooler's channels, fc6 on the last one's P x P map, the predictor on
 * fc6; the RPN's further convolutions C -> C. */
static gboolean box_convs_chain(const vd_model *m, GError **error)
{
    const vd_config *cfg = &m->config;
    int in = cfg->fpn_channels;
    int P = cfg->roi_output_size;
    gboolean ok = cfg->n_box_convs >= 1 && cfg->n_box_convs <= VD_MAX_BOX_CONVS &&
                  cfg->rpn_conv_depth >= 1 && cfg->rpn_conv_depth <= VD_MAX_RPN_CONVS;
    for (int j = 0; ok && j < cfg->n_box_convs; j++) {
        const vd_conv *c = &m->box_convs[j];
        ok = c->in_channels == in && c->kernel == 3 && c->stride == 1 && c->padding == 1 &&
             c->groups == 1 && c->bias != NULL;
        in = c->out_channels;
    }
    ok = ok && m->fc6.in_features == in * P * P && m->fc7.out_features == 0 &&
         cfg->representation_size == m->fc6.out_features;
    if (!ok)
        g_set_error(error, VD_ERROR, VD_ERROR_FORMAT,
                    "the conv box head's shapes do not chain (%d convolutions from %d channels "
                    "to %d, fc6 %d->%d, representation %d, RPN conv_depth %d)",
                    cfg->n_box_convs, cfg->fpn_channels, in, m->fc6.in_features,
                    m->fc6.out_features, cfg->representation_size, cfg->rpn_conv_depth);
    return ok;
}

/* The backbones (vd_cuda_backbone.h), by the model's backbone type. */
static const cuda_backbone *const cuda_backbones[] = {&vd_cuda_resnet, &vd_cuda_mnv3};

static const cuda_backbone *backbone_of(const vd_model *model)
{
    for (size_t i = 0; i < G_N_ELEMENTS(cuda_backbones); i++)
        if (cuda_backbones[i]->type == model->config.backbone_type)
            return cuda_backbones[i];
    return NULL;
}

/* What the CUDA backend runs: ResNet bodies and MobileNetV3-Large whose shapes
 * chain as its kernels take them, fp16 or fp32, no calibration, heads that chain,
 * at most VD_KERNEL_MAX_LEVELS FPN levels; either resize arithmetic (the
 * pre-processing kernel takes the model file's rule, torch 1.13's or torch 2.x's,
 * from vd_math.h as the CPU does). The architecture comes before the device:
 * device=auto falls back to the CPU with this reason. */
static gboolean cuda_supports(const vd_model *model, const vd_context_params *params,
                              GError **error)
{
    const vd_config *cfg = &model->config;
    const cuda_backbone *backbone = backbone_of(model);
    /* no new CUDA features before the backend has run on a GPU */
    if (cfg->detector != VD_DETECTOR_TWO_STAGE) {
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "the CUDA backend does not run the one-stage detectors (%s): use the CPU "
                    "backend",
                    vd_model_description(model));
        return FALSE;
    }
    if (vd_config_keypoint_parts(cfg) != NULL) {
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "the CUDA backend does not run keypointrcnn (Keypoint R-CNN) models: %s is "
                    "not on the GPU (%s): use the CPU backend",
                    vd_config_keypoint_parts(cfg), vd_model_description(model));
        return FALSE;
    }
    if (backbone != NULL && !backbone->supports(model, error))
        return FALSE;
    if (backbone == NULL) {
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "the CUDA backend does not support the %s backbone of this model (%s): use "
                    "the CPU backend",
                    model->backbone_name, vd_model_description(model));
        return FALSE;
    }
    /* AUTO: fp16 (cuda_create) */
    vd_precision precision =
        params->precision == VD_PRECISION_AUTO ? VD_PRECISION_FP16 : params->precision;
    if (precision != VD_PRECISION_FP16 && precision != VD_PRECISION_FP32) {
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "precision %s is not supported on the CUDA backend (fp16 or fp32)",
                    vd_precision_name(precision));
        return FALSE;
    }
    if (params->calibrate) {
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "int8 calibration runs on the CPU backend only");
        return FALSE;
    }
    if (cfg->n_box_convs > 0) {
        if (!box_convs_chain(model, error))
            return FALSE;
    } else if (cfg->fpn_channels * cfg->roi_output_size * cfg->roi_output_size !=
                   model->fc6.in_features ||
               model->fc7.in_features != model->fc6.out_features ||
               cfg->representation_size != model->fc7.out_features) {
        g_set_error(error, VD_ERROR, VD_ERROR_FORMAT,
                    "the box head's shapes do not chain (fc6 %d->%d, fc7 %d->%d, pooler %d)",
                    model->fc6.in_features, model->fc6.out_features, model->fc7.in_features,
                    model->fc7.out_features,
                    cfg->fpn_channels * cfg->roi_output_size * cfg->roi_output_size);
        return FALSE;
    }
    if (cfg->has_masks && !mask_head_chains(model, error))
        return FALSE;
    if (cfg->n_fpn_levels > VD_KERNEL_MAX_LEVELS || cfg->n_roi_levels > cfg->n_fpn_levels ||
        cfg->n_roi_levels < 1) {
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "%d FPN levels (%d pooled) are not supported by the CUDA backend",
                    cfg->n_fpn_levels, cfg->n_roi_levels);
        return FALSE;
    }
    return TRUE;
}

/* After cuda_supports(). */
static void *cuda_create(vd_context *ctx, GError **error)
{
    const vd_config *cfg = &ctx->model->config;
    if (ctx->params.precision == VD_PRECISION_AUTO)
        ctx->params.precision = VD_PRECISION_FP16;
    if (!device_usable(ctx->params.device_index, error))
        return NULL;

    cuda_state *st = g_new0(cuda_state, 1);
    st->model = ctx->model;
    st->backbone = backbone_of(ctx->model);
    st->device = ctx->params.device_index;
    st->dtype = ctx->params.precision == VD_PRECISION_FP16 ? VD_DTYPE_F16 : VD_DTYPE_F32;
    st->has_masks = cfg->has_masks;
    st->layers.dtype = st->dtype;
    st->layers.sync_count = &st->sync_count;
    /* fp16 tensor-core convolutions want channel counts in multiples of 8 */
    st->input_channels = st->dtype == VD_DTYPE_F16 ? 8 : 3;
    st->head_stride = round_up(5 * cfg->anchors_per_location, 8);
    st->predictor_stride = round_up(5 * cfg->num_classes, 8);
    vd_cuda_pool_init(&st->weights_pool);
    /* replay by default: an eager frame is bound by the host cost of cuDNN's legacy
     * calls, several times a replayed one (tools/bench/README.md) */
    const char *graphs = g_getenv("VD_CUDA_GRAPHS");
    st->use_graphs = graphs == NULL || g_strcmp0(graphs, "0") != 0;
    st->graphs_off_reason = "VD_CUDA_GRAPHS=0 in the environment";
    /* test hook (tests/gpu/element-check.sh): the first N captures fail, as
     * vd_cuda_context_fail_captures() makes them */
    const char *fail_captures = g_getenv("VD_CUDA_FAIL_CAPTURES");
    if (fail_captures != NULL)
        st->fail_captures = (int)CLAMP(g_ascii_strtoll(fail_captures, NULL, 10), 0, 1000);

    if (!vd_cuda_check(cudaSetDevice(st->device), "selecting the device", error) ||
        !vd_cuda_check(cudaStreamCreateWithFlags(&st->layers.stream, cudaStreamNonBlocking),
                       "creating a stream", error) ||
        /* the one wait of a frame blocks the thread instead of spinning a core
         * for the whole frame (the other pipelines, the decoder and the CPU
         * backend want it). Per event, not cudaSetDeviceFlags(), which is
         * process-wide (every library sharing the device) and refused once the
         * device is in use. Waking costs some tens of microseconds a frame. */
        !vd_cuda_check(cudaEventCreateWithFlags(&st->frame_done,
                                                cudaEventDisableTiming | cudaEventBlockingSync),
                       "creating an event", error))
        goto out_fail;
    for (int i = 0; i <= VD_MAX_STAGES; i++)
        if (!vd_cuda_check(cudaEventCreate(&st->stage_events[i]), "creating an event", error))
            goto out_fail;
    CUDNN_TRY(cudnnCreate(&st->layers.cudnn), "creating a handle");
    CUDNN_TRY(cudnnSetStream(st->layers.cudnn, st->layers.stream), "setting the stream");
    CUDNN_TRY(cudnnCreateActivationDescriptor(&st->layers.relu), "activation descriptor");
    CUDNN_TRY(cudnnSetActivationDescriptor(st->layers.relu, CUDNN_ACTIVATION_RELU,
                                           CUDNN_PROPAGATE_NAN, 0.0),
              "activation descriptor");
    CUDNN_TRY(cudnnCreateActivationDescriptor(&st->layers.identity), "activation descriptor");
    CUDNN_TRY(cudnnSetActivationDescriptor(st->layers.identity, CUDNN_ACTIVATION_IDENTITY,
                                           CUDNN_PROPAGATE_NAN, 0.0),
              "activation descriptor");
    if (!vd_cublas_check(cublasLtCreate(&st->layers.cublaslt), "creating a cuBLASLt handle", error))
        goto out_fail;
    st->layers.lt_workspace_bytes = VD_CUDA_LT_WORKSPACE;
    if (!vd_cuda_check(cudaMalloc(&st->layers.lt_workspace, st->layers.lt_workspace_bytes),
                       "the cuBLASLt workspace", error)) {
        cudaGetLastError();
        st->layers.lt_workspace = NULL;
        goto out_fail;
    }
    name_conv_weights(st);
    if (!upload_weights(st, error))
        goto out_fail;
    vd_cuda_upload_done(&st->layers);
    if (!ensure_result_capacity(st, MAX(ctx->params.max_detections, cfg->detections_per_img), 1,
                                error) ||
        !ensure_mask(st, error))
        goto out_fail;
    if (!vd_cuda_sync_stream(&st->sync_count, st->layers.stream, error))
        goto out_fail;
    return st;

out_fail:
    cuda_destroy(st);
    return NULL;
}

/* Every convolution of @plan (the ones it initialised), in running order. */
static GPtrArray *plan_convolutions(const cuda_state *st, cuda_plan *plan)
{
    GPtrArray *out = g_ptr_array_new();
    g_ptr_array_add(out, &plan->stem);
    st->backbone->convolutions(plan, out);
    for (int i = 0; i < plan->n_returned; i++) {
        g_ptr_array_add(out, &plan->fpn_inner[i]);
        g_ptr_array_add(out, &plan->fpn_layer[i]);
    }
    for (int l = 0; l < plan->n_levels; l++) {
        g_ptr_array_add(out, &plan->rpn_conv[l]);
        for (int j = 1; j < st->model->config.rpn_conv_depth; j++)
            g_ptr_array_add(out, &plan->rpn_conv_more[l][j - 1]);
        g_ptr_array_add(out, &plan->rpn_head[l]);
    }
    for (int j = 0; j < plan->n_box_convs; j++)
        g_ptr_array_add(out, &plan->box_convs[j]);
    return out;
}

static void add_conv_kernels(const cuda_state *st, cuda_plan *plan, const char *suffix, GArray *out,
                             GStringChunk *strings)
{
    GPtrArray *convs = plan_convolutions(st, plan);
    for (guint i = 0; i < convs->len; i++) {
        const vd_cuda_conv *conv = g_ptr_array_index(convs, i);
        char *layer =
            g_strdup_printf("%s%s", conv->weights != NULL ? conv->weights->name : "", suffix);
        char *impl = vd_cuda_conv_describe(conv);
        vd_kernel_info k = {g_string_chunk_insert_const(strings, layer), "convolution",
                            g_string_chunk_insert_const(strings, impl)};
        g_array_append_val(out, k);
        g_free(layer);
        g_free(impl);
    }
    g_ptr_array_unref(convs);
}

/* The convolutions of the plans held now, with the cuDNN algorithm each runs
 * and its demotions (candidates cuDNN refused at run time): the engine's
 * record of them (vd_context_kernels()); the mask head's, when built. */
static void cuda_kernels(void *p, GArray *out, GStringChunk *strings)
{
    cuda_state *st = p;
    if (st->plan != NULL)
        add_conv_kernels(st, st->plan, "", out, strings);
    if (st->batch_plan != NULL) {
        char suffix[32];
        g_snprintf(suffix, sizeof(suffix), " (batch of %d)", st->batch_plan->n_images);
        add_conv_kernels(st, st->batch_plan, suffix, out, strings);
    }
    if (st->has_masks && st->mask.rows > 0) {
        vd_cuda_conv *mask_convs[VD_MAX_MASK_CONVS + 2];
        int n = 0;
        for (int j = 0; j < st->n_mask_convs; j++)
            mask_convs[n++] = &st->mask.convs[j];
        mask_convs[n++] = &st->mask.deconv;
        mask_convs[n++] = &st->mask.logits_conv;
        for (int j = 0; j < n; j++) {
            char *impl = vd_cuda_conv_describe(mask_convs[j]);
            vd_kernel_info k = {mask_convs[j]->weights != NULL ? mask_convs[j]->weights->name : "",
                                "convolution", g_string_chunk_insert_const(strings, impl)};
            k.layer = g_string_chunk_insert_const(strings, k.layer);
            g_array_append_val(out, k);
            g_free(impl);
        }
    }
}

static void cuda_status(void *p, vd_run_status *status)
{
    cuda_state *st = p;
    const cuda_graph *retrying = graph_retrying(st);
    status->graph_failures = st->graph_failures;
    if (!st->use_graphs) {
        status->graphs = VD_GRAPHS_OFF;
        g_strlcpy(status->graphs_reason, st->graphs_off_reason, sizeof(status->graphs_reason));
    } else if (retrying != NULL) {
        /* the last batch's graph: its reason and its eager frames left */
        status->graphs = VD_GRAPHS_RETRYING;
        g_strlcpy(status->graphs_reason, retrying->backoff.reason, sizeof(status->graphs_reason));
        status->graph_retry_frames = retrying->backoff.retry_in;
    } else {
        status->graphs = VD_GRAPHS_ACTIVE;
    }
}

const vd_backend vd_cuda_backend = {
    .name = "cuda",
    .supports = cuda_supports,
    .create = cuda_create,
    .destroy = cuda_destroy,
    .detect = cuda_detect,
    .kernels = cuda_kernels,
    .status = cuda_status,
};

/* ------------------------------------------------------------------------ */
/* Debugging hooks (vd_cuda_debug.h)                                         */

static cuda_state *state_of(const vd_context *ctx)
{
    return ctx != NULL && ctx->backend == &vd_cuda_backend ? ctx->state : NULL;
}

guint64 vd_cuda_context_sync_count(const vd_context *ctx)
{
    cuda_state *st = state_of(ctx);
    return st != NULL ? st->sync_count : 0;
}

gboolean vd_cuda_context_set_graphs(vd_context *ctx, gboolean enable)
{
    cuda_state *st = state_of(ctx);
    if (st == NULL)
        return FALSE;
    st->use_graphs = enable;
    st->graphs_off_reason = "turned off by vd_cuda_context_set_graphs()";
    /* a fresh start: no back-off left from earlier failures */
    graph_backoff_reset(st);
    return TRUE;
}

gboolean vd_cuda_context_graph_replayed(const vd_context *ctx)
{
    cuda_state *st = state_of(ctx);
    return st != NULL && st->graph_replayed;
}

guint64 vd_cuda_context_graph_replays(const vd_context *ctx)
{
    cuda_state *st = state_of(ctx);
    return st != NULL ? st->graph_replays : 0;
}

void vd_cuda_context_fail_captures(vd_context *ctx, int n)
{
    cuda_state *st = state_of(ctx);
    if (st == NULL)
        return;
    st->fail_captures = MAX(n, 0);
    /* the next frame of this plan captures (and fails), without a warm-up */
    forget_graph(st);
    st->graph.plan = st->plan;
    st->graph.times_seen = 1;
    for (guint i = 0; i < G_N_ELEMENTS(st->batch_graphs); i++) {
        st->batch_graphs[i].plan = st->batch_plan;
        st->batch_graphs[i].times_seen = 1;
    }
}

void vd_cuda_context_inject_sync(vd_context *ctx, gboolean enable)
{
    cuda_state *st = state_of(ctx);
    if (st != NULL)
        st->inject_sync = enable;
}

int vd_cuda_context_unfused_convolutions(const vd_context *ctx)
{
    cuda_state *st = state_of(ctx);
    int n = 0;
    if (st == NULL || st->plan == NULL)
        return 0;
    GPtrArray *convs = plan_convolutions(st, st->plan);
    for (guint i = 0; i < convs->len; i++)
        n += ((const vd_cuda_conv *)g_ptr_array_index(convs, i))->mode == VD_CUDA_CONV_UNFUSED;
    g_ptr_array_unref(convs);
    return n;
}

guint64 vd_cuda_context_demotions(const vd_context *ctx)
{
    cuda_state *st = state_of(ctx);
    return st != NULL ? st->layers.n_demotions : 0;
}

int vd_cuda_context_batch_slots(const vd_context *ctx)
{
    cuda_state *st = state_of(ctx);
    return st != NULL && st->batch_plan != NULL ? st->batch_plan->n_images : 0;
}

vd_cuda_memory vd_cuda_context_memory(const vd_context *ctx)
{
    cuda_state *st = state_of(ctx);
    vd_cuda_memory m = {0, 0, 0, 0};
    if (st == NULL)
        return m;
    m.conv_workspace = st->layers.workspace_bytes;
    m.weights = st->weights_pool.bytes;
    m.box_nms_workspace = st->box_nms_workspace_bytes;
    if (st->plan != NULL)
        m.plan = st->plan->pool.bytes;
    return m;
}
