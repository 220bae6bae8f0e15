"""The authors' tools: the exercise generator, the handout and Gradescope bundles, the docs'
figures and the benchmark."""
