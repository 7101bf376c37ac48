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

#include "vd_config.h"

#include "helpers/batcher.h"
#include "gstvisiondetect.h"
#include "gstvisiondetectmeta.h"
#include "helpers/detections.h"
#include "helpers/labels.h"
#include "helpers/modelcache.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gst/video/video.h>
#include <visiondetect/vd.h>

GST_DEBUG_CATEGORY_STATIC (gst_vision_detect_debug);
#define GST_CAT_DEFAULT gst_vision_detect_debug

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
  PROP_FRAMES_INFERRED,
  PROP_FRAMES_SKIPPED_LATE,
  PROP_BATCH_SIZE,
  PROP_BATCH_TIMEOUT,
  PROP_BATCH_MEAN_SIZE,
};

/* A frame between the streaming thread and the output thread. */
typedef struct
{
  GstBuffer *buffer;
  guint64 index;
  GstVisionDetectInference inference;
  gint width, height;
  gboolean *keep_class;         /* a reference (g_rc_box) or NULL: every class */
  GstClockTime submitted;       /* monotonic time of vd_submit () */
  GstVisionBatchRequest *request;       /* shared engine: the frame's, or NULL */
} PendingFrame;

struct _GstVisionDetect
{
  GstBaseTransform parent;

  /* properties, protected by the object lock */
  gchar *model_path;
  gchar *device;
  GstVisionDetectPrecision precision;
  gfloat threshold;
  gfloat iou_threshold;
  gint max_detections;
  guint interval;
  gchar *classes;
  gchar *labels_path;
  gint threads;
  guint max_in_flight;
  GstVisionDetectLateFrames late_frames;
  guint batch_size;
  GstClockTime batch_timeout;
  gboolean thresholds_changed;  /* set by the property setters, read when streaming */
  gboolean classes_changed;
  gboolean started;             /* between start() and stop() */

  /* streaming state: created in start(), released in stop(); only the streaming
   * thread touches it in between */
  vd_model *model;
  vd_context *ctx;              /* batch-size 1: the element's own engine */
  /* batch-size > 1: the shared engine instead of @ctx (set and cleared under
   * the object lock and @lock, so that the getters and the cancelling threads
   * may read it) */
  GstVisionBatcherClient *batch_client;
  gchar **class_names;          /* num_classes names: the model's or the labels file's */
  gint num_classes;
  gboolean *keep_class;         /* num_classes flags (g_rc_box); NULL keeps every class */
  GstVideoInfo info;
  gboolean have_info;
  guint64 frame_count;

  /* Frames in order, each passed downstream by the output thread once the
   * engine's result for it (if it was submitted) is collected. The streaming
   * thread submits and queues, waiting while max-in-flight batches run; the
   * output thread collects, attaches the metas and pushes. Under @lock. */
  GMutex lock;
  GCond cond;
  GQueue pending;               /* PendingFrame */
  guint n_submitted;            /* of @pending, submitted and not yet collected */
  gboolean pushing;             /* the output thread holds a frame not yet pushed */
  gboolean flushing;            /* drop everything: flush, or going to READY */
  gboolean quit;
  GstFlowReturn output_ret;     /* of the last push (or the engine's failure) */
  GThread *output_thread;
  GstClockTime engine_free_at;  /* monotonic time the submitted batches end (estimate) */
  GstClockTime qos_earliest;    /* running time downstream reports as late (QoS) */
  gboolean pending_discont;     /* a frame was dropped: mark the next one */
  guint64 n_inferred, n_skipped_late;

  /* the engine's warnings, posted once per start(): by the output thread, or
   * by the streaming thread with nothing in flight (warm-up) */
  gboolean warned_graphs;       /* graph capture failing (the info when back) */
  gboolean warned_nonfinite;

  /* under the object lock: */
  GstClockTime inference_time;  /* moving average of the engine's time per frame */
  GstClockTime inference_dev;   /* moving average of its deviation from that */
  guint n_inferences;
  GstClockTime latency;         /* what we report */
  GstClockTime upstream_latency;        /* the minimum upstream reported, live */
  gboolean upstream_live;
};

static gpointer output_main (gpointer data);
static GstFlowReturn drain (GstVisionDetect * self);
static void stop_output (GstVisionDetect * self);
static gboolean warm_up (GstVisionDetect * self, const GstVideoInfo * info);
static GstClockTime wanted_latency (GstVisionDetect * self,
    GstClockTime inference_time, GstClockTime deviation);

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
        "16-bit floats with 32-bit accumulation (CUDA)", "fp16"},
    {GST_VISION_DETECT_PRECISION_BF16,
        "bfloat16 (CPUs with AVX512-BF16)", "bf16"},
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
static gboolean *
resolve_classes (GstVisionDetect * self, const gchar * classes)
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
    case PROP_FRAMES_INFERRED:
      g_value_set_uint64 (value, self->n_inferred);
      break;
    case PROP_FRAMES_SKIPPED_LATE:
      g_value_set_uint64 (value, self->n_skipped_late);
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
  g_mutex_clear (&self->lock);
  g_cond_clear (&self->cond);
  G_OBJECT_CLASS (parent_class)->finalize (object);
}

/* ------------------------------------------------------------------------ */
/* Start and stop                                                            */

