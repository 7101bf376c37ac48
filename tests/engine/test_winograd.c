/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The CPU backend's Winograd F(4x4, 3x3) and F(2x2, 3x3) convolutions
 * (engine/cpu/vd_cpu_winograd.c) against a direct convolution computed in double
 * precision.
 *
 * /winograd/against-direct: both channel blocks, map sizes that are and are not
 * multiples of the 4x4 tile (edges, maps smaller than a tile), several channel
 * counts, bias, the sum with the destination and ReLU, one and two threads.
 * Bound: 1.5e-5 of max |y| (the layout and the fused operations; the accuracy is
 * the next test's).
 *
 * /winograd/network-shapes: the channel counts of the ResNet-FPN networks' 3x3
 * convolutions that run Winograd (64, 128, 256 and 512 in and out: the backbone's
 * stages, the FPN's outputs and the RPN head), inputs uniform in [-1, 1] and
 * weights scaled as a trained layer's (1 / sqrt(9 C)), on maps cropped to keep the
 * double reference short (the error is per output pixel). Bound: 3.5e-6 of max |y|.
 * Measured (Zen 4): the transforms of the points 0, +-1, +-2 and infinity with each
 * product summed over all channels in one sgemm call reach 1.4e-5 at 512 channels
 * (7.7e-6 at 256, 3.8e-6 at 64); the points 0, +-1, 1/2, -2 and infinity with the
 * sums in blocks of 64 channels at most 1.9e-6, as oneDNN 2.x's F(4x4, 3x3) (1.6e-6
 * to 2.1e-6); oneDNN's direct kernels give 2.4e-7 to 2.9e-7 on AVX-512 and 1.8e-6 to
 * 2.9e-6 on AVX2 (printed beside ours: the direct kernel of the blocked layout, and
 * oneDNN 2.x's Winograd where the ISA has it).
 * /winograd/network-shapes-2x2: the same for F(2x2, 3x3), within 5e-7 (measured at
 * most 2.9e-7, the AVX-512 direct kernels' level, where F(4x4, 3x3) is not).
 * /winograd/network-shapes-complex: the same for F(4x4, 3x3) on the points 0, +-1,
 * +-i, within 5e-7 (measured at most 3.3e-7; the real points' F(4x4, 3x3) fails it).
 *
 * /winograd/batch: a batch of images in one call, image by image the same as one
 * call each.
 *
 * /winograd/speed (only with -m perf): ours (all three) against oneDNN's direct kernel on
 * the full maps of ResNet-50-FPN at 640x480 (the 800x1088 input), run in turns
 * in this process on the backend's blocked layout and thread count (2, or
 * VD_TEST_THREADS): per layer the median of each and their ratio, and the sum over
 * the 21 Winograd convolutions of a frame. */
#include "cpu/vd_cpu_isa.h"
#include "cpu/vd_cpu_layers.h"
#include "cpu/vd_cpu_winograd.h"
#include "vd_config.h"
#include "visiondetect/vd.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int c, k, h, w, cb;
    gboolean sum, relu;
    int threads;
} wino_case;

/* Offset of (ch, y, x) in a blocked [C / cb][h][w][cb] map. */
static size_t at(int ch, int y, int x, int h, int w, int cb)
{
    return (((size_t)(ch / cb) * h + y) * w + x) * cb + ch % cb;
}

/* oneDNN's convolution (3x3, stride 1, padding 1, bias, no post-op) on blocked
 * src and dst of one image, through the engine's layer functions. */
typedef struct {
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t prim;
    dnnl_memory_t src, dst, wei, bias, scratch;
    dnnl_exec_arg_t args[5];
    int n_args;
} onednn_conv;

static void onednn_conv_free(onednn_conv *o)
{
    vd_layers_memory_free(o->scratch);
    vd_layers_memory_free(o->src);
    vd_layers_memory_free(o->dst);
    vd_layers_memory_free(o->wei);
    vd_layers_memory_free(o->bias);
    vd_layers_primitive_free(o->prim);
    vd_layers_pd_free(o->pd);
    memset(o, 0, sizeof(*o));
}

/* FALSE (nothing to free) where oneDNN has no such kernel: a reference one, or
 * no Winograd one where @winograd. */
static gboolean onednn_conv_new(onednn_conv *o, dnnl_engine_t engine, dnnl_stream_t stream,
                                gboolean winograd, int c, int k, int h, int w, int cb,
                                const float *weight, const float *bias)
{
    memset(o, 0, sizeof(*o));
    vd_conv_desc desc =
        vd_layers_probe_desc(c, h, w, dnnl_f32, cb == 16 ? dnnl_nChw16c : dnnl_nChw8c);
    desc.out_c = k;
    desc.act = VD_ACT_NONE;
    desc.winograd = winograd;
    GError *error = NULL;
    if (!vd_layers_conv_pd(engine, &desc, &o->pd, "convolution", NULL) ||
        vd_layers_impl_is_reference(vd_layers_pd_impl(o->pd)) ||
        (winograd && strstr(vd_layers_pd_impl(o->pd), "wino") == NULL)) {
        onednn_conv_free(o);
        return FALSE;
    }
    size_t scratch = vd_layers_pd_scratchpad(o->pd);
    dnnl_dims_t dims = {(dnnl_dim_t)scratch};
    g_assert_true(vd_layers_primitive_new(o->pd, &o->prim, "convolution", &error));
    g_assert_true(vd_layers_conv_weights(engine, stream, o->pd, &desc, weight, bias, &o->wei,
                                         &o->bias, "convolution", &error));
    g_assert_true(vd_layers_memory_like(engine, vd_layers_pd_md(o->pd, dnnl_query_src_md),
                                        DNNL_MEMORY_ALLOCATE, &o->src, "src", &error));
    g_assert_true(vd_layers_memory_like(engine, vd_layers_pd_md(o->pd, dnnl_query_dst_md),
                                        DNNL_MEMORY_ALLOCATE, &o->dst, "dst", &error));
    g_assert_no_error(error);
    /* the blocked layout the test writes */
    g_assert_cmpuint(vd_layers_md_size(vd_layers_memory_md(o->src)), ==,
                     (size_t)c * h * w * sizeof(float));
    o->args[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC, o->src};
    o->args[1] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, o->wei};
    o->args[2] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, o->bias};
    o->args[3] = (dnnl_exec_arg_t){DNNL_ARG_DST, o->dst};
    o->n_args = 4;
    if (scratch > 0) {
        g_assert_true(vd_layers_memory_new(engine, 1, dims, dnnl_u8, dnnl_x, DNNL_MEMORY_ALLOCATE,
                                           &o->scratch, "scratchpad", &error));
        o->args[o->n_args++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, o->scratch};
    }
    return TRUE;
}

