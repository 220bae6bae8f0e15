"""The kata's exercises, in order: file names, the kernel each file must define, its TODOs."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "solutions"
EXERCISES = ROOT / "exercises"

# Both attention kernels take 2-D (rows, head_dim) tensors; both gating outputs are per token.
ATTENTION_PARAMS = (
    "q_ptr", "k_ptr", "v_ptr", "out_ptr", "M", "N", "D",
    "stride_qm", "stride_qd", "stride_kn", "stride_kd", "stride_vn", "stride_vd",
    "stride_om", "stride_od", "scale", "BLOCK_M", "BLOCK_N", "BLOCK_D",
)  # fmt: skip
GATING_PARAMS = (
    "logits_ptr", "weight0_ptr", "weight1_ptr", "idx0_ptr", "idx1_ptr", "M", "E", "stride_m",
    "BLOCK_E",
)  # fmt: skip


FAST_ATTENTION_PARAMS = (
    "q_ptr", "k_ptr", "v_ptr", "out_ptr",
    "stride_qb", "stride_qh", "stride_qs", "stride_kb", "stride_kh", "stride_ks",
    "stride_vb", "stride_vh", "stride_vs", "stride_ob", "stride_oh", "stride_os",
    "H", "S", "sm_scale", "HEAD_DIM", "CAUSAL", "BLOCK_M", "BLOCK_N",
)  # fmt: skip
FAST_GATING_PARAMS = GATING_PARAMS + ("BLOCK_M",)


@dataclass(frozen=True)
class Exercise:
    stem: str  # file name without .py; also the exercise's id in reports
    kernel: str  # the @triton.jit function a submission must define
    params: tuple[str, ...]  # the kernel's parameters, in order (fixed by the chapter)
    host: str  # the host function the file defines for its worked example
    todos: tuple[str, ...]  # TODO ids, in file order
    track: str = "core"  # "core" (the chapter, 100 points) or "performance" (04, 05)

    @property
    def number(self) -> str:
        return self.stem[:2]

    @property
    def filename(self) -> str:
        return f"{self.stem}.py"


EXERCISE_LIST = (
    Exercise(
        "01_flash_attention_core", "flash_attn_kernel", ATTENTION_PARAMS,
        "flash_attention", ("rescale-acc",),
    ),
    Exercise(
        "02_causal_flash_attention", "flash_attn_causal_kernel", ATTENTION_PARAMS,
        "causal_flash_attention", ("causal-mask",),
    ),
    Exercise(
        "03_moe_gating", "moe_top2_gating_kernel", GATING_PARAMS,
        "moe_top2_gating", ("top2-mask", "renormalize"),
    ),
)  # fmt: skip


# The performance track: graded only when asked for (`nox -s grade -- 04 05` or
# `--track performance`); its correctness points are separate from the chapter's 100.
PERFORMANCE_LIST = (
    Exercise(
        "04_fast_attention", "attention_fwd_kernel", FAST_ATTENTION_PARAMS, "fast_attention",
        ("exp2-scale", "causal-stages"), "performance",
    ),
    Exercise(
        "05_fast_gating", "moe_top2_gating_fast_kernel", FAST_GATING_PARAMS, "fast_top2_gating",
        ("rows-per-program", "top2-mask"), "performance",
    ),
)  # fmt: skip
ALL_EXERCISES = EXERCISE_LIST + PERFORMANCE_LIST
TRACKS = {"core": EXERCISE_LIST, "performance": PERFORMANCE_LIST, "all": ALL_EXERCISES}


def find(name: str) -> Exercise:
    """An exercise by number (``2``, ``02``) or file stem (``02_causal_flash_attention``)."""
    key = name.strip().removesuffix(".py")
    for ex in ALL_EXERCISES:
        if key in (ex.stem, ex.number) or (key.isdigit() and int(key) == int(ex.number)):
            return ex
    known = ", ".join(ex.stem for ex in ALL_EXERCISES)
    raise KeyError(f"no exercise {name!r}; known: {known}")


def find_or_report(name: str) -> Exercise | None:
    """``find`` for command lines: None (after saying why on stderr) for an unknown name."""
    try:
        return find(name)
    except KeyError as exc:
        print(exc.args[0], file=sys.stderr)
        return None


def load_file(path: Path | str) -> ModuleType:
    """Import a kernel file by path (its name starts with a digit, so `import` cannot)."""
    path = Path(path).resolve()
    name = f"kata_submission_{path.parent.name}_{path.stem}".replace("-", "_")
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # @triton.jit looks its function's module up while compiling
    spec.loader.exec_module(module)
    return module