static void
release_engine (GstVisionDetect * self)
{
  GstVisionBatcherClient *client;

  GST_OBJECT_LOCK (self);
  g_mutex_lock (&self->lock);
  client = self->batch_client;
  self->batch_client = NULL;
  g_mutex_unlock (&self->lock);
  GST_OBJECT_UNLOCK (self);
  /* the last client waits for the shared engine's running batch */
  gst_vision_batcher_client_free (client);
  g_clear_pointer (&self->ctx, vd_context_free);
  g_clear_pointer (&self->model, gst_vision_model_cache_release);
  g_clear_pointer (&self->class_names, g_strfreev);
  g_clear_pointer (&self->keep_class, g_rc_box_release);
  self->num_classes = 0;
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
            "(the default model %s is not in %s, and VISIONDETECT_MODEL is "
            "not set)", VD_DEFAULT_MODEL_NAME, searched), (NULL));
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

  if (batch_size > 1) {
    GstVisionBatcherClient *client = gst_vision_batcher_client_new (self->model,
        &params, batch_size, batch_timeout, max_in_flight, &created, &err);

    GST_OBJECT_LOCK (self);
    g_mutex_lock (&self->lock);
    self->batch_client = client;
    g_mutex_unlock (&self->lock);
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
  self->keep_class = resolve_classes (self, classes);

  GST_INFO_OBJECT (self, "model %s (%s), %d classes, on %s in %s", path,
      vd_model_description (self->model), self->num_classes,
      vd_context_device (ctx) == VD_DEVICE_CUDA ? "CUDA" : "the CPU",
      vd_precision_name (vd_context_precision (ctx)));
  GST_INFO_OBJECT (self, "engine: %s", vd_context_describe (ctx));

  self->frame_count = 0;
  self->flushing = FALSE;
  self->quit = FALSE;
  self->pushing = FALSE;
  self->n_submitted = 0;
  self->output_ret = GST_FLOW_OK;
  self->engine_free_at = 0;
  self->qos_earliest = GST_CLOCK_TIME_NONE;
  self->pending_discont = FALSE;
  self->warned_graphs = FALSE;
  self->warned_nonfinite = FALSE;
  self->output_thread = g_thread_try_new ("visiondetect-out", output_main,
      self, &err);
  if (self->output_thread == NULL) {
    GST_ELEMENT_ERROR (self, RESOURCE, FAILED,
        ("Could not start the output thread: %s", err->message), (NULL));
    goto out_release_engine;
  }
  GST_OBJECT_LOCK (self);
  self->inference_time = GST_CLOCK_TIME_NONE;
  self->inference_dev = 0;
  self->n_inferences = 0;
  self->n_inferred = 0;
  self->n_skipped_late = 0;
  self->started = TRUE;
  /* a shared engine's frame may wait the batch timeout: known from the start */
  self->latency = wanted_latency (self, 0, 0);
  self->upstream_live = FALSE;
  self->upstream_latency = 0;
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

  stop_output (self);
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
    drain (self);
    if (!warm_up (self, &info))
      return FALSE;
  }
  self->info = info;
  self->have_info = TRUE;
  return TRUE;
}

/* ------------------------------------------------------------------------ */
/* Streaming                                                                 */

static gboolean
fill_image (const GstVideoFrame * frame, vd_image * image)
{
  const GstVideoInfo *info = &frame->info;
  guint i;

  memset (image, 0, sizeof (*image));
  switch (GST_VIDEO_FRAME_FORMAT (frame)) {
    case GST_VIDEO_FORMAT_RGB:
      image->format = VD_FORMAT_RGB;
      break;
    case GST_VIDEO_FORMAT_BGR:
      image->format = VD_FORMAT_BGR;
      break;
    case GST_VIDEO_FORMAT_RGBA:
      image->format = VD_FORMAT_RGBA;
      break;
    case GST_VIDEO_FORMAT_BGRA:
      image->format = VD_FORMAT_BGRA;
      break;
    case GST_VIDEO_FORMAT_RGBx:
      image->format = VD_FORMAT_RGBX;
      break;
    case GST_VIDEO_FORMAT_BGRx:
      image->format = VD_FORMAT_BGRX;
      break;
    case GST_VIDEO_FORMAT_NV12:
      image->format = VD_FORMAT_NV12;
      break;
    case GST_VIDEO_FORMAT_I420:
      image->format = VD_FORMAT_I420;
      break;
    default:
      return FALSE;
  }
  image->width = GST_VIDEO_FRAME_WIDTH (frame);
  image->height = GST_VIDEO_FRAME_HEIGHT (frame);
  for (i = 0; i < GST_VIDEO_FRAME_N_PLANES (frame) && i < 3; i++) {
    image->planes[i] = GST_VIDEO_FRAME_PLANE_DATA (frame, i);
    image->strides[i] = GST_VIDEO_FRAME_PLANE_STRIDE (frame, i);
  }
  switch (info->colorimetry.matrix) {
    case GST_VIDEO_COLOR_MATRIX_BT709:
    case GST_VIDEO_COLOR_MATRIX_SMPTE240M:
      image->matrix = VD_COLOR_MATRIX_BT709;
      break;
    case GST_VIDEO_COLOR_MATRIX_BT2020:
      image->matrix = VD_COLOR_MATRIX_BT2020;
      break;
    default:
      image->matrix = VD_COLOR_MATRIX_BT601;
      break;
  }
  image->full_range = info->colorimetry.range == GST_VIDEO_COLOR_RANGE_0_255;
  return TRUE;
}

