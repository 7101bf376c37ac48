#!/usr/bin/env bash
# The one prepared check for a lent GPU (shared/GPU.md): every GPU test, the
# engine against the CPU engine and torchvision, the benchmark, and the
# visiondetect element through GStreamer (tests/gpu/element-check.sh), with the
# results under $OUT in at most 8 files (the device tool's limit):
#   env.txt          the machine, libraries, and the model preparation's log
#   kernels.log      test-gpu-kernels
#   engine.json/.log test-gpu-engine (the element check's report, the Mask
#                    R-CNN checks, test-gpu-engine --masks, the ResNet-50-FPN
#                    v2 checks and the MobileNetV3-Large-FPN checks, --core,
#                    appended to the log)
#   engine-demo.json test-gpu-engine on the bundled demo model
#   bench.json/.log  tools/bench_gpu.py bench
#   element.json     element-check.sh: CUDA against CPU in the element, throughput
#
# On this project's machines (no GPU), first:
#   tests/gpu/make-device-bundle.sh        # build/ binaries + their non-system
#                                          # libraries -> .device/bundle.tar.gz
# then, through the device tool, from the repository root:
#   bash tests/gpu/device-check.sh         # carry: [".device"]
# (VD_ELEMENT_CHECK_DEVICE=cpu makes the element step a dry run without a GPU:
# see element-check.sh)
#
# The GPU machine has the CUDA 13 driver and, in python's nvidia-* packages,
# cudart, cuBLAS and cuDNN 9 (put on LD_LIBRARY_PATH here), and torch/torchvision
# for the model, the reference and the benchmark. The carried libraries and
# GStreamer reach our binaries and gst-launch-1.0 alone (never python). Budget:
# well under 7 minutes; every step has its own timeout so that a hang leaves the
# others' results.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out-gpu}
mkdir -p "$OUT"
BUNDLE=${VD_DEVICE_BUNDLE:-.device/bundle.tar.gz}
WORK=${VD_DEVICE_WORK:-/tmp/vd-device}
export PYTHONUNBUFFERED=1
start=$(date +%s)
step() { echo; echo "=== [$(($(date +%s) - start)) s] $*"; }
status=0

step "environment"
rm -rf "$WORK" && mkdir -p "$WORK/data"
if [ ! -f "$BUNDLE" ]; then
  echo "no $BUNDLE: run tests/gpu/make-device-bundle.sh on the build machine and carry .device"
  exit 2
fi
tar -xzf "$BUNDLE" -C "$WORK"
BIN=$WORK/bin
NVLIBS=$(python3 - <<'EOF'
import glob, os, site, sys
dirs = set()
for base in site.getsitepackages() + [site.getusersitepackages()]:
    for lib in glob.glob(os.path.join(base, "nvidia", "**", "lib*.so*"), recursive=True):
        dirs.add(os.path.dirname(lib))
print(":".join(sorted(dirs)))
EOF
)
# our binaries only: the carried Debian libraries must not replace the ones
# python and torch load
VD_LD="$WORK/lib:$NVLIBS:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
for b in test-gpu-kernels test-gpu-engine vd-gpu-bench; do
  printf '#!/bin/sh\nLD_LIBRARY_PATH="%s" exec "%s" "$@"\n' "$VD_LD" "$BIN/$b" > "$WORK/run-$b"
  chmod +x "$WORK/run-$b"
