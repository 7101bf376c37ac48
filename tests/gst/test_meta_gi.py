#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The detection meta read from Python through GstVisionDetect-1.0's typelib.

videotestsrc pattern=ball ! visiondetect (the bundled shapes model, interval=3)
! visiontrack ! appsink: each buffer's GstVisionDetectMeta is read through the
typelib (frame size, inference status, every field of every detection through
get_n_detections/get_detection, the label through get_label) and checked
against what the pipeline itself says, read through GStreamer's own
introspection data:

- the meta's frame size is the caps' size (function and field agree);
- the status is INFERRED on every third frame (interval=3), SKIPPED_INTERVAL
  on the others, and its name is visionjson's;
- one entry per GstVideoRegionOfInterestMeta (found with
  GstVideo.buffer_get_video_region_of_interest_meta_id), same ROI id, and
  each field equal to the ROI meta's "detection" params: the box (the params
  are normalised: equal within 1e-9 pixel, double rounding), the confidence
  and label_id exactly, the label equal to the params' "label" and the ROI's
  roi_type, object_id to the params' "object_id" (0 without one) and to the
  "object_id" param's "id", tracked to the params' "tracked" (FALSE
  without one);
- over the run: detections on inferred frames, tracked boxes (tracked=TRUE,
  object id > 0) on skipped ones, at least one object id reused across frames;
- a buffer without the meta gives None, an index out of range FALSE;
- instance masks through the bindings: add_detection_with_mask with a
  GLib.Bytes (a wrong size refused), get_mask's bytes and rectangle, None for
  a detection without one, and the same after a copy of the buffer;
  vision_detections_from_buffer(_full) with a ROI meta for each detection:
  the detections' boxes and the masks (a VisionDetectionMask with the
  rectangle, the bytes and at(), None for the detection without one), the
  arrays freed without a double free (their elements are copied: the
  annotations say transfer container);
- keypoints through the bindings: set_keypoints with a list of floats (a
  length not a multiple of 3, an index out of range refused), get_keypoints'
  list, None for a detection without, and the same after a copy.

Exits 77 (skipped) only when the typelib was not built (no
GObject-Introspection at configure time), 1 on any mismatch.
"""
import os
import sys

TYPELIB_DIR = os.environ.get("VD_TEST_TYPELIB_DIR", "")
if os.environ.get("VD_TEST_HAVE_GIR") == "0":
    print("GstVisionDetect-1.0.typelib not built (introspection disabled or "
          "not found at configure time): skipped")
    sys.exit(77)
if not os.path.exists(os.path.join(TYPELIB_DIR, "GstVisionDetect-1.0.typelib")):
    print(f"FAIL: no GstVisionDetect-1.0.typelib in {TYPELIB_DIR!r}")
    sys.exit(1)

import gi  # noqa: E402

gi.require_version("GLib", "2.0")
gi.require_version("Gst", "1.0")
gi.require_version("GstApp", "1.0")
gi.require_version("GstVideo", "1.0")
gi.require_version("GstVisionDetect", "1.0")
from gi.repository import GLib, Gst, GstApp, GstVideo  # noqa: E402,F401
from gi.repository import GstVisionDetect  # noqa: E402

import gi_common  # noqa: E402

WIDTH, HEIGHT = 320, 240
FRAMES = 30
INTERVAL = 3
BOX_TOL = 1e-9  # pixels: x_min * width against the detector's double box

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def model_path():
    return os.path.join(os.environ.get("VD_TEST_SRCDIR", "."), "models",
                        "visiondetect-shapes.safetensors")


def roi_metas(buf):
    """Every ROI meta of buf, by id (gi_common.roi_metas), all of them found."""
    count = buf.get_n_meta(GstVideo.VideoRegionOfInterestMeta.get_info().api)
    rois = gi_common.roi_metas(buf)
    check(len(rois) == count, f"found {len(rois)} of {count} ROI metas by id")
    return rois


def expected_from_roi(roi):
    """The detection as the ROI meta's own params say it."""
    s = roi.get_param("detection")
    if s is None:
        return None
    e = {}
    for k in ("x_min", "y_min", "x_max", "y_max", "confidence"):
        ok, e[k] = s.get_double(k)
        check(ok, f"ROI {roi.id}: no double {k} in its params")
    ok, e["label_id"] = s.get_int("label_id")
    check(ok, f"ROI {roi.id}: no label_id")
    e["label"] = s.get_string("label")
    ok, e["object_id"] = s.get_int("object_id")
    if not ok:
        e["object_id"] = 0
    ok, e["tracked"] = s.get_boolean("tracked")
    if not ok:
        e["tracked"] = False
    o = roi.get_param("object_id")
    if o is not None:
        ok, oid = o.get_int("id")
        check(ok and oid == e["object_id"],
              f"ROI {roi.id}: object_id param {oid} != detection's {e['object_id']}")
    e["roi_type"] = GLib.quark_to_string(roi.roi_type)
    return e


