"""Which checks grade this run: the hidden ones when this copy of the grader has them (a full
checkout, the Gradescope autograder), else the public ones (the student handout).

``KATA_CHECKS=public`` forces the public set, so instructors can see what students see.
"""

from __future__ import annotations

import os

if os.environ.get("KATA_CHECKS") == "public":
    from grader.public import cases_for, checks_for, max_score

    NAME = "public"
else:
    try:
        from grader.cases import cases_for
        from grader.rubric import checks_for, max_score

        NAME = "hidden"
    except ModuleNotFoundError:  # the handout ships without the hidden checks
        from grader.public import cases_for, checks_for, max_score

        NAME = "public"

__all__ = ["NAME", "cases_for", "checks_for", "max_score"]
