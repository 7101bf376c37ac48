/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* visiondetect: runs the detection engine on every video frame and attaches the
 * detections to the buffer as metadata. */

/**
 * SECTION:element-visiondetect
 * @title: visiondetect
 *
 * visiondetect runs a torchvision-compatible Faster R-CNN detector (a model file
 * written by tools/export_torchvision.py) on each video frame and attaches one
 * #GstVideoRegionOfInterestMeta per detection: roi_type is the class name and a
 * "detection" parameter structure holds `x_min`, `y_min`, `x_max`, `y_max`
 * (normalised 0..1), `confidence`, `label_id` and `label`, as DL Streamer's
 * elements read them. With a Mask R-CNN model each ROI meta also gets DL
 * Streamer's "mask_rcnn" instance-segmentation param over its rectangle. A
 * companion meta (GstVisionDetectMeta) keeps every field, the instance masks
 * included (resampled), through a downstream videoscale. The video itself
 * passes unchanged. Built against GStreamer >= 1.24, each detection is also a
 * #GstAnalyticsODMtd of the buffer's #GstAnalyticsRelationMeta whose id the
 * ROI meta's id is (DL Streamer's link); with >= 1.26 each mask is also a
 * #GstAnalyticsSegmentationMtd related to it.
 *
 * The engine runs on CUDA when a device is available and on the CPU otherwise
 * (with a warning on the bus). Frames are handed to the engine by the streaming
 * thread and pushed, in order, from the element's own thread once their result
 * is in (#GstVisionDetect:max-in-flight of them at most in the engine). Every
 * buffer gets the companion meta, which says whether the frame was inferred.
 * On a live source the element reports its inference time as latency (measured
 * by a warm-up inference when the caps arrive, with a margin that follows how
 * much the engine's time per frame varies) and, with
 * #GstVisionDetect:late-frames=skip-inference, passes a frame that inference
 * would make late on time without detections, marked as skipped.
 *
 * Without the #GstVisionDetect:model property, the bundled model
 * visiondetect-shapes.safetensors is used, looked up in $VISIONDETECT_MODEL
 * (a file path), then in the installed data directory (`meson devenv` sets
 * $VISIONDETECT_MODEL to the source tree's for uninstalled runs). Elements of one process that run the same model file share
 * its loaded weights (each keeps its own engine context and device memory).
 *
 * With #GstVisionDetect:batch-size above 1, the elements of a process that
 * run the same model file on the same device with the same precision and
 * threads share one engine, which runs their frames together in batches of up
 * to the largest batch-size among them; a frame waits at most
 * #GstVisionDetect:batch-timeout for the others (a batch also runs as soon as
 * it is full or no stream can add a frame). Each stream keeps its order,
 * timestamps and metas; the latency it reports includes the timeout.
 *
 * ## Example launch lines
 * |[
 * gst-launch-1.0 filesrc location=in.mp4 ! decodebin ! videoconvert ! \
 *     visiondetect model=fasterrcnn.safetensors threshold=0.6 ! \
 *     visionoverlay ! videoconvert ! autovideosink
 * ]| Shows a video with the detected objects' boxes and labels.
 * |[
 * gst-launch-1.0 v4l2src ! videoconvert ! \
 *     visiondetect interval=2 classes=person,car ! visionjson location=out.jsonl ! fakesink
 * ]| Detects people and cars on every second camera frame (fewer when it cannot keep
 * up: the others say they were skipped) and writes them as JSON Lines.
 * |[
 * gst-launch-1.0 \
 *     filesrc location=a.mp4 ! decodebin ! videoconvert ! \
 *         visiondetect batch-size=2 ! visionjson location=a.jsonl ! fakesink \
 *     filesrc location=b.mp4 ! decodebin ! videoconvert ! \
 *         visiondetect batch-size=2 ! visionjson location=b.jsonl ! fakesink
 * ]| Detects objects in two files with one shared engine, in batches of a frame of
 * each.
 */

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstvisiondetectprivate.h"
#include "helpers/labels.h"
#include "helpers/modelcache.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

GST_DEBUG_CATEGORY (gst_vision_detect_debug);

#define DEFAULT_MODEL NULL
#define DEFAULT_DEVICE "auto"
#define DEFAULT_PRECISION GST_VISION_DETECT_PRECISION_AUTO
#define DEFAULT_THRESHOLD 0.5f
#define DEFAULT_IOU_THRESHOLD -1.0f
#define DEFAULT_MAX_DETECTIONS 0
#define DEFAULT_INTERVAL 1
#define DEFAULT_CLASSES NULL
#define DEFAULT_LABELS NULL
#define DEFAULT_THREADS 0
#define DEFAULT_MAX_IN_FLIGHT 1
#define DEFAULT_LATE_FRAMES GST_VISION_DETECT_LATE_SKIP_INFERENCE
#define DEFAULT_GAP_FRAMES GST_VISION_DETECT_GAP_REPEAT
#define DEFAULT_BATCH_SIZE 1
#define DEFAULT_BATCH_TIMEOUT (5 * GST_MSECOND)
#define MAX_BATCH_SIZE 64

enum
{
  PROP_0,
  PROP_MODEL,
  PROP_DEVICE,
  PROP_PRECISION,
  PROP_THRESHOLD,
  PROP_IOU_THRESHOLD,
  PROP_MAX_DETECTIONS,
  PROP_INTERVAL,
  PROP_CLASSES,
  PROP_LABELS,
  PROP_THREADS,
  PROP_MAX_IN_FLIGHT,
  PROP_LATE_FRAMES,
  PROP_GAP_FRAMES,
  PROP_FRAMES_INFERRED,
  PROP_FRAMES_SKIPPED_LATE,
  PROP_FRAMES_REPEATED,
  PROP_BATCH_SIZE,
  PROP_BATCH_TIMEOUT,
  PROP_BATCH_MEAN_SIZE,
};

#define VIDEO_FORMATS "{ RGB, BGR, RGBA, BGRA, RGBx, BGRx, NV12, I420 }"

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE ("sink",
    GST_PAD_SINK,
    GST_PAD_ALWAYS,
    GST_STATIC_CAPS (GST_VIDEO_CAPS_MAKE (VIDEO_FORMATS)));

static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE ("src",
    GST_PAD_SRC,
    GST_PAD_ALWAYS,
    GST_STATIC_CAPS (GST_VIDEO_CAPS_MAKE (VIDEO_FORMATS)));

