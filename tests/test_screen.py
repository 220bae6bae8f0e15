"""The token-based integrity check (``kata.skeletons.check``) and the static screens built on it
(``grader.run.screen``): issue "Grader v3", rules 2, 6 and 7. Every rule gets a submission it must
flag and a benign twin it must leave alone; the kata's own solutions, skeletons and gallery files
pin what legitimate code looks like."""

from __future__ import annotations

import ast

import pytest

from grader import specs
from grader.run import screen
from grader.run.screen import NON_TRITON_PATH, TODO_ALLOWLIST
from grader.validate import gallery
from kata import skeletons
from kata.catalogue import ALL_EXERCISES, SOLUTIONS, find

STEMS = [ex.stem for ex in ALL_EXERCISES]  # an exercise is named through the manifest
S01, S02, S03, S04, S06 = (find(n).stem for n in ("01", "02", "03", "04", "06"))
CAUSAL_MASK = "visible = col_ok[None, :] & (offs_m[:, None] >= offs_n[None, :])"


def solution(stem: str) -> str:
    return (SOLUTIONS / f"{stem}.py").read_text()


def line_of(text: str, snippet: str) -> int:
    (line,) = [n for n, s in enumerate(text.splitlines(), 1) if snippet in s]
    return line


def edit(text: str, *pairs: tuple[str, str]) -> str:
    for old, new in pairs:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


def code_lines(text: str, first: int, last: int) -> list[int]:
    lines = text.splitlines()
    return [
        n
        for n in range(first, last + 1)
        if lines[n - 1].strip() and not lines[n - 1].strip().startswith("#")
    ]


def found(findings: list[screen.Finding], rule: str, line: int, *words: str) -> bool:
    return any(
        f.rule == rule and f.line == line and all(w in f.message for w in words) for f in findings
    )


# ---- the kata's own files -------------------------------------------------------------------------


@pytest.mark.parametrize("stem", STEMS)
def test_skeletons_and_solutions_pass_every_check(stem):
    sk = skeletons.pristine(stem)
    for text in (sk.text, solution(stem)):
        integrity = skeletons.check(sk, text)
        assert integrity.ok and integrity.by_tokens and not integrity.edited
        assert screen.screen(sk, text, integrity) == []


def test_region_code_is_mapped_to_its_todo():
    text = solution(S03)
    integrity = skeletons.check(skeletons.pristine(S03), text)
    assert integrity.todo_lines[line_of(text, "rest = tl.where(cols == i0")] == "top2-mask"
    assert integrity.todo_lines[line_of(text, "total = p0 + p1")] == "renormalize"
    assert line_of(text, "p1 = tl.max(rest, axis=0)") not in integrity.todo_lines  # given code
    text = solution(S02)
    integrity = skeletons.check(skeletons.pristine(S02), text)
    assert integrity.todo_lines[line_of(text, CAUSAL_MASK)] == "causal-mask"


@pytest.mark.parametrize(
    ("stem", "name"),
    [
        (S01, "chapter.py"),
        (S02, "chapter.py"),
        (S03, "chapter.py"),
        (S06, "apart.py"),
        (find("09").stem, "apart.py"),
    ],
)
def test_the_chapters_own_kernels_are_edits_that_open_no_other_path(stem, name):
    sk, text = skeletons.pristine(stem), (specs.folder(stem) / "gallery" / name).read_text()
    integrity = skeletons.check(sk, text)
    assert not integrity.ok  # written apart from the skeleton: a warning, still paid
    assert screen.screen(sk, text, integrity) == []


def test_the_fake_kernel_is_flagged_as_a_non_triton_path():
    sk, text = (
        skeletons.pristine(S01),
        (specs.folder(S01) / "gallery" / "fake_kernel.py").read_text(),
    )
    findings = screen.non_triton_path(sk, text)
    assert found(findings, NON_TRITON_PATH, line_of(text, "class _LooksLikeAKernel"), "a class")
    assert found(findings, NON_TRITON_PATH, line_of(text, "def __getitem__"), "`__getitem__`")
    assert found(findings, NON_TRITON_PATH, line_of(text, "torch.softmax"), "`torch.softmax`")
    assert found(findings, NON_TRITON_PATH, line_of(text, "scores = q.float() @"), "`@`")


