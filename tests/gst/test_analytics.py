#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""GStreamer's analytics metadata (GstAnalytics, 1.24+) between our elements
and GStreamer's own, with the real elements.

    test_analytics.py overlay | producer | onnx | gi | main-build BUILD

overlay: videotestsrc pattern=ball ! visiondetect (the bundled shapes model)
  ! objectdetectionoverlay (GStreamer's, gst-plugins-bad) ! appsink. Each
  frame's object-detection entries are visiondetect's boxes (the ROI meta of
  the same id, same class and rectangle); the overlay's pixels, against the
  frame before it (a pad probe keeps a copy), changed along every edge of
  every box (within EDGE_TOL pixels of the edge, on at least EDGE_COVER of
  its length) and nowhere else (no changed pixel farther than EDGE_TOL from
  a box's outline): GStreamer's overlay draws our boxes where we put them.

producer: another producer's entries: a Python appsrc attaches, through
  GstAnalytics' introspection data, object-detection entries only (no ROI
  meta, no companion meta) for two objects moving across 12 frames, then
  visiontrack ! visionjson (our schema) ! visionjson format=dlstreamer !
  appsink. Each line has both objects with the boxes attached (normalised),
  their class names, confidences, label_id -1; from the frame a track is
  confirmed on, an object_id on each that stays the same for that object and
  differs between the two (ids on their boxes), and the same id in the
  tracking entry (GstAnalyticsTrackingMtd) visiontrack relates to each
  object-detection entry, and in the DL Streamer line's "id"; each object
  has exactly the keys a line of visiondetect's own detections has (same
  schema).

onnx: GStreamer's own inference and decoder as the other producer:
  videotestsrc pattern=ball ! onnxinference (ONNX Runtime) on an SSD-format
  model exported here with torch (the box of the frame's bright pixels, the
  four outputs and tensor ids ssdobjectdetector reads) ! ssdobjectdetector
  (label file: class 1 "ball") ! visiontrack ! visionjson (both schemas) !
  appsink. Each frame has one entry, on the ball (its bright pixels' box
  within a pixel: the decoder truncates); the JSON box is that entry's, and
  from its second frame the object has one id, in the tracking entry, our
  line and DL Streamer's line, with visiondetect's keys. Skipped (77)
  without onnxinference, ssdobjectdetector or torch.

gi: every field readable from Python through GstAnalytics-1.0 next to our
  GstVisionDetect-1.0: videotestsrc pattern=ball ! visiondetect interval=2
  ! visiontrack ! appsink, then the mask fixture model (a Mask R-CNN) !
  appsink. For each detection of the companion meta (read through our
  typelib) the object-detection entry of its ROI meta's id: class, rounded
  box and confidence (float32) equal; for a tracked object, the tracking
  entry it relates to (id, first seen <= last seen, not lost), on the
  predicted boxes of skipped frames too; for a mask, the segmentation entry
  related both ways to its detection, its rectangle and every pixel equal to
  the companion meta's mask (>= 128).

main-build BUILD: the entries of the main job's own build (tests/debian13.sh
  runs it on the build pipelines/annotate.sh made, before the tests configure
  it again): the visiondetect plugin of BUILD/gst (checked: the one GStreamer
  loaded) in the main job's pipeline, videotestsrc pattern=ball (I420,
  640x480, as annotate.sh generates its clip) ! videoconvert ! visiondetect
  (the bundled model) ! visionoverlay ! appsink. Every frame's
  object-detection entries are exactly its ROI metas (same ids, class and
  rectangle), and there is at least one. Never skips: a build without the
  analytics library, or no GstAnalytics-1.0 introspection data, fails (1).

