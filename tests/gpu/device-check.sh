#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The one prepared check for a GPU machine: every GPU test, the
# engine against the CPU engine and torchvision, the benchmark, and the
# visiondetect element through GStreamer (tests/gpu/element-check.sh), with the
# results under $OUT in at most 8 files (the device tool's limit):
#   env.txt          the machine, libraries, and the model preparation's log
#   kernels.log      test-gpu-kernels, then vd-gpu-bench rpn-topk's JSON line
#   engine.json/.log test-gpu-engine (the element check's report, the Mask
#                    R-CNN checks, test-gpu-engine --masks, the ResNet-50-FPN
#                    v2 checks and the MobileNetV3-Large-FPN checks, --core,
#                    appended to the log; their reports in engine.json under
#                    "models", one per model, with the run's exit status);
#                    engine.json's "kernels": test-gpu-kernels' pre-processing
#                    comparisons, CUDA against the CPU under both resize rules
#                    (torch1, torch2; expected identical), with its exit status
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
# well under 7 minutes; every step has its own timeout, cut to what is left before
# VD_DEVICE_DEADLINE (400 s; the device tool stops the command at about 420 s), so
# that a hang leaves the others' results and the run always ends by itself with
# its files written. Order: the checks of code never run on a GPU (engine, masks,
# v2, MobileNetV3) before the element check and the benchmark, which a slow run
# loses first. A second try reruns some steps only:
#   VD_DEVICE_STEPS=masks,v2,mnv3 bash tests/gpu/device-check.sh
# (kernels, engine, demo, masks, v2, mnv3, element, bench).
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
# The device tool stops the whole command at its limit (about 420 s) and what is
# running then leaves nothing: every step's timeout is cut to what is left before
# DEADLINE, and a step with too little left is skipped (and fails the run).
DEADLINE=${VD_DEVICE_DEADLINE:-400}
# a second try reruns only some: VD_DEVICE_STEPS=masks,v2,mnv3
STEPS=${VD_DEVICE_STEPS:-kernels,engine,demo,masks,v2,mnv3,element,bench}
selected() { case ",$STEPS," in *",$1,"*) return 0 ;; esac; return 1; }
# limit WANT [MIN]: WANT, or the seconds left before DEADLINE less 5; 0 when
# fewer than MIN (default 15) are left
limit() {
  local left=$((DEADLINE - ($(date +%s) - start) - 5))
  if [ "$left" -lt "${2:-15}" ]; then echo 0; elif [ "$left" -lt "$1" ]; then echo "$left"; else echo "$1"; fi
}
# no_json FILE WHAT: FILE's stand-in when its step wrote none
no_json() { [ -f "$1" ] || printf '{"ok": false, "failures": ["%s"]}\n' "$2" > "$1"; }

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
  cat "$WORK/BUILD-INFO" 2>/dev/null || echo "bundle without BUILD-INFO"
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
t=$(limit 60)
if ! selected kernels; then echo "not selected"
elif [ "$t" -eq 0 ]; then
  echo "skipped: out of time" | tee "$OUT/kernels.log"; status=1
  kernels_result="not run: out of time"
else
  rm -f "$WORK/kernels.json"
  timeout "$t" "$WORK/run-test-gpu-kernels" --json "$WORK/kernels.json" > "$OUT/kernels.log" 2>&1
  rc=$?; tail -20 "$OUT/kernels.log"; echo "test-gpu-kernels: exit $rc"; [ $rc -eq 0 ] || status=1
  # filed into engine.json at the end (test-gpu-engine writes that file afresh)
  kernels_result="test-gpu-kernels: exit $rc"
  # the RPN top-k, image by image against one segmented sort per batch (issue
  # 37, item 7): a JSON line appended to kernels.log, information only
  t=$(limit 30)
  if [ "$t" -gt 0 ]; then
    echo "=== vd-gpu-bench rpn-topk" >> "$OUT/kernels.log"
    timeout "$t" "$WORK/run-vd-gpu-bench" rpn-topk --iters 30 >> "$OUT/kernels.log" 2>&1
    echo "vd-gpu-bench rpn-topk: exit $?"; tail -1 "$OUT/kernels.log"
  fi
fi