done
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
  python3 -c "import torch, torchvision; print('torch', torch.__version__, 'torchvision', torchvision.__version__, 'cudnn', torch.backends.cudnn.version())"
  echo "our LD_LIBRARY_PATH=$VD_LD"
  for b in "$BIN"/*; do
    echo "ldd $(basename "$b"):"
    LD_LIBRARY_PATH="$VD_LD" ldd "$b" | grep -E "not found|cud|cublas|dnnl|glib"
  done
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

step "kernels against the CPU ops"
timeout 60 "$WORK/run-test-gpu-kernels" > "$OUT/kernels.log" 2>&1
rc=$?; tail -20 "$OUT/kernels.log"; echo "test-gpu-kernels: exit $rc"; [ $rc -eq 0 ] || status=1

step "model and frames"
timeout 120 python3 tools/bench_gpu.py prepare --workdir "$WORK/data" > "$WORK/prepare.log" 2>&1
rc=$?; tail -5 "$WORK/prepare.log"; echo "prepare: exit $rc"
{ echo; echo "=== model and frames (tools/bench_gpu.py prepare): exit $rc"; cat "$WORK/prepare.log"; } >> "$OUT/env.txt"
prepared=1
if [ $rc -ne 0 ]; then
  echo "no model: the engine tests and the benchmark cannot run"
  prepared=0; status=1
fi

if [ $prepared -eq 1 ]; then  # the steps that need the prepared model and frames

step "engine: CUDA against the CPU engine, fp16 against fp32, sync count, batches of 4 and 8"
trained=$(python3 -c "import json; print('--trained' if json.load(open('$WORK/data/model.json'))['trained'] else '')")
timeout 170 "$WORK/run-test-gpu-engine" --model "$WORK/data/model.safetensors" $trained \
  --json "$OUT/engine.json" "$WORK"/data/frame-*.ppm > "$OUT/engine.log" 2>&1
rc=$?; cat "$OUT/engine.log" | tail -40; echo "test-gpu-engine: exit $rc"; [ $rc -eq 0 ] || status=1

step "engine on the bundled trained demo model: fp16 against fp32"
if [ -f models/visiondetect-shapes.safetensors ] && ls "$WORK"/data/demo-*.ppm > /dev/null 2>&1; then
  timeout 60 "$WORK/run-test-gpu-engine" --model models/visiondetect-shapes.safetensors --trained \
    --detections-only --json "$OUT/engine-demo.json" "$WORK"/data/demo-*.ppm >> "$OUT/engine.log" 2>&1
  rc=$?; tail -12 "$OUT/engine.log"; echo "test-gpu-engine (demo model): exit $rc"
  [ $rc -eq 0 ] || status=1
else
  echo "no demo model or scenes"
fi

step "benchmark against torchvision"
timeout 180 python3 tools/bench_gpu.py bench --workdir "$WORK/data" --bench-bin "$WORK/run-vd-gpu-bench" \
  --json "$OUT/bench.json" --iters 100 --tv-iters 20 --micro-iters 100 > "$OUT/bench.log" 2>&1
rc=$?; tail -25 "$OUT/bench.log"; echo "bench: exit $rc"; [ $rc -eq 0 ] || status=1
fi  # prepared

step "the visiondetect element in GStreamer: device=cuda against device=cpu, throughput"
# the carried gst-launch-1.0 and plugins, with our LD_LIBRARY_PATH; its budget
# (90 s) ends its runs before this timeout
VD_ELEMENT_LD="$VD_LD" VD_ELEMENT_LOG="$OUT/engine.log" VD_ELEMENT_BUDGET=90 \
  timeout -k 5 110 bash tests/gpu/element-check.sh "$WORK" "$OUT"
rc=$?
[ -f "$OUT/element.json" ] || printf '{"ok": false, "failures": ["element-check.sh: exit %d before writing its results"]}\n' $rc > "$OUT/element.json"
sed -n '/^=== element check/,$p' "$OUT/engine.log" | grep -v -E '^(coreelements|staticelements|videotestsrc|visiondetect):' | tail -60
echo "element-check: exit $rc"; [ $rc -eq 0 ] || status=1

step "Mask R-CNN: the CUDA mask branch against the CPU engine (v1 head, v2 head), fp32 and fp16"
# last: its models are made here (torchvision, random calibrated weights, ~15 s),
# and a run that outlasts the device tool's limit cuts only this step short
timeout 60 python3 tools/bench_gpu.py prepare-masks --workdir "$WORK/data" > "$WORK/prepare-masks.log" 2>&1
rc=$?; tail -2 "$WORK/prepare-masks.log"; echo "prepare-masks: exit $rc"
{ echo; echo "=== Mask R-CNN models (tools/bench_gpu.py prepare-masks): exit $rc"; cat "$WORK/prepare-masks.log"; } >> "$OUT/env.txt"
if [ $rc -eq 0 ]; then
  for m in mask-v1 mask-v2head; do
    echo "=== test-gpu-engine --masks $m" >> "$OUT/engine.log"
    timeout 45 "$WORK/run-test-gpu-engine" --masks --model "$WORK/data/$m.safetensors" \
      "$WORK/data/mask-frame-0.ppm" > "$WORK/$m.log" 2>&1
    rc=$?; cat "$WORK/$m.log" >> "$OUT/engine.log"
    grep -E "^  (ok  |FAIL|info)|^(PASS|FAIL)" "$WORK/$m.log"; echo "test-gpu-engine --masks $m: exit $rc"
    [ $rc -eq 0 ] || status=1
  done
else
  echo "no Mask R-CNN models: the mask checks cannot run"; status=1
fi

step "ResNet-50-FPN v2 on CUDA against the CPU engine: fasterrcnn_resnet50_fpn_v2 (--core), maskrcnn_resnet50_fpn_v2 (--masks), fp32 and fp16"
# after the mask step, for the same reason: models made here (~20 s), and a run cut
# short by the device tool's limit loses only this step
timeout 90 python3 tools/bench_gpu.py prepare-v2 --workdir "$WORK/data" > "$WORK/prepare-v2.log" 2>&1
rc=$?; tail -2 "$WORK/prepare-v2.log"; echo "prepare-v2: exit $rc"
{ echo; echo "=== ResNet-50-FPN v2 models (tools/bench_gpu.py prepare-v2): exit $rc"; cat "$WORK/prepare-v2.log"; } >> "$OUT/env.txt"
if [ $rc -eq 0 ]; then
  for m in v2 mask-v2; do
    mode=--core; [ $m = mask-v2 ] && mode=--masks
    echo "=== test-gpu-engine $mode $m" >> "$OUT/engine.log"
    timeout 60 "$WORK/run-test-gpu-engine" $mode --model "$WORK/data/$m.safetensors" \
      "$WORK/data/v2-frame-0.ppm" > "$WORK/$m.log" 2>&1
    rc=$?; cat "$WORK/$m.log" >> "$OUT/engine.log"
    grep -E "^  (ok  |FAIL|info)|^(PASS|FAIL)|^model:" "$WORK/$m.log"; echo "test-gpu-engine $mode $m: exit $rc"
    [ $rc -eq 0 ] || status=1
  done
else
  echo "no v2 models: the v2 checks cannot run"; status=1
fi

step "MobileNetV3-Large-FPN on CUDA against the CPU engine: fasterrcnn_mobilenet_v3_large_fpn and _320_fpn (--core), fp32 and fp16"
# last, for the same reason: models made here (~15 s), and a run cut short by the
# device tool's limit loses only this step
timeout 90 python3 tools/bench_gpu.py prepare-mnv3 --workdir "$WORK/data" > "$WORK/prepare-mnv3.log" 2>&1
rc=$?; tail -2 "$WORK/prepare-mnv3.log"; echo "prepare-mnv3: exit $rc"
{ echo; echo "=== MobileNetV3-Large-FPN models (tools/bench_gpu.py prepare-mnv3): exit $rc"; cat "$WORK/prepare-mnv3.log"; } >> "$OUT/env.txt"
if [ $rc -eq 0 ]; then
  for m in mnv3 mnv3-320; do
    echo "=== test-gpu-engine --core $m" >> "$OUT/engine.log"
    timeout 60 "$WORK/run-test-gpu-engine" --core --model "$WORK/data/$m.safetensors" \
      "$WORK/data/mnv3-frame-0.ppm" > "$WORK/$m.log" 2>&1
    rc=$?; cat "$WORK/$m.log" >> "$OUT/engine.log"
    grep -E "^  (ok  |FAIL|info)|^(PASS|FAIL)|^model:|^core checks" "$WORK/$m.log"; echo "test-gpu-engine --core $m: exit $rc"
    [ $rc -eq 0 ] || status=1
  done
else
  echo "no MobileNetV3 models: the MobileNetV3 checks cannot run"; status=1
fi

step "done (status $status)"
exit $status
