"""The pristine skeletons (frozen in ``kata/skeletons.json`` by ``nox -s generate``) and what a
submission changed outside the regions a student is meant to edit.

The grader, ``nox -s reset``, and the validation galleries all read the skeletons from here, so
none of them depends on ``solutions/`` still holding the kata's own reference kernels.
"""

from __future__ import annotations

import ast
import difflib
import functools
import io
import json
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

from kata.regions import SKELETONS, TODO, Region, Skeleton


class SkeletonError(LookupError):
    pass


@functools.cache
def _frozen(path: Path = SKELETONS) -> dict:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise SkeletonError(f"{path} is missing: run `nox -s generate`") from None


def pristine(stem: str) -> Skeleton:
    """The untouched skeleton of exercise ``stem`` with its regions."""
    entry = _frozen().get(stem)
    if entry is None:
        raise SkeletonError(f"no frozen skeleton for {stem}: run `nox -s generate`")
    return Skeleton(
        entry["text"],
        tuple(Region(**r) for r in entry["regions"]),
        tuple(tuple(c) for c in entry["comments"]),
    )


# ---- integrity: changes outside the TODO regions ----------------------------------------------
#
# A submission is compared with its skeleton token by token (``tokenize``), not line by line: a
# string, comment or bracket opened in one TODO region and closed in the next leaves every given
# line textually in place, but turns the given code between them into other tokens. Comments,
# blank lines, line breaks inside brackets, the spelling of indentation and of string quotes do
# not count, so reformatting is not an edit. Each token carries its block and bracket depth, so
# indenting given code under an inserted ``if`` changes it too.


