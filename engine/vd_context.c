/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Contexts: device and precision resolution, backend dispatch, the asynchronous
 * submit/collect pair (a worker thread per context), and the debugging hooks. */
#include "vd_config.h"
#include "vd_context_private.h"

#include <string.h>

vd_context_params vd_context_default_params(void)
{
    vd_context_params params = {
        .device = VD_DEVICE_AUTO,
        .device_index = 0,
        .precision = VD_PRECISION_AUTO,
        .n_threads = 0,
        .score_threshold = -1.0f,
        .nms_threshold = -1.0f,
        .max_detections = 0,
    };
    return params;
}

static void resolve_thresholds(vd_context *ctx, float score, float nms, int max_det)
{
    const vd_config *config = &ctx->model->config;
    ctx->requested.score_threshold = score < 0.0f ? config->box_score_thresh : score;
    ctx->requested.nms_threshold = nms < 0.0f ? config->box_nms_thresh : nms;
    ctx->requested.max_detections = max_det <= 0 ? config->detections_per_img : max_det;
}

/* Makes @settings those of the batch about to run (its runner's thread). */
static void apply_settings(vd_context *ctx, const vd_run_settings *settings)
{
    ctx->params.score_threshold = settings->score_threshold;
    ctx->params.nms_threshold = settings->nms_threshold;
    ctx->params.max_detections = settings->max_detections;
    ctx->observer = settings->observer;
    ctx->observer_data = settings->observer_data;
}

static gboolean select_backend(vd_context *ctx, const vd_context_params *params, GError **error)
{
    switch (params->device) {
    case VD_DEVICE_CPU:
        ctx->backend = &vd_cpu_backend;
        return TRUE;
    case VD_DEVICE_CUDA:
#ifdef HAVE_CUDA
        ctx->backend = &vd_cuda_backend;
        return TRUE;
#else
        g_set_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED,
                    "device 'cuda' requested but this build of visiondetect has no CUDA backend");
        return FALSE;
#endif
    case VD_DEVICE_AUTO: {
#ifdef HAVE_CUDA
        GError *why = NULL;
        if (vd_cuda_available(params->device_index, &why)) {
            ctx->backend = &vd_cuda_backend;
            return TRUE;
        }
        /* the caller warns with it (vd_context_fallback_reason()) */
        ctx->fallback_reason = g_strdup(why->message);
        g_error_free(why);
#else
        ctx->fallback_reason = g_strdup("this build of visiondetect has no CUDA backend");
#endif
        ctx->backend = &vd_cpu_backend;
        return TRUE;
    }
    }
    g_set_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT, "unknown device type %d",
                (int)params->device);
    return FALSE;
}

/* The backend's state for ctx->model, where the backend supports it. */
static void *backend_create(vd_context *ctx, GError **error)
{
    if (ctx->backend->supports != NULL && !ctx->backend->supports(ctx->model, &ctx->params, error))
        return NULL;
    return ctx->backend->create(ctx, error);
}

