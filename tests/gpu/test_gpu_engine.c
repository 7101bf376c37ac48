/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The whole engine on CUDA against the CPU engine, the oracle (STYLE.md):
 *
 *   test-gpu-engine --model FILE [--trained] [--detections-only | --masks | --core]
 *                   [--json OUT.json] FRAME.ppm...
 *
 * (or VD_GPU_TEST_MODEL / VD_GPU_TEST_FRAMES, colon separated, in the
 * environment, as meson runs it). Checks, per frame:
 *   - CUDA fp32 against the CPU: the parity tests' criteria for detections
 *     (same label, IoU >= 0.99, |score difference| <= 1e-3, >= 97% of the CPU's
 *     detections matched, counts within 3%), and stage by stage through the
 *     observer (input, anchors, FPN features, proposals) so a failure says where;
 *   - CUDA fp16 against CUDA fp32: >= 95% of the detections matched with
 *     IoU >= 0.9 and |score difference| <= 0.02 (issue 4), for a trained model
 *     (--trained; reported only for random weights, see below);
 * and on the context:
 *   - exactly one host synchronisation per frame after the first frame of a
 *     size, eagerly and with CUDA graph replay (whose detections must equal the
 *     eager ones bit for bit), and the negative test: an injected sync is counted;
 *   - graph captures made to fail (a test hook): those frames run eagerly with
 *     the eager detections, vd_context_run_status() says RETRYING and why, and
 *     replay comes back after 1, 2, 4 eager frames (the back-off);
 *   - weights poisoned with NaN and infinities as the CPU fuzz test does, and
 *     an fp16 overflow: no crash, sane detections, and vd_result.n_nonfinite
 *     counted on the device (zero where fp32 holds the values, equal to the
 *     CPU's count where both count the same NaN logits);
 *   - the per-frame wait blocks instead of spinning: the thread's CPU time
 *     over replayed frames is well under their wall time;
 *   - replay with other pixels: three different frames of one layout, F1 F1
 *     F2 F3 F1 F2 with graphs, each replayed frame identical to its eager
 *     result, then thresholds and max_detections changed mid-stream;
 *   - every pixel format (BGRx, RGBA, NV12 and I420 in each matrix and range,
 *     padded rows, odd sizes) against the CPU engine on the same bytes, and a
 *     stream whose size and format change, replayed from graphs, that gives
 *     each frame the same detections as the first time;
 *   - vd_submit()/vd_collect() with VD_MAX_IN_FLIGHT batches in flight: the
 *     same detections as vd_detect(), one synchronisation per frame;
 *   - batches of 4 and 8 different frames of one size (fp32 and fp16): each
 *     image's detections close to that image alone (the fp32 criteria above,
 *     or fp16's; bit identity reported as information: cuDNN may pick other
 *     kernels at N > 1), eager and replayed from the batch's graph, fp32
 *     within the CPU criteria above,
 *     one host synchronisation per batch; a batch with an invalid image fails
 *     naming it, and the next batch runs as before;
 *   - selection and errors: AUTO picks CUDA, a missing device index and bf16 are
 *     clear errors; exhausted device memory is VD_ERROR_OUT_OF_MEMORY, not a
 *     crash, and the context works again once memory is back.
 * --masks, for a Mask R-CNN model (engine/MASKRCNN.md), checks instead, per
 * frame, CUDA fp32 and fp16 against the CPU: the detections as above, every
 * detection's mask present, the 28x28 probabilities ("mask_probs") and the
 * pasted masks of the matched detections (MASK_PROB_TOL, MASK_IOU and the
 * fp16 criteria below say why those bounds); then one host synchronisation
 * per frame (fp32 eager, fp16 replayed), graph replay with the eager masks
 * bit for bit, a batch of two close to each image alone (detections and
 * masks, batch_masks_close) with one synchronisation per batch, and the
 * mask_head / paste_masks stages.
 * --core (a model whose full run would not fit the device check's budget:
 * fasterrcnn_resnet50_fpn_v2, both MobileNetV3-Large-FPN builders) checks per frame the CPU stages and detections
 * against CUDA fp32 and fp16 as above, then the sync count, graph replay and
 * batches of two (run_core_checks).
 * Skips (77) without a device or without a model. */
#define _GNU_SOURCE /* RUSAGE_THREAD */
#include "vd_config.h"

#include "cuda/vd_cuda_debug.h"
#include "cuda/vd_cuda_private.h" /* VD_BATCH_SHRINK_AFTER */
#include "gpu_test_util.h"
#include "visiondetect/vd.h"

#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <sys/resource.h>
#include <unistd.h>

static int failures;
static JsonBuilder *report;
static gboolean trained_model;
static gboolean detections_only;
static gboolean masks_only;
static gboolean core_only;

static void check(gboolean ok, const char *what, const char *fmt, ...) G_GNUC_PRINTF(3, 4);

static void check(gboolean ok, const char *what, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    gchar *msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    printf("  %s %s: %s\n", ok ? "ok  " : "FAIL", what, msg);
    fflush(stdout);
    json_builder_begin_object(report);
    json_builder_set_member_name(report, "check");
    json_builder_add_string_value(report, what);
    json_builder_set_member_name(report, "ok");
    json_builder_add_boolean_value(report, ok);
    json_builder_set_member_name(report, "message");
    json_builder_add_string_value(report, msg);
    json_builder_end_object(report);
    if (!ok)
        failures++;
    g_free(msg);
}

static double iou(const vd_detection *a, const vd_detection *b)
{
    double ix = MIN(a->x2, b->x2) - MAX(a->x1, b->x1);
    double iy = MIN(a->y2, b->y2) - MAX(a->y1, b->y1);
    double inter = MAX(ix, 0.0) * MAX(iy, 0.0);
    double uni = (double)(a->x2 - a->x1) * (a->y2 - a->y1) + (double)(b->x2 - b->x1) * (b->y2 - b->y1) -
                 inter;
    if (uni <= 0)
        return memcmp(a, b, 4 * sizeof(float)) == 0 ? 1.0 : 0.0;
    return inter / uni;
}

/* Greedy one-to-one matching in reference order (parity_common.match): each
 * reference detection takes the unused one of ours with the highest IoU among
 * those with its label, IoU >= iou_min and |score diff| <= score_tol. */
static int match_pairs(const vd_result *ref, const vd_result *ours, double iou_min,
                       double score_tol, int *pair);

static int match(const vd_result *ref, const vd_result *ours, double iou_min, double score_tol)
{
    return match_pairs(ref, ours, iou_min, score_tol, NULL);
}

/* As match(), and @pair (unless NULL; ref->n_detections entries) gets the index
 * of each reference detection's partner in @ours, or -1. */
static int match_pairs(const vd_result *ref, const vd_result *ours, double iou_min,
                       double score_tol, int *pair)
{
    gboolean *used = g_new0(gboolean, MAX(ours->n_detections, 1));
    int matched = 0;
    for (int i = 0; i < ref->n_detections; i++) {
        const vd_detection *r = &ref->detections[i];
        int best = -1;
        double best_iou = -1;
        for (int j = 0; j < ours->n_detections; j++) {
            const vd_detection *o = &ours->detections[j];
            if (used[j] || o->label != r->label || fabs((double)o->score - r->score) > score_tol)
                continue;
            double v = iou(r, o);
            if (v >= iou_min && v > best_iou) {
                best = j;
                best_iou = v;
            }
        }
        if (best >= 0) {
            used[best] = TRUE;
            matched++;
        }
        if (pair != NULL)
            pair[i] = best;
    }
    g_free(used);
    return matched;
}

static gboolean results_identical(const vd_result *a, const vd_result *b)
{
    return a->n_detections == b->n_detections &&
           memcmp(a->detections, b->detections, sizeof(vd_detection) * (size_t)a->n_detections) == 0;
}

/* A batch's image against the same image alone on the same context. Not bit
 * for bit: cuDNN picks its kernels (tiling, split-K) by problem size, N
 * included, and vd_cuda_conv_init re-ranks the candidates at N > 1 (dropping
 * those over the workspace cap), so a correct batch may sum in another order
 * and differ in the last bits. The criteria are those of the per-frame checks:
 * fp32 the parity tests' (label, IoU >= 0.99, |score diff| <= 1e-3, >= 97% of
 * the reference's detections matched, counts within 3%), fp16 issue 4's (label,
 * IoU >= 0.9, |score diff| <= 0.02, >= 95% matched), which like the fp16 vs
 * fp32 check is judged for a trained model only (batch_close_judged). Bit
 * identity is reported as information. */
typedef struct {
    double iou_min, score_tol, min_matched, count_tol; /* count_tol < 0: counts not judged */
} close_criterion;

static const close_criterion close_fp32 = {0.99, 1e-3, 0.97, 0.03};
static const close_criterion close_fp16 = {0.9, 0.02, 0.95, -1};

static const close_criterion *batch_criterion(gboolean fp16)
{
    return fp16 ? &close_fp16 : &close_fp32;
}

/* Whether the batch criterion decides a check (FALSE: information only). */
static gboolean batch_close_judged(gboolean fp16)
{
    return !fp16 || trained_model;
}

/* Whether @ours matches @ref under @c; *@matched (unless NULL) gets the count. */
static gboolean results_close(const vd_result *ref, const vd_result *ours, const close_criterion *c,
                              int *matched)
{
    int n = ref->n_detections;
    int m = match(ref, ours, c->iou_min, c->score_tol);
    if (matched != NULL)
        *matched = m;
    if (n > 0 && m < c->min_matched * n)
        return FALSE;
    return c->count_tol < 0 || abs(ours->n_detections - n) <= (int)ceil(c->count_tol * n);
}

static const char *criterion_text(const close_criterion *c)
{
    return c == &close_fp32 ? "label, IoU >= 0.99, |score diff| <= 1e-3, >= 97% matched, counts "
                              "within 3%"
                            : "label, IoU >= 0.9, |score diff| <= 0.02, >= 95% matched";
}

/* ------------------------------------------------------------------------ */
/* Observed tensors                                                          */

typedef struct {
    float *data;
    int64_t shape[4];
    int ndim;
    size_t n;
} tensor;

static void tensor_free(gpointer p)
{
    tensor *t = p;
    g_free(t->data);
    g_free(t);
}

static void observer(const char *name, const float *data, const int64_t *shape, int ndim,
                     void *user_data)
{
    GHashTable *table = user_data;
    tensor *t = g_new0(tensor, 1);
    t->ndim = ndim;
    t->n = 1;
    for (int i = 0; i < ndim && i < 4; i++) {
        t->shape[i] = shape[i];
        t->n *= (size_t)shape[i];
    }
    t->data = g_memdup2(data, MAX(t->n, 1) * sizeof(float));
    g_hash_table_replace(table, g_strdup(name), t);
}

static void compare_tensors(GHashTable *cpu, GHashTable *gpu, const char *name, double rel_tol,
                            const char *why)
{
    tensor *a = g_hash_table_lookup(cpu, name), *b = g_hash_table_lookup(gpu, name);
    gchar *what = g_strdup_printf("fp32 %s", name);
    if (a == NULL || b == NULL || a->n != b->n) {
        check(FALSE, what, "missing or of different sizes (%zu vs %zu)", a ? a->n : 0,
              b ? b->n : 0);
        g_free(what);
        return;
    }
    double max_ref = 0, max_diff = 0;
    for (size_t i = 0; i < a->n; i++) {
        max_ref = MAX(max_ref, fabs(a->data[i]));
        double d = fabs((double)a->data[i] - b->data[i]);
        if (!(d <= max_diff))
            max_diff = isnan(d) ? INFINITY : MAX(max_diff, d);
    }
    double rel = max_ref > 0 ? max_diff / max_ref : max_diff;
    check(rel <= rel_tol, what, "max|diff| %.3g, max|cpu| %.3g, relative %.3g (tolerance %.1g: %s)",
          max_diff, max_ref, rel, rel_tol, why);
    g_free(what);
}

static void compare_proposals(GHashTable *cpu, GHashTable *gpu)
{
    tensor *a = g_hash_table_lookup(cpu, "proposals"), *b = g_hash_table_lookup(gpu, "proposals");
    tensor *sa = g_hash_table_lookup(cpu, "proposal_scores");
    tensor *sb = g_hash_table_lookup(gpu, "proposal_scores");
    if (a == NULL || b == NULL || sa == NULL || sb == NULL) {
        check(FALSE, "fp32 proposals", "not observed");
        return;
    }
    vd_result ra = {0}, rb = {0};
    ra.n_detections = (int)(a->n / 4);
    rb.n_detections = (int)(b->n / 4);
    ra.detections = g_new0(vd_detection, MAX(ra.n_detections, 1));
    rb.detections = g_new0(vd_detection, MAX(rb.n_detections, 1));
    for (int i = 0; i < ra.n_detections; i++) {
        memcpy(&ra.detections[i].x1, a->data + 4 * i, 4 * sizeof(float));
        ra.detections[i].score = sa->data[i];
    }
    for (int i = 0; i < rb.n_detections; i++) {
        memcpy(&rb.detections[i].x1, b->data + 4 * i, 4 * sizeof(float));
        rb.detections[i].score = sb->data[i];
    }
    int m = match(&ra, &rb, 0.99, 1e-3);
    double frac = ra.n_detections ? (double)m / ra.n_detections : 1.0;
    check(frac >= 0.97, "fp32 proposals",
          "%d of %d CPU proposals matched (IoU >= 0.99, |score diff| <= 1e-3), GPU has %d", m,
          ra.n_detections, rb.n_detections);
    g_free(ra.detections);
    g_free(rb.detections);
}

/* ------------------------------------------------------------------------ */

static vd_context *new_context(vd_model *model, vd_device_type device, vd_precision precision)
{
    vd_context_params p = vd_context_default_params();
    p.device = device;
    p.precision = precision;
    GError *error = NULL;
    vd_context *ctx = vd_context_new(model, &p, &error);
    if (ctx == NULL) {
        fprintf(stderr, "context (%d, %d): %s\n", device, precision, error->message);
        g_error_free(error);
    }
    return ctx;
}