@dataclass
class Integrity:
    """What a submission changed outside the regions it may edit, and where its region code is."""

    lines: list[int] = field(default_factory=list)  # skeleton line numbers touched
    diff: str = ""  # a short unified diff of those changes
    edited: list[int] = field(default_factory=list)  # submission lines that hold those changes
    todo_lines: dict[int, str] = field(default_factory=dict)  # submission line -> its TODO id
    by_tokens: bool = True  # False: the submission does not tokenize, so lines were compared
    # Each TODO's regions as lines of the submission: from the line after the given code above
    # the region to the line before the given code below it (its TODO comment included), where
    # the student may write. Skeleton lines when the submission does not tokenize.
    regions: dict[str, list[list[int]]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.lines

    def describe(self) -> str:
        if self.ok:
            return "only the TODO regions were edited"
        shown = ", ".join(str(n) for n in self.lines[:8]) + (" ..." if len(self.lines) > 8 else "")
        return f"changed outside the TODO regions, at skeleton line(s) {shown}"


def _editable(sk: Skeleton) -> set[int]:
    lines = set()
    for r in sk.regions:
        lines.update(range(r.start, r.end + 1))
    for first, last in sk.comments:
        lines.update(range(first, last + 1))
    return lines


def _gap_is_editable(sk: Skeleton, editable: set[int], before: int, after: int) -> bool:
    """Lines may be added between skeleton lines ``before`` and ``after`` when the gap holds an
    editable line or an empty region."""
    if any(n in editable for n in range(before, after + 1)):
        return True
    return any(r.end == r.start - 1 and before < r.start <= after for r in sk.regions)


def _todo_near(sk: Skeleton, first: int, last: int) -> str | None:
    """The TODO whose region (or, failing that, comment block) lies within lines first..last."""
    for r in sk.regions:
        if first <= r.end and r.start <= last or r.end == r.start - 1 and first < r.start <= last:
            return r.todo
    lines = sk.text.splitlines()
    for top, bottom in sk.comments:
        if first <= bottom and top <= last:
            return TODO.match(lines[top - 1]).group(1)
    return None


# -- tokens --

_IGNORED = frozenset({tokenize.COMMENT, tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER})
_CLAUSES = frozenset({"else", "elif", "except", "finally"})


@dataclass(frozen=True)
class _Tokens:
    keys: tuple[tuple, ...]  # (type, text, block depth, bracket depth) of every code token
    first: tuple[int, ...]  # the line each token starts on
    last: tuple[int, ...]  # and ends on (a string may span lines)
    # A clause keyword's token (else, elif, ...) -> the first token of the line it continues: an
    # ``if False:`` slipped in before a given ``else:`` would take the ``else`` over unseen.
    partner: dict[int, int]


@functools.lru_cache(maxsize=512)
def _literal(token: str) -> str:
    """A string token by its value, so that quoting styles compare equal."""
    try:
        return repr(ast.literal_eval(token))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return token  # an f-string, or an unterminated string


def _tokenize(text: str) -> _Tokens:
    keys, first, last, partner = [], [], [], {}
    depth = brackets = 0
    above: list[tuple[int, int]] = []  # (depth, first token) of the logical lines still open
    line_start = True
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        kind, s = tok.type, tok.string
        if kind == tokenize.INDENT or kind == tokenize.DEDENT:
            depth += 1 if kind == tokenize.INDENT else -1
            continue
        if kind in _IGNORED:
            continue
        if kind == tokenize.NEWLINE:
            s = ""
        elif kind == tokenize.STRING:
            s = _literal(s)
        elif kind == tokenize.OP and s in (")", "]", "}"):
            brackets -= 1
        n = len(keys)
        if line_start:
            while above and above[-1][0] > depth:
                above.pop()
            previous = above.pop()[1] if above and above[-1][0] == depth else -1
            if kind == tokenize.NAME and s in _CLAUSES:
                partner[n] = previous
            above.append((depth, n))
            line_start = False
        keys.append((kind, s, depth, brackets))
        first.append(tok.start[0])
        last.append(tok.end[0])
        if kind == tokenize.OP and s in ("(", "[", "{"):
            brackets += 1
        elif kind == tokenize.NEWLINE:
            line_start = True
    return _Tokens(tuple(keys), tuple(first), tuple(last), partner)


@dataclass(frozen=True)
class _Frame:
    """A skeleton's tokens and where a submission may differ from them."""

    tokens: _Tokens
    editable: tuple[bool, ...]  # per token: on a region or TODO comment line
    open: tuple[bool, ...]  # per gap g, just before token g (n + 1 gaps): code may go in there
    token_todo: tuple[str | None, ...]
    gap_todo: tuple[str | None, ...]
    segments: tuple[tuple[int, int], ...]  # [start, end) runs of given tokens, each kept whole
    lines: tuple[range, ...]  # the tokens of each logical line


@functools.lru_cache(maxsize=32)
def _frame(sk: Skeleton) -> _Frame:
    tokens = _tokenize(sk.text)
    n, total = len(tokens.keys), len(sk.text.splitlines())
    lines = _editable(sk)
    editable = tuple(line in lines for line in tokens.first)
    token_todo = tuple(_todo_near(sk, t, t) if e else None for t, e in zip(tokens.first, editable))
    spans = [
        (tokens.last[g - 1] if g else 0, tokens.first[g] if g < n else total + 1)
        for g in range(n + 1)
    ]
    gap_open = tuple(_gap_is_editable(sk, lines, *span) for span in spans)
    gap_todo = tuple(_todo_near(sk, *span) if o else None for span, o in zip(spans, gap_open))
    segments, start = [], None
    for i in range(n + 1):
        # A run of given tokens ends where an editable token or an open gap comes.
        if start is not None and (i == n or editable[i] or gap_open[i]):
            segments.append((start, i))
            start = None
        if i < n and not editable[i] and start is None:
            start = i
    return _Frame(
        tokens, editable, gap_open, token_todo, gap_todo, tuple(segments), _logical_lines(tokens)
    )


def _logical_lines(tokens: _Tokens) -> tuple[range, ...]:
    """Token ranges of the logical lines: each ends with its NEWLINE."""
    lines, start = [], 0
    for i, key in enumerate(tokens.keys):
        if key[0] == tokenize.NEWLINE:
            lines.append(range(start, i + 1))
            start = i + 1
    if start < len(tokens.keys):
        lines.append(range(start, len(tokens.keys)))
    return tuple(lines)


def _encode(*sequences: tuple) -> list[str]:
    """Each sequence of keys as a string, one character per distinct key: ``str.find`` and difflib
    then work on characters instead of tuples."""
    codes: dict = {}
    return ["".join(codes.setdefault(k, chr(0x10000 + len(codes))) for k in s) for s in sequences]


def _fit(frame: _Frame, a: str, b: str) -> dict[int, int] | None:
    """Skeleton token -> submission token for the given tokens, when the submission is the
    skeleton with code only in its editable places; None when it is not. The leftmost place of
    each run of given tokens leaves the most room for the runs after it, so greedy is exact."""
    found: dict[int, int] = {}
    pos, last = 0, len(frame.segments) - 1
    for k, (s, e) in enumerate(frame.segments):
        piece = a[s:e]
        if k == last and not frame.open[e]:  # nothing may follow the last run
            at = len(b) - len(piece) if b.endswith(piece) else -1
        else:
            at = b.find(piece, pos)
        if at < pos or k == 0 and not frame.open[s] and at != 0:  # nor precede the first
            return None
        found.update(zip(range(s, e), range(at, at + e - s)))
        pos = at + e - s
    return found


def _fit_ops(fit: dict[int, int], n: int, m: int) -> list[tuple[str, int, int]]:
    """A fit as ops: what lies between two given tokens replaces the (editable) skeleton tokens
    there, in the open gap just after the first of them."""
    ops: list[tuple[str, int, int]] = []
    i = j = 0
    for si, sj in sorted(fit.items()) + [(n, m)]:
        ops += [("-", k, -1) for k in range(i, si)] + [("+", i, k) for k in range(j, sj)]
        if si < n:
            ops.append(("=", si, sj))
        i, j = si + 1, sj + 1
    return ops


# -- alignment of a submission that is not a clean fit --

# A block of changed lines is aligned token by token when it is this small (a few lines); bigger
# blocks (a rewritten kernel) count as replaced whole.
DP_CELLS = 40_000


@dataclass
class _Run:
    """Consecutive differences: skeleton tokens gone, submission tokens come, and whether any of
    them breaks the rules (``bad``: the skeleton lines it touches)."""

    gone: list[int] = field(default_factory=list)
    come: list[int] = field(default_factory=list)
    bad: set[int] = field(default_factory=set)


def _by_cost(
    frame: _Frame, a: str, b: str, i0: int, i1: int, j0: int, j1: int
) -> list[tuple[str, int, int]]:
    """The cheapest alignment of a[i0:i1] with b[j0:j1]: dropping an editable token or adding
    one in an open gap is free, any other change costs 1. Ops: ("=", i, j), ("-", i, -1),
    ("+", gap, j)."""
    n, m = i1 - i0, j1 - j0
    drop = [0 if frame.editable[i] else 1 for i in range(i0, i1)]
    add = [0 if frame.open[g] else 1 for g in range(i0, i1 + 1)]
    cost = [[0] * (m + 1) for _ in range(n + 1)]
    for j in range(1, m + 1):
        cost[0][j] = cost[0][j - 1] + add[0]
    for i in range(1, n + 1):
        row, up, ai, di, gi = cost[i], cost[i - 1], a[i0 + i - 1], drop[i - 1], add[i]
        row[0] = up[0] + di
        for j in range(1, m + 1):
            best = up[j] + di
            if row[j - 1] + gi < best:
                best = row[j - 1] + gi
            if ai == b[j0 + j - 1] and up[j - 1] < best:
                best = up[j - 1]
            row[j] = best
    # Walking back from the end, a tie goes to dropping or adding: a changed line's tokens then
    # end with its own NEWLINE rather than borrow the one of the line above.
    ops, i, j = [], n, m
    while i or j:
        if i and cost[i][j] == cost[i - 1][j] + drop[i - 1]:
            ops.append(("-", i0 + i - 1, -1))
            i -= 1
        elif j and cost[i][j] == cost[i][j - 1] + add[i]:
            ops.append(("+", i0 + i, j0 + j - 1))
            j -= 1
        else:
            ops.append(("=", i0 + i - 1, j0 + j - 1))
            i, j = i - 1, j - 1
    return ops[::-1]


def _opcode_ops(op: tuple, frame: _Frame) -> list[tuple[str, int, int]]:
    """One difflib opcode as ops. What replaces given tokens is marked "~" (never region code);
    otherwise it counts as added in the opcode's first gap."""
    tag, i1, i2, j1, j2 = op
    if tag == "equal":
        return [("=", i, j) for i, j in zip(range(i1, i2), range(j1, j2))]
    added = "+" if all(frame.editable[i1:i2]) else "~"
    return [("-", i, -1) for i in range(i1, i2)] + [(added, i1, j) for j in range(j1, j2)]


def _align(frame: _Frame, a: str, b: str, mine: _Tokens) -> list[tuple[str, int, int]]:
    """Ops that turn the skeleton into the submission: logical lines are matched first (difflib),
    then the tokens of each changed block of lines by cost. Aligning tokens across the whole file
    would let common tokens (``tl``, ``.``, NEWLINE) pair with far-away ones and blame the wrong
    lines."""
    theirs, ours = frame.lines, _logical_lines(mine)
    la, lb = _encode(
        tuple(a[r.start : r.stop] for r in theirs), tuple(b[r.start : r.stop] for r in ours)
    )
    ops: list[tuple[str, int, int]] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, la, lb, autojunk=False).get_opcodes():
        a0 = theirs[i1].start if i1 < len(theirs) else len(a)
        a1 = theirs[i2 - 1].stop if i2 > i1 else a0
        b0 = ours[j1].start if j1 < len(ours) else len(b)
        b1 = ours[j2 - 1].stop if j2 > j1 else b0
        if tag == "equal":
            ops += [("=", i, j) for i, j in zip(range(a0, a1), range(b0, b1))]
        elif (a1 - a0 + 1) * (b1 - b0 + 1) <= DP_CELLS:
            ops += _by_cost(frame, a, b, a0, a1, b0, b1)
        else:
            ops += _opcode_ops((tag, a0, a1, b0, b1), frame)
    return ops