vd_context *vd_context_new(vd_model *model, const vd_context_params *params, GError **error)
{
    g_return_val_if_fail(model != NULL, NULL);
    vd_context_params defaults = vd_context_default_params();
    if (params == NULL)
        params = &defaults;

    vd_context *ctx = g_new0(vd_context, 1);
    ctx->model = vd_model_ref(model);
    ctx->params = *params;
    g_mutex_init(&ctx->lock);
    g_cond_init(&ctx->cond);
    g_queue_init(&ctx->queued);
    g_queue_init(&ctx->in_flight);
    resolve_thresholds(ctx, params->score_threshold, params->nms_threshold, params->max_detections);
    /* the backends size their buffers for these at creation */
    apply_settings(ctx, &ctx->requested);

    if (!select_backend(ctx, params, error))
        goto out_free_context;
    ctx->params.device = ctx->backend == &vd_cpu_backend ? VD_DEVICE_CPU : VD_DEVICE_CUDA;

    /* The backend rejects what it cannot run and resolves precision AUTO. */
    GError *backend_error = NULL;
    ctx->state = backend_create(ctx, &backend_error);
    if (ctx->state == NULL && params->device == VD_DEVICE_AUTO && ctx->backend != &vd_cpu_backend) {
        /* auto: a GPU that fails to start is not fatal; keep why for the caller */
        g_free(ctx->fallback_reason);
        ctx->fallback_reason = g_strdup(backend_error->message);
        g_clear_error(&backend_error);
        ctx->backend = &vd_cpu_backend;
        ctx->params.device = VD_DEVICE_CPU;
        ctx->params.precision =
            params->precision == VD_PRECISION_FP16 ? VD_PRECISION_AUTO : params->precision;
        ctx->state = backend_create(ctx, &backend_error);
    }
    if (ctx->state == NULL) {
        g_propagate_error(error, backend_error);
        goto out_free_context;
    }
    if (ctx->backend->status != NULL)
        ctx->backend->status(ctx->state, &ctx->status);
    ctx->reported_status = ctx->status;
    if (ctx->backend->describe != NULL)
        ctx->description = ctx->backend->describe(ctx->state, ctx);
    else
        ctx->description =
            g_strdup_printf("%s, %s", ctx->backend->name, vd_precision_name(ctx->params.precision));
    return ctx;

out_free_context:
    vd_model_unref(ctx->model);
    g_free(ctx->fallback_reason);
    g_mutex_clear(&ctx->lock);
    g_cond_clear(&ctx->cond);
    g_free(ctx);
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Batches                                                                   */

struct vd_job {
    int n_images;
    vd_image *images; /* views of @pixels */
    guint8 *pixels;   /* the frames' planes, copied at submission */
    vd_result *results;
    GError *error;
    vd_run_settings settings;
    vd_stage_stats stages[VD_MAX_STAGES];
    int n_stages;
    vd_run_status status;
    gboolean ran;  /* FALSE: refused at submission (invalid image) */
    gboolean done; /* under the context's lock */
};

static void job_free(vd_job *job, gboolean clear_results)
{
    if (clear_results)
        for (int i = 0; i < job->n_images; i++)
            vd_result_clear(&job->results[i]);
    g_free(job->results);
    g_free(job->images);
    g_free(job->pixels);
    g_clear_error(&job->error);
    g_free(job);
}

/* Runs a batch with @settings on the calling thread; results are cleared on
 * failure. */
static gboolean run_batch(vd_context *ctx, const vd_run_settings *settings, const vd_image *images,
                          int n_images, vd_result *results, GError **error)
{
    apply_settings(ctx, settings);
    ctx->n_stages = 0;
    memset(results, 0, sizeof(*results) * (size_t)n_images);
    for (int i = 0; i < n_images; i++)
        results[i].n_nonfinite = -1; /* not counted, unless the backend does */
    gboolean ok = ctx->backend->detect(ctx->state, ctx, images, n_images, results, error);
    if (ctx->backend->status != NULL) {
        memset(&ctx->status, 0, sizeof(ctx->status));
        ctx->backend->status(ctx->state, &ctx->status);
    }
    if (!ok) {
        for (int i = 0; i < n_images; i++)
            vd_result_clear(&results[i]);
        return FALSE;
    }
    return TRUE;
}

static gpointer worker_main(gpointer data)
{
    vd_context *ctx = data;
    g_mutex_lock(&ctx->lock);
    for (;;) {
        while (!ctx->quit && g_queue_is_empty(&ctx->queued))
            g_cond_wait(&ctx->cond, &ctx->lock);
        if (ctx->quit)
            break;
        vd_job *job = g_queue_pop_head(&ctx->queued);
        g_mutex_unlock(&ctx->lock);
        run_batch(ctx, &job->settings, job->images, job->n_images, job->results, &job->error);
        job->n_stages = ctx->n_stages;
        memcpy(job->stages, ctx->stages, sizeof(job->stages));
        job->status = ctx->status;
        job->ran = TRUE;
        g_mutex_lock(&ctx->lock);
        job->done = TRUE;
        g_cond_broadcast(&ctx->cond);
    }
    g_mutex_unlock(&ctx->lock);
    return NULL;
}

/* Copies @images (the rows the engine reads, packed) into @job. */
static gboolean copy_images(vd_job *job, const vd_image *images, int n_images, GError **error)
{
    size_t total = 0;
    gboolean fits = TRUE;
    for (int i = 0; i < n_images; i++) {
        if (!vd_image_validate(&images[i], error)) {
            g_prefix_error(error, "image %d: ", i);
            return FALSE;
        }
        int row_bytes[3], rows[3];
        int n_planes = vd_image_plane_layout(&images[i], row_bytes, rows);
        for (int p = 0; p < n_planes; p++) {
            size_t bytes;
            fits = fits && g_size_checked_mul(&bytes, (size_t)row_bytes[p], (size_t)rows[p]) &&
                   g_size_checked_add(&total, total, bytes);
        }
    }
    job->pixels = fits ? g_try_malloc(MAX(total, 1)) : NULL;
    if (job->pixels == NULL) {
        if (fits)
            g_set_error(error, VD_ERROR, VD_ERROR_OUT_OF_MEMORY,
                        "out of memory copying %d frame(s) (%zu bytes)", n_images, total);
        else
            g_set_error(error, VD_ERROR, VD_ERROR_OUT_OF_MEMORY,
                        "%d frame(s) are too large to copy", n_images);
        return FALSE;
    }
    guint8 *dst = job->pixels;
    for (int i = 0; i < n_images; i++) {
        vd_image *copy = &job->images[i];
        int row_bytes[3], rows[3];
        int n_planes = vd_image_plane_layout(&images[i], row_bytes, rows);
        *copy = images[i];
        for (int p = 0; p < 3; p++) {
            if (p >= n_planes) {
                copy->planes[p] = NULL;
                copy->strides[p] = 0;
                continue;
            }
            for (int y = 0; y < rows[p]; y++)
                memcpy(dst + (size_t)y * row_bytes[p],
                       images[i].planes[p] + (size_t)y * images[i].strides[p],
                       (size_t)row_bytes[p]);
            copy->planes[p] = dst;
            copy->strides[p] = row_bytes[p];
            dst += (size_t)row_bytes[p] * (size_t)rows[p];
        }
    }
    return TRUE;
}

/* The last vd_context_kernels() answer. */
static void kernels_clear(vd_context *ctx)
{
    g_clear_pointer(&ctx->kernels, g_array_unref);
    g_clear_pointer(&ctx->kernel_strings, g_string_chunk_free);
}

void vd_context_free(vd_context *ctx)
{
    if (ctx == NULL)
        return;
    if (ctx->worker != NULL) {
        /* the batch running now finishes; those not started are dropped */
        g_mutex_lock(&ctx->lock);
        ctx->quit = TRUE;
        g_cond_broadcast(&ctx->cond);
        g_mutex_unlock(&ctx->lock);
        g_thread_join(ctx->worker);
    }
    g_queue_clear(&ctx->queued);
    vd_job *job;
    while ((job = g_queue_pop_head(&ctx->in_flight)) != NULL)
        job_free(job, TRUE);
    if (ctx->state != NULL)
        ctx->backend->destroy(ctx->state);
    vd_model_unref(ctx->model);
    g_free(ctx->fallback_reason);
    g_free(ctx->description);
    kernels_clear(ctx);
    g_mutex_clear(&ctx->lock);
    g_cond_clear(&ctx->cond);
    g_free(ctx);
}

const char *vd_precision_name(vd_precision precision)
{
    switch (precision) {
    case VD_PRECISION_AUTO:
        return "auto";
    case VD_PRECISION_FP32:
        return "fp32";
    case VD_PRECISION_FP16:
        return "fp16";
    case VD_PRECISION_BF16:
        return "bf16";
    case VD_PRECISION_INT8:
        return "int8";
    }
    return "unknown";
}

char *vd_context_calibration(vd_context *ctx, GError **error)
{
    if (!ctx->params.calibrate || ctx->backend->calibration == NULL) {
        g_set_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT,
                    "the context does not calibrate (make it with the calibrate parameter, on "
                    "the CPU)");
        return NULL;
    }
    return ctx->backend->calibration(ctx->state, error);
}