Exits 77 (skipped) with the reason when GStreamer's analytics introspection
data (GstAnalytics-1.0, GStreamer >= 1.24) or objectdetectionoverlay is not
installed or the plugin was built without the analytics library (the Debian
12 host); 1 on any mismatch.
"""
import os
import sys
import tempfile
import json

MODE = sys.argv[1] if len(sys.argv) > 1 else ""
# main-build and export-onnx (this script's own child) take one argument
if MODE not in ("overlay", "producer", "onnx", "gi", "export-onnx", "main-build") \
        or (MODE in ("main-build", "export-onnx")) != (len(sys.argv) == 3):
    print("usage: test_analytics.py overlay|producer|onnx|gi|main-build BUILD")
    sys.exit(2)
if MODE == "main-build":
    # set before GStreamer starts: BUILD's plugin (as pipelines/common.sh sets
    # it), the source tree's model
    BUILD = os.path.realpath(sys.argv[2])
    os.environ["GST_PLUGIN_PATH"] = os.path.join(BUILD, "gst")
    os.environ["GST_REGISTRY"] = os.path.join(BUILD, "gst-registry.bin")
    os.environ["VD_TEST_SRCDIR"] = os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..")


def export_ssd_onnx(path):
    """Writes to @path a one-object detector in the SSD layout that
    GStreamer's ssdobjectdetector reads (boxes [1, N, 4] as ymin, xmin, ymax,
    xmax normalised; scores and classes [1, N]; num_detections [1]), for
    onnxinference's HWC uint8 input: the box of the frame's bright pixels
    (mean over the channels above 128), class 1, score 0.9. Run in a process
    of its own: torch and ONNX Runtime each register ONNX's schemas."""
    import torch
    # torch's TorchScript exporter imports the onnx package only to add
    # onnxscript functions to the model, and this one has none: Debian 13 has
    # no python3-onnx, so that step is left out
    from torch.onnx._internal import onnx_proto_utils
    onnx_proto_utils._add_onnxscript_fn = lambda model_bytes, opsets: model_bytes

    class BrightBox(torch.nn.Module):
        def forward(self, image):
            h, w = image.shape[1], image.shape[2]
            bright = image.float().mean(dim=3) > 128.0
            rows = bright.any(dim=2)[0]
            cols = bright.any(dim=1)[0]
            ys = torch.arange(h, dtype=torch.float32)
            xs = torch.arange(w, dtype=torch.float32)
            ymin = torch.where(rows, ys, torch.full_like(ys, 1e9)).min()
            ymax = torch.where(rows, ys, torch.full_like(ys, -1.0)).max() + 1
            xmin = torch.where(cols, xs, torch.full_like(xs, 1e9)).min()
            xmax = torch.where(cols, xs, torch.full_like(xs, -1.0)).max() + 1
            found = rows.any().float()
            boxes = torch.stack([ymin / h, xmin / w, ymax / h, xmax / w])
            return (boxes.clamp(0, 1).reshape(1, 1, 4),
                    (0.9 * found).reshape(1, 1), torch.ones(1, 1),
                    found.reshape(1))

    torch.onnx.export(BrightBox(), torch.zeros(1, HEIGHT, WIDTH, 3, dtype=torch.uint8),
                      path, input_names=["image_tensor"],
                      output_names=["boxes", "scores", "detection_classes",
                                    "num_detections"], opset_version=13)

    # the tensor ids (GStreamer 1.26's ssdobjectdetector reads these) that
    # onnxinference takes from the model's metadata
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                    "..", "..", "tools"))
    from bench_onnxinference import add_tensor_ids
    add_tensor_ids(path, {"boxes": "Gst.Model.ObjectDetector.Boxes",
                          "scores": "Gst.Model.ObjectDetector.Scores",
                          "detection_classes": "Gst.Model.ObjectDetector.Classes",
                          "num_detections": "Gst.Model.ObjectDetector.NumDetections"})


WIDTH, HEIGHT = 320, 240
if MODE == "export-onnx":
    export_ssd_onnx(sys.argv[2])
    sys.exit(0)

import gi  # noqa: E402

gi.require_version("GLib", "2.0")
gi.require_version("Gst", "1.0")
gi.require_version("GstApp", "1.0")
gi.require_version("GstVideo", "1.0")
try:
    gi.require_version("GstAnalytics", "1.0")
except ValueError:
    if MODE == "main-build":
        print("FAIL: GstAnalytics-1.0 introspection data not installed (GStreamer "
              "< 1.24 or no gir1.2-gst-plugins-bad-1.0): cannot read the entries")
        sys.exit(1)
    print("GstAnalytics-1.0 introspection data not installed (GStreamer < "
          "1.24 or no gir1.2-gst-plugins-bad-1.0): skipped; the Debian 13 "
          "run (tests/debian13.sh) runs it")
    sys.exit(77)
from gi.repository import GLib, Gst, GstAnalytics, GstApp, GstVideo  # noqa: E402,F401
from gi_common import roi_metas  # noqa: E402

Gst.init(None)

EDGE_TOL = 2        # pixels: a 1-2 pixel wide line around the edge, antialiased
EDGE_COVER = 0.9    # of an edge's length; the ball's own edge may hide a pixel

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)
    return cond


def finish():
    if failures:
        print(f"{len(failures)} failure(s)")
        sys.exit(1)
    print("OK")
    sys.exit(0)


def plugin_has_analytics():
    """Whether visiondetect writes object-detection entries (the plugin was
    built with the analytics library): one frame through it."""
    pipeline = Gst.parse_launch(
        f"videotestsrc pattern=ball num-buffers=1 ! video/x-raw,format=RGB,"
        f"width={WIDTH},height={HEIGHT} ! visiondetect model=\"{shapes_model()}\" "
        f"threads=2 ! appsink name=sink")
    bufs = run(pipeline)
    return bufs and GstAnalytics.buffer_get_analytics_relation_meta(bufs[0][0]) is not None


