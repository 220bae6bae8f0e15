"""What a TODO region may hold (``grader.run.rules``), and the cheats grader v3 paid for.

Each case writes a region's code into the solution, splices the file as the grader does and
checks the finding's words; each v3 cheat class of issue 27 is one row. The right ways to write
the same code (tl.math, libdevice, messages, IEEE dots) must pass.
"""

from __future__ import annotations

import pytest

from grader import specs
from grader.run import rules, splice
from kata import skeletons
from kata.catalogue import SOLUTIONS, find
from kata.regions import MARKER

S01, S09 = find("01").stem, find("09").stem
RIGHT_01 = "        acc = acc * alpha[:, None] + tl.dot(p, v)\n"
RIGHT_09 = "        keep = hit & (rank < CAPACITY)\n"


def solution(stem: str) -> str:
    text = (SOLUTIONS / f"{stem}.py").read_text()
    return "".join(line for line in text.splitlines(keepends=True) if not MARKER.match(line))


def findings(stem: str, old: str, new: str) -> list[str]:
    text = solution(stem)
    assert text.count(old) == 1
    found = splice.splice(skeletons.pristine(stem), text.replace(old, new))
    forbidden = specs.load(stem, "hidden").forbidden
    return [f.message for f in rules.check(found.text, found.graded, found.lines, forbidden)]


# fmt: off
REFUSED = [
    # v3 cheats: attribute chains into Triton's machinery, the interpreter flag, a def in a string
    ("triton-submodule", "acc = triton.runtime.interpreter.x", "`triton.runtime.interpreter.x` is not Triton's kernel language"),
    ("interpreter-flag", "if runtime.INTERPRETER:\n    acc = acc", "`runtime` is not a name a kernel can use"),
    ("def-in-string", "acc = acc * alpha[:, None] + tl.dot(p, v)\ns = 'def flash_attn_kernel(q_ptr): pass'", "the string 'def flash_attn_kernel"),
    # the launcher's globals, the oracles, the file system: nothing but the kernel's own names
    ("oracle", "acc = oracles.attention(q, k, v)", "`oracles` is not a name a kernel can use"),
    ("module-global", "acc = examples", "`examples` is not a name a kernel can use"),
    ("dunder", "acc = acc.__class__", "`acc.__class__` is not an attribute"),
    ("numpy-handle", "acc = acc.handle.data", "`acc.handle.data` is not an attribute"),
    ("open", "acc = open", "`open` is not a name a kernel can use"),
    ("getattr", "acc = getattr(tl, 'dot')(p, v)", "`getattr` is not a name a kernel can use"),
    ("import", "import os", "an import is not kernel code"),
    ("def", "def f():\n    pass", "a function definition is not kernel code"),
    ("lambda", "f = lambda: 0", "a lambda is not kernel code"),
    ("with", "with tl:\n    pass", "`with` is not kernel code"),
    ("try", "try:\n    pass\nexcept Exception:\n    pass", "`try` is not kernel code"),
    ("global", "global acc", "`global` is not kernel code"),
    ("comprehension", "acc = [p for p in range(2)]", "a comprehension is not kernel code"),
    ("helper-internals", "acc = flash_attn_kernel.fn", "a kernel calls its helpers"),
    ("tl-alias", "lang = tl", "`tl` alone is not kernel code"),
    ("private-language", "acc = tl.core.dot(p, v)", "`tl.core.dot` is not part of Triton's public language"),
    ("private-keyword", "acc = tl.dot(p, v, _semantic=None)", "the keyword `_semantic` is not for kernel code"),
    # two verdicts: TF32 rounds on a GPU, not in the interpreter
    ("tf32", "acc = acc * alpha[:, None] + tl.dot(p, v, input_precision='tf32')", "TF32"),
    ("tf32-positional", "acc = acc * alpha[:, None] + tl.dot(p, v, None, 'tf32')", "go by keyword"),
    ("allow-tf32", "acc = acc * alpha[:, None] + tl.dot(p, v, allow_tf32=True)", "TF32"),
    # two verdicts, found by probing v4: what the interpreter ignores, a GPU trusts
    ("hint-multiple-of", "acc = acc * alpha[:, None] + tl.dot(p, v)\nd = tl.multiple_of(N, 16)", "a promise a GPU's compiler trusts"),
    ("hint-contiguous", "acc = acc * alpha[:, None] + tl.dot(p, v)\nd = tl.max_contiguous(N, 16)", "a promise a GPU's compiler trusts"),
    ("hint-assume", "tl.assume(N > 0)\nacc = acc * alpha[:, None] + tl.dot(p, v)", "a promise a GPU's compiler trusts"),
    ("store", "acc = acc * alpha[:, None] + tl.dot(p, v)\ntl.store(out_ptr, 0.0)", "`tl.store` writes an output"),
    ("atomic", "acc = acc * alpha[:, None] + tl.dot(p, v)\ntl.atomic_add(out_ptr, 0.0)", "`tl.atomic_add` lets programs see"),
    ("tie-break-keyword", "acc = acc * alpha[:, None] + tl.dot(p, v) + 0 * tl.argmax(p, axis=1, tie_break_left=False)[:, None]", "`tie_break_left` is ignored"),
    ("tie-break-positional", "acc = acc * alpha[:, None] + tl.dot(p, v) + 0 * tl.argmax(p, 1, False)[:, None]", "`tie_break_left` is ignored"),
    ("tie-break-method", "acc = acc * alpha[:, None] + tl.dot(p, v) + 0 * p.argmax(1, False)[:, None]", "`tie_break_left` is ignored"),
    ("tie-break-max", "acc = acc * alpha[:, None] + tl.dot(p, v) + 0 * tl.max(p, 1, True, False)[1][:, None]", "`tie_break_left` is ignored"),
    ("nan", "acc = tl.where(alpha[:, None] > 0, acc * alpha[:, None], float('nan')) + tl.dot(p, v)", 'float("nan")'),
    ("loop-step", "for j in range(N, N - 1, -1 + 0 * N):\n    acc = acc * alpha[:, None]\nacc += tl.dot(p, v)", "a loop step must be"),
]
ACCEPTED = [
    ("two-statements", "acc = acc * alpha[:, None]\nacc += tl.dot(p, v)"),
    ("math-module", "acc = acc * tl.math.exp2(tl.math.log2(alpha))[:, None] + tl.dot(p, v)"),
    ("libdevice", "acc = acc * tl.extra.libdevice.exp(tl.log(alpha))[:, None] + tl.dot(p, v)"),
    ("ieee", "acc = acc * alpha[:, None] + tl.dot(p, v, input_precision='ieee')"),
    ("triton-language", "acc = acc * alpha[:, None] + triton.language.dot(p, v)"),
    ("messages", "tl.static_assert(BLOCK_N >= 16, 'a compiled dot needs K >= 16')\nacc = tl.where(alpha[:, None] > float('-inf'), acc * alpha[:, None], 0.0) + tl.dot(p, v)"),
    ("tensor-methods", "acc = (acc * alpha[:, None]).to(tl.float32) + tl.dot(p.to(v.dtype), v)"),
    ("loop-step-constexpr", "for j in range(0, 1, BLOCK_N):\n    acc = acc * alpha[:, None]\nacc += tl.dot(p, v)"),
    ("loop-step-literal", "for j in tl.range(0, 1, 1):\n    acc = acc * alpha[:, None]\nacc += tl.dot(p, v)"),
    ("argmax-default-tie", "acc = acc * alpha[:, None] + tl.dot(p, v) + 0 * tl.argmax(p, 1)[:, None]"),
    # a string alone on its line does nothing: the student's comment, dropped from the graded file
    ("docstring", '"""Rescale acc by alpha before adding this tile."""\nacc = acc * alpha[:, None] + tl.dot(p, v)'),
    ("def-in-docstring", "'def flash_attn_kernel(q_ptr): pass'\nacc = acc * alpha[:, None] + tl.dot(p, v)"),
]
# fmt: on