static void onednn_conv_run(const onednn_conv *o, dnnl_stream_t stream)
{
    GError *error = NULL;
    g_assert_true(vd_layers_execute(o->prim, stream, o->n_args, o->args, "convolution", &error));
    g_assert_true(vd_layers_wait(stream, &error));
    g_assert_no_error(error);
}

static double max_abs_diff(const float *a, const double *ref, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++)
        m = MAX(m, fabs((double)a[i] - ref[i]));
    return m;
}

/* the three kinds, in the order the tests run them */
static const vd_wino_kind KINDS[] = {VD_WINO_4X3, VD_WINO_2X3, VD_WINO_4X3_COMPLEX};

static const char *kind_name(vd_wino_kind kind)
{
    return kind == VD_WINO_2X3 ? "F(2x2)" : kind == VD_WINO_4X3 ? "F(4x4)" : "F(4x4) complex";
}

/* A case's data and its double-precision reference (direct, padding 1), shared by
 * the kinds that run it. */
typedef struct {
    size_t n_src, n_dst;
    float *src, *prior, *weight, *bias;
    double *ref, max_ref;
    double direct_rel; /* a sequential float32 direct sum's error over max |y| */
} case_data;

static void case_data_init(case_data *d, const wino_case *t)
{
    GRand *rand = g_rand_new_with_seed((guint32)(t->c * 131 + t->k * 7 + t->h * 3 + t->w + t->cb));
    d->n_src = (size_t)t->c * t->h * t->w;
    d->n_dst = (size_t)t->k * t->h * t->w;
    d->src = g_new(float, d->n_src);
    d->prior = g_new(float, d->n_dst);
    d->weight = g_new(float, (size_t)t->k * t->c * 9);
    d->bias = g_new(float, t->k);
    d->ref = g_new(double, d->n_dst);
    float *direct_f = g_new(float, d->n_dst);
    for (size_t i = 0; i < d->n_src; i++)
        d->src[i] = (float)g_rand_double_range(rand, -1.0, 1.0);
    for (size_t i = 0; i < (size_t)t->k * t->c * 9; i++)
        d->weight[i] = (float)(g_rand_double_range(rand, -1.0, 1.0) / sqrt(9.0 * t->c));
    for (int i = 0; i < t->k; i++)
        d->bias[i] = (float)g_rand_double_range(rand, -0.5, 0.5);
    for (size_t i = 0; i < d->n_dst; i++)
        d->prior[i] = (float)g_rand_double_range(rand, -1.0, 1.0);

    double max_ref = 0.0;
    for (int o = 0; o < t->k; o++)
        for (int y = 0; y < t->h; y++)
            for (int x = 0; x < t->w; x++) {
                double acc = d->bias[o];
                float acc_f = d->bias[o];
                for (int i = 0; i < t->c; i++)
                    for (int ky = 0; ky < 3; ky++)
                        for (int kx = 0; kx < 3; kx++) {
                            int sy = y + ky - 1, sx = x + kx - 1;
                            if (sy < 0 || sy >= t->h || sx < 0 || sx >= t->w)
                                continue;
                            float wv = d->weight[(((size_t)o * t->c + i) * 3 + ky) * 3 + kx];
                            float sv = d->src[at(i, sy, sx, t->h, t->w, t->cb)];
                            acc += (double)wv * sv;
                            acc_f += wv * sv;
                        }
                size_t at_d = at(o, y, x, t->h, t->w, t->cb);
                if (t->sum) {
                    acc += d->prior[at_d];
                    acc_f += d->prior[at_d];
                }
                if (t->relu && acc_f < 0.0f)
                    acc_f = 0.0f;
                direct_f[at_d] = acc_f;
                if (t->relu && acc < 0.0)
                    acc = 0.0;
                d->ref[at_d] = acc;
                max_ref = MAX(max_ref, fabs(acc));
            }
    d->max_ref = MAX(max_ref, 1e-30);
    d->direct_rel = max_abs_diff(direct_f, d->ref, d->n_dst) / d->max_ref;
    g_free(direct_f);
    g_rand_free(rand);
}