def shapes_model():
    return os.path.join(os.environ.get("VD_TEST_SRCDIR", "."), "models",
                        "visiondetect-shapes.safetensors")


def run(pipeline, sink_name="sink", timeout=120):
    """Runs @pipeline to EOS; the (buffer, caps) of every sample of its
    appsink."""
    sink = pipeline.get_by_name(sink_name)
    samples = []

    def on_sample(s):
        sample = s.emit("pull-sample")
        samples.append((sample.get_buffer(), sample.get_caps()))
        return Gst.FlowReturn.OK

    sink.set_property("emit-signals", True)
    sink.set_property("sync", False)
    sink.connect("new-sample", on_sample)
    pipeline.set_state(Gst.State.PLAYING)
    msg = pipeline.get_bus().timed_pop_filtered(
        timeout * Gst.SECOND, Gst.MessageType.EOS | Gst.MessageType.ERROR)
    pipeline.set_state(Gst.State.NULL)
    if msg is None or msg.type == Gst.MessageType.ERROR:
        err = msg.parse_error() if msg is not None else "timeout"
        check(False, f"pipeline did not reach EOS: {err}")
        return []
    return samples


def mtds(rmeta, mtd_type):
    """Every entry of @mtd_type in @rmeta (by id)."""
    out = []
    for i in range(GstAnalytics.relation_get_length(rmeta)):
        ok, mtd = rmeta.get_mtd(i, GstAnalytics.MTD_TYPE_ANY)
        if ok and mtd.get_mtd_type() == mtd_type:
            out.append(i)
    return out


def box_is(box, x, y, w, h):
    """Whether visionjson's normalised "box" is the pixel box (@x, @y, @w, @h)
    of a WIDTH x HEIGHT frame, within 1e-6."""
    return (abs(box["x_min"] - x / WIDTH) < 1e-6
            and abs(box["y_min"] - y / HEIGHT) < 1e-6
            and abs(box["x_max"] - (x + w) / WIDTH) < 1e-6
            and abs(box["y_max"] - (y + h) / HEIGHT) < 1e-6)


def ods(rmeta):
    out = []
    for i in mtds(rmeta, GstAnalytics.od_mtd_get_mtd_type()):
        ok, od = rmeta.get_od_mtd(i)
        check(ok, f"entry {i}: get_od_mtd FALSE")
        if ok:
            out.append(od)
    return out


def related_tracking(rmeta, od_id):
    """The tracking entry @od_id relates to (RELATE_TO), or None."""
    for i in mtds(rmeta, GstAnalytics.tracking_mtd_get_mtd_type()):
        if rmeta.get_relation(od_id, i) == GstAnalytics.RelTypes.RELATE_TO:
            ok, trk = rmeta.get_tracking_mtd(i)
            return trk if ok else None
    return None


def skip_without_plugin_analytics():
    if not plugin_has_analytics():
        print("visiondetect was built without GStreamer's analytics library "
              "(GStreamer < 1.24): no object-detection entries to test: skipped")
        sys.exit(77)


# ---- overlay ------------------------------------------------------------------

