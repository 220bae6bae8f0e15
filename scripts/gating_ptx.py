"""Exercise 05 compiled for an H200 (sm_90) on this machine, no GPU needed: the global loads in
its PTX for each expert count and logit type, to see how wide they are and how many copies of
the routing a kernel holds; and its SASS instructions, per thread and per row of logits (the
kernel has no loop, so each thread runs each instruction at most once: where a kernel holds two
copies of the routing, one of them runs), and its barriers.

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
from kata.authoring import sass  # noqa: E402

# (E, row stride in logits), each compiled for fp32 and bf16 logits
SHAPES = (
    (8, 8),
    (16, 16),
    (60, 60),
    (60, 61),
    (64, 64),
    (80, 80),
    (96, 96),
    (128, 128),
    (160, 160),
    (256, 256),
)


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
            compiled = triton.compile(src, target=target, options=options.__dict__)
            loads = re.findall(r"ld\.global[.\w]*", compiled.asm["ptx"])
            kinds = ", ".join(f"{loads.count(k)} {k}" for k in sorted(set(loads)))
            sass, barriers = sass_instructions(compiled.asm["cubin"])
            per_row = sass * warps * 32 / block_m
            print(
                f"{str(dtype)[6:]:9} E={E:<4} stride={stride:<4} {kinds}; "
                f"SASS {sass} per thread, {per_row:.0f} thread-instructions per row, "
                f"{barriers} barriers"
            )
    return 0


def sass_instructions(cubin: bytes) -> tuple[int, int]:
    """The instructions in a cubin's SASS, and how many of them are barriers (``BAR``): the
    kernel has no loop, so a barrier is a round trip through shared memory, as when Triton
    regroups a result before storing it."""
    ops = re.findall(
        r"^\s+/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z]\w*)", sass.disassemble(cubin), flags=re.M
    )
    return len(ops), ops.count("BAR")


if __name__ == "__main__":
    sys.exit(main())
