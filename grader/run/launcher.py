"""The only process that runs student code: compile the submission's kernels for the GPU,
import it, launch its kernel on the grader's cases through the exercise's interface, and send
back the raw outputs.

    python -m grader.run.launcher FD [--compile]

reads its job from stdin (pickled by the grader: the exercise, the file's text as the grader
read it once, the cases, the shapes to time) and writes records to file descriptor FD (see
``send``). With ``--compile`` (``KATA_DEVICE=compiler``; before the interpreter runs a
submission), it only compiles:

1. **Compile**: the file is imported as Triton's compiler sees it, and every launch the cases
   make, under every tile configuration they run with, is compiled for an sm_90 GPU by Triton's
   own compiler, no GPU needed: each through the GPU dialect (TTGIR), the first on down to the
   cubin (Triton's bundled ptxas), which is where four fifths of a compile's time goes. A kernel that does not
   compile gets the compiler's verdict, as on a GPU, and none of its code runs in the
   interpreter; nor does one that needs more shared memory (or threads) per program than the
   GPU has, which compiles but which Triton refuses at every launch on a GPU (``resources``).
   (Triton decides at import whether it interprets, so this is its own process.)

Otherwise it runs the submission:

2. **Import** the graded file: the skeleton with the submission's TODO regions spliced in
   (``grader.run.splice``), whose region code ``grader.run.rules`` holds to Triton's language, or,
   ``--free-form``, a file an instructor trusts as written.
3. **Launch** every case (a pinned tile configuration, or each configuration the file's own
   autotuner could pick on a GPU), and save each output with its unwritten mask. In the
   interpreter, launch each case again with the grid's programs in reverse order
   (``grader.run.order``): a GPU runs them in any order, at once.
4. **Time** the performance track's shapes (GPU only).

Nothing here compares anything: a submission that patches torch or numpy only fools itself.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import json
import os
import pickle
import re
import struct
import sys
import threading
import time
import traceback
from typing import NamedTuple

from grader.run import order

# torch, bound by main() and compile_only() once isolation.enter() has run: nothing heavy is
# imported at the top of this module (tests/test_isolation.py).
torch = None

GPU_TARGET = ("cuda", 90, 32)  # what the course grades on: an sm_90 GPU (H100, H200)
# What one program (a CUDA block) may use on that GPU. Triton checks both before a kernel's first
# launch (CompiledKernel._init_handles, Triton 3.6 and 3.9 alike) and raises OutOfResources; it
# asks the device (CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, and the cubin's
# CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK), so without a GPU it has no figure to give. Compute
# capability 9.0's limits: 227 KiB of shared memory per block, 1024 threads per block (CUDA C++
# Programming Guide, "Technical Specifications per Compute Capability"; Hopper Tuning Guide).
SHARED_PER_PROGRAM = 227 * 1024  # 232448 bytes
THREADS_PER_PROGRAM = 1024


# ---- the channel back to the grader ---------------------------------------------------------


_sending = threading.Lock()  # the watchdog's record must not split one of the main thread's


def send(fd: int, kind: str, arrays: dict | None = None, **fields) -> None:
    """One record: a JSON header and, for a case's outputs, an ``.npz`` payload (read back with
    ``allow_pickle=False``: nothing the grader reads from here can run code)."""
    import numpy as np

    payload = b""
    if arrays is not None:
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        payload = buf.getvalue()
    header = json.dumps({"kind": kind, **fields}).encode()
    data = struct.pack(">II", len(header), len(payload)) + header + payload
    with _sending:
        while data:
            data = data[os.write(fd, data) :]


def receive(stream) -> list[tuple[dict, dict | None]]:
    """The records of ``send`` from a binary stream, up to where it ends or breaks off."""
    import numpy as np

    records = []
    while True:
        sizes = stream.read(8)
        if len(sizes) < 8:
            return records
        head_n, body_n = struct.unpack(">II", sizes)
        header, body = stream.read(head_n), stream.read(body_n)
        if len(header) < head_n or len(body) < body_n:
            return records
        try:
            fields = json.loads(header)
            arrays = None
            if body_n:
                with np.load(io.BytesIO(body), allow_pickle=False) as data:
                    arrays = {k: data[k] for k in data.files}
        except (ValueError, OSError):  # a record the launcher never wrote whole
            return records
        records.append((fields, arrays))


# ---- where the submission was when the time ran out -------------------------------------------


def where_now(thread_id: int, file: str, text: str) -> dict | None:
    """The innermost line of the submission's file that thread ``thread_id`` is running:
    ``{"line", "function", "code"}``, or None when the thread is elsewhere (in Triton or torch
    with no frame of the file above it). The interpreter runs a kernel as Python, so a kernel
    stuck in a loop is on a line of the file."""
    frame = sys._current_frames().get(thread_id)
    while frame is not None and frame.f_code.co_filename != file:
        frame = frame.f_back
    if frame is None:
        return None
    from grader.judge import errors

    lines = text.split("\n")
    line = frame.f_lineno
    code = lines[line - 1].strip() if 0 < line <= len(lines) else ""
    return {"line": errors._shown(line), "function": frame.f_code.co_name, "code": code}


def watchdog(fd: int, job: dict) -> None:
    """Shortly before the grader's deadline (``job["deadline"]``, on the monotonic clock all
    processes of this machine share, ``job["limit"]`` seconds after the launcher started), send where the main thread is in the submission's file:
    the grader names that line if it then has to stop this process. A process that finishes in
    time sent a record nobody reads."""
    deadline, limit = job.get("deadline"), job.get("limit")
    if deadline is None or limit is None:
        return
    # Early enough that the record is written before the kill, on a loaded machine too; late
    # enough that a kernel that hangs is where it hangs.
    at = deadline - min(2.0, 0.2 * limit)
    main_thread = threading.main_thread().ident

    def watch() -> None:
        time.sleep(max(at - time.monotonic(), 0.0))
        found = where_now(main_thread, job["file"], job["text"])
        if found is not None:
            send(fd, "where", **found)

    threading.Thread(target=watch, name="kata-watchdog", daemon=True).start()


# ---- what the file may not change -----------------------------------------------------------


def _gluon_types() -> tuple[type, ...]:
    try:
        from triton.experimental.gluon._runtime import GluonJITFunction
    except ImportError:  # a Triton without Gluon
        return ()
    return (GluonJITFunction,)


def launchable(interpreter: bool) -> list[type]:
    """The kernel classes whose ``run`` launches: compiled kernels, and interpreted ones.
    Gluon kernels (Triton's lower-level dialect, e.g. the 07 showcase) launch through
    JITFunction.run too; they only run compiled, on a GPU."""
    from triton.runtime.jit import JITFunction

    if not interpreter:
        return [JITFunction]
    from triton.runtime.interpreter import InterpretedFunction

    return [JITFunction, InterpretedFunction]


def kernel_types(interpreter: bool) -> tuple[type, ...]:
    """What a graded kernel may be: a launchable kernel, wrapped in autotuners or heuristics."""
    from triton.runtime.autotuner import Autotuner, Heuristics

    return (*launchable(interpreter), *_gluon_types(), Autotuner, Heuristics)


class Watch:
    """Counts launches that reach Triton, and the tl.dot shapes the interpreter runs. Installed
    before the submission is imported."""

    def __init__(self, interpreter: bool):
        self.launches = 0
        self.dot_k: set[int] = set()
        self._wrapped: list[tuple] = []  # (class, name, Triton's own method)
        if interpreter:
            from triton.runtime import interpreter as interp

            self._wrap(interp.InterpreterBuilder, "create_dot", self._saw_dot)
        for cls in launchable(interpreter):
            self._wrap(cls, "run", self._saw_launch)

    def _wrap(self, cls, name, note):
        original = cls.__dict__[name]

        def wrapper(*args, **kwargs):
            note(*args, **kwargs)
            return original(*args, **kwargs)

        setattr(cls, name, wrapper)
        self._wrapped.append((cls, name, original))

    def remove(self) -> None:
        """Put Triton's own methods back (before the timed rounds: the bench times without the
        counter, and so must the grader)."""
        for cls, name, original in reversed(self._wrapped):
            setattr(cls, name, original)
        self._wrapped = []

    def _saw_launch(self, *args, warmup=False, **kwargs):
        if not warmup:
            self.launches += 1

    def _saw_dot(self, builder, a, b, *rest, **kwargs):
        self.dot_k.add(int(a.data.shape[-1]))


# ---- the kernel and its configurations ------------------------------------------------------


def kernel_problem(module, exercise, interpreted: bool) -> str | None:
    """Why ``module``'s kernel cannot be graded, or None. ``interpreted``: its cases will run in
    Triton's interpreter."""
    name = exercise.kernel
    fn = getattr(module, name, None)
    if fn is None:
        return f"the file defines no `{name}`: the grader launches that kernel by name"
    types, gluon = kernel_types(interpreted), _gluon_types()
    layer = fn
    while not inspect.isfunction(layer) or layer is fn:
        if type(layer) not in types:
            kind = (
                "a plain Python function"
                if layer is fn and inspect.isfunction(fn)
                else (f"a {type(layer).__name__} object")
            )
            return (
                f"`{name}` is {kind}, not a Triton kernel: the grader launches it as "
                "Triton code, so decorate it with @triton.jit"
            )
        if {"run", "__getitem__"} & set(vars(layer)):
            return f"`{name}` replaces Triton's launch with its own: not a Triton kernel"
        if type(layer) in gluon and interpreted:
            return (
                f"`{name}` is a Gluon kernel: Gluon runs only compiled, and Triton's "
                "interpreter cannot run it; grade it on a GPU"
            )
        layer = layer.fn
    params = tuple(inspect.signature(layer).parameters)
    if params != exercise.params:
        return (
            f"`{name}` has the wrong parameters; the chapter's interface is "
            f"({', '.join(exercise.params)}), the file has ({', '.join(params)})"
        )
    return None


