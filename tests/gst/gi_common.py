# SPDX-License-Identifier: LGPL-2.1-or-later
"""What the Python element tests (test_analytics.py, test_meta_gi.py) share:
GStreamer's own metas read through its introspection data. Imported after the
test has required GstVideo 1.0."""
from gi.repository import GstVideo


def roi_metas(buf):
    """{id: ROI meta} of @buf, through GstVideo's introspection data (ids from
    0 up, until as many as the buffer holds are found or id 10000)."""
    api = GstVideo.VideoRegionOfInterestMeta.get_info().api
    count = buf.get_n_meta(api)
    rois = {}
    roi_id = 0
    while len(rois) < count and roi_id < 10000:
        roi = GstVideo.buffer_get_video_region_of_interest_meta_id(buf, roi_id)
        if roi is not None:
            rois[roi_id] = roi
        roi_id += 1
    return rois
