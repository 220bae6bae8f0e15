"""Running a grading: the snapshot of a submission, the static screens, the launcher processes
that run student code (compiled for sm_90 first), their containment, and the performance
track's timing. ``runner.grade`` is the entry."""