def test_overlay():
    import numpy as np

    if Gst.ElementFactory.find("objectdetectionoverlay") is None:
        print("GStreamer's objectdetectionoverlay (gst-plugins-bad >= 1.24, "
              "analyticsoverlay) not installed: skipped")
        sys.exit(77)
    skip_without_plugin_analytics()
    frames = 8
    pipeline = Gst.parse_launch(
        f"videotestsrc pattern=ball num-buffers={frames} ! video/x-raw,"
        f"format=RGBA,width={WIDTH},height={HEIGHT} ! visiondetect "
        f"model=\"{shapes_model()}\" threads=2 ! objectdetectionoverlay "
        f"name=overlay draw-labels=false object-detection-outline-color="
        f"0xff00ff00 ! appsink name=sink")
    before = {}

    def keep_frame(pad, info):
        buf = info.get_buffer()
        ok, m = buf.map(Gst.MapFlags.READ)
        if ok:
            before[buf.pts] = bytes(m.data)
            buf.unmap(m)
        return Gst.PadProbeReturn.OK

    pipeline.get_by_name("overlay").get_static_pad("sink").add_probe(
        Gst.PadProbeType.BUFFER, keep_frame)
    samples = run(pipeline)
    check(len(samples) == frames, f"{len(samples)} frames, want {frames}")
    boxes_seen = 0
    for index, (buf, caps) in enumerate(samples):
        info = GstVideo.VideoInfo.new_from_caps(caps)
        stride = info.stride[0]
        rmeta = GstAnalytics.buffer_get_analytics_relation_meta(buf)
        if not check(rmeta is not None, f"frame {index}: no analytics meta"):
            continue
        rois = roi_metas(buf)
        boxes = []
        for od in ods(rmeta):
            ok, x, y, w, h, conf = od.get_location()
            check(ok, f"frame {index}: entry {od.id}: no location")
            roi = rois.get(od.id)
            if check(roi is not None, f"frame {index}: entry {od.id}: no ROI meta "
                     f"of its id"):
                check((roi.x, roi.y, roi.w, roi.h) == (x, y, w, h)
                      and roi.roi_type == od.get_obj_type(),
                      f"frame {index}: entry {od.id} ({x},{y},{w},{h}) is not "
                      f"its ROI meta ({roi.x},{roi.y},{roi.w},{roi.h})")
            boxes.append((x, y, w, h))
        check(len(boxes) >= 1, f"frame {index}: no object-detection entry")
        boxes_seen += len(boxes)

        ok, m = buf.map(Gst.MapFlags.READ)
        after = np.frombuffer(bytes(m.data), np.uint8)
        buf.unmap(m)
        raw = before.get(buf.pts)
        if not check(raw is not None, f"frame {index}: no copy before the overlay"):
            continue
        a = after[:stride * HEIGHT].reshape(HEIGHT, stride)[:, :WIDTH * 4]
        b = np.frombuffer(raw, np.uint8)[:stride * HEIGHT].reshape(
            HEIGHT, stride)[:, :WIDTH * 4]
        changed = (a.reshape(HEIGHT, WIDTH, 4)[:, :, :3]
                   != b.reshape(HEIGHT, WIDTH, 4)[:, :, :3]).any(axis=2)
        near = np.zeros((HEIGHT, WIDTH), bool)
        ys, xs = np.mgrid[0:HEIGHT, 0:WIDTH]
        for (x, y, w, h) in boxes:
            x2, y2 = x + w, y + h
            inside = ((xs >= x - EDGE_TOL) & (xs <= x2 + EDGE_TOL)
                      & (ys >= y - EDGE_TOL) & (ys <= y2 + EDGE_TOL))
            inner = ((xs > x + EDGE_TOL) & (xs < x2 - EDGE_TOL)
                     & (ys > y + EDGE_TOL) & (ys < y2 - EDGE_TOL))
            near |= inside & ~inner
            # every edge drawn along its length: per position along the edge,
            # a changed pixel within EDGE_TOL across it
            edges = {
                "left": changed[y:y2, max(x - EDGE_TOL, 0):x + EDGE_TOL + 1].any(axis=1),
                "right": changed[y:y2, max(x2 - EDGE_TOL, 0):x2 + EDGE_TOL + 1].any(axis=1),
                "top": changed[max(y - EDGE_TOL, 0):y + EDGE_TOL + 1, x:x2].any(axis=0),
                "bottom": changed[max(y2 - EDGE_TOL, 0):y2 + EDGE_TOL + 1, x:x2].any(axis=0),
            }
            for name, drawn in edges.items():
                cover = drawn.mean() if drawn.size else 0.0
                check(cover >= EDGE_COVER,
                      f"frame {index}: box ({x},{y},{w},{h}): {name} edge drawn on "
                      f"{100 * cover:.0f}% of its length, want >= "
                      f"{100 * EDGE_COVER:.0f}%")
        stray = changed & ~near
        if stray.any():
            sy, sx = np.argwhere(stray)[0]
            check(False, f"frame {index}: {int(stray.sum())} pixels changed away "
                  f"from the boxes {boxes}, the first at ({sx},{sy})")
        check(changed.any(), f"frame {index}: the overlay drew nothing")
    check(boxes_seen >= frames, f"{boxes_seen} boxes over {frames} frames")
    finish()


# ---- producer -----------------------------------------------------------------

# two objects moving right and down, 4 pixels a frame; (class, x, y, w, h, conf)
OBJECTS = [("car", 20, 30, 60, 40, 0.9), ("person", 200, 60, 30, 80, 0.8)]
PRODUCER_FRAMES = 12


def object_at(obj, frame):
    label, x, y, w, h, conf = obj
    return label, x + 4 * frame, y + 2 * frame, w, h, conf


