/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libFuzzer harness of the image views: the pixel format, size, strides, colour
 * matrix and range come from the input, the planes are allocated exactly as large
 * as the strides say (stride x (rows - 1) + the bytes of a row) and filled from
 * the rest of it. vd_image_validate() must refuse what is inconsistent with a
 * VD_ERROR; what it accepts, the CPU pre-processing (colour conversion, resize,
 * normalisation, padding) must read without going outside the planes (ASan) and
 * turn into finite values. */
#include "cpu/vd_cpu_ops.h"
#include "vd_context_private.h"
#include "vd_math.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define HEADER 16
#define MAX_PLANE (4u << 20)

static int32_t read_i32(const uint8_t *p)
{
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                     (uint32_t)p[3] << 24);
}

static int16_t read_i16(const uint8_t *p)
{
    return (int16_t)((uint16_t)p[0] | (uint16_t)p[1] << 8);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < HEADER)
        return 0;
    vd_image image = {0};
    image.format = (vd_pixel_format)(data[0] % 10); /* 8 and 9 are not formats */
    /* sizes: usually small, sometimes any 32-bit value (the checks of large ones) */
    if (data[1] & 0x80) {
        image.width = read_i32(data + 2);
        image.height = read_i32(data + 6);
    } else {
        image.width = 1 + (int)((data[2] | data[3] << 8) % 700);
        image.height = 1 + (int)((data[4] | data[5] << 8) % 700);
    }
    image.matrix = (vd_color_matrix)(data[10] % 4); /* 3 is not a matrix */
    image.full_range = data[11] & 1;

    int row_bytes[3], rows[3];
    int n_planes = vd_image_plane_layout(&image, row_bytes, rows);
    uint8_t *planes[3] = {NULL, NULL, NULL};
    size_t at = HEADER;
    for (int p = 0; p < 3; p++) {
        /* a stride a little off the row's bytes, either way */
        int delta = read_i16(data + 12 + (p == 2 ? 0 : 2 * p)) % 64;
        image.strides[p] = p < n_planes ? row_bytes[p] + delta : delta;
        if (p >= n_planes || image.strides[p] < row_bytes[p] || rows[p] <= 0 || row_bytes[p] <= 0)
            continue;
        size_t bytes = (size_t)image.strides[p] * (size_t)(rows[p] - 1) + (size_t)row_bytes[p];
        if (bytes > MAX_PLANE)
            goto out; /* too large to be worth fuzzing: nothing to learn */
        planes[p] = malloc(bytes);
        for (size_t i = 0; i < bytes; i++)
            planes[p][i] = at < size ? data[at++] : (uint8_t)(i * 131u);
        image.planes[p] = planes[p];
    }
    if (data[1] & 0x40) /* a missing plane */
        image.planes[data[1] % 3] = NULL;

    GError *error = NULL;
    if (!vd_image_validate(&image, &error)) {
        if (error == NULL || error->domain != VD_ERROR)
            abort();
        g_error_free(error);
        goto out;
    }
    int rh, rw, ph, pw;
    vd_math_transform_size(image.height, image.width, 48, 80, 32, 0, &rh, &rw, &ph, &pw);
    const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
    float *dst = malloc(sizeof(float) * 3 * (size_t)ph * (size_t)pw);
    if (!vd_cpu_preprocess(&image, mean, std, VD_RESIZE_ARITHMETIC_TORCH1, rh, rw, ph, pw, dst, &error)) {
        if (error == NULL || error->domain != VD_ERROR)
            abort();
        g_error_free(error);
    } else {
        for (size_t i = 0; i < 3 * (size_t)ph * (size_t)pw; i++)
            if (!isfinite(dst[i]))
                abort();
    }
    free(dst);
out:
    for (int p = 0; p < 3; p++)
        free(planes[p]);
    return 0;
}
