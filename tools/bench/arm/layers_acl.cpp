// SPDX-License-Identifier: LGPL-2.1-or-later
// layers_bench's Arm Compute Library side (C++: ACL's C API, Acl.h, has only an
// activation operator). NHWC tensors, the NE* runtime functions the graph API would
// pick: NEConvolutionLayer (it chooses GEMM, direct, indirect or Winograd; the method is
// reported), NEDepthwiseConvolutionLayer, NEFullyConnectedLayer, NEPoolingLayer.
// A bench tool, not part of the engine.
#include <arm_compute/runtime/NEON/NEFunctions.h>
#include <arm_compute/runtime/NEON/NEScheduler.h>
#include <arm_compute/runtime/Tensor.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "layers_bench.h"

#ifndef LB_ACL_VERSION
#define LB_ACL_VERSION "?"
#endif

using namespace arm_compute;

// copy between a dense buffer (dimension 0 fastest) and an ACL tensor, through its strides
static void
copy_tensor (Tensor &t, float *dense, bool to_tensor)
{
  const ITensorInfo *info = t.info ();
  const TensorShape &shape = info->tensor_shape ();
  Window win;
  win.use_tensor_dimensions (shape);
  Iterator it (&t, win);
  execute_window_loop (win, [&] (const Coordinates &id) {
    size_t idx = 0;
    for (int d = (int) shape.num_dimensions () - 1; d >= 0; d--)
      idx = idx * shape[d] + id[d];
    float *p = reinterpret_cast<float *> (it.ptr ());
    if (to_tensor)
      *p = dense[idx];
    else
      dense[idx] = *p;
  }, it);
}

static void
init (Tensor &t, const TensorShape &s)
{
  t.allocator ()->init (TensorInfo (s, 1, DataType::F32, DataLayout::NHWC));
}

static const char *
method_name (ConvolutionMethod m)
{
  switch (m) {
    case ConvolutionMethod::GEMM: return "GEMM";
    case ConvolutionMethod::GEMM_CONV2D: return "GEMM_CONV2D";
    case ConvolutionMethod::DIRECT: return "DIRECT";
    case ConvolutionMethod::INDIRECT: return "INDIRECT";
    case ConvolutionMethod::WINOGRAD: return "WINOGRAD";
    case ConvolutionMethod::FFT: return "FFT";
  }
  return "?";
}

extern "C" void
lb_acl_init (int threads)
{
  NEScheduler::get ().set_num_threads (threads);
}

extern "C" const char *
lb_acl_version (void)
{
  return LB_ACL_VERSION;
}

struct acl_case {
  Tensor src, dst, w, b;
  std::unique_ptr<IFunction> fn;
};

extern "C" void *
lb_acl_setup (const struct lb_case *c, const float *in, const float *wei, const float *bias,
    int fast_math, char *method, size_t method_len)
{
  int oh, ow;
  lb_out_dims (c, &oh, &ow);
  auto ac = new acl_case ();
  Tensor &src = ac->src, &dst = ac->dst, &w = ac->w, &b = ac->b;
  std::unique_ptr<IFunction> &fn = ac->fn;
  std::vector<float> wbuf;

  if (c->kind == LB_FC) {
    // ACL shapes list dimension 0 first: input (IC, rows), weights (IC, OC) = torch's
    // [OC][IC] in memory, transposed by the function (FullyConnectedLayerInfo's default)
    init (src, TensorShape (c->ic, c->h));
    init (w, TensorShape (c->ic, c->oc));
    init (b, TensorShape (c->oc));
    init (dst, TensorShape (c->oc, c->h));
    auto f = std::make_unique<NEFullyConnectedLayer> ();
    f->configure (&src, &w, &b, &dst);
    fn = std::move (f);
    wbuf.assign (wei, wei + (size_t) c->ic * c->oc);
    snprintf (method, method_len, "FC");
  } else {
    init (src, TensorShape (c->ic, c->w, c->h, 1));
    init (dst, TensorShape (c->oc, ow, oh, 1));
    PadStrideInfo psi (c->s, c->s, c->p, c->p);
    if (c->kind == LB_POOL) {
      auto f = std::make_unique<NEPoolingLayer> ();
      f->configure (&src, &dst, PoolingLayerInfo (PoolingType::MAX, Size2D (c->k, c->k),
              DataLayout::NHWC, psi));
      fn = std::move (f);
      snprintf (method, method_len, "POOL");
    } else if (c->groups > 1) {
      // depthwise: weights (C, KW, KH) NHWC, [K][K][C] in memory
      if (c->groups != c->ic || c->groups != c->oc) {
        fprintf (stderr, "ACL side: only depthwise grouped convolutions\n");
        exit (2);
      }
      init (w, TensorShape (c->ic, c->k, c->k));
      init (b, TensorShape (c->oc));
      wbuf.resize ((size_t) c->ic * c->k * c->k);
      for (int ch = 0; ch < c->ic; ch++)
        for (int y = 0; y < c->k; y++)
          for (int x = 0; x < c->k; x++)
            wbuf[((size_t) y * c->k + x) * c->ic + ch] = wei[((size_t) ch * c->k + y) * c->k + x];
      auto f = std::make_unique<NEDepthwiseConvolutionLayer> ();
      f->configure (&src, &w, &b, &dst, psi, 1);
      fn = std::move (f);
      snprintf (method, method_len, "DEPTHWISE");
    } else {
      // weights (IC, KW, KH, OC) NHWC: [OC][K][K][IC] in memory
      init (w, TensorShape (c->ic, c->k, c->k, c->oc));
      init (b, TensorShape (c->oc));
      wbuf.resize ((size_t) c->oc * c->ic * c->k * c->k);
      for (int o = 0; o < c->oc; o++)
        for (int i = 0; i < c->ic; i++)
          for (int y = 0; y < c->k; y++)
            for (int x = 0; x < c->k; x++)
              wbuf[(((size_t) o * c->k + y) * c->k + x) * c->ic + i] =
                  wei[(((size_t) o * c->ic + i) * c->k + y) * c->k + x];
      ConvolutionMethod m = NEConvolutionLayer::get_convolution_method (src.info (), w.info (),
          dst.info (), psi, WeightsInfo (), Size2D (1U, 1U), ActivationLayerInfo (),
          fast_math != 0);
      auto f = std::make_unique<NEConvolutionLayer> ();
      f->configure (&src, &w, &b, &dst, psi, WeightsInfo (), Size2D (1U, 1U),
          ActivationLayerInfo (), fast_math != 0);
      fn = std::move (f);
      snprintf (method, method_len, "%s", method_name (m));
    }
  }
  src.allocator ()->allocate ();
  dst.allocator ()->allocate ();
  copy_tensor (src, const_cast<float *> (in), true);
  if (c->kind != LB_POOL) {
    w.allocator ()->allocate ();
    b.allocator ()->allocate ();
    copy_tensor (w, wbuf.data (), true);
    copy_tensor (b, const_cast<float *> (bias), true);
  }
  return ac;
}

extern "C" void
lb_acl_run (void *handle)
{
  static_cast<acl_case *> (handle)->fn->run ();
}

extern "C" void
lb_acl_finish (void *handle, float *out)
{
  auto ac = static_cast<acl_case *> (handle);
  copy_tensor (ac->dst, out, false);
  delete ac;
}
