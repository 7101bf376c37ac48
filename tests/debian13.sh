#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The README's two commands on Debian 13 (trixie), in a minimal root made with
# debootstrap: in a fresh clone of this repository's HEAD there, pipelines/annotate.sh
# (the main job; its MP4 and JSON Lines checked, and its own build's GstAnalytics
# entries) and tests/run.sh with the suites chosen for Debian 13. Both install their
# packages inside the root themselves, from tools/debian-packages.sh; this script
# installs each list in a phase of its own first (nothing to do once the root has
# them): the main job's before the main job and the tests' after it, so that in a new
# root the main job builds with its own packages only.
#
# The main job's build (build/ as pipelines/annotate.sh leaves it, before tests/run.sh
# configures it again) is checked to write GStreamer's analytics entries, which
# Debian 13's GStreamer (1.26) has: the package of gstreamer-analytics-1.0 must be
# one of vd_main_packages or a dependency of one (a reused root holds the tests'
# packages too), and a buffer of annotate.sh's pipeline through that build's plugin
# must carry one object-detection entry per ROI meta, at least one in all
# (tests/gst/test_analytics.py main-build).
#
#   tests/debian13.sh [OPTION]... [SUITE]...
#
#   SUITE...       tests/run.sh's suites in the root (default: engine tracker parity gst
#                  model; no gpu: CUDA is host-only, Debian 13's main archive has no CUDA
#                  toolkit, so meson finds no nvcc in the root)
#   --worktree     also apply the working tree's uncommitted changes to the clone (git
#                  diff HEAD, and the untracked files git does not ignore)
#   --build-only   stop after the build (meson setup build && ninja -C build in the clone)
#   -h, --help     this text
#
# The ASan + UBSan engine run and the libFuzzer harnesses are left out in the root
# (VISIONDETECT_SANITIZERS=0): the host run covers the same engine code.
#
# The root is kept in VISIONDETECT_DEBIAN13_ROOT (default /var/cache/visiondetect/
# debian13) and reused while it has the stamp written after a successful debootstrap
# and base setup, and runs /bin/true; otherwise it is removed and made again, in
# ROOT.tmp first, renamed when complete. The mirror is the host's: the first deb entry
# of /etc/apt/sources.list and /etc/apt/sources.list.d/*.list, *.sources whose suite
# is the host's release codename (VISIONDETECT_DEBIAN13_MIRROR overrides it).
# The host's resolv.conf and hosts are copied in. proc, sys, a dev of its own (tmpfs
# with the usual nodes, devpts, shm) are mounted for the run and unmounted on every exit; the run is in a mount namespace of its own
# where unshare(1) allows one (VISIONDETECT_DEBIAN13_UNSHARE=0: in the caller's), so a
# killed run leaves no mounts either.
#
# Environment passed into the root: CI, ONEDNN_*, DNNL_*; otherwise env -i with PATH,
# HOME=/root and LANG=C.UTF-8.
# Also: VISIONDETECT_DEBIAN13_WORKTREE=1 (same as --worktree).
# Needs root (runs itself with sudo otherwise), git, and debootstrap (installed when
# missing, like the README commands' packages).
set -euo pipefail

log() { printf 'tests/debian13.sh: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

repo="$(cd "$(dirname "$0")/.." && pwd)"
self="$repo/tests/debian13.sh"

if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || die "needs root (debootstrap, chroot, mount)"
  log "needs root: running itself with sudo (VISIONDETECT_DEBIAN13=0 tests/run.sh leaves this run out)"
  keep=()
  for v in $(compgen -e); do
    case "$v" in CI|ONEDNN_*|DNNL_*|VISIONDETECT_DEBIAN13_*) keep+=("$v=${!v}") ;; esac
  done
  exec sudo env "${keep[@]}" "$BASH" "$self" "$@"
fi
# a mount namespace of its own: the mounts go with the run however it ends
if [ "${VISIONDETECT_DEBIAN13_UNSHARE:-1}" != 0 ] && unshare --mount --propagation private true 2>/dev/null; then
  export VISIONDETECT_DEBIAN13_UNSHARE=0
  exec unshare --mount --propagation private -- "$BASH" "$self" "$@"
fi

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$self"; }

suite=trixie
default_suites=(engine tracker parity gst model)
# Meson suites left out in the root, each with its reason (none today; the bundled
# model before 2026-12-06 needed model-overlay here: Debian 13's font rendering drew
# a DejaVu Serif 72 glyph it answered as a ring at 0.50)
no_suites=()
stamp_name=.visiondetect-root
partial_name=.visiondetect-partial
stamp_format="visiondetect Debian 13 root, format 1"