def _layers(kernel) -> tuple[object | None, list, object]:
    """(the autotuner or None, the heuristics layers, the innermost kernel) of a kernel object."""
    from triton.runtime.autotuner import Autotuner, Heuristics

    tuner, heuristics, layer = None, [], kernel
    while isinstance(layer, (Autotuner, Heuristics)):
        if isinstance(layer, Autotuner):
            tuner = tuner or layer
        else:
            heuristics.append(layer)
        layer = layer.fn
    return tuner, heuristics, layer


def config_label(config: dict | None) -> str | None:
    """``BLOCK_M=128, BLOCK_N=64, TMA=False, num_warps=4`` (what a student reads)."""
    if config is None:
        return None
    return ", ".join(f"{k}={v}" for k, v in config.items())


def _as_dict(config) -> dict:
    """A ``triton.Config`` as one flat dict: its meta-parameters, then warps and stages."""
    found = dict(config.kwargs)
    found.update(num_warps=config.num_warps, num_stages=config.num_stages)
    return found


def own_configs(kernel, args: tuple, kwargs: dict) -> list[dict]:
    """The configurations the kernel's own autotuner could pick for this launch: its list,
    pruned by its ``early_config_prune`` as the autotuner would. [] without an autotuner."""
    tuner, _, inner = _layers(kernel)
    if tuner is None:
        return []
    configs = tuner.configs
    if tuner.early_config_prune:
        named = dict(zip(inner.arg_names, args))
        configs = tuner.early_config_prune(configs, named, **kwargs)
    return [_as_dict(c) for c in configs]


