"""The verdicts as records (``records``: the versioned JSON report) and everything that shows
them: the terminal summary, the HTML page with its SVG figures, the trap cards, Gradescope."""
