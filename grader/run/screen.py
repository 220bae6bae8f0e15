"""Static screens of a submission's code (issue "Grader v3", rules 2 and 7).

``todo_allowlist``: the code a student wrote in the TODO regions must be Triton kernel code: no
imports, no escape hatches (``exec``, ``getattr``, dunder access, ...), and only the names a
kernel can use. ``non_triton_path``: given code that a submission changed outside the regions must
not open a path to the output around the Triton kernels (torch or Python computing it, state kept
between calls, patched modules, objects posing as kernels) or detect the grader (``sys``, ``os``,
``inspect``, ...). ``exercise_forbids``: Triton functions one exercise refuses anywhere in the
file, each with the trap it would hide (its spec's ``FORBIDDEN``: 09 refuses ``tl.atomic_*``).

Which lines are region code and which are changed given code comes from the token alignment of
``kata.skeletons.check``. The screens read the submission with ``ast`` only: nothing is imported
or run, so the grader process that calls them stays light.
"""

from __future__ import annotations

import ast
import bisect
import builtins
import functools
from dataclasses import dataclass

from kata import skeletons
from kata.regions import Skeleton

TODO_ALLOWLIST = "todo-allowlist"
NON_TRITON_PATH = "non-triton-path"
EXERCISE_FORBIDS = "exercise-forbids"


@dataclass(frozen=True)
class Finding:
    line: int  # in the submission
    rule: str  # TODO_ALLOWLIST or NON_TRITON_PATH
    message: str  # one line, for the student


# Python's ways around a name allowlist; neither a kernel nor its launcher needs them.
FORBIDDEN_BUILTINS = frozenset(
    "exec eval open compile getattr setattr delattr globals locals vars __import__ breakpoint "
    "input".split()
)
KERNEL_MODULES = frozenset({"tl", "triton", "math"})
KERNEL_BUILTINS = frozenset({"range", "float", "int", "bool", "min", "max", "abs", "len", "print"})
# A tl.tensor's handle is an IR value when compiled, but the numpy data itself in the interpreter.
KERNEL_INTERNALS = frozenset({"handle"})
# Statements Triton does not compile, and Python's ways to run code that is not the kernel's.
NOT_KERNEL_CODE: dict[type, str] = {
    ast.Import: "an import",
    ast.ImportFrom: "an import",
    ast.Global: "`global`",
    ast.Nonlocal: "`nonlocal`",
    ast.Lambda: "a lambda",
    ast.FunctionDef: "a function definition",
    ast.AsyncFunctionDef: "a function definition",
    ast.ClassDef: "a class definition",
    ast.Try: "`try`",
    ast.Raise: "`raise`",
    ast.Delete: "`del`",
    ast.Yield: "`yield`",
    ast.YieldFrom: "`yield`",
    ast.Await: "`await`",
    ast.AsyncFor: "`async for`",
    ast.AsyncWith: "`async with`",
}
if hasattr(ast, "TryStar"):  # Python 3.11+
    NOT_KERNEL_CODE[ast.TryStar] = "`try`"

# Modules that reach the process, the interpreter or the grader's stack, never a kernel's output.
OUTSIDE_MODULES = frozenset(
    "os sys inspect gc ctypes subprocess builtins importlib threading multiprocessing atexit "
    "signal numpy np pickle".split()
)
# The chapter's own kernel files (grader/specs/*/gallery/chapter.py) add these two imports for
# their host code: math for the softmax scale, torch to allocate the outputs.
NEW_IMPORTS = frozenset({"import math", "import torch"})
# Imported names that host code outside the regions may use. The skeleton's others (examples,
# oracles, Path, sys) serve its worked example, or would find or compute the answer.
HOST_MODULES = frozenset({"triton", "tl", "math", "host", "runtime", "torch"})
# torch in host code: allocating outputs and naming dtypes, nothing that computes.
TORCH_HOST = frozenset(
    "empty empty_like empty_strided zeros zeros_like device dtype float16 bfloat16 float32 "
    "float64 half float double int8 int16 int32 int64 uint8 int long bool".split()
)
# Method calls host code may make: shapes, strides, layout, dtype, dict lookups, formatting.
HOST_METHODS = frozenset(
    "stride size dim numel element_size contiguous is_contiguous to float view reshape "
    "transpose permute t expand get items keys values format".split()
)
HOST_BUILTINS = frozenset(
    "int float bool str len min max abs round range tuple list dict set isinstance print zip "
    "enumerate sorted any all divmod pow repr ValueError TypeError RuntimeError AssertionError "
    "KeyError IndexError NotImplementedError Exception".split()
)
CONTAINERS = (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)
CONTAINER_CALLS = frozenset({"dict", "list", "set", "defaultdict", "OrderedDict", "Counter"})

