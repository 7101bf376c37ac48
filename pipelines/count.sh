#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Line-crossing counts: visiontrack's ids crossing a virtual line, per class.
set -euo pipefail
source "$(dirname "$0")/common.sh"

usage() {
  cat <<USAGE
Usage: pipelines/count.sh [OPTION]... [INPUT]

Detects (visiondetect) and tracks (visiontrack) the objects of INPUT (any file
GStreamer's decodebin reads) and counts, per class, the tracked objects whose
box centre crosses a virtual line, in each direction; prints the counts.
Without INPUT it uses the generated clip of pipelines/annotate.sh (videotestsrc's
bouncing ball in three colour schemes) with the bundled model.
Installs the Debian packages it needs and builds the project first.

Options:
  --line AXIS=F      the line: y=F a horizontal line at F of the height (default
                     y=0.6: the generated ball starts at the centre and moves down),
                     x=F a vertical one at F of the width
  --json FILE        keep visionjson's JSON Lines (with object_id) in FILE
  --output FILE      also write an annotated MP4 (ids and trails drawn)
  --model FILE       detection model (default: the bundled one)
  --threshold S      visiondetect's minimum confidence (default 0.3: visiontrack
                     uses the low-confidence ones too)
  --device DEV       auto, cpu, cuda or cuda:N (default auto)
  --interval N       run inference on every Nth frame only (visiontrack predicts
                     the others)
  --classes LIST     comma-separated class names to keep
  --frames N         frames of the generated clip (default 96), or stop INPUT after N
  --size WxH         size of the generated clip (default 640x480)
  -h, --help         this help

Example:
  pipelines/count.sh --line x=0.5 --interval 2
USAGE
}

opt_model="" opt_json="" opt_threshold="0.3" opt_device="" opt_interval="" opt_classes=""
opt_frames="" opt_size="640x480" opt_output="" opt_line="y=0.6"
positional=()
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --line) opt_line="${2:?--line needs AXIS=F}"; shift 2 ;;
    --json) opt_json="${2:?--json needs a file}"; shift 2 ;;
    --output) opt_output="${2:?--output needs a file}"; shift 2 ;;
    --model) opt_model="${2:?--model needs a file}"; shift 2 ;;
    --threshold) opt_threshold="${2:?}"; shift 2 ;;
    --device) opt_device="${2:?}"; shift 2 ;;
    --interval) opt_interval="${2:?}"; shift 2 ;;
    --classes) opt_classes="${2:?}"; shift 2 ;;
    --frames) opt_frames="${2:?}"; shift 2 ;;
    --size) opt_size="${2:?}"; shift 2 ;;
    --) shift; positional+=("$@"); break ;;
    -*) usage >&2; vd_die "unknown option $1" ;;
    *) positional+=("$1"); shift ;;
  esac
done
[ ${#positional[@]} -le 1 ] || { usage >&2; vd_die "too many arguments"; }
input="${positional[0]:-}"
[[ "$opt_line" =~ ^([xy])=(0?\.[0-9]+|0|1|1\.0*)$ ]] || vd_die "--line wants x=F or y=F with F in 0..1"
[[ "$opt_size" =~ ^([0-9]+)x([0-9]+)$ ]] || vd_die "--size wants WxH, e.g. 640x480"
width="${BASH_REMATCH[1]}" height="${BASH_REMATCH[2]}"
[ -z "$input" ] || [ -f "$input" ] || vd_die "input file '$input' does not exist"

vd_prepare
vd_check_model "$opt_model"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
json="${opt_json:-$work/count.jsonl}"
[ -z "$opt_json" ] || mkdir -p "$(dirname "$opt_json")"

if [ -n "$input" ]; then
  vd_add filesrc "location=$input" ! decodebin ! videoconvert
  [ -n "$opt_frames" ] && vd_add ! identity "eos-after=$opt_frames"
else
  # annotate.sh's clip: the ball in three colour schemes, one after the other
  vd_add_ball_clip "${opt_frames:-96}" "$width" "$height"
  vd_add_clip_end
fi
vd_add ! ; vd_add_detect
vd_add ! visiontrack ! visionjson "location=$json"
if [ -n "$opt_output" ]; then
  mkdir -p "$(dirname "$opt_output")"
  vd_add ! visionoverlay trail=24 ! videoconvert ! video/x-raw,format=I420
  vd_add ! x264enc speed-preset=veryfast ! mp4mux ! filesink "location=$opt_output"
else
  vd_add ! fakesink
fi
vd_launch >&2 || vd_die "the pipeline failed"

# A crossing: an id's box centre on one side of the line at one appearance and
# on the other at its next (predicted boxes count: they are the same object).
/usr/bin/python3 - "$json" "$opt_line" <<'PY'
import json, sys
path, line = sys.argv[1], sys.argv[2]
axis, pos = line.split("=")
pos = float(pos)
side, label_of, counts = {}, {}, {}
for text in open(path):
    frame = json.loads(text)
    size = frame["width"] if axis == "x" else frame["height"]
    for o in frame["objects"]:
        oid = o.get("object_id")
        if not oid:
            continue
        r = o["rect"]
        c = (r["x"] + r["w"] / 2) if axis == "x" else (r["y"] + r["h"] / 2)
        s = c >= pos * size
        label_of[oid] = o["label"]
        if oid in side and side[oid] != s:
            k = counts.setdefault(o["label"], {"forward": 0, "back": 0, "ids": set()})
            k["forward" if s else "back"] += 1
            k["ids"].add(oid)
        side[oid] = s
fwd, back = ("right", "left") if axis == "x" else ("down", "up")
print("line %s=%g: %d tracked objects" % (axis, pos, len(label_of)))
for label in sorted(set(label_of.values())):
    k = counts.get(label, {"forward": 0, "back": 0, "ids": set()})
    n = sum(1 for l in label_of.values() if l == label)
    print("%-12s %3d crossings (%d %s, %d %s) by %d of %d objects"
          % (label, k["forward"] + k["back"], k["forward"], fwd, k["back"], back,
             len(k["ids"]), n))
PY
