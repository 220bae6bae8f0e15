"""The graded artifact: the pristine skeleton with the student's TODO region bodies spliced in.

A submission is its TODO regions. Given code is the skeleton's, never the student's: what a
student changed outside the regions is reported and never run. Regions are found on syntax
trees, not lines or tokens, so a formatter (black, ruff format, autopep8), an import sorter,
tabs, comments, line ends and docstring re-wrapping are not edits.

How: every statement block of the skeleton is a sequence of *given* statements with *slots*
where its regions sit. The student's block of the same place is aligned with it (a small
dynamic programme: a given statement matches an equal one for free, a changed one of the same
kind for 1, is dropped for 1; a student statement goes into a slot for free, anywhere else for
1), compound statements are matched by their headers and aligned inside in turn, and each slot
takes the student statements that fell into it. Those are written back with ``ast.unparse`` at
the region's indentation in the skeleton's own text: comments, strings' spelling and layout
tricks do not travel, only the statements.
"""

from __future__ import annotations

import ast
import copy
import functools
from dataclasses import dataclass, field

from kata.regions import TODO, Region, Skeleton

BLOCK_FIELDS = ("body", "orelse", "finalbody")


class SpliceError(ValueError):
    """The submission is not Python: ``reason`` and ``line`` say why and where."""

    def __init__(self, reason: str, line: int | None = None):
        super().__init__(reason)
        self.reason, self.line = reason, line

    def describe(self, name: str) -> str:
        where = f" (line {self.line} of {name})" if self.line else ""
        return f"{name} is not valid Python: {self.reason}{where}"


@dataclass(frozen=True)
class Change:
    """Given code the student changed, which the grader did not run."""

    line: int  # in the submission
    kind: str  # "changed", "added", "removed"
    todo: str | None  # the nearest TODO, to say where to write instead
    old: str = ""  # the skeleton's statement (one line), "" for added code
    new: str = ""  # the student's statement (one line), "" for removed code


@dataclass
class Spliced:
    text: str  # the file the grader runs
    lines: dict[int, int]  # its line -> the submission's line, where one corresponds
    regions: dict[str, list[list[int]]]  # TODO -> [first, last] of the submission, per region
    graded: dict[str, list[list[int]]]  # TODO -> [first, last] of ``text``, per region
    changes: list[Change] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # TODOs whose place was not found

    @property
    def ok(self) -> bool:
        return not self.changes


# ---- the skeleton's slots ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Slot:
    region: Region
    indent: str


def _blocks(node: ast.AST):
    """Every statement list directly under ``node``."""
    for name in BLOCK_FIELDS:
        block = getattr(node, name, None)
        if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
            yield name, block
    for n, handler in enumerate(getattr(node, "handlers", []) or []):
        yield f"handlers[{n}]", handler.body
    for n, case in enumerate(getattr(node, "cases", []) or []):
        yield f"cases[{n}]", case.body


def _all_blocks(tree: ast.AST):
    todo = [tree]
    while todo:
        node = todo.pop()
        for _, block in _blocks(node):
            yield block
            todo += block


def _indent(text_lines: list[str], line: int) -> str:
    s = text_lines[line - 1]
    return s[: len(s) - len(s.lstrip())]


@functools.lru_cache(maxsize=32)
def _layout(sk: Skeleton) -> tuple[ast.Module, dict[int, list], dict[Region, _Slot]]:
    """The skeleton's tree, and per block (by id) its items: given statements and slots."""
    tree = ast.parse(sk.text)
    text_lines = sk.text.splitlines()
    empty_at: dict[tuple[int, int], list[Region]] = {}  # (block id, position) -> empty regions
    for r in sorted(sk.regions, key=lambda r: r.start):
        if r.end >= r.start:
            continue
        # Lines go in before ``start``, at the indentation of the TODO comment above, after the
        # statement of that indentation that ends last before it.
        indent = len(_indent(text_lines, r.start - 1))
        best = None
        for block in _all_blocks(tree):
            for n, s in enumerate(block):
                if s.col_offset == indent and s.end_lineno < r.start:
                    if best is None or s.end_lineno > best[2]:
                        best = (id(block), n + 1, s.end_lineno)
        if best is None:
            raise ValueError(f"no place for the empty region of TODO({r.todo}) at line {r.start}")
        empty_at.setdefault(best[:2], []).append(r)
    items: dict[int, list] = {}
    slots: dict[Region, _Slot] = {}
    for block in _all_blocks(tree):
        indent = _indent(text_lines, block[0].lineno)
        seq: list = []
        for n in range(len(block) + 1):
            for r in empty_at.get((id(block), n), []):
                slots[r] = _Slot(r, indent)
                seq.append(slots[r])
            if n == len(block):
                break
            s = block[n]
            owner = next(
                (r for r in sk.regions if r.start <= s.lineno and s.end_lineno <= r.end), None
            )
            if owner is None:
                seq.append(s)
            elif owner not in slots:
                slots[owner] = _Slot(owner, indent)
                seq.append(slots[owner])
        items[id(block)] = seq
    lost = [r for r in sk.regions if r not in slots]
    if lost:
        raise ValueError(f"TODO({lost[0].todo})'s region at line {lost[0].start} is no statement")
    return tree, items, slots