IN_REGION = "is not allowed inside a kernel: a TODO region holds Triton code only"
KERNEL_NAMES = (
    "tl, triton, math, the kernel's own arguments and variables, the file's @triton.jit "
    "functions and tl.constexpr globals, and range/float/int/bool/min/max/abs/len/print"
)
PATH = "a kernel's output must come from its Triton code"
STATE = "state kept between calls can replay outputs"


# ---- reading the module -------------------------------------------------------------------------


def _dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a Name or a chain of Attributes on one, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(parts)]) if isinstance(node, ast.Name) else None


def _decorator(node: ast.AST) -> str:
    return _dotted(node.func if isinstance(node, ast.Call) else node) or ""


def _root(node: ast.AST) -> ast.AST:
    """The innermost value of a chain of attributes, calls and subscripts."""
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node


def _import_keys(node: ast.Import | ast.ImportFrom) -> list[str]:
    """One normalized statement per imported name: ``import a.b as c``, ``from .m import n``."""
    head = (
        "import "
        if isinstance(node, ast.Import)
        else (f"from {'.' * node.level}{node.module or ''} import ")
    )
    return [head + a.name + (f" as {a.asname}" if a.asname else "") for a in node.names]


# Triton's kernel decorators: its own, and Gluon's (Triton's lower-level dialect, which the 07
# showcase is written in).
JIT_DECORATORS = frozenset({"triton.jit", "gluon.jit", "triton.experimental.gluon.jit"})


def _is_jit(fn: ast.AST) -> bool:
    return isinstance(fn, ast.FunctionDef) and any(
        _decorator(d) in JIT_DECORATORS for d in fn.decorator_list
    )


def _from_triton(key: str) -> bool:
    """An import of Triton or of one of its modules (Gluon's among them)."""
    return key.split()[1].split(".")[0] == "triton"


def _kernel_global(value: ast.AST | None) -> bool:
    """A module-level value Triton lets a kernel read: ``tl.constexpr(...)`` (or Gluon's
    ``gl.constexpr``), or a ``tl`` dtype."""
    if isinstance(value, ast.Call):
        return _dotted(value.func) in ("tl.constexpr", "gl.constexpr", "triton.language.constexpr")
    return (_dotted(value) or "").startswith(("tl.", "triton.language."))


def _is_container(value: ast.AST | None) -> bool:
    if isinstance(value, ast.Call):
        return (_dotted(value.func) or "").split(".")[-1] in CONTAINER_CALLS
    return isinstance(value, CONTAINERS)


def _is_main_guard(node: ast.AST) -> bool:
    """``if __name__ == "__main__":``: its body does not run when the grader imports the file."""
    test = getattr(node, "test", None)
    return (
        isinstance(node, ast.If)
        and isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.Eq)
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "__main__"
    )


@dataclass(frozen=True)
class _Module:
    imports: frozenset[str]  # the names that imports bind
    triton: frozenset[str]  # those of them that imports from Triton bind (gl, gluon, tma, ...)
    import_keys: frozenset[str]  # every import, normalized, at any depth
    jit: frozenset[str]  # module-level @triton.jit functions
    kernel_globals: frozenset[str]  # module-level names a kernel may read (tl.constexpr, dtypes)
    bound: frozenset[str]  # every module-level name
    containers: frozenset[str]  # module-level names bound to a list, dict or set
    main_only: frozenset[str]  # functions only the __main__ block calls


def _top_level(tree: ast.Module) -> list[ast.stmt]:
    """Module-level statements, those in module-level if/try/with/for blocks included."""
    found, todo = [], list(tree.body)
    while todo:
        stmt = todo.pop()
        found.append(stmt)
        if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for name in ("body", "orelse", "finalbody"):
                todo += getattr(stmt, name, [])
            todo += [s for h in getattr(stmt, "handlers", []) for s in h.body]
    return found


