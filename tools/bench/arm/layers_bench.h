/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* layers_bench: what the C driver (layers_bench.c) and the ACL side (layers_acl.cpp)
 * share. A bench tool, not part of the engine. */
#ifndef LAYERS_BENCH_H
#define LAYERS_BENCH_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum lb_kind { LB_CONV, LB_FC, LB_POOL };

/* NHWC, batch 1. LB_FC: h rows of ic inputs, oc outputs (w unused). Convolutions and
 * pooling: square kernel k, stride s, padding p on every side; input h x w x ic. */
struct lb_case {
  const char *name;
  enum lb_kind kind;
  int h, w, ic, oc, k, s, p, groups;
};

double lb_now_ms (void);
void lb_out_dims (const struct lb_case *c, int *oh, int *ow);

/* layers_acl.cpp: NEScheduler's threads; the library's version string. One case:
 * lb_acl_setup configures the function on the inputs (weights in torch's layout,
 * [OC][IC/groups][K][K] or [OC][IC]) and says which method ACL chose, lb_acl_run runs
 * it once, lb_acl_finish copies its output into out and frees it. */
void lb_acl_init (int threads);
const char *lb_acl_version (void);
void *lb_acl_setup (const struct lb_case *c, const float *in, const float *wei,
    const float *bias, int fast_math, char *method, size_t method_len);
void lb_acl_run (void *handle);
void lb_acl_finish (void *handle, float *out);

#ifdef __cplusplus
}
#endif
#endif
