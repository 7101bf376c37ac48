/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* vd_math_rank_key (common/vd_math.h), the unsigned keys the CUDA RPN top-k
 * sorts, against the CPU's ranking (vd_topk): a stable descending sort of the
 * keys must give vd_topk's order index for index, on values poisoned with NaN
 * of both signs and several payloads, infinities, both zeros, denormals and
 * runs of ties; and each key must map back to its value (NaN to a NaN, -0 to
 * +0). Host only: runs without a GPU (suite engine), so the order the device
 * relies on is checked on every build. */
#include "vd_config.h"

#include "cpu/vd_cpu_ops.h"
#include "vd_math.h"

#include <float.h>
#include <glib.h>
#include <math.h>
#include <string.h>

static float from_bits(uint32_t bits)
{
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static uint32_t to_bits(float f)
{
    uint32_t bits;
    memcpy(&bits, &f, 4);
    return bits;
}

static const unsigned int *sort_keys;

/* descending key, ties by ascending index: a stable descending sort */
static int compare_ranked(const void *a, const void *b)
{
    int i = *(const int *)a, j = *(const int *)b;
    if (sort_keys[i] != sort_keys[j])
        return sort_keys[i] > sort_keys[j] ? -1 : 1;
    return i < j ? -1 : i > j;
}

static void check_order(const float *values, int n, const char *what)
{
    unsigned int *keys = g_new(unsigned int, n);
    int *by_key = g_new(int, n), *want = g_new(int, n);
    for (int i = 0; i < n; i++) {
        keys[i] = vd_math_rank_key(values[i]);
        by_key[i] = i;
    }
    sort_keys = keys;
    qsort(by_key, (size_t)n, sizeof(int), compare_ranked);
    g_assert_cmpint(vd_topk(values, n, n, want), ==, n);
    int wrong = 0;
    for (int j = 0; j < n; j++)
        if (by_key[j] != want[j] && wrong++ < 5)
            g_test_message("%s, rank %d: key order gives %d (%g, bits %08x), vd_topk %d (%g, "
                           "bits %08x)",
                           what, j, by_key[j], (double)values[by_key[j]],
                           to_bits(values[by_key[j]]), want[j], (double)values[want[j]],
                           to_bits(values[want[j]]));
    g_assert_cmpint(wrong, ==, 0);
    g_free(keys);
    g_free(by_key);
    g_free(want);
}

static void test_edge_values(void)
{
    const float values[] = {
        1.0f,          NAN,           -0.0f,           0.0f,          INFINITY,
        -INFINITY,     from_bits(0xffc00000u),  /* -NaN, x86's 0 * inf */
        from_bits(0x7f800001u),                 /* signalling-pattern NaN payload */
        from_bits(0xff812345u),                 /* negative NaN with payload */
        -1.0f,         1.0f,          0.0f,           -0.0f,         from_bits(0x00000001u),
        from_bits(0x80000001u),       FLT_MAX,        -FLT_MAX,      FLT_MIN,
        -FLT_MIN,      NAN,           2.5f,           -2.5f,         INFINITY,
        -INFINITY,
    };
    check_order(values, (int)G_N_ELEMENTS(values), "edge values");
}

static void test_random_poisoned(void)
{
    GRand *rand = g_rand_new_with_seed(37);
    const float bad[6] = {NAN, from_bits(0xffc00000u), INFINITY, -INFINITY, -0.0f, 0.0f};
    for (int round = 0; round < 20; round++) {
        int n = 1 + g_rand_int_range(rand, 0, 3000);
        float *values = g_new(float, n);
        for (int i = 0; i < n; i++) {
            /* quantised: ties */
            values[i] = floorf((float)g_rand_double_range(rand, -8.0, 8.0) * 4.0f) / 4.0f;
            if (g_rand_int_range(rand, 0, 10) == 0)
                values[i] = bad[g_rand_int_range(rand, 0, 6)];
            else if (g_rand_int_range(rand, 0, 50) == 0)
                values[i] = from_bits(0x7f800000u | (uint32_t)g_rand_int_range(rand, 1, 1 << 22) |
                                      (g_rand_boolean(rand) ? 0x80000000u : 0));
        }
        check_order(values, n, "random poisoned");
        g_free(values);
    }
    g_rand_free(rand);
}

static void test_round_trip(void)
{
    GRand *rand = g_rand_new_with_seed(38);
    for (int i = 0; i < 100000; i++) {
        float v = from_bits(g_rand_int(rand));
        float back = vd_math_rank_key_value(vd_math_rank_key(v));
        if (isnan(v))
            g_assert_true(isnan(back));
        else if (v == 0.0f)
            g_assert_cmpuint(to_bits(back), ==, 0u);
        else
            g_assert_cmpuint(to_bits(back), ==, to_bits(v));
    }
    g_assert_cmpuint(vd_math_rank_key(NAN), ==, 0xffffffffu);
    g_assert_cmpuint(vd_math_rank_key(from_bits(0xffc00000u)), ==, 0xffffffffu);
    g_assert_cmpuint(vd_math_rank_key(-0.0f), ==, vd_math_rank_key(0.0f));
    g_assert_cmpuint(vd_math_rank_key(INFINITY), <, vd_math_rank_key(NAN));
    g_assert_cmpuint(vd_math_rank_key(-INFINITY), >, 0u);
    g_rand_free(rand);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/rank-key/edge-values", test_edge_values);
    g_test_add_func("/rank-key/random-poisoned", test_random_poisoned);
    g_test_add_func("/rank-key/round-trip", test_round_trip);
    return g_test_run();
}
