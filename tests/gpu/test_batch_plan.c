/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The CUDA batch plan's size rule (vd_batch_plan_slots, vd_cuda_private.h):
 * grows at once to a larger batch, shrinks to the power of two of the largest
 * small batch after VD_BATCH_SHRINK_AFTER batches in a row of at most half
 * its slots, and keeps its size when sizes alternate. Host only (suite engine,
 * CUDA builds): no device needed. */
#include "vd_config.h"

#include "cuda/vd_cuda_private.h"

#include <glib.h>

#define MAX_SLOTS 32

/* Runs @n_batches batches of the sizes in @sizes (cycled) from a plan of
 * @slots, rebuilding it as told; returns the final slots and, in *@rebuilds,
 * how many times it changed. */
static int run(int slots, const int *sizes, int n_sizes, int n_batches, int *rebuilds)
{
    vd_batch_shrink shrink = {0, 0};
    *rebuilds = 0;
    for (int b = 0; b < n_batches; b++) {
        int want = vd_batch_plan_slots(&shrink, slots, sizes[b % n_sizes], MAX_SLOTS);
        g_assert_cmpint(want, >=, sizes[b % n_sizes]);
        g_assert_cmpint(want, <=, MAX_SLOTS);
        *rebuilds += want != slots;
        slots = want;
    }
    return slots;
}

static void test_grows(void)
{
    int rebuilds;
    const int five[] = {5}, nine[] = {9}, two[] = {2}, thirty_two[] = {32};
    g_assert_cmpint(run(0, five, 1, 1, &rebuilds), ==, 8);
    g_assert_cmpint(run(8, nine, 1, 1, &rebuilds), ==, 16);
    g_assert_cmpint(rebuilds, ==, 1);
    g_assert_cmpint(run(0, two, 1, 1, &rebuilds), ==, 2);
    g_assert_cmpint(run(16, thirty_two, 1, 1, &rebuilds), ==, 32);
}

static void test_shrinks_after_small_batches(void)
{
    int rebuilds;
    /* one batch of 32, then batches of 2 and 3: the plan stays for
     * VD_BATCH_SHRINK_AFTER - 1 of them, then becomes 4 (3 fits in 4) */
    const int small[] = {2, 3, 2};
    g_assert_cmpint(run(32, small, 3, VD_BATCH_SHRINK_AFTER - 1, &rebuilds), ==, 32);
    g_assert_cmpint(rebuilds, ==, 0);
    g_assert_cmpint(run(32, small, 3, VD_BATCH_SHRINK_AFTER, &rebuilds), ==, 4);
    g_assert_cmpint(rebuilds, ==, 1);
    /* and stays at 4 with batches of 3 (more than half of 4) */
    const int three[] = {3};
    g_assert_cmpint(run(4, three, 1, 10 * VD_BATCH_SHRINK_AFTER, &rebuilds), ==, 4);
    g_assert_cmpint(rebuilds, ==, 0);
    /* batches of exactly half shrink too: 16 of 32 -> 16 */
    const int sixteen[] = {16};
    g_assert_cmpint(run(32, sixteen, 1, VD_BATCH_SHRINK_AFTER, &rebuilds), ==, 16);
    /* a plan of 2 never shrinks */
    const int two[] = {2};
    g_assert_cmpint(run(2, two, 1, 10 * VD_BATCH_SHRINK_AFTER, &rebuilds), ==, 2);
    g_assert_cmpint(rebuilds, ==, 0);
}

static void test_alternating_sizes_keep_the_plan(void)
{
    int rebuilds;
    /* a full batch now and then resets the count: no thrashing */
    int sizes[VD_BATCH_SHRINK_AFTER];
    for (int i = 0; i < VD_BATCH_SHRINK_AFTER; i++)
        sizes[i] = i == VD_BATCH_SHRINK_AFTER - 1 ? 17 : 2;
    g_assert_cmpint(run(32, sizes, VD_BATCH_SHRINK_AFTER, 20 * VD_BATCH_SHRINK_AFTER, &rebuilds),
                    ==, 32);
    g_assert_cmpint(rebuilds, ==, 0);
    const int alternating[] = {8, 2};
    g_assert_cmpint(run(8, alternating, 2, 20 * VD_BATCH_SHRINK_AFTER, &rebuilds), ==, 8);
    g_assert_cmpint(rebuilds, ==, 0);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/batch-plan/grows", test_grows);
    g_test_add_func("/batch-plan/shrinks", test_shrinks_after_small_batches);
    g_test_add_func("/batch-plan/alternating", test_alternating_sizes_keep_the_plan);
    return g_test_run();
}
