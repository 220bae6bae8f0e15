"""Exercise 05 on a GPU: tile layouts for every MoE expert count, timed as ``nox -s bench`` does.

    python scripts/gating_sweep.py --sweep --out DIR     # candidates for every E and dtype
    python scripts/gating_sweep.py --out DIR             # the shipped file (and --before FILE)
    python scripts/gating_sweep.py --dry-run --out DIR   # tiny shapes in the interpreter

``--sweep`` builds variants of exercise 05's solution (the chunk width; the row stride
rounded so that the compiler knows the rows' alignment) and launches each one past the
autotuner, under every BLOCK_M whose tile holds 8 to 32 KB (64 KB for rows of at most 32
bytes) with 4 or 8 warps (and 16 from 32 KB), for E in 8, 16, 60, 64, 128, 160, 256 and
fp32 / bf16 logits at M = 1M tokens. Every candidate is first checked
against an exact reference (ties to the lowest expert, extreme logits, a partial last tile);
then screened with one ``do_bench``; the best few per shape are timed like the bench: 5 rounds
interleaved with the file as shipped, a copy of the same number of bytes and torch, each round
one ``do_bench(warmup=10, rep=50)`` median with the L2 flushed. "% of copy" is against the
bench's 2 GiB device-to-device copy in the same process.

Without ``--sweep`` it times the shipped file (and ``--before``) the same way, plus a decode-size
batch (M = 4096) against torch: GPU time, host time per call, and CUDA-graph replay.
Writes ``DIR/gating_sweep.json`` and prints a table last.
"""

from __future__ import annotations

import argparse
import ast
import functools
import json
import os
import statistics
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kata import runtime  # noqa: E402

# The backend is chosen before Triton is imported: Triton reads TRITON_INTERPRET as it loads,
# and a later choice of the interpreter would leave its own library functions compiled-only.
runtime.configure()

import torch  # noqa: E402
import triton  # noqa: E402

from kata import catalogue, host  # noqa: E402

EXPERTS = (8, 16, 60, 64, 128, 160, 256)
SWEEP_ORDER = (8, 60, 16, 64, 256, 160, 128)  # the worst first, in case the deadline comes
DTYPES = ("float32", "bfloat16")
M_BENCH = 2**20
ROUNDS = 5
DRY = False
DEVICE = "cpu"

# Anchors in the solution file that the variants rewrite (a variant whose anchor is missing is
# skipped, with a note).
CHUNK_LINE = "CHUNK: tl.constexpr = WIDE // 2 if HALVE else WIDE"
PID_LINE = "    pid = tl.program_id(0)\n"


def log(*args):
    print(*args, flush=True)


def do_bench(fn, warmup, rep):
    if DRY:
        fn()
        return 1.0
    return float(triton.testing.do_bench(fn, warmup=warmup, rep=rep, return_mode="median"))


def interleaved(fns: dict, rounds: int = ROUNDS, warmup: int = 10, rep: int = 50) -> dict:
    """{name: {"ms", "spread", "rounds"}}: the bench's method (grader.run.timing's
    interleaved_ms, which kata/authoring/bench.py's time_ms calls)."""
    for fn in fns.values():
        fn()
    sync()
    found = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            found[name].append(do_bench(fn, warmup, rep))
    out = {}
    for name, ms in found.items():
        med = statistics.median(ms)
        out[name] = {"ms": med, "spread": (max(ms) - min(ms)) / med, "rounds": ms}
    return out


def sync():
    if not DRY:
        torch.cuda.synchronize()


def copy_tbps() -> dict:
    n = 2**12 if DRY else 2**29
    x = torch.empty(n, dtype=torch.float32, device=DEVICE)
    y = torch.empty_like(x)
    t = interleaved({"copy": lambda: y.copy_(x)})["copy"]
    return {"tbps": 2 * n * 4 / t["ms"] / 1e9, "ms": t["ms"], "spread": t["spread"]}


# ---- kernels -----------------------------------------------------------------------------------


def load_variant(text: str, name: str):
    path = Path("/tmp") / f"gating_variant_{name}.py"
    return catalogue.load_text(text, path, f"gating_variant_{name}")


