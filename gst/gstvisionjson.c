/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* visionjson: a passthrough element that writes one JSON object per frame
 * (JSON Lines) with the frame's detections. */

/**
 * SECTION:element-visionjson
 * @title: visionjson
 *
 * visionjson writes one line of JSON per frame to #GstVisionJson:location
 * (standard output when unset) and, with #GstVisionJson:post-messages, posts
 * it as an element message named "visionjson" on the bus (fields `frame`,
 * `pts` and `json`). The video passes unchanged. Each line is:
 *
 * |[
 * {"frame":0,"pts":0,"stream_time":0,"width":640,"height":480,"inferred":true,"objects":[
 *   {"id":0,"label":"ball","label_id":1,"confidence":0.97,
 *    "box":{"x_min":0.41,"y_min":0.33,"x_max":0.59,"y_max":0.57},
 *    "rect":{"x":262.4,"y":158.4,"w":115.2,"h":115.2}}]}
 * ]|
 *
 * (on one line). `pts` is in nanoseconds (null when the buffer has none),
 * `stream_time` the frame's position in the stream in nanoseconds (the pts
 * through the segment: what a seek or a segment's start changes; null
 * without one), `box`
 * is normalised to 0..1, `rect` is in pixels of this frame; `confidence` and
 * `label_id` are -1 for regions of interest that carry no detection
 * parameters. `inferred` says whether visiondetect ran on the frame (absent
 * when no visiondetect is upstream); when it is false, `skipped` says why:
 * "interval" (between two frames of its interval property), "late" (inference
 * would have made a live frame late) or "gap" (a GAP buffer).
 *
 * `frame` counts the frames from 0 since the element started or since the
 * last flushing seek (which starts it at 0 again, wherever it seeks to);
 * `pts` places the frame in the stream. Frames wholly outside the current
 * segment (which the sink will drop) are not written.
 *
 * With #GstVisionJson:format=dlstreamer the lines are DL Streamer's
 * gvametaconvert JSON instead (as with its add-empty-results=true), so that
 * its consumers read them unchanged:
 *
 * |[
 * {"resolution":{"width":640,"height":480},"timestamp":0,"objects":[
 *   {"x":262,"y":158,"w":116,"h":116,"region_id":0,"roi_type":"ball",
 *    "detection":{"bounding_box":{"x_min":0.41,"x_max":0.59,"y_min":0.33,
 *    "y_max":0.57},"confidence":0.97,"label_id":1,"label":"ball"}}]}
 * ]|
 *
 * `timestamp` is the stream time in nanoseconds (absent without one),
 * `objects` is absent on a frame without detections, `id` is the tracked
 * object's id (visiontrack; absent when untracked), `region_id` the ROI
 * meta's id (-1 for an analytics entry no ROI meta shows), `confidence` and
 * `label_id` absent when unknown. An object with keypoints (a Keypoint
 * R-CNN's) has `tensors`: the keypoints tensor gvametaconvert writes with
 * add-tensor-data=true ("dims" [n, 2], "data" the positions normalised to
 * the object's rectangle, "confidence" the n scores, "point_names" and
 * "point_connections" when the model names them). In the default format
 * such an object has `keypoints`: [[x, y, score], ...] in frame pixels.
 *
 * ## Example launch lines
 * |[
 * gst-launch-1.0 filesrc location=in.mp4 ! decodebin ! videoconvert ! \
 *     visiondetect ! visionjson location=detections.jsonl ! fakesink
 * ]|
 * |[
 * gst-launch-1.0 filesrc location=in.mp4 ! decodebin ! videoconvert ! \
 *     visiondetect ! visiontrack ! \
 *     visionjson format=dlstreamer location=gva.jsonl ! fakesink
 * ]| The same for DL Streamer's tools, with object ids.
 */

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstvisionjson.h"
#include "helpers/jsonframe.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib/gstdio.h>
#include <gst/video/video.h>

GST_DEBUG_CATEGORY_STATIC (gst_vision_json_debug);
#define GST_CAT_DEFAULT gst_vision_json_debug

#define DEFAULT_LOCATION NULL
#define DEFAULT_POST_MESSAGES FALSE
#define DEFAULT_FORMAT GST_VISION_JSON_FORMAT_VISIONDETECT

enum
{
  PROP_0,
  PROP_LOCATION,
  PROP_POST_MESSAGES,
  PROP_FORMAT,
};

