"""Records, inside the repro's process, which AOTI packages it compiles and loads (sitecustomize loads this).

Standard library only, and torch is never imported here: an import hook wraps
torch._inductor.aoti_compile_and_package and aoti_load_package, torch._inductor.package.load_package, and
torch.export.export (to remember the module each program came from), when the repro itself imports them. The
wrappers pass every argument, return value and exception through unchanged, and recording never raises into the
repro; where the harness asks for reuse, reuse.py may serve a compile from the flag set's cached package instead.
The record is rewritten whole and atomically after every event, so a process that dies (a segfault while loading,
in a kernel) leaves what happened before.
"""
import atexit
import contextlib
import functools
import hashlib
import importlib.abc
import io
import json
import os
import re
import sys
import threading
import time
import weakref
import zipfile

from . import atomic, capture, constants, contract, eagerwalk, provenance, redirect, reuse, vecisa

SCHEMA_VERSION = 1
# module -> the functions wrapped in it. torch._inductor.package re-exports load_package from .package.package,
# which runs first: wrapping it there makes the re-export (and aoti_load_package's own lookup) the wrapper.
PATCHES = {"torch._inductor": ("aoti_compile_and_package", "aoti_load_package"),
           "torch._inductor.package.package": ("load_package",),
           "torch.export": ("export",)}

_INPUT = re.compile(r'inputs_info_\[(\d+)\]\.name = "([^"]*)";')
_CONSTANT = re.compile(r'constants_info_\[(\d+)\]\.(name|original_fqn) = "([^"]*)";')
# package sha256 -> the ExportedProgram this process compiled into it: its parameters and buffers are the user's
# module's own tensors, so at load they say whether the package's copy is stale.
_EXPORTED: dict = {}
# id(ExportedProgram) -> (its weakref, a weakref to the module torch.export.export was given): a parameter the
# user replaced after the build (load_state_dict(assign=True), `m.w = Parameter(...)`) is no longer the object the
# program holds, so only the module, looked up by the constant's FQN, shows the package's copy is stale.
_MODULES: dict = {}
# package sha256 -> {FQN: the value compiled}, for the constants Inductor folded or inlined into the generated code
# (the wrapper lists no constant of that FQN): the package holds no copy to read at load, so the compile's is kept.
_FOLDED: dict = {}
_MAX_INLINED = 1 << 16  # elements: Inductor inlines only small constants; a folded large one is not summarised
_USER_KINDS = {"PARAMETER": "parameter", "BUFFER": "buffer", "CONSTANT_TENSOR": "constant"}


