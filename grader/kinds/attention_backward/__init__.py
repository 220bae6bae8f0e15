"""The grader's part of the attention-backward kind (exercise 10): its traps, in a draft that
the kind's registry line does not read yet (``traps_draft``)."""
