#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Detection on an RTSP stream (an IP camera), shown in a window or recorded.
set -euo pipefail
source "$(dirname "$0")/common.sh"

usage() {
  cat <<USAGE
Usage: pipelines/rtsp.sh [OPTION]... URL

Receives the RTSP stream URL (rtsp://user:password@host:554/path), runs
visiondetect on it and shows it in a window with the detections drawn, or with
--output records it to an MP4 file (Ctrl-C ends the recording cleanly).

As with a camera, latency stays bounded when inference is slower than the
stream: visiondetect passes the frames it cannot finish in time without boxes
(late-frames=skip-inference), so every frame is shown or recorded.

Options:
  --model FILE       detection model (.safetensors); default: \$VISIONDETECT_MODEL,
                     else the bundled models/visiondetect-shapes.safetensors
  --threshold S      minimum confidence, 0..1 (element default 0.5)
  --device-type DEV  where inference runs: auto, cpu, cuda or cuda:N
  --interval N       run inference on every Nth frame only
  --classes LIST     comma-separated class names to keep
  --latency MS       rtspsrc's jitter buffer (default 200)
  --tcp              receive over TCP (through firewalls and NAT)
  --output FILE      record the annotated stream to an MP4 instead of showing it
  --json FILE        also write the detections as JSON Lines
  --sink ELEMENT     video sink when not recording (default autovideosink)
  --frames N         stop after N frames (default: until the stream ends or Ctrl-C)
  -h, --help         this help

Environment: VISIONDETECT_NO_BUILD=1 skips the package check and the build.

Example:
  pipelines/rtsp.sh --tcp --output door.mp4 --json door.jsonl rtsp://10.0.0.7/stream1
USAGE
}

opt_model="" opt_threshold="" opt_device="" opt_interval="" opt_classes=""
opt_latency=200 opt_tcp=0 opt_output="" opt_json="" opt_sink="autovideosink" opt_frames=""
url=""
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --model) opt_model="${2:?--model needs a file}"; shift 2 ;;
    --threshold) opt_threshold="${2:?}"; shift 2 ;;
    --device-type) opt_device="${2:?}"; shift 2 ;;
    --interval) opt_interval="${2:?}"; shift 2 ;;
    --classes) opt_classes="${2:?}"; shift 2 ;;
    --latency) opt_latency="${2:?}"; shift 2 ;;
    --tcp) opt_tcp=1; shift ;;
    --output) opt_output="${2:?}"; shift 2 ;;
    --json) opt_json="${2:?}"; shift 2 ;;
    --sink) opt_sink="${2:?}"; shift 2 ;;
    --frames) opt_frames="${2:?}"; shift 2 ;;
    -*) usage >&2; vd_die "unknown option $1" ;;
    *) [ -z "$url" ] || vd_die "one URL at a time"; url="$1"; shift ;;
  esac
done
[ -n "$url" ] || { usage >&2; vd_die "no URL"; }
[[ "$url" == rtsp://* || "$url" == rtsps://* ]] || vd_die "'$url' is not an rtsp:// URL"

vd_prepare
vd_check_model "$opt_model"

vd_add rtspsrc "location=$url" "latency=$opt_latency"
[ "$opt_tcp" = 1 ] && vd_add protocols=tcp
vd_add ! decodebin ! videoconvert
[ -n "$opt_frames" ] && vd_add ! identity "eos-after=$opt_frames"
vd_add ! ; vd_add_detect
[ -n "$opt_json" ] && vd_add ! visionjson "location=$opt_json"
vd_add ! visionoverlay ! videoconvert
if [ -n "$opt_output" ]; then
  mkdir -p "$(dirname "$opt_output")"
  vd_add ! video/x-raw,format=I420 ! x264enc speed-preset=veryfast tune=zerolatency
  vd_add ! mp4mux ! filesink "location=$opt_output"
else
  vd_add ! "$opt_sink" sync=false
fi

vd_launch >&2 || vd_die "the pipeline failed"
[ -z "$opt_output" ] || vd_log "wrote $opt_output"
