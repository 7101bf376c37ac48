/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Tests of the engine API around a context (engine/vd_context.c and the CPU
 * backend's behaviour as seen through vd.h): device and precision selection,
 * determinism, the submit/collect pair, resolution changes, pixel formats,
 * thresholds, the observer and stage hooks, and bad arguments.
 *
 * The model is the tiny generated fixture of model_fixture.c: its outputs are
 * meaningless, but with a score threshold of 0 every proposal yields candidates, so
 * there are always detections to compare. Numerical agreement with torchvision is
 * the parity suite's job. */
#include "cpu/vd_cpu_isa.h"
#include "model_fixture.h"
#include "vd_config.h"
#include "vd_context_private.h"

#include <glib/gstdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static vd_model *tiny_model(void)
{
    tiny_arch a = tiny_basic();
    fixture *fx = fx_tiny(&a);
    fx_randomize(fx, 7);
    return fx_load_ok(fx);
}

static int mask_probs_seen, mask_logits_seen, mask_features_seen;
static float *mask_logits_copy;
static double mask_sigmoid_err;

/* The mask branch's dumps: "mask_features" [D,C,4,4] (the pooler of an 8x8 mask),
 * "mask_logits" [D,8,8] and "mask_probs" [D,8,8], its sigmoid (seen in this order). */
static void count_mask_probs(const char *name, const float *data, const int64_t *shape, int ndim,
                             void *user_data)
{
    (void)user_data;
    if (strcmp(name, "mask_features") == 0) {
        g_assert_cmpint(ndim, ==, 4);
        g_assert_cmpint(shape[1], >, 0);
        g_assert_cmpint(shape[2], ==, 4);
        g_assert_cmpint(shape[3], ==, 4);
        mask_features_seen = (int)shape[0];
    } else if (strcmp(name, "mask_logits") == 0) {
        g_assert_cmpint(ndim, ==, 3);
        g_assert_cmpint(shape[1], ==, 8);
        g_assert_cmpint(shape[2], ==, 8);
        mask_logits_seen = (int)shape[0];
        g_free(mask_logits_copy);
        mask_logits_copy = g_memdup2(data, (gsize)shape[0] * 64 * sizeof(float));
    } else if (strcmp(name, "mask_probs") == 0) {
        g_assert_cmpint(ndim, ==, 3);
        g_assert_cmpint(shape[1], ==, 8);
        g_assert_cmpint(shape[2], ==, 8);
        mask_probs_seen = (int)shape[0];
        g_assert_nonnull(mask_logits_copy);
        g_assert_cmpint(mask_logits_seen, ==, mask_probs_seen);
        for (int64_t i = 0; i < shape[0] * 64; i++)
            mask_sigmoid_err = MAX(mask_sigmoid_err,
                                   fabs(data[i] - 1.0 / (1.0 + exp(-(double)mask_logits_copy[i]))));
    }
}

static vd_context *cpu_context(vd_model *model, float threshold)
{
    vd_context_params params = vd_context_default_params();
    GError *error = NULL;
    params.device = VD_DEVICE_CPU;
    params.n_threads = 2;
    params.score_threshold = threshold;
    vd_context *ctx = vd_context_new(model, &params, &error);
    g_assert_no_error(error);
    g_assert_nonnull(ctx);
    return ctx;
}

/* A deterministic test picture: gradients and a bright rectangle. */
static guint8 *make_rgb(int width, int height)
{
    guint8 *p = g_malloc((gsize)width * height * 3);
    for (int y = 0; y < height; y++)
        for (int x = 0; x < width; x++) {
            guint8 *px = p + ((gsize)y * width + x) * 3;
            gboolean inside = x > width / 4 && x < width / 2 && y > height / 3 && y < height * 3 / 4;
            px[0] = inside ? 250 : (guint8)(x * 255 / width);
            px[1] = inside ? 240 : (guint8)(y * 255 / height);
            px[2] = (guint8)((x * 7 + y * 3) & 0xff);
        }
    return p;
}

static void assert_same_result(const vd_result *a, const vd_result *b)
{
    g_assert_cmpint(a->width, ==, b->width);
    g_assert_cmpint(a->height, ==, b->height);
    g_assert_cmpint(a->n_detections, ==, b->n_detections);
    /* same input, same plan: the very same arithmetic, so bit-identical */
    g_assert_cmpmem(a->detections, sizeof(vd_detection) * a->n_detections, b->detections,
                    sizeof(vd_detection) * b->n_detections);
}

static vd_result detect_ok(vd_context *ctx, const vd_image *image)
{
    vd_result r = {0};
    GError *error = NULL;
    g_assert_true(vd_detect(ctx, image, 1, &r, &error));
    g_assert_no_error(error);
    return r;
}

/* An observer keeping a copy of every tensor a frame shows, by name */
static void keep_tensors(const char *name, const float *data, const int64_t *shape, int ndim,
                         void *user_data)
{
    size_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= (size_t)shape[i];
    GArray *copy = g_array_sized_new(FALSE, FALSE, sizeof(float), (guint)n);
    g_array_append_vals(copy, data, (guint)n);
    g_hash_table_replace(user_data, g_strdup(name), copy);
}

/* The tensors of @ctx's frame of @image (name -> GArray of float) */
static GHashTable *frame_tensors(vd_context *ctx, const vd_image *image)
{
    GHashTable *kept =
        g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)g_array_unref);
    vd_context_set_observer(ctx, keep_tensors, kept);
    vd_result r = detect_ok(ctx, image);
    vd_context_set_observer(ctx, NULL, NULL);
    vd_result_clear(&r);
    return kept;
}

/* @model's tensors for @image on oneDNN's layers in fp32 (VD_CPU_LAYERS=onednn for
 * the context's creation) */
static GHashTable *onednn_tensors(vd_model *model, const vd_image *image)
{
    char *saved = g_strdup(g_getenv("VD_CPU_LAYERS"));
    g_setenv("VD_CPU_LAYERS", "onednn", TRUE);
    vd_context_params params = vd_context_default_params();
    GError *error = NULL;
    params.device = VD_DEVICE_CPU;
    params.precision = VD_PRECISION_FP32;
    params.n_threads = 2;
    vd_context *ctx = vd_context_new(model, &params, &error);
    g_assert_no_error(error);
    g_test_message("against %s", vd_context_describe(ctx));
    g_assert_null(strstr(vd_context_describe(ctx), "layers XNNPACK"));
    GHashTable *kept = frame_tensors(ctx, image);
    vd_context_free(ctx);
    if (saved != NULL)
        g_setenv("VD_CPU_LAYERS", saved, TRUE);
    else
        g_unsetenv("VD_CPU_LAYERS");
    g_free(saved);
    return kept;
}

/* Every tensor of @ref in @got, of the same size and within @tol of the largest
 * magnitude of @ref's */
static void assert_tensors_match(GHashTable *ref, GHashTable *got, double tol)
{
    GHashTableIter it;
    gpointer key, value;
    g_hash_table_iter_init(&it, ref);
    g_assert_cmpint(g_hash_table_size(ref), >, 0);
    while (g_hash_table_iter_next(&it, &key, &value)) {
        const GArray *a = value, *b = g_hash_table_lookup(got, key);
        g_assert_nonnull(b);
        g_assert_cmpuint(a->len, ==, b->len);
        double scale = 0.0, diff = 0.0;
        for (guint i = 0; i < a->len; i++) {
            double x = g_array_index(a, float, i), y = g_array_index(b, float, i);
            scale = MAX(scale, fabs(x));
            diff = MAX(diff, fabs(x - y));
        }
        g_test_message("%s: max |difference| %.3g, of max |ref| (%.3g) %.3g", (const char *)key,
                       diff, scale, scale > 0.0 ? diff / scale : diff);
        g_assert_cmpfloat(diff, <=, tol * scale);
    }
}

static void test_detect_basic(void)
{
    vd_model *model = tiny_model();
    vd_context *ctx = cpu_context(model, 0.0f);
    guint8 *pixels = make_rgb(80, 60);
    vd_image image = vd_image_rgb(pixels, 80, 60);

    g_assert_cmpint(vd_context_device(ctx), ==, VD_DEVICE_CPU);
    /* auto: bf16 where the processor has it natively (the kernels test checks which) */
    vd_precision precision = vd_context_precision(ctx);
    g_assert_true(precision == VD_PRECISION_FP32 || precision == VD_PRECISION_BF16);

    vd_result r = detect_ok(ctx, &image);
    g_assert_cmpint(r.width, ==, 80);
    g_assert_cmpint(r.height, ==, 60);
    g_assert_cmpint(r.n_detections, >, 0);
    g_assert_cmpint(r.n_detections, <=, 100);
    for (int i = 0; i < r.n_detections; i++) {
        const vd_detection *d = &r.detections[i];
        g_assert_cmpint(d->label, >=, 1);
        g_assert_cmpint(d->label, <, vd_model_num_classes(model));
        g_assert_cmpfloat(d->score, >, 0.0f);
        g_assert_cmpfloat(d->score, <=, 1.0f);
        if (i > 0)
            g_assert_cmpfloat(d->score, <=, r.detections[i - 1].score);
        g_assert_cmpfloat(d->x1, <=, d->x2);
        g_assert_cmpfloat(d->y1, <=, d->y2);
        /* clipped to the resized image, then scaled back: inside the frame (the
         * float32 rescale may overshoot by an ulp) */
        g_assert_cmpfloat(d->x1, >=, 0.0f);
        g_assert_cmpfloat(d->y1, >=, 0.0f);
        g_assert_cmpfloat(d->x2, <=, 80.0f * (1.0f + 1e-6f));
        g_assert_cmpfloat(d->y2, <=, 60.0f * (1.0f + 1e-6f));
    }

    /* determinism */
    vd_result again = detect_ok(ctx, &image);
    assert_same_result(&r, &again);

    vd_result_clear(&again);
    vd_result_clear(&r);
    vd_context_free(ctx);
    vd_model_unref(model);
    g_free(pixels);
}

static void test_model_outlives_caller(void)
{
    vd_model *model = tiny_model();
    vd_context *ctx = cpu_context(model, 0.0f);
    vd_model_unref(model); /* the context holds its own reference */
    guint8 *pixels = make_rgb(40, 40);
    vd_image image = vd_image_rgb(pixels, 40, 40);
    vd_result r = detect_ok(ctx, &image);
    g_assert_cmpint(r.n_detections, >, 0);
    g_assert_cmpint(vd_model_num_classes(vd_context_model(ctx)), ==, 3);
    vd_result_clear(&r);
    vd_context_free(ctx);
    g_free(pixels);
}

