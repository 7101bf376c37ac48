#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Annotates a video file: detections drawn into an MP4 and written as JSON Lines.
set -euo pipefail
source "$(dirname "$0")/common.sh"

usage() {
  cat <<USAGE
Usage: pipelines/annotate.sh [OPTION]... [INPUT] [OUTPUT]

Runs the visiondetect detector on every frame of INPUT (any file GStreamer's
decodebin reads: MP4, MKV, WebM, AVI, ...), draws the detections (box, class,
confidence) and writes OUTPUT, an H.264 MP4, plus OUTPUT's name with .jsonl:
one JSON object per frame with its detections (see docs/elements.md, visionjson).

Without INPUT it annotates a generated clip (videotestsrc's bouncing ball in a
few colours, then synthetic scenes of balls, boxes, triangles and rings) with the
bundled model. OUTPUT defaults to out/annotated.mp4.
Installs the Debian packages it needs and builds the project first.

Options:
  --model FILE       detection model (.safetensors, tools/export_torchvision.py);
                     default: \$VISIONDETECT_MODEL, else the bundled
                     models/visiondetect-shapes.safetensors
  --output FILE      the annotated MP4 (same as the OUTPUT argument; lets the
                     generated clip go elsewhere than out/annotated.mp4)
  --json FILE        where to write the JSON Lines (default: OUTPUT with .jsonl)
  --threshold S      minimum confidence, 0..1 (element default 0.5)
  --device DEV       auto, cpu, cuda or cuda:N (default auto)
  --interval N       run inference on every Nth frame only
  --classes LIST     comma-separated class names to keep
  --frames N         stop after N frames (default: the whole input; for the
                     generated clip, 48 frames of the ball, and the scenes only
                     when --frames is not given or --scenes is)
  --size WxH         size of the generated clip (default 640x480)
  --scenes N         synthetic scenes after the ball in the generated clip, half
                     a second each (default 8 without --frames, else 0)
  -h, --help         this help

Environment: VISIONDETECT_NO_BUILD=1 skips the package check and the build.

Examples:
  pipelines/annotate.sh
  pipelines/annotate.sh --frames 24 --output /tmp/ball.mp4
  pipelines/annotate.sh --model fasterrcnn_coco.safetensors street.mp4 street-annotated.mp4
USAGE
}

opt_model="" opt_json="" opt_threshold="" opt_device="" opt_interval="" opt_classes=""
opt_frames="" opt_size="640x480" opt_output="" opt_scenes=""
positional=()
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --model) opt_model="${2:?--model needs a file}"; shift 2 ;;
    --json) opt_json="${2:?--json needs a file}"; shift 2 ;;
    --output) opt_output="${2:?--output needs a file}"; shift 2 ;;
    --threshold) opt_threshold="${2:?}"; shift 2 ;;
    --device) opt_device="${2:?}"; shift 2 ;;
    --interval) opt_interval="${2:?}"; shift 2 ;;
    --classes) opt_classes="${2:?}"; shift 2 ;;
    --frames) opt_frames="${2:?}"; shift 2 ;;
    --size) opt_size="${2:?}"; shift 2 ;;
    --scenes) opt_scenes="${2:?}"; shift 2 ;;
    --) shift; positional+=("$@"); break ;;
    -*) usage >&2; vd_die "unknown option $1" ;;
    *) positional+=("$1"); shift ;;
  esac
done
[ ${#positional[@]} -le 2 ] || { usage >&2; vd_die "too many arguments"; }
input="${positional[0]:-}"
output="${positional[1]:-${opt_output:-$VD_ROOT/out/annotated.mp4}}"
base="$(basename "$output")"
if [[ "$base" == ?*.* ]]; then json_default="${output%.*}.jsonl"; else json_default="$output.jsonl"; fi
json="${opt_json:-$json_default}"
[[ "$opt_size" =~ ^([0-9]+)x([0-9]+)$ ]] || vd_die "--size wants WxH, e.g. 640x480"
width="${BASH_REMATCH[1]}" height="${BASH_REMATCH[2]}"
[ -z "$input" ] || [ -f "$input" ] || vd_die "input file '$input' does not exist"

vd_prepare
vd_check_model "$opt_model"
mkdir -p "$(dirname "$output")" "$(dirname "$json")"

# x264 encodes 4:2:0 at even sizes only: odd-sized frames get a black row or
# column after the detector (the JSON keeps the frame's own coordinates)
probe_size() {
  gst-launch-1.0 -v filesrc "location=$1" ! decodebin ! videoconvert ! fakesink num-buffers=1 2>&1 \
    | grep -o -m1 'video/x-raw[^"]*width=(int)[0-9]*, height=(int)[0-9]*' \
    | sed -E 's/.*width=\(int\)([0-9]+), height=\(int\)([0-9]+)/\1 \2/'
}
if [ -n "$input" ]; then
  read -r width height < <(probe_size "$input") \
    || vd_die "'$input' has no video stream GStreamer can decode"
  # only the video stream; decodebin picks the decoders
  vd_add filesrc "location=$input" ! decodebin ! videoconvert
  [ -n "$opt_frames" ] && vd_add ! identity "eos-after=$opt_frames"
else
  # the bundled model's classes include the ball: three colour schemes of it
  vd_add_ball_clip "${opt_frames:-48}" "$width" "$height"
  # then generated scenes of all four shapes, half a second each
  # (with --frames, the clip is that many frames of the ball unless --scenes is given)
  if [ -n "$opt_frames" ]; then scenes="${opt_scenes:-0}"; else scenes="${opt_scenes:-8}"; fi
  if [ "$scenes" -gt 0 ]; then
    scene_dir="$(mktemp -d)"
    trap 'rm -rf "$scene_dir"' EXIT
    /usr/bin/python3 "$VD_ROOT/pipelines/make_scenes.py" "$scene_dir" "$scenes" "${width}x${height}" \
      || vd_die "could not generate the scenes"
    vd_add multifilesrc "location=$scene_dir/scene-%03d.png" "stop-index=$((scenes - 1))" \
      caps=image/png,framerate=2/1 ! pngdec ! videoconvert ! videorate ! "$clip_caps" ! clip.
  fi
  vd_add_clip_end
fi
vd_add ! ; vd_add_detect
vd_add ! visionjson "location=$json"
# visiondetect and visionoverlay take the encoder's 4:2:0 (I420, NV12) as it
# is: the only conversion is the one in front of the detector
vd_add ! visionoverlay
pad_w=$((width % 2)) pad_h=$((height % 2))
if [ $pad_w -ne 0 ] || [ $pad_h -ne 0 ]; then
  vd_log "${width}x${height} is odd-sized: the MP4 gets $pad_w black column(s) and $pad_h row(s)"
  vd_add ! videobox "right=-$pad_w" "bottom=-$pad_h"
fi
vd_add ! x264enc speed-preset=veryfast ! mp4mux ! filesink "location=$output"

vd_launch >&2 || vd_die "the pipeline failed"
[ -s "$output" ] || vd_die "no output was written"
vd_log "wrote $output and $json ($(wc -l < "$json") frames)"
