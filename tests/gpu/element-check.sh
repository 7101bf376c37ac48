#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The visiondetect element on the GPU, through GStreamer itself (part of
# device-check.sh; the engine tests there call the engine directly):
#
#  1. the carried GStreamer (gst-launch-1.0, the coreelements and videotestsrc
#     plugins and ours, all from the extracted bundle; no system plugin is
#     looked at) finds the three plugins, and each comes from the bundle;
#  2. the same frames (videotestsrc pattern=ball, 8 per run) through
#     `visiondetect device=cpu` (the reference), `device=cuda precision=fp32`
#     and `device=cuda precision=fp16`, in NV12, I420 and BGRx at 1280x720 and
#     NV12 and I420 at 321x241, each writing JSON Lines with visionjson;
#  3. compare_jsonl.py pairs the detections frame by frame: CUDA fp32 must match
#     at least 97% of the CPU's detections (same label, IoU >= 0.99,
#     |confidence diff| <= 1e-3), fp16 against fp32 is reported (IoU >= 0.9,
#     |diff| <= 0.02), every run must finish, write every frame and find the
#     ball;
#  4. throughput of the element in a pipeline: videotestsrc 1280x720 NV12 !
#     queue ! visiondetect device=cuda precision=fp16 ! fakesink sync=false,
#     frames per second between frame 30 and the last (the element's own
#     GST_DEBUG timestamps, so start-up and warm-up are excluded);
#  5. (CUDA only) with graph captures made to fail (VD_CUDA_FAIL_CAPTURES=2),
#     one warning on the bus, then one info once replay is back
#     (element.json's graph_failure_warning).
#
#   tests/gpu/element-check.sh BUNDLE_DIR OUT_DIR
# BUNDLE_DIR is the extracted .device/bundle.tar.gz (bin/, lib/, gst-plugins/);
# writes OUT_DIR/element.json and appends its report to $VD_ELEMENT_LOG; the
# pipelines' own logs and JSON Lines stay in BUNDLE_DIR/element/. Exit status:
# 0 when every check passed, 1 otherwise, 2 when it could not start.
#
# Environment:
#   VD_ELEMENT_LD            LD_LIBRARY_PATH of the GStreamer commands (only
#                            they get it): the bundle's lib/ and the CUDA
#                            libraries; default BUNDLE_DIR/lib:/usr/local/cuda/lib64
#   VD_ELEMENT_CHECK_DEVICE  cuda (default), cuda:N, or cpu: a dry run on a machine
#                            without a GPU, where the checked side is the CPU
#                            engine too (fp32 with threads=1 against all threads;
#                            bf16 instead of fp16; a shorter throughput run)
#   VD_ELEMENT_FRAMES        frames per comparison run (default 8)
#   VD_ELEMENT_BENCH_FRAMES  frames timed after the 30 warm-up frames
#                            (default 1000 on CUDA, 10 on the CPU)
#   VD_ELEMENT_BUDGET        seconds for the whole check (default 80); a run that
#                            would start with less than 8 s left is skipped and
#                            counts as a failure
#   VD_ELEMENT_LOG           report file (default OUT_DIR/element.log)
#   VD_ELEMENT_MODEL         model (default models/visiondetect-shapes.safetensors)
#   PYTHON                   python3 for compare_jsonl.py (standard library only)
set -uo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 BUNDLE_DIR OUT_DIR" >&2
  exit 2
fi
BUNDLE=$(cd "$1" && pwd) || exit 2
OUT=$2
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
cd "$(dirname "$0")/../.."
HERE=$PWD
DEVICE=${VD_ELEMENT_CHECK_DEVICE:-cuda}
FRAMES=${VD_ELEMENT_FRAMES:-8}
BUDGET=${VD_ELEMENT_BUDGET:-80}
LOG=${VD_ELEMENT_LOG:-$OUT/element.log}
MODEL=${VD_ELEMENT_MODEL:-$HERE/models/visiondetect-shapes.safetensors}
PYTHON=${PYTHON:-python3}
LD=${VD_ELEMENT_LD:-$BUNDLE/lib:/usr/local/cuda/lib64}
WARMUP=30
RUN_TIMEOUT=40
MIN_LEFT=8
EW=$BUNDLE/element
start=$(date +%s)
deadline=$((start + BUDGET))