worktree="${VISIONDETECT_DEBIAN13_WORKTREE:-0}" build_only=0 suites=()
while [ $# -gt 0 ]; do
  case "$1" in
    --worktree) worktree=1 ;;
    --build-only) build_only=1 ;;
    -h|--help) usage; exit 0 ;;
    debian13) die "debian13 is this run: no root inside the root" ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) suites+=("$1") ;;
  esac
  shift
done
[ ${#suites[@]} -gt 0 ] || suites=("${default_suites[@]}")

root="${VISIONDETECT_DEBIAN13_ROOT:-/var/cache/visiondetect/debian13}"
[[ "$root" == /* ]] || die "VISIONDETECT_DEBIAN13_ROOT must be an absolute path, not '$root'"
root="$(realpath -m "$root")"
[[ "$root" =~ ^(/[A-Za-z0-9._+-]+){2,}$ ]] \
  || die "VISIONDETECT_DEBIAN13_ROOT '$root': at least two levels below /, letters, digits and ._+- only"
case "$root/" in "$repo"/*) die "the root must be outside the repository ($repo)" ;; esac
clone_dir=/build/visiondetect   # inside the root
clone="$root$clone_dir"

dur() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

# ---- phases and the summary line -------------------------------------------------
planned=(root clone packages)
if [ $build_only -eq 1 ]; then planned+=(test-packages build); else planned+=(annotate test-packages analytics tests); fi
phases=() current="" phase_t0=0 start=$SECONDS
begin() { current=$1; phase_t0=$SECONDS; log "== $1: $2"; }
finish() { phases+=("$current $(dur $((SECONDS - phase_t0)))${1:+ ($1)}"); current=""; }

summary() {
  local rc=$1 p done_names=" " not_run=() line
  [ -z "$current" ] || phases+=("$current FAILED after $(dur $((SECONDS - phase_t0)))")
  for p in "${phases[@]}"; do done_names+="${p%% *} "; done
  for p in "${planned[@]}"; do [[ "$done_names" == *" $p "* ]] || not_run+=("$p"); done
  if [ "$rc" -eq 0 ]; then line="PASSED"; else line="FAILED (exit $rc)"; fi
  line+=" in $(dur $((SECONDS - start))), root $root"
  for p in "${phases[@]}"; do line+="; $p"; done
  [ ${#not_run[@]} -eq 0 ] || line+="; not run: ${not_run[*]}"
  log "Debian 13 ($suite) $line"
}

# ---- mounts and processes in the root ----------------------------------------------
mounted=()
# the mount points at or below $1 in this namespace, deepest first
mounts_under() {
  awk -v d="$1" '{ m = $5; gsub(/\\040/, " ", m) } m == d || index(m, d "/") == 1 { print m }' \
    /proc/self/mountinfo | sort -r
}
unmount_one() {
  umount "$1" 2>/dev/null && return 0
  log "$1 is busy: unmounting it lazily"
  umount -l "$1"
}
unmount_all() {
  local i m
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do unmount_one "${mounted[i]}" || true; done
  mounted=()
  # and whatever a killed run left (with VISIONDETECT_DEBIAN13_UNSHARE=0)
  for m in $(mounts_under "$root") $(mounts_under "$root.tmp"); do unmount_one "$m" || true; done
}
mount_in_root() {   # mount_in_root PATH MOUNT-ARGUMENTS...
  local target="$root/$1"
  shift
  mkdir -p "$target"
  mount "$@" "$target"
  mounted+=("$target")
}
setup_mounts() {
  local node
  mount_in_root proc -t proc -o nosuid,nodev,noexec proc
  mount_in_root sys -t sysfs -o ro,nosuid,nodev,noexec sysfs
  # a dev of its own (no host device but the usual character ones)
  mount_in_root dev -t tmpfs -o nosuid,mode=0755 tmpfs
  for node in "null 1 3" "zero 1 5" "full 1 7" "random 1 8" "urandom 1 9" "tty 5 0"; do
    # shellcheck disable=SC2086  # name, major, minor
    set -- $node
    if ! mknod -m 0666 "$root/dev/$1" c "$2" "$3" 2>/dev/null; then
      : > "$root/dev/$1"   # no CAP_MKNOD (a container): the host's node bound onto a file
      mount --bind "/dev/$1" "$root/dev/$1"
      mounted+=("$root/dev/$1")
    fi
  done
  ln -s /proc/self/fd "$root/dev/fd"
  ln -s /proc/self/fd/0 "$root/dev/stdin"
  ln -s /proc/self/fd/1 "$root/dev/stdout"
  ln -s /proc/self/fd/2 "$root/dev/stderr"
  ln -s pts/ptmx "$root/dev/ptmx"
  mount_in_root dev/pts -t devpts -o newinstance,ptmxmode=0666,mode=0620,gid=5,nosuid,noexec devpts
  # GStreamer and OpenMP want shared memory
  mount_in_root dev/shm -t tmpfs -o nosuid,nodev,mode=1777 tmpfs
}
root_pids() {
  local p r
  for p in /proc/[0-9]*; do
    r="$(readlink "$p/root" 2>/dev/null)" || continue
    [ "$r" = "$root" ] || [ "$r" = "$root.tmp" ] && echo "${p#/proc/}"
  done
  return 0
}
stop_root_processes() {
  local pids i
  pids="$(root_pids)"
  [ -n "$pids" ] || return 0
  log "stopping the processes left in the root: ${pids//$'\n'/ }"
  # shellcheck disable=SC2086  # one pid a word
  kill -TERM $pids 2>/dev/null || true
  for i in 1 2 3 4 5 6 7 8 9 10; do
    sleep 0.5
    pids="$(root_pids)"
    [ -n "$pids" ] || return 0
  done
  # shellcheck disable=SC2086
  kill -KILL $pids 2>/dev/null || true
  sleep 0.5
}

on_exit() {
  local rc=$?
  trap - EXIT INT TERM
  set +e
  stop_bg
  stop_root_processes
  unmount_all
  if [ -n "$(mounts_under "$root")" ]; then
    log "mounts left under $root: $(mounts_under "$root" | tr '\n' ' ')"
    [ "$rc" -ne 0 ] || rc=1
  fi
  summary "$rc"
  exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Runs a command in the background, in a process group of its own (so that a signal
# stops the run at once, and on_exit stops the command with everything it started:
# debootstrap's dpkg, a build), and returns its status.
bg_pid=""
run_bg() {
  local rc=0
  setsid "$@" 9>&- &
  bg_pid=$!
  wait "$bg_pid" || rc=$?
  bg_pid=""
  return "$rc"
}
stop_bg() {
  local i
  [ -n "$bg_pid" ] && kill -TERM -- "-$bg_pid" 2>/dev/null || return 0
  log "stopped the running command (process group $bg_pid)"
  for i in 1 2 3 4 5 6 7 8 9 10; do
    sleep 0.5
    kill -0 -- "-$bg_pid" 2>/dev/null || return 0
  done
  kill -KILL -- "-$bg_pid" 2>/dev/null || true
}
# in_root DIR COMMAND ARG...: COMMAND in the root, in DIR, in a clean environment
root_env=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8)
for v in $(compgen -e); do
  case "$v" in CI|ONEDNN_*|DNNL_*) root_env+=("$v=${!v}") ;; esac
done
in_root_at() {   # in_root_at ROOT DIR COMMAND ARG...
  local r=$1 dir=$2
  shift 2
  # shellcheck disable=SC2016  # expanded by the root's sh
  run_bg chroot "$r" /usr/bin/env -i "${root_env[@]}" /bin/sh -c 'cd "$1" && shift && exec "$@"' sh "$dir" "$@"
}
in_root() { in_root_at "$root" "$@"; }

# ---- the mirror --------------------------------------------------------------------
# "URI SUITE" for every suite of every enabled deb entry of the host's apt sources,
# in apt's order
apt_source_pairs() {
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*; do
    [ -f "$f" ] || continue
    case "$f" in
      *.list)
        awk '{ sub(/#.*/, ""); sub(/^[ \t]*deb[ \t]+\[[^]]*\]/, "deb ") } $1 == "deb" && NF >= 3 { print $2, $3 }' "$f" ;;
      *.sources)
        awk '
          function flush(   n, m, i, j, u, s) {
            if ((" " types " ") ~ / deb / && enabled != "no") {
              n = split(uris, u, " "); m = split(suites, s, " ")
              for (i = 1; i <= n; i++) for (j = 1; j <= m; j++) print u[i], s[j]
            }
            types = uris = suites = field = ""; enabled = "yes"
          }
          BEGIN { enabled = "yes" }
          /^#/ { next }
          /^[ \t]*$/ { flush(); next }
          /^[ \t]/ { if (field == "uris") uris = uris " " $0; else if (field == "suites") suites = suites " " $0; next }
          {
            field = tolower($0); sub(/[ \t]*:.*/, "", field)
            value = $0; sub(/^[^:]*:[ \t]*/, "", value); gsub(/[ \t]+/, " ", value)
            if (field == "types") types = value
            else if (field == "uris") uris = value
            else if (field == "suites") suites = value
            else if (field == "enabled") enabled = tolower(value)
          }
          END { flush() }' "$f" ;;
    esac
  done
}
host_id="$(. /etc/os-release && echo "${ID:-}")"
host_codename="$(. /etc/os-release && echo "${VERSION_CODENAME:-}")"
host_uri() {   # host_uri SUITE: the first http(s)/ftp URI of an entry with SUITE
  apt_source_pairs | awk -v s="$1" '$2 == s && $1 ~ /^(https?|ftp):\/\// { print $1; exit }'
}
find_mirror() {
  mirror="${VISIONDETECT_DEBIAN13_MIRROR:-}"
  security=""
  if [ -z "$mirror" ]; then
    if [ "$host_id" != debian ] || [ -z "$host_codename" ]; then
      die "the host is not Debian (/etc/os-release: ID=${host_id:-?}): its apt sources name no Debian mirror; set VISIONDETECT_DEBIAN13_MIRROR to one"
    fi
    mirror="$(host_uri "$host_codename")"
    [ -n "$mirror" ] || die "no Debian mirror in the host's apt sources: no enabled deb entry with suite '$host_codename' (the host's codename) and an http(s) or ftp URI in /etc/apt/sources.list or /etc/apt/sources.list.d/*.list, *.sources; set VISIONDETECT_DEBIAN13_MIRROR to a Debian mirror"
    security="$(host_uri "$host_codename-security")"
  fi
  mirror="${mirror%/}" security="${security%/}"
}

