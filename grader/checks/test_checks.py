"""The checks: one test per check of the active check set for the exercise.

The runner passes ``--kata-exercise``; ``grader.plugin`` parametrizes ``check`` with that
exercise's checks from its spec (``grader/specs/<stem>/``).
"""

from grader import checking


def test_check(check, submission):
    checking.run(check, submission.spec, submission)
