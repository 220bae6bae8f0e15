"""Exercise 04's kernel and variants of it, compiled for sm_90 with Triton's own ptxas, no GPU
needed: what the SASS of each configuration's main key loop holds (issue 29, item 4: 04 at
D = 128 runs at 0.84-0.88x of cuDNN on an H100).

    KATA_DEVICE=compiler python scripts/attention_sass.py [--variant NAME ...] [--head-dim 128]
    python scripts/attention_sass.py --time --out DIR [--variant NAME ...]   # a Hopper GPU

The first form prints one row per (variant, causal, configuration): registers, spill bytes and
shared memory (ptxas -v and Triton's metadata), how many programs fit on one SM, ptxas's
warnings (C7512, C7514, C7515: wgmma serialised), and per key tile of the main loop (the first loop
with a wgmma, the unmasked tiles) the SASS instructions, HGMMA, WARPGROUP.DEPBAR waits and
MUFU.EX2 per thread, and for each wgmma group how many other instructions issue between its
commit and the wait that retires it ("in flight"; 0 means the wgmma ran synchronously).

The second form checks every configuration of each variant against SDPA in fp32 with 04's
grader tolerance at the bench's shapes (bf16, D = 64 and 128, S = 4096 and 16384, causal and
not, B * S = 16384, H * D = 2048); a variant with a wrong configuration is reported and not
timed. Then it times 04, each right variant and SDPA's cuDNN backend in the same process with
the bench's own helper, and writes DIR/attention_sass.json.

Each variant is 04's source with a few textual edits (``VARIANTS``), written to a temporary
file and imported, so that solutions/04 stays as it is and a variant always tracks it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kata import catalogue, runtime  # noqa: E402

SOURCE = catalogue.SOLUTIONS / catalogue.find("04").filename
LOOP = "    for n0 in tl.range(lo, hi, BLOCK_N):\n"
EXP2 = "        p = tl.math.exp2(s * qk_scale - m_new[:, None])\n"
CONFIGS_BLOCK = re.compile(r"# fmt: off\nCONFIGS = \[.*?\n\]\n# fmt: on\n", re.S)
# Hopper, per SM: 64k 32-bit registers, 228 KiB of shared memory (1 KiB of it reserved per
# program), 2048 threads, 32 programs (CUDA C++ Programming Guide, compute capability 9.0).
SM_REGISTERS, SM_SHARED, SM_RESERVED, SM_THREADS, SM_PROGRAMS = 65536, 233472, 1024, 2048, 32


# ---- the variants -------------------------------------------------------------------------


def _configs(rows) -> str:
    """A CONFIGS block for a variant's module: (BLOCK_M, BLOCK_N, warps, stages, TMA, extra)."""
    body = ",\n".join(
        f'    triton.Config({{"BLOCK_M": {bm}, "BLOCK_N": {bn}, "TMA": {tma}}}, num_warps={w}, '
        f"num_stages={s}{''.join(f', {k}={v}' for k, v in extra.items())})"
        for bm, bn, w, s, tma, extra in rows
    )
    return f"# fmt: off\nCONFIGS = [\n{body},\n]\n# fmt: on\n"


# 04's own configurations, (BLOCK_M, BLOCK_N, warps, stages, TMA), read from its file so that a
# change there reaches every variant built from them.
def _own_rows() -> list[tuple]:
    block = CONFIGS_BLOCK.search(SOURCE.read_text()).group()
    found = re.findall(r"\((\d+), (\d+), (\d+), (\d+), (True|False)\)", block)
    return [(int(a), int(b), int(c), int(d), t == "True") for a, b, c, d, t in found]


def _with(**extra):
    """04's configurations with Config arguments added (maxnreg, num_ctas, ...)."""
    return lambda: [(*row, dict(extra)) for row in _own_rows()]


def _stages(n: int):
    """04's configurations with every pipeline at ``n`` stages."""
    return lambda: [(bm, bn, w, n, tma, {}) for bm, bn, w, _, tma in _own_rows()]


