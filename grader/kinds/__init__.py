"""What the grader knows about each kind of kernel (an interface of exercises/info.toml): its
traps, the classic wrong answers a check can name, with the forms each mistake outputs.

``traps`` holds the catalogue, ``TRAPS``, and the kinds not yet in a folder of their own.
"""
