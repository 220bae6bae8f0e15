"""Grade a target folder, exercise by exercise, in two processes:

1. **Here**, the grading process: read each submission file once (its *snapshot*: everything
   below uses this text, never the file again); compare it with the frozen skeleton
   (``grader.run.splice``) and hold its region code to ``grader.run.rules``. No student code
   runs here.
2. **The launcher** (``python -m grader.run.launcher``), the only process that runs student code:
   it gets the snapshot and the cases on its stdin, compiles the kernels for the GPU when they
   will run in the interpreter, launches them, and sends every output back on a pipe. When it
   ends, its process group is killed, and so is anything that escaped the group
   (``grader.run.process``: this process is their subreaper).
3. **Here** again: pytest judges the outputs, in this process (``grader.judge.plugin``: one test per
   check); pytest-json-report gives back each check's verdict.

Exercises are launched concurrently; pytest judges one at a time.
"""

from __future__ import annotations

import configparser
import io
import json
import os
import pickle
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path

from grader import kinds, specs
from grader.model import Case, Output
from grader.report.records import CheckResult, ExerciseResult, line_spans
from grader.run import discover, isolation, launcher, process, rules, splice, timing
from kata import skeletons, source
from kata.catalogue import Exercise

ROOT = process.ROOT
CHECKS = ROOT / "grader" / "judge" / "checks"
_judging = threading.Lock()  # pytest runs one session at a time in a process
EXITED_AT_IMPORT = (
    "exited with code 0 while importing the file (os._exit(0) or another hard "
    "exit), so no kernel was run"
)


def default_timeout(backend: str, ex: Exercise | None = None) -> float:
    """Seconds the submission's process may take for all cases of one exercise (the
    performance track also autotunes and times its kernel on a GPU)."""
    track = ex.track if ex is not None and ex.track in ("performance", "extensions") else "core"
    return process.TIME_LIMITS[("cuda" if backend == "cuda" else "interpreter", track)]


def time_limit(backend: str, ex: Exercise, timeout: float | None) -> float | None:
    """The seconds one exercise may take: ``timeout`` as given (``--timeout``; 0: no limit), or
    the default for the backend and track."""
    if timeout is None:
        return default_timeout(backend, ex)
    return timeout or None


def interpreter_only(text: str, lines: dict[int, int] | None = None) -> list[str]:
    """Warnings for what the interpreter runs and the compiler rejects: `continue` and `break`
    inside a Triton kernel (UnsupportedLanguageConstruct on Triton 3.6). ``lines``: the graded
    text's line -> the submission's."""
    import ast

    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    found = []
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef):
            continue
        marks = [ast.unparse(d) for d in fn.decorator_list]
        if not any("jit" in m or "autotune" in m for m in marks):
            continue
        for node in ast.walk(fn):
            if isinstance(node, (ast.Continue, ast.Break)):
                word = "continue" if isinstance(node, ast.Continue) else "break"
                line = (lines or {}).get(node.lineno, node.lineno)
                found.append(
                    f"`{word}` at line {line} (in {fn.name}) runs in the interpreter but "
                    "does not compile on a GPU: bound the loop instead"
                )
    return found


# ---- 2. the launch ----------------------------------------------------------------------------


@dataclass
class Launch:
    """What the launcher sent back for one exercise."""

    outputs: dict[str, list[tuple[str | None, Output]]] = field(default_factory=dict)
    errors: dict[str, list[str]] = field(default_factory=dict)  # case -> messages
    causes: set[str] = field(default_factory=set)  # those messages without their case
    status: dict | None = None
    compiled: dict | None = None
    timing: dict | None = None
    error: str | None = None  # why no case can be judged
    stopped: str | None = None  # why the launcher ended early, cases left unrun
    where: dict | None = None  # the file's line the launcher was on shortly before its deadline
    output: str = ""  # what the submission printed, cut to its head and tail
    seconds: float = 0.0
    probe: Case | None = None


def _job(spec: specs.Spec, text: str, file: Path, cases: list[Case], **extra) -> dict:
    ex = spec.exercise
    return {
        "stem": ex.stem,
        "kernel": ex.kernel,
        "interface": ex.interface,
        "file": str(file),
        "text": text,
        "cases": cases,
        # What the exercise forbids, judged on the compiled kernel too (launcher.forbidden_ops).
        "forbidden": list(spec.forbidden),
        **extra,
    }