def check_buffer(index, buf, stats):
    meta = GstVisionDetect.buffer_get_vision_detect_meta(buf)
    check(meta is not None, f"frame {index}: no GstVisionDetectMeta")
    if meta is None:
        return
    check(meta.get_width() == WIDTH and meta.get_height() == HEIGHT,
          f"frame {index}: meta size {meta.get_width()}x{meta.get_height()}")
    check(meta.width == meta.get_width() and meta.height == meta.get_height(),
          f"frame {index}: fields and accessors disagree on the size")

    inference = meta.get_inference()
    want = (GstVisionDetect.VisionDetectInference.INFERRED if index % INTERVAL == 0
            else GstVisionDetect.VisionDetectInference.SKIPPED_INTERVAL)
    check(inference == want, f"frame {index}: inference {inference}, want {want}")
    check(meta.inference == inference, f"frame {index}: inference field != accessor")
    name = GstVisionDetect.vision_detect_inference_name(inference)
    check(name == ("inferred" if index % INTERVAL == 0 else "interval"),
          f"frame {index}: inference name {name}")

    rois = roi_metas(buf)
    n = meta.get_n_detections()
    check(n == len(rois), f"frame {index}: {n} detections, {len(rois)} ROI metas")
    seen = set()
    for i in range(n):
        ok, d = meta.get_detection(i)
        check(ok, f"frame {index}: get_detection({i}) FALSE")
        if not ok:
            continue
        roi = rois.get(d.roi_id)
        check(roi is not None, f"frame {index}: detection {i}: no ROI meta {d.roi_id}")
        check(d.roi_id not in seen, f"frame {index}: ROI id {d.roi_id} twice")
        seen.add(d.roi_id)
        if roi is None:
            continue
        e = expected_from_roi(roi)
        check(e is not None, f"frame {index}: ROI {roi.id} without detection params")
        if e is None:
            continue
        where = f"frame {index} detection {i} (ROI {d.roi_id})"
        for name, got, exp in (("x", d.x, e["x_min"] * WIDTH),
                               ("y", d.y, e["y_min"] * HEIGHT),
                               ("x+w", d.x + d.w, e["x_max"] * WIDTH),
                               ("y+h", d.y + d.h, e["y_max"] * HEIGHT)):
            check(abs(got - exp) <= BOX_TOL, f"{where}: {name} {got} != {exp}")
        check(d.w > 0 and d.h > 0, f"{where}: empty box {d.w}x{d.h}")
        check(d.confidence == e["confidence"],
              f"{where}: confidence {d.confidence} != {e['confidence']}")
        check(0.0 < d.confidence <= 1.0, f"{where}: confidence {d.confidence}")
        check(d.label_id == e["label_id"], f"{where}: label_id {d.label_id} != {e['label_id']}")
        check(d.label_id >= 1, f"{where}: label_id {d.label_id}")
        label = d.get_label()
        check(label is not None and label == e["label"] == e["roi_type"],
              f"{where}: label {label!r}, params {e['label']!r}, roi_type {e['roi_type']!r}")
        check(GLib.quark_to_string(d.label) == label, f"{where}: label quark")
        check(d.object_id == e["object_id"],
              f"{where}: object_id {d.object_id} != {e['object_id']}")
        check(bool(d.tracked) == bool(e["tracked"]),
              f"{where}: tracked {d.tracked} != {e['tracked']}")
        # the detector did not run: every box is the tracker's prediction
        if index % INTERVAL != 0:
            check(d.tracked, f"{where}: an untracked box on a skipped frame")
        if d.tracked:
            check(d.object_id > 0, f"{where}: tracked box without object id")
            stats["tracked"] += 1
        else:
            stats["detected"] += 1
        if d.object_id > 0:
            stats["ids"].setdefault(d.object_id, set()).add(index)

    if index == 0:
        ok, _ = meta.get_detection(n)  # a CRITICAL on stderr, then FALSE
        check(not ok, f"frame {index}: get_detection({n}) out of range returned TRUE")