# ---- rule 6: integrity by tokens --------------------------------------------------------------------


@pytest.mark.parametrize("quote", ['"""', "'''"])
def test_a_string_across_two_regions_is_an_edit_of_the_given_lines_it_covers(quote):
    sk = skeletons.pristine(S03)
    text = gallery.fill(
        sk,
        {
            "top2-mask": f'rest = tl.where(cols == i0, float("-inf"), probs)\n_ = {quote}',
            "renormalize": f"{quote}\np1, i1 = tl.max(probs, axis=0), i0\nw0 = p0 / (p0 + p1)\n"
            "w1 = p1 / (p0 + p1)",
        },
    )
    ast.parse(text)  # a valid file: the given p1/i1 lines became a string's contents
    covered = [line_of(sk.text, "p1 = tl.max(rest"), line_of(sk.text, "i1 = tl.argmax(rest")]
    integrity = skeletons.check(sk, text)
    assert integrity.lines == covered
    assert "-    p1 = tl.max(rest, axis=0)" in integrity.diff
    assert skeletons._check_lines(sk, text).ok  # comparing lines, as before, sees nothing


def test_a_string_across_the_two_window_regions_is_an_edit_of_the_loop_it_covers():
    sk = skeletons.pristine(S06)
    closing = (
        "        # `lo` above the loop, so that key tiles left of every row's window are never "
        "loaded.\n"
    )
    text = edit(
        sk.text,
        ("    lo = 0\n", '    lo = 0\n    _ = """\n'),
        (
            closing,
            closing
            + (
                '    """\n'
                "    for n1 in range(lo, hi, BLOCK_N):\n"
                "        cols = n1 + tl.arange(0, BLOCK_N)\n"
                "        k = tl.load(k_ptr + cols[:, None] * stride_kn + offs_d[None, :] * stride_kd)\n"
                "        v = tl.load(v_ptr + cols[:, None] * stride_vn + offs_d[None, :] * stride_vd)\n"
                "        visible = cols[None, :] < N\n"
            ),
        ),
    )
    ast.parse(text)
    covered = code_lines(
        sk.text,
        line_of(sk.text, "for n0 in range(lo, hi"),
        line_of(sk.text, "v = tl.load(v_ptrs"),  # the given code above the mask's region
    )
    assert skeletons.check(sk, text).lines == covered


def test_given_code_indented_under_an_inserted_if_is_an_edit():
    sk = skeletons.pristine(S03)
    text = gallery.fill(sk, {"top2-mask": "rest = probs\nif False:"})
    given = "    p1 = tl.max(rest, axis=0)\n    i1 = tl.argmax(rest, axis=0)\n"
    text = edit(text, (given, given.replace("    ", "        ")))
    ast.parse(text)
    assert skeletons.check(sk, text).lines == [
        line_of(sk.text, "p1 = tl.max"),
        line_of(sk.text, "i1 = tl.argmax"),
    ]


def test_an_else_taken_over_by_an_inserted_header_is_an_edit():
    """04's causal-stages region ends just before the given ``else:`` of ``if CAUSAL:``."""
    sk, text = skeletons.pristine(S04), solution(S04)
    stage2 = "            DIAGONAL,\n            TMA,\n        )\n"
    stolen = edit(text, (stage2, stage2 + "    if False:\n        pass\n"))
    ast.parse(stolen)  # the non-causal stages now run after every causal kernel too
    given_else = line_of(sk.text, "# Whole key tiles without a mask") - 1
    assert skeletons.check(sk, stolen).lines == [given_else]
    inside = edit(text, (stage2, stage2 + "        if False:\n            pass\n"))
    assert skeletons.check(sk, inside).ok  # the same lines, inside the region's own block


def test_reformatting_and_comments_outside_the_regions_are_not_edits():
    sk = skeletons.pristine(S01)
    store = "    tl.store(out_ptrs, out, mask=row_ok[:, None] & d_ok[None, :])\n"
    text = edit(
        solution(S01),
        ("    pid_m = tl.program_id(0)\n", "    # note\n    pid_m = tl.program_id(0)  # note\n"),
        (
            store,
            "    tl.store(\n        out_ptrs, out,\n        mask=row_ok[:, None] & d_ok[None, :]\n    )\n",
        ),
    )
    text = text.replace('float("-inf")', "float('-inf')")
    integrity = skeletons.check(sk, text)
    assert integrity.ok, integrity.diff
    assert screen.screen(sk, text, integrity) == []