static gboolean detect(vd_context *ctx, const vd_image *image, vd_result *result)
{
    GError *error = NULL;
    if (!vd_detect(ctx, image, 1, result, &error)) {
        fprintf(stderr, "vd_detect: %s\n", error->message);
        g_error_free(error);
        return FALSE;
    }
    return TRUE;
}

static void test_selection(vd_model *model)
{
    vd_context *ctx = new_context(model, VD_DEVICE_AUTO, VD_PRECISION_AUTO);
    check(ctx != NULL && vd_context_device(ctx) == VD_DEVICE_CUDA &&
              vd_context_precision(ctx) == VD_PRECISION_FP16,
          "auto selection", "device auto resolves to %s, precision auto to %s",
          ctx && vd_context_device(ctx) == VD_DEVICE_CUDA ? "cuda" : "cpu",
          ctx && vd_context_precision(ctx) == VD_PRECISION_FP16 ? "fp16" : "other");
    vd_context_free(ctx);

    vd_context_params p = vd_context_default_params();
    p.device = VD_DEVICE_CUDA;
    p.device_index = 99;
    GError *error = NULL;
    ctx = vd_context_new(model, &p, &error);
    check(ctx == NULL && g_error_matches(error, VD_ERROR, VD_ERROR_DEVICE), "missing device",
          "cuda:99 -> %s", error ? error->message : "no error");
    g_clear_error(&error);
    vd_context_free(ctx);

    p.device_index = 0;
    p.precision = VD_PRECISION_BF16;
    ctx = vd_context_new(model, &p, &error);
    check(ctx == NULL && g_error_matches(error, VD_ERROR, VD_ERROR_UNSUPPORTED), "bf16 refused",
          "%s", error ? error->message : "no error");
    g_clear_error(&error);
    vd_context_free(ctx);
}

/* N frames after warm-up: exactly N synchronisations. */
static void test_sync_count(vd_context *ctx, const vd_image *image, const char *label,
                            gboolean graphs)
{
    vd_result r = {0};
    vd_cuda_context_set_graphs(ctx, graphs);
    /* warm-up: plans the size; with graphs the second frame is captured */
    for (int i = 0; i < 2; i++) {
        if (!detect(ctx, image, &r))
            goto out_fail;
        vd_result_clear(&r);
    }
    const int n = 10;
    guint64 before = vd_cuda_context_sync_count(ctx);
    gboolean replayed = TRUE;
    for (int i = 0; i < n; i++) {
        if (!detect(ctx, image, &r))
            goto out_fail;
        replayed = replayed && vd_cuda_context_graph_replayed(ctx);
        vd_result_clear(&r);
    }
    guint64 syncs = vd_cuda_context_sync_count(ctx) - before;
    gchar *what = g_strdup_printf("sync count %s%s", label, graphs ? " graph" : "");
    check(syncs == (guint64)n && (!graphs || replayed), what,
          "%" G_GUINT64_FORMAT " host synchronisations in %d frames%s", syncs, n,
          graphs ? (replayed ? ", every frame replayed from the graph" : ", NOT replayed") : "");
    g_free(what);
    vd_cuda_context_set_graphs(ctx, FALSE);
    return;
out_fail:
    check(FALSE, "sync count", "detection failed");
    vd_cuda_context_set_graphs(ctx, FALSE);
}

static void test_injected_sync(vd_context *ctx, const vd_image *image)
{
    vd_result r = {0};
    const int n = 3;
    vd_cuda_context_inject_sync(ctx, TRUE);
    guint64 before = vd_cuda_context_sync_count(ctx);
    gboolean ok = TRUE;
    for (int i = 0; i < n && ok; i++) {
        ok = detect(ctx, image, &r);
        vd_result_clear(&r);
    }
    guint64 syncs = vd_cuda_context_sync_count(ctx) - before;
    vd_cuda_context_inject_sync(ctx, FALSE);
    /* the per-frame check must fail on such a build: 2 per frame */
    check(ok && syncs == 2 * (guint64)n, "injected sync is counted",
          "%" G_GUINT64_FORMAT " synchronisations in %d frames with one added sync per frame "
          "(a 1-per-frame assertion would fail, as it must)",
          syncs, n);
}

static void test_graph_equals_eager(vd_context *ctx, const vd_image *image)
{
    vd_result eager = {0}, replay = {0};
    vd_cuda_context_set_graphs(ctx, FALSE);
    if (!detect(ctx, image, &eager)) {
        check(FALSE, "graph replay", "eager detection failed");
        return;
    }
    vd_cuda_context_set_graphs(ctx, TRUE);
    gboolean ok = TRUE;
    for (int i = 0; i < 3 && ok; i++) {
        vd_result_clear(&replay);
        ok = detect(ctx, image, &replay);
    }
    gboolean replayed = vd_cuda_context_graph_replayed(ctx);
    check(ok && replayed && results_identical(&eager, &replay), "graph replay",
          "%s; %d detections eager, %d replayed, %s", replayed ? "replayed" : "NOT replayed",
          eager.n_detections, replay.n_detections,
          results_identical(&eager, &replay) ? "identical" : "DIFFERENT");
    vd_cuda_context_set_graphs(ctx, FALSE);
    vd_result_clear(&eager);
    vd_result_clear(&replay);
}

/* Graph capture failures are retried (issue 11, item 1): with captures made
 * to fail on purpose, frames run eagerly with the eager detections, the status
 * says RETRYING with the reason and the back-off, and replay comes back after
 * 1, then 2, then 4 eager frames; one host synchronisation per frame
 * throughout. */
static void test_graph_retry(vd_context *ctx, const vd_image *image)
{
    vd_result eager = {0}, r = {0};
    vd_run_status status;
    vd_cuda_context_set_graphs(ctx, FALSE);
    if (!detect(ctx, image, &eager)) {
        check(FALSE, "graph retry", "eager detection failed");
        return;
    }
    vd_cuda_context_set_graphs(ctx, TRUE);
    for (int i = 0; i < 2; i++) { /* captured (or already), replayed */
        vd_result_clear(&r);
        if (!detect(ctx, image, &r))
            goto out_fail;
    }
    vd_context_run_status(ctx, &status);
    guint64 failures0 = status.graph_failures;
    check(status.graphs == VD_GRAPHS_ACTIVE && vd_cuda_context_graph_replayed(ctx),
          "graph retry: active before", "state %s, %s", vd_graphs_state_name(status.graphs),
          vd_cuda_context_graph_replayed(ctx) ? "replayed" : "NOT replayed");

    /* one failure: the failing frame and one more eager, then replayed */
    vd_cuda_context_fail_captures(ctx, 1);
    guint64 syncs0 = vd_cuda_context_sync_count(ctx);
    gboolean replayed[4], equal[4];
    vd_run_status st[4];
    for (int i = 0; i < 4; i++) {
        vd_result_clear(&r);
        if (!detect(ctx, image, &r))
            goto out_fail;
        replayed[i] = vd_cuda_context_graph_replayed(ctx);
        equal[i] = results_identical(&eager, &r);
        vd_context_run_status(ctx, &st[i]);
    }
    guint64 syncs = vd_cuda_context_sync_count(ctx) - syncs0;
    check(!replayed[0] && equal[0] && st[0].graphs == VD_GRAPHS_RETRYING &&
              strstr(st[0].graphs_reason, "injected") != NULL &&
              st[0].graph_failures == failures0 + 1 && st[0].graph_retry_frames == 1,
          "graph retry: a failed capture runs eagerly",
          "frame 1 %s, %s to eager, state %s (\"%s\", %" G_GUINT64_FORMAT
          " failure(s) more, next try in %d frame(s))",
          replayed[0] ? "REPLAYED" : "eager", equal[0] ? "identical" : "DIFFERENT",
          vd_graphs_state_name(st[0].graphs), st[0].graphs_reason, st[0].graph_failures - failures0,
          st[0].graph_retry_frames);
    check(!replayed[1] && equal[1] && st[1].graphs == VD_GRAPHS_RETRYING &&
              st[1].graph_retry_frames == 0,
          "graph retry: backing off one frame", "frame 2 %s, %s to eager, state %s, next try in %d",
          replayed[1] ? "REPLAYED" : "eager", equal[1] ? "identical" : "DIFFERENT",
          vd_graphs_state_name(st[1].graphs), st[1].graph_retry_frames);
    check(replayed[2] && replayed[3] && equal[2] && equal[3] && st[2].graphs == VD_GRAPHS_ACTIVE &&
              st[3].graphs == VD_GRAPHS_ACTIVE && st[3].graphs_reason[0] == '\0' && syncs == 4,
          "graph retry: replay comes back",
          "frames 3 and 4 %s and %s, %s to eager, state %s then %s; %" G_GUINT64_FORMAT
          " host synchronisations in 4 frames",
          replayed[2] ? "replayed" : "NOT replayed", replayed[3] ? "replayed" : "NOT replayed",
          equal[2] && equal[3] ? "identical" : "DIFFERENT", vd_graphs_state_name(st[2].graphs),
          vd_graphs_state_name(st[3].graphs), syncs);

    /* three failures in a row: tries at frames 1, 3 and 6, replayed from 11 */
    vd_cuda_context_fail_captures(ctx, 3);
    int first_replay = 0, n_equal = 0, n_frames = 0;
    GString *waits = g_string_new("");
    for (int i = 1; i <= 16 && first_replay == 0; i++) {
        vd_result_clear(&r);
        if (!detect(ctx, image, &r)) {
            g_string_free(waits, TRUE);
            goto out_fail;
        }
        n_frames++;
        n_equal += results_identical(&eager, &r);
        vd_context_run_status(ctx, &status);
        g_string_append_printf(waits, "%s%d", i > 1 ? "," : "",
                               status.graphs == VD_GRAPHS_RETRYING ? status.graph_retry_frames
                                                                   : -1);
        if (vd_cuda_context_graph_replayed(ctx))
            first_replay = i;
    }
    check(first_replay == 11 && n_equal == n_frames && status.graph_failures == failures0 + 4 &&
              status.graphs == VD_GRAPHS_ACTIVE,
          "graph retry: back-off doubles",
          "3 failures in a row: first replay at frame %d (expected 11: tries at 1, 3, 6, 11), "
          "%d of %d frames identical to eager, frames left before a try after each frame: %s "
          "(-1: active)",
          first_replay, n_equal, n_frames, waits->str);
    g_string_free(waits, TRUE);
    goto out_clear;
out_fail:
    check(FALSE, "graph retry", "detection failed");
out_clear:
    vd_cuda_context_fail_captures(ctx, 0);
    vd_cuda_context_set_graphs(ctx, FALSE);
    vd_result_clear(&eager);
    vd_result_clear(&r);
}

/* @rgb (packed RGB) mirrored left-right (@horizontal) or upside down: another
 * frame of the same layout with other detections. */
static uint8_t *mirrored(const vd_image *rgb, gboolean horizontal)
{
    int w = rgb->width, h = rgb->height;
    uint8_t *out = g_malloc((size_t)w * h * 3);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            int sx = horizontal ? w - 1 - x : x, sy = horizontal ? y : h - 1 - y;
            memcpy(out + ((size_t)y * w + x) * 3,
                   rgb->planes[0] + (size_t)sy * rgb->strides[0] + (size_t)sx * 3, 3);
        }
    return out;
}

/* A captured graph replays with each frame's own pixels and the current
 * thresholds (issue 11, item 2): three different frames of one layout run
 * eagerly first (the references), then on a fresh context with graphs F1 F1
 * F2 F3 F1 F2, every frame from the second on replayed and identical to its
 * eager result (a graph that read a stale staging buffer would give F2 the
 * detections of F1); then the thresholds and max_detections change mid-stream,
 * each frame again against its eager result at those settings. */
