"""Attention's judge (01, 02, 04, 06): every output close to the oracle."""

from grader.kinds.base import OutputJudge

JUDGES = {"output": OutputJudge}
