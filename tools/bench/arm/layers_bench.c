/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* layers_bench: the engine's fp32 layer shapes on aarch64, oneDNN (the baseline: what
 * Debian's oneDNN runs on a NEON-only CPU) against XNNPACK and Arm Compute Library,
 * all three in one process, same inputs, same weights, same thread count. A bench
 * tool (issue 46, item 2: choose the Arm library by measurement), not part of the
 * engine; built and run by tools/bench/arm/run-layers.sh in the arm64 root.
 *
 *   layers_bench [--threads N] [--reps N] [--min-ms MS] [--only NAME[,NAME...]]
 *                [--no-acl] [--acl-fast-math]
 *
 * Each case: NHWC, batch 1, random inputs in [-1, 1], weights scaled by 1/sqrt(fan-in),
 * a bias; the convolutions and the fully connected layer have no activation (every
 * library fuses a ReLU/clamp at about the same cost). Each library's primitive,
 * operator or function is made (weights packed, scratch allocated) and run once
 * untimed; then in rounds, each round one run of every library, the order rotated from
 * one round to the next so that what else the machine does weighs on all three alike,
 * at least --reps rounds (3) and until all the timed runs add up to --min-ms (3000; at
 * most LB_MAX_REPS rounds: the small cases get more); the median of each library's
 * runs is reported. Each library's output is compared with oneDNN's: the maximum
 * absolute difference relative to the largest |output|; above 1e-4 the case is marked
 * MISMATCH and the exit status is 1, so that a wrong setup cannot pass as fast.
 *
 * Threads: XNNPACK gets a pthreadpool of N threads, ACL NEScheduler::set_num_threads(N),
 * oneDNN (Debian's is built with OpenMP) reads OMP_NUM_THREADS, which must be N (the
 * script sets it; the program refuses to run otherwise).
 */
#include <dnnl.h>
#include <math.h>
#include <pthreadpool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xnnpack.h>

#include "layers_bench.h"

/* rounds per case at most */
#define LB_MAX_REPS 50

#ifndef LB_XNN_VERSION
#define LB_XNN_VERSION "?"
#endif

static const struct lb_case cases[] = {
  /* name            kind      H    W   IC   OC  K  s  p  groups */
  {"res3x3_64",      LB_CONV, 100, 136,  64,  64, 3, 1, 1, 1},
  {"res1x1_256_64",  LB_CONV, 100, 136, 256,  64, 1, 1, 0, 1},
  {"res3x3s2_128",   LB_CONV,  50,  68, 128, 128, 3, 2, 1, 1},
  {"fpn3x3_256",     LB_CONV,  25,  34, 256, 256, 3, 1, 1, 1},
  {"stem7x7s2_3_64", LB_CONV, 256, 352,   3,  64, 7, 2, 3, 1},
  {"mnv3_dw3x3_240", LB_CONV,  20,  20, 240, 240, 3, 1, 1, 240},
  {"mnv3_1x1_240_80", LB_CONV, 20,  20, 240,  80, 1, 1, 0, 1},
  {"fc_12544_1024",  LB_FC,   100,   1, 12544, 1024, 0, 0, 0, 1},
  {"maxpool3x3s2_64", LB_POOL, 128, 176, 64,  64, 3, 2, 1, 1},
};

double
lb_now_ms (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int
cmp_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return (x > y) - (x < y);
}