class Pinned:
    """A kernel launched with one tile configuration, past its autotuner (which would time its
    configurations and keep one of its choosing). ``kernel[grid](...)`` as usual."""

    def __init__(self, kernel, config: dict | None):
        self.kernel, self.config = kernel, config

    def __getitem__(self, grid):
        tuner, _, inner = _layers(self.kernel)
        if self.config is None or tuner is None:
            return self.kernel[grid]

        def launch(*args, **kwargs):
            return inner[grid](*args, **resolve(self.kernel, args, kwargs, self.config))

        return launch


class Recorder:
    """Stands in for a kernel: keeps the arguments of each launch, runs nothing. A kind whose
    launch also runs other kernels of the file (10's preprocess and dQ kernels, which hold
    TODO regions too) asks for a stand-in of each by name (``companion``), so that the compile
    gate compiles their launches as well."""

    def __init__(self):
        self.calls: list[tuple[tuple, dict]] = []
        self.companions: dict[str, Recorder] = {}

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.calls.append((args, kwargs))

    def companion(self, name: str) -> Recorder:
        return self.companions.setdefault(name, Recorder())


def record_launches(interface, case, companions: dict | None = None) -> list:
    """The ``(args, kwargs)`` of each launch of the graded kernel the interface makes for
    ``case``, none of them run; ``companions``, if given, gets those of the file's other
    kernels the launch runs, by name."""
    from kata import runtime

    recorder = Recorder()
    interface.launch(recorder, case, runtime.DEVICE)
    if companions is not None:
        for name, other in recorder.companions.items():
            companions.setdefault(name, []).extend(other.calls)
    return recorder.calls


def resolve(kernel, args: tuple, kwargs: dict, config: dict | None) -> dict:
    """The keyword arguments one launch of ``kernel`` passes its innermost kernel: ``kwargs``,
    ``config`` over them, then each heuristics layer's values, outermost first, as
    Heuristics.run does."""
    _, heuristics, inner = _layers(kernel)
    launch = {**kwargs, **(config or {})}
    named = {**dict(zip(inner.arg_names, args)), **launch}
    for layer in heuristics:
        for key, rule in layer.values.items():
            launch[key] = named[key] = rule(named)
    return launch


# ---- 1. compile ------------------------------------------------------------------------------


class Compiled(NamedTuple):
    """What the compile gate keeps of one compiled launch."""

    ttir: str  # ``forbidden_ops`` reads it
    shared: int  # bytes of shared memory one program needs (Triton's metadata.shared)
    warps: int  # warps per program, warp specialization's included (metadata.num_warps)