static void test_graph_replay_frames(vd_model *model, const vd_image *first)
{
    enum { N_FRAMES = 3, N_SETTINGS = 3 };
    uint8_t *pixels[N_FRAMES] = {NULL, mirrored(first, TRUE), mirrored(first, FALSE)};
    vd_image frames[N_FRAMES];
    vd_result eager[N_SETTINGS][N_FRAMES];
    memset(eager, 0, sizeof(eager));
    frames[0] = *first;
    for (int f = 1; f < N_FRAMES; f++)
        frames[f] = vd_image_rgb(pixels[f], first->width, first->height);
    vd_context *ctx = new_context(model, VD_DEVICE_CUDA, VD_PRECISION_FP16);
    if (ctx == NULL) {
        check(FALSE, "graph replay of different frames", "no context");
        goto out_free;
    }
    const vd_config *cfg = &model->config;
    /* settings 0: the model's; 1: a score threshold at the median of F1's
     * scores and a tighter NMS; 2: at most 3 detections */
    float score[N_SETTINGS] = {-1.0f, -1.0f, -1.0f};
    float nms[N_SETTINGS] = {-1.0f, 0.3f, -1.0f};
    int max_det[N_SETTINGS] = {0, 0, 3};
    vd_cuda_context_set_graphs(ctx, FALSE);
    for (int k = 0; k < N_SETTINGS; k++) {
        vd_context_set_thresholds(ctx, score[k], nms[k], max_det[k]);
        for (int f = 0; f < N_FRAMES; f++)
            if (!detect(ctx, &frames[f], &eager[k][f]))
                goto out_fail;
        if (k == 0) {
            const vd_result *r = &eager[0][0];
            score[1] = r->n_detections >= 2 ? r->detections[r->n_detections / 2].score
                                            : cfg->box_score_thresh;
        }
    }
    gboolean frames_differ = !results_identical(&eager[0][0], &eager[0][1]) &&
                             !results_identical(&eager[0][0], &eager[0][2]) &&
                             !results_identical(&eager[0][1], &eager[0][2]);
    gboolean settings_differ = !results_identical(&eager[0][0], &eager[1][0]) &&
                               !results_identical(&eager[0][0], &eager[2][0]);
    check(frames_differ && settings_differ, "graph replay of different frames: references",
          "eager detections of F1, F2 (mirrored), F3 (flipped): %d, %d, %d, %s; at score > "
          "%.3f and NMS 0.3: %d, %d, %d; at most 3: %d, %d, %d; %s",
          eager[0][0].n_detections, eager[0][1].n_detections, eager[0][2].n_detections,
          frames_differ ? "all different"
                        : "NOT all different (the test could not see a stale "
                          "frame)",
          score[1], eager[1][0].n_detections, eager[1][1].n_detections, eager[1][2].n_detections,
          eager[2][0].n_detections, eager[2][1].n_detections, eager[2][2].n_detections,
          settings_differ ? "each setting changes F1's detections" : "a setting changes NOTHING");

    /* the stream: (settings, frame); the first frame of each settings runs
     * eagerly (a new capture key), the second is captured and replayed */
    static const int stream[][2] = {
        {0, 0}, {0, 0}, {0, 1}, {0, 2}, {0, 0}, {0, 1}, /* F1 F1 F2 F3 F1 F2 */
        {1, 2}, {1, 0}, {1, 1}, {1, 2}, {2, 0}, {2, 1}, {2, 2}, {2, 0}, {0, 1}, {0, 2},
    };
    vd_cuda_context_set_graphs(ctx, TRUE);
    vd_context_set_thresholds(ctx, score[0], nms[0], max_det[0]);
    int current = 0, identical = 0, replays_expected = 0, replays_where_expected = 0;
    guint64 replays0 = vd_cuda_context_graph_replays(ctx);
    GString *pattern = g_string_new("");
    for (guint i = 0; i < G_N_ELEMENTS(stream); i++) {
        int k = stream[i][0], f = stream[i][1];
        gboolean first_of_settings = i == 0 || k != current;
        if (k != current) {
            vd_context_set_thresholds(ctx, score[k], nms[k], max_det[k]);
            current = k;
        }
        vd_result r = {0};
        if (!detect(ctx, &frames[f], &r)) {
            g_string_free(pattern, TRUE);
            goto out_fail;
        }
        gboolean same = results_identical(&eager[k][f], &r);
        gboolean replayed = vd_cuda_context_graph_replayed(ctx);
        identical += same;
        if (!first_of_settings) {
            replays_expected++;
            replays_where_expected += replayed;
        }
        g_string_append_printf(pattern, "%s%sF%d%s%s", i ? " " : "", first_of_settings ? "| " : "",
                               f + 1, replayed ? "r" : "e", same ? "" : "!");
        vd_result_clear(&r);
        if (i == 5) {
            check(identical == 6 && replays_where_expected == 5, "graph replay of different frames",
                  "F1 F1 F2 F3 F1 F2: %d of 6 identical to their eager results, %d of the last 5 "
                  "replayed (%s; r replayed, e eager, ! different)",
                  identical, replays_where_expected, pattern->str);
        }
    }
    guint64 replays = vd_cuda_context_graph_replays(ctx) - replays0;
    check(identical == (int)G_N_ELEMENTS(stream) && replays_where_expected == replays_expected,
          "graph replay with thresholds changed mid-stream",
          "%d of %d frames identical to their eager results at their settings, %d of %d "
          "replayed where expected (%" G_GUINT64_FORMAT " in all): %s",
          identical, (int)G_N_ELEMENTS(stream), replays_where_expected, replays_expected, replays,
          pattern->str);
    g_string_free(pattern, TRUE);
    goto out_free;
out_fail:
    check(FALSE, "graph replay of different frames", "detection failed");
out_free:
    for (int k = 0; k < N_SETTINGS; k++)
        for (int f = 0; f < N_FRAMES; f++)
            vd_result_clear(&eager[k][f]);
    vd_context_free(ctx);
    for (int f = 1; f < N_FRAMES; f++)
        g_free(pixels[f]);
}

/* CPU time of the calling thread, in seconds. */
static double thread_cpu_seconds(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_THREAD, &ru) != 0)
        return 0.0;
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec * 1e-6;
}

/* The per-frame wait yields the core (issue 11, item 5): over replayed fp16
 * frames, whose host work is the staging copy and a graph launch, the calling
 * thread uses well under its wall time; a spinning wait uses all of it. */
static void test_wait_yields(vd_context *ctx, const vd_image *image)
{
    vd_result r = {0};
    vd_cuda_context_set_graphs(ctx, TRUE);
    for (int i = 0; i < 3; i++) {
        vd_result_clear(&r);
        if (!detect(ctx, image, &r))
            goto out_fail;
    }
    const int n = 30;
    gint64 t0 = g_get_monotonic_time();
    double cpu0 = thread_cpu_seconds();
    for (int i = 0; i < n; i++) {
        vd_result_clear(&r);
        if (!detect(ctx, image, &r))
            goto out_fail;
    }
    double cpu = thread_cpu_seconds() - cpu0;
    double wall = (double)(g_get_monotonic_time() - t0) * 1e-6;
    check(wall > 0 && cpu / wall<0.6, "frame wait yields the core",
                                 "%d replayed frames: %.2f ms of the thread's CPU time per frame "
                                 "in %.2f ms wall (%.0f%%; "
                                 "a spinning wait would be ~100%%)",
                                 n, 1e3 * cpu / n, 1e3 * wall / n, wall> 0
              ? 100 * cpu / wall
              : 0);
    goto out_clear;
out_fail:
    check(FALSE, "frame wait yields the core", "detection failed");
out_clear:
    vd_cuda_context_set_graphs(ctx, FALSE);
    vd_result_clear(&r);
}

/* vd_submit()/vd_collect(): batches run on the context's worker thread, in
 * order, with the same results as vd_detect() and still one host
 * synchronisation per frame. */
static void test_submit_collect(vd_context *ctx, const vd_image *image)
{
    vd_result ref = {0}, r = {0};
    GError *error = NULL;
    const int n = VD_MAX_IN_FLIGHT;
    vd_cuda_context_set_graphs(ctx, TRUE);
    /* warm-up and reference: eager, captured, replayed */
    for (int i = 0; i < 3; i++) {
        vd_result_clear(&ref);
        if (!detect(ctx, image, &ref)) {
            check(FALSE, "submit/collect", "detection failed");
            vd_cuda_context_set_graphs(ctx, FALSE);
            return;
        }
    }
    guint64 before = vd_cuda_context_sync_count(ctx);
    int submitted = 0, equal = 0;
    for (int i = 0; i < n; i++)
        submitted += vd_submit(ctx, image, 1, &error);
    g_clear_error(&error);
    for (int i = 0; i < submitted; i++) {
        if (vd_collect(ctx, &r, 1, &error))
            equal += results_identical(&ref, &r);
        g_clear_error(&error);
        vd_result_clear(&r);
    }
    guint64 syncs = vd_cuda_context_sync_count(ctx) - before;
    check(submitted == n && equal == n && syncs == (guint64)n, "submit/collect",
          "%d of %d submitted, %d equal to vd_detect's result, %" G_GUINT64_FORMAT
          " host synchronisations",
          submitted, n, equal, syncs);
    vd_cuda_context_set_graphs(ctx, FALSE);
    vd_result_clear(&ref);
}

/* ------------------------------------------------------------------------ */
/* Pixel formats and size changes                                            */

/* A frame of @rgb (w x h, packed) in another layout, with padded rows and
 * odd sizes allowed. YUV from a plain BT.601 limited-range formula: which
 * formula does not matter here, both engines read the same bytes. */
typedef struct {
    vd_image image;
    uint8_t *planes[3];
} owned_frame;

static uint8_t clamp_u8(double v)
{
    return (uint8_t)CLAMP(lrint(v), 0, 255);
}

static owned_frame make_frame(const uint8_t *rgb, int rgb_stride, int w, int h,
                              vd_pixel_format format, vd_color_matrix matrix, gboolean full)
{
    owned_frame f = {0};
    f.image.format = format;
    f.image.width = w;
    f.image.height = h;
    f.image.matrix = matrix;
    f.image.full_range = full;
    if (format == VD_FORMAT_BGRX || format == VD_FORMAT_RGBA) {
        int stride = 4 * w + 12;
        f.planes[0] = g_malloc0((size_t)stride * h);
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                const uint8_t *s = rgb + (size_t)y * rgb_stride + 3 * x;
                uint8_t *d = f.planes[0] + (size_t)y * stride + 4 * x;
                gboolean bgr = format == VD_FORMAT_BGRX;
                d[0] = s[bgr ? 2 : 0];
                d[1] = s[1];
                d[2] = s[bgr ? 0 : 2];
                d[3] = 0x5a; /* ignored (x) or alpha: never read as colour */
            }
        f.image.planes[0] = f.planes[0];
        f.image.strides[0] = stride;
        return f;
    }
    int cw = (w + 1) / 2, ch = (h + 1) / 2;
    int ystride = w + 6;
    int cstride = format == VD_FORMAT_NV12 ? 2 * cw + 6 : cw + 3;
    f.planes[0] = g_malloc0((size_t)ystride * h);
    f.planes[1] = g_malloc0((size_t)cstride * ch);
    if (format == VD_FORMAT_I420)
        f.planes[2] = g_malloc0((size_t)cstride * ch);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            const uint8_t *s = rgb + (size_t)y * rgb_stride + 3 * x;
            f.planes[0][(size_t)y * ystride + x] =
                clamp_u8(16 + (65.481 * s[0] + 128.553 * s[1] + 24.966 * s[2]) / 255.0);
        }
    for (int y = 0; y < ch; y++)
        for (int x = 0; x < cw; x++) {
            /* the top-left pixel of each 2x2 block is enough for a test frame */
            const uint8_t *s = rgb + (size_t)(2 * y) * rgb_stride + 3 * (2 * x);
            uint8_t u = clamp_u8(128 + (-37.797 * s[0] - 74.203 * s[1] + 112.0 * s[2]) / 255.0);
            uint8_t v = clamp_u8(128 + (112.0 * s[0] - 93.786 * s[1] - 18.214 * s[2]) / 255.0);
            if (format == VD_FORMAT_NV12) {
                f.planes[1][(size_t)y * cstride + 2 * x] = u;
                f.planes[1][(size_t)y * cstride + 2 * x + 1] = v;
            } else {
                f.planes[1][(size_t)y * cstride + x] = u;
                f.planes[2][(size_t)y * cstride + x] = v;
            }
        }
    for (int i = 0; i < 3; i++) {
        f.image.planes[i] = f.planes[i];
        f.image.strides[i] = f.planes[i] ? (i == 0 ? ystride : cstride) : 0;
    }
    return f;
}

static void free_frame(owned_frame *f)
{
    for (int i = 0; i < 3; i++)
        g_free(f->planes[i]);
}

/* Every format the element feeds the engine, padded rows, odd sizes, through
 * the whole CUDA engine (pre-processing kernel included) against the CPU engine
 * on the same bytes; then the same frames again as a stream changing size,
 * format, colour matrix or range alone, on one fp16 context with graph replay
 * on: each frame's detections must equal what that context gave it the first
 * time (plans rebuilt, graphs recaptured, nothing stale reused). */
static void test_formats(vd_context *cpu, vd_context *f32, vd_context *f16, const vd_image *rgb)
{
    struct {
        const char *name;
        vd_pixel_format format;
        vd_color_matrix matrix;
        gboolean full;
        int crop; /* pixels removed from width and height: odd sizes */
    } cases[] = {
        {"BGRx, padded rows", VD_FORMAT_BGRX, VD_COLOR_MATRIX_BT601, FALSE, 0},
        {"RGBA, odd size", VD_FORMAT_RGBA, VD_COLOR_MATRIX_BT601, FALSE, 1},
        {"NV12 BT.709 limited", VD_FORMAT_NV12, VD_COLOR_MATRIX_BT709, FALSE, 0},
        /* the range alone changes: a replayed graph must not keep the old one */
        {"NV12 BT.709 full", VD_FORMAT_NV12, VD_COLOR_MATRIX_BT709, TRUE, 0},
        {"NV12 BT.601 full, odd size", VD_FORMAT_NV12, VD_COLOR_MATRIX_BT601, TRUE, 3},
        {"I420 BT.2020 limited, odd size", VD_FORMAT_I420, VD_COLOR_MATRIX_BT2020, FALSE, 1},
        {"I420 BT.601 limited", VD_FORMAT_I420, VD_COLOR_MATRIX_BT601, FALSE, 0},
        /* the matrix alone changes */
        {"I420 BT.709 limited", VD_FORMAT_I420, VD_COLOR_MATRIX_BT709, FALSE, 0},
    };
    enum { N_CASES = G_N_ELEMENTS(cases) };
    owned_frame frames[N_CASES];
    vd_result first16[N_CASES];
    gboolean have16[N_CASES];
    memset(first16, 0, sizeof(first16));
    memset(have16, 0, sizeof(have16));

    for (int i = 0; i < N_CASES; i++) {
        int w = rgb->width - cases[i].crop, h = rgb->height - cases[i].crop;
        frames[i] = make_frame(rgb->planes[0], rgb->strides[0], w, h, cases[i].format,
                               cases[i].matrix, cases[i].full);
        const vd_image *img = &frames[i].image;
        GHashTable *cpu_t = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, tensor_free);
        GHashTable *gpu_t = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, tensor_free);
        vd_result rc = {0}, r32 = {0};
        vd_context_set_observer(cpu, observer, cpu_t);
        vd_context_set_observer(f32, observer, gpu_t);
        gboolean okc = detect(cpu, img, &rc);
        gboolean ok32 = detect(f32, img, &r32);
        have16[i] = detect(f16, img, &first16[i]);
        vd_context_set_observer(cpu, NULL, NULL);
        vd_context_set_observer(f32, NULL, NULL);
        gchar *what = g_strdup_printf("%s (%dx%d) runs", cases[i].name, w, h);
        check(okc && ok32 && have16[i], what, "CPU %s, CUDA fp32 %s, CUDA fp16 %s",
              okc ? "ok" : "FAILED", ok32 ? "ok" : "FAILED", have16[i] ? "ok" : "FAILED");
        g_free(what);
        if (okc && ok32) {
            compare_tensors(cpu_t, gpu_t, "input", 1e-6,
                            "colour conversion and resize share vd_math.h");
            int m = match(&rc, &r32, 0.99, 1e-3);
            what = g_strdup_printf("%s: fp32 detections vs CPU", cases[i].name);
            check(rc.n_detections >= 1 && m >= (int)ceil(0.97 * rc.n_detections) &&
                      abs(r32.n_detections - rc.n_detections) <=
                          (int)ceil(0.03 * rc.n_detections),
                  what, "%d of %d matched (label, IoU >= 0.99, |score diff| <= 1e-3); CUDA has %d",
                  m, rc.n_detections, r32.n_detections);
            g_free(what);
        }
        vd_result_clear(&rc);
        vd_result_clear(&r32);
        g_hash_table_unref(cpu_t);
        g_hash_table_unref(gpu_t);
    }

    /* the stream: every case three times in a row (eager, captured, replayed),
     * the whole list twice, sizes and formats changing between cases */
    vd_cuda_context_set_graphs(f16, TRUE);
    int frames_run = 0, equal = 0, replays = 0;
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < N_CASES; i++)
            for (int k = 0; k < 3; k++) {
                vd_result r = {0};
                if (!have16[i] || !detect(f16, &frames[i].image, &r))
                    continue;
                frames_run++;
                equal += results_identical(&first16[i], &r);
                replays += vd_cuda_context_graph_replayed(f16);
                vd_result_clear(&r);
            }
    vd_cuda_context_set_graphs(f16, FALSE);
    /* per case and round: the second frame is captured and replayed, the third
     * replayed */
    check(frames_run == 6 * N_CASES && equal == frames_run && replays >= 4 * N_CASES,
          "size and format changes, fp16 with graphs",
          "%d of %d frames ran, %d equal to the case's first result, %d replayed from a graph",
          frames_run, 6 * N_CASES, equal, replays);
    for (int i = 0; i < N_CASES; i++) {
        vd_result_clear(&first16[i]);
        free_frame(&frames[i]);
    }
}

