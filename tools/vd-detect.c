/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* vd-detect: run the visiondetect engine on still images.
 *
 *   vd-detect [--model FILE] [--device cpu|cuda|auto] [--precision fp32|fp16|bf16|int8]
 *             [--threads N] [--threshold S] [--json] [--dump DIR] [--repeat N]
 *             [--batch N] [--stages] [--info] IMAGE...
 *   vd-detect --info [--model FILE] [--device ...] [--precision ...] [--threads N]
 *   vd-detect --calibrate OUT [--model FILE] [--threads N] IMAGE...
 *
 * --calibrate runs the model in fp32 on the CPU over every IMAGE and writes the
 * model file again as OUT with the activation ranges precision int8 needs.
 *
 * IMAGE is a binary PPM (P6, maxval 255) or a NumPy .npy uint8 array of shape
 * (H, W, 3), RGB. */
#include "vd_config.h"

#include <errno.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <stdio.h>
#include <string.h>
#include <visiondetect/vd.h>

typedef struct {
    int width, height;
    guint8 *pixels; /* RGB, packed */
} rgb_image;

/* --- image files ----------------------------------------------------------- */

static const char *ppm_token(const char *p, const char *end, char *out, size_t size)
{
    size_t n = 0;
    for (;;) {
        while (p < end && g_ascii_isspace(*p))
            p++;
        if (p < end && *p == '#') {
            while (p < end && *p != '\n')
                p++;
            continue;
        }
        break;
    }
    while (p < end && !g_ascii_isspace(*p) && n + 1 < size)
        out[n++] = *p++;
    out[n] = '\0';
    return n > 0 ? p : NULL;
}

static gboolean parse_dim(const char *s, int max, int *out)
{
    guint64 v;
    if (!g_ascii_string_to_unsigned(s, 10, 1, (guint64)max, &v, NULL))
        return FALSE;
    *out = (int)v;
    return TRUE;
}

static gboolean load_ppm(const char *path, const char *data, gsize len, rgb_image *img,
                         GError **error)
{
    const char *p = data + 2, *end = data + len;
    char tok[32];
    int maxval;
    if ((p = ppm_token(p, end, tok, sizeof(tok))) == NULL || !parse_dim(tok, 1 << 15, &img->width) ||
        (p = ppm_token(p, end, tok, sizeof(tok))) == NULL || !parse_dim(tok, 1 << 15, &img->height) ||
        (p = ppm_token(p, end, tok, sizeof(tok))) == NULL || !parse_dim(tok, 65535, &maxval)) {
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL, "%s: malformed PPM header", path);
        return FALSE;
    }
    if (maxval != 255) {
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                    "%s: PPM maxval %d is not supported (only 255)", path, maxval);
        return FALSE;
    }
    p++; /* the single whitespace after maxval */
    gsize need = (gsize)img->width * img->height * 3;
    if (p > end || (gsize)(end - p) < need) {
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                    "%s: PPM data truncated (%zu of %zu bytes)", path,
                    p > end ? (gsize)0 : (gsize)(end - p), need);
        return FALSE;
    }
    img->pixels = g_memdup2(p, need);
    return TRUE;
}

