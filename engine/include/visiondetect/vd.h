/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* visiondetect engine: torchvision-compatible Faster R-CNN inference.
 *
 * The one public header of the engine library. It depends on GLib only (GError);
 * never on GStreamer or CUDA.
 *
 * Objects:
 *   vd_model    weights and configuration loaded from a .safetensors file.
 *               Immutable once loaded; reference counted; may be shared by any
 *               number of contexts and threads.
 *   vd_context  a model bound to one backend/device with its workspace. A context
 *               may be used by one thread at a time (any thread, not concurrently).
 *   vd_image    a borrowed view of one frame; the engine never keeps the pointers
 *               beyond the call that receives them.
 *
 * Errors are reported through GError in the VD_ERROR domain. Library code never
 * aborts, exits or prints.
 */
#ifndef VISIONDETECT_VD_H
#define VISIONDETECT_VD_H

#include <glib.h>
#include <stdint.h>

G_BEGIN_DECLS

#if defined(VD_BUILDING_LIBRARY) && defined(__GNUC__)
#define VD_API __attribute__((visibility("default")))
#else
#define VD_API
#endif

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */

#define VD_ERROR (vd_error_quark())

typedef enum {
    VD_ERROR_FILE,             /* a file could not be opened, read or mapped */
    VD_ERROR_FORMAT,           /* a model file is malformed or inconsistent */
    VD_ERROR_UNSUPPORTED,      /* valid, but not supported (architecture, dtype, pixel format) */
    VD_ERROR_DEVICE,           /* no device, or a device/driver error */
    VD_ERROR_OUT_OF_MEMORY,    /* host or device memory exhausted */
    VD_ERROR_INVALID_ARGUMENT, /* a bad parameter or image description */
    VD_ERROR_INTERNAL,         /* a backend library failed unexpectedly */
} vd_error_code;

VD_API GQuark vd_error_quark(void);

/* ------------------------------------------------------------------------ */
/* Models                                                                    */

typedef struct vd_model vd_model;

/* Loads a model from a .safetensors file written by tools/export_torchvision.py.
 * The file is memory-mapped, every tensor's name, shape and dtype is checked
 * against the architecture in the header metadata, and batch-norm is folded into
 * the convolutions. Returns a new reference (free with vd_model_unref) or NULL
 * with @error set. Thread-safe. */
VD_API vd_model *vd_model_load(const char *path, GError **error);

/* File name of the bundled default model (a small detector of balls, boxes,
 * triangles and rings trained by tools/train_demo.py). */
#define VD_DEFAULT_MODEL_NAME "visiondetect-shapes.safetensors"

/* Where the default model is: $VISIONDETECT_MODEL when set (returned as it is),
 * else the first of these folders that holds VD_DEFAULT_MODEL_NAME: found from the
 * location of this library itself, the build tree's copy (<builddir>/models) when
 * the library is the one in its build tree, else <prefix>/<datadir>/visiondetect/
 * models of the prefix it is installed in, wherever that was moved; then the data
 * folder the build was configured with. Returns a newly allocated path, or NULL
 * when none exists; then *@searched (if not NULL) gets every place looked in, as
 * one line for a message (free it). Thread-safe. */
VD_API char *vd_default_model_path(char **searched);

/* Reference counting; both are thread-safe. unref(NULL) is a no-op. */
VD_API vd_model *vd_model_ref(vd_model *model);
VD_API void vd_model_unref(vd_model *model);

/* Number of classes including the background class 0. */
VD_API int vd_model_num_classes(const vd_model *model);

/* Class name of @label (0 <= label < num_classes), or NULL when out of range.
 * The string is owned by the model and valid as long as the model is. */
VD_API const char *vd_model_class_name(const vd_model *model, int label);

/* Longest class name accepted, in bytes. */
#define VD_MAX_CLASS_NAME 256