/* The detections of @result that the element keeps (its class filter), in
 * every form, through the one writer visiontrack shares; and the companion
 * meta, on every frame, with whether the frame was inferred. */
static void
attach_detections (GstVisionDetect * self, const PendingFrame * f,
    const vd_result * result)
{
  GstVisionDetectionEntry *entries;
  GstVisionDetectMeta *meta;
  guint n = 0;
  gint i;

  /* every frame says whether it was looked at, with or without detections */
  meta = gst_buffer_add_vision_detect_meta (f->buffer, f->width, f->height);
  meta->inference = f->inference;
  if (result == NULL || result->n_detections <= 0)
    return;

  entries = g_new0 (GstVisionDetectionEntry, result->n_detections);
  for (i = 0; i < result->n_detections; i++) {
    const vd_detection *det = &result->detections[i];
    GstVisionDetectionEntry *e = &entries[n];

    if (det->label <= 0 || det->label >= self->num_classes)
      continue;
    if (f->keep_class != NULL && !f->keep_class[det->label])
      continue;
    e->x1 = det->x1;
    e->y1 = det->y1;
    e->x2 = det->x2;
    e->y2 = det->y2;
    e->confidence = det->score;
    e->label_id = det->label;
    e->label = g_quark_from_string (self->class_names[det->label]);
    e->mask = det->mask;
    e->mask_x = det->mask_x;
    e->mask_y = det->mask_y;
    e->mask_width = det->mask_width;
    e->mask_height = det->mask_height;
    n++;
  }
  gst_vision_detections_attach (GST_ELEMENT (self), f->buffer, meta, f->width,
      f->height, entries, n, NULL);
  g_free (entries);
}

/* The margin over the typical time for a slow frame: four mean deviations
 * (as TCP's retransmission timer takes over the round-trip time, RFC 6298),
 * at least @floor, what a steady machine needs. On a machine whose other
 * work (or hypervisor) takes the cores at times, frames vary by several
 * times their typical time, and a fixed fraction would have many late. */
static GstClockTime
variation_margin (GstClockTime deviation, GstClockTime floor)
{
  return MAX (4 * deviation, floor);
}

/* What we report: a frame waits for the batches ahead of it, then runs; half
 * an inference more for the variation, or more when frames vary more. With a
 * shared engine (@inference_time is then a batch's), a frame first waits up
 * to the batch timeout for others, and one batch more may be ahead of it
 * (other streams' frames). Object lock held. */
static GstClockTime
wanted_latency (GstVisionDetect * self, GstClockTime inference_time,
    GstClockTime deviation)
{
  GstClockTime margin = variation_margin (deviation, inference_time / 2);

  if (self->batch_size > 1)
    return self->batch_timeout + inference_time * (self->max_in_flight + 1) +
        margin;
  return inference_time * self->max_in_flight + margin;
}

/* Posts a latency message when the typical inference time and its variation
 * need a quarter more latency than reported (of the part that follows them: a
 * shared engine's batch timeout is fixed). Object lock held; returns whether
 * to post. */
static gboolean
raise_latency_locked (GstVisionDetect * self)
{
  GstClockTime wanted = wanted_latency (self, self->inference_time,
      self->inference_dev);
  GstClockTime fixed = wanted_latency (self, 0, 0);

  if (wanted <= self->latency + (self->latency - MIN (fixed,
              self->latency)) / 4)
    return FALSE;
  self->latency = wanted;
  return TRUE;
}

static void
post_latency (GstVisionDetect * self, GstClockTime inference_time,
    GstClockTime latency)
{
  GST_INFO_OBJECT (self, "inference takes %" GST_TIME_FORMAT
      ", reporting a latency of %" GST_TIME_FORMAT,
      GST_TIME_ARGS (inference_time), GST_TIME_ARGS (latency));
  gst_element_post_message (GST_ELEMENT (self),
      gst_message_new_latency (GST_OBJECT (self)));
}

/* The engine's time for one frame (output thread), into the moving average. */
static void
update_latency (GstVisionDetect * self, GstClockTime elapsed)
{
  GstClockTime inference_time, deviation, latency;
  gboolean post;

  GST_OBJECT_LOCK (self);
  self->n_inferences++;
  if (!GST_CLOCK_TIME_IS_VALID (self->inference_time)) {
    self->inference_time = elapsed;
  } else {
    GstClockTimeDiff diff = GST_CLOCK_DIFF (self->inference_time, elapsed);

    /* gains of RFC 6298: 1/4 for the deviation, 1/8 for the mean */
    self->inference_dev = (3 * self->inference_dev + ABS (diff)) / 4;
    self->inference_time = (7 * self->inference_time + elapsed) / 8;
  }
  post = raise_latency_locked (self);
  inference_time = self->inference_time;
  deviation = self->inference_dev;
  latency = self->latency;
  GST_OBJECT_UNLOCK (self);
  GST_LOG_OBJECT (self, "engine time %" GST_TIME_FORMAT ", typical %"
      GST_TIME_FORMAT ", deviation %" GST_TIME_FORMAT, GST_TIME_ARGS (elapsed),
      GST_TIME_ARGS (inference_time), GST_TIME_ARGS (deviation));
  if (post)
    post_latency (self, inference_time, latency);
}

/* After a batch returned by the engine: one warning the first time graph
 * capture is found failing (frames then cost several times more), an info
 * when it works again, and one warning the first time a frame has infinite or
 * NaN activations (fp16 overflow, corrupt weights: too few detections). */
