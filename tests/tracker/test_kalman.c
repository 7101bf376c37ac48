/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* vt_kalman (tracker/vt_kalman.c): the constant-velocity filter follows a box
 * moving at constant velocity, predicts it ahead, keeps a symmetric positive
 * covariance, and survives degenerate measurements. */
#include "vt_private.h"

#include <math.h>

static void box_at(int frame, float box[4])
{
    /* 40x60 box moving by (+3, -2) pixels per frame */
    box[0] = 100.0f + 3.0f * frame;
    box[1] = 200.0f - 2.0f * frame;
    box[2] = box[0] + 40.0f;
    box[3] = box[1] + 60.0f;
}

static void test_constant_velocity(void)
{
    vt_kalman kf;
    float box[4], predicted[4];
    int frame, k;

    box_at(0, box);
    vt_kalman_init(&kf, box);
    for (frame = 1; frame <= 30; frame++) {
        vt_kalman_predict(&kf);
        box_at(frame, box);
        g_assert_true(vt_kalman_update(&kf, box));
    }
    /* the velocity is learnt: 10 frames of prediction alone land on the box
     * within half a pixel (noise-free measurements) */
    for (k = 1; k <= 10; k++)
        vt_kalman_predict(&kf);
    vt_kalman_box(&kf, predicted);
    box_at(40, box);
    for (k = 0; k < 4; k++)
        g_assert_cmpfloat_with_epsilon(predicted[k], box[k], 0.5);
    g_assert_cmpfloat_with_epsilon(kf.mean[4], 3.0, 0.05);
    g_assert_cmpfloat_with_epsilon(kf.mean[5], -2.0, 0.05);
}

static void test_covariance_stays_valid(void)
{
    vt_kalman kf;
    float box[4];
    int frame, i, j;

    box_at(0, box);
    vt_kalman_init(&kf, box);
    for (frame = 1; frame <= 200; frame++) {
        vt_kalman_predict(&kf);
        if (frame % 3 == 0) {
            box_at(frame, box);
            g_assert_true(vt_kalman_update(&kf, box));
        }
        for (i = 0; i < 8; i++) {
            g_assert_cmpfloat(kf.cov[i * 8 + i], >, 0.0);
            for (j = 0; j < 8; j++)
                g_assert_cmpfloat_with_epsilon(kf.cov[i * 8 + j], kf.cov[j * 8 + i],
                                               1e-9 * (1.0 + fabs(kf.cov[i * 8 + j])));
        }
    }
}

static void test_degenerate(void)
{
    vt_kalman kf;
    float box[4] = {10.0f, 10.0f, 20.0f, 20.0f};
    float out[4];
    int k;

    vt_kalman_init(&kf, box);
    kf.mean[3] = -5.0; /* a height driven below 0 by a shrinking velocity */
    vt_kalman_box(&kf, out);
    g_assert_cmpfloat(out[2], >, out[0]);
    g_assert_cmpfloat(out[3], >, out[1]);
    for (k = 0; k < 4; k++)
        g_assert_true(isfinite(out[k]));
    /* a covariance that is not positive definite is refused, the state kept */
    kf.cov[0] = -1.0;
    g_assert_false(vt_kalman_update(&kf, box));
    g_assert_cmpfloat(kf.mean[3], ==, -5.0);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/kalman/constant-velocity", test_constant_velocity);
    g_test_add_func("/kalman/covariance", test_covariance_stays_valid);
    g_test_add_func("/kalman/degenerate", test_degenerate);
    return g_test_run();
}
