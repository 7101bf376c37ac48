/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* vd-gpu-bench: timings of the CUDA engine and of two kernels, as JSON, for
 * tools/bench_gpu.py (which runs torchvision on the same inputs beside it).
 *
 *   vd-gpu-bench engine --model FILE --image FRAME.ppm [--precision fp16|fp32]
 *                [--warmup N] [--iters N] [--graphs] [--detections OUT.json] [--batch N]
 *   vd-gpu-bench nms FILE [--iters N] [--threshold T]
 *   vd-gpu-bench roi-align FILE --height H --width W [--iters N]
 *   vd-gpu-bench rpn-topk [--height H] [--width W] [--iters N]
 *
 * engine: the median wall time of vd_detect() (the frame's host copy into pinned
 * memory, upload, every stage, the readback and its one synchronisation), frames
 * per second from it, host synchronisations per frame (the backend's counted
 * wrapper), and the median of each stage's device time (CUDA events, eager mode).
 * --batch N: each vd_detect() takes N copies of the frame (their own pixel
 * buffers) as one batch; median_ms is then per batch, fps N * 1000 / median_ms
 * and the host synchronisations are reported per batch and per frame.
 * nms: FILE holds int32 n, float32 boxes[n][4], scores[n], int32 groups[n];
 * vd_batched_nms_device over all of them (every kept box returned, as
 * torchvision's batched_nms does), timed with CUDA events around each call.
 * roi-align: FILE holds int32 n, float32 rois[n][4] in pixels of an HxW padded
 * input; random 256-channel FPN features P2..P5 of that input; the
 * MultiScaleRoIAlign kernel in fp16 (fp16 features and output, fp32 maths) and
 * fp32.
 * rpn-topk [--height H] [--width W] [--iters N]: the RPN's top-k sort for a
 * padded HxW input (default 800x1344: level 0 has 201600 anchors), A = 3,
 * levels of stride 4 to 64, fp16 logits, for batches of 1, 2, 4, 8 and 16
 * images: the single-image path's per-level radix sorts run image after image
 * (vd_rpn_topk) against the batch path's one segmented sort (vd_rpn_topk_batched,
 * one CUB block per large segment), each timed with CUDA events (median).
 * Issue 37, item 7: whether level 0 makes the batched sort slower than image
 * by image, before choosing a device-wide sort for the large levels.
 * Exit status 77 without a device. */
#include "vd_config.h"

#include "cpu/vd_cpu_ops.h"
#include "cuda/vd_cuda_debug.h"
#include "gpu_test_util.h"
#include "vd_kernels.h"
#include "visiondetect/vd.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n ? v[n / 2] : 0.0;
}