# ---- keys: what makes two statements the same --------------------------------------------------


def _header(node: ast.stmt) -> ast.stmt:
    """A compound statement without its blocks."""
    bare = copy.copy(node)
    for name in BLOCK_FIELDS:
        if isinstance(getattr(bare, name, None), list):
            setattr(bare, name, [])
    if getattr(bare, "handlers", None):
        bare.handlers = [ast.ExceptHandler(h.type, h.name, []) for h in bare.handlers]
    if getattr(bare, "cases", None):
        bare.cases = [ast.match_case(c.pattern, c.guard, []) for c in bare.cases]
    return bare


def _compound(node: ast.stmt) -> bool:
    return any(True for _ in _blocks(node))


def _is_doc(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def _key(node) -> str:
    if _is_doc(node):  # a formatter re-wraps docstrings; a string statement does nothing
        return "<docstring>"
    return ast.dump(_header(node) if _compound(node) else node, include_attributes=False)


def _kind(node) -> tuple:
    """Statements of one kind: a changed given statement is matched to one of its kind."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return (type(node).__name__, node.name)
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        targets = getattr(node, "targets", None) or [node.target]
        return (type(node).__name__, *(ast.dump(t) for t in targets))
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        return ("call", ast.dump(node.value.func))
    return (type(node).__name__,)


def _names(stmts: list) -> set[tuple]:
    """What imports bind, one key per imported name."""
    return {
        (
            type(s).__name__,
            getattr(s, "module", None) or "",
            getattr(s, "level", 0),
            a.name,
            a.asname,
        )
        for s in stmts
        for a in s.names
    }


# ---- alignment ---------------------------------------------------------------------------------

_FREE, _CHANGED, _GONE, _STRAY = 0, 1, 1, 1


def _align(items: list, theirs: list) -> list[tuple]:
    """Ops aligning the skeleton's ``items`` with the student's statements ``theirs``:
    ("=", item, stmt), ("~", item, stmt) changed, ("-", item, None) removed, ("slot", slot, stmt),
    ("+", None, stmt) added outside any slot."""
    n, m = len(items), len(theirs)
    keys = [None if isinstance(x, _Slot) else _key(x) for x in items]
    kinds = [None if isinstance(x, _Slot) else _kind(x) for x in items]
    their_keys = [_key(s) for s in theirs]
    their_kinds = [_kind(s) for s in theirs]
    inf = float("inf")
    cost = [[inf] * (m + 1) for _ in range(n + 1)]
    cost[n][m] = 0
    for i in range(n, -1, -1):
        for j in range(m, -1, -1):
            if i == n and j == m:
                continue
            best = inf
            slot = i < n and isinstance(items[i], _Slot)
            if j < m:  # the student's statement j goes into slot i, or stands outside
                best = min(best, cost[i][j + 1] + (_FREE if slot else _STRAY))
            if i < n:
                if slot:
                    best = min(best, cost[i + 1][j])
                else:
                    best = min(best, cost[i + 1][j] + _GONE)
                    if j < m and keys[i] == their_keys[j]:
                        best = min(best, cost[i + 1][j + 1])
                    elif j < m and kinds[i] == their_kinds[j]:
                        best = min(best, cost[i + 1][j + 1] + _CHANGED)
            cost[i][j] = best
    ops, i, j = [], 0, 0
    while i < n or j < m:
        slot = i < n and isinstance(items[i], _Slot)
        here = cost[i][j]
        changed = (
            i < n
            and not slot
            and j < m
            and kinds[i] == their_kinds[j]
            and here == cost[i + 1][j + 1] + _CHANGED
        )
        if i < n and not slot and j < m and keys[i] == their_keys[j] and here == cost[i + 1][j + 1]:
            ops.append(("=", items[i], theirs[j]))
            i, j = i + 1, j + 1
        elif changed and keys[i] != their_keys[j]:  # a tie: a changed given line, not region code
            ops.append(("~", items[i], theirs[j]))
            i, j = i + 1, j + 1
        elif slot and here == cost[i + 1][j]:  # a tie: the slot ends, given code is matched
            i += 1
        elif slot and j < m and here == cost[i][j + 1]:
            ops.append(("slot", items[i], theirs[j]))
            j += 1
        elif (
            i < n
            and not slot
            and j < m
            and kinds[i] == their_kinds[j]
            and here == cost[i + 1][j + 1] + _CHANGED
        ):
            ops.append(("~", items[i], theirs[j]))
            i, j = i + 1, j + 1
        elif i < n and not slot and here == cost[i + 1][j] + _GONE:
            ops.append(("-", items[i], None))
            i += 1
        else:
            ops.append(("+", None, theirs[j]))
            j += 1
    return ops


def _one_line(node) -> str:
    text = ast.unparse(_header(node) if _compound(node) else node)
    first = text.splitlines()[0] if text else ""
    return first if len(first) <= 72 else first[:69] + "..."


class _Walk:
    def __init__(self, items: dict[int, list], comments: dict[str, list[int]]):
        self.items = items
        self.comments = comments  # TODO id -> lines of the submission where its comment is
        self.found: dict[Region, list] = {}  # region -> the student's statements
        self.seen: set[Region] = set()  # regions whose block was matched
        self.changes: list[tuple] = []  # (kind, skeleton node, student node)
        self.pairs: list[tuple] = []  # (skeleton node, student node) matched

    def block(self, mine: list, theirs: list, module: bool = False) -> None:
        items = self.items.get(id(mine), mine)
        # A module's imports compare as a set, wherever they stand: an import sorter merges and
        # reorders them, autopep8 moves them to the top. (In a function, an import is code.)
        imports = (ast.Import, ast.ImportFrom) if module else ()
        ours_in = [s for s in items if isinstance(s, imports)]
        theirs_in = [s for s in theirs if isinstance(s, imports)]
        ours_keys, their_keys = _names(ours_in), _names(theirs_in)
        for stmt in ours_in:
            if any(k not in their_keys for k in _names([stmt])):
                self.changes.append(("removed", stmt, None))
        for stmt in theirs_in:
            if any(k not in ours_keys for k in _names([stmt])):
                self.changes.append(("added", None, stmt))
        items = [s for s in items if s not in ours_in]
        theirs = [s for s in theirs if s not in theirs_in]
        for x in items:
            if isinstance(x, _Slot):
                self.seen.add(x.region)
                self.found.setdefault(x.region, [])
        for op, ours, stmt in _align(items, theirs):
            if op == "slot":
                self.found[ours.region].append(stmt)
            elif op in ("=", "~"):
                if op == "~" and _key(ours) != _key(stmt):
                    self.changes.append(("changed", ours, stmt))
                self.match(ours, stmt)
            elif op == "-":
                self.changes.append(("removed", ours, None))
            else:
                self.changes.append(("added", None, stmt))
        self._split_adjacent(items)

    def _split_adjacent(self, items: list) -> None:
        """Slots with no given statement between them (09's dest-slot and capacity-drop) take
        all their statements in the first: the code is the same either way, but each statement
        belongs to the last of them whose TODO comment stands above it in the submission."""
        run: list[_Slot] = []
        for x in [*items, None]:
            if isinstance(x, _Slot):
                run.append(x)
                continue
            if len(run) > 1:
                stmts = [s for slot in run for s in self.found[slot.region]]
                for slot in run:
                    self.found[slot.region] = []
                for s in stmts:
                    above = [
                        (line, k)
                        for k, slot in enumerate(run)
                        for line in self.comments.get(slot.region.todo, [])
                        if line < s.lineno
                    ]
                    self.found[run[max(above)[1] if above else 0].region].append(s)
            run = []

    def match(self, ours, stmt) -> None:
        self.pairs.append((ours, stmt))
        mine = dict(_blocks(ours))
        their = dict(_blocks(stmt))
        for name, block in mine.items():
            self.block(block, their.get(name, []))


# ---- the splice --------------------------------------------------------------------------------


def _parse(text: str) -> ast.Module:
    try:
        return ast.parse(text)
    except SyntaxError as exc:
        raise SpliceError(f"SyntaxError: {exc.msg}", exc.lineno) from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise SpliceError(f"{type(exc).__name__}: {exc}") from None


def _unparsed(stmts: list, indent: str) -> tuple[list[str], list[int | None]]:
    """``stmts`` written out at ``indent``; per line written, the submission's line it comes from."""
    stmts = [s for s in stmts if not _is_doc(s)]  # a string alone on its line does nothing
    if not stmts:  # an empty region: a block must keep a statement
        return [indent + "pass\n"], [None]
    out, origin = [], []
    for stmt in stmts:
        text = ast.unparse(stmt)
        again = ast.parse(text).body[0]
        where: dict[int, int] = {}
        for new, old in zip(ast.walk(again), ast.walk(stmt)):
            line = getattr(new, "lineno", None)
            if line is not None and line not in where:
                where[line] = old.lineno
        for n, line in enumerate(text.splitlines(), 1):
            out.append(indent + line + "\n")
            origin.append(where.get(n, stmt.lineno))
    return out, origin


def _nearest_todo(sk: Skeleton, line: int) -> str | None:
    """The TODO of the region nearest to skeleton line ``line``."""
    if not sk.regions:
        return None
    return min(sk.regions, key=lambda r: min(abs(line - r.start), abs(line - r.end))).todo


def splice(sk: Skeleton, text: str) -> Spliced:
    """The file the grader runs for submission ``text`` of skeleton ``sk``."""
    theirs = _parse(text)
    tree, items, slots = _layout(sk)
    comments: dict[str, list[int]] = {}
    for n, line in enumerate(text.split("\n"), 1):
        todo = TODO.match(line)
        if todo:
            comments.setdefault(todo.group(1), []).append(n)
    walk = _Walk(items, comments)
    walk.block(tree.body, theirs.body, module=True)
    out = sk.text.splitlines(keepends=True)
    origin: list[int | None] = [None] * len(out)
    for ours, stmt in walk.pairs:  # given lines map to the student's lines they match
        for k in range(ours.lineno, ours.end_lineno + 1):
            origin[k - 1] = min(stmt.lineno + (k - ours.lineno), stmt.end_lineno)
    missing, student_regions = [], {}
    ordered = sorted(sk.regions, key=lambda r: r.start, reverse=True)
    for r in ordered:
        slot = slots[r]
        empty = r.end < r.start
        if r in walk.seen:
            stmts = walk.found.get(r, [])
        else:  # its block is gone: the skeleton's own lines stand, and the report says so
            missing.append(r.todo)
            continue
        new, where = _unparsed(stmts, slot.indent)
        lo, hi = (r.start - 1, r.start - 1) if empty else (r.start - 1, r.end)
        out[lo:hi] = new
        origin[lo:hi] = where
    # Each region's lines in the graded text, top down (earlier regions shift later ones).
    graded: dict[str, list[list[int]]] = {}
    shift = 0
    for r in sorted(sk.regions, key=lambda r: r.start):
        size = r.end - r.start + 1 if r.end >= r.start else 0
        stmts = walk.found.get(r, []) if r in walk.seen else None
        count = size if stmts is None else len(_unparsed(stmts, "")[0])
        first = r.start + shift
        graded.setdefault(r.todo, []).append([first, first + count - 1])
        shift += count - size
        if stmts:
            student_regions.setdefault(r.todo, []).append(
                [min(s.lineno for s in stmts), max(s.end_lineno for s in stmts)]
            )
        else:
            student_regions.setdefault(r.todo, [])
    result = "".join(out)
    changes = []
    for kind, ours, stmt in walk.changes:
        line = (stmt or ours).lineno
        at = ours.lineno if ours is not None else _skeleton_line(walk.pairs, stmt)
        changes.append(
            Change(
                line=stmt.lineno if stmt is not None else _student_line(walk.pairs, ours),
                kind=kind,
                todo=_nearest_todo(sk, at or line),
                old=_one_line(ours) if ours is not None else "",
                new=_one_line(stmt) if stmt is not None else "",
            )
        )
    lines = {n: s for n, s in enumerate(origin, 1) if s is not None}
    return Spliced(
        text=result,
        lines=lines,
        regions=student_regions,
        graded=graded,
        changes=sorted(changes, key=lambda c: c.line),
        missing=sorted(set(missing)),
    )


def _skeleton_line(pairs: list, stmt) -> int | None:
    """The skeleton line of the matched statement just above student statement ``stmt``."""
    above = [ours.end_lineno for ours, s in pairs if s.end_lineno < stmt.lineno]
    return max(above, default=None)


def _student_line(pairs: list, ours) -> int:
    """The student's line just after where skeleton statement ``ours`` was."""
    above = [s.end_lineno for o, s in pairs if o.end_lineno < ours.lineno]
    return max(above, default=0) + 1
