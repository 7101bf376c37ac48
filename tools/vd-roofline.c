/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* vd-roofline: the peaks this machine reaches with the CPU backend's kernels, as
 * JSON on stdout, for tools/bench_cpu.py --roofline.
 *
 *   vd-roofline [--threads N] [--runs N] [--warmup N] [--small] [--verbose]
 *
 * Per precision (fp32; bf16 where the CPU has native bfloat16 instructions; int8
 * where it has dot-product ones, VNNI or AMX): a large convolution, 256 -> 256
 * channels 3x3 (stride 1, padding 1) on a 200x272 map (the FPN's output
 * convolution at a 800x1088 input), and, in the floating-point types, a large
 * matrix product, 1000 x 12544 by 12544 x 1024 (the box head's fc6 over 1000
 * RoIs). Each through the engine's own layer functions (vd_cpu_layers.h: oneDNN,
 * the layouts it prefers for the ISA it runs, format_tag_any; the convolution
 * also in the backend's blocked layout, the faster of the two kept), on the
 * engine's thread count, after --warmup untimed runs, the median of --runs
 * timed ones.
 * Then the memory bandwidth: a parallel copy of a buffer far larger than the
 * caches, counted as the bytes read plus the bytes written. --small shrinks
 * every shape (for the tests; the figures then say nothing).
 *
 * Output: {"threads", "onednn", "isa", "peaks": [{"kernel", "precision",
 * "shape", "gflop", "ms", "gflops", "impl"}...], "bandwidth": {"bytes", "ms",
 * "gbs"}}; a precision the CPU lacks is left out. */
#include "cpu/vd_cpu_isa.h"
#include "cpu/vd_cpu_layers.h"

#include <glib.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    int warmup, runs;
    gboolean verbose; /* each layout's time on stderr */
} bench;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Runs @prim with @args --warmup times, then --runs times timed: the median in
 * milliseconds, or a negative number on failure (@error set). */
static double time_primitive(const bench *b, dnnl_primitive_t prim, int n_args,
                             const dnnl_exec_arg_t *args, GError **error)
{
    double *ms = g_new(double, b->runs);
    double median = -1.0;
    for (int i = 0; i < b->warmup + b->runs; i++) {
        gint64 t0 = g_get_monotonic_time();
        if (!vd_layers_execute(prim, b->stream, n_args, args, "roofline", error) ||
            !vd_layers_wait(b->stream, error))
            goto out;
        if (i >= b->warmup)
            ms[i - b->warmup] = (double)(g_get_monotonic_time() - t0) / 1000.0;
    }
    qsort(ms, (size_t)b->runs, sizeof(double), cmp_double);
    median = b->runs % 2 ? ms[b->runs / 2] : 0.5 * (ms[b->runs / 2 - 1] + ms[b->runs / 2]);
out:
    g_free(ms);
    return median;
}

/* Deterministic values in [-1, 1). */
static void fill(float *x, size_t n, guint32 seed)
{
    GRand *rand = g_rand_new_with_seed(seed);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)g_rand_double_range(rand, -1.0, 1.0);
    g_rand_free(rand);
}

/* Memory of @md with bytes of its own, filled with small values of its type (a
 * float pattern reordered would need the same primitive as the one measured:
 * bytes 0x01 are small positive numbers in every type used here). */
static gboolean own_memory(const bench *b, vd_layer_md md, dnnl_memory_t *mem, GError **error)
{
    if (!vd_layers_memory_like(b->engine, md, DNNL_MEMORY_ALLOCATE, mem, "roofline", error))
        return FALSE;
    memset(vd_layers_memory_data(*mem), 0x01, vd_layers_md_size(md));
    return TRUE;
}

/* The scratchpad @pd asks for (the engine's user scratchpad mode), appended to
 * @args; *@mem NULL when none. */
static gboolean scratchpad(const bench *b, const_dnnl_primitive_desc_t pd, dnnl_memory_t *mem,
                           dnnl_exec_arg_t *args, int *n, GError **error)
{
    size_t bytes = vd_layers_pd_scratchpad(pd);
    *mem = NULL;
    if (bytes == 0)
        return TRUE;
    dnnl_dims_t dims = {(dnnl_dim_t)bytes};
    if (!vd_layers_memory_new(b->engine, 1, dims, dnnl_u8, dnnl_x, DNNL_MEMORY_ALLOCATE, mem,
                              "scratchpad", error))
        return FALSE;
    args[(*n)++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, *mem};
    return TRUE;
}