static double
lb_median (double *t, int n)
{
  qsort (t, n, sizeof *t, cmp_double);
  return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

static int
out_hw (int in, int k, int s, int p)
{
  return (in + 2 * p - k) / s + 1;
}

void
lb_out_dims (const struct lb_case *c, int *oh, int *ow)
{
  if (c->kind == LB_FC) {
    *oh = c->h;
    *ow = 1;
    return;
  }
  *oh = out_hw (c->h, c->k, c->s, c->p);
  *ow = out_hw (c->w, c->k, c->s, c->p);
}

static size_t
in_elems (const struct lb_case *c)
{
  return c->kind == LB_FC ? (size_t) c->h * c->ic : (size_t) c->h * c->w * c->ic;
}

static size_t
out_elems (const struct lb_case *c)
{
  int oh, ow;
  lb_out_dims (c, &oh, &ow);
  return c->kind == LB_FC ? (size_t) c->h * c->oc : (size_t) oh * ow * c->oc;
}

/* weights in torch's layout: [OC][IC/groups][K][K], FC [OC][IC] */
static size_t
wei_elems (const struct lb_case *c)
{
  if (c->kind == LB_POOL)
    return 0;
  if (c->kind == LB_FC)
    return (size_t) c->oc * c->ic;
  return (size_t) c->oc * (c->ic / c->groups) * c->k * c->k;
}

static double
flops (const struct lb_case *c)
{
  if (c->kind == LB_POOL)
    return 0;
  return 2.0 * out_elems (c) * (wei_elems (c) / c->oc);
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float
urand (void)
{
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (float) ((rng >> 40) * (2.0 / 16777216.0) - 1.0);
}

/* ---- oneDNN ------------------------------------------------------------------- */

#define DNNL_CHECK(x) do { dnnl_status_t st_ = (x); if (st_ != dnnl_success) { \
      fprintf (stderr, "%s:%d: %s: oneDNN status %d\n", __FILE__, __LINE__, #x, (int) st_); \
      exit (2); } } while (0)

static dnnl_engine_t eng;
static dnnl_stream_t strm;

static void
dnnl_reorder_into (const_dnnl_memory_desc_t from_md, void *from, const_dnnl_memory_desc_t to_md,
    dnnl_memory_t to)
{
  dnnl_memory_t src;
  dnnl_primitive_desc_t pd;
  dnnl_primitive_t p;
  DNNL_CHECK (dnnl_memory_create (&src, from_md, eng, from));
  DNNL_CHECK (dnnl_reorder_primitive_desc_create (&pd, from_md, eng, to_md, eng, NULL));
  DNNL_CHECK (dnnl_primitive_create (&p, pd));
  dnnl_exec_arg_t args[] = {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, to}};
  DNNL_CHECK (dnnl_primitive_execute (p, strm, 2, args));
  DNNL_CHECK (dnnl_stream_wait (strm));
  dnnl_primitive_destroy (p);
  dnnl_primitive_desc_destroy (pd);
  dnnl_memory_destroy (src);
}

struct dnnl_case {
  dnnl_primitive_t p;
  int nargs;
  dnnl_exec_arg_t args[5];
  dnnl_memory_t mem[5];
};

static void
dnnl_run_once (void *ctx)
{
  struct dnnl_case *r = ctx;
  DNNL_CHECK (dnnl_primitive_execute (r->p, strm, r->nargs, r->args));
  DNNL_CHECK (dnnl_stream_wait (strm));
}

static void
dnnl_finish (void *ctx)
{
  struct dnnl_case *r = ctx;
  dnnl_primitive_destroy (r->p);
  for (int i = 0; i < r->nargs; i++)
    dnnl_memory_destroy (r->mem[i]);
  free (r);
}

