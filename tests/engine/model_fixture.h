/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Test fixtures: tiny but complete ResNet-FPN Faster R-CNN models described by a
 * tiny_arch, with tensors named as torchvision names them, serialised as
 * safetensors (fx_write) with optional corruption. Shared by the engine tests. */
#ifndef VD_TEST_MODEL_FIXTURE_H
#define VD_TEST_MODEL_FIXTURE_H

#include "vd_model_private.h"

/* Directory the fixtures are written to; set by the test's main(). */
extern char *tmp_dir;

typedef struct {
    char *name;
    char *dtype;
    int ndim;
    gint64 shape[4];
    float *values;       /* encoded to dtype on writing (values must be exact in it) */
    gsize n;
    guint8 *raw;         /* written instead of values when set */
    gsize raw_size;
    gboolean fixed_offsets;
    guint64 begin, end;  /* set by fx_layout(); header values when fixed_offsets */
} fx_tensor;
typedef struct {
    GPtrArray *tensors;
    char *config;            /* the metadata's "config" JSON text */
    char *format;
    char *format_version;
    gboolean no_metadata;
    char *raw_header;        /* replaces the whole header JSON when set */
    const char *header_old;  /* text replaced by header_new in the header JSON */
    const char *header_new;
    gint64 header_len_delta; /* added to the header length written in the first 8 bytes */
    gssize truncate;         /* cut the file to this many bytes (-1: no) */
} fixture;
/* The architecture of a fixture, mirroring torchvision's constructor arguments. */
typedef struct {
    gboolean bottleneck;
    int depth;
    int layers[4];
    int returned[4];
    int n_returned;
    int fpn_channels;
    gboolean pool;
    int n_sizes, n_ratios;
    int roi_size;
    int representation;
    int num_classes;
    double norm_eps;
    const char *eps_map;       /* JSON object text, or NULL */
    const char *featmap_names; /* JSON array text */
    gboolean old_keys;         /* torchvision < 0.13 FPN / RPN key names */
} tiny_arch;

/* A MobileNetV3-FPN fixture (torchvision's _mobilenet_extractor + FasterRCNN). */
typedef struct {
    int kernel, expanded, out, se, stride;
    gboolean hardswish;
} mnv3_block_arch;

typedef struct {
    int stem;
    int n_blocks;
    mnv3_block_arch blocks[16];
    int last;        /* channels of the last 1x1 conv */
    int returned[4]; /* feature indices */
    int n_returned;
    int fpn_channels;
    int n_sizes, n_ratios; /* anchors per level (3 levels with the pool) */
    int roi_size, representation, num_classes;
    int min_size, max_size, rpn_top_n;
} mnv3_arch;

/* A Mask R-CNN's mask branch (MaskRCNNHeads and MaskRCNNPredictor). */
typedef struct {
    int output_size; /* the mask pooler's */
    int n_convs;     /* 3x3 convolutions of the mask head */
    int conv_channels[4];
    int dim_reduced; /* the transposed convolution's output channels */
    gboolean norm;   /* v2: batch-norm after each convolution, no bias */
} mask_arch;

/* tiny_basic() as a Mask R-CNN: a 4x4 mask pooler, two 3x3 convolutions of 6 and 5
 * channels (with bias; @norm: without, each followed by batch-norm, as v2), the
 * transposed convolution to 4 channels and the 1x1 logits to the 3 classes. */
fixture *fx_tiny_mask(gboolean norm);
mask_arch mask_tiny(gboolean norm);
/* A tiny retinanet_resnet50_fpn: tiny_basic()'s ResNet, stages 2-4 into the FPN
 * with P6 and P7, 2 anchors per location, @n_convs convolutions per head branch;
 * @v2: retinanet_resnet50_fpn_v2's P6 from C5 and GroupNorm heads. */
fixture *fx_tiny_retinanet(int n_convs, gboolean v2);
/* A tiny fcos_resnet50_fpn: the same ResNet and FPN, 1 anchor per location, the
 * head's convolutions with bias and GroupNorm, the centerness. */
fixture *fx_tiny_fcos(int n_convs);
/* A tiny SSDlite (engine/SSD.md) at a fixed 64x64: its feature extractor's two body
 * lists (a stem, an inverted residual with squeeze-and-excitation, the expansion; a
 * depthwise and a 1x1 convolution) and two extras (a depthwise-separable block with
 * ReLU6; a ceil_mode max-pool and a convolution dilated by 2), four maps of 16, 8, 8
 * and 8 channels, 4 default boxes per location, SSDLiteHead's prediction blocks,
 * 3 classes. */