def test_a_changed_given_line_is_reported_with_its_line_and_diff():
    sk = skeletons.pristine(S03)
    text = edit(
        solution(S03), ("tl.store(weight0_ptr + row, w0)", "tl.store(weight0_ptr + row, w1)")
    )
    integrity = skeletons.check(sk, text)
    assert integrity.lines == [line_of(sk.text, "tl.store(weight0_ptr + row, w0)")]
    assert integrity.edited == [line_of(text, "tl.store(weight0_ptr + row, w1)")]
    assert "-    tl.store(weight0_ptr + row, w0)" in integrity.diff
    assert "+    tl.store(weight0_ptr + row, w1)" in integrity.diff
    assert screen.non_triton_path(sk, text, integrity) == []  # a Triton edit: no other path


def test_a_file_that_does_not_tokenize_is_compared_by_lines():
    sk = skeletons.pristine(S02)
    text = edit(solution(S02), (CAUSAL_MASK, 'visible = """'))
    integrity = skeletons.check(sk, text)
    assert not integrity.by_tokens and integrity.ok  # the change is in a region
    worse = edit(text, ('scores, float("-inf"))', "scores, -1.0e30)"))
    assert skeletons.check(sk, worse).lines == [line_of(sk.text, 'scores, float("-inf"))')]
    for junk in ("", "\x00(((", "def f(:\n"):
        skeletons.check(sk, junk)  # never raises
        assert screen.screen(sk, junk) == []


# ---- rule 2: TODO regions hold Triton code ------------------------------------------------------


# fmt: off
@pytest.mark.parametrize(("code", "named"), [
    ("_ = sys._getframe(1)", "`sys`"),
    ('_ = __import__("os")', "`__import__`"),
    ('exec("visible = visible")', "`exec`"),
    ('dot = getattr(tl, "dot")', "`getattr`"),
    ("keep = lambda x: x", "a lambda"),
    ("import os", "`import os`"),
    ("from kata import oracles", "`from kata import oracles`"),
    ("global _seen", "`global _seen`"),
    ("def helper():\n    return 0", "`helper`"),
    ("kind = visible.__class__", "`__class__`"),
    ("raw = q.handle.data", "`handle`"),
    ("_ = host.launch_attention", "`host`"),
    ("_ = torch.zeros(1)", "`torch`"),
])
# fmt: on
def test_region_code_outside_the_allowlist_is_flagged(code, named):
    sk = skeletons.pristine(S02)
    text = gallery.fill(sk, {"causal-mask": ("hi = N", f"{CAUSAL_MASK}\n{code}")})
    line = line_of(text, code.splitlines()[0])
    findings = screen.todo_allowlist(sk, text)
    assert found(findings, TODO_ALLOWLIST, line, "(in TODO(causal-mask))", named), findings


def test_a_dunder_in_a_region_reads_as_the_issue_says():
    sk = skeletons.pristine(S02)
    text = gallery.fill(sk, {"causal-mask": ("hi = N", f"{CAUSAL_MASK}\nkind = visible.__class__")})
    line = line_of(text, "visible.__class__")
    assert screen.todo_allowlist(sk, text) == [screen.Finding(line, TODO_ALLOWLIST, (
        f"line {line} (in TODO(causal-mask)): `__class__` is not allowed inside a kernel: "
        "a TODO region holds Triton code only"))]


def test_region_code_within_the_allowlist_is_not_flagged():
    sk = skeletons.pristine(S02)
    text = gallery.fill(sk, {"causal-mask": (
        "hi = tl.minimum(N, (pid_m + 1) * BLOCK_M)\nhi = max(hi, min(N, BLOCK_N))",
        f"{CAUSAL_MASK}\nlast = float(abs(int(n0)))\nfor j in range(0, 1):\n"
        "    visible = visible & (offs_n[None, :] <= last + j)\nprint(len(visible.shape))",
    )})
    assert skeletons.check(sk, text).ok
    assert screen.screen(sk, text) == []
    # 04's region calls a jit helper and reads a tl.constexpr global of the file.
    assert screen.todo_allowlist(skeletons.pristine(S04), solution(S04)) == []