def _allocate(module, options, capability: int) -> tuple[int, int]:
    """Shared memory and warps per program of the TTGIR ``module``, as Triton's make_llir stage
    finds them (``ttg.shared``, ``ttg.total-num-warps``), from that stage's passes up to shared
    memory's allocation only: a few hundredths of a second, where the whole stage (LLVM at -O3)
    takes seconds for a large kernel. Raises AttributeError or TypeError where this Triton's
    passes are not the ones named here."""
    from triton._C.libtriton import ir, nvidia, passes
    from triton.backends.nvidia.compiler import get_ptx_version_from_options

    pm = ir.pass_manager(module.context)
    passes.ttgpuir.add_combine_tensor_select_and_if(pm)
    try:
        passes.ttgpuir.add_allocate_warp_groups(pm, False)  # 3.9: the sanitizer's flag
    except TypeError:
        passes.ttgpuir.add_allocate_warp_groups(pm)  # 3.6
    passes.convert.add_scf_to_cf(pm)
    passes.gluon.add_inliner(pm)
    ptx_version = get_ptx_version_from_options(options, capability)
    nvidia.passes.ttgpuir.add_allocate_shared_memory_nv(pm, capability, ptx_version)
    pm.run(module, "kata_allocate")
    warps = module.get_int_attr("ttg.total-num-warps") or options.num_warps
    return module.get_int_attr("ttg.shared") or 0, warps


def resources(compiled: Compiled) -> str | None:
    """Why a GPU refuses to launch a kernel that compiled, or None: Triton's OutOfResources,
    raised before its first launch, in plain words. No line is named: what a program needs is
    the whole kernel's, the sum of every block it holds in shared memory at once."""
    if compiled.shared > SHARED_PER_PROGRAM:
        return (
            f"the kernel needs {compiled.shared} bytes of shared memory per program; an H100 or "
            f"H200 has {SHARED_PER_PROGRAM}: use smaller tiles (a GPU refuses to launch it: "
            f"Triton's OutOfResources)"
        )
    if compiled.warps * 32 > THREADS_PER_PROGRAM:
        return (
            f"the kernel runs {compiled.warps * 32} threads per program ({compiled.warps} "
            f"warps); an H100 or H200 allows {THREADS_PER_PROGRAM}: use fewer warps (a GPU "
            f"refuses to launch it: Triton's OutOfResources)"
        )
    return None


def _compile_one(inner, args: tuple, kwargs: dict, target, full: bool) -> Compiled:
    """Compile one launch of ``inner`` (a JITFunction) for ``target``, as JITFunction.run would
    before launching it, but for a GPU this machine need not have: through Triton's front end
    and its GPU dialect (TTGIR: language errors, tl.dot's shapes, layouts) to its allocation of
    shared memory, and with ``full`` on through LLVM and ptxas to the cubin. A launch that
    passed before is not compiled again (Triton's cache, keyed by the kernel's source and the
    launch's types and constants)."""
    import hashlib

    import triton
    from triton._C.libtriton import get_cache_invalidating_env_vars, ir
    from triton.compiler import ASTSource, make_backend
    from triton.runtime.cache import get_cache_key, get_cache_manager
    from triton.runtime.jit import create_function_from_signature

    backend = make_backend(target)
    binder = create_function_from_signature(inner.signature, inner.params, backend)
    kwargs = {**kwargs, "debug": False}
    bound, specialization, options = binder(*args, **kwargs)
    options, signature, constexprs, attrs = inner._pack_args(
        backend, kwargs, bound, specialization, options
    )
    src = ASTSource(inner, signature, constexprs, attrs)
    if full:
        kernel = triton.compile(src, target=target, options=options.__dict__)
        return Compiled(kernel.asm["ttir"], kernel.metadata.shared, kernel.metadata.num_warps)
    env = get_cache_invalidating_env_vars()
    key = get_cache_key(src, backend, options, env_vars=env) + "-kata-ttgir"
    cache = get_cache_manager(hashlib.sha256(key.encode()).hexdigest())
    passed, kept = cache.get_file("ttgir.ok"), cache.get_file("kernel.ttir")
    needs = cache.get_file("kernel.needs")  # [shared bytes, warps]
    if passed and kept and needs:
        with open(kept) as f, open(needs) as g:
            return Compiled(f.read(), *json.load(g))
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    stages: dict = {}
    backend.add_stages(stages, options, src.language)
    module = src.make_ir(
        target,
        options,
        backend.get_codegen_implementation(options),
        backend.get_module_map(),
        context,
    )
    metadata = {"hash": key, "target": target, **options.__dict__, **env}
    module = stages["ttir"](module, metadata)
    ttir = str(module)
    stages["ttgir"](module, metadata)
    try:
        shared, warps = _allocate(module, options, target.arch)
    except (AttributeError, TypeError):  # another Triton's passes: its whole stage, slower
        stages["llir"](module, metadata)
        shared, warps = metadata["shared"], metadata["num_warps"]
    cache.put(ttir, "kernel.ttir", binary=False)
    cache.put(json.dumps([shared, warps]), "kernel.needs", binary=False)
    cache.put("ok", "ttgir.ok", binary=False)
    return Compiled(ttir, shared, warps)


