"""``python -m grader.validate.mutants`` / ``nox -s mutants``: mutation testing of the hidden checks.

Every TODO region's reference code (each spec's ``REFERENCE``, which ``validate --static`` holds
equal to the solutions) is mutated one small change at a time, the way a student's slip looks:

* ``compare``: ``<`` <-> ``<=``, ``>`` <-> ``>=``, ``==`` <-> ``!=``;
* ``arith``: ``+`` <-> ``-``, ``*`` <-> ``/``, ``//`` -> ``/``;
* ``const``: an integer constant +-1; a float constant x2 and /2;
* ``tile``: ``+ BLOCK_*`` / ``- BLOCK_*`` added to an expression that holds a block size;
* ``swap``: the operands of a non-commutative operator swapped;
* ``where``: the two branches of ``tl.where`` swapped;
* ``precision``: ``input_precision="tf32"`` added to a ``tl.dot`` (fp32 exercises lose digits);
* ``clamp``: a constexpr bound in a comparison taken as at least 1 (``tl.maximum(CAPACITY, 1)``);
* ``drop``: one statement of the region left out.

Each mutant is written into the frozen skeleton as a student would (the other TODOs keep their
reference code) and graded with the hidden checks. It is *killed* when it loses points, or when
it cannot run at all (it does not compile); *equivalent* when it is listed, with the reason it
cannot be told apart from the reference, in ``grader/specs/equivalent-mutants.toml``; else it
*survived*, and the session fails. ``--summary`` rewrites this backend's table in
docs/mutants.md. Written with ``ast`` rather than mutmut or cosmic-ray: both mutate whole
modules through their own test runner (mutmut's trampolines also replace the very functions
``@triton.jit`` reads back as source), neither can keep to a TODO region, and neither knows
Triton's slips (a block size too many, the branches of a ``where``).
"""

from __future__ import annotations

import argparse
import ast
import copy
import os
import re
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

from grader import specs
from grader.model import Expect
from grader.validate import gallery
from kata import skeletons
from kata.catalogue import ALL_EXERCISES, ROOT, find

EQUIVALENTS = ROOT / "grader" / "specs" / "equivalent-mutants.toml"
SUMMARY = ROOT / "docs" / "mutants.md"
SWAPS = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
}
ARITH = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Div,
}
NON_COMMUTATIVE = (ast.Sub, ast.Div, ast.FloorDiv, ast.Mod)


@dataclass(frozen=True)
class Mutant:
    stem: str
    todo: str
    operator: str
    code: str  # the region's mutated code (one string per region, joined by "\n# region\n")
    change: str  # what changed, e.g. "`<` -> `<=` in `offs_m[:, None] >= offs_n[None, :]`"
    number: int = 0  # its place among the TODO's mutants, for a label that names it alone

    @property
    def label(self) -> str:
        return f"{find(self.stem).number}-{self.todo}-{self.number}"


# ---- generating -----------------------------------------------------------------------------


def _code(node: ast.AST) -> str:
    return " ".join(ast.unparse(node).split())


def _blocks(node: ast.AST) -> list[str]:
    """The block-size names an expression uses (BLOCK_M, BLOCK_N, ...)."""
    return sorted(
        {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id.startswith("BLOCK_")}
    )


def _compare_edits(node: ast.Compare):
    """Each comparison made its opposite, and each UPPER-case bound taken as at least 1."""
    for j, op in enumerate(node.ops):
        if type(op) in SWAPS:
            new = SWAPS[type(op)]
            change = f"`{_code(node)}`: comparison {j + 1} made `{_op(new)}`"

            def apply(n, j=j, new=new):
                n.ops[j] = new()

            yield "compare", change, apply


def _clamp_edits(node: ast.Compare):
    for j, side in enumerate([node.left, *node.comparators]):
        if isinstance(side, ast.Name) and side.id.isupper():

            def clamp(n, j=j, name=side.id):
                bound = ast.parse(f"tl.maximum({name}, 1)", mode="eval").body
                if j == 0:
                    n.left = bound
                else:
                    n.comparators[j - 1] = bound

            yield "clamp", f"`{_code(node)}`: {side.id} taken as at least 1", clamp