static void case_data_clear(case_data *d)
{
    g_free(d->src);
    g_free(d->prior);
    g_free(d->weight);
    g_free(d->bias);
    g_free(d->ref);
}

/* Runs @kind on the case: ours against the double reference, the error over max
 * |y|. @compare_onednn: oneDNN's direct kernel and its Winograd (where it has one)
 * on the same data too, their errors printed. */
static double run_kind(const wino_case *t, const case_data *d, vd_wino_kind kind,
                       gboolean compare_onednn)
{
    float *dst = g_new(float, d->n_dst);
    memcpy(dst, d->prior, d->n_dst * sizeof(float));
    GError *error = NULL;
    vd_wino *wino = vd_wino_new(d->weight, d->bias, t->k, t->c, t->cb, kind, &error);
    g_assert_no_error(error);
    void *ws = NULL;
    g_assert_cmpint(posix_memalign(&ws, 64, vd_wino_workspace_size(wino, t->threads)), ==, 0);
    g_assert_true(
        vd_wino_run(wino, d->src, dst, t->h, t->w, t->sum, t->relu, ws, t->threads, &error));
    g_assert_no_error(error);

    double rel = max_abs_diff(dst, d->ref, d->n_dst) / d->max_ref;
    g_test_message("%s C %d K %d %dx%d cb %d sum %d relu %d threads %d: ours %.3g of max "
                   "|y| %.3g; a sequential float32 direct sum %.3g",
                   kind_name(kind), t->c, t->k, t->h, t->w, t->cb, t->sum, t->relu, t->threads, rel,
                   d->max_ref, d->direct_rel);
    if (compare_onednn) {
        g_assert_false(t->sum || t->relu);
        dnnl_engine_t engine = NULL;
        dnnl_stream_t stream = NULL;
        g_assert_true(vd_layers_engine_new(&engine, &stream, &error));
        for (int winograd = 0; winograd <= 1; winograd++) {
            onednn_conv o;
            if (!onednn_conv_new(&o, engine, stream, winograd, t->c, t->k, t->h, t->w, t->cb,
                                 d->weight, d->bias))
                continue;
            memcpy(vd_layers_memory_data(o.src), d->src, d->n_src * sizeof(float));
            onednn_conv_run(&o, stream);
            g_test_message("    oneDNN %s: %.3g of max |y|", vd_layers_pd_impl(o.pd),
                           max_abs_diff(vd_layers_memory_data(o.dst), d->ref, d->n_dst) /
                               d->max_ref);
            onednn_conv_free(&o);
        }
        vd_layers_engine_free(engine, stream);
    }
    free(ws);
    vd_wino_unref(wino);
    g_free(dst);
    return rel;
}

