"""The authors' tools: the exercise generator, the handout and Gradescope bundles, the docs'
figures, the generated parts of the docs and the benchmark."""

from kata import environment as _environment

# The docs generator imports the grader, which needs numpy and torch; the other tools run
# without them (a clone's own Python can generate the exercises).
_environment.guard("kata.authoring.docs")