# ---- rule 7: changed given code opens no path around the kernels ----------------------------------

LAUNCH = "    return host.launch_attention(flash_attn_kernel, q, k, v, block_m=BLOCK_M, block_n=BLOCK_N)\n"
IMPORTS = "import triton.language as tl\n"


def cheat(*pairs: tuple[str, str]) -> tuple[list[screen.Finding], str]:
    text = edit(solution(S01), *pairs)
    return screen.non_triton_path(skeletons.pristine(S01), text), text


def test_torch_computing_the_answer_in_host_code_is_flagged():
    findings, text = cheat(
        (IMPORTS, IMPORTS + "import torch\n"),
        (LAUNCH, ("    return torch.softmax(q @ k.T * q.shape[1] ** -0.5, dim=-1) @ v\n")),
    )
    line = line_of(text, "return torch.softmax")
    assert found(findings, NON_TRITON_PATH, line, "`torch.softmax`")
    assert found(findings, NON_TRITON_PATH, line, "`@`")


def test_a_triton_copy_of_an_answer_computed_by_torch_is_flagged():
    copy = (
        "@triton.jit\ndef _copy(src, dst, n, BLOCK: tl.constexpr):\n"
        "    offs = tl.arange(0, BLOCK)\n"
        "    tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)\n\n\n"
    )
    findings, text = cheat((IMPORTS, IMPORTS + "import torch\n"), ("@triton.jit\ndef flash_attn_kernel(",
        copy + "@triton.jit\ndef flash_attn_kernel("), (LAUNCH, (
        "    ref = (q.float() @ k.float().T).softmax(-1) @ v.float()\n"
        "    out = torch.empty_like(ref)\n"
        "    _copy[(1,)](ref, out, ref.numel(), BLOCK=triton.next_power_of_2(ref.numel()))\n"
        "    return out\n")))
    line = line_of(text, "ref = (q.float()")
    assert found(findings, NON_TRITON_PATH, line, "`.softmax()`")
    assert found(findings, NON_TRITON_PATH, line, "`@`")
    assert not [f for f in findings if f.line != line]  # the copy kernel and its launch are Triton


def test_patching_a_module_the_kernel_file_imports_is_flagged():
    for target in ("host.launch_attention", "triton.compile", "tl.dot"):
        findings, text = cheat((LAUNCH, LAUNCH + f"\n\n{target} = print\n"))
        assert found(findings, NON_TRITON_PATH, line_of(text, f"{target} = print"),
                     f"assigning `{target}`"), target


def test_an_exit_hook_is_flagged():
    findings, text = cheat((IMPORTS, IMPORTS + "import atexit\n"),
                           (LAUNCH, LAUNCH + "\n\natexit.register(print, 'bye')\n"))
    assert found(findings, NON_TRITON_PATH, line_of(text, "import atexit"), "`import atexit` added")
    assert found(findings, NON_TRITON_PATH, line_of(text, "atexit.register"), "`atexit`")


def test_outputs_cached_by_data_pointer_are_flagged():
    findings, text = cheat(("def flash_attention(", "_cache = {}\n\n\ndef flash_attention("), (LAUNCH, (
        "    key = (q.data_ptr(), k.data_ptr(), v.data_ptr())\n"
        "    if key not in _cache:\n"
        "        _cache[key] = host.launch_attention(flash_attn_kernel, q, k, v)\n"
        "    return _cache[key]\n")))
    assert found(findings, NON_TRITON_PATH, line_of(text, "key = (q.data_ptr()"), "`.data_ptr()`")
    assert found(findings, NON_TRITON_PATH, line_of(text, "if key not in _cache"), "`_cache`")
    assert found(findings, NON_TRITON_PATH, line_of(text, "_cache[key] = host"), "writing")


def test_python_accumulating_in_host_code_is_flagged():
    findings, text = cheat(
        (
            LAUNCH,
            (
                "    total = 0\n"
                "    for row in q:\n"
                "        total = total + row\n"
                "    _ = [(acc := acc + row) for row in k] if (acc := 0) == 0 else None\n" + LAUNCH
            ),
        )
    )
    assert found(findings, NON_TRITON_PATH, line_of(text, "for row in q:"), "a Python loop")
    walrus = [f for f in findings if f.line == line_of(text, "acc := acc") and ":=" in f.message]
    assert len(walrus) == 2