/* An observer that holds the batch running on the worker until released: proves
 * deterministically that vd_submit() returned while the batch was running. */
typedef struct {
    GMutex lock;
    GCond cond;
    gboolean entered, released;
    GThread *thread;
} gate;

static void gate_observer(const char *name, const float *data, const int64_t *shape, int ndim,
                          void *user_data)
{
    gate *g = user_data;
    (void)data, (void)shape, (void)ndim;
    if (strcmp(name, "input") != 0)
        return;
    g_mutex_lock(&g->lock);
    g->entered = TRUE;
    g->thread = g_thread_self();
    g_cond_broadcast(&g->cond);
    while (!g->released)
        g_cond_wait(&g->cond, &g->lock);
    g_mutex_unlock(&g->lock);
}

static void test_submit_collect(void)
{
    vd_model *model = tiny_model();
    vd_context *ctx = cpu_context(model, 0.0f);
    const int sizes[VD_MAX_IN_FLIGHT][2] = {{64, 48}, {150, 97}, {41, 123}, {64, 48}};
    guint8 *pixels[VD_MAX_IN_FLIGHT];
    vd_result sync[VD_MAX_IN_FLIGHT], async = {0};
    GError *error = NULL;

    g_assert_false(vd_collect(ctx, &async, 1, &error));
    g_assert_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT);
    g_clear_error(&error);

    /* several batches in flight, of changing sizes, collected in order; the
     * caller's frames are overwritten and freed as soon as submit returns */
    for (int i = 0; i < VD_MAX_IN_FLIGHT; i++) {
        pixels[i] = make_rgb(sizes[i][0], sizes[i][1]);
        if (i == 3)
            pixels[i][5] ^= 0xff; /* not the same frame as the first */
        vd_image image = vd_image_rgb(pixels[i], sizes[i][0], sizes[i][1]);
        sync[i] = detect_ok(ctx, &image);
        g_assert_cmpint(sync[i].n_detections, >, 0);
    }
    for (int i = 0; i < VD_MAX_IN_FLIGHT; i++) {
        vd_image image = vd_image_rgb(pixels[i], sizes[i][0], sizes[i][1]);
        g_assert_true(vd_submit(ctx, &image, 1, &error));
        g_assert_no_error(error);
        memset(pixels[i], 0x55, (gsize)sizes[i][0] * sizes[i][1] * 3);
        g_free(pixels[i]);
        g_assert_cmpint(vd_context_in_flight(ctx), ==, i + 1);
    }
    {
        guint8 *extra = make_rgb(32, 32);
        vd_image image = vd_image_rgb(extra, 32, 32);
        vd_result r = {0};
        g_assert_false(vd_submit(ctx, &image, 1, &error)); /* the limit */
        g_assert_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT);
        g_clear_error(&error);
        g_assert_false(vd_detect(ctx, &image, 1, &r, &error)); /* not while in flight */
        g_assert_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT);
        g_assert_nonnull(strstr(error->message, "collect"));
        g_clear_error(&error);
        g_free(extra);
    }
    for (int i = 0; i < VD_MAX_IN_FLIGHT; i++) {
        g_assert_true(vd_collect(ctx, &async, 1, &error));
        g_assert_no_error(error);
        assert_same_result(&sync[i], &async);
        vd_result_clear(&async);
    }
    g_assert_cmpint(vd_context_in_flight(ctx), ==, 0);
    {
        vd_stage_time times[VD_MAX_STAGES];
        g_assert_cmpint(vd_context_stage_times(ctx, times, VD_MAX_STAGES), >=, 5);
    }

    /* failures are reported by collect, in order: good, bad, good */
    guint8 *frame = make_rgb(64, 48);
    vd_image image = vd_image_rgb(frame, 64, 48), bad = image;
    bad.planes[0] = NULL;
    g_assert_true(vd_submit(ctx, &image, 1, &error));
    g_assert_true(vd_submit(ctx, &bad, 1, &error));
    g_assert_true(vd_submit(ctx, &image, 1, &error));
    g_assert_true(vd_collect(ctx, &async, 1, &error));
    assert_same_result(&sync[0], &async);
    vd_result_clear(&async);
    g_assert_false(vd_collect(ctx, &async, 1, &error));
    g_assert_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT);
    g_assert_nonnull(strstr(error->message, "NULL"));
    g_clear_error(&error);
    g_assert_true(vd_collect(ctx, &async, 1, &error));
    assert_same_result(&sync[0], &async);
    vd_result_clear(&async);
    /* no room for the results: an error, and the batch is gone */
    g_assert_true(vd_submit(ctx, &image, 1, &error));
    g_assert_false(vd_collect(ctx, NULL, 0, &error));
    g_assert_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT);
    g_clear_error(&error);
    g_assert_cmpint(vd_context_in_flight(ctx), ==, 0);

    /* thresholds apply to the batches submitted after they are set */
    g_assert_true(vd_submit(ctx, &image, 1, &error));
    vd_context_set_thresholds(ctx, 2.0f, -1.0f, 0); /* above any score */
    g_assert_true(vd_submit(ctx, &image, 1, &error));
    vd_context_set_thresholds(ctx, 0.0f, -1.0f, 0);
    g_assert_true(vd_collect(ctx, &async, 1, &error));
    assert_same_result(&sync[0], &async);
    vd_result_clear(&async);
    g_assert_true(vd_collect(ctx, &async, 1, &error));
    g_assert_cmpint(async.n_detections, ==, 0);
    vd_result_clear(&async);

    /* submit returns while the batch runs, on another thread */
    gate g = {0};
    g_mutex_init(&g.lock);
    g_cond_init(&g.cond);
    vd_context_set_observer(ctx, gate_observer, &g);
    g_assert_true(vd_submit(ctx, &image, 1, &error));
    vd_context_set_observer(ctx, NULL, NULL);
    g_mutex_lock(&g.lock);
    while (!g.entered)
        g_cond_wait(&g.cond, &g.lock);
    g_assert_true(g.thread != g_thread_self());
    g.released = TRUE;
    g_cond_broadcast(&g.cond);
    g_mutex_unlock(&g.lock);
    g_assert_true(vd_collect(ctx, &async, 1, &error));
    assert_same_result(&sync[0], &async);
    vd_result_clear(&async);
    g_mutex_clear(&g.lock);
    g_cond_clear(&g.cond);

    /* a batch of two == two single frames */
    vd_image pair[2] = {image, image};
    vd_result two[2];
    g_assert_true(vd_detect(ctx, pair, 2, two, &error));
    assert_same_result(&sync[0], &two[0]);
    assert_same_result(&sync[0], &two[1]);
    vd_result_clear(&two[0]);
    vd_result_clear(&two[1]);

    /* freed with batches in flight: nothing leaks (ASan), nothing crashes */
    for (int i = 0; i < 3; i++)
        g_assert_true(vd_submit(ctx, &image, 1, &error));
    vd_context_free(ctx);

    for (int i = 0; i < VD_MAX_IN_FLIGHT; i++)
        vd_result_clear(&sync[i]);
    vd_model_unref(model);
    g_free(frame);
}

/* A producer thread submits while the test's thread collects, at the same
 * time (the element's two threads): every result in order, each equal to
 * vd_detect()'s for its frame. Emulated (VD_TEST_EMULATED=1: the arm64 run under
 * qemu-user, whose translated code keeps the x86 host's stronger memory ordering,
 * so that more frames find nothing more about an Arm CPU's) 12 frames, which still
 * fill the queue to its limit and wait on it. */
#define PC_FRAMES (fx_emulated() ? 12 : 40)
typedef struct {
    vd_context *ctx;
    guint8 *pixels[2];
    int width, height;
} pc_state;

static gpointer pc_producer(gpointer data)
{
    pc_state *st = data;
    for (int i = 0; i < PC_FRAMES; i++) {
        vd_image image = vd_image_rgb(st->pixels[i % 3 == 0], st->width, st->height);
        GError *error = NULL;
        /* the limit: wait for the consumer, as the element does */
        while (vd_context_in_flight(st->ctx) >= VD_MAX_IN_FLIGHT)
            g_usleep(100);
        if (!vd_submit(st->ctx, &image, 1, &error)) {
            g_error_free(error);
            return GINT_TO_POINTER(i + 1);
        }
    }
    return NULL;
}

static void test_producer_consumer(void)
{
    vd_model *model = tiny_model();
    vd_context *ctx = cpu_context(model, 0.0f);
    pc_state st = {ctx, {make_rgb(72, 56), make_rgb(72, 56)}, 72, 56};
    vd_result expected[2];
    GError *error = NULL;

    st.pixels[1][100] ^= 0xff;
    st.pixels[1][3000] ^= 0xff;
    for (int k = 0; k < 2; k++) {
        vd_image image = vd_image_rgb(st.pixels[k], st.width, st.height);
        expected[k] = detect_ok(ctx, &image);
    }
    g_assert_false(expected[0].n_detections == expected[1].n_detections &&
                   memcmp(expected[0].detections, expected[1].detections,
                          sizeof(vd_detection) * expected[0].n_detections) == 0);

    GThread *producer = g_thread_new("producer", pc_producer, &st);
    for (int i = 0; i < PC_FRAMES; i++) {
        vd_result r = {0};
        /* collect only what was submitted: vd_collect() refuses an empty queue */
        while (vd_context_in_flight(ctx) == 0)
            g_usleep(100);
        g_assert_true(vd_collect(ctx, &r, 1, &error));
        g_assert_no_error(error);
        assert_same_result(&expected[i % 3 == 0], &r);
        vd_result_clear(&r);
    }
    g_assert_null(g_thread_join(producer));
    g_assert_cmpint(vd_context_in_flight(ctx), ==, 0);

    for (int k = 0; k < 2; k++) {
        vd_result_clear(&expected[k]);
        g_free(st.pixels[k]);
    }
    vd_context_free(ctx);
    vd_model_unref(model);
}

