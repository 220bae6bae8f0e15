"""Experiment (issue 29, item 3): 07 with some of its module constants changed, beside 07.

07's schedule has a few knobs that are module constants read by its kernels (``STAGES``, the
depth of the K/V ring; ``Q_BUFFERS``, query tiles in flight). This script imports a second copy
of 07 under another module name, sets the constants asked for (Triton hashes a constexpr
global's value into the kernel's cache key, so the copy compiles apart), and then:

* on a Hopper GPU, runs fa3_persistent.py's checks of 07 on the copy (ragged S on 1 and 2
  programs a head, the strides a rank-4 descriptor cannot take as given, the timed shapes on
  07's count; into NaN, against SDPA in fp32 with 04's tolerance and bit for bit against 07 on
  its tile grid and through its wrapper); if every check passes, times the copy's wrapper beside
  07's and SDPA's cuDNN backend (bf16, B * S = 16k, H * D = 2048, S = 1024 and 4096);
* with --compile-only, compiles both for sm_90 on the CPU (registers, spills, shared memory).

    python3 scripts/fa3_knobs.py --set STAGES=3 --d 64 --out DIR
    python3 scripts/fa3_knobs.py --set STAGES=3 --d 64 --compile-only
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from kata import runtime  # noqa: E402

# Before any kernel is defined, as in fa3_persistent.py (whose helpers this script uses).
runtime.configure("compiler" if "--compile-only" in sys.argv else None)

import fa3_persistent as persistent  # noqa: E402
import torch  # noqa: E402
from triton.experimental.gluon import language as gl  # noqa: E402

from kata import catalogue  # noqa: E402
from kata.authoring import bench  # noqa: E402

FA3 = persistent.FA3


def variant(knobs: dict[str, int]):
    """A second copy of 07, its own module, with ``knobs`` set before any kernel compiles."""
    module = catalogue.load_file(FA3.__file__, name="fa3_knobs_variant")
    for name, value in knobs.items():
        if not isinstance(getattr(module, name, None), gl.constexpr):
            sys.exit(f"fa3_knobs: 07 has no constexpr constant {name}")
        setattr(module, name, gl.constexpr(value))
    return module


def time_rows(var, dims) -> list[dict]:
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    rows = []
    for D in dims:
        for causal in (False, True):
            for S in persistent.TIMED_S:
                B, H = 16384 // S, 2048 // D
                q, k, v = (
                    torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in "qkv"
                )

                def cudnn(q=q, k=k, v=v, causal=causal):
                    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                        return sdpa(q, k, v, is_causal=causal)

                fns = {
                    "fa3": functools.partial(FA3.fa3_attention, q, k, v, causal=causal),
                    "variant": functools.partial(var.fa3_attention, q, k, v, causal=causal),
                    "sdpa_cudnn": cudnn,
                }
                row = {"D": D, "causal": causal, "B": B, "H": H, "S": S}
                for name, t in bench.time_ms(fns).items():
                    row[f"{name}_ms"], row[f"{name}_spread"] = t["ms"], t["spread"]
                row["variant_vs_fa3"] = row["fa3_ms"] / row["variant_ms"]
                row["variant_vs_cudnn"] = row["sdpa_cudnn_ms"] / row["variant_ms"]
                row["fa3_vs_cudnn"] = row["sdpa_cudnn_ms"] / row["fa3_ms"]
                rows.append(row)
                print(
                    f"D={D} causal={causal} S={S}: variant / 07 {row['variant_vs_fa3']:.3f}x, "
                    f"variant / cuDNN {row['variant_vs_cudnn']:.3f}x, 07 / cuDNN "
                    f"{row['fa3_vs_cudnn']:.3f}x (spreads {row['variant_spread']:.1%}, "
                    f"{row['fa3_spread']:.1%}, {row['sdpa_cudnn_spread']:.1%})",
                    flush=True,
                )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", action="append", default=[], metavar="NAME=INT", required=True)
    parser.add_argument("--d", type=int, action="append", choices=(64, 128), help="head dims")
    parser.add_argument("--out", type=Path, help="folder for fa3_knobs.json")
    parser.add_argument("--compile-only", action="store_true", help="sm_90 on the CPU")
    args = parser.parse_args(argv)
    knobs = {}
    for item in args.set:
        name, _, value = item.partition("=")
        if not value.lstrip("-").isdigit():
            parser.error(f"--set {item}: expected NAME=INT")
        knobs[name] = int(value)
    dims = tuple(args.d or (64, 128))
    var = variant(knobs)
    result: dict = {"knobs": knobs, "versions": runtime.versions()}
    ok = True
    kernels = {"variant": var.attention_fwd_kernel}
    if args.compile_only:
        result["compiled"] = persistent.compile_only(
            {"fa3": FA3.attention_fwd_kernel, **kernels}, dims
        )
    else:
        if runtime.BACKEND != "cuda" or torch.cuda.get_device_capability()[0] != 9:
            sys.exit("fa3_knobs: needs a Hopper GPU (sm_90). Without one: --compile-only")
        result["device"] = torch.cuda.get_device_name()
        result["checks"] = persistent.check(kernels, dims)
        ok = all(persistent.passed(r) for r in result["checks"])
        if ok:
            result["timings"] = time_rows(var, dims)
        else:
            print("fa3_knobs: a check failed, so nothing was timed")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "fa3_knobs.json").write_text(json.dumps(result, indent=1) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
