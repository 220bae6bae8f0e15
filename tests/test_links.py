"""The handout's safety net for links: a page it ships that links to a page it leaves out (the
instructor guide, say) gets plain text instead of a dead link. tests/test_docs.py checks that
every link resolves, in the checkout and in the handout."""

import pytest

from kata.authoring import bundles


# fmt: off
@pytest.mark.parametrize("text, kept", [
    ("see [the guide](guide.md#x)", "see [the guide](guide.md#x)"),
    ("see [the instructors](instructors.md#gradescope)", "see the instructors"),
    ("[web](https://example.org) and [here](#top)", "[web](https://example.org) and [here](#top)"),
    ("| [instructors.md](instructors.md) | instructors |\n| [a](guide.md) | b |\n", "| [a](guide.md) | b |\n"),
])
# fmt: on
def test_handout_unlinks_only_pages_it_leaves_out(text, kept):
    assert bundles.unlink_missing(text, "docs/README.md", {"docs/guide.md"}) == kept