#define GST_TYPE_VISION_JSON_FORMAT (gst_vision_json_format_get_type ())
static GType
gst_vision_json_format_get_type (void)
{
  static GType type = 0;
  static const GEnumValue values[] = {
    {GST_VISION_JSON_FORMAT_VISIONDETECT,
        "visiondetect's own: frame, pts, stream_time, width, height, "
          "inferred, objects", "visiondetect"},
    {GST_VISION_JSON_FORMAT_DLSTREAMER,
          "DL Streamer's gvametaconvert: resolution, timestamp, objects",
        "dlstreamer"},
    {0, NULL, NULL},
  };

  if (g_once_init_enter (&type)) {
    GType t = g_enum_register_static ("GstVisionJsonFormat", values);
    g_once_init_leave (&type, t);
  }
  return type;
}

struct _GstVisionJson
{
  GstBaseTransform parent;

  /* properties, protected by the object lock */
  gchar *location;
  gboolean post_messages;
  GstVisionJsonFormat format;

  /* streaming state */
  FILE *file;                   /* stdout when no location is set */
  gchar *file_key;              /* "device:inode" of the file, in open_files */
  GstVideoInfo info;
  gboolean have_info;
  guint64 frame_count;
};

/* The files the visionjson elements of this process are writing, by device and
 * inode ("dev:ino" -> the element's name): a second writer would interleave its
 * lines with the first's (and truncate the file under it), so it is refused. */
static GMutex open_files_lock;
static GHashTable *open_files;

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE ("sink",
    GST_PAD_SINK,
    GST_PAD_ALWAYS,
    GST_STATIC_CAPS ("video/x-raw(ANY)"));

static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE ("src",
    GST_PAD_SRC,
    GST_PAD_ALWAYS,
    GST_STATIC_CAPS ("video/x-raw(ANY)"));

#define gst_vision_json_parent_class parent_class
G_DEFINE_TYPE (GstVisionJson, gst_vision_json, GST_TYPE_BASE_TRANSFORM);
GST_ELEMENT_REGISTER_DEFINE (visionjson, "visionjson", GST_RANK_NONE,
    GST_TYPE_VISION_JSON);

static GstFlowReturn
gst_vision_json_transform_ip (GstBaseTransform * trans, GstBuffer * buffer)
{
  GstVisionJson *self = GST_VISION_JSON (trans);
  guint64 frame_index;
  gboolean post_messages;
  GstVisionJsonFormat format;
  gchar *json, *line;
  gsize line_length, written;

  if (G_UNLIKELY (!self->have_info)) {
    GST_ELEMENT_ERROR (self, CORE, NEGOTIATION, (NULL), ("frame before caps"));
    return GST_FLOW_NOT_NEGOTIATED;
  }
  if (!gst_vision_json_frame_in_segment (&trans->segment, buffer))
    return GST_FLOW_OK;
  frame_index = self->frame_count++;

  GST_OBJECT_LOCK (self);
  format = self->format;
  GST_OBJECT_UNLOCK (self);
  json = gst_vision_json_frame_to_string (buffer, &trans->segment,
      GST_VIDEO_INFO_WIDTH (&self->info), GST_VIDEO_INFO_HEIGHT (&self->info),
      frame_index, format);

  /* the line and its newline in one call: stdio locks the stream per call, so
   * elements sharing standard output never interleave within a line */
  line_length = strlen (json);
  line = g_malloc (line_length + 1);
  memcpy (line, json, line_length);
  line[line_length] = '\n';
  written = fwrite (line, 1, line_length + 1, self->file);
  g_free (line);
  if (written != line_length + 1 || fflush (self->file) != 0) {
    gchar *location;

    GST_OBJECT_LOCK (self);
    location = g_strdup (self->location ? self->location : "standard output");
    GST_OBJECT_UNLOCK (self);
    GST_ELEMENT_ERROR (self, RESOURCE, WRITE,
        ("Could not write to \"%s\": %s", location, g_strerror (errno)),
        (NULL));
    g_free (location);
    g_free (json);
    return GST_FLOW_ERROR;
  }

  GST_OBJECT_LOCK (self);
  post_messages = self->post_messages;
  GST_OBJECT_UNLOCK (self);
  if (post_messages) {
    GstStructure *s = gst_structure_new ("visionjson",
        "frame", G_TYPE_UINT64, frame_index,
        "pts", G_TYPE_UINT64, GST_BUFFER_PTS (buffer),
        "json", G_TYPE_STRING, json, NULL);

    gst_element_post_message (GST_ELEMENT (self),
        gst_message_new_element (GST_OBJECT (self), s));
  }
  g_free (json);
  return GST_FLOW_OK;
}

/* `frame` counts the frames since the element started or since the last
 * flush: a flushing seek starts it again at 0, whatever the position sought
 * (`pts` says where in the stream the frame is). Frames outside the segment
 * (those an accurate seek's demuxer sends before the position, which the
 * sink drops) get no line and no number. A segment without a flush
 * (a segment seek's loop, gapless playback) continues the count, so that the
 * numbers of one run between flushes never repeat; EOS changes nothing (a
 * new stream after it comes after a flush or a restart). */