def forbidden_ops(ttir: str, forbidden) -> str | None:
    """Why a compiled launch is refused, or None: its TTIR holds an op one of the exercise's
    ``Forbidden`` rules (``grader.model``, sent in the job) names, ``tt.`` and the rule's
    prefix: ``atomic_`` refuses ``tt.atomic_rmw`` (what tl.atomic_add, _max, _xchg, ...
    compile to) and ``tt.atomic_cas``. The text screen (``grader.run.screen``) reads the file;
    this reads what was compiled, however the file reached it."""
    for rule in forbidden or ():
        found = re.search(r"\btt\." + re.escape(rule.prefix) + r"\w*", ttir)
        if found:
            return (
                f"the compiled kernel holds `{found.group()}`, an op of Triton's "
                f"tl.{rule.prefix}* functions, which are not allowed in this exercise (the trap "
                f"{rule.trap}): {rule.why}"
            )
    return None


def forbidden_compiled(kernel, forbidden) -> str | None:
    """On a GPU (no compile gate): ``forbidden_ops`` on every kernel Triton has compiled for
    ``kernel`` so far (its ``.asm["ttir"]``), or None."""
    if not forbidden:
        return None
    inner = _layers(kernel)[2]
    # Triton 3.2 on: device -> (kernels by key, ...); before: ``cache``, device -> kernels by key.
    caches = [entry[0] for entry in list(getattr(inner, "device_caches", {}).values())]
    caches += [entry for entry in getattr(inner, "cache", {}).values() if isinstance(entry, dict)]
    for cache in caches:
        for compiled in list(cache.values()):
            asm = getattr(compiled, "asm", None) or {}
            found = forbidden_ops(asm.get("ttir") or asm.get("ttgir") or "", forbidden)
            if found:
                return found
    return None


def compile_for_gpu(job: dict, interface, module) -> dict:
    """Compile every launch the job's cases make, for the course's GPU. ``{"failed",
    "launches", "configs", "shared"}``: ``failed`` holds ``[case, configuration, message]`` for
    each run the GPU's compiler refuses, or the GPU would not launch (``resources``; that run
    gets the GPU's verdict and never runs), ``configs`` the configurations the file's own
    autotuner offers each case that runs under all of them, as a GPU sees the file, ``shared``
    the most shared memory one program of a launch needs, in bytes."""
    from triton.backends.compiler import GPUTarget

    from grader.judge import errors

    target = GPUTarget(*GPU_TARGET)
    found: dict = {"failed": [], "launches": 0, "configs": {}, "shared": 0}
    kernel = getattr(module, job["kernel"])
    inner = _layers(kernel)[2]
    verdicts: dict = {}  # (kernel name, signature key) -> the compiler's message, or None

    def verdict(name, inner, args, launch) -> str | None:
        key = (name, *_signature_key(args, launch))
        if key not in verdicts:
            try:
                compiled = _compile_one(inner, args, launch, target, full=not verdicts)
                found["shared"] = max(found["shared"], compiled.shared)
                verdicts[key] = forbidden_ops(compiled.ttir, job.get("forbidden")) or resources(
                    compiled
                )
            except Exception as exc:
                verdicts[key] = errors.explain(exc, job["file"])
            found["launches"] += 1
        return verdicts[key]

    for case in job["cases"]:
        companions: dict[str, list] = {}
        for args, kwargs in record_launches(interface, case, companions):
            configs = [case.config] if case.config else own_configs(kernel, args, kwargs)
            if case.each_config:
                found["configs"][case.name] = configs
            for config in configs or [None]:
                said = verdict(job["kernel"], inner, args, resolve(kernel, args, kwargs, config))
                if said is not None:
                    found["failed"].append([case.name, config_label(config), said])
        # The file's other kernels the launch runs: a case fails if one of them does not compile.
        for name, calls in companions.items():
            other = getattr(module, name)
            for args, kwargs in calls:
                said = verdict(name, _layers(other)[2], args, resolve(other, args, kwargs, None))
                if said is not None:
                    found["failed"].append([case.name, config_label(None), said])
    return found