/* Whether @name (@length bytes, or NUL-terminated when @length is -1) is usable as
 * a class name, in metadata and in JSON: valid UTF-8 of at most VD_MAX_CLASS_NAME
 * bytes, without NUL bytes or control characters (U+0000..U+001F, U+007F..U+009F).
 * An empty name is valid here (callers decide what it means). Returns FALSE with
 * @error set (VD_ERROR_FORMAT) saying what is wrong and where. Thread-safe. The
 * model loader checks the class names of a model file's metadata with it. */
VD_API gboolean vd_class_name_validate(const char *name, gssize length, GError **error);

/* A short human-readable description ("fasterrcnn resnet50-fpn, 91 classes").
 * Owned by the model. */
VD_API const char *vd_model_description(const vd_model *model);

/* Whether the model has a mask branch (Mask R-CNN): then every detection carries
 * its instance mask (see vd_detection). Thread-safe. */
VD_API gboolean vd_model_has_masks(const vd_model *model);

/* The keypoints of each detection (Keypoint R-CNN: COCO's 17 for
 * keypointrcnn_resnet50_fpn), 0 for a model without a keypoint branch. Thread-safe. */
VD_API int vd_model_num_keypoints(const vd_model *model);

/* The name of keypoint @index (0 .. vd_model_num_keypoints() - 1) as the model
 * file gives it ("nose", ...), or NULL when the file names none (or @index is out
 * of range). Owned by the model. */
VD_API const char *vd_model_keypoint_name(const vd_model *model, int index);

/* The skeleton the model file records: the number of connections, and in *@pairs
 * (when not NULL) the connections as 2 x that many 0-based keypoint indices
 * (first, second, first, second, ...), owned by the model; 0 and NULL when the
 * file has none. */
VD_API int vd_model_keypoint_skeleton(const vd_model *model, const int **pairs);

/* Default score threshold of the box head (torchvision's box_score_thresh). */
VD_API float vd_model_score_threshold(const vd_model *model);

/* ------------------------------------------------------------------------ */
/* Contexts                                                                  */

typedef enum {
    VD_DEVICE_AUTO = 0, /* CUDA when a device is usable, else the CPU */
    VD_DEVICE_CPU,
    VD_DEVICE_CUDA,
} vd_device_type;

typedef enum {
    VD_PRECISION_AUTO = 0, /* fp16 on CUDA; on the CPU bf16 where it has AVX512-BF16
                            * or AMX natively, else fp32 */
    VD_PRECISION_FP32,
    VD_PRECISION_FP16, /* CUDA; on the CPU where its layers run on XNNPACK (aarch64
                        * with Advanced SIMD alone) and XNNPACK has fp16 kernels for
                        * it (the FP16 arithmetic: Cortex-A76 and later) */
    VD_PRECISION_BF16,
    VD_PRECISION_INT8, /* CPU with VNNI (AVX512-VNNI, AVX-VNNI, AMX), ResNet backbones,
                        * a model calibrated with vd_model_save_calibrated(): the
                        * backbone body and the FPN's lateral convolutions in int8,
                        * the rest in bf16 where the CPU has it natively, else fp32 */
} vd_precision;

typedef struct {
    vd_device_type device;
    int device_index; /* CUDA ordinal; ignored on the CPU */
    vd_precision precision;
    int n_threads;         /* CPU threads; 0 = all cores */
    float score_threshold; /* < 0: the model's (strict '>' as torchvision) */
    float nms_threshold;   /* < 0: the model's box-head NMS IoU threshold */
    int max_detections;    /* <= 0: the model's detections_per_img */
    gboolean calibrate;    /* CPU, fp32: record the activation ranges int8 needs
                            * (vd_context_calibration()) */
} vd_context_params;

VD_API vd_context_params vd_context_default_params(void);

typedef struct vd_context vd_context;

/* Binds @model to a backend. The context takes its own reference to the model.
 * Returns NULL with @error set when the device or precision is not available:
 * VD_DEVICE_AUTO never fails for lack of a working GPU (it falls back to the CPU;
 * see vd_context_device() and vd_context_fallback_reason()). */
