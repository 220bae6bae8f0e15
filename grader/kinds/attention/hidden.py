"""Hidden cases and notes that several specs share: about code an exercise gives rather than
asks for. Like every spec's hidden.py, this file stays out of the student handout.

The 2-D attention exercises (01, 02, 06) get their strides and their input dtype handled by
the host. Each note compares the kernel with its own answer on a twin case (the same numbers,
contiguous and in float32), so it can only point at given code and never costs TODO points.
"""

import numpy as np

from grader.kinds.attention.inputs import qkv
from grader.model import Case, Check


def _as_fp32(arrays: dict) -> dict:
    return {name: a.astype(np.float32) for name, a in arrays.items()}


def attention_cases(seed: int, *, causal: bool = False, windows=(None, None)) -> list[Case]:
    """The strided and the float16 case with their twins; seeds ``seed`` and ``seed + 1``;
    ``windows`` are the two cases' WINDOW for sliding-window attention."""
    cases = []
    for name, (M, N, D), window, layout, dtype, twin, what in (
        (
            "strided",
            (33, 45, 24),
            windows[0],
            {"q": "transposed", "k": "sliced", "v": "sliced"},
            np.float32,
            "strided-plain",
            " with q transposed in memory and k, v every other column",
        ),
        (
            "fp16-inputs",
            (24, 40, 16),
            windows[1],
            {},
            np.float16,
            "fp16-as-fp32",
            ", q/k/v in float16",
        ),
    ):
        inputs = qkv(seed + len(cases) // 2, M, N, D, dtype=dtype)
        shape = f"M={M}, N={N}, D={D}" + (f", WINDOW={window}" if window else "")
        twin_about = (
            "the strided case's numbers, contiguous"
            if layout
            else "the float16 case's numbers, in float32"
        )
        cases += [
            Case(
                name=name,
                about=shape + what,
                inputs=inputs,
                layout=layout,
                twin=twin,
                causal=causal,
                window=window,
            ),
            Case(
                name=twin, about=twin_about, inputs=_as_fp32(inputs), causal=causal, window=window
            ),
        ]
    return cases


# fmt: off
ATTENTION_NOTES = [
    Check(id="strided-inputs", todo=None, points=0,
          about="Note on given code: q transposed in memory, k and v every other column",
          cases=("strided",), judge="twin", contract=True),
    Check(id="half-precision-inputs", todo=None, points=0,
          about="Note on given code: float16 q, k, v (the chapter uses float32)",
          cases=("fp16-inputs",), judge="twin"),
]
# fmt: on