static void
report_engine_status (GstVisionDetect * self, const vd_result * result,
    const gchar * when)
{
  vd_run_status status;

  vd_context_run_status (self->ctx, &status);
  if (status.graphs == VD_GRAPHS_RETRYING && !self->warned_graphs) {
    self->warned_graphs = TRUE;
    GST_ELEMENT_WARNING (self, RESOURCE, FAILED,
        ("CUDA graph capture failed (%s): frames run eagerly, several times "
            "slower, and capture is tried again after %d frame(s), then "
            "after twice as many each time it fails (at most %d)",
            status.graphs_reason, status.graph_retry_frames,
            VD_GRAPH_RETRY_MAX_FRAMES),
        ("%" G_GUINT64_FORMAT " capture failure(s) so far, %s",
            status.graph_failures, when));
  } else if (status.graphs == VD_GRAPHS_ACTIVE && self->warned_graphs) {
    self->warned_graphs = FALSE;
    GST_ELEMENT_INFO (self, RESOURCE, FAILED,
        ("CUDA graph capture works again: frames are replayed"),
        ("after %" G_GUINT64_FORMAT " capture failure(s), %s",
            status.graph_failures, when));
  }
  if (result != NULL && result->n_nonfinite > 0 && !self->warned_nonfinite) {
    self->warned_nonfinite = TRUE;
    GST_ELEMENT_WARNING (self, STREAM, FAILED,
        ("The model produced %d infinite or NaN value(s), %s (%s): its "
            "detections are unreliable; with precision fp16 an activation "
            "above 65504 overflows (try precision=fp32), otherwise the "
            "weights may be corrupt", result->n_nonfinite, when,
            vd_precision_name (vd_context_precision (self->ctx))),
        ("counted in the RPN head and box head outputs; warned once"));
  }
}

/* A frame at the size and format of the caps, run twice: the first run creates
 * the engine's primitives for the size, the second is a typical inference, which
 * sets the latency before the first frame. Nothing in flight. */
static gboolean
warm_up (GstVisionDetect * self, const GstVideoInfo * info)
{
  GstBuffer *buffer = gst_buffer_new_allocate (NULL, info->size, NULL);
  GstClockTime start = 0, elapsed = 0, latency;
  GstVideoFrame frame;
  GError *err = NULL;
  vd_image image;
  gboolean ok = TRUE, post;
  gfloat threshold, iou_threshold;
  gint run, max_detections;

  GST_OBJECT_LOCK (self);
  threshold = self->threshold;
  iou_threshold = self->iou_threshold;
  max_detections = self->max_detections;
  GST_OBJECT_UNLOCK (self);

  if (buffer != NULL)
    gst_buffer_memset (buffer, 0, 0x80, info->size);
  if (buffer == NULL || !gst_video_frame_map (&frame, info, buffer,
          GST_MAP_READ)) {
    GST_ELEMENT_ERROR (self, RESOURCE, NO_SPACE_LEFT,
        ("Could not allocate a %dx%d frame", GST_VIDEO_INFO_WIDTH (info),
            GST_VIDEO_INFO_HEIGHT (info)), (NULL));
    gst_clear_buffer (&buffer);
    return FALSE;
  }
  fill_image (&frame, &image);
  for (run = 0; run < 2 && ok; run++) {
    vd_result result;

    if (self->batch_client != NULL) {
      GstVisionBatchRequest *request;
      GstVisionBatchStatus status;
      guint batch_frames;

      /* through the shared engine (which takes the mapping), alone: not
       * waiting for other streams' frames; the latency follows the time of
       * the real batches afterwards */
      if (run > 0 && !gst_video_frame_map (&frame, info, buffer, GST_MAP_READ))
        break;
      fill_image (&frame, &image);
      request = gst_vision_batcher_submit (self->batch_client, &frame, &image,
          threshold, iou_threshold, max_detections, TRUE);
      status = gst_vision_batcher_wait (self->batch_client, request, &result,
          &elapsed, &batch_frames, &err);
      gst_vision_batch_request_unref (request);
      ok = status != GST_VISION_BATCH_FAILED;
      vd_result_clear (&result);
      if (status == GST_VISION_BATCH_CANCELLED) {
        /* flushing or stopping */
        gst_buffer_unref (buffer);
        return TRUE;
      }
      continue;
    }
    start = gst_util_get_timestamp ();
    ok = vd_detect (self->ctx, &image, 1, &result, &err);
    elapsed = gst_util_get_timestamp () - start;
    if (ok) {
      /* grey frames: the model's own overflow shows here already */
      report_engine_status (self, &result, "warming up");
      vd_result_clear (&result);
    }
  }
  if (self->batch_client == NULL)
    gst_video_frame_unmap (&frame);
  gst_buffer_unref (buffer);
  if (!ok) {
    GST_ELEMENT_ERROR (self, STREAM, FAILED,
        ("Detection failed on a %dx%d %s frame: %s",
            GST_VIDEO_INFO_WIDTH (info), GST_VIDEO_INFO_HEIGHT (info),
            gst_video_format_to_string (GST_VIDEO_INFO_FORMAT (info)),
            err->message), ("engine error code %d, warming up", err->code));
    g_clear_error (&err);
    return FALSE;
  }

  GST_OBJECT_LOCK (self);
  /* a new size: its own typical time, not the average of the old one */
  self->inference_time = elapsed;
  self->inference_dev = 0;
  post = raise_latency_locked (self);
  latency = self->latency;
  GST_OBJECT_UNLOCK (self);
  GST_INFO_OBJECT (self, "warm-up at %dx%d: %" GST_TIME_FORMAT,
      GST_VIDEO_INFO_WIDTH (info), GST_VIDEO_INFO_HEIGHT (info),
      GST_TIME_ARGS (elapsed));
  if (post)
    post_latency (self, elapsed, latency);
  return TRUE;
}