def own_schema_keys():
    """The keys of an object of visionjson's own lines for visiondetect's
    detections tracked by visiontrack: what another producer's must have."""
    path = tempfile.mktemp(suffix=".jsonl")
    pipeline = Gst.parse_launch(
        f"videotestsrc pattern=ball num-buffers=4 ! video/x-raw,format=RGB,"
        f"width={WIDTH},height={HEIGHT} ! visiondetect model=\"{shapes_model()}\" "
        f"threads=2 ! visiontrack ! visionjson location=\"{path}\" ! appsink name=sink")
    run(pipeline)
    keys = set()
    with open(path) as f:
        for line in f:
            for o in json.loads(line)["objects"]:
                if "object_id" in o:
                    keys = set(o)
    os.unlink(path)
    check(keys, "visiondetect ! visiontrack wrote no tracked object")
    return keys


def test_producer():
    skip_without_plugin_analytics()
    want_keys = own_schema_keys()
    tmp = tempfile.mkdtemp()
    ours = os.path.join(tmp, "ours.jsonl")
    dls = os.path.join(tmp, "dlstreamer.jsonl")
    pipeline = Gst.parse_launch(
        f"appsrc name=src format=time caps=video/x-raw,format=RGB,width={WIDTH},"
        f"height={HEIGHT},framerate=25/1 ! visiontrack ! visionjson "
        f"location=\"{ours}\" ! visionjson format=dlstreamer location=\"{dls}\" "
        f"! appsink name=sink")
    src = pipeline.get_by_name("src")
    pipeline.set_state(Gst.State.PAUSED)
    size = WIDTH * HEIGHT * 3
    for frame in range(PRODUCER_FRAMES):
        buf = Gst.Buffer.new_wrapped(bytes(size))
        buf.pts = frame * Gst.SECOND // 25
        buf.duration = Gst.SECOND // 25
        rmeta = GstAnalytics.buffer_add_analytics_relation_meta(buf)
        for obj in OBJECTS:
            label, x, y, w, h, conf = object_at(obj, frame)
            ok, _ = rmeta.add_od_mtd(GLib.quark_from_string(label), x, y, w, h, conf)
            check(ok, f"frame {frame}: add_od_mtd refused")
        check(src.emit("push-buffer", buf) == Gst.FlowReturn.OK,
              f"frame {frame}: push-buffer")
    src.emit("end-of-stream")
    samples = run(pipeline)
    check(len(samples) == PRODUCER_FRAMES, f"{len(samples)} buffers out")

    ids = {}
    with open(ours) as f:
        lines = [json.loads(line) for line in f]
    with open(dls) as f:
        dl_lines = [json.loads(line) for line in f]
    check(len(lines) == PRODUCER_FRAMES and len(dl_lines) == PRODUCER_FRAMES,
          f"{len(lines)} and {len(dl_lines)} lines, want {PRODUCER_FRAMES}")
    for frame, (line, dl, (buf, _)) in enumerate(zip(lines, dl_lines, samples)):
        objects = line["objects"]
        check(len(objects) == len(OBJECTS), f"frame {frame}: {len(objects)} objects")
        rmeta = GstAnalytics.buffer_get_analytics_relation_meta(buf)
        entries = ods(rmeta) if rmeta is not None else []
        for obj, o in zip(OBJECTS, objects):
            label, x, y, w, h, conf = object_at(obj, frame)
            check(o["label"] == label and o["label_id"] == -1
                  and abs(o["confidence"] - conf) < 1e-6,
                  f"frame {frame}: {o} is not {label} at {conf}")
            box = o["box"]
            check(box_is(box, x, y, w, h),
                  f"frame {frame}: {label}'s box {box}, attached ({x},{y},{w},{h})")
            if frame < 1:       # a track is confirmed on its second frame
                continue
            if not check("object_id" in o, f"frame {frame}: {label} has no object_id"):
                continue
            check(set(o) == want_keys,
                  f"frame {frame}: keys {sorted(o)}, visiondetect's {sorted(want_keys)}")
            check(o["tracked"] is False, f"frame {frame}: {label} marked tracked")
            ids.setdefault(label, o["object_id"])
            check(o["object_id"] == ids[label],
                  f"frame {frame}: {label} has id {o['object_id']}, "
                  f"was {ids[label]}")
            # the tracking entry related to the entry of the same box
            od = [e for e in entries if e.get_location()[1:5] == (x, y, w, h)]
            trk = related_tracking(rmeta, od[0].id) if od else None
            if check(trk is not None, f"frame {frame}: {label}'s entry relates to "
                     "no tracking entry"):
                ok, tid, first, last, lost = trk.get_info()
                check(tid == o["object_id"] and not lost and first <= last,
                      f"frame {frame}: {label}'s tracking entry {tid} "
                      f"({first}, {last}, lost {lost}), JSON {o['object_id']}")
            d = [p for p in dl.get("objects", []) if p.get("roi_type") == label]
            check(len(d) == 1 and d[0].get("id") == o["object_id"]
                  and d[0]["x"] == x and d[0]["w"] == w
                  and d[0]["detection"]["label"] == label,
                  f"frame {frame}: DL Streamer line {d} for {label} "
                  f"({o['object_id']})")
    check(len(set(ids.values())) == len(OBJECTS), f"ids {ids}: not one per object")
    for p in (ours, dls):
        os.unlink(p)
    os.rmdir(tmp)
    finish()


