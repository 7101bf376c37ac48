#!/usr/bin/env python3
"""Launch resources of every CUDA kernel, checked without a GPU.

Reads the registers, shared memory and local memory (spills) of every kernel in
the built engine library with `cuobjdump --dump-resource-usage`, and the launch
configuration of our kernels from kernels/*.cu (each kernel's __launch_bounds__
and the block size of each of its launches, resolved through the file's
#defines and dim3 declarations), and checks them against the limits of the
architecture the SASS was built for:

  - every kernel of ours has __launch_bounds__, and every launch's block size
    is a compile-time constant no larger than it (a launch above the bound
    fails at run time with "too many resources requested");
  - the block's registers fit the SM: per warp ceil(REG * 32 / 256) * 256
    registers (the allocation unit), times the block's warps, at most the
    registers of an SM, and REG at most the per-thread maximum;
  - static shared memory at most 48 KiB (the most without an opt-in), static
    plus constant dynamic shared memory at most the per-block opt-in maximum;
  - local memory (register spills, LOCAL > 0) is reported, not failed: a
    kernel to look at, whose bound may be too tight for its registers.

CUB's and thrust's kernels (namespaced names) carry their own launch bounds
from their tuning policies; they are checked against the per-thread register
and static shared memory limits only.

Exit status: 0 all checks pass, 1 a check failed, 77 (skip) no cuobjdump, or a
library without device code (a build without CUDA).

Usage: check_kernel_resources.py LIBRARY KERNELS_DIR [CUOBJDUMP]
The cuobjdump used is, in order: $VD_CUOBJDUMP, the third argument (what meson
found), cuobjdump on PATH, $CUDA_HOME/bin, /usr/local/cuda/bin, PyPI's
nvidia-cuda-cuobjdump in this Python's site-packages.
"""
import glob
import os
import re
import shutil
import subprocess
import sys

SKIP = 77

# Per compute capability: registers per SM, registers per thread, static shared
# memory per block, shared memory per block with the opt-in (CUDA C++
# Programming Guide, "Technical Specifications per Compute Capability").
ARCH_LIMITS = {
    80: dict(regs_per_sm=65536, regs_per_thread=255, static_shared=48 * 1024,
             shared_optin=163 * 1024, threads_per_block=1024),
    86: dict(regs_per_sm=65536, regs_per_thread=255, static_shared=48 * 1024,
             shared_optin=99 * 1024, threads_per_block=1024),
    89: dict(regs_per_sm=65536, regs_per_thread=255, static_shared=48 * 1024,
             shared_optin=99 * 1024, threads_per_block=1024),
    90: dict(regs_per_sm=65536, regs_per_thread=255, static_shared=48 * 1024,
             shared_optin=227 * 1024, threads_per_block=1024),
}
# The test hook that shows the check can fail: VD_KERNEL_CHECK_REGS_PER_SM
# lowers the SM's registers (e.g. to 16384: every 1024-thread block fails).
REG_UNIT = 256  # registers are allocated per warp in units of 256
WARP = 32


def find_cuobjdump(argv):
    candidates = [os.environ.get('VD_CUOBJDUMP'), argv[3] if len(argv) > 3 else None,
                  shutil.which('cuobjdump')]
    for root in (os.environ.get('CUDA_HOME'), os.environ.get('CUDA_PATH'), '/usr/local/cuda'):
        if root:
            candidates.append(os.path.join(root, 'bin', 'cuobjdump'))
    # PyPI's nvidia-cuda-cuobjdump (pip install nvidia-cuda-cuobjdump)
    for entry in sys.path:
        candidates.extend(sorted(glob.glob(os.path.join(entry, 'nvidia', '*', 'bin', 'cuobjdump'))))
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


def strip_comments(text):
    text = re.sub(r'/\*.*?\*/', ' ', text, flags=re.S)
    return re.sub(r'//[^\n]*', ' ', text)


def evaluate(expr, defines, depth=0):
    """The integer value of a constant expression of literals and #defines,
    or None."""
    expr = expr.strip()
    if depth > 16:
        return None

    def substitute(m):
        name = m.group(0)
        if name in defines:
            value = evaluate(defines[name], defines, depth + 1)
            return str(value) if value is not None else name
        return name

    expr = re.sub(r'[A-Za-z_]\w*', substitute, expr)
    expr = re.sub(r'(\d+)[uUlL]+\b', r'\1', expr)
    if not re.fullmatch(r'[\d\s+\-*/()]+', expr):
        return None
    try:
        return int(eval(expr.replace('/', '//'), {'__builtins__': {}}, {}))
    except Exception:  # a malformed expression: not a constant
        return None