def _child(job: dict, device: str, timeout: float | None, *flags: str):
    """Run one launcher on ``job``: (the records it sent, how it ended). The launcher is told
    when it will be stopped, so that it can say where it was (``launcher.watchdog``). It gets a
    scratch folder of its own, its working folder, the only place it may write
    (``grader.run.isolation``); nothing this process reads afterwards is read from disk
    (``prepare``)."""
    prepare()
    if timeout is not None:
        job = {**job, "deadline": time.monotonic() + timeout, "limit": timeout}
    read_end, write_end = os.pipe()
    records: list = []
    reader = threading.Thread(target=lambda: records.extend(_read(read_end)), daemon=True)
    reader.start()
    with tempfile.TemporaryDirectory(prefix="kata-run-") as scratch:  # its working folder
        env = process.child_env(
            KATA_DEVICE=device,
            # The tolerances assume IEEE fp32 dots; an inherited TF32 setting must not apply.
            TRITON_F32_DEFAULT="ieee",
            **isolation.launcher_env(Path(scratch)),
        )
        done = process.run(
            process.python("-m", "grader.run.launcher", str(write_end), *flags),
            cwd=Path(scratch),
            env=env,
            timeout=timeout,
            stdin=pickle.dumps(job),
            pass_fds=(write_end,),
            on_start=lambda _: os.close(write_end),
            warm=device != "cuda",
        )
    reader.join()
    return records, done


def collect(result: Launch, records: list, spec: specs.Spec, probe) -> dict | None:
    """File the launcher's records in ``result``: outputs, errors, status, timing and where it
    was. Returns the case whose reversed run (grader.run.order) had not ended, or None."""
    reversing = None  # the case whose reversed run (grader.run.order) has not ended yet
    for fields, arrays in records:
        kind = fields.pop("kind")
        if kind in ("case", "case-error", "reversed"):
            reversing = None
        if kind == "reversing":
            reversing = fields
        elif kind == "case":
            result.outputs.setdefault(fields["name"], []).append((fields["config"], arrays))
        elif kind == "case-error":
            under = f" with {fields['config']}" if fields.get("config") else ""
            case = spec.cases.get(fields["name"]) or probe
            result.errors.setdefault(fields["name"], []).append(
                f"case {fields['name']} ({case.about}){under}: {fields['message']}"
            )
            result.causes.add(fields["message"])
        elif kind == "status":
            result.status = fields
        elif kind == "timing":
            result.timing = fields
        elif kind == "where":
            result.where = fields
    return reversing


def conclude(
    result: Launch, done, timeout: float | None, reversing: dict | None, spec: specs.Spec, shown
) -> None:
    """Set ``result``'s error, or what stopped the process, from how the launcher ended."""
    probe = result.probe
    stopped = stopped_message(done, timeout, result.where, spec, shown)
    if stopped and reversing is not None:  # it ended in a reversed run: that case failed
        from grader.run import order

        case = spec.cases.get(reversing["name"]) or probe
        result.errors.setdefault(reversing["name"], []).append(
            f"case {case.name} ({case.about}) with {reversing['config']}: {order.crashed(stopped)}"
        )
    if result.status is None:
        result.error = f"the submission's process {stopped or EXITED_AT_IMPORT}"
    elif result.status.get("error"):
        result.error = result.status["error"]
    elif stopped and not result.outputs and not result.errors:
        # Nothing ran to the end: one reason for the whole exercise, said once.
        result.error = f"the submission's process {stopped}"
    elif stopped:
        result.stopped = f"the submission's process {stopped}"
    else:
        result.error = _same_everywhere(result, spec)