# ---- onnx ---------------------------------------------------------------------

def bright_box(buf, caps):
    """The box (x, y, w, h) of @buf's pixels brighter than 128 (RGB)."""
    import numpy as np

    info = GstVideo.VideoInfo.new_from_caps(caps)
    ok, m = buf.map(Gst.MapFlags.READ)
    rows = np.frombuffer(bytes(m.data), np.uint8)[:info.stride[0] * HEIGHT]
    buf.unmap(m)
    rgb = rows.reshape(HEIGHT, info.stride[0])[:, :WIDTH * 3].reshape(HEIGHT, WIDTH, 3)
    ys, xs = np.nonzero(rgb.astype(np.float32).mean(axis=2) > 128)
    if len(ys) == 0:
        return None
    return int(xs.min()), int(ys.min()), int(xs.max() + 1 - xs.min()), \
        int(ys.max() + 1 - ys.min())


def test_onnx():
    import subprocess

    for name in ("onnxinference", "ssdobjectdetector"):
        if Gst.ElementFactory.find(name) is None:
            print(f"GStreamer's {name} (gst-plugins-bad >= 1.24) not installed: "
                  "skipped")
            sys.exit(77)
    skip_without_plugin_analytics()
    tmp = tempfile.mkdtemp()
    model = os.path.join(tmp, "bright-ssd.onnx")
    labels = os.path.join(tmp, "labels.txt")
    export = subprocess.run([sys.executable, __file__, "export-onnx", model],
                            capture_output=True, text=True)
    if export.returncode != 0 and "No module named 'torch'" in export.stderr:
        print("no torch to export the SSD model with: skipped")
        sys.exit(77)
    if not check(export.returncode == 0, f"model export failed: {export.stderr[-2000:]}"):
        finish()
    with open(labels, "w") as f:
        f.write("background\nball\n")
    want_keys = own_schema_keys()
    ours = os.path.join(tmp, "ours.jsonl")
    dls = os.path.join(tmp, "dlstreamer.jsonl")
    frames = 12
    pipeline = Gst.parse_launch(
        f"videotestsrc pattern=ball num-buffers={frames} ! video/x-raw,format=RGB,"
        f"width={WIDTH},height={HEIGHT} ! onnxinference model-file=\"{model}\" ! "
        f"ssdobjectdetector label-file=\"{labels}\" ! visiontrack ! "
        f"visionjson location=\"{ours}\" ! visionjson format=dlstreamer "
        f"location=\"{dls}\" ! appsink name=sink")
    samples = run(pipeline)
    check(len(samples) == frames, f"{len(samples)} buffers out, want {frames}")
    with open(ours) as f:
        lines = [json.loads(line) for line in f]
    with open(dls) as f:
        dl_lines = [json.loads(line) for line in f]
    check(len(lines) == frames and len(dl_lines) == frames,
          f"{len(lines)} and {len(dl_lines)} lines, want {frames}")
    object_id = None
    for frame, (line, dl, (buf, caps)) in enumerate(zip(lines, dl_lines, samples)):
        rmeta = GstAnalytics.buffer_get_analytics_relation_meta(buf)
        entries = ods(rmeta) if rmeta is not None else []
        if not check(len(entries) == 1 and len(line["objects"]) == 1,
                     f"frame {frame}: {len(entries)} entries, "
                     f"{len(line['objects'])} objects, want 1"):
            continue
        ok, x, y, w, h, conf = entries[0].get_location()
        ball = bright_box(buf, caps)
        check(ball is not None and all(abs(a - b) <= 1 for a, b in
                                       zip((x, y, x + w, y + h),
                                           (ball[0], ball[1], ball[0] + ball[2],
                                            ball[1] + ball[3]))),
              f"frame {frame}: entry ({x},{y},{w},{h}), the ball at {ball}")
        o = line["objects"][0]
        box = o["box"]
        check(o["label"] == "ball" and abs(o["confidence"] - conf) < 1e-6
              and box_is(box, x, y, w, h),
              f"frame {frame}: {o}, entry ({x},{y},{w},{h}) at {conf}")
        if frame < 1:       # a track is confirmed on its second frame
            continue
        if not check("object_id" in o, f"frame {frame}: no object_id: {o}"):
            continue
        check(set(o) == want_keys,
              f"frame {frame}: keys {sorted(o)}, visiondetect's {sorted(want_keys)}")
        object_id = object_id or o["object_id"]
        check(o["object_id"] == object_id,
              f"frame {frame}: id {o['object_id']}, was {object_id}")
        trk = related_tracking(rmeta, entries[0].id)
        check(trk is not None and trk.get_info()[1] == object_id,
              f"frame {frame}: tracking entry "
              f"{trk.get_info() if trk else None}, JSON id {object_id}")
        d = dl.get("objects", [])
        check(len(d) == 1 and d[0].get("id") == object_id
              and (d[0]["x"], d[0]["y"], d[0]["w"], d[0]["h"]) == (x, y, w, h)
              and d[0]["roi_type"] == "ball",
              f"frame {frame}: DL Streamer line {dl}")
    check(object_id is not None, "the ball never got an id")
    for p in (ours, dls, model, labels):
        os.unlink(p)
    os.rmdir(tmp)
    finish()