def _exp2_coefficients(degree: int = 3) -> list[float]:
    """2^f on [-1/2, 1/2] as 1 + c1 f + ... (least squares on Chebyshev nodes, p(0) = 1 exact),
    for the exp2 that runs on the FMA pipe (FlashAttention-4's Cody-Waite split)."""
    import numpy as np

    f = 0.5 * np.cos(np.pi * (np.arange(256) + 0.5) / 256)
    basis = np.stack([f**i for i in range(1, degree + 1)], axis=1)
    coeffs, *_ = np.linalg.lstsq(basis, np.exp2(f) - 1.0, rcond=None)
    return [float(c) for c in coeffs]


def _fma_exp2_source() -> str:
    """A jit helper: exp2 of a score tile, the even columns through MUFU.EX2 and the odd ones
    through a polynomial on the FMA pipe. Rounding by adding and subtracting 1.5 * 2^23 (two
    FADDs, as FlashAttention-4 does) finds the integer part j without a conversion instruction,
    and the low bits of the sum, shifted into the exponent field, scale the polynomial by 2^j."""
    c1, c2, c3 = _exp2_coefficients()
    return textwrap.dedent(f'''
        @triton.jit
        def _exp2_fma(x, POLY: tl.constexpr):
            """exp2(x) of a (BLOCK_M, BLOCK_N) tile; with POLY half of it without MUFU.EX2."""
            if not POLY:
                return tl.math.exp2(x)
            M: tl.constexpr = x.shape[0]
            N: tl.constexpr = x.shape[1]
            # Adjacent column pairs sit in one thread in a wgmma accumulator: splitting them
            # moves no data between threads.
            mufu, fma = tl.split(tl.reshape(x, [M, N // 2, 2]))
            fma = tl.maximum(fma, -127.0)
            shifted = fma + 12582912.0
            j = shifted - 12582912.0
            f = fma - j
            poly = (({c3!r} * f + {c2!r}) * f + {c1!r}) * f + 1.0
            bits = poly.to(tl.int32, bitcast=True) + (shifted.to(tl.int32, bitcast=True) << 23)
            both = tl.join(tl.math.exp2(mufu), bits.to(tl.float32, bitcast=True))
            return tl.reshape(both, [M, N])

    ''')


class Variant(NamedTuple):
    """04 with ``edits`` ((old, new) pairs, each old text found exactly once) and, if given,
    its own configurations (``configs()`` gives rows for ``_configs``)."""

    about: str
    edits: tuple = ()
    configs: object = None


def _loop(**options) -> list:
    args = "".join(f", {k}={v!r}" for k, v in options.items())
    return [(LOOP, LOOP.replace("BLOCK_N)", f"BLOCK_N{args})"))]


# Two 8-warp TMA configurations at 2 stages, which 04's own list lacks: ws2 and tma8 add them.
TMA_8_WARPS = [(128, 64, 8, 2, True, {}), (128, 128, 8, 2, True, {})]

VARIANTS = {
    "04": Variant("solutions/04 as it is"),
    "ws2": Variant(
        "tl.range(..., warp_specialize=True), 04's configurations at 2 stages and two 8-warp TMA "
        "ones",
        _loop(warp_specialize=True),
        lambda: _stages(2)() + TMA_8_WARPS,
    ),
    "tma8": Variant(
        "04's configurations and two 8-warp TMA ones at 2 stages (128 x 64, 128 x 128): ws2's "
        "without warp_specialize, which compiles to the same loop at 8 warps",
        configs=lambda: [(*row, {}) for row in _own_rows()] + TMA_8_WARPS,
    ),
    "unroll2": Variant("tl.range(..., loop_unroll_factor=2)", _loop(loop_unroll_factor=2)),
    "no_multibuf": Variant(
        "tl.range(..., disallow_acc_multi_buffer=True)", _loop(disallow_acc_multi_buffer=True)
    ),
    "flatten": Variant("tl.range(..., flatten=True)", _loop(flatten=True)),
    "maxnreg128": Variant(
        "128 x 64 tiles on 8 warps (two 64-row warpgroups) held to 128 registers and 96 KiB of "
        "shared memory, so that two programs fit on an SM",
        configs=lambda: [(128, 64, 8, 2, tma, {"maxnreg": 128}) for tma in (False, True)],
    ),
    "ctas2": Variant(
        "04's configurations with num_ctas=2 (a cluster of 2)", configs=_with(num_ctas=2)
    ),
    "exp2_fma": Variant(
        "half of each unmasked tile's exp2 as a degree-3 polynomial on the FMA pipe",
        [
            (
                EXP2,
                EXP2.replace("tl.math.exp2(", "_exp2_fma(").replace(
                    "])\n", "], MASK == NO_MASK)\n"
                ),
            ),
            (
                "\n\n@triton.jit\ndef _attend_tiles(",
                "\n" + "{fma_exp2}" + "\n@triton.jit\ndef _attend_tiles(",
            ),
        ],
    ),
    "bn32": Variant(
        "BLOCK_N 32: smaller tiles, so that 2 to 4 programs (up to 4 warpgroups) fit on an SM "
        "without spilling",
        configs=lambda: [
            (128, 32, 8, 2, True, {}),
            (128, 32, 8, 3, True, {}),
            (128, 32, 8, 3, False, {}),
            (128, 32, 4, 3, True, {}),
            (64, 32, 4, 2, True, {}),
            (64, 32, 4, 3, True, {}),
            (64, 32, 4, 3, False, {}),
        ],
    ),
}