# fmt: off
@pytest.mark.parametrize(("added", "probe", "named"), [
    ("", "    if 'pytest' in sys.modules:\n        q = q * 0\n", "`sys`"),
    ("import os\n", "    if os.environ.get('KATA_GRADER'):\n        q = q * 0\n", "`os`"),
    ("import inspect\n", "    if len(inspect.stack()) > 9:\n        q = q * 0\n", "`inspect`"),
])
# fmt: on
def test_detecting_the_grader_is_flagged(added, probe, named):
    findings, text = cheat((IMPORTS, IMPORTS + added), (LAUNCH, probe + LAUNCH))
    assert found(findings, NON_TRITON_PATH, line_of(text, probe.split("\n")[0]), named)


def test_python_in_a_kernel_outside_the_regions_is_flagged():
    findings, text = cheat(("    pid_m = tl.program_id(0)\n",
                            "    pid_m = tl.program_id(0)\n    _ = sys.getrefcount(q_ptr)\n"))
    assert found(findings, NON_TRITON_PATH, line_of(text, "sys.getrefcount"), "`sys`")


# fmt: off
@pytest.mark.parametrize("pairs", [
    # a renamed local variable in the kernel, outside the region
    (("scores", "s"),),
    # a changed default block size in the host function
    (("def flash_attention(q, k, v, BLOCK_M=16,", "def flash_attention(q, k, v, BLOCK_M=32,"),),
    # an extra tl statement in the kernel
    (("    pid_m = tl.program_id(0)\n",
      "    pid_m = tl.program_id(0)\n    tl.static_assert(BLOCK_D >= 16)\n"),),
    # a small jit helper, called from given code
    (("@triton.jit\ndef flash_attn_kernel(",
      "@triton.jit\ndef _row_sum(p):\n    return tl.sum(p, axis=1)\n\n\n"
      "@triton.jit\ndef flash_attn_kernel("),
     ("l_i = l_i * alpha + tl.sum(p, axis=1)", "l_i = l_i * alpha + _row_sum(p)")),
    # host code that prepares its inputs
    ((LAUNCH, "    q, k = q.contiguous(), k.contiguous()\n" + LAUNCH),),
    # the __main__ block does not run when graded
    (("    sys.exit(examples.flash_attention_example(flash_attention))",
      "    import torch\n    torch.manual_seed(1)\n"
      "    sys.exit(examples.flash_attention_example(flash_attention))"),),
    # a comment
    (("    pid_m = tl.program_id(0)\n", "    # note\n    pid_m = tl.program_id(0)\n"),),
])
# fmt: on
def test_benign_edits_of_given_code_open_no_path(pairs):
    sk = skeletons.pristine(S01)
    text = solution(S01)
    for old, new in pairs:
        assert old in text
        text = text.replace(old, new)
    integrity = skeletons.check(sk, text)
    assert integrity.ok == (pairs[0][1].strip() == "# note\n    pid_m = tl.program_id(0)")
    assert screen.screen(sk, text, integrity) == []


def test_a_worked_example_only_main_calls_is_not_judged():
    sk = skeletons.pristine(S06)
    seed = ("    torch.manual_seed(0)\n", "    torch.manual_seed(1)\n")
    assert screen.non_triton_path(sk, edit(solution(S06), seed)) == []
    # The same call in the graded function is judged.
    check = "    if int(window) < 1:\n"
    text = edit(solution(S06), (check, "    torch.manual_seed(1)\n" + check))
    assert found(screen.non_triton_path(sk, text), NON_TRITON_PATH,
                 line_of(text, "torch.manual_seed(1)"), "`torch.manual_seed`")


def test_bare_new_imports_of_math_and_torch_are_allowed_others_are_not():
    """The chapter's own files add ``import math`` and ``import torch`` (see the screen's
    NEW_IMPORTS); what torch may do in host code is judged where it is used."""
    findings, text = cheat((IMPORTS, IMPORTS + "import math\nimport torch\nimport numpy as np\n"))
    assert [f.line for f in findings] == [line_of(text, "import numpy as np")]


