/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Constant-velocity Kalman filter of a box (see vt_private.h). The matrices are
 * small and structured (F = [I dt.I; 0 I], H = [I 0]), so the products are
 * written out for them instead of general matrix routines. */
#include "vt_private.h"

#include <math.h>
#include <string.h>

/* ByteTrack's (and DeepSORT's) noise weights relative to the box height */
#define STD_WEIGHT_POSITION (1.0 / 20.0)
#define STD_WEIGHT_VELOCITY (1.0 / 160.0)
#define MIN_HEIGHT 1e-3

static void box_to_measurement(const float box[4], double z[4])
{
    double w = (double)box[2] - box[0];
    double h = (double)box[3] - box[1];

    z[0] = box[0] + w / 2.0;
    z[1] = box[1] + h / 2.0;
    z[2] = w / h;
    z[3] = h;
}

void vt_kalman_init(vt_kalman *kf, const float box[4])
{
    double z[4], std[8], h;
    int i;

    box_to_measurement(box, z);
    h = z[3];
    memset(kf, 0, sizeof(*kf));
    for (i = 0; i < 4; i++)
        kf->mean[i] = z[i];
    std[0] = std[1] = std[3] = 2.0 * STD_WEIGHT_POSITION * h;
    std[2] = 1e-2;
    std[4] = std[5] = std[7] = 10.0 * STD_WEIGHT_VELOCITY * h;
    std[6] = 1e-5;
    for (i = 0; i < 8; i++)
        kf->cov[i * 8 + i] = std[i] * std[i];
}

void vt_kalman_predict(vt_kalman *kf)
{
    double *P = kf->cov;
    double h = fmax(kf->mean[3], MIN_HEIGHT);
    double q[8];
    double FP[64];
    int i, j;

    q[0] = q[1] = q[3] = STD_WEIGHT_POSITION * h;
    q[2] = 1e-2;
    q[4] = q[5] = q[7] = STD_WEIGHT_VELOCITY * h;
    q[6] = 1e-5;

    for (i = 0; i < 4; i++)
        kf->mean[i] += kf->mean[i + 4];

    /* F P: rows 0..3 gain rows 4..7 */
    memcpy(FP, P, sizeof(FP));
    for (i = 0; i < 4; i++)
        for (j = 0; j < 8; j++)
            FP[i * 8 + j] += P[(i + 4) * 8 + j];
    /* (F P) F^T: columns 0..3 gain columns 4..7 */
    for (i = 0; i < 8; i++)
        for (j = 0; j < 4; j++)
            FP[i * 8 + j] += FP[i * 8 + j + 4];
    memcpy(P, FP, sizeof(FP));
    for (i = 0; i < 8; i++)
        P[i * 8 + i] += q[i] * q[i];
}

/* Cholesky factor of a 4x4 symmetric matrix (lower, in place); false when it is
 * not positive definite. */
static bool cholesky4(double S[16])
{
    int i, j, k;

    for (j = 0; j < 4; j++) {
        double d = S[j * 4 + j];

        for (k = 0; k < j; k++)
            d -= S[j * 4 + k] * S[j * 4 + k];
        if (!(d > 0.0) || !isfinite(d))
            return false;
        d = sqrt(d);
        S[j * 4 + j] = d;
        for (i = j + 1; i < 4; i++) {
            double v = S[i * 4 + j];

            for (k = 0; k < j; k++)
                v -= S[i * 4 + k] * S[j * 4 + k];
            S[i * 4 + j] = v / d;
        }
        for (i = 0; i < j; i++)
            S[i * 4 + j] = 0.0;
    }
    return true;
}

/* Solves L L^T x = b in place for the Cholesky factor L. */
static void cholesky4_solve(const double L[16], double b[4])
{
    int i, k;

    for (i = 0; i < 4; i++) {
        for (k = 0; k < i; k++)
            b[i] -= L[i * 4 + k] * b[k];
        b[i] /= L[i * 4 + i];
    }
    for (i = 3; i >= 0; i--) {
        for (k = i + 1; k < 4; k++)
            b[i] -= L[k * 4 + i] * b[k];
        b[i] /= L[i * 4 + i];
    }
}

bool vt_kalman_update(vt_kalman *kf, const float box[4])
{
    double *P = kf->cov;
    double z[4], r[4], S[16], innovation[4];
    double K[8 * 4]; /* P H^T S^-1 */
    double h = fmax(kf->mean[3], MIN_HEIGHT);
    double newP[64];
    int i, j, k;

    box_to_measurement(box, z);
    r[0] = r[1] = r[3] = STD_WEIGHT_POSITION * h;
    r[2] = 1e-1;

    /* S = H P H^T + R: the top-left block of P */
    for (i = 0; i < 4; i++)
        for (j = 0; j < 4; j++)
            S[i * 4 + j] = P[i * 8 + j] + (i == j ? r[i] * r[i] : 0.0);
    if (!cholesky4(S))
        return false;

    /* K = P H^T S^-1, one row at a time: S is symmetric, so row i of K solves
     * S k = (P H^T)_i^T */
    for (i = 0; i < 8; i++) {
        double row[4];

        for (j = 0; j < 4; j++)
            row[j] = P[i * 8 + j];
        cholesky4_solve(S, row);
        for (j = 0; j < 4; j++)
            K[i * 4 + j] = row[j];
    }

    for (j = 0; j < 4; j++)
        innovation[j] = z[j] - kf->mean[j];
    for (i = 0; i < 8; i++) {
        double d = 0.0;

        for (j = 0; j < 4; j++)
            d += K[i * 4 + j] * innovation[j];
        kf->mean[i] += d;
    }

    /* P -= K H P = K (rows 0..3 of P) */
    for (i = 0; i < 8; i++)
        for (j = 0; j < 8; j++) {
            double d = 0.0;

            for (k = 0; k < 4; k++)
                d += K[i * 4 + k] * P[k * 8 + j];
            newP[i * 8 + j] = P[i * 8 + j] - d;
        }
    /* symmetric against rounding */
    for (i = 0; i < 8; i++)
        for (j = 0; j < i; j++)
            newP[i * 8 + j] = newP[j * 8 + i] = 0.5 * (newP[i * 8 + j] + newP[j * 8 + i]);
    memcpy(P, newP, sizeof(newP));
    return true;
}

void vt_kalman_box(const vt_kalman *kf, float box[4])
{
    double h = fmax(kf->mean[3], MIN_HEIGHT);
    double w = fmax(kf->mean[2] * h, MIN_HEIGHT);

    box[0] = (float)(kf->mean[0] - w / 2.0);
    box[1] = (float)(kf->mean[1] - h / 2.0);
    box[2] = (float)(kf->mean[0] + w / 2.0);
    box[3] = (float)(kf->mean[1] + h / 2.0);
}