static void
pending_frame_free (PendingFrame * f)
{
  g_clear_pointer (&f->request, gst_vision_batch_request_unref);
  gst_clear_buffer (&f->buffer);
  g_clear_pointer (&f->keep_class, g_rc_box_release);
  g_free (f);
}

/* The output thread: frames leave in order, each once its result is in. */
static gpointer
output_main (gpointer data)
{
  GstVisionDetect *self = data;
  GstBaseTransform *trans = GST_BASE_TRANSFORM (self);
  GstClockTime last_done = 0;

  g_mutex_lock (&self->lock);
  for (;;) {
    PendingFrame *f;
    gboolean submitted, drop, cancelled = FALSE;
    GstFlowReturn ret = GST_FLOW_OK;
    vd_result result;
    GError *err = NULL;
    gboolean ok = TRUE;

    while (!self->quit && g_queue_is_empty (&self->pending))
      g_cond_wait (&self->cond, &self->lock);
    if (self->quit)
      break;
    f = g_queue_pop_head (&self->pending);
    submitted = f->inference == GST_VISION_DETECT_INFERRED;
    self->pushing = TRUE;
    g_mutex_unlock (&self->lock);

    if (submitted && f->request != NULL) {
      GstVisionBatchStatus status;
      GstClockTime done, batch_time;
      guint batch_frames;

      status = gst_vision_batcher_wait (self->batch_client, f->request, &result,
          &batch_time, &batch_frames, &err);
      done = gst_util_get_timestamp ();
      ok = status != GST_VISION_BATCH_FAILED;
      cancelled = status == GST_VISION_BATCH_CANCELLED;
      g_mutex_lock (&self->lock);
      self->n_submitted--;
      if (self->n_submitted == 0)
        self->engine_free_at = done;
      g_cond_broadcast (&self->cond);
      g_mutex_unlock (&self->lock);
      if (status == GST_VISION_BATCH_DONE) {
        /* the latency follows the time of a batch, what a frame waits for */
        update_latency (self, batch_time);
        GST_LOG_OBJECT (self, "frame %" G_GUINT64_FORMAT ": %d detections, "
            "in a batch of %u (%" GST_TIME_FORMAT ")", f->index,
            result.n_detections, batch_frames, GST_TIME_ARGS (batch_time));
      }
    } else if (submitted) {
      GstClockTime done;

      ok = vd_collect (self->ctx, &result, 1, &err);
      done = gst_util_get_timestamp ();
      g_mutex_lock (&self->lock);
      self->n_submitted--;
      if (self->n_submitted == 0)
        self->engine_free_at = done;
      g_cond_broadcast (&self->cond);
      g_mutex_unlock (&self->lock);
      if (ok) {
        vd_stage_time stages[16];
        gint n = vd_context_stage_times (self->ctx, stages, 16), k;
        gdouble ms = 0.0;
        gchar when[48];

        /* the engine's own time for the frame (the stages follow each other);
         * not the time to collect it, which waited on the pushes before it */
        for (k = 0; k < n; k++)
          ms += stages[k].ms;
        update_latency (self, n > 0 ? (GstClockTime) (ms * GST_MSECOND) :
            done - MAX (f->submitted, last_done));
        GST_LOG_OBJECT (self, "frame %" G_GUINT64_FORMAT ": %d detections",
            f->index, result.n_detections);
        g_snprintf (when, sizeof (when), "at frame %" G_GUINT64_FORMAT,
            f->index);
        report_engine_status (self, &result, when);
      }
      last_done = done;
    }

    g_mutex_lock (&self->lock);
    drop = self->flushing || self->output_ret != GST_FLOW_OK || cancelled;
    g_mutex_unlock (&self->lock);
    if (!ok) {
      if (!drop)
        GST_ELEMENT_ERROR (self, STREAM, FAILED,
            ("Detection failed on frame %" G_GUINT64_FORMAT " (%dx%d): %s",
                f->index, f->width, f->height, err->message),
            ("engine error code %d", err->code));
      g_clear_error (&err);
      ret = GST_FLOW_ERROR;
    } else if (drop) {
      ret = GST_FLOW_OK;
    } else {
      GstBuffer *buffer;

      attach_detections (self, f, submitted ? &result : NULL);
      buffer = f->buffer;
      f->buffer = NULL;
      ret = gst_pad_push (trans->srcpad, buffer);
    }
    if (submitted && ok)
      vd_result_clear (&result);
    pending_frame_free (f);

    g_mutex_lock (&self->lock);
    self->pushing = FALSE;
    if (ret != GST_FLOW_OK && self->output_ret == GST_FLOW_OK) {
      GST_DEBUG_OBJECT (self, "push: %s", gst_flow_get_name (ret));
      self->output_ret = ret;
    }
    g_cond_broadcast (&self->cond);
  }
  g_mutex_unlock (&self->lock);
  return NULL;
}

