"""The checks: one test per check of the active check set for the exercise.

The runner hands ``grader.judge.plugin.KataPlugin`` the exercise's spec; the plugin parametrizes
``check`` with that spec's checks (``grader/specs/<stem>/``) and serves the launch as
``submission``.
"""

from grader.judge import checking


def test_check(check, submission):
    checking.run(check, submission.spec, submission)