def _indented(code: str, indent: str = "        ") -> str:
    return "".join(indent + line + "\n" for line in code.split("\n"))


@pytest.mark.parametrize("code,words", [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_region_code_that_is_not_a_kernels_is_refused(code, words):
    found = findings(S01, RIGHT_01, _indented(code))
    assert any(words in f for f in found), found
    assert all("in TODO(rescale-acc)" in f for f in found)


@pytest.mark.parametrize("code", [r[1] for r in ACCEPTED], ids=[r[0] for r in ACCEPTED])
def test_kernel_code_written_any_way_is_accepted(code):
    assert findings(S01, RIGHT_01, _indented(code)) == []


def test_atomics_are_refused_in_09_however_they_are_reached():
    """09 refuses tl.atomic_* (the interpreter's program order would pass an atomic counter
    that a GPU orders at random): by name, as a tensor method, or through triton.language."""
    for code in (
        "keep = hit & (tl.atomic_add(counts_ptr + e, 0) < CAPACITY)",
        "keep = hit & ((counts_ptr + e).atomic_add(0) < CAPACITY)",
        "keep = hit & (triton.language.atomic_max(counts_ptr + e, 0) < CAPACITY)",
    ):
        found = findings(S09, RIGHT_09, _indented(code))
        assert any("the trap dispatch-not-token-order" in f for f in found), (code, found)
    assert findings(S09, RIGHT_09, RIGHT_09) == []


def test_a_finding_names_the_students_own_line():
    text = solution(S01).replace(RIGHT_01, "\n\n" + _indented("acc = oracles.x"))
    found = splice.splice(skeletons.pristine(S01), text)
    (finding,) = rules.check(found.text, found.graded, found.lines)
    line = text.split("\n").index("        acc = oracles.x") + 1
    assert finding.line == line and finding.message.startswith(f"line {line} ")


def test_given_code_is_never_judged_by_the_rules():
    """Code outside the regions is not the student's: changed, it is reported, not run, and
    never a finding (the skeleton's own line runs)."""
    text = solution(S01).replace("    out = acc / l_i[:, None]", "    out = oracles.attention()")
    found = splice.splice(skeletons.pristine(S01), text)
    assert rules.check(found.text, found.graded, found.lines) == []
    assert "oracles.attention()" not in found.text and [c.kind for c in found.changes] == [
        "changed"
    ]
