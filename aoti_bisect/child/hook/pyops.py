"""The Python that defines each custom op a program calls, as source a file of its own can run: the op's
implementation and fake (torch.library.custom_op, or triton_op with the @triton.jit kernels it launches through
wrap_triton, their constexprs and decorators), and what they read from their module (imports, plain values, helper
functions, other ops). minify writes it into every candidate and the reduced repro.py, so they define the op
themselves instead of importing the repro.

record(ep) returns {"ops": {qualname: [piece key, ...]}, "pieces": {key: source}, "problems": {qualname: why},
"no_fake": [qualname, ...]}: the pieces of one op, dependencies first; an op whose source cannot be had (a closure
over local state, a lambda, a C function with no library, an object made at run time) gets one line in problems
instead. A fake that cannot be had is left out (no_fake): minify then fakes the op from the output the program
recorded. Ops a shared library registers (oplibs.py) are not here.
"""
import ast
import inspect
import os
import sys
import sysconfig
import textwrap
import types

from . import oplibs


class Unwritable(Exception):
    """Why a definition cannot be written as source, in words that finish "…, because <why>"."""


def _installed(module):
    """A module a fresh interpreter imports by name (the standard library, site-packages), as opposed to the
    repro's own files, whose source is written out instead."""
    path = getattr(module, "__file__", None)
    if not path:
        return module.__name__ != "__main__"
    roots = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    return any(os.path.abspath(path).startswith(os.path.abspath(r) + os.sep) for r in roots)


def _source(fn):
    """(the function's source, dedented, as parsed, its ast.FunctionDef)."""
    if isinstance(fn, types.BuiltinFunctionType):
        raise Unwritable(f"`{fn.__name__}` is a C function, not Python source")
    if fn.__name__ == "<lambda>":
        raise Unwritable("it is a lambda, whose source cannot be told apart from the line around it")
    if fn.__closure__:
        names = ", ".join(fn.__code__.co_freevars)
        raise Unwritable(f"`{fn.__qualname__}` closes over local variables ({names}) of the function that made it")
    try:
        text = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError) as exc:
        raise Unwritable(f"the source of `{fn.__qualname__}` cannot be read ({exc})") from None
    tree = ast.parse(text)
    node = tree.body[0]
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        raise Unwritable(f"the source of `{fn.__qualname__}` is not a def")
    return text, node


def _free_names(fn, node, decorators):
    """Module-level names the def reads: in its body and annotations and defaults (and its decorators when
    they are kept), minus its own and its nested functions' locals."""
    local = set()
    todo = [fn.__code__]
    while todo:
        code = todo.pop()
        local.update(code.co_varnames, code.co_cellvars)
        todo += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    parts = list(node.args.defaults) + list(node.args.kw_defaults or []) + list(node.body)
    parts += [a.annotation for a in (*node.args.args, *node.args.kwonlyargs, *node.args.posonlyargs) if a.annotation]
    parts += [node.returns] if node.returns else []
    parts += list(node.decorator_list) if decorators else []
    names = []
    for part in parts:
        for sub in ast.walk(part):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load) and sub.id not in names:
                names.append(sub.id)
    return [n for n in names if n not in local and n in fn.__globals__]


