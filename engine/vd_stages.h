/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Internal: the stages of a frame, as both backends time them and
 * vd_context_stage_times() names them. Not installed. */
#ifndef VD_STAGES_H
#define VD_STAGES_H

#include <glib.h>

G_BEGIN_DECLS

/* In running order: a model without masks or keypoints stops after
 * VD_STAGE_POSTPROCESS; one with keypoints goes on with VD_STAGE_KEYPOINT_HEAD.
 * The names (vd_stage_name()) are part of the interface: vd-detect --stages
 * prints them and the element tests and the tools parse them. */
typedef enum {
    VD_STAGE_PREPROCESS,
    VD_STAGE_BACKBONE,
    VD_STAGE_FPN,
    VD_STAGE_RPN,
    VD_STAGE_ROI_ALIGN,
    VD_STAGE_BOX_HEAD,
    VD_STAGE_POSTPROCESS,
    VD_STAGE_MASK_HEAD, /* its RoIAlign included */
    VD_STAGE_PASTE_MASKS,
    VD_STAGE_KEYPOINT_HEAD, /* Keypoint R-CNN (no masks): its RoIAlign included */
    VD_STAGE_KEYPOINTS,     /* heatmaps_to_keypoints and the rescale */
    VD_N_STAGES
} vd_stage;

/* The one name table (vd_context.c), indexed by vd_stage. */
extern const char *const vd_stage_names[VD_N_STAGES];

static inline const char *vd_stage_name(vd_stage stage)
{
    return (unsigned)stage < VD_N_STAGES ? vd_stage_names[stage] : "unknown";
}

G_END_DECLS

#endif /* VD_STAGES_H */