def launch(
    spec: specs.Spec,
    text: str,
    file: Path,
    backend: str,
    timeout: float | None,
    timed: bool = True,
    lines: dict[int, int] | None = None,
    shown: str | None = None,
    regions: dict[str, list[list[int]]] | None = None,
) -> Launch:
    """Run the launcher on every case of ``spec`` (and the picture's probe), and collect what it
    sends back. Kernels that will run in the interpreter are first compiled for the GPU.
    ``text`` is what runs; ``lines`` maps its lines to those of ``shown``, the submission as the
    student wrote it, which messages quote (both default to ``text`` itself); ``regions``, each
    TODO's lines in ``shown``, lets a message name the TODO of a line."""
    shown = text if shown is None else shown
    cases = list(spec.cases.values())
    probe = kinds.probe(spec.interface.name, spec.exercise.causal)
    if probe is not None:
        cases.append(probe)  # last: its launch can delay no judged case
    result = Launch(probe=probe)
    configs = None
    refused: list = []
    if backend == "interpreter":
        job = _job(spec, text, file, cases, lines=lines, regions=regions)
        records, done = _child(job, "compiler", timeout, "--compile")
        result.compiled = next((f for f, _ in records if f.get("kind") == "compiled"), None)
        result.seconds = done.seconds
        compiled = result.compiled or {}
        if result.compiled is None or compiled.get("error"):
            stopped = (
                stopped_message(done, timeout, _where(records), spec, shown) or EXITED_AT_IMPORT
            )
            result.error = compiled.get("error") or f"the submission's process {stopped}"
            result.output = done.output
            return result
        configs, refused = compiled["configs"], compiled["failed"]
    job = _job(
        spec,
        text,
        file,
        cases,
        configs=configs,
        refused=refused,
        timing=list(spec.timing) if timed else [],
        lines=lines,
        regions=regions,
    )
    # One limit for the exercise: the compiler's time comes out of it (and the message names it).
    left = None if timeout is None else max(timeout - result.seconds, 1.0)
    records, done = _child(job, backend, left)
    result.output, result.seconds = done.output, round(result.seconds + done.seconds, 2)
    reversing = collect(result, records, spec, probe)
    conclude(result, done, timeout, reversing, spec, shown)
    return result


def _where(records: list) -> dict | None:
    return next((f for f, _ in records if f.get("kind") == "where"), None)


def stopped_message(
    done: process.Finished, timeout: float | None, where: dict | None, spec, text: str
) -> str | None:
    """Why the launcher did not end normally (a predicate: "was stopped after ..."), with the
    line of the file it was running when the time ran out, if it was on one."""
    stopped = done.stopped(timeout)
    if stopped is None or done.code is not None or timeout is None or not where:
        return stopped
    loop = enclosing_loop(text, where["line"])
    if loop is not None:
        at = f"in the loop at line {loop[0]} of {spec.exercise.filename} (`{loop[1]}`)"
        reason = (
            "a loop whose condition never becomes false?"
            if loop[1].startswith("while")
            else "a loop with too many steps to finish?"
        )
    else:
        at = f"at line {where['line']} of {spec.exercise.filename} (`{where.get('code', '')}`)"
        reason = "an endless loop, or a kernel that never finishes?"
    return (
        f"was stopped after {timeout:.0f} s, the time limit, {at}, in {where['function']}: {reason}"
    )


def enclosing_loop(text: str, line: int) -> tuple[int, str] | None:
    """(the line, its code) of the innermost ``while`` or ``for`` of ``text`` whose body holds
    ``line``, or None."""
    import ast

    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    found = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.While, ast.For)) and node.lineno <= line <= node.end_lineno:
            if found is None or node.lineno > found.lineno:
                found = node
    if found is None:
        return None
    return found.lineno, text.splitlines()[found.lineno - 1].strip()


def _same_everywhere(result: Launch, spec) -> str | None:
    """The one error every case ended with, when no case produced an output (a NameError in the
    kernel, a launch the GPU's compiler refuses): the exercise's error, said once, not once per
    check. None otherwise."""
    if result.outputs or not result.errors:
        return None
    if len(result.causes) != 1 or any(name not in result.errors for name in spec.cases):
        return None
    return f"every case failed the same way: {next(iter(result.causes))}"


def _read(fd: int) -> list:
    with os.fdopen(fd, "rb") as stream:
        return launcher.receive(stream)


# ---- 3. judging -------------------------------------------------------------------------------

_prepared = threading.Event()
_preparing = threading.Lock()
_settings: dict[str, str] = {}  # grader/judge/checks/pytest.ini's, read once by prepare()
_held: dict = {}  # the check module, by the name pytest imported it under, from prepare()


