#include "visiondetect/vd.h"

G_DEFINE_QUARK(vd-error-quark, vd_error)