const char *vd_context_describe(const vd_context *ctx)
{
    return ctx->description;
}

int vd_context_kernels(vd_context *ctx, const vd_kernel_info **kernels)
{
    *kernels = NULL;
    if (vd_context_in_flight(ctx) > 0)
        return -1;
    kernels_clear(ctx);
    ctx->kernels = g_array_new(FALSE, TRUE, sizeof(vd_kernel_info));
    ctx->kernel_strings = g_string_chunk_new(1024);
    if (ctx->backend->kernels != NULL)
        ctx->backend->kernels(ctx->state, ctx->kernels, ctx->kernel_strings);
    *kernels = (const vd_kernel_info *)(void *)ctx->kernels->data;
    return (int)ctx->kernels->len;
}

vd_device_type vd_context_device(const vd_context *ctx)
{
    return ctx->params.device;
}
vd_precision vd_context_precision(const vd_context *ctx)
{
    return ctx->params.precision;
}
const vd_model *vd_context_model(const vd_context *ctx)
{
    return ctx->model;
}
const char *vd_context_fallback_reason(const vd_context *ctx)
{
    return ctx->fallback_reason;
}

void vd_context_set_thresholds(vd_context *ctx, float score_threshold, float nms_threshold,
                               int max_detections)
{
    resolve_thresholds(ctx, score_threshold, nms_threshold, max_detections);
}