static void test_against_direct(void)
{
    const wino_case cases[] = {
        {8, 8, 4, 4, 8, FALSE, FALSE, 1}, /* one tile */
        {8, 16, 1, 1, 8, FALSE, TRUE, 1}, /* smaller than a tile */
        {16, 8, 3, 7, 8, TRUE, FALSE, 2},
        {16, 16, 13, 17, 16, TRUE, TRUE, 2}, /* edges on both sides */
        {64, 64, 25, 34, 8, FALSE, TRUE, 2},
        {64, 32, 25, 34, 16, TRUE, TRUE, 1},
        {96, 64, 10, 9, 16, TRUE, FALSE, 2}, /* a partial block of 64 channels */
        {512, 512, 9, 11, 8, FALSE, TRUE, 2},
    };
    for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
        case_data d; /* one reference for the three kinds */
        case_data_init(&d, &cases[i]);
        for (guint k = 0; k < G_N_ELEMENTS(KINDS); k++)
            g_assert_cmpfloat(run_kind(&cases[i], &d, KINDS[k], FALSE), <=, 1.5e-5);
        case_data_clear(&d);
    }
}

/* The accuracy on the networks' channel counts, both channel blocks: F(4x4, 3x3)
 * (oneDNN's errors printed beside) within 3.5e-6, F(2x2, 3x3) and the complex
 * F(4x4, 3x3) within 5e-7. */
static void test_network_shapes(gconstpointer data)
{
    vd_wino_kind kind = (vd_wino_kind)GPOINTER_TO_INT(data);
    const wino_case cases[] = {
        {64, 64, 25, 34, 16, FALSE, FALSE, 2},   {128, 128, 17, 18, 16, FALSE, FALSE, 2},
        {256, 256, 12, 18, 16, FALSE, FALSE, 2}, {256, 256, 12, 18, 8, FALSE, FALSE, 2},
        {512, 512, 9, 11, 16, FALSE, FALSE, 2},  {512, 512, 9, 11, 8, FALSE, FALSE, 1},
    };
    /* under a sanitizer (VD_TEST_SMALL, set by meson there), which checks memory
     * errors, not the bound, and emulated (VD_TEST_EMULATED, the arm64 run, where
     * the engine's Winograd stays off): the 64- and 256-channel cases, one per
     * channel block, without oneDNN's errors beside (the double reference of the rest
     * takes half a minute under ASan, more under qemu) */
    gboolean small = g_strcmp0(g_getenv("VD_TEST_SMALL"), "1") == 0 ||
                     g_strcmp0(g_getenv("VD_TEST_EMULATED"), "1") == 0;
    double worst = 0.0;
    for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
        if (small && i != 0 && i != 3) /* 64 channels in blocks of 16, 256 in blocks of 8 */
            continue;
        case_data d;
        case_data_init(&d, &cases[i]);
        double rel = run_kind(&cases[i], &d, kind, kind == VD_WINO_4X3 && !small);
        double bound = kind == VD_WINO_4X3 ? 3.5e-6 : 5e-7;
#if defined(__aarch64__)
        /* oneDNN's sgemm off x86 (Debian's aarch64 build, without Arm Compute
         * Library) sums the products in another order than x86's JIT kernels: there
         * the bound is twice a sequential float32 direct sum's error where that is
         * larger (the engine's Winograd stays off on aarch64: vd_cpu_isa.c) */
        bound = MAX(bound, 2.0 * d.direct_rel);
#endif
        case_data_clear(&d);
        g_assert_cmpfloat(rel, <=, bound);
        worst = MAX(worst, rel);
    }
    g_test_message("worst: %.3g of max |y|", worst);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* ResNet-50-FPN at 640x480 (the 800x1088 input): every 3x3 stride-1 convolution
 * of 64 channels or more on a map of 256 pixels or more, with how many of each
 * shape a frame runs. */
