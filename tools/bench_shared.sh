#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Throughput of N visiondetect streams through one shared batching engine
# (batch-size=N) against N independent elements (each its own engine, the threads
# shared out among them), one unshared element, and the bare engine's batched
# rate on the same frame size (vd-detect --batch N: one vd_detect() call of N
# frames). The target on a GPU: N=8 shared streams reach at least 80% of the bare
# engine's batched rate. On a CPU the question is whether one shared engine beats
# N engines on the same cores (tools/bench/CPU.md, "Many cameras on one machine").
#
#   tools/bench_shared.sh [BUILD_DIR]        (default: build)
#
# Each stream is its own videotestsrc (pattern=ball) in one gst-launch-1.0
# process, through visiondetect to a fakesink sync=false. Element rates come
# from the elements' own LOG lines (GST_DEBUG=visiondetect:6, one per frame
# pushed, with the size of its batch): frames from index WARMUP on, counted from
# the first such frame's output to the last, so start-up, the model load and the
# first batches are excluded. Prints one JSON object per stream count on stdout,
# one line each; the pipelines' logs stay in $VD_BENCH_WORKDIR.
#
# Environment:
#   VD_BENCH_DEVICE      device property (default cuda; cpu for the CPU)
#   VD_BENCH_PRECISION   precision property (default auto)
#   VD_BENCH_THREADS     threads in all, CPU only (default 0: all cores): the
#                        shared engine's, the single element's and the bare
#                        engine's; the independent elements get max(1, threads / N)
#                        each
#   VD_BENCH_STREAMS     N, or several: "1 2 4 8" (default 8)
#   VD_BENCH_INDEPENDENT 1: also N independent elements (default 1 on the CPU, 0
#                        on CUDA)
#   VD_BENCH_FRAMES      frames per stream after the warm-up (default 200 on CUDA,
#                        4 on the CPU)
#   VD_BENCH_WARMUP      frames per stream before (default 20 on CUDA, 2 on the CPU)
#   VD_BENCH_SIZE        WxH, W a multiple of 4 (default 1280x720)
#   VD_BENCH_TIMEOUT     batch-timeout in ns (default 20000000)
#   VD_BENCH_MODEL       model (default models/visiondetect-shapes.safetensors)
#   VD_BENCH_WORKDIR     logs and the frame (default a new temporary directory)
#   GST_LAUNCH           gst-launch-1.0 to run (default the one on PATH)
#   PYTHON               python3 (standard library only)
set -euo pipefail
cd "$(dirname "$0")/.."
HERE=$PWD
BUILD=$(cd "${1:-build}" && pwd)
DEVICE=${VD_BENCH_DEVICE:-cuda}
PRECISION=${VD_BENCH_PRECISION:-auto}
THREADS=${VD_BENCH_THREADS:-0}
STREAMS=${VD_BENCH_STREAMS:-8}
SIZE=${VD_BENCH_SIZE:-1280x720}
TIMEOUT=${VD_BENCH_TIMEOUT:-20000000}
MODEL=${VD_BENCH_MODEL:-$HERE/models/visiondetect-shapes.safetensors}
GST_LAUNCH=${GST_LAUNCH:-gst-launch-1.0}
PYTHON=${PYTHON:-python3}
case $DEVICE in
  cpu) FRAMES=${VD_BENCH_FRAMES:-4}; WARMUP=${VD_BENCH_WARMUP:-2}
       INDEPENDENT=${VD_BENCH_INDEPENDENT:-1} ;;
  *) FRAMES=${VD_BENCH_FRAMES:-200}; WARMUP=${VD_BENCH_WARMUP:-20}
     INDEPENDENT=${VD_BENCH_INDEPENDENT:-0} ;;
esac
TOTAL_THREADS=$THREADS
[ "$TOTAL_THREADS" -gt 0 ] || TOTAL_THREADS=$(nproc)
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
CAPS="video/x-raw,format=RGB,width=$W,height=$H,framerate=30/1"

