"""The authors' tools: the exercise generator, the handout and Gradescope bundles, the docs'
figures, the generated parts of the docs and the benchmark."""