/* ------------------------------------------------------------------------ */
/* Non-finite values (issue 11, item 3)                                      */

/* A copy of the safetensors file @bytes whose F32 tensors named @prefix...
 * are changed: every value times @scale, or (@n_set > 0) the first @n_set
 * values of each set to @value; loaded from a temporary file. NULL (and a
 * message) if no tensor matched or the copy does not load. */
static vd_model *poisoned_model(const guint8 *bytes, gsize size, const char *prefix, float scale,
                                int n_set, float value, int *n_changed)
{
    guint64 header_len = 0;
    vd_model *model = NULL;
    *n_changed = 0;
    for (int i = 7; i >= 0 && size >= 8; i--)
        header_len = (header_len << 8) | bytes[i];
    if (size < 8 || header_len > size - 8)
        return NULL;
    guint8 *copy = g_memdup2(bytes, size);
    gsize data_start = 8 + (gsize)header_len;
    JsonParser *parser = json_parser_new();
    GError *error = NULL;
    if (!json_parser_load_from_data(parser, (const gchar *)bytes + 8, (gssize)header_len, &error)) {
        printf("  model header: %s\n", error->message);
        g_clear_error(&error);
        goto out_free;
    }
    JsonObject *header = json_node_get_object(json_parser_get_root(parser));
    GList *names = json_object_get_members(header);
    for (GList *l = names; l != NULL; l = l->next) {
        const char *name = l->data;
        if (!g_str_has_prefix(name, prefix))
            continue;
        JsonObject *t = json_object_get_object_member(header, name);
        if (t == NULL || g_strcmp0(json_object_get_string_member(t, "dtype"), "F32") != 0)
            continue;
        JsonArray *span = json_object_get_array_member(t, "data_offsets");
        gsize begin = (gsize)json_array_get_int_element(span, 0);
        gsize end = (gsize)json_array_get_int_element(span, 1);
        if (end > size - data_start || begin > end)
            continue;
        float *values = (float *)(void *)(copy + data_start + begin);
        gsize n = (end - begin) / sizeof(float);
        for (gsize i = 0; i < n && (n_set <= 0 || i < (gsize)n_set); i++) {
            float v;
            memcpy(&v, &values[i], sizeof(v));
            v = n_set > 0 ? value : v * scale;
            memcpy(&values[i], &v, sizeof(v));
        }
        (*n_changed)++;
    }
    g_list_free(names);
    if (*n_changed > 0) {
        gchar *path = NULL;
        int fd = g_file_open_tmp("vd-poisoned-XXXXXX.safetensors", &path, &error);
        if (fd >= 0) {
            close(fd);
            if (g_file_set_contents(path, (const gchar *)copy, (gssize)size, &error))
                model = vd_model_load(path, &error);
            g_unlink(path);
        }
        if (model == NULL)
            printf("  poisoned model: %s\n", error ? error->message : "not written");
        g_clear_error(&error);
        g_free(path);
    }
out_free:
    g_object_unref(parser);
    g_free(copy);
    return model;
}

/* One frame on @ctx: TRUE when it ran (its count in *@n_nonfinite) or failed
 * with a VD_ERROR that says why; every detection finite, scored in [0, 1]
 * and inside the frame, as the CPU fuzz test requires. */
static gboolean poisoned_frame(vd_context *ctx, const vd_image *image, int *n_nonfinite,
                               int *n_detections, GString *notes)
{
    vd_result r = {0};
    GError *error = NULL;
    *n_nonfinite = -2;
    *n_detections = 0;
    if (!vd_detect(ctx, image, 1, &r, &error)) {
        gboolean said = error != NULL && error->domain == VD_ERROR && error->message[0];
        g_string_append_printf(notes, " [failed: %s]", error ? error->message : "no error");
        g_clear_error(&error);
        return said;
    }
    gboolean sane = TRUE;
    for (int d = 0; d < r.n_detections; d++) {
        const vd_detection *o = &r.detections[d];
        sane = sane && isfinite(o->score) && o->score >= 0 && o->score <= 1 && o->x1 >= 0 &&
               o->y1 >= 0 && o->x2 <= image->width * (1 + 1e-6) &&
               o->y2 <= image->height * (1 + 1e-6) && o->x1 <= o->x2 && o->y1 <= o->y2 &&
               o->label >= 1;
    }
    if (!sane)
        g_string_append(notes, " [a detection is not finite or outside the frame]");
    *n_nonfinite = r.n_nonfinite;
    *n_detections = r.n_detections;
    vd_result_clear(&r);
    return sane;
}

/* Weights poisoned as the CPU fuzz test does, and an fp16 overflow: no
 * crash, sane detections, and vd_result.n_nonfinite counted on the device
 * (the per-frame result already read back) where the CPU counts too. */
static void test_poisoned_weights(const char *model_path, const vd_image *image)
{
    gchar *bytes = NULL;
    gsize size = 0;
    if (!g_file_get_contents(model_path, &bytes, &size, NULL)) {
        check(FALSE, "poisoned weights", "cannot read %s", model_path);
        return;
    }
    enum { ZERO, POSITIVE, CPU_COUNT, ANY };
    static const struct {
        const char *what, *prefix;
        float scale;
        int n_set;
        float value;
        int cpu, fp32, fp16; /* expected count: ZERO, POSITIVE, CPU_COUNT or ANY */
    } cases[] = {
        /* fp32 holds activations of 1e6 times the usual; in fp16 the RPN conv's
         * output overflows to inf (0 there would mean the kernels saturate at
         * 65504 instead), and the head's sums of infinities are non-finite */
        {"RPN conv x1e6 (fp16 overflow)", "rpn.head.conv", 1e6f, 0, 0, ZERO, ZERO, POSITIVE},
        /* anchor 0's objectness NaN at every location: top-k lists full of NaN,
         * the same number on both backends in fp32 */
        {"NaN objectness of anchor 0", "rpn.head.cls_logits.weight", 1, 256, NAN, POSITIVE,
         CPU_COUNT, POSITIVE},
        /* no ReLU between the poison and the counted logits */
        {"NaN background logit", "roi_heads.box_predictor.cls_score.weight", 1, 100, NAN, POSITIVE,
         POSITIVE, POSITIVE},
        /* the fuzz test's kind: whether a ReLU lets NaN or -inf through is the
         * library's business, so only no crash and sane detections */
        {"NaN in the stem", "backbone.body.conv1.weight", 1, 1000, NAN, ANY, ANY, ANY},
    };
    for (guint c = 0; c < G_N_ELEMENTS(cases); c++) {
        int n_changed = 0;
        gchar *what = g_strdup_printf("poisoned weights: %s", cases[c].what);
        vd_model *model =
            poisoned_model((const guint8 *)bytes, size, cases[c].prefix, cases[c].scale,
                           cases[c].n_set, cases[c].value, &n_changed);
        if (model == NULL) {
            check(FALSE, what, "no poisoned model (%d tensors named %s...)", n_changed,
                  cases[c].prefix);
            g_free(what);
            continue;
        }
        vd_context *ctxs[3] = {new_context(model, VD_DEVICE_CPU, VD_PRECISION_FP32),
                               new_context(model, VD_DEVICE_CUDA, VD_PRECISION_FP32),
                               new_context(model, VD_DEVICE_CUDA, VD_PRECISION_FP16)};
        int counts[3] = {-2, -2, -2}, dets[3] = {0, 0, 0};
        gboolean ran[3] = {FALSE, FALSE, FALSE};
        GString *notes = g_string_new("");
        for (int k = 0; k < 3; k++)
            ran[k] = ctxs[k] != NULL && poisoned_frame(ctxs[k], image, &counts[k], &dets[k], notes);
        int expect[3] = {cases[c].cpu, cases[c].fp32, cases[c].fp16};
        gboolean ok = TRUE;
        for (int k = 0; k < 3; k++)
            ok = ok && ran[k] &&
                 (expect[k] == ZERO        ? counts[k] == 0
                  : expect[k] == POSITIVE  ? counts[k] > 0
                  : expect[k] == CPU_COUNT ? counts[k] == counts[0] && counts[0] > 0
                                           : TRUE /* ran, or failed saying why */);
        static const char *const names[] = {"zero", "> 0", "= CPU's", "any"};
        check(ok, what,
              "%d tensor(s) changed; non-finite values: CPU %d (expected %s), CUDA fp32 %d "
              "(expected %s), fp16 %d (expected %s); detections %d, %d, %d%s",
              n_changed, counts[0], names[expect[0]], counts[1], names[expect[1]], counts[2],
              names[expect[2]], dets[0], dets[1], dets[2], notes->str);
        g_string_free(notes, TRUE);
        for (int k = 0; k < 3; k++)
            vd_context_free(ctxs[k]);
        vd_model_unref(model);
        g_free(what);
    }
    g_free(bytes);
}

/* Takes (nearly) all free device memory; returns the blocks to free. */
static GPtrArray *exhaust_device_memory(size_t leave)
{
    GPtrArray *blocks = g_ptr_array_new();
    size_t chunk = (size_t)1 << 30;
    while (chunk >= ((size_t)1 << 20)) {
        size_t free_bytes = 0, total = 0;
        cudaMemGetInfo(&free_bytes, &total);
        void *p = NULL;
        if (free_bytes < leave + chunk || cudaMalloc(&p, chunk) != cudaSuccess) {
            cudaGetLastError();
            chunk /= 2;
            continue;
        }
        g_ptr_array_add(blocks, p);
    }
    return blocks;
}

static void release_device_memory(GPtrArray *blocks)
{
    for (guint i = 0; i < blocks->len; i++)
        cudaFree(g_ptr_array_index(blocks, i));
    g_ptr_array_unref(blocks);
}

/* Out of device memory is an error, never a crash, and the context recovers:
 * a context created beforehand must fail its first frame of a new size with
 * VD_ERROR_OUT_OF_MEMORY, and succeed once memory is back; a context created
 * while memory is exhausted fails cleanly. */
static void test_out_of_memory(vd_model *model, const vd_image *image)
{
    vd_context *ctx = new_context(model, VD_DEVICE_CUDA, VD_PRECISION_FP16);
    if (ctx == NULL) {
        check(FALSE, "out of memory", "no context");
        return;
    }
    GPtrArray *blocks = exhaust_device_memory((size_t)8 << 20);
    vd_result r = {0};
    GError *error = NULL;
    gboolean ok = vd_detect(ctx, image, 1, &r, &error);
    check(!ok && g_error_matches(error, VD_ERROR, VD_ERROR_OUT_OF_MEMORY),
          "out of memory at the first frame", "%s", ok ? "detection succeeded?" : error->message);
    g_clear_error(&error);
    vd_result_clear(&r);

    vd_context_params p = vd_context_default_params();
    p.device = VD_DEVICE_CUDA;
    vd_context *other = vd_context_new(model, &p, &error);
    check(other == NULL && error != NULL, "out of memory at creation", "%s",
          other != NULL ? "created?" : error->message);
    g_clear_error(&error);
    vd_context_free(other);

    release_device_memory(blocks);
    ok = vd_detect(ctx, image, 1, &r, &error);
    check(ok, "recovery after out of memory", "%s",
          ok ? "the next frame succeeds once memory is back" : error->message);
    g_clear_error(&error);
    vd_result_clear(&r);
    vd_context_free(ctx);
}

static double median_ms(vd_context *ctx, const vd_image *image, int n)
{
    double *t = g_new(double, n);
    vd_result r = {0};
    for (int i = 0; i < n; i++) {
        gint64 t0 = g_get_monotonic_time();
        if (!detect(ctx, image, &r))
            t[i] = INFINITY;
        else
            t[i] = (double)(g_get_monotonic_time() - t0) / 1000.0;
        vd_result_clear(&r);
    }
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && t[j - 1] > t[j]; j--) {
            double x = t[j];
            t[j] = t[j - 1];
            t[j - 1] = x;
        }
    double m = t[n / 2];
    g_free(t);
    return m;
}

/* ------------------------------------------------------------------------ */
/* Batches (issue 11, item 6)                                                */

/* Variant @k of @first, same size: mirrored (none, horizontal, vertical, both)
 * and, from k = 4 on, its columns rotated by k / 8 of the width. */
static uint8_t *batch_variant(const vd_image *rgb, int k)
{
    int w = rgb->width, h = rgb->height, shift = k >= 4 ? (int)((long)w * k / 8) % w : 0;
    gboolean hmirror = (k & 1) != 0, vmirror = (k & 2) != 0;
    uint8_t *out = g_malloc((size_t)w * h * 3);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            int sx = (x + shift) % w, sy = y;
            sx = hmirror ? w - 1 - sx : sx;
            sy = vmirror ? h - 1 - sy : sy;
            memcpy(out + ((size_t)y * w + x) * 3,
                   rgb->planes[0] + (size_t)sy * rgb->strides[0] + (size_t)sx * 3, 3);
        }
    return out;
}