/* NumPy .npy, version 1/2/3, dtype uint8, C order, shape (H, W, 3). */
static gboolean load_npy(const char *path, const char *data, gsize len, rgb_image *img,
                         GError **error)
{
    if (len < 10 || (data[6] != 1 && data[6] != 2 && data[6] != 3)) {
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL, "%s: not a .npy file", path);
        return FALSE;
    }
    gsize header_len, offset;
    g_autofree char *header = NULL;
    if (data[6] == 1) {
        header_len = (guint8)data[8] | ((guint8)data[9] << 8);
        offset = 10;
    } else {
        if (len < 12)
            goto bad;
        header_len = (guint8)data[8] | ((guint8)data[9] << 8) | ((gsize)(guint8)data[10] << 16) |
                     ((gsize)(guint8)data[11] << 24);
        offset = 12;
    }
    if (header_len > len - offset)
        goto bad;
    header = g_strndup(data + offset, header_len);
    if (strstr(header, "'descr': '|u1'") == NULL && strstr(header, "'descr': '<u1'") == NULL) {
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                    "%s: .npy dtype must be uint8 (header: %s)", path, g_strstrip(header));
        return FALSE;
    }
    if (strstr(header, "'fortran_order': False") == NULL) {
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL, "%s: .npy must be in C order", path);
        return FALSE;
    }
    const char *shape = strstr(header, "'shape': (");
    int h, w, c;
    if (shape == NULL || sscanf(shape, "'shape': (%d, %d, %d)", &h, &w, &c) != 3 || h <= 0 ||
        w <= 0 || h > (1 << 15) || w > (1 << 15) || c != 3) {
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                    "%s: .npy shape must be (height, width, 3)", path);
        return FALSE;
    }
    gsize need = (gsize)h * w * 3;
    if (len - offset - header_len < need) {
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL, "%s: .npy data truncated", path);
        return FALSE;
    }
    img->width = w;
    img->height = h;
    img->pixels = g_memdup2(data + offset + header_len, need);
    return TRUE;
bad:
    g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL, "%s: malformed .npy header", path);
    return FALSE;
}

static gboolean load_image(const char *path, rgb_image *img, GError **error)
{
    g_autoptr(GMappedFile) file = g_mapped_file_new(path, FALSE, error);
    if (file == NULL)
        return FALSE;
    const char *data = g_mapped_file_get_contents(file);
    gsize len = g_mapped_file_get_length(file);
    if (len >= 2 && data[0] == 'P' && data[1] == '6')
        return load_ppm(path, data, len, img, error);
    if (len >= 6 && memcmp(data, "\x93NUMPY", 6) == 0)
        return load_npy(path, data, len, img, error);
    g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                "%s: unknown image format (expected a binary PPM or a uint8 .npy)", path);
    return FALSE;
}

/* --- tensor dumps ---------------------------------------------------------- */

typedef struct {
    char *dir;
    GError *error; /* the first write failure */
} dump_state;

static void dump_tensor(const char *name, const float *data, const int64_t *shape, int ndim,
                        void *user_data)
{
    dump_state *ds = user_data;
    if (ds->error != NULL)
        return;
    GString *header = g_string_new("{'descr': '<f4', 'fortran_order': False, 'shape': (");
    size_t count = 1;
    for (int i = 0; i < ndim; i++) {
        g_string_append_printf(header, "%" G_GINT64_FORMAT "%s", shape[i],
                               ndim == 1 || i + 1 < ndim ? ", " : "");
        count *= (size_t)shape[i];
    }
    g_string_append(header, "), }");
    while ((10 + header->len + 1) % 64 != 0)
        g_string_append_c(header, ' ');
    g_string_append_c(header, '\n');

    g_autofree char *file = g_strdup_printf("%s/%s.npy", ds->dir, name);
    FILE *f = fopen(file, "wb");
    if (f == NULL) {
        g_set_error(&ds->error, G_FILE_ERROR, g_file_error_from_errno(errno), "%s: %s", file,
                    g_strerror(errno));
        g_string_free(header, TRUE);
        return;
    }
    guint8 pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (guint8)(header->len & 0xff),
                      (guint8)(header->len >> 8)};
    gboolean ok = fwrite(pre, 1, 10, f) == 10 &&
                  fwrite(header->str, 1, header->len, f) == header->len &&
                  fwrite(data, sizeof(float), count, f) == count;
    if (fclose(f) != 0)
        ok = FALSE;
    if (!ok)
        g_set_error(&ds->error, G_FILE_ERROR, G_FILE_ERROR_IO, "%s: write failed", file);
    g_string_free(header, TRUE);
}

/* --- output ---------------------------------------------------------------- */