# -- the check --

MAX_DIFF_LINES = 24


def _span(first: tuple[int, ...], last: tuple[int, ...], tokens: list[int]) -> range:
    return range(min(first[t] for t in tokens), max(last[t] for t in tokens) + 1)


def _union(r: range, s: range) -> range:
    return range(min(r.start, s.start), max(r.stop, s.stop)) if r and s else r or s


def _diff(sk_lines: list[str], lines: list[str], hunks: list[tuple[int, range, range]]) -> str:
    """``hunks``: (first bad skeleton line, skeleton lines, submission lines); hunks that share
    lines are shown as one."""
    merged: list[list] = []
    for line, old, new in sorted(hunks, key=lambda h: (h[0], h[2].start)):
        top = merged[-1] if merged else None
        if top and (
            top[1]
            and old
            and old.start <= top[1].stop
            or top[2]
            and new
            and new.start <= top[2].stop
        ):
            top[1], top[2] = _union(top[1], old), _union(top[2], new)
        else:
            merged.append([line, old, new])
    out: list[str] = []
    for line, old, new in merged:
        out.append(f"@@ skeleton line {line} @@")
        out += [f"-{sk_lines[n - 1].rstrip()}" for n in old if sk_lines[n - 1].strip()]
        out += [
            f"+{lines[n - 1].rstrip()}" for n in new if n <= len(lines) and lines[n - 1].strip()
        ]
    if len(out) > MAX_DIFF_LINES:
        out = out[:MAX_DIFF_LINES] + [f"... ({len(out) - MAX_DIFF_LINES} more lines)"]
    return "\n".join(out)