static void test_resolution_change(void)
{
    vd_model *model = tiny_model();
    vd_context *ctx = cpu_context(model, 0.0f);
    guint8 *small = make_rgb(64, 48), *large = make_rgb(150, 97), *portrait = make_rgb(41, 123);
    vd_image a = vd_image_rgb(small, 64, 48), b = vd_image_rgb(large, 150, 97),
             c = vd_image_rgb(portrait, 41, 123);

    vd_result first = detect_ok(ctx, &a);
    vd_result other = detect_ok(ctx, &b);
    g_assert_cmpint(other.width, ==, 150);
    g_assert_cmpint(other.height, ==, 97);
    vd_result tall = detect_ok(ctx, &c);
    g_assert_cmpint(tall.width, ==, 41);
    g_assert_cmpint(tall.height, ==, 123);
    for (int i = 0; i < tall.n_detections; i++)
        g_assert_cmpfloat(tall.detections[i].y2, <=, 123.0f * (1.0f + 1e-6f));
    vd_result back = detect_ok(ctx, &a); /* plans rebuilt: same answer as before */
    assert_same_result(&first, &back);

    /* a fresh context gives the same answer for the second size */
    vd_context *fresh = cpu_context(model, 0.0f);
    vd_result other2 = detect_ok(fresh, &b);
    assert_same_result(&other, &other2);

    vd_result_clear(&first);
    vd_result_clear(&other);
    vd_result_clear(&other2);
    vd_result_clear(&tall);
    vd_result_clear(&back);
    vd_context_free(fresh);
    vd_context_free(ctx);
    vd_model_unref(model);
    g_free(small);
    g_free(large);
    g_free(portrait);
}

/* The same pixels in every packed layout give the same detections, bit for bit. */
static void test_packed_formats(void)
{
    const int w = 70, h = 50;
    vd_model *model = tiny_model();
    vd_context *ctx = cpu_context(model, 0.0f);
    guint8 *rgb = make_rgb(w, h);
    vd_image image = vd_image_rgb(rgb, w, h);
    vd_result ref = detect_ok(ctx, &image);
    struct {
        vd_pixel_format format;
        int bpp, r, g, b;
    } layouts[] = {
        {VD_FORMAT_BGR, 3, 2, 1, 0},  {VD_FORMAT_RGBA, 4, 0, 1, 2}, {VD_FORMAT_BGRA, 4, 2, 1, 0},
        {VD_FORMAT_RGBX, 4, 0, 1, 2}, {VD_FORMAT_BGRX, 4, 2, 1, 0},
    };
    for (gsize k = 0; k < G_N_ELEMENTS(layouts); k++) {
        int stride = w * layouts[k].bpp + 13; /* padded rows */
        guint8 *buf = g_malloc0((gsize)stride * h);
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                const guint8 *s = rgb + ((gsize)y * w + x) * 3;
                guint8 *d = buf + (gsize)y * stride + (gsize)x * layouts[k].bpp;
                d[layouts[k].r] = s[0];
                d[layouts[k].g] = s[1];
                d[layouts[k].b] = s[2];
                if (layouts[k].bpp == 4)
                    d[3] = 0x5a; /* alpha / padding must be ignored */
            }
        vd_image view = {.format = layouts[k].format, .width = w, .height = h,
                         .planes = {buf}, .strides = {stride}};
        vd_result r = detect_ok(ctx, &view);
        assert_same_result(&ref, &r);
        vd_result_clear(&r);
        g_free(buf);
    }
    vd_result_clear(&ref);
    vd_context_free(ctx);
    vd_model_unref(model);
    g_free(rgb);
}

static void test_thresholds(void)
{
    vd_model *model = tiny_model();
    vd_context *ctx = cpu_context(model, 0.0f);
    guint8 *pixels = make_rgb(64, 64);
    vd_image image = vd_image_rgb(pixels, 64, 64);
    vd_result all = detect_ok(ctx, &image);
    g_assert_cmpint(all.n_detections, >, 3);

    /* a threshold between the scores keeps exactly those strictly above it */
    float cut = all.detections[all.n_detections / 2].score;
    int expected = 0;
    for (int i = 0; i < all.n_detections; i++)
        expected += all.detections[i].score > cut;
    vd_context_set_thresholds(ctx, cut, -1.0f, 0);
    vd_result some = detect_ok(ctx, &image);
    g_assert_cmpint(some.n_detections, <=, expected);
    for (int i = 0; i < some.n_detections; i++)
        g_assert_cmpfloat(some.detections[i].score, >, cut);

    vd_context_set_thresholds(ctx, 0.0f, -1.0f, 3);
    vd_result three = detect_ok(ctx, &image);
    g_assert_cmpint(three.n_detections, ==, 3);
    for (int i = 0; i < 3; i++)
        g_assert_cmpfloat(three.detections[i].score, ==, all.detections[i].score);

    /* defaults come back from the model */
    vd_context_set_thresholds(ctx, -1.0f, -1.0f, 0);
    g_assert_cmpfloat(ctx->requested.score_threshold, ==, vd_model_score_threshold(model));
    g_assert_cmpint(ctx->requested.max_detections, ==, 100);

    vd_result_clear(&all);
    vd_result_clear(&some);
    vd_result_clear(&three);
    vd_context_free(ctx);
    vd_model_unref(model);
    g_free(pixels);
}

typedef struct {
    GHashTable *shapes; /* name -> "d0xd1x..." */
} observed;

static void observe(const char *name, const float *data, const int64_t *shape, int ndim,
                    void *user_data)
{
    observed *o = user_data;
    GString *s = g_string_new(NULL);
    size_t n = 1;
    for (int i = 0; i < ndim; i++) {
        g_string_append_printf(s, "%s%" G_GINT64_FORMAT, i ? "x" : "", shape[i]);
        n *= (size_t)shape[i];
    }
    volatile float sum = 0.0f; /* touch every element: ASan checks the extent */
    for (size_t i = 0; i < n; i++)
        sum += data[i];
    (void)sum;
    g_hash_table_replace(o->shapes, g_strdup(name), g_string_free(s, FALSE));
}

static void test_observer_and_stages(void)
{
    vd_model *model = tiny_model();
    vd_context *ctx = cpu_context(model, 0.0f);
    guint8 *pixels = make_rgb(100, 75); /* -> resized 96x128 (min 96, max 160), padded same */
    vd_image image = vd_image_rgb(pixels, 100, 75);
    observed o = {g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free)};

    vd_context_set_observer(ctx, observe, &o);
    vd_result r = detect_ok(ctx, &image);
    g_assert_cmpstr(g_hash_table_lookup(o.shapes, "image_size"), ==, "2");
    g_assert_cmpstr(g_hash_table_lookup(o.shapes, "input"), ==, "1x3x96x128");
    /* tiny fixture: stage 1 only (stride 4) and the pool level */
    g_assert_cmpstr(g_hash_table_lookup(o.shapes, "fpn.0"), ==, "1x8x24x32");
    g_assert_cmpstr(g_hash_table_lookup(o.shapes, "fpn.pool"), ==, "1x8x12x16");
    g_assert_cmpstr(g_hash_table_lookup(o.shapes, "anchors"), ==, "960x4"); /* (768+192)*1 */
    g_assert_nonnull(g_hash_table_lookup(o.shapes, "proposals"));
    g_assert_nonnull(g_hash_table_lookup(o.shapes, "proposal_scores"));
    g_assert_nonnull(g_hash_table_lookup(o.shapes, "box_logits"));
    g_assert_nonnull(g_hash_table_lookup(o.shapes, "box_regression"));

    vd_stage_time times[VD_MAX_STAGES];
    int n = vd_context_stage_times(ctx, times, VD_MAX_STAGES);
    const char *expected[] = {"preprocess", "backbone", "fpn", "rpn", "roi_align", "box_head",
                              "postprocess"};
    g_assert_cmpint(n, ==, G_N_ELEMENTS(expected));
    for (int i = 0; i < n; i++) {
        g_assert_cmpstr(times[i].name, ==, expected[i]);
        g_assert_cmpfloat(times[i].ms, >=, 0.0);
    }
    /* the same stages and times with their arithmetic; @max respected */
    vd_stage_stats stats[VD_MAX_STAGES];
    g_assert_cmpint(vd_context_stage_stats(ctx, stats, VD_MAX_STAGES), ==, n);
    for (int i = 0; i < n; i++) {
        g_assert_true(stats[i].name == times[i].name);
        g_assert_cmpfloat(stats[i].ms, ==, times[i].ms);
        g_assert_cmpfloat(stats[i].gflop, >=, 0.0);
    }
    g_assert_cmpint(vd_context_stage_stats(ctx, stats, 2), ==, 2);
    g_assert_cmpint(vd_context_stage_stats(ctx, stats, 0), ==, 0);

    /* removing the observer stops the calls */
    vd_context_set_observer(ctx, NULL, NULL);
    g_hash_table_remove_all(o.shapes);
    vd_result r2 = detect_ok(ctx, &image);
    g_assert_cmpuint(g_hash_table_size(o.shapes), ==, 0);

    g_hash_table_unref(o.shapes);
    vd_result_clear(&r);
    vd_result_clear(&r2);
    vd_context_free(ctx);
    vd_model_unref(model);
    g_free(pixels);
}

/* The tiny model with one weight tensor's first @n values set to NaN
 * (@name NULL: untouched). */
static vd_model *tiny_model_with_nan(const char *name, gsize n)
{
    tiny_arch a = tiny_basic();
    fixture *fx = fx_tiny(&a);
    fx_randomize(fx, 7);
    if (name != NULL) {
        fx_tensor *t = fx_find(fx, name);
        for (gsize i = 0; i < MIN(n, t->n); i++)
            t->values[i] = NAN;
    }
    return fx_load_ok(fx);
}

/* The proposals' count of the last frame (the box head's rows follow it). */
static void count_proposals(const char *name, const float *data, const int64_t *shape, int ndim,
                            void *user_data)
{
    (void)data;
    if (strcmp(name, "proposals") == 0 && ndim == 2)
        *(int *)user_data = (int)shape[0];
}

/* One convolution's multiply-adds: output pixels x output channels x input
 * channels x kernel area (groups 1). */
static double conv_macs(int out_h, int out_w, int out_c, int in_c, int kernel)
{
    return (double)out_h * out_w * out_c * in_c * kernel * kernel;
}

/* vd_stage_stats.gflop against a hand count of the bundled model's layers at one
 * input size. The model file (models/visiondetect-shapes.safetensors) holds a
 * ResNet-18 body to layer3 (returned layers 1-3; stem 64 channels, 7x7 stride 2;
 * layer1 64, layer2 128, layer3 256 channels, two basic blocks each, a 1x1
 * downsample in the first block of layer2 and layer3), an FPN of 64 channels
 * with the max-pool level, an RPN of 6 anchors per place (2 sizes x 3 ratios), a TwoMLPHead of 256
 * over 7x7 RoIs and 5 classes. A 320x256 frame is not resized (min_size 256, max_size 464) and pads
 * to itself. Exact: every count is an integer well below 2^53. */