def split_args(text):
    """The top-level comma-separated parts of @text."""
    parts, depth, cur = [], 0, ''
    for ch in text:
        if ch in '(<[':
            depth += 1
        elif ch in ')>]':
            depth -= 1
        if ch == ',' and depth == 0:
            parts.append(cur)
            cur = ''
        else:
            cur += ch
    parts.append(cur)
    return [p.strip() for p in parts]


def parse_sources(kernels_dir):
    """{kernel: {'file', 'bound' (int or None), 'launches': [(block or None,
    dynamic shared or None, text)]}}"""
    kernels = {}
    common_defines = {}
    files = sorted(f for f in os.listdir(kernels_dir) if f.endswith(('.cu', '.cuh', '.h')))
    texts = {f: strip_comments(open(os.path.join(kernels_dir, f)).read()) for f in files}
    for f in files:
        if not f.endswith('.cu'):
            for m in re.finditer(r'^\s*#define\s+(\w+)\s+([^\n]+)$', texts[f], re.M):
                common_defines[m.group(1)] = m.group(2)
    for f in files:
        if not f.endswith('.cu'):
            continue
        text = texts[f]
        defines = dict(common_defines)
        for m in re.finditer(r'^\s*#define\s+(\w+)\s+([^\n]+)$', text, re.M):
            defines[m.group(1)] = m.group(2)
        for m in re.finditer(r'__global__\s+(?:void\s+)?(__launch_bounds__\s*\(([^)]*)\)\s*)?'
                             r'(?:void\s+)?(\w+)\s*\(', text):
            bound = None
            if m.group(1):
                bound = evaluate(split_args(m.group(2))[0], defines)
                if bound is None:
                    bound = 'unresolved: ' + m.group(2)
            kernels[m.group(3)] = {'file': f, 'bound': bound, 'launches': []}
        dim3 = {}
        for m in re.finditer(r'\bdim3\s+(\w+)\s*\(([^;]*)\)\s*;', text):
            dim3[m.group(1)] = m.group(2)
        for m in re.finditer(r'\b(\w+)\s*(?:<[^<>;]*>)?\s*<<<(.*?)>>>', text, re.S):
            name, config = m.group(1), split_args(m.group(2))
            block_expr = config[1] if len(config) > 1 else ''
            if block_expr in dim3:
                dims = [evaluate(d, defines) for d in split_args(dim3[block_expr])]
                block = None if None in dims else eval('*'.join(str(d) for d in dims))
            else:
                block = evaluate(block_expr, defines)
            shared = evaluate(config[2], defines) if len(config) > 2 else 0
            kernels.setdefault(name, {'file': f, 'bound': None, 'launches': []})
            kernels[name]['launches'].append((block, shared, f + ': ' + name + '<<<' +
                                              ' '.join(m.group(2).split()) + '>>>'))
    return kernels


def base_name(mangled):
    """(name, ours): the unqualified name of a kernel of ours (_Z<len><name>...,
    _ZL for internal linkage), or the mangled name of a namespaced one."""
    m = re.match(r'_ZL?(\d+)', mangled)
    if m:
        n = int(m.group(1))
        start = m.end()
        return mangled[start:start + n], True
    return mangled, False


def parse_dump(text):
    """[(arch, mangled, {'REG':, 'SHARED':, 'LOCAL':, 'STACK':})] of the SASS."""
    out = []
    arch = None
    in_elf = False
    function = None
    for line in text.splitlines():
        line = line.strip()
        if line.startswith('Fatbin elf code'):
            in_elf = True
        elif line.startswith('Fatbin ptx code'):
            in_elf = False
        m = re.match(r'arch = sm_(\d+)', line)
        if m:
            arch = int(m.group(1))
        m = re.match(r'Function (\S+):$', line)
        if m:
            function = m.group(1)
            continue
        if function and line.startswith('REG:'):
            fields = dict((k, int(v)) for k, v in re.findall(r'(\w+(?:\[\d+\])?):(\d+)', line))
            if in_elf:
                out.append((arch, function, fields))
            function = None
    return out


