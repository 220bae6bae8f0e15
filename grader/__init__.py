"""The kata's grader: checks that name the misconception behind a wrong kernel.

Layers, outermost first: ``cli`` (arguments) -> ``runner`` (each submission file read once;
integrity and the static screens; then, per exercise, ``launcher`` processes, the only ones
that run student code: one compiles the kernels for an sm_90 GPU before the interpreter runs
them, one launches them on the grader's cases through the exercise's interface,
``kata.interfaces``; ``process`` contains them and ``forkserver`` starts them warm) ->
``plugin`` + ``checking`` + ``judges`` (pytest, in the grading process, judges the outputs
the launcher sent back against the checks of the exercise's spec, ``specs/<stem>/``) ->
``report`` (versioned JSON, Gradescope). ``validate`` and ``static`` prove the grader against
the specs' galleries.
"""
