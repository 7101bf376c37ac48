# SPDX-License-Identifier: LGPL-2.1-or-later
"""A local RTSP server for the pipelines/rtsp.sh test: serves videotestsrc's
bouncing ball as H.264 at rtsp://127.0.0.1:PORT/test and prints that URL on its
first line of output. Exits after --timeout seconds. Needs python3-gi and
gir1.2-gst-rtsp-server-1.0; exits 77 (meson: skipped) without them."""

import argparse
import sys

try:
    import gi
    gi.require_version("Gst", "1.0")
    gi.require_version("GstRtspServer", "1.0")
    from gi.repository import GLib, Gst, GstRtspServer
except (ImportError, ValueError) as exc:
    print(f"SKIP: no GStreamer RTSP server for Python: {exc}", flush=True)
    sys.exit(77)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--timeout", type=int, default=120)
    args = p.parse_args()
    Gst.init(None)
    server = GstRtspServer.RTSPServer()
    server.set_address("127.0.0.1")
    server.set_service("0")  # any free port
    factory = GstRtspServer.RTSPMediaFactory()
    factory.set_launch(
        "( videotestsrc is-live=true pattern=ball ! "
        "video/x-raw,width=320,height=240,framerate=15/1 ! "
        "x264enc tune=zerolatency speed-preset=ultrafast key-int-max=15 ! "
        "rtph264pay name=pay0 pt=96 config-interval=1 )")
    factory.set_shared(True)
    server.get_mount_points().add_factory("/test", factory)
    if server.attach(None) == 0:
        print("FAIL: cannot start the RTSP server", flush=True)
        sys.exit(1)
    print(f"rtsp://127.0.0.1:{server.get_bound_port()}/test", flush=True)
    loop = GLib.MainLoop()
    GLib.timeout_add_seconds(args.timeout, loop.quit)
    loop.run()


if __name__ == "__main__":
    main()
