"""Nsight Compute profiles of 04, 07 and SDPA's default kernel at the bench's attention shapes
where issue 29's targets are missed (04 at D = 128, 07 at S = 1024), for a Hopper GPU with ncu.

    python scripts/attention_ncu.py --out DIR            # every case, one ncu process each
    python scripts/attention_ncu.py --out DIR --case 04-D128-S4096
    python scripts/attention_ncu.py launch 04 4096 128 [--causal]   # what ncu runs

Each case warms its kernel up (compile, autotune), then profiles one more call between
cudaProfilerStart and cudaProfilerStop (``--profile-from-start off``), with the clocks left
alone (``--clock-control none``). Writes DIR/<case>.csv (ncu's details page) and
DIR/attention_ncu.json: per case and kernel, the figures that say where the time goes (duration,
the SM and memory throughput, the tensor pipes, occupancy, registers, the warps' stall reasons).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SECTIONS = (
    "SpeedOfLight",
    "ComputeWorkloadAnalysis",
    "Occupancy",
    "LaunchStats",
    "WarpStateStats",
    "SchedulerStats",
)
# The rows of ncu's details page kept in the summary (substrings of "Metric Name").
KEPT = (
    "Duration",
    "Compute (SM) Throughput",
    "Memory Throughput",
    "Issue Slots Busy",
    "Executed Ipc Active",
    "Achieved Occupancy",
    "Theoretical Occupancy",
    "Registers Per Thread",
    "Shared Memory Configuration Size",
    "Dynamic Shared Memory Per Block",
    "Warp Cycles Per Issued Instruction",
    "No Eligible",
    "issue_stalled",  # the --metrics below: cycles per issued instruction, by stall reason
)
# What the details page's WarpStateStats section charts but does not print: each stall reason's
# share of the cycles between two issued instructions of a warp.
STALLS = r"regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio"
# (name, exercise or "sdpa", S, D, causal): the misses of issue 29 and a shape that meets it.
CASES = (
    dict(name="04-D128-S4096", wrapper="04", S=4096, D=128, causal=False),
    dict(name="04-D128-S4096-causal", wrapper="04", S=4096, D=128, causal=True),
    dict(name="sdpa-D128-S4096", wrapper="sdpa", S=4096, D=128, causal=False),
    dict(name="04-D64-S4096", wrapper="04", S=4096, D=64, causal=False),
    dict(name="07-D64-S1024-causal", wrapper="07", S=1024, D=64, causal=True),
    dict(name="sdpa-D64-S1024-causal", wrapper="sdpa", S=1024, D=64, causal=True),
    dict(name="07-D128-S1024", wrapper="07", S=1024, D=128, causal=False),
    dict(name="sdpa-D128-S1024", wrapper="sdpa", S=1024, D=128, causal=False),
    dict(name="07-D128-S16384", wrapper="07", S=16384, D=128, causal=False),
)


def launch(wrapper: str, S: int, D: int, causal: bool) -> None:
    """Warm up, then one profiled call, at the bench's shape (B * S = 16k, H * D = 2048)."""
    import torch

    from kata.authoring import bench

    B, H = 16384 // S, 2048 // D
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in "qkv")
    if wrapper == "sdpa":
        fn = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)  # noqa: E731
    else:
        module = bench.load(wrapper)
        call = module.fast_attention if wrapper == "04" else module.fa3_attention
        fn = lambda: call(q, k, v, causal=causal)  # noqa: E731
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    fn()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()


def summary(text: str) -> list[dict]:
    """The kept rows of ncu's CSV details page, one dict per kernel launch."""
    lines = text[text.find('"ID"') :] if '"ID"' in text else ""
    kernels: dict = {}
    for row in csv.DictReader(io.StringIO(lines)):
        name = row.get("Metric Name", "")
        if not any(k in name for k in KEPT):
            continue
        kernel = kernels.setdefault(
            row["ID"], {"kernel": row.get("Kernel Name", "")[:120], "metrics": {}}
        )
        unit = row.get("Metric Unit", "")
        kernel["metrics"][f"{name} ({unit})" if unit else name] = row.get("Metric Value", "")
    return list(kernels.values())


def profile(case: dict, out: Path) -> dict:
    command = ["ncu", "--clock-control", "none", "--profile-from-start", "off", "--csv"]
    command += ["--page", "details"] + [a for s in SECTIONS for a in ("--section", s)]
    command += ["--metrics", STALLS]
    command += [sys.executable, __file__, "launch", case["wrapper"], str(case["S"]), str(case["D"])]
    command += ["--causal"] if case["causal"] else []
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=os.environ)
    (out / f"{case['name']}.csv").write_text(done.stdout)
    found = {**case, "returncode": done.returncode, "kernels": summary(done.stdout)}
    if done.returncode or not found["kernels"]:
        found["error"] = (done.stderr or done.stdout)[-2000:]
    return found


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["launch"]:
        p = argparse.ArgumentParser(prog="attention_ncu.py launch")
        p.add_argument("wrapper", choices=("04", "07", "sdpa"))
        p.add_argument("S", type=int)
        p.add_argument("D", type=int)
        p.add_argument("--causal", action="store_true")
        a = p.parse_args(argv[1:])
        launch(a.wrapper, a.S, a.D, a.causal)
        return 0
    p = argparse.ArgumentParser(prog="attention_ncu.py")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--case", action="append", choices=[c["name"] for c in CASES])
    a = p.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    results = []
    for case in CASES:
        if a.case and case["name"] not in a.case:
            continue
        results.append(profile(case, a.out))
        kernels = results[-1]["kernels"]
        print(case["name"], results[-1]["returncode"], [k["kernel"][:60] for k in kernels])
        (a.out / "attention_ncu.json").write_text(json.dumps(results, indent=2))
    return 0 if all(not r.get("error") for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
