"""The local engine: grade students on this machine, several at once.

One worker per GPU, each pinned with CUDA_VISIBLE_DEVICES and grading a student's exercises
concurrently; without GPUs, one worker per CPU core, one exercise at a time. ``--jobs`` overrides
the number of workers.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
import time
from dataclasses import replace

from grader.classroom.engines.task import Task, files, grade_student
from kata.catalogue import EXERCISE_LIST


def gpu_count() -> int:
    if os.environ.get("KATA_DEVICE") == "interpreter":
        return 0
    try:
        import torch

        return torch.cuda.device_count()
    except Exception:
        return 0


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


def plan(device: str, jobs: int | None) -> tuple[list[int | None], int, str]:
    """(the GPU of each worker, or None; exercises graded at once per student; where)."""
    gpus = gpu_count() if device != "interpreter" else 0
    if gpus:
        workers = jobs or gpus
        return [i % gpus for i in range(workers)], len(EXERCISE_LIST), f"{gpus} GPU(s)"
    return [None] * (jobs or max(1, os.cpu_count() or 1)), 1, "the CPU interpreter"


def summary(record: dict, out) -> str:
    if record["status"] == "graded":
        gpu = record.get("cuda_visible_devices")
        return f"{record['score']}/{record['max_score']}" + (f"  (GPU {gpu})" if gpu else "")
    return (
        f"{record['status']}: {record.get('reason', '')}; see {files(out, record['student']).log}"
    )


def run(tasks: list[Task], slots: list[int | None]) -> None:
    """Grade every task, one worker thread per slot (each slot a GPU index or None)."""
    work: queue.Queue[Task] = queue.Queue()
    for t in tasks:
        work.put(t)
    progress = Progress(len(tasks))
    lock = threading.Lock()

    def worker(gpu):
        while True:
            try:
                task = work.get_nowait()
            except queue.Empty:
                return
            record = grade_student(replace(task, gpu=gpu))
            with lock:
                progress.step(task.student, summary(record, task.out))

    threads = [threading.Thread(target=worker, args=(slot,)) for slot in slots]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