def _loads(nodes: list[ast.AST]) -> set[str]:
    return {
        n.id
        for root in nodes
        for n in ast.walk(root)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
    }


def _main_only(tree: ast.Module) -> frozenset[str]:
    """Undecorated module-level functions without parameters that only the ``__main__`` block
    (or another such function) calls: they do not run when graded (06's ``worked_example``). The
    graded functions take arguments, so none of them is ever one of these."""
    candidates = {
        s.name: s
        for s in tree.body
        if isinstance(s, ast.FunctionDef)
        and not s.decorator_list
        and not any((s.args.posonlyargs, s.args.args, s.args.kwonlyargs))
        and not (s.args.vararg or s.args.kwarg)
    }
    outside = [s for s in tree.body if s not in candidates.values() and not _is_main_guard(s)]
    found = set(candidates) - _loads(outside)
    while True:
        used = _loads([f for name, f in candidates.items() if name not in found]) & found
        if not used:
            return frozenset(found)
        found -= used


def _module(tree: ast.Module) -> _Module:
    imports, jit, kernel_globals, bound, containers = set(), set(), set(), set(), set()
    triton = set()
    for stmt in _top_level(tree):
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            names = {(a.asname or a.name).split(".")[0] for a in stmt.names}
            imports.update(names)
            if all(_from_triton(k) for k in _import_keys(stmt)):
                triton.update(names)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(stmt.name)
            if _is_jit(stmt):
                jit.add(stmt.name)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.With)):
            targets = list(getattr(stmt, "targets", None) or [getattr(stmt, "target", None)])
            targets += [i.optional_vars for i in getattr(stmt, "items", []) if i.optional_vars]
            value = stmt.value if isinstance(stmt, ast.Assign) else None
            for target in filter(None, targets):
                bound.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
                pairs = [(target, value)]
                if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
                    pairs = list(zip(target.elts, value.elts))  # NO_MASK, DIAGONAL = ...
                for name, v in pairs:
                    if isinstance(name, ast.Name) and _kernel_global(v):
                        kernel_globals.add(name.id)
                    if isinstance(name, ast.Name) and _is_container(v):
                        containers.add(name.id)
    keys = {
        key
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for key in _import_keys(node)
    }
    return _Module(
        imports=frozenset(imports),
        triton=frozenset(triton),
        import_keys=frozenset(keys),
        jit=frozenset(jit),
        kernel_globals=frozenset(kernel_globals),
        bound=frozenset(bound | imports),
        containers=frozenset(containers),
        main_only=_main_only(tree),
    )


@functools.lru_cache(maxsize=32)
def _skeleton_module(text: str) -> _Module:
    return _module(ast.parse(text))


class _Scope:
    """The submission's module and its skeleton's, and each function's names, worked out once."""

    def __init__(self, tree: ast.Module, sk: Skeleton):
        self.tree = tree
        self.module, self.skeleton = _module(tree), _skeleton_module(sk.text)
        self._locals: dict[int, frozenset[str]] = {}
        self._kernel: dict[int, frozenset[str]] = {}

    @functools.cached_property
    def parents(self) -> dict[int, ast.AST]:
        return {id(c): n for n in ast.walk(self.tree) for c in ast.iter_child_nodes(n)}

    def locals(self, fn: ast.AST | None) -> frozenset[str]:
        """A function's parameters and every name it assigns (loop variables included)."""
        if fn is None:
            return frozenset()
        if id(fn) not in self._locals:
            a = fn.args
            params = {
                p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg) if p
            }
            stored = {
                n.id
                for n in ast.walk(fn)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
            }
            self._locals[id(fn)] = frozenset(params | stored)
        return self._locals[id(fn)]

    def kernel_names(self, fn: ast.AST | None) -> frozenset[str]:
        """What kernel code in ``fn`` may name. The submission's own jit helpers count too: they
        are screened as changed given code."""
        if id(fn) not in self._kernel:
            m, sk = self.module, self.skeleton
            shared = m.jit | m.kernel_globals | m.triton | sk.jit | sk.kernel_globals
            self._kernel[id(fn)] = KERNEL_MODULES | KERNEL_BUILTINS | shared | self.locals(fn)
        return self._kernel[id(fn)]


