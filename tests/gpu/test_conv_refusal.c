/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The CUDA convolution's answer to cuDNN's statuses (issue 37, item 5), host
 * only (suite engine, CUDA builds; no device: cuDNN's calls with no handle
 * return BAD_PARAM before touching one):
 *   - a candidate cuDNN refuses (NOT_SUPPORTED; here one needing more than the
 *     workspace, which vd_cuda_conv_run refuses as cuDNN would) is a demotion:
 *     counted, recorded with its algorithm and status, the next candidate
 *     tried, and described by vd_cuda_conv_describe (vd_context_kernels());
 *   - BAD_PARAM is an error, not a refusal: VD_ERROR_INTERNAL naming the
 *     layer, the algorithm and the status, and the convolution keeps its
 *     candidate (no demotion "for good" hiding a bug). */
#include "vd_config.h"

#include "cuda/vd_cuda_private.h"
#include "visiondetect/vd.h"

#include <string.h>

static void test_statuses(void)
{
    g_assert_true(vd_cudnn_refused(CUDNN_STATUS_NOT_SUPPORTED));
#if CUDNN_MAJOR >= 9
    g_assert_true(vd_cudnn_refused(CUDNN_STATUS_NOT_SUPPORTED_SHAPE));
    g_assert_false(vd_cudnn_refused(CUDNN_STATUS_BAD_PARAM_NULL_POINTER));
#endif
    g_assert_false(vd_cudnn_refused(CUDNN_STATUS_BAD_PARAM));
    g_assert_false(vd_cudnn_refused(CUDNN_STATUS_EXECUTION_FAILED));
    g_assert_false(vd_cudnn_refused(CUDNN_STATUS_SUCCESS));
}

static void test_refusal_then_bad_param(void)
{
    vd_cuda_layers layers;
    vd_cuda_conv_weights weights;
    vd_cuda_tensor src = {4, 4, 8, NULL, 1}, dst = {4, 4, 8, NULL, 1};
    vd_cuda_conv conv;
    GError *error = NULL;
    memset(&layers, 0, sizeof(layers));
    memset(&weights, 0, sizeof(weights));
    memset(&conv, 0, sizeof(conv));
    layers.workspace_bytes = 1024;
    g_strlcpy(weights.name, "backbone.body.layer1.0.conv2", sizeof(weights.name));
    conv.weights = &weights;
    conv.src = &src;
    conv.dst = &dst;
    conv.relu = TRUE;
    conv.mode = VD_CUDA_CONV_FUSED;
    conv.n_algos = 2;
    conv.algos[0] = CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
    conv.algo_bytes[0] = 1 << 20; /* more than the workspace: refused */
    conv.algos[1] = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
    conv.algo_bytes[1] = 0;
    conv.unfused_algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;

    gboolean ok = vd_cuda_conv_run(&layers, &conv, &error);
    g_assert_false(ok);
    g_assert_nonnull(error);
    g_test_message("error: %s", error->message);
    /* the refusal: one demotion, recorded */
    g_assert_cmpint(conv.n_demotions, ==, 1);
    g_assert_cmpuint(layers.n_demotions, ==, 1);
    g_assert_cmpint(conv.demoted_algo, ==, CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED);
    g_assert_cmpint(CUDNN_STATUS_CATEGORY(conv.demoted_status), ==, CUDNN_STATUS_NOT_SUPPORTED);
    /* BAD_PARAM (no handle): an error on the second candidate, kept */
    g_assert_true(g_error_matches(error, VD_ERROR, VD_ERROR_INTERNAL));
    g_assert_nonnull(strstr(error->message, "backbone.body.layer1.0.conv2"));
    g_assert_nonnull(strstr(error->message, "IMPLICIT_PRECOMP_GEMM"));
    g_assert_nonnull(strstr(error->message, "BAD_PARAM"));
    g_assert_cmpint(conv.mode, ==, VD_CUDA_CONV_FUSED);
    g_assert_cmpint(conv.algo, ==, 1);
    char *described = vd_cuda_conv_describe(&conv);
    g_test_message("described: %s", described);
    g_assert_nonnull(strstr(described, "cudnn fused IMPLICIT_PRECOMP_GEMM"));
    g_assert_nonnull(strstr(described, "after 1 demotion"));
    g_assert_nonnull(strstr(described, "WINOGRAD_NONFUSED refused"));
    g_free(described);
    g_clear_error(&error);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/conv-refusal/statuses", test_statuses);
    g_test_add_func("/conv-refusal/refusal-then-bad-param", test_refusal_then_bad_param);
    return g_test_run();
}