static void test_speed(void)
{
    static const struct {
        const char *name;
        int c, h, w, count;
    } layers[] = {
        {"layer1", 64, 200, 272, 3},      {"layer2", 128, 100, 136, 3},
        {"layer3", 256, 50, 68, 5},       {"layer4", 512, 25, 34, 2},
        {"fpn/rpn P2", 256, 200, 272, 2}, {"fpn/rpn P3", 256, 100, 136, 2},
        {"fpn/rpn P4", 256, 50, 68, 2},   {"fpn/rpn P5", 256, 25, 34, 2},
    };
    const char *env = g_getenv("VD_TEST_THREADS");
    int threads = env != NULL ? atoi(env) : 2, rounds = 7;
    omp_set_num_threads(threads);
    GError *error = NULL;
    dnnl_engine_t engine = NULL;
    dnnl_stream_t stream = NULL;
    g_assert_true(vd_layers_engine_new(&engine, &stream, &error));
    vd_cpu_caps caps;
    vd_cpu_caps_get(&caps);
    int cb = caps.channel_block; /* the backend's layout */
    double total_direct = 0.0, total_4 = 0.0, total_2 = 0.0, total_c = 0.0;
    for (guint l = 0; l < G_N_ELEMENTS(layers); l++) {
        int c = layers[l].c, h = layers[l].h, w = layers[l].w;
        size_t n = (size_t)c * h * w;
        float *weight = g_new(float, (size_t)c *c * 9), *bias = g_new0(float, c);
        float *src = g_new(float, n), *dst = g_new(float, n);
        GRand *rand = g_rand_new_with_seed((guint32)c);
        for (size_t i = 0; i < (size_t)c * c * 9; i++)
            weight[i] = (float)(g_rand_double_range(rand, -1.0, 1.0) / sqrt(9.0 * c));
        for (size_t i = 0; i < n; i++)
            src[i] = (float)g_rand_double_range(rand, -1.0, 1.0);
        g_rand_free(rand);
        onednn_conv o;
        g_assert_true(onednn_conv_new(&o, engine, stream, FALSE, c, c, h, w, cb, weight, bias));
        memcpy(vd_layers_memory_data(o.src), src, n * sizeof(float));
        vd_wino *w4 = vd_wino_new(weight, bias, c, c, cb, VD_WINO_4X3, &error);
        vd_wino *w2 = vd_wino_new(weight, bias, c, c, cb, VD_WINO_2X3, &error);
        vd_wino *wc = vd_wino_new(weight, bias, c, c, cb, VD_WINO_4X3_COMPLEX, &error);
        g_assert_no_error(error);
        void *ws = NULL;
        size_t ws_size =
            MAX(MAX(vd_wino_workspace_size(w4, threads), vd_wino_workspace_size(w2, threads)),
                vd_wino_workspace_size(wc, threads));
        g_assert_cmpint(posix_memalign(&ws, 64, ws_size), ==, 0);
        double t_direct[16], t_4[16], t_2[16], t_c[16];
        for (int r = -1; r < rounds; r++) { /* round -1: warm-up */
            gint64 t0 = g_get_monotonic_time();
            onednn_conv_run(&o, stream);
            gint64 t1 = g_get_monotonic_time();
            g_assert_true(vd_wino_run(w4, src, dst, h, w, FALSE, FALSE, ws, threads, &error));
            gint64 t2 = g_get_monotonic_time();
            g_assert_true(vd_wino_run(w2, src, dst, h, w, FALSE, FALSE, ws, threads, &error));
            gint64 t3 = g_get_monotonic_time();
            g_assert_true(vd_wino_run(wc, src, dst, h, w, FALSE, FALSE, ws, threads, &error));
            gint64 t4 = g_get_monotonic_time();
            if (r >= 0) {
                t_direct[r] = (double)(t1 - t0) / 1000.0;
                t_4[r] = (double)(t2 - t1) / 1000.0;
                t_2[r] = (double)(t3 - t2) / 1000.0;
                t_c[r] = (double)(t4 - t3) / 1000.0;
            }
        }
        qsort(t_direct, (size_t)rounds, sizeof(double), cmp_double);
        qsort(t_4, (size_t)rounds, sizeof(double), cmp_double);
        qsort(t_2, (size_t)rounds, sizeof(double), cmp_double);
        qsort(t_c, (size_t)rounds, sizeof(double), cmp_double);
        double md = t_direct[rounds / 2], m4 = t_4[rounds / 2], m2 = t_2[rounds / 2],
               mc = t_c[rounds / 2];
        g_test_message("%-11s %3d ch %3dx%3d x%d: oneDNN %s %8.2f ms, ours F(4x4) %8.2f ms: "
                       "%.2fx, F(2x2) %8.2f ms: %.2fx, F(4x4) complex %8.2f ms: %.2fx",
                       layers[l].name, c, h, w, layers[l].count, vd_layers_pd_impl(o.pd), md, m4,
                       md / m4, m2, md / m2, mc, md / mc);
        total_direct += md * layers[l].count;
        total_4 += m4 * layers[l].count;
        total_2 += m2 * layers[l].count;
        total_c += mc * layers[l].count;
        free(ws);
        vd_wino_unref(w4);
        vd_wino_unref(w2);
        vd_wino_unref(wc);
        onednn_conv_free(&o);
        g_free(weight);
        g_free(bias);
        g_free(src);
        g_free(dst);
    }
    g_test_message("a frame's %d-thread Winograd layers, blocks of %d: oneDNN direct %.1f ms, "
                   "ours F(4x4) %.1f ms: %.2fx, F(2x2) %.1f ms: %.2fx, F(4x4) complex %.1f ms: "
                   "%.2fx",
                   threads, cb, total_direct, total_4, total_direct / total_4, total_2,
                   total_direct / total_2, total_c, total_direct / total_c);
    vd_layers_engine_free(engine, stream);
}

