/* SPDX-License-Identifier: LGPL-2.1-or-later */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "framecopy.h"

#include <string.h>

/* The visible bytes of a row of @plane and the number of rows, from the
 * plane's first component (as gst_video_frame_copy_plane counts them): the
 * stride's padding is not part of the picture. */
static void
plane_extent (const GstVideoFrame * frame, guint plane, gsize * row_bytes,
    guint * rows)
{
  gint comp[GST_VIDEO_MAX_COMPONENTS];

  gst_video_format_info_component (frame->info.finfo, plane, comp);
  *row_bytes = (gsize) GST_VIDEO_FRAME_COMP_WIDTH (frame, comp[0]) *
      GST_VIDEO_FRAME_COMP_PSTRIDE (frame, comp[0]);
  *rows = GST_VIDEO_FRAME_COMP_HEIGHT (frame, comp[0]);
}

static gsize
visible_size (const GstVideoFrame * frame)
{
  gsize size = 0, row_bytes;
  guint plane, rows;

  for (plane = 0; plane < GST_VIDEO_FRAME_N_PLANES (frame); plane++) {
    plane_extent (frame, plane, &row_bytes, &rows);
    size += row_bytes * rows;
  }
  return size;
}

gboolean
gst_vision_frame_copy_store (GstVisionFrameCopy * copy,
    const GstVideoFrame * frame)
{
  gsize size = visible_size (frame), row_bytes, offset = 0;
  guint plane, rows, y;

  gst_vision_frame_copy_reset (copy);
  if (size > copy->allocated) {
    g_free (copy->data);
    copy->data = g_try_malloc (size);
    copy->allocated = copy->data != NULL ? size : 0;
    if (copy->data == NULL)
      return FALSE;
  }
  for (plane = 0; plane < GST_VIDEO_FRAME_N_PLANES (frame); plane++) {
    const guint8 *src = GST_VIDEO_FRAME_PLANE_DATA (frame, plane);
    gint stride = GST_VIDEO_FRAME_PLANE_STRIDE (frame, plane);

    plane_extent (frame, plane, &row_bytes, &rows);
    for (y = 0; y < rows; y++, offset += row_bytes)
      memcpy (copy->data + offset, src + (gssize) y * stride, row_bytes);
  }
  copy->format = GST_VIDEO_FRAME_FORMAT (frame);
  copy->width = GST_VIDEO_FRAME_WIDTH (frame);
  copy->height = GST_VIDEO_FRAME_HEIGHT (frame);
  copy->size = size;
  return TRUE;
}

gboolean
gst_vision_frame_copy_equal (const GstVisionFrameCopy * copy,
    const GstVideoFrame * frame)
{
  gsize row_bytes, offset = 0;
  guint plane, rows, y;

  if (copy->format == GST_VIDEO_FORMAT_UNKNOWN
      || copy->format != GST_VIDEO_FRAME_FORMAT (frame)
      || copy->width != GST_VIDEO_FRAME_WIDTH (frame)
      || copy->height != GST_VIDEO_FRAME_HEIGHT (frame)
      || copy->size != visible_size (frame))
    return FALSE;
  for (plane = 0; plane < GST_VIDEO_FRAME_N_PLANES (frame); plane++) {
    const guint8 *src = GST_VIDEO_FRAME_PLANE_DATA (frame, plane);
    gint stride = GST_VIDEO_FRAME_PLANE_STRIDE (frame, plane);

    plane_extent (frame, plane, &row_bytes, &rows);
    /* one block when the rows follow each other without padding */
    if ((gsize) stride == row_bytes) {
      if (memcmp (copy->data + offset, src, row_bytes * rows) != 0)
        return FALSE;
      offset += row_bytes * rows;
      continue;
    }
    for (y = 0; y < rows; y++, offset += row_bytes)
      if (memcmp (copy->data + offset, src + (gssize) y * stride,
              row_bytes) != 0)
        return FALSE;
  }
  return TRUE;
}

void
gst_vision_frame_copy_reset (GstVisionFrameCopy * copy)
{
  copy->format = GST_VIDEO_FORMAT_UNKNOWN;
  copy->width = copy->height = 0;
  copy->size = 0;
}

void
gst_vision_frame_copy_clear (GstVisionFrameCopy * copy)
{
  g_clear_pointer (&copy->data, g_free);
  copy->allocated = 0;
  gst_vision_frame_copy_reset (copy);
}