# ---- the root ----------------------------------------------------------------------
# Whether DIR may be removed: one this script made (its stamp or its partial mark),
# a Debian root (a half one from debootstrap included), or empty.
ours() {
  [ -e "$1/$stamp_name" ] || [ -e "$1/$partial_name" ] || [ -e "$1/etc/debian_version" ] \
    || [ -d "$1/debootstrap" ] || [ -z "$(ls -A "$1")" ]
}
remove_tree() {
  [ -e "$1" ] || return 0
  if [ ! -d "$1" ] || ! ours "$1"; then die "$1 is not a root this script made: remove or move it yourself"; fi
  [ -z "$(mounts_under "$1")" ] || die "$1 has mounts (in use?): $(mounts_under "$1" | tr '\n' ' ')"
  rm -rf --one-file-system -- "$1"
}
root_usable() {
  [ -f "$root/$stamp_name" ] || { why="no stamp $stamp_name"; return 1; }
  [ "$(head -n 1 "$root/$stamp_name")" = "$stamp_format" ] || { why="a stamp of another format"; return 1; }
  chroot "$root" /bin/true 2>/dev/null || { why="chroot $root /bin/true fails"; return 1; }
}
# The root shares the host's network: its name servers (for apt) and its hosts file
# (localhost as the host resolves it: the MQTT tests' broker listens on 127.0.0.1).
copy_host_network_files() {   # copy_host_network_files ROOT
  local f
  for f in resolv.conf hosts; do
    rm -f "$1/etc/$f"
    cp -L "/etc/$f" "$1/etc/$f"
  done
}
make_root() {
  local tmp="$root.tmp" t0 include=()
  find_mirror
  remove_tree "$tmp"
  mkdir -p "$tmp"
  echo "being made by tests/debian13.sh, $(date -u +%FT%TZ)" > "$tmp/$partial_name"
  case "$mirror" in https://*) include=(--include=ca-certificates) ;; esac
  t0=$SECONDS
  log "debootstrap --variant=minbase ${include[*]} $suite $tmp $mirror"
  run_bg debootstrap --variant=minbase "${include[@]}" "$suite" "$tmp" "$mirror" \
    || die "debootstrap failed (its log: $tmp/debootstrap/debootstrap.log)"
  debootstrap_s=$((SECONDS - t0))
  t0=$SECONDS
  # base setup: apt sources, no services started by package scripts, no docs, no fsync
  {
    echo "deb $mirror $suite main"
    echo "deb $mirror $suite-updates main"
    [ -z "$security" ] || echo "deb $security $suite-security main"
  } > "$tmp/etc/apt/sources.list"
  printf 'Acquire::Languages "none";\nAcquire::Retries "3";\n' > "$tmp/etc/apt/apt.conf.d/90visiondetect"
  printf '%s\n' force-unsafe-io 'path-exclude=/usr/share/doc/*' 'path-include=/usr/share/doc/*/copyright' \
    'path-exclude=/usr/share/man/*' 'path-exclude=/usr/share/info/*' > "$tmp/etc/dpkg/dpkg.cfg.d/90visiondetect"
  printf '#!/bin/sh\n# tests/debian13.sh: no daemons started in the root\nexit 101\n' > "$tmp/usr/sbin/policy-rc.d"
  chmod 0755 "$tmp/usr/sbin/policy-rc.d"
  copy_host_network_files "$tmp"
  in_root_at "$tmp" / apt-get update -q || die "apt-get update failed in the new root"
  chroot "$tmp" /bin/true || die "chroot $tmp /bin/true fails after debootstrap"
  setup_s=$((SECONDS - t0))
  printf '%s\nsuite %s\nmirror %s\nsecurity %s\nmade %s\n' "$stamp_format" "$suite" "$mirror" \
    "${security:-none}" "$(date -u +%FT%TZ)" > "$tmp/$stamp_name"
  rm -f "$tmp/$partial_name"
  mv -T "$tmp" "$root"
}

