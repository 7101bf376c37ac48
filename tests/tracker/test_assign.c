/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* vt_assign (tracker/vt_assign.c): the optimal assignment with an unmatched cost,
 * against exhaustive search over every partial matching of small matrices. */
#include "vt_private.h"

#include <math.h>

/* the cost of an assignment as vt_assign defines it: pairs plus u/2 for each
 * unassigned row and column */
static double assignment_cost(const double *cost, int n_rows, int n_cols, double u,
                              const int *row_to_col)
{
    double total = 0.0;
    int matched = 0, i;

    for (i = 0; i < n_rows; i++)
        if (row_to_col[i] >= 0) {
            total += cost[i * n_cols + row_to_col[i]];
            matched++;
        }
    return total + u / 2.0 * (n_rows - matched) + u / 2.0 * (n_cols - matched);
}

/* every partial matching; pairs only below u and finite (the others are never
 * worth taking: leaving both unmatched costs u) */
static void best_rec(const double *cost, int n_rows, int n_cols, double u, int row, bool *col_used,
                     int *current, double *best)
{
    int j;

    if (row == n_rows) {
        double c = assignment_cost(cost, n_rows, n_cols, u, current);
        if (c < *best)
            *best = c;
        return;
    }
    current[row] = -1;
    best_rec(cost, n_rows, n_cols, u, row + 1, col_used, current, best);
    for (j = 0; j < n_cols; j++) {
        double c = cost[row * n_cols + j];
        if (col_used[j] || !isfinite(c) || c >= u)
            continue;
        col_used[j] = true;
        current[row] = j;
        best_rec(cost, n_rows, n_cols, u, row + 1, col_used, current, best);
        col_used[j] = false;
    }
    current[row] = -1;
}

static void test_random_against_exhaustive(void)
{
    GRand *rand = g_rand_new_with_seed(13);
    int trial;

    for (trial = 0; trial < 3000; trial++) {
        int n_rows = g_rand_int_range(rand, 0, 7), n_cols = g_rand_int_range(rand, 0, 7);
        double u = g_rand_double_range(rand, 0.2, 1.2);
        double cost[36], best = INFINITY;
        int row_to_col[6], current[6];
        bool col_used[6] = {false}, col_seen[6] = {false};
        int i;

        for (i = 0; i < n_rows * n_cols; i++) {
            double r = g_rand_double(rand);
            /* some infinities (class mismatch), some NaN (never matched), ties */
            cost[i] = r < 0.1 ? INFINITY : r < 0.13 ? NAN : r < 0.3 ? 0.5 : g_rand_double(rand);
        }
        vt_assign(cost, n_rows, n_cols, u, row_to_col);
        for (i = 0; i < n_rows; i++) {
            int j = row_to_col[i];
            if (j < 0)
                continue;
            g_assert_cmpint(j, <, n_cols);
            g_assert_false(col_seen[j]);
            col_seen[j] = true;
            g_assert_true(isfinite(cost[i * n_cols + j]));
            g_assert_cmpfloat(cost[i * n_cols + j], <, u);
        }
        best_rec(cost, n_rows, n_cols, u, 0, col_used, current, &best);
        /* sums of at most 12 terms of magnitude <= 1: 1e-9 is far above rounding */
        g_assert_cmpfloat_with_epsilon(assignment_cost(cost, n_rows, n_cols, u, row_to_col), best,
                                       1e-9);
    }
    g_rand_free(rand);
}

/* a greedy matcher takes (0,0) at 0.1 and leaves row 1 unmatched; the optimum
 * swaps them */
static void test_better_than_greedy(void)
{
    const double cost[] = {0.1, 0.2, 0.3, INFINITY};
    int row_to_col[2];

    vt_assign(cost, 2, 2, 0.8, row_to_col);
    g_assert_cmpint(row_to_col[0], ==, 1);
    g_assert_cmpint(row_to_col[1], ==, 0);
}

static void test_threshold_is_strict(void)
{
    const double cost[] = {0.8, 0.79};
    int row_to_col[2];

    vt_assign(cost, 2, 1, 0.8, row_to_col);
    g_assert_cmpint(row_to_col[0], ==, -1);
    g_assert_cmpint(row_to_col[1], ==, 0);
}

static void test_empty_and_rectangular(void)
{
    double cost[40];
    int row_to_col[8], i;

    vt_assign(NULL, 0, 5, 0.5, row_to_col);
    row_to_col[0] = 7;
    vt_assign(NULL, 1, 0, 0.5, row_to_col);
    g_assert_cmpint(row_to_col[0], ==, -1);

    /* 8 rows, 5 columns: column j is cheap for row j only */
    for (i = 0; i < 40; i++)
        cost[i] = (i / 5 == i % 5) ? 0.0 : 0.9;
    vt_assign(cost, 8, 5, 0.5, row_to_col);
    for (i = 0; i < 8; i++)
        g_assert_cmpint(row_to_col[i], ==, i < 5 ? i : -1);
}

/* a moderately large problem stays fast and consistent (no quadratic blow-up of
 * the potentials with infinite entries) */
static void test_large(void)
{
    enum { N = 120 };
    double *cost = g_new(double, N *N);
    int row_to_col[N], i, j;

    for (i = 0; i < N; i++)
        for (j = 0; j < N; j++)
            cost[i * N + j] = (j == (i * 7) % N) ? 0.01 : INFINITY;
    vt_assign(cost, N, N, 0.8, row_to_col);
    for (i = 0; i < N; i++)
        g_assert_cmpint(row_to_col[i], ==, (i * 7) % N);
    g_free(cost);
}

/* greedy: cheapest pair first; above VT_ASSIGN_OPTIMAL_MAX vt_assign is greedy
 * too and still gives the obvious matching of a large sparse problem */
static void test_greedy(void)
{
    const double cost[] = {0.1, 0.2, 0.3, INFINITY};
    enum { N = 400 };
    double *big = g_new(double, N *N);
    int row_to_col[N], i, j;

    vt_assign_greedy(cost, 2, 2, 0.8, row_to_col);
    g_assert_cmpint(row_to_col[0], ==, 0);
    g_assert_cmpint(row_to_col[1], ==, -1);

    g_assert_cmpint(2 * N, >, VT_ASSIGN_OPTIMAL_MAX);
    for (i = 0; i < N; i++)
        for (j = 0; j < N; j++)
            big[i * N + j] = (j == (i * 3) % N || j == (i * 3 + 1) % N)
                                 ? (j == (i * 3) % N ? 0.1 : 0.5)
                                 : INFINITY;
    vt_assign(big, N, N, 0.8, row_to_col);
    for (i = 0; i < N; i++) {
        j = row_to_col[i];
        g_assert_cmpint(j, >=, -1);
        if (j >= 0)
            g_assert_true(isfinite(big[i * N + j]));
    }
    /* 400 and 3 are coprime: every row's 0.1 column is its own */
    for (i = 0; i < N; i++)
        g_assert_cmpint(row_to_col[i], ==, (i * 3) % N);
    g_free(big);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/assign/random-vs-exhaustive", test_random_against_exhaustive);
    g_test_add_func("/assign/better-than-greedy", test_better_than_greedy);
    g_test_add_func("/assign/threshold-strict", test_threshold_is_strict);
    g_test_add_func("/assign/empty-and-rectangular", test_empty_and_rectangular);
    g_test_add_func("/assign/large", test_large);
    g_test_add_func("/assign/greedy", test_greedy);
    return g_test_run();
}
