/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "visiondetect/vd.h"

G_DEFINE_QUARK(vd - error - quark, vd_error)
