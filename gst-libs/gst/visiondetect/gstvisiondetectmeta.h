/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* visiondetect: the companion detection meta.
 *
 * The public API of libgstvisiondetectmeta-1.0 (pkg-config
 * gstreamer-visiondetect-meta-1.0, GObject-Introspection namespace
 * GstVisionDetect-1.0), installed as <gst/visiondetect/gstvisiondetectmeta.h>:
 * what an application needs to read the detections visiondetect and
 * visiontrack attach to buffers.
 *
 * GstVideoRegionOfInterestMeta is the standard place for detections, but its
 * scale transform (videoscale, videoconvertscale) drops the "detection" params.
 * GstVisionDetectMeta carries every detection of a buffer with all its fields and
 * rescales them when the frame is scaled, so that the detections survive a
 * downstream resize. visionoverlay and visionjson read the ROI metas (the
 * truth: what other elements change or remove there wins) and take from this
 * meta only what a ROI meta lost or cannot carry (the exact box, confidence,
 * label id, object id, the instance mask, and whether the frame was inferred).
 *
 * Instance masks (a Mask R-CNN's): a detection may carry an 8-bit mask beside
 * it in the meta (gst_vision_detect_meta_add_detection_with_mask()), so that
 * #GstVisionDetection stays a plain struct. The mask covers an integer
 * rectangle of the meta's frame, one byte per frame pixel: byte (i, j) of row
 * j is frame pixel (x + i, y + j); every frame pixel outside the rectangle has
 * probability 0. A byte is round(255 p) of the object's probability p at the
 * pixel, so byte / 255 is the probability and byte >= 128 exactly when
 * p >= 0.5. visiondetect stores the engine's rectangle: torchvision's
 * paste_masks_in_image rectangle (the box expanded by 30/28, clipped to the
 * frame), slightly larger than the box, not the box's rounded pixels (the
 * ROI meta's "mask_rcnn" param covers only those).
 *
 * On a scale transform the masks are resampled by nearest neighbour: output
 * pixel (X, Y) takes the input pixel under its centre, (floor((X + 0.5) *
 * in_width / out_width), floor((Y + 0.5) * in_height / out_height)), and the
 * new rectangle is exactly the output pixels whose centre falls in the old
 * one. Nearest keeps every value one the engine computed (so the >= 128
 * decision of each output pixel is that of a source pixel, not a blend of
 * two that may cross the threshold either way), is what visionoverlay and
 * visionjson apply to a ROI meta's mask anyway, and a 2x upscale repeats each
 * pixel exactly. A copy transform shares the (immutable) mask bytes.
 *
 * Keypoints (a Keypoint R-CNN's): a detection may carry n keypoints beside it
 * (gst_vision_detect_meta_set_keypoints()), 3 n floats: x, y (pixels of the
 * meta's frame, continuous coordinates as the boxes) and score of each. A
 * scale transform multiplies x and y as it does the boxes; a copy shares
 * them. The point names and the skeleton are the model's: the ROI meta's
 * "keypoints" param carries them.
 */
#ifndef __GST_VISION_DETECT_META_H__
#define __GST_VISION_DETECT_META_H__

#include <gst/gst.h>
#include <gst/video/video.h>

G_BEGIN_DECLS

/* Everything declared with it is exported from libgstvisiondetectmeta-1.0
 * (built with -fvisibility=hidden, as the plugin is): the public API only. */
#ifndef GST_VISION_DETECT_META_API
#if defined(_WIN32) && defined(BUILDING_GST_VISION_DETECT_META)
#define GST_VISION_DETECT_META_API __declspec(dllexport) extern
#elif defined(_WIN32)
#define GST_VISION_DETECT_META_API __declspec(dllimport) extern
#elif defined(__GNUC__)
#define GST_VISION_DETECT_META_API extern __attribute__ ((visibility ("default")))
#else
#define GST_VISION_DETECT_META_API extern
#endif
#endif

/**
 * GstVisionDetection:
 * @x: left edge in pixels of the frame the meta describes (continuous coordinates)
 * @y: top edge in pixels
 * @w: width in pixels
 * @h: height in pixels
 * @confidence: detection score, 0..1
 * @label_id: class id of the model (1..num_classes-1)
 * @label: class name, as a quark
 * @roi_id: id of the GstVideoRegionOfInterestMeta added for the same detection
 * @object_id: the object's id across frames given by visiontrack (> 0), 0 when
 *   the detection is not tracked
 * @tracked: TRUE for a box predicted by visiontrack on a frame where the object
 *   was not detected (a detector interval, a missed detection); FALSE for a
 *   detection
 *
 * One detection, in pixels of the frame its #GstVisionDetectMeta describes
 * (#GstVisionDetectMeta.width x #GstVisionDetectMeta.height). A plain struct
 * that callers allocate (on the stack in C); registered as a boxed type for
 * the bindings.
 */
typedef struct
{
  gdouble x, y, w, h;
  gdouble confidence;
  gint label_id;
  GQuark label;
  gint roi_id;
  gint object_id;
  gboolean tracked;
} GstVisionDetection;

/**
 * GstVisionDetectInference:
 * @GST_VISION_DETECT_INFERRED: the detector ran on the frame: no detection
 *     means nothing was found
 * @GST_VISION_DETECT_SKIPPED_INTERVAL: not looked at: between two frames of
 *     the interval property
 * @GST_VISION_DETECT_SKIPPED_LATE: not looked at: the frame would have left the
 *     element later than the latency it reports (live sources)
 * @GST_VISION_DETECT_SKIPPED_GAP: not looked at: a GAP buffer (one whose
 *     pixels visiondetect could not compare with the last inferred frame's)
 * @GST_VISION_DETECT_REPEATED: a GAP buffer whose pixels are those of the last
 *     inferred frame (a duplicate, as videorate makes them): it carries that
 *     frame's detections, unchanged
 *
 * Whether the detector looked at a frame, so that "nothing found" and "not
 * looked at" differ.
 */
typedef enum
{
  GST_VISION_DETECT_INFERRED = 0,
  GST_VISION_DETECT_SKIPPED_INTERVAL,
  GST_VISION_DETECT_SKIPPED_LATE,
  GST_VISION_DETECT_SKIPPED_GAP,
  GST_VISION_DETECT_REPEATED,
} GstVisionDetectInference;

GST_VISION_DETECT_META_API
GType gst_vision_detection_get_type (void);
#define GST_TYPE_VISION_DETECTION (gst_vision_detection_get_type ())

GST_VISION_DETECT_META_API
GstVisionDetection *gst_vision_detection_copy (const GstVisionDetection * detection);

GST_VISION_DETECT_META_API
void gst_vision_detection_free (GstVisionDetection * detection);

GST_VISION_DETECT_META_API
const gchar *gst_vision_detection_get_label (const GstVisionDetection * detection);

GST_VISION_DETECT_META_API
const gchar *gst_vision_detect_inference_name (GstVisionDetectInference inference);

/**
 * GstVisionDetectMeta:
 * @meta: parent
 * @width: width of the frame the boxes refer to
 * @height: height of the frame the boxes refer to
 * @detections: (element-type GstVisionDetection): the detections, by descending score
 * @inference: whether the detector ran on the frame (visiondetect attaches the
 *     meta to every frame it passes, with no detection when it skipped it)
 */
typedef struct
{
  GstMeta meta;
  guint width;
  guint height;
  GArray *detections;
  GstVisionDetectInference inference;

  /*< private >*/
  GArray *masks;
  GPtrArray *keypoints;
} GstVisionDetectMeta;

/**
 * GstVisionDetectionMask:
 * @x: left column of the mask's rectangle, in pixels of the frame
 * @y: top row of the rectangle
 * @width: width of the rectangle and of the mask, in pixels
 * @height: height of the rectangle and of the mask
 * @data: @width x @height bytes, row-major, @width bytes a row: round(255 p)
 *     of the probability p of each frame pixel of the rectangle (>= 128
 *     exactly when p >= 0.5); %NULL when the detection has no mask
 *
 * A detection's instance mask over an integer rectangle of its frame (see
 * the header's description): frame pixel (@x + i, @y + j) is byte
 * @width * j + i of @data; every pixel outside the rectangle has probability
 * 0. Registered as a boxed type (the copy shares @data, which is immutable).
 */
typedef struct
{
  guint x, y;
  guint width, height;
  GBytes *data;
} GstVisionDetectionMask;

GST_VISION_DETECT_META_API
GType gst_vision_detection_mask_get_type (void);
#define GST_TYPE_VISION_DETECTION_MASK (gst_vision_detection_mask_get_type ())

GST_VISION_DETECT_META_API
GstVisionDetectionMask *gst_vision_detection_mask_copy (const
    GstVisionDetectionMask * mask);

GST_VISION_DETECT_META_API
void gst_vision_detection_mask_free (GstVisionDetectionMask * mask);

GST_VISION_DETECT_META_API
GBytes *gst_vision_detection_mask_get_data (const GstVisionDetectionMask *
    mask);

GST_VISION_DETECT_META_API
gboolean gst_vision_detection_mask_at (const GstVisionDetectionMask * mask,
    guint x, guint y);

GST_VISION_DETECT_META_API
GType gst_vision_detect_meta_api_get_type (void);
#define GST_VISION_DETECT_META_API_TYPE (gst_vision_detect_meta_api_get_type ())

GST_VISION_DETECT_META_API
const GstMetaInfo *gst_vision_detect_meta_get_info (void);
#define GST_VISION_DETECT_META_INFO (gst_vision_detect_meta_get_info ())

GST_VISION_DETECT_META_API
GstVisionDetectMeta *gst_buffer_get_vision_detect_meta (GstBuffer * buffer);

GST_VISION_DETECT_META_API
GstVisionDetectMeta *gst_buffer_add_vision_detect_meta (GstBuffer * buffer,
    guint width, guint height);

GST_VISION_DETECT_META_API
void gst_vision_detect_meta_add_detection (GstVisionDetectMeta * meta,
    const GstVisionDetection * detection);

GST_VISION_DETECT_META_API
gboolean gst_vision_detect_meta_add_detection_with_mask (GstVisionDetectMeta *
    meta, const GstVisionDetection * detection, guint x, guint y, guint width,
    guint height, GBytes * mask);

GST_VISION_DETECT_META_API
gboolean gst_vision_detect_meta_set_keypoints (GstVisionDetectMeta * meta,
    guint index, const gfloat * keypoints, gsize n_values);

GST_VISION_DETECT_META_API
const gfloat *gst_vision_detect_meta_get_keypoints (const GstVisionDetectMeta *
    meta, guint index, gsize * n_values);

GST_VISION_DETECT_META_API
const guint8 *gst_vision_detect_meta_get_mask_data (const GstVisionDetectMeta *
    meta, guint index, guint * x, guint * y, guint * width, guint * height);

/* Accessors: the fields are public in C; these are for the bindings, and
 * check their arguments. */

GST_VISION_DETECT_META_API
guint gst_vision_detect_meta_get_width (const GstVisionDetectMeta * meta);

GST_VISION_DETECT_META_API
guint gst_vision_detect_meta_get_height (const GstVisionDetectMeta * meta);

GST_VISION_DETECT_META_API
GstVisionDetectInference gst_vision_detect_meta_get_inference (const
    GstVisionDetectMeta * meta);

GST_VISION_DETECT_META_API
guint gst_vision_detect_meta_get_n_detections (const GstVisionDetectMeta * meta);

GST_VISION_DETECT_META_API
gboolean gst_vision_detect_meta_get_detection (const GstVisionDetectMeta * meta,
    guint index, GstVisionDetection * detection);

GST_VISION_DETECT_META_API
GBytes *gst_vision_detect_meta_get_mask (const GstVisionDetectMeta * meta,
    guint index, guint * x, guint * y, guint * width, guint * height);

/* Reading detections back, for visionoverlay, visionjson and the tests. */

/**
 * gst_vision_detections_from_buffer:
 * @buffer: a video buffer
 * @width: the buffer's frame width
 * @height: the buffer's frame height
 *
 * Collects the detections of @buffer in pixels of a @width x @height frame, one
 * per GstVideoRegionOfInterestMeta: the ROI metas are the truth (what another
 * element changed or removed there wins). Each field comes from the ROI meta's
 * "detection" param when present (the normalised box, confidence, label_id,
 * label, object_id, tracked), else from the GstVisionDetectMeta entry of the
 * same detection (same ROI id and box, rescaled if the meta describes another
 * size: GStreamer's scale transform drops the ROI's params), else from the ROI
 * itself (roi_type, integer box; confidence and label_id -1). The object id of
 * a ROI meta is its "detection" param's "object_id" (int), else its
 * "object_id" param's "id" (DL Streamer's gvatrack convention). A companion
 * entry whose ROI meta is gone is not reported. When the library is built
 * against GStreamer >= 1.24, the object-detection entries
 * (GstAnalyticsODMtd) of the buffer's analytics relation meta that no ROI meta
 * shows (same class, box within 2 pixels) follow, as another detector's
 * (GStreamer's own tensor decoders attach only those): box, class, confidence,
 * label_id and roi_id -1, and the object id of the tracking entry
 * (GstAnalyticsTrackingMtd) it relates to, else 0.
 *
 * Returns: (transfer container) (element-type GstVisionDetection): a new array.
 */
GST_VISION_DETECT_META_API
GArray *gst_vision_detections_from_buffer (GstBuffer * buffer, guint width,
    guint height);

GST_VISION_DETECT_META_API
GArray *gst_vision_detections_from_buffer_full (GstBuffer * buffer,
    guint width, guint height, GPtrArray ** masks);

G_END_DECLS

#endif /* __GST_VISION_DETECT_META_H__ */
