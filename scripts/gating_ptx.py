"""Exercise 05 compiled for an H200 (sm_90) on this machine, no GPU needed: the global loads in
its PTX for each expert count and logit type, to see how wide they are and how many copies of
the routing a kernel holds.

    KATA_DEVICE=compiler python scripts/gating_ptx.py [FILE]
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource, make_backend  # noqa: E402
from triton.runtime.jit import create_function_from_signature  # noqa: E402

from kata import catalogue  # noqa: E402

SHAPES = ((8, 8), (60, 60), (60, 61), (64, 64), (128, 128), (160, 160), (256, 256))  # (E, stride)


def main() -> int:
    path = Path(
        sys.argv[1] if len(sys.argv) > 1 else catalogue.SOLUTIONS / catalogue.find("05").filename
    )
    spec = importlib.util.spec_from_file_location("gating05", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    inner = module.moe_top2_gating_fast_kernel.fn
    if not hasattr(inner, "signature"):
        sys.exit("run with KATA_DEVICE=compiler: the interpreter's kernels cannot be compiled")
    target = GPUTarget("cuda", 90, 32)
    backend = make_backend(target)
    binder = create_function_from_signature(inner.signature, inner.params, backend)
    for dtype in (torch.float32, torch.bfloat16):
        for E, stride in SHAPES:
            logits = torch.empty(4, stride, dtype=dtype)
            outs = [torch.empty(4), torch.empty(4)] + [torch.empty(4, dtype=torch.int32)] * 2
            block_e = triton.next_power_of_2(E)
            block_m, warps = module._layout(E, block_e, logits.element_size() * 8)
            kwargs = {"BLOCK_E": block_e, "BLOCK_M": block_m, "num_warps": warps, "debug": False}
            bound, specialization, options = binder(logits, *outs, 1 << 20, E, stride, **kwargs)
            options, signature, constexprs, attrs = inner._pack_args(
                backend, kwargs, bound, specialization, options
            )
            src = ASTSource(inner, signature, constexprs, attrs)
            ptx = triton.compile(src, target=target, options=options.__dict__).asm["ptx"]
            loads = re.findall(r"ld\.global[.\w]*", ptx)
            kinds = ", ".join(f"{loads.count(k)} {k}" for k in sorted(set(loads)))
            print(f"{str(dtype)[6:]:9} E={E:<4} stride={stride:<4} {kinds}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