static void print_json(const vd_model *model, const vd_result *r)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "width");
    json_builder_add_int_value(b, r->width);
    json_builder_set_member_name(b, "height");
    json_builder_add_int_value(b, r->height);
    json_builder_set_member_name(b, "detections");
    json_builder_begin_array(b);
    for (int i = 0; i < r->n_detections; i++) {
        const vd_detection *d = &r->detections[i];
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "box");
        json_builder_begin_array(b);
        json_builder_add_double_value(b, d->x1);
        json_builder_add_double_value(b, d->y1);
        json_builder_add_double_value(b, d->x2);
        json_builder_add_double_value(b, d->y2);
        json_builder_end_array(b);
        json_builder_set_member_name(b, "score");
        json_builder_add_double_value(b, d->score);
        json_builder_set_member_name(b, "label");
        json_builder_add_int_value(b, d->label);
        json_builder_set_member_name(b, "label_name");
        const char *name = vd_model_class_name(model, d->label);
        json_builder_add_string_value(b, name != NULL ? name : "");
        if (d->mask != NULL) {
            /* the bytes of vd_detection's mask rectangle, row-major, base64 */
            g_autofree char *data =
                g_base64_encode(d->mask, (gsize)d->mask_width * (gsize)d->mask_height);
            json_builder_set_member_name(b, "mask");
            json_builder_begin_object(b);
            json_builder_set_member_name(b, "x");
            json_builder_add_int_value(b, d->mask_x);
            json_builder_set_member_name(b, "y");
            json_builder_add_int_value(b, d->mask_y);
            json_builder_set_member_name(b, "width");
            json_builder_add_int_value(b, d->mask_width);
            json_builder_set_member_name(b, "height");
            json_builder_add_int_value(b, d->mask_height);
            json_builder_set_member_name(b, "data");
            json_builder_add_string_value(b, data);
            json_builder_end_object(b);
        }
        if (d->keypoints != NULL) {
            /* [[x, y, score], ...] in frame pixels, the model's keypoint order */
            json_builder_set_member_name(b, "keypoints");
            json_builder_begin_array(b);
            for (int k = 0; k < d->n_keypoints; k++) {
                json_builder_begin_array(b);
                json_builder_add_double_value(b, d->keypoints[k].x);
                json_builder_add_double_value(b, d->keypoints[k].y);
                json_builder_add_double_value(b, d->keypoints[k].score);
                json_builder_end_array(b);
            }
            json_builder_end_array(b);
        }
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    json_generator_set_root(gen, root);
    g_autofree char *text = json_generator_to_data(gen, NULL);
    printf("%s\n", text);
}

static void print_text(const char *path, const vd_model *model, const vd_result *r)
{
    printf("%s: %dx%d, %d detections\n", path, r->width, r->height, r->n_detections);
    for (int i = 0; i < r->n_detections; i++) {
        const vd_detection *d = &r->detections[i];
        const char *name = vd_model_class_name(model, d->label);
        printf("  %-16s %.3f  [%.1f, %.1f, %.1f, %.1f]\n", name != NULL ? name : "?", d->score,
               d->x1, d->y1, d->x2, d->y2);
        for (int k = 0; k < d->n_keypoints; k++) {
            const char *kp = vd_model_keypoint_name(model, k);
            char number[16];
            if (kp == NULL) {
                g_snprintf(number, sizeof number, "%d", k);
                kp = number;
            }
            printf("    %-18s (%.1f, %.1f)  %.3f\n", kp, d->keypoints[k].x, d->keypoints[k].y,
                   d->keypoints[k].score);
        }
    }
}

/* --- main ------------------------------------------------------------------ */

static gboolean parse_device(const char *s, vd_context_params *p)
{
    if (s == NULL || g_str_equal(s, "auto"))
        p->device = VD_DEVICE_AUTO;
    else if (g_str_equal(s, "cpu"))
        p->device = VD_DEVICE_CPU;
    else if (g_str_equal(s, "cuda"))
        p->device = VD_DEVICE_CUDA;
    else if (g_str_has_prefix(s, "cuda:")) {
        guint64 idx;
        if (!g_ascii_string_to_unsigned(s + 5, 10, 0, 64, &idx, NULL))
            return FALSE;
        p->device = VD_DEVICE_CUDA;
        p->device_index = (int)idx;
    } else
        return FALSE;
    return TRUE;
}