def prepare() -> None:
    """Read, before the first launcher of this process starts, everything the grading reads
    later from the grader's own files: a launcher's code (where ``grader.run.isolation`` cannot
    stop it) could have rewritten them by then. The pytest settings are kept in memory; the check
    module, the pytest plugins, the modules the judging and the reports import, and the HTML
    page's templates are imported or read now, and a dry run of pytest (collection only) imports
    the check module as every judging will find it, in ``sys.modules``. Once per process."""
    if _prepared.is_set():
        return
    with _preparing:
        if _prepared.is_set():
            return
        isolation.state()
        parser = configparser.ConfigParser(interpolation=None)
        parser.read_string((CHECKS / "pytest.ini").read_text())
        _settings.update(parser["pytest"])
        import pytest  # noqa: F401
        from pytest_jsonreport.plugin import JSONReport

        from grader.judge import checking, details, errors, plugin  # noqa: F401

        for name in kinds.KINDS:  # every kind's home
            kinds.home(name)
        from grader.report import cards, gradescope, records, summary, svg  # noqa: F401

        try:
            from grader.report import html
        except ImportError:  # no jinja2: the grading writes no page (cli.write_html says so)
            pass
        else:
            pages = html.environment()
            for name in html.SOURCES:  # compiled from memory: imports what drawing imports
                pages.get_template(name)
            for name in kinds.KINDS:  # what drawing a kind imports
                kinds.pictures(name)
        # What reading a launcher's records imports (an .npz's member names are cp437).
        launcher.receive(io.BytesIO(_sample_record()))
        stub = plugin.KataPlugin(_NoChecks(), Launch())
        _pytest([*_pytest_args(), "--collect-only"], [stub, JSONReport()])
        checks = str(CHECKS / "test_checks.py")
        _held.update(
            (name, module)
            for name, module in sys.modules.items()
            if getattr(module, "__file__", None) == checks
        )
        if not _held:
            raise RuntimeError(f"grader error: pytest did not import {checks}")
        _prepared.set()


def _sample_record() -> bytes:
    """One record as a launcher sends it, with an array (``launcher.send``; a few hundred
    bytes, within a pipe's buffer)."""
    import numpy as np

    read_end, write_end = os.pipe()
    with open(read_end, "rb") as stream, open(write_end, "wb") as sink:
        launcher.send(sink.fileno(), "case", {"x": np.zeros(1, np.float32)}, name="sample")
        sink.close()
        return stream.read()


class _NoChecks:
    """A spec with no check: what the dry run of ``prepare`` collects."""

    checks: list = []


def _pytest_args() -> list[str]:
    """pytest's arguments for a judging: the check module, the settings of pytest.ini from
    memory (``-c`` names an empty file, so that pytest reads no configuration file), no
    plugin but the grader's and pytest-json-report."""
    overrides = [arg for key, value in _settings.items() for arg in ("-o", f"{key}={value}")]
    return [
        str(CHECKS / "test_checks.py"),
        "-c",
        os.devnull,
        *overrides,
        "--rootdir",
        str(CHECKS),
        "--noconftest",
        "-s",
        "-p",
        "no:terminal",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:warnings",
        "-p",
        "no:faulthandler",
        "-p",
        "no:logging",
        "-p",
        "pytest_jsonreport.plugin",
        "--json-report-file=none",
        "--json-report-omit",
        "log",
        "streams",
    ]


def _pytest(args: list[str], plugins: list) -> None:
    """One pytest session in this process, with no plugin of this machine's."""
    import pytest

    with _judging:
        saved = os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD")
        os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        try:
            pytest.main(args, plugins=plugins)
        finally:
            if saved is None:
                os.environ.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD")
            else:
                os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = saved


def judge(spec: specs.Spec, result: Launch, keep: Path | None = None) -> list[CheckResult]:
    """Every check of ``spec`` on what the launch sent back, through pytest, in this process;
    pytest-json-report's report is kept in the file ``keep``, if given."""
    from pytest_jsonreport.plugin import JSONReport

    from grader.judge.plugin import KataPlugin

    prepare()
    sys.modules.update(_held)  # pytest finds the check module imported, and reads no file
    plugin, report = KataPlugin(spec, result), JSONReport()
    _pytest(_pytest_args(), [plugin, report])
    if keep is not None and report.report:
        keep.parent.mkdir(parents=True, exist_ok=True)
        keep.write_text(json.dumps(report.report, indent=1, default=str))
    by_id = {}
    for test in (report.report or {}).get("tests", []):
        meta = test.get("metadata") or {}
        if "check" in meta:
            by_id[meta["check"]] = meta
    results = []
    for c in spec.checks:
        meta = by_id.get(c.id) or {}
        status = meta.get("status", "error")
        message = meta.get("message", "the grader could not run this check")
        results.append(
            CheckResult(
                id=c.id,
                todo=c.todo,
                status=status,
                points=c.points if status == "passed" else 0,
                max_points=c.points,
                trap=meta.get("trap"),
                message=message,
                hidden=c.hidden,
                details=meta.get("details"),
            )
        )
    return results


# ---- one exercise, and several ------------------------------------------------------------------


