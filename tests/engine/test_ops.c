/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of the CPU small ops (engine/cpu/vd_cpu_ops.c) and of the shared
 * per-element maths (common/vd_math.h). Expected values are worked out by hand
 * in the comments; comparisons are exact unless a tolerance is stated with its
 * reason. */
#include <float.h>
#include <math.h>
#include <omp.h>
#include <string.h>

#include "cpu/vd_cpu_half.h"
#include "cpu/vd_cpu_ops.h"
#include "vd_math.h"

/* ------------------------------------------------------------------------ */
/* IoU                                                                        */

static void test_iou(void)
{
    float a[4] = {0, 0, 2, 2};
    float disjoint[4] = {3, 3, 5, 5};
    float touching[4] = {2, 0, 4, 2}; /* shares the edge x = 2: zero area */
    float corner[4] = {2, 2, 4, 4};
    float overlap[4] = {1, 1, 3, 3}; /* inter 1, union 4 + 4 - 1 = 7 */
    float inside[4] = {0, 0, 2, 1};  /* inter 2, union 4: exactly 0.5 */

    g_assert_cmpfloat(vd_math_box_iou(a, disjoint), ==, 0.0f);
    g_assert_cmpfloat(vd_math_box_iou(a, touching), ==, 0.0f);
    g_assert_cmpfloat(vd_math_box_iou(a, corner), ==, 0.0f);
    g_assert_cmpfloat(vd_math_box_iou(a, a), ==, 1.0f);
    g_assert_cmpfloat(vd_math_box_iou(a, overlap), ==, 1.0f / 7.0f);
    g_assert_cmpfloat(vd_math_box_iou(overlap, a), ==, 1.0f / 7.0f);
    g_assert_cmpfloat(vd_math_box_iou(a, inside), ==, 0.5f);
    /* no +1 convention: a 1x1 box has area 1, not 4 */
    float unit[4] = {5, 5, 6, 6};
    g_assert_cmpfloat(vd_math_box_area(unit), ==, 1.0f);
}

/* ------------------------------------------------------------------------ */
/* NMS                                                                        */

static void test_nms_ties(void)
{
    /* three identical boxes with equal scores: the lowest index survives */
    float same[12] = {0, 0, 10, 10, 0, 0, 10, 10, 0, 0, 10, 10};
    float equal[3] = {0.5f, 0.5f, 0.5f};
    int keep[3];
    g_assert_cmpint(vd_nms(same, equal, 3, 0.5f, keep), ==, 1);
    g_assert_cmpint(keep[0], ==, 0);

    /* disjoint boxes: all kept, score descending, equal scores by index */
    float disjoint[16] = {0, 0, 1, 1, 2, 0, 3, 1, 4, 0, 5, 1, 6, 0, 7, 1};
    float scores[4] = {0.5f, 0.9f, 0.5f, 0.7f};
    int keep4[4];
    g_assert_cmpint(vd_nms(disjoint, scores, 4, 0.5f, keep4), ==, 4);
    g_assert_cmpint(keep4[0], ==, 1);
    g_assert_cmpint(keep4[1], ==, 3);
    g_assert_cmpint(keep4[2], ==, 0);
    g_assert_cmpint(keep4[3], ==, 2);
}

static void test_nms_threshold_strict(void)
{
    /* IoU of these two is exactly 0.5 (inter 2, union 4) */
    float boxes[8] = {0, 0, 4, 1, 0, 0, 2, 1};
    float scores[2] = {0.9f, 0.8f};
    int keep[2];
    g_assert_cmpint(vd_nms(boxes, scores, 2, 0.5f, keep), ==, 2); /* not > 0.5 */
    g_assert_cmpint(keep[0], ==, 0);
    g_assert_cmpint(keep[1], ==, 1);
    g_assert_cmpint(vd_nms(boxes, scores, 2, 0.49f, keep), ==, 1);
    g_assert_cmpint(keep[0], ==, 0);
}

static void test_nms_suppressed_do_not_suppress(void)
{
    /* A suppresses B (IoU 3/5), B would suppress C (IoU 3/5) but is gone, and
     * IoU(A, C) = 2/6 stays below 0.5: A and C are kept. */
    float boxes[12] = {0, 0, 4, 1, 1, 0, 5, 1, 2, 0, 6, 1};
    float scores[3] = {0.9f, 0.8f, 0.7f};
    int keep[3];
    g_assert_cmpint(vd_nms(boxes, scores, 3, 0.5f, keep), ==, 2);
    g_assert_cmpint(keep[0], ==, 0);
    g_assert_cmpint(keep[1], ==, 2);
}

static void test_nms_empty(void)
{
    int keep[1] = {42};
    g_assert_cmpint(vd_nms(NULL, NULL, 0, 0.5f, keep), ==, 0);
    g_assert_cmpint(vd_batched_nms(NULL, NULL, NULL, 0, 0.5f, keep), ==, 0);
    g_assert_cmpint(keep[0], ==, 42);
}

static void test_batched_nms(void)
{
    /* 0 and 1 identical but in different groups: both kept; 2 is identical to 0
     * in group 0 with a lower score: suppressed; 3 and 4 are disjoint in group 1.
     * Merged by score: 4 (0.9), 0 (0.6), 1 (0.6, tie: higher index), 3 (0.3). */
    float boxes[20] = {0, 0, 10, 10, 0, 0, 10, 10, 0, 0, 10, 10, 20, 20, 30, 30, 40, 40, 50, 50};
    float scores[5] = {0.6f, 0.6f, 0.5f, 0.3f, 0.9f};
    int groups[5] = {7, 3, 7, 3, 3};
    int keep[5];
    g_assert_cmpint(vd_batched_nms(boxes, scores, groups, 5, 0.5f, keep), ==, 4);
    g_assert_cmpint(keep[0], ==, 4);
    g_assert_cmpint(keep[1], ==, 0);
    g_assert_cmpint(keep[2], ==, 1);
    g_assert_cmpint(keep[3], ==, 3);
}