# ---- the run -----------------------------------------------------------------------
command -v git >/dev/null || die "needs git"
if ! command -v debootstrap >/dev/null; then
  # shellcheck source=tools/debian-packages.sh
  source "$repo/tools/debian-packages.sh"
  vd_install_missing_packages debootstrap
fi

mkdir -p "$(dirname "$root")"
exec 9> "$root.lock"
if ! flock -n 9; then
  log "another run holds $root.lock: waiting for it"
  flock 9
fi
unmount_all   # what a killed run left

begin root "$root"
if root_usable; then
  finish "reused, $(sed -n 's/^made //p' "$root/$stamp_name")"
else
  removed=""
  if [ -e "$root" ]; then
    log "$root is not usable ($why): making it again"
    t0=$SECONDS
    remove_tree "$root"
    removed="old root removed $(dur $((SECONDS - t0))), "
  fi
  make_root
  finish "made: ${removed}debootstrap $(dur "$debootstrap_s"), base setup $(dur "$setup_s"), mirror $mirror"
fi
setup_mounts
copy_host_network_files "$root"

head="$(git -c safe.directory='*' -C "$repo" rev-parse HEAD)"
begin clone "${head:0:12}$([ "$worktree" != 1 ] || echo ' + the working tree') into $clone"
[ ! -e "$clone" ] || rm -rf --one-file-system -- "$clone"
mkdir -p "$(dirname "$clone")"
git -c safe.directory='*' clone -q --no-checkout "$repo" "$clone"
git -C "$clone" checkout -q --detach "$head"
note="HEAD ${head:0:12}"
if [ "$worktree" = 1 ]; then
  git -c safe.directory='*' -C "$repo" diff --binary HEAD > "$clone/.git/worktree.patch"
  if [ -s "$clone/.git/worktree.patch" ]; then
    git -C "$clone" apply --whitespace=nowarn "$clone/.git/worktree.patch" \
      || die "the working tree's changes (git diff HEAD) do not apply to HEAD"
  fi
  git -c safe.directory='*' -C "$repo" ls-files -z --others --exclude-standard \
    | tar -C "$repo" --null -T - -cf - | tar -C "$clone" -xf -
  note+=" + the working tree, $(git -C "$clone" status --porcelain | wc -l) files changed"
