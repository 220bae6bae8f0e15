"""The checks: one test per check of the active check set for the exercise.

The runner passes ``--kata-exercise``; ``grader.judge.plugin`` parametrizes ``check`` with that
exercise's checks from its spec (``grader/specs/<stem>/``).
"""

from grader.judge import checking


def test_check(check, submission):
    checking.run(check, submission.spec, submission)