VD_API vd_context *vd_context_new(vd_model *model, const vd_context_params *params, GError **error);
VD_API void vd_context_free(vd_context *ctx);

/* What the context actually runs on (never VD_DEVICE_AUTO / VD_PRECISION_AUTO). */
VD_API vd_device_type vd_context_device(const vd_context *ctx);
VD_API vd_precision vd_context_precision(const vd_context *ctx);
VD_API const vd_model *vd_context_model(const vd_context *ctx);

/* With VD_DEVICE_AUTO on the CPU: why not CUDA (no device, a driver error, too old
 * a device, out of memory starting it, a build without the backend), owned by the
 * context; NULL when the context runs on CUDA or was not asked for AUTO. Callers
 * should warn with it. */
VD_API const char *vd_context_fallback_reason(const vd_context *ctx);

/* "auto", "fp32", "fp16", "bf16" or "int8" (a static string; "unknown" for other
 * values). */
VD_API const char *vd_precision_name(vd_precision precision);

/* How the context runs, in one line owned by the context, for logs: the backend
 * and what it chose, e.g. "cpu: oneDNN 2.6.3, ISA avx2, fp32, 2 threads, layout
 * nChw8c, Winograd own"; a backend without a description of its own gives its
 * name and precision ("cuda, fp16"). */
VD_API const char *vd_context_describe(const vd_context *ctx);

/* One compute primitive of the context: which layer, what kind of operation and
 * the implementation the backend library picked for this machine (oneDNN's
 * implementation name on the CPU: "jit:avx2", "brg:avx512_core", ... ; one that
 * starts with "ref" is a reference loop, orders of magnitude slower). */
typedef struct {
    const char *layer; /* "backbone.body.layer1.0.conv1", "roi_heads.box_head.fc6", ... */
    const char *kind;  /* "convolution", "pooling", "matmul", "eltwise", "reorder" */
    const char *implementation;
} vd_kernel_info;

/* The primitives the context holds now (those of the last frame size run, and of
 * the box head's recent RoI counts; none before the first frame). *@kernels is
 * owned by the context and valid until the next call on it. Returns the count (0
 * for backends that do not report kernels), or -1 while batches are in flight. */
VD_API int vd_context_kernels(vd_context *ctx, const vd_kernel_info **kernels);

/* int8 calibration: the ranges a context made with params.calibrate has recorded
 * over every frame it detected so far (the largest |value| of each activation
 * that int8 quantises), as a new JSON text for vd_model_save_calibrated(). NULL
 * with @error set: VD_ERROR_INVALID_ARGUMENT when the context does not calibrate
 * or has run no frame. Call on the thread that runs vd_detect(). */
VD_API char *vd_context_calibration(vd_context *ctx, GError **error);

/* Writes the model file @path with @calibration (vd_context_calibration()) in its
 * metadata to @out_path (a new file, renamed into place when complete; it may be
 * @path). The tensors are copied as they are. Thread-safe. */
VD_API gboolean vd_model_save_calibrated(const char *path, const char *calibration,
                                         const char *out_path, GError **error);

/* Thresholds may be changed between frames (same thread as vd_detect); they
 * apply to the next vd_detect() or vd_submit(). */
VD_API void vd_context_set_thresholds(vd_context *ctx, float score_threshold, float nms_threshold,
                                      int max_detections);

/* ------------------------------------------------------------------------ */
/* Images                                                                    */

typedef enum {
    VD_FORMAT_RGB = 0, /* packed 8-bit, 3 bytes per pixel */
    VD_FORMAT_BGR,
    VD_FORMAT_RGBA, /* packed 8-bit, 4 bytes per pixel */
    VD_FORMAT_BGRA,
    VD_FORMAT_RGBX,
    VD_FORMAT_BGRX,
    VD_FORMAT_NV12, /* Y plane + interleaved UV plane, 4:2:0 */
    VD_FORMAT_I420, /* Y, U, V planes, 4:2:0 */
} vd_pixel_format;