static void test_stage_gflop(void)
{
    char *path = g_build_filename(VD_TEST_SRCDIR, "..", "..", "models",
                                  "visiondetect-shapes.safetensors", NULL);
    GError *error = NULL;
    vd_model *model = vd_model_load(path, &error);
    g_assert_no_error(error);
    g_free(path);
    vd_context *ctx = cpu_context(model, 0.05f);
    guint8 *pixels = make_rgb(320, 256);
    vd_image image = vd_image_rgb(pixels, 320, 256);
    int n_proposals = -1;
    vd_context_set_observer(ctx, count_proposals, &n_proposals);
    vd_result r = detect_ok(ctx, &image);
    g_assert_cmpint(n_proposals, >, 0);

    /* stem 128x160, the max-pool to 64x80, then strides 2 */
    double backbone = conv_macs(128, 160, 64, 3, 7);
    backbone += 4 * conv_macs(64, 80, 64, 64, 3); /* layer1 */
    backbone += conv_macs(32, 40, 128, 64, 3) + 3 * conv_macs(32, 40, 128, 128, 3) +
                conv_macs(32, 40, 128, 64, 1); /* layer2 */
    backbone += conv_macs(16, 20, 256, 128, 3) + 3 * conv_macs(16, 20, 256, 256, 3) +
                conv_macs(16, 20, 256, 128, 1); /* layer3 */
    /* the lateral 1x1 and the output 3x3 convolution of each returned level */
    double fpn = conv_macs(64, 80, 64, 64, 1) + conv_macs(32, 40, 64, 128, 1) +
                 conv_macs(16, 20, 64, 256, 1);
    fpn +=
        conv_macs(64, 80, 64, 64, 3) + conv_macs(32, 40, 64, 64, 3) + conv_macs(16, 20, 64, 64, 3);
    /* every level and the pool level (8x10): the 3x3 convolution, then the
     * objectness (6) and box deltas (24) 1x1, which the CPU backend runs as one
     * convolution of 30 outputs padded to its channel block (what it computes
     * is what counts) */
    vd_cpu_caps caps;
    vd_cpu_caps_get(&caps);
    int head_out = (6 + 24 + caps.channel_block - 1) / caps.channel_block * caps.channel_block;
    const int level_h[] = {64, 32, 16, 8}, level_w[] = {80, 40, 20, 10};
    double rpn = 0.0;
    for (int l = 0; l < 4; l++)
        rpn += conv_macs(level_h[l], level_w[l], 64, 64, 3) +
               conv_macs(level_h[l], level_w[l], head_out, 64, 1);
    /* the rows the box head runs: the post-NMS top-n (100) as it is, other
     * counts rounded up to 16 */
    int rows = n_proposals == 100 ? 100 : (n_proposals + 15) / 16 * 16;
    double box_head = (double)rows * (64 * 7 * 7 * 256 + 256 * 256 + 256 * 5 * 5);

    vd_stage_stats times[VD_MAX_STAGES];
    int n = vd_context_stage_stats(ctx, times, VD_MAX_STAGES);
    g_assert_cmpint(n, ==, 7);
    const struct {
        const char *name;
        double macs;
    } want[] = {{"preprocess", 0}, {"backbone", backbone}, {"fpn", fpn},      {"rpn", rpn},
                {"roi_align", 0},  {"box_head", box_head}, {"postprocess", 0}};
    for (int i = 0; i < n; i++) {
        g_assert_cmpstr(times[i].name, ==, want[i].name);
        /* gflop = 2 x MACs / 1e9 in double: the same operations give the same
         * rounding, a relative 1e-12 leaves room for another order of sums */
        g_assert_cmpfloat_with_epsilon(times[i].gflop, 2.0 * want[i].macs / 1e9,
                                       1e-12 * MAX(times[i].gflop, 1.0));
    }
    /* ResNet-18 to layer3 at 256x320: 2.29 G multiply-adds, 4.58 GFLOP */
    g_assert_cmpfloat(times[1].gflop, >, 4.5);
    g_assert_cmpfloat(times[1].gflop, <, 4.7);

    vd_result_clear(&r);
    vd_context_free(ctx);
    vd_model_unref(model);
    g_free(pixels);
}

/* vd_result.n_nonfinite on the CPU: the RPN head's and the box head's
 * infinite and NaN outputs, exactly; and the run status of a backend without
 * graphs. */
/* The backbone's count with grouped (depthwise) convolutions and the
 * squeeze-and-excitation's products: the tiny MobileNetV3 fixture (mnv3_tiny():
 * stem 3x3 stride 2 to 8 channels; block 0: 3x3 depthwise on 8 channels (no
 * expansion: 8 in, 8 expanded), 1x1 projection to 8; block 1: 1x1 expansion to 16,
 * 5x5 depthwise stride 2, SE 16 -> 8 -> 16, 1x1 projection to 8; the last 1x1 conv
 * to 16) on a 128x96 frame, not resized (min_size 96, max_size 160). */
static vd_model *mnv3_tiny_model(const char *arch);

static void test_stage_gflop_grouped(void)
{
    vd_model *model = mnv3_tiny_model(NULL);
    vd_context *ctx = cpu_context(model, 0.05f);
    guint8 *pixels = make_rgb(128, 96);
    vd_image image = vd_image_rgb(pixels, 128, 96);
    vd_result r = detect_ok(ctx, &image);

    double backbone = conv_macs(48, 64, 8, 3, 3);                               /* stem */
    backbone += conv_macs(48, 64, 8, 1, 3) + conv_macs(48, 64, 8, 8, 1);        /* block 0 */
    backbone += conv_macs(48, 64, 16, 8, 1) + conv_macs(24, 32, 16, 1, 5) +     /* block 1 */
                2.0 * 16 * 8 + conv_macs(24, 32, 8, 16, 1);
    backbone += conv_macs(24, 32, 16, 8, 1); /* last */
    vd_stage_stats times[VD_MAX_STAGES];
    g_assert_cmpint(vd_context_stage_stats(ctx, times, VD_MAX_STAGES), >=, 2);
    g_assert_cmpstr(times[1].name, ==, "backbone");
    g_assert_cmpfloat_with_epsilon(times[1].gflop, 2.0 * backbone / 1e9, 1e-12);

    vd_result_clear(&r);
    vd_context_free(ctx);
    vd_model_unref(model);
    g_free(pixels);
}

static void test_nonfinite_count(void)
{
    guint8 *pixels = make_rgb(100, 75); /* 960 locations, one anchor each */
    vd_image image = vd_image_rgb(pixels, 100, 75);

    vd_model *clean = tiny_model_with_nan(NULL, 0);
    vd_context *ctx = cpu_context(clean, 0.0f);
    vd_run_status status;
    vd_context_run_status(ctx, &status);
    g_assert_cmpint(status.graphs, ==, VD_GRAPHS_NOT_APPLICABLE);
    g_assert_cmpstr(status.graphs_reason, ==, "");
    g_assert_cmpstr(vd_graphs_state_name(status.graphs), ==, "not applicable");
    vd_result r = detect_ok(ctx, &image);
    g_assert_cmpint(r.n_nonfinite, ==, 0);
    g_assert_cmpint(r.n_detections, >, 0);
    vd_context_run_status(ctx, &status);
    g_assert_cmpint(status.graphs, ==, VD_GRAPHS_NOT_APPLICABLE);
    vd_result_clear(&r);
    vd_context_free(ctx);
    vd_model_unref(clean);

    /* the objectness of every location: NaN logits fill the top-k and are
     * dropped (torchvision's order), so no proposals and nothing else counted */
    vd_model *model = tiny_model_with_nan("rpn.head.cls_logits.weight", 8);
    ctx = cpu_context(model, 0.0f);
    r = detect_ok(ctx, &image);
    g_assert_cmpint(r.n_nonfinite, ==, 960);
    g_assert_cmpint(r.n_detections, ==, 0);
    vd_result_clear(&r);
    vd_context_free(ctx);
    vd_model_unref(model);

    /* one class logit of every proposal (the background's first weight) */
    model = tiny_model_with_nan("roi_heads.box_predictor.cls_score.weight", 1);
    ctx = cpu_context(model, 0.0f);
    observed o = {g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free)};
    vd_context_set_observer(ctx, observe, &o);
    r = detect_ok(ctx, &image);
    int n_props = atoi(g_hash_table_lookup(o.shapes, "proposals"));
    g_assert_cmpint(n_props, >, 0);
    g_assert_cmpint(r.n_nonfinite, ==, n_props);
    g_assert_cmpint(r.n_detections, ==, 0); /* a NaN row softmaxes to NaN */
    vd_result_clear(&r);
    g_hash_table_unref(o.shapes);
    vd_context_free(ctx);
    vd_model_unref(model);
    g_free(pixels);
}

static void expect_detect_error(vd_context *ctx, const vd_image *image, const char *needle)
{
    vd_result r = {0};
    GError *error = NULL;
    g_assert_false(vd_detect(ctx, image, 1, &r, &error));
    g_assert_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT);
    if (g_test_verbose())
        g_test_message("error: %s", error->message);
    g_assert_nonnull(strstr(error->message, needle));
    g_assert_null(r.detections);
    g_error_free(error);
}

static void test_bad_images(void)
{
    vd_model *model = tiny_model();
    vd_context *ctx = cpu_context(model, 0.0f);
    guint8 *pixels = make_rgb(32, 32);
    vd_image good = vd_image_rgb(pixels, 32, 32), bad;
    GError *error = NULL;

    bad = good;
    bad.width = 0;
    expect_detect_error(ctx, &bad, "0");
    bad = good;
    bad.height = -5;
    expect_detect_error(ctx, &bad, "-5");
    bad = good;
    bad.planes[0] = NULL;
    expect_detect_error(ctx, &bad, "plane");
    bad = good;
    bad.strides[0] = 3 * 32 - 1;
    expect_detect_error(ctx, &bad, "stride");
    bad = good;
    bad.format = (vd_pixel_format)99;
    expect_detect_error(ctx, &bad, "format");

    vd_result r = {0};
    g_assert_false(vd_detect(ctx, &good, 0, &r, &error));
    g_assert_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT);
    g_clear_error(&error);

    /* still usable after errors */
    vd_result ok = detect_ok(ctx, &good);
    vd_result_clear(&ok);
    vd_context_free(ctx);
    vd_model_unref(model);
    g_free(pixels);
}