static gboolean detect_n(vd_context *ctx, const vd_image *images, int n, vd_result *results,
                         GError **error)
{
    memset(results, 0, sizeof(*results) * (size_t)n);
    return vd_detect(ctx, images, n, results, error);
}

static void clear_n(vd_result *results, int n)
{
    for (int i = 0; i < n; i++)
        vd_result_clear(&results[i]);
}

/* A batch of @n different frames of one size on @ctx (@label: fp16 or fp32):
 *  - every image's detections close to that image alone (batch 1, eager) on
 *    the same context (results_close: the fp32 or fp16 criterion, bit
 *    identity reported): the eager batch (first), then the batch captured and
 *    replayed from its graph;
 *  - exactly one host synchronisation per batch over 3 replayed batches;
 *  - for @n >= 3, a partial batch of @n - 1 has a graph of its own (eager,
 *    then replayed) and the full batch's graph stays (replayed after it);
 *  - with @cpu (fp32): each image within the CPU-vs-CUDA criteria of the
 *    per-frame check (label, IoU >= 0.99, |score diff| <= 1e-3, >= 97%
 *    matched, counts within 3%). */
static void test_batch(vd_context *ctx, vd_context *cpu, const vd_image *first, int n,
                       const char *label)
{
    gboolean fp16 = vd_context_precision(ctx) == VD_PRECISION_FP16;
    const close_criterion *crit = batch_criterion(fp16);
    gboolean judged = batch_close_judged(fp16);
    enum { MAX_N = 16 };
    uint8_t *pixels[MAX_N] = {NULL};
    vd_image images[MAX_N];
    vd_result single[MAX_N], batch[MAX_N];
    GError *error = NULL;
    gchar *what = NULL;
    memset(single, 0, sizeof(single));
    memset(batch, 0, sizeof(batch));
    g_assert(n <= MAX_N);
    for (int i = 0; i < n; i++) {
        pixels[i] = batch_variant(first, i);
        images[i] = vd_image_rgb(pixels[i], first->width, first->height);
    }

    /* the references: image by image, eager */
    vd_cuda_context_set_graphs(ctx, FALSE);
    for (int i = 0; i < n; i++)
        if (!detect(ctx, &images[i], &single[i])) {
            check(FALSE, "batch references", "batch-1 detection failed");
            goto out_free;
        }

    vd_cuda_context_set_graphs(ctx, TRUE);
    guint64 replays0 = vd_cuda_context_graph_replays(ctx);
    for (int round = 0; round < 2; round++) {
        /* round 0: the batch plan's first batch, eager; round 1: captured, replayed */
        gboolean ok = detect_n(ctx, images, n, batch, &error);
        gboolean replayed = vd_cuda_context_graph_replayed(ctx);
        int identical = 0, close = 0, dets = 0;
        GString *diff = g_string_new("");
        for (int i = 0; ok && i < n; i++) {
            int m = 0;
            gboolean c = results_close(&single[i], &batch[i], crit, &m);
            dets += batch[i].n_detections;
            identical += results_identical(&single[i], &batch[i]);
            close += c;
            if (!c)
                g_string_append_printf(diff, "; image %d: %d vs %d detections, %d matched", i,
                                       batch[i].n_detections, single[i].n_detections, m);
        }
        what = g_strdup_printf("batch %d %s %s ~ batch 1", n, label,
                               round == 0 ? "eager" : "graph");
        check(ok && (close == n || !judged) && (round == 0 || replayed), what,
              "%s%d of %d images' detections close to the image alone (%s)%s (%d detections in "
              "all)%s%s",
              ok ? "" : "vd_detect failed: ", close, n, criterion_text(crit),
              judged ? "" : ", information only for random weights (--trained judges it)", dets,
              round == 0 ? "" : (replayed ? ", replayed from the batch graph" : ", NOT replayed"),
              diff->str);
        if (ok)
            printf("  info %s: %d of %d images bit-identical to the image alone\n", what,
                   identical, n);
        if (!ok) {
            fprintf(stderr, "batch: %s\n", error ? error->message : "?");
            g_clear_error(&error);
        }
        g_free(what);
        g_string_free(diff, TRUE);
        if (ok && cpu != NULL && round == 0) {
            int worst_m = 0, worst_n = 0, worst_c = 0;
            double worst = 2;
            for (int i = 0; i < n; i++) {
                vd_result rc = {0};
                if (!detect(cpu, &images[i], &rc))
                    break;
                int m = match(&rc, &batch[i], 0.99, 1e-3);
                double frac = rc.n_detections ? (double)m / rc.n_detections : 1.0;
                if (abs(batch[i].n_detections - rc.n_detections) >
                    (int)ceil(0.03 * rc.n_detections))
                    frac = -1; /* counts beyond 3% */
                if (frac < worst) {
                    worst = frac;
                    worst_m = m;
                    worst_n = rc.n_detections;
                    worst_c = batch[i].n_detections;
                }
                vd_result_clear(&rc);
            }
            what = g_strdup_printf("batch %d %s vs CPU", n, label);
            check(worst >= 0.97, what,
                  "worst image: %d of %d CPU detections matched (label, IoU >= 0.99, |score diff| "
                  "<= 1e-3), CUDA batch has %d",
                  worst_m, worst_n, worst_c);
            g_free(what);
        }
        clear_n(batch, n);
        if (!ok)
            goto out_free;
    }
    {
        const int rounds = 3;
        guint64 before = vd_cuda_context_sync_count(ctx);
        gboolean ok = TRUE, replayed = TRUE;
        for (int r = 0; r < rounds && ok; r++) {
            ok = detect_n(ctx, images, n, batch, &error);
            replayed = replayed && vd_cuda_context_graph_replayed(ctx);
            clear_n(batch, n);
        }
        guint64 syncs = vd_cuda_context_sync_count(ctx) - before;
        what = g_strdup_printf("batch %d %s sync count", n, label);
        check(ok && syncs == (guint64)rounds && replayed, what,
              "%" G_GUINT64_FORMAT " host synchronisations in %d batches of %d frames (1 per "
              "batch expected)%s; %" G_GUINT64_FORMAT " graph replays since the references",
              syncs, rounds, n, replayed ? ", every batch replayed" : ", NOT every batch replayed",
              vd_cuda_context_graph_replays(ctx) - replays0);
        g_free(what);
        if (!ok)
            g_clear_error(&error);
    }
    if (n >= 3) {
        /* a partial batch (n - 1 images) has a graph of its own: the first runs
         * eagerly, the second is captured, and the full batch's graph stays */
        const int sizes[3] = {n - 1, n - 1, n};
        const gboolean want_replayed[3] = {FALSE, TRUE, TRUE};
        GString *got = g_string_new("");
        gboolean ok = TRUE, as_expected = TRUE;
        int identical = 0, close = 0, total = 0;
        for (int r = 0; r < 3 && ok; r++) {
            ok = detect_n(ctx, images, sizes[r], batch, &error);
            gboolean replayed = ok && vd_cuda_context_graph_replayed(ctx);
            as_expected = as_expected && replayed == want_replayed[r];
            for (int i = 0; ok && i < sizes[r]; i++, total++) {
                identical += results_identical(&single[i], &batch[i]);
                close += results_close(&single[i], &batch[i], crit, NULL);
            }
            g_string_append_printf(got, "%s%d: %s", r ? ", " : "", sizes[r],
                                   !ok        ? "failed"
                                   : replayed ? "replayed"
                                              : "eager");
            clear_n(batch, sizes[r]);
        }
        what = g_strdup_printf("batch %d %s after partial batches of %d", n, label, n - 1);
        check(ok && as_expected && (close == total || !judged), what,
              "%s (expected %d: eager, %d: replayed, %d: replayed from its own graph); %d of %d "
              "images' detections close to the image alone (%s)%s",
              got->str, n - 1, n - 1, n, close, total, criterion_text(crit),
              judged ? "" : ", information only for random weights (--trained judges it)");
        if (ok)
            printf("  info %s: %d of %d images bit-identical to the image alone\n", what,
                   identical, total);
        g_free(what);
        g_string_free(got, TRUE);
        if (!ok) {
            fprintf(stderr, "partial batch: %s\n", error ? error->message : "?");
            g_clear_error(&error);
        }
    }
out_free:
    vd_cuda_context_set_graphs(ctx, FALSE);
    clear_n(single, n);
    for (int i = 0; i < n; i++)
        g_free(pixels[i]);
}

/* A batch of alike frames with one invalid image (a NULL plane) fails with
 * VD_ERROR_INVALID_ARGUMENT naming the image, and the context runs the
 * batch again once the image is fixed, with the same detections as before. */
static void test_batch_invalid(vd_context *ctx, const vd_image *first)
{
    enum { N = 4 };
    uint8_t *pixels[N];
    vd_image images[N];
    vd_result before[N], after[N], failed[N];
    GError *error = NULL;
    for (int i = 0; i < N; i++) {
        pixels[i] = batch_variant(first, i);
        images[i] = vd_image_rgb(pixels[i], first->width, first->height);
    }
    gboolean ok_before = detect_n(ctx, images, N, before, NULL);
    vd_image bad = images[2];
    images[2].planes[0] = NULL;
    gboolean failed_ok = detect_n(ctx, images, N, failed, &error);
    gboolean cleared = TRUE;
    for (int i = 0; i < N; i++)
        cleared = cleared && failed[i].detections == NULL && failed[i].n_detections == 0;
    gboolean named = error != NULL && g_error_matches(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT) &&
                     strstr(error->message, "image 2") != NULL;
    check(!failed_ok && named && cleared, "batch with an invalid image", "%s: %s%s",
          failed_ok ? "succeeded" : "failed", error ? error->message : "no error",
          cleared ? ", no results left behind" : ", results left behind");
    g_clear_error(&error);
    clear_n(failed, N);
    images[2] = bad;
    gboolean ok_after = detect_n(ctx, images, N, after, NULL);
    int same = 0;
    for (int i = 0; ok_before && ok_after && i < N; i++)
        same += results_identical(&before[i], &after[i]);
    check(ok_before && ok_after && same == N, "batch after an invalid image",
          "%d of %d images with the detections of the batch before the failure", same, N);
    clear_n(before, N);
    clear_n(after, N);
    for (int i = 0; i < N; i++)
        g_free(pixels[i]);
}

/* The batch plan shrinks (issue 37, item 4): after a batch of 8, the plan
 * has 8 slots; VD_BATCH_SHRINK_AFTER batches of two in a row make it 2, and
 * those batches' detections stay close to each image alone (results_close),
 * the last ones replayed from the new plan's graph. */
static void test_batch_shrink(vd_context *ctx, const vd_image *first)
{
    enum { BIG = 8 };
    uint8_t *pixels[BIG];
    vd_image images[BIG];
    vd_result alone[2] = {{0}, {0}}, batch[BIG];
    GError *error = NULL;
    gboolean fp16 = vd_context_precision(ctx) == VD_PRECISION_FP16;
    for (int i = 0; i < BIG; i++) {
        pixels[i] = batch_variant(first, i);
        images[i] = vd_image_rgb(pixels[i], first->width, first->height);
    }
    vd_cuda_context_set_graphs(ctx, FALSE);
    gboolean ok = detect(ctx, &images[0], &alone[0]) && detect(ctx, &images[1], &alone[1]);
    vd_cuda_context_set_graphs(ctx, TRUE);
    ok = ok && detect_n(ctx, images, BIG, batch, &error);
    if (ok)
        clear_n(batch, BIG);
    int slots_big = vd_cuda_context_batch_slots(ctx), slots_before_last = 0, close = 0;
    gboolean replayed = FALSE;
    for (int b = 0; b < VD_BATCH_SHRINK_AFTER + 2 && ok; b++) {
        if (b == VD_BATCH_SHRINK_AFTER - 1)
            slots_before_last = vd_cuda_context_batch_slots(ctx);
        ok = detect_n(ctx, images, 2, batch, &error);
        if (!ok)
            break;
        replayed = vd_cuda_context_graph_replayed(ctx);
        close += results_close(&alone[0], &batch[0], batch_criterion(fp16), NULL) &&
                 results_close(&alone[1], &batch[1], batch_criterion(fp16), NULL);
        clear_n(batch, 2);
    }
    int slots_after = vd_cuda_context_batch_slots(ctx);
    check(ok && slots_big == BIG && slots_before_last == BIG && slots_after == 2 && replayed &&
              (close == VD_BATCH_SHRINK_AFTER + 2 || !batch_close_judged(fp16)),
          "batch plan shrinks",
          "%s; %d slots after a batch of %d, %d after %d batches of 2, %d after %d (expected %d, "
          "%d, 2); the last batch %s; %d of %d batches close to the images alone",
          ok ? "ran" : (error ? error->message : "failed"), slots_big, BIG, slots_before_last,
          VD_BATCH_SHRINK_AFTER - 1, slots_after, VD_BATCH_SHRINK_AFTER + 2, BIG, BIG,
          replayed ? "replayed" : "NOT replayed", close, VD_BATCH_SHRINK_AFTER + 2);
    g_clear_error(&error);
    vd_cuda_context_set_graphs(ctx, FALSE);
    clear_n(alone, 2);
    for (int i = 0; i < BIG; i++)
        g_free(pixels[i]);
}

/* Each graph backs off on its own (issue 37, item 8): a failed capture of the
 * single-image graph leaves it RETRYING with one eager frame to wait, while
 * batches of two meanwhile replay their own graph (ACTIVE: the run status is
 * the last batch's graph's) and do not use up the single image's back-off
 * (which shared counters did: the batches ran eagerly, using it up). Then
 * the single image waits its one frame (RETRYING, 0 left) and is replayed
 * again (ACTIVE). */