def variant_text(base: str, chunk_bytes: int | None, hint: int | None) -> str | None:
    """The solution with a fixed chunk width in bytes, and/or E and the row stride rounded down
    to a multiple of ``hint`` elements (exact where both are such multiples)."""
    text = base
    if chunk_bytes is not None:
        if CHUNK_LINE not in text:
            return None
        # A fixed width in bytes, in place of the file's choice (halving included).
        text = text.replace(
            CHUNK_LINE, f"CHUNK: tl.constexpr = min(BLOCK_E, {chunk_bytes} * 8 // BITS)"
        )
    if hint is not None:
        if PID_LINE not in text:
            return None
        # Exact where E and the stride are multiples of the hint; then the compiler sees it.
        text = text.replace(
            PID_LINE,
            PID_LINE + f"    E = (E // {hint}) * {hint}\n"
            f"    stride_m = (stride_m // {hint}) * {hint}\n",
        )
    return text


def inner_of(kernel):
    """The kernel past its autotuner and heuristics (compiled, or the interpreter's)."""
    from grader.run import launcher

    return launcher._layers(kernel)[2]


def outputs(M):
    return tuple(
        torch.empty(M, device=DEVICE, dtype=t)
        for t in (torch.float32, torch.float32, torch.int32, torch.int32)
    )


def pinned_call(inner, x, outs, bm, warps):
    M, E = x.shape
    grid = (triton.cdiv(M, bm),)
    kw = {"BLOCK_E": triton.next_power_of_2(E), "BLOCK_M": bm}
    if not DRY:
        kw["num_warps"] = warps

    def call():
        inner[grid](x, *outs, M, E, x.stride(0), **kw)
        return outs

    return call


def best_config(kernel):
    """What the file's autotuner chose for its last launch (None without one)."""
    layer = kernel
    while layer is not None and not isinstance(layer, triton.runtime.jit.JITFunction):
        if hasattr(layer, "best_config") and layer.best_config is not None:
            c = layer.best_config
            return {**c.kwargs, "num_warps": c.num_warps, "num_stages": c.num_stages}
        layer = getattr(layer, "fn", None)
    return None


# ---- reference ---------------------------------------------------------------------------------