fi
finish "$note"

begin packages "tools/debian-packages.sh's vd_main_packages, as pipelines/annotate.sh installs them"
# shellcheck disable=SC2016  # expanded in the root
# (dpkg --configure -a first: finishes an installation a killed run interrupted)
in_root "$clone_dir" bash -c 'dpkg --configure -a && source tools/debian-packages.sh &&
  vd_install_missing_packages "${vd_main_packages[@]}" &&
  { dpkg-query -W -f="\${Package} \${Version}\n" gcc libdnnl-dev libgstreamer1.0-dev \
      libgstreamer-plugins-bad1.0-dev meson || true; }' \
  debian13.sh \
  || exit
finish

# the tests' list, as tests/run.sh installs it (after the main job: see the top)
install_test_packages() {
  begin test-packages "tools/debian-packages.sh's vd_test_packages, as tests/run.sh installs them"
  # shellcheck disable=SC2016  # expanded in the root
  in_root "$clone_dir" bash -c 'source tools/debian-packages.sh &&
    vd_install_missing_packages "${vd_test_packages[@]}" &&
    { dpkg-query -W -f="\${Package} \${Version}\n" python3-torch || true; }' \
    debian13.sh \
    || exit
  finish
}

if [ $build_only -eq 1 ]; then
  install_test_packages
  begin build "meson setup build && ninja -C build"
  in_root "$clone_dir" sh -c 'meson setup build && ninja -C build' || exit
  finish
  exit 0