static void test_graph_backoff_per_graph(vd_context *ctx, const vd_image *first)
{
    uint8_t *mirror = batch_variant(first, 1);
    vd_image images[2] = {*first, vd_image_rgb(mirror, first->width, first->height)};
    vd_result r = {0}, batch[2];
    vd_run_status after_fail, after_batches, after_single[2];
    GError *error = NULL;
    gboolean ok = TRUE, batch_replayed = TRUE, single_replayed[2] = {FALSE, FALSE};
    vd_cuda_context_set_graphs(ctx, TRUE);
    /* the single image's graph and the batch of two's plan, captured first */
    for (int i = 0; i < 2 && ok; i++) {
        ok = detect(ctx, first, &r) && detect_n(ctx, images, 2, batch, &error);
        vd_result_clear(&r);
        if (ok)
            clear_n(batch, 2);
    }
    /* the next capture (the single image's) fails */
    vd_cuda_context_fail_captures(ctx, 1);
    ok = ok && detect(ctx, first, &r);
    vd_result_clear(&r);
    vd_context_run_status(ctx, &after_fail);
    for (int i = 0; i < 3 && ok; i++) {
        /* every one: the first captures at once (the single image's wait is
         * not the batch graph's) and is replayed */
        ok = detect_n(ctx, images, 2, batch, &error);
        batch_replayed = batch_replayed && ok && vd_cuda_context_graph_replayed(ctx);
        if (ok)
            clear_n(batch, 2);
    }
    vd_context_run_status(ctx, &after_batches);
    memset(after_single, 0, sizeof(after_single));
    for (int i = 0; i < 2 && ok; i++) {
        ok = detect(ctx, first, &r);
        single_replayed[i] = ok && vd_cuda_context_graph_replayed(ctx);
        vd_context_run_status(ctx, &after_single[i]);
        vd_result_clear(&r);
    }
    check(ok && after_fail.graphs == VD_GRAPHS_RETRYING && after_fail.graph_retry_frames == 1 &&
              batch_replayed && after_batches.graphs == VD_GRAPHS_ACTIVE && !single_replayed[0] &&
              after_single[0].graphs == VD_GRAPHS_RETRYING &&
              after_single[0].graph_retry_frames == 0 && single_replayed[1] &&
              after_single[1].graphs == VD_GRAPHS_ACTIVE,
          "graph back-off per graph",
          "%s after the single image's failed capture: %s, %d frame(s) to wait; batches of two "
          "%s, %s (expected all 3 replayed, active); the single image %s (%s, %d to wait) then %s "
          "(%s) (expected eager (retrying, 0), then replayed (active))",
          ok ? "ran" : "FAILED", vd_graphs_state_name(after_fail.graphs),
          after_fail.graph_retry_frames, batch_replayed ? "replayed" : "NOT all replayed",
          vd_graphs_state_name(after_batches.graphs), single_replayed[0] ? "REPLAYED" : "eager",
          vd_graphs_state_name(after_single[0].graphs), after_single[0].graph_retry_frames,
          single_replayed[1] ? "replayed" : "NOT replayed",
          vd_graphs_state_name(after_single[1].graphs));
    if (error != NULL) {
        fprintf(stderr, "graph back-off per graph: %s\n", error->message);
        g_clear_error(&error);
    }
    vd_cuda_context_fail_captures(ctx, 0);
    vd_cuda_context_set_graphs(ctx, FALSE);
    g_free(mirror);
}

/* The detection NMS over every candidate (issue 37, item 3): at score
 * threshold 0 each of R proposals has K - 1 candidates (90000 for 1000 x 90),
 * where the NMS used to look at the best 32768 only and return fewer
 * detections than the CPU, which runs over all. With max_detections above
 * the candidate count nothing else limits the result: the counts must agree
 * within 3% and >= 90% of the CPU's detections match (label, IoU >= 0.99,
 * |score diff| <= 1e-3). 90%, not the 97% of the per-frame check: at
 * threshold 0 tens of thousands of near-equal low scores make the greedy
 * suppression order sensitive to the last bits in which cuDNN and oneDNN
 * differ; a cap dropping candidates loses a third or more. */
static void test_score_threshold_zero(vd_model *model, vd_context *cpu, vd_context *f32,
                                      const vd_image *image)
{
    const vd_config *cfg = &model->config;
    int max_det = MAX(cfg->rpn_post_nms_top_n, 1) * MAX(cfg->num_classes - 1, 1) + 1;
    vd_result rc = {0}, r32 = {0};
    vd_context_set_thresholds(cpu, 0.0f, -1.0f, max_det);
    vd_context_set_thresholds(f32, 0.0f, -1.0f, max_det);
    gint64 t0 = g_get_monotonic_time();
    gboolean okc = detect(cpu, image, &rc);
    gint64 t1 = g_get_monotonic_time();
    gboolean ok32 = okc && detect(f32, image, &r32);
    int n = rc.n_detections, m = ok32 ? match(&rc, &r32, 0.99, 1e-3) : 0;
    vd_cuda_memory mem = vd_cuda_context_memory(f32);
    check(okc && ok32 && n > 0 && m >= 0.90 * n &&
              abs(r32.n_detections - n) <= (int)ceil(0.03 * n),
          "detections at score threshold 0 vs CPU",
          "%d of %d CPU detections matched (label, IoU >= 0.99, |score diff| <= 1e-3), CUDA has "
          "%d (max_detections %d; CPU %.1f s; detection NMS workspace %.1f MiB)",
          m, n, r32.n_detections, max_det, (t1 - t0) / 1e6, mem.box_nms_workspace / 1048576.0);
    vd_result_clear(&rc);
    vd_result_clear(&r32);
    vd_context_set_thresholds(cpu, -1.0f, -1.0f, 0);
    vd_context_set_thresholds(f32, -1.0f, -1.0f, 0);
}

/* ------------------------------------------------------------------------ */
/* Mask R-CNN (--masks)                                                      */

/* CUDA fp32 against the CPU: the CPU parity test's criteria
 * (tests/parity/parity_common.py), which hold for the same reason here. The
 * 28x28 probabilities come from RoIAlign on features that agree to ~1e-3
 * (relative, the FPN check above), five convolutions summed in other orders
 * (cuDNN against oneDNN, as oneDNN against torch there) and the sigmoid
 * (slope <= 1/4): parity measured 6.7e-4 (v1 head) and 2.4e-3 (v2 head,
 * whose folded norms amplify) against torchvision; tolerance 5e-3. A wrong
 * channel, a transposed deconvolution tap or a misplaced RoI moves them by
 * O(0.1..1). The pasted masks, thresholded at 0.5: IoU >= 0.99 for all
 * matched detections but ceil(3%) (a pixel near 0.5 decides the IoU of a
 * small mask by more than 1%). */
#define MASK_PROB_TOL 5e-3
#define MASK_IOU 0.99
#define MASK_LOW_IOU_FRACTION 0.03
/* CUDA fp16 against the CPU, on the detections whose boxes still agree to
 * IoU >= 0.99 (same label, |score diff| <= 0.02: the RoI, and so the 14x14
 * sampling grid, within ~1% of the box): fp16 storage (2^-11 relative) of
 * every activation of ~60 backbone and FPN layers and the 7 of the mask head
 * moves a probability by up to ~1e-2 where a random calibrated model is
 * sensitive; with logits of std 3 only the pixels within that of 0.5 (about
 * 1% of a mask's 28x28, most of them on its border) can flip, so a mask of
 * >= 100 pixels keeps IoU >= 0.9; all but ceil(10%) of the pairs must. The
 * probabilities' largest difference is reported, not checked. */
#define MASK_FP16_BOX_IOU 0.99
#define MASK_FP16_IOU 0.9
#define MASK_FP16_LOW_IOU_FRACTION 0.10

/* Whether pixel (x, y) of the frame is in @d's mask at p >= 0.5. */
static gboolean mask_on(const vd_detection *d, int x, int y)
{
    if (d->mask == NULL || x < d->mask_x || y < d->mask_y || x >= d->mask_x + d->mask_width ||
        y >= d->mask_y + d->mask_height)
        return FALSE;
    return d->mask[(size_t)(y - d->mask_y) * d->mask_width + (x - d->mask_x)] >= 128;
}

/* IoU of two detections' masks thresholded at 0.5, over the frame (1 when
 * both are empty). */
static double mask_iou(const vd_detection *a, const vd_detection *b)
{
    int x0 = MIN(a->mask_x, b->mask_x), y0 = MIN(a->mask_y, b->mask_y);
    int x1 = MAX(a->mask_x + a->mask_width, b->mask_x + b->mask_width);
    int y1 = MAX(a->mask_y + a->mask_height, b->mask_y + b->mask_height);
    long inter = 0, uni = 0;
    for (int y = y0; y < y1; y++)
        for (int x = x0; x < x1; x++) {
            gboolean in_a = mask_on(a, x, y), in_b = mask_on(b, x, y);
            inter += in_a && in_b;
            uni += in_a || in_b;
        }
    return uni == 0 ? 1.0 : (double)inter / uni;
}

/* Every detection of @r carries a mask with a rectangle inside the frame. */
static int masks_missing(const vd_result *r)
{
    int bad = 0;
    for (int i = 0; i < r->n_detections; i++) {
        const vd_detection *d = &r->detections[i];
        bad += d->mask == NULL || d->mask_width <= 0 || d->mask_height <= 0 || d->mask_x < 0 ||
               d->mask_y < 0 || d->mask_x + d->mask_width > r->width ||
               d->mask_y + d->mask_height > r->height;
    }
    return bad;
}

/* The same detections (every field) and the same mask bytes. */
static gboolean masks_identical(const vd_result *a, const vd_result *b)
{
    if (a->n_detections != b->n_detections)
        return FALSE;
    for (int i = 0; i < a->n_detections; i++) {
        const vd_detection *p = &a->detections[i], *q = &b->detections[i];
        if (memcmp(&p->x1, &q->x1, 5 * sizeof(float)) != 0 || p->label != q->label ||
            p->mask_x != q->mask_x || p->mask_y != q->mask_y || p->mask_width != q->mask_width ||
            p->mask_height != q->mask_height || (p->mask == NULL) != (q->mask == NULL) ||
            (p->mask != NULL &&
             memcmp(p->mask, q->mask, (size_t)p->mask_width * p->mask_height) != 0))
            return FALSE;
    }
    return TRUE;
}

/* A batch's image against the image alone with masks: the detections close
 * (results_close) and the pasted masks of the matched pairs at IoU >=
 * MASK_IOU (fp16: MASK_FP16_IOU) for all but ceil(MASK_LOW_IOU_FRACTION
 * (fp16: MASK_FP16_LOW_IOU_FRACTION) of them), the per-frame criteria against
 * the CPU: a batch may sum in another order (see results_close). */
static gboolean batch_masks_close(const vd_result *alone, const vd_result *batch, gboolean fp16)
{
    const close_criterion *c = batch_criterion(fp16);
    int *pair = g_new(int, MAX(alone->n_detections, 1));
    int matched = 0, low = 0;
    gboolean close = results_close(alone, batch, c, NULL);
    match_pairs(alone, batch, c->iou_min, c->score_tol, pair);
    for (int i = 0; i < alone->n_detections; i++) {
        if (pair[i] < 0)
            continue;
        matched++;
        low += mask_iou(&alone->detections[i], &batch->detections[pair[i]]) <
               (fp16 ? MASK_FP16_IOU : MASK_IOU);
    }
    g_free(pair);
    return close &&
           low <= (int)ceil((fp16 ? MASK_FP16_LOW_IOU_FRACTION : MASK_LOW_IOU_FRACTION) * matched);
}

/* @ours (@label) against the CPU's @ref on the detections matched with box
 * IoU >= @box_iou, |score diff| <= @score_tol: the observed 28x28
 * probabilities ("mask_probs", checked against @prob_tol unless it is
 * negative) and the pasted masks' IoU (>= @min_iou for all but
 * ceil(@low_fraction * matched)). @min_pairs: fewer matched pairs are
 * reported, not judged. */
static void compare_masks(const char *label, const vd_result *ref, GHashTable *ref_t,
                          const vd_result *ours, GHashTable *our_t, double box_iou,
                          double score_tol, double prob_tol, double min_iou, double low_fraction,
                          int min_pairs)
{
    int *pair = g_new(int, MAX(ref->n_detections, 1));
    int matched = match_pairs(ref, ours, box_iou, score_tol, pair);
    const tensor *rp = g_hash_table_lookup(ref_t, "mask_probs");
    const tensor *op = g_hash_table_lookup(our_t, "mask_probs");
    gchar *what = g_strdup_printf("%s masks present", label);
    int missing = masks_missing(ours);
    check(missing == 0, what, "%d of %d detections carry a mask inside the frame",
          ours->n_detections - missing, ours->n_detections);
    g_free(what);
    what = g_strdup_printf("%s mask_probs observed", label);
    gboolean probs_ok = rp != NULL && op != NULL && rp->ndim == 3 && op->ndim == 3 &&
                        rp->shape[0] == ref->n_detections && op->shape[0] == ours->n_detections &&
                        rp->shape[1] == op->shape[1] && rp->shape[2] == op->shape[2];
    check(probs_ok, what, "[D, M, M] for the CPU's %d and ours %d detections: %s",
          ref->n_detections, ours->n_detections, probs_ok ? "yes" : "MISSING or misshapen");
    g_free(what);
    if (matched < min_pairs) {
        printf("  info %s masks: %d pairs of detections matched (box IoU >= %.2f, |score diff| <= "
               "%g), fewer than %d: not judged\n",
               label, matched, box_iou, score_tol, min_pairs);
        g_free(pair);
        return;
    }
    double worst_prob = 0.0, worst_iou = 1.0, sum_iou = 0.0;
    int n_low = 0;
    for (int i = 0; i < ref->n_detections; i++) {
        int j = pair[i];
        if (j < 0)
            continue;
        if (probs_ok) {
            size_t mm = (size_t)rp->shape[1] * rp->shape[2];
            const float *a = rp->data + (size_t)i * mm, *b = op->data + (size_t)j * mm;
            for (size_t k = 0; k < mm; k++)
                worst_prob = MAX(worst_prob, fabs((double)a[k] - b[k]));
        }
        double v = mask_iou(&ref->detections[i], &ours->detections[j]);
        worst_iou = MIN(worst_iou, v);
        sum_iou += v;
        n_low += v < min_iou;
    }
    int allowed = (int)ceil(low_fraction * matched);
    if (prob_tol >= 0) {
        what = g_strdup_printf("%s mask probabilities vs CPU", label);
        check(probs_ok && worst_prob <= prob_tol, what,
              "28x28 probabilities of %d matched detections: max|diff| %.3g (tol %g)", matched,
              worst_prob, prob_tol);
        g_free(what);
    } else {
        printf("  info %s mask probabilities vs CPU: max|diff| %.3g over %d matched detections\n",
               label, worst_prob, matched);
    }
    what = g_strdup_printf("%s masks vs CPU", label);
    check(n_low <= allowed, what,
          "pasted masks at 0.5 of %d matched detections: %d with IoU < %.2f (at most %d), smallest "
          "%.4f, mean %.4f",
          matched, n_low, min_iou, allowed, worst_iou, sum_iou / matched);
    g_free(what);
    g_free(pair);
}