"$GST_LAUNCH" -q videotestsrc num-buffers=1 pattern=ball ! "$CAPS" ! \
  filesink location="$WORK/frame.rgb"
{ printf 'P6\n%d %d\n255\n' "$W" "$H"; cat "$WORK/frame.rgb"; } > "$WORK/frame.ppm"

run_streams() {  # NAME STREAMS THREADS_EACH EXTRA_PROPS
  local name=$1 streams=$2 threads=$3 props=$4 launch="" s
  for ((s = 0; s < streams; s++)); do
    launch+=" videotestsrc num-buffers=$TOTAL pattern=ball ! $CAPS ! queue ! \
visiondetect model=\"$MODEL\" device=$DEVICE precision=$PRECISION threads=$threads \
$props ! fakesink sync=false"
  done
  # shellcheck disable=SC2086
  eval GST_DEBUG=visiondetect:6 "\"$GST_LAUNCH\"" -q $launch > "$WORK/$name.log" 2>&1
}

run_streams single 1 "$THREADS" ""
for N in $STREAMS; do
  # the bare engine: one frame of the same source, N copies per vd_detect()
  "$BUILD/tools/vd-detect" --model "$MODEL" --device "$DEVICE" --precision "$PRECISION" \
    --threads "$THREADS" --batch "$N" --repeat $((2 + FRAMES / N + 1)) "$WORK/frame.ppm" \
    > /dev/null 2> "$WORK/engine-$N.log"
  run_streams "shared-$N" "$N" "$THREADS" "batch-size=$N batch-timeout=$TIMEOUT"
  per=0
  if [ "$INDEPENDENT" = 1 ]; then
    per=$((TOTAL_THREADS / N))
    [ "$per" -ge 1 ] || per=1
    run_streams "independent-$N" "$N" "$per" ""
  fi
  "$PYTHON" - "$WORK" "$N" "$WARMUP" "$DEVICE" "$SIZE" "$PRECISION" "$TOTAL_THREADS" "$per" \
    <<'EOF'
import json, re, statistics, sys
work, n, warmup, device, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
precision, threads, per = sys.argv[6], int(sys.argv[7]), int(sys.argv[8])
# the stream's line for each frame the engine gave back (gstvisiondetectstream.c)
line = re.compile(r'^(\d+):(\d+):(\d+\.\d+) .*LOG .*:<([^>]+)> frame (\d+): '
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
        (re.match(r'time_ms: ([\d.]+)', t) for t in open(f'{work}/engine-{n}.log')) if m]
if len(runs) < 3:
    sys.exit(f'bench_shared: the engine run failed (see {work}/engine-{n}.log)')
engine_fps = n * 1000.0 / statistics.median(runs[2:])
single_fps, _, single_frames = element_rate('single', 1)
shared_fps, mean_batch, shared_frames = element_rate(f'shared-{n}', n)
out = {
    'device': device, 'size': size, 'precision': precision, 'streams': n, 'threads': threads,
    'engine_batched_fps': round(engine_fps, 3),
    'single_element_fps': round(single_fps, 3),
    'shared_fps': round(shared_fps, 3),
    'shared_mean_batch': round(mean_batch, 3),
    'shared_vs_engine': round(shared_fps / engine_fps, 3),
    'shared_vs_single': round(shared_fps / single_fps, 3),
    'frames_timed': {'single': single_frames, 'shared': shared_frames},
    'workdir': work,
}
if per > 0:
    ind_fps, _, ind_frames = element_rate(f'independent-{n}', n)
    out['independent_threads_each'] = per
    out['independent_fps'] = round(ind_fps, 3)
    out['shared_vs_independent'] = round(shared_fps / ind_fps, 3)
    out['frames_timed']['independent'] = ind_frames
print(json.dumps(out), flush=True)
EOF
done