# ---- gi -----------------------------------------------------------------------

def test_gi():
    if os.environ.get("VD_TEST_HAVE_GIR") == "0":
        print("GstVisionDetect-1.0.typelib not built: skipped")
        sys.exit(77)
    gi.require_version("GstVisionDetect", "1.0")
    from gi.repository import GstVisionDetect

    skip_without_plugin_analytics()
    seen = {"od": 0, "tracked": 0, "predicted": 0, "masks": 0}

    def check_buffer(what, buf, caps):
        info = GstVideo.VideoInfo.new_from_caps(caps)
        meta = GstVisionDetect.buffer_get_vision_detect_meta(buf)
        rmeta = GstAnalytics.buffer_get_analytics_relation_meta(buf)
        if not check(meta is not None, f"{what}: no companion meta"):
            return
        n = meta.get_n_detections()
        if n == 0:
            return
        if not check(rmeta is not None, f"{what}: {n} detections, no analytics meta"):
            return
        rois = roi_metas(buf)
        for i in range(n):
            ok, d = meta.get_detection(i)
            check(ok, f"{what}: get_detection({i})")
            ok, od = rmeta.get_od_mtd(d.roi_id)
            if not check(ok, f"{what}: detection {i}: no object-detection entry "
                         f"{d.roi_id} (its ROI meta's id)"):
                continue
            seen["od"] += 1
            ok, x, y, w, h, conf = od.get_location()
            x1, y1 = round(d.x), round(d.y)
            x2, y2 = round(d.x + d.w), round(d.y + d.h)
            check(ok and (x, y, w, h) == (x1, y1, x2 - x1, y2 - y1),
                  f"{what}: entry {od.id} at ({x},{y},{w},{h}), detection "
                  f"({d.x:.2f},{d.y:.2f},{d.w:.2f},{d.h:.2f})")
            check(abs(conf - d.confidence) <= 1e-6 * max(1.0, d.confidence),
                  f"{what}: entry {od.id} confidence {conf}, {d.confidence}")
            check(GLib.quark_to_string(od.get_obj_type())
                  == d.get_label(),
                  f"{what}: entry {od.id} class "
                  f"{GLib.quark_to_string(od.get_obj_type())}")
            check(od.get_confidence_lvl() == (True, conf), f"{what}: confidence level")
            roi = rois.get(d.roi_id)
            check(roi is not None and (roi.x, roi.y, roi.w, roi.h) == (x, y, w, h),
                  f"{what}: ROI meta {d.roi_id} not the entry's box")
            trk = related_tracking(rmeta, od.id)
            if d.object_id > 0:
                if check(trk is not None, f"{what}: tracked detection {i} (id "
                         f"{d.object_id}, predicted {d.tracked}): no tracking entry"):
                    ok, tid, first, last, lost = trk.get_info()
                    check(ok and tid == d.object_id and first <= buf.pts
                          and not lost,
                          f"{what}: tracking entry {tid} first {first} last {last} "
                          f"lost {lost} for id {d.object_id} at {buf.pts}")
                    if not d.tracked:
                        check(last == buf.pts, f"{what}: detected id {tid}: last "
                              f"seen {last}, not this frame {buf.pts}")
                    seen["predicted" if d.tracked else "tracked"] += 1
            mask = meta.get_mask(i)
            if mask[0] is None:
                continue
            data, mx, my, mw, mh = mask
            seg = None
            for s in mtds(rmeta, GstAnalytics.segmentation_mtd_get_mtd_type()):
                if (rmeta.get_relation(od.id, s) == GstAnalytics.RelTypes.RELATE_TO
                        and rmeta.get_relation(s, od.id)
                        == GstAnalytics.RelTypes.RELATE_TO):
                    seg = rmeta.get_segmentation_mtd(s)[1]
            if not check(seg is not None, f"{what}: mask of detection {i}: no "
                         "segmentation entry related both ways"):
                continue
            seen["masks"] += 1
            mbuf, sx, sy, sw, sh = seg.get_mask()
            check((sx, sy, sw, sh) == (mx, my, mw, mh),
                  f"{what}: segmentation at ({sx},{sy},{sw},{sh}), mask "
                  f"({mx},{my},{mw},{mh})")
            ok, m = mbuf.map(Gst.MapFlags.READ)
            pixels = bytes(m.data)
            mbuf.unmap(m)
            want = bytes(1 if v >= 128 else 0 for v in data.get_data())
            check(pixels[:mw * mh] == want, f"{what}: segmentation pixels differ "
                  "from the companion mask")
        del info

    pipeline = Gst.parse_launch(
        f"videotestsrc pattern=ball num-buffers=12 ! video/x-raw,format=RGB,"
        f"width={WIDTH},height={HEIGHT} ! visiondetect model=\"{shapes_model()}\" "
        f"threads=2 interval=2 ! visiontrack ! appsink name=sink")
    for index, (buf, caps) in enumerate(run(pipeline)):
        check_buffer(f"ball frame {index}", buf, caps)
    mask_model = os.environ.get("VD_TEST_MASK_MODEL", "")
    if check(os.path.exists(mask_model), f"no mask model {mask_model!r}"):
        pipeline = Gst.parse_launch(
            f"videotestsrc num-buffers=2 ! video/x-raw,format=RGB,width={WIDTH},"
            f"height={HEIGHT} ! visiondetect model=\"{mask_model}\" threads=2 "
            f"threshold=0 device=cpu ! appsink name=sink")
        for index, (buf, caps) in enumerate(run(pipeline)):
            check_buffer(f"mask frame {index}", buf, caps)
    print("checked:", seen)
    check(seen["od"] > 0 and seen["tracked"] > 0 and seen["predicted"] > 0,
          f"not every kind of entry seen: {seen}")
    check(seen["masks"] > 0, f"no mask seen: {seen}")
    finish()