static const char *arg_value(int argc, char **argv, const char *name, const char *fallback)
{
    for (int i = 0; i + 1 < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return argv[i + 1];
    return fallback;
}

static gboolean arg_flag(int argc, char **argv, const char *name)
{
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return TRUE;
    return FALSE;
}

/* ------------------------------------------------------------------------ */

static int bench_engine(int argc, char **argv)
{
    const char *model_path = arg_value(argc, argv, "--model", NULL);
    const char *image_path = arg_value(argc, argv, "--image", NULL);
    const char *precision = arg_value(argc, argv, "--precision", "fp16");
    const char *detections_path = arg_value(argc, argv, "--detections", NULL);
    int warmup = atoi(arg_value(argc, argv, "--warmup", "10"));
    int iters = atoi(arg_value(argc, argv, "--iters", "100"));
    gboolean graphs = arg_flag(argc, argv, "--graphs");
    int batch = atoi(arg_value(argc, argv, "--batch", "1"));
    if (model_path == NULL || image_path == NULL || iters < 1 || batch < 1 || batch > 64) {
        fprintf(stderr, "vd-gpu-bench engine: --model FILE and --image FRAME.ppm are required\n");
        return 2;
    }
    int w, h;
    uint8_t *pixels = load_ppm(image_path, &w, &h);
    if (pixels == NULL)
        return 1;
    vd_image image = vd_image_rgb(pixels, w, h);
    /* a batch: copies of the frame, each in its own buffer (as frames are) */
    vd_image *images = g_new(vd_image, batch);
    vd_result *results = g_new0(vd_result, batch);
    uint8_t **copies = g_new0(uint8_t *, batch);
    images[0] = image;
    for (int b = 1; b < batch; b++) {
        copies[b] = g_memdup2(pixels, (gsize)w * h * 3);
        images[b] = vd_image_rgb(copies[b], w, h);
    }
    GError *error = NULL;
    vd_model *model = vd_model_load(model_path, &error);
    if (model == NULL) {
        fprintf(stderr, "%s\n", error->message);
        return 1;
    }
    vd_context_params p = vd_context_default_params();
    p.device = VD_DEVICE_CUDA;
    p.precision = strcmp(precision, "fp32") == 0 ? VD_PRECISION_FP32 : VD_PRECISION_FP16;
    vd_context *ctx = vd_context_new(model, &p, &error);
    if (ctx == NULL) {
        fprintf(stderr, "%s\n", error->message);
        return 1;
    }
    vd_cuda_context_set_graphs(ctx, graphs);
    vd_result r = {0};
    for (int i = 0; i < warmup; i++) {
        if (!vd_detect(ctx, &image, 1, &r, &error)) {
            fprintf(stderr, "%s\n", error->message);
            return 1;
        }
        if (i + 1 < warmup || detections_path == NULL)
            vd_result_clear(&r);
    }
    if (detections_path != NULL) {
        FILE *f = fopen(detections_path, "w");
        if (f != NULL) {
            fprintf(f, "{\"width\": %d, \"height\": %d, \"detections\": [", w, h);
            for (int i = 0; i < r.n_detections; i++) {
                const vd_detection *d = &r.detections[i];
                fprintf(f, "%s\n  {\"box\": [%.9g, %.9g, %.9g, %.9g], \"score\": %.9g, \"label\": %d}",
                        i ? "," : "", d->x1, d->y1, d->x2, d->y2, d->score, d->label);
            }
            fprintf(f, "\n]}\n");
            fclose(f);
        }
        vd_result_clear(&r);
    }

    double *times = g_new(double, iters);
    double stage_ms[8][1024];
    const char *stage_names[8] = {NULL};
    int n_stage_runs = 0, n_stages = 0;
    if (batch > 1) {
        /* the batch plan's first batch (eager) and its capture */
        for (int i = 0; i < MIN(warmup, 3) + 2; i++) {
            if (!vd_detect(ctx, images, batch, results, &error)) {
                fprintf(stderr, "%s\n", error->message);
                return 1;
            }
            for (int b = 0; b < batch; b++)
                vd_result_clear(&results[b]);
        }
    }
    guint64 syncs0 = vd_cuda_context_sync_count(ctx);
    gboolean replayed = TRUE;
    for (int i = 0; i < iters; i++) {
        gint64 t0 = g_get_monotonic_time();
        if (!vd_detect(ctx, images, batch, results, &error)) {
            fprintf(stderr, "%s\n", error->message);
            return 1;
        }
        times[i] = (double)(g_get_monotonic_time() - t0) / 1000.0;
        replayed = replayed && vd_cuda_context_graph_replayed(ctx);
        for (int b = 0; b < batch; b++)
            vd_result_clear(&results[b]);
        vd_stage_time st[8];
        int ns = vd_context_stage_times(ctx, st, 8);
        if (ns > 0 && n_stage_runs < 1024) {
            n_stages = ns;
            for (int s = 0; s < ns; s++) {
                stage_names[s] = st[s].name;
                stage_ms[s][n_stage_runs] = st[s].ms;
            }
            n_stage_runs++;
        }
    }
    guint64 syncs = vd_cuda_context_sync_count(ctx) - syncs0;
    double med = median(times, iters);
    double best = times[0];
    printf("{\"precision\": \"%s\", \"graphs\": %s, \"replayed\": %s, \"width\": %d, "
           "\"height\": %d, \"batch\": %d, \"iters\": %d, \"median_ms\": %.4f, "
           "\"min_ms\": %.4f, \"fps\": %.2f, \"syncs_per_batch\": %.3f, "
           "\"syncs_per_frame\": %.3f, \"unfused_convolutions\": %d, \"stages_ms\": {",
           precision, graphs ? "true" : "false", graphs && replayed ? "true" : "false", w, h, batch,
           iters, med, best, batch * 1000.0 / med, (double)syncs / iters,
           (double)syncs / ((double)iters * batch), vd_cuda_context_unfused_convolutions(ctx));
    for (int s = 0; s < n_stages; s++)
        printf("%s\"%s\": %.4f", s ? ", " : "", stage_names[s], median(stage_ms[s], n_stage_runs));
    printf("}}\n");
    g_free(times);
    for (int b = 1; b < batch; b++)
        g_free(copies[b]);
    g_free(copies);
    g_free(images);
    g_free(results);
    vd_context_free(ctx);
    vd_model_unref(model);
    g_free(pixels);
    return 0;
}

/* ------------------------------------------------------------------------ */

static gboolean read_file(const char *path, gchar **data, gsize *len)
{
    GError *error = NULL;
    if (!g_file_get_contents(path, data, len, &error)) {
        fprintf(stderr, "%s\n", error->message);
        g_error_free(error);
        return FALSE;
    }
    return TRUE;
}

static double time_events(cudaStream_t s, cudaEvent_t a, cudaEvent_t b)
{
    float ms = 0;
    CU(cudaEventSynchronize(b));
    CU(cudaEventElapsedTime(&ms, a, b));
    (void)s;
    return ms;
}

/* The input file of a kernel benchmark (the path after the benchmark's name): a
 * count n > 0, then n records of @record_size bytes (*@data, g_free it, and
 * *@n). Returns 0, or the exit status: 2 without a readable file, 1 when it
 * holds less than it says ("bad @what input"). */
static int read_records(int argc, char **argv, gsize record_size, const char *what, gchar **data,
                        int *n)
{
    const char *path = argc > 2 ? argv[2] : NULL;
    gsize len;
    if (path == NULL || !read_file(path, data, &len))
        return 2;
    memcpy(n, *data, 4);
    if (*n <= 0 || len < 4 + (gsize)*n * record_size) {
        fprintf(stderr, "%s: bad %s input\n", path, what);
        return 1;
    }
    return 0;
}

/* @iters timings (ms) of vd_batched_nms_device after 10 untimed runs, into @t. */
static void time_nms(const float *db, const float *ds, const int *dg, const vd_nms_shape *shape,
                     float threshold, int *dk, int *dn, void *dws, size_t ws, cudaStream_t s,
                     cudaEvent_t a, cudaEvent_t b, double *t, int iters)
{
    for (int i = 0; i < iters + 10; i++) {
        CU(cudaEventRecord(a, s));
        CU(vd_batched_nms_device(db, ds, VD_DTYPE_F32, dg, shape, threshold, dk, dn, dws, ws, s));
        CU(cudaEventRecord(b, s));
        double ms = time_events(s, a, b);
        if (i >= 10)
            t[i - 10] = ms;
    }
}

static int bench_nms(int argc, char **argv)
{
    int iters = atoi(arg_value(argc, argv, "--iters", "200"));
    float threshold = (float)atof(arg_value(argc, argv, "--threshold", "0.7"));
    gchar *data;
    int n;
    int status = read_records(argc, argv, 24, "NMS", &data, &n);
    if (status != 0)
        return status;
    const float *boxes = (const float *)(data + 4);
    const float *scores = boxes + 4 * (size_t)n;
    const int *groups = (const int *)(scores + n);
    cudaStream_t s;
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    float *db = dev_upload(boxes, 16 * (size_t)n), *ds = dev_upload(scores, 4 * (size_t)n);
    int *dg = dev_upload(groups, 4 * (size_t)n);
    vd_nms_shape shape = {.capacity = n, .max_candidates = n, .max_keep = n};
    size_t ws = vd_nms_workspace_size(&shape);
    void *dws = dev_alloc(ws);
    int *dk = dev_alloc(4 * (size_t)n), *dn = dev_alloc(4);
    cudaEvent_t a, b;
    CU(cudaEventCreate(&a));
    CU(cudaEventCreate(&b));
    double *t = g_new(double, iters);
    time_nms(db, ds, dg, &shape, threshold, dk, dn, dws, ws, s, a, b, t, iters);
    int kept = 0;
    CU(cudaMemcpy(&kept, dn, 4, cudaMemcpyDeviceToHost));
    /* the RPN's use: stop at 1000 kept */
    shape.max_keep = MIN(1000, n);
    double *t1000 = g_new(double, iters);
    time_nms(db, ds, dg, &shape, threshold, dk, dn, dws, ws, s, a, b, t1000, iters);
    printf("{\"n\": %d, \"threshold\": %g, \"kept\": %d, \"median_ms\": %.4f, "
           "\"median_ms_keep1000\": %.4f}\n",
           n, threshold, kept, median(t, iters), median(t1000, iters));
    g_free(t);
    g_free(t1000);
    g_free(data);
    return 0;
}

static int bench_roi_align(int argc, char **argv)
{
    int iters = atoi(arg_value(argc, argv, "--iters", "200"));
    int H = atoi(arg_value(argc, argv, "--height", "768"));
    int W = atoi(arg_value(argc, argv, "--width", "1344"));
    gchar *data;
    int n;
    int status = read_records(argc, argv, 16, "RoI", &data, &n);
    if (status != 0)
        return status;
    const int C = 256, P = 7;
    cudaStream_t s;
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    float *drois = dev_upload(data + 4, 16 * (size_t)n);
    int *dn = dev_upload(&n, 4);
    cudaEvent_t a, b;
    CU(cudaEventCreate(&a));
    CU(cudaEventCreate(&b));
    test_rng r = {1};
    printf("{\"n\": %d, \"height\": %d, \"width\": %d", n, H, W);
    for (int d = 0; d < 2; d++) {
        vd_dtype dt = d == 0 ? VD_DTYPE_F16 : VD_DTYPE_F32;
        vd_roi_levels lv;
        memset(&lv, 0, sizeof(lv));
        lv.n_levels = 4;
        lv.k_min = 2;
        lv.k_max = 5;
        lv.channels = C;
        for (int l = 0; l < 4; l++) {
            int stride = 4 << l;
            lv.height[l] = H / stride;
            lv.width[l] = W / stride;
            lv.scale[l] = 1.0f / (float)stride;
            size_t count = (size_t)lv.height[l] * lv.width[l] * C;
            float *host = g_new(float, count);
            for (size_t i = 0; i < count; i++)
                host[i] = rng_uniform(&r, -1, 1);
            if (dt == VD_DTYPE_F32) {
                lv.features[l] = dev_upload(host, count * 4);
            } else {
                uint16_t *h16 = g_new(uint16_t, count);
                for (size_t i = 0; i < count; i++)
                    h16[i] = float_to_half(host[i]);
                lv.features[l] = dev_upload(h16, count * 2);
                g_free(h16);
            }
            g_free(host);
        }
        void *out = dev_alloc((size_t)n * P * P * C * vd_dtype_size(dt));
        double *t = g_new(double, iters);
        for (int i = 0; i < iters + 10; i++) {
            CU(cudaEventRecord(a, s));
            CU(vd_multiscale_roi_align(&lv, dt, drois, dn, n, P, 2, out, dt, s));
            CU(cudaEventRecord(b, s));
            double ms = time_events(s, a, b);
            if (i >= 10)
                t[i - 10] = ms;
        }
        printf(", \"%s_median_ms\": %.4f", d == 0 ? "fp16" : "fp32", median(t, iters));
        g_free(t);
        CU(cudaFree(out));
        for (int l = 0; l < 4; l++)
            CU(cudaFree((void *)lv.features[l]));
    }
    printf("}\n");
    g_free(data);
    return 0;
}

static int bench_rpn_topk(int argc, char **argv)
{
    int iters = atoi(arg_value(argc, argv, "--iters", "50"));
    int H = atoi(arg_value(argc, argv, "--height", "800"));
    int W = atoi(arg_value(argc, argv, "--width", "1344"));
    enum { A = 3, HS = 16, N_LEVELS = 5, MAX_BATCH = 16 };
    const int batches[] = {1, 2, 4, 8, 16};
    if (iters < 1 || H < 64 || W < 64 || H > 4096 || W > 4096) {
        fprintf(stderr, "vd-gpu-bench rpn-topk: bad size or iterations\n");
        return 2;
    }
    cudaStream_t s;
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    vd_rpn_levels lv;
    memset(&lv, 0, sizeof(lv));
    lv.n_levels = N_LEVELS;
    lv.anchors_per_location = A;
    lv.head_stride = HS;
    int total = 0;
    test_rng r = {37};
    for (int l = 0; l < N_LEVELS; l++) {
        int stride = 4 << l, h = (H + stride - 1) / stride, w = (W + stride - 1) / stride;
        size_t count = (size_t)h * w * HS;
        uint16_t *host = g_new(uint16_t, count);
        for (size_t i = 0; i < count; i++)
            host[i] = float_to_half(rng_normal(&r) * 2.0f);
        lv.head[l] = dev_upload(host, count * sizeof(uint16_t));
        g_free(host);
        lv.n_anchors[l] = h * w * A;
        lv.anchor_offset[l] = total;
        lv.top_n[l] = MIN(1000, lv.n_anchors[l]);
        total += lv.n_anchors[l];
    }
    lv.anchor_offset[N_LEVELS] = total;
    size_t n_all = (size_t)MAX_BATCH * total;
    unsigned int *keys = dev_alloc(n_all * sizeof(unsigned int));
    unsigned int *keys_sorted = dev_alloc(n_all * sizeof(unsigned int));
    int *values = dev_alloc(n_all * sizeof(int)), *values_sorted = dev_alloc(n_all * sizeof(int));
    for (int i = 0; i < MAX_BATCH; i++)
        CU(vd_rpn_gather_logits(&lv, VD_DTYPE_F16, keys + (size_t)i * total,
                                values + (size_t)i * total, s));
    size_t ws_level = vd_rpn_topk_workspace_size(lv.n_anchors[0]);
    size_t ws_batched = vd_rpn_topk_batched_workspace_size(&lv, MAX_BATCH);
    void *ws = dev_alloc(MAX(ws_level, ws_batched));
    cudaEvent_t a, b;
    CU(cudaEventCreate(&a));
    CU(cudaEventCreate(&b));
    double *t = g_new(double, iters);
    printf("{\"height\": %d, \"width\": %d, \"anchors\": %d, \"level0_anchors\": %d, "
           "\"iters\": %d, \"batches\": [",
           H, W, total, lv.n_anchors[0], iters);
    for (size_t k = 0; k < G_N_ELEMENTS(batches); k++) {
        int n = batches[k];
        double per_level = 0, batched = 0;
        for (int mode = 0; mode < 2; mode++) {
            for (int i = 0; i < iters + 5; i++) {
                CU(cudaEventRecord(a, s));
                if (mode == 0)
                    for (int img = 0; img < n; img++)
                        CU(vd_rpn_topk(&lv, keys + (size_t)img * total,
                                       values + (size_t)img * total,
                                       keys_sorted + (size_t)img * total,
                                       values_sorted + (size_t)img * total, ws, ws_level, s));
                else
                    CU(vd_rpn_topk_batched(&lv, n, keys, values, keys_sorted, values_sorted, ws,
                                           ws_batched, s));
                CU(cudaEventRecord(b, s));
                double ms = time_events(s, a, b);
                if (i >= 5)
                    t[i - 5] = ms;
            }
            if (mode == 0)
                per_level = median(t, iters);
            else
                batched = median(t, iters);
        }
        printf("%s{\"n\": %d, \"per_level_ms\": %.4f, \"batched_ms\": %.4f}", k ? ", " : "", n,
               per_level, batched);
    }
    printf("]}\n");
    g_free(t);
    CU(cudaEventDestroy(a));
    CU(cudaEventDestroy(b));
    CU(cudaFree(keys));
    CU(cudaFree(keys_sorted));
    CU(cudaFree(values));
    CU(cudaFree(values_sorted));
    CU(cudaFree(ws));
    for (int l = 0; l < N_LEVELS; l++)
        CU(cudaFree((void *)lv.head[l]));
    CU(cudaStreamDestroy(s));
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: vd-gpu-bench engine|nms|roi-align|rpn-topk ...\n");
        return 2;
    }
    gpu_require_device("vd-gpu-bench");
    if (strcmp(argv[1], "engine") == 0)
        return bench_engine(argc, argv);
    if (strcmp(argv[1], "nms") == 0)
        return bench_nms(argc, argv);
    if (strcmp(argv[1], "roi-align") == 0)
        return bench_roi_align(argc, argv);
    if (strcmp(argv[1], "rpn-topk") == 0)
        return bench_rpn_topk(argc, argv);
    fprintf(stderr, "vd-gpu-bench: unknown mode %s\n", argv[1]);
    return 2;
}