static void print_peak(gboolean *first, const char *kernel, const char *precision,
                       const char *shape, double gflop, double ms, const char *impl)
{
    printf("%s\n    {\"kernel\": \"%s\", \"precision\": \"%s\", \"shape\": \"%s\", "
           "\"gflop\": %.4f, \"ms\": %.3f, \"gflops\": %.1f, \"impl\": \"%s\"}",
           *first ? "" : ",", kernel, precision, shape, gflop, ms, gflop / (ms / 1000.0), impl);
    fflush(stdout);
    *first = FALSE;
}

/* The convolution in @dt (int8: u8 in and out, s8 weights), src and dst in
 * layout @tag: its median *@ms and implementation (@impl, @impl_size bytes);
 * *@ms -1 without running where oneDNN has only a reference kernel for it. */
static gboolean bench_conv(const bench *b, dnnl_data_type_t dt, dnnl_format_tag_t tag, int c,
                           int h, int w, double *ms, char *impl, size_t impl_size, GError **error)
{
    gboolean int8 = vd_layers_is_int8(dt);
    float *weight = g_new(float, (size_t)c * c * 9), *bias = g_new0(float, c);
    float *wei_scales = g_new(float, c);
    fill(weight, (size_t)c * c * 9, 1);
    for (int i = 0; i < c; i++)
        wei_scales[i] = 1.0f / 127.0f;
    vd_conv_desc desc = vd_layers_probe_desc(c, h, w, dt, tag);
    desc.act = VD_ACT_NONE;
    desc.wei_scales = int8 ? wei_scales : NULL;
    desc.src_scale = 1.0f;
    desc.dst_scale = 1.0f;
    desc.sum_scale = 1.0f;
    desc.sum_dt = dt;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t prim = NULL;
    dnnl_memory_t src = NULL, dst = NULL, wei = NULL, bias_mem = NULL, scratch = NULL;
    vd_layer_scales scales = {0};
    gboolean ok = FALSE;
    *ms = -1.0;
    if (!vd_layers_conv_pd(b->engine, &desc, &pd, "convolution", error))
        goto out;
    g_strlcpy(impl, vd_layers_pd_impl(pd), impl_size);
    if (g_str_has_prefix(impl, "ref")) {
        ok = TRUE;
        goto out;
    }
    if (!vd_layers_primitive_new(pd, &prim, "convolution", error) ||
        !vd_layers_conv_weights(b->engine, b->stream, pd, &desc, weight, bias, &wei, &bias_mem,
                                "convolution", error) ||
        !vd_layers_conv_scales(b->engine, &desc, &scales, "convolution", error) ||
        !own_memory(b, vd_layers_pd_md(pd, dnnl_query_src_md), &src, error) ||
        !own_memory(b, vd_layers_pd_md(pd, dnnl_query_dst_md), &dst, error))
        goto out;
    dnnl_exec_arg_t args[8] = {
        {DNNL_ARG_SRC, src},
        {DNNL_ARG_WEIGHTS, wei},
        {DNNL_ARG_BIAS, bias_mem},
        {DNNL_ARG_DST, dst},
    };
    int n = 4;
    if (!scratchpad(b, pd, &scratch, args, &n, error))
        goto out;
    n += vd_layers_scale_args(&scales, args + n);
    *ms = time_primitive(b, prim, n, args, error);
    ok = *ms >= 0.0;
out:
    vd_layers_scales_clear(&scales);
    vd_layers_memory_free(scratch);
    vd_layers_memory_free(src);
    vd_layers_memory_free(dst);
    vd_layers_memory_free(wei);
    vd_layers_memory_free(bias_mem);
    vd_layers_primitive_free(prim);
    vd_layers_pd_free(pd);
    g_free(weight);
    g_free(bias);
    g_free(wei_scales);
    return ok;
}

/* The convolution's peak in @dt: the faster of the layout oneDNN prefers
 * (format_tag_any) and the blocked one the backend's activations take
 * (nChw16c or nChw8c, by the ISA's channel block): oneDNN's choice is not
 * always its fastest kernel (bf16 on AVX-512 without AMX). */