static gboolean parse_precision(const char *s, vd_context_params *p)
{
    if (s == NULL || g_str_equal(s, "auto"))
        p->precision = VD_PRECISION_AUTO;
    else if (g_str_equal(s, "fp32"))
        p->precision = VD_PRECISION_FP32;
    else if (g_str_equal(s, "fp16"))
        p->precision = VD_PRECISION_FP16;
    else if (g_str_equal(s, "bf16"))
        p->precision = VD_PRECISION_BF16;
    else if (g_str_equal(s, "int8"))
        p->precision = VD_PRECISION_INT8;
    else
        return FALSE;
    return TRUE;
}

int main(int argc, char **argv)
{
    char *model_path = NULL, *device = NULL, *precision = NULL, *dump_dir = NULL;
    char *calibrate = NULL, *calibration = NULL;
    double threshold = -1.0;
    int threads = 0, repeat = 0; /* 0: run once, print no time */
    int batch = 1;
    gboolean json = FALSE, stages = FALSE, info = FALSE;
    char **images = NULL;
    GOptionEntry entries[] = {
        {"model", 'm', 0, G_OPTION_ARG_FILENAME, &model_path, "Model file (.safetensors; default: the bundled " VD_DEFAULT_MODEL_NAME ")", "FILE"},
        {"device", 'd', 0, G_OPTION_ARG_STRING, &device, "cpu, cuda, cuda:N or auto (default)",
         "DEV"},
        {"precision", 'p', 0, G_OPTION_ARG_STRING, &precision, "fp32, fp16, bf16, int8 or auto",
         "P"},
        {"calibrate", 0, 0, G_OPTION_ARG_FILENAME, &calibrate,
         "Calibrate int8 on the images (fp32, CPU) and write the model with it to OUT", "OUT"},
        {"threads", 't', 0, G_OPTION_ARG_INT, &threads, "CPU threads (default: all cores)", "N"},
        {"threshold", 's', 0, G_OPTION_ARG_DOUBLE, &threshold,
         "Score threshold (default: the model's)", "S"},
        {"json", 'j', 0, G_OPTION_ARG_NONE, &json, "One JSON object per image on stdout", NULL},
        {"dump", 0, 0, G_OPTION_ARG_FILENAME, &dump_dir,
         "Write intermediate tensors of image i as DIR/i/NAME.npy", "DIR"},
        {"repeat", 'r', 0, G_OPTION_ARG_INT, &repeat,
         "Run each image N times; per-run times on stderr", "N"},
        {"batch", 'b', 0, G_OPTION_ARG_INT, &batch,
         "Run each image as one batch of N copies of it (its result printed once); with "
         "--repeat, the time of each batch",
         "N"},
        {"stages", 0, 0, G_OPTION_ARG_NONE, &stages,
         "Per-stage times, GFLOP and GFLOP/s of each run on stderr", NULL},
        {"info", 'i', 0, G_OPTION_ARG_NONE, &info,
         "Say what the engine runs (backend, ISA, precision, threads, layout); with images, on "
         "stderr, and after them every primitive's implementation",
         NULL},
        {G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &images, NULL, "IMAGE..."},
        {NULL},
    };
    g_autoptr(GOptionContext) opts = g_option_context_new("- detect objects in images");
    g_option_context_add_main_entries(opts, entries, NULL);
    g_option_context_set_description(
        opts, "IMAGE is a binary PPM (P6) or a NumPy .npy uint8 array of shape (H, W, 3), RGB.");
    GError *error = NULL;
    int status = 1;
    vd_model *model = NULL;
    vd_context *ctx = NULL;
    dump_state dump = {0};

    if (!g_option_context_parse(opts, &argc, &argv, &error)) {
        fprintf(stderr, "vd-detect: %s\n", error->message);
        goto out;
    }
    vd_context_params params = vd_context_default_params();
    if (model_path == NULL) {
        char *searched = NULL;
        model_path = vd_default_model_path(&searched);
        if (model_path == NULL) {
            fprintf(stderr,
                    "vd-detect: no --model given, and the default model %s was looked "
                    "for in %s (set VISIONDETECT_MODEL or pass --model FILE)\n",
                    VD_DEFAULT_MODEL_NAME, searched);
            g_free(searched);
            goto out;
        }
    }
    if ((images == NULL || images[0] == NULL) && !info) {
        fprintf(stderr, "vd-detect: no IMAGE given\n");
        goto out;
    }
    if (!parse_device(device, &params)) {
        fprintf(stderr, "vd-detect: unknown device '%s' (cpu, cuda, cuda:N or auto)\n", device);
        goto out;
    }
    if (!parse_precision(precision, &params)) {
        fprintf(stderr, "vd-detect: unknown precision '%s' (fp32, fp16, bf16, int8 or auto)\n",
                precision);
        goto out;
    }
    if (calibrate != NULL) {
        if (device == NULL)
            params.device = VD_DEVICE_CPU;
        params.calibrate = TRUE;
    }
    if (threads < 0 || repeat < 0 || batch < 1 || batch > 1024 ||
        (threshold != -1.0 && (threshold < 0.0 || threshold > 1.0))) {
        fprintf(stderr, "vd-detect: --threads must be >= 0, --repeat >= 1, --batch in [1, 1024], "
                        "--threshold in [0, 1]\n");
        goto out;
    }
    params.n_threads = threads;
    params.score_threshold = (float)threshold;

    gint64 load_t0 = g_get_monotonic_time();
    model = vd_model_load(model_path, &error);
    if (model == NULL) {
        fprintf(stderr, "vd-detect: %s\n", error->message);
        goto out;
    }
    ctx = vd_context_new(model, &params, &error);
    if (ctx == NULL) {
        fprintf(stderr, "vd-detect: %s\n", error->message);
        goto out;
    }
    if (repeat > 0)
        fprintf(stderr, "load_ms: %.3f\n", (double)(g_get_monotonic_time() - load_t0) / 1000.0);
    if (params.device == VD_DEVICE_AUTO && vd_context_device(ctx) == VD_DEVICE_CPU)
        fprintf(stderr, "vd-detect: %s, running on the CPU\n",
                vd_context_fallback_reason(ctx) != NULL ? vd_context_fallback_reason(ctx)
                                                        : "no CUDA device");
    if (info) {
        gboolean alone = images == NULL || images[0] == NULL;
        fprintf(alone ? stdout : stderr, "engine: %s\n", vd_context_describe(ctx));
        fprintf(alone ? stdout : stderr, "model: %s\n", vd_model_description(model));
        if (vd_model_num_keypoints(model) > 0) {
            const int *pairs = NULL;
            int n_pairs = vd_model_keypoint_skeleton(model, &pairs);
            GString *line = g_string_new(NULL);
            g_string_printf(line, "keypoints: %d", vd_model_num_keypoints(model));
            for (int k = 0; k < vd_model_num_keypoints(model); k++) {
                const char *kp = vd_model_keypoint_name(model, k);
                if (kp != NULL)
                    g_string_append_printf(line, "%s%s", k == 0 ? " (" : ", ", kp);
            }
            if (vd_model_keypoint_name(model, 0) != NULL)
                g_string_append(line, ")");
            if (n_pairs > 0) {
                g_string_append_printf(line, "; skeleton:");
                for (int k = 0; k < n_pairs; k++)
                    g_string_append_printf(line, " %d-%d", pairs[2 * k], pairs[2 * k + 1]);
            }
            fprintf(alone ? stdout : stderr, "%s\n", line->str);
            g_string_free(line, TRUE);
        }
        if (alone) {
            status = 0;
            goto out;
        }
    }

    for (int i = 0; images[i] != NULL; i++) {
        rgb_image img = {0};
        if (!load_image(images[i], &img, &error)) {
            fprintf(stderr, "vd-detect: %s\n", error->message);
            goto out;
        }
        if (dump_dir != NULL) {
            g_free(dump.dir);
            dump.dir = g_strdup_printf("%s/%d", dump_dir, i);
            if (g_mkdir_with_parents(dump.dir, 0755) != 0) {
                fprintf(stderr, "vd-detect: cannot create %s: %s\n", dump.dir, g_strerror(errno));
                g_free(img.pixels);
                goto out;
            }
            vd_context_set_observer(ctx, dump_tensor, &dump);
        }
        vd_image *views = g_new(vd_image, batch);
        vd_result *results = g_new0(vd_result, batch);
        for (int b = 0; b < batch; b++)
            views[b] = vd_image_rgb(img.pixels, img.width, img.height);
        gboolean ok = TRUE;
        for (int r = 0; r < MAX(repeat, 1) && ok; r++) {
            for (int b = 0; b < batch; b++)
                vd_result_clear(&results[b]);
            gint64 t0 = g_get_monotonic_time();
            ok = vd_detect(ctx, views, batch, results, &error);
            gint64 t1 = g_get_monotonic_time();
            vd_context_set_observer(ctx, NULL, NULL); /* dump the first run only */
            if (ok && repeat > 0)
                fprintf(stderr, "time_ms: %.3f\n", (double)(t1 - t0) / 1000.0);
            if (ok && stages) {
                vd_stage_stats times[16];
                int n = vd_context_stage_stats(ctx, times, 16);
                /* one line per quantity, the stages in one order: the times,
                 * the arithmetic (vd_stage_stats.gflop), its rate (0 where
                 * a stage counts none) */
                fprintf(stderr, "stages_ms:");
                for (int s = 0; s < n; s++)
                    fprintf(stderr, " %s=%.3f", times[s].name, times[s].ms);
                fprintf(stderr, "\nstages_gflop:");
                for (int s = 0; s < n; s++)
                    fprintf(stderr, " %s=%.4f", times[s].name, times[s].gflop);
                fprintf(stderr, "\nstages_gflops:");
                for (int s = 0; s < n; s++)
                    fprintf(stderr, " %s=%.2f", times[s].name,
                            times[s].ms > 0.0 ? times[s].gflop / (times[s].ms / 1000.0) : 0.0);
                fprintf(stderr, "\n");
            }
        }
        g_free(img.pixels);
        g_free(views);
        vd_result result = results[0];
        for (int b = 1; b < batch; b++)
            vd_result_clear(&results[b]);
        g_free(results);
        if (!ok) {
            fprintf(stderr, "vd-detect: %s: %s\n", images[i], error->message);
            goto out;
        }
        if (dump.error != NULL) {
            fprintf(stderr, "vd-detect: %s\n", dump.error->message);
            vd_result_clear(&result);
            goto out;
        }
        if (result.n_nonfinite > 0)
            fprintf(stderr,
                    "vd-detect: warning: %s: %d infinite or NaN value(s) in the model's outputs "
                    "(fp16 overflow, or corrupt weights): the detections are unreliable\n",
                    images[i], result.n_nonfinite);
        if (json)
            print_json(model, &result);
        else if (calibrate == NULL)
            print_text(images[i], model, &result);
        vd_result_clear(&result);
    }
    if (calibrate != NULL) {
        calibration = vd_context_calibration(ctx, &error);
        if (calibration == NULL ||
            !vd_model_save_calibrated(model_path, calibration, calibrate, &error)) {
            fprintf(stderr, "vd-detect: %s\n", error->message);
            goto out;
        }
        fprintf(stderr, "vd-detect: int8 calibration of %d image(s) written with the model to %s\n",
                g_strv_length(images), calibrate);
    }
    if (info) {
        const vd_kernel_info *kernels = NULL;
        int n = vd_context_kernels(ctx, &kernels);
        for (int k = 0; k < n; k++)
            fprintf(stderr, "kernel: %s %s %s\n", kernels[k].kind, kernels[k].layer,
                    kernels[k].implementation);
    }
    status = 0;

out:
    vd_context_free(ctx);
    vd_model_unref(model);
    g_clear_error(&error);
    g_clear_error(&dump.error);
    g_free(dump.dir);
    g_free(model_path);
    g_free(device);
    g_free(precision);
    g_free(calibrate);
    g_free(calibration);
    g_free(dump_dir);
    g_strfreev(images);
    return status;
}