def _binop_edits(node: ast.BinOp):
    """The operator changed, the operands swapped, and a tile added or taken."""
    if type(node.op) in ARITH:
        new = ARITH[type(node.op)]
        yield (
            "arith",
            f"`{_code(node)}`: `{_op(type(node.op))}` made `{_op(new)}`",
            lambda n, new=new: setattr(n, "op", new()),
        )
    if isinstance(node.op, NON_COMMUTATIVE):

        def swap(n):
            n.left, n.right = n.right, n.left

        yield "swap", f"`{_code(node)}`: operands swapped", swap
    for block in _blocks(node):
        for sign, op in (("+", ast.Add), ("-", ast.Sub)):

            def tile(n, op=op, block=block):
                inner = copy.deepcopy(n)
                n.left, n.op, n.right = inner, op(), ast.Name(block, ast.Load())

            yield "tile", f"`{_code(node)}` {sign} {block}", tile


def _const_edits(node: ast.Constant):
    value = node.value
    if isinstance(value, int):
        changes = [value + 1, value - 1]
    else:
        changes = [value * 2, value / 2]
    for new in changes:
        yield (
            "const",
            f"`{value!r}` made `{new!r}`",
            lambda n, new=new: setattr(n, "value", new),
        )


def _call_edits(node: ast.Call):
    """tl.where's branches swapped, and tl.dot's precision lowered to tf32."""
    name = _code(node.func)
    if name == "tl.where" and len(node.args) == 3:

        def branches(n):
            n.args[1], n.args[2] = n.args[2], n.args[1]

        yield "where", f"`{_code(node)}`: branches swapped", branches
    if name == "tl.dot" and not any(k.arg == "input_precision" for k in node.keywords):

        def tf32(n):
            n.keywords.append(ast.keyword("input_precision", ast.Constant("tf32")))

        yield "precision", f'`{_code(node)}`: input_precision="tf32"', tf32


def _node_edits(node: ast.AST):
    """(operator, change, apply) for every single change of one node; ``apply(n)`` makes it
    on ``n``, the node at the same place in a copy."""
    if isinstance(node, ast.Compare):
        yield from _compare_edits(node)
    if isinstance(node, ast.BinOp):
        yield from _binop_edits(node)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        yield from _const_edits(node)
    if isinstance(node, ast.Call):
        yield from _call_edits(node)
    if isinstance(node, ast.Compare):
        yield from _clamp_edits(node)


def _edits(tree: ast.Module):
    """(operator, change, edit) for every single change of ``tree``; ``edit(copy)`` applies it
    to a deep copy of the tree (nodes are found again by their position in a walk)."""
    nodes = list(ast.walk(tree))

    def at(index, apply):
        def edit(clone):
            apply(list(ast.walk(clone))[index])

        return edit

    for i, node in enumerate(nodes):
        for operator, change, apply in _node_edits(node):
            yield operator, change, at(i, apply)


def _op(cls) -> str:
    return {
        ast.Lt: "<",
        ast.LtE: "<=",
        ast.Gt: ">",
        ast.GtE: ">=",
        ast.Eq: "==",
        ast.NotEq: "!=",
        ast.Add: "+",
        ast.Sub: "-",
        ast.Mult: "*",
        ast.Div: "/",
        ast.FloorDiv: "//",
    }[cls]


def _regions(code: str | tuple[str, ...]) -> tuple[str, ...]:
    return (code,) if isinstance(code, str) else tuple(code)