static void test_device_and_precision(void)
{
    vd_model *model = tiny_model();
    vd_context_params params = vd_context_default_params();
    GError *error = NULL;

    /* fp16 on the CPU: where its layers run XNNPACK with fp16 kernels (and, on
     * aarch64, the FP16 arithmetic), else refused naming fp16 */
    params.device = VD_DEVICE_CPU;
    params.precision = VD_PRECISION_FP16;
    vd_context *f16 = vd_context_new(model, &params, &error);
    if (fx_cpu_runs_fp16(NULL)) {
        g_assert_no_error(error);
        g_assert_cmpint(vd_context_precision(f16), ==, VD_PRECISION_FP16);
        vd_context_free(f16);
    } else {
        g_assert_null(f16);
        g_assert_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED);
        g_assert_nonnull(strstr(error->message, "fp16"));
        g_clear_error(&error);
    }

    /* auto: the GPU when one is usable, else the CPU; never an error for lack of one */
    params = vd_context_default_params();
    vd_context *ctx = vd_context_new(model, &params, &error);
    g_assert_no_error(error);
    g_assert_nonnull(ctx);
#ifdef HAVE_CUDA
    GError *why = NULL;
    gboolean gpu = vd_cuda_available(0, &why);
#else
    gboolean gpu = FALSE;
#endif
    g_assert_cmpint(vd_context_device(ctx), ==, gpu ? VD_DEVICE_CUDA : VD_DEVICE_CPU);
    /* on the CPU, the reason says why not CUDA: the engine's own words */
    if (gpu) {
        g_assert_null(vd_context_fallback_reason(ctx));
    } else {
        g_assert_nonnull(vd_context_fallback_reason(ctx));
#ifdef HAVE_CUDA
        g_assert_cmpstr(vd_context_fallback_reason(ctx), ==, why->message);
        g_clear_error(&why);
#else
        g_assert_nonnull(strstr(vd_context_fallback_reason(ctx), "no CUDA backend"));
#endif
    }
    vd_context_free(ctx);

    /* cuda without a device (or without the backend) is an error naming the cause */
    if (!gpu) {
        params.device = VD_DEVICE_CUDA;
        g_assert_null(vd_context_new(model, &params, &error));
        g_assert_nonnull(error);
        g_assert_true(error->domain == VD_ERROR);
        g_assert_true(error->code == VD_ERROR_DEVICE || error->code == VD_ERROR_UNSUPPORTED);
        g_assert_true(strstr(error->message, "CUDA") != NULL ||
                      strstr(error->message, "cuda") != NULL);
        if (g_test_verbose())
            g_test_message("cuda error: %s", error->message);
        g_clear_error(&error);
    }
    vd_model_unref(model);
}

/* MobileNetV3-Large models run on the CPU and on CUDA: device=cuda is refused
 * only for want of a usable GPU (or of a CUDA build), auto runs on CUDA where a
 * GPU is usable, else on the CPU with that reason; mobilenet_v3_small stays
 * refused by the CUDA backend by name, before any device check (UNSUPPORTED;
 * auto falls back to the CPU with that reason where a GPU is usable). */
static vd_model *mnv3_tiny_model(const char *arch)
{
    mnv3_arch a = mnv3_tiny();
    fixture *fx = fx_mnv3(&a);
    if (arch != NULL)
        fx_config_replace(fx, "\"mobilenet_v3_large\"", arch);
    fx_randomize(fx, 7);
    return fx_load_ok(fx);
}

/* The CUDA backend's own check that MobileNetV3-Large's features chain as it runs
 * them (every block's expand, depthwise, SE and project; the last conv) comes
 * before the device: on torchvision's architecture (the 320 builder's config;
 * the 800 builder's tensors are the same) a machine without a GPU says the device
 * is missing, never that the shapes do not chain; with a GPU the context is made. */
static void test_mobilenet_v3_large_cuda_shapes(void)
{
#ifdef HAVE_CUDA
    gboolean gpu = vd_cuda_available(0, NULL);
    {
        mnv3_arch a = mnv3_large(TRUE);
        fixture *fx = fx_mnv3(&a);
        fx_randomize(fx, 3);
        vd_model *model = fx_load_ok(fx);
        GError *error = NULL;
        vd_context_params params = vd_context_default_params();
        params.device = VD_DEVICE_CUDA;
        vd_context *ctx = vd_context_new(model, &params, &error);
        if (gpu) {
            g_assert_no_error(error);
            g_assert_nonnull(ctx);
        } else {
            g_assert_null(ctx);
            g_assert_error(error, VD_ERROR, VD_ERROR_DEVICE);
            g_clear_error(&error);
        }
        vd_context_free(ctx);
        vd_model_unref(model);
    }
#else
    g_test_skip("no CUDA backend in this build");
#endif
}

/* Both resize rules of a model file ("transform.resize_arithmetic" torch1, the default,
 * and torch2, what torch 2.x exports) run on CUDA: the CUDA backend's supports hook
 * takes either (it needs no device), device=cuda is refused only for want of a usable
 * GPU (VD_ERROR_DEVICE, never the rule) and makes the context where one is, auto
 * falls back to the CPU only for that reason. Every model runs on the CPU too. */
/* @model on device=cuda: a CUDA context where there is a GPU; elsewhere refused
 * for want of the device (VD_ERROR_DEVICE, the message without @not_the_cause),
 * or as unsupported by a build without CUDA. */
static void assert_cuda_context(vd_model *model, const char *not_the_cause)
{
    vd_context_params params = vd_context_default_params();
    GError *error = NULL;
    gboolean gpu = FALSE;
#ifdef HAVE_CUDA
    gpu = vd_cuda_available(0, NULL);
#endif
    params.device = VD_DEVICE_CUDA;
    vd_context *cuda = vd_context_new(model, &params, &error);
    if (gpu) {
        g_assert_no_error(error);
        g_assert_cmpint(vd_context_device(cuda), ==, VD_DEVICE_CUDA);
        vd_context_free(cuda);
        return;
    }
    g_assert_null(cuda);
#ifdef HAVE_CUDA
    g_assert_error(error, VD_ERROR, VD_ERROR_DEVICE);
    g_assert_null(strstr(error->message, not_the_cause));
#else
    g_assert_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED);
#endif
    if (g_test_verbose())
        g_test_message("cuda error: %s", error->message);
    g_clear_error(&error);
}

static void test_cuda_resize_arithmetic(void)
{
    static const char *const rules[] = {"\"torch1\"", "\"torch2\""};
    static const vd_resize_arithmetic expected[] = {VD_RESIZE_ARITHMETIC_TORCH1,
                                                    VD_RESIZE_ARITHMETIC_TORCH2};
    for (size_t i = 0; i < G_N_ELEMENTS(rules); i++) {
        tiny_arch a = tiny_basic();
        fixture *fx = fx_tiny(&a);
        gchar *with = g_strdup_printf("\"size_divisible\":32,\"resize_arithmetic\":%s", rules[i]);
        fx_config_replace(fx, "\"size_divisible\":32", with);
        g_free(with);
        fx_randomize(fx, 7);
        vd_model *model = fx_load_ok(fx);
        g_assert_cmpint(model->config.resize_arithmetic, ==, expected[i]);
        GError *error = NULL;
        vd_context_params params = vd_context_default_params();
#ifdef HAVE_CUDA
        gboolean gpu = vd_cuda_available(0, NULL);
        g_assert_true(vd_cuda_backend.supports(model, &params, &error));
        g_assert_no_error(error);
        assert_cuda_context(model, "resize_arithmetic");
        params = vd_context_default_params();
        vd_context *ctx = vd_context_new(model, &params, &error);
        g_assert_no_error(error);
        g_assert_cmpint(vd_context_device(ctx), ==, gpu ? VD_DEVICE_CUDA : VD_DEVICE_CPU);
        if (!gpu)
            g_assert_null(strstr(vd_context_fallback_reason(ctx), "resize_arithmetic"));
        vd_context_free(ctx);
#endif
        params = vd_context_default_params();
        params.device = VD_DEVICE_CPU;
        vd_context *cpu = vd_context_new(model, &params, &error);
        g_assert_no_error(error);
        vd_context_free(cpu);
        vd_model_unref(model);
    }
}

/* A dense detector's result on a @w x @h frame at threshold 0: 1 to 100 detections
 * (the cap), none non-finite, labels in @first_label..@n_classes - 1, boxes in the
 * frame, scores sorted */
static void assert_dense_result(const vd_result *r, int first_label, int n_classes, int w, int h)
{
    g_assert_cmpint(r->n_detections, >, 0);
    g_assert_cmpint(r->n_detections, <=, 100);
    g_assert_cmpint(r->n_nonfinite, ==, 0);
    for (int i = 0; i < r->n_detections; i++) {
        const vd_detection *d = &r->detections[i];
        g_assert_cmpint(d->label, >=, first_label);
        g_assert_cmpint(d->label, <, n_classes);
        g_assert_cmpfloat(d->x1, >=, 0.0f);
        g_assert_cmpfloat(d->x2, <=, (float)w);
        g_assert_cmpfloat(d->y1, >=, 0.0f);
        g_assert_cmpfloat(d->y2, <=, (float)h);
        if (i > 0)
            g_assert_cmpfloat(d->score, <=, r->detections[i - 1].score);
    }
}

/* vd_context_new() refuses @model with @params as unsupported, its message naming
 * @name and @also (unless NULL) */
static void assert_context_refused(vd_model *model, const vd_context_params *params,
                                   const char *name, const char *also)
{
    GError *error = NULL;
    g_assert_null(vd_context_new(model, params, &error));
    g_assert_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED);
    g_assert_nonnull(strstr(error->message, name));
    if (also != NULL)
        g_assert_nonnull(strstr(error->message, also));
    g_clear_error(&error);
}

