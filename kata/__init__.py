"""Shared pieces of the Triton kata: the backend runtime and the exercise catalogue."""
