"""The checks: one test per entry of the active check set (grader.checkset) for the exercise.

The runner passes ``--kata-exercise``; ``grader.plugin`` parametrizes ``check`` with that
exercise's entries of ``grader.rubric.CHECKS``. Adding a check means adding a rubric entry
(and, if it needs new inputs, a case in ``grader.cases``).
"""


def test_check(check, submission):
    check.run(submission)