def _nodes(scope: _Scope, lines: set[int]) -> list[tuple[ast.AST, ast.AST | None, str]]:
    """The nodes that reach any of ``lines``, each with its innermost enclosing function and
    where its code runs: "jit" (in a kernel), "host" (anything else), or "main" (not when
    graded). Subtrees away from ``lines`` are skipped: that is most of a file."""
    wanted = sorted(lines)

    def near(node: ast.AST) -> bool:
        first = getattr(node, "lineno", None)
        if first is None:
            return True  # the module, a function's arguments
        decorators = getattr(node, "decorator_list", None)
        if decorators:
            first = min(first, *(d.lineno for d in decorators))
        k = bisect.bisect_left(wanted, first)
        return k < len(wanted) and wanted[k] <= node.end_lineno

    found = []
    stack: list[tuple[ast.AST, ast.AST | None, str]] = [(scope.tree, None, "host")]
    while stack:
        node, fn, where = stack.pop()
        if not near(node):
            continue
        if fn is None and _is_main_guard(node):
            where = "main"
        found.append((node, fn, where))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            # Decorators, defaults and annotations run where the function is defined.
            outer = [*node.decorator_list, node.args, *([node.returns] if node.returns else [])]
            stack += [(child, fn, where) for child in outer]
            inner = where
            if where == "host" and fn is None and node.name in scope.module.main_only:
                inner = "main"
            elif where == "host" and _is_jit(node):
                inner = "jit"
            stack += [(child, node, inner) for child in node.body]
        else:
            stack += [(child, fn, where) for child in ast.iter_child_nodes(node)]
    return found


def _anchor(node: ast.AST) -> int | None:
    """The line a construct is judged on: an attribute's name, else where the node starts."""
    return node.end_lineno if isinstance(node, ast.Attribute) else getattr(node, "lineno", None)


def _parse(text: str) -> ast.Module | None:
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None  # it cannot be imported either, and the grader says so