class Record:
    """The process's hook.json: its events, rewritten atomically after each one."""

    def __init__(self, path):
        self.path = path
        self.lock = threading.RLock()
        self.start = time.monotonic()
        # Wall clock, for the run's phases (run/phases.py): when the process began (a fork's, for a warm run) and
        # when the hook did; events' "t" and "t_end" count from the latter.
        self.clock = {"process_start": _process_start(), "hook_start": round(time.time(), 3)}
        self.spans = []  # [what, t0, t1]: calls timed that are no event (the repro's exports)
        self.gpu_peak = None  # bytes, noted at exit (_note_gpu_peak)
        self._reset()

    def _reset(self):
        self.pid = os.getpid()
        self.target = None
        self.events = []
        self.errors = []
        self.built = {}  # realpath -> sha256 of each package this process compiled

    def add(self, event):
        with self.lock:
            if os.getpid() != self.pid:  # a forked child: its parent's events are the parent's to write
                self._reset()
            event = {"seq": len(self.events), "t": self.now(), **event}
            self.events.append(event)
            self.write()
            return event

    def now(self):
        return round(time.monotonic() - self.start, 3)

    def span(self, what, t0):
        with self.lock:
            self.spans.append([what, t0, self.now()])

    def update(self, event, **fields):
        with self.lock:
            event.update(fields)
            self.write()

    def error(self, what):
        with self.lock:
            self.errors.append(what[:500])
            self.write()

    def write(self):
        doc = {"schema_version": SCHEMA_VERSION, "pid": self.pid, "argv": list(sys.argv), "events": self.events,
               "hook_errors": self.errors, "clock": self.clock, "spans": self.spans, "gpu_peak": self.gpu_peak}
        try:
            target = self.target or self._claim()
            self.target = target
            with atomic.replacing(target) as f:
                json.dump(doc, f, indent=1)
        except OSError as exc:
            if not self.errors or not self.errors[-1].startswith("cannot write"):
                self.errors.append(f"cannot write {self.path}: {exc}")
                sys.stderr.write(f"aoti-bisect hook: cannot write {self.path}: {exc}\n")

    def _claim(self):
        # The run's first recording process owns the path; later ones (a --cmd's second script, a worker
        # process) write beside it under their pid, so no process overwrites another's record.
        try:
            os.close(os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
            return self.path
        except FileExistsError:
            stem, ext = os.path.splitext(self.path)
            return f"{stem}-{self.pid}{ext}"


def _process_start():
    """This process's start, wall clock, to the kernel's tick (10 ms); None off Linux."""
    try:
        with open("/proc/self/stat", "rb") as f:
            ticks = int(f.read().rsplit(b")", 1)[1].split()[19])
        with open("/proc/stat", "rb") as f:
            boot = next(int(line.split()[1]) for line in f if line.startswith(b"btime "))
        return round(boot + ticks / os.sysconf("SC_CLK_TCK"), 3)
    except (OSError, ValueError, IndexError, StopIteration):
        return None


RECORD = None
_depth = threading.local()


@contextlib.contextmanager
def _outermost():
    """True for the outermost wrapped call: aoti_load_package calls load_package, recorded once."""
    depth = getattr(_depth, "n", 0)
    _depth.n = depth + 1
    try:
        yield depth == 0
    finally:
        _depth.n = depth


def _quietly(fn):
    """Recording must never raise into the repro: a failure becomes a line in hook_errors."""
    @functools.wraps(fn)
    def guarded(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            RECORD.error(f"{fn.__name__}: {type(exc).__name__}: {exc}")
            return None
    return guarded


def _describe_error(exc):
    return f"{type(exc).__name__}: {exc}"[:500]


def package_file(target):
    """(realpath, None) for a path; (None, bytes) for an in-memory buffer; (None, None) for anything else."""
    if isinstance(target, (str, bytes, os.PathLike)):
        return os.path.realpath(os.fsdecode(target)), None
    getbuffer = getattr(target, "getbuffer", None)  # io.BytesIO: read without moving its position
    return None, (bytes(getbuffer()) if getbuffer else None)


def sha256(path, data):
    if data is not None:
        return hashlib.sha256(data).hexdigest()
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def wrapper_names(path, data, model_name="model"):
    """What the package's generated wrapper calls its inputs (in call order) and constants (with their FQNs)."""
    with zipfile.ZipFile(path if data is None else io.BytesIO(data)) as z:
        wrappers = [n for n in z.namelist() if n.endswith(".wrapper.cpp")]
        mine = [n for n in wrappers if f"/data/aotinductor/{model_name}/" in n] or wrappers
        if not mine:
            return None
        text = z.read(mine[0]).decode(errors="replace")
    inputs = {int(i): name for i, name in _INPUT.findall(text)}
    constants = {}
    for i, field, value in _CONSTANT.findall(text):
        constants.setdefault(int(i), {})[field] = value
    return {"source": mine[0], "inputs": [inputs[i] for i in sorted(inputs)],
            "constants": [{"name": c.get("name"), "fqn": c.get("original_fqn")}
                          for _, c in sorted(constants.items())]}


def program_names(ep, wrapper):
    """The exported program's user inputs and constants, each with the name the generated wrapper gives it.

    Inductor compiles ep.module(): its user inputs stay graph inputs, named argN_1 after their place among
    all of AOTAutograd's flat inputs (parameters and buffers first), and the wrapper lists them in call
    order in inputs_info_; a constant user input (a Python float) is baked in and has none. Parameters and
    buffers become constants whose original_fqn the wrapper records (a folded or inlined one has none).
    """
    specs = ep.graph_signature.input_specs
    dims = _export_dims(ep)
    user = [{"name": getattr(s.arg, "name", None), "kind": type(s.arg).__name__,
             "dims": dims.get(getattr(s.arg, "name", None))} for s in specs if s.kind.name == "USER_INPUT"]
    fed = [u for u in user if u["kind"] != "ConstantArgument"]
    placeholders = wrapper["inputs"] if wrapper else []
    naming = None
    if wrapper is None:
        naming = "the package holds no generated wrapper"
    elif len(fed) != len(placeholders):
        naming = f"{len(fed)} non-constant user inputs but the wrapper takes {len(placeholders)}"
    for u in user:
        u["placeholder"] = None
    if naming is None:
        for u, placeholder in zip(fed, placeholders):
            u["placeholder"] = placeholder
    by_fqn = {c["fqn"]: c["name"] for c in (wrapper or {}).get("constants", []) if c["fqn"]}
    uses = _uses(ep)
    consts = [{"fqn": s.target, "kind": _USER_KINDS[s.kind.name], "ep_name": getattr(s.arg, "name", None),
               "placeholder": by_fqn.get(s.target), "uses": uses.get(getattr(s.arg, "name", None), [])}
              for s in specs if s.kind.name in _USER_KINDS]
    torch = sys.modules.get("torch")
    for c in consts:
        tensor = _inlined(torch, ep, c)
        if tensor is not None:
            c["values"] = constants.stats(torch, tensor)
    return {"inputs": user, "constants": consts, "naming_problem": naming}


def _inlined(torch, ep, c):
    """The exported value of a small constant the wrapper lists no placeholder for, else None. No placeholder:
    Inductor inlined it into a kernel (small buffers become literals) or folded it, so the package holds no copy
    to read at load; the exported program's value is what was compiled."""
    tensor = ep.state_dict.get(c["fqn"], ep.constants.get(c["fqn"]))
    if c["placeholder"] is None and torch is not None and isinstance(tensor, torch.Tensor) and \
            tensor.numel() <= _MAX_INLINED:
        return tensor
    return None


def _export_dims(ep):
    """placeholder name -> per dimension, its static size or the [lo, hi] range the export allows (None: open),
    from ep.range_constraints: what the package's input check is compared with, to tell a dimension Inductor
    narrowed while compiling from one the run sized outside the export's own range."""
    out = {}
    for node in ep.graph.nodes:
        shape = getattr(node.meta.get("val"), "shape", None) if node.op == "placeholder" else None
        if shape is None:
            continue
        row = []
        for d in shape:
            if isinstance(d, int):
                row.append(d)
                continue
            vr = ep.range_constraints.get(getattr(getattr(d, "node", None), "expr", None))
            row.append([_finite(vr.lower), _finite(vr.upper)] if vr is not None else [None, None])
        out[node.name] = row
    return out


def _finite(bound):
    text = str(bound)  # sympy's int_oo (an open end) converts to no int, nor raises one error type
    return int(text) if text.lstrip("-").isdigit() else None


def _uses(ep, limit=8):
    """placeholder name -> [[op, argument name], ...]: the ops each graph input feeds and as which argument
    (`_native_batch_norm_legit_no_training`, `running_var`), so a constant can be checked against its op's
    domain (a negative variance under the batch norm's rsqrt) without reading any kernel."""
    out = {}
    for node in ep.graph.nodes:
        if node.op != "placeholder":
            continue
        rows = []
        for user in list(node.users)[:limit]:
            schema = getattr(user.target, "_schema", None)
            names = [a.name for a in schema.arguments] if schema is not None else []
            op = getattr(user.target, "__name__", str(user.target)).split(".")[0]
            for i, arg in enumerate(user.args):
                if arg is node:
                    rows.append([op, names[i] if i < len(names) else str(i)])
            rows += [[op, key] for key, arg in user.kwargs.items() if arg is node]
        out[node.name] = rows
    return out


@_quietly
def _begin_compile(target):
    path, _ = package_file(target)
    return RECORD.add({"call": "aoti_compile_and_package", "status": "started", "path": path,
                       "existed_before": bool(path and os.path.exists(path)), "built_here": True})


@_quietly
def _end_compile(event, result, target, ep):
    path, data = package_file(result if isinstance(result, (str, os.PathLike)) else target)
    digest = sha256(path, data) if path or data is not None else None
    if path and digest:
        RECORD.built[path] = digest
    RECORD.update(event, status="returned", path=path, sha256=digest, t_end=RECORD.now())
    wrapper = wrapper_names(path, data) if path or data is not None else None
    RECORD.update(event, wrapper=wrapper, program=program_names(ep, wrapper) if ep is not None else None)
    if digest and ep is not None:
        _EXPORTED[digest] = weakref.ref(ep)
        _FOLDED[digest] = _folded_values(ep, (event.get("program") or {}).get("constants") or [])
    capture.on_compile(ep, path)
    if ep is not None:
        RECORD.update(event, provenance=provenance.program_nodes(ep))


def _folded_values(ep, consts):
    """FQN -> a copy of the value compiled, for each small constant the wrapper does not list (folded or inlined):
    the module's tensor is the same object, so only a copy shows an update after the build."""
    torch = sys.modules.get("torch")
    return {c["fqn"]: t.detach().clone() for c in consts if (t := _inlined(torch, ep, c)) is not None}


@_quietly
def _remember_module(ep, module):
    if ep is not None and hasattr(module, "named_parameters"):
        _MODULES[id(ep)] = (weakref.ref(ep), weakref.ref(module))


def live_state(ep):
    """FQN -> the tensor the user's module holds now: the exported program's own (the module's objects at export,
    so an in-place update shows), overridden by the module's current parameters and buffers where export saw it."""
    state = {**ep.state_dict, **ep.constants}
    refs = _MODULES.get(id(ep))
    module = refs[1]() if refs is not None and refs[0]() is ep else None
    if module is not None:
        state.update(module.named_parameters(remove_duplicate=False))
        state.update(module.named_buffers(remove_duplicate=False))
    return state


@_quietly
def _begin_load(call, target, model_name):
    path, data = package_file(target)
    digest = sha256(path, data) if (path and os.path.isfile(path)) or data is not None else None
    event = RECORD.add({"call": call, "status": "started", "path": path, "model_name": model_name,
                        "sha256": digest, "built_here": bool(digest) and RECORD.built.get(path) == digest})
    try:
        wrapper = wrapper_names(path, data, model_name) if digest else None
    except (OSError, zipfile.BadZipFile, KeyError) as exc:  # not a package: the loader says so itself
        wrapper = {"problem": _describe_error(exc)}
    RECORD.update(event, wrapper=wrapper)
    return event


@_quietly
def _read_constants(event, target, model_name):
    """The loaded package's constant values (constants.py), read once the repro holds its model, and compared
    with the live module's where this process built the package from it."""
    if event is not None and os.environ.get(contract.CONSTANTS_ENV):
        path, data = package_file(target)
        if path or data is not None:
            scratch = os.path.dirname(RECORD.path)
            ep = _EXPORTED.get(event.get("sha256"), lambda: None)()
            live = live_state(ep) if ep is not None else None
            found = constants.read(path, data, model_name, scratch, live)
            folded = constants.folded(sys.modules.get("torch"), _FOLDED.get(event.get("sha256"), {}), live or {})
            RECORD.update(event, constant_values={**found, "folded": folded} if folded else found)


def call_names(spec_text, placeholders):
    """The user's names of a loaded package's inputs, from its call spec (the pytree of the exported call), where
    the program was exported with keyword inputs: their keys, in flattening order. A positional input has no name
    in a package (the exported program's signature is not packaged), so it stays unnamed. None: the spec's leaves
    and the wrapper's inputs do not line up one to one."""
    _version, spec = json.loads(spec_text)
    args, kwargs = spec["children_spec"]
    names = [None] * len(args["children_spec"])
    keys = json.loads(kwargs["context"] or "[]") if kwargs.get("type") == "builtins.dict" else []
    for key, child in zip(keys, kwargs["children_spec"]):
        names.append(key if not child["children_spec"] else None)
        if child["children_spec"]:  # a nested structure under one key: its leaves are not named here
            return None
    if len(names) != len(placeholders) or not any(names):
        return None
    return [{"name": n, "placeholder": p, "kind": "TensorArgument"} for n, p in zip(names, placeholders) if n]


@_quietly
def _name_load(event, model):
    """A package this process did not build: its inputs' names from the call spec, its constants' FQNs from the
    wrapper, as `program` (the names of a compile) for aoti/hook_record.py's Names."""
    wrapper = (event or {}).get("wrapper") or {}
    if event is None or event.get("built_here") or "inputs" not in wrapper:
        return
    loader = getattr(model, "loader", None)
    inputs = call_names(loader.get_call_spec()[0], wrapper["inputs"]) if loader is not None else None
    RECORD.update(event, program={"inputs": inputs or [], "naming_problem": None if inputs else
                                  "positional inputs: the package holds no names for them",
                                  "constants": [{"fqn": c["fqn"], "kind": "constant", "placeholder": c["name"]}
                                                for c in wrapper["constants"] if c.get("fqn")]})


@_quietly
def _capture_load(model, target):
    capture.on_load(model, package_file(target)[0])


_CALLED: dict = {}  # id of a loaded model -> [its load event, calls so far]


@_quietly
def _count_calls(model, event):
    """Notes on the load's event, once, that the repro called the model again: a NaN the input check finds on a
    later call may be the model's own output fed back (a decoder's loop), not an input the repro made. Its class's
    __call__ is wrapped once; a counter, no read of any tensor, so nothing waits on a device."""
    if event is None or model is None:
        return
    _CALLED[id(model)] = [event, 0]
    cls = type(model)
    if getattr(cls.__call__, "_aoti_bisect_counted", False):
        return
    original = cls.__call__

    @functools.wraps(original)
    def __call__(self, *args, **kwargs):
        seen = _CALLED.get(id(self))
        if seen is not None:
            seen[1] += 1
            if seen[1] == 2:
                _note_called_again(seen[0])
        return original(self, *args, **kwargs)
    __call__._aoti_bisect_counted = True
    cls.__call__ = __call__


@_quietly
def _note_called_again(event):
    RECORD.update(event, called_again=True)


@_quietly
def _note_reuse(event, fields):
    if event is not None:
        RECORD.update(event, reuse=fields)


@_quietly
def _end(event, status, error=None):
    if event is not None:
        RECORD.update(event, status=status, t_end=RECORD.now(), **({"error": error} if error else {}))


def _stop_ahead(call, target):
    """A compile-ahead run ends where the repro would start to run what it compiled: its packages are stored."""
    if os.environ.get(contract.AHEAD_ENV):
        RECORD.add({"call": call, "status": "not loaded: compile-ahead run", "path": package_file(target)[0],
                    "sha256": None, "built_here": False, "ahead": True})
        # Not sys.exit: a repro's bare `except:` would catch it and run on.
        os._exit(0)


@_quietly
def _share_vec_isa():
    vecisa.share()


@_quietly
def _prime_vec_isa():
    vecisa.prime()


def _wrap_compile(original):
    @functools.wraps(original)
    def aoti_compile_and_package(*args, **kwargs):
        with _outermost() as outermost:
            if not outermost:
                return original(*args, **kwargs)
            target = kwargs.get("package_path")
            _prime_vec_isa()
            event = _begin_compile(target)
            kwargs = redirect.compile_kwargs(RECORD, event, kwargs)
            try:
                with eagerwalk.compiling():  # notes TF32; the precision stage's control compiles with it off
                    result = reuse.compile_or_reuse(original, args, kwargs, functools.partial(_note_reuse, event))
            except BaseException as exc:
                _end(event, "raised", _describe_error(exc))
                raise
            if event is not None:
                _end_compile(event, result, target, args[0] if args else kwargs.get("exported_program"))
            _share_vec_isa()
            return result
    return aoti_compile_and_package


def _wrap_export(original):
    @functools.wraps(original)
    def export(*args, **kwargs):
        t0 = RECORD.now()
        result = original(*args, **kwargs)
        RECORD.span("export", t0)
        _remember_module(result, args[0] if args else kwargs.get("mod"))
        return result
    return export


def _wrap_load(original, call):
    @functools.wraps(original)
    def load(*args, **kwargs):
        with _outermost() as outermost:
            if not outermost:
                return original(*args, **kwargs)
            target = args[0] if args else kwargs.get("path")
            _stop_ahead(call, target)
            _prime_vec_isa()
            model_name = (args[1] if call == "load_package" and len(args) > 1 else kwargs.get("model_name"))
            event = _begin_load(call, target, model_name or "model")
            args, kwargs = redirect.load_args(RECORD, event, args, kwargs, sha256)
            try:
                result = original(*args, **kwargs)
            except BaseException as exc:
                _end(event, "raised", _describe_error(exc))
                raise
            _end(event, "returned")
            _share_vec_isa()
            _read_constants(event, target, model_name or "model")
            _name_load(event, result)
            _capture_load(result, target)
            _count_calls(result, event)
            return result
    return load


def patch(module):
    for name in PATCHES.get(module.__name__, ()):
        original = getattr(module, name, None)
        if callable(original) and not getattr(original, "_aoti_bisect_hook", False):
            wrapped = (_wrap_compile(original) if name == "aoti_compile_and_package" else _wrap_export(original)
                       if name == "export" else _wrap_load(original, name))
            wrapped._aoti_bisect_hook = True
            setattr(module, name, wrapped)


class _PatchAfterExec(importlib.abc.Loader):
    """Runs the module's own loader, then patches the module. The module keeps its own loader as __loader__
    and __spec__.loader (what inspect, linecache and importlib.resources meet), as wrapt's import hooks do."""

    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        module.__loader__ = module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        try:
            patch(module)
        except Exception as exc:
            RECORD.error(f"patching {module.__name__}: {_describe_error(exc)}")


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in PATCHES:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _PatchAfterExec(spec.loader)
                return spec
        return None


@_quietly
def _note_gpu_peak():
    """At exit, into a record the process wrote: the most torch's allocator reserved on one GPU, or 0 where it used
    none, for sizing how many runs share a GPU (run/slots.py). A process that crashed tells nothing."""
    torch = sys.modules.get("torch")
    used = torch is not None and torch.cuda.is_initialized()
    if RECORD is None or (RECORD.target is None and not used):
        return
    RECORD.gpu_peak = max((torch.cuda.max_memory_reserved(d) for d in range(torch.cuda.device_count())),
                          default=0) if used else 0
    RECORD.write()


def install():
    """Called by sitecustomize when AOTI_BISECT_HOOK names the record's path. Leaves an empty HOOK_LOADED file beside
    it, and writes the record itself only at an event (and at exit, into a record it wrote)."""
    path = os.environ.get(contract.HOOK_ENV)
    if not path or RECORD is not None:
        return
    _record_to(path)
    atexit.register(_note_gpu_peak)
    for name in PATCHES:
        if name in sys.modules:
            patch(sys.modules[name])
    sys.meta_path.insert(0, _Finder())


def reinstall():
    """In a run forked from a warm interpreter (child/warm.py): the run's own record, named by its environment
    now; the patches stay, installed when the warm interpreter imported torch."""
    path = os.environ.get(contract.HOOK_ENV)
    if path:
        _record_to(path)


def _record_to(path):
    global RECORD
    RECORD = Record(os.path.abspath(path))
    capture.report_error = RECORD.error
    try:
        # Without it, a run whose Python ignored PYTHONPATH (-I, -E, -S) looks like one that loaded no package.
        open(os.path.join(os.path.dirname(RECORD.path), contract.HOOK_LOADED), "a").close()
    except OSError:
        pass
