"""05's judges: 03's top-2 judge, and the weights of the experts the kernel chose."""

from __future__ import annotations

import numpy as np

from grader.kinds.gating.judges import Top2Judge, WeightsJudge
from grader.model import Case, Output


class ChosenWeightsJudge(WeightsJudge):
    """05's weights, which given code computes from the two logits the top-2 search picked:
    judged on every token with valid experts, one expert picked twice included (each weight is
    then 1/2). Their check pays for the rows-per-program TODO, so a top-2 search still missing
    its mask must not hold it back."""

    blocked, unjudged = "no token got two valid experts", "an invalid expert"

    def judged(self, case: Case, got: Output) -> np.ndarray:
        E = case.inputs["logits"].shape[1]
        i0, i1 = got["idx0"].astype(np.int64), got["idx1"].astype(np.int64)
        return (i0 >= 0) & (i0 < E) & (i1 >= 0) & (i1 < E)


JUDGES = {"top2": Top2Judge, "chosen-weights": ChosenWeightsJudge}
