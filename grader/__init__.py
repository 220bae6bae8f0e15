"""The kata's grader: checks that name the misconception behind a wrong kernel.

Layers, outermost first: ``cli`` (arguments) -> ``runner`` (one pytest process per exercise,
time-limited; integrity and static warnings) -> ``plugin`` + ``checking`` + ``judges`` (the
checks of the exercise's spec, ``specs/<stem>/``; student code never runs here) -> ``launcher``
(a separate process that imports the submission and launches its kernel through the exercise's
interface, ``kata.interfaces``) -> ``report`` (versioned JSON, Gradescope). ``validate`` and
``static`` prove the grader against the specs' galleries.
"""
