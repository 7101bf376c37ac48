#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Launch resources of every CUDA kernel, checked without a GPU.

Reads the registers, shared memory and local memory (spills) of every kernel
the engine library runs, and the launch configuration of our kernels from
kernels/*.cu (each kernel's __launch_bounds__ and the block size of each of its
launches, resolved through the file's #defines and dim3 declarations), and
checks them against the limits of the architecture the SASS was built for:

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

Where the resource usage comes from, in order:
  1. cuobjdump --dump-resource-usage of the built library, when a cuobjdump is
     found (below);
  2. otherwise ptxas's own report: every kernels/*.cu object of the build is
     compiled again to a cubin in a temporary directory with exactly the
     command ninja compiled it with (meson's compile_commands.json, passed in
     $VD_COMPILE_COMMANDS: the same nvcc, flags, -gencode for gpu_arch,
     includes and defines) plus --resource-usage, keeping only the SASS
     target; ptxas prints "Used N registers, ... N bytes smem" and the stack
     frame of each entry function. The registers of each kernel are then
     compared with the ones recorded in the library's own SASS (the
     EIATTR_REGCOUNT attributes of the ELF cubins in its .nv_fatbin section),
     so that the numbers checked are those of the code the library runs: a
     difference (a stale build, other flags) fails.
     CI's CUDA install has nvcc and ptxas but no cuobjdump.

Exit status: 0 all checks pass, 1 a check failed, 77 (skip) a build without
CUDA (no library, no device code, no .cu in compile_commands.json), or neither
cuobjdump nor nvcc at hand.

Usage: check_kernel_resources.py LIBRARY KERNELS_DIR [CUOBJDUMP]
The cuobjdump used is, in order: $VD_CUOBJDUMP, the third argument (what meson
found), cuobjdump on PATH, $CUDA_HOME/bin, /usr/local/cuda/bin, PyPI's
nvidia-cuda-cuobjdump in this Python's site-packages; VD_CUOBJDUMP=none uses
ptxas's report even where a cuobjdump is found. $VD_GPU_ARCH (meson's
gpu_arch) is the architecture whose SASS must be present.
"""
import concurrent.futures
import glob
import json
import os
import re
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile

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
    if os.environ.get('VD_CUOBJDUMP') == 'none':
        return None
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


# ---- without cuobjdump: ptxas's report, checked against the library's SASS ----

def elf_sections(data):
    """[(name, type, offset, size, link)] of a 64-bit little-endian ELF."""
    if data[:4] != b'\x7fELF' or data[4] != 2 or data[5] != 1:
        raise ValueError('not a 64-bit little-endian ELF')
    shoff, = struct.unpack_from('<Q', data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from('<HHH', data, 0x3a)
    raw = [struct.unpack_from('<IIQQQQI', data, shoff + i * shentsize) for i in range(shnum)]
    names = raw[shstrndx][4]

    def cstr(i):
        return data[names + i:data.index(b'\0', names + i)].decode('ascii', 'replace')
    return [(cstr(n), t, o, s, l) for n, t, _, _, o, s, l in raw]


def library_cubins(library):
    """[(arch, ELF bytes)] of the SASS in @library's .nv_fatbin section ([] if
    it has none), or None if the library is not an ELF file."""
    data = open(library, 'rb').read()
    try:
        sections = elf_sections(data)
    except (ValueError, struct.error):
        return None
    out = []
    for name, _, off, size, _ in sections:
        if name != '.nv_fatbin':
            continue
        fatbin = data[off:off + size]
        p = 0
        while p + 16 <= len(fatbin):
            magic, _, header, length = struct.unpack_from('<IHHQ', fatbin, p)
            if magic != 0xBA55ED50:  # containers are 8-byte aligned
                p += 8
                continue
            q, end = p + header, p + header + length
            while q + 32 <= end:
                kind, _, entry_header, payload = struct.unpack_from('<HHIQ', fatbin, q)
                arch, = struct.unpack_from('<I', fatbin, q + 28)
                body = fatbin[q + entry_header:q + entry_header + payload]
                if kind == 2:  # SASS (1: PTX); a compressed one is not an ELF
                    out.append((arch, body))
                q += entry_header + payload
            p = max(end, p + 8)
    return out


EIATTR_REGCOUNT = 0x2f


def cubin_regcounts(elf):
    """{mangled kernel: registers} from a cubin's .nv.info EIATTR_REGCOUNT
    records (4-byte header: format, attribute, 16-bit value or size; format 4
    carries `size` bytes: here the symbol index and the count)."""
    sections = elf_sections(elf)
    symtab = [s for s in sections if s[1] == 2]  # SHT_SYMTAB
    if not symtab:
        return {}
    _, _, off, size, link = symtab[0]
    strings = sections[link][2]
    symbols = []
    for i in range(size // 24):
        st_name, = struct.unpack_from('<I', elf, off + i * 24)
        symbols.append(elf[strings + st_name:elf.index(b'\0', strings + st_name)].decode(
            'ascii', 'replace'))
    regs = {}
    for name, _, off, size, _ in sections:
        if name != '.nv.info':
            continue
        p = off
        while p + 4 <= off + size:
            fmt, attr, value = struct.unpack_from('<BBH', elf, p)
            p += 4
            if fmt == 4:
                if attr == EIATTR_REGCOUNT and value == 8:
                    sym, count = struct.unpack_from('<II', elf, p)
                    if sym < len(symbols):
                        regs[symbols[sym]] = count
                p += value
    return regs


def kernel_compile_commands(path):
    """[(directory, argv)] of the build's .cu compilations in meson's
    compile_commands.json."""
    out = []
    for entry in json.load(open(path)):
        if not entry.get('file', '').endswith('.cu'):
            continue
        argv = entry.get('arguments') or shlex.split(entry['command'])
        out.append((entry['directory'], entry['file'], argv))
    return out


def cubin_command(argv, cubin):
    """@argv (an nvcc -c -o OBJ SOURCE) made to write only @cubin, the SASS of
    its -gencode ...,code=sm_XX, with ptxas's resource usage on stdout."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        if a in ('-o', '--output-file', '-MF', '-MQ', '-MT', '-odir'):
            skip = True
            continue
        if a in ('-c', '--compile', '-MD', '-MMD'):
            continue
        # the PTX target (code=compute_XX): -cubin compiles one SASS target
        if re.match(r'(-gencode|--generate-code)=arch=compute_\d+a?,code=compute_\d+a?$', a):
            continue
        out.append(a)
    # after nvcc itself (a launcher such as ccache may come first)
    at = next((i for i, a in enumerate(out) if os.path.basename(a).startswith('nvcc')), 0) + 1
    return out[:at] + ['-cubin', '--resource-usage', '-o', cubin] + out[at:]


def parse_ptxas(text):
    """[(arch, mangled, {'REG':, 'SHARED':, 'LOCAL':, 'SPILL':})] of ptxas's
    report of each entry function."""
    out = []
    arch = function = None
    fields = {}
    for line in text.splitlines():
        m = re.search(r"Compiling entry function '([^']+)' for 'sm_(\d+)a?'", line)
        if m:
            function, arch, fields = m.group(1), int(m.group(2)), {}
            continue
        if function is None:
            continue
        m = re.search(r'(\d+) bytes stack frame, (\d+) bytes spill stores', line)
        if m:
            fields['LOCAL'], fields['SPILL'] = int(m.group(1)), int(m.group(2))
            continue
        m = re.search(r'Used (\d+) registers', line)
        if m:
            fields['REG'] = int(m.group(1))
            s = re.search(r'(\d+) bytes smem', line)
            fields['SHARED'] = int(s.group(1)) if s else 0
            out.append((arch, function, fields))
            function = None
    return out


def ptxas_usage(compile_commands):
    """(functions as parse_ptxas, error or None): every .cu of the build
    compiled again to a cubin with --resource-usage, two at a time."""
    commands = kernel_compile_commands(compile_commands)
    if not commands:
        return None, None
    with tempfile.TemporaryDirectory(prefix='vd-cuda-static-') as tmp:
        def compile_one(i):
            directory, source, argv = commands[i]
            cubin = os.path.join(tmp, '%d-%s.cubin' % (i, os.path.basename(source)))
            run = subprocess.run(cubin_command(argv, cubin), cwd=directory, capture_output=True,
                                 text=True)
            return source, run
        jobs = min(len(commands), max(2, os.cpu_count() or 2))
        with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
            results = list(pool.map(compile_one, range(len(commands))))
    functions = []
    for source, run in results:
        if run.returncode != 0:
            return None, '%s: nvcc exited %d: %s' % (source, run.returncode,
                                                     (run.stderr + run.stdout).strip()[-600:])
        functions += parse_ptxas(run.stdout + run.stderr)
    return functions, None


def usage_from_ptxas(library, failures, notes):
    """Without cuobjdump: the functions of ptxas's report of the build's own
    compile commands, their registers checked against the library's SASS
    (mismatches appended to @failures); or an exit status (skip, fail)."""
    cubins = library_cubins(library)
    if cubins is None:
        print('SKIP: %s is not an ELF library (a build without CUDA)' % library)
        return SKIP
    if not cubins:
        print('SKIP: %s has no device code (a build without CUDA)' % library)
        return SKIP
    compile_commands = os.environ.get('VD_COMPILE_COMMANDS', '')
    if not os.path.isfile(compile_commands):
        print('SKIP: no cuobjdump, and no compile_commands.json in $VD_COMPILE_COMMANDS (%r) '
              'to compile the kernels with ptxas\'s report (run it through meson test)'
              % compile_commands)
        return SKIP
    try:
        functions, error = ptxas_usage(compile_commands)
    except FileNotFoundError as e:
        print('SKIP: no cuobjdump, and no nvcc to compile the kernels with: %s' % e)
        return SKIP
    if error:
        print('FAIL ' + error)
        return 1
    if functions is None:
        print('SKIP: no .cu compiled in %s (a build without CUDA)' % compile_commands)
        return SKIP
    if not functions:
        print('FAIL: ptxas reported no kernel for the .cu files of %s' % compile_commands)
        return 1
    print('resource usage: ptxas (nvcc --resource-usage) on the compile commands of %s, '
          'registers compared with %s\'s SASS' % (compile_commands, library))
    library_regs = {}
    for arch, elf in cubins:
        try:
            for name, regs in cubin_regcounts(elf).items():
                library_regs[(arch, name)] = regs
        except (ValueError, struct.error, IndexError) as e:
            failures.append('%s: an sm_%d cubin of its .nv_fatbin not readable: %s'
                            % (library, arch, e))
    if not library_regs:
        notes.append('%s: no EIATTR_REGCOUNT in its SASS (a new cubin format?): registers '
                     'not compared with the library' % library)
        return functions
    compiled = set()
    for arch, mangled, r in functions:
        compiled.add((arch, mangled))
        name, ours = base_name(mangled)
        label = '%s (sm_%d)' % (name if ours else mangled[:80], arch)
        if (arch, mangled) not in library_regs:
            failures.append('%s: compiled from the build\'s sources but not in %s\'s SASS '
                            '(a stale build?)' % (label, library))
        elif library_regs[(arch, mangled)] != r['REG']:
            failures.append('%s: %d registers in %s, %d compiled again from its build command '
                            '(a stale build, or other flags?)'
                            % (label, library_regs[(arch, mangled)], library, r['REG']))
    for arch, mangled in sorted(set(library_regs) - compiled):
        failures.append('%s (sm_%d): in %s\'s SASS but not compiled by any .cu of the build'
                        % (mangled[:80], arch, library))
    return functions


def main(argv):
    if len(argv) < 3:
        print(__doc__)
        return 2
    library, kernels_dir = argv[1], argv[2]
    if not os.path.exists(library):
        print('SKIP: no CUDA build (no %s)' % library)
        return SKIP
    failures = []
    notes = []
    cuobjdump = find_cuobjdump(argv)
    if cuobjdump is not None:
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
        print('resource usage: %s --dump-resource-usage %s' % (cuobjdump, library))
    else:
        functions = usage_from_ptxas(library, failures, notes)
        if isinstance(functions, int):
            return functions
    kernels = parse_sources(kernels_dir)
    gpu_arch = os.environ.get('VD_GPU_ARCH', '')
    if gpu_arch.isdigit() and int(gpu_arch) not in {a for a, _, _ in functions}:
        failures.append('no SASS for sm_%s (meson\'s gpu_arch) among the kernels read' % gpu_arch)

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
            notes.append('%s: %d bytes of local memory (%s)'
                         % (label, local, 'register spills' if 'SPILL' not in r else
                            'stack frame, %d bytes of spill stores' % r['SPILL']))
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
