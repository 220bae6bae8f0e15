"""Judging the outputs a launcher sent back: pytest runs one test per check of the exercise's
spec (``plugin``, ``checks/``), each case is compared with its float64 oracle (``judges``,
``compare``), and a wrong answer is matched to the trap it looks like (``grader.kinds``)."""