#define gst_vision_detect_parent_class parent_class
G_DEFINE_TYPE (GstVisionDetect, gst_vision_detect, GST_TYPE_BASE_TRANSFORM);
GST_ELEMENT_REGISTER_DEFINE (visiondetect, "visiondetect", GST_RANK_NONE,
    GST_TYPE_VISION_DETECT);

#define GST_TYPE_VISION_DETECT_PRECISION (gst_vision_detect_precision_get_type ())
static GType
gst_vision_detect_precision_get_type (void)
{
  static GType type = 0;
  static const GEnumValue values[] = {
    {GST_VISION_DETECT_PRECISION_AUTO,
        "fp16 on CUDA; on the CPU bf16 where it has AVX512-BF16 or AMX, "
          "else fp32", "auto"},
    {GST_VISION_DETECT_PRECISION_FP32,
        "32-bit floats (reproduces torchvision on the CPU)", "fp32"},
    {GST_VISION_DETECT_PRECISION_FP16,
        "16-bit floats: CUDA (32-bit accumulation); the CPU where XNNPACK "
          "runs its layers and the CPU has the FP16 arithmetic (Cortex-A76 "
          "and later)", "fp16"},
    {GST_VISION_DETECT_PRECISION_BF16,
        "bfloat16 (CPUs with AVX512-BF16)", "bf16"},
    {GST_VISION_DETECT_PRECISION_INT8,
        "8-bit integers (CPUs with VNNI, arm64 ones with the dot product; "
          "a ResNet model calibrated with vd-detect --calibrate)", "int8"},
    {0, NULL, NULL},
  };

  if (g_once_init_enter (&type)) {
    GType t = g_enum_register_static ("GstVisionDetectPrecision", values);
    g_once_init_leave (&type, t);
  }
  return type;
}

#define GST_TYPE_VISION_DETECT_LATE_FRAMES (gst_vision_detect_late_frames_get_type ())
static GType
gst_vision_detect_late_frames_get_type (void)
{
  static GType type = 0;
  static const GEnumValue values[] = {
    {GST_VISION_DETECT_LATE_SKIP_INFERENCE,
        "Pass the frame on time without inference (its meta says it was "
          "skipped)", "skip-inference"},
    {GST_VISION_DETECT_LATE_DROP,
        "Drop the frame whole when downstream reports it late (QoS)", "drop"},
    {0, NULL, NULL},
  };

  if (g_once_init_enter (&type)) {
    GType t = g_enum_register_static ("GstVisionDetectLateFrames", values);
    g_once_init_leave (&type, t);
  }
  return type;
}

#define GST_TYPE_VISION_DETECT_GAP_FRAMES (gst_vision_detect_gap_frames_get_type ())
static GType
gst_vision_detect_gap_frames_get_type (void)
{
  static GType type = 0;
  static const GEnumValue values[] = {
    {GST_VISION_DETECT_GAP_REPEAT,
        "A GAP buffer showing the last inferred frame's pixels carries its "
          "detections; any other is inferred", "repeat"},
    {GST_VISION_DETECT_GAP_SKIP,
        "GAP buffers pass without inference or detections", "skip"},
    {0, NULL, NULL},
  };

  if (g_once_init_enter (&type)) {
    GType t = g_enum_register_static ("GstVisionDetectGapFrames", values);
    g_once_init_leave (&type, t);
  }
  return type;
}

/* ------------------------------------------------------------------------ */
/* Settings                                                                  */

/* "auto", "cpu", "cuda" or "cuda:N" */
static gboolean
parse_device (const gchar * device, vd_device_type * type, gint * index)
{
  *index = 0;
  if (device == NULL || g_ascii_strcasecmp (device, "auto") == 0) {
    *type = VD_DEVICE_AUTO;
    return TRUE;
  }
  if (g_ascii_strcasecmp (device, "cpu") == 0) {
    *type = VD_DEVICE_CPU;
    return TRUE;
  }
  if (g_ascii_strncasecmp (device, "cuda", 4) == 0) {
    const gchar *rest = device + 4;
    guint64 n;

    *type = VD_DEVICE_CUDA;
    if (*rest == '\0')
      return TRUE;
    if (*rest != ':' || !g_ascii_string_to_unsigned (rest + 1, 10, 0, 1023, &n,
            NULL))
      return FALSE;
    *index = (gint) n;
    return TRUE;
  }
  return FALSE;
}

static vd_precision
to_vd_precision (GstVisionDetectPrecision precision)
{
  switch (precision) {
    case GST_VISION_DETECT_PRECISION_FP32:
      return VD_PRECISION_FP32;
    case GST_VISION_DETECT_PRECISION_FP16:
      return VD_PRECISION_FP16;
    case GST_VISION_DETECT_PRECISION_BF16:
      return VD_PRECISION_BF16;
    case GST_VISION_DETECT_PRECISION_INT8:
      return VD_PRECISION_INT8;
    case GST_VISION_DETECT_PRECISION_AUTO:
    default:
      return VD_PRECISION_AUTO;
  }
}

/* A labels file (see helpers/labels.c for what it may hold). */
static gchar **
load_labels (const gchar * path, gint num_classes, GError ** error)
{
  gchar *contents = NULL, **names;
  gsize length = 0;

  if (!g_file_get_contents (path, &contents, &length, error))
    return NULL;
  names = gst_vision_labels_parse (contents, length, num_classes, error);
  g_free (contents);
  return names;
}

/* Resolves the classes property ("car, person" or class ids "3,1") against the
 * class names; NULL when every class is kept. Posts a warning naming the
 * entries that match no class. Streaming thread or start(). */
