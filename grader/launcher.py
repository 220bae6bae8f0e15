"""The only process that runs student code: import the submission, launch its kernel on the
grader's inputs through the grader's own launch helpers, and save the raw outputs.

    python -m grader.launcher WORKDIR

reads ``WORKDIR/job.pkl`` (written by the checks' process) and writes, per case,
``WORKDIR/out/<i>.npz`` or ``WORKDIR/out/<i>.error.json``, plus ``WORKDIR/out/status.json`` once
the submission has loaded. Nothing here compares anything: a submission that patches torch or
numpy only fools itself.
"""

from __future__ import annotations

import inspect
import json
import pickle
import sys
import traceback
from pathlib import Path


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(path)


def describe_exception(exc: BaseException, file: str) -> str:
    """One line a student can act on; names the line of their file where one is known."""
    from grader import errors

    return errors.explain(exc, file)


def _kernel_problem(module, exercise) -> str | None:
    import triton  # noqa: F401

    name = exercise.kernel
    fn = getattr(module, name, None)
    if fn is None:
        return f"the file defines no `{name}`: the grader launches that kernel by name"
    if not hasattr(fn, "fn") or not hasattr(fn, "__getitem__"):
        kind = "a plain Python function" if inspect.isfunction(fn) else type(fn).__name__
        return f"`{name}` is {kind}, not a Triton kernel: decorate it with @triton.jit"
    inner = fn
    while not inspect.isfunction(inner) and hasattr(inner, "fn"):  # Autotuner -> JIT -> def
        inner = inner.fn
    params = tuple(inspect.signature(inner).parameters)
    if params != exercise.params:
        return (
            f"`{name}` has the wrong parameters; the chapter's interface is "
            f"({', '.join(exercise.params)}), the file has ({', '.join(params)})"
        )
    return None


def _tensor(torch, array, layout: str | None, device: str):
    """Put a NumPy array on the device with the requested memory layout."""
    t = torch.from_numpy(array)
    if layout == "transposed":  # column-major: strides (1, rows)
        return t.t().contiguous().to(device).t()
    if layout == "sliced":  # every other column of a wider tensor: strides (2 * cols, 2)
        buf = torch.zeros(t.shape[0], 2 * t.shape[1], dtype=t.dtype, device=device)
        buf[:, ::2] = t.to(device)
        return buf[:, ::2]
    if layout == "row-sliced":  # every other row: strides (2 * cols, 1)
        buf = torch.zeros(2 * t.shape[0], t.shape[1], dtype=t.dtype, device=device)
        buf[::2] = t.to(device)
        return buf[::2]
    return t.to(device)


def _run_case(torch, launchers: dict, kernel, case: dict, device: str) -> dict:
    ins = {k: _tensor(torch, a, case["layout"].get(k), device) for k, a in case["inputs"].items()}
    if case.get("dtype"):
        ins = {k: v.to(getattr(torch, case["dtype"])) for k, v in ins.items()}
    nan = float("nan")
    if case["kind"] == "fast_attention":
        out = torch.full_like(ins["q"], nan)
        launchers["fast_attention"](
            kernel, ins["q"], ins["k"], ins["v"], causal=case["causal"], out=out
        )
        result = {"out": out.float()}
    elif case["kind"] == "attention":
        M, D = ins["q"].shape
        # Poisoned output: a kernel that writes nothing leaves NaN behind.
        out = torch.full((M, D), nan, dtype=torch.float32, device=device)
        launchers["attention"](
            kernel, ins["q"], ins["k"], ins["v"],
            block_m=case["block_m"], block_n=case["block_n"], out=out,
        )  # fmt: skip
        result = {"out": out}
    else:
        M = ins["logits"].shape[0]
        w0, w1 = (torch.full((M,), nan, dtype=torch.float32, device=device) for _ in "01")
        i0, i1 = (torch.full((M,), -1, dtype=torch.int32, device=device) for _ in "01")
        launch = launchers["fast_gating" if case["kind"] == "fast_gating" else "gating"]
        launch(kernel, ins["logits"], out=(w0, w1, i0, i1))
        result = {"w0": w0, "w1": w1, "idx0": i0, "idx1": i1}
    if device == "cuda":
        torch.cuda.synchronize()
    return {k: v.cpu().numpy() for k, v in result.items()}


def main(workdir: str) -> int:
    work = Path(workdir)
    out = work / "out"
    out.mkdir(exist_ok=True)
    job = pickle.loads((work / "job.pkl").read_bytes())

    from kata import runtime  # first: it sets the environment triton reads

    # Everything the grader launches with is imported and bound before the submission loads, so
    # a file that rebinds names in kata.host (or numpy's save) cannot swap the launch itself.
    import numpy as np
    import torch

    from kata import catalogue, host

    launchers = {
        "attention": host.launch_attention, "gating": host.launch_gating,
        "fast_attention": host.launch_fast_attention, "fast_gating": host.launch_fast_gating,
    }  # fmt: skip
    save = np.savez

    exercise = catalogue.find(job["exercise"])
    file = job["file"]
    status = {"backend": runtime.describe(), "loaded": False}
    try:
        module = catalogue.load_file(file)
    except BaseException as exc:  # SyntaxError, any exception, sys.exit(), KeyboardInterrupt
        status["error"] = "the file failed to import: " + describe_exception(exc, file)
        _write_json(out / "status.json", status)
        return 0
    problem = _kernel_problem(module, exercise)
    status.update(loaded=problem is None, error=problem)
    _write_json(out / "status.json", status)
    if problem:
        return 0

    kernel = getattr(module, exercise.kernel)
    for i, case in enumerate(job["cases"]):
        try:
            arrays = _run_case(torch, launchers, kernel, case, runtime.DEVICE)
        except BaseException as exc:
            message = describe_exception(exc, file)
            fatal = runtime.DEVICE == "cuda" and "CUDA" in f"{type(exc).__name__} {exc}"
            _write_json(out / f"{i}.error.json", {"message": message, "fatal": fatal,
                                                 "trace": traceback.format_exc()[-4000:]})  # fmt: skip
            if fatal:  # the CUDA context is poisoned; every later launch would fail the same way
                return 0
            continue
        with open(out / f"{i}.tmp.npz", "wb") as fh:
            save(fh, **arrays)
        (out / f"{i}.tmp.npz").replace(out / f"{i}.npz")
    if job.get("timing") and runtime.DEVICE == "cuda":
        from grader import timing

        try:
            result = timing.measure(exercise.stem, kernel, launchers, torch)
        except BaseException as exc:
            result = {"timed": False, "reason": "timing failed: " + describe_exception(exc, file)}
        _write_json(out / "timing.json", result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