# ---- main-build ---------------------------------------------------------------

def test_main_build():
    factory = Gst.ElementFactory.find("visiondetect")
    if not check(factory is not None, f"no visiondetect element in {BUILD}/gst"):
        finish()
    plugin = os.path.realpath(factory.get_plugin().get_filename() or "")
    check(plugin.startswith(os.path.join(BUILD, "gst") + os.sep),
          f"GStreamer loaded visiondetect from {plugin}, not from {BUILD}/gst")
    frames = 12
    pipeline = Gst.parse_launch(
        f"videotestsrc pattern=ball num-buffers={frames} ! video/x-raw,"
        f"format=I420,width=640,height=480,framerate=24/1 ! videoconvert ! "
        f"visiondetect model=\"{shapes_model()}\" ! visionoverlay ! "
        f"appsink name=sink")
    samples = run(pipeline)
    check(len(samples) == frames, f"{len(samples)} frames, want {frames}")
    entries = rois_seen = 0
    for index, (buf, _) in enumerate(samples):
        rois = roi_metas(buf)
        rois_seen += len(rois)
        rmeta = GstAnalytics.buffer_get_analytics_relation_meta(buf)
        if rmeta is None:
            check(not rois, f"frame {index}: {len(rois)} ROI metas, no analytics "
                  "meta (a build without GStreamer's analytics library)")
            continue
        found = ods(rmeta)
        entries += len(found)
        check(sorted(od.id for od in found) == sorted(rois),
              f"frame {index}: object-detection entries "
              f"{sorted(od.id for od in found)}, ROI metas {sorted(rois)}")
        for od in found:
            ok, x, y, w, h, conf = od.get_location()
            roi = rois.get(od.id)
            check(ok and roi is not None and (roi.x, roi.y, roi.w, roi.h) == (x, y, w, h)
                  and roi.roi_type == od.get_obj_type(),
                  f"frame {index}: entry {od.id} ({x},{y},{w},{h}) is not its ROI "
                  "meta")
    print(f"{BUILD}: {frames} frames, {rois_seen} ROI metas, {entries} "
          "object-detection entries")
    check(entries > 0, "no object-detection entry on any frame")
    check(entries == rois_seen, f"{entries} object-detection entries, "
          f"{rois_seen} ROI metas")
    finish()


{"overlay": test_overlay, "producer": test_producer, "onnx": test_onnx,
 "gi": test_gi, "main-build": test_main_build}[MODE]()
