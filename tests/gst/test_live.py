#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""A live source offered faster than the detector can keep up with.

videotestsrc is-live=true at 1.5x the frame rate the engine sustains on this
machine (measured first, on the same pipeline without a clock), into
visiondetect, visionjson (posting each frame's JSON) and a synchronised
fakesink. After the first seconds (the latency settles), with the default
late-frames=skip-inference:

- every frame the source produced reaches the sink (none dropped whole);
- every frame reaches the sink on time: by its deadline (base time + running
  time + the latency the sink runs with), measured at the sink's pad, or
  later by less than a video sink's max-lateness (20 ms, beyond which
  GStreamer's video sinks drop it): scheduling noise of a loaded machine, not
  queueing;
- every frame says whether it was inferred, and both kinds occur: inferred
  frames (the detector keeps working) and frames skipped as late.

The same run with late-frames=drop (the base class's QoS, the behaviour before
skip-inference) is printed next to it for comparison, not asserted.

Usage: test_live.py [SECONDS [FACTOR]]: SECONDS of each live run (default 8),
FACTOR times the measured capacity offered (default 1.5; below 1 the source is
slower than the engine, and skipped frames are allowed but not required).
Exits 0 on success, 1 on failure.
"""
import json
import math
import os
import sys
import time

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstBase", "1.0")
from gi.repository import GLib, Gst, GstBase  # noqa: E402

WIDTH, HEIGHT = 320, 240
SETTLE_S = 2.0
MAX_LATENESS = 20_000_000  # ns: GstVideoSink's default max-lateness


def model_path():
    return os.path.join(os.environ.get("VD_TEST_SRCDIR", "."), "models",
                        "visiondetect-shapes.safetensors")


def engine_fps():
    """Frames per second the element sustains here (no clock, no live source)."""
    n = 30
    pipeline = Gst.parse_launch(
        f"videotestsrc num-buffers={n} pattern=ball ! "
        f"video/x-raw,format=RGB,width={WIDTH},height={HEIGHT},framerate=30/1 ! "
        f"visiondetect model=\"{model_path()}\" threads=2 ! fakesink name=sink sync=false")
    times = []
    sink = pipeline.get_by_name("sink")
    sink.get_static_pad("sink").add_probe(
        Gst.PadProbeType.BUFFER, lambda pad, info: times.append(time.monotonic())
        or Gst.PadProbeReturn.OK)
    pipeline.set_state(Gst.State.PLAYING)
    msg = pipeline.get_bus().timed_pop_filtered(120 * Gst.SECOND,
                                                Gst.MessageType.EOS | Gst.MessageType.ERROR)
    pipeline.set_state(Gst.State.NULL)
    if msg is None or msg.type != Gst.MessageType.EOS:
        sys.exit(f"measuring the engine: {msg.parse_error() if msg else 'timeout'}")
    steady = times[10:]
    return (len(steady) - 1) / (steady[-1] - steady[0])


def run_live(fps, mode, seconds):
    pipeline = Gst.parse_launch(
        f"videotestsrc is-live=true pattern=ball ! "
        f"video/x-raw,format=RGB,width={WIDTH},height={HEIGHT},framerate={fps}/1 ! "
        f"identity name=produced ! "
        f"visiondetect name=detect model=\"{model_path()}\" threads=2 late-frames={mode} ! "
        f"visionjson name=json location=/dev/null post-messages=true ! "
        f"fakesink name=sink sync=true qos=true")
    sink = pipeline.get_by_name("sink")
    detect = pipeline.get_by_name("detect")
    produced, arrived, frames = [], [], {}
    t0 = [None]

    def on_produced(pad, info):
        produced.append(info.get_buffer().pts)
        return Gst.PadProbeReturn.OK

    def on_arrival(pad, info):
        buf = info.get_buffer()
        clock = sink.get_clock()
        if clock is None:
            return Gst.PadProbeReturn.OK
        segment = pad.get_sticky_event(Gst.EventType.SEGMENT, 0).parse_segment()
        rt = segment.to_running_time(Gst.Format.TIME, buf.pts)
        deadline = sink.get_base_time() + rt + GstBase.BaseSink.get_latency(sink)
        arrived.append((buf.pts, clock.get_time() - deadline))
        return Gst.PadProbeReturn.OK

    pipeline.get_by_name("produced").get_static_pad("src").add_probe(
        Gst.PadProbeType.BUFFER, on_produced)
    sink.get_static_pad("sink").add_probe(Gst.PadProbeType.BUFFER, on_arrival)

    bus = pipeline.get_bus()
    pipeline.set_state(Gst.State.PLAYING)
    start = time.monotonic()
    error = None
    while time.monotonic() - start < seconds:
        msg = bus.timed_pop(100 * Gst.MSECOND)
        if msg is None:
            continue
        if msg.type == Gst.MessageType.ERROR:
            error = msg.parse_error()
            break
        if msg.type == Gst.MessageType.LATENCY:
            pipeline.recalculate_latency()
        elif msg.type == Gst.MessageType.ELEMENT and msg.get_structure().get_name() == "visionjson":
            line = json.loads(msg.get_structure().get_value("json"))
            frames[line["pts"]] = line
    pipeline.send_event(Gst.Event.new_eos())
    # the frames still on their way, up to EOS
    while error is None and (msg := bus.timed_pop(10 * Gst.SECOND)) is not None:
        if msg.type == Gst.MessageType.EOS:
            break
        if msg.type == Gst.MessageType.ERROR:
            error = msg.parse_error()
        elif msg.type == Gst.MessageType.ELEMENT and msg.get_structure().get_name() == "visionjson":
            line = json.loads(msg.get_structure().get_value("json"))
            frames[line["pts"]] = line
    latency = GstBase.BaseSink.get_latency(sink)
    inferred = detect.get_property("frames-inferred")
    skipped = detect.get_property("frames-skipped-late")
    pipeline.set_state(Gst.State.NULL)
    if error is not None:
        sys.exit(f"{mode}: pipeline error: {error}")

    settle = int(SETTLE_S * Gst.SECOND)
    steady_produced = [p for p in produced if p >= settle]
    steady = [(p, late) for p, late in arrived if p >= settle]
    # the last frames produced before EOS may still be on their way
    last = max(p for p, _ in steady) if steady else 0
    steady_produced = [p for p in steady_produced if p <= last]
    late = [late for _, late in steady if late > 0]
    return {
        "mode": mode,
        "produced": len(steady_produced),
        "arrived": len(steady),
        "late": len(late),
        "worst_late_ms": max(late) / 1e6 if late else 0.0,
        "latency_ms": latency / 1e6,
        "inferred": inferred,
        "skipped_late": skipped,
        "frames": frames,
        "steady_pts": [p for p, _ in steady],
    }


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 8.0
    factor = float(sys.argv[2]) if len(sys.argv) > 2 else 1.5
    Gst.init(None)
    capacity = engine_fps()
    fps = max(2, min(120, math.ceil(factor * capacity)))
    print(f"engine: {capacity:.1f} frames/s at {WIDTH}x{HEIGHT}; offering {fps} frames/s live")

    results = [run_live(fps, "skip-inference", seconds), run_live(fps, "drop", seconds)]
    for r in results:
        print(f"late-frames={r['mode']}: after {SETTLE_S:.0f} s: {r['produced']} frames produced, "
              f"{r['arrived']} at the sink, {r['late']} late (worst {r['worst_late_ms']:.1f} ms), "
              f"latency {r['latency_ms']:.1f} ms; inferred {r['inferred']}, "
              f"skipped as late {r['skipped_late']}")

    r = results[0]
    failures = []
    if r["produced"] == 0:
        failures.append("no frame after the settling time")
    if r["arrived"] != r["produced"]:
        failures.append(f"{r['produced'] - r['arrived']} frames produced never reached the sink")
    if r["worst_late_ms"] * 1e6 > MAX_LATENESS:
        failures.append(f"{r['late']} frames reached the sink after their deadline, "
                        f"the worst by {r['worst_late_ms']:.1f} ms")
    if r["inferred"] == 0 or (factor > 1.0 and r["skipped_late"] == 0):
        failures.append(f"expected both inferred and skipped frames at 1.5x capacity, got "
                        f"{r['inferred']} inferred, {r['skipped_late']} skipped")
    missing = [p for p in r["steady_pts"] if p not in r["frames"]]
    if missing:
        failures.append(f"{len(missing)} frames without their JSON line")
    unsaid = [p for p in r["steady_pts"] if p in r["frames"] and "inferred" not in r["frames"][p]]
    if unsaid:
        failures.append(f"{len(unsaid)} frames do not say whether they were inferred")
    skipped_lines = [line for line in r["frames"].values() if line.get("inferred") is False]
    if any(line.get("skipped") != "late" or line["objects"] for line in skipped_lines):
        failures.append("a skipped frame is not marked \"late\" or has objects")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
