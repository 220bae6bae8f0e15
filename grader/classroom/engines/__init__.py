"""Engines for batch grading (``nox -s batch``): where each student's ``python -m grader`` runs.

- ``task``: grading one student, the same wherever it runs (this machine or a Slurm node);
- ``local``: a pool of workers on this machine, one per GPU (or per CPU core);
- ``slurm``: one Slurm array task per student, through submitit or a plain sbatch script.
"""