def check_masks():
    """A detection's mask in and out through the typelib."""
    buf = Gst.Buffer.new()
    meta = GstVisionDetect.buffer_add_vision_detect_meta(buf, 64, 48)
    d = GstVisionDetect.VisionDetection()
    d.x, d.y, d.w, d.h, d.roi_id = 6.0, 8.0, 20.0, 14.0, 0
    data = bytes((i * 37) % 256 for i in range(5 * 3))
    check(meta.add_detection_with_mask(d, 5, 7, 5, 3, GLib.Bytes.new(data)),
          "add_detection_with_mask refused a 5x3 mask")
    check(not meta.add_detection_with_mask(d, 5, 7, 5, 4, GLib.Bytes.new(data)),
          "add_detection_with_mask took 15 bytes for a 5x4 mask")
    check(not meta.add_detection_with_mask(d, 60, 7, 5, 3, GLib.Bytes.new(data)),
          "add_detection_with_mask took a rectangle outside the frame")
    meta.add_detection(d)
    check(meta.get_n_detections() == 2,
          f"{meta.get_n_detections()} detections, want 2")
    copy = buf.copy_deep()  # the meta lives as long as its buffer
    for where, m in (("meta", meta),
                     ("copy", GstVisionDetect.buffer_get_vision_detect_meta(copy))):
        got = m.get_mask(0)
        check(got[0] is not None and got[0].get_data() == data,
              f"{where}: get_mask(0) bytes {got[0]}")
        check(tuple(got[1:]) == (5, 7, 5, 3), f"{where}: get_mask(0) rectangle {got[1:]}")
        check(m.get_mask(1)[0] is None, f"{where}: a mask for detection 1")

    for _ in range(2):
        roi = GstVideo.buffer_add_video_region_of_interest_meta(buf, "ball", 6, 8, 20, 14)
        roi.id = 0
    dets = GstVisionDetect.vision_detections_from_buffer(buf, 64, 48)
    check(len(dets) == 2 and all(x.x == 6.0 and x.w == 20.0 for x in dets),
          f"vision_detections_from_buffer: {[(x.x, x.w) for x in dets]}")
    dets, masks = GstVisionDetect.vision_detections_from_buffer_full(buf, 64, 48)
    check(len(dets) == 2 and len(masks) == 2,
          f"vision_detections_from_buffer_full: {len(dets)} detections, {len(masks)} masks")
    if len(masks) == 2:
        m = masks[0]
        check(m is not None and (m.x, m.y, m.width, m.height) == (5, 7, 5, 3)
              and m.get_data().get_data() == data,
              "vision_detections_from_buffer_full: mask 0")
        # bytes 4 (148) and 5 (185, row 1) >= 128, byte 1 (37) not
        check(m is not None and m.at(5 + 4, 7) and m.at(5, 7 + 1)
              and not m.at(5 + 1, 7) and not m.at(4, 7),
              "VisionDetectionMask.at")
        check(masks[1] is None, "vision_detections_from_buffer_full: mask 1")
    del dets, masks


def check_keypoints():
    """A detection's keypoints in and out through the typelib."""
    buf = Gst.Buffer.new()
    meta = GstVisionDetect.buffer_add_vision_detect_meta(buf, 64, 48)
    d = GstVisionDetect.VisionDetection()
    d.x, d.y, d.w, d.h, d.roi_id = 6.0, 8.0, 20.0, 14.0, 0
    meta.add_detection(d)
    meta.add_detection(d)
    values = [10.0, 12.5, 1.5, 20.0, 9.0, -0.25]
    check(meta.set_keypoints(0, values), "set_keypoints refused 2 keypoints")
    check(not meta.set_keypoints(0, values[:4]), "set_keypoints took 4 values")
    check(not meta.set_keypoints(2, values), "set_keypoints took index 2 of 2")
    copy = buf.copy_deep()
    for where, m in (("meta", meta),
                     ("copy", GstVisionDetect.buffer_get_vision_detect_meta(copy))):
        got = m.get_keypoints(0)
        check(got is not None and list(got) == values, f"{where}: get_keypoints(0) {got}")
        got = m.get_keypoints(1)
        check(not got, f"{where}: keypoints for detection 1: {got}")


def main():
    Gst.init(None)
    check_masks()
    check_keypoints()
    check(GstVisionDetect.buffer_get_vision_detect_meta(Gst.Buffer.new()) is None,
          "a buffer without the meta gives a meta")

    pipeline = Gst.parse_launch(
        f"videotestsrc num-buffers={FRAMES} pattern=ball ! "
        f"video/x-raw,format=RGB,width={WIDTH},height={HEIGHT},framerate=30/1 ! "
        f"visiondetect model=\"{model_path()}\" threads=2 interval={INTERVAL} ! "
        "visiontrack ! appsink name=sink sync=false")
    sink = pipeline.get_by_name("sink")
    pipeline.set_state(Gst.State.PLAYING)
    stats = {"detected": 0, "tracked": 0, "ids": {}}
    index = 0
    try:
        while True:
            sample = sink.try_pull_sample(120 * Gst.SECOND)
            if sample is None:
                break
            check_buffer(index, sample.get_buffer(), stats)
            index += 1
        msg = pipeline.get_bus().pop_filtered(Gst.MessageType.ERROR)
        if msg is not None:
            err, dbg = msg.parse_error()
            check(False, f"pipeline error: {err.message} ({dbg})")
    finally:
        pipeline.set_state(Gst.State.NULL)

    check(index == FRAMES, f"{index} frames, want {FRAMES}")
    check(stats["detected"] > 0, "no detection on any inferred frame")
    check(stats["tracked"] > 0, "no tracked box on any skipped frame")
    check(any(len(frames) > 1 for frames in stats["ids"].values()),
          "no object id on more than one frame")
    print(f"{index} frames, {stats['detected']} detections, {stats['tracked']} tracked "
          f"boxes, object ids {sorted(stats['ids'])}")
    if failures:
        print(f"{len(failures)} failures")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
