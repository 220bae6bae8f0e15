"""Proving the grader before trusting it: the galleries of wrong and right kernels (``cli``,
``python -m grader.validate``), the static consistency checks (``static``) and mutation testing
of the checks (``mutants``)."""
