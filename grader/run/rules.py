"""What a TODO region may hold: Triton, and only inside its kernel.

Checked on the graded file's syntax tree (``grader.run.splice``), before anything runs. Every
region statement must be a statement of the ``@triton.jit`` function the region sits in, made
of Triton's language and nothing else:

* names: the kernel's parameters and locals, ``tl`` (and ``triton.language``), the skeleton's
  module-level ``tl.constexpr`` globals and ``@triton.jit`` helpers, and a few builtins Triton
  compiles (``range``, ``min``, ``float``, ...);
* attributes: ``tl``'s public language (``tl.__all__``, ``tl.math``, libdevice) and the public
  attributes of a tensor, a dtype or a constexpr: never a dunder, never a tensor's ``handle``;
* no strings, except ``float("-inf")``-style constants, a message to ``tl.static_assert``,
  ``tl.device_assert``, ``tl.device_print``, ``print`` or ``assert``, and the documented string
  options of ``tl.load``/``tl.store`` and ``tl.dot``'s IEEE precisions; no definitions, imports,
  lambdas, comprehensions, ``global``, ``with``, ``try``, ``raise`` or ``del``;
* nothing whose meaning the interpreter cannot reproduce (``DIVERGENT``): compiler hints it
  never checks, ``tie_break_left`` it ignores, NaN it compares differently, a loop step unknown
  at compile time, and writes (``tl.store``, atomics), which let programs see each other's
  results in an order the interpreter fixes and a GPU does not. The given code writes outputs.

In Triton's interpreter a kernel runs as Python: these rules are what keeps region code from
reaching anything but its inputs and outputs there.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass

TODO_RULES = "todo-rules"

BUILTINS = frozenset({"range", "float", "int", "bool", "min", "max", "abs", "len", "print"})
NOT_KERNEL_CODE: dict[type, str] = {
    ast.Import: "an import",
    ast.ImportFrom: "an import",
    ast.Global: "`global`",
    ast.Nonlocal: "`nonlocal`",
    ast.FunctionDef: "a function definition",
    ast.AsyncFunctionDef: "a function definition",
    ast.ClassDef: "a class definition",
    ast.Lambda: "a lambda",
    ast.With: "`with`",
    ast.AsyncWith: "`with`",
    ast.Try: "`try`",
    ast.Raise: "`raise`",
    ast.Delete: "`del`",
    ast.AsyncFor: "`async for`",
    ast.Await: "`await`",
    ast.Yield: "`yield`",
    ast.YieldFrom: "`yield`",
    ast.NamedExpr: "`:=`",
    ast.ListComp: "a comprehension",
    ast.SetComp: "a comprehension",
    ast.DictComp: "a comprehension",
    ast.GeneratorExp: "a comprehension",
    ast.Dict: "a dict",
    ast.Set: "a set",
    ast.JoinedStr: "an f-string",
    ast.Starred: "`*` unpacking",
}
for _name, _what in (("TryStar", "`try`"), ("Match", "`match`")):
    if hasattr(ast, _name):
        NOT_KERNEL_CODE[getattr(ast, _name)] = _what

# Strings a kernel may hold: (callee, argument position or keyword) -> allowed values (None: any
# text, a message).
MESSAGES = {
    ("tl.static_assert", 1): None,
    ("tl.device_assert", 1): None,
    ("tl.device_print", 0): None,
    ("tl.static_print", 0): None,
    ("print", 0): None,
    ("float", 0): frozenset({"inf", "-inf", "+inf", "infinity", "-infinity"}),
    ("tl.load", "cache_modifier"): frozenset({"", ".ca", ".cg", ".cv"}),
    ("tl.load", "eviction_policy"): frozenset({"", "evict_first", "evict_last"}),
    ("tl.store", "cache_modifier"): frozenset({"", ".wb", ".cg", ".cs", ".wt"}),
    ("tl.store", "eviction_policy"): frozenset({"", "evict_first", "evict_last"}),
    # TF32 (or bf16x3) rounds fp32 inputs on a GPU, where the interpreter computes in IEEE fp32:
    # two verdicts for one file. ieee and tf32x3 agree with the interpreter within tolerance.
    ("tl.dot", "input_precision"): frozenset({"ieee", "tf32x3"}),
}
TF32 = (
    "rounds fp32 inputs to TF32 on a GPU (about 3 significant digits) while Triton's CPU "
    'interpreter computes in full fp32: leave it out (the grader compiles dots as "ieee")'
)


# What a region may not use because the interpreter and a GPU would give it two meanings (each
# found by probing the grader: right in the interpreter, wrong compiled, or the reverse).
INTERPRETER_TRUSTS = "is a promise a GPU's compiler trusts and Triton's interpreter never checks"
DIVERGENT = {
    "tl.multiple_of": INTERPRETER_TRUSTS,
    "tl.max_contiguous": INTERPRETER_TRUSTS,
    "tl.max_constancy": INTERPRETER_TRUSTS,
    "tl.assume": INTERPRETER_TRUSTS,
    "tl.store": "writes an output: in a region it lets programs see each other's writes, which "
    "the interpreter runs one program at a time and a GPU all at once; the given code writes",
    "tl.atomic_": "lets programs see each other's writes, in an order a GPU does not fix",
}
TIE_BREAK = (
    "`tie_break_left` is ignored by Triton's interpreter (it always takes the lowest index) "
    "and honoured on a GPU: leave it out"
)
NAN = (
    'float("nan") compares one way in the interpreter (tl.argmax skips it) and another on a '
    'GPU: mask with float("-inf")'
)
LOOP_STEP = (
    "a loop step must be a positive number or a tl.constexpr: one known only at run time, "
    "if negative, runs the loop on a GPU zero times and in the interpreter as Python's range"
)


@dataclass(frozen=True)
class Finding:
    line: int  # in the submission
    rule: str
    message: str  # one line, for the student


@functools.cache
def _language() -> tuple[frozenset[str], dict[str, frozenset[str]], frozenset[str]]:
    """(tl's public names, the public names of its submodules a kernel calls into, the public
    attributes of tensors, dtypes and constexprs), read from the installed Triton."""
    import triton.language as tl

    public = frozenset(n for n in tl.__all__ if not n.startswith("_"))
    modules = {"math": frozenset(n for n in dir(tl.math) if not n.startswith("_"))}
    try:
        from triton.language.extra import libdevice

        modules["extra.libdevice"] = frozenset(n for n in dir(libdevice) if not n.startswith("_"))
    except ImportError:
        pass
    classes = [tl.tensor, tl.dtype, tl.pointer_type, tl.block_type, tl.constexpr]
    if hasattr(tl, "tensor_descriptor"):
        classes.append(tl.tensor_descriptor)
    attrs = {n for c in classes for n in dir(c) if not n.startswith("_")}
    # Set in __init__, so not in dir(class): what a tensor or a constexpr carries.
    attrs |= {"dtype", "shape", "type", "numel", "value", "element_ty", "block_shape"}
    attrs -= {"handle", "to_ir", "codegen_name", "mangle", "cache_key_part"}
    return public, modules, frozenset(attrs)


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(parts)]) if isinstance(node, ast.Name) else None


def _short(node: ast.AST, limit: int = 48) -> str:
    text = " ".join(ast.unparse(node).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _language_path(dotted: str) -> str | None:
    """``tl.x.y`` as ``tl.x.y`` whatever alias reached it (``triton.language``); else None."""
    for prefix in ("triton.language.", "tl."):
        if dotted.startswith(prefix):
            return "tl." + dotted[len(prefix) :]
    return None


def _is_jit(fn: ast.AST) -> bool:
    def name(d):
        return _dotted(d.func if isinstance(d, ast.Call) else d) or ""

    return isinstance(fn, ast.FunctionDef) and any(
        name(d) in ("triton.jit", "jit") for d in fn.decorator_list
    )


def _module_names(tree: ast.Module) -> tuple[frozenset[str], frozenset[str]]:
    """(the skeleton's @triton.jit functions, its module-level tl.constexpr globals)."""
    jit, constexpr = set(), set()
    for stmt in tree.body:
        if _is_jit(stmt):
            jit.add(stmt.name)
        elif isinstance(stmt, ast.Assign):
            pairs = []
            for target in stmt.targets:
                if isinstance(target, ast.Tuple) and isinstance(stmt.value, ast.Tuple):
                    pairs += zip(target.elts, stmt.value.elts)
                else:
                    pairs.append((target, stmt.value))
            for target, value in pairs:
                call = value.func if isinstance(value, ast.Call) else None
                if isinstance(target, ast.Name) and call is not None:
                    if _language_path(_dotted(call) or "") == "tl.constexpr":
                        constexpr.add(target.id)
    return frozenset(jit), frozenset(constexpr)


def _function_names(fn: ast.FunctionDef) -> frozenset[str]:
    a = fn.args
    params = {p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg) if p}
    stored = {
        n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
    return frozenset(params | stored)


def _constexpr_params(fn: ast.FunctionDef) -> frozenset[str]:
    """The parameters of ``fn`` annotated ``tl.constexpr``: known when the kernel compiles."""
    a = fn.args
    return frozenset(
        p.arg
        for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)
        if p.annotation is not None
        and _language_path(_dotted(p.annotation) or "") == "tl.constexpr"
    )


