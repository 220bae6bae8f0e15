"""``nox -s batch -- --submissions DIR --out DIR``: grade a class.

Every subfolder of DIR is one student's submission. Each is graded by ``python -m grader`` in its
own process (with the grader's usual per-exercise isolation), several at a time: one worker per
GPU when there are GPUs (each pinned with CUDA_VISIBLE_DEVICES), otherwise one per CPU core.
Writes ``OUT/<student>/score.json`` and ``OUT/gradebook.csv``. A rerun skips students already
graded unless ``--force``.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

from kata.catalogue import EXERCISE_LIST, ROOT


def _gpu_count() -> int:
    if os.environ.get("KATA_DEVICE") == "interpreter":
        return 0
    try:
        import torch

        return torch.cuda.device_count()
    except Exception:
        return 0


def _graded(report: Path) -> bool:
    try:
        return "score" in json.loads(report.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return False


class Progress:
    """A one-line progress bar with an ETA on a terminal; plain lines otherwise."""

    def __init__(self, total: int, stream=sys.stdout):
        self.total, self.done, self.stream = total, 0, stream
        self.start = time.monotonic()
        self.tty = stream.isatty()

    def step(self, student: str, summary: str) -> None:
        self.done += 1
        elapsed = time.monotonic() - self.start
        eta = elapsed / self.done * (self.total - self.done)
        width = 30
        filled = int(width * self.done / max(self.total, 1))
        bar = "#" * filled + "." * (width - filled)
        line = f"[{bar}] {self.done}/{self.total}  ETA {int(eta // 60)}:{int(eta % 60):02d}  {student}: {summary}"
        if self.tty:
            self.stream.write("\r\033[K" + line[:120])
            if self.done == self.total:
                self.stream.write("\n")
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


def grade_student(folder: Path, out: Path, device: str, gpu: int | None, inner_jobs: int,
                  timeout: float | None) -> str:  # fmt: skip
    report = out / folder.name / "score.json"
    cmd = [sys.executable, "-m", "grader", "--target", str(folder), "--report", str(report),
           "--device", device, "--quiet", "--jobs", str(inner_jobs)]  # fmt: skip
    if timeout:
        cmd += ["--timeout", str(timeout)]
    env = dict(os.environ)
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(gpu)
    report.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    (report.parent / "grader.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0 or not _graded(report):
        return f"grader failed (exit {proc.returncode}); see {report.parent / 'grader.log'}"
    data = json.loads(report.read_text())
    return f"{data['score']}/{data['max_score']}"


def write_gradebook(students: list[str], out: Path) -> Path:
    path = out / "gradebook.csv"
    stems = [ex.stem for ex in EXERCISE_LIST]
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["student", "score", "max_score", *stems, "traps"])
        for student in students:
            report = out / student / "score.json"
            if not _graded(report):
                writer.writerow([student, "", "", *[""] * len(stems), "not graded"])
                continue
            data = json.loads(report.read_text())
            per = {e["id"]: e["score"] for e in data["exercises"]}
            writer.writerow([student, data["score"], data["max_score"],
                             *[per.get(s, "") for s in stems], ";".join(data["traps"])])  # fmt: skip
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="nox -s batch --", description="Grade every student folder.")
    p.add_argument("--submissions", type=Path, required=True, help="one subfolder per student")
    p.add_argument("--out", type=Path, required=True, help="where reports and gradebook.csv go")
    p.add_argument("--force", action="store_true", help="regrade students already graded")
    p.add_argument(
        "--jobs", type=int, help="students graded at once (default: GPUs, else CPU cores)"
    )
    p.add_argument("--device", choices=("auto", "cuda", "interpreter"), default="auto")
    p.add_argument("--timeout", type=float, help="seconds per exercise for a submission")
    args = p.parse_args(argv)
    if not args.submissions.is_dir():
        print(f"batch: {args.submissions} is not a folder", file=sys.stderr)
        return 2
    students = sorted(
        d.name for d in args.submissions.iterdir() if d.is_dir() and not d.name.startswith(".")
    )
    args.out.mkdir(parents=True, exist_ok=True)
    todo = [s for s in students if args.force or not _graded(args.out / s / "score.json")]
    skipped = len(students) - len(todo)

    gpus = _gpu_count() if args.device != "interpreter" else 0
    if gpus:
        workers = args.jobs or gpus
        slots = [i % gpus for i in range(workers)]
        inner = len(EXERCISE_LIST)
        where = f"{gpus} GPU(s)"
    else:
        workers = args.jobs or max(1, os.cpu_count() or 1)
        slots = [None] * workers
        inner = 1
        where = "the CPU interpreter"
    print(f"{len(students)} student(s) in {args.submissions}: grading {len(todo)}, "
          f"{skipped} already graded; {workers} worker(s) on {where}")  # fmt: skip

    work: queue.Queue[str] = queue.Queue()
    for s in todo:
        work.put(s)
    progress = Progress(len(todo))
    lock = threading.Lock()

    def worker(slot):
        while True:
            try:
                student = work.get_nowait()
            except queue.Empty:
                return
            summary = grade_student(
                args.submissions / student, args.out, args.device, slot, inner, args.timeout
            )
            with lock:
                progress.step(student, summary)

    threads = [threading.Thread(target=worker, args=(slot,)) for slot in slots]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    book = write_gradebook(students, args.out)
    print(f"gradebook: {book}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