def _signature_key(args: tuple, kwargs: dict) -> tuple:
    """What makes two launches compile alike, as far as whether they compile: argument dtypes
    (tensors) or kinds (scalars; an int 1 becomes a constant), and the values of everything
    passed by name (block sizes, warps, flags). Alignment, which a GPU launch also keys on,
    changes the code made, not whether it compiles."""

    def kind(a):
        dtype = getattr(a, "dtype", None)
        if dtype is not None:
            return str(dtype)
        return ("int", a == 1) if isinstance(a, int) else type(a).__name__

    return tuple(kind(a) for a in args), tuple(sorted((k, repr(v)) for k, v in kwargs.items()))


# ---- 3. launch --------------------------------------------------------------------------------


def _arrays(outputs: dict) -> dict:
    """Each output as float32 / int32 NumPy, with its unwritten mask."""
    from kata.kinds import base

    found = {}
    for key, tensor in outputs.items():
        found[f"{key}.unwritten"] = base.unwritten(tensor).cpu().numpy()
        if tensor.dtype in (torch.float16, torch.bfloat16):
            tensor = tensor.float()
        found[key] = tensor.cpu().numpy()
    return found


def _compile_threads() -> int:
    return int(os.environ.get("KATA_COMPILE_THREADS", min(8, os.cpu_count() or 1)))


def _compile_launches(kernel, launches) -> None:
    """Compile each ``(args, kwargs, config)`` launch of ``kernel`` (past its autotuner, its
    heuristics applied), several at once, without running any. A compile that fails here fails
    again at its launch, which says why."""
    from concurrent.futures import ThreadPoolExecutor

    inner = _layers(kernel)[2]
    todo, seen = [], set()
    for args, kwargs, config in launches:
        launch = resolve(kernel, args, kwargs, config)
        strides = tuple(getattr(a, "stride", lambda: ())() for a in args)
        key = (*_signature_key(args, launch), strides)
        if key not in seen:
            seen.add(key)
            todo.append((args, launch))

    def compile_one(item):
        args, launch = item
        try:
            inner.warmup(*args, grid=(1,), **launch)
        except Exception:  # noqa: BLE001
            pass

    with ThreadPoolExecutor(max_workers=_compile_threads()) as pool:
        list(pool.map(compile_one, todo))


def warm_up(kernel, interface, cases, configs: dict) -> None:
    """On a GPU, compile every launch the cases will make, several at once, before the first one
    runs: Triton compiles each new signature at its first launch, one after another, and that
    is most of a cold grading's time. ``KATA_COMPILE_THREADS=0`` turns this off."""
    if _compile_threads() <= 0:
        return
    autotuned = _layers(kernel)[0] is not None
    launches = []
    for case in cases:
        try:
            calls = record_launches(interface, case)
        except Exception:  # noqa: BLE001  (the case itself will say)
            continue
        for args, kwargs in calls:
            for config in _runs(case, configs, interpreter=False):
                if config is None and autotuned:
                    continue  # the kernel's own autotuner picks: it compiles what it tries
                launches.append((args, kwargs, config))
    _compile_launches(kernel, launches)


def compile_timed(kernel, interface, shapes) -> None:
    """Compile the launches of the timed shapes under every configuration the kernel's own
    autotuner may try, so that autotuning them later only times them."""
    if _compile_threads() <= 0:
        return
    launches = []
    for shape in shapes:
        recorder = Recorder()
        interface.timed(recorder, shape)[0]()
        for args, kwargs in recorder.calls:
            for config in own_configs(kernel, args, kwargs) or [None]:
                launches.append((args, kwargs, config))
    _compile_launches(kernel, launches)


# What a configuration sets that changes only how a compiled kernel runs, not what it computes.
SCHEDULE = ("num_warps", "num_stages", "num_ctas", "maxnreg")


def _runs(case, configs: dict, interpreter: bool) -> list[dict | None]:
    """The configurations ``case`` runs with: its pinned one, every one the file's own
    autotuner could pick, or the kernel's own choice (None). The interpreter runs each set of
    tile sizes and flags once: warps and stages do not exist there."""
    if case.config:
        return [case.config]
    if not (case.each_config and configs.get(case.name)):
        return [None]
    runs = configs[case.name]
    if interpreter:
        seen, unique = set(), []
        for config in runs:
            key = tuple(sorted((k, repr(v)) for k, v in config.items() if k not in SCHEDULE))
            if key not in seen:
                seen.add(key)
                unique.append(config)
        runs = unique
    return runs