def variant_source(name: str) -> str:
    """04's source with the variant's edits and configurations."""
    variant = VARIANTS[name]
    text = SOURCE.read_text()
    for old, new in variant.edits:
        if text.count(old) != 1:
            raise SystemExit(f"variant {name}: {old.strip()[:60]!r} is not once in {SOURCE}")
        text = text.replace(old, new.replace("{fma_exp2}", _fma_exp2_source()))
    if variant.configs is not None:
        text = CONFIGS_BLOCK.sub(lambda _: _configs(variant.configs()), text, count=1)
    return text


_LOADED: dict = {}
_FOLDER: list = []  # the variants' files: a TemporaryDirectory, removed when Python exits


def load_variant(name: str):
    """The variant's module, imported from a temporary file (Triton reads a kernel's source)."""
    if name not in _LOADED:
        if name == "04":
            _LOADED[name] = catalogue.load_file(SOURCE)
        else:
            if not _FOLDER:
                _FOLDER.append(tempfile.TemporaryDirectory(prefix="attention_sass_"))
            path = Path(_FOLDER[0].name) / f"04_{name}.py"
            path.write_text(variant_source(name))
            _LOADED[name] = catalogue.load_file(path)
    return _LOADED[name]


# ---- compiling for sm_90 and reading the SASS ---------------------------------------------


def _nvidia_tool(name: str) -> str:
    """A tool Triton's wheel bundles (ptxas, cuobjdump), the ones that made the cubin."""
    import triton

    path = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name
    if not path.exists():
        raise SystemExit(f"{path} is missing: this Triton has no bundled {name}")
    return str(path)


