/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Image views: validation and plane layout, shared by the backends and the
 * asynchronous pair (which copies the frames it is given). */
#include "vd_context_private.h"

#include <string.h>

static int chroma_size(int n)
{
    return n / 2 + (n & 1);
}

static const char *plane_name(vd_pixel_format format, int plane)
{
    static const char *const yuv[3] = {"Y", "U", "V"};
    if (format == VD_FORMAT_NV12)
        return plane == 0 ? "Y" : "UV";
    if (format == VD_FORMAT_I420)
        return yuv[plane];
    return "packed pixels";
}

int vd_image_plane_layout(const vd_image *image, int row_bytes[3], int plane_rows[3])
{
    int w = image->width, h = image->height;
    int cw = chroma_size(w), ch = chroma_size(h);
    memset(row_bytes, 0, 3 * sizeof(int));
    memset(plane_rows, 0, 3 * sizeof(int));
    /* sizes vd_image_validate() refuses have no layout (and 4 * w must fit an int;
     * found by the image fuzzer: the layout of an unvalidated image overflowed) */
    if (w <= 0 || h <= 0 || w > G_MAXINT / 8 || h > G_MAXINT / 8)
        return 0;
    switch (image->format) {
    case VD_FORMAT_RGB:
    case VD_FORMAT_BGR:
        row_bytes[0] = 3 * w;
        plane_rows[0] = h;
        return 1;
    case VD_FORMAT_RGBA:
    case VD_FORMAT_BGRA:
    case VD_FORMAT_RGBX:
    case VD_FORMAT_BGRX:
        row_bytes[0] = 4 * w;
        plane_rows[0] = h;
        return 1;
    case VD_FORMAT_NV12:
        row_bytes[0] = w;
        plane_rows[0] = h;
        row_bytes[1] = 2 * cw;
        plane_rows[1] = ch;
        return 2;
    case VD_FORMAT_I420:
        row_bytes[0] = w;
        plane_rows[0] = h;
        row_bytes[1] = row_bytes[2] = cw;
        plane_rows[1] = plane_rows[2] = ch;
        return 3;
    default:
        return 0;
    }
}

gboolean vd_image_validate(const vd_image *image, GError **error)
{
    if (image == NULL) {
        g_set_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT, "image is NULL");
        return FALSE;
    }
    /* a row of 4-byte pixels must fit an int */
    if (image->width <= 0 || image->height <= 0 || image->width > G_MAXINT / 8 ||
        image->height > G_MAXINT / 8) {
        g_set_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT,
                    "image size %dx%d is not positive or too large", image->width, image->height);
        return FALSE;
    }
    int row_bytes[3], rows[3];
    int n_planes = vd_image_plane_layout(image, row_bytes, rows);
    if (n_planes == 0) {
        g_set_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT, "unknown pixel format %d",
                    (int)image->format);
        return FALSE;
    }
    for (int p = 0; p < n_planes; p++) {
        if (image->planes[p] == NULL) {
            g_set_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT, "image plane %d (%s) is NULL",
                        p, plane_name(image->format, p));
            return FALSE;
        }
        if (image->strides[p] < row_bytes[p]) {
            g_set_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT,
                        "image plane %d (%s) has stride %d, less than the %d bytes of a row of "
                        "width %d",
                        p, plane_name(image->format, p), image->strides[p], row_bytes[p],
                        image->width);
            return FALSE;
        }
    }
    if (n_planes > 1 && image->matrix != VD_COLOR_MATRIX_BT601 &&
        image->matrix != VD_COLOR_MATRIX_BT709 && image->matrix != VD_COLOR_MATRIX_BT2020) {
        g_set_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT, "unknown colour matrix %d",
                    (int)image->matrix);
        return FALSE;
    }
    return TRUE;
}
