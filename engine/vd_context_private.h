/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Internal: the context and the backend interface. Not installed. */
#ifndef VD_CONTEXT_PRIVATE_H
#define VD_CONTEXT_PRIVATE_H

#include "vd_model_private.h"
#include "vd_stages.h"

G_BEGIN_DECLS

#define VD_MAX_STAGES 12
G_STATIC_ASSERT(VD_N_STAGES <= VD_MAX_STAGES);

/* A backend runs a batch of frames on one device. @supports says whether it can
 * run @model with @params (as the caller gave them: precision may still be AUTO)
 * on this machine, refusing with the reason (VD_ERROR_UNSUPPORTED, or
 * VD_ERROR_FORMAT for shapes that do not chain as it runs them); the context
 * asks it before @create, and device=auto falls back to the CPU with that
 * reason. @create resolves ctx->params (precision AUTO) and builds its state for
 * ctx->model (weights converted to what the device wants), @detect fills one
 * vd_result per image (detections g_malloc'ed), reporting failures through
 * @error. Backends read ctx->params for thresholds and call vd_context_observe()
 * and vd_context_stage_*() for the debugging hooks. */
typedef struct {
    const char *name;
    gboolean (*supports)(const vd_model *model, const vd_context_params *params, GError **error);
    void *(*create)(vd_context *ctx, GError **error);
    void (*destroy)(void *state);
    gboolean (*detect)(void *state, vd_context *ctx, const vd_image *images, int n_images,
                       vd_result *results, GError **error);
    /* Optional. @describe: a new string saying what the backend runs (see
     * vd_context_describe()). @kernels: appends a vd_kernel_info per primitive to
     * @out, its strings added to @strings (freed with it). */
    char *(*describe)(void *state, const vd_context *ctx);
    void (*kernels)(void *state, GArray *out, GStringChunk *strings);
    /* Optional: the recorded int8 ranges (vd_context_calibration()). */
    char *(*calibration)(void *state, GError **error);
    /* Optional: fills @status (zeroed: VD_GRAPHS_NOT_APPLICABLE) after each
     * batch and at creation, on the thread that runs the batch. */
    void (*status)(void *state, vd_run_status *status);
} vd_backend;

/* What the caller set last (thresholds resolved, observer): each batch takes a
 * copy when it is submitted, and whoever runs it applies that copy. */
typedef struct {
    float score_threshold;
    float nms_threshold;
    int max_detections;
    vd_tensor_observer observer;
    void *observer_data;
} vd_run_settings;

typedef struct vd_job vd_job;

struct vd_context {
    vd_model *model;
    /* resolved: no AUTO; the thresholds are those of the batch running now */
    vd_context_params params;
    const vd_backend *backend;
    void *state;

    char *fallback_reason; /* why AUTO did not get the GPU it found, or NULL */
    char *description;     /* vd_context_describe() */
    GArray *kernels;       /* vd_kernel_info, vd_context_kernels() */
    GStringChunk *kernel_strings;

    vd_run_settings requested; /* the caller's thread only */

    /* the batch running now (the caller's thread for vd_detect(), the worker
     * for vd_submit()) */
    vd_tensor_observer observer;
    void *observer_data;
    vd_stage_stats stages[VD_MAX_STAGES];
    int n_stages;
    gint64 stage_start_us;
    double stage_macs; /* multiply-adds of the running stage so far */

    vd_run_status status; /* after the batch that ran last */

    /* the last batch returned to the caller (vd_context_stage_times(),
     * vd_context_run_status()) */
    vd_stage_stats reported[VD_MAX_STAGES];
    int n_reported;
    vd_run_status reported_status;

    /* vd_submit()/vd_collect(): batches run in submission order on a worker
     * thread started with the first submit. @in_flight (submitted, not yet
     * collected: vd_submit() pushes, vd_collect() pops, possibly on two
     * threads), @queued, @quit and each job's @done are shared under @lock. */
    GMutex lock;
    GCond cond;
    GThread *worker;
    GQueue queued;
    GQueue in_flight;
    gboolean quit;
};

extern const vd_backend vd_cpu_backend;
#ifdef HAVE_CUDA
extern const vd_backend vd_cuda_backend;
/* TRUE when a CUDA device is present and usable; never fails loudly. */
gboolean vd_cuda_available(int device_index, GError **error);
#endif

/* Image views (vd_image.c). Validation: size, format, planes present with
 * strides of at least a row, a known colour matrix for YUV. Layout: the bytes
 * of a row and the rows of each plane (packed rows, no stride); returns the
 * number of planes (0 for an unknown format or a size validation refuses). */
gboolean vd_image_validate(const vd_image *image, GError **error);
int vd_image_plane_layout(const vd_image *image, int row_bytes[3], int plane_rows[3]);

/* Passes a tensor to the observer, if any. Cheap when none is set. */
void vd_context_observe(vd_context *ctx, const char *name, const float *data, const int64_t *shape,
                        int ndim);
static inline gboolean vd_context_observing(const vd_context *ctx)
{
    return ctx->observer != NULL;
}

/* Stage timing: begin resets the list, mark closes the running stage, @stage,
 * under its name (vd_stage_name()). */
void vd_context_stages_begin(vd_context *ctx);
void vd_context_stage_mark(vd_context *ctx, vd_stage stage);
/* Adds @macs multiply-adds (vd_stage_stats.gflop says what counts) to the
 * running stage: the next mark reports them. */
static inline void vd_context_stage_add_macs(vd_context *ctx, double macs)
{
    ctx->stage_macs += macs;
}

G_END_DECLS

#endif /* VD_CONTEXT_PRIVATE_H */
