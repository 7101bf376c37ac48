/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Bad input never crashes the engine: thousands of deterministic mutations of a
 * valid model file (its JSON header's numbers, bytes, spans and length field,
 * truncations) must each either load or fail with a VD_ERROR naming the cause,
 * and models whose weights were overwritten with NaN, infinities and huge values
 * must load and detect without crashing, returning only finite boxes inside the
 * frame, and saying in vd_result.n_nonfinite when the heads saw NaN or inf. Run under ASan/UBSan by
 * tests/run.sh, where a memory error fails it.
 *
 * Both runs use two seeds: the tiny ResNet-FPN and the tiny MobileNetV3-FPN
 * (block list, SE and depthwise tensors); the header mutations also a fifth as many
 * of the ResNet one relabelled as an architecture the engine does not know (it runs
 * every family the exporter writes: the refusal is the unknown architecture's). The
 * one-stage seeds (tiny RetinaNet v2, FCOS and SSDlite) run a fifth as many
 * mutations, in a run of their own (fuzz-one-stage).
 *
 *   VD_FUZZ_ITERATIONS=N  header mutations (default 2000)
 *   VD_FUZZ_POISONED=N    poisoned models per seed (default 60; every fourth poisoned in
 *                         a head, so at least 8 for both heads)
 *   VD_FUZZ_SEED=S        another deterministic sequence (default 1) */
#include "model_fixture.h"

#include "visiondetect/vd.h"

#include <glib/gstdio.h>

#include <math.h>
#include <string.h>

static guint8 *valid_bytes;
static gsize valid_size;
static gsize header_len;
/* The seed's head weights that no ReLU follows (test_poisoned_weights): their
 * first float's index from the start of the data, and their count. */
#define N_HEADS 2
static const char *const rcnn_heads[N_HEADS] = {"rpn.head.cls_logits.weight",
                                                "roi_heads.box_predictor.cls_score.weight"};
/* the one-stage seeds': the class logits and the regression (FCOS's distances
 * pass a ReLU, which keeps NaN and infinity) */
static const char *const one_stage_heads[N_HEADS] = {"head.classification_head.cls_logits.weight",
                                                     "head.regression_head.bbox_reg.weight"};
/* the SSDlite seed's: the first map's last classification and regression
 * convolutions */
static const char *const ssd_heads[N_HEADS] = {"head.classification_head.module_list.0.1.weight",
                                               "head.regression_head.module_list.0.1.weight"};
static const char *const *heads = rcnn_heads;
static gsize head_first[N_HEADS], head_count[N_HEADS];

/* The one-stage seeds (engine/RETINANET.md), whose labels start at 0 */
static gboolean one_stage_seed(gconstpointer data)
{
    return g_str_equal(data, "retinanet-v2") || g_str_equal(data, "fcos");
}

/* The SSDlite seed (engine/SSD.md: its layer lists, default boxes and heads; labels
 * from 1, the background never a detection) */
static gboolean ssd_seed(gconstpointer data)
{
    return g_str_equal(data, "ssdlite");
}

typedef struct {
    int loaded, rejected;
} tally;

static guint64 read_u64le(const guint8 *p)
{
    guint64 v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static void write_u64le(guint8 *p, guint64 v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (guint8)(v >> (8 * i));
}

/* A file of a new header @header (@len bytes) followed by the valid data. */
static GByteArray *with_header(const guint8 *header, gsize len)
{
    GByteArray *b = g_byte_array_sized_new((guint)(8 + len + valid_size));
    guint8 lenbuf[8];
    write_u64le(lenbuf, len);
    g_byte_array_append(b, lenbuf, 8);
    g_byte_array_append(b, header, (guint)len);
    g_byte_array_append(b, valid_bytes + 8 + header_len, (guint)(valid_size - 8 - header_len));
    return b;
}

/* Loads @bytes; checks the either-a-model-or-a-VD_ERROR contract. */
static vd_model *load_bytes(const GByteArray *bytes, const char *what, tally *t)
{
    gchar *path = g_build_filename(tmp_dir, "fuzz.safetensors", NULL);
    GError *error = NULL;
    if (!g_file_set_contents(path, (const gchar *)bytes->data, bytes->len, &error))
        g_error("writing %s: %s", path, error->message);
    vd_model *model = vd_model_load(path, &error);
    g_free(path);
    if (model != NULL) {
        if (error != NULL)
            g_error("%s: a model AND an error (%s)", what, error->message);
        const char *desc = vd_model_description(model);
        if (desc == NULL || !g_utf8_validate(desc, -1, NULL))
            g_error("%s: the loaded model has no valid description", what);
        t->loaded++;
        return model;
    }
    if (error == NULL)
        g_error("%s: neither a model nor an error", what);
    if (error->domain != VD_ERROR || error->message == NULL || error->message[0] == '\0' ||
        !g_utf8_validate(error->message, -1, NULL))
        g_error("%s: not a VD_ERROR with a message (domain %s, \"%s\")", what,
                g_quark_to_string(error->domain), error->message ? error->message : "(null)");
    if (g_test_verbose())
        g_test_message("%s -> %s", what, error->message);
    g_error_free(error);
    t->rejected++;
    return NULL;
}

static const char *const replacements[] = {
    "0", "-1", "1", "2", "3", "7", "-2147483648", "2147483647", "2147483648", "4294967296",
    "9223372036854775807", "18446744073709551615", "99999999999999999999999", "1e308", "-1e308",
    "0.5", "1e-300", "NaN", "\"x\"", "null", "[]", "{}", "true",
};

static gsize find_digit_runs(const guint8 *h, gsize len, gsize *starts, gsize *lens, gsize max)
{
    gsize n = 0;
    for (gsize i = 0; i < len && n < max;) {
        if (g_ascii_isdigit(h[i]) || (h[i] == '-' && i + 1 < len && g_ascii_isdigit(h[i + 1]))) {
            gsize j = i + 1;
            while (j < len && (g_ascii_isdigit(h[j]) || h[j] == '.' || h[j] == 'e'))
                j++;
            starts[n] = i;
            lens[n] = j - i;
            n++;
            i = j;
        } else {
            i++;
        }
    }
    return n;
}

/* The seed that names an architecture the engine refuses: one it does not know
 * (engine/vd_model_families.c lists none it knows and refuses today) */
static gboolean refused_seed(gconstpointer data)
{
    return g_str_equal(data, "unknown");
}

/* Makes the tiny model of @data ("resnet", "mobilenet-v3", the one-stage
 * "retinanet-v2" and "fcos", or "unknown": the ResNet one whose config names an
 * architecture the engine does not know, refused at load) the file the mutations
 * start from. */
static void use_seed(gconstpointer data)
{
    fixture *fx;
    heads = one_stage_seed(data) ? one_stage_heads : ssd_seed(data) ? ssd_heads : rcnn_heads;
    if (g_str_equal(data, "mobilenet-v3")) {
        mnv3_arch a = mnv3_tiny();
        fx = fx_mnv3(&a);
    } else if (g_str_equal(data, "retinanet-v2")) {
        fx = fx_tiny_retinanet(2, TRUE);
    } else if (g_str_equal(data, "fcos")) {
        fx = fx_tiny_fcos(2);
    } else if (ssd_seed(data)) {
        fx = fx_tiny_ssdlite();
    } else {
        tiny_arch a = tiny_basic();
        fx = fx_tiny(&a);
        if (refused_seed(data))
            fx_config_replace(fx, "\"architecture\":\"fasterrcnn\"",
                              "\"architecture\":\"detr\",\"builder\":"
                              "\"detr_resnet50\"");
    }
    char *path = fx_write(fx, "valid.safetensors");
    for (guint k = 0; k < N_HEADS; k++) {
        const fx_tensor *head = fx_find(fx, heads[k]);
        g_assert_cmpstr(head->dtype, ==, "F32");
        head_first[k] = head->begin / 4;
        head_count[k] = (head->end - head->begin) / 4;
    }
    g_free(valid_bytes);
    g_assert_true(g_file_get_contents(path, (gchar **)&valid_bytes, &valid_size, NULL));
    header_len = read_u64le(valid_bytes);
    g_assert_cmpuint(8 + header_len, <, valid_size);
    tally t = {0};
    GByteArray *b = g_byte_array_new();
    g_byte_array_append(b, valid_bytes, (guint)valid_size);
    vd_model *model = load_bytes(b, "the unmutated seed", &t);
    if (refused_seed(data)) {
        g_assert_null(model);
    } else {
        g_assert_nonnull(model);
        vd_model_unref(model);
    }
    g_byte_array_unref(b);
    g_remove(path);
    g_free(path);
    fx_free(fx);
}

static void test_header_mutations(gconstpointer data)
{
    use_seed(data);
    const gchar *it = g_getenv("VD_FUZZ_ITERATIONS");
    const gchar *seed = g_getenv("VD_FUZZ_SEED");
    int iterations = it ? atoi(it) : 2000;
    if (refused_seed(data))
        iterations /= 5; /* refused early: a few paths to cover, seconds of file writes */
    else if (one_stage_seed(data) || ssd_seed(data))
        iterations /= 5; /* the loader's front is the other seeds': what is their own
                          * (the "head" section, P6/P7 and the head's tensors) is a
                          * small part of the header; 50 s each at 1000 on 2 cores */
    GRand *rand = g_rand_new_with_seed(seed ? (guint32)atoi(seed) : 1u);
    const guint8 *header = valid_bytes + 8;
    gsize *starts = g_new(gsize, header_len), *lens = g_new(gsize, header_len);
    gsize n_runs = find_digit_runs(header, header_len, starts, lens, header_len);
    int by_kind[6] = {0};
    tally t = {0};
    g_assert_cmpuint(n_runs, >, 100);

    for (int i = 0; i < iterations; i++) {
        int kind = g_rand_int_range(rand, 0, 6);
        GByteArray *file = NULL;
        gchar *what = NULL;
        switch (kind) {
        case 0: { /* a number of the header (a shape, an offset, a config value) */
            gsize r = (gsize)g_rand_int_range(rand, 0, (gint32)n_runs);
            const char *rep = replacements[g_rand_int_range(rand, 0, G_N_ELEMENTS(replacements))];
            GString *h = g_string_new_len((const gchar *)header, (gssize)starts[r]);
            g_string_append(h, rep);
            g_string_append_len(h, (const gchar *)header + starts[r] + lens[r],
                                (gssize)(header_len - starts[r] - lens[r]));
            file = with_header((const guint8 *)h->str, h->len);
            what = g_strdup_printf("number at %" G_GSIZE_FORMAT " -> %s", starts[r], rep);
            g_string_free(h, TRUE);
            break;
        }
        case 1: { /* a few random bytes of the header */
            guint8 *h = g_memdup2(header, header_len);
            int n = g_rand_int_range(rand, 1, 5);
            for (int k = 0; k < n; k++)
                h[g_rand_int_range(rand, 0, (gint32)header_len)] = (guint8)g_rand_int_range(rand, 0, 256);
            file = with_header(h, header_len);
            what = g_strdup_printf("%d random header bytes", n);
            g_free(h);
            break;
        }
        case 2: { /* a span of the header deleted */
            gsize at = (gsize)g_rand_int_range(rand, 0, (gint32)header_len);
            gsize n = (gsize)g_rand_int_range(rand, 1, 24); /* not inside MIN(): once */
            n = MIN(n, header_len - at);
            GByteArray *h = g_byte_array_new();
            g_byte_array_append(h, header, (guint)at);
            g_byte_array_append(h, header + at + n, (guint)(header_len - at - n));
            file = with_header(h->data, h->len);
            what = g_strdup_printf("header bytes %" G_GSIZE_FORMAT "+%" G_GSIZE_FORMAT " deleted",
                                   at, n);
            g_byte_array_unref(h);
            break;
        }
        case 3: { /* a span of the header repeated */
            gsize at = (gsize)g_rand_int_range(rand, 0, (gint32)header_len);
            gsize n = (gsize)g_rand_int_range(rand, 1, 64);
            n = MIN(n, header_len - at);
            GByteArray *h = g_byte_array_new();
            g_byte_array_append(h, header, (guint)(at + n));
            g_byte_array_append(h, header + at, (guint)(header_len - at));
            file = with_header(h->data, h->len);
            what = g_strdup_printf("header bytes %" G_GSIZE_FORMAT "+%" G_GSIZE_FORMAT " repeated",
                                   at, n);
            g_byte_array_unref(h);
            break;
        }
        case 4: { /* the file cut short */
            gsize n = (gsize)g_rand_int_range(rand, 0, (gint32)valid_size);
            file = g_byte_array_new();
            g_byte_array_append(file, valid_bytes, (guint)n);
            what = g_strdup_printf("truncated to %" G_GSIZE_FORMAT " bytes", n);
            break;
        }
        default: { /* the header length field */
            file = g_byte_array_new();
            g_byte_array_append(file, valid_bytes, (guint)valid_size);
            guint64 len;
            switch (g_rand_int_range(rand, 0, 3)) {
            case 0:
                len = (guint64)g_rand_int_range(rand, 0, (gint32)valid_size + 64);
                break;
            case 1:
                len = header_len + (guint64)g_rand_int_range(rand, -8, 9);
                break;
            default:
                len = ((guint64)g_rand_int(rand) << 32) | g_rand_int(rand);
                break;
            }
            write_u64le(file->data, len);
            what = g_strdup_printf("header length %" G_GUINT64_FORMAT, len);
            break;
        }
        }
        by_kind[kind]++;
        vd_model *model = load_bytes(file, what, &t);
        if (model != NULL)
            vd_model_unref(model);
        g_byte_array_unref(file);
        g_free(what);
    }
    g_test_message("%d header mutations (numbers %d, bytes %d, deletions %d, repeats %d, "
                   "truncations %d, length fields %d): %d loaded, %d rejected with a VD_ERROR",
                   iterations, by_kind[0], by_kind[1], by_kind[2], by_kind[3], by_kind[4],
                   by_kind[5], t.loaded, t.rejected);
    /* the mutations reach both outcomes: neither all-rejecting nor all-loading; a
     * refused family stays refused (no mutation of a few bytes makes it fasterrcnn) */
    if (refused_seed(data)) {
        g_assert_cmpint(t.loaded, ==, 0);
    } else if (iterations >= 200) {
        g_assert_cmpint(t.loaded, >, 0);
        g_assert_cmpint(t.rejected, >, iterations / 2);
    }
    g_free(starts);
    g_free(lens);
    g_rand_free(rand);
}

/* Weights overwritten with non-finite or huge values: the model loads (values
 * are not the loader's business) and detection neither crashes nor returns a
 * box outside the frame. Anywhere in the file, whether a NaN or an infinity
 * gets as far as the heads depends on the ReLUs on its way, and so on the ISA:
 * oneDNN's ReLU makes a NaN 0 (its eltwise ReLU on every ISA, checked), ours
 * in the Winograd convolutions keeps it, and which convolutions run which
 * differs between AVX-512 and AVX2 (the same poisoned models: all head outputs
 * non-finite and no detection with AVX-512, none non-finite and 50 detections
 * capped at AVX2), as the GPU test's "NaN in the stem" case allows. So every
 * fourth model is poisoned in a head's weights instead (the RPN's objectness,
 * the box predictor's class logits), where no ReLU follows: with a NaN or an
 * infinity there, vd_result must count non-finite outputs on every ISA. */
static void test_poisoned_weights(gconstpointer data)
{
    use_seed(data);
    static const float poison[] = {NAN, INFINITY, -INFINITY, 3e38f, -3e38f, 1e-45f};
    GRand *rand = g_rand_new_with_seed(7);
    const int w = 150, h = 110;
    guint8 *pixels = g_malloc((gsize)w * h * 3);
    for (int i = 0; i < w * h * 3; i++)
        pixels[i] = (guint8)g_rand_int_range(rand, 0, 256);
    vd_image image = vd_image_rgb(pixels, w, h);
    gsize data_start = 8 + header_len, n_floats = (valid_size - data_start) / 4;
    tally t = {0};
    int detected = 0, failed = 0, boxes = 0, nonfinite = 0, head_nonfinite = 0;
    const gchar *np = g_getenv("VD_FUZZ_POISONED");
    const int n_models = np ? MAX(atoi(np), 8) : 60;

    for (int i = 0; i < n_models; i++) {
        GByteArray *file = g_byte_array_new();
        g_byte_array_append(file, valid_bytes, (guint)valid_size);
        float value = poison[g_rand_int_range(rand, 0, G_N_ELEMENTS(poison))];
        /* a few values, or a whole stretch (a layer's worth), anywhere; or a
         * few of a head's */
        int head = i % 4 == 3 ? (i / 4) % 2 : -1;
        gboolean stretch = head < 0 && i % 3 == 0;
        int n = stretch ? 2000 : g_rand_int_range(rand, 1, 8);
        gsize lo = head < 0 ? 0 : head_first[head];
        gsize span = head < 0 ? n_floats : head_count[head];
        gsize at = lo + (gsize)g_rand_int_range(rand, 0, (gint32)span);
        for (int k = 0; k < n; k++) {
            gsize idx = stretch ? MIN(at + (gsize)k, n_floats - 1)
                                : lo + (gsize)g_rand_int_range(rand, 0, (gint32)span);
            memcpy(file->data + data_start + 4 * idx, &value, 4);
        }
        gchar *what =
            g_strdup_printf("%d weights from float %" G_GSIZE_FORMAT "%s%s set to %g", n, at,
                            head < 0 ? "" : " of ", head < 0 ? "" : heads[head], value);
        vd_model *model = load_bytes(file, what, &t);
        g_byte_array_unref(file);
        if (model == NULL)
            g_error("%s: rejected", what);

        vd_context_params params = vd_context_default_params();
        params.device = VD_DEVICE_CPU;
        params.n_threads = 1;
        params.max_detections = 50;
        GError *error = NULL;
        vd_context *ctx = vd_context_new(model, &params, &error);
        g_assert_no_error(error);
        vd_result result = {0};
        if (vd_detect(ctx, &image, 1, &result, &error)) {
            detected++;
            /* the CPU counts them: never -1 (not counted) */
            g_assert_cmpint(result.n_nonfinite, >=, 0);
            nonfinite += result.n_nonfinite > 0;
            if (head >= 0 && !isfinite(value)) {
                if (result.n_nonfinite <= 0)
                    g_error("%s: no non-finite output counted", what);
                head_nonfinite++;
            }
            g_assert_cmpint(result.n_detections, >=, 0);
            g_assert_cmpint(result.n_detections, <=, params.max_detections);
            for (int d = 0; d < result.n_detections; d++) {
                const vd_detection *o = &result.detections[d];
                if (!(isfinite(o->score) && o->score >= 0 && o->score <= 1 && o->x1 >= 0 &&
                      o->y1 >= 0 && o->x2 <= w && o->y2 <= h && o->x1 <= o->x2 &&
                      o->y1 <= o->y2 && o->label >= (one_stage_seed(data) ? 0 : 1)))
                    g_error("%s: detection %d is (%g, %g, %g, %g) score %g label %d", what, d,
                            o->x1, o->y1, o->x2, o->y2, o->score, o->label);
            }
            boxes += result.n_detections;
            vd_result_clear(&result);
        } else {
            /* allowed, if it says why */
            g_assert_nonnull(error);
            g_assert_true(error->domain == VD_ERROR && error->message[0] != '\0');
            g_clear_error(&error);
            failed++;
        }
        vd_context_free(ctx);
        vd_model_unref(model);
        g_free(what);
    }
    g_test_message("%d poisoned models: %d detected (%d boxes, all finite and inside the frame, "
                   "%d frames reporting non-finite head outputs, %d of them poisoned in a head "
                   "with NaN or an infinity), %d refused with an error",
                   n_models, detected, boxes, nonfinite, head_nonfinite, failed);
    g_assert_cmpint(t.loaded, ==, n_models);
    /* NaN and infinities reach the heads of some: vd_result says so */
    g_assert_cmpint(head_nonfinite, >, 0);
    g_free(pixels);
    g_rand_free(rand);
}

int main(int argc, char **argv)
{
    GError *error = NULL;
    g_test_init(&argc, &argv, NULL);
    tmp_dir = g_dir_make_tmp("vd-fuzz-XXXXXX", &error);
    g_assert_no_error(error);

    /* the seeds: valid tiny models with float32 weights */
    g_test_add_data_func("/fuzz/header-mutations/resnet", "resnet", test_header_mutations);
    g_test_add_data_func("/fuzz/header-mutations/mobilenet-v3", "mobilenet-v3",
                         test_header_mutations);
    /* and a file of an architecture the engine does not know (with a builder) */
    g_test_add_data_func("/fuzz/header-mutations/unknown-refused", "unknown",
                         test_header_mutations);
    g_test_add_data_func("/fuzz/poisoned-weights/resnet", "resnet", test_poisoned_weights);
    g_test_add_data_func("/fuzz/poisoned-weights/mobilenet-v3", "mobilenet-v3",
                         test_poisoned_weights);
    /* the one-stage detectors: RetinaNet v2 (P6 from C5, GroupNorm) and FCOS */
    g_test_add_data_func("/fuzz/header-mutations/retinanet-v2", "retinanet-v2",
                         test_header_mutations);
    g_test_add_data_func("/fuzz/header-mutations/fcos", "fcos", test_header_mutations);
    g_test_add_data_func("/fuzz/poisoned-weights/retinanet-v2", "retinanet-v2",
                         test_poisoned_weights);
    g_test_add_data_func("/fuzz/poisoned-weights/fcos", "fcos", test_poisoned_weights);
    /* SSDlite: the layer lists' parser, the default boxes, the softmax decoding */
    g_test_add_data_func("/fuzz/header-mutations/ssdlite", "ssdlite", test_header_mutations);
    g_test_add_data_func("/fuzz/poisoned-weights/ssdlite", "ssdlite", test_poisoned_weights);
    int result = g_test_run();

    gchar *fuzz = g_build_filename(tmp_dir, "fuzz.safetensors", NULL);
    g_remove(fuzz);
    g_free(fuzz);
    g_rmdir(tmp_dir);
    g_free(valid_bytes);
    return result;
}