typedef enum {
    VD_COLOR_MATRIX_BT601 = 0,
    VD_COLOR_MATRIX_BT709,
    VD_COLOR_MATRIX_BT2020,
} vd_color_matrix;

typedef struct {
    vd_pixel_format format;
    int width;
    int height;
    const uint8_t *planes[3]; /* borrowed; only read during the call */
    int strides[3];           /* bytes per row of each plane */
    vd_color_matrix matrix;   /* YUV formats only */
    gboolean full_range;      /* YUV formats only: TRUE for 0..255 luma */
} vd_image;

/* Fills an RGB image view of a packed buffer (stride = 3 * width). */
VD_API vd_image vd_image_rgb(const uint8_t *pixels, int width, int height);

/* ------------------------------------------------------------------------ */
/* Detection                                                                 */

/* A keypoint of a detection (see vd_detection). */
typedef struct {
    float x, y;
    float score;
} vd_keypoint;

typedef struct {
    float x1, y1, x2, y2; /* original-frame pixels, continuous coordinates */
    float score;
    int label; /* class id (1..num_classes-1; the one-stage detectors' 0..num_classes-1,
                * as torchvision's: class 0, COCO's __background__, is one of their sigmoid
                * classes, which trained models do not score) */

    /* Instance mask, for models with a mask branch (vd_model_has_masks()); NULL
     * with the four integers 0 otherwise (and for a detection whose rectangle
     * below would be empty, which torchvision's geometry does not produce for
     * boxes inside the frame). torchvision's paste_masks_in_image
     * (engine/MASKRCNN.md) writes a detection's probabilities into the frame
     * only inside one rectangle of whole pixels: its box expanded by 30/28 about
     * its centre, truncated to integers and clipped to the frame; every pixel
     * outside it has probability 0. @mask covers exactly that rectangle: frame
     * columns mask_x .. mask_x + mask_width - 1 and rows mask_y .. mask_y +
     * mask_height - 1 (0 <= mask_x, mask_x + mask_width <= the frame's width,
     * likewise for y), row-major, mask_width bytes per row, each byte round(255 *
     * p) of that pixel's probability p: byte >= 128 is exactly p >= 0.5
     * (torchvision's usual "mask > 0.5" differs only at p == 0.5). The
     * rectangle contains every frame pixel the box overlaps. Owned by the
     * vd_result holding the detection; freed by vd_result_clear(). Copy a
     * vd_detection only with the mask pointer cleared or the bytes duplicated. */
    uint8_t *mask;
    int mask_x, mask_y, mask_width, mask_height;

    /* Keypoints, for models with a keypoint branch (vd_model_num_keypoints() > 0):
     * n_keypoints (that count) points in the model's keypoint order; NULL with 0
     * otherwise. Each is torchvision's keypointrcnn_inference output rescaled to
     * the frame (engine/KEYPOINTRCNN.md): x, y in original-frame pixels (continuous
     * coordinates; not clipped to the box or the frame) and score, the
     * keypoint's heatmap value there (a logit: not a probability, any sign).
     * Owned by the vd_result holding the detection, like @mask. */
    vd_keypoint *keypoints;
    int n_keypoints;
} vd_detection;

typedef struct {
    int width, height; /* the frame's size */
    int n_detections;
    vd_detection *detections; /* sorted by score, descending; owned, see below */
    /* Infinite or NaN values the backend found in this frame's RPN head
     * (objectness and deltas) and box head (class logits and deltas) outputs:
     * an fp16 activation above 65504 overflows, and weights may be corrupt
     * (not always seen: a NaN from corrupt weights before a ReLU may come out
     * of it as 0, depending on the convolution's implementation and so on the
     * ISA). When > 0 the detections are unreliable (typically too few), and callers
     * should warn. Both backends count them (CUDA on the device, read back
     * with the detections); -1 from a backend that does not. */
    int n_nonfinite;
} vd_result;

