"""The chapter's worked examples, run by each kernel file when it is executed as a script.

Seeds and draw order follow the chapter exactly, so the numbers match the book. Every example
prints what it compared and returns 0 when the kernel behaves as the chapter says, 1 otherwise.

Each comparison is one line, ``ok`` or ``!!``, then its label, ``max abs diff`` to three
significant digits and the ``allclose`` verdict. Where the chapter states the figure, the next
line quotes it, so that the two can be read side by side. A contrast, a wrong answer shown to
be wrong on purpose, is marked ``--`` and ends ``False, as expected`` (``contrast``).

Three digits, not the chapter's full ``.item()``: the same code prints different low digits on
different CPUs (numpy's OpenBLAS picks a kernel per CPU, and the interpreter's ``tl.dot`` is
numpy's), from about the seventh significant digit on. An error of order 1 (a wrong kernel) is
the same to three digits everywhere; an error of order 1e-07 is float noise, whose digits mean
nothing but their order of magnitude.
"""

from __future__ import annotations

import numpy as np
import torch

from kata import kinds, oracles, runtime

LABEL_WIDTH = 38


def _chapter(says: str | None) -> None:
    if says:
        print(f"     the chapter: {says}")


def _compare(got, want, atol: float) -> tuple[float, bool]:
    """The largest difference and whether ``got`` is allclose to ``want`` (NaN never is)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    diff = float(np.max(np.abs(got - want))) if got.size else 0.0
    return diff, bool(np.allclose(got, want, atol=atol, rtol=0)) and not np.isnan(got).any()


def _line(mark: str, label: str, diff: float, atol: float, end: str) -> None:
    print(
        f"  {mark}{label:<{LABEL_WIDTH}} max abs diff {diff:<10.3g} allclose(atol={atol:g}): {end}"
    )


def verdict(label: str, got, want, atol: float, chapter: str | None = None) -> bool:
    """Print one comparison of a worked example (``ok`` or ``!!``, the largest difference,
    allclose) and return whether it was close. A kernel file with a worked example of its own
    (06) prints its comparisons with it, like the ones here."""
    diff, close = _compare(got, want, atol)
    _line("ok " if close else "!! ", label, diff, atol, str(close))
    _chapter(chapter)
    return close


def contrast(label: str, got, want, atol: float, chapter: str | None = None) -> bool:
    """Print a comparison that must come out *not* close: a wrong answer to the task, shown for
    contrast (``--``, then ``allclose(...): False, as expected``). If it is close after all, the
    example no longer shows what it says: the line is marked ``!!`` and says so, and the result
    is False."""
    diff, close = _compare(got, want, atol)
    end = "True, NOT EXPECTED: this contrast should differ" if close else "False, as expected"
    _line("!! " if close else "-- ", label, diff, atol, end)
    _chapter(chapter)
    return not close


def draw_qkv(M: int, N: int, D: int):
    torch.manual_seed(0)
    q, k, v = torch.randn(M, D), torch.randn(N, D), torch.randn(N, D)  # the chapter's order
    return q, k, v, [x.to(runtime.DEVICE) for x in (q, k, v)]


def row(label: str, values, note: str = "") -> None:
    """One row of a small table: its first four values, as the docs quote them."""
    shown = " ".join(f"{float(x):8.4f}" for x in values[:4])
    print(f"    {label:<26}{shown}  ...{note}")


def header(title: str) -> None:
    print(f"{title}  [{runtime.describe()}]")


def gating_example(moe_top2_gating) -> int:
    """21.3: 6 tokens x 8 experts; indices vs torch.topk, weights vs the renormalized oracle."""
    header("21.3 MoE top-2 gating: 6 tokens x 8 experts, seed 0")
    torch.manual_seed(0)
    logits = torch.randn(6, 8)
    w0, w1, i0, i1 = (t.cpu() for t in moe_top2_gating(logits.to(runtime.DEVICE)))
    probs = torch.softmax(logits.double(), dim=-1)
    top_p, top_i = torch.topk(probs, 2, dim=-1)

    # The raw sums as the chapter computes them: torch's float32 softmax and topk.
    raw = torch.topk(torch.softmax(logits, dim=-1), 2, dim=-1).values.sum(dim=-1)
    print("  token  kernel idx0 idx1   topk idx0 idx1   raw top-2 sum   w0 + w1")
    for t in range(6):
        print(
            f"  {t:>5}  {int(i0[t]):>11} {int(i1[t]):>4}   {int(top_i[t, 0]):>9} "
            f"{int(top_i[t, 1]):>4}   {float(raw[t]):>13.4f}   {float(w0[t] + w1[t]):.6f}"
        )
    print(
        f"  raw top-2 sums range {float(raw.min()):.2f}..{float(raw.max()):.2f}, "
        f"mean {float(raw.mean()):.4f}: a different shortfall for every token"
    )
    _chapter("from about 0.36 to 0.72, mean about 0.56")

    same_idx = torch.equal(i0.long(), top_i[:, 0]) and torch.equal(i1.long(), top_i[:, 1])
    print(f"  {'ok ' if same_idx else '!! '}{'indices equal torch.topk':<{LABEL_WIDTH}} {same_idx}")
    ref = top_p / top_p.sum(dim=-1, keepdim=True)
    ok = same_idx
    ok &= verdict("w0 vs renormalized top-1 probability", w0, ref[:, 0], 1e-5)
    ok &= verdict("w1 vs renormalized top-2 probability", w1, ref[:, 1], 1e-5)
    ok &= verdict("w0 + w1 vs 1", w0 + w1, np.ones(6), 1e-5)
    return 0 if ok else 1


def fast_gating_example(fast_top2_gating) -> int:
    """Exercise 05: 1000 tokens x 64 experts against the float64 oracle."""
    header("05 fast top-2 gating: 1000 tokens x 64 experts, seed 0")
    torch.manual_seed(0)
    logits = torch.randn(1000, 64)
    w0, w1, i0, i1 = (t.cpu() for t in fast_top2_gating(logits.to(runtime.DEVICE)))
    r0, r1, j0, j1 = oracles.top2_gating(logits)
    same = bool((i0.numpy() == j0).all() and (i1.numpy() == j1).all())
    print(f"  {'ok ' if same else '!! '}{'indices equal the oracle':<{LABEL_WIDTH}} {same}")
    ok = same
    ok &= verdict("w0 vs renormalized top-1 probability", w0, r0, 1e-5)
    ok &= verdict("w1 vs renormalized top-2 probability", w1, r1, 1e-5)
    if not runtime.INTERPRETER:
        print("  timings against torch: `nox -s bench`")
    return 0 if ok else 1


def __getattr__(name: str):
    """A worked example that lives with its kind (``kata/kinds/<kind>.py``): the kernel files
    call every example through this module."""
    if name.endswith("_example"):
        for module in kinds.modules():
            if name in vars(module):
                return vars(module)[name]
    raise AttributeError(f"no worked example {name!r}")
