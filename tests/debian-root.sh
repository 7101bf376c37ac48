# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
# shellcheck disable=SC2154  # self, repo and vdr_*: set by the script that sources it
# What the runs in a Debian root made with debootstrap share (tests/debian13.sh, the
# host's architecture; tests/debian13-arm64.sh, arm64 under qemu-user): sourced, not
# run. The script sets, before sourcing it:
#
#   self          its own path (run again with sudo, in a mount namespace of its own)
#   repo          the repository's top folder
#   vdr_prefix    its environment's prefix: PREFIX_ROOT (the root's folder),
#                 PREFIX_MIRROR, PREFIX_UNSHARE, PREFIX_* kept through sudo
#   vdr_label     the summary line's name of the run ("Debian 13 (trixie)")
#   vdr_suite     the Debian suite debootstrap installs
#   vdr_arch      debootstrap's --arch, empty for the host's own: another one is
#                 bootstrapped with --foreign and its second stage run in the root
#                 (through binfmt_misc and an emulator, which the script sets up)
#   vdr_stamp_format
#                 the first line of the stamp of a complete root
#   vdr_root_env_globs
#                 the environment variables passed into the root (globs; CI,
#                 ONEDNN_*, DNNL_* for both runs)
#
# and then calls, in this order: vdr_become_root "$@" (sudo when not root, then a
# mount namespace of its own where unshare(1) allows one: the mounts go with the run
# however it ends), vdr_set_root DEFAULT (the root's folder, checked), and after its
# options vdr_start (the exit trap with the summary line, the lock, what a killed run
# left), vdr_root_phase (the root made or reused, mounted) and vdr_clone_phase.
# Phases: begin NAME TEXT ... finish [NOTE]; planned=(NAME...) lists those the summary
# line names as not run when the run stops before them. in_root DIR COMMAND ARG...
# runs a command in the root in a clean environment, in the background in a process
# group of its own (stopped with everything it started when the run is stopped).
# vdr_check_annotated checks what the main job (pipelines/annotate.sh) wrote in the
# clone.

log() { printf '%s: %s\n' "$vdr_name" "$*" >&2; }
die() { log "$*"; exit 1; }

vdr_name="tests/$(basename "$self")"

vdr_become_root() {
  local keep=() v g
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || die "needs root (debootstrap, chroot, mount)"
    log "needs root: running itself with sudo (${vdr_prefix}=0 tests/run.sh leaves this run out)"
    for v in $(compgen -e); do
      case "$v" in "$vdr_prefix"_*) keep+=("$v=${!v}"); continue ;; esac
      for g in "${vdr_root_env_globs[@]}"; do
        # shellcheck disable=SC2053  # a glob
        if [[ "$v" == $g ]]; then keep+=("$v=${!v}"); break; fi
      done
    done
    exec sudo env "${keep[@]}" "$BASH" "$self" "$@"
  fi
  # a mount namespace of its own: the mounts go with the run however it ends
  v="${vdr_prefix}_UNSHARE"
  if [ "${!v:-1}" != 0 ] && unshare --mount --propagation private true 2>/dev/null; then
    export "$v=0"
    exec unshare --mount --propagation private -- "$BASH" "$self" "$@"
  fi
}

vdr_usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$self"; }

stamp_name=.visiondetect-root
partial_name=.visiondetect-partial
clone_dir=/build/visiondetect   # inside the root