/* vd_wino_run_batch over several images (the RoI heads' batches of 14x14 maps, and
 * a map of 5x7 whose tiles do not fill a chunk) gives each image what
 * vd_wino_run gives it alone: the chunks run across images (two threads, so
 * that a chunk holds the end of one image and the start of the next), with the
 * sum and ReLU. Each tile's arithmetic is the same either way, so within 1e-6
 * of max |y| (the products' rows may take another sgemm path). */
static void test_batch(void)
{
    static const int sizes[][2] = {{14, 14}, {5, 7}};
    for (int cb = 8; cb <= 16; cb += 8)
        for (guint kk = 0; kk < G_N_ELEMENTS(KINDS); kk++)
            for (guint s = 0; s < G_N_ELEMENTS(sizes); s++) {
                const int c = 32, k = 48, n_images = 5, threads = 2;
                int h = sizes[s][0], w = sizes[s][1];
                size_t in_n = (size_t)c * h * w, out_n = (size_t)k * h * w;
                float *weight = g_new(float, (size_t)k *c * 9), *bias = g_new(float, k);
                float *src = g_new(float, n_images *in_n), *prior = g_new(float, n_images *out_n);
                float *batch = g_new(float, n_images *out_n), *one = g_new(float, out_n);
                vd_wino_kind kind = KINDS[kk];
                GRand *rand = g_rand_new_with_seed((guint32)(cb * 100 + kind * 10 + s));
                for (size_t i = 0; i < (size_t)k * c * 9; i++)
                    weight[i] = (float)(g_rand_double_range(rand, -1.0, 1.0) / sqrt(9.0 * c));
                for (int i = 0; i < k; i++)
                    bias[i] = (float)g_rand_double_range(rand, -0.5, 0.5);
                for (size_t i = 0; i < n_images * in_n; i++)
                    src[i] = (float)g_rand_double_range(rand, -1.0, 1.0);
                for (size_t i = 0; i < n_images * out_n; i++)
                    prior[i] = (float)g_rand_double_range(rand, -1.0, 1.0);
                g_rand_free(rand);
                GError *error = NULL;
                vd_wino *wino = vd_wino_new(weight, bias, k, c, cb, kind, &error);
                g_assert_no_error(error);
                void *ws = NULL;
                g_assert_cmpint(posix_memalign(&ws, 64, vd_wino_workspace_size(wino, threads)), ==,
                                0);
                memcpy(batch, prior, n_images * out_n * sizeof(float));
                g_assert_true(vd_wino_run_batch(wino, src, batch, n_images, h, w, TRUE, TRUE, ws,
                                                threads, &error));
                double worst = 0.0, max_y = 0.0;
                for (int i = 0; i < n_images; i++) {
                    memcpy(one, prior + i * out_n, out_n * sizeof(float));
                    g_assert_true(vd_wino_run(wino, src + i * in_n, one, h, w, TRUE, TRUE, ws,
                                              threads, &error));
                    for (size_t j = 0; j < out_n; j++) {
                        worst = MAX(worst, fabs((double)batch[i * out_n + j] - one[j]));
                        max_y = MAX(max_y, fabs((double)one[j]));
                    }
                }
                g_test_message("%s cb %d %d images of %dx%d: batch against one by one "
                               "%.3g of max |y| %.3g",
                               kind_name(kind), cb, n_images, h, w, worst / max_y, max_y);
                g_assert_cmpfloat(max_y, >, 0.1);
                g_assert_cmpfloat(worst, <=, 1e-6 * max_y);
                free(ws);
                vd_wino_unref(wino);
                g_free(weight);
                g_free(bias);
                g_free(src);
                g_free(prior);
                g_free(batch);
                g_free(one);
            }
}