/* Runs detection on @n_images frames. @results must point to @n_images vd_result
 * structures; each is filled with newly allocated detections that the caller
 * releases with vd_result_clear(). Returns FALSE with @error set on failure, in
 * which case no result needs clearing. Not thread-safe per context. */
VD_API gboolean vd_detect(vd_context *ctx, const vd_image *images, int n_images, vd_result *results,
                          GError **error);

/* Asynchronous pair. vd_submit() copies the rows of the images the engine reads
 * (so the frames may be released at once) and returns; the batch runs on the
 * context's worker thread, in submission order, while the caller goes on (say,
 * decoding the next frame, or submitting it: up to VD_MAX_IN_FLIGHT batches may
 * be in flight). vd_collect() waits for the oldest batch not yet collected and
 * fills @results as vd_detect() would; a failure of that batch (an invalid image
 * included) is reported there, in order; so is a vd_collect() with too little
 * room for the results, which drops that batch. With batches in flight, the
 * context takes only vd_submit(), vd_collect(), the setters (which apply to
 * batches submitted afterwards), the getters and vd_context_free(), which waits
 * for the running batch and drops the others; vd_detect() is refused until
 * everything is collected. One thread may submit (and call the setters) while
 * another collects, at the same moment: a producer and a consumer; each of the
 * two is one thread at a time. The observer is called on the thread that runs
 * the batch (see vd_context_set_observer()). */
#define VD_MAX_IN_FLIGHT 4

VD_API gboolean vd_submit(vd_context *ctx, const vd_image *images, int n_images, GError **error);
VD_API gboolean vd_collect(vd_context *ctx, vd_result *results, int n_results, GError **error);
/* Batches submitted and not yet collected. */
VD_API int vd_context_in_flight(const vd_context *ctx);

/* Frees the detections, their masks and keypoints; the result then has none. NULL
 * is a no-op. */
VD_API void vd_result_clear(vd_result *result);

/* ------------------------------------------------------------------------ */
/* Debugging: intermediate tensors                                           */

/* Called from the thread running a batch (see vd_submit) with named intermediate tensors of the
 * first image of a batch, all float32 and contiguous:
 *   "image_size"   [2] resized (H', W')          "input"      [1,3,Hp,Wp] (NCHW)
 *   "fpn.<name>"   [1,C,H,W] (NCHW)              "anchors"    [N,4]
 *   "proposals"    [K,4] (resized-image pixels)  "proposal_scores" [K]
 *   "box_logits"   [K,num_classes]               "box_regression" [K,4*num_classes]
 *   "mask_features" [D,C,P,P] models with masks (CPU): each detection's RoIAlign
 *                  output, the mask head's input (P the mask pooler's size)
 *   "mask_logits"  [D,M,M] (CPU): the mask head's output, its label's channel
 *   "mask_probs"   [D,M,M] models with masks: each detection's mask before the
 *                  paste (sigmoid of its label's channel, M = 2 * the pooler's size)
 *   "keypoint_rois" [D,4] models with keypoints (CPU): the detections' boxes in
 *                  the resized image (the keypoint pooler's RoIs)
 *   "keypoint_features" [D,C,P,P] models with keypoints (CPU): each detection's
 *                  RoIAlign output, the keypoint head's input
 *   "keypoint_heatmaps" [D,K,S,S] models with keypoints (CPU): the keypoint
 *                  predictor's output (after its bilinear upsampling; S = 56)
 *   "keypoints"    [D,K,3] models with keypoints (CPU): x, y in the resized
 *                  image and score, heatmaps_to_keypoints' output before the
 *                  rescale to the frame
 * @data and @shape are valid only during the call. */
typedef void (*vd_tensor_observer)(const char *name, const float *data, const int64_t *shape,
                                   int ndim, void *user_data);

/* The observer applies to the batches run or submitted afterwards; @user_data
 * must stay valid until every batch submitted with it has been collected. The
 * observer must not call the context's functions. */
VD_API void vd_context_set_observer(vd_context *ctx, vd_tensor_observer observer, void *user_data);