vdr_set_root() {   # vdr_set_root DEFAULT: root and clone from PREFIX_ROOT or DEFAULT
  local v="${vdr_prefix}_ROOT"
  root="${!v:-$1}"
  [[ "$root" == /* ]] || die "$v must be an absolute path, not '$root'"
  root="$(realpath -m "$root")"
  [[ "$root" =~ ^(/[A-Za-z0-9._+-]+){2,}$ ]] \
    || die "$v '$root': at least two levels below /, letters, digits and ._+- only"
  case "$root/" in "$repo"/*) die "the root must be outside the repository ($repo)" ;; esac
  clone="$root$clone_dir"
  vdr_root=$root   # the run's root, whatever root a function has locally
}

dur() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

# ---- phases and the summary line -------------------------------------------------
planned=() phases=() current="" phase_t0=0 start=$SECONDS
begin() { current=$1; phase_t0=$SECONDS; log "== $1: $2"; }
finish() { phases+=("$current $(dur $((SECONDS - phase_t0)))${1:+ ($1)}"); current=""; }

summary() {
  local rc=$1 p done_names=" " not_run=() line
  [ -z "$current" ] || phases+=("$current FAILED after $(dur $((SECONDS - phase_t0)))")
  for p in "${phases[@]}"; do done_names+="${p%% *} "; done
  for p in "${planned[@]}"; do [[ "$done_names" == *" $p "* ]] || not_run+=("$p"); done
  if [ "$rc" -eq 0 ]; then line="PASSED"; else line="FAILED (exit $rc)"; fi
  line+=" in $(dur $((SECONDS - start))), root $vdr_root"
  for p in "${phases[@]}"; do line+="; $p"; done
  [ ${#not_run[@]} -eq 0 ] || line+="; not run: ${not_run[*]}"
  log "$vdr_label $line"
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
  # and whatever a killed run left (with PREFIX_UNSHARE=0)
  for m in $(mounts_under "$vdr_root") $(mounts_under "$vdr_root.tmp"); do unmount_one "$m" || true; done
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
# The processes whose root is the root (or a root inside it: the arm64 run's build
# root), or the one being made; in a mount namespace of its own, only those of that
# namespace: a shell someone opened in the root from outside is not this run's.
root_pids() {
  local p r ns="" own
  own="$(readlink /proc/self/ns/mnt)"
  [ "$own" = "$(readlink /proc/1/ns/mnt 2>/dev/null)" ] || ns=$own
  for p in /proc/[0-9]*; do
    r="$(readlink "$p/root" 2>/dev/null)" || continue
    case "$r" in
      "$vdr_root"|"$vdr_root"/*|"$vdr_root.tmp"|"$vdr_root.tmp"/*)
        [ -z "$ns" ] || [ "$(readlink "$p/ns/mnt" 2>/dev/null)" = "$ns" ] && echo "${p#/proc/}" ;;
    esac
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
  if [ -n "$(mounts_under "$vdr_root")" ]; then
    log "mounts left under $vdr_root: $(mounts_under "$vdr_root" | tr '\n' ' ')"
    [ "$rc" -ne 0 ] || rc=1
  fi
  summary "$rc"
  exit "$rc"
}

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
vdr_root_env() {   # adds the caller's variables that vdr_root_env_globs names
  local v g
  for v in $(compgen -e); do
    for g in "${vdr_root_env_globs[@]}"; do
      # shellcheck disable=SC2053  # a glob
      if [[ "$v" == $g ]]; then root_env+=("$v=${!v}"); break; fi
    done
  done
}
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
  local v="${vdr_prefix}_MIRROR"
  mirror="${!v:-}"
  security=""
  if [ -z "$mirror" ]; then
    if [ "$host_id" != debian ] || [ -z "$host_codename" ]; then
      die "the host is not Debian (/etc/os-release: ID=${host_id:-?}): its apt sources name no Debian mirror; set $v to one"
    fi
    mirror="$(host_uri "$host_codename")"
    [ -n "$mirror" ] || die "no Debian mirror in the host's apt sources: no enabled deb entry with suite '$host_codename' (the host's codename) and an http(s) or ftp URI in /etc/apt/sources.list or /etc/apt/sources.list.d/*.list, *.sources; set $v to a Debian mirror"
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
  [ "$(head -n 1 "$root/$stamp_name")" = "$vdr_stamp_format" ] || { why="a stamp of another format"; return 1; }
  vdr_prepare_root "$root"
  chroot "$root" /bin/true 2>/dev/null || { why="chroot $root /bin/true fails"; return 1; }
}
# vdr_prepare_root DIR: what the root in DIR needs before anything runs there (for
# another architecture, the emulator where binfmt_misc does not hold it open); the
# script redefines it after sourcing this file where it needs something.
vdr_prepare_root() { :; }
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
  local tmp="$root.tmp" t0 include=() arch=()
  find_mirror
  remove_tree "$tmp"
  mkdir -p "$tmp"
  echo "being made by $vdr_name, $(date -u +%FT%TZ)" > "$tmp/$partial_name"
  case "$mirror" in https://*) include=(--include=ca-certificates) ;; esac
  [ -z "$vdr_arch" ] || arch=(--arch="$vdr_arch" --foreign)
  t0=$SECONDS
  log "debootstrap ${arch[*]}${arch[*]:+ }--variant=minbase ${include[*]} $vdr_suite $tmp $mirror"
  run_bg debootstrap "${arch[@]}" --variant=minbase "${include[@]}" "$vdr_suite" "$tmp" "$mirror" \
    || die "debootstrap failed (its log: $tmp/debootstrap/debootstrap.log)"
  debootstrap_s=$((SECONDS - t0))
  second_stage_s=""
  if [ -n "$vdr_arch" ]; then
    # the packages' scripts, run in the root by its own (emulated) programs
    t0=$SECONDS
    vdr_prepare_root "$tmp"
    log "debootstrap --second-stage in $tmp ($vdr_arch, emulated)"
    in_root_at "$tmp" / /debootstrap/debootstrap --second-stage \
      || die "debootstrap --second-stage failed (its log: $tmp/debootstrap/debootstrap.log)"
    second_stage_s=$((SECONDS - t0))
  fi
  t0=$SECONDS
  # base setup: apt sources, no services started by package scripts, no docs, no fsync
  {
    echo "deb $mirror $vdr_suite main"
    echo "deb $mirror $vdr_suite-updates main"
    [ -z "$security" ] || echo "deb $security $vdr_suite-security main"
  } > "$tmp/etc/apt/sources.list"
  printf 'Acquire::Languages "none";\nAcquire::Retries "3";\n' > "$tmp/etc/apt/apt.conf.d/90visiondetect"
  printf '%s\n' force-unsafe-io 'path-exclude=/usr/share/doc/*' 'path-include=/usr/share/doc/*/copyright' \
    'path-exclude=/usr/share/man/*' 'path-exclude=/usr/share/info/*' > "$tmp/etc/dpkg/dpkg.cfg.d/90visiondetect"
  printf '#!/bin/sh\n# %s: no daemons started in the root\nexit 101\n' "$vdr_name" > "$tmp/usr/sbin/policy-rc.d"
  chmod 0755 "$tmp/usr/sbin/policy-rc.d"
  copy_host_network_files "$tmp"
  in_root_at "$tmp" / apt-get update -q || die "apt-get update failed in the new root"
  chroot "$tmp" /bin/true || die "chroot $tmp /bin/true fails after debootstrap"
  setup_s=$((SECONDS - t0))
  {
    printf '%s\nsuite %s\n' "$vdr_stamp_format" "$vdr_suite"
    [ -z "$vdr_arch" ] || printf 'arch %s\n' "$vdr_arch"
    printf 'mirror %s\nsecurity %s\nmade %s\n' "$mirror" "${security:-none}" "$(date -u +%FT%TZ)"
  } > "$tmp/$stamp_name"
  rm -f "$tmp/$partial_name"
  mv -T "$tmp" "$root"
}

# ---- the run -----------------------------------------------------------------------
# The exit trap, git and debootstrap, the lock (one run a root at a time), and the
# mounts a killed run left.
vdr_start() {
  trap on_exit EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  vdr_root_env
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
}

# The root, reused while usable (its stamp, and /bin/true runs there), else made again;
# then mounted, with the host's network files.
vdr_root_phase() {
  local removed="" t0 second=""
  begin root "$root"
  if root_usable; then
    finish "reused, $(sed -n 's/^made //p' "$root/$stamp_name")"
  else
    if [ -e "$root" ]; then
      log "$root is not usable ($why): making it again"
      t0=$SECONDS
      remove_tree "$root"
      removed="old root removed $(dur $((SECONDS - t0))), "
    fi
    make_root
    [ -z "$second_stage_s" ] || second=", second stage $(dur "$second_stage_s")"
    finish "made: ${removed}debootstrap $(dur "$debootstrap_s")$second, base setup $(dur "$setup_s"), mirror $mirror"
  fi
  setup_mounts
  copy_host_network_files "$root"
}

# vdr_clone_phase WORKTREE [IN-PLACE]: the repository's HEAD cloned into $clone (with
# WORKTREE=1 also its uncommitted changes: git diff HEAD, and the untracked files git
# does not ignore). By default a new clone; with IN-PLACE=1 an existing clone is brought
# to that state in place, keeping what git ignores there (build/: ninja then builds
# only what changed).
vdr_clone_phase() {
  local worktree=$1 in_place=${2:-0} head note how="into"
  head="$(git -c safe.directory='*' -C "$repo" rev-parse HEAD)"
  [ "$in_place" = 1 ] && [ -d "$clone/.git" ] && how="updating"
  begin clone "${head:0:12}$([ "$worktree" != 1 ] || echo ' + the working tree') $how $clone"
  if [ "$how" = updating ]; then
    git -c safe.directory='*' -C "$clone" fetch -q "$repo" HEAD
    git -c safe.directory='*' -C "$clone" checkout -q --force --detach "$head"
    git -c safe.directory='*' -C "$clone" clean -q -f -d
  else
    [ ! -e "$clone" ] || rm -rf --one-file-system -- "$clone"
    mkdir -p "$(dirname "$clone")"
    git -c safe.directory='*' clone -q --no-checkout "$repo" "$clone"
    git -C "$clone" checkout -q --detach "$head"
  fi
  note="HEAD ${head:0:12}"
  if [ "$worktree" = 1 ]; then
    git -c safe.directory='*' -C "$repo" diff --binary HEAD > "$clone/.git/worktree.patch"
    if [ -s "$clone/.git/worktree.patch" ]; then
      git -c safe.directory='*' -C "$clone" apply --whitespace=nowarn "$clone/.git/worktree.patch" \
        || die "the working tree's changes (git diff HEAD) do not apply to HEAD"
    fi
    git -c safe.directory='*' -C "$repo" ls-files -z --others --exclude-standard \
      | tar -C "$repo" --null -T - -cf - | tar -C "$clone" -xf -
    note+=" + the working tree, $(git -c safe.directory='*' -C "$clone" status --porcelain | wc -l) files changed"
  fi
  [ "$how" != updating ] || note+=", updated in place"
  finish "$note"
}

# The main job's output in the clone, as pipelines/annotate.sh writes it by default:
# out/annotated.mp4 not empty, out/annotated.jsonl every line JSON with at least one
# frame with detections (visionjson's "objects"). Prints what it found (frames,
# detections, the MP4's size) or says what is wrong and fails the run.
# in_python_root COMMAND ARG...: in the clone, in the root whose Python runs the run's
# checks: the run's root, or vdr_python_root where the caller names another (the
# arm64 run of a cross build: its amd64 build root, where Python runs natively)
in_python_root() { in_root_at "${vdr_python_root:-$root}" "$clone_dir" "$@"; }

vdr_check_annotated() {
  local note check_json='
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
  note="$(in_python_root python3 -c "$check_json" out/annotated.jsonl)" \
    || die "out/annotated.jsonl: no frame with detections ($note)"
  echo "$note; MP4 $(stat -c %s "$clone/out/annotated.mp4") bytes"
}