/* the primitive on in, wei, bias, writing into out */
static struct dnnl_case *
setup_onednn (const struct lb_case *c, const float *in, const float *wei, const float *bias,
    float *out, char *impl, size_t impl_len)
{
  int oh, ow;
  lb_out_dims (c, &oh, &ow);
  dnnl_memory_desc_t src_md, dst_md, wei_md = NULL, bias_md = NULL, wei_user_md = NULL;
  dnnl_primitive_desc_t pd;
  dnnl_memory_t src_m, dst_m, wei_m = NULL, bias_m = NULL;

  if (c->kind == LB_FC) {
    /* the engine's linears: a matmul on torch's [out][in] weights in place */
    dnnl_dims_t sd = {c->h, c->ic}, wd = {c->ic, c->oc}, bd = {1, c->oc}, dd = {c->h, c->oc};
    DNNL_CHECK (dnnl_memory_desc_create_with_tag (&src_md, 2, sd, dnnl_f32, dnnl_ab));
    DNNL_CHECK (dnnl_memory_desc_create_with_tag (&wei_md, 2, wd, dnnl_f32, dnnl_ba));
    DNNL_CHECK (dnnl_memory_desc_create_with_tag (&bias_md, 2, bd, dnnl_f32, dnnl_ab));
    DNNL_CHECK (dnnl_memory_desc_create_with_tag (&dst_md, 2, dd, dnnl_f32, dnnl_ab));
    DNNL_CHECK (dnnl_matmul_primitive_desc_create (&pd, eng, src_md, wei_md, bias_md, dst_md, NULL));
  } else {
    dnnl_dims_t sd = {1, c->ic, c->h, c->w}, dd = {1, c->oc, oh, ow};
    DNNL_CHECK (dnnl_memory_desc_create_with_tag (&src_md, 4, sd, dnnl_f32, dnnl_nhwc));
    DNNL_CHECK (dnnl_memory_desc_create_with_tag (&dst_md, 4, dd, dnnl_f32, dnnl_nhwc));
    dnnl_dims_t strides = {c->s, c->s}, pad = {c->p, c->p}, dil = {0, 0}, kern = {c->k, c->k};
    if (c->kind == LB_POOL) {
      DNNL_CHECK (dnnl_pooling_forward_primitive_desc_create (&pd, eng, dnnl_forward_inference,
              dnnl_pooling_max, src_md, dst_md, strides, kern, dil, pad, pad, NULL));
    } else {
      dnnl_dims_t bd = {c->oc};
      DNNL_CHECK (dnnl_memory_desc_create_with_tag (&bias_md, 1, bd, dnnl_f32, dnnl_a));
      if (c->groups > 1) {
        dnnl_dims_t wd = {c->groups, c->oc / c->groups, c->ic / c->groups, c->k, c->k};
        DNNL_CHECK (dnnl_memory_desc_create_with_tag (&wei_user_md, 5, wd, dnnl_f32, dnnl_goihw));
        DNNL_CHECK (dnnl_memory_desc_create_with_tag (&wei_md, 5, wd, dnnl_f32, dnnl_format_tag_any));
      } else {
        dnnl_dims_t wd = {c->oc, c->ic, c->k, c->k};
        DNNL_CHECK (dnnl_memory_desc_create_with_tag (&wei_user_md, 4, wd, dnnl_f32, dnnl_oihw));
        DNNL_CHECK (dnnl_memory_desc_create_with_tag (&wei_md, 4, wd, dnnl_f32, dnnl_format_tag_any));
      }
      DNNL_CHECK (dnnl_convolution_forward_primitive_desc_create (&pd, eng, dnnl_forward_inference,
              dnnl_convolution_direct, src_md, wei_md, bias_md, dst_md, strides, dil, pad, pad, NULL));
    }
  }
  const char *name = "?";
  dnnl_primitive_desc_query (pd, dnnl_query_impl_info_str, 0, &name);
  snprintf (impl, impl_len, "%s", name);

  DNNL_CHECK (dnnl_memory_create (&src_m, src_md, eng, (void *) in));
  DNNL_CHECK (dnnl_memory_create (&dst_m, dst_md, eng, out));
  int nargs = 0;
  dnnl_exec_arg_t args[5];
  args[nargs++] = (dnnl_exec_arg_t) {DNNL_ARG_SRC, src_m};
  args[nargs++] = (dnnl_exec_arg_t) {DNNL_ARG_DST, dst_m};
  if (c->kind == LB_FC) {
    DNNL_CHECK (dnnl_memory_create (&wei_m, wei_md, eng, (void *) wei));
    DNNL_CHECK (dnnl_memory_create (&bias_m, bias_md, eng, (void *) bias));
  } else if (c->kind == LB_CONV) {
    const_dnnl_memory_desc_t chosen = dnnl_primitive_desc_query_md (pd, dnnl_query_weights_md, 0);
    DNNL_CHECK (dnnl_memory_create (&wei_m, chosen, eng, DNNL_MEMORY_ALLOCATE));
    dnnl_reorder_into (wei_user_md, (void *) wei, chosen, wei_m);
    DNNL_CHECK (dnnl_memory_create (&bias_m, bias_md, eng, (void *) bias));
  }
  if (wei_m) {
    args[nargs++] = (dnnl_exec_arg_t) {DNNL_ARG_WEIGHTS, wei_m};
    args[nargs++] = (dnnl_exec_arg_t) {DNNL_ARG_BIAS, bias_m};
  }
  dnnl_memory_t ws_m = NULL;
  if (c->kind == LB_POOL) {
    const_dnnl_memory_desc_t ws = dnnl_primitive_desc_query_md (pd, dnnl_query_workspace_md, 0);
    if (ws && dnnl_memory_desc_get_size (ws)) {
      DNNL_CHECK (dnnl_memory_create (&ws_m, ws, eng, DNNL_MEMORY_ALLOCATE));
      args[nargs++] = (dnnl_exec_arg_t) {DNNL_ARG_WORKSPACE, ws_m};
    }
  }
  struct dnnl_case *r = calloc (1, sizeof *r);
  DNNL_CHECK (dnnl_primitive_create (&r->p, pd));
  r->nargs = nargs;
  for (int i = 0; i < nargs; i++) {
    r->args[i] = args[i];
    r->mem[i] = args[i].memory;
  }
  dnnl_primitive_desc_destroy (pd);
  dnnl_memory_desc_destroy (src_md);
  dnnl_memory_desc_destroy (dst_md);
  if (wei_md)
    dnnl_memory_desc_destroy (wei_md);
  if (wei_user_md)
    dnnl_memory_desc_destroy (wei_user_md);
  if (bias_md)
    dnnl_memory_desc_destroy (bias_md);
  return r;
}