# prepare WHAT WANT: tools/bench_gpu.py WHAT, its log appended to env.txt as it
# runs (a run stopped by the device tool keeps it)
prepare() {
  local t rc
  echo >> "$OUT/env.txt"; echo "=== tools/bench_gpu.py $1" >> "$OUT/env.txt"
  t=$(limit "$2" 20)
  if [ "$t" -eq 0 ]; then echo "$1: skipped: out of time" | tee -a "$OUT/env.txt"; return 124; fi
  timeout "$t" python3 tools/bench_gpu.py "$1" --workdir "$WORK/data" 2>&1 | tee -a "$OUT/env.txt" | tail -3
  rc=${PIPESTATUS[0]}
  echo "$1: exit $rc" | tee -a "$OUT/env.txt"
  return "$rc"
}
# engine_run MODE MODEL FRAME WANT: one test-gpu-engine --masks / --core run,
# its log appended to engine.log as it runs, its report (or a stand-in) filed
# under "models" in engine.json (the device tool brings back 8 files at most)
engine_run() {
  local t rc
  echo "=== test-gpu-engine $1 $2" >> "$OUT/engine.log"
  t=$(limit "$4" 20)
  if [ "$t" -eq 0 ]; then
    echo "test-gpu-engine $1 $2: skipped: out of time" | tee -a "$OUT/engine.log"; status=1
    file_model_report "$2" "not run: out of time"
    return
  fi
  rm -f "$WORK/$2.json"
  timeout "$t" "$WORK/run-test-gpu-engine" "$1" --model "$WORK/data/$2.safetensors" \
    --json "$WORK/$2.json" "$3" 2>&1 | tee "$WORK/$2.log" >> "$OUT/engine.log"
  rc=${PIPESTATUS[0]}
  grep -E "^  (ok  |FAIL|info)|^(PASS|FAIL)|^model:|^core checks" "$WORK/$2.log"
  echo "test-gpu-engine $1 $2: exit $rc"
  [ $rc -eq 0 ] || status=1
  file_model_report "$2" "test-gpu-engine $1: exit $rc" "$WORK/$2.json"
}
# file_model_report NAME RESULT [JSON]: engine.json's "models"[NAME] = JSON's
# report (or {"ok": false} when there is none) with "result" = RESULT; makes
# engine.json when the engine step did not run (a second try)
file_model_report() { file_report "models/$1" "$2" "${3:-}"; }
# file_report KEY RESULT [JSON]: the same under KEY ("a/b": "a"["b"])
file_report() {
  python3 - "$OUT/engine.json" "$1" "$2" "${3:-}" <<'PYEOF'
import json, os, sys
path, key, result, report = sys.argv[1:5]
doc = {}
try:
    with open(path) as f:
        text = f.read()
    doc = json.loads(text)
except OSError:
    pass
except ValueError:
    doc = {"unparsed_report": text}
try:
    with open(report) as f:
        entry = json.load(f)
except (OSError, ValueError):
    entry = {"ok": False}
if "failures" in entry:
    entry["ok"] = entry["failures"] == 0 and result.endswith("exit 0")
entry["result"] = result
*parents, name = key.split("/")
node = doc
for parent in parents:
    node = node.setdefault(parent, {})
node[name] = entry
tmp = path + ".tmp"
with open(tmp, "w") as f:
    json.dump(doc, f, indent=2)
os.replace(tmp, path)
PYEOF
}
# model_step STEP PREPARE WANT TITLE RUN...: the checks of a family of models
# made by tools/bench_gpu.py PREPARE; each RUN is MODE:MODEL:FRAME:WANT
model_step() {
  local name=$1 prep=$2 want=$3 title=$4 run mode model frame w
  shift 4
  selected "$name" || return 0
  step "$title"
  if ! prepare "$prep" "$want"; then
    echo "no models from $prep: the $name checks cannot run"; status=1
    for run in "$@"; do
      IFS=: read -r mode model frame w <<< "$run"
      file_model_report "$model" "not run: tools/bench_gpu.py $prep failed (env.txt)"
    done
    return 0
  fi
  for run in "$@"; do
    IFS=: read -r mode model frame w <<< "$run"
    engine_run "$mode" "$model" "$WORK/data/$frame" "$w"
  done
}

prepared=0
if selected engine || selected demo || selected bench; then
  step "model and frames"
  if prepare prepare 120; then prepared=1; else
    echo "no model: the engine tests and the benchmark cannot run"; status=1
    selected engine && no_json "$OUT/engine.json" "not run: no model (tools/bench_gpu.py prepare, env.txt)"
    selected bench && no_json "$OUT/bench.json" "not run: no model (tools/bench_gpu.py prepare, env.txt)"
  fi
fi