fi

begin annotate "pipelines/annotate.sh (the main job)"
in_root "$clone_dir" pipelines/annotate.sh || exit
# every line JSON, at least one frame with detections (visionjson's "objects")
check_json='
import json, sys
frames = with_objects = objects = 0
for line in open(sys.argv[1]):
    frame = json.loads(line)
    frames += 1
    if frame.get("objects"):
        with_objects += 1
        objects += len(frame["objects"])
print("%d frames, %d with detections, %d detections" % (frames, with_objects, objects))
sys.exit(0 if with_objects > 0 else 1)'
[ -s "$clone/out/annotated.mp4" ] || die "pipelines/annotate.sh wrote no out/annotated.mp4"
[ -s "$clone/out/annotated.jsonl" ] || die "pipelines/annotate.sh wrote no out/annotated.jsonl"
note="$(in_root "$clone_dir" python3 -c "$check_json" out/annotated.jsonl)" \
  || die "out/annotated.jsonl: no frame with detections ($note)"
finish "$note; MP4 $(stat -c %s "$clone/out/annotated.mp4") bytes"

install_test_packages

# The main job's own build writes GstAnalytics entries (see the top). First, that
# gstreamer-analytics-1.0 comes from the main job's packages: the package that has
# its pkg-config file is in vd_main_packages, or removing it would remove one of
# them. Prints which, or why not and fails.
main_package_check="$(cat <<'CHECK'
source tools/debian-packages.sh
pc="$(pkg-config --variable=pcfiledir gstreamer-analytics-1.0)" \
  || { echo "no gstreamer-analytics-1.0 installed"; exit 1; }
owner="$(dpkg-query -S "$pc/gstreamer-analytics-1.0.pc")" \
  || { echo "no package has $pc/gstreamer-analytics-1.0.pc"; exit 1; }
owner="${owner%%:*}"
for p in "${vd_main_packages[@]}"; do
  if [ "$p" = "$owner" ]; then echo "$owner, in vd_main_packages"; exit 0; fi
done
removed=" $(apt-get -s remove "$owner" | sed -n 's/^Remv \([^ :]*\).*/\1/p' | tr '\n' ' ')"
for p in "${vd_main_packages[@]}"; do
  case "$removed" in *" $p "*) echo "$owner, needed by $p of vd_main_packages"; exit 0 ;; esac
done
echo "gstreamer-analytics-1.0 is in $owner, which vd_main_packages neither lists nor needs"
exit 1
CHECK
)"
begin analytics "GstAnalytics entries from the main job's build (build/ as pipelines/annotate.sh left it)"
package_note="$(in_root "$clone_dir" bash -c "$main_package_check" 2>&1)" \
  || die "the main job's packages (vd_main_packages, tools/debian-packages.sh) do not provide GStreamer's analytics library: $package_note"
entries_out="$(in_root "$clone_dir" /usr/bin/python3 tests/gst/test_analytics.py main-build build 2>&1)" || {
  printf '%s\n' "$entries_out" >&2
  die "the main job's build (build/) writes no or wrong GstAnalytics entries: GStreamer's readers of them (objectdetectionoverlay) see nothing behind visiondetect"
}
finish "the library from $package_note; $(printf '%s\n' "$entries_out" | sed -n 's|^[^ ]*: \([0-9]* frames, .*\)|\1|p' | tail -n 1)"

begin tests "VISIONDETECT_SANITIZERS=0 tests/run.sh ${suites[*]}${no_suites[*]:+ (without ${no_suites[*]})}"
in_root "$clone_dir" env VISIONDETECT_SANITIZERS=0 VISIONDETECT_DEBIAN13=0 \
  VISIONDETECT_NO_SUITES="${no_suites[*]}" tests/run.sh "${suites[@]}" || exit
finish "${suites[*]}${no_suites[*]:+ without ${no_suites[*]}}, no sanitizers"
