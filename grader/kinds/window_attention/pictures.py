"""Its pictures are 2-D attention's: the error row by row."""

from grader.kinds.attention.pictures import pictures

__all__ = ["pictures"]