def special_logits(M, E, dtype, seed):
    """randn, with rows of exact ties, huge and tiny logits, and rows far below zero."""
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    x = torch.randn(M, E, generator=g, device=DEVICE)
    n = max(1, M // 16)
    x[0:n] = torch.randint(-2, 3, (n, E), generator=g, device=DEVICE).float()  # exact ties
    x[n : 2 * n] *= 300.0  # logits past exp's range
    x[2 * n : 3 * n] -= 1000.0  # every logit far below zero
    x[3 * n : 4 * n] = 7.0  # a whole row tied: experts 0 and 1
    return x.to(getattr(torch, dtype))


def oracle_check(fast, E, dtype, M=2051) -> dict:
    """Against kata.oracles.top2_gating (float64 NumPy) on a ragged M with ties and extreme
    logits. Experts are compared by index and, as the grader compares them, by probability
    (where float64 probabilities underflow to 0, several experts tie at 0)."""
    import numpy as np

    from kata import oracles

    x = special_logits(M, E, dtype, seed=2000 + E)
    w0, w1, i0, i1 = (t.cpu().numpy() for t in fast(x))
    x64 = x.float().cpu().numpy().astype(np.float64)
    rw0, rw1, ri0, ri1 = oracles.top2_gating(x64)
    probs = oracles.softmax(x64)
    rows = np.arange(M)
    i0, i1 = i0.astype(np.int64), i1.astype(np.int64)
    by_value = np.isclose(probs[rows, i0], probs[rows, ri0], atol=1e-6, rtol=1e-5) & np.isclose(
        probs[rows, i1], probs[rows, ri1], atol=1e-6, rtol=1e-5
    )
    same = (i0 == ri0) & (i1 == ri1)
    err = max(np.abs(w0 - rw0)[same].max(initial=0), np.abs(w1 - rw1)[same].max(initial=0))
    return {
        "M": M,
        "index_mismatches": int((~same).sum()),
        "value_mismatches": int((~by_value).sum()),
        "max_weight_err": float(err),
    }


def exact_top2(x):
    """(idx0, idx1, w0, w1 in float64): the two largest logits, lowest expert first on ties."""
    v = x.double()
    E = v.shape[1]
    cols = torch.arange(E, device=v.device)
    m0 = v.max(dim=1, keepdim=True).values
    i0 = torch.where(v == m0, cols, E).min(dim=1).values
    v2 = v.scatter(1, i0[:, None], float("-inf"))
    m1 = v2.max(dim=1, keepdim=True).values
    i1 = torch.where(v2 == m1, cols, E).min(dim=1).values
    e = torch.exp(m1[:, 0] - m0[:, 0])
    w1 = e / (1 + e)
    return i0, i1, 1 - w1, w1


def check(outs, ref) -> dict:
    w0, w1, i0, i1 = outs
    r0, r1, rw0, rw1 = ref
    bad = ((i0.long() != r0) | (i1.long() != r1)).sum().item()
    err = max((w0.double() - rw0).abs().max().item(), (w1.double() - rw1).abs().max().item())
    nan = bool(torch.isnan(w0).any() or torch.isnan(w1).any())
    return {
        "index_mismatches": int(bad),
        "max_weight_err": err,
        "nan": nan,
        "ok": bad == 0 and err < 1e-6 and not nan,
    }


# ---- the sweep ---------------------------------------------------------------------------------


def tile_choices(E, dtype):
    """(BLOCK_M, num_warps) whose tile (BLOCK_M x BLOCK_E) holds 8 to 32 KB (64 KB where a row
    is at most 32 bytes), with 4 or 8 warps (16 too from 32 KB on)."""
    row = triton.next_power_of_2(E) * (4 if dtype == "float32" else 2)
    found = []
    for bm in (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192):
        tile = bm * row
        if not 8192 <= tile <= (65536 if row <= 32 else 32768):
            continue
        for w in (4, 8, 16):
            if w == 16 and tile < 32768:
                continue
            found.append((bm, w))
    return found


# 05's constexpr lines that choose the chunk, in its order
CHUNK_NAMES = ("WHOLE_ROWS", "CHUNK_BYTES", "WIDE", "FILLS", "NARROW", "HALVE", "CHUNK", "NCHUNK")


@functools.cache
def _chunk_lines(source: str) -> dict:
    """{name: expression} of CHUNK_NAMES in 05's source (parsed once per source)."""
    lines = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.AnnAssign) and node.target.id in CHUNK_NAMES:
            lines[node.target.id] = ast.unparse(node.value)
    missing = set(CHUNK_NAMES) - set(lines)
    if missing:
        raise ValueError(f"05 no longer binds {sorted(missing)}")
    return lines


def chunk_rule(source: str, bits: int, E: int) -> tuple[int, int]:
    """(logits per chunk, chunks per row) that 05's source chooses for E logits of ``bits``
    bits, computed with the kernel's own constexpr lines."""
    lines = _chunk_lines(source)
    names = {"E": E, "BLOCK_E": 1 << (E - 1).bit_length(), "BITS": bits, "min": min, "max": max}
    for name in CHUNK_NAMES:
        names[name] = eval(lines[name], names)
    return names["CHUNK"], names["NCHUNK"]


def variants_for(E, dtype, base_text):
    """(label, chunk_bytes, hint): the shipped chunk rule and fixed widths; the stride hint
    where E is no multiple of 16 (Triton then knows nothing of the rows' alignment)."""
    elem = 4 if dtype == "float32" else 2
    row = triton.next_power_of_2(E) * elem
    rule = chunk_rule(base_text, elem * 8, E)[0] * elem  # the shipped rule's width in bytes
    tries = (16, 32) if row <= 64 else (32, 128) if row <= 256 else (64, 256)
    widths, seen = [None], {rule}
    for b in tries:
        if min(b, row) not in seen:
            seen.add(min(b, row))
            widths.append(b)
    hints = [None]
    if E % 16:
        for h_bytes in (16, 8, 4):
            h = h_bytes // elem
            if h >= 1 and E % h == 0:
                hints.append(h)
                break
    found = []
    for w in widths:
        for h in hints:
            if w is not None and h is None and len(hints) > 1:
                continue  # other widths only with the rows' alignment known
            label = f"chunk{w or 'rule'}" + (f"-stride{h}" if h else "")
            found.append((label, w, h))
    return found


