/* Contexts: device and precision resolution, backend dispatch, the synchronous
 * fallback of the submit/collect pair, and the debugging hooks. */
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
    ctx->params.score_threshold = score < 0.0f ? config->box_score_thresh : score;
    ctx->params.nms_threshold = nms < 0.0f ? config->box_nms_thresh : nms;
    ctx->params.max_detections = max_det <= 0 ? config->detections_per_img : max_det;
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
    case VD_DEVICE_AUTO:
#ifdef HAVE_CUDA
        if (vd_cuda_available(params->device_index)) {
            ctx->backend = &vd_cuda_backend;
            return TRUE;
        }
#endif
        ctx->backend = &vd_cpu_backend;
        return TRUE;
    }
    g_set_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT, "unknown device type %d",
                (int)params->device);
    return FALSE;
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
    resolve_thresholds(ctx, params->score_threshold, params->nms_threshold,
                       params->max_detections);

    if (!select_backend(ctx, params, error))
        goto out_free_context;
    ctx->params.device = ctx->backend == &vd_cpu_backend ? VD_DEVICE_CPU : VD_DEVICE_CUDA;

    /* The backend resolves precision AUTO and rejects what it cannot run. */
    GError *backend_error = NULL;
    ctx->state = ctx->backend->create(ctx, &backend_error);
    if (ctx->state == NULL && params->device == VD_DEVICE_AUTO &&
        ctx->backend != &vd_cpu_backend) {
        /* auto: a GPU that fails to start is not fatal; keep why for the caller */
        ctx->fallback_reason = g_strdup(backend_error->message);
        g_clear_error(&backend_error);
        ctx->backend = &vd_cpu_backend;
        ctx->params.device = VD_DEVICE_CPU;
        ctx->params.precision = params->precision == VD_PRECISION_FP16 ? VD_PRECISION_AUTO
                                                                        : params->precision;
        ctx->state = ctx->backend->create(ctx, &backend_error);
    }
    if (ctx->state == NULL) {
        g_propagate_error(error, backend_error);
        goto out_free_context;
    }
    return ctx;

out_free_context:
    vd_model_unref(ctx->model);
    g_free(ctx->fallback_reason);
    g_free(ctx);
    return NULL;
}

static void clear_pending(vd_context *ctx)
{
    for (int i = 0; i < ctx->n_pending; i++)
        vd_result_clear(&ctx->pending[i]);
    g_clear_pointer(&ctx->pending, g_free);
    ctx->n_pending = 0;
    g_clear_error(&ctx->pending_error);
    ctx->has_pending = FALSE;
}

void vd_context_free(vd_context *ctx)
{
    if (ctx == NULL)
        return;
    clear_pending(ctx);
    if (ctx->state != NULL)
        ctx->backend->destroy(ctx->state);
    vd_model_unref(ctx->model);
    g_free(ctx->fallback_reason);
    g_free(ctx);
}

vd_device_type vd_context_device(const vd_context *ctx) { return ctx->params.device; }
vd_precision vd_context_precision(const vd_context *ctx) { return ctx->params.precision; }
const vd_model *vd_context_model(const vd_context *ctx) { return ctx->model; }
const char *vd_context_fallback_reason(const vd_context *ctx) { return ctx->fallback_reason; }

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
    memset(results, 0, sizeof(*results) * (size_t)n_images);
    if (!ctx->backend->detect(ctx->state, ctx, images, n_images, results, error)) {
        for (int i = 0; i < n_images; i++)
            vd_result_clear(&results[i]);
        return FALSE;
    }
    return TRUE;
}

gboolean vd_submit(vd_context *ctx, const vd_image *images, int n_images, GError **error)
{
    g_return_val_if_fail(ctx != NULL, FALSE);
    if (ctx->has_pending) {
        g_set_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT,
                    "a batch is already in flight on this context: collect it first");
        return FALSE;
    }
    if (n_images <= 0 || images == NULL) {
        g_set_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT, "vd_submit needs at least one image");
        return FALSE;
    }
    ctx->pending = g_new0(vd_result, n_images);
    ctx->n_pending = n_images;
    ctx->has_pending = TRUE;
    if (!vd_detect(ctx, images, n_images, ctx->pending, &ctx->pending_error)) {
        /* reported by vd_collect(), like an asynchronous failure would be */
        g_clear_pointer(&ctx->pending, g_free);
        ctx->n_pending = 0;
    }
    return TRUE;
}

gboolean vd_collect(vd_context *ctx, vd_result *results, int n_results, GError **error)
{
    g_return_val_if_fail(ctx != NULL, FALSE);
    if (!ctx->has_pending) {
        g_set_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT, "nothing was submitted");
        return FALSE;
    }
    if (ctx->pending_error != NULL) {
        g_propagate_error(error, ctx->pending_error);
        ctx->pending_error = NULL;
        clear_pending(ctx);
        return FALSE;
    }
    if (n_results < ctx->n_pending) {
        g_set_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT,
                    "vd_collect got room for %d results, the batch has %d", n_results,
                    ctx->n_pending);
        clear_pending(ctx);
        return FALSE;
    }
    memcpy(results, ctx->pending, sizeof(*results) * (size_t)ctx->n_pending);
    g_clear_pointer(&ctx->pending, g_free);
    ctx->n_pending = 0;
    ctx->has_pending = FALSE;
    return TRUE;
}

void vd_result_clear(vd_result *result)
{
    if (result == NULL)
        return;
    g_clear_pointer(&result->detections, g_free);
    result->n_detections = 0;
}

void vd_context_set_observer(vd_context *ctx, vd_tensor_observer observer, void *user_data)
{
    ctx->observer = observer;
    ctx->observer_data = user_data;
}

void vd_context_observe(vd_context *ctx, const char *name, const float *data,
                        const int64_t *shape, int ndim)
{
    if (ctx->observer != NULL)
        ctx->observer(name, data, shape, ndim, ctx->observer_data);
}

void vd_context_stages_begin(vd_context *ctx)
{
    ctx->n_stages = 0;
    ctx->stage_start_us = g_get_monotonic_time();
}

void vd_context_stage_mark(vd_context *ctx, const char *name)
{
    gint64 now = g_get_monotonic_time();
    if (ctx->n_stages < VD_MAX_STAGES) {
        ctx->stages[ctx->n_stages].name = name;
        ctx->stages[ctx->n_stages].ms = (double)(now - ctx->stage_start_us) / 1000.0;
        ctx->n_stages++;
    }
    ctx->stage_start_us = now;
}

int vd_context_stage_times(const vd_context *ctx, vd_stage_time *times, int max)
{
    int n = MIN(max, ctx->n_stages);
    memcpy(times, ctx->stages, sizeof(*times) * (size_t)MAX(n, 0));
    return n;
}