/* retinanet_resnet50_fpn (engine/RETINANET.md), the one-stage path, on the tiny
 * fixture (@data: 0; 1: v2's, P6 from C5, GroupNorm heads; 2: FCOS's): the CPU runs it
 * (threshold 0: every candidate the per-level top-k keeps,
 * then the cap of 100), scores sorted, labels in 0..K-1 (RetinaNet's classes have
 * no background column), boxes in the frame, the same frame twice the same result;
 * int8 on a model without calibration is refused (test_int8.c runs the calibrated
 * one), a calibrating context is made; the CUDA backend
 * refuses it as unsupported naming it (no CUDA feature before the backend has run
 * on a GPU), and device=auto runs it on the CPU. */
static void test_retinanet(gconstpointer data)
{
    int kind = GPOINTER_TO_INT(data); /* 0 v1, 1 v2, 2 FCOS */
    fixture *fx = kind == 2 ? fx_tiny_fcos(2) : fx_tiny_retinanet(2, kind == 1);
    const char *family = kind == 2 ? "fcos" : "retinanet";
    fx_randomize(fx, 11);
    vd_model *model = fx_load_ok(fx);
    g_assert_nonnull(strstr(vd_model_description(model), family));
    g_assert_cmpint(model->config.detector, ==, VD_DETECTOR_ONE_STAGE);
    g_assert_cmpint(model->config.n_fpn_levels, ==, 5);

    vd_context *ctx = cpu_context(model, 0.0f);
    guint8 *pixels = make_rgb(80, 60);
    vd_image image = vd_image_rgb(pixels, 80, 60);
    vd_result r = detect_ok(ctx, &image), again = detect_ok(ctx, &image);
    assert_dense_result(&r, 0, 3, 80, 60);
    assert_same_result(&r, &again);
    {
        /* the dense head's convolutions are the box_head stage's arithmetic (no
         * RPN); P6 and P7 are the FPN's; decoding counts none */
        vd_stage_stats times[VD_MAX_STAGES];
        int n = vd_context_stage_stats(ctx, times, VD_MAX_STAGES);
        const char *expected[] = {"preprocess", "backbone", "fpn", "box_head", "postprocess"};
        g_assert_cmpint(n, ==, G_N_ELEMENTS(expected));
        for (int i = 0; i < n; i++) {
            g_assert_cmpstr(times[i].name, ==, expected[i]);
            if (i == 0 || i == 4)
                g_assert_cmpfloat(times[i].gflop, ==, 0.0);
            else
                g_assert_cmpfloat(times[i].gflop, >, 0.0);
        }
    }
    vd_result_clear(&r);
    vd_result_clear(&again);
    vd_context_free(ctx);

    vd_context_params params = vd_context_default_params();
    GError *error = NULL;
    params.device = VD_DEVICE_CPU;
    params.precision = VD_PRECISION_INT8;
    assert_context_refused(model, &params, "int8", NULL);
    params.precision = VD_PRECISION_FP32;
    params.calibrate = TRUE;
    ctx = vd_context_new(model, &params, &error);
    g_assert_no_error(error);
    vd_context_free(ctx);

#ifdef HAVE_CUDA
    params = vd_context_default_params();
    g_assert_false(vd_cuda_backend.supports(model, &params, &error));
    g_assert_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED);
    g_assert_nonnull(strstr(error->message, "one-stage detectors ("));
    g_assert_nonnull(strstr(error->message, family));
    g_clear_error(&error);
#endif
    params = vd_context_default_params();
    ctx = vd_context_new(model, &params, &error);
    g_assert_no_error(error);
    g_assert_cmpint(vd_context_device(ctx), ==, VD_DEVICE_CPU);
    vd_context_free(ctx);
    g_free(pixels);
    vd_model_unref(model);
}

/* SSDlite (engine/SSD.md) on the tiny fixture: the CPU runs it at its fixed 64x64
 * whatever the frame's size (threshold 0: every candidate of the per-class top-k,
 * then the cap of 100), scores sorted, labels 1..K-1 (the softmax's background
 * column is never a detection), boxes in the frame, the same frame twice the same
 * result, a frame of another size resized to the same input, a fixed size that is
 * not square; on XNNPACK's layers each of those frames' tensors match oneDNN's
 * (assert_xnn_tensors), and a 1x1 max-pool, which XNNPACK does not run, is refused at context
 * creation naming the layer (oneDNN's layers run it); int8 and calibration
 * are refused naming SSD; the CUDA backend refuses it naming it, and device=auto
 * runs it on the CPU. */
/* On XNNPACK's layers (@ctx), @model's feature maps, default boxes and heads'
 * outputs for @image are oneDNN's to float32's summation order: within 1e-4 of
 * each one's largest magnitude (the parity tests' heads are within 3e-5 of
 * torchvision's: engine/SSD.md). The detections are not compared: the fixture's
 * random scores are near ties everywhere, which its NMS then breaks either way. */
static void assert_xnn_tensors(vd_model *model, vd_context *ctx, const vd_image *image)
{
    GHashTable *got = frame_tensors(ctx, image), *ref = onednn_tensors(model, image);
    g_assert_nonnull(g_hash_table_lookup(ref, "cls_logits"));
    assert_tensors_match(ref, got, 1e-4);
    g_hash_table_unref(got);
    g_hash_table_unref(ref);
}

static void test_ssdlite(void)
{
    fixture *fx = fx_tiny_ssdlite();
    fx_randomize(fx, 13);
    vd_model *model = fx_load_ok(fx);
    g_assert_cmpint(model->config.detector, ==, VD_DETECTOR_SSD);

    vd_context *ctx = cpu_context(model, 0.0f);
    /* on XNNPACK's layers (a NEON-only aarch64 CPU, VD_CPU_LAYERS=xnnpack) too:
     * the dilated convolution, ReLU6 and the ceil_mode max-pool are its operators */
    g_test_message("%s", vd_context_describe(ctx));
    gboolean xnn = strstr(vd_context_describe(ctx), "layers XNNPACK") != NULL;
    static const int sizes[2][2] = {{80, 60}, {33, 97}};
    for (int s = 0; s < 2; s++) {
        int w = sizes[s][0], h = sizes[s][1];
        guint8 *pixels = make_rgb(w, h);
        vd_image image = vd_image_rgb(pixels, w, h);
        vd_result r = detect_ok(ctx, &image), again = detect_ok(ctx, &image);
        assert_dense_result(&r, 1, 3, w, h);
        assert_same_result(&r, &again);
        if (xnn)
            assert_xnn_tensors(model, ctx, &image);
        vd_result_clear(&r);
        vd_result_clear(&again);
        g_free(pixels);
    }
    vd_context_free(ctx);

    /* a fixed size that is not square (width 72, height 48): the ceil_mode max-pool
     * pads the bottom (6 -> 3 rows) and not the right (9 -> 4 columns) */
    fixture *wide = fx_tiny_ssdlite();
    fx_randomize(wide, 13);
    fx_config_replace(wide, "\"fixed_size\":[64,64]", "\"fixed_size\":[72,48]");
    vd_model *wide_model = fx_load_ok(wide);
    ctx = cpu_context(wide_model, 0.0f);
    guint8 *wide_pixels = make_rgb(80, 60);
    vd_image wide_image = vd_image_rgb(wide_pixels, 80, 60);
    vd_result wr = detect_ok(ctx, &wide_image);
    g_assert_cmpint(wr.n_detections, >, 0);
    if (xnn) /* XNNPACK's ceil_mode padding on the bottom only */
        assert_xnn_tensors(wide_model, ctx, &wide_image);
    vd_result_clear(&wr);
    vd_context_free(ctx);
    vd_model_unref(wide_model);

    /* a residual block whose depthwise convolution has stride 2: its output is not
     * its input's size, refused at the first frame naming the layer */
    fixture *strided = fx_tiny_ssdlite();
    fx_config_replace(strided,
                      "\"name\":\"backbone.features.0.1.block.0.0\",\"in_channels\":8,"
                      "\"out_channels\":8,\"kernel\":3,\"stride\":1",
                      "\"name\":\"backbone.features.0.1.block.0.0\",\"in_channels\":8,"
                      "\"out_channels\":8,\"kernel\":3,\"stride\":2");
    vd_model *strided_model = fx_load_ok(strided);
    ctx = cpu_context(strided_model, 0.0f);
    vd_result sr = {0};
    GError *error = NULL;
    g_assert_false(vd_detect(ctx, &wide_image, 1, &sr, &error));
    g_assert_error(error, VD_ERROR, VD_ERROR_FORMAT);
    g_assert_nonnull(strstr(error->message, "backbone.features.0.1.block.2.0"));
    g_clear_error(&error);
    vd_context_free(ctx);
    vd_model_unref(strided_model);
    g_free(wide_pixels);

    /* a max-pool of a 1x1 window (extra 1's, stride 2: a subsampling) runs on
     * oneDNN's layers; XNNPACK's refuse it at context creation, naming the layer */
    fixture *subsample = fx_tiny_ssdlite();
    fx_randomize(subsample, 13);
    fx_config_replace(subsample, "\"name\":\"backbone.extra.1.0\",\"kernel\":3",
                      "\"name\":\"backbone.extra.1.0\",\"kernel\":1");
    vd_model *subsample_model = fx_load_ok(subsample);
    if (xnn) {
        vd_context_params cpu = vd_context_default_params();
        cpu.device = VD_DEVICE_CPU;
        g_assert_null(vd_context_new(subsample_model, &cpu, &error));
        g_assert_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED);
        g_test_message("refused on XNNPACK's layers: %s", error->message);
        g_assert_nonnull(strstr(error->message, "backbone.extra.1.0"));
        g_assert_nonnull(strstr(error->message, "1x1"));
        g_assert_nonnull(strstr(error->message, "XNNPACK"));
        g_clear_error(&error);
    } else {
        ctx = cpu_context(subsample_model, 0.0f);
        guint8 *pixels = make_rgb(80, 60);
        vd_image image = vd_image_rgb(pixels, 80, 60);
        vd_result r = detect_ok(ctx, &image);
        assert_dense_result(&r, 1, 3, 80, 60);
        vd_result_clear(&r);
        g_free(pixels);
        vd_context_free(ctx);
    }
    vd_model_unref(subsample_model);

    vd_context_params params = vd_context_default_params();
    params.device = VD_DEVICE_CPU;
    params.precision = VD_PRECISION_INT8;
    assert_context_refused(model, &params, "ssdlite", "MobileNetV3 has no int8 plan");
    params.precision = VD_PRECISION_FP32;
    params.calibrate = TRUE;
    assert_context_refused(model, &params, "ssdlite", NULL);