gboolean *
gst_vision_detect_resolve_classes (GstVisionDetect * self,
    const gchar * classes)
{
  gboolean *keep;
  gchar **entries;
  GString *unknown = NULL;
  guint i, n_entries = 0;

  if (classes == NULL)
    return NULL;

  keep = g_rc_box_alloc0 (sizeof (gboolean) * self->num_classes);
  entries = g_strsplit (classes, ",", -1);
  for (i = 0; entries[i] != NULL; i++) {
    gchar *entry = g_strstrip (entries[i]);
    gboolean found = FALSE;
    guint64 id;
    gint c;

    if (*entry == '\0')
      continue;
    n_entries++;
    for (c = 1; c < self->num_classes; c++) {
      if (g_ascii_strcasecmp (entry, self->class_names[c]) == 0) {
        keep[c] = TRUE;
        found = TRUE;
      }
    }
    if (!found && g_ascii_string_to_unsigned (entry, 10, 1,
            self->num_classes - 1, &id, NULL)) {
      keep[id] = TRUE;
      found = TRUE;
    }
    if (!found) {
      if (unknown == NULL)
        unknown = g_string_new (entry);
      else
        g_string_append_printf (unknown, ", %s", entry);
    }
  }
  g_strfreev (entries);
  if (n_entries == 0) {
    /* "" is the unset value; ",,," or " , " names nothing, most likely by
     * mistake: say so */
    if (*classes != '\0')
      GST_ELEMENT_WARNING (self, RESOURCE, SETTINGS,
          ("The classes \"%s\" name no class: every class is kept", classes),
          ("classes=\"%s\" has no non-empty entry", classes));
    g_rc_box_release (keep);
    return NULL;
  }

  if (unknown != NULL) {
    GString *known = g_string_new (NULL);
    gint c;

    for (c = 1; c < self->num_classes; c++)
      g_string_append_printf (known, "%s%s", c > 1 ? ", " : "",
          self->class_names[c]);
    GST_ELEMENT_WARNING (self, RESOURCE, SETTINGS,
        ("The model has no class named %s (its classes: %s)", unknown->str,
            known->str), ("classes=\"%s\"", classes));
    g_string_free (known, TRUE);
    g_string_free (unknown, TRUE);
  }
  return keep;
}

/* ------------------------------------------------------------------------ */
/* GObject                                                                   */

static gboolean
warn_if_started (GstVisionDetect * self, const GParamSpec * pspec)
{
  gboolean started;

  GST_OBJECT_LOCK (self);
  started = self->started;
  GST_OBJECT_UNLOCK (self);
  if (started) {
    GST_ELEMENT_WARNING (self, CORE, STATE_CHANGE,
        ("The \"%s\" property can only be changed in the NULL or READY state; "
            "the new value is ignored", pspec->name), (NULL));
  }
  return started;
}

