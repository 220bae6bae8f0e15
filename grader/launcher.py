"""The only process that runs student code: import the submission, launch its kernel on the
grader's cases through the exercise's interface, and save the raw outputs.

    python -m grader.launcher WORKDIR

reads ``WORKDIR/job.pkl`` (written by the checks' process: the exercise, the file, the cases,
the shapes to time) and writes, per case, ``WORKDIR/out/<i>.npz`` (each output, and for each a
``<name>.unwritten`` mask of the elements still holding the poison) or ``<i>.error.json``;
``status.json`` once the submission has loaded and again at the end; ``timing.json`` for the
performance track on a GPU. Nothing here compares anything: a submission that patches torch
or numpy only fools itself.
"""

from __future__ import annotations

import contextlib
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


def _gluon_types() -> tuple[type, ...]:
    try:
        from triton.experimental.gluon._runtime import GluonJITFunction
    except ImportError:  # a Triton without Gluon
        return ()
    return (GluonJITFunction,)


class Watch:
    """Counts launches that reach Triton, and the tl.dot shapes the interpreter runs. Installed
    before the submission is imported; ``intact`` tells whether the submission replaced it."""

    def __init__(self, interpreter: bool):
        from triton.runtime.autotuner import Autotuner, Heuristics
        from triton.runtime.jit import JITFunction

        self.launches = 0
        self.interpreter = interpreter
        self.dot_k: set[int] = set()
        launchable = [JITFunction]
        if interpreter:
            from triton.runtime import interpreter as interp

            launchable.append(interp.InterpretedFunction)
            self._wrap(interp.InterpreterBuilder, "create_dot", self._saw_dot)
        # Gluon kernels (Triton's lower-level dialect, e.g. the 07 showcase) launch through
        # JITFunction.run, which is watched above; they only run compiled, on a GPU.
        self.gluon_types = _gluon_types()
        self.kernel_types = (*launchable, *self.gluon_types, Autotuner, Heuristics)
        self._wrapped = [self._wrap(cls, "run", self._saw_launch) for cls in launchable]

    def _wrap(self, cls, name, note):
        original = cls.__dict__[name]

        def wrapper(*args, **kwargs):
            note(*args, **kwargs)
            return original(*args, **kwargs)

        setattr(cls, name, wrapper)
        return cls, name, wrapper

    def _saw_launch(self, *args, warmup=False, **kwargs):
        if not warmup:
            self.launches += 1

    def _saw_dot(self, builder, a, b, *rest, **kwargs):
        self.dot_k.add(int(a.data.shape[-1]))

    def intact(self) -> bool:
        return all(cls.__dict__.get(name) is wrapper for cls, name, wrapper in self._wrapped)


def kernel_problem(module, exercise, watch: Watch) -> str | None:
    """Why ``module``'s kernel cannot be graded, or None."""
    name = exercise.kernel
    fn = getattr(module, name, None)
    if fn is None:
        return f"the file defines no `{name}`: the grader launches that kernel by name"
    layer = fn
    while not inspect.isfunction(layer) or layer is fn:
        if type(layer) not in watch.kernel_types:
            kind = "a plain Python function" if layer is fn and inspect.isfunction(fn) else (
                f"a {type(layer).__name__} object")  # fmt: skip
            return (f"`{name}` is {kind}, not a Triton kernel: the grader launches it as "
                    "Triton code, so decorate it with @triton.jit")  # fmt: skip
        if {"run", "__getitem__"} & set(vars(layer)):
            return f"`{name}` replaces Triton's launch with its own: not a Triton kernel"
        if type(layer) in watch.gluon_types and watch.interpreter:
            return (f"`{name}` is a Gluon kernel: Gluon runs only compiled, and Triton's "
                    "interpreter cannot run it; grade it on a GPU")  # fmt: skip
        layer = layer.fn
    if not watch.intact():
        return "the file replaced Triton's launch machinery: its kernels cannot be graded"
    params = tuple(inspect.signature(layer).parameters)
    if params != exercise.params:
        return (
            f"`{name}` has the wrong parameters; the chapter's interface is "
            f"({', '.join(exercise.params)}), the file has ({', '.join(params)})"
        )
    return None


def _arrays(torch, interfaces, outputs: dict) -> dict:
    """Each output as float32 / int32 NumPy, with its unwritten mask."""
    found = {}
    for key, tensor in outputs.items():
        found[f"{key}.unwritten"] = interfaces.unwritten(torch, tensor).cpu().numpy()
        if tensor.dtype in (torch.float16, torch.bfloat16):
            tensor = tensor.float()
        found[key] = tensor.cpu().numpy()
    return found


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

    from grader import errors, timing
    from kata import catalogue, host, interfaces  # noqa: F401  (host: bound before the file)

    save = np.savez
    watch = Watch(runtime.INTERPRETER)
    exercise = catalogue.find(job["stem"])
    interface = interfaces.get(exercise.interface)
    file = job["file"]
    status = {"backend": runtime.describe(), "loaded": False, "warnings": []}
    try:
        module = catalogue.load_file(file)
    except BaseException as exc:  # SyntaxError, any exception, sys.exit(), KeyboardInterrupt
        status["error"] = "the file failed to import: " + errors.explain(exc, file)
        _write_json(out / "status.json", status)
        return 0
    problem = kernel_problem(module, exercise, watch)
    status.update(loaded=problem is None, error=problem)
    _write_json(out / "status.json", status)
    if problem:
        return 0

    kernel = getattr(module, exercise.kernel)
    # Correctness launches share the GPU with other exercises' launches, never with a timing.
    with timing.gpu_shared() if runtime.DEVICE == "cuda" else contextlib.nullcontext():
        for i, case in enumerate(job["cases"]):
            before = watch.launches
            try:
                outputs = interface.launch(torch, kernel, case, runtime.DEVICE)
                if runtime.DEVICE == "cuda":
                    torch.cuda.synchronize()
                if watch.launches == before:
                    raise errors.NotLaunched(f"`{exercise.kernel}` never reached a Triton launch")
                arrays = _arrays(torch, interfaces, outputs)
            except BaseException as exc:
                message = errors.explain(exc, file)
                fatal = runtime.DEVICE == "cuda" and "CUDA" in f"{type(exc).__name__} {exc}"
                _write_json(out / f"{i}.error.json", {
                    "message": f"case {case.name} ({case.about}): {message}", "fatal": fatal,
                    "trace": traceback.format_exc()[-4000:],
                })  # fmt: skip
                # A CUDA error poisons the context: every later launch would fail the same way.
                if fatal:
                    break
                continue
            with open(out / f"{i}.tmp.npz", "wb") as fh:
                save(fh, **arrays)
            (out / f"{i}.tmp.npz").replace(out / f"{i}.npz")
    small = sorted(k for k in watch.dot_k if k < runtime.MIN_DOT_BLOCK)
    if small:
        status["warnings"].append(
            f"tl.dot ran with an inner (K) dimension of {small[0]}: it works in the "
            f"interpreter, but a compiled tl.dot needs K >= {runtime.MIN_DOT_BLOCK} (Triton 3.6, H200)"
        )
    _write_json(out / "status.json", status)
    if job.get("timing") and runtime.DEVICE == "cuda":
        try:
            result = timing.measure(interface, job["timing"], kernel, torch)
        except BaseException as exc:
            result = {"timed": False, "reason": "timing failed: " + errors.explain(exc, file)}
        _write_json(out / "timing.json", result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
