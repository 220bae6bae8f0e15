"""What every kind's grader home shares: the judge's base (``Judge``, ``Blocked``), the judge
of an ``out`` against the oracle and the twin judge of the notes on given code, the errors and
caps of a failure figure, the seeded random inputs, and the words a case's boundary class is
told in. Below the kinds: it imports none of them, nor the judge or specs stages.
"""

from __future__ import annotations

import math

import numpy as np

from grader.kinds import compare
from grader.model import Case, Output
from kata.kinds.base import Interface

MAX_BINS = 64  # query-row groups in an attention error profile
MAX_TOKENS = 32  # tokens in a gating grid


def num(x: float) -> float | None:
    """A finite float with 3 significant digits (JSON has no NaN or inf), else None."""
    x = float(x)
    return float(f"{x:.3g}") if math.isfinite(x) else None


def error(got: np.ndarray, want: np.ndarray, unwritten: np.ndarray | None = None) -> np.ndarray:
    """|got - want| in float64; NaN, inf and unwritten elements become inf."""
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(np.asarray(got, np.float64) - np.asarray(want, np.float64))
    err[~np.isfinite(err)] = np.inf
    if unwritten is not None:
        err[np.asarray(unwritten, bool).reshape(err.shape)] = np.inf
    return err


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def f32(**arrays) -> dict[str, np.ndarray]:
    return {name: np.asarray(a, np.float32) for name, a in arrays.items()}


def round_to(values: np.ndarray, dtype: str) -> np.ndarray:
    """float32 values exactly representable in float16 / bfloat16, so that the device's cast
    loses nothing and the float64 oracle sees the very numbers the kernel reads."""
    x = np.asarray(values, np.float32)
    if dtype == "float16":
        return x.astype(np.float16).astype(np.float32)
    if dtype == "bfloat16":  # round to nearest even on the upper 16 bits
        bits = x.view(np.uint32).astype(np.uint64)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
        return bits.astype(np.uint32).view(np.float32)
    return x


# ---- judges ------------------------------------------------------------------------------------


class Blocked(Exception):
    """This check cannot be judged until another TODO works; it is not paid, and not failed."""


class Judge:
    keys: tuple[str, ...] = ()
    # Whether the output's distance from the right answer is a figure of the check (a twin
    # judge compares with the kernel's own output, not with the right answer).
    measured = True

    def __init__(self, interface: Interface):
        self.interface = interface

    def tol(self, key: str, case: Case) -> compare.Tol:
        return self.interface.tolerance(key, case.dtype)

    def expected(self, case: Case, got: Output) -> Output:
        """The right output, as far as this judge is concerned (for proofs and evidence)."""
        full = self.interface.expected(case)
        return {k: full[k] for k in self.keys}

    def evidence(self, case: Case, got: Output) -> str | None:
        raise NotImplementedError

    def judge(self, case: Case, got: Output, submission) -> str | None:
        """The evidence against ``got``, the kernel's output on ``case`` (``submission`` gives
        its outputs on other cases)."""
        return self.evidence(case, got)


class OutputJudge(Judge):
    """Every output close to the oracle; (B, H, S, D) outputs are compared as rows of D."""

    keys = ("out",)

    def evidence(self, case, got):
        want = self.expected(case, got)["out"]
        d = want.shape[-1]
        unwritten = got.get("out.unwritten")
        return compare.matrix_evidence(
            got["out"].reshape(-1, d),
            want.reshape(-1, d),
            self.tol("out", case),
            None if unwritten is None else unwritten.reshape(-1, d),
        )


class TwinJudge(Judge):
    """For notes on given code (strides, dtypes): the kernel's outputs on a case must equal its
    own outputs on the case's twin, the same numbers in a plain layout. Whether those are right
    is the TODO checks' business, so a note never charges a TODO."""

    measured = False

    def judge(self, case, got, submission):
        return self.evidence(case, got, submission.output(case.twin))

    def evidence(self, case, got, twin: Output | None = None):
        for key in self.interface.outputs:
            if self.interface.exact(key):
                bad = np.flatnonzero(got[key] != twin[key])
                if bad.size:
                    t = int(bad[0])
                    return (
                        f"{key} differs from the kernel's own answer on plain inputs for "
                        f"{bad.size} tokens; first at token {t}: {got[key][t]} vs "
                        f"{twin[key][t]}"
                    )
                continue
            want = twin[key].reshape(len(twin[key]), -1).astype(np.float64)
            problem = compare.matrix_evidence(
                got[key].reshape(want.shape), want, self.tol(key, case)
            )
            if problem:
                return f"not what the kernel gives on plain inputs: {problem}"
        return None


# ---- boundary classes, in words ---------------------------------------------------------------

NUMBERS = ("no", "a", "two", "three", "four", "five", "six", "seven", "eight")


def residue(n: int, tile: int) -> int:
    """``n`` modulo ``tile``, written -1 when one short of a whole number of tiles."""
    r = n % tile
    return -1 if r == tile - 1 else r


def word(count: int) -> str:
    return NUMBERS[count] if count < len(NUMBERS) else str(count)


def tiles_of(count: int, size: str) -> str:
    return f"{word(count)} {size}" + ("s" if count > 1 else "")


def against(n: int, tile: int, unit: str, group: str) -> str:
    """``n`` units against tiles of ``tile``, in words: "one key short of two 16-key tiles"."""
    k, r = divmod(n, tile)
    size = f"{tile}-{unit} {group}"
    if r == 0:
        return f"exactly {tiles_of(k, size)}"
    if r == 1:
        return f"one {unit} past {tiles_of(k, size)}" if k else f"one {unit}"
    if r == tile - 1:
        return f"one {unit} short of {tiles_of(k + 1, size)}"
    return f"{word(r)} {unit}s past {tiles_of(k, size)}"