/* Channel counts that are not whole blocks are refused (the backend then runs
 * oneDNN's direct convolution). */
static void test_refuses_partial_blocks(void)
{
    float weight[24 * 8 * 9] = {0}, bias[24] = {0};
    GError *error = NULL;
    g_assert_null(vd_wino_new(weight, bias, 12, 8, 8, VD_WINO_4X3, &error));
    g_assert_error(error, VD_ERROR, VD_ERROR_INTERNAL);
    g_clear_error(&error);
    g_assert_null(vd_wino_new(weight, bias, 16, 8, 16, VD_WINO_2X3, &error));
    g_assert_error(error, VD_ERROR, VD_ERROR_INTERNAL);
    g_clear_error(&error);
    g_assert_null(vd_wino_new(weight, bias, 8, 8, 4, VD_WINO_4X3_COMPLEX, &error));
    g_assert_error(error, VD_ERROR, VD_ERROR_INTERNAL);
    g_clear_error(&error);
    g_assert_null(vd_wino_new(weight, bias, 8, 8, 8, (vd_wino_kind)3, &error)); /* no such kind */
    g_assert_error(error, VD_ERROR, VD_ERROR_INTERNAL);
    g_clear_error(&error);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/winograd/against-direct", test_against_direct);
    g_test_add_data_func("/winograd/network-shapes", GINT_TO_POINTER(VD_WINO_4X3),
                         test_network_shapes);
    g_test_add_data_func("/winograd/network-shapes-2x2", GINT_TO_POINTER(VD_WINO_2X3),
                         test_network_shapes);
    g_test_add_data_func("/winograd/network-shapes-complex",
                         GINT_TO_POINTER(VD_WINO_4X3_COMPLEX), test_network_shapes);
    g_test_add_func("/winograd/batch", test_batch);
    g_test_add_func("/winograd/partial-blocks", test_refuses_partial_blocks);
    if (g_test_perf())
        g_test_add_func("/winograd/speed", test_speed);
    return g_test_run();
}