def _code(node: ast.AST, limit: int = 48) -> str:
    text = " ".join(ast.unparse(node).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _sorted(found: list[Finding]) -> list[Finding]:
    return sorted(set(found), key=lambda f: (f.line, f.rule, f.message))


# ---- rule 2: TODO regions hold Triton code --------------------------------------------------------


def _kernel_problem(node: ast.AST, allowed: frozenset[str]) -> tuple[str, bool] | None:
    """(what, is_a_name) when ``node`` is not kernel code; None when it is."""
    for kind, what in NOT_KERNEL_CODE.items():
        if isinstance(node, kind):
            if isinstance(node, (ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal)):
                what = f"`{_code(node)}`"
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                what = f"{what} (`{node.name}`)"
            return what, False
    if isinstance(node, ast.Attribute) and (
        node.attr.startswith("__") or node.attr in KERNEL_INTERNALS
    ):
        return f"`{node.attr}`", False
    if isinstance(node, ast.Name):
        if node.id.startswith("__") or node.id in FORBIDDEN_BUILTINS:
            return f"`{node.id}`", False
        if node.id not in allowed:
            return f"`{node.id}`", True
    return None


def todo_allowlist(
    sk: Skeleton, text: str, integrity: skeletons.Integrity | None = None
) -> list[Finding]:
    """Region code that is not Triton kernel code: imports, escape hatches (exec, getattr, dunder
    access, ...), definitions, lambdas, and names a kernel has no business with."""
    regions = (integrity or skeletons.check(sk, text)).todo_lines
    tree = _parse(text) if regions else None
    return _todo_allowlist(_Scope(tree, sk), regions) if tree else []


def _todo_allowlist(scope: _Scope, regions: dict[int, str]) -> list[Finding]:
    found = []
    for node, fn, _ in _nodes(scope, set(regions)):
        line = _anchor(node)
        problem = line in regions and _kernel_problem(node, scope.kernel_names(fn))
        if problem:
            what, is_name = problem
            why = f"is not a name a kernel can use: a TODO region may use {KERNEL_NAMES}"
            message = (
                f"line {line} (in TODO({regions[line]})): {what} {why if is_name else IN_REGION}"
            )
            found.append(Finding(line, TODO_ALLOWLIST, message))
    return _sorted(found)


# ---- rule 7: changed given code opens no path around the kernels ------------------------------


def _host_problem(node: ast.AST, fn: ast.AST | None, scope: _Scope) -> str | None:
    """Why ``node``, changed host code, may give a non-Triton path; None when it is fine."""
    module = scope.module
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        known = scope.skeleton.import_keys | NEW_IMPORTS
        new = [k for k in _import_keys(node) if k not in known and not _from_triton(k)]
        return f"`{new[0]}` added outside the TODO regions: {PATH}" if new else None
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return f"`{_code(node)}` outside the TODO regions: {STATE}"
    if isinstance(node, ast.ClassDef):
        return f"a class (`{node.name}`) outside the TODO regions: an object can pose as a kernel"
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return _def_problem(node, module)
    if isinstance(node, ast.Attribute):
        if node.attr.startswith("__"):
            return (
                f"`{node.attr}` outside the TODO regions: dunder access reaches around the kernels"
            )
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            root = _root(node)
            if isinstance(root, ast.Name) and root.id in module.bound - scope.locals(fn):
                return f"assigning `{_code(node)}` changes module-level `{root.id}`: {PATH}"
            return f"assigning `{_code(node)}` in host code: {PATH}"
        return None
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, (ast.Store, ast.Del)):
        return f"writing `{_code(node)}` in host code: {PATH}"
    if isinstance(node, (ast.BinOp, ast.AugAssign)) and isinstance(node.op, ast.MatMult):
        return f"`@` (a matrix product in Python) in `{_code(node)}`: {PATH}"
    if isinstance(node, (ast.For, ast.While)) and fn is not None:
        return "a Python loop in a host function: host code only prepares and launches kernels"
    if isinstance(node, ast.NamedExpr):  # accumulates inside a comprehension, loop or not
        return f"`{_code(node)}` in host code: host code only prepares and launches kernels"
    if isinstance(node, ast.Call):
        return _call_problem(node, module)
    if isinstance(node, ast.Name):
        return _name_problem(node, fn, scope)
    return None


def _def_problem(node: ast.FunctionDef | ast.AsyncFunctionDef, module: _Module) -> str | None:
    if node.name.startswith("__"):
        return f"`{node.name}` defined outside the TODO regions: a dunder method can fake a kernel"
    for d in node.decorator_list:
        if _decorator(d).split(".")[0] not in module.triton | {"triton"}:
            return f"decorator `@{_code(d)}` on `{node.name}`: a kernel file needs triton's only"
    for default in [*node.args.defaults, *node.args.kw_defaults]:
        if default is not None and _is_container(default):
            return f"mutable default `{_code(default)}` of `{node.name}`: {STATE}"
    return None


def _call_problem(node: ast.Call, module: _Module) -> str | None:
    func = node.func
    if isinstance(func, ast.Subscript):  # kernel[grid](...)
        if _dotted(func.value) not in module.jit:
            return (
                f"`{_code(func.value)}[...](...)` launches something that is not a @triton.jit "
                f"function of this file: {PATH}"
            )
        return None
    if isinstance(func, ast.Attribute) and func.attr not in HOST_METHODS:
        root = _root(func)
        if isinstance(root, ast.Name) and root.id in module.imports | OUTSIDE_MODULES:
            return None  # a module's function: judged by the module's name
        if not isinstance(root, ast.Constant):  # "...".format(...) is fine
            return f"`.{func.attr}()` in host code: {PATH}"
    return None