/* Waits until every queued frame is out (or dropped). Streaming thread. */
static GstFlowReturn
drain (GstVisionDetect * self)
{
  GstFlowReturn ret;

  g_mutex_lock (&self->lock);
  while (!g_queue_is_empty (&self->pending) || self->pushing)
    g_cond_wait (&self->cond, &self->lock);
  ret = self->flushing ? GST_FLOW_FLUSHING : self->output_ret;
  g_mutex_unlock (&self->lock);
  return ret;
}

/* Stops the output thread and drops what it had not pushed. */
static void
stop_output (GstVisionDetect * self)
{
  PendingFrame *f;

  g_mutex_lock (&self->lock);
  self->quit = TRUE;
  self->flushing = TRUE;
  g_cond_broadcast (&self->cond);
  /* an output thread waiting for the shared engine stops waiting */
  if (self->batch_client != NULL)
    gst_vision_batcher_client_cancel (self->batch_client);
  g_mutex_unlock (&self->lock);
  if (self->output_thread != NULL)
    g_thread_join (self->output_thread);
  self->output_thread = NULL;
  /* their batches are dropped with the context */
  while ((f = g_queue_pop_head (&self->pending)) != NULL)
    pending_frame_free (f);
  self->n_submitted = 0;
  self->pushing = FALSE;
}

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

/* Whether inference would make the frame at running time @rt leave after
 * its deadline: the time it is due here (@rt plus the live upstream latency)
 * plus the latency we report. Also late: what downstream reported as late. */
static gboolean
would_be_late (GstVisionDetect * self, GstClockTime rt)
{
  GstClock *clock;
  GstClockTime now, base_time, done, deadline, inference_time, deviation,
      latency, upstream, mono, free_at, earliest, gather = 0;
  gboolean live;

  if (!GST_CLOCK_TIME_IS_VALID (rt))
    return FALSE;
  g_mutex_lock (&self->lock);
  earliest = self->qos_earliest;
  g_mutex_unlock (&self->lock);
  if (GST_CLOCK_TIME_IS_VALID (earliest) && rt < earliest)
    return TRUE;

  GST_OBJECT_LOCK (self);
  live = self->upstream_live;
  upstream = self->upstream_latency;
  inference_time = self->inference_time;
  deviation = self->inference_dev;
  latency = self->latency;
  clock = GST_ELEMENT_CLOCK (self) ? gst_object_ref (GST_ELEMENT_CLOCK (self))
      : NULL;
  base_time = GST_ELEMENT_CAST (self)->base_time;
  /* a shared engine's batch may wait that long for its other frames */
  if (self->batch_client != NULL)
    gather = self->batch_timeout;
  GST_OBJECT_UNLOCK (self);
  if (clock == NULL)
    return FALSE;
  now = gst_clock_get_time (clock);
  gst_object_unref (clock);
  if (!live || !GST_CLOCK_TIME_IS_VALID (inference_time)
      || GST_STATE (self) != GST_STATE_PLAYING || now < base_time)
    return FALSE;

  /* when the batches ahead end (monotonic time), then this one */
  mono = gst_util_get_timestamp ();
  g_mutex_lock (&self->lock);
  free_at = self->n_submitted > 0 ? MAX (self->engine_free_at, mono) : mono;
  g_mutex_unlock (&self->lock);
  /* a slow frame's time (a quarter more than the typical time on a steady
   * machine): a slower frame than typical still on time */
  done = (now - base_time) + (free_at - mono) + gather + inference_time +
      variation_margin (deviation, inference_time / 4);
  deadline = rt + upstream + latency;
  GST_LOG_OBJECT (self, "running time %" GST_TIME_FORMAT ": done at %"
      GST_TIME_FORMAT ", deadline %" GST_TIME_FORMAT, GST_TIME_ARGS (rt),
      GST_TIME_ARGS (done), GST_TIME_ARGS (deadline));
  return done > deadline;
}

/* late-frames=skip-inference: @f passes on time without inference */
static void
skip_late (GstVisionDetect * self, PendingFrame * f, const gchar * when)
{
  f->inference = GST_VISION_DETECT_SKIPPED_LATE;
  GST_OBJECT_LOCK (self);
  self->n_skipped_late++;
  GST_OBJECT_UNLOCK (self);
  GST_DEBUG_OBJECT (self, "frame %" G_GUINT64_FORMAT " would be late%s: "
      "passed without inference", f->index, when);
}