def mutants_of(spec: specs.Spec) -> list[Mutant]:
    """Every mutant of every TODO region of ``spec``'s reference code."""
    found = []
    for todo, reference in spec.reference.items():
        regions = _regions(reference)
        for r, region in enumerate(regions):
            tree = ast.parse(region.strip("\n"))
            for operator, change, edit in _edits(tree):
                clone = copy.deepcopy(tree)
                edit(clone)
                mutated = ast.unparse(clone)
                if mutated == ast.unparse(tree):
                    continue
                code = regions[:r] + (mutated,) + regions[r + 1 :]
                found.append(Mutant(spec.exercise.stem, todo, operator, _join(code), change))
            for s, stmt in enumerate(tree.body):
                kept = [b for k, b in enumerate(tree.body) if k != s]
                mutated = ast.unparse(ast.Module(kept, [])) if kept else ""
                code = regions[:r] + (mutated,) + regions[r + 1 :]
                change = f"statement `{_code(stmt)[:60]}` left out"
                found.append(Mutant(spec.exercise.stem, todo, "drop", _join(code), change))
    unique: dict = {}
    for m in found:
        unique.setdefault((m.todo, m.code), m)
    counts: dict[str, int] = {}
    numbered = []
    for m in unique.values():
        counts[m.todo] = counts.get(m.todo, 0) + 1
        numbered.append(replace(m, number=counts[m.todo]))
    return numbered


def _join(code: tuple[str, ...]) -> str:
    return "\n# region\n".join(code)


def _fills(mutant: Mutant) -> dict:
    parts = tuple(mutant.code.split("\n# region\n"))
    return {mutant.todo: parts[0] if len(parts) == 1 else parts}


# ---- equivalents --------------------------------------------------------------------------------


