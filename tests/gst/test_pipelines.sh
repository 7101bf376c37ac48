#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Each pipelines/ script runs to EOS on a short generated input and writes what
# it promises (an MP4 with every frame, JSON Lines that parse, one per frame);
# --help explains each; a missing model is a clear error. Run by meson (suite
# gst) from a finished build: VISIONDETECT_NO_BUILD=1.
set -euo pipefail

src="${VD_TEST_SRCDIR:?run through meson test}"
model="${VD_TEST_FIXTURES:?}/gst-test-model.safetensors"
python="${VD_TEST_PYTHON:-/usr/bin/python3}"
export VISIONDETECT_NO_BUILD=1
export VISIONDETECT_BUILD_DIR="${VD_TEST_BUILDDIR:?}"
work="$(mktemp -d "${VD_TEST_WORKDIR:-/tmp}/pipelines-XXXXXX")"
server_pid=""
cleanup() {
  [ -z "$server_pid" ] || kill "$server_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "--- $*"; }

# frames of a video file: decoded to 8-bit grey, bytes / (width * height)
count_frames() {
  local file="$1" w="$2" h="$3"
  gst-launch-1.0 -q filesrc "location=$file" ! decodebin ! videoconvert ! videoscale \
    ! "video/x-raw,format=GRAY8,width=$w,height=$h" ! filesink "location=$work/raw" >/dev/null
  echo $(( $(stat -c %s "$work/raw") / (w * h) ))
}

# every line a JSON object of the schema, LINES lines (or at least MIN)
check_jsonl() {
  local file="$1" want="$2"
  python3 - "$file" "$want" <<'PY'
import json, sys
path, want = sys.argv[1], sys.argv[2]
lines = open(path).read().splitlines()
if want.startswith(">="):
    ok = len(lines) >= int(want[2:])
else:
    ok = len(lines) == int(want)
if not ok:
    sys.exit(f"{path}: {len(lines)} lines, want {want}")
for i, line in enumerate(lines):
    d = json.loads(line)
    assert d["frame"] == i, (i, d["frame"])
    assert d["width"] > 0 and d["height"] > 0
    assert d["pts"] is None or d["pts"] >= 0
    assert d["inferred"] in (True, False), d
    # a frame not inferred repeats the last inferred one (a GAP duplicate), or
    # has no detections, only visiontrack's predictions
    assert d["inferred"] or d.get("repeated") is True or (
        d["skipped"] in ("interval", "late", "gap")
        and all(o.get("tracked") is True for o in d["objects"])), d
    assert not (d["inferred"] and "repeated" in d), d
    for o in d["objects"]:
        assert isinstance(o["label"], str) and isinstance(o["label_id"], int)
        assert 0 <= o["confidence"] <= 1, o
        b, r = o["box"], o["rect"]
        assert 0 <= b["x_min"] <= b["x_max"] <= 1 and 0 <= b["y_min"] <= b["y_max"] <= 1, o
        assert abs(r["x"] - b["x_min"] * d["width"]) < 0.02 and abs(r["w"] - (b["x_max"] - b["x_min"]) * d["width"]) < 0.03, o
print(f"{path}: {len(lines)} valid lines, {sum(len(json.loads(l)['objects']) for l in lines)} objects")
PY
}

for script in annotate count camera rtsp; do
  step "$script.sh --help"
  "$src/pipelines/$script.sh" --help | grep -q "^Usage: pipelines/$script.sh" || fail "$script.sh --help"
done

step "annotate.sh, generated clip"
"$src/pipelines/annotate.sh" --model "$model" --threshold 0.5 --frames 6 --size 320x240 \
  --output "$work/clip.mp4" || fail "annotate.sh on the generated clip"
[ "$(count_frames "$work/clip.mp4" 320 240)" = 6 ] || fail "clip.mp4 has not 6 frames"
check_jsonl "$work/clip.jsonl" 6

step "annotate.sh, an odd-sized Matroska file with an audio track, and a file name with a space"
# 351x287: the MP4 (4:2:0) gets a black column and row, the JSON keeps 351x287
gst-launch-1.0 -q -e videotestsrc num-buffers=8 pattern=smpte ! video/x-raw,width=351,height=287,framerate=25/1 \
  ! x264enc ! matroskamux name=mux ! filesink "location=$work/in put.mkv" \
  audiotestsrc num-buffers=20 ! audioconvert ! vorbisenc ! mux.
"$src/pipelines/annotate.sh" --model "$model" --json "$work/in put.jsonl" "$work/in put.mkv" \
  "$work/out put.mp4" || fail "annotate.sh on a file"
[ "$(count_frames "$work/out put.mp4" 352 288)" = 8 ] || fail "out put.mp4 has not 8 frames"
check_jsonl "$work/in put.jsonl" 8
grep -q '"width":351,"height":287' "$work/in put.jsonl" || fail "the JSON lost the frame's own size"

step "annotate.sh without a model"
if "$src/pipelines/annotate.sh" --model "$work/missing.safetensors" 2>"$work/err"; then
  fail "annotate.sh ran without its model"
fi
grep -q "missing.safetensors' does not exist" "$work/err" || fail "unclear error: $(cat "$work/err")"

step "count.sh, generated clip, bundled model, detections on every 2nd frame"
# the ball of each colour scheme starts at the centre and moves down: three
# objects, each crossing the line at 0.6 of the height once
"$src/pipelines/count.sh" --size 320x240 --frames 48 --interval 2 --json "$work/count.jsonl" \
  >"$work/count.out" || fail "count.sh"
cat "$work/count.out"
check_jsonl "$work/count.jsonl" 48
grep -q '"object_id":' "$work/count.jsonl" || fail "count.sh: no object ids in the JSON"
grep -q '"tracked":true' "$work/count.jsonl" || fail "count.sh: no predicted boxes at interval 2"
grep -Eq '^ball +3 crossings \(3 down, 0 up\) by 3 of 3 objects' "$work/count.out" \
  || fail "count.sh: not the three crossings of the generated clip"

step "camera.sh --test (live source, late frames skipped)"
timeout 120 "$src/pipelines/camera.sh" --test --model "$model" --frames 10 --size 320x240 \
  --sink fakesink --json "$work/camera.jsonl" >"$work/camera.log" 2>&1 \
  || { cat "$work/camera.log"; fail "camera.sh --test"; }
grep -q "Got EOS" "$work/camera.log" || fail "camera.sh did not reach EOS"
check_jsonl "$work/camera.jsonl" ">=1"

step "rtsp.sh against a local RTSP server"
"$python" "$src/tests/gst/rtsp_server.py" --timeout 110 >"$work/server.out" 2>&1 &
server_pid=$!
for _ in $(seq 50); do
  [ -s "$work/server.out" ] && break
  sleep 0.2
done
url="$(head -n1 "$work/server.out")"
case "$url" in
  rtsp://*)
    timeout 100 "$src/pipelines/rtsp.sh" --model "$model" --frames 6 --output "$work/rtsp.mp4" \
      --json "$work/rtsp.jsonl" "$url" || fail "rtsp.sh"
    [ "$(count_frames "$work/rtsp.mp4" 320 240)" -ge 1 ] || fail "rtsp.mp4 is empty"
    check_jsonl "$work/rtsp.jsonl" ">=1"
    ;;
  SKIP*) echo "rtsp.sh not run: $url" ;;
  *) fail "the RTSP server did not start: $(cat "$work/server.out")" ;;
esac
echo "all pipelines ran to EOS"