static GstFlowReturn
gst_vision_detect_generate_output (GstBaseTransform * trans,
    GstBuffer ** outbuf)
{
  GstVisionDetect *self = GST_VISION_DETECT (trans);
  GstBuffer *buffer = trans->queued_buf;
  gboolean thresholds_changed, classes_changed;
  gfloat threshold, iou_threshold;
  gint max_detections;
  gchar *classes = NULL;
  guint interval, max_in_flight;
  GstVisionDetectLateFrames late_frames;
  PendingFrame *f;
  GstFlowReturn ret;
  guint64 frame_index;
  GstClockTime inference_time, rt;

  *outbuf = NULL;
  if (buffer == NULL)
    return GST_FLOW_OK;
  trans->queued_buf = NULL;

  if (G_UNLIKELY (!self->have_info || (self->ctx == NULL
              && self->batch_client == NULL))) {
    gst_buffer_unref (buffer);
    GST_ELEMENT_ERROR (self, CORE, NEGOTIATION, (NULL),
        ("frame before caps or before the engine started"));
    return GST_FLOW_NOT_NEGOTIATED;
  }

  g_mutex_lock (&self->lock);
  ret = self->flushing ? GST_FLOW_FLUSHING : self->output_ret;
  g_mutex_unlock (&self->lock);
  if (ret != GST_FLOW_OK) {
    gst_buffer_unref (buffer);
    return ret;
  }

  GST_OBJECT_LOCK (self);
  interval = self->interval;
  max_in_flight = self->max_in_flight;
  late_frames = self->late_frames;
  thresholds_changed = self->thresholds_changed;
  threshold = self->threshold;
  iou_threshold = self->iou_threshold;
  max_detections = self->max_detections;
  self->thresholds_changed = FALSE;
  classes_changed = self->classes_changed;
  if (classes_changed)
    classes = g_strdup (self->classes);
  self->classes_changed = FALSE;
  GST_OBJECT_UNLOCK (self);

  /* a shared engine takes them with every frame */
  if (thresholds_changed && self->ctx != NULL)
    vd_context_set_thresholds (self->ctx, threshold, iou_threshold,
        max_detections);
  if (classes_changed) {
    g_clear_pointer (&self->keep_class, g_rc_box_release);
    self->keep_class = resolve_classes (self, classes);
    g_free (classes);
  }

  /* in place: the metas need a writable buffer (a shallow copy when it is
   * shared; the pixels are never copied) */
  buffer = gst_buffer_make_writable (buffer);
  if (self->pending_discont) {
    GST_BUFFER_FLAG_SET (buffer, GST_BUFFER_FLAG_DISCONT);
    self->pending_discont = FALSE;
  }

  rt = gst_segment_to_running_time (&trans->segment, GST_FORMAT_TIME,
      GST_BUFFER_PTS (buffer));
  f = g_new0 (PendingFrame, 1);
  f->buffer = buffer;
  f->index = frame_index = self->frame_count++;
  f->width = GST_VIDEO_INFO_WIDTH (&self->info);
  f->height = GST_VIDEO_INFO_HEIGHT (&self->info);
  f->keep_class = self->keep_class ? g_rc_box_acquire (self->keep_class) : NULL;
  if (interval > 1 && frame_index % interval != 0)
    f->inference = GST_VISION_DETECT_SKIPPED_INTERVAL;
  else if (GST_BUFFER_FLAG_IS_SET (buffer, GST_BUFFER_FLAG_GAP))
    f->inference = GST_VISION_DETECT_SKIPPED_GAP;
  else if (late_frames == GST_VISION_DETECT_LATE_SKIP_INFERENCE
      && would_be_late (self, rt))
    skip_late (self, f, "");

  if (f->inference == GST_VISION_DETECT_INFERRED) {
    gboolean waited = FALSE;

    /* room in the engine */
    g_mutex_lock (&self->lock);
    while (self->n_submitted >= max_in_flight && !self->flushing) {
      g_cond_wait (&self->cond, &self->lock);
      waited = TRUE;
    }
    ret = self->flushing ? GST_FLOW_FLUSHING : GST_FLOW_OK;
    g_mutex_unlock (&self->lock);
    if (ret != GST_FLOW_OK) {
      pending_frame_free (f);
      return ret;
    }
    /* the room came when the frame ahead was collected, which follows the
     * pushes before it (a synchronised sink holds each until its time), not
     * the engine's estimate: late now, the frame passes without inference */
    if (waited && late_frames == GST_VISION_DETECT_LATE_SKIP_INFERENCE
        && would_be_late (self, rt))
      skip_late (self, f, " after waiting for the engine");
  }

  if (f->inference == GST_VISION_DETECT_INFERRED) {
    GstVideoFrame frame;
    vd_image image;
    GError *err = NULL;
    gboolean ok;

    /* read only: the frame passes unchanged; the engine copies what it reads */
    if (!gst_video_frame_map (&frame, &self->info, buffer, GST_MAP_READ)) {
      pending_frame_free (f);
      GST_ELEMENT_ERROR (self, STREAM, FAILED,
          ("Could not map video frame %" G_GUINT64_FORMAT, frame_index),
          (NULL));
      return GST_FLOW_ERROR;
    }
    if (!fill_image (&frame, &image)) {
      gst_video_frame_unmap (&frame);
      pending_frame_free (f);
      GST_ELEMENT_ERROR (self, CORE, NEGOTIATION,
          ("Unsupported video format %s",
              gst_video_format_to_string (GST_VIDEO_INFO_FORMAT (&self->info))),
          (NULL));
      return GST_FLOW_NOT_NEGOTIATED;
    }
    f->submitted = gst_util_get_timestamp ();
    if (self->batch_client != NULL) {
      /* the shared engine takes the mapping; a frame it refuses fails when
       * its result is collected, alone */
      f->request = gst_vision_batcher_submit (self->batch_client, &frame,
          &image, threshold, iou_threshold, max_detections, FALSE);
      ok = TRUE;
    } else {
      ok = vd_submit (self->ctx, &image, 1, &err);
      gst_video_frame_unmap (&frame);
    }
    if (!ok) {
      GST_ELEMENT_ERROR (self, STREAM, FAILED,
          ("Detection failed on frame %" G_GUINT64_FORMAT " (%dx%d %s): %s",
              frame_index, image.width, image.height,
              gst_video_format_to_string (GST_VIDEO_INFO_FORMAT (&self->info)),
              err->message), ("engine error code %d", err->code));
      g_clear_error (&err);
      pending_frame_free (f);
      return GST_FLOW_ERROR;
    }
    GST_OBJECT_LOCK (self);
    self->n_inferred++;
    GST_OBJECT_UNLOCK (self);
  }

  GST_OBJECT_LOCK (self);
  inference_time = self->inference_time;
  GST_OBJECT_UNLOCK (self);
  g_mutex_lock (&self->lock);
  if (f->inference == GST_VISION_DETECT_INFERRED) {
    self->n_submitted++;
    self->engine_free_at = MAX (self->engine_free_at, f->submitted);
    if (GST_CLOCK_TIME_IS_VALID (inference_time))
      self->engine_free_at += inference_time;
  }
  g_queue_push_tail (&self->pending, f);
  g_cond_broadcast (&self->cond);
  g_mutex_unlock (&self->lock);
  return GST_FLOW_OK;
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
      /* the frames not yet out are dropped; a wait for room ends */
      g_mutex_lock (&self->lock);
      self->flushing = TRUE;
      g_cond_broadcast (&self->cond);
      /* and those in the shared engine leave it */
      if (self->batch_client != NULL)
        gst_vision_batcher_client_cancel (self->batch_client);
      g_mutex_unlock (&self->lock);
      break;
    case GST_EVENT_FLUSH_STOP:
      drain (self);
      g_mutex_lock (&self->lock);
      self->flushing = FALSE;
      self->output_ret = GST_FLOW_OK;
      self->qos_earliest = GST_CLOCK_TIME_NONE;
      g_mutex_unlock (&self->lock);
      /* a seek starts the interval again: its first frame is inferred */
      self->frame_count = 0;
      break;
    default:
      /* at EOS the shared engine stops waiting for this stream's frames (until
       * the next one) */
      if (GST_EVENT_TYPE (event) == GST_EVENT_EOS) {
        g_mutex_lock (&self->lock);
        if (self->batch_client != NULL)
          gst_vision_batcher_client_set_idle (self->batch_client, TRUE);
        g_mutex_unlock (&self->lock);
      }
      /* serialized events (caps, segment, EOS, ...) follow the frames before
       * them */
      if (GST_EVENT_IS_SERIALIZED (event))
        drain (self);
      if (GST_EVENT_TYPE (event) == GST_EVENT_SEGMENT) {
        g_mutex_lock (&self->lock);
        self->qos_earliest = GST_CLOCK_TIME_NONE;
        g_mutex_unlock (&self->lock);
      }
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
    /* read by the streaming thread only for skip-inference; late frames are
     * skipped until downstream catches up (as GstVideoDecoder does) */
    if (GST_CLOCK_TIME_IS_VALID (timestamp)) {
      g_mutex_lock (&self->lock);
      self->qos_earliest = diff > 0 ? timestamp + 2 * diff :
          (GstClockTime) MAX ((GstClockTimeDiff) timestamp + diff, 0);
      g_mutex_unlock (&self->lock);
    }
  }
  return GST_BASE_TRANSFORM_CLASS (parent_class)->src_event (trans, event);
}