def equivalents(path: Path = EQUIVALENTS) -> dict[tuple[str, str, str], str]:
    """``{(stem, todo, code): reason}`` from the committed list."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    if not path.is_file():
        return {}
    data = tomllib.loads(path.read_text())
    found = {}
    for entry in data.get("equivalent", []):
        stem = find(entry["exercise"]).stem
        if not entry.get("reason", "").strip():
            raise ValueError(f"{path.name}: {stem} {entry['todo']}: an equivalent needs a reason")
        found[(stem, entry["todo"], entry["code"].strip())] = entry["reason"].strip()
    return found


# ---- grading --------------------------------------------------------------------------------------


@dataclass
class Outcome:
    mutant: Mutant
    verdict: str  # killed | equivalent | survived | broken
    score: str
    why: str = ""


def run(
    stems: list[str], backend: str, jobs: int, timeout: float | None, on_done=None
) -> list[Outcome]:
    from grader.validate import cli as validate

    known = equivalents()
    rows, pairs = [], []
    for stem in stems:
        spec = specs.load(stem, "hidden")
        sk = skeletons.pristine(stem)
        for m in mutants_of(spec):
            row = validate.Row(
                m.label, spec.exercise, Expect(score="less", integrity=None), why=m.change
            )
            try:
                row.source = gallery.fill(sk, {**spec.reference, **_fills(m)}, m.label)
            except gallery.GalleryError as exc:
                row.problems.append(str(exc))
            rows.append(row)
            pairs.append((m, row))
    outcomes: dict[int, Outcome] = {}

    def done(row):
        m = next(m for m, r in pairs if r is row)
        outcomes[id(row)] = outcome = _outcome(m, row, known)
        if on_done:
            on_done(outcome)

    validate.grade_rows(rows, backend, jobs, timeout, on_done=done)
    return [outcomes[id(r)] for _, r in pairs]


def _outcome(m: Mutant, row, known: dict) -> Outcome:
    res = row.result
    if res is None:
        return Outcome(m, "broken", "-", "; ".join(row.problems))
    score = f"{res.score}/{res.max_score}"
    if res.score < res.max_score:
        return Outcome(m, "killed", score)
    reason = known.get((m.stem, m.todo, m.code.strip()))
    if reason:
        return Outcome(m, "equivalent", score, reason)
    return Outcome(m, "survived", score)


# ---- reporting ---------------------------------------------------------------------------------


def summary(outcomes: list[Outcome]) -> dict[str, dict[str, int]]:
    table: dict[str, dict[str, int]] = {}
    for o in outcomes:
        row = table.setdefault(
            o.mutant.stem, {"mutants": 0, "killed": 0, "equivalent": 0, "survived": 0, "broken": 0}
        )
        row["mutants"] += 1
        row[o.verdict] += 1
    return table


def markdown(table: dict, backend: str, device: str, seconds: float, jobs: int) -> str:
    lines = [
        f"Backend `{backend}` ({device}), {jobs} at a time, {seconds:.0f} s.",
        "",
        "| exercise | mutants | killed | equivalent | survived |",
        "|---|---|---|---|---|",
    ]
    total = dict.fromkeys(("mutants", "killed", "equivalent", "survived"), 0)
    for stem, row in table.items():
        lines.append(
            f"| {stem} | {row['mutants']} | {row['killed']} | {row['equivalent']} | "
            f"{row['survived'] + row['broken']} |"
        )
        for key in total:
            total[key] += row[key] + (row["broken"] if key == "survived" else 0)
    lines.append(
        f"| all | {total['mutants']} | {total['killed']} | {total['equivalent']} | "
        f"{total['survived']} |"
    )
    return "\n".join(lines) + "\n"


def write_summary(text: str, backend: str, path: Path = SUMMARY) -> None:
    """Replace this backend's section of docs/mutants.md (between its markers)."""
    begin, end = f"<!-- BEGIN mutants: {backend} -->", f"<!-- END mutants: {backend} -->"
    page = path.read_text() if path.is_file() else ""
    block = f"{begin}\n{text}{end}"
    if begin in page and end in page:
        page = re.sub(re.escape(begin) + r".*?" + re.escape(end), lambda _: block, page, flags=re.S)
    else:
        page = page.rstrip("\n") + f"\n\n{block}\n"
    path.write_text(page)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m grader.validate.mutants", description=__doc__.split("\n")[0]
    )
    p.add_argument("exercises", nargs="*", metavar="EXERCISE", help="default: every exercise")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="mutants graded at once")
    p.add_argument("--device", choices=("auto", "cuda", "interpreter"), default="auto")
    p.add_argument("--timeout", type=float, help="seconds per mutant")
    p.add_argument("--list", action="store_true", help="list the mutants and exit")
    p.add_argument(
        "--summary", action="store_true", help="rewrite this backend's table in docs/mutants.md"
    )
    args = p.parse_args(argv)
    try:
        stems = [find(n).stem for n in args.exercises] or [ex.stem for ex in ALL_EXERCISES]
    except KeyError as exc:
        print(f"mutants: {exc.args[0]}", file=sys.stderr)
        return 2
    if args.list:
        for stem in stems:
            for m in mutants_of(specs.load(stem, "hidden")):
                print(f"{m.label:<26} {m.operator:<8} {m.change}")
        return 0
    from grader.run import process
    from kata import runtime

    runtime.configure(args.device)
    process.contain()
    count = sum(len(mutants_of(specs.load(s, "hidden"))) for s in stems)
    print(
        f"Mutating the TODO regions of {len(stems)} exercise(s): {count} mutants, graded on "
        f"{runtime.describe()}, {args.jobs} at a time",
        flush=True,
    )
    start = time.monotonic()

    def show(o: Outcome) -> None:
        if o.verdict != "killed":
            print(
                f"  {o.verdict.upper():<10} {o.mutant.label:<26} {o.score:>6}  {o.mutant.change}"
                + (f"  ({o.why})" if o.why else ""),
                flush=True,
            )

    outcomes = run(stems, runtime.BACKEND, args.jobs, args.timeout, on_done=show)
    process.reap(spare=False)
    seconds = time.monotonic() - start
    table = summary(outcomes)
    text = markdown(table, runtime.BACKEND, runtime.describe(), seconds, args.jobs)
    print(text)
    if args.summary:
        write_summary(text, runtime.BACKEND)
    bad = [o for o in outcomes if o.verdict in ("survived", "broken")]
    print(
        f"{'mutants: all killed or equivalent' if not bad else f'{len(bad)} SURVIVED'} "
        f"({seconds:.0f} s)"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
