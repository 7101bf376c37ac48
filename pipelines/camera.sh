#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Live detection on a camera (V4L2), shown in a window.
set -euo pipefail
source "$(dirname "$0")/common.sh"

usage() {
  cat <<USAGE
Usage: pipelines/camera.sh [OPTION]... [DEVICE]

Shows the camera DEVICE (default /dev/video0) in a window with the detected
objects drawn on it. Raw and MJPEG cameras both work (decodebin).

Latency stays bounded when inference is slower than the camera: visiondetect
runs the detector on each frame it can finish in time and passes the others on
time without boxes (late-frames=skip-inference), so the window shows every frame
at its time, one latency (about 1.5 inference times) after capture. Use
--interval to run inference on fewer frames on purpose (frames in between pass
without boxes).

Options:
  --model FILE       detection model (.safetensors); default: \$VISIONDETECT_MODEL,
                     else the bundled models/visiondetect-shapes.safetensors
  --threshold S      minimum confidence, 0..1 (element default 0.5)
  --device-type DEV  where inference runs: auto, cpu, cuda or cuda:N
  --interval N       run inference on every Nth frame only
  --classes LIST     comma-separated class names to keep
  --size WxH         camera size to ask for (default 640x480)
  --json FILE        also write the detections as JSON Lines
  --sink ELEMENT     video sink (default autovideosink)
  --frames N         stop after N frames (default: until Ctrl-C)
  --test             videotestsrc (live, bouncing ball) instead of a camera
  -h, --help         this help

Environment: VISIONDETECT_NO_BUILD=1 skips the package check and the build.

Example:
  pipelines/camera.sh --interval 3 --threshold 0.6 /dev/video2
USAGE
}

opt_model="" opt_threshold="" opt_device="" opt_interval="" opt_classes=""
opt_size="640x480" opt_json="" opt_sink="autovideosink" opt_frames="" opt_test=0
camera=""
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --model) opt_model="${2:?--model needs a file}"; shift 2 ;;
    --threshold) opt_threshold="${2:?}"; shift 2 ;;
    --device-type) opt_device="${2:?}"; shift 2 ;;
    --interval) opt_interval="${2:?}"; shift 2 ;;
    --classes) opt_classes="${2:?}"; shift 2 ;;
    --size) opt_size="${2:?}"; shift 2 ;;
    --json) opt_json="${2:?}"; shift 2 ;;
    --sink) opt_sink="${2:?}"; shift 2 ;;
    --frames) opt_frames="${2:?}"; shift 2 ;;
    --test) opt_test=1; shift ;;
    -*) usage >&2; vd_die "unknown option $1" ;;
    *) [ -z "$camera" ] || vd_die "one camera at a time"; camera="$1"; shift ;;
  esac
done
camera="${camera:-/dev/video0}"
[[ "$opt_size" =~ ^([0-9]+)x([0-9]+)$ ]] || vd_die "--size wants WxH, e.g. 640x480"
width="${BASH_REMATCH[1]}" height="${BASH_REMATCH[2]}"

vd_prepare
vd_check_model "$opt_model"

if [ "$opt_test" = 1 ]; then
  vd_add videotestsrc is-live=true pattern=ball
  vd_add ! "video/x-raw,width=$width,height=$height,framerate=30/1"
else
  [ -e "$camera" ] || vd_die "no camera at $camera (list them with: ls /dev/video*)"
  vd_add v4l2src "device=$camera" ! decodebin
fi
vd_add ! videoconvert ! videoscale ! "video/x-raw,width=$width,height=$height"
[ -n "$opt_frames" ] && vd_add ! identity "eos-after=$opt_frames"
vd_add ! ; vd_add_detect
[ -n "$opt_json" ] && vd_add ! visionjson "location=$opt_json"
vd_add ! visionoverlay ! videoconvert ! "$opt_sink"

vd_launch
