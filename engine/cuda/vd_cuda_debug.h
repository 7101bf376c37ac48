/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Internal: observation and test hooks of the CUDA backend, for tests/gpu and
 * the GPU benchmark. Declared without CUDA types so that plain C test programs
 * can include it. Every function accepts a context of any backend and does
 * nothing useful (returns 0/FALSE) for a non-CUDA one. Same threading rule as
 * vd_detect(): the thread that uses the context, and only with no batch in
 * flight (vd_context_in_flight() == 0): the worker running submitted batches
 * reads and writes the state these touch. */
#ifndef VD_CUDA_DEBUG_H
#define VD_CUDA_DEBUG_H

#include "vd_context_private.h"

G_BEGIN_DECLS

/* Host synchronisations made by this context so far (every one goes through
 * the backend's counted wrapper): exactly one per frame after the first frame
 * of an input size, which plans its workspace. */
guint64 vd_cuda_context_sync_count(const vd_context *ctx);

/* Capture each frame's device work (upload to readback) in a CUDA graph per
 * input size and thresholds, and replay it (from the second frame of a size
 * on). On by default; VD_CUDA_GRAPHS=0 in the environment turns it off at
 * creation. Returns FALSE for a non-CUDA context. */
gboolean vd_cuda_context_set_graphs(vd_context *ctx, gboolean enable);

/* TRUE when the last frame was replayed from a captured graph; and the number
 * of frames replayed since creation. Enabling graphs also clears the back-off
 * left by earlier capture failures. */
gboolean vd_cuda_context_graph_replayed(const vd_context *ctx);
guint64 vd_cuda_context_graph_replays(const vd_context *ctx);

/* Fault injection: drops the captured graph, so that the next frame of the
 * current input size tries a capture, and makes the next @n captures fail at
 * instantiation (the capture itself runs and is discarded), as a transient
 * out-of-memory would; the frames run eagerly and the retry back-off applies
 * (vd_run_status). VD_CUDA_FAIL_CAPTURES=N in the environment at context
 * creation fails the first N captures, for tests through the element. */
void vd_cuda_context_fail_captures(vd_context *ctx, int n);

/* Negative test of the sync count: with @enable, every frame makes one more,
 * deliberate, host synchronisation in the middle of its work (through the
 * wrapper, as any added sync must), so a test can check that the count sees it. */
void vd_cuda_context_inject_sync(vd_context *ctx, gboolean enable);

/* Convolutions that cuDNN refused in their fused form and now run unfused. */
int vd_cuda_context_unfused_convolutions(const vd_context *ctx);

/* Convolution candidates cuDNN refused (NOT_SUPPORTED) at run time since
 * creation, every plan's: each is recorded with its layer, algorithm and status
 * in vd_context_kernels(). */
guint64 vd_cuda_context_demotions(const vd_context *ctx);

/* The image slots of the batch plan (0 before the first batch): it grows to
 * a larger batch and shrinks after VD_BATCH_SHRINK_AFTER small batches
 * (vd_batch_plan_slots in vd_cuda_private.h). */
int vd_cuda_context_batch_slots(const vd_context *ctx);

/* Device memory the context holds, in bytes: the convolutions' shared
 * workspace, the current plan's buffers (0 before the first frame), the
 * detection NMS workspace (shared by the plans, sized by the score threshold:
 * 0 before the first frame) and the weights. */
typedef struct {
    size_t conv_workspace, plan, box_nms_workspace, weights;
} vd_cuda_memory;

vd_cuda_memory vd_cuda_context_memory(const vd_context *ctx);

G_END_DECLS

#endif /* VD_CUDA_DEBUG_H */