vd_image vd_image_rgb(const uint8_t *pixels, int width, int height)
{
    vd_image image = {
        .format = VD_FORMAT_RGB,
        .width = width,
        .height = height,
        .planes = {pixels, NULL, NULL},
        .strides = {3 * width, 0, 0},
        .matrix = VD_COLOR_MATRIX_BT601,
        .full_range = FALSE,
    };
    return image;
}

gboolean vd_detect(vd_context *ctx, const vd_image *images, int n_images, vd_result *results,
                   GError **error)
{
    g_return_val_if_fail(ctx != NULL, FALSE);
    if (n_images <= 0 || images == NULL || results == NULL) {
        g_set_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT,
                    "vd_detect needs at least one image and as many results");
        return FALSE;
    }
    if (vd_context_in_flight(ctx) > 0) {
        memset(results, 0, sizeof(*results) * (size_t)n_images);
        g_set_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT,
                    "%d submitted batch(es) not collected on this context: collect them "
                    "before vd_detect",
                    vd_context_in_flight(ctx));
        return FALSE;
    }
    gboolean ok = run_batch(ctx, &ctx->requested, images, n_images, results, error);
    ctx->n_reported = ctx->n_stages;
    memcpy(ctx->reported, ctx->stages, sizeof(ctx->reported));
    ctx->reported_status = ctx->status;
    return ok;
}

gboolean vd_submit(vd_context *ctx, const vd_image *images, int n_images, GError **error)
{
    g_return_val_if_fail(ctx != NULL, FALSE);
    if (vd_context_in_flight(ctx) >= VD_MAX_IN_FLIGHT) {
        g_set_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT,
                    "%d batches are already in flight on this context: collect one first",
                    VD_MAX_IN_FLIGHT);
        return FALSE;
    }
    if (n_images <= 0 || images == NULL) {
        g_set_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT,
                    "vd_submit needs at least one image");
        return FALSE;
    }
    if (ctx->worker == NULL) {
        GError *thread_error = NULL;
        ctx->worker = g_thread_try_new("vd-context", worker_main, ctx, &thread_error);
        if (ctx->worker == NULL) {
            g_set_error(error, VD_ERROR, VD_ERROR_INTERNAL,
                        "could not start the context's worker thread: %s", thread_error->message);
            g_error_free(thread_error);
            return FALSE;
        }
    }
    vd_job *job = g_new0(vd_job, 1);
    job->n_images = n_images;
    job->images = g_try_new0(vd_image, n_images);
    job->results = g_try_new0(vd_result, n_images);
    job->settings = ctx->requested;
    if (job->images == NULL || job->results == NULL) {
        job_free(job, FALSE);
        g_set_error(error, VD_ERROR, VD_ERROR_OUT_OF_MEMORY,
                    "out of memory submitting a batch of %d images", n_images);
        return FALSE;
    }
    if (!copy_images(job, images, n_images, &job->error)) {
        /* reported by vd_collect(), in order, like a failure while running */
        job->done = TRUE;
        g_mutex_lock(&ctx->lock);
        g_queue_push_tail(&ctx->in_flight, job);
        g_cond_broadcast(&ctx->cond);
        g_mutex_unlock(&ctx->lock);
        return TRUE;
    }
    g_mutex_lock(&ctx->lock);
    g_queue_push_tail(&ctx->in_flight, job);
    g_queue_push_tail(&ctx->queued, job);
    g_cond_broadcast(&ctx->cond);
    g_mutex_unlock(&ctx->lock);
    return TRUE;
}

gboolean vd_collect(vd_context *ctx, vd_result *results, int n_results, GError **error)
{
    g_return_val_if_fail(ctx != NULL, FALSE);
    g_mutex_lock(&ctx->lock);
    vd_job *job = g_queue_peek_head(&ctx->in_flight);
    if (job == NULL) {
        g_mutex_unlock(&ctx->lock);
        g_set_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT, "nothing was submitted");
        return FALSE;
    }
    while (!job->done)
        g_cond_wait(&ctx->cond, &ctx->lock);
    g_queue_pop_head(&ctx->in_flight);
    g_mutex_unlock(&ctx->lock);

    ctx->n_reported = job->n_stages;
    memcpy(ctx->reported, job->stages, sizeof(ctx->reported));
    /* a batch refused at submission never ran: the status stays */
    if (job->ran)
        ctx->reported_status = job->status;
    if (job->error != NULL) {
        g_propagate_error(error, job->error);
        job->error = NULL;
        job_free(job, TRUE);
        return FALSE;
    }
    if (results == NULL || n_results < job->n_images) {
        g_set_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT,
                    "vd_collect got room for %d results, the batch has %d", n_results,
                    job->n_images);
        job_free(job, TRUE);
        return FALSE;
    }
    memcpy(results, job->results, sizeof(*results) * (size_t)job->n_images);
    job_free(job, FALSE);
    return TRUE;
}