/* ---- XNNPACK ------------------------------------------------------------------ */

#define XNN_CHECK(x) do { enum xnn_status st_ = (x); if (st_ != xnn_status_success) { \
      fprintf (stderr, "%s:%d: %s: XNNPACK status %d\n", __FILE__, __LINE__, #x, (int) st_); \
      exit (2); } } while (0)

struct xnn_case {
  xnn_operator_t op;
  pthreadpool_t tp;
  void *workspace;
};

static void
xnn_run_once (void *ctx)
{
  struct xnn_case *r = ctx;
  XNN_CHECK (xnn_run_operator (r->op, r->tp));
}

static void
xnn_finish (void *ctx)
{
  struct xnn_case *r = ctx;
  xnn_delete_operator (r->op);
  free (r->workspace);
  free (r);
}

/* the operator on in, wei, bias, writing into out */
static struct xnn_case *
setup_xnnpack (const struct lb_case *c, const float *in, const float *wei, const float *bias,
    float *out, pthreadpool_t tp)
{
  xnn_operator_t op = NULL;
  void *workspace = NULL;
  float *w_ohwi = NULL;
  int oh, ow;
  lb_out_dims (c, &oh, &ow);

  if (c->kind == LB_CONV) {
    /* XNNPACK: [groups][OC/g][K][K][IC/g] */
    int icg = c->ic / c->groups, ocg = c->oc / c->groups;
    w_ohwi = malloc (wei_elems (c) * sizeof (float));
    for (int o = 0; o < c->oc; o++)
      for (int i = 0; i < icg; i++)
        for (int y = 0; y < c->k; y++)
          for (int x = 0; x < c->k; x++)
            w_ohwi[((size_t) (o * c->k + y) * c->k + x) * icg + i] =
                wei[((size_t) (o * icg + i) * c->k + y) * c->k + x];
    XNN_CHECK (xnn_create_convolution2d_nhwc_f32 (c->p, c->p, c->p, c->p, c->k, c->k, c->s, c->s,
            1, 1, c->groups, icg, ocg, c->ic, c->oc, w_ohwi, bias, -INFINITY, INFINITY, 0,
            NULL, NULL, &op));
    size_t ws_size = 0, ws_align = 0, o_h, o_w;
    XNN_CHECK (xnn_reshape_convolution2d_nhwc_f32 (op, 1, c->h, c->w, &ws_size, &ws_align,
            &o_h, &o_w, tp));
    if (ws_size)
      workspace = aligned_alloc (ws_align < 64 ? 64 : ws_align, (ws_size + 63) & ~(size_t) 63);
    XNN_CHECK (xnn_setup_convolution2d_nhwc_f32 (op, workspace, in, out));
  } else if (c->kind == LB_FC) {
    XNN_CHECK (xnn_create_fully_connected_nc_f32 (c->ic, c->oc, c->ic, c->oc, wei, bias,
            -INFINITY, INFINITY, 0, NULL, NULL, &op));
    XNN_CHECK (xnn_reshape_fully_connected_nc_f32 (op, c->h, tp));
    XNN_CHECK (xnn_setup_fully_connected_nc_f32 (op, in, out));
  } else {
    XNN_CHECK (xnn_create_max_pooling2d_nhwc_f32 (c->p, c->p, c->p, c->p, c->k, c->k, c->s, c->s,
            1, 1, -INFINITY, INFINITY, 0, &op));
    size_t o_h, o_w;
    XNN_CHECK (xnn_reshape_max_pooling2d_nhwc_f32 (op, 1, c->h, c->w, c->ic, c->ic, c->ic,
            &o_h, &o_w, tp));
    XNN_CHECK (xnn_setup_max_pooling2d_nhwc_f32 (op, in, out));
  }
  free (w_ohwi);   /* packed by the operator */
  struct xnn_case *r = calloc (1, sizeof *r);
  r->op = op;
  r->tp = tp;
  r->workspace = workspace;
  return r;
}