def main(argv):
    if len(argv) < 3:
        print(__doc__)
        return 2
    library, kernels_dir = argv[1], argv[2]
    if not os.path.exists(library):
        print('SKIP: no CUDA build (no %s)' % library)
        return SKIP
    cuobjdump = find_cuobjdump(argv)
    if cuobjdump is None:
        print('SKIP: no cuobjdump (set VD_CUOBJDUMP, or install the CUDA toolkit\'s cuobjdump)')
        return SKIP
    run = subprocess.run([cuobjdump, '--dump-resource-usage', library], capture_output=True,
                         text=True)
    if 'does not contain device code' in run.stderr + run.stdout or \
            ('Resource usage' not in run.stdout and run.returncode != 0):
        print('SKIP: %s has no device code (a build without CUDA): %s'
              % (library, (run.stderr or run.stdout).strip()[:200]))
        return SKIP
    functions = parse_dump(run.stdout)
    if not functions:
        print('FAIL: cuobjdump listed no kernel of %s (exit %d): %s'
              % (library, run.returncode, run.stderr.strip()[:300]))
        return 1
    kernels = parse_sources(kernels_dir)
    failures = []
    notes = []

    # the sources: bounds and launches
    for name, k in sorted(kernels.items()):
        if k['bound'] is None and k['launches']:
            failures.append('%s (%s): no __launch_bounds__' % (name, k['file']))
        elif isinstance(k['bound'], str):
            failures.append('%s (%s): __launch_bounds__ not a constant (%s)'
                            % (name, k['file'], k['bound']))
        for block, shared, where in k['launches']:
            if block is None:
                failures.append('%s: the block size is not a compile-time constant' % where)
            elif isinstance(k['bound'], int) and block > k['bound']:
                failures.append('%s: block of %d threads above __launch_bounds__(%d)'
                                % (where, block, k['bound']))

    seen = set()
    for arch, mangled, r in functions:
        limits = ARCH_LIMITS.get(arch)
        if limits is None:
            failures.append('%s: no limits known for sm_%s' % (mangled, arch))
            continue
        limits = dict(limits)
        if os.environ.get('VD_KERNEL_CHECK_REGS_PER_SM'):
            limits['regs_per_sm'] = int(os.environ['VD_KERNEL_CHECK_REGS_PER_SM'])
        name, ours = base_name(mangled)
        regs, shared, local = r.get('REG', 0), r.get('SHARED', 0), r.get('LOCAL', 0)
        label = '%s (sm_%d)' % (name if ours else mangled[:80], arch)
        if regs > limits['regs_per_thread']:
            failures.append('%s: %d registers per thread, above %d'
                            % (label, regs, limits['regs_per_thread']))
        if shared > limits['static_shared']:
            failures.append('%s: %d bytes of static shared memory, above %d'
                            % (label, shared, limits['static_shared']))
        if not ours:
            continue
        seen.add(name)
        k = kernels.get(name)
        if k is None:
            failures.append('%s: in the library but not found in %s' % (label, kernels_dir))
            continue
        blocks = [b for b, _, _ in k['launches'] if isinstance(b, int)]
        if isinstance(k['bound'], int):
            blocks.append(k['bound'])
        if not blocks:
            notes.append('%s: never launched from kernels/, no bound: not checked' % label)
            continue
        block = max(blocks)
        if block > limits['threads_per_block']:
            failures.append('%s: %d threads per block, above %d'
                            % (label, block, limits['threads_per_block']))
        warps = (block + WARP - 1) // WARP
        per_warp = (regs * WARP + REG_UNIT - 1) // REG_UNIT * REG_UNIT
        if warps * per_warp > limits['regs_per_sm']:
            failures.append('%s: %d registers x %d threads = %d registers per block, above %d'
                            % (label, regs, block, warps * per_warp, limits['regs_per_sm']))
        dynamic = max([s for _, s, _ in k['launches'] if isinstance(s, int)] or [0])
        if shared + dynamic > limits['shared_optin']:
            failures.append('%s: %d bytes of shared memory per block, above %d'
                            % (label, shared + dynamic, limits['shared_optin']))
        if local > 0:
            notes.append('%s: %d bytes of local memory (register spills)' % (label, local))
        print('ok   %-28s sm_%d block %4d  REG %3d (%5d of %d per block)  SHARED %6d  LOCAL %d'
              % (name, arch, block, regs, warps * per_warp, limits['regs_per_sm'], shared, local))

    for name, k in sorted(kernels.items()):
        if k['launches'] and name not in seen and k['bound'] is not None:
            failures.append('%s (%s): launched but not in the library\'s SASS' % (name, k['file']))
    for n in notes:
        print('note ' + n)
    for f in failures:
        print('FAIL ' + f)
    print('%d kernel entries checked (%s), %d failure%s'
          % (len(functions), ', '.join('sm_%d' % a for a in sorted({a for a, _, _ in functions})),
             len(failures), '' if len(failures) == 1 else 's'))
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