fixture *fx_tiny_ssdlite(void);
/* A tiny SSD300 (engine/SSD.md) at a fixed 64x64: VGG16's kind of features (3x3
 * convolutions with bias and ReLU, 2x2 max-pools, the last with ceil_mode) into a
 * 16-channel map, its L2 norm, two extras (a max-pool, a convolution, the 3x3
 * stride-1 max-pool, a convolution dilated by 2 and a 1x1; a 1x1 and a 3x3 of
 * stride 2), three maps of 16, 32 and 16 channels, 4, 6 and 4 default boxes per
 * location, SSDHead's 3x3 convolutions, 3 classes. */
fixture *fx_tiny_ssd300(void);
/* maskrcnn_resnet50_fpn's: 14x14, four convolutions of 256, dim_reduced 256 */
mask_arch mask_torchvision(void);
/* fx_tiny(@a) with the mask branch @m (the logits to @a's classes) */
fixture *fx_mask(const tiny_arch *a, const mask_arch *m);

/* A Keypoint R-CNN's keypoint branch (KeypointRCNNHeads, KeypointRCNNPredictor). */
typedef struct {
    int output_size; /* the keypoint pooler's */
    int n_convs;     /* 3x3 convolutions (+ ReLU) of the keypoint head */
    int conv_channels[16];
    int num_keypoints;
    int deconv_kernel, deconv_stride, deconv_padding, up_scale;
} keypoint_arch;

/* a 4x4 pooler, two convolutions of 6 and 5 channels, 3 keypoints, torchvision's
 * 4x4 stride-2 transposed convolution (padding 1) and x2 upsampling */
keypoint_arch keypoint_tiny(void);
/* keypointrcnn_resnet50_fpn's: 14x14, eight convolutions of 512, 17 keypoints */
keypoint_arch keypoint_torchvision(void);
/* fx_tiny(@a) as a Keypoint R-CNN with the keypoint branch @k on the four levels
 * "0".."3" (no keypoint names or skeleton) */
fixture *fx_keypoint(const tiny_arch *a, const keypoint_arch *k);
void fx_tensor_free(gpointer data);
void fx_free(fixture *fx);
float fill_value(guint salt, gsize i);
fx_tensor *fx_add(fixture *fx, const char *name, int ndim, const gint64 *shape);
fx_tensor *fx_find(fixture *fx, const char *name);
void fx_remove(fixture *fx, const char *name);
void fx_config_replace(fixture *fx, const char *old, const char *new_text);
void add_conv_bn(fixture *fx, const char *conv, const char *bn, int out, int in, int k);
void add_conv_bias(fixture *fx, const char *prefix, int out, int in, int k);
void add_linear(fixture *fx, const char *prefix, int out, int in);
tiny_arch tiny_basic(void);
/* fasterrcnn_resnet50_fpn's architecture (fx_tiny's transform, 96/160) */
tiny_arch resnet50_fpn_arch(void);
int arch_stage_channels(const tiny_arch *a, int stage);
char *arch_config(const tiny_arch *a);
fixture *fx_tiny(const tiny_arch *a);
void fx_randomize(fixture *fx, guint32 seed);
guint32 float_bits(float f);
guint16 half_from_exact_float(float f);
gsize dtype_size(const char *dtype);
GByteArray *fx_layout(fixture *fx);
void append_json_string(GString *s, const char *text);
char *fx_write(fixture *fx, const char *file_name);
vd_model *fx_load(fixture *fx, GError **error);
/* fx_load, which must succeed; frees @fx. */
vd_model *fx_load_ok(fixture *fx);
mnv3_arch mnv3_large(gboolean low_res);
mnv3_arch mnv3_tiny(void);
char *mnv3_config(const mnv3_arch *a);
fixture *fx_mnv3(const mnv3_arch *a);
/* Whether a CPU context runs fp16 on this machine and build: the layers on XNNPACK
 * (vd_xnn_choose), XNNPACK with fp16 kernels for the processor, and on aarch64 the
 * FP16 arithmetic; *@why (may be NULL) says XNNPACK's side of it. */
gboolean fx_cpu_runs_fp16(const char **why);
/* Whether the test runs emulated (VD_TEST_EMULATED=1: tests/debian13-arm64.sh's runs
 * under qemu-user, a hundred times slower than the machine). */
gboolean fx_emulated(void);

#endif
