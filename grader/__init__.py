"""The kata's grader: hidden checks that name the misconception behind a wrong kernel.

Layers, outermost first: ``cli`` (arguments) -> ``runner`` (one pytest process per exercise,
time-limited) -> ``plugin`` + ``checks`` (comparisons; student code never runs here) ->
``launcher`` (a separate process that imports the submission and launches its kernel) ->
``report`` (versioned JSON, Gradescope).
"""