static gboolean conv_peak(const bench *b, const vd_cpu_caps *caps, dnnl_data_type_t dt,
                          const char *precision, int c, int h, int w, gboolean *first,
                          GError **error)
{
    const dnnl_format_tag_t tags[] = {dnnl_format_tag_any,
                                      caps->channel_block == 16 ? dnnl_nChw16c : dnnl_nChw8c};
    double best = -1.0;
    char best_impl[128] = "", impl[128];
    for (int i = 0; i < 2; i++) {
        double ms;
        if (!bench_conv(b, dt, tags[i], c, h, w, &ms, impl, sizeof(impl), error))
            return FALSE;
        if (b->verbose && ms < 0.0)
            fprintf(stderr, "vd-roofline: convolution %s, %s layout: %s, not run\n", precision,
                    tags[i] == dnnl_format_tag_any ? "oneDNN's" : "blocked", impl);
        else if (b->verbose)
            fprintf(stderr, "vd-roofline: convolution %s, %s layout: %s, %.3f ms\n", precision,
                    tags[i] == dnnl_format_tag_any ? "oneDNN's" : "blocked", impl, ms);
        if (ms < 0.0)
            continue;
        if (best < 0.0 || ms < best) {
            best = ms;
            g_snprintf(best_impl, sizeof(best_impl), "%s%s", impl,
                       tags[i] == dnnl_format_tag_any ? "" : " (blocked)");
        }
    }
    if (best < 0.0) {
        g_set_error(error, VD_ERROR, VD_ERROR_INTERNAL,
                    "the %s convolution has only reference kernels here", precision);
        return FALSE;
    }
    char shape[64];
    g_snprintf(shape, sizeof(shape), "%d->%d 3x3 at %dx%d", c, c, h, w);
    print_peak(first, "convolution", precision, shape, 2.0 * h * w * c * c * 9 / 1e9, best,
               best_impl);
    return TRUE;
}

/* The matrix product in @dt, the weights in the layout the primitive picks. */
static gboolean bench_matmul(const bench *b, dnnl_data_type_t dt, const char *precision, int m,
                             int k, int n_out, gboolean *first, GError **error)
{
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t prim = NULL;
    dnnl_memory_t src = NULL, dst = NULL, wei = NULL, bias = NULL, scratch = NULL;
    gboolean ok = FALSE;
    dnnl_dims_t bias_dims = {1, n_out};
    if (!vd_layers_matmul_pd(b->engine, m, k, n_out, dt, dt, NULL, FALSE, &pd, "matmul", error) ||
        !vd_layers_primitive_new(pd, &prim, "matmul", error) ||
        !own_memory(b, vd_layers_pd_md(pd, dnnl_query_src_md), &src, error) ||
        !own_memory(b, vd_layers_pd_md(pd, dnnl_query_weights_md), &wei, error) ||
        !own_memory(b, vd_layers_pd_md(pd, dnnl_query_dst_md), &dst, error) ||
        !vd_layers_memory_new(b->engine, 2, bias_dims, dnnl_f32, dnnl_ab, DNNL_MEMORY_ALLOCATE,
                              &bias, "matmul", error))
        goto out;
    memset(vd_layers_memory_data(bias), 0, (size_t)n_out * sizeof(float));
    dnnl_exec_arg_t args[5] = {
        {DNNL_ARG_SRC, src},
        {DNNL_ARG_WEIGHTS, wei},
        {DNNL_ARG_BIAS, bias},
        {DNNL_ARG_DST, dst},
    };
    int n = 4;
    if (!scratchpad(b, pd, &scratch, args, &n, error))
        goto out;
    double ms = time_primitive(b, prim, n, args, error);
    if (ms < 0.0)
        goto out;
    char shape[64];
    g_snprintf(shape, sizeof(shape), "%dx%d by %dx%d", m, k, k, n_out);
    print_peak(first, "matmul", precision, shape, 2.0 * m * k * n_out / 1e9, ms,
               vd_layers_pd_impl(pd));
    ok = TRUE;
out:
    vd_layers_memory_free(scratch);
    vd_layers_memory_free(src);
    vd_layers_memory_free(dst);
    vd_layers_memory_free(wei);
    vd_layers_memory_free(bias);
    vd_layers_primitive_free(prim);
    vd_layers_pd_free(pd);
    return ok;
}

/* A copy of @bytes on every thread at once, each its own slice: the median
 * milliseconds of --runs after --warmup. */
