# SPDX-License-Identifier: LGPL-2.1-or-later
"""What the comparisons of the engine's ops with torchvision's share
(ops_vs_torchvision.py, roi_align_grad_vs_torchvision.py): the ops module the
command line names (tests/engine/ops_module.c, through ctypes), numpy arrays
passed to it, and the checks, each printed and, when it fails, listed in
failures."""
import ctypes
import sys

failures = []


def load_ops_module():
    """The ops module, the script's one argument (LIBVDOPS.so)."""
    return ctypes.CDLL(sys.argv[1])


def ptr(a):
    assert a.flags["C_CONTIGUOUS"]
    return a.ctypes.data_as(ctypes.c_void_p)


def check(name, ok, detail=""):
    print(f"{name}: {'ok' if ok else 'MISMATCH'} {detail}")
    if not ok:
        failures.append(name)
