"""The kata's grader: checks that name the misconception behind a wrong kernel.

One folder per stage, in the order a grading passes through them:

* ``specs/``: what each exercise is graded on, as data: cases, checks, galleries (``<stem>/``),
  and the input builders.
* ``run/``: a grading from the command line to the outputs: every submission file read once
  (a snapshot), the static screens, then per exercise a launcher process, the only one that
  runs student code (it compiles the kernels for an sm_90 GPU first), kept contained.
* ``judge/``: pytest, in the grading process, judges the outputs the launcher sent back against
  the checks of the exercise's spec and names the trap a wrong answer matches.
* ``kinds/``: what the grader knows of each kind of kernel: the traps a check can name.
* ``report/``: the verdicts as records, versioned JSON, a terminal summary, an HTML page and
  Gradescope's results.
* ``classroom/``: a whole class: batch grading, its engines (local, Slurm) and the class page.
* ``validate/``: proving the grader: the galleries of wrong and right kernels, the static
  consistency checks, mutation testing.

``model`` holds the records every stage shares (cases, checks, traps), declared with keywords
in the specs. ``cli`` is ``python -m grader``; ``autograder`` is Gradescope's entry point.
"""

from kata import environment as _environment

# `python -m grader.validate` (or any grader module) run by a Python without torch, triton and
# numpy: rerun with .nox/kata's Python, or one line saying what to run, never a traceback.
_environment.guard(__name__)
