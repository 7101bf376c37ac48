/* visiondetect: the companion detection meta.
 *
 * GstVideoRegionOfInterestMeta is the standard place for detections, but its
 * scale transform (videoscale, videoconvertscale) drops the "detection" params.
 * GstVisionDetectMeta carries every detection of a buffer with all its fields and
 * rescales them when the frame is scaled, so that the detections survive a
 * downstream resize. visionoverlay and visionjson read the ROI metas (the
 * truth: what other elements change or remove there wins) and take from this
 * meta only what a ROI meta lost or cannot carry (the exact box, confidence,
 * label id, object id, and whether the frame was inferred).
 */
#ifndef __GST_VISION_DETECT_META_H__
#define __GST_VISION_DETECT_META_H__

#include <gst/gst.h>
#include <gst/video/video.h>

G_BEGIN_DECLS

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
 * @GST_VISION_DETECT_SKIPPED_GAP: not looked at: a GAP buffer
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
} GstVisionDetectInference;

/* "inferred", "interval", "late", "gap" */
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
} GstVisionDetectMeta;

GType gst_vision_detect_meta_api_get_type (void);
#define GST_VISION_DETECT_META_API_TYPE (gst_vision_detect_meta_api_get_type ())

const GstMetaInfo *gst_vision_detect_meta_get_info (void);
#define GST_VISION_DETECT_META_INFO (gst_vision_detect_meta_get_info ())

#define gst_buffer_get_vision_detect_meta(b) \
  ((GstVisionDetectMeta *) gst_buffer_get_meta ((b), GST_VISION_DETECT_META_API_TYPE))

GstVisionDetectMeta *gst_buffer_add_vision_detect_meta (GstBuffer * buffer,
    guint width, guint height);

void gst_vision_detect_meta_add_detection (GstVisionDetectMeta * meta,
    const GstVisionDetection * detection);

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
 * entry whose ROI meta is gone is not reported.
 *
 * Returns: (transfer full) (element-type GstVisionDetection): a new array.
 */
GArray *gst_vision_detections_from_buffer (GstBuffer * buffer, guint width,
    guint height);

G_END_DECLS

#endif /* __GST_VISION_DETECT_META_H__ */