def _name_problem(node: ast.Name, fn: ast.AST | None, scope: _Scope) -> str | None:
    name, module, parents = node.id, scope.module, scope.parents
    if name.startswith("__") or name in FORBIDDEN_BUILTINS:
        return f"`{name}` outside the TODO regions: it reaches around the kernels"
    if name in OUTSIDE_MODULES:
        return f"`{name}` outside the TODO regions: a kernel file has no use for it when graded"
    if isinstance(node.ctx, (ast.Store, ast.Del)):
        return f"`{name}` is rebound: {PATH}" if fn is None and name in module.imports else None
    if name == "torch":
        up = parents.get(id(node))
        if isinstance(up, ast.Attribute) and up.attr in TORCH_HOST:
            if not isinstance(parents.get(id(up)), ast.Attribute):
                return None
        shown = _code(up) if isinstance(up, ast.Attribute) else "torch"
        return f"`{shown}` in host code: torch may allocate outputs, but {PATH}"
    if name in module.imports and name not in HOST_MODULES | module.triton:
        return f"`{name}` used outside the TODO regions and the __main__ block: {PATH}"
    local = name in scope.locals(fn)
    if fn is not None and name in module.containers and not local:
        return f"module-level `{name}` used inside a function: {STATE}"
    if not local and name not in module.bound and hasattr(builtins, name):
        if name not in HOST_BUILTINS:
            return (
                f"`{name}` outside the TODO regions: host code only prepares and launches kernels"
            )
    return None


def non_triton_path(
    sk: Skeleton, text: str, integrity: skeletons.Integrity | None = None
) -> list[Finding]:
    """Constructs in changed given code (outside the TODO regions) that can produce the output
    without the Triton kernels, or detect the grader. Kernel bodies are held to the TODO
    allowlist, host code to allocating, launching and shape arithmetic; the ``__main__`` block
    is not judged (it does not run when graded)."""
    edited = (integrity or skeletons.check(sk, text)).edited
    tree = _parse(text) if edited else None
    return _non_triton_path(_Scope(tree, sk), edited) if tree else []


def _non_triton_path(scope: _Scope, edited_lines: list[int]) -> list[Finding]:
    edited = set(edited_lines)
    found = []
    for node, fn, where in _nodes(scope, edited):
        line = _anchor(node)
        if isinstance(node, (ast.Import, ast.ImportFrom)):  # any of its lines
            line = min(edited.intersection(range(node.lineno, node.end_lineno + 1)), default=None)
        if where == "main" or line not in edited:
            continue
        if where == "host":
            message = _host_problem(node, fn, scope)
        else:
            problem = _kernel_problem(node, scope.kernel_names(fn))
            message = problem and (
                f"{problem[0]} is not a name a kernel can use: kernels may use {KERNEL_NAMES}"
                if problem[1]
                else f"{problem[0]} is not allowed inside a kernel, in or outside the TODO "
                f"regions: {PATH}"
            )
        if message:
            found.append(Finding(line, NON_TRITON_PATH, f"line {line}: {message}"))
    return _sorted(found)


# ---- an exercise's own refusals (grader.specs.model.Forbidden) ---------------------------------


def _named(node: ast.AST) -> str | None:
    """The name a node gives a function: an attribute's, a name's, an import's."""
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.alias):
        return node.name.split(".")[-1]
    return None


def exercise_forbids(tree: ast.Module, forbidden) -> list[Finding]:
    """Every use, anywhere in the file, of a function whose name starts with a ``Forbidden``
    rule's prefix (09 refuses ``tl.atomic_*``)."""
    found = []
    for node in ast.walk(tree):
        name = _named(node)
        for rule in forbidden if name else ():
            if name.startswith(rule.prefix):
                line = _anchor(node) or 0
                shown = node.name if isinstance(node, ast.alias) else _code(node)
                found.append(
                    Finding(
                        line,
                        EXERCISE_FORBIDS,
                        f"line {line}: `{shown}` is not allowed in this exercise (the trap "
                        f"{rule.trap}): {rule.why}",
                    )
                )
    return found


def screen(
    sk: Skeleton, text: str, integrity: skeletons.Integrity | None = None, forbidden=()
) -> list[Finding]:
    """Both screens and the exercise's own refusals (``forbidden``: its spec's ``Forbidden``
    rules), in line order; pass ``integrity`` when it is at hand, to align only once."""
    integrity = integrity or skeletons.check(sk, text)
    found = []
    if forbidden:
        tree = _parse(text)
        found += exercise_forbids(tree, forbidden) if tree else []
    tree = _parse(text) if integrity.todo_lines or integrity.edited else None
    if tree is None:
        return _sorted(found)
    scope = _Scope(tree, sk)
    found += _todo_allowlist(scope, integrity.todo_lines)
    return _sorted(found + _non_triton_path(scope, integrity.edited))
