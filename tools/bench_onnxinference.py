#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""visiondetect against GStreamer's own inference element, onnxinference (ONNX Runtime
inside GStreamer, gst-plugins-bad 1.24+), on the same Faster R-CNN weights in the same
pipeline shape:

    videotestsrc num-buffers=N pattern=ball ! video/x-raw,width=W,height=H,format=RGB !
        (onnxinference model-file=M.onnx ... | visiondetect model=M.safetensors ...) ! fakesink

onnxinference has no Faster R-CNN decoder: it runs the network (torchvision's
transform, backbone, RPN, heads and post-processing are all in the exported graph) and
attaches the output tensors; visiondetect runs the same and attaches detections. So this
compares the inference rate. Each side's time per frame is the difference between a
run of --frames frames and one of 2 frames, divided by the difference in frames (model
loading, session creation and the first frame cancel out); sides alternate, --repeats
times, medians reported.

  export (torch, any torchvision): bench_onnxinference.py export MODEL.safetensors OUT.onnx
      --width W --height H
  run (GStreamer with onnxinference and the visiondetect plugin on GST_PLUGIN_PATH):
      bench_onnxinference.py run MODEL.safetensors OUT.onnx [--frames 12] [--repeats 3]

The export wraps the model to take one [1, 3, H, W] float tensor (what onnxinference
feeds: planar, divided by input-tensor-scale=255), returns labels as int32 (onnxinference
takes float32 and int32 outputs only) and adds the output ids onnxinference looks up in
the model's metadata (ModelProto.metadata_props).
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def add_tensor_ids(path, ids):
    """Adds @ids ({output name: tensor id}) to the ONNX model file @path as metadata
    entries, where GStreamer's onnxinference looks the output tensors' ids up (and its
    tensor decoders then find them). metadata_props is ModelProto's repeated field 14
    (StringStringEntryProto: key 1, value 2); appended to the serialized message, a
    repeated field is merged into it, so no protobuf library is needed."""
    def varint(n):
        out = bytearray()
        while True:
            out.append((n & 0x7f) | (0x80 if n >> 7 else 0))
            n >>= 7
            if not n:
                return bytes(out)

    def field(number, payload):  # a length-delimited protobuf field
        return varint(number << 3 | 2) + varint(len(payload)) + payload

    with open(path, "ab") as f:
        for key, value in ids.items():
            f.write(field(14, field(1, key.encode()) + field(2, value.encode())))


def export(args):
    import warnings

    import torch
    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.join(HERE, "..", "tests", "parity"))
    import bench_cpu

    model = bench_cpu.torchvision_model_from_file(args.model).eval()

    class Wrap(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, x):
            out = self.m([x[0]])[0]
            return out["boxes"], out["labels"].to(torch.int32), out["scores"]

    x = torch.rand(1, 3, args.height, args.width)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(Wrap(model), (x,), args.onnx, opset_version=11, input_names=["input"],
                          output_names=["boxes", "labels", "scores"])
    add_tensor_ids(args.onnx, {"boxes": "Gst.Model.ObjectDetector.Boxes",
                               "scores": "Gst.Model.ObjectDetector.Scores",
                               "labels": "Gst.Model.ObjectDetector.Classes"})
    print(f"exported {args.onnx} ({os.path.getsize(args.onnx) / 1e6:.0f} MB)")
    return 0


def run_once(element, frames, width, height):
    cmd = ["gst-launch-1.0", "-q", "videotestsrc", f"num-buffers={frames}", "pattern=ball", "!",
           f"video/x-raw,width={width},height={height},format=RGB", "!"] + element + \
          ["!", "fakesink"]
    t = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=900)
    dt = time.monotonic() - t
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr[-2000:]}")
    return dt


def run(args):
    sides = {
        "onnxinference": ["onnxinference", f"model-file={args.onnx}", "input-image-format=chw",
                          "input-tensor-scale=255", "optimization-level=enable-all"],
        "visiondetect-fp32": ["visiondetect", f"model={args.model}", "device=cpu",
                              f"threads={args.threads}", "precision=fp32"],
        "visiondetect-auto": ["visiondetect", f"model={args.model}", "device=cpu",
                              f"threads={args.threads}"],
    }
    per_frame = {name: [] for name in sides}
    for r in range(args.repeats):
        order = list(sides)[r % len(sides):] + list(sides)[:r % len(sides)]
        for name in order:
            short = run_once(sides[name], 2, args.width, args.height)
            long = run_once(sides[name], args.frames, args.width, args.height)
            ms = (long - short) / (args.frames - 2) * 1000
            per_frame[name].append(ms)
            print(f"repetition {r + 1}/{args.repeats} {name}: {ms:.1f} ms per frame "
                  f"({args.frames} frames {long:.2f} s, 2 frames {short:.2f} s)", flush=True)
    print(f"\n| side | median ms per frame | frames per second | runs (ms) |\n|---|---:|---:|---|")
    for name, v in per_frame.items():
        m = statistics.median(v)
        print(f"| {name} | {m:.1f} | {1000 / m:.2f} | {', '.join(f'{x:.1f}' for x in v)} |")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["export", "run"])
    ap.add_argument("model", help="the .safetensors model file")
    ap.add_argument("onnx", help="the ONNX file (written by export, read by run)")
    ap.add_argument("--width", type=int, default=640)
    ap.add_argument("--height", type=int, default=480)
    ap.add_argument("--frames", type=int, default=12)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2, help="visiondetect's threads (ONNX Runtime "
                    "inside onnxinference takes one per core, which onnxinference does not set)")
    args = ap.parse_args()
    return export(args) if args.mode == "export" else run(args)


if __name__ == "__main__":
    sys.exit(main())