/* Per-stage wall-clock times of the last batch returned (vd_detect() or
 * vd_collect()) in milliseconds, for
 * benchmarks. Stages: preprocess, backbone, fpn, rpn, roi_align, box_head,
 * postprocess; models with masks add mask_head (its RoIAlign included) and
 * paste_masks, models with keypoints keypoint_head (its RoIAlign included) and
 * keypoints (the heatmaps' decoding); the one-stage detectors' dense head is
 * box_head. With a batch of several frames, the stages of its last frame.
 * Returns the number of stages written (at most @max); @name is a static string.
 * Call from the thread that calls vd_detect() or vd_collect(). */
typedef struct {
    const char *name;
    double ms;
} vd_stage_time;

VD_API int vd_context_stage_times(const vd_context *ctx, vd_stage_time *times, int max);

/* The same stages, each with the arithmetic it did (vd_context_stage_times()
 * keeps its struct, and its callers' arrays, as they were).
 *
 * @gflop counts the stage's convolutions, transposed convolutions and matrix
 * products (the squeeze-and-excitation's included) as 2 x multiply-adds / 1e9,
 * from the shapes the backend ran for that frame: a convolution's output
 * elements x input channels per group x kernel area, a transposed
 * convolution's input elements x output channels x kernel area, a matrix
 * product's M x K x N, the RoI heads over the rows they ran (the box count,
 * rounded up to the row counts the backend plans for). A convolution counts
 * as the direct one whatever algorithm runs (Winograd does fewer
 * multiplications), and an int8 one counts as a float one. The stages without
 * such products (preprocess, roi_align, postprocess, paste_masks, keypoints;
 * the upsampling, pooling, normalisation and element-wise parts of the others)
 * add nothing: they are bound by memory bandwidth, not arithmetic. The CUDA
 * backend counts nothing (0). GFLOP/s is @gflop / (@ms / 1000). */
typedef struct {
    const char *name;
    double ms;
    double gflop;
} vd_stage_stats;

VD_API int vd_context_stage_stats(const vd_context *ctx, vd_stage_stats *stats, int max);

/* ------------------------------------------------------------------------ */
/* Run status                                                                */

/* Whether frames are replayed from captured device graphs (CUDA graphs): a
 * frame replayed costs the host several times less than one enqueued eagerly. */
typedef enum {
    VD_GRAPHS_NOT_APPLICABLE = 0, /* the backend captures nothing (the CPU) */
    VD_GRAPHS_ACTIVE,             /* frames of a steady layout are captured once, replayed */
    VD_GRAPHS_RETRYING,           /* a capture failed: eager frames until the next try */
    VD_GRAPHS_OFF,                /* turned off (VD_CUDA_GRAPHS=0 in the environment) */
} vd_graphs_state;

#define VD_STATUS_REASON_MAX 256

typedef struct {
    vd_graphs_state graphs;
    /* why graphs are RETRYING or OFF (with RETRYING: the step that failed and
     * the device's error); "" otherwise */
    char graphs_reason[VD_STATUS_REASON_MAX];
    guint64 graph_failures; /* captures or instantiations failed since creation */
    int graph_retry_frames; /* RETRYING: eager frames left before the next try */
} vd_run_status;

/* The state after the last batch returned (vd_detect() or vd_collect(), as
 * vd_context_stage_times()), or after creation before any, copied into
 * @status. A failed capture is retried after 1, 2, 4, ... (at most
 * VD_GRAPH_RETRY_MAX_FRAMES) eager frames; callers should warn once when they
 * see RETRYING. Call from the thread that calls vd_detect() or vd_collect(). */
#define VD_GRAPH_RETRY_MAX_FRAMES 128

VD_API void vd_context_run_status(const vd_context *ctx, vd_run_status *status);

/* "not applicable", "active", "retrying", "off" (a static string). */
VD_API const char *vd_graphs_state_name(vd_graphs_state state);

G_END_DECLS

#endif /* VISIONDETECT_VD_H */