class _Rules:
    def __init__(self, tree: ast.Module, forbidden):
        self.public, self.modules, self.attrs = _language()
        self.jit, self.constexpr = _module_names(tree)
        self.forbidden = tuple(forbidden)
        self.known: frozenset[str] = frozenset()  # the current kernel's compile-time names

    def statement(self, stmt: ast.stmt, fn: ast.FunctionDef):
        """(node, message) for the construct of ``stmt`` that says most plainly why it is not
        kernel code: a statement or expression kinds kernels lack, then a name a kernel cannot
        use, then anything else (an attribute, a call), the outermost first."""
        names = _function_names(fn) | self.jit | self.constexpr | BUILTINS | {"tl", "triton"}
        self.known = _constexpr_params(fn) | self.constexpr
        strings = self._allowed_strings(stmt)
        found = []
        for n, node in enumerate(ast.walk(stmt)):
            problem = self.node(node, names, strings)
            if problem:
                rank = (
                    0 if type(node) in NOT_KERNEL_CODE else 1 if isinstance(node, ast.Name) else 2
                )
                found.append((rank, n, node, problem))
        if found:
            _, _, node, problem = min(found, key=lambda f: f[:2])
            yield node, problem

    def node(self, node: ast.AST, names: frozenset[str], strings: set[int]) -> str | None:
        for kind, what in NOT_KERNEL_CODE.items():
            if isinstance(node, kind):
                return f"{what} is not kernel code"
        for rule in self.forbidden:
            named = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", None)
            if named and named.startswith(rule.prefix):
                return (
                    f"`{named}` is not allowed in this exercise (the trap {rule.trap}): {rule.why}"
                )
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
            parent = getattr(node, "_parent", None)
            if (
                isinstance(parent, ast.Call)
                and _dotted(parent.func) == "float"
                and str(node.value).strip().lower().lstrip("+-") == "nan"
            ):
                return NAN
            if id(node) not in strings:
                return f"the string {node.value!r} has no place in a kernel"
        if isinstance(node, ast.Name):
            if node.id.startswith("__") or node.id not in names:
                return f"`{node.id}` is not a name a kernel can use"
            if node.id in ("tl", "triton") and not isinstance(
                getattr(node, "_parent", None), ast.Attribute
            ):
                return f"`{node.id}` alone is not kernel code: call its functions"
        if isinstance(node, ast.Attribute):
            root = _dotted(node)
            if root and root.split(".")[0] not in names:
                return f"`{root.split('.')[0]}` is not a name a kernel can use"
            return self.attribute(node)
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.keyword) and (node.arg is None or node.arg.startswith("_")):
            return f"the keyword `{node.arg or '**'}` is not for kernel code"
        if isinstance(node, ast.keyword) and "tie_break_left" in (node.arg or ""):
            return TIE_BREAK
        return None

    def attribute(self, node: ast.Attribute) -> str | None:
        dotted = _dotted(node)
        path = _language_path(dotted) if dotted else None
        if dotted and dotted.split(".")[0] in ("tl", "triton"):
            if path is None:
                if dotted in ("triton.language", "triton.cdiv"):
                    return None
                return f"`{dotted}` is not Triton's kernel language (tl.*)"
            head, *rest = path[3:].split(".")
            if head not in self.public:
                return f"`{dotted}` is not part of Triton's public language (tl.__all__)"
            for name, why in DIVERGENT.items():
                if path == name or (name.endswith("_") and path.startswith(name)):
                    return f"`{dotted}` {why}" if why is INTERPRETER_TRUSTS else f"`{path}` {why}"
            if head in ("math", "extra"):
                for module, names in self.modules.items():
                    parts = module.split(".")
                    if [head, *rest][: len(parts)] == parts[: len(rest) + 1]:
                        tail = [head, *rest][len(parts) :]
                        if not tail or (len(tail) == 1 and tail[0] in names):
                            return None
                return f"`{dotted}` is not a function of Triton's language"
            return self._member(node.attr, dotted) if rest else None
        if dotted and dotted.split(".")[0] in self.jit | self.constexpr:
            return f"`{dotted}`: a kernel calls its helpers, it does not reach into them"
        return self._member(node.attr, dotted or _short(node))

    def _member(self, attr: str, shown: str) -> str | None:
        if attr.startswith("_") or attr not in self.attrs:
            return f"`{shown}` is not an attribute of a Triton tensor, dtype or constexpr"
        return None

    def call(self, node: ast.Call) -> str | None:
        func = node.func
        dotted = _dotted(func)
        if (isinstance(func, ast.Name) and func.id == "range") or _language_path(dotted or "") in (
            "tl.range",
            "tl.static_range",
        ):
            steps = node.args[2:3] + [k.value for k in node.keywords if k.arg == "step"]
            if steps and not self._known_positive(steps[0]):
                return LOOP_STEP
        # tie_break_left by position: tl.argmax(x, axis, tie_break_left), tl.max(x, axis,
        # return_indices, return_indices_tie_break_left).
        # As a tensor's method (x.argmax(axis, tie_break_left)) each comes one place earlier.
        tie_at = {"tl.argmax": 2, "tl.argmin": 2, "tl.max": 3, "tl.min": 3}
        path = _language_path(dotted or "")
        if path is None and isinstance(func, ast.Attribute):
            path = "tl." + func.attr
            tie_at = {name: at - 1 for name, at in tie_at.items()}
        if len(node.args) > tie_at.get(path or "", 99):
            return TIE_BREAK
        if isinstance(func, ast.Name):
            if func.id in BUILTINS or func.id in self.jit:
                return None
            return f"`{func.id}(...)`: a kernel calls Triton's functions and its own helpers only"
        if not isinstance(func, ast.Attribute):
            return f"`{ast.unparse(func)}(...)` calls something that is not a function"
        if _language_path(dotted or "") == "tl.dot":
            return self._dot(node)
        return None

    def _known_positive(self, step: ast.expr) -> bool:
        """A loop step Triton knows when it compiles: a positive literal or a constexpr."""
        if isinstance(step, ast.Constant):
            return isinstance(step.value, int) and step.value > 0
        return isinstance(step, ast.Name) and step.id in self.known

    def _dot(self, node: ast.Call) -> str | None:
        if len(node.args) > 3:
            return 'tl.dot\'s precision options go by keyword, and only input_precision="ieee"'
        for kw in node.keywords:
            if kw.arg == "allow_tf32":
                return f"tl.dot(..., allow_tf32=...) {TF32}"
            if kw.arg == "input_precision":
                value = kw.value
                if not (isinstance(value, ast.Constant) and value.value in ("ieee", "tf32x3")):
                    return f"tl.dot(..., input_precision={ast.unparse(value)}) {TF32}"
        return None

    def _allowed_strings(self, stmt: ast.stmt) -> set[int]:
        """The string constants of ``stmt`` that stand where a kernel may hold text."""
        ok = set()
        for node in ast.walk(stmt):
            if isinstance(node, ast.Assert) and node.msg is not None:
                ok.add(id(node.msg))
            if not isinstance(node, ast.Call):
                continue
            dotted = _dotted(node.func) or ""
            callee = _language_path(dotted) or dotted
            for where, arg in [*enumerate(node.args), *((k.arg, k.value) for k in node.keywords)]:
                allowed = MESSAGES.get((callee, where), ())
                if not isinstance(arg, ast.Constant) or not isinstance(arg.value, str):
                    continue
                if allowed is None or arg.value.lower() in allowed:
                    ok.add(id(arg))
        return ok


