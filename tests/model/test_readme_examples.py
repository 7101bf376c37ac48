#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The README's element examples, as written, in the three ways a user runs a build:

  plugin-path  only GST_PLUGIN_PATH=<builddir>/gst exported (no VISIONDETECT_MODEL)
  devenv       inside `meson devenv -C <builddir>`
  relocated    `meson install --destdir` into a temporary tree, its prefix then moved
               elsewhere, only GST_PLUGIN_PATH pointing at the moved plugin folder

The examples are the README's `sh` block after "one pipeline per element", taken as
they are with only what a test machine lacks replaced: autovideosink by fakesink, the
camera (v4l2src) and the live test source by a videotestsrc that ends, in.mp4 by a
clip generated here, fasterrcnn.safetensors (the user's export) by the bundled model,
the broker by a mosquitto started here. Each must run to EOS without an error, the
element must say which model file it loaded (the build tree's copy, or the moved
prefix's, never another), visionjson's file must hold detections and the broker
must receive one message per frame. A README example whose pipeline the test cannot
map, or a missing element, fails the test.

Usage: test_readme_examples.py --source-root DIR --build-root DIR --workdir DIR
Skips (77) without gst-launch-1.0 or mosquitto.
"""

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time

from gst_model_test import build_tree_args, fail

MODEL = "visiondetect-shapes.safetensors"
FRAMES = 24
ELEMENTS = ["visiondetect", "visiontrack", "visionoverlay", "visionjson", "visionmqtt"]



def readme_examples(readme):
    """The gst-launch-1.0 command lines of the README's element examples."""
    text = open(readme, encoding="utf-8").read()
    start = re.search(r"one\s+pipeline\s+per\s+element:\s*\n```sh\n", text)
    if start is None:
        fail(f"{readme}: no ```sh block after 'one pipeline per element:'")
    block = text[start.end():text.index("```", start.end())]
    commands, current = [], ""
    for line in block.splitlines():
        if line.lstrip().startswith("#") and not current:
            continue
        current += line.rstrip("\\").strip() + " "
        if not line.endswith("\\"):
            if current.strip():
                commands.append(current.strip())
            current = ""
    if any(not c.startswith("gst-launch-1.0 ") for c in commands):
        fail(f"{readme}: an example that is not a gst-launch-1.0 line: {commands}")
    return commands


def adapt(command, port):
    """@command as argv, with what a test machine lacks replaced."""
    argv = shlex.split(command)
    out = []
    for arg in argv:
        if arg == "autovideosink":
            out.append("fakesink")
        elif arg == "v4l2src":
            out += ["videotestsrc", "pattern=ball", f"num-buffers={FRAMES}"]
        elif arg == "videotestsrc":
            out += ["videotestsrc", f"num-buffers={FRAMES}"]
        elif arg.startswith("host="):
            out += ["host=127.0.0.1", f"port={port}"]
        elif arg in ("gst-launch-1.0", "!", "-e") or re.fullmatch(r"[a-z0-9_-]+(=.*)?|[a-z]+/[a-z0-9-]+(,.*)?", arg):
            out.append(arg)
        else:
            fail(f"cannot map {arg!r} of the README example: {command}")
    # an end of stream that mp4/jsonl writers see
    return [out[0], "-e"] + out[1:]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_clip(path, env):
    subprocess.run(["gst-launch-1.0", "-q", "-e", "videotestsrc", "pattern=ball",
                    f"num-buffers={FRAMES}", "!", "video/x-raw,width=320,height=240,framerate=24/1",
                    "!", "x264enc", "!", "mp4mux", "!", "filesink", f"location={path}"],
                   check=True, env=env, stdout=subprocess.DEVNULL)


def loaded_models(log, work):
    """The model files visiondetect says it loaded (its INFO line 'model PATH (...)'),
    links resolved."""
    return {os.path.realpath(os.path.join(work, p))
            for p in re.findall(r"visiondetect[^\n]*\bmodel (\S+) \(", log)}


def run_examples(mode, commands, work, env, wrap, want_model, port):
    """Runs every example in @work with @env (through @wrap, a command prefix), checks
    each; returns the number run."""
    print(f"--- {mode}")
    for name in ("detections.jsonl",):
        path = os.path.join(work, name)
        if os.path.exists(path):
            os.remove(path)
    covered = set()
    for command in commands:
        argv = adapt(command, port)
        sub = None
        if "visionmqtt" in argv:
            topic = next(a for a in argv if a.startswith("topic=")).split("=", 1)[1]
            topic = topic.replace("{source-id}", next(
                a for a in argv if a.startswith("source-id=")).split("=", 1)[1])
            sub = subprocess.Popen(["mosquitto_sub", "-h", "127.0.0.1", "-p", str(port),
                                    "-t", topic, "-C", str(FRAMES), "-W", "120"],
                                   stdout=subprocess.PIPE, text=True)
            time.sleep(0.5)
        run_env = dict(env, GST_DEBUG="visiondetect:4", GST_DEBUG_NO_COLOR="1")
        result = subprocess.run(wrap + argv, cwd=work, env=run_env, capture_output=True,
                                text=True, timeout=300)
        log = result.stdout + result.stderr
        if result.returncode != 0 or "ERROR:" in log:
            fail(f"{mode}: {' '.join(argv)} exited {result.returncode}:\n{log[-3000:]}")
        if "Got EOS" not in log and "EOS on shutdown" not in log:
            fail(f"{mode}: {' '.join(argv)} did not reach EOS:\n{log[-2000:]}")
        models = loaded_models(log, work)
        if "visiondetect" in argv and models != {os.path.realpath(want_model)}:
            fail(f"{mode}: {' '.join(argv)} loaded {sorted(models)}, want {want_model}")
        if "visionjson" in argv:
            lines = [json.loads(l) for l in open(os.path.join(work, "detections.jsonl"))]
            with_objects = sum(1 for l in lines if l["objects"])
            if len(lines) != FRAMES or with_objects < FRAMES // 2:
                fail(f"{mode}: detections.jsonl: {len(lines)} frames, {with_objects} with "
                     f"detections (want {FRAMES}, at least {FRAMES // 2})")
        if sub is not None:
            out, _ = sub.communicate(timeout=150)
            messages = [json.loads(l) for l in out.splitlines() if l.strip()]
            if len(messages) != FRAMES:
                fail(f"{mode}: the broker got {len(messages)} messages, want {FRAMES}")
        covered.update(e for e in ELEMENTS if e in argv)
        print(f"ok: {' '.join(argv)}")
    if covered != set(ELEMENTS):
        fail(f"{mode}: the examples cover {sorted(covered)}, not every element")
    return len(commands)


def main():
    args, work = build_tree_args()
    for tool in ("gst-launch-1.0", "mosquitto_sub"):
        if shutil.which(tool) is None:
            print(f"SKIP: {tool} not found")
            return 77
    mosquitto = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
    if not os.access(mosquitto, os.X_OK):
        print("SKIP: mosquitto (the broker) not installed")
        return 77

    build = os.path.realpath(args.build_root)
    commands = readme_examples(os.path.join(args.source_root, "README.md"))

    # what a user's shell has: none of the project's variables
    base = {k: v for k, v in os.environ.items()
            if k not in ("VISIONDETECT_MODEL", "GST_PLUGIN_PATH", "LD_LIBRARY_PATH")
            and not k.startswith("MESON")}
    base["GST_REGISTRY"] = os.path.join(work, "registry.bin")
    make_clip(os.path.join(work, "in.mp4"), base)
    build_model = os.path.join(build, "models", MODEL)
    os.symlink(build_model, os.path.join(work, "fasterrcnn.safetensors"))

    port = free_port()
    broker_conf = os.path.join(work, "mosquitto.conf")
    with open(broker_conf, "w") as f:
        f.write(f"listener {port} 127.0.0.1\nallow_anonymous true\n")
    broker = subprocess.Popen([mosquitto, "-c", broker_conf], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        for _ in range(50):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        n = 0
        # 1. only GST_PLUGIN_PATH
        env = dict(base, GST_PLUGIN_PATH=os.path.join(build, "gst"))
        n += run_examples("plugin-path", commands, work, env, [], build_model, port)

        # 2. meson devenv
        os.remove(base["GST_REGISTRY"])
        n += run_examples("devenv", commands, work, base,
                          ["meson", "devenv", "-C", build, "--workdir", work], build_model, port)

        # 3. installed, then the prefix moved
        dest = os.path.join(work, "dest")
        subprocess.run(["meson", "install", "-C", build, "--no-rebuild", "--quiet",
                        "--destdir", dest], check=True, env=base, stdout=subprocess.DEVNULL)
        info = json.loads(subprocess.run(["meson", "introspect", build, "--buildoptions"],
                                         check=True, capture_output=True, text=True).stdout)
        option = {o["name"]: o["value"] for o in info}
        prefix = option["prefix"]
        moved = os.path.join(work, "moved")
        shutil.move(dest + prefix, moved)
        shutil.rmtree(dest)
        env = dict(base, GST_PLUGIN_PATH=os.path.join(moved, option["libdir"], "gstreamer-1.0"))
        os.remove(base["GST_REGISTRY"])
        moved_model = os.path.join(moved, option["datadir"], "visiondetect", "models", MODEL)
        os.remove(os.path.join(work, "fasterrcnn.safetensors"))
        os.symlink(moved_model, os.path.join(work, "fasterrcnn.safetensors"))
        n += run_examples("relocated", commands, work, env, [], moved_model, port)

        # vd-detect of the moved prefix follows the same rule
        vd = subprocess.run([os.path.join(moved, option["bindir"], "vd-detect"), "--info"],
                            env=dict(base, VISIONDETECT_MODEL=""), capture_output=True, text=True)
        if vd.returncode != 0:
            fail(f"relocated vd-detect --info: {vd.stderr}")
        # and without the moved prefix's model, says everywhere it looked (unless
        # the configured prefix has one installed)
        installed = os.path.join(prefix, option["datadir"], "visiondetect", "models", MODEL)
        if os.path.exists(installed):
            print(f"SKIP: vd-detect without a model: {installed} exists")
            print(f"{n} passed, 0 failed")
            return 0
        os.rename(moved_model, moved_model + ".away")
        vd = subprocess.run([os.path.join(moved, option["bindir"], "vd-detect"), "--info"],
                            env=base, capture_output=True, text=True)
        want = os.path.dirname(moved_model)
        if vd.returncode == 0 or "$VISIONDETECT_MODEL (unset)" not in vd.stderr \
                or want not in vd.stderr:
            fail(f"vd-detect without a model: exit {vd.returncode}, {vd.stderr!r}")
        print(f"ok: vd-detect without the model: {vd.stderr.strip()}")
    finally:
        broker.send_signal(signal.SIGTERM)
        broker.wait(timeout=10)
    print(f"{n} passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