int vd_context_in_flight(const vd_context *ctx)
{
    if (ctx == NULL)
        return 0;
    /* the lock guards the queue, not the context's settings */
    GMutex *lock = (GMutex *)&ctx->lock;
    g_mutex_lock(lock);
    int n = (int)ctx->in_flight.length;
    g_mutex_unlock(lock);
    return n;
}

void vd_result_clear(vd_result *result)
{
    if (result == NULL)
        return;
    for (int i = 0; result->detections != NULL && i < result->n_detections; i++) {
        g_free(result->detections[i].mask);
        g_free(result->detections[i].keypoints);
    }
    g_clear_pointer(&result->detections, g_free);
    result->n_detections = 0;
}

void vd_context_set_observer(vd_context *ctx, vd_tensor_observer observer, void *user_data)
{
    ctx->requested.observer = observer;
    ctx->requested.observer_data = user_data;
}

void vd_context_observe(vd_context *ctx, const char *name, const float *data, const int64_t *shape,
                        int ndim)
{
    if (ctx->observer != NULL)
        ctx->observer(name, data, shape, ndim, ctx->observer_data);
}

/* The stages' names, in vd_stage's order: vd_context_stage_times() returns these
 * pointers. */
const char *const vd_stage_names[VD_N_STAGES] = {
    [VD_STAGE_PREPROCESS] = "preprocess",
    [VD_STAGE_BACKBONE] = "backbone",
    [VD_STAGE_FPN] = "fpn",
    [VD_STAGE_RPN] = "rpn",
    [VD_STAGE_ROI_ALIGN] = "roi_align",
    [VD_STAGE_BOX_HEAD] = "box_head",
    [VD_STAGE_POSTPROCESS] = "postprocess",
    [VD_STAGE_MASK_HEAD] = "mask_head",
    [VD_STAGE_PASTE_MASKS] = "paste_masks",
    [VD_STAGE_KEYPOINT_HEAD] = "keypoint_head",
    [VD_STAGE_KEYPOINTS] = "keypoints",
};

void vd_context_stages_begin(vd_context *ctx)
{
    ctx->n_stages = 0;
    ctx->stage_macs = 0.0;
    ctx->stage_start_us = g_get_monotonic_time();
}

void vd_context_stage_mark(vd_context *ctx, vd_stage stage)
{
    gint64 now = g_get_monotonic_time();
    if (ctx->n_stages < VD_MAX_STAGES) {
        ctx->stages[ctx->n_stages].name = vd_stage_name(stage);
        ctx->stages[ctx->n_stages].ms = (double)(now - ctx->stage_start_us) / 1000.0;
        ctx->stages[ctx->n_stages].gflop = 2.0 * ctx->stage_macs / 1e9;
        ctx->n_stages++;
    }
    ctx->stage_macs = 0.0;
    ctx->stage_start_us = now;
}

void vd_context_run_status(const vd_context *ctx, vd_run_status *status)
{
    *status = ctx->reported_status;
}

const char *vd_graphs_state_name(vd_graphs_state state)
{
    switch (state) {
    case VD_GRAPHS_NOT_APPLICABLE:
        return "not applicable";
    case VD_GRAPHS_ACTIVE:
        return "active";
    case VD_GRAPHS_RETRYING:
        return "retrying";
    case VD_GRAPHS_OFF:
        return "off";
    }
    return "unknown";
}

int vd_context_stage_times(const vd_context *ctx, vd_stage_time *times, int max)
{
    int n = MAX(MIN(max, ctx->n_reported), 0);
    for (int i = 0; i < n; i++)
        times[i] = (vd_stage_time){ctx->reported[i].name, ctx->reported[i].ms};
    return n;
}

int vd_context_stage_stats(const vd_context *ctx, vd_stage_stats *stats, int max)
{
    int n = MAX(MIN(max, ctx->n_reported), 0);
    memcpy(stats, ctx->reported, sizeof(*stats) * (size_t)n);
    return n;
}