def compile_config(module, config, head_dim: int, causal: bool, S: int = 4096):
    """One configuration of the module's kernel compiled for sm_90 (as grader/run/launcher.py's
    _compile_one does), for bf16 (B, H, S, D) inputs at the bench's shape."""
    import torch
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend
    from triton.runtime.jit import create_function_from_signature

    inner = module.attention_fwd_kernel.fn
    target = GPUTarget("cuda", 90, 32)
    backend = make_backend(target)
    binder = create_function_from_signature(inner.signature, inner.params, backend)
    x = torch.empty(16384 // S, 2048 // head_dim, S, head_dim, dtype=torch.bfloat16)
    strides = x.stride()[:3] * 4
    kwargs = {
        **config.kwargs,
        "HEAD_DIM": head_dim,
        "CAUSAL": causal,
        "num_warps": config.num_warps,
        "num_stages": config.num_stages,
        "num_ctas": config.num_ctas,
        "debug": False,
    }
    if config.maxnreg is not None:
        kwargs["maxnreg"] = config.maxnreg
    bound, specialization, options = binder(x, x, x, x, *strides, x.shape[1], S, 0.1, **kwargs)
    options, signature, constexprs, attrs = inner._pack_args(
        backend, kwargs, bound, specialization, options
    )
    src = ASTSource(inner, signature, constexprs, attrs)
    return triton.compile(src, target=target, options=options.__dict__)


def ptxas_report(ptx: str) -> dict:
    """Registers, spill bytes and warnings of ptxas -v on the kernel's PTX, with the options
    Triton passes (its cubin is cached, so its own ptxas run may not have happened here)."""
    with tempfile.TemporaryDirectory() as folder:
        src = Path(folder) / "kernel.ptx"
        src.write_text(ptx)
        done = subprocess.run(
            [_nvidia_tool("ptxas"), "-lineinfo", "-v", "--gpu-name=sm_90a", str(src)]
            + ["-o", str(Path(folder) / "kernel.cubin")],
            capture_output=True,
            text=True,
            check=True,
        )
    log = done.stderr
    spills = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
    return {
        "registers": int(re.search(r"Used (\d+) registers", log).group(1)),
        "spill_stores": int(spills.group(1)) if spills else 0,
        "spill_loads": int(spills.group(2)) if spills else 0,
        "warnings": sorted(set(re.findall(r"\b(C\d{4})\b", log))),
        "serialised": "serialized" in log,
    }


SASS_LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")


def sass(cubin: bytes) -> list[tuple[int, str]]:
    """(address, instruction) of every SASS instruction of the cubin (cuobjdump -sass)."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        text = subprocess.run(
            [_nvidia_tool("cuobjdump"), "-sass", f.name], capture_output=True, text=True, check=True
        ).stdout
    return [(int(a, 16), ins) for a, ins in SASS_LINE.findall(text)]


def _opcode(ins: str) -> str:
    return ins.split()[1] if ins.startswith("@") else ins.split()[0]


def loops(code: list[tuple[int, str]]) -> list[tuple[int, int]]:
    """(first, last) indices of each loop: a branch back to an earlier address."""
    index = {addr: i for i, (addr, _) in enumerate(code)}
    found = []
    for i, (addr, ins) in enumerate(code):
        # BRA, BRA.U, BRA.DIV ...: the target is the instruction's last operand.
        target = re.findall(r"0x([0-9a-f]+)", ins) if _opcode(ins).startswith("BRA") else []
        if target and int(target[-1], 16) < addr and int(target[-1], 16) in index:
            found.append((index[int(target[-1], 16)], i))
    return found


def main_loop(code):
    """The first innermost loop with a wgmma: the unmasked key tiles (stage 1 when causal)."""
    with_mma = [(a, b) for a, b in loops(code) if any("HGMMA" in ins for _, ins in code[a : b + 1])]
    inner = [
        (a, b)
        for a, b in with_mma
        if not any(a <= c and d <= b and (c, d) != (a, b) for c, d in with_mma)
    ]
    return min(inner) if inner else None


def in_flight(body: list[str]) -> list[int]:
    """For each wgmma group of a loop body (HGMMAs up to the one that commits, ``gsb0``), the
    instructions other than HGMMA and warpgroup waits and fences that issue before a WARPGROUP.DEPBAR retires it, following the
    loop around its back edge. ``WARPGROUP.DEPBAR.LE gsb0, K`` waits until at most K groups are
    pending, so a group is retired by the first such wait with K <= the groups committed after
    it."""
    commits = [i for i, ins in enumerate(body) if "HGMMA" in ins and "gsb0" in ins]
    found = []
    for start in commits:
        after, count = 0, 0
        for step in range(1, 2 * len(body) + 1):
            ins = body[(start + step) % len(body)]
            wait = re.search(r"WARPGROUP\.DEPBAR\.LE\s+gsb0,\s*0x([0-9a-f]+)", ins)
            if wait and int(wait.group(1), 16) <= after:
                break
            if "HGMMA" in ins:
                after += "gsb0" in ins
            elif not _opcode(ins).startswith(("WARPGROUP.", "NOP")):  # waits are not work
                count += 1
        found.append(count)
    return found


def hgmma_macs(ins: str) -> int:
    """Multiply-adds of one warpgroup's HGMMA.MxNxK."""
    m, n, k = (int(x) for x in re.search(r"HGMMA\.(\d+)x(\d+)x(\d+)", ins).groups())
    return m * n * k


def occupancy(registers: int, shared: int, warps: int) -> int:
    """Programs per SM that registers (allocated per warp in 256s), shared memory and threads
    allow."""
    per_warp = -(-registers * 32 // 256) * 256
    return min(
        SM_REGISTERS // (per_warp * warps),
        SM_SHARED // (shared + SM_RESERVED),
        SM_THREADS // (32 * warps),
        SM_PROGRAMS,
    )


def analyse(compiled, config, head_dim: int) -> dict:
    """The table's row for one compiled configuration."""
    meta = compiled.metadata
    row = {**ptxas_report(compiled.asm["ptx"]), "shared": meta.shared, "warps": meta.num_warps}
    row["programs_per_sm"] = occupancy(row["registers"], meta.shared, meta.num_warps)
    code = sass(compiled.asm["cubin"])
    # Triton's warp specialisation makes a ttg.warp_specialize op, and its partitions set their
    # register budgets with setmaxnreg.
    row["warp_specialized"] = "ttg.warp_specialize" in compiled.asm["ttgir"] or any(
        "SETMAXREG" in ins for _, ins in code
    )
    found = main_loop(code)
    if found is None:
        return row
    body = [ins for _, ins in code[found[0] : found[1] + 1]]
    # The wgmma work of one key tile, per warpgroup running the loop, gives tiles per trip.
    bm, bn = config.kwargs["BLOCK_M"], config.kwargs["BLOCK_N"]
    groups = max(1, config.num_warps // 4)
    macs = sum(hgmma_macs(ins) for ins in body if "HGMMA" in ins)
    tiles = macs * groups / (2 * bm * bn * head_dim)
    per = lambda n: round(n / tiles, 1) if tiles else None  # noqa: E731
    row.update(
        tiles_per_trip=round(tiles, 2),
        instructions=per(len(body)),
        hgmma=per(sum("HGMMA" in ins for ins in body)),
        waits=per(sum("WARPGROUP.DEPBAR" in ins for ins in body)),
        ex2=per(sum("MUFU.EX2" in ins for ins in body)),
        ffma=per(sum(_opcode(ins).startswith("FFMA") for ins in body)),
        in_flight=in_flight(body),
        local=per(sum(_opcode(ins).startswith(("LDL", "STL")) for ins in body)),
    )
    # What the SM's schedulers issue for the same work whatever the tile: warp instructions per
    # 128 x 64 block of scores (one tile of 04's first configuration).
    if tiles:
        row["per_block"] = round(len(body) / tiles * meta.num_warps * 128 * 64 / (bm * bn))
    return row


def config_name(config) -> str:
    kw = config.kwargs
    extra = "".join(
        f" {k}={getattr(config, k)}"
        for k in ("maxnreg", "num_ctas")
        if getattr(config, k) not in (None, 1)
    )
    return (
        f"{kw['BLOCK_M']}x{kw['BLOCK_N']} w{config.num_warps} s{config.num_stages}"
        f" {'tma' if kw.get('TMA') else 'ptr'}{extra}"
    )


def own_configs(module, causal: bool) -> list:
    """The configurations the variant's autotuner would try for this causality."""
    kernel = module.attention_fwd_kernel
    return module._whole_key_tiles(kernel.configs, {}, CAUSAL=causal)


HEADER = (
    f"{'variant':<12}{'causal':<7}{'configuration':<26}{'regs':>5}{'spill':>10}{'smem':>6}"
    f"{'/SM':>4}  {'ptxas':<14}{'tiles':>6}{'instr':>7}{'hgmma':>6}{'waits':>6}{'ex2':>6}"
    f"{'ffma':>6}{'ldl/stl':>8}{'block':>7}  in flight"
)


def table_line(name: str, causal: bool, config, row: dict) -> str:
    head = f"{name:<12}{causal!s:<7}{config_name(config):<26}"
    if "error" in row:
        return head + "compile error: " + row["error"]
    spill = f"{row['spill_stores']}/{row['spill_loads']}"
    warned = ",".join(row["warnings"]) or "-"
    line = (
        f"{row['registers']:>5}{spill:>10}{row['shared'] // 1024:>5}K{row['programs_per_sm']:>4}"
        f"  {warned:<14}"
    )
    if "tiles_per_trip" not in row:
        return head + line + "no loop with a wgmma"
    line += "".join(
        f"{row[k]:>{w}}"
        for k, w in (
            ("tiles_per_trip", 6),
            ("instructions", 7),
            ("hgmma", 6),
            ("waits", 6),
            ("ex2", 6),
            ("ffma", 6),
            ("local", 8),
            ("per_block", 7),
        )
    )
    ws = "  (warp-specialised)" if row["warp_specialized"] else ""
    return head + line + "  " + "/".join(map(str, row["in_flight"])) + ws


@contextlib.contextmanager
def _captured():
    """Triton's and ptxas's own output while compiling, kept out of the table: a failed compile
    prints the MLIR reproducer or the whole PTX. Yields a list that holds the text afterwards."""
    text: list[str] = []
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with tempfile.TemporaryFile(mode="w+") as sink:
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        try:
            yield text
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            sink.seek(0)
            text.append(sink.read())


def _why(exc: Exception, printed: str) -> str:
    """One line on a failed compile: the exception, and the compiler's assertion or error."""
    said = [
        line.strip()
        for line in printed.splitlines()
        if "Assertion" in line or "error:" in line or "Segmentation" in line
    ]
    first = str(exc).strip().splitlines()[0][:80] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {first}" + (f" [{said[0][-110:]}]" if said else "")


def sass_table(names: list[str], head_dim: int) -> list[dict]:
    """Compile every configuration of each variant, causal and not; print and return the rows."""
    print(
        f"bf16, D = {head_dim}, S = 4096. instr, hgmma, waits, ex2, ffma, ldl/stl: per thread and "
        "key tile of the main loop; block: warp instructions per 128 x 64 block of scores; in "
        "flight: per wgmma group, instructions issued before its wait"
    )
    print(HEADER, flush=True)
    rows = []
    for name in names:
        module = load_variant(name)
        for causal in (False, True):
            for config in own_configs(module, causal):
                with _captured() as printed:
                    try:
                        compiled = compile_config(module, config, head_dim, causal)
                        row = analyse(compiled, config, head_dim)
                        failed = None
                    except Exception as e:  # noqa: BLE001 (a variant Triton refuses is a finding)
                        failed = e
                if failed is not None:
                    row = {"error": _why(failed, printed[0])}
                print(table_line(name, causal, config, row), flush=True)
                rows.append(
                    {"variant": name, "causal": causal, "config": config_name(config), **row}
                )
    return rows


# ---- the GPU mode: check, then time against cuDNN ------------------------------------------

# The variants worth a GPU's time (docs/performance.md says why); --variant overrides.
RECOMMENDED = ["bn32", "exp2_fma", "tma8"]
SHAPES = [(D, S, causal) for D in (128, 64) for S in (4096, 16384) for causal in (False, True)]


class _Fixed:
    """The variant's kernel at one configuration, launched like its autotuner would launch it,
    so that ``launch_fast_attention`` runs each configuration as it runs the autotuned kernel."""

    def __init__(self, kernel, config):
        self.fn, self.options = kernel.fn, config.all_kwargs()

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.fn[grid](*args, **kwargs, **self.options)


def _wrong(got, want, tol) -> int:
    """Elements outside the grader's (atol, rtol) (grader/kinds/compare.py's rule, on the GPU)."""
    import torch

    atol, rtol = tol
    got, want = got.float(), want.float()
    close = ((got - want).abs() <= atol + rtol * want.abs()) & torch.isfinite(want)
    return int((~close).sum())


def wrong_configs(module, q, k, v, causal: bool, want, tol) -> dict:
    """{configuration: why} for each configuration of the module's autotuner whose output has
    an element outside ``tol`` (or that fails to compile or run) on these inputs."""
    from kata.kinds.bhsd_attention import launch_fast_attention

    kernel = module.attention_fwd_kernel
    wrong = {}
    for config in own_configs(module, causal):
        try:
            got = launch_fast_attention(_Fixed(kernel, config), q, k, v, causal=causal)
            bad = _wrong(got, want, tol)
            if bad:
                wrong[config_name(config)] = f"{bad} elements outside the tolerance"
        except Exception as e:  # noqa: BLE001 (a configuration that fails is a finding)
            wrong[config_name(config)] = f"{type(e).__name__}: {str(e)[:200]}"
    return wrong


def check_and_time(names: list[str], D: int, S: int, causal: bool) -> dict:
    """One shape: every configuration of each variant checked against SDPA in fp32, then 04,
    the variants with no wrong configuration and SDPA's cuDNN backend timed together."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from kata.authoring import bench
    from kata.kinds.bhsd_attention import INTERFACE, launch_fast_attention

    B, H = 16384 // S, 2048 // D
    tol = INTERFACE.tolerance("out", "bfloat16")
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in "qkv")
    sdpa = torch.nn.functional.scaled_dot_product_attention
    want = sdpa(q.float(), k.float(), v.float(), is_causal=causal)
    row = {"dtype": "bfloat16", "D": D, "S": S, "B": B, "H": H, "causal": causal, "tolerance": tol}
    out = torch.empty_like(q)
    fns = {}
    for name in names:
        kernel = load_variant(name).attention_fwd_kernel
        wrong = wrong_configs(load_variant(name), q, k, v, causal, want, tol)
        if wrong:
            row[f"{name}_wrong"] = wrong
            print(f"  {name}: WRONG, not timed: {wrong}", flush=True)
            continue
        fns[name] = lambda kernel=kernel: launch_fast_attention(
            kernel, q, k, v, causal=causal, out=out
        )

    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return sdpa(q, k, v, is_causal=causal)

    fns["sdpa_cudnn"] = cudnn
    flops = 4 * B * H * S * S * D / (2 if causal else 1)
    for name, t in bench.time_ms(fns).items():
        row[f"{name}_ms"], row[f"{name}_spread"] = t["ms"], t["spread"]
        row[f"{name}_tflops"] = flops / t["ms"] / 1e9
    for name in fns:
        row[f"{name}_vs_cudnn"] = row["sdpa_cudnn_ms"] / row[f"{name}_ms"]
        if name != "sdpa_cudnn":
            kernel = load_variant(name).attention_fwd_kernel
            row[f"{name}_config"] = config_name(kernel.best_config)
            got = launch_fast_attention(kernel, q, k, v, causal=causal)
            row[f"{name}_max_err_vs_fp32"] = float((got.float() - want).abs().max())
    return row


def time_variants(names: list[str], out: Path | None) -> int:
    """The GPU mode: every shape of SHAPES, written to out/attention_sass.json."""
    import torch

    if out is None:
        raise SystemExit("--time needs --out DIR")
    if runtime.BACKEND != "cuda":
        raise SystemExit(
            f"--time times kernels on a Hopper GPU; this process has none ({runtime.describe()}); "
            "without one, leave --time out for the SASS table"
        )
    if torch.cuda.get_device_capability() != (9, 0):
        raise SystemExit(
            f"--time runs on a Hopper GPU (sm_90: H100, H200), what 04 and the variants are "
            f"tuned and compared for; this is {torch.cuda.get_device_name()}"
        )
    names = ["04", *(n for n in names if n != "04")]
    out.mkdir(parents=True, exist_ok=True)
    found = {
        "gpu": torch.cuda.get_device_name(),
        "versions": runtime.versions(),
        "variants": {n: VARIANTS[n].about for n in names},
        "rows": [],
    }
    for D, S, causal in SHAPES:
        print(f"bf16 D={D} S={S} causal={causal}", flush=True)
        row = check_and_time(names, D, S, causal)
        found["rows"].append(row)
        # Written after every shape, so that a run cut short keeps what it measured.
        (out / "attention_sass.json").write_text(json.dumps(found, indent=1))
        print(
            "  "
            + "  ".join(
                f"{n} {row[n + '_tflops']:.0f} TFLOP/s x{row[n + '_vs_cudnn']:.2f}"
                for n in [*names, "sdpa_cudnn"]
                if n + "_tflops" in row
            ),
            flush=True,
        )
    print(f"wrote {out / 'attention_sass.json'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n\n")[0])
    parser.add_argument("--variant", action="append", choices=list(VARIANTS), help="repeatable")
    parser.add_argument("--head-dim", type=int, default=128, choices=(64, 128))
    parser.add_argument("--time", action="store_true", help="check and time on a Hopper GPU")
    parser.add_argument("--out", type=Path, help="with --time: where attention_sass.json goes")
    args = parser.parse_args(argv)
    backend = runtime.configure()
    if backend == "interpreter":
        raise SystemExit(
            "attention_sass.py compiles for sm_90: run it with KATA_DEVICE=compiler (no GPU) or "
            "on a Hopper GPU, not in Triton's interpreter"
        )
    if args.time:
        return time_variants(args.variant or RECOMMENDED, args.out)
    sass_table(args.variant or list(VARIANTS), args.head_dim)
    return 0


if __name__ == "__main__":
    sys.exit(main())