case $DEVICE in
  cpu)
    TEST_DEV=cpu; TEST32_PROPS="precision=fp32 threads=1"; TEST16_PREC=bf16
    BENCH_FRAMES=${VD_ELEMENT_BENCH_FRAMES:-10}; BENCH_PREC=fp32 ;;
  cuda|cuda:*)
    TEST_DEV=$DEVICE; TEST32_PROPS="precision=fp32"; TEST16_PREC=fp16
    BENCH_FRAMES=${VD_ELEMENT_BENCH_FRAMES:-1000}; BENCH_PREC=fp16 ;;
  *) echo "VD_ELEMENT_CHECK_DEVICE: cuda, cuda:N or cpu, not $DEVICE" >&2; exit 2 ;;
esac

for f in "$BUNDLE/bin/gst-launch-1.0" "$BUNDLE/bin/gst-inspect-1.0" \
    "$BUNDLE/gst-plugins/libgstvisiondetect.so" "$MODEL"; do
  if [ ! -e "$f" ]; then
    echo "element check: no $f (run tests/gpu/make-device-bundle.sh)" | tee -a "$LOG"
    exit 2
  fi
done
rm -rf "$EW" && mkdir -p "$EW/no-gio-modules"
MANIFEST=$EW/runs.tsv
: > "$MANIFEST"

# the carried GStreamer alone: its plugin folder as the system one, no other
# plugin path, a fresh registry, no plugin-scanner helper (plugins load in the
# process), no GIO modules of the machine. Every timeout here is --foreground:
# a plain one puts its command in a process group of its own, out of reach of
# device-check.sh's timeout around this script, which would then leave a
# gst-launch-1.0 running on the GPU through the benchmark
gst_env() {
  env -u GST_PLUGIN_PATH -u GST_PLUGIN_PATH_1_0 -u GST_PLUGIN_SCANNER \
      -u GST_PLUGIN_SCANNER_1_0 \
    LD_LIBRARY_PATH="$LD" \
    GST_PLUGIN_SYSTEM_PATH_1_0="$BUNDLE/gst-plugins" \
    GST_PLUGIN_SYSTEM_PATH="$BUNDLE/gst-plugins" \
    GST_REGISTRY_1_0="$EW/registry.bin" GST_REGISTRY="$EW/registry.bin" \
    GST_REGISTRY_FORK=no GST_REGISTRY_UPDATE=yes \
    GIO_MODULE_DIR="$EW/no-gio-modules" GST_DEBUG_NO_COLOR=1 \
    "$@"
}