/* Straightforward reference: insertion sort (stable) and the greedy loop. */
static int reference_nms(const float *boxes, const float *scores, const int *groups, int n,
                         float threshold, int *keep)
{
    int *order = g_new(int, n);
    gboolean *suppressed = g_new0(gboolean, n);
    for (int i = 0; i < n; i++) {
        int j = i;
        while (j > 0 && scores[order[j - 1]] < scores[i]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
    int n_keep = 0;
    for (int a = 0; a < n; a++) {
        int i = order[a];
        if (suppressed[i])
            continue;
        keep[n_keep++] = i;
        for (int b = a + 1; b < n; b++) {
            int j = order[b];
            if (!suppressed[j] && (!groups || groups[i] == groups[j]) &&
                vd_math_box_iou(boxes + 4 * i, boxes + 4 * j) > threshold)
                suppressed[j] = TRUE;
        }
    }
    g_free(order);
    g_free(suppressed);
    return n_keep;
}

static void test_nms_random_against_reference(void)
{
    GRand *rand = g_rand_new_with_seed(1234);
    for (int round = 0; round < 20; round++) {
        int n = 50 + 40 * round;
        float *boxes = g_new(float, 4 * n);
        float *scores = g_new(float, n);
        int *groups = g_new(int, n);
        for (int i = 0; i < n; i++) {
            float x = (float)g_rand_double_range(rand, 0, 100);
            float y = (float)g_rand_double_range(rand, 0, 100);
            boxes[4 * i + 0] = x;
            boxes[4 * i + 1] = y;
            boxes[4 * i + 2] = x + (float)g_rand_double_range(rand, 0, 40);
            boxes[4 * i + 3] = y + (float)g_rand_double_range(rand, 0, 40);
            /* coarse scores so that many tie */
            scores[i] = (float)g_rand_int_range(rand, 0, 20) / 20.0f;
            groups[i] = g_rand_int_range(rand, 0, 4);
        }
        int *keep = g_new(int, n), *expected = g_new(int, n);
        int n_keep = vd_nms(boxes, scores, n, 0.5f, keep);
        int n_expected = reference_nms(boxes, scores, NULL, n, 0.5f, expected);
        g_assert_cmpint(n_keep, ==, n_expected);
        g_assert_cmpmem(keep, n_keep * sizeof(int), expected, n_expected * sizeof(int));

        n_keep = vd_batched_nms(boxes, scores, groups, n, 0.3f, keep);
        n_expected = reference_nms(boxes, scores, groups, n, 0.3f, expected);
        g_assert_cmpint(n_keep, ==, n_expected);
        g_assert_cmpmem(keep, n_keep * sizeof(int), expected, n_expected * sizeof(int));
        g_free(boxes);
        g_free(scores);
        g_free(groups);
        g_free(keep);
        g_free(expected);
    }
    g_rand_free(rand);
}

/* ------------------------------------------------------------------------ */
/* top-k                                                                      */

static void test_topk(void)
{
    float values[6] = {1, 3, 3, 2, 3, -1};
    int idx[6];
    g_assert_cmpint(vd_topk(values, 6, 3, idx), ==, 3);
    g_assert_cmpint(idx[0], ==, 1);
    g_assert_cmpint(idx[1], ==, 2);
    g_assert_cmpint(idx[2], ==, 4);
    g_assert_cmpint(vd_topk(values, 6, 4, idx), ==, 4);
    g_assert_cmpint(idx[3], ==, 3);
    /* k clamped to n, full descending order */
    g_assert_cmpint(vd_topk(values, 6, 100, idx), ==, 6);
    int all[6] = {1, 2, 4, 3, 0, 5};
    g_assert_cmpmem(idx, sizeof(all), all, sizeof(all));
    g_assert_cmpint(vd_topk(values, 6, 0, idx), ==, 0);
    g_assert_cmpint(vd_topk(values, 0, 3, idx), ==, 0);
    /* NaN ranks above everything (as in torch.topk); -0 ties with +0 */
    float special[4] = {0.0f, NAN, -0.0f, INFINITY};
    g_assert_cmpint(vd_topk(special, 4, 4, idx), ==, 4);
    g_assert_cmpint(idx[0], ==, 1);
    g_assert_cmpint(idx[1], ==, 3);
    g_assert_cmpint(idx[2], ==, 0);
    g_assert_cmpint(idx[3], ==, 2);
}

static void test_topk_random(void)
{
    GRand *rand = g_rand_new_with_seed(99);
    int n = 5000, k = 300;
    float *values = g_new(float, n);
    for (int i = 0; i < n; i++)
        values[i] = (float)g_rand_int_range(rand, 0, 500); /* ~10 ties per value */
    int *idx = g_new(int, k);
    g_assert_cmpint(vd_topk(values, n, k, idx), ==, k);
    /* reference: scan values from high to low, indices ascending */
    int m = 0;
    for (int v = 499; v >= 0 && m < k; v--)
        for (int i = 0; i < n && m < k; i++)
            if (values[i] == (float)v) {
                g_assert_cmpint(idx[m], ==, i);
                m++;
            }
    g_assert_cmpint(m, ==, k);
    g_free(values);
    g_free(idx);
    g_rand_free(rand);
}

/* ------------------------------------------------------------------------ */
/* Anchors                                                                    */

static void test_cell_anchors_table(void)
{
    /* spec §3.1, ratios 0.5, 1, 2 per size */
    static const float table[5][3][4] = {
        {{-23, -11, 23, 11}, {-16, -16, 16, 16}, {-11, -23, 11, 23}},
        {{-45, -23, 45, 23}, {-32, -32, 32, 32}, {-23, -45, 23, 45}},
        {{-91, -45, 91, 45}, {-64, -64, 64, 64}, {-45, -91, 45, 91}},
        {{-181, -91, 181, 91}, {-128, -128, 128, 128}, {-91, -181, 91, 181}},
        {{-362, -181, 362, 181}, {-256, -256, 256, 256}, {-181, -362, 181, 362}},
    };
    const float sizes[5] = {32, 64, 128, 256, 512};
    const float ratios[3] = {0.5f, 1.0f, 2.0f};
    for (int s = 0; s < 5; s++) {
        float out[12];
        vd_cell_anchors(&sizes[s], 1, ratios, 3, out);
        g_assert_cmpmem(out, sizeof(out), table[s], sizeof(table[s]));
    }
    /* several sizes in one level: ratio-major, a = ri * n_sizes + si */
    float out[60];
    vd_cell_anchors(sizes, 5, ratios, 3, out);
    for (int ri = 0; ri < 3; ri++)
        for (int si = 0; si < 5; si++)
            g_assert_cmpmem(out + 4 * (ri * 5 + si), 4 * sizeof(float), table[si][ri],
                            4 * sizeof(float));
}

static void test_cell_anchor_half_even(void)
{
    /* ratio 1 and size 3: [-1.5, -1.5, 1.5, 1.5] rounds half to even: -2, 2;
     * size 5: 2.5 -> 2 */
    float out[4];
    vd_math_cell_anchor(3.0f, 1.0f, out);
    g_assert_cmpfloat(out[0], ==, -2.0f);
    g_assert_cmpfloat(out[2], ==, 2.0f);
    vd_math_cell_anchor(5.0f, 1.0f, out);
    g_assert_cmpfloat(out[0], ==, -2.0f);
    g_assert_cmpfloat(out[3], ==, 2.0f);
}

static void test_grid_anchors_pool_level(void)
{
    /* pool level of an 800x1216 padded input: 13x19 cells, stride 800/13 = 61
     * rows and 1216/19 = 64 columns */
    const float sizes[1] = {512};
    const float ratios[3] = {0.5f, 1.0f, 2.0f};
    float cell[12];
    vd_cell_anchors(sizes, 1, ratios, 3, cell);
    int gh = 13, gw = 19, a = 3;
    float *anchors = g_new(float, gh *gw *a * 4);
    vd_grid_anchors(cell, a, 800, 1216, gh, gw, anchors);
    /* first cell: the cell anchors themselves */
    g_assert_cmpmem(anchors, sizeof(cell), cell, sizeof(cell));
    /* (y=12, x=18, a=1): [-256,-256,256,256] + (18*64, 12*61) = (1152, 732) */
    const float *last = anchors + ((12 * gw + 18) * a + 1) * 4;
    g_assert_cmpfloat(last[0], ==, 896.0f);
    g_assert_cmpfloat(last[1], ==, 476.0f);
    g_assert_cmpfloat(last[2], ==, 1408.0f);
    g_assert_cmpfloat(last[3], ==, 988.0f);
    /* (y=1, x=0, a=0): [-362,-181,362,181] + (0, 61) */
    const float *second_row = anchors + ((1 * gw + 0) * a + 0) * 4;
    g_assert_cmpfloat(second_row[0], ==, -362.0f);
    g_assert_cmpfloat(second_row[1], ==, 61.0f - 181.0f);
    g_assert_cmpfloat(second_row[3], ==, 61.0f + 181.0f);
    /* (y=0, x=1, a=2): [-181,-362,181,362] + (64, 0) */
    const float *second_col = anchors + ((0 * gw + 1) * a + 2) * 4;
    g_assert_cmpfloat(second_col[0], ==, 64.0f - 181.0f);
    g_assert_cmpfloat(second_col[2], ==, 64.0f + 181.0f);
    g_assert_cmpfloat(second_col[1], ==, -362.0f);
    g_free(anchors);
}

/* ------------------------------------------------------------------------ */
/* Box decoding, clipping, level mapping                                      */

static void test_decode(void)
{
    /* ref w=20 h=40 cx=20 cy=40; dx=0.5 dy=-0.25 -> centre (30, 30), size kept */
    float refs[8] = {10, 20, 30, 60, 10, 20, 30, 60};
    float deltas[8] = {0.5f, -0.25f, 0, 0, 5.0f, -2.5f, 0, 0};
    float out[8];
    const float unit[4] = {1, 1, 1, 1};
    vd_decode_boxes(refs, deltas, 1, unit, out);
    const float expected[4] = {20, 10, 40, 50};
    g_assert_cmpmem(out, sizeof(expected), expected, sizeof(expected));
    /* RoI-head weights (10, 10, 5, 5): 5 / 10 = 0.5, -2.5 / 10 = -0.25 */
    const float roi_weights[4] = {10, 10, 5, 5};
    vd_decode_boxes(refs + 4, deltas + 4, 1, roi_weights, out + 4);
    g_assert_cmpmem(out + 4, sizeof(expected), expected, sizeof(expected));
    /* in place */
    memcpy(out, refs, sizeof(refs));
    vd_decode_boxes(out, deltas, 2, unit, out);
    g_assert_cmpmem(out, sizeof(expected), expected, sizeof(expected));
}

static void test_decode_clip(void)
{
    /* dw = 10 is clamped to log(1000/16): w = 16 * 62.5 = 1000 around cx = 8;
     * dh = -100 is not clamped (upper bound only): the height collapses. */
    float ref[4] = {0, 0, 16, 16};
    float delta[4] = {0, 0, 10, -100};
    float out[4];
    const float unit[4] = {1, 1, 1, 1};
    vd_decode_boxes(ref, delta, 1, unit, out);
    /* 1e-3 absolute on 500: expf(4.1351666f) is 62.5 to within a few ulp */
    g_assert_cmpfloat_with_epsilon(out[0], 8.0f - 500.0f, 1e-3);
    g_assert_cmpfloat_with_epsilon(out[2], 8.0f + 500.0f, 1e-3);
    g_assert_cmpfloat(out[3] - out[1], <, 1e-30f);
    g_assert_cmpfloat(out[1], ==, 8.0f);
    /* the clamp value itself: dw exactly at the clip gives the same box */
    float at_clip[4] = {0, 0, VD_MATH_BBOX_XFORM_CLIP, 0};
    float out2[4];
    vd_decode_boxes(ref, at_clip, 1, unit, out2);
    g_assert_cmpfloat(out2[0], ==, out[0]);
    g_assert_cmpfloat(out2[2], ==, out[2]);
    g_assert_cmpfloat(VD_MATH_BBOX_XFORM_CLIP, ==, (float)log(1000.0 / 16.0));
}

static void test_clip_boxes(void)
{
    float boxes[8] = {-5, -1, 700, 30, 10, 480.5f, 20, 700};
    vd_clip_boxes(boxes, 2, 480, 640);
    const float expected[8] = {0, 0, 640, 30, 10, 480, 20, 480};
    g_assert_cmpmem(boxes, sizeof(expected), expected, sizeof(expected));
}

static void test_roi_level(void)
{
    float box224[4] = {10, 10, 234, 234}; /* s = 224: level 4 */
    float box223[4] = {0, 0, 223, 223};   /* just below: level 3 */
    float box112[4] = {0, 0, 112, 112};   /* level 3 */
    float box111[4] = {0, 0, 111, 111};   /* level 2 (log2 < -1) */
    float box448[4] = {0, 0, 448, 448};   /* level 5 */
    float huge[4] = {0, 0, 5000, 5000};   /* clamped to 5 */
    float tiny[4] = {0, 0, 1, 1};         /* clamped to 2 */
    float zero[4] = {5, 5, 5, 9};         /* area 0: log2(0) = -inf */
    g_assert_cmpint(vd_roi_level(box224, 2, 5), ==, 2);
    g_assert_cmpint(vd_roi_level(box223, 2, 5), ==, 1);
    g_assert_cmpint(vd_roi_level(box112, 2, 5), ==, 1);
    g_assert_cmpint(vd_roi_level(box111, 2, 5), ==, 0);
    g_assert_cmpint(vd_roi_level(box448, 2, 5), ==, 3);
    g_assert_cmpint(vd_roi_level(huge, 2, 5), ==, 3);
    g_assert_cmpint(vd_roi_level(tiny, 2, 5), ==, 0);
    g_assert_cmpint(vd_roi_level(zero, 2, 5), ==, 0);
    /* the 1e-6 eps: side 223.99992 gives 4 + log2(s/224) = 3.9999995, lifted
     * to level 4 by the eps; side 223.9998 (3.9999988) stays on level 3 */
    float eps_up[4] = {0, 0, 223.99992f, 223.99992f};
    float eps_down[4] = {0, 0, 223.9998f, 223.9998f};
    g_assert_cmpint(vd_roi_level(eps_up, 2, 5), ==, 2);
    g_assert_cmpint(vd_roi_level(eps_down, 2, 5), ==, 1);
    /* MobileNet: k_min = k_max = 5, everything on index 0 */
    g_assert_cmpint(vd_roi_level(box448, 5, 5), ==, 0);
    g_assert_cmpint(vd_roi_level(tiny, 5, 5), ==, 0);
}

/* ------------------------------------------------------------------------ */
/* roi_align                                                                  */

/* 3x3 map, 2 channels: channel 0 = (y*3+x)^2, channel 1 = 1 + 2 * channel 0 */
static void square_map(float *map)
{
    for (int p = 0; p < 9; p++) {
        map[2 * p + 0] = (float)(p * p);
        map[2 * p + 1] = 1.0f + 2.0f * (float)(p * p);
    }
}

static void test_roi_align_hand(void)
{
    float map[18];
    square_map(map);
    /* channel 0 as an image: [[0,1,4],[9,16,25],[36,49,64]]. RoI [0,0,2,2],
     * 2x2 bins of 1 pixel, 1 sample at each bin centre (0.5 / 1.5): the mean
     * of the 4 neighbours. */
    float roi[4] = {0, 0, 2, 2};
    float out[8];
    vd_roi_align_nhwc(map, 3, 3, 2, roi, NULL, 1, 1.0f, 2, 1, out, 8);
    const float expected[8] = {6.5f, 14.0f, 11.5f, 24.0f, 27.5f, 56.0f, 38.5f, 78.0f};
    g_assert_cmpmem(out, sizeof(expected), expected, sizeof(expected));
    /* the same through spatial_scale 1/4 */
    float roi4[4] = {0, 0, 8, 8};
    vd_roi_align_nhwc(map, 3, 3, 2, roi4, NULL, 1, 0.25f, 2, 1, out, 8);
    g_assert_cmpmem(out, sizeof(expected), expected, sizeof(expected));
    /* sampling_ratio 2, one bin: samples at 0.5 and 1.5 per axis: the mean of
     * the four bin values above */
    float pooled1[2];
    vd_roi_align_nhwc(map, 3, 3, 2, roi, NULL, 1, 1.0f, 1, 2, pooled1, 2);
    g_assert_cmpfloat(pooled1[0], ==, (6.5f + 11.5f + 27.5f + 38.5f) / 4.0f);
    g_assert_cmpfloat(pooled1[1], ==, (14.0f + 24.0f + 56.0f + 78.0f) / 4.0f);
    /* a sample off the pixel grid: RoI [0.5,0,1.5,0.5], 1 bin, 1 sample: rh is
     * raised to 1, so the sample is (y, x) = (0.5, 1.0): between rows 0 and 1
     * of column 1: (1 + 16) / 2 */
    float roi_off[4] = {0.5f, 0, 1.5f, 0.5f};
    vd_roi_align_nhwc(map, 3, 3, 2, roi_off, NULL, 1, 1.0f, 1, 1, pooled1, 2);
    g_assert_cmpfloat(pooled1[0], ==, 8.5f);
}

static void test_roi_align_small_roi(void)
{
    float map[18];
    square_map(map);
    /* 0.25 pixel wide: max(extent, 1) makes it 1 pixel from (1,1): the single
     * sample is at (1.5, 1.5), mean of 16, 25, 49, 64 = 38.5. Without the rule
     * it would sample (1.125, 1.125). */
    float roi[4] = {1, 1, 1.25f, 1.25f};
    float out[2];
    vd_roi_align_nhwc(map, 3, 3, 2, roi, NULL, 1, 1.0f, 1, 1, out, 2);
    g_assert_cmpfloat(out[0], ==, 38.5f);
    g_assert_cmpfloat(out[1], ==, 78.0f);
}

static void test_roi_align_edges(void)
{
    float map[18];
    square_map(map);
    float out[2];
    /* samples exactly at -1 in both axes are still sampled, clamped to 0 */
    float at_minus1[4] = {-1.5f, -1.5f, -0.5f, -0.5f};
    vd_roi_align_nhwc(map, 3, 3, 2, at_minus1, NULL, 1, 1.0f, 1, 1, out, 2);
    g_assert_cmpfloat(out[0], ==, 0.0f);
    g_assert_cmpfloat(out[1], ==, 1.0f);
    /* just beyond -1 in x only: zero */
    float below[4] = {-1.625f, -1.5f, -0.625f, -0.5f};
    vd_roi_align_nhwc(map, 3, 3, 2, below, NULL, 1, 1.0f, 1, 1, out, 2);
    g_assert_cmpfloat(out[0], ==, 0.0f);
    g_assert_cmpfloat(out[1], ==, 0.0f);
    /* y exactly H = 3 is sampled (clamped to the last row); x = 1 */
    float at_h[4] = {0.5f, 2.5f, 1.5f, 3.5f};
    vd_roi_align_nhwc(map, 3, 3, 2, at_h, NULL, 1, 1.0f, 1, 1, out, 2);
    g_assert_cmpfloat(out[0], ==, 49.0f);
    g_assert_cmpfloat(out[1], ==, 99.0f);
    /* x exactly W = 3 (last column), y = 0 */
    float at_w[4] = {2.5f, -0.5f, 3.5f, 0.5f};
    vd_roi_align_nhwc(map, 3, 3, 2, at_w, NULL, 1, 1.0f, 1, 1, out, 2);
    g_assert_cmpfloat(out[0], ==, 4.0f);
    /* y = H + 0.25: outside */
    float beyond_h[4] = {0.5f, 2.75f, 1.5f, 3.75f};
    vd_roi_align_nhwc(map, 3, 3, 2, beyond_h, NULL, 1, 1.0f, 1, 1, out, 2);
    g_assert_cmpfloat(out[0], ==, 0.0f);
    /* y between H-1 and H: clamped to the last row too (no weight beyond) */
    float between[4] = {0.5f, 2.1f, 1.5f, 3.1f};
    vd_roi_align_nhwc(map, 3, 3, 2, between, NULL, 1, 1.0f, 1, 1, out, 2);
    g_assert_cmpfloat(out[0], ==, 49.0f);
    /* half the samples outside: 2x2 samples of a bin, those at x = 3.5 count
     * as 0 but still divide: RoI x [2.5, 4.5] samples x = 3 and 4 (out), y = 0
     * both times (RoI y [-0.5, 1.5] samples y = 0 and 1) */
    float half_out[4] = {2.5f, -0.5f, 4.5f, 1.5f};
    vd_roi_align_nhwc(map, 3, 3, 2, half_out, NULL, 1, 1.0f, 1, 2, out, 2);
    /* x = 3 -> column 2: values 4 (y=0) and 25 (y=1); x = 4.0 > W: 0 */
    g_assert_cmpfloat(out[0], ==, (4.0f + 25.0f) / 4.0f);
}

static void test_roi_align_constant(void)
{
    /* any RoI inside a constant map gives the constant: exactly for dyadic
     * weights; for arbitrary ones within 4 ulp (the 4 weights sum to 1 up to
     * the rounding of their products) */
    int h = 20, w = 30, c = 5;
    float *map = g_new(float, h *w *c);
    for (int i = 0; i < h * w * c; i++)
        map[i] = 3.25f;
    /* RoI 0: 14x14 pixels, bins of 2, samples on pixel centres + 0.5: weights
     * 0.25 (dyadic); RoI 1: arbitrary */
    float rois[8] = {1, 2, 15, 16, 3.3f, 1.7f, 21.9f, 13.1f};
    float out[2 * 7 * 7 * 5];
    vd_roi_align_nhwc(map, h, w, c, rois, NULL, 2, 1.0f, 7, 2, out, 7 * 7 * 5);
    for (int i = 0; i < 7 * 7 * 5; i++)
        g_assert_cmpfloat(out[i], ==, 3.25f);
    for (int i = 7 * 7 * 5; i < 2 * 7 * 7 * 5; i++)
        g_assert_cmpfloat_with_epsilon(out[i], 3.25f, 4 * 3.25f * FLT_EPSILON);
    g_free(map);
}

static void test_roi_align_scatter(void)
{
    /* roi_index sends RoI 0 to row 2 and RoI 1 to row 0; rows are 3 floats
     * apart although one RoI writes 2 (1x1 bin, 2 channels); other floats are
     * left alone */
    float map[18];
    square_map(map);
    float rois[8] = {0, 0, 1, 1, 1, 1, 2, 2}; /* samples (0.5,0.5) and (1.5,1.5) */
    int index[2] = {2, 0};
    float out[9];
    for (int i = 0; i < 9; i++)
        out[i] = -7.0f;
    vd_roi_align_nhwc(map, 3, 3, 2, rois, index, 2, 1.0f, 1, 1, out, 3);
    const float expected[9] = {38.5f, 78.0f, -7.0f, -7.0f, -7.0f, -7.0f, 6.5f, 14.0f, -7.0f};
    g_assert_cmpmem(out, sizeof(expected), expected, sizeof(expected));
}

/* roi_align written straight from spec §5.5 (torchvision's CPU kernel), one
 * channel plane at a time, independent of vd_math.h. Built without FMA
 * contraction like the library (no -mfma in the build). */
static float reference_bilinear(const float *plane, int height, int width, float y, float x)
{
    if (y < -1.0f || y > (float)height || x < -1.0f || x > (float)width)
        return 0.0f;
    if (y <= 0)
        y = 0;
    if (x <= 0)
        x = 0;
    int y_low = (int)y, x_low = (int)x, y_high, x_high;
    if (y_low >= height - 1) {
        y_high = y_low = height - 1;
        y = (float)y_low;
    } else {
        y_high = y_low + 1;
    }
    if (x_low >= width - 1) {
        x_high = x_low = width - 1;
        x = (float)x_low;
    } else {
        x_high = x_low + 1;
    }
    float ly = y - y_low, lx = x - x_low;
    float hy = 1.0f - ly, hx = 1.0f - lx;
    float w1 = hy * hx, w2 = hy * lx, w3 = ly * hx, w4 = ly * lx;
    return ((w1 * plane[y_low * width + x_low] + w2 * plane[y_low * width + x_high]) +
            w3 * plane[y_high * width + x_low]) +
           w4 * plane[y_high * width + x_high];
}

static void reference_roi_align(const float *planes, int height, int width, int channels,
                                const float *roi, float scale, int pooled, int sampling_ratio,
                                float *out /* [pooled][pooled][channels] */)
{
    float sx1 = roi[0] * scale, sy1 = roi[1] * scale, sx2 = roi[2] * scale, sy2 = roi[3] * scale;
    float rw = fmaxf(sx2 - sx1, 1.0f), rh = fmaxf(sy2 - sy1, 1.0f);
    float bw = rw / pooled, bh = rh / pooled;
    int gh = sampling_ratio > 0 ? sampling_ratio : (int)ceilf(rh / pooled);
    int gw = sampling_ratio > 0 ? sampling_ratio : (int)ceilf(rw / pooled);
    int count = MAX(gh * gw, 1);
    for (int c = 0; c < channels; c++)
        for (int ph = 0; ph < pooled; ph++)
            for (int pw = 0; pw < pooled; pw++) {
                float acc = 0.0f;
                for (int iy = 0; iy < gh; iy++) {
                    float y = (sy1 + ph * bh) + ((iy + 0.5f) * bh) / gh;
                    for (int ix = 0; ix < gw; ix++) {
                        float x = (sx1 + pw * bw) + ((ix + 0.5f) * bw) / gw;
                        acc += reference_bilinear(planes + (size_t)c * height * width, height,
                                                  width, y, x);
                    }
                }
                out[(ph * pooled + pw) * channels + c] = acc / count;
            }
}

static void test_roi_align_random_against_reference(void)
{
    GRand *rand = g_rand_new_with_seed(77);
    int h = 25, w = 38, c = 6, pooled = 7, n = 60;
    float *nhwc = g_new(float, h *w *c), *planes = g_new(float, h *w *c);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int k = 0; k < c; k++) {
                float v = (float)g_rand_double_range(rand, -3, 3);
                nhwc[(y * w + x) * c + k] = v;
                planes[(k * h + y) * w + x] = v;
            }
    float *rois = g_new(float, 4 * n);
    for (int i = 0; i < n; i++) {
        /* image pixels at scale 1/8, some partly outside the 304x200 image */
        float x1 = (float)g_rand_double_range(rand, -40, 300);
        float y1 = (float)g_rand_double_range(rand, -40, 200);
        rois[4 * i + 0] = x1;
        rois[4 * i + 1] = y1;
        rois[4 * i + 2] = x1 + (float)g_rand_double_range(rand, 0, i % 3 ? 120 : 6);
        rois[4 * i + 3] = y1 + (float)g_rand_double_range(rand, 0, i % 3 ? 120 : 6);
    }
    int stride = pooled * pooled * c;
    float *out = g_new(float, n *stride), *expected = g_new(float, stride);
    for (int sampling = 0; sampling <= 2; sampling += 2) {
        vd_roi_align_nhwc(nhwc, h, w, c, rois, NULL, n, 0.125f, pooled, sampling, out, stride);
        for (int i = 0; i < n; i++) {
            reference_roi_align(planes, h, w, c, rois + 4 * i, 0.125f, pooled, sampling, expected);
            g_assert_cmpmem(out + i * stride, stride * sizeof(float), expected,
                            stride * sizeof(float));
        }
    }
    g_free(nhwc);
    g_free(planes);
    g_free(rois);
    g_free(out);
    g_free(expected);
    g_rand_free(rand);
}

static void test_roi_align_divides_by_count(void)
{
    /* a 1x1 map: every sample of a RoI within [-1, 1] reads the one pixel with
     * weight 1, so with 3x3 samples acc = v + v + ... (9 float additions) and
     * the output is acc / 9. For v = 0.009 that differs from acc * (1/9). */
    float v = 0.009f;
    float roi[4] = {-0.5f, -0.5f, 0.5f, 0.5f};
    float out;
    vd_roi_align_nhwc(&v, 1, 1, 1, roi, NULL, 1, 1.0f, 1, 3, &out, 1);
    float acc = 0.0f;
    for (int i = 0; i < 9; i++)
        acc += v;
    g_assert_cmpfloat(acc / 9.0f, !=, acc * (1.0f / 9.0f)); /* the case discriminates */
    g_assert_cmpfloat(out, ==, acc / 9.0f);
}

static void test_roi_align_adaptive(void)
{
    /* sampling_ratio 0: ceil(extent / pooled) samples; RoI [0,0,2,2] pooled 1
     * has 2x2 samples (0.5, 1.5): same as sampling_ratio 2 */
    float map[18];
    square_map(map);
    float roi[4] = {0, 0, 2, 2};
    float adaptive[2], fixed[2];
    vd_roi_align_nhwc(map, 3, 3, 2, roi, NULL, 1, 1.0f, 1, 0, adaptive, 2);
    vd_roi_align_nhwc(map, 3, 3, 2, roi, NULL, 1, 1.0f, 1, 2, fixed, 2);
    g_assert_cmpmem(adaptive, sizeof(adaptive), fixed, sizeof(fixed));
}

/* ------------------------------------------------------------------------ */
/* Softmax, sigmoid                                                           */

static void test_softmax(void)
{
    float rows[9] = {1, 1, 0, 1000, 1000, 0, 0, 0, 0};
    vd_softmax_rows(rows, 3, 3);
    /* e^1, e^1, 1 / (2e + 1): compare with double within 2 ulp (expf and the
     * sum are rounded) */
    double e = exp(1.0);
    g_assert_cmpfloat_with_epsilon(rows[0], e / (2 * e + 1), 2 * FLT_EPSILON);
    g_assert_cmpfloat(rows[0], ==, rows[1]);
    g_assert_cmpfloat_with_epsilon(rows[2], 1 / (2 * e + 1), 2 * FLT_EPSILON);
    /* large logits do not overflow: max is subtracted first */
    g_assert_cmpfloat(rows[3], ==, 0.5f);
    g_assert_cmpfloat(rows[4], ==, 0.5f);
    g_assert_cmpfloat(rows[5], ==, 0.0f);
    for (int i = 6; i < 9; i++)
        g_assert_cmpfloat(rows[i], ==, 1.0f / 3.0f);
}

static void test_expf_sleef(void)
{
    /* vd_math_expf reproduces SLEEF's expf_u10 (torch's CPU exp); expected
     * bits taken from libsleef 3.5 (Sleef_expf1_u10purecfma). The first rows are
     * inputs where glibc's expf rounds the other way (glibc in the comment). */
    static const struct {
        float x, expected;
    } cases[] = {
        {-0x1.3f8fc6p+3f, 0x1.82187p-15f},  /* glibc 0x1.821872p-15 */
        {-0x1.3d5ea4p+3f, 0x1.9d780cp-15f}, /* glibc 0x1.9d780ap-15 */
        {-0x1.2b655ap+3f, 0x1.6a887cp-14f}, /* glibc 0x1.6a887ep-14 */
        {0.0f, 1.0f},
        {1.0f, 0x1.5bf0a8p+1f},
        {-1.0f, 0x1.78b564p-2f},
        {VD_MATH_BBOX_XFORM_CLIP, 0x1.f40002p+5f}, /* 62.500004, not 62.5 */
        {-87.5f, 0x1.b2cafp-127f},                 /* subnormal result */
        {-103.9f, 0x1p-149f},
        {-104.5f, 0.0f},
        {88.5f, 0x1.99b988p+127f},
        {99.9f, INFINITY},
        {1000.0f, INFINITY},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++)
        g_assert_cmpfloat(vd_math_expf(cases[i].x), ==, cases[i].expected);
    g_assert_true(isnan(vd_math_expf(NAN)));
}

/* vd_cpu_half.h, the fp16 activations' conversions: every fp16 value widens to
 * its exact value (from its fields) and narrows back to itself; float32 values
 * between two neighbouring fp16 values round to the nearer, ties to the even one;
 * overflow to infinity from 65520 (the tie above 65504) on; NaN stays NaN. */
static void test_half(void)
{
    for (uint32_t h = 0; h < 0x10000; h++) {
        uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
        float f = vd_f16_to_f32((uint16_t)h);
        double want = exp == 0    ? ldexp((double)mant, -24)
                      : exp == 31 ? (mant == 0 ? INFINITY : NAN)
                                  : ldexp((double)(1024 + mant), (int)exp - 25);
        if (h & 0x8000)
            want = -want;
        if (exp == 31 && mant != 0) {
            g_assert_true(isnan(f));
            g_assert_cmpuint(vd_f32_to_f16(f) & 0x7c00u, ==, 0x7c00u);
            g_assert_cmpuint(vd_f32_to_f16(f) & 0x3ffu, !=, 0);
            continue;
        }
        g_assert_true((double)f == want);
        g_assert_cmpuint(vd_f32_to_f16(f), ==, h);
        /* the float32 values between this one and the next fp16 up in magnitude */
        if ((h & 0x7fff) >= 0x7bff)
            continue;
        float next = vd_f16_to_f32((uint16_t)(h + 1));
        float mid = (f + next) / 2.0f; /* exact: 12 significant bits */
        g_assert_cmpuint(vd_f32_to_f16(mid), ==, (h & 1) ? h + 1 : h);
        g_assert_cmpuint(vd_f32_to_f16(nextafterf(mid, f)), ==, h);
        g_assert_cmpuint(vd_f32_to_f16(nextafterf(mid, next)), ==, h + 1);
    }
    g_assert_cmpuint(vd_f32_to_f16(65504.0f), ==, 0x7bff);
    g_assert_cmpuint(vd_f32_to_f16(nextafterf(65520.0f, 0.0f)), ==, 0x7bff);
    g_assert_cmpuint(vd_f32_to_f16(65520.0f), ==, 0x7c00);
    g_assert_cmpuint(vd_f32_to_f16(-1e10f), ==, 0xfc00);
    g_assert_cmpuint(vd_f32_to_f16(INFINITY), ==, 0x7c00);
    g_assert_cmpuint(vd_f32_to_f16(ldexpf(1.0f, -25)), ==, 0);
    g_assert_cmpuint(vd_f32_to_f16(nextafterf(ldexpf(1.0f, -25), 1.0f)), ==, 1);
    g_assert_cmpuint(vd_f32_to_f16(-FLT_MIN), ==, 0x8000);
}

static void test_sigmoid(void)
{
    g_assert_cmpfloat(vd_math_sigmoid(0.0f), ==, 0.5f);
    g_assert_cmpfloat(vd_math_sigmoid(-200.0f), ==, 0.0f);
    g_assert_cmpfloat(vd_math_sigmoid(200.0f), ==, 1.0f);
    g_assert_cmpfloat_with_epsilon(vd_math_sigmoid(2.0f), 1.0 / (1.0 + exp(-2.0)), 2 * FLT_EPSILON);
}

/* vd_score_logit_floor(): the one-stage detectors skip the logits under it, so
 * no logit at or under it may give a score over the threshold (the 200 000 floats
 * under it are checked, with sqrt_score the centerness factor at its largest, 1),
 * and it stays within 0.2 of logit(thr) (or logit(thr^2)), so that it skips. */
static void test_score_logit_floor(void)
{
    static const float thresholds[] = {1e-6f, 0.001f, 0.01f, 0.05f, 0.2f, 0.5f,
                                       0.7f,  0.9f,   0.99f, 0.999f, 0.9999f};
    for (int sq = 0; sq < 2; sq++) {
        g_assert_true(isinf(vd_score_logit_floor(0.0f, sq)) && vd_score_logit_floor(0.0f, sq) < 0);
        g_assert_true(isinf(vd_score_logit_floor(1.0f, sq)) && vd_score_logit_floor(1.0f, sq) > 0);
        for (size_t i = 0; i < G_N_ELEMENTS(thresholds); i++) {
            float thr = thresholds[i];
            double t = sq ? (double)thr * thr : (double)thr;
            float floor_ = vd_score_logit_floor(thr, sq);
            g_assert_cmpfloat(floor_, >=, log(t / (1.0 - t)) - 0.2);
            float x = floor_;
            for (int k = 0; k < 200000; k++, x = nextafterf(x, -INFINITY)) {
                float s = vd_math_sigmoid(x);
                if (sq)
                    s = sqrtf(s * 1.0f);
                if (s > thr)
                    g_error("threshold %g%s: logit %.9g under the floor %.9g scores %.9g", thr,
                            sq ? " (square root)" : "", x, floor_, s);
            }
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Transform sizes                                                            */

static void test_transform_sizes(void)
{
    /* Resized and padded sizes under both resize-scale rules. The float32 column is
     * what torchvision 0.14.1's own _resize_image_and_masks gives (torch 1.13), the
     * double column current torchvision's min(S/m, L/M) (spec §1.3 table). A correctly
     * rounded float32 division instead of torch's reciprocal-then-multiply would give
     * 800 rows at 427x640, 799 at 480x640, 1332 at 1000x300, 1333 at 68x1346 and
     * 320x320 at 200x200: those rows tell the two apart. */
    static const int cases[][12] = {
        /* h, w, min_size, max_size, float32: resized h, w, padded h, w; double: the same */
        {288, 352, 352, 1333, 351, 430, 352, 448, 352, 430, 352, 448}, /* the frame */
        {427, 640, 800, 1333, 799, 1199, 800, 1216, 800, 1199, 800, 1216},
        {480, 640, 800, 1333, 800, 1066, 800, 1088, 800, 1066, 800, 1088},
        {375, 500, 800, 1333, 799, 1066, 800, 1088, 800, 1066, 800, 1088},
        {333, 500, 800, 1333, 799, 1201, 800, 1216, 800, 1201, 800, 1216},
        {640, 427, 800, 1333, 1199, 799, 1216, 800, 1199, 800, 1216, 800},
        /* the long side bounds the scale */
        {1000, 300, 800, 1333, 1333, 399, 1344, 416, 1333, 399, 1344, 416},
        {291, 1181, 800, 1333, 328, 1332, 352, 1344, 328, 1333, 352, 1344},
        {68, 1346, 800, 1333, 67, 1332, 96, 1344, 67, 1333, 96, 1344},
        {800, 1216, 800, 1333, 800, 1216, 800, 1216, 800, 1216, 800, 1216},
        /* MobileNet-320 (320/640) and the ResNet-18 parity transform (320/512) */
        {427, 640, 320, 640, 319, 479, 320, 480, 320, 479, 320, 480},
        {480, 640, 320, 640, 320, 426, 320, 448, 320, 426, 320, 448},
        {200, 200, 320, 512, 319, 319, 320, 320, 320, 320, 320, 320},
        {401, 299, 320, 512, 429, 319, 448, 320, 429, 320, 448, 320},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        const int *c = cases[i];
        for (int float32_scale = 0; float32_scale < 2; float32_scale++) {
            const int *want = c + (float32_scale ? 4 : 8);
            int rh, rw, ph, pw;
            vd_math_transform_size(c[0], c[1], c[2], c[3], 32, float32_scale, &rh, &rw, &ph, &pw);
            if (rh != want[0] || rw != want[1] || ph != want[2] || pw != want[3])
                g_error("%dx%d (min %d, max %d), %s scale: resized %dx%d padded %dx%d, expected "
                        "%dx%d padded %dx%d",
                        c[0], c[1], c[2], c[3], float32_scale ? "float32" : "double", rh, rw, ph,
                        pw, want[0], want[1], want[2], want[3]);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Resize coefficients (vd_math.h)                                            */

static void test_resize_source(void)
{
    /* upsample 2 -> 4: r = 0.5, src = 0.5 (d + 0.5) - 0.5 = -0.25 (-> 0),
     * 0.25, 0.75, 1.25 (i0 = 1 = n - 1, so i1 = i0) */
    static const struct {
        int i0, i1;
        float l1;
    } up[4] = {{0, 1, 0.0f}, {0, 1, 0.25f}, {0, 1, 0.75f}, {1, 1, 0.25f}};
    float r = vd_math_resize_ratio(2, 4);
    for (int d = 0; d < 4; d++) {
        int i0, i1;
        float l0, l1;
        vd_math_resize_source(r, d, 2, 4, &i0, &i1, &l0, &l1);
        g_assert_cmpint(i0, ==, up[d].i0);
        g_assert_cmpint(i1, ==, up[d].i1);
        g_assert_cmpfloat(l1, ==, up[d].l1);
        g_assert_cmpfloat(l0, ==, 1.0f - up[d].l1);
    }
    /* the ratio is f32(n)/f32(o), not 1/scale; the index is in double:
     * 640 -> 1199, d = 1000: r = f32(640/1199), src = r * 1000.5 - 0.5 */
    float r2 = vd_math_resize_ratio(640, 1199);
    g_assert_cmpfloat(r2, ==, 640.0f / 1199.0f);
    int i0, i1;
    float l0, l1;
    vd_math_resize_source(r2, 1000, 640, 1199, &i0, &i1, &l0, &l1);
    double src = (double)r2 * 1000.5 - 0.5;
    g_assert_cmpint(i0, ==, (int)src);
    g_assert_cmpint(i1, ==, (int)src + 1);
    g_assert_cmpfloat(l1, ==, (float)(src - (int)src));
    /* equal sizes: a copy */
    vd_math_resize_source(1.0f, 7, 10, 10, &i0, &i1, &l0, &l1);
    g_assert_cmpint(i0, ==, 7);
    g_assert_cmpint(i1, ==, 7);
    g_assert_cmpfloat(l0, ==, 1.0f);
    g_assert_cmpfloat(l1, ==, 0.0f);
}

/* ------------------------------------------------------------------------ */
/* roi_align as torchvision's op: forward and backward                        */

static vd_roi_align_params roi_params(int n_images, int h, int w, int c, int ph, int pw,
                                      int sampling_ratio, gboolean aligned)
{
    vd_roi_align_params p = vd_roi_align_default_params();
    p.n_images = n_images;
    p.height = h;
    p.width = w;
    p.channels = c;
    p.pooled_h = ph;
    p.pooled_w = pw;
    p.sampling_ratio = sampling_ratio;
    p.aligned = aligned;
    return p;
}

static void test_roi_align_backward_hand(void)
{
    /* 3x3 map, 2 channels, RoI [0,0,2,2], 2x2 bins, 1 sample at each bin
     * centre (0.5 / 1.5): each sample gives a quarter of its bin's gradient
     * to each of its four neighbours. Bin gradients 1, 2, 3, 4 (channel 0)
     * and 10x (channel 1). Pixel (1,1) is a neighbour of all four samples:
     * (1+2+3+4)/4; pixel (0,1) of the two top ones: (1+2)/4; and so on. */
    vd_roi_align_params p = roi_params(1, 3, 3, 2, 2, 2, 1, FALSE);
    const float roi[5] = {0, 0, 0, 2, 2};
    const float grad[8] = {1, 10, 2, 20, 3, 30, 4, 40}; /* [ph][pw][c] */
    const float expected0[9] = {0.25f, 0.75f, 0.5f, 1.0f, 2.5f, 1.5f, 0.75f, 1.75f, 1.0f};
    float gi[18];
    GError *error = NULL;
    g_assert_true(vd_roi_align_backward(&p, grad, roi, 1, gi, &error));
    g_assert_no_error(error);
    for (int i = 0; i < 9; i++) {
        g_assert_cmpfloat(gi[2 * i], ==, expected0[i]);
        g_assert_cmpfloat(gi[2 * i + 1], ==, 10.0f * expected0[i]);
    }
    /* aligned=True shifts by half a pixel: RoI [0.5,0.5,2.5,2.5] has the same
     * samples */
    vd_roi_align_params pa = roi_params(1, 3, 3, 2, 2, 2, 1, TRUE);
    const float roi_aligned[5] = {0, 0.5f, 0.5f, 2.5f, 2.5f};
    float gi_aligned[18];
    g_assert_true(vd_roi_align_backward(&pa, grad, roi_aligned, 1, gi_aligned, &error));
    g_assert_cmpmem(gi_aligned, sizeof(gi_aligned), gi, sizeof(gi));

    /* one bin, one sample at (y, x) = (3, 1.5): y == H is still sampled,
     * clamped to row 2 (ly = 0), so pixels (2,1) and (2,2) get half each; at
     * y = 3.5 the sample is outside: nothing */
    vd_roi_align_params p1 = roi_params(1, 3, 3, 1, 1, 1, 1, FALSE);
    const float at_h[5] = {0, 1.0f, 2.5f, 2.0f, 3.5f};
    const float beyond_h[5] = {0, 1.0f, 3.0f, 2.0f, 4.0f};
    const float g8 = 8.0f;
    float one[9];
    g_assert_true(vd_roi_align_backward(&p1, &g8, at_h, 1, one, &error));
    for (int i = 0; i < 9; i++)
        g_assert_cmpfloat(one[i], ==, (i == 7 || i == 8) ? 4.0f : 0.0f);
    g_assert_true(vd_roi_align_backward(&p1, &g8, beyond_h, 1, one, &error));
    for (int i = 0; i < 9; i++)
        g_assert_cmpfloat(one[i], ==, 0.0f);

    /* sampling_ratio 2: the four samples of the bin share the gradient,
     * divided by the count 4: the shares add up to the bin's gradient */
    vd_roi_align_params p2 = roi_params(1, 3, 3, 1, 1, 1, 2, FALSE);
    const float whole[5] = {0, 0, 0, 2, 2};
    g_assert_true(vd_roi_align_backward(&p2, &g8, whole, 1, one, &error));
    float total = 0;
    for (int i = 0; i < 9; i++)
        total += one[i];
    g_assert_cmpfloat(total, ==, 8.0f);
    g_assert_cmpfloat(one[4], ==, 4.0f * (8.0f * 0.25f) / 4.0f); /* (1,1): one quarter of each */
}

/* A map and RoIs whose every value is exact in float32: integer features and
 * gradients, integer RoI corners, 2x2 bins with 2x2 samples: coordinates and
 * weights are multiples of 1/16 and the count 4 divides exactly. Then the
 * forward F and the backward B compute exact sums, and B must be F's
 * transpose exactly: <g, F(x)> == <B(g), x>. The RoIs cross every edge,
 * including samples clamped on the last row and column and samples outside. */
static void test_roi_align_backward_adjoint(void)
{
    const int n_images = 2, h = 6, w = 7, c = 3, n_rois = 8;
    const float rois[8][5] = {
        {0, 0, 0, 4, 4},     {1, 1, 2, 7, 6}, {0, -2, -3, 2, 1}, {1, 4, 3, 9, 8},
        {1, -5, -5, -1, -1}, {0, 3, 3, 3, 5}, {0, 6, 1, 2, 5},   {1.5f, 0, 0, 7, 6},
    };
    size_t n_x = (size_t)n_images * h * w * c, n_g = (size_t)n_rois * 2 * 2 * c;
    float *x = g_new(float, n_x), *bx = g_new(float, n_x);
    float *g = g_new(float, n_g), *fx = g_new(float, n_g);
    for (size_t i = 0; i < n_x; i++)
        x[i] = (float)((int)(i * 7 % 17) - 8);
    for (size_t i = 0; i < n_g; i++)
        g[i] = (float)((int)(i * 5 % 11) - 5);
    for (int aligned = 0; aligned < 2; aligned++) {
        vd_roi_align_params p = roi_params(n_images, h, w, c, 2, 2, 2, aligned);
        GError *error = NULL;
        g_assert_true(vd_roi_align_forward(&p, x, &rois[0][0], n_rois, fx, &error));
        g_assert_true(vd_roi_align_backward(&p, g, &rois[0][0], n_rois, bx, &error));
        g_assert_no_error(error);
        double gfx = 0, bxx = 0;
        for (size_t i = 0; i < n_g; i++)
            gfx += (double)g[i] * fx[i];
        for (size_t i = 0; i < n_x; i++)
            bxx += (double)bx[i] * x[i];
        g_assert_cmpfloat(gfx, !=, 0.0);
        g_assert_cmpfloat(gfx, ==, bxx);
    }
    g_free(x);
    g_free(bx);
    g_free(g);
    g_free(fx);
}

/* Deterministic whatever the number of threads: each thread owns a block of
 * channels and every element's sum keeps its order. 60 RoIs x 12 bins x 40
 * channels: above the size from which the op runs in parallel. */
static void test_roi_align_backward_threads(void)
{
    const int n_images = 2, h = 13, w = 17, c = 40, n_rois = 60;
    vd_roi_align_params p = roi_params(n_images, h, w, c, 3, 4, 0, FALSE);
    p.spatial_scale = 0.5f;
    float rois[60 * 5];
    guint32 seed = 7;
    for (int k = 0; k < n_rois; k++) {
        float *roi = rois + 5 * k;
        seed = seed * 1664525u + 1013904223u;
        roi[0] = (float)(seed >> 31);
        roi[1] = (float)(seed >> 8 & 63) - 8.0f;
        roi[2] = (float)(seed >> 14 & 31) - 4.0f;
        roi[3] = roi[1] + (float)(seed >> 20 & 31) * 0.75f;
        roi[4] = roi[2] + (float)(seed >> 25 & 15) * 1.25f;
    }
    size_t n_g = (size_t)n_rois * 3 * 4 * c, n_x = (size_t)n_images * h * w * c;
    float *g = g_new(float, n_g);
    for (size_t i = 0; i < n_g; i++)
        g[i] = sinf((float)i * 0.37f);
    float *one = g_new(float, n_x), *many = g_new(float, n_x);
    int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    g_assert_true(vd_roi_align_backward(&p, g, rois, n_rois, one, NULL));
    for (int t = 2; t <= 4; t++) {
        omp_set_num_threads(t);
        g_assert_true(vd_roi_align_backward(&p, g, rois, n_rois, many, NULL));
        g_assert_cmpmem(many, n_x * sizeof(float), one, n_x * sizeof(float));
    }
    omp_set_num_threads(saved);
    g_free(g);
    g_free(one);
    g_free(many);
}

/* Bad arguments fail with VD_ERROR_INVALID_ARGUMENT before anything is
 * written; no RoI is a valid gradient of zeros. */
static void test_roi_align_backward_errors(void)
{
    vd_roi_align_params p = roi_params(2, 4, 4, 1, 2, 2, 0, FALSE);
    float gi[32], out[8];
    const float grad[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    const float bad_batch[3][10] = {
        {0, 0, 0, 2, 2, 2, 0, 0, 2, 2},   /* batch index 2 of 2 images */
        {0, 0, 0, 2, 2, -1, 0, 0, 2, 2},  /* -1 */
        {0, 0, 0, 2, 2, NAN, 0, 0, 2, 2}, /* NaN */
    };
    for (int b = 0; b < 3; b++) {
        for (int i = 0; i < 32; i++)
            gi[i] = 7.0f;
        GError *error = NULL;
        g_assert_false(vd_roi_align_backward(&p, grad, bad_batch[b], 2, gi, &error));
        g_assert_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT);
        g_assert_nonnull(strstr(error->message, "RoI 1 has batch index"));
        g_clear_error(&error);
        for (int i = 0; i < 32; i++)
            g_assert_cmpfloat(gi[i], ==, 7.0f);
        g_assert_false(vd_roi_align_forward(&p, gi, bad_batch[b], 2, out, &error));
        g_assert_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT);
        g_clear_error(&error);
    }
    const float ok_rois[5] = {1.9f, 0, 0, 2, 2}; /* truncated to image 1 */
    vd_roi_align_params zero_bins = p;
    zero_bins.pooled_w = 0;
    GError *error = NULL;
    g_assert_false(vd_roi_align_backward(&zero_bins, grad, ok_rois, 1, gi, &error));
    g_assert_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT);
    g_clear_error(&error);
    g_assert_false(vd_roi_align_backward(NULL, grad, ok_rois, 1, gi, &error));
    g_assert_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT);
    g_clear_error(&error);
    g_assert_false(vd_roi_align_backward(&p, NULL, ok_rois, 1, gi, &error));
    g_assert_error(error, VD_ERROR, VD_ERROR_INVALID_ARGUMENT);
    g_clear_error(&error);
    g_assert_true(vd_roi_align_backward(&p, grad, ok_rois, 1, gi, &error));
    g_assert_no_error(error);
    float image0 = 0, image1 = 0;
    for (int i = 0; i < 16; i++) {
        image0 += gi[i];
        image1 += gi[16 + i];
    }
    g_assert_cmpfloat(image0, ==, 0.0f);
    g_assert_cmpfloat(image1, ==, 4.0f); /* four bins of gradient 1 */
    for (int i = 0; i < 32; i++)
        gi[i] = 7.0f;
    g_assert_true(vd_roi_align_backward(&p, NULL, NULL, 0, gi, &error));
    for (int i = 0; i < 32; i++)
        g_assert_cmpfloat(gi[i], ==, 0.0f);
}

/* Mask R-CNN's transposed convolution as the CUDA backend computes it: the
 * 1x1 convolution of vd_deconv2x2_as_conv1x1, its output read back through
 * vd_math_mask_tap_pixel, equals ConvTranspose2d (2x2, stride 2, no padding;
 * torch's weight [in][out][2][2]) scattered input pixel by input pixel as
 * torch defines it (engine/MASKRCNN.md §2.3); the padding rows are zero. A
 * transposed tap, a flipped kernel or a swapped in/out index moves values by
 * O(1). */
static void test_mask_deconv_as_1x1(void)
{
    const int rows = 2, P = 5, in = 12, out = 7, stride = 8, M = 2 * P;
    GRand *rand = g_rand_new_with_seed(77);
    float *x = g_new(float, (size_t)rows * P * P * in); /* NHWC */
    float *w = g_new(float, (size_t)in * out * 4), *b = g_new(float, out);
    for (int i = 0; i < rows * P * P * in; i++)
        x[i] = (float)g_rand_double_range(rand, -1, 1);
    for (int i = 0; i < in * out * 4; i++)
        w[i] = (float)g_rand_double_range(rand, -1, 1);
    for (int o = 0; o < out; o++)
        b[o] = (float)g_rand_double_range(rand, -1, 1);

    float *w1 = g_new(float, (size_t)4 * stride * in), *b1 = g_new(float, 4 * stride);
    vd_deconv2x2_as_conv1x1(w, b, in, out, stride, w1, b1);
    for (int tap = 0; tap < 4; tap++)
        for (int o = out; o < stride; o++) {
            g_assert_cmpfloat(b1[tap * stride + o], ==, 0.0f);
            for (int i = 0; i < in; i++)
                g_assert_cmpfloat(w1[((size_t)tap * stride + o) * in + i], ==, 0.0f);
        }
    /* the 1x1 convolution, NHWC [rows][P][P][4 stride] */
    float *t = g_new(float, (size_t)rows * P * P * 4 * stride);
    for (int p = 0; p < rows * P * P; p++)
        for (int c = 0; c < 4 * stride; c++) {
            float acc = b1[c];
            for (int i = 0; i < in; i++)
                acc += x[(size_t)p * in + i] * w1[(size_t)c * in + i];
            t[(size_t)p * 4 * stride + c] = acc;
        }
    /* the transposed convolution, [rows][out][M][M], and the sums of |terms| */
    double *ref = g_new0(double, (size_t)rows * out * M * M);
    double *mag = g_new0(double, (size_t)rows * out * M * M);
    for (int r = 0; r < rows; r++)
        for (int o = 0; o < out; o++)
            for (int q = 0; q < M * M; q++) {
                ref[((size_t)r * out + o) * M * M + q] = b[o];
                mag[((size_t)r * out + o) * M * M + q] = fabs(b[o]);
            }
    for (int r = 0; r < rows; r++)
        for (int yy = 0; yy < P; yy++)
            for (int xx = 0; xx < P; xx++)
                for (int i = 0; i < in; i++)
                    for (int o = 0; o < out; o++)
                        for (int ky = 0; ky < 2; ky++)
                            for (int kx = 0; kx < 2; kx++) {
                                double v = (double)x[(((size_t)r * P + yy) * P + xx) * in + i] *
                                           w[(((size_t)i * out + o) * 2 + ky) * 2 + kx];
                                size_t at = ((size_t)r * out + o) * M * M +
                                            (size_t)(2 * yy + ky) * M + (2 * xx + kx);
                                ref[at] += v;
                                mag[at] += fabs(v);
                            }
    double worst = 0;
    for (int r = 0; r < rows; r++)
        for (int o = 0; o < out; o++)
            for (int py = 0; py < M; py++)
                for (int px = 0; px < M; px++) {
                    size_t at = ((size_t)r * out + o) * M * M + (size_t)py * M + px;
                    float got = t[(size_t)vd_math_mask_tap_pixel(r, py, px, P) * stride + o];
                    /* float32 sums of in + 1 terms: within (in + 1) u sum|terms| */
                    double tol = (in + 1) * 0x1p-24 * mag[at];
                    double d = fabs((double)got - ref[at]);
                    worst = MAX(worst, d / mag[at]);
                    if (d > tol)
                        g_error("RoI %d channel %d pixel (%d, %d): %.9g, want %.9g", r, o, py, px,
                                (double)got, ref[at]);
                }
    if (g_test_verbose())
        g_test_message("max |diff| / sum|terms| %.3g", worst);
    g_rand_free(rand);
    g_free(x);
    g_free(w);
    g_free(b);
    g_free(w1);
    g_free(b1);
    g_free(t);
    g_free(ref);
    g_free(mag);
}

/* fc6 as the CUDA backend lays it out for an NHWC input (vd_fc6_weight_to_nhwc):
 * the product with an NHWC map of padded channels (the conv box head's last
 * output, padding channels zero) equals torch's Linear on the NCHW flatten
 * (c * P * P + y * P + x) of the same map, and the padding columns are zero. A
 * transposed index or a wrong stride moves values by O(1). */
static void test_fc6_weight_to_nhwc(void)
{
    const int out = 5, C = 11, Cp = 16, PP = 9;
    GRand *rand = g_rand_new_with_seed(91);
    float *w = g_new(float, (size_t)out * C * PP), *x = g_new(float, (size_t)C * PP);
    float *x_nhwc = g_new0(float, (size_t)PP * Cp), *w_nhwc = g_new(float, (size_t)out * PP * Cp);
    for (int i = 0; i < out * C * PP; i++)
        w[i] = (float)g_rand_double_range(rand, -1, 1);
    for (int c = 0; c < C; c++)
        for (int p = 0; p < PP; p++) {
            x[c * PP + p] = (float)g_rand_double_range(rand, -1, 1);
            x_nhwc[p * Cp + c] = x[c * PP + p];
        }
    for (int i = 0; i < out * PP * Cp; i++)
        w_nhwc[i] = 12345.0f; /* overwritten everywhere */
    vd_fc6_weight_to_nhwc(w, out, C, PP, Cp, w_nhwc);
    for (int o = 0; o < out; o++) {
        double ref = 0, got = 0, mag = 0;
        for (int i = 0; i < C * PP; i++) {
            ref += (double)w[(size_t)o * C * PP + i] * x[i];
            mag += fabs((double)w[(size_t)o * C * PP + i] * x[i]);
        }
        for (int p = 0; p < PP; p++)
            for (int c = 0; c < Cp; c++) {
                float v = w_nhwc[((size_t)o * PP + p) * Cp + c];
                if (c >= C)
                    g_assert_cmpfloat(v, ==, 0.0f);
                got += (double)v * x_nhwc[p * Cp + c];
            }
        if (fabs(got - ref) > 1e-12 * mag)
            g_error("output %d: %.17g, want %.17g", o, got, ref);
    }
    g_rand_free(rand);
    g_free(w);
    g_free(x);
    g_free(x_nhwc);
    g_free(w_nhwc);
}

/* MobileNetV3's activations of vd_math.h (the CUDA kernels' arithmetic) against
 * torch's definitions written in float32 as the CPU backend's SE writes
 * hardsigmoid (min(max(x + 3, 0), 6) / 6; hardswish x * that before the / 6),
 * bit for bit over a sweep of [-8, 8] with the breakpoints, exact values at the
 * breakpoints, NaN propagated. */
static guint32 bits_of(float f)
{
    guint32 b;
    memcpy(&b, &f, sizeof b);
    return b;
}

static void test_mobilenet_activations(void)
{
    for (int i = -80000; i <= 80000; i++) {
        float x = (float)i * 1e-4f;
        float r6 = fminf(fmaxf(x + 3.0f, 0.0f), 6.0f);
        g_assert_cmpuint(bits_of(vd_math_hardsigmoid(x)), ==, bits_of(r6 / 6.0f));
        g_assert_cmpuint(bits_of(vd_math_hardswish(x)), ==, bits_of(x * r6 / 6.0f));
    }
    g_assert_cmpfloat(vd_math_hardswish(-3.0f), ==, 0.0f);
    g_assert_cmpfloat(vd_math_hardswish(-100.0f), ==, 0.0f);
    g_assert_cmpfloat(vd_math_hardswish(3.0f), ==, 3.0f);
    g_assert_cmpfloat(vd_math_hardswish(100.0f), ==, 100.0f);
    g_assert_cmpfloat(vd_math_hardsigmoid(0.0f), ==, 0.5f);
    g_assert_cmpfloat(vd_math_hardsigmoid(-3.0f), ==, 0.0f);
    g_assert_cmpfloat(vd_math_hardsigmoid(3.0f), ==, 1.0f);
    g_assert_true(isnan(vd_math_hardswish(NAN)));
    g_assert_true(isnan(vd_math_hardsigmoid(NAN)));
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/ops/iou", test_iou);
    g_test_add_func("/ops/mobilenet-activations", test_mobilenet_activations);
    g_test_add_func("/ops/nms/ties", test_nms_ties);
    g_test_add_func("/ops/nms/threshold-strict", test_nms_threshold_strict);
    g_test_add_func("/ops/nms/suppressed-do-not-suppress", test_nms_suppressed_do_not_suppress);
    g_test_add_func("/ops/nms/empty", test_nms_empty);
    g_test_add_func("/ops/nms/batched", test_batched_nms);
    g_test_add_func("/ops/nms/random-vs-reference", test_nms_random_against_reference);
    g_test_add_func("/ops/topk/ties", test_topk);
    g_test_add_func("/ops/topk/random", test_topk_random);
    g_test_add_func("/ops/anchors/cell-table", test_cell_anchors_table);
    g_test_add_func("/ops/anchors/half-even", test_cell_anchor_half_even);
    g_test_add_func("/ops/anchors/grid-pool-level", test_grid_anchors_pool_level);
    g_test_add_func("/ops/decode/basic", test_decode);
    g_test_add_func("/ops/decode/clip", test_decode_clip);
    g_test_add_func("/ops/clip-boxes", test_clip_boxes);
    g_test_add_func("/ops/roi-level", test_roi_level);
    g_test_add_func("/ops/roi-align/hand", test_roi_align_hand);
    g_test_add_func("/ops/roi-align/small-roi", test_roi_align_small_roi);
    g_test_add_func("/ops/roi-align/edges", test_roi_align_edges);
    g_test_add_func("/ops/roi-align/constant", test_roi_align_constant);
    g_test_add_func("/ops/roi-align/scatter", test_roi_align_scatter);
    g_test_add_func("/ops/roi-align/adaptive", test_roi_align_adaptive);
    g_test_add_func("/ops/roi-align/divides-by-count", test_roi_align_divides_by_count);
    g_test_add_func("/ops/roi-align/random-vs-reference", test_roi_align_random_against_reference);
    g_test_add_func("/ops/roi-align-backward/hand", test_roi_align_backward_hand);
    g_test_add_func("/ops/roi-align-backward/adjoint", test_roi_align_backward_adjoint);
    g_test_add_func("/ops/roi-align-backward/threads", test_roi_align_backward_threads);
    g_test_add_func("/ops/roi-align-backward/errors", test_roi_align_backward_errors);
    g_test_add_func("/ops/softmax", test_softmax);
    g_test_add_func("/ops/expf-sleef", test_expf_sleef);
    g_test_add_func("/ops/sigmoid", test_sigmoid);
    g_test_add_func("/ops/score-logit-floor", test_score_logit_floor);
    g_test_add_func("/ops/half", test_half);
    g_test_add_func("/ops/transform-sizes", test_transform_sizes);
    g_test_add_func("/ops/resize-source", test_resize_source);
    g_test_add_func("/ops/mask-deconv-as-1x1", test_mask_deconv_as_1x1);
    g_test_add_func("/ops/fc6-weight-to-nhwc", test_fc6_weight_to_nhwc);
    return g_test_run();
}