def sweep(base_text, before, copy, shapes, out, quick, deadline) -> list[dict]:
    """Shape after shape (the report rewritten after each): compile its candidates on every
    core, check each, screen each with one do_bench, then time the best few like the bench.
    Shapes not begun by ``deadline`` (time.monotonic()) are left out."""
    results, screened, variants = [], [], {}
    for E, dtype in shapes:
        if time.monotonic() > deadline:
            log(f"E={E} {dtype}: left out (past the deadline)")
            continue
        results.append(sweep_shape(E, dtype, base_text, before, copy, quick, variants, screened))
        (out / "gating_screen.json").write_text(json.dumps(screened, indent=1, default=str))
        (out / "gating_sweep.json").write_text(
            json.dumps({"copy": copy, "sweep": results}, indent=1, default=str)
        )
    return results


def sweep_shape(E, dtype, base_text, before, copy, quick, variants, screened) -> dict:
    plans = []
    for label, w, h in variants_for(E, dtype, base_text):
        key = (label, w, h)
        if key not in variants:
            text = variant_text(base_text, w, h)
            variants[key] = None if text is None else load_variant(text, label.replace("-", "_"))
        if variants[key] is not None:
            plans += [(label, key, bm, warps) for bm, warps in tile_choices(E, dtype)]
    if quick:
        plans = plans[:: max(1, len(plans) // 4)]
    M = 64 if DRY else M_BENCH
    x = torch.randn(M, E, device=DEVICE, dtype=getattr(torch, dtype))
    outs = outputs(M)
    chk = special_logits(M - (16 if DRY else 48), E, dtype, seed=E)
    chk_outs, ref = outputs(chk.shape[0]), exact_top2(chk)
    start = time.monotonic()
    errors = [None] * len(plans)
    if not DRY:

        def compile_one(plan):
            label, key, bm, warps = plan
            try:
                inner_of(variants[key].moe_top2_gating_fast_kernel).warmup(
                    x,
                    *outs,
                    M,
                    E,
                    x.stride(0),
                    BLOCK_E=triton.next_power_of_2(E),
                    BLOCK_M=bm,
                    num_warps=warps,
                    grid=(1,),
                )
            except Exception as e:  # noqa: BLE001
                return repr(e)[:200]
            return None

        with ThreadPoolExecutor(max_workers=min(16, os.cpu_count() or 1)) as pool:
            errors = list(pool.map(compile_one, plans))
    compiled_s = time.monotonic() - start
    mine, failed = [], 0
    for (label, key, bm, warps), err in zip(plans, errors):
        row = {"E": E, "dtype": dtype, "variant": label, "BLOCK_M": bm, "num_warps": warps}
        screened.append(row)
        if err:
            row["error"] = err
            failed += 1
            continue
        inner = inner_of(variants[key].moe_top2_gating_fast_kernel)
        try:
            for o in chk_outs[:2]:
                o.fill_(float("nan"))
            for o in chk_outs[2:]:
                o.fill_(-1)
            pinned_call(inner, chk, chk_outs, bm, warps)()
            sync()
            row["check"] = check(chk_outs, ref)
            row["screen_ms"] = do_bench(pinned_call(inner, x, outs, bm, warps), 5, 25)
        except Exception as e:  # noqa: BLE001
            row["error"] = repr(e)[:300]
            failed += 1
            continue
        if row["check"]["ok"]:
            mine.append((row, inner))
        else:
            failed += 1
    mine.sort(key=lambda ri: ri[0]["screen_ms"])
    moved = M * E * x.element_size() + M * 16
    fns = {"before": lambda: before.fast_top2_gating(x)}
    for r, inner in mine[:4]:
        fns[f"{r['variant']} bm{r['BLOCK_M']} w{r['num_warps']}"] = pinned_call(
            inner, x, outs, r["BLOCK_M"], r["num_warps"]
        )
    src = torch.empty(moved // 8, dtype=torch.float32, device=DEVICE)
    dst = torch.empty_like(src)
    fns["copy_same_bytes"] = lambda: dst.copy_(src)
    if not DRY:
        fns["torch"] = lambda: torch_gating(x)
    timed = interleaved(fns)
    row = {
        "E": E,
        "dtype": dtype,
        "M": M,
        "mb_moved": moved / 1e6,
        "candidates": len(plans),
        "failed": failed,
        "compile_s": compiled_s,
        "sweep_s": time.monotonic() - start,
        "before_config": best_config(before.moe_top2_gating_fast_kernel),
    }
    for name, t in timed.items():
        row[name] = {
            **t,
            "tbps": moved / t["ms"] / 1e9,
            "pct_of_copy": 100 * moved / t["ms"] / 1e9 / copy["tbps"],
        }
    best = min(
        (n for n in timed if n not in ("before", "copy_same_bytes", "torch")),
        key=lambda n: timed[n]["ms"],
        default=None,
    )
    log(
        f"E={E:<3} {dtype:<8} before {row['before']['pct_of_copy']:5.1f}% "
        f"({100 * row['before']['spread']:.1f}%)  best {best}: "
        + (f"{row[best]['pct_of_copy']:5.1f}% ({100 * row[best]['spread']:.1f}%)" if best else "-")
        + f"  copy-same-bytes {row['copy_same_bytes']['pct_of_copy']:5.1f}%"
        f"  [{len(plans)} candidates, {failed} failed, compiled {compiled_s:.0f} s,"
        f" shape {row['sweep_s']:.0f} s]"
    )
    return row


def torch_gating(x):
    p = torch.softmax(x.float(), dim=-1)
    w, i = torch.topk(p, 2, dim=-1)
    return w / w.sum(dim=-1, keepdim=True), i


# ---- the shipped file --------------------------------------------------------------------------


def shipped(files: dict, copy, shapes) -> list[dict]:
    """Each file's fast_top2_gating as shipped (autotuned), timed side by side, at M = 1M and at
    M = 4096; with correctness against the exact reference at a ragged M."""
    return [
        shipped_shape(files, copy, E, dtype, M)
        for E, dtype in shapes
        for M in ((64,) if DRY else (M_BENCH, 4096))
    ]


def shipped_shape(files: dict, copy, E, dtype, M) -> dict:
    x = torch.randn(M, E, device=DEVICE, dtype=getattr(torch, dtype))
    moved = M * E * x.element_size() + M * 16
    row = {"E": E, "dtype": dtype, "M": M, "mb_moved": moved / 1e6}
    chk = special_logits(M - 48 if not DRY else 37, E, dtype, seed=1000 + E)
    ref = exact_top2(chk)
    fns, calls = {}, {}
    outs = outputs(M)
    for name, mod in files.items():
        fast, kernel = mod.fast_top2_gating, mod.moe_top2_gating_fast_kernel
        row[f"{name}_check"] = check(fast(chk), ref)
        if M >= 2048:
            row[f"{name}_oracle"] = oracle_check(fast, E, dtype)
        fast(x)
        row[f"{name}_config"] = best_config(kernel)
        # Timed as the grader and the bench time it: the launch, into outputs made once.
        fns[name] = functools.partial(host.launch_fast_gating, kernel, x, out=outs)
        calls[name] = functools.partial(fast, x)  # as a caller runs it, for the host's time
    if not DRY:
        fns["torch"] = lambda: torch_gating(x)
    src = torch.empty(moved // 8, dtype=torch.float32, device=DEVICE)
    dst = torch.empty_like(src)
    fns["copy_same_bytes"] = lambda: dst.copy_(src)
    for name, t in interleaved(fns).items():
        row[name] = {
            **t,
            "tbps": moved / t["ms"] / 1e9,
            "pct_of_copy": 100 * moved / t["ms"] / 1e9 / copy["tbps"],
        }
    if M <= 4096 and not DRY:
        row["decode"] = decode_figures({**calls, "torch": fns["torch"]})
    log(
        f"shipped M={M:<7} E={E:<3} {dtype:<8} "
        + "  ".join(
            f"{n} {row[n]['ms'] * 1e3:7.1f} us {row[n]['pct_of_copy']:5.1f}% ({100 * row[n]['spread']:.1f}%)"
            for n in fns
        )
        + "  ok="
        + ",".join(str(row[f"{n}_check"]["ok"]) for n in files)
        + "".join(
            f"\n   {n} vs oracle: {row[n + '_oracle']}" for n in files if n + "_oracle" in row
        )
    )
    if "decode" in row:
        log(
            "   decode: "
            + "  ".join(
                f"{n} host {d['host_us_per_call']:.1f} us/call"
                + (f", graph {d['graph_us_per_call']:.1f}" if "graph_us_per_call" in d else "")
                for n, d in row["decode"].items()
            )
        )
    return row


def decode_figures(fns: dict) -> dict:
    """Launch-bound sizes: host microseconds per call (1000 calls, then one synchronize) and the
    GPU's per call in a CUDA graph of 100 calls."""
    found = {}
    for name, fn in fns.items():
        fn()
        sync()
        walls = []
        for _ in range(3):
            start = time.perf_counter()
            for _ in range(1000):
                fn()
            sync()
            walls.append((time.perf_counter() - start) / 1000 * 1e6)
        entry = {
            "host_us_per_call": statistics.median(walls),
            "host_spread": (max(walls) - min(walls)) / statistics.median(walls),
        }
        try:
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                fn()
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for _ in range(100):
                    fn()
            graph.replay()
            sync()
            ms = [
                triton.testing.do_bench(graph.replay, warmup=10, rep=50, return_mode="median")
                for _ in range(3)
            ]
            entry["graph_us_per_call"] = statistics.median(ms) * 1e3 / 100
        except Exception as e:  # noqa: BLE001
            entry["graph_error"] = repr(e)[:200]
        found[name] = entry
    return found


def main(argv=None) -> int:
    global DRY, DEVICE, M_BENCH
    p = argparse.ArgumentParser()
    p.add_argument("--sweep", action="store_true")
    p.add_argument("--quick", action="store_true", help="a quarter of the candidates")
    p.add_argument("--before", help="another version of the file, timed beside")
    p.add_argument("--file", default=str(catalogue.SOLUTIONS / catalogue.find("05").filename))
    p.add_argument("--experts", default=",".join(map(str, EXPERTS)))
    p.add_argument("--out", default="reports")
    p.add_argument("--dry-run", action="store_true")
    p.add_argument("--deadline", type=float, default=1e9, help="seconds: begin no shape after")
    args = p.parse_args(argv)
    DRY = args.dry_run
    DEVICE = runtime.DEVICE if not DRY else ("cuda" if runtime.DEVICE == "cuda" else "cpu")
    if runtime.INTERPRETER and not DRY:
        print("needs a CUDA GPU (or --dry-run)", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    experts = [int(e) for e in args.experts.split(",")]
    if args.sweep:
        experts = [e for e in SWEEP_ORDER if e in experts] + [
            e for e in experts if e not in SWEEP_ORDER
        ]
        shapes = [(E, dt) for E in experts for dt in DTYPES]
    else:
        shapes = [(E, dt) for dt in DTYPES for E in experts]
    report = {
        "gpu": "interpreter" if DRY else torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "method": "median of 5 interleaved rounds of do_bench(warmup=10, rep=50, median), "
        "L2 flushed; spread = (max - min) / median",
    }
    log(report)
    report["copy"] = copy = copy_tbps()
    log(f"copy bandwidth {copy['tbps']:.2f} TB/s (spread {100 * copy['spread']:.1f}%)")
    text = Path(args.file).read_text()
    files = {"after": catalogue.load_text(text, args.file, "gating_shipped")}
    if args.before:
        files = {
            "before": catalogue.load_text(
                Path(args.before).read_text(), args.before, "gating_before"
            ),
            **files,
        }
    try:
        if args.sweep:
            before = files.get("before", files["after"])
            report["sweep"] = sweep(
                text, before, copy, shapes, out, args.quick, time.monotonic() + args.deadline
            )
        else:
            report["shipped"] = shipped(files, copy, shapes)
    except Exception:
        traceback.print_exc()
        report["error"] = traceback.format_exc()[-3000:]
    (out / "gating_sweep.json").write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
