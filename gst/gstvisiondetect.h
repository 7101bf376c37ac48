/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* visiondetect: the detection element. */
#ifndef __GST_VISION_DETECT_H__
#define __GST_VISION_DETECT_H__

#include <gst/gst.h>
#include <gst/base/gstbasetransform.h>

G_BEGIN_DECLS
#define GST_TYPE_VISION_DETECT (gst_vision_detect_get_type ())
G_DECLARE_FINAL_TYPE (GstVisionDetect, gst_vision_detect, GST, VISION_DETECT,
    GstBaseTransform);

/**
 * GstVisionDetectPrecision:
 * @GST_VISION_DETECT_PRECISION_AUTO: fp16 on CUDA; on the CPU bf16 where it has
 *   AVX512-BF16 or AMX, else fp32
 * @GST_VISION_DETECT_PRECISION_FP32: 32-bit floats (the CPU's exact torchvision path)
 * @GST_VISION_DETECT_PRECISION_FP16: 16-bit floats with fp32 accumulation (CUDA)
 * @GST_VISION_DETECT_PRECISION_BF16: bfloat16 (CPUs with AVX512-BF16)
 * @GST_VISION_DETECT_PRECISION_INT8: 8-bit integers (CPUs with VNNI, arm64 ones with
 *   the dot product; ResNet models calibrated with vd-detect --calibrate)
 */
typedef enum
{
  GST_VISION_DETECT_PRECISION_AUTO,
  GST_VISION_DETECT_PRECISION_FP32,
  GST_VISION_DETECT_PRECISION_FP16,
  GST_VISION_DETECT_PRECISION_BF16,
  GST_VISION_DETECT_PRECISION_INT8,
} GstVisionDetectPrecision;

/**
 * GstVisionDetectLateFrames:
 * @GST_VISION_DETECT_LATE_SKIP_INFERENCE: a frame that inference would make
 *     late passes on time without detections, marked as skipped
 * @GST_VISION_DETECT_LATE_DROP: a frame that downstream reports as late is
 *     dropped whole (GstBaseTransform's QoS)
 */
typedef enum
{
  GST_VISION_DETECT_LATE_SKIP_INFERENCE,
  GST_VISION_DETECT_LATE_DROP,
} GstVisionDetectLateFrames;

/**
 * GstVisionDetectGapFrames:
 * @GST_VISION_DETECT_GAP_REPEAT: a GAP buffer showing the last inferred
 *     frame's pixels carries its detections; any other is inferred
 * @GST_VISION_DETECT_GAP_SKIP: GAP buffers pass without inference or
 *     detections, marked as skipped
 */
typedef enum
{
  GST_VISION_DETECT_GAP_REPEAT,
  GST_VISION_DETECT_GAP_SKIP,
} GstVisionDetectGapFrames;

GST_ELEMENT_REGISTER_DECLARE (visiondetect);

G_END_DECLS
#endif /* __GST_VISION_DETECT_H__ */
