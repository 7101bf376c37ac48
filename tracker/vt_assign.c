/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Optimal assignment (see vt_private.h): the Hungarian method with potentials
 * (shortest augmenting paths, O(n^3)) on the square matrix that lets every row
 * and column stay unmatched:
 *
 *              real columns (m)     dummy columns (n)
 *   real rows  cost[i][j]           u/2 on the diagonal, else never
 *   dummy rows u/2 on the diagonal  0
 *
 * A real row matched to its dummy column is unassigned; a real pair is chosen
 * only when it is cheaper than leaving both unmatched (u). This is what
 * ByteTrack's lapjv call with cost_limit does. */
#include "vt_private.h"

#include <math.h>
#include <stdlib.h>

/* large but far from overflow in the potentials' sums */
#define NEVER 1e12

void vt_assign(const double *cost, size_t n_rows, size_t n_cols, double unmatched_cost,
               int *row_to_col)
{
    const size_t n = n_rows + n_cols;
    double half = unmatched_cost / 2.0;
    double *a, *u, *v, *minv;
    size_t *p, *way;
    bool *used;
    size_t i, j;

    if (n > VT_ASSIGN_OPTIMAL_MAX) {
        vt_assign_greedy(cost, n_rows, n_cols, unmatched_cost, row_to_col);
        return;
    }
    for (i = 0; i < n_rows; i++)
        row_to_col[i] = -1;
    if (n_rows == 0 || n_cols == 0)
        return;
    if (!isfinite(half) || half < 0.0)
        half = 0.0;

    /* 1-based as the method is usually written: row and column 0 are the
     * augmenting path's virtual start */
    a = g_new(double, (n + 1) * (n + 1));
    u = g_new0(double, n + 1);
    v = g_new0(double, n + 1);
    minv = g_new(double, n + 1);
    p = g_new0(size_t, n + 1);
    way = g_new0(size_t, n + 1);
    used = g_new(bool, n + 1);

    for (i = 1; i <= n; i++)
        for (j = 1; j <= n; j++) {
            double c;

            if (i <= n_rows && j <= n_cols) {
                c = cost[(i - 1) * n_cols + (j - 1)];
                if (!isfinite(c) || c >= NEVER)
                    c = NEVER;
            } else if (i <= n_rows) {
                c = (j - n_cols == i) ? half : NEVER;
            } else if (j <= n_cols) {
                c = (i - n_rows == j) ? half : NEVER;
            } else {
                c = 0.0;
            }
            a[i * (n + 1) + j] = c;
        }

    for (i = 1; i <= n; i++) {
        size_t j0 = 0;

        p[0] = i;
        for (j = 0; j <= n; j++) {
            minv[j] = INFINITY;
            used[j] = false;
        }
        do {
            size_t i0 = p[j0], j1 = 0;
            double delta = INFINITY;

            used[j0] = true;
            for (j = 1; j <= n; j++) {
                if (used[j])
                    continue;
                double cur = a[i0 * (n + 1) + j] - u[i0] - v[j];
                if (cur < minv[j]) {
                    minv[j] = cur;
                    way[j] = j0;
                }
                if (minv[j] < delta) {
                    delta = minv[j];
                    j1 = j;
                }
            }
            /* every row has a finite column (its dummy), so j1 is set */
            for (j = 0; j <= n; j++) {
                if (used[j]) {
                    u[p[j]] += delta;
                    v[j] -= delta;
                } else {
                    minv[j] -= delta;
                }
            }
            j0 = j1;
        } while (p[j0] != 0);
        do {
            size_t j1 = way[j0];
            p[j0] = p[j1];
            j0 = j1;
        } while (j0 != 0);
    }

    for (j = 1; j <= n_cols; j++) {
        size_t row = p[j];

        if (row >= 1 && row <= n_rows && a[row * (n + 1) + j] < NEVER &&
            a[row * (n + 1) + j] < unmatched_cost)
            row_to_col[row - 1] = (int)(j - 1);
    }

    g_free(a);
    g_free(u);
    g_free(v);
    g_free(minv);
    g_free(p);
    g_free(way);
    g_free(used);
}

typedef struct {
    double cost;
    size_t row, col;
} pair;

static int compare_pairs(const void *a, const void *b)
{
    const pair *pa = a, *pb = b;

    if (pa->cost != pb->cost)
        return pa->cost < pb->cost ? -1 : 1;
    if (pa->row != pb->row)
        return pa->row < pb->row ? -1 : 1;
    return pa->col < pb->col ? -1 : (pa->col > pb->col);
}

void vt_assign_greedy(const double *cost, size_t n_rows, size_t n_cols, double unmatched_cost,
                      int *row_to_col)
{
    GArray *pairs = g_array_new(FALSE, FALSE, sizeof(pair));
    bool *col_used = g_new0(bool, n_cols + 1);
    size_t i, j;

    for (i = 0; i < n_rows; i++) {
        row_to_col[i] = -1;
        for (j = 0; j < n_cols; j++) {
            double c = cost[i * n_cols + j];

            if (isfinite(c) && c < unmatched_cost) {
                pair p = {c, i, j};
                g_array_append_val(pairs, p);
            }
        }
    }
    qsort(pairs->data, pairs->len, sizeof(pair), compare_pairs);
    for (i = 0; i < pairs->len; i++) {
        const pair *p = &g_array_index(pairs, pair, i);

        if (row_to_col[p->row] >= 0 || col_used[p->col])
            continue;
        row_to_col[p->row] = (int)p->col;
        col_used[p->col] = true;
    }
    g_array_unref(pairs);
    g_free(col_used);
}