{
  echo "=== element check ($(date -u), device $DEVICE, $FRAMES frames per run)"
  echo "LD_LIBRARY_PATH of the GStreamer commands: $LD"
  echo "--- libraries not found:"
  for f in "$BUNDLE"/bin/gst-* "$BUNDLE"/gst-plugins/*.so; do
    LD_LIBRARY_PATH="$LD" ldd "$f" 2>&1 | grep -F "not found" | sed "s|^|$(basename "$f"): |"
  done
  echo "--- (end)"
  echo "--- plugins (GST_DEBUG=*:2 while the registry is built):"
  gst_env GST_DEBUG='*:2' timeout --foreground -k 5 15 "$BUNDLE/bin/gst-inspect-1.0" 2>&1 | tail -30
  echo "--- blacklisted:"
  gst_env timeout --foreground -k 5 15 "$BUNDLE/bin/gst-inspect-1.0" -b 2>&1 | tail -5
} >> "$LOG" 2>&1
: > "$EW/plugins.tsv"
for p in coreelements videotestsrc visiondetect; do
  file=$(gst_env timeout --foreground -k 5 15 "$BUNDLE/bin/gst-inspect-1.0" "$p" 2>/dev/null |
    sed -n 's/^ *Filename  *//p' | head -1)
  printf '%s\t%s\n' "$p" "${file:-}" >> "$EW/plugins.tsv"
  echo "plugin $p: ${file:-NOT FOUND}" >> "$LOG"
done
gst_version=$(gst_env timeout --foreground -k 5 15 "$BUNDLE/bin/gst-inspect-1.0" --version 2>/dev/null |
  sed -n 's/^GStreamer //p' | head -1)
echo "GStreamer ${gst_version:-?}" >> "$LOG"

# run_gst NAME ROLE DEVICE PRECISION FORMAT W H FRAMES GST_DEBUG -- PIPELINE...
run_gst() {
  local name=$1 role=$2 dev=$3 prec=$4 fmt=$5 w=$6 h=$7 n=$8 debug=$9
  shift 10
  local log=$EW/$name.log left t t0 t1 rc wall
  left=$((deadline - $(date +%s)))
  if [ $left -lt $MIN_LEFT ]; then
    echo "skipped: only $left s of the element check's $BUDGET s left" > "$log"
    rc=200; wall=0
  else
    t=$((left - 2 < RUN_TIMEOUT ? left - 2 : RUN_TIMEOUT))
    t0=$(date +%s%N)
    gst_env GST_DEBUG="$debug" timeout --foreground -k 5 "$t" "$BUNDLE/bin/gst-launch-1.0" "$@" > "$log" 2>&1
    rc=$?
    t1=$(date +%s%N)
    wall=$(( (t1 - t0) / 1000000 ))
    wall=$((wall / 1000)).$(printf '%03d' $((wall % 1000)))
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$role" "$dev" "$prec" \
    "$fmt" "$w" "$h" "$n" "$rc" "$wall" "$EW/$name.jsonl" "$log" >> "$MANIFEST"
  printf '%-28s exit %3d  %7.3f s\n' "$name" "$rc" "$wall" >> "$LOG"
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    echo "    stopped by its $t s timeout" >> "$LOG"
  elif [ $rc -ne 0 ]; then
    { grep -m 2 -E '^(ERROR: from element|WARNING: erroneous pipeline|WARNING: no element)' "$log" ||
      tail -4 "$log"; } | cut -c1-400 | sed 's/^/    /' >> "$LOG"
  fi
}

# compare NAME ROLE DEVICE PRECISION FORMAT W H PROPS: one comparison run
compare_run() {
  local name=$1 role=$2 dev=$3 prec=$4 fmt=$5 w=$6 h=$7 props=$8
  run_gst "$name" "$role" "$dev" "$prec" "$fmt" "$w" "$h" "$FRAMES" '*:2,visiondetect:4' -- \
    videotestsrc pattern=ball animation-mode=frames num-buffers="$FRAMES" \
    ! "video/x-raw,format=$fmt,width=$w,height=$h,framerate=30/1" \
    ! visiondetect device="$dev" $props model="$MODEL" qos=false \
    ! visionjson location="$EW/$name.jsonl" ! fakesink sync=false
}

echo "--- runs (exit 200: skipped for time):" >> "$LOG"
# one format's comparison, the throughput, then the other formats, so that a
# slow start leaves the most telling results
bench() {
  local n=$((WARMUP + BENCH_FRAMES + 1))
  run_gst "bench-nv12-1280x720-$TEST_DEV-$BENCH_PREC" bench "$TEST_DEV" "$BENCH_PREC" NV12 1280 720 \
      "$n" '*:2,visiondetect:6' -- \
    videotestsrc pattern=ball animation-mode=frames num-buffers="$n" \
    ! "video/x-raw,format=NV12,width=1280,height=720,framerate=30/1" \
    ! queue max-size-buffers=4 \
    ! visiondetect device="$TEST_DEV" precision="$BENCH_PREC" model="$MODEL" qos=false \
    ! fakesink sync=false
}
for config in "NV12 1280 720" bench "I420 1280 720" "BGRx 1280 720" "NV12 321 241" "I420 321 241"; do
  if [ "$config" = bench ]; then
    bench
    continue
  fi
  read -r fmt w h <<< "$config"
  tag=$(echo "$fmt-${w}x$h" | tr 'A-Z' 'a-z')
  compare_run "$tag-cpu-fp32" ref cpu fp32 "$fmt" "$w" "$h" "precision=fp32"
  compare_run "$tag-$TEST_DEV-fp32" test32 "$TEST_DEV" fp32 "$fmt" "$w" "$h" "$TEST32_PROPS"
  compare_run "$tag-$TEST_DEV-$TEST16_PREC" test16 "$TEST_DEV" "$TEST16_PREC" "$fmt" "$w" "$h" \
    "precision=$TEST16_PREC"
done

# 5. the element's warning when CUDA graph capture fails: VD_CUDA_FAIL_CAPTURES=2
#    (the engine's test hook) fails the warm-up's capture and the next try;
#    expected: one warning, then one info when replay is back (the back-off
#    tries again after 1, then 2 eager frames)
graph_json=null
graph_failed=0
if [ "$DEVICE" != cpu ]; then
  left=$((deadline - $(date +%s)))
  glog=$EW/graph-failure.log
  if [ $left -lt $MIN_LEFT ]; then
    echo "skipped: only $left s of the element check's $BUDGET s left" > "$glog"
    grc=200
  else
    gst_env VD_CUDA_FAIL_CAPTURES=2 timeout --foreground -k 5 $((left - 2 < 20 ? left - 2 : 20)) \
      "$BUNDLE/bin/gst-launch-1.0" videotestsrc pattern=ball animation-mode=frames num-buffers=12 \
      ! "video/x-raw,format=NV12,width=321,height=241,framerate=30/1" \
      ! visiondetect device="$TEST_DEV" precision=fp16 model="$MODEL" qos=false \
      ! fakesink sync=false > "$glog" 2>&1
    grc=$?
  fi
  nwarn=$(grep -c "CUDA graph capture failed" "$glog")
  ninfo=$(grep -c "capture failure(s), at frame" "$glog")
  gok=false
  if [ "$grc" -eq 0 ] && [ "$nwarn" -eq 1 ] && [ "$ninfo" -eq 1 ]; then gok=true; else graph_failed=1; fi
  graph_json=$(printf '{"ok": %s, "exit": %d, "warnings": %d, "infos": %d}' "$gok" "$grc" "$nwarn" "$ninfo")
  {
    echo "--- graph capture failing (VD_CUDA_FAIL_CAPTURES=2): exit $grc, $nwarn warning(s), $ninfo info(s) that replay is back (expected 0, 1, 1): $([ $gok = true ] && echo ok || echo FAILED)"
    grep -E -A2 "CUDA graph capture failed|^INFO" "$glog" | cut -c1-400 | sed 's/^/    /'
  } >> "$LOG"
fi

extra=$(printf '{"device": "%s", "frames_per_run": %d, "gstreamer": "%s", "model": "%s", "seconds": %d, "graph_failure_warning": %s}' \
  "$DEVICE" "$FRAMES" "$gst_version" "${MODEL#$HERE/}" $(($(date +%s) - start)) "$graph_json")
"$PYTHON" tests/gpu/compare_jsonl.py "$MANIFEST" "$OUT/element.json" \
  --bench-warmup "$WARMUP" --plugins "$EW/plugins.tsv" --plugin-dir "$BUNDLE/gst-plugins" \
  --extra "$extra" >> "$LOG" 2>&1
rc=$?
[ $rc -eq 0 ] && [ $graph_failed -eq 1 ] && rc=1
echo "=== element check: exit $rc after $(($(date +%s) - start)) s" >> "$LOG"
exit $rc