def check(sk: Skeleton, text: str) -> Integrity:
    """What ``text`` (a submission) changed in skeleton ``sk`` outside its editable regions, and
    which of its lines hold TODO region code. Never raises: a submission that does not tokenize
    is compared line by line."""
    frame = _frame(sk)
    try:
        mine = _tokenize(text)
        a, b = _encode(frame.tokens.keys, mine.keys)
    except (tokenize.TokenError, SyntaxError, ValueError):  # not Python, or ~1M distinct tokens
        return _check_lines(sk, text)
    fit = _fit(frame, a, b)
    ops = _align(frame, a, b, mine) if fit is None else _fit_ops(fit, len(a), len(b))
    return _judge(sk, frame, mine, text, ops)


def _judge(sk: Skeleton, frame: _Frame, mine: _Tokens, text: str, ops: list) -> Integrity:
    theirs = frame.tokens
    matched: dict[int, int] = {}
    todo_lines: dict[int, str] = {}
    runs: list[_Run] = []
    run = _Run()
    for tag, i, j in ops + [("=", -1, -1)]:
        if tag == "=":
            if run.gone or run.come:
                runs.append(run)
                run = _Run()
            if i < 0:
                break
            matched[i] = j
            if frame.editable[i]:
                todo_lines.update(
                    dict.fromkeys(_span(mine.first, mine.last, [j]), frame.token_todo[i])
                )
            continue
        if tag == "-":
            run.gone.append(i)
            if not frame.editable[i]:
                run.bad.add(theirs.first[i])
        else:
            run.come.append(j)
            if tag == "+" and frame.open[i]:
                todo = frame.gap_todo[i]
                todo_lines.update(dict.fromkeys(_span(mine.first, mine.last, [j]), todo))
            elif tag == "+":
                run.bad.add(theirs.last[i - 1] if i else 1)
    for i, head in theirs.partner.items():  # a given clause must still continue its own header
        j = matched.get(i)
        if frame.editable[i] or j is None or head < 0 or frame.editable[head]:
            continue
        now = mine.partner.get(j, -1)
        if now != matched.get(head, -2):  # shown from the header it continues now
            runs.append(_Run(gone=[i], come=[now, j] if now >= 0 else [j], bad={theirs.first[i]}))
    touched, edited, hunks = set(), set(), []
    for run in runs:
        if not run.bad:
            continue
        touched |= run.bad
        new = _span(mine.first, mine.last, run.come) if run.come else range(0)
        old = _span(theirs.first, theirs.last, run.gone) if run.gone else range(0)
        edited.update(new)
        if not run.come:  # only removed: the submission's line that kept the rest of that line
            for line in run.bad:
                kept = [j for i, j in matched.items() if theirs.first[i] == line]
                edited.update(mine.first[j] for j in kept[:1])
        hunks.append((min(run.bad), old, new))
    for line in edited:  # a line that changed given code is not region code, whatever else it holds
        todo_lines.pop(line, None)
    diff = _diff(sk.text.splitlines(), text.splitlines(), hunks)
    todo_lines = {n: t for n, t in sorted(todo_lines.items()) if t is not None}
    places = _regions_in(sk, frame, mine, matched, text.splitlines())
    return Integrity(sorted(touched), diff, sorted(edited), todo_lines, regions=places)