def _literal(value):
    try:
        return ast.literal_eval(repr(value)) == value and type(ast.literal_eval(repr(value))) is type(value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False


def _kernel_function(obj):
    """The Python function under a Triton kernel object (JITFunction, Autotuner, Heuristics): None for others."""
    if not type(obj).__module__.startswith("triton."):
        return None
    while not isinstance(obj, types.FunctionType) and hasattr(obj, "fn"):
        obj = obj.fn
    return obj if isinstance(obj, types.FunctionType) else None


class _Writer:
    def __init__(self):
        self.pieces = {}  # key -> source, in the order they must run
        self.bound = {}  # module-level name -> the object the pieces bind it to
        self.no_fake = []  # ops whose fake is not plain source: minify fakes them from the recorded output

    def bind(self, name, obj):
        if name in self.bound and self.bound[name] is not obj:
            raise Unwritable(f"two different objects are named `{name}` in the code it reads")
        self.bound[name] = obj

    def add(self, key, text):
        self.pieces.setdefault(key, text)
        return key

    def name(self, name, obj, keys):
        """Makes the pieces that bind `name` to `obj` (dependencies first), appending their keys to keys."""
        if name in self.bound and self.bound[name] is obj:
            keys.append(f"name:{name}")
            return
        self.bind(name, obj)
        key = f"name:{name}"
        if isinstance(obj, types.ModuleType):
            # a module of the repro's own folder is imported too: a fresh process without it says so in one line
            line = f"import {obj.__name__}" if obj.__name__ == name else f"import {obj.__name__} as {name}"
            keys.append(self.add(key, line))
            return
        if _literal(obj):
            keys.append(self.add(key, f"{name} = {obj!r}"))
            return
        torch = _torch()
        if isinstance(obj, (torch.dtype, torch.device)):
            keys.append(self.add("name:torch", "import torch"))
            value = str(obj) if isinstance(obj, torch.dtype) else f"torch.device({str(obj)!r})"
            keys.append(self.add(key, f"{name} = {value}"))
            return
        if type(obj).__name__ == "constexpr" and type(obj).__module__.startswith("triton.") and _literal(obj.value):
            keys.append(self.add("import:triton.language", "import triton.language"))
            keys.append(self.add(key, f"{name} = triton.language.constexpr({obj.value!r})"))
            return
        from torch._library.custom_ops import CustomOpDef
        if isinstance(obj, CustomOpDef):
            keys += self.op(obj._qualname, obj)
            keys.append(self.add(key, f"{name} = torch.ops.{obj._namespace}.{obj._name}"))
            return
        kernel = _kernel_function(obj)
        if kernel is not None:
            keys += self.function(kernel, name, decorators=True)
            return
        module = sys.modules.get(getattr(obj, "__module__", None) or "")
        qualname = getattr(obj, "__qualname__", "")
        if (module is not None and _installed(module) and "<locals>" not in qualname
                and _resolve(module, qualname) is obj):
            keys.append(self.add(f"name:{module.__name__}" if "." not in module.__name__ else
                                 f"import:{module.__name__}", f"import {module.__name__}"))
            keys.append(self.add(key, f"{name} = {module.__name__}.{qualname}"))
            return
        if isinstance(obj, types.FunctionType):
            keys += self.function(obj, name, decorators=True)
            return
        raise Unwritable(f"it reads `{name}`, a {type(obj).__name__} the repro made when it ran, which has no "
                         "source")

    def function(self, fn, name, decorators):
        """The def of fn bound to `name` (its decorators kept or not), after what it reads."""
        text, node = _source(fn)
        keys = []
        for free in _free_names(fn, node, decorators):
            if free != name:
                self.name(free, fn.__globals__[free], keys)
        lines = text.splitlines()
        start = node.decorator_list[0].lineno if decorators and node.decorator_list else node.lineno
        body = "\n".join(lines[start - 1:node.end_lineno])
        if node.name != name:  # a fake named `_`, like every other op's: given a name of its own
            body = body.replace(f"def {node.name}(", f"def {name}(", 1)
        where = f"{os.path.basename(fn.__code__.co_filename)}:{fn.__code__.co_firstlineno}"
        keys.append(self.add(f"name:{name}", f"# {fn.__module__}.{fn.__qualname__} ({where})\n{body}"))
        return keys

    def op(self, qualname, opdef):
        """The pieces that define one torch.library.custom_op / triton_op, the registration last."""
        from torch._library.triton import triton_ops_to_kernels

        key = f"op:{qualname}"
        if key in self.pieces:
            return [key]
        self.pieces[key] = None  # an op that reads itself (through a helper) is not made twice
        namespace, short = qualname.split("::")
        keys = [self.add("name:torch", "import torch")]
        self.bound.setdefault("torch", _torch())
        triton = qualname in triton_ops_to_kernels
        impl = inspect.getclosurevars(opdef._init_fn).nonlocals.get("fn") if triton else opdef._init_fn
        impl_name = f"_{namespace}_{short}_impl"
        keys += self.function(impl, impl_name, decorators=False)
        devices = [d for d, wrapped in opdef._backend_fns.items()
                   if inspect.getclosurevars(wrapped).nonlocals.get("fn") is opdef._init_fn]
        mutated = [a.name for a in opdef._opoverload._schema.arguments if a.alias_info and a.alias_info.is_write]
        if triton:
            lines = [f"torch.library.triton_op({qualname!r}, {impl_name}, mutates_args={tuple(mutated)!r}, "
                     f"schema={opdef._schema!r})"]
        else:
            where = "" if devices in ([], [None]) else f", device_types={devices!r}"
            lines = [f"torch.library.custom_op({qualname!r}, {impl_name}, mutates_args={tuple(mutated)!r}, "
                     f"schema={opdef._schema!r}{where})"]
        fake = opdef._abstract_fn
        if fake is not None and not triton:  # a triton_op is its own fake
            fake_name = f"_{namespace}_{short}_fake"
            try:
                keys += self.function(fake, fake_name, decorators=False)
                lines.append(f"torch.library.register_fake({qualname!r}, {fake_name})")
            except Unwritable:
                self.no_fake.append(qualname)
        self.pieces[key] = "\n".join(lines)
        return keys + [key]


def _resolve(module, qualname):
    obj = module
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    return obj


def _torch():
    import torch
    return torch


def record(ep):
    from torch._library.custom_ops import OPDEFS

    libraries = None
    doc = {"ops": {}, "pieces": {}, "problems": {}}
    writer = _Writer()
    for namespace, names in sorted(oplibs.custom_ops(ep).items()):
        for short in sorted(names):
            qualname = f"{namespace}::{short}"
            opdef = OPDEFS.get(qualname)
            if opdef is None:
                if libraries is None:
                    libraries = oplibs.libraries(ep)
                if namespace in libraries:
                    continue
                doc["problems"][qualname] = ("torch.library.custom_op did not make it and no shared library in the "
                                             "process registers it: a torch.library.Library op, whose Python kernel "
                                             "only the dispatcher holds, or a C extension with no library file")
                continue
            saved = (dict(writer.pieces), dict(writer.bound), list(writer.no_fake))
            try:
                doc["ops"][qualname] = list(dict.fromkeys(writer.op(qualname, opdef)))
            except Unwritable as exc:
                writer.pieces, writer.bound = saved[0], saved[1]
                writer.no_fake[:] = saved[2]
                doc["problems"][qualname] = str(exc)
    doc["pieces"] = {k: v for k, v in writer.pieces.items() if v is not None}
    doc["no_fake"] = writer.no_fake
    return doc