def test_screen_joins_both_rules_in_line_order():
    sk = skeletons.pristine(S02)
    text = gallery.fill(sk, {"causal-mask": ("hi = N", f"{CAUSAL_MASK}\n_ = eval('1')")})
    text = edit(
        text, ("import triton.language as tl\n", "import triton.language as tl\nimport os\n")
    )
    findings = screen.screen(sk, text)
    assert [(f.line, f.rule) for f in findings] == [
        (line_of(text, "import os"), NON_TRITON_PATH),
        (line_of(text, "eval('1')"), TODO_ALLOWLIST),
    ]


def test_the_line_a_todo_says_to_extend_is_inside_its_region():
    """02's TODO says "add that condition to `visible`": editing that line is region code, not
    an edit of given code (issue 20: it was flagged, and scored 0 under --strict)."""
    for stem, old in (
        (S02, "        visible = col_ok[None, :]\n"),
        (S06, "        visible = col_ok[None, :] & (offs_m[:, None] >= offs_n[None, :])\n"),
    ):
        sk = skeletons.pristine(stem)
        text = edit(sk.text, (old, old.rstrip("\n") + " & (offs_n[None, :] >= 0)\n"))
        assert skeletons.check(sk, text).ok, stem


def test_integrity_says_where_the_regions_are_in_the_students_file():
    sk = skeletons.pristine(S02)
    mask = line_of(sk.text, "visible = col_ok[None, :]")
    assert skeletons.check(sk, sk.text).regions == {
        "causal-mask": [[line_of(sk.text, "    hi = N"), line_of(sk.text, "    hi = N")], [mask, mask]]
    }
    # Three lines added above the regions and code added in the mask's: its lines move and grow.
    text = edit(sk.text, ("    pid_m = tl.program_id(0)\n", "    pid_m = tl.program_id(0)\n\n\n\n"))
    text = edit(text, ("        visible = col_ok[None, :]\n", "        a = 1\n        visible = col_ok[None, :]\n"))
    text = edit(text, ("        scores = tl.dot(q, tl.trans(k)) * scale\n", "        scores = tl.dot(q, k) * 2\n"))
    found = skeletons.check(sk, text)
    assert found.regions["causal-mask"][1] == [mask + 3, mask + 4]
    assert found.edited == [line_of(text, "scores = tl.dot(q, k) * 2")]


def test_a_deletion_in_given_code_is_reported_at_the_students_line():
    sk = skeletons.pristine(S01)
    text = "# my notes\n# more\n" + edit(
        sk.text, ("l_i = l_i * alpha + tl.sum(p, axis=1)", "l_i = l_i + tl.sum(p, axis=1)")
    )
    found = skeletons.check(sk, text)
    assert found.lines == [line_of(sk.text, "l_i = l_i * alpha")]
    assert found.edited == [line_of(text, "l_i = l_i + tl.sum")]  # two lines further down


# ---- an exercise's own refusals (09: tl.atomic_*) ------------------------------------------------


def test_09_refuses_atomics_anywhere_with_the_trap_named():
    """An atomic counter gives token order in the interpreter and any order on a GPU: refused on
    both before it runs, in a TODO region, in given code and through an import alias alike."""
    stem = find("09").stem
    spec, sk = specs.load(stem, "public"), skeletons.pristine(stem)
    assert screen.screen(sk, sk.text, forbidden=spec.forbidden) == []
    region = "rank = tl.atomic_add(counts_ptr + e + 0 * pairs, 1, mask=hit)"
    text = edit(sk.text, ("        rank = pairs\n", f"        {region}\n"))
    findings = screen.screen(sk, text, forbidden=spec.forbidden)
    assert found(findings, screen.EXERCISE_FORBIDS, line_of(text, region), "`tl.atomic_add`",
                 "dispatch-not-token-order")
    aliased = edit(text, ("import triton.language as tl\n",
                          "import triton.language as tl\nfrom triton.language import atomic_max as "
                          "top\n"))
    findings = screen.screen(sk, aliased, forbidden=spec.forbidden)
    assert found(findings, screen.EXERCISE_FORBIDS, line_of(aliased, "import atomic_max"),
                 "`atomic_max`")
    # Without the rule (another exercise), an atomic in a region is Triton code like any other.
    assert not [f for f in screen.screen(sk, text) if f.rule == screen.EXERCISE_FORBIDS]