#ifdef HAVE_CUDA
    params = vd_context_default_params();
    g_assert_false(vd_cuda_backend.supports(model, &params, &error));
    g_assert_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED);
    g_assert_nonnull(strstr(error->message, "ssdlite"));
    g_clear_error(&error);
#endif
    params = vd_context_default_params();
    ctx = vd_context_new(model, &params, &error);
    g_assert_no_error(error);
    g_assert_cmpint(vd_context_device(ctx), ==, VD_DEVICE_CPU);
    vd_context_free(ctx);
    vd_model_unref(model);
}

static void test_mobilenet_v3_devices(void)
{
    vd_model *model = mnv3_tiny_model(NULL);
    vd_context_params params = vd_context_default_params();
    GError *error = NULL;
    gboolean gpu = FALSE;
#ifdef HAVE_CUDA
    gpu = vd_cuda_available(0, NULL);
#endif

    /* the device is what is missing, not the architecture */
    assert_cuda_context(model, "does not support");
    vd_context *ctx = vd_context_new(model, &params, &error);
    g_assert_no_error(error);
    g_assert_cmpint(vd_context_device(ctx), ==, gpu ? VD_DEVICE_CUDA : VD_DEVICE_CPU);
    if (!gpu)
        g_assert_nonnull(vd_context_fallback_reason(ctx));
    guint8 *pixels = g_malloc0(120 * 90 * 3);
    for (int i = 0; i < 120 * 90 * 3; i++)
        pixels[i] = (guint8)(i * 37 % 251);
    vd_image image = vd_image_rgb(pixels, 120, 90);
    vd_result result = detect_ok(ctx, &image);
    g_assert_cmpint(result.n_detections, >=, 0);
    vd_result_clear(&result);
    vd_context_free(ctx);
    vd_model_unref(model);

    /* mobilenet_v3_small: refused by name */
    model = mnv3_tiny_model("\"mobilenet_v3_small\"");
    params = vd_context_default_params();
    params.device = VD_DEVICE_CUDA;
    g_assert_null(vd_context_new(model, &params, &error));
    g_assert_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED);
#ifdef HAVE_CUDA
    /* the architecture is checked before the device */
    g_assert_nonnull(strstr(error->message, "CUDA backend does not support"));
    g_assert_nonnull(strstr(error->message, "mobilenet_v3_small"));
#endif
    g_clear_error(&error);
    params = vd_context_default_params();
    ctx = vd_context_new(model, &params, &error);
    g_assert_no_error(error);
    g_assert_cmpint(vd_context_device(ctx), ==, VD_DEVICE_CPU);
    g_assert_nonnull(vd_context_fallback_reason(ctx));
    if (gpu)
        g_assert_nonnull(strstr(vd_context_fallback_reason(ctx), "mobilenet_v3_small"));
    result = detect_ok(ctx, &image);
    g_assert_cmpint(result.n_detections, >=, 0);
    vd_result_clear(&result);
    g_free(pixels);
    vd_context_free(ctx);
    vd_model_unref(model);
}

static void test_masks(void)
{
    for (int norm = 0; norm < 2; norm++) {
        fixture *fx = fx_tiny_mask(norm);
        fx_randomize(fx, 7);
        vd_model *model = fx_load_ok(fx);
        GError *error = NULL;
        g_assert_true(vd_model_has_masks(model));
        vd_context *ctx = cpu_context(model, 0.0f);
        guint8 *pixels = g_malloc0(120 * 90 * 3);
        for (int i = 0; i < 120 * 90 * 3; i++)
            pixels[i] = (guint8)(i * 37 % 251);
        vd_image image = vd_image_rgb(pixels, 120, 90);
        mask_probs_seen = mask_logits_seen = mask_features_seen = 0;
        mask_sigmoid_err = 0.0;
        vd_context_set_observer(ctx, count_mask_probs, NULL);
        vd_result r = detect_ok(ctx, &image);
        vd_context_set_observer(ctx, NULL, NULL);
        g_assert_cmpint(r.n_detections, >, 0);
        {
            /* the mask head's arithmetic, by hand (mask_tiny(): 8 FPN channels
             * pooled 4x4; 3x3 convolutions to 6 and 5, the 2x2 stride-2 transposed
             * convolution to 4 on 8x8, each input pixel meeting its 4 taps once;
             * the 1x1 logits to 3) over the rows run: the detections rounded up to 16 */
            int rows = (r.n_detections + 15) / 16 * 16;
            double per_row = 16.0 * 6 * 8 * 9 + 16.0 * 5 * 6 * 9 + 16.0 * 4 * 5 * 4 + 64.0 * 3 * 4;
            vd_stage_stats times[VD_MAX_STAGES];
            int n = vd_context_stage_stats(ctx, times, VD_MAX_STAGES);
            g_assert_cmpint(n, ==, 9);
            g_assert_cmpstr(times[7].name, ==, "mask_head");
            g_assert_cmpfloat_with_epsilon(times[7].gflop, 2.0 * rows * per_row / 1e9, 1e-12);
            g_assert_cmpstr(times[8].name, ==, "paste_masks");
            g_assert_cmpfloat(times[8].gflop, ==, 0.0);
        }
        g_assert_cmpint(mask_probs_seen, ==, r.n_detections);
        g_assert_cmpint(mask_features_seen, ==, r.n_detections);
        g_assert_cmpfloat(mask_sigmoid_err, <, 1e-6);
        g_clear_pointer(&mask_logits_copy, g_free);
        for (int i = 0; i < r.n_detections; i++) {
            const vd_detection *d = &r.detections[i];
            g_assert_nonnull(d->mask);
            g_assert_cmpint(d->mask_x, >=, 0);
            g_assert_cmpint(d->mask_y, >=, 0);
            g_assert_cmpint(d->mask_width, >, 0);
            g_assert_cmpint(d->mask_height, >, 0);
            g_assert_cmpint(d->mask_x + d->mask_width, <=, 120);
            g_assert_cmpint(d->mask_y + d->mask_height, <=, 90);
            /* the box's pixels, clipped to the frame, are inside the rectangle */
            g_assert_cmpint(d->mask_x, <=, (int)floorf(d->x1));
            g_assert_cmpint(d->mask_y, <=, (int)floorf(d->y1));
            g_assert_cmpint(d->mask_x + d->mask_width, >=, MIN((int)ceilf(d->x2), 120));
            g_assert_cmpint(d->mask_y + d->mask_height, >=, MIN((int)ceilf(d->y2), 90));
        }
        vd_result again = detect_ok(ctx, &image);
        g_assert_true(vd_submit(ctx, &image, 1, &error));
        g_assert_no_error(error);
        vd_result async;
        g_assert_true(vd_collect(ctx, &async, 1, &error));
        g_assert_no_error(error);
        const vd_result *others[] = {&again, &async};
        for (int k = 0; k < 2; k++) {
            g_assert_cmpint(others[k]->n_detections, ==, r.n_detections);
            for (int i = 0; i < r.n_detections; i++) {
                const vd_detection *a = &r.detections[i], *b = &others[k]->detections[i];
                g_assert_cmpint(a->mask_x, ==, b->mask_x);
                g_assert_cmpint(a->mask_y, ==, b->mask_y);
                g_assert_cmpint(a->mask_width, ==, b->mask_width);
                g_assert_cmpint(a->mask_height, ==, b->mask_height);
                g_assert_cmpmem(a->mask, (gsize)a->mask_width * a->mask_height, b->mask,
                                (gsize)b->mask_width * b->mask_height);
            }
        }
        vd_result_clear(&r);
        g_assert_null(r.detections);
        g_assert_cmpint(r.n_detections, ==, 0);
        vd_result_clear(&r); /* twice is harmless */
        vd_result_clear(&again);
        vd_result_clear(&async);
        g_free(pixels);
        vd_context_free(ctx);

        /* the CUDA backend has the mask branch (test-gpu-engine compares it with
         * the CPU on a GPU): only the lack of a device (or of the backend)
         * refuses it, and auto takes it where a GPU is usable */
        vd_context_params params = vd_context_default_params();
        params.device = VD_DEVICE_CUDA;
        vd_context *gpu_ctx = vd_context_new(model, &params, &error);
#ifdef HAVE_CUDA
        gboolean gpu = vd_cuda_available(0, NULL);
        if (gpu) {
            g_assert_no_error(error);
            g_assert_cmpint(vd_context_device(gpu_ctx), ==, VD_DEVICE_CUDA);
            vd_context_free(gpu_ctx);
        } else {
            g_assert_null(gpu_ctx);
            g_assert_error(error, VD_ERROR, VD_ERROR_DEVICE);
            g_assert_null(strstr(error->message, "mask"));
        }
#else
        gboolean gpu = FALSE;
        g_assert_null(gpu_ctx);
        g_assert_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED);
#endif
        g_clear_error(&error);
        params = vd_context_default_params();
        ctx = vd_context_new(model, &params, &error);
        g_assert_no_error(error);
        g_assert_cmpint(vd_context_device(ctx), ==, gpu ? VD_DEVICE_CUDA : VD_DEVICE_CPU);
        vd_context_free(ctx);
        vd_model_unref(model);
    }
    /* a model without masks gives none */
    vd_model *plain = tiny_model();
    vd_context *ctx = cpu_context(plain, 0.0f);
    guint8 *pixels = g_malloc0(120 * 90 * 3);
    vd_image image = vd_image_rgb(pixels, 120, 90);
    vd_result r = detect_ok(ctx, &image);
    for (int i = 0; i < r.n_detections; i++) {
        g_assert_null(r.detections[i].mask);
        g_assert_cmpint(r.detections[i].mask_width | r.detections[i].mask_height |
                            r.detections[i].mask_x | r.detections[i].mask_y,
                        ==, 0);
    }
    vd_result_clear(&r);
    g_free(pixels);
    vd_context_free(ctx);
    vd_model_unref(plain);
}

/* Keypoint R-CNN (engine/KEYPOINTRCNN.md) on the CPU: every detection carries the
 * model's keypoints, the observed resized-image points rescaled to the frame as
 * resize_keypoints does, the same on a second run and through submit/collect.
 * CUDA refuses the family (VD_ERROR_UNSUPPORTED naming it; the supports hook needs
 * no GPU) and device=auto falls back to the CPU for that reason. */
static float *kp_points_copy;
static int kp_points_seen, kp_heatmaps_seen, kp_features_seen;