/* ---- main --------------------------------------------------------------------- */

static void
compare (const float *ref, const float *got, size_t n, double *rel)
{
  double m = 0, r = 0;
  for (size_t i = 0; i < n; i++) {
    double d = fabs ((double) ref[i] - got[i]);
    if (d > m || d != d)
      m = d != d ? INFINITY : d;
    if (fabs (ref[i]) > r)
      r = fabs (ref[i]);
  }
  *rel = m / (r > 0 ? r : 1);
}

static int
selected (const char *only, const char *name)
{
  if (!only)
    return 1;
  size_t n = strlen (name);
  for (const char *p = only; *p;) {
    const char *e = strchr (p, ',');
    size_t len = e ? (size_t) (e - p) : strlen (p);
    if (len == n && !strncmp (p, name, n))
      return 1;
    p += len + (e != NULL);
  }
  return 0;
}

/* one library's side of a case */
struct side {
  const char *name;
  void (*run) (void *);
  void *ctx;
  float *out;
  double t[LB_MAX_REPS];
  double rel;
};

static void
acl_run_once (void *ctx)
{
  lb_acl_run (ctx);
}

int
main (int argc, char **argv)
{
  int threads = 1, use_acl = 1, acl_fm = 0, min_reps = 3;
  double min_ms = 3000;
  const char *only = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp (argv[i], "--threads") && i + 1 < argc)
      threads = atoi (argv[++i]);
    else if (!strcmp (argv[i], "--reps") && i + 1 < argc)
      min_reps = atoi (argv[++i]);
    else if (!strcmp (argv[i], "--min-ms") && i + 1 < argc)
      min_ms = atof (argv[++i]);
    else if (!strcmp (argv[i], "--only") && i + 1 < argc)
      only = argv[++i];
    else if (!strcmp (argv[i], "--no-acl"))
      use_acl = 0;
    else if (!strcmp (argv[i], "--acl-fast-math"))
      acl_fm = 1;
    else {
      fprintf (stderr, "usage: %s [--threads N] [--reps N] [--min-ms MS] [--only NAME,...] "
          "[--no-acl] [--acl-fast-math]\ncases:", argv[0]);
      for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        fprintf (stderr, " %s", cases[k].name);
      fprintf (stderr, "\n");
      return 2;
    }
  }
  if (threads < 1 || min_reps < 1 || min_reps > LB_MAX_REPS)
    return 2;
  const char *omp = getenv ("OMP_NUM_THREADS");
  if (!omp || atoi (omp) != threads) {
    fprintf (stderr, "OMP_NUM_THREADS must be %d (oneDNN's threads), is %s\n", threads,
        omp ? omp : "unset");
    return 2;
  }

  const dnnl_version_t *v = dnnl_version ();
  DNNL_CHECK (dnnl_engine_create (&eng, dnnl_cpu, 0));
  DNNL_CHECK (dnnl_stream_create (&strm, eng, dnnl_stream_default_flags));
  XNN_CHECK (xnn_initialize (NULL));
  pthreadpool_t tp = threads > 1 ? pthreadpool_create (threads) : NULL;
  if (use_acl)
    lb_acl_init (threads);
  printf ("# oneDNN %d.%d.%d, XNNPACK %s, ACL %s%s; threads %d; rounds of one run of each "
      "library (order rotated), >= %d rounds and >= %.0f ms in all (at most %d), after one "
      "untimed; medians\n", v->major, v->minor, v->patch, LB_XNN_VERSION,
      use_acl ? lb_acl_version () : "off", acl_fm ? " (fast math)" : "", threads, min_reps,
      min_ms, LB_MAX_REPS);
  printf ("# %-16s %7s %10s %9s %9s %7s %7s %7s %8s %8s %6s  %s\n", "case", "GFLOP",
      "onednn_ms", "xnn_ms", "acl_ms", "ref/xnn", "ref/acl", "xnn/acl", "xnn_rel", "acl_rel",
      "rounds", "oneDNN impl | ACL method");

  int bad = 0;
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    const struct lb_case *c = &cases[k];
    if (!selected (only, c->name))
      continue;
    size_t ni = in_elems (c), no = out_elems (c), nw = wei_elems (c);
    float *in = malloc (ni * sizeof (float)), *wei = malloc ((nw + 1) * sizeof (float));
    float *bias = malloc (c->oc * sizeof (float));
    for (size_t i = 0; i < ni; i++)
      in[i] = urand ();
    float scale = nw ? 1.0f / sqrtf ((float) (nw / c->oc)) : 0;
    for (size_t i = 0; i < nw; i++)
      wei[i] = urand () * scale;
    for (int i = 0; i < c->oc; i++)
      bias[i] = 0.1f * urand ();

    struct side sides[3] = {{"onednn"}, {"xnnpack"}, {"acl"}};
    int nsides = use_acl ? 3 : 2;
    for (int i = 0; i < nsides; i++)
      sides[i].out = calloc (no, sizeof (float));
    char impl[128], method[64] = "-";
    sides[0].ctx = setup_onednn (c, in, wei, bias, sides[0].out, impl, sizeof impl);
    sides[0].run = dnnl_run_once;
    sides[1].ctx = setup_xnnpack (c, in, wei, bias, sides[1].out, tp);
    sides[1].run = xnn_run_once;
    if (use_acl) {
      sides[2].ctx = lb_acl_setup (c, in, wei, bias, acl_fm, method, sizeof method);
      sides[2].run = acl_run_once;
    }
    for (int i = 0; i < nsides; i++)
      sides[i].run (sides[i].ctx);
    /* rounds: every library once, the order rotated, so that what else the machine
     * does weighs on all of them alike */
    int n = 0;
    double total = 0;
    while (n < min_reps || (total < min_ms && n < LB_MAX_REPS)) {
      for (int j = 0; j < nsides; j++) {
        struct side *sd = &sides[(n + j) % nsides];
        double t0 = lb_now_ms ();
        sd->run (sd->ctx);
        sd->t[n] = lb_now_ms () - t0;
        total += sd->t[n];
      }
      n++;
    }
    dnnl_finish (sides[0].ctx);
    xnn_finish (sides[1].ctx);
    if (use_acl)
      lb_acl_finish (sides[2].ctx, sides[2].out);
    double med[3] = {NAN, NAN, NAN};
    int bad_side[3] = {0, 0, 0};
    for (int i = 0; i < nsides; i++) {
      med[i] = lb_median (sides[i].t, n);
      if (i > 0) {
        compare (sides[0].out, sides[i].out, no, &sides[i].rel);
        bad_side[i] = !(sides[i].rel <= 1e-4);
        bad |= bad_side[i];
      }
    }
    printf ("%-18s %7.3f %10.1f %9.1f %9.1f %7.2f %7.2f %7.2f %8.1e %8.1e %6d  %s | %s%s%s\n",
        c->name, flops (c) / 1e9, med[0], med[1], med[2], med[0] / med[1], med[0] / med[2],
        med[1] / med[2], sides[1].rel, use_acl ? sides[2].rel : NAN, n, impl, method,
        bad_side[1] ? " MISMATCH(xnnpack)" : "", bad_side[2] ? " MISMATCH(acl)" : "");
    fflush (stdout);
    for (int i = 0; i < nsides; i++)
      free (sides[i].out);
    free (in);
    free (wei);
    free (bias);
  }
  if (tp)
    pthreadpool_destroy (tp);
  dnnl_stream_destroy (strm);
  dnnl_engine_destroy (eng);
  return bad;
}