/* Graph replay and batches of a mask model: detections and mask bytes
 * replayed from the graph identical to eager; a batch of two different frames
 * close, image by image, to each alone (batch_masks_close; bit identity
 * reported), with one host synchronisation per batch. */
static void test_mask_graph_and_batch(vd_context *ctx, const vd_image *image, const char *label)
{
    vd_result eager = {0}, replay = {0};
    vd_cuda_context_set_graphs(ctx, FALSE);
    gboolean ok = detect(ctx, image, &eager);
    vd_cuda_context_set_graphs(ctx, TRUE);
    for (int i = 0; i < 3 && ok; i++) {
        vd_result_clear(&replay);
        ok = detect(ctx, image, &replay);
    }
    gboolean replayed = ok && vd_cuda_context_graph_replayed(ctx);
    gchar *what = g_strdup_printf("%s mask graph replay", label);
    check(ok && replayed && masks_identical(&eager, &replay), what,
          "%s; %d detections eager, %d replayed; detections and mask bytes %s",
          replayed ? "replayed" : "NOT replayed", eager.n_detections, replay.n_detections,
          ok && masks_identical(&eager, &replay) ? "identical" : "DIFFERENT");
    g_free(what);
    vd_result_clear(&replay);

    /* a batch of two: the frame and its mirror image */
    uint8_t *mirror = batch_variant(image, 1);
    vd_image images[2] = {*image, vd_image_rgb(mirror, image->width, image->height)};
    vd_result alone[2] = {{0}, {0}}, batch[2];
    GError *error = NULL;
    gboolean fp16 = vd_context_precision(ctx) == VD_PRECISION_FP16;
    int bit_identical = 0;
    vd_cuda_context_set_graphs(ctx, FALSE);
    ok = detect(ctx, &images[0], &alone[0]) && detect(ctx, &images[1], &alone[1]);
    gboolean same = ok;
    guint64 syncs = 0;
    const int n_batches = 3;
    vd_cuda_context_set_graphs(ctx, TRUE);
    for (int b = 0; b < n_batches && ok; b++) {
        guint64 before = vd_cuda_context_sync_count(ctx);
        ok = detect_n(ctx, images, 2, batch, &error);
        if (!ok) {
            fprintf(stderr, "batch: %s\n", error->message);
            g_clear_error(&error);
            break;
        }
        if (b == n_batches - 1)
            syncs = vd_cuda_context_sync_count(ctx) - before;
        for (int i = 0; i < 2; i++) {
            same = same && batch_masks_close(&alone[i], &batch[i], fp16);
            bit_identical += masks_identical(&alone[i], &batch[i]);
        }
        clear_n(batch, 2);
    }
    replayed = ok && vd_cuda_context_graph_replayed(ctx);
    what = g_strdup_printf("%s mask batch of 2", label);
    check(ok && (same || !batch_close_judged(fp16)) && syncs == 1 && replayed, what,
          "%d and %d detections alone; eager then replayed batches %s, each image's detections "
          "and masks %s (%s; matched masks IoU >= %.2f but ceil(%.0f%%))%s; %" G_GUINT64_FORMAT
          " host synchronisation(s) for the last batch",
          alone[0].n_detections, alone[1].n_detections, replayed ? "replayed" : "NOT replayed",
          same ? "close to alone" : "NOT close to alone", criterion_text(batch_criterion(fp16)),
          fp16 ? MASK_FP16_IOU : MASK_IOU,
          100 * (fp16 ? MASK_FP16_LOW_IOU_FRACTION : MASK_LOW_IOU_FRACTION),
          batch_close_judged(fp16) ? "" : ", information only for random weights", syncs);
    printf("  info %s: %d of %d images bit-identical (detections and mask bytes) to alone\n",
           what, bit_identical, 2 * n_batches);
    g_free(what);
    vd_cuda_context_set_graphs(ctx, FALSE);
    clear_n(alone, 2);
    vd_result_clear(&eager);
    g_free(mirror);
}

/* The stages of the last eager frame include mask_head and paste_masks. */
static void test_mask_stages(vd_context *ctx, const vd_image *image)
{
    vd_result r = {0};
    vd_cuda_context_set_graphs(ctx, FALSE);
    gboolean ok = detect(ctx, image, &r);
    vd_stage_time times[16];
    int n = ok ? vd_context_stage_times(ctx, times, 16) : 0;
    double head = -1, paste = -1;
    for (int i = 0; i < n; i++) {
        if (strcmp(times[i].name, "mask_head") == 0)
            head = times[i].ms;
        if (strcmp(times[i].name, "paste_masks") == 0)
            paste = times[i].ms;
    }
    check(head >= 0 && paste >= 0, "mask stages", "mask_head %.3f ms (device), paste_masks %.3f ms "
          "(host) for %d detections", head, paste, r.n_detections);
    vd_result_clear(&r);
}

/* The CPU fp32, CUDA fp32 and CUDA fp16 contexts of the --masks and --core runs:
 * all three, or none and a failed check "@what contexts" naming which did not open. */
static gboolean open_run_contexts(vd_model *model, const char *what, vd_context **cpu,
                                  vd_context **f32, vd_context **f16)
{
    *cpu = new_context(model, VD_DEVICE_CPU, VD_PRECISION_FP32);
    *f32 = new_context(model, VD_DEVICE_CUDA, VD_PRECISION_FP32);
    *f16 = new_context(model, VD_DEVICE_CUDA, VD_PRECISION_FP16);
    gboolean ok = *cpu != NULL && *f32 != NULL && *f16 != NULL;
    char *name = g_strdup_printf("%s contexts", what);
    check(ok, name, "CPU fp32 %s, CUDA fp32 %s, CUDA fp16 %s", *cpu ? "ok" : "FAILED",
          *f32 ? "ok" : "FAILED", *f16 ? "ok" : "FAILED");
    g_free(name);
    if (!ok) {
        vd_context_free(*cpu);
        vd_context_free(*f32);
        vd_context_free(*f16);
        *cpu = *f32 = *f16 = NULL;
    }
    return ok;
}

/* One frame of a --masks or --core run: the results of the CPU fp32, CUDA fp32
 * and CUDA fp16 contexts and the tensors each observed (fp16's only in the
 * --masks run, NULL otherwise). */
typedef struct {
    vd_result rc, r32, r16;
    GHashTable *cpu_t, *t32, *t16;
} run_frame;

static GHashTable *new_tensor_table(void)
{
    return g_hash_table_new_full(g_str_hash, g_str_equal, g_free, tensor_free);
}

/* Every frame of @frames through @cpu, @f32 and @f16 (fp16's tensors observed
 * only with @observe_f16): "@what detection runs" checked, and @compare run on
 * the frames where all three ran. The first of those frames in *@first, its
 * pixels in *@first_pixels (NULL when there is none). FALSE when a frame does
 * not load. */
static gboolean run_frames(GPtrArray *frames, const char *what, vd_context *cpu, vd_context *f32,
                           vd_context *f16, gboolean observe_f16,
                           void (*compare)(const run_frame *fr), vd_image *first,
                           uint8_t **first_pixels)
{
    char *runs = g_strdup_printf("%s detection runs", what);
    *first_pixels = NULL;
    for (guint f = 0; f < frames->len; f++) {
        const char *path = g_ptr_array_index(frames, f);
        int w, h;
        uint8_t *pixels = load_ppm(path, &w, &h);
        if (pixels == NULL) {
            g_free(runs);
            return FALSE;
        }
        vd_image image = vd_image_rgb(pixels, w, h);
        printf("frame %s (%dx%d)\n", path, w, h);
        run_frame fr = {.cpu_t = new_tensor_table(),
                        .t32 = new_tensor_table(),
                        .t16 = observe_f16 ? new_tensor_table() : NULL};
        vd_context_set_observer(cpu, observer, fr.cpu_t);
        vd_context_set_observer(f32, observer, fr.t32);
        if (observe_f16)
            vd_context_set_observer(f16, observer, fr.t16);
        gboolean okc = detect(cpu, &image, &fr.rc);
        gboolean ok32 = detect(f32, &image, &fr.r32);
        gboolean ok16 = detect(f16, &image, &fr.r16);
        vd_context_set_observer(cpu, NULL, NULL);
        vd_context_set_observer(f32, NULL, NULL);
        if (observe_f16)
            vd_context_set_observer(f16, NULL, NULL);
        check(okc && ok32 && ok16, runs, "CPU %s, CUDA fp32 %s, fp16 %s", okc ? "ok" : "FAILED",
              ok32 ? "ok" : "FAILED", ok16 ? "ok" : "FAILED");
        if (okc && ok32 && ok16)
            compare(&fr);
        vd_result_clear(&fr.rc);
        vd_result_clear(&fr.r32);
        vd_result_clear(&fr.r16);
        g_hash_table_unref(fr.cpu_t);
        g_hash_table_unref(fr.t32);
        if (fr.t16 != NULL)
            g_hash_table_unref(fr.t16);
        if (*first_pixels == NULL && okc && ok32 && ok16) {
            *first = image;
            *first_pixels = pixels;
        } else {
            g_free(pixels);
        }
    }
    g_free(runs);
    return TRUE;
}

/* A frame of the --masks run: CUDA fp32's and fp16's detections and masks
 * against the CPU's. */
static void compare_mask_frame(const run_frame *fr)
{
    int n = fr->rc.n_detections;
    int m32 = match(&fr->rc, &fr->r32, 0.99, 1e-3);
    check(n >= 5, "non-degenerate mask reference", "the CPU finds %d detections", n);
    check(m32 >= 0.97 * n && abs(fr->r32.n_detections - n) <= (int)ceil(0.03 * n),
          "mask model fp32 detections vs CPU",
          "%d of %d matched (label, IoU >= 0.99, |score diff| <= 1e-3); CUDA has %d", m32, n,
          fr->r32.n_detections);
    compare_masks("fp32", &fr->rc, fr->cpu_t, &fr->r32, fr->t32, 0.99, 1e-3, MASK_PROB_TOL,
                  MASK_IOU, MASK_LOW_IOU_FRACTION, 1);
    compare_masks("fp16", &fr->rc, fr->cpu_t, &fr->r16, fr->t16, MASK_FP16_BOX_IOU, 0.02, -1,
                  MASK_FP16_IOU, MASK_FP16_LOW_IOU_FRACTION, 3);
}

/* The --masks run: a Mask R-CNN model, CUDA fp32 and fp16 against the CPU on
 * every frame, then the sync count, graph replay and a batch on the first. */
static int run_mask_checks(vd_model *model, GPtrArray *frames)
{
    check(vd_model_has_masks(model), "mask model", "%s", vd_model_description(model));
    vd_context *cpu, *f32, *f16;
    if (!open_run_contexts(model, "mask", &cpu, &f32, &f16))
        return 1;
    vd_image first = {0};
    uint8_t *first_pixels;
    if (!run_frames(frames, "mask", cpu, f32, f16, TRUE, compare_mask_frame, &first, &first_pixels))
        return 1;
    if (first_pixels != NULL) {
        test_sync_count(f32, &first, "mask fp32", FALSE);
        test_sync_count(f16, &first, "mask fp16", TRUE);
        test_mask_graph_and_batch(f32, &first, "fp32");
        test_mask_graph_and_batch(f16, &first, "fp16");
        test_mask_stages(f16, &first);
    } else {
        check(FALSE, "mask frames", "no frame ran on CUDA");
    }
    vd_context_free(cpu);
    vd_context_free(f32);
    vd_context_free(f16);
    g_free(first_pixels);
    return 0;
}

/* A frame of the --core run: the CPU engine's stages and detections against
 * CUDA fp32, and CUDA fp16's detections (see run_core_checks). */
static void compare_core_frame(const run_frame *fr)
{
    compare_tensors(fr->cpu_t, fr->t32, "input", 1e-6,
                    "the same vd_math.h arithmetic: only an indexing bug differs");
    compare_tensors(fr->cpu_t, fr->t32, "anchors", 0, "integers");
    const char *levels[] = {"fpn.0", "fpn.1", "fpn.2", "fpn.3", "fpn.pool"};
    for (int l = 0; l < 5; l++)
        if (g_hash_table_contains(fr->cpu_t, levels[l]))
            compare_tensors(fr->cpu_t, fr->t32, levels[l], 1e-3,
                            "cuDNN and oneDNN sum in other orders, ~1e-6 per layer; a "
                            "wrong weight, bias or layout is >= 1e-2");
    compare_proposals(fr->cpu_t, fr->t32);
    int n = fr->rc.n_detections;
    int m32 = match(&fr->rc, &fr->r32, 0.99, 1e-3);
    check(n >= 5, "non-degenerate core reference", "the CPU finds %d detections", n);
    check(m32 >= 0.97 * n && abs(fr->r32.n_detections - n) <= (int)ceil(0.03 * n),
          "core fp32 detections vs CPU",
          "%d of %d matched (label, IoU >= 0.99, |score diff| <= 1e-3); CUDA has %d", m32, n,
          fr->r32.n_detections);
    int m16 = match(&fr->rc, &fr->r16, 0.9, 0.02);
    if (trained_model)
        check(m16 >= 0.95 * n, "core fp16 detections vs CPU",
              "%d of %d matched (label, IoU >= 0.9, |score diff| <= 0.02); fp16 has %d", m16, n,
              fr->r16.n_detections);
    else
        printf("  info core fp16 detections vs CPU: %d of %d matched (label, IoU >= 0.9, "
               "|score diff| <= 0.02), fp16 has %d; random weights: the 95%% criterion "
               "applies to trained models (--trained)\n",
               m16, n, fr->r16.n_detections);
}

