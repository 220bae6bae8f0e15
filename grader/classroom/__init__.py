"""Grading a class: ``batch`` (``nox -s batch``), its engines (this machine, Slurm), and the
gradebook and class page (``dashboard``)."""
