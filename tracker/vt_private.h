/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* visiontrack core internals, shared by its sources and its unit tests. */
#ifndef VT_PRIVATE_H
#define VT_PRIVATE_H

#include "vt_tracker.h"

G_BEGIN_DECLS

/* Constant-velocity Kalman filter of a box, ByteTrack's parametrisation: state
 * (cx, cy, a, h, vcx, vcy, va, vh) with a = w / h, one step per frame, process
 * and measurement noise proportional to the height. */
typedef struct {
    double mean[8];
    double cov[8 * 8]; /* row-major */
} vt_kalman;

/* Starts a filter at the box (x1, y1, x2, y2), which must have w, h > 0. */
void vt_kalman_init(vt_kalman *kf, const float box[4]);
/* One frame ahead. */
void vt_kalman_predict(vt_kalman *kf);
/* Corrects with a measured box (w, h > 0); false (filter unchanged) when the
 * innovation covariance is not positive definite. */
bool vt_kalman_update(vt_kalman *kf, const float box[4]);
/* The filter's box; a degenerate state gives a box of at least 1e-3 in size. */
void vt_kalman_box(const vt_kalman *kf, float box[4]);

/* Beyond this many rows and columns together, vt_assign() is greedy: the
 * optimal method's O((rows + cols)^3) time and O((rows + cols)^2) memory would
 * stall a frame (its time at 256: tools/bench/CPU.md, "Figures behind choices in
 * the code"). */
#define VT_ASSIGN_OPTIMAL_MAX 256

/* Optimal assignment of @n_rows rows to @n_cols columns of @cost (row-major,
 * n_rows x n_cols) where an unassigned row or column costs @unmatched_cost / 2,
 * so a pair is only assigned when its cost is below @unmatched_cost. Costs that
 * are not finite never match. @row_to_col (n_rows) receives each row's column
 * or -1. Allocates O((n_rows + n_cols)^2). Above VT_ASSIGN_OPTIMAL_MAX rows and
 * columns, vt_assign_greedy() instead. */
void vt_assign(const double *cost, size_t n_rows, size_t n_cols, double unmatched_cost,
               int *row_to_col);

/* The pairs below @unmatched_cost taken cheapest first (ties by row, then
 * column), each row and column once: what IoU trackers do. */
void vt_assign_greedy(const double *cost, size_t n_rows, size_t n_cols, double unmatched_cost,
                      int *row_to_col);

G_END_DECLS

#endif /* VT_PRIVATE_H */