static void count_keypoints(const char *name, const float *data, const int64_t *shape, int ndim,
                            void *user_data)
{
    (void)user_data;
    if (strcmp(name, "keypoint_features") == 0) {
        g_assert_cmpint(ndim, ==, 4);
        g_assert_cmpint(shape[2], ==, 4);
        kp_features_seen = (int)shape[0];
    } else if (strcmp(name, "keypoint_heatmaps") == 0) {
        g_assert_cmpint(ndim, ==, 4);
        g_assert_cmpint(shape[1], ==, 3);
        g_assert_cmpint(shape[2], ==, 16);
        g_assert_cmpint(shape[3], ==, 16);
        kp_heatmaps_seen = (int)shape[0];
    } else if (strcmp(name, "keypoints") == 0) {
        g_assert_cmpint(ndim, ==, 3);
        g_assert_cmpint(shape[1], ==, 3);
        g_assert_cmpint(shape[2], ==, 3);
        kp_points_seen = (int)shape[0];
        g_free(kp_points_copy);
        kp_points_copy = g_memdup2(data, (gsize)shape[0] * 9 * sizeof(float));
    }
}

static void test_keypoints(void)
{
    tiny_arch a = tiny_basic();
    keypoint_arch k = keypoint_tiny();
    fixture *fx = fx_keypoint(&a, &k);
    fx_randomize(fx, 7);
    vd_model *model = fx_load_ok(fx);
    GError *error = NULL;
    g_assert_cmpint(vd_model_num_keypoints(model), ==, 3);
    vd_context *ctx = cpu_context(model, 0.0f);
    guint8 *pixels = g_malloc0(120 * 90 * 3);
    for (int i = 0; i < 120 * 90 * 3; i++)
        pixels[i] = (guint8)(i * 37 % 251);
    vd_image image = vd_image_rgb(pixels, 120, 90);
    kp_points_seen = kp_heatmaps_seen = kp_features_seen = 0;
    vd_context_set_observer(ctx, count_keypoints, NULL);
    vd_result r = detect_ok(ctx, &image);
    vd_context_set_observer(ctx, NULL, NULL);
    g_assert_cmpint(r.n_detections, >, 0);
    g_assert_cmpint(kp_points_seen, ==, r.n_detections);
    g_assert_cmpint(kp_heatmaps_seen, ==, r.n_detections);
    g_assert_cmpint(kp_features_seen, ==, r.n_detections);
    {
        /* the keypoint head's convolutions and transposed convolution count; the
         * heatmaps' upsampling and decoding do not */
        vd_stage_stats times[VD_MAX_STAGES];
        g_assert_cmpint(vd_context_stage_stats(ctx, times, VD_MAX_STAGES), ==, 9);
        g_assert_cmpstr(times[7].name, ==, "keypoint_head");
        g_assert_cmpfloat(times[7].gflop, >, 0.0);
        g_assert_cmpstr(times[8].name, ==, "keypoints");
        g_assert_cmpfloat(times[8].gflop, ==, 0.0);
    }
    /* the fixture's transform: 90x120 resized to 96x128 */
    float rx = 120.0f / 128.0f, ry = 90.0f / 96.0f;
    for (int i = 0; i < r.n_detections; i++) {
        const vd_detection *d = &r.detections[i];
        g_assert_null(d->mask);
        g_assert_nonnull(d->keypoints);
        g_assert_cmpint(d->n_keypoints, ==, 3);
        for (int j = 0; j < 3; j++) {
            const float *p = kp_points_copy + ((gsize)i * 3 + j) * 3;
            g_assert_true(d->keypoints[j].x == p[0] * rx);
            g_assert_true(d->keypoints[j].y == p[1] * ry);
            g_assert_true(d->keypoints[j].score == p[2]);
            /* the heatmap's pixel centres lie inside the box */
            g_assert_cmpfloat(d->keypoints[j].x, >=, d->x1 - 1e-3f);
            g_assert_cmpfloat(d->keypoints[j].x, <=, MAX(d->x2, d->x1 + rx) + 1e-3f);
            g_assert_cmpfloat(d->keypoints[j].y, >=, d->y1 - 1e-3f);
            g_assert_cmpfloat(d->keypoints[j].y, <=, MAX(d->y2, d->y1 + ry) + 1e-3f);
        }
    }
    g_clear_pointer(&kp_points_copy, g_free);
    vd_result again = detect_ok(ctx, &image);
    g_assert_true(vd_submit(ctx, &image, 1, &error));
    g_assert_no_error(error);
    vd_result async;
    g_assert_true(vd_collect(ctx, &async, 1, &error));
    g_assert_no_error(error);
    const vd_result *others[] = {&again, &async};
    for (int o = 0; o < 2; o++) {
        g_assert_cmpint(others[o]->n_detections, ==, r.n_detections);
        for (int i = 0; i < r.n_detections; i++)
            g_assert_cmpmem(r.detections[i].keypoints, 3 * sizeof(vd_keypoint),
                            others[o]->detections[i].keypoints, 3 * sizeof(vd_keypoint));
    }
    vd_result_clear(&r);
    vd_result_clear(&again);
    vd_result_clear(&async);
    vd_context_free(ctx);

    /* CUDA: refused as a family, before any device question */
    vd_context_params params = vd_context_default_params();
#ifdef HAVE_CUDA
    g_assert_false(vd_cuda_backend.supports(model, &params, &error));
    g_assert_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED);
    g_assert_nonnull(strstr(error->message, "keypointrcnn"));
    g_assert_nonnull(strstr(error->message, "Keypoint R-CNN"));
    g_clear_error(&error);
#endif
    params.device = VD_DEVICE_CUDA;
    g_assert_null(vd_context_new(model, &params, &error));
    g_assert_error(error, VD_ERROR, VD_ERROR_UNSUPPORTED);
#ifdef HAVE_CUDA
    g_assert_nonnull(strstr(error->message, "keypointrcnn"));
#endif
    g_clear_error(&error);
    params = vd_context_default_params();
    ctx = vd_context_new(model, &params, &error);
    g_assert_no_error(error);
    g_assert_cmpint(vd_context_device(ctx), ==, VD_DEVICE_CPU);
    /* with a GPU the reason is the family; without one, the missing device */
    g_assert_nonnull(vd_context_fallback_reason(ctx));
#ifdef HAVE_CUDA
    if (vd_cuda_available(0, NULL))
        g_assert_nonnull(strstr(vd_context_fallback_reason(ctx), "keypointrcnn"));
#endif
    r = detect_ok(ctx, &image);
    g_assert_cmpint(r.n_detections, >, 0);
    g_assert_nonnull(r.detections[0].keypoints);
    vd_result_clear(&r);
    vd_context_free(ctx);
    g_free(pixels);
    vd_model_unref(model);
}

static void test_default_model_path(void)
{
    char *searched = NULL;
    g_setenv("VISIONDETECT_MODEL", "/somewhere/model.safetensors", TRUE);
    char *path = vd_default_model_path(&searched);
    g_assert_cmpstr(path, ==, "/somewhere/model.safetensors");
    g_assert_null(searched);
    g_free(path);

    g_unsetenv("VISIONDETECT_MODEL");
    path = vd_default_model_path(&searched);
    if (path != NULL) {
        g_assert_true(g_str_has_suffix(path, "/" VD_DEFAULT_MODEL_NAME));
        g_assert_true(g_file_test(path, G_FILE_TEST_IS_REGULAR));
        g_assert_null(searched);
    } else {
        /* names every place it looked: the variable, the models folder of the prefix
         * this program would be installed in (it links the engine statically, so
         * the "library" is the test program, never the build tree's library), the
         * configured data folder */
        char *exe = g_file_read_link("/proc/self/exe", NULL);
        char *dir = g_path_get_dirname(exe);
        char *relocated = g_canonicalize_filename(VD_MODELDIR_FROM_LIBDIR, dir);
        char *want = g_strdup_printf("$VISIONDETECT_MODEL (unset), %s, %s", relocated, VD_MODELDIR);

        g_assert_nonnull(searched);
        g_assert_cmpstr(searched, ==, want);
        g_free(want);
        g_free(relocated);
        g_free(dir);
        g_free(exe);
    }
    g_free(path);
    g_free(searched);
}

int main(int argc, char **argv)
{
    GError *error = NULL;
    g_test_init(&argc, &argv, NULL);
    tmp_dir = g_dir_make_tmp("vd-context-XXXXXX", &error);
    g_assert_no_error(error);

    g_test_add_func("/context/detect/basic", test_detect_basic);
    g_test_add_func("/context/detect/model-reference", test_model_outlives_caller);
    g_test_add_func("/context/detect/submit-collect", test_submit_collect);
    g_test_add_func("/context/detect/producer-consumer", test_producer_consumer);
    g_test_add_func("/context/detect/resolution-change", test_resolution_change);
    g_test_add_func("/context/detect/packed-formats", test_packed_formats);
    g_test_add_func("/context/detect/thresholds", test_thresholds);
    g_test_add_func("/context/hooks/observer-and-stages", test_observer_and_stages);
    g_test_add_func("/context/hooks/stage-gflop", test_stage_gflop);
    g_test_add_func("/context/hooks/stage-gflop-grouped", test_stage_gflop_grouped);
    g_test_add_func("/context/detect/non-finite", test_nonfinite_count);
    g_test_add_func("/context/error/bad-images", test_bad_images);
    g_test_add_func("/context/error/device-and-precision", test_device_and_precision);
    g_test_add_func("/context/cuda-resize-arithmetic", test_cuda_resize_arithmetic);
    g_test_add_func("/context/cuda-mobilenet-v3", test_mobilenet_v3_devices);
    g_test_add_func("/context/cuda-mobilenet-v3-large-shapes", test_mobilenet_v3_large_cuda_shapes);
    g_test_add_func("/context/detect/masks", test_masks);
    g_test_add_func("/context/detect/keypoints", test_keypoints);
    g_test_add_data_func("/context/detect/retinanet", GINT_TO_POINTER(FALSE), test_retinanet);
    g_test_add_func("/context/detect/ssdlite", test_ssdlite);
    g_test_add_data_func("/context/detect/retinanet-v2", GINT_TO_POINTER(1), test_retinanet);
    g_test_add_data_func("/context/detect/fcos", GINT_TO_POINTER(2), test_retinanet);
    g_test_add_func("/context/default-model-path", test_default_model_path);

    int result = g_test_run();
    g_rmdir(tmp_dir);
    g_free(tmp_dir);
    return result;
}