def run_reversed(fd: int, job: dict, interface, kernel, ran: list) -> list[str]:
    """In the interpreter, launch each case that ran (``ran``: its configuration and natural
    outputs) again with the grid's programs in reverse order (``grader.run.order``). A run
    whose outputs differ is sent as one more record of its case, labelled so, for the judge;
    one that raises, as the case's error. Returns the cases whose outputs depended on the order.
    The picture's probe (``__probe__``), judged by no check, is not run again."""
    from grader.judge import errors
    from kata import runtime

    depended = []
    for case, config, natural in ran:
        if case.name.startswith("__"):
            continue
        label = order.label(config_label(config))
        send(fd, "reversing", name=case.name, config=label)
        try:
            with order.reversed_programs():
                outputs = interface.launch(Pinned(kernel, config), case, runtime.DEVICE)
                arrays = _arrays(outputs)
        except BaseException as exc:
            send(
                fd,
                "case-error",
                name=case.name,
                config=label,
                fatal=False,
                message=f"{errors.explain(exc, job['file'])} ({order.WHY})",
                trace=traceback.format_exc()[-4000:],
            )
            depended.append(case.name)
            continue
        if order.same(natural, arrays):
            send(fd, "reversed", name=case.name)
            continue
        send(fd, "case", arrays, name=case.name, config=label)
        depended.append(case.name)
    return list(dict.fromkeys(depended))


def compile_only(fd: int, job: dict) -> int:
    """``--compile``: import the file for the compiler and compile every launch of the cases."""
    from kata import runtime

    runtime.configure()  # KATA_DEVICE=compiler, from the runner
    global torch
    import torch  # noqa: F401 (bound before the file loads, as in main)

    from grader.judge import errors
    from kata import catalogue, kinds

    assert runtime.BACKEND == runtime.COMPILER, "run with KATA_DEVICE=compiler"
    errors.use_lines(job.get("lines"), job.get("regions"))
    watchdog(fd, job)
    start = time.monotonic()
    found = {"failed": [], "launches": 0, "configs": {}, "shared": 0, "error": None}
    exercise = catalogue.find(job["stem"])
    try:
        module = catalogue.load_text(job["text"], job["file"], f"kata_compiled_{job['stem']}")
    except BaseException as exc:  # SyntaxError, any exception, sys.exit(), KeyboardInterrupt
        found["error"] = "the file failed to import: " + errors.explain(exc, job["file"])
    else:
        found["error"] = kernel_problem(module, exercise, interpreted=True)
    if not found["error"]:
        try:
            found.update(compile_for_gpu(job, kinds.get(job["interface"]), module))
        except BaseException as exc:  # the file's own host code, anything
            found["error"] = "compiling the kernel failed: " + errors.explain(exc, job["file"])
    send(fd, "compiled", seconds=round(time.monotonic() - start, 2), **found)
    return 0


def load(fd: int, job: dict, exercise, status: dict):
    """Import the graded file and send the status record that says whether it loaded: its
    kernel, or None when it did not import or holds no kernel the exercise can launch."""
    from grader.judge import errors
    from kata import catalogue, runtime

    file = job["file"]
    try:
        module = catalogue.load_text(job["text"], file, f"kata_submission_{job['stem']}")
    except BaseException as exc:  # SyntaxError, any exception, sys.exit(), KeyboardInterrupt
        status["error"] = "the file failed to import: " + errors.explain(exc, file)
        send(fd, "status", **status)
        return None
    problem = kernel_problem(module, exercise, runtime.INTERPRETER)
    status.update(loaded=problem is None, error=problem)
    send(fd, "status", **status)
    if problem:
        return None
    return getattr(module, exercise.kernel)


def configs_to_run(job: dict, interface, kernel) -> dict:
    """The configurations a case runs under, where the compiler did not say (on a GPU): the
    file's own autotuner's, seen from here."""
    configs = dict(job.get("configs") or {})
    for case in job["cases"]:
        if case.each_config and case.name not in configs:
            args, kwargs = record_launches(interface, case)[0]
            configs[case.name] = own_configs(kernel, args, kwargs)
    return configs


