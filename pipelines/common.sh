# SPDX-License-Identifier: LGPL-2.1-or-later
# Shared by the pipelines/ scripts (sourced, not run): installs what is missing,
# builds the project, and points GStreamer at the plugin in the build tree.
#
#   VISIONDETECT_NO_BUILD=1   skip the package check and the build (the tests
#                             set it: they run from a finished build)
#   VISIONDETECT_BUILD_DIR    the build directory (default: build/ in the source)
#   VISIONDETECT_MODEL        a model file, when no --model is given

VD_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VD_BUILD="${VISIONDETECT_BUILD_DIR:-$VD_ROOT/build}"

# The Debian packages the scripts need to build and to run their pipelines:
# vd_main_packages, in the list shared with tests/run.sh.
# shellcheck source=tools/debian-packages.sh
source "$VD_ROOT/tools/debian-packages.sh"

vd_log() { printf '%s: %s\n' "$(basename "$0")" "$*" >&2; }
vd_die() { vd_log "$*"; exit 1; }

vd_install_missing() { vd_install_missing_packages "${vd_main_packages[@]}"; }

vd_build() {
  if [ -f "$VD_BUILD/build.ninja" ]; then
    ninja -C "$VD_BUILD" >&2
  else
    meson setup "$VD_BUILD" "$VD_ROOT" >&2 && ninja -C "$VD_BUILD" >&2
  fi
}

# Installs, builds (unless VISIONDETECT_NO_BUILD=1) and sets up the environment.
vd_prepare() {
  if [ "${VISIONDETECT_NO_BUILD:-0}" != 1 ]; then
    vd_install_missing
    vd_build || vd_die "the build failed"
  fi
  [ -e "$VD_BUILD/gst/libgstvisiondetect.so" ] || vd_die "no plugin in $VD_BUILD/gst: build the project first (meson setup build && ninja -C build)"
  export GST_PLUGIN_PATH="$VD_BUILD/gst${GST_PLUGIN_PATH:+:$GST_PLUGIN_PATH}"
  # an uninstalled plugin finds the bundled model through the environment only
  # (as under meson devenv)
  if [ -z "${VISIONDETECT_MODEL:-}" ] && [ -f "$VD_ROOT/models/visiondetect-shapes.safetensors" ]; then
    export VISIONDETECT_MODEL="$VD_ROOT/models/visiondetect-shapes.safetensors"
  fi
  # a registry of our own: never a stale ~/.cache one
  export GST_REGISTRY="${GST_REGISTRY:-$VD_BUILD/gst-registry.bin}"
  gst-inspect-1.0 visiondetect >/dev/null 2>&1 || vd_die "GStreamer cannot load the visiondetect plugin from $VD_BUILD/gst (run gst-inspect-1.0 visiondetect to see why)"
}

# The model the element will use: the --model argument, $VISIONDETECT_MODEL or
# the bundled one. Fails with a clear message when there is none.
vd_check_model() {
  local model="$1"
  if [ -n "$model" ]; then
    [ -f "$model" ] || vd_die "model file '$model' does not exist"
    return 0
  fi
  if [ -n "${VISIONDETECT_MODEL:-}" ]; then
    [ -f "$VISIONDETECT_MODEL" ] || vd_die "VISIONDETECT_MODEL='$VISIONDETECT_MODEL' does not exist"
    return 0
  fi
  [ -f "$VD_ROOT/models/visiondetect-shapes.safetensors" ] && return 0
  vd_die "the bundled model models/visiondetect-shapes.safetensors is missing: pass --model FILE (a .safetensors file written by tools/export_torchvision.py)"
}

# The pipeline is built as an array of gst-launch-1.0 arguments, one word each:
# gst-launch escapes the spaces inside an argument, so a property value with
# spaces (a file name) stays one value.
pipeline=()
vd_add() { pipeline+=("$@"); }

# visiondetect with its properties from the common options
vd_add_detect() {
  vd_add visiondetect
  [ -n "$opt_model" ] && vd_add "model=$opt_model"
  [ -n "$opt_device" ] && vd_add "device=$opt_device"
  [ -n "$opt_threshold" ] && vd_add "threshold=$opt_threshold"
  [ -n "$opt_interval" ] && vd_add "interval=$opt_interval"
  [ -n "$opt_classes" ] && vd_add "classes=$opt_classes"
  return 0
}

# The generated clip's start: the ball in three colour schemes one after the
# other, FRAMES in all at WIDTHxHEIGHT, 24 frames/s, into "concat
# name=clip"; sets clip_caps (their caps) for further sources of the clip.
# vd_add_clip_end closes it.
vd_add_ball_clip() {
  local frames="$1" third last
  clip_caps="video/x-raw,width=$2,height=$3,framerate=24/1,format=I420"
  third=$(( (frames + 2) / 3 ))
  last=$(( frames - 2 * third )); [ $last -gt 0 ] || last=1
  vd_add videotestsrc pattern=ball "num-buffers=$third" ! "$clip_caps" ! clip.
  vd_add videotestsrc pattern=ball "num-buffers=$third" foreground-color=0xffff4040 \
    background-color=0xff203060 ! "$clip_caps" ! clip.
  vd_add videotestsrc pattern=ball "num-buffers=$last" foreground-color=0xfff0e020 \
    background-color=0xff808080 ! "$clip_caps" ! clip.
}

# The clip's concat, as one segment with continuous timestamps: each source
# starts at 0, and encoders and muxers take buffer timestamps, not concat's
# running time.
vd_add_clip_end() { vd_add concat name=clip ! identity single-segment=true ! videoconvert; }

# Runs the pipeline, printing it first (quoted as a shell would need it).
vd_launch() {
  vd_log "gst-launch-1.0 -e $(printf '%q ' "${pipeline[@]}")"
  gst-launch-1.0 -e "${pipeline[@]}"
}