/* The --core run (fasterrcnn_resnet50_fpn_v2 and fasterrcnn_mobilenet_v3_large_fpn,
 * _320_fpn in tests/gpu/device-check.sh): on
 * every frame the CPU engine's stages and detections against CUDA fp32 (the
 * per-frame criteria of the full run: input, anchors, FPN levels, proposals,
 * then label, IoU >= 0.99, |score diff| <= 1e-3, >= 97% matched, counts within
 * 3%) and CUDA fp16 against the CPU (IoU >= 0.9, |score diff| <= 0.02, >= 95%
 * matched: a check with --trained, reported for random weights, as in the full
 * run); then on the first frame one host synchronisation per frame (fp32
 * eager, fp16 replayed), graph replay identical to eager (fp32 and fp16), and
 * batches of two close to each image alone (results_close; fp32 also within
 * the CPU criteria). */
static int run_core_checks(vd_model *model, GPtrArray *frames)
{
    printf("core checks (CUDA against the CPU engine) of %s\n", vd_model_description(model));
    vd_context *cpu, *f32, *f16;
    if (!open_run_contexts(model, "core", &cpu, &f32, &f16))
        return 1;
    vd_image first = {0};
    uint8_t *first_pixels;
    if (!run_frames(frames, "core", cpu, f32, f16, FALSE, compare_core_frame, &first,
                    &first_pixels))
        return 1;
    if (first_pixels != NULL) {
        test_sync_count(f32, &first, "core fp32", FALSE);
        test_sync_count(f16, &first, "core fp16", TRUE);
        printf("  info the two graph replay checks below: fp32, then fp16\n");
        test_graph_equals_eager(f32, &first);
        test_graph_equals_eager(f16, &first);
        test_batch(f32, cpu, &first, 2, "core fp32");
        test_batch(f16, NULL, &first, 2, "core fp16");
        printf("  info unfused convolutions: fp16 %d, fp32 %d\n",
               vd_cuda_context_unfused_convolutions(f16),
               vd_cuda_context_unfused_convolutions(f32));
    } else {
        check(FALSE, "core frames", "no frame ran on CUDA");
    }
    vd_context_free(cpu);
    vd_context_free(f32);
    vd_context_free(f16);
    g_free(first_pixels);
    return 0;
}

/* Writes the report (to @json_path unless NULL) and frees it. */
static void write_report(const char *json_path)
{
    if (json_path != NULL) {
        JsonGenerator *gen = json_generator_new();
        JsonNode *root = json_builder_get_root(report);
        json_generator_set_root(gen, root);
        json_generator_set_pretty(gen, TRUE);
        json_generator_to_file(gen, json_path, NULL);
        json_node_unref(root);
        g_object_unref(gen);
    }
    g_object_unref(report);
    report = NULL;
}

int main(int argc, char **argv)
{
    const char *model_path = NULL, *json_path = NULL;
    GPtrArray *frames = g_ptr_array_new();
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--model") == 0 && i + 1 < argc)
            model_path = argv[++i];
        else if (strcmp(argv[i], "--json") == 0 && i + 1 < argc)
            json_path = argv[++i];
        else if (strcmp(argv[i], "--trained") == 0)
            trained_model = TRUE;
        else if (strcmp(argv[i], "--detections-only") == 0)
            detections_only = TRUE;
        else if (strcmp(argv[i], "--masks") == 0)
            masks_only = TRUE;
        else if (strcmp(argv[i], "--core") == 0)
            core_only = TRUE;
        else
            g_ptr_array_add(frames, argv[i]);
    }
    if (model_path == NULL)
        model_path = g_getenv("VD_GPU_TEST_MODEL");
    if (frames->len == 0 && g_getenv("VD_GPU_TEST_FRAMES") != NULL) {
        gchar **list = g_strsplit(g_getenv("VD_GPU_TEST_FRAMES"), ":", -1);
        for (int i = 0; list[i] != NULL; i++)
            if (list[i][0])
                g_ptr_array_add(frames, list[i]);
    }
    gpu_require_device("test-gpu-engine");
    if (model_path == NULL || frames->len == 0) {
        printf("SKIP: test-gpu-engine needs --model FILE and frames (or VD_GPU_TEST_MODEL and "
               "VD_GPU_TEST_FRAMES); tests/gpu/device-check.sh makes them\n");
        return VD_TEST_SKIP;
    }

    report = json_builder_new();
    json_builder_begin_object(report);
    json_builder_set_member_name(report, "checks");
    json_builder_begin_array(report);

    GError *error = NULL;
    vd_model *model = vd_model_load(model_path, &error);
    if (model == NULL) {
        fprintf(stderr, "%s: %s\n", model_path, error->message);
        return 1;
    }
    printf("model: %s\n", vd_model_description(model));
    if (masks_only || core_only) {
        int rc = masks_only ? run_mask_checks(model, frames) : run_core_checks(model, frames);
        json_builder_end_array(report);
        json_builder_set_member_name(report, "failures");
        json_builder_add_int_value(report, failures);
        json_builder_end_object(report);
        write_report(json_path);
        vd_model_unref(model);
        g_ptr_array_unref(frames);
        printf("%s: %d failure%s\n", failures || rc ? "FAIL" : "PASS", failures,
               failures == 1 ? "" : "s");
        return failures || rc ? 1 : 0;
    }
    test_selection(model);

    vd_context *cpu = new_context(model, VD_DEVICE_CPU, VD_PRECISION_FP32);
    vd_context *f32 = new_context(model, VD_DEVICE_CUDA, VD_PRECISION_FP32);
    vd_context *f16 = new_context(model, VD_DEVICE_CUDA, VD_PRECISION_FP16);
    if (cpu == NULL || f32 == NULL || f16 == NULL)
        return 1;

    vd_image first = {0};
    uint8_t *first_pixels = NULL;
    double fp16_ms = 0, fp32_ms = 0;
    size_t conv_workspace_fp16 = 0, conv_workspace_fp32 = 0;
    for (guint f = 0; f < frames->len; f++) {
        const char *path = g_ptr_array_index(frames, f);
        int w, h;
        uint8_t *pixels = load_ppm(path, &w, &h);
        if (pixels == NULL)
            return 1;
        vd_image image = vd_image_rgb(pixels, w, h);
        printf("frame %s (%dx%d)\n", path, w, h);

        GHashTable *cpu_t = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, tensor_free);
        GHashTable *gpu_t = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, tensor_free);
        vd_result rc = {0}, r32 = {0}, r16 = {0};
        vd_context_set_observer(cpu, observer, cpu_t);
        vd_context_set_observer(f32, observer, gpu_t);
        if (!detect(cpu, &image, &rc))
            return 1;
        gboolean ok32 = detect(f32, &image, &r32);
        gboolean ok16 = detect(f16, &image, &r16);
        vd_context_set_observer(cpu, NULL, NULL);
        vd_context_set_observer(f32, NULL, NULL);
        check(ok32 && ok16, "CUDA detection runs", "fp32 %s, fp16 %s", ok32 ? "ok" : "FAILED",
              ok16 ? "ok" : "FAILED");
        if (!ok32 || !ok16) {
            vd_result_clear(&rc);
            vd_result_clear(&r32);
            vd_result_clear(&r16);
            g_hash_table_unref(cpu_t);
            g_hash_table_unref(gpu_t);
            g_free(pixels);
            continue;
        }

        /* stage by stage, so that a failure names the first diverging tensor */
        compare_tensors(cpu_t, gpu_t, "input", 1e-6,
                        "the same vd_math.h arithmetic: only an indexing bug differs");
        compare_tensors(cpu_t, gpu_t, "anchors", 0, "integers");
        const char *levels[] = {"fpn.0", "fpn.1", "fpn.2", "fpn.3", "fpn.pool"};
        for (int l = 0; l < 5; l++)
            if (g_hash_table_contains(cpu_t, levels[l]))
                compare_tensors(cpu_t, gpu_t, levels[l], 1e-3,
                                "cuDNN and oneDNN sum in other orders (FFT/Winograd too), ~1e-6 "
                                "per layer over ~60 layers; a wrong weight or layout is >= 1e-2");
        compare_proposals(cpu_t, gpu_t);

        int n = rc.n_detections;
        int m32 = match(&rc, &r32, 0.99, 1e-3);
        double frac32 = n ? (double)m32 / n : 1.0;
        check(n >= 5, "non-degenerate reference", "the CPU finds %d detections", n);
        check(frac32 >= 0.97 && abs(r32.n_detections - n) <= (int)ceil(0.03 * n),
              "fp32 detections vs CPU",
              "%d of %d matched (label, IoU >= 0.99, |score diff| <= 1e-3); CUDA has %d", m32, n,
              r32.n_detections);
        int n32 = r32.n_detections;
        int m16 = match(&r32, &r16, 0.9, 0.02);
        double frac16 = n32 ? (double)m16 / n32 : 1.0;
        /* issue 4's criterion is for a trained model. A calibrated random model
         * turns tiny logit changes into large score changes (measured on an
         * H200: torchvision's own autocast matches its fp32 on 48% of such
         * detections, ours on 56%), so there it is information, not a test. */
        if (trained_model)
            check(frac16 >= 0.95, "fp16 detections vs fp32",
                  "%d of %d matched (label, IoU >= 0.9, |score diff| <= 0.02); fp16 has %d", m16,
                  n32, r16.n_detections);
        else
            printf("  info fp16 detections vs fp32: %d of %d matched (label, IoU >= 0.9, |score "
                   "diff| <= 0.02), fp16 has %d; random weights: the 95%% criterion applies to "
                   "trained models (--trained)\n",
                   m16, n32, r16.n_detections);
        vd_result_clear(&rc);
        vd_result_clear(&r32);
        vd_result_clear(&r16);
        g_hash_table_unref(cpu_t);
        g_hash_table_unref(gpu_t);
        if (first_pixels == NULL) {
            first = image;
            first_pixels = pixels;
        } else {
            g_free(pixels);
        }
    }
    if (first_pixels == NULL) {
        printf("FAIL: no frame ran on CUDA\n");
        return 1;
    }

    if (detections_only)
        goto out_report;
    test_sync_count(f16, &first, "fp16", FALSE);
    test_sync_count(f32, &first, "fp32", FALSE);
    test_sync_count(f16, &first, "fp16", TRUE);
    test_injected_sync(f16, &first);
    test_graph_equals_eager(f16, &first);
    test_graph_retry(f16, &first);
    test_graph_backoff_per_graph(f16, &first);
    test_graph_replay_frames(model, &first);
    test_wait_yields(f16, &first);
    test_formats(cpu, f32, f16, &first);
    test_submit_collect(f16, &first);
    test_batch(f32, cpu, &first, 4, "fp32");
    test_batch(f16, NULL, &first, 4, "fp16");
    test_batch(f16, NULL, &first, 8, "fp16");
    test_batch(f32, NULL, &first, 8, "fp32");
    test_batch_invalid(f16, &first);
    test_batch_shrink(f16, &first);
    test_score_threshold_zero(model, cpu, f32, &first);
    printf("  info unfused convolutions: fp16 %d, fp32 %d\n",
           vd_cuda_context_unfused_convolutions(f16), vd_cuda_context_unfused_convolutions(f32));
    {
        /* the convolution workspace is sized by the algorithms that run, not
         * every candidate's need (issue 11, item 5) */
        vd_cuda_memory m16 = vd_cuda_context_memory(f16), m32 = vd_cuda_context_memory(f32);
        printf("  info device memory at %dx%d (MiB): fp16 conv workspace %.1f, plan %.1f (of which "
               "detection NMS %.1f), weights %.1f; fp32 conv workspace %.1f, plan %.1f, weights "
               "%.1f\n",
               first.width, first.height, m16.conv_workspace / 1048576.0, m16.plan / 1048576.0,
               m16.box_nms_workspace / 1048576.0, m16.weights / 1048576.0,
               m32.conv_workspace / 1048576.0, m32.plan / 1048576.0, m32.weights / 1048576.0);
        conv_workspace_fp16 = m16.conv_workspace;
        conv_workspace_fp32 = m32.conv_workspace;
    }
    test_out_of_memory(model, &first);
    fp16_ms = median_ms(f16, &first, 20);
    fp32_ms = median_ms(f32, &first, 10);
    printf("  info median frame time (vd_detect, %dx%d): fp16 %.3f ms, fp32 %.3f ms\n",
           first.width, first.height, fp16_ms, fp32_ms);
    /* last: four models to write, load and run on three contexts each */
    test_poisoned_weights(model_path, &first);

out_report:
    json_builder_end_array(report);
    json_builder_set_member_name(report, "fp16_ms");
    json_builder_add_double_value(report, fp16_ms);
    json_builder_set_member_name(report, "fp32_ms");
    json_builder_add_double_value(report, fp32_ms);
    json_builder_set_member_name(report, "unfused_convolutions_fp16");
    json_builder_add_int_value(report, vd_cuda_context_unfused_convolutions(f16));
    json_builder_set_member_name(report, "conv_workspace_bytes_fp16");
    json_builder_add_int_value(report, (gint64)conv_workspace_fp16);
    json_builder_set_member_name(report, "conv_workspace_bytes_fp32");
    json_builder_add_int_value(report, (gint64)conv_workspace_fp32);
    json_builder_set_member_name(report, "failures");
    json_builder_add_int_value(report, failures);
    json_builder_end_object(report);
    write_report(json_path);
    vd_context_free(cpu);
    vd_context_free(f32);
    vd_context_free(f16);
    vd_model_unref(model);
    g_free(first_pixels);
    g_ptr_array_unref(frames);
    printf("%s: %d failure%s\n", failures ? "FAIL" : "PASS", failures, failures == 1 ? "" : "s");
    return failures ? 1 : 0;
}
