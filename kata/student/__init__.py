"""The student's tools, one per nox session: ``run``, ``hint``, ``watch``, ``reset``, and the
progress line they print."""
