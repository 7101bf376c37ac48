/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Private to the plugin: a copy of one video frame's visible pixels, to tell
 * whether a later frame (a GAP buffer: videorate's duplicates) shows the very
 * same picture. The comparison reads the two frames once (memcmp, stopping at
 * the first difference): far less than an inference. */
#ifndef __GST_VISION_FRAME_COPY_H__
#define __GST_VISION_FRAME_COPY_H__

#include <gst/video/video.h>

G_BEGIN_DECLS

typedef struct
{
  GstVideoFormat format;        /* GST_VIDEO_FORMAT_UNKNOWN: empty */
  gint width, height;
  guint8 *data;                 /* each plane's visible rows, packed */
  gsize size, allocated;
} GstVisionFrameCopy;

/* Replaces @copy's pixels with @frame's (mapped for reading); FALSE, and
 * @copy empty, when the memory could not be had. */
gboolean gst_vision_frame_copy_store (GstVisionFrameCopy * copy,
    const GstVideoFrame * frame);

/* Whether @frame has @copy's format, size and every visible byte. */
gboolean gst_vision_frame_copy_equal (const GstVisionFrameCopy * copy,
    const GstVideoFrame * frame);

/* Empties @copy and keeps its memory for the next store. */
void gst_vision_frame_copy_reset (GstVisionFrameCopy * copy);

/* Frees what @copy holds; @copy is empty afterwards. */
void gst_vision_frame_copy_clear (GstVisionFrameCopy * copy);

G_END_DECLS

#endif /* __GST_VISION_FRAME_COPY_H__ */