def _zero(spec: specs.Spec, file: Path, message: str, **extra) -> ExerciseResult:
    checks = [
        CheckResult(
            id=c.id,
            todo=c.todo,
            status="error",
            points=0,
            max_points=c.points,
            trap=None,
            message=message,
            hidden=c.hidden,
        )
        for c in spec.checks
    ]
    return ExerciseResult(
        id=spec.exercise.stem,
        file=str(file),
        track=spec.exercise.track,
        score=0,
        max_score=spec.max_score,
        checks=checks,
        error=message,
        **extra,
    )


def spec_check(spec: specs.Spec, check_id: str):
    return next(c for c in spec.checks if c.id == check_id)


def _compiled(record: dict | None) -> dict | None:
    """What the report says of the compile for the GPU: None where the kernels ran compiled."""
    if record is None:
        return None
    return {
        "target": "sm_90",
        "launches": record.get("launches", 0),
        "refused": len(record.get("failed", [])),
        "seconds": record.get("seconds", 0.0),
    }


def snapshot(file: Path) -> bytes | None:
    """The submission's bytes, read once; None if there is no such file."""
    try:
        return file.read_bytes()
    except (FileNotFoundError, IsADirectoryError):
        return None


def _changes(found: splice.Spliced, name: str, free_form: bool = False) -> str:
    """What the student changed outside the regions, which the grader did not run (free-form:
    which it ran as written): one line each, with where to write instead."""
    out = []
    for c in found.changes[:12]:
        spans = found.regions.get(c.todo) or []
        inside = line_spans(spans)
        where = f"write inside TODO({c.todo})" + (f", line(s) {inside}" if inside else "")
        what = {"changed": "changed", "added": "added", "removed": "removed"}[c.kind]
        graded = "run as written, --free-form" if free_form else "not graded"
        out.append(f"line {c.line} of {name}: {what} given code, {graded} ({where})")
        if c.old:
            out.append(f"  - {c.old}")
        if c.new:
            out.append(f"  + {c.new}")
    if len(found.changes) > 12:
        out.append(f"... ({len(found.changes) - 12} more)")
    for todo in [] if free_form else found.missing:
        out.append(
            f"TODO({todo}): its place in the skeleton was not found in {name} (the code around it "
            "was changed): the skeleton's own lines were graded there"
        )
    return "\n".join(out)


def _what_runs(
    found: splice.Spliced, text: str, free_form: bool, forbidden
) -> tuple[str, dict[int, int] | None, list]:
    """(the text that runs, its lines' map to the submission's, what ``grader.run.rules``
    found): the skeleton with the regions spliced in, or, free-form, the file as written."""
    if free_form:
        return text, None, []
    findings = rules.check(found.text, found.graded, found.lines, forbidden)
    return found.text, found.lines, findings


def _integrity(found: splice.Spliced, filename: str, free_form: bool, findings: list) -> dict:
    """The report's ``integrity`` part: where the file differs from its skeleton, how it is
    graded, and what ``grader.run.rules`` found; the zeroing flags start off."""
    return {
        "ok": found.ok and not found.missing,
        "lines": sorted({c.line for c in found.changes}),
        "edited": sorted({c.line for c in found.changes}),
        "regions": found.regions,
        "diff": _changes(found, filename, free_form),
        "graded": "free-form" if free_form else "regions",
        "strict_zeroed": False,
        "contract_zeroed": False,
        "findings": [asdict(f) for f in findings],
    }


def _zero_if_broken(
    result: ExerciseResult, spec: specs.Spec, integrity: dict, strict: bool
) -> None:
    """Score the exercise 0 where a check on inputs the contract accepts failed, or where
    ``strict`` is on and the file was edited outside its TODO regions; ``integrity`` says which."""
    # A note on inputs the contract accepts failed: given code is the skeleton's (or, free-form,
    # the file's own), so the kernel as a whole is wrong there, and the exercise pays for it.
    broken = [
        c.id
        for c in result.checks
        if c.note and c.status != "passed" and spec_check(spec, c.id).contract
    ]
    integrity["contract_zeroed"] = bool(broken and result.score)
    if strict and not integrity["ok"]:
        integrity["strict_zeroed"] = True
    if integrity["strict_zeroed"] or integrity["contract_zeroed"]:
        for c in result.checks:
            c.points = 0
        result.score = 0