def _regions_in(
    sk: Skeleton, frame: _Frame, mine: _Tokens, matched: dict[int, int], lines: list[str]
) -> dict[str, list[list[int]]]:
    """Each region of ``sk`` as [first, last] lines of the submission: between the given tokens
    that still frame it there (the nearest ones kept, where the student deleted some), without
    the comments and blank lines above it and the blank lines below."""
    theirs, found = frame.tokens, {}
    given = [i for i in sorted(matched) if not frame.editable[i]]

    def quiet(n: int) -> bool:
        return not lines[n - 1].strip() or lines[n - 1].lstrip().startswith("#")

    for r in sk.regions:
        before = [i for i in given if theirs.last[i] < r.start]
        after = [i for i in given if theirs.first[i] > max(r.end, r.start - 1)]
        first = mine.last[matched[before[-1]]] + 1 if before else 1
        last = mine.first[matched[after[0]]] - 1 if after else len(lines)
        while first < last and quiet(first):
            first += 1
        while last > first and not lines[last - 1].strip():
            last -= 1
        found.setdefault(r.todo, []).append([first, max(first, last)])
    return found


# -- a submission that does not tokenize: lines compared as text --


def _code_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of lines that hold code: blank and comment-only lines are left out,
    and trailing whitespace does not count."""
    found = []
    for n, line in enumerate(text.splitlines(), 1):
        bare = line.rstrip()
        if bare and not bare.lstrip().startswith("#"):
            found.append((n, bare))
    return found


def _check_lines(sk: Skeleton, text: str) -> Integrity:
    old, new = _code_lines(sk.text), _code_lines(text)
    editable = _editable(sk)
    total = len(sk.text.splitlines())
    touched: list[int] = []
    edited: list[int] = []
    todo_lines: dict[int, str] = {}
    hunks: list[str] = []
    matcher = difflib.SequenceMatcher(a=[b for _, b in old], b=[b for _, b in new], autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            continue
        before = old[i1 - 1][0] if i1 > 0 else 0
        after = old[i2][0] if i2 < len(old) else total + 1
        if i1 == i2:  # an insertion between two skeleton lines
            bad = [] if _gap_is_editable(sk, editable, before, after) else [max(before, 1)]
        else:
            bad = [old[i][0] for i in range(i1, i2) if old[i][0] not in editable]
        if not bad:
            todo = _todo_near(sk, before, after)
            todo_lines.update({n: todo for n, _ in new[j1:j2] if todo is not None})
            continue
        touched += bad
        edited += [n for n, _ in new[j1:j2]]
        hunks += [f"@@ skeleton line {bad[0]} @@"]
        hunks += [f"-{line}" for _, line in old[i1:i2]] + [f"+{line}" for _, line in new[j1:j2]]
    if len(hunks) > MAX_DIFF_LINES:
        hunks = hunks[:MAX_DIFF_LINES] + [f"... ({len(hunks) - MAX_DIFF_LINES} more lines)"]
    places: dict[str, list[list[int]]] = {}
    for r in sk.regions:  # no tokens to follow: the skeleton's own lines
        places.setdefault(r.todo, []).append([r.start, max(r.start, r.end)])
    return Integrity(
        sorted(set(touched)),
        "\n".join(hunks),
        edited,
        todo_lines,
        by_tokens=False,
        regions=places,
    )