static GstStateChangeReturn
gst_vision_detect_change_state (GstElement * element, GstStateChange transition)
{
  GstVisionDetect *self = GST_VISION_DETECT (element);

  if (transition == GST_STATE_CHANGE_PAUSED_TO_READY) {
    /* a streaming thread waiting for room stops waiting before the pads
     * deactivate (which takes its stream lock) */
    g_mutex_lock (&self->lock);
    self->flushing = TRUE;
    g_cond_broadcast (&self->cond);
    /* frames waiting in a shared engine leave it: neither this element's
     * stop nor the other streams wait for them */
    if (self->batch_client != NULL)
      gst_vision_batcher_client_cancel (self->batch_client);
    g_mutex_unlock (&self->lock);
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
    GST_OBJECT_LOCK (self);
    latency = self->latency;
    self->upstream_live = live;
    self->upstream_latency = min;
    GST_OBJECT_UNLOCK (self);
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
  g_object_class_install_property (gobject_class, PROP_FRAMES_INFERRED,
      g_param_spec_uint64 ("frames-inferred", "Frames inferred",
          "Frames the detector ran on since the element started", 0,
          G_MAXUINT64, 0, G_PARAM_READABLE | G_PARAM_STATIC_STRINGS));
  g_object_class_install_property (gobject_class, PROP_FRAMES_SKIPPED_LATE,
      g_param_spec_uint64 ("frames-skipped-late", "Frames skipped late",
          "Frames passed without inference because it would have made them "
          "late (late-frames=skip-inference)", 0, G_MAXUINT64, 0,
          G_PARAM_READABLE | G_PARAM_STATIC_STRINGS));
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
  self->batch_size = DEFAULT_BATCH_SIZE;
  self->batch_timeout = DEFAULT_BATCH_TIMEOUT;
  self->inference_time = GST_CLOCK_TIME_NONE;
  g_mutex_init (&self->lock);
  g_cond_init (&self->cond);
  g_queue_init (&self->pending);

  /* in place, never passthrough: the metas need a writable buffer (basetransform
   * makes a shallow copy when it is shared; the pixels are never copied) */
  gst_base_transform_set_in_place (trans, TRUE);
  gst_base_transform_set_passthrough (trans, FALSE);
  /* late frames: see the late-frames property (drop: GstBaseTransform's QoS) */
  gst_base_transform_set_qos_enabled (trans,
      DEFAULT_LATE_FRAMES == GST_VISION_DETECT_LATE_DROP);
}