static gboolean
gst_vision_json_sink_event (GstBaseTransform * trans, GstEvent * event)
{
  GstVisionJson *self = GST_VISION_JSON (trans);

  if (GST_EVENT_TYPE (event) == GST_EVENT_FLUSH_STOP)
    self->frame_count = 0;
  return GST_BASE_TRANSFORM_CLASS (parent_class)->sink_event (trans, event);
}

static gboolean
gst_vision_json_set_caps (GstBaseTransform * trans, GstCaps * incaps,
    GstCaps * outcaps)
{
  GstVisionJson *self = GST_VISION_JSON (trans);

  if (!gst_video_info_from_caps (&self->info, incaps)) {
    GST_ERROR_OBJECT (self, "invalid caps %" GST_PTR_FORMAT, incaps);
    return FALSE;
  }
  self->have_info = TRUE;
  return TRUE;
}

static void
release_location_key (const gchar * key)
{
  g_mutex_lock (&open_files_lock);
  if (open_files != NULL)
    g_hash_table_remove (open_files, key);
  g_mutex_unlock (&open_files_lock);
}

/* Opens @location for writing, truncated, unless another visionjson of the
 * process is writing that file (whatever the path it was given): then an
 * element error naming both. */
static gboolean
open_location (GstVisionJson * self, const gchar * location)
{
  struct stat st;
  gchar *key, *owner = NULL, *name;
  int fd;

  /* not truncated before we know the file is ours to write */
  fd = g_open (location, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0 || fstat (fd, &st) != 0) {
    int err = errno;

    if (fd >= 0)
      close (fd);
    GST_ELEMENT_ERROR (self, RESOURCE, OPEN_WRITE,
        ("Could not open \"%s\" for writing: %s", location,
            g_strerror (err)), (NULL));
    return FALSE;
  }
  key = g_strdup_printf ("%" G_GUINT64_FORMAT ":%" G_GUINT64_FORMAT,
      (guint64) st.st_dev, (guint64) st.st_ino);
  name = gst_object_get_name (GST_OBJECT (self));
  g_mutex_lock (&open_files_lock);
  if (open_files == NULL)
    open_files = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
        g_free);
  if (S_ISREG (st.st_mode))
    owner = g_strdup (g_hash_table_lookup (open_files, key));
  if (owner == NULL && S_ISREG (st.st_mode))
    g_hash_table_insert (open_files, g_strdup (key), g_strdup (name));
  g_mutex_unlock (&open_files_lock);
  g_free (name);

  if (owner != NULL) {
    close (fd);
    GST_ELEMENT_ERROR (self, RESOURCE, OPEN_WRITE,
        ("Could not write to \"%s\": the visionjson element \"%s\" of this "
            "process is writing that file (two writers would mix their lines)",
            location, owner), ("file %s", key));
    g_free (owner);
    g_free (key);
    return FALSE;
  }
  if (S_ISREG (st.st_mode) && ftruncate (fd, 0) != 0) {
    int err = errno;

    close (fd);
    release_location_key (key);
    GST_ELEMENT_ERROR (self, RESOURCE, OPEN_WRITE,
        ("Could not truncate \"%s\": %s", location, g_strerror (err)), (NULL));
    g_free (key);
    return FALSE;
  }
  self->file = fdopen (fd, "w");
  if (self->file == NULL) {
    int err = errno;

    close (fd);
    release_location_key (key);
    GST_ELEMENT_ERROR (self, RESOURCE, OPEN_WRITE,
        ("Could not open \"%s\" for writing: %s", location, g_strerror (err)),
        (NULL));
    g_free (key);
    return FALSE;
  }
  /* only regular files are registered (a FIFO or a device may be shared on
   * purpose) */
  if (S_ISREG (st.st_mode))
    self->file_key = key;
  else
    g_free (key);
  return TRUE;
}

static gboolean
gst_vision_json_start (GstBaseTransform * trans)
{
  GstVisionJson *self = GST_VISION_JSON (trans);
  gchar *location;

  GST_OBJECT_LOCK (self);
  location = g_strdup (self->location);
  GST_OBJECT_UNLOCK (self);

  if (location == NULL || *location == '\0') {
    self->file = stdout;
  } else if (!open_location (self, location)) {
    g_free (location);
    return FALSE;
  }
  g_free (location);
  self->frame_count = 0;
  return TRUE;
}

