"""``nox -s figures``: the docs' figures, drawn from the reference kernels' own outputs.

* causal_tiles.png: which (query, key) pairs the causal kernel lets through, read off its output
  with v = identity (then out = the attention matrix), over the tile grid coloured by kind.
* raw_top2_sums.png: the chapter's six tokens, p[top-1] + p[top-2] for the experts the gating
  kernel chose: what the weights would sum to without renormalization.
* running_max.png: for one query row of the chapter's 21.1 data, the running maximum across key
  blocks and the rescale it causes (1 - alpha: zero where nothing happens), with the kernel's
  output checked against the same loop.
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from kata import catalogue, oracles, runtime  # noqa: E402

OUT = catalogue.ROOT / "docs" / "figures"


def _solution(number: str):
    return catalogue.load_file(catalogue.SOLUTIONS / catalogue.find(number).filename)


def causal_tiles(M: int = 40, N: int = 56, block_m: int = 16, block_n: int = 16) -> Path:
    causal = _solution("02").causal_flash_attention
    q = torch.randn(M, N, generator=torch.Generator().manual_seed(0)) * 0.1
    k = torch.randn(N, N, generator=torch.Generator().manual_seed(1)) * 0.1
    v = torch.eye(N)  # out = attention matrix (D = N)
    dev = [x.to(runtime.DEVICE) for x in (q, k, v)]
    visible = causal(*dev, BLOCK_M=block_m, BLOCK_N=block_n).cpu().numpy() > 0

    fig, ax = plt.subplots(figsize=(7, 5.2))
    colours = {"full": "#9ecae1", "diagonal": "#fdae6b", "skipped": "#eeeeee"}
    for m0 in range(0, M, block_m):
        hi = min(N, (m0 // block_m + 1) * block_m)  # the kernel's loop bound
        for n0 in range(0, N, block_n):
            tile = visible[m0 : m0 + block_m, n0 : n0 + block_n]
            kind = "skipped" if n0 >= hi else ("full" if tile.all() else "diagonal")
            h, w = min(block_m, M - m0), min(block_n, N - n0)
            ax.add_patch(plt.Rectangle((n0, m0), w, h, color=colours[kind], ec="k", lw=1))
    rows, cols = np.nonzero(visible)
    ax.scatter(cols + 0.5, rows + 0.5, s=2, c="#08306b", label="pair the kernel lets through")
    for kind, colour in colours.items():
        ax.add_patch(plt.Rectangle((0, 0), 0, 0, color=colour, label=f"{kind} tile"))
    ax.set(
        xlim=(0, N),
        ylim=(M, 0),
        xlabel="key index",
        ylabel="query index",
        aspect="equal",
        title=f"Causal tiles, M={M}, N={N}, {block_m}x{block_n} blocks (top-left aligned)",
    )
    ax.legend(loc="lower left", fontsize=8, framealpha=0.9)
    return _save(fig, "causal_tiles.png")


def raw_top2_sums() -> Path:
    gating = _solution("03").moe_top2_gating
    torch.manual_seed(0)
    logits = torch.randn(6, 8)  # the chapter's worked example
    _, _, i0, i1 = (t.cpu().long() for t in gating(logits.to(runtime.DEVICE)))
    probs = oracles.softmax(logits)
    rows = np.arange(6)
    raw = probs[rows, i0.numpy()] + probs[rows, i1.numpy()]

    fig, ax = plt.subplots(figsize=(7, 3.6))
    ax.bar(rows, raw, color="#6baed6", label="p[top-1] + p[top-2] (raw weights)")
    ax.axhline(1.0, color="k", lw=1, ls="--", label="renormalized: exactly 1")
    ax.axhline(raw.mean(), color="#e6550d", lw=1, label=f"mean {raw.mean():.3f}")
    for r, value in zip(rows, raw):
        ax.text(r, value + 0.02, f"{value:.2f}", ha="center", fontsize=8)
    ax.set(
        xticks=rows,
        xlabel="token",
        ylabel="sum of the two weights",
        ylim=(0, 1.15),
        title="Raw top-2 sums of the chapter's six tokens (8 experts, seed 0)",
    )
    ax.legend(loc="upper left", fontsize=8)
    return _save(fig, "raw_top2_sums.png")


def running_max(row: int = 0, block_n: int = 4) -> Path:
    """The loop of 21.1 replayed in float64 for one row, 4-key blocks as in the chapter."""
    flash = _solution("01").flash_attention
    torch.manual_seed(0)
    q, k, v = torch.randn(17, 8), torch.randn(23, 8), torch.randn(23, 8)
    out = flash(*(x.to(runtime.DEVICE) for x in (q, k, v))).cpu().numpy()
    s = (q.double() @ k.double().T / np.sqrt(8))[row].numpy()
    m, l_i, acc, ms, alphas, block_max = -np.inf, 0.0, np.zeros(8), [], [], []
    for n0 in range(0, 23, block_n):
        blk = s[n0 : n0 + block_n]
        m_new = max(m, blk.max())
        alpha = np.exp(m - m_new)
        p = np.exp(blk - m_new)
        l_i = alpha * l_i + p.sum()
        acc = alpha * acc + p @ v.double().numpy()[n0 : n0 + block_n]
        ms.append(m_new)
        alphas.append(alpha)
        block_max.append(blk.max())
        m = m_new
    assert np.allclose(acc / l_i, out[row], atol=1e-4), "the replay must match the kernel"

    # Two panels on one x axis: the scores (when does m_i grow?) and the rescale it causes.
    # The rescale is drawn as 1 - alpha, how much acc and l_i shrink: tall where something
    # happens, zero where alpha = 1 and nothing does.
    blocks = np.arange(len(ms))
    fig, (ax, low) = plt.subplots(
        2,
        1,
        figsize=(7, 4.8),
        sharex=True,
        layout="constrained",
        gridspec_kw={"height_ratios": [3, 2]},
    )
    ax.plot(blocks, block_max, "o:", color="#9e9ac8", label="max score in this block")
    ax.step(blocks, ms, where="mid", color="#3182bd", lw=2, label="running max m_i")
    for b in blocks[1:]:
        if ms[b] > ms[b - 1]:
            ax.annotate(
                "m_i grows",
                (b, ms[b]),
                xytext=(0, 9),
                textcoords="offset points",
                ha="center",
                fontsize=8,
                color="#3182bd",
            )
    ax.set(
        ylabel="score",
        ylim=(min(block_max) - 0.4, max(ms) + 0.5),
        title=f"Query row {row} of the 21.1 example: acc and l_i shrink only when m_i grows",
    )
    ax.legend(loc="lower right", fontsize=8, framealpha=0.9)

    shrink = [1 - a for a in alphas]
    colours = ["#bdbdbd"] + ["#e6550d"] * (len(shrink) - 1)
    low.bar(blocks, shrink, color=colours, width=0.6)
    low.bar([0], [shrink[0]], color="none", edgecolor="#636363", hatch="//", width=0.6)
    for b, (a, s) in enumerate(zip(alphas, shrink)):
        if b == 0:
            text = "first block"
        elif s == 0:
            text = "alpha = 1"
        else:
            text = f"alpha = {a:.2f}"
        low.text(b, s + 0.04, text, ha="center", va="bottom", fontsize=7.5)
    low.set(
        xlabel=f"key block ({block_n} keys each)",
        ylabel="1 - alpha",
        ylim=(0, 1.6),
        xticks=blocks,
        yticks=[0, 0.5, 1],
    )
    low.text(
        0.99,
        0.95,
        "how much acc and l_i shrink: 1 - alpha, alpha = exp(m_old - m_new)\n"
        "alpha = 1: m_i did not grow, nothing to rescale; first block: nothing summed yet",
        transform=low.transAxes,
        ha="right",
        va="top",
        fontsize=7.5,
        color="#444",
    )
    return _save(fig, "running_max.png")


def _save(fig, name: str) -> Path:
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / name
    if fig.get_layout_engine() is None:
        fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return path


def main() -> int:
    runtime.configure()
    for make in (causal_tiles, raw_top2_sums, running_max):
        print(f"wrote {make().relative_to(catalogue.ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