static void
gst_vision_detect_set_property (GObject * object, guint prop_id,
    const GValue * value, GParamSpec * pspec)
{
  GstVisionDetect *self = GST_VISION_DETECT (object);

  switch (prop_id) {
    case PROP_MODEL:
    case PROP_DEVICE:
    case PROP_PRECISION:
    case PROP_LABELS:
    case PROP_THREADS:
    case PROP_MAX_IN_FLIGHT:
    case PROP_BATCH_SIZE:
    case PROP_BATCH_TIMEOUT:
      if (warn_if_started (self, pspec))
        return;
      break;
    default:
      break;
  }

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_MODEL:
      g_free (self->model_path);
      self->model_path = g_value_dup_string (value);
      break;
    case PROP_DEVICE:
      g_free (self->device);
      self->device = g_value_dup_string (value);
      break;
    case PROP_PRECISION:
      self->precision = g_value_get_enum (value);
      break;
    case PROP_THRESHOLD:
      self->threshold = g_value_get_float (value);
      self->thresholds_changed = TRUE;
      break;
    case PROP_IOU_THRESHOLD:
      self->iou_threshold = g_value_get_float (value);
      self->thresholds_changed = TRUE;
      break;
    case PROP_MAX_DETECTIONS:
      self->max_detections = g_value_get_int (value);
      self->thresholds_changed = TRUE;
      break;
    case PROP_INTERVAL:
      self->interval = g_value_get_uint (value);
      break;
    case PROP_CLASSES:
      g_free (self->classes);
      self->classes = g_value_dup_string (value);
      self->classes_changed = TRUE;
      break;
    case PROP_LABELS:
      g_free (self->labels_path);
      self->labels_path = g_value_dup_string (value);
      break;
    case PROP_THREADS:
      self->threads = g_value_get_int (value);
      break;
    case PROP_MAX_IN_FLIGHT:
      self->max_in_flight = g_value_get_uint (value);
      break;
    case PROP_BATCH_SIZE:
      self->batch_size = g_value_get_uint (value);
      break;
    case PROP_BATCH_TIMEOUT:
      self->batch_timeout = g_value_get_uint64 (value);
      break;
    case PROP_GAP_FRAMES:
      self->gap_frames = g_value_get_enum (value);
      break;
    case PROP_LATE_FRAMES:
      self->late_frames = g_value_get_enum (value);
      GST_OBJECT_UNLOCK (self);
      /* drop: GstBaseTransform's QoS; skip-inference: ours (src_event) */
      gst_base_transform_set_qos_enabled (GST_BASE_TRANSFORM (self),
          self->late_frames == GST_VISION_DETECT_LATE_DROP);
      GST_OBJECT_LOCK (self);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_vision_detect_get_property (GObject * object, guint prop_id,
    GValue * value, GParamSpec * pspec)
{
  GstVisionDetect *self = GST_VISION_DETECT (object);

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_MODEL:
      g_value_set_string (value, self->model_path);
      break;
    case PROP_DEVICE:
      g_value_set_string (value, self->device);
      break;
    case PROP_PRECISION:
      g_value_set_enum (value, self->precision);
      break;
    case PROP_THRESHOLD:
      g_value_set_float (value, self->threshold);
      break;
    case PROP_IOU_THRESHOLD:
      g_value_set_float (value, self->iou_threshold);
      break;
    case PROP_MAX_DETECTIONS:
      g_value_set_int (value, self->max_detections);
      break;
    case PROP_INTERVAL:
      g_value_set_uint (value, self->interval);
      break;
    case PROP_CLASSES:
      g_value_set_string (value, self->classes);
      break;
    case PROP_LABELS:
      g_value_set_string (value, self->labels_path);
      break;
    case PROP_THREADS:
      g_value_set_int (value, self->threads);
      break;
    case PROP_MAX_IN_FLIGHT:
      g_value_set_uint (value, self->max_in_flight);
      break;
    case PROP_LATE_FRAMES:
      g_value_set_enum (value, self->late_frames);
      break;
    case PROP_GAP_FRAMES:
      g_value_set_enum (value, self->gap_frames);
      break;
    case PROP_FRAMES_INFERRED:
      g_value_set_uint64 (value, self->n_inferred);
      break;
    case PROP_FRAMES_SKIPPED_LATE:
      g_value_set_uint64 (value, self->n_skipped_late);
      break;
    case PROP_FRAMES_REPEATED:
      g_value_set_uint64 (value, self->n_repeated);
      break;
    case PROP_BATCH_SIZE:
      g_value_set_uint (value, self->batch_size);
      break;
    case PROP_BATCH_TIMEOUT:
      g_value_set_uint64 (value, self->batch_timeout);
      break;
    case PROP_BATCH_MEAN_SIZE:
      g_value_set_double (value, self->batch_client ?
          gst_vision_batcher_client_mean_batch_size (self->batch_client) : 0.0);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_vision_detect_finalize (GObject * object)
{
  GstVisionDetect *self = GST_VISION_DETECT (object);

  g_free (self->model_path);
  g_free (self->device);
  g_free (self->classes);
  g_free (self->labels_path);
  gst_vision_scheduler_clear (&self->sched);
  G_OBJECT_CLASS (parent_class)->finalize (object);
}

/* ------------------------------------------------------------------------ */
/* Start and stop                                                            */

static void
release_engine (GstVisionDetect * self)
{
  GstVisionBatcherClient *client;

  GST_OBJECT_LOCK (self);
  g_mutex_lock (&self->sched.lock);
  client = self->batch_client;
  self->batch_client = NULL;
  g_mutex_unlock (&self->sched.lock);
  GST_OBJECT_UNLOCK (self);
  /* the last client waits for the shared engine's running batch */
  gst_vision_batcher_client_free (client);
  g_clear_pointer (&self->ctx, vd_context_free);
  g_clear_pointer (&self->model, gst_vision_model_cache_release);
  g_clear_pointer (&self->class_names, g_strfreev);
  g_clear_pointer (&self->keypoint_names, g_strfreev);
  g_clear_pointer (&self->keep_class, g_rc_box_release);
  self->num_classes = 0;
}

/* Built without GStreamer's analytics library, the element writes ROI metas and
 * the companion meta only: a downstream reader of GstAnalytics entries (such as
 * GStreamer's objectdetectionoverlay) finds none and, silently, draws or
 * reports nothing. Said once at each start: as a warning where the running
 * GStreamer has the library (>= 1.24), so that it is a feature missed by the
 * build, and as information where it has none. */
static void
log_analytics_support (GstVisionDetect * self)
{
#ifndef HAVE_GST_ANALYTICS
  guint major, minor, micro, nano;

  gst_version (&major, &minor, &micro, &nano);
  if (major > 1 || (major == 1 && minor >= 24))
    GST_WARNING_OBJECT (self, "writes no GstAnalytics entries (object "
        "detection, tracking, segmentation): built without GStreamer's "
        "analytics library (gstreamer-analytics-1.0), which GStreamer %u.%u "
        "running here has; readers of those entries (objectdetectionoverlay, "
        "...) see no detection. Build with it installed (Debian: "
        "libgstreamer-plugins-bad1.0-dev)", major, minor);
  else
    GST_INFO_OBJECT (self, "writes no GstAnalytics entries: built without "
        "GStreamer's analytics library (GStreamer %u.%u has none: it is part "
        "of GStreamer 1.24 and newer)", major, minor);
#endif
}

static gboolean
gst_vision_detect_start (GstBaseTransform * trans)
{
  GstVisionDetect *self = GST_VISION_DETECT (trans);
  gchar *model_path, *device, *labels_path, *classes;
  gchar *path = NULL, *searched = NULL;
  vd_context_params params = vd_context_default_params ();
  GstVisionDetectPrecision precision;
  const vd_context *ctx;
  GError *err = NULL;
  gboolean ok = FALSE, shared = FALSE, created = FALSE;
  guint batch_size, max_in_flight;
  GstClockTime batch_timeout;
  gint c;

  GST_OBJECT_LOCK (self);
  model_path = g_strdup (self->model_path);
  device = g_strdup (self->device);
  labels_path = g_strdup (self->labels_path);
  classes = g_strdup (self->classes);
  precision = self->precision;
  params.score_threshold = self->threshold;
  params.nms_threshold = self->iou_threshold;
  params.max_detections = self->max_detections;
  params.n_threads = self->threads;
  batch_size = self->batch_size;
  batch_timeout = self->batch_timeout;
  max_in_flight = self->max_in_flight;
  self->thresholds_changed = FALSE;
  self->classes_changed = FALSE;
  GST_OBJECT_UNLOCK (self);

  if (!parse_device (device, &params.device, &params.device_index)) {
    GST_ELEMENT_ERROR (self, RESOURCE, SETTINGS,
        ("Invalid device \"%s\": expected auto, cpu, cuda or cuda:N", device),
        (NULL));
    goto out_free_settings;
  }
  params.precision = to_vd_precision (precision);

  if (model_path != NULL && *model_path != '\0')
    path = g_strdup (model_path);
  else
    path = vd_default_model_path (&searched);
  if (path == NULL) {
    GST_ELEMENT_ERROR (self, RESOURCE, NOT_FOUND,
        ("No model: set the \"model\" property to a .safetensors file "
            "(the default model %s was looked for in %s)",
            VD_DEFAULT_MODEL_NAME, searched), (NULL));
    goto out_free_settings;
  }
  if (!g_file_test (path, G_FILE_TEST_EXISTS)) {
    GST_ELEMENT_ERROR (self, RESOURCE, NOT_FOUND,
        ("Could not load model \"%s\": the file does not exist", path), (NULL));
    goto out_free_settings;
  }

  self->model = gst_vision_model_cache_acquire (path, &shared, &err);
  if (self->model != NULL)
    GST_INFO_OBJECT (self, "%s model %s", shared ? "sharing the loaded" :
        "loaded", path);
  if (self->model == NULL) {
    if (err->domain == VD_ERROR && err->code == VD_ERROR_FILE)
      GST_ELEMENT_ERROR (self, RESOURCE, OPEN_READ,
          ("Could not load model \"%s\": %s", path, err->message), (NULL));
    else
      GST_ELEMENT_ERROR (self, RESOURCE, FAILED,
          ("Could not load model \"%s\": %s", path, err->message),
          ("engine error code %d", err->code));
    goto out_free_error;
  }

  self->num_classes = vd_model_num_classes (self->model);
  if (labels_path != NULL && *labels_path != '\0') {
    self->class_names = load_labels (labels_path, self->num_classes, &err);
    if (self->class_names == NULL) {
      GST_ELEMENT_ERROR (self, RESOURCE, READ,
          ("Could not use labels file \"%s\": %s", labels_path, err->message),
          (NULL));
      goto out_release_engine;
    }
  } else {
    self->class_names = g_new0 (gchar *, self->num_classes + 1);
    for (c = 0; c < self->num_classes; c++) {
      const gchar *name = vd_model_class_name (self->model, c);

      self->class_names[c] = name != NULL && *name != '\0' ?
          g_strdup (name) : g_strdup_printf ("class%d", c);
    }
  }

  /* Keypoint R-CNN: the names its keypoints' ROI params carry, when the
   * model file has them */
  if (vd_model_keypoint_name (self->model, 0) != NULL) {
    gint k, n_keypoints = vd_model_num_keypoints (self->model);

    self->keypoint_names = g_new0 (gchar *, n_keypoints + 1);
    for (k = 0; k < n_keypoints; k++)
      self->keypoint_names[k] =
          g_strdup (vd_model_keypoint_name (self->model, k));
  }

  if (batch_size > 1) {
    GstVisionBatcherClient *client = gst_vision_batcher_client_new (self->model,
        &params, batch_size, batch_timeout, max_in_flight, &created, &err);

    GST_OBJECT_LOCK (self);
    g_mutex_lock (&self->sched.lock);
    self->batch_client = client;
    g_mutex_unlock (&self->sched.lock);
    GST_OBJECT_UNLOCK (self);
    ctx = client ? gst_vision_batcher_client_context (client) : NULL;
    if (client != NULL)
      GST_INFO_OBJECT (self, "%s shared engine, batches of up to %u frames, "
          "waiting at most %" GST_TIME_FORMAT, created ? "created the" :
          "joined a", batch_size, GST_TIME_ARGS (batch_timeout));
  } else {
    ctx = self->ctx = vd_context_new (self->model, &params, &err);
  }
  if (ctx == NULL) {
    GST_ELEMENT_ERROR (self, RESOURCE, SETTINGS,
        ("Could not run model \"%s\" on device \"%s\" with precision %s: %s",
            path, device, vd_precision_name (params.precision), err->message),
        ("engine error code %d", err->code));
    goto out_release_engine;
  }
  if (params.device == VD_DEVICE_AUTO
      && vd_context_device (ctx) == VD_DEVICE_CPU) {
    /* the engine's reason: no device, the driver, the build, ... */
    GST_ELEMENT_WARNING (self, RESOURCE, NOT_FOUND,
        ("No usable CUDA device (%s): running on the CPU, which is much slower",
            vd_context_fallback_reason (ctx)), ("device=auto"));
  }
  self->keep_class = gst_vision_detect_resolve_classes (self, classes);

  GST_INFO_OBJECT (self, "model %s (%s), %d classes, on %s in %s", path,
      vd_model_description (self->model), self->num_classes,
      vd_context_device (ctx) == VD_DEVICE_CUDA ? "CUDA" : "the CPU",
      vd_precision_name (vd_context_precision (ctx)));
  GST_INFO_OBJECT (self, "engine: %s", vd_context_describe (ctx));
  log_analytics_support (self);

  self->frame_count = 0;
  self->pending_discont = FALSE;
  self->warned_graphs = FALSE;
  self->warned_nonfinite = FALSE;
  if (!gst_vision_scheduler_start (&self->sched, max_in_flight, batch_size > 1,
          batch_timeout, &err)) {
    GST_ELEMENT_ERROR (self, RESOURCE, FAILED,
        ("Could not start the output thread: %s", err->message), (NULL));
    goto out_release_engine;
  }
  GST_OBJECT_LOCK (self);
  self->n_inferred = 0;
  self->n_skipped_late = 0;
  self->n_repeated = 0;
  self->started = TRUE;
  GST_OBJECT_UNLOCK (self);
  ok = TRUE;
  goto out_free_settings;

out_release_engine:
  release_engine (self);
out_free_error:
  g_clear_error (&err);
out_free_settings:
  g_free (path);
  g_free (searched);
  g_free (model_path);
  g_free (device);
  g_free (labels_path);
  g_free (classes);
  return ok;
}

static gboolean
gst_vision_detect_stop (GstBaseTransform * trans)
{
  GstVisionDetect *self = GST_VISION_DETECT (trans);

  gst_vision_scheduler_stop (&self->sched);
  gst_vision_detect_forget_last_frame (self);
  release_engine (self);
  self->have_info = FALSE;
  GST_OBJECT_LOCK (self);
  self->started = FALSE;
  GST_OBJECT_UNLOCK (self);
  return TRUE;
}

/* Live sources need the latency before their first frame reaches the sink;
 * elsewhere the first frame may take what it takes. */
static gboolean
upstream_is_live (GstVisionDetect * self)
{
  GstQuery *query = gst_query_new_latency ();
  gboolean live = FALSE;

  if (gst_pad_peer_query (GST_BASE_TRANSFORM_SINK_PAD (self), query))
    gst_query_parse_latency (query, &live, NULL, NULL);
  gst_query_unref (query);
  return live;
}

static gboolean
gst_vision_detect_set_caps (GstBaseTransform * trans, GstCaps * incaps,
    GstCaps * outcaps)
{
  GstVisionDetect *self = GST_VISION_DETECT (trans);
  GstVideoInfo info;
  gboolean new_size;

  if (!gst_video_info_from_caps (&info, incaps)) {
    GST_ERROR_OBJECT (self, "invalid caps %" GST_PTR_FORMAT, incaps);
    return FALSE;
  }
  /* The engine sizes its work per frame (the CUDA backend rebuilds what
   * depends on the size when it changes); only the frame layout is ours. On
   * a live source a new size is warmed up here, so that its first frame takes
   * a typical time and the latency is known before it. */
  new_size = !self->have_info || GST_VIDEO_INFO_WIDTH (&info) !=
      GST_VIDEO_INFO_WIDTH (&self->info)
      || GST_VIDEO_INFO_HEIGHT (&info) != GST_VIDEO_INFO_HEIGHT (&self->info);
  if (self->have_info && new_size)
    GST_INFO_OBJECT (self, "frame size changes from %dx%d to %dx%d",
        GST_VIDEO_INFO_WIDTH (&self->info), GST_VIDEO_INFO_HEIGHT (&self->info),
        GST_VIDEO_INFO_WIDTH (&info), GST_VIDEO_INFO_HEIGHT (&info));
  if (new_size && (self->ctx != NULL || self->batch_client != NULL)
      && upstream_is_live (self)) {
    /* the frames of the old size leave first */
    gst_vision_scheduler_drain (&self->sched);
    if (!gst_vision_detect_warm_up (self, &info))
      return FALSE;
  }
  self->info = info;
  self->have_info = TRUE;
  return TRUE;
}

/* ------------------------------------------------------------------------ */
/* Streaming (the frames' way: gstvisiondetectstream.c)                      */

/* controlled properties (threshold) follow the stream time */
static void
gst_vision_detect_before_transform (GstBaseTransform * trans,
    GstBuffer * buffer)
{
  GstClockTime stream_time = gst_segment_to_stream_time (&trans->segment,
      GST_FORMAT_TIME, GST_BUFFER_PTS (buffer));

  if (GST_CLOCK_TIME_IS_VALID (stream_time))
    gst_object_sync_values (GST_OBJECT (trans), stream_time);
}

static GstFlowReturn
gst_vision_detect_submit_input_buffer (GstBaseTransform * trans,
    gboolean is_discont, GstBuffer * input)
{
  GstVisionDetect *self = GST_VISION_DETECT (trans);
  GstFlowReturn ret;

  ret = GST_BASE_TRANSFORM_CLASS (parent_class)->submit_input_buffer (trans,
      is_discont, input);
  /* late-frames=drop: GstBaseTransform dropped it (QoS) */
  if (ret == GST_BASE_TRANSFORM_FLOW_DROPPED)
    self->pending_discont = TRUE;
  return ret;
}

static GstFlowReturn
gst_vision_detect_transform_ip (GstBaseTransform * trans, GstBuffer * buffer)
{
  return GST_FLOW_OK;
}

/* In place, the allocation query is downstream's answer: a sink that takes
 * GstVideoCropMeta would make upstream (videocrop, a decoder) pass the whole
 * frame with a crop meta, and the detector would look at pixels that are not
 * part of the picture. As GstVideoFilter-based analysers do (they map the
 * whole frame and drop the meta from the query), the meta is taken out, so
 * upstream crops for real and every box is in pixels of the frame the caps
 * describe: a cropped frame's detections, in its coordinates. (Honouring the
 * meta would save upstream's copy but leave the coordinate frame of the
 * region-of-interest metas undefined: GStreamer does not say whether they are
 * relative to the full buffer or to the crop, and elements downstream that do
 * not know the crop would draw or report them off by its offset.) */
static gboolean
gst_vision_detect_propose_allocation (GstBaseTransform * trans,
    GstQuery * decide_query, GstQuery * query)
{
  guint index;

  if (!GST_BASE_TRANSFORM_CLASS (parent_class)->propose_allocation (trans,
          decide_query, query))
    return FALSE;
  while (gst_query_find_allocation_meta (query, GST_VIDEO_CROP_META_API_TYPE,
          &index))
    gst_query_remove_nth_allocation_meta (query, index);
  return TRUE;
}

static gboolean
gst_vision_detect_sink_event (GstBaseTransform * trans, GstEvent * event)
{
  GstVisionDetect *self = GST_VISION_DETECT (trans);

  switch (GST_EVENT_TYPE (event)) {
    case GST_EVENT_FLUSH_START:
      /* the frames not yet out are dropped, those in the shared engine
       * leave it; a wait for room ends */
      gst_vision_scheduler_set_flushing (&self->sched, TRUE);
      break;
    case GST_EVENT_FLUSH_STOP:
      gst_vision_scheduler_drain (&self->sched);
      gst_vision_scheduler_set_flushing (&self->sched, FALSE);
      /* a seek starts the interval again: its first frame is inferred */
      self->frame_count = 0;
      /* the frames dropped may include the one last copied */
      gst_vision_frame_copy_reset (&self->last_frame);
      break;
    default:
      /* at EOS the shared engine stops waiting for this stream's frames (until
       * the next one) */
      if (GST_EVENT_TYPE (event) == GST_EVENT_EOS) {
        g_mutex_lock (&self->sched.lock);
        if (self->batch_client != NULL)
          gst_vision_batcher_client_set_idle (self->batch_client, TRUE);
        g_mutex_unlock (&self->sched.lock);
      }
      /* serialized events (caps, segment, EOS, ...) follow the frames before
       * them */
      if (GST_EVENT_IS_SERIALIZED (event))
        gst_vision_scheduler_drain (&self->sched);
      if (GST_EVENT_TYPE (event) == GST_EVENT_SEGMENT)
        gst_vision_scheduler_set_qos (&self->sched, GST_CLOCK_TIME_NONE, 0);
      break;
  }
  return GST_BASE_TRANSFORM_CLASS (parent_class)->sink_event (trans, event);
}

static gboolean
gst_vision_detect_src_event (GstBaseTransform * trans, GstEvent * event)
{
  GstVisionDetect *self = GST_VISION_DETECT (trans);

  if (GST_EVENT_TYPE (event) == GST_EVENT_QOS) {
    GstQOSType type;
    gdouble proportion;
    GstClockTimeDiff diff;
    GstClockTime timestamp;

    gst_event_parse_qos (event, &type, &proportion, &diff, &timestamp);
    /* read by the streaming thread only for skip-inference */
    if (GST_CLOCK_TIME_IS_VALID (timestamp))
      gst_vision_scheduler_set_qos (&self->sched, timestamp, diff);
  }
  return GST_BASE_TRANSFORM_CLASS (parent_class)->src_event (trans, event);
}

static GstStateChangeReturn
gst_vision_detect_change_state (GstElement * element, GstStateChange transition)
{
  GstVisionDetect *self = GST_VISION_DETECT (element);

  if (transition == GST_STATE_CHANGE_PAUSED_TO_READY) {
    /* a streaming thread waiting for room stops waiting before the pads
     * deactivate (which takes its stream lock); frames waiting in a shared
     * engine leave it: neither this element's stop nor the other streams
     * wait for them */
    gst_vision_scheduler_set_flushing (&self->sched, TRUE);
  }
  return GST_ELEMENT_CLASS (parent_class)->change_state (element, transition);
}

static gboolean
gst_vision_detect_query (GstBaseTransform * trans, GstPadDirection direction,
    GstQuery * query)
{
  GstVisionDetect *self = GST_VISION_DETECT (trans);
  gboolean ret;

  ret = GST_BASE_TRANSFORM_CLASS (parent_class)->query (trans, direction,
      query);
  if (ret && direction == GST_PAD_SRC
      && GST_QUERY_TYPE (query) == GST_QUERY_LATENCY) {
    GstClockTime min, max, latency;
    gboolean live;

    gst_query_parse_latency (query, &live, &min, &max);
    latency = gst_vision_scheduler_set_upstream (&self->sched, live, min);
    min += latency;
    if (GST_CLOCK_TIME_IS_VALID (max))
      max += latency;
    gst_query_set_latency (query, live, min, max);
    GST_DEBUG_OBJECT (self, "added %" GST_TIME_FORMAT " of latency",
        GST_TIME_ARGS (latency));
  }
  return ret;
}

/* ------------------------------------------------------------------------ */
/* Class                                                                     */

static void
gst_vision_detect_class_init (GstVisionDetectClass * klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS (klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS (klass);
  GstBaseTransformClass *trans_class = GST_BASE_TRANSFORM_CLASS (klass);
  const GParamFlags rw = G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS;

  gobject_class->set_property = gst_vision_detect_set_property;
  gobject_class->get_property = gst_vision_detect_get_property;
  gobject_class->finalize = gst_vision_detect_finalize;
  element_class->change_state =
      GST_DEBUG_FUNCPTR (gst_vision_detect_change_state);

  g_object_class_install_property (gobject_class, PROP_MODEL,
      g_param_spec_string ("model", "Model",
          "Model file (.safetensors, written by tools/export_torchvision.py). "
          "Unset: $VISIONDETECT_MODEL, else the bundled " VD_DEFAULT_MODEL_NAME
          " from the installed models directory",
          DEFAULT_MODEL, rw | GST_PARAM_MUTABLE_READY));
  g_object_class_install_property (gobject_class, PROP_DEVICE,
      g_param_spec_string ("device", "Device",
          "Where inference runs: auto (CUDA when a device is usable, else the "
          "CPU with a warning), cpu, cuda or cuda:N (the Nth CUDA device)",
          DEFAULT_DEVICE, rw | GST_PARAM_MUTABLE_READY));
  g_object_class_install_property (gobject_class, PROP_PRECISION,
      g_param_spec_enum ("precision", "Precision",
          "Arithmetic of convolutions and linear layers",
          GST_TYPE_VISION_DETECT_PRECISION, DEFAULT_PRECISION,
          rw | GST_PARAM_MUTABLE_READY));
  g_object_class_install_property (gobject_class, PROP_THRESHOLD,
      g_param_spec_float ("threshold", "Score threshold",
          "Keep detections whose confidence is above this; a negative value "
          "uses the model's own box_score_thresh (torchvision's 0.05)",
          -1.0f, 1.0f, DEFAULT_THRESHOLD, rw | GST_PARAM_MUTABLE_PLAYING
          | GST_PARAM_CONTROLLABLE));
  g_object_class_install_property (gobject_class, PROP_IOU_THRESHOLD,
      g_param_spec_float ("iou-threshold", "IoU threshold",
          "Non-maximum suppression: of two boxes of a class overlapping more "
          "than this (intersection over union), keep the better; a negative "
          "value uses the model's box_nms_thresh (torchvision's 0.5)",
          -1.0f, 1.0f, DEFAULT_IOU_THRESHOLD, rw | GST_PARAM_MUTABLE_PLAYING));
  g_object_class_install_property (gobject_class, PROP_MAX_DETECTIONS,
      g_param_spec_int ("max-detections", "Maximum detections",
          "Most detections per frame (the best ones); 0 uses the model's "
          "detections_per_img (torchvision's 100)", 0, 100000,
          DEFAULT_MAX_DETECTIONS, rw | GST_PARAM_MUTABLE_PLAYING));
  g_object_class_install_property (gobject_class, PROP_INTERVAL,
      g_param_spec_uint ("interval", "Interval",
          "Run inference on every Nth frame only (1: every frame); the frames "
          "in between pass without detections", 1, G_MAXUINT, DEFAULT_INTERVAL,
          rw | GST_PARAM_MUTABLE_PLAYING));
  g_object_class_install_property (gobject_class, PROP_CLASSES,
      g_param_spec_string ("classes", "Classes",
          "Comma-separated class names (or class ids) to keep, e.g. "
          "\"person,car\"; unset or empty keeps every class",
          DEFAULT_CLASSES, rw | GST_PARAM_MUTABLE_PLAYING));
  g_object_class_install_property (gobject_class, PROP_LABELS,
      g_param_spec_string ("labels", "Labels file",
          "Text file of class names, one per line, replacing the model's: "
          "num_classes lines (the first for the background) or one fewer "
          "(class 1 first)", DEFAULT_LABELS, rw | GST_PARAM_MUTABLE_READY));
  g_object_class_install_property (gobject_class, PROP_THREADS,
      g_param_spec_int ("threads", "CPU threads",
          "Threads of the CPU backend (0: all cores)", 0, 1024,
          DEFAULT_THREADS, rw | GST_PARAM_MUTABLE_READY));
  g_object_class_install_property (gobject_class, PROP_MAX_IN_FLIGHT,
      g_param_spec_uint ("max-in-flight", "Frames in flight",
          "Frames the engine may hold at once: while they run, the streaming "
          "thread goes on (upstream work, the next frame's copy) and the "
          "detected frames are pushed from the element's own thread. 1 keeps "
          "the latency lowest; more can add throughput (CUDA)", 1,
          VD_MAX_IN_FLIGHT, DEFAULT_MAX_IN_FLIGHT,
          rw | GST_PARAM_MUTABLE_READY));
  g_object_class_install_property (gobject_class, PROP_LATE_FRAMES,
      g_param_spec_enum ("late-frames", "Late frames",
          "What happens to a frame that would leave late (live pipelines): "
          "skip-inference passes it on time with no detections and says so in "
          "its meta; drop drops frames downstream reports as late (QoS)",
          GST_TYPE_VISION_DETECT_LATE_FRAMES, DEFAULT_LATE_FRAMES,
          rw | GST_PARAM_MUTABLE_PLAYING));
  g_object_class_install_property (gobject_class, PROP_GAP_FRAMES,
      g_param_spec_enum ("gap-frames", "GAP frames",
          "What GAP buffers get: repeat gives one that shows the last inferred "
          "frame's pixels (a frame rate converter's duplicate) that frame's "
          "detections and infers any other; skip passes them without "
          "inference or detections",
          GST_TYPE_VISION_DETECT_GAP_FRAMES, DEFAULT_GAP_FRAMES,
          rw | GST_PARAM_MUTABLE_PLAYING));
  g_object_class_install_property (gobject_class, PROP_FRAMES_INFERRED,
      g_param_spec_uint64 ("frames-inferred", "Frames inferred",
          "Frames the detector ran on since the element started", 0,
          G_MAXUINT64, 0, G_PARAM_READABLE | G_PARAM_STATIC_STRINGS));
  g_object_class_install_property (gobject_class, PROP_FRAMES_SKIPPED_LATE,
      g_param_spec_uint64 ("frames-skipped-late", "Frames skipped late",
          "Frames passed without inference because it would have made them "
          "late (late-frames=skip-inference)", 0, G_MAXUINT64, 0,
          G_PARAM_READABLE | G_PARAM_STATIC_STRINGS));
  g_object_class_install_property (gobject_class, PROP_FRAMES_REPEATED,
      g_param_spec_uint64 ("frames-repeated", "Frames repeated",
          "GAP buffers (a frame rate converter's duplicates) that showed the "
          "last inferred frame's pixels and carry its detections", 0,
          G_MAXUINT64, 0, G_PARAM_READABLE | G_PARAM_STATIC_STRINGS));
  g_object_class_install_property (gobject_class, PROP_BATCH_SIZE,
      g_param_spec_uint ("batch-size", "Batch size",
          "1: the element has its own engine. More: it shares one engine with "
          "the other visiondetect elements of the process that run the same "
          "model file on the same device with the same precision and threads "
          "and have batch-size > 1, and their frames run together in batches "
          "of up to the largest batch-size among them (frames of different "
          "sizes, formats or thresholds share the engine, not a batch). Each "
          "stream keeps its order and max-in-flight", 1, MAX_BATCH_SIZE,
          DEFAULT_BATCH_SIZE, rw | GST_PARAM_MUTABLE_READY));
  g_object_class_install_property (gobject_class, PROP_BATCH_TIMEOUT,
      g_param_spec_uint64 ("batch-timeout", "Batch timeout",
          "With batch-size > 1: the longest a frame waits for other frames "
          "before its batch runs, in nanoseconds (a batch runs sooner when "
          "full or when no stream can add a frame). Added to the latency the "
          "element reports", 0, G_MAXUINT64 / 4, DEFAULT_BATCH_TIMEOUT,
          rw | GST_PARAM_MUTABLE_READY));
  g_object_class_install_property (gobject_class, PROP_BATCH_MEAN_SIZE,
      g_param_spec_double ("batch-mean-size", "Mean batch size",
          "Frames per batch the shared engine ran since it was created, all "
          "its streams together (0 without a shared engine or before its "
          "first batch)", 0.0, G_MAXDOUBLE, 0.0,
          G_PARAM_READABLE | G_PARAM_STATIC_STRINGS));

  gst_element_class_add_static_pad_template (element_class, &sink_template);
  gst_element_class_add_static_pad_template (element_class, &src_template);
  gst_element_class_set_static_metadata (element_class,
      "Vision object detector", "Filter/Analyzer/Video",
      "Detects objects in video frames with a torchvision Faster R-CNN model "
      "and attaches them as region-of-interest metadata",
      "visiondetect developers");

  trans_class->start = GST_DEBUG_FUNCPTR (gst_vision_detect_start);
  trans_class->stop = GST_DEBUG_FUNCPTR (gst_vision_detect_stop);
  trans_class->set_caps = GST_DEBUG_FUNCPTR (gst_vision_detect_set_caps);
  trans_class->before_transform =
      GST_DEBUG_FUNCPTR (gst_vision_detect_before_transform);
  trans_class->submit_input_buffer =
      GST_DEBUG_FUNCPTR (gst_vision_detect_submit_input_buffer);
  trans_class->generate_output =
      GST_DEBUG_FUNCPTR (gst_vision_detect_generate_output);
  /* never called (generate_output takes every frame); with it the base class
   * treats the element as in place: the allocation query goes downstream */
  trans_class->transform_ip =
      GST_DEBUG_FUNCPTR (gst_vision_detect_transform_ip);
  trans_class->propose_allocation =
      GST_DEBUG_FUNCPTR (gst_vision_detect_propose_allocation);
  trans_class->sink_event = GST_DEBUG_FUNCPTR (gst_vision_detect_sink_event);
  trans_class->src_event = GST_DEBUG_FUNCPTR (gst_vision_detect_src_event);
  trans_class->query = GST_DEBUG_FUNCPTR (gst_vision_detect_query);
  trans_class->passthrough_on_same_caps = FALSE;
  trans_class->transform_ip_on_passthrough = FALSE;

  gst_type_mark_as_plugin_api (GST_TYPE_VISION_DETECT_PRECISION, 0);
  gst_type_mark_as_plugin_api (GST_TYPE_VISION_DETECT_LATE_FRAMES, 0);
  gst_type_mark_as_plugin_api (GST_TYPE_VISION_DETECT_GAP_FRAMES, 0);
  GST_DEBUG_CATEGORY_INIT (gst_vision_detect_debug, "visiondetect", 0,
      "visiondetect object detector");
}

static void
gst_vision_detect_init (GstVisionDetect * self)
{
  GstBaseTransform *trans = GST_BASE_TRANSFORM (self);

  self->model_path = g_strdup (DEFAULT_MODEL);
  self->device = g_strdup (DEFAULT_DEVICE);
  self->precision = DEFAULT_PRECISION;
  self->threshold = DEFAULT_THRESHOLD;
  self->iou_threshold = DEFAULT_IOU_THRESHOLD;
  self->max_detections = DEFAULT_MAX_DETECTIONS;
  self->interval = DEFAULT_INTERVAL;
  self->classes = g_strdup (DEFAULT_CLASSES);
  self->labels_path = g_strdup (DEFAULT_LABELS);
  self->threads = DEFAULT_THREADS;
  self->max_in_flight = DEFAULT_MAX_IN_FLIGHT;
  self->late_frames = DEFAULT_LATE_FRAMES;
  self->gap_frames = DEFAULT_GAP_FRAMES;
  self->batch_size = DEFAULT_BATCH_SIZE;
  self->batch_timeout = DEFAULT_BATCH_TIMEOUT;
  gst_vision_scheduler_init (&self->sched, &gst_vision_detect_scheduler_engine,
      self, GST_OBJECT (self), gst_vision_detect_debug);

  /* in place, never passthrough: the metas need a writable buffer (basetransform
   * makes a shallow copy when it is shared; the pixels are never copied) */
  gst_base_transform_set_in_place (trans, TRUE);
  gst_base_transform_set_passthrough (trans, FALSE);
  /* late frames: see the late-frames property (drop: GstBaseTransform's QoS) */
  gst_base_transform_set_qos_enabled (trans,
      DEFAULT_LATE_FRAMES == GST_VISION_DETECT_LATE_DROP);
}