def run_cases(fd: int, job: dict, interface, kernel, exercise, configs, watch) -> list:
    """Launch every case under each of its configurations and send its outputs, or why it
    failed. Returns ``(case, configuration, outputs)`` of each run that ended well, for the
    reversed runs."""
    from grader.judge import errors
    from kata import runtime

    file = job["file"]
    refused = {(name, label): message for name, label, message in job.get("refused", [])}
    ran = []
    for case in job["cases"]:
        fatal = False
        for config in _runs(case, configs, runtime.INTERPRETER):
            label = config_label(config)
            if (case.name, label) in refused:  # the GPU's compiler refused it: not run
                send(
                    fd,
                    "case-error",
                    name=case.name,
                    config=label,
                    fatal=False,
                    message=refused[(case.name, label)],
                    trace="",
                )
                continue
            before_launches = watch.launches
            try:
                outputs = interface.launch(Pinned(kernel, config), case, runtime.DEVICE)
                if runtime.DEVICE == "cuda":
                    torch.cuda.synchronize()
                if watch.launches == before_launches:
                    raise errors.NotLaunched(f"`{exercise.kernel}` never reached a Triton launch")
                arrays = _arrays(outputs)
            except BaseException as exc:
                message = errors.explain(exc, file)
                fatal = runtime.DEVICE == "cuda" and "CUDA" in f"{type(exc).__name__} {exc}"
                send(
                    fd,
                    "case-error",
                    name=case.name,
                    config=label,
                    fatal=fatal,
                    message=message,
                    trace=traceback.format_exc()[-4000:],
                )
                # A CUDA error poisons the context: every later launch would fail the same way.
                if fatal:
                    break
                continue
            send(fd, "case", arrays, name=case.name, config=label)
            ran.append((case, config, arrays))
        if fatal:
            break
    return ran


def time_kernel(fd: int, job: dict, interface, kernel, watch) -> None:
    """Time the performance track's shapes and send the result, or why timing failed."""
    from grader.judge import errors
    from grader.run import timing

    watch.remove()  # the bench times without the launch counter, and so must the grader
    try:
        result = timing.measure(
            interface,
            job["timing"],
            kernel,
            compile_all=lambda shapes: compile_timed(kernel, interface, shapes),
        )
    except BaseException as exc:
        result = {"timed": False, "reason": "timing failed: " + errors.explain(exc, job["file"])}
    send(fd, "timing", **result)


def main(fd: int, job: dict) -> int:
    from kata import runtime

    runtime.configure()  # KATA_DEVICE, from the runner
    # Everything the grader launches with is imported and bound before the submission loads.
    global torch
    import torch

    from grader.judge import errors
    from grader.run import timing
    from kata import catalogue, kinds

    errors.use_lines(job.get("lines"), job.get("regions"))
    watchdog(fd, job)
    watch = Watch(runtime.INTERPRETER)
    if runtime.INTERPRETER:
        order.install()  # before the file is imported
    interface = kinds.get(job["interface"])
    exercise = catalogue.find(job["stem"])

    status = {"backend": runtime.describe(), "loaded": False, "warnings": [], "error": None}
    kernel = load(fd, job, exercise, status)
    if kernel is None:
        return 0
    configs = configs_to_run(job, interface, kernel)
    if runtime.DEVICE == "cuda":
        warm_up(kernel, interface, job["cases"], configs)
        # No compile gate on a GPU: what the warm-up compiled is judged before anything runs.
        status["error"] = forbidden_compiled(kernel, job.get("forbidden"))
        if status["error"]:
            status["loaded"] = False
            send(fd, "status", **status)
            return 0
    # Correctness launches share the GPU with other exercises' launches, never with a timing.
    with timing.gpu_shared() if runtime.DEVICE == "cuda" else contextlib.nullcontext():
        ran = run_cases(fd, job, interface, kernel, exercise, configs, watch)
    # After every case's natural run, so that a reversed run that crashes or hangs costs only
    # its own case (the runner reads the "reversing" record it left).
    if runtime.INTERPRETER:
        depended = run_reversed(fd, job, interface, kernel, ran)
        if depended:
            status["warnings"].append(order.warning(depended))
    if runtime.DEVICE == "cuda":  # kernels compiled at their launch (past the warm-up)
        status["error"] = forbidden_compiled(kernel, job.get("forbidden"))
    small = sorted(k for k in watch.dot_k if k < runtime.MIN_DOT_BLOCK)
    if small:
        status["warnings"].append(
            f"tl.dot ran with an inner (K) dimension of {small[0]}: it works in the "
            f"interpreter, but a compiled tl.dot needs K >= {runtime.MIN_DOT_BLOCK} (Triton 3.6, H200)"
        )
    send(fd, "status", **status)
    if job.get("timing") and runtime.DEVICE == "cuda" and not status["error"]:
        time_kernel(fd, job, interface, kernel, watch)
    return 0


if __name__ == "__main__":
    from grader.run import isolation

    isolation.enter()  # first: no byte of the job is read before it can write only its scratch
    out, compiling = int(sys.argv[1]), "--compile" in sys.argv[2:]
    # The channel moves to a descriptor the submission is not told about.
    hidden = os.dup(out)
    os.close(out)
    sys.argv[1:] = []
    job = pickle.loads(sys.stdin.buffer.read())
    sys.exit(compile_only(hidden, job) if compiling else main(hidden, job))