static gboolean
gst_vision_json_stop (GstBaseTransform * trans)
{
  GstVisionJson *self = GST_VISION_JSON (trans);
  gboolean ok = TRUE;

  if (self->file_key != NULL) {
    release_location_key (self->file_key);
    g_clear_pointer (&self->file_key, g_free);
  }

  if (self->file != NULL && self->file != stdout && fclose (self->file) != 0) {
    GST_ELEMENT_ERROR (self, RESOURCE, CLOSE, ("Could not close the JSON file: "
            "%s", g_strerror (errno)), (NULL));
    ok = FALSE;
  }
  self->file = NULL;
  self->have_info = FALSE;
  return ok;
}

static void
gst_vision_json_set_property (GObject * object, guint prop_id,
    const GValue * value, GParamSpec * pspec)
{
  GstVisionJson *self = GST_VISION_JSON (object);

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_LOCATION:
      g_free (self->location);
      self->location = g_value_dup_string (value);
      break;
    case PROP_POST_MESSAGES:
      self->post_messages = g_value_get_boolean (value);
      break;
    case PROP_FORMAT:
      self->format = g_value_get_enum (value);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_vision_json_get_property (GObject * object, guint prop_id,
    GValue * value, GParamSpec * pspec)
{
  GstVisionJson *self = GST_VISION_JSON (object);

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_LOCATION:
      g_value_set_string (value, self->location);
      break;
    case PROP_POST_MESSAGES:
      g_value_set_boolean (value, self->post_messages);
      break;
    case PROP_FORMAT:
      g_value_set_enum (value, self->format);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_vision_json_finalize (GObject * object)
{
  GstVisionJson *self = GST_VISION_JSON (object);

  g_free (self->location);
  G_OBJECT_CLASS (parent_class)->finalize (object);
}

static void
gst_vision_json_class_init (GstVisionJsonClass * klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS (klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS (klass);
  GstBaseTransformClass *trans_class = GST_BASE_TRANSFORM_CLASS (klass);

  gobject_class->set_property = gst_vision_json_set_property;
  gobject_class->get_property = gst_vision_json_get_property;
  gobject_class->finalize = gst_vision_json_finalize;

  g_object_class_install_property (gobject_class, PROP_LOCATION,
      g_param_spec_string ("location", "Location",
          "File to write the JSON Lines to (truncated when the element "
          "starts); unset: standard output", DEFAULT_LOCATION,
          G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS
          | GST_PARAM_MUTABLE_READY));
  g_object_class_install_property (gobject_class, PROP_POST_MESSAGES,
      g_param_spec_boolean ("post-messages", "Post messages",
          "Also post each frame's JSON as an element message named "
          "\"visionjson\" (fields frame, pts, json) on the bus",
          DEFAULT_POST_MESSAGES, G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS
          | GST_PARAM_MUTABLE_PLAYING));
  g_object_class_install_property (gobject_class, PROP_FORMAT,
      g_param_spec_enum ("format", "Format",
          "The lines' schema: visiondetect's own, or DL Streamer's "
          "gvametaconvert JSON (read unchanged by its consumers)",
          GST_TYPE_VISION_JSON_FORMAT, DEFAULT_FORMAT,
          G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS
          | GST_PARAM_MUTABLE_PLAYING));
  gst_type_mark_as_plugin_api (GST_TYPE_VISION_JSON_FORMAT, 0);

  gst_element_class_add_static_pad_template (element_class, &sink_template);
  gst_element_class_add_static_pad_template (element_class, &src_template);
  gst_element_class_set_static_metadata (element_class,
      "Vision detections to JSON", "Filter/Analyzer/Video",
      "Writes each frame's detections as one line of JSON (JSON Lines) to a "
      "file or the bus", "visiondetect developers");

  trans_class->start = GST_DEBUG_FUNCPTR (gst_vision_json_start);
  trans_class->stop = GST_DEBUG_FUNCPTR (gst_vision_json_stop);
  trans_class->set_caps = GST_DEBUG_FUNCPTR (gst_vision_json_set_caps);
  trans_class->transform_ip = GST_DEBUG_FUNCPTR (gst_vision_json_transform_ip);
  trans_class->sink_event = GST_DEBUG_FUNCPTR (gst_vision_json_sink_event);
  trans_class->transform_ip_on_passthrough = TRUE;

  GST_DEBUG_CATEGORY_INIT (gst_vision_json_debug, "visionjson", 0,
      "visiondetect JSON Lines writer");
}

static void
gst_vision_json_init (GstVisionJson * self)
{
  self->location = g_strdup (DEFAULT_LOCATION);
  self->post_messages = DEFAULT_POST_MESSAGES;
  self->format = DEFAULT_FORMAT;
  gst_base_transform_set_passthrough (GST_BASE_TRANSFORM (self), TRUE);
}