if [ $prepared -eq 1 ] && selected engine; then
  step "engine: CUDA against the CPU engine, fp16 against fp32, sync count, batches of 4 and 8"
  trained=$(python3 -c "import json; print('--trained' if json.load(open('$WORK/data/model.json'))['trained'] else '')")
  t=$(limit 170 30)
  if [ "$t" -eq 0 ]; then echo "skipped: out of time" | tee -a "$OUT/engine.log"; rc=124
  else
    timeout "$t" "$WORK/run-test-gpu-engine" --model "$WORK/data/model.safetensors" $trained \
      --json "$OUT/engine.json" "$WORK"/data/frame-*.ppm >> "$OUT/engine.log" 2>&1
    rc=$?; tail -40 "$OUT/engine.log"; echo "test-gpu-engine: exit $rc"
  fi
  [ $rc -eq 0 ] || status=1
  no_json "$OUT/engine.json" "test-gpu-engine: exit $rc before writing its report"
fi

if selected demo; then  # needs prepare's demo scenes only
  step "engine on the bundled trained demo model: fp16 against fp32"
  t=$(limit 60 20)
  if [ "$t" -eq 0 ]; then echo "skipped: out of time"; rc=124
  elif [ -f models/visiondetect-shapes.safetensors ] && ls "$WORK"/data/demo-*.ppm > /dev/null 2>&1; then
    timeout "$t" "$WORK/run-test-gpu-engine" --model models/visiondetect-shapes.safetensors --trained \
      --detections-only --json "$OUT/engine-demo.json" "$WORK"/data/demo-*.ppm >> "$OUT/engine.log" 2>&1
    rc=$?; tail -12 "$OUT/engine.log"; echo "test-gpu-engine (demo model): exit $rc"
  else
    echo "no demo model or scenes"; rc=2
  fi
  [ $rc -eq 0 ] || status=1
  no_json "$OUT/engine-demo.json" "test-gpu-engine (demo model): exit $rc before writing its report"
fi

# the checks of code never run on a GPU before the benchmark (measured on
# 2026-11-29): their models are made here (torchvision, random calibrated weights)
model_step masks prepare-masks 60 \
  "Mask R-CNN: the CUDA mask branch against the CPU engine (v1 head, v2 head), fp32 and fp16" \
  --masks:mask-v1:mask-frame-0.ppm:45 --masks:mask-v2head:mask-frame-0.ppm:45
model_step v2 prepare-v2 90 \
  "ResNet-50-FPN v2 on CUDA against the CPU engine: fasterrcnn_resnet50_fpn_v2 (--core), maskrcnn_resnet50_fpn_v2 (--masks), fp32 and fp16" \
  --core:v2:v2-frame-0.ppm:60 --masks:mask-v2:v2-frame-0.ppm:60
model_step mnv3 prepare-mnv3 90 \
  "MobileNetV3-Large-FPN on CUDA against the CPU engine: fasterrcnn_mobilenet_v3_large_fpn and _320_fpn (--core), fp32 and fp16" \
  --core:mnv3:mnv3-frame-0.ppm:60 --core:mnv3-320:mnv3-frame-0.ppm:60

if selected element; then
  step "the visiondetect element in GStreamer: device=cuda against device=cpu, throughput"
  # the carried gst-launch-1.0 and plugins, with our LD_LIBRARY_PATH; its budget
  # ends its runs 20 s before this timeout
  t=$(limit 110 40)
  if [ "$t" -eq 0 ]; then echo "skipped: out of time"; rc=124
  else
    VD_ELEMENT_LD="$VD_LD" VD_ELEMENT_LOG="$OUT/engine.log" VD_ELEMENT_BUDGET=$((t - 20)) \
      timeout -k 5 "$t" bash tests/gpu/element-check.sh "$WORK" "$OUT"
    rc=$?
    sed -n '/^=== element check/,$p' "$OUT/engine.log" | grep -v -E '^(coreelements|staticelements|videotestsrc|visiondetect):' | tail -60
  fi
  no_json "$OUT/element.json" "element-check.sh: exit $rc before writing its results"
  echo "element-check: exit $rc"; [ $rc -eq 0 ] || status=1
fi

if [ $prepared -eq 1 ] && selected bench; then
  step "benchmark against torchvision"
  t=$(limit 180 60)
  if [ "$t" -eq 0 ]; then echo "skipped: out of time" | tee "$OUT/bench.log"; rc=124
  else
    timeout "$t" python3 tools/bench_gpu.py bench --workdir "$WORK/data" --bench-bin "$WORK/run-vd-gpu-bench" \
      --json "$OUT/bench.json" --iters 100 --tv-iters 20 --micro-iters 100 > "$OUT/bench.log" 2>&1
    rc=$?; tail -25 "$OUT/bench.log"; echo "bench: exit $rc"
  fi
  [ $rc -eq 0 ] || status=1
  no_json "$OUT/bench.json" "bench_gpu.py bench: exit $rc before writing its results"
fi

if [ -n "${kernels_result:-}" ]; then
  file_report kernels "$kernels_result" "$WORK/kernels.json"
fi

step "done (status $status)"
exit $status