static double copy_ms(const bench *b, size_t bytes)
{
    char *from = g_malloc(bytes), *to = g_malloc(bytes);
    double *ms = g_new(double, b->runs);
    memset(from, 1, bytes);
    memset(to, 0, bytes);
    for (int i = 0; i < b->warmup + b->runs; i++) {
        gint64 t0 = g_get_monotonic_time();
#pragma omp parallel
        {
            int t = omp_get_thread_num(), nt = omp_get_num_threads();
            size_t lo = bytes / (size_t)nt * (size_t)t;
            size_t hi = t == nt - 1 ? bytes : bytes / (size_t)nt * (size_t)(t + 1);
            memcpy(to + lo, from + lo, hi - lo);
        }
        if (i >= b->warmup)
            ms[i - b->warmup] = (double)(g_get_monotonic_time() - t0) / 1000.0;
    }
    qsort(ms, (size_t)b->runs, sizeof(double), cmp_double);
    double median = b->runs % 2 ? ms[b->runs / 2] : 0.5 * (ms[b->runs / 2 - 1] + ms[b->runs / 2]);
    g_free(ms);
    g_free(from);
    g_free(to);
    return median;
}

int main(int argc, char **argv)
{
    int threads = 0, runs = 5, warmup = 2;
    gboolean small = FALSE, verbose = FALSE;
    GError *error = NULL;
    GOptionEntry entries[] = {
        {"threads", 't', 0, G_OPTION_ARG_INT, &threads,
         "Threads (default: the engine's, every processor)", "N"},
        {"runs", 'r', 0, G_OPTION_ARG_INT, &runs, "Timed runs per kernel, the median kept (5)",
         "N"},
        {"warmup", 'w', 0, G_OPTION_ARG_INT, &warmup, "Untimed runs first (2)", "N"},
        {"small", 0, 0, G_OPTION_ARG_NONE, &small, "Small shapes (tests only)", NULL},
        {"verbose", 'v', 0, G_OPTION_ARG_NONE, &verbose,
         "Each convolution layout's implementation and time on stderr", NULL},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    GOptionContext *opts = g_option_context_new("- the CPU kernels' peaks, as JSON");
    g_option_context_add_main_entries(opts, entries, NULL);
    gboolean parsed = g_option_context_parse(opts, &argc, &argv, &error);
    g_option_context_free(opts);
    if (!parsed || runs < 1 || warmup < 0 || threads < 0) {
        fprintf(stderr, "vd-roofline: %s\n",
                error ? error->message : "--runs must be >= 1, --warmup and --threads >= 0");
        g_clear_error(&error);
        return 2;
    }
    /* the engine's default (vd_context_params.n_threads 0) */
    omp_set_num_threads(threads > 0 ? threads : omp_get_num_procs());
    threads = threads > 0 ? threads : omp_get_num_procs();

    bench b = {.warmup = warmup, .runs = runs, .verbose = verbose};
    if (!vd_layers_engine_new(&b.engine, &b.stream, &error)) {
        fprintf(stderr, "vd-roofline: %s\n", error->message);
        g_error_free(error);
        return 1;
    }
    vd_cpu_caps caps;
    vd_cpu_caps_get(&caps);
    char *version = vd_layers_version();
    printf("{\"threads\": %d, \"onednn\": \"%s\", \"isa\": \"%s\", \"peaks\": [", threads, version,
           caps.isa_name);
    g_free(version);

    int c = small ? 32 : 256, h = small ? 20 : 200, w = small ? 28 : 272;
    int m = small ? 40 : 1000, k = small ? 256 : 12544, n = small ? 64 : 1024;
    gboolean first = TRUE;
    gboolean ok = conv_peak(&b, &caps, dnnl_f32, "fp32", c, h, w, &first, &error) &&
                  bench_matmul(&b, dnnl_f32, "fp32", m, k, n, &first, &error) &&
                  (!caps.native_bf16 ||
                   (conv_peak(&b, &caps, dnnl_bf16, "bf16", c, h, w, &first, &error) &&
                    bench_matmul(&b, dnnl_bf16, "bf16", m, k, n, &first, &error))) &&
                  (!caps.int8 || conv_peak(&b, &caps, dnnl_u8, "int8", c, h, w, &first, &error));
    if (ok) {
        size_t bytes = small ? (size_t)4 << 20 : (size_t)512 << 20;
        double ms = copy_ms(&b, bytes);
        /* read and written */
        printf("\n  ],\n  \"bandwidth\": {\"bytes\": %zu, \"ms\": %.3f, \"gbs\": %.1f}}\n",
               2 * bytes, ms, 2.0 * (double)bytes / 1e9 / (ms / 1000.0));
    }
    vd_layers_engine_free(b.engine, b.stream);
    if (!ok) {
        fflush(stdout);
        fprintf(stderr, "\nvd-roofline: %s\n", error->message);
        g_error_free(error);
        return 1;
    }
    return 0;
}