def grade_exercise(
    ex: Exercise,
    target: Path,
    backend: str,
    report_dir: Path | None = None,
    timeout: float | None = None,
    checkset: str | None = None,
    strict: bool = False,
    timed: bool = True,
    data: bytes | None = None,
    free_form: bool = False,
) -> ExerciseResult:
    """Grade one exercise's file in ``target`` (``data``: its bytes, when the caller read them
    already). What runs is the skeleton with the file's TODO regions spliced in
    (``grader.run.splice``), their code held to ``grader.run.rules``; ``free_form=True`` runs the
    whole file as written instead (an instructor's opt-in, for files written apart).
    ``timed=False`` skips the performance track's timing, for callers that need the verdicts
    only (``python -m grader.validate``)."""
    spec = specs.load(ex.stem, checkset)
    file = target / ex.filename
    start = time.monotonic()

    def zero(message: str, **extra) -> ExerciseResult:
        result = _zero(spec, file, message, **extra)
        result.duration_s = round(time.monotonic() - start, 2)
        return result

    data = snapshot(file) if data is None else data
    if data is None:
        return zero(f"{ex.filename} not found in {target}{discover.rename_hint(target, ex)}")
    try:
        text = source.read(data, ex.filename)
        found = splice.splice(skeletons.pristine(ex.stem), text)
    except (source.SourceError, splice.SpliceError) as exc:
        return zero(exc.describe(ex.filename) if isinstance(exc, splice.SpliceError) else str(exc))
    graded, lines, findings = _what_runs(found, text, free_form, spec.forbidden)
    integrity = _integrity(found, ex.filename, free_form, findings)
    warnings = interpreter_only(graded, lines) if backend == "interpreter" else []
    if findings:  # never run, never paid (grader.run.rules says why)
        shown = "; ".join(f.message for f in findings[:3])
        more = f" (and {len(findings) - 3} more)" if len(findings) > 3 else ""
        return zero(f"not run: {shown}{more}", integrity=integrity, warnings=warnings)
    ran = launch(
        spec,
        graded,
        file,
        backend,
        time_limit(backend, ex, timeout),
        timed,
        lines,
        shown=text,
        regions=None if free_form else found.regions,
    )
    kept = report_dir / "pytest" / f"{ex.stem}.json" if report_dir else None
    checks = judge(spec, ran, kept)
    status = ran.status or {}
    result = ExerciseResult(
        id=ex.stem,
        file=str(file),
        track=ex.track,
        score=sum(c.points for c in checks),
        max_score=spec.max_score,
        checks=checks,
        duration_s=round(time.monotonic() - start, 2),
        output=ran.output,
        error=ran.error,
        integrity=integrity,
        warnings=warnings + status.get("warnings", []),
        compiled=_compiled(ran.compiled),
    )
    _zero_if_broken(result, spec, integrity, strict)
    if ex.track == "performance":
        measured = ran.timing if timed else {"timed": False, "reason": "not timed: verdicts only"}
        result.performance = timing.score(measured, result.score == result.max_score)
    return result


def grade(
    exercises: list[Exercise],
    target: Path,
    backend: str,
    report_dir: Path | None = None,
    jobs: int | None = None,
    timeout: float | None = None,
    on_done=None,
    on_start=None,
    checkset: str | None = None,
    strict: bool = False,
    free_form: bool = False,
) -> list[ExerciseResult]:
    """Grade exercises concurrently; ``on_start(exercise)`` is called as each one starts and
    ``on_done(result)`` as each one finishes. Every file is read before any code runs, so that
    no exercise's code can change what another's grading reads."""
    jobs = jobs or (
        len(exercises) if backend == "cuda" else max(1, min(len(exercises), os.cpu_count() or 1))
    )
    texts = {ex.stem: snapshot(target / ex.filename) for ex in exercises}
    results: dict[str, ExerciseResult] = {}
    with ThreadPoolExecutor(max_workers=jobs) as pool:

        def work(ex: Exercise) -> ExerciseResult:
            if on_start:
                on_start(ex)
            if texts[ex.stem] is None:  # missing: said so by grade_exercise, which reads nothing
                return grade_exercise(ex, target, backend, report_dir, timeout, checkset, strict)
            return grade_exercise(
                ex,
                target,
                backend,
                report_dir,
                timeout,
                checkset,
                strict,
                data=texts[ex.stem],
                free_form=free_form,
            )

        futures = {pool.submit(work, ex): ex for ex in exercises}
        for future in as_completed(futures):
            result = future.result()
            results[result.id] = result
            if on_done:
                on_done(result)
    return [results[ex.stem] for ex in exercises]