def check(text: str, graded: dict[str, list[list[int]]], lines: dict[int, int], forbidden=()):
    """Findings for the region statements of the graded file ``text`` (``graded``: each TODO's
    line spans there; ``lines``: its line -> the submission's, for the messages)."""
    tree = ast.parse(text)
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            child._parent = node
    rules = _Rules(tree, forbidden)
    spans = [(todo, a, b) for todo, runs in graded.items() for a, b in runs if b >= a]
    found: list[Finding] = []
    for fn, stmt in _statements(tree):
        todo = next((t for t, a, b in spans if a <= stmt.lineno and stmt.end_lineno <= b), None)
        if todo is None:
            continue
        where = f"TODO({todo})"
        if fn is None or not _is_jit(fn):
            line = lines.get(stmt.lineno, stmt.lineno)
            found.append(
                Finding(
                    line,
                    TODO_RULES,
                    f"line {line} (in {where}): region code must stay in its kernel",
                )
            )
            continue
        for node, problem in rules.statement(stmt, fn):
            line = lines.get(getattr(node, "lineno", stmt.lineno), stmt.lineno)
            found.append(Finding(line, TODO_RULES, f"line {line} (in {where}): {problem}"))
    unique = {(f.line, f.message): f for f in found}
    return [unique[k] for k in sorted(unique)]


def _statements(tree: ast.Module):
    """(innermost enclosing function or None, statement) for every statement at any depth; a
    compound statement comes before the statements of its blocks, which are not repeated when
    the compound one already lies in a region (the caller matches whole spans)."""
    todo: list[tuple[ast.FunctionDef | None, ast.AST]] = [(None, tree)]
    while todo:
        fn, node = todo.pop()
        for name in ("body", "orelse", "finalbody"):
            for stmt in getattr(node, name, []) or []:
                if not isinstance(stmt, ast.stmt):
                    continue
                yield fn, stmt
                inner = stmt if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) else fn
                todo.append((inner, stmt))
        for handler in getattr(node, "handlers", []) or []:
            todo.append((fn, handler))
