#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Throughput of N visiondetect streams through one shared batching engine
# (batch-size=N) against one unshared element and against the bare engine's
# batched rate on the same frame size (vd-detect --batch N: one vd_detect() call
# of N frames). The target on a GPU: N=8 shared streams reach at least 80% of the
# bare engine's batched rate.
#
#   tools/bench_shared.sh [BUILD_DIR]        (default: build)
#
# Each stream is its own videotestsrc (pattern=ball) in one gst-launch-1.0
# process, through visiondetect to a fakesink sync=false. Element rates come
# from the elements' own LOG lines (GST_DEBUG=visiondetect:6, one per frame
# pushed, with the size of its batch): frames from index WARMUP on, counted from
# the first such frame's output to the last, so start-up, the model load and the
# first batches are excluded. Prints one JSON object on stdout; the pipelines'
# logs stay in $VD_BENCH_WORKDIR.
#
# Environment:
#   VD_BENCH_DEVICE     device property (default cuda; cpu for a dry run)
#   VD_BENCH_PRECISION  precision property (default auto)
#   VD_BENCH_THREADS    threads property, CPU only (default 0: all cores)
#   VD_BENCH_STREAMS    N (default 8)
#   VD_BENCH_FRAMES     frames per stream after the warm-up (default 200 on CUDA,
#                       4 on the CPU)
#   VD_BENCH_WARMUP     frames per stream before (default 20 on CUDA, 2 on the CPU)
#   VD_BENCH_SIZE       WxH, W a multiple of 4 (default 1280x720)
#   VD_BENCH_TIMEOUT    batch-timeout in ns (default 20000000)
#   VD_BENCH_MODEL      model (default models/visiondetect-shapes.safetensors)
#   VD_BENCH_WORKDIR    logs and the frame (default a new temporary directory)
#   GST_LAUNCH          gst-launch-1.0 to run (default the one on PATH)
#   PYTHON              python3 (standard library only)
set -euo pipefail
cd "$(dirname "$0")/.."
HERE=$PWD
BUILD=$(cd "${1:-build}" && pwd)
DEVICE=${VD_BENCH_DEVICE:-cuda}
PRECISION=${VD_BENCH_PRECISION:-auto}
THREADS=${VD_BENCH_THREADS:-0}
N=${VD_BENCH_STREAMS:-8}
SIZE=${VD_BENCH_SIZE:-1280x720}
TIMEOUT=${VD_BENCH_TIMEOUT:-20000000}
MODEL=${VD_BENCH_MODEL:-$HERE/models/visiondetect-shapes.safetensors}
GST_LAUNCH=${GST_LAUNCH:-gst-launch-1.0}
PYTHON=${PYTHON:-python3}
case $DEVICE in
  cpu) FRAMES=${VD_BENCH_FRAMES:-4}; WARMUP=${VD_BENCH_WARMUP:-2} ;;
  *) FRAMES=${VD_BENCH_FRAMES:-200}; WARMUP=${VD_BENCH_WARMUP:-20} ;;
esac
W=${SIZE%x*}
H=${SIZE#*x}
if [ $((W % 4)) -ne 0 ]; then
  echo "bench_shared: the width must be a multiple of 4 (packed RGB rows), not $W" >&2
  exit 2
fi
WORK=${VD_BENCH_WORKDIR:-$(mktemp -d "${TMPDIR:-/tmp}/bench-shared-XXXXXX")}
mkdir -p "$WORK"
export GST_PLUGIN_PATH=$BUILD/gst
export GST_REGISTRY=$WORK/registry.bin
export GST_DEBUG_NO_COLOR=1
TOTAL=$((WARMUP + FRAMES))
DETECT="visiondetect model=\"$MODEL\" device=$DEVICE precision=$PRECISION threads=$THREADS"
CAPS="video/x-raw,format=RGB,width=$W,height=$H,framerate=30/1"

# the bare engine: one frame of the same source, N copies per vd_detect()
"$GST_LAUNCH" -q videotestsrc num-buffers=1 pattern=ball ! "$CAPS" ! \
  filesink location="$WORK/frame.rgb"
{ printf 'P6\n%d %d\n255\n' "$W" "$H"; cat "$WORK/frame.rgb"; } > "$WORK/frame.ppm"
"$BUILD/tools/vd-detect" --model "$MODEL" --device "$DEVICE" --precision "$PRECISION" \
  --threads "$THREADS" --batch "$N" --repeat $((2 + FRAMES / N + 1)) "$WORK/frame.ppm" \
  > /dev/null 2> "$WORK/engine.log"

run_streams() {  # NAME STREAMS EXTRA_PROPS
  local name=$1 streams=$2 props=$3 launch="" s
  for ((s = 0; s < streams; s++)); do
    launch+=" videotestsrc num-buffers=$TOTAL pattern=ball ! $CAPS ! queue ! \
$DETECT $props ! fakesink sync=false"
  done
  # shellcheck disable=SC2086
  eval GST_DEBUG=visiondetect:6 "\"$GST_LAUNCH\"" -q $launch > "$WORK/$name.log" 2>&1
}
run_streams single 1 ""
run_streams shared "$N" "batch-size=$N batch-timeout=$TIMEOUT"

"$PYTHON" - "$WORK" "$N" "$WARMUP" "$DEVICE" "$SIZE" <<'EOF'
import json, re, statistics, sys
work, n, warmup, device, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
line = re.compile(r'^(\d+):(\d+):(\d+\.\d+) .*LOG .*output_main:<([^>]+)> frame (\d+): '
                  r'\d+ detections(?:, in a batch of (\d+))?')

def element_rate(name, streams):
    times, batches = [], []
    for text in open(f'{work}/{name}.log', errors='replace'):
        m = line.match(text)
        if not m or int(m.group(5)) < warmup:
            continue
        times.append(int(m.group(1)) * 3600 + int(m.group(2)) * 60 + float(m.group(3)))
        if m.group(6):
            batches.append(int(m.group(6)))
    if len(times) <= streams:
        sys.exit(f'bench_shared: {name}: only {len(times)} frames timed (see {work}/{name}.log)')
    # the frames of the first batch end together: the span covers the others
    fps = (len(times) - streams) / (max(times) - min(times))
    return fps, (statistics.mean(batches) if batches else 1.0), len(times)

runs = [float(m.group(1)) for m in
        (re.match(r'time_ms: ([\d.]+)', t) for t in open(f'{work}/engine.log')) if m]
if len(runs) < 3:
    sys.exit(f'bench_shared: the engine run failed (see {work}/engine.log)')
engine_fps = n * 1000.0 / statistics.median(runs[2:])
single_fps, _, single_frames = element_rate('single', 1)
shared_fps, mean_batch, shared_frames = element_rate('shared', n)
print(json.dumps({
    'device': device, 'size': size, 'streams': n,
    'engine_batched_fps': round(engine_fps, 3),
    'single_element_fps': round(single_fps, 3),
    'shared_fps': round(shared_fps, 3),
    'shared_mean_batch': round(mean_batch, 3),
    'shared_vs_engine': round(shared_fps / engine_fps, 3),
    'shared_vs_single': round(shared_fps / single_fps, 3),
    'frames_timed': {'single': single_frames, 'shared': shared_frames},
    'workdir': work,
}))
EOF
