"""Captures the exported program and the compiled model's calls inside the repro's process (recorder calls in).

Off unless the run's environment asks: the ladder sets these only for the stage that needs them.

AOTI_BISECT_CAPTURE=1 writes, under <run folder>/capture/ (the folder of AOTI_BISECT_HOOK):
  program.pt2   torch.export.save of the ExportedProgram the process last handed to aoti_compile_and_package
  inputs.pt     torch.save({"call": n, "args": [...], "kwargs": {...}}) of the compiled model's latest call
                (n counts from 0), written BEFORE the call runs: a call that dies leaves its inputs
  outputs.pt    torch.save({"call": n, "outputs": ...}) once that call returned (absent: it raised or died)
  libs/         a copy of each shared library that registers a custom op the program calls (oplibs.py)
  capture.json  {"schema_version": 1, "program": "program.pt2" | null, "program_problem": str | null,
                 "libraries": {namespace: "libs/<file>"}, "python_ops": the source of each custom op Python
                 defines (pyops.py),
                 "calls": n + 1, "inputs": "inputs.pt" | null, "inputs_problem": ..., "outputs": ...,
                 "outputs_problem": ...}: which files hold what, and in one line why one is missing
Each file is written under a temporary name and renamed, so a reader sees a whole file (a later call's, or the
earlier one). Tensors over MAX_BYTES in all (AOTI_BISECT_MAX_CAPTURE_MB, default 512) are not saved: the
*_problem line says so. A later eager differential reuses it as
`torch.export.load(program.pt2).module()(*inputs["args"], **inputs["kwargs"])` against outputs["outputs"], in
a process that registered the same custom ops (the repro's own imports).

AOTI_BISECT_EAGER_WALK=1 compares every tensor a level-1 wrapper saved with eager values (eagerwalk.py).

AOTI_BISECT_FAKECHECK=1 checks the custom ops' fake functions on each call's inputs before the package runs
(fakecheck.py), into <run folder>/fakecheck.json, and compares the package's outputs of that call with the
eager run's, into <run folder>/differential.json.

Nothing here raises into the repro: a failure becomes a *_problem line or a line in hook.json's hook_errors.
"""
import functools
import os
import sys
import weakref

from . import atomic, contract, eagerwalk, fakecheck, oplibs, pyops

SCHEMA_VERSION = 1

_state = {"program": None, "calls": 0, "manifest": None, "eager": None, "walk": None}
_programs: dict = {}  # package realpath -> the ExportedProgram compiled into it
_models: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # loaded model -> its package's realpath
# Where a failure inside a call goes: hook.json's hook_errors once the recorder is installed (it sets this, so that
# capture, which the recorder calls, never imports the recorder back); stderr before that.
report_error = None


def _on(name):
    return os.environ.get(name) == "1"


def enabled():
    return _on(contract.CAPTURE_ENV) or _on(contract.FAKECHECK_ENV) or eagerwalk.enabled()


def run_folder():
    return os.path.dirname(os.path.abspath(os.environ[contract.HOOK_ENV]))


def _folder():
    path = os.path.join(run_folder(), contract.CAPTURE_DIR)
    os.makedirs(path, exist_ok=True)
    return path


def max_bytes():
    try:
        return int(float(os.environ.get(contract.MAX_CAPTURE_MB_ENV, "512")) * (1 << 20))
    except ValueError:
        return 512 << 20


def _mib(n):
    return f"{n} bytes" if n < 1 << 20 else f"{n / (1 << 20):.1f} MiB"


def _manifest():
    if _state["manifest"] is None:
        _state["manifest"] = {"schema_version": SCHEMA_VERSION, "program": None, "program_problem": None,
                              "calls": 0, "inputs": None, "inputs_problem": None, "outputs": None,
                              "outputs_problem": None}
    return _state["manifest"]


def _write_manifest(**fields):
    doc = _manifest()
    doc.update(fields)
    fakecheck.write_json(os.path.join(_folder(), contract.CAPTURE_RECORD), doc)


def _tensor_bytes(tree):
    import torch
    return sum(t.untyped_storage().nbytes() for t in _tensors(tree) if isinstance(t, torch.Tensor))


def _tensors(tree):
    import torch.utils._pytree as pytree
    return pytree.tree_leaves(tree)


def _save(name, obj, what):
    """torch.save into capture/<name>; returns (name, None) or (None, why not)."""
    import torch
    size = _tensor_bytes(obj)
    if size > max_bytes():
        return None, f"{what} hold {_mib(size)} of tensors, over the cap of {_mib(max_bytes())}"
    path = os.path.join(_folder(), name)
    try:
        with atomic.replacing(path, "wb") as f:
            torch.save(obj, f)
    except Exception as exc:  # an unpicklable argument, a full disk
        return None, f"cannot save {what}: {type(exc).__name__}: {exc}"[:300]
    return name, None


def on_compile(ep, package_path):
    """After aoti_compile_and_package returned: remember the program (and save it when capturing)."""
    if not enabled() or ep is None:
        return
    _state["program"] = ep
    if package_path:
        _programs[package_path] = ep
    eagerwalk.on_compile(ep)
    if _on(contract.CAPTURE_ENV):
        import torch
        size = _tensor_bytes(list(ep.state_dict.values()) + list(ep.constants.values()))
        if size > max_bytes():
            _write_manifest(program=None, program_problem=f"the program holds {_mib(size)} of parameters and "
                                                          f"constants, over the cap of {_mib(max_bytes())}")
            return
        path = os.path.join(_folder(), "program.pt2")
        try:
            with atomic.replacing(path, "wb") as f:
                torch.export.save(ep, f)
            _write_manifest(program="program.pt2", program_problem=None, libraries=_copy_libraries(ep),
                            python_ops=_python_ops(ep))
        except Exception as exc:
            _write_manifest(program=None, program_problem=f"torch.export.save failed: {type(exc).__name__}: "
                                                          f"{exc}"[:300])


def _copy_libraries(ep):
    """Copies the library of each custom-op namespace the program calls into capture/libs/ (oplibs.py);
    returns {namespace: "libs/<file>"}."""
    import shutil

    copied = {}
    try:
        found = oplibs.libraries(ep)
    except Exception:
        return copied
    folder = os.path.join(_folder(), contract.CAPTURE_LIBS)
    for namespace, path in found.items():
        name = os.path.basename(path)
        try:
            os.makedirs(folder, exist_ok=True)
            if not os.path.exists(os.path.join(folder, name)):
                shutil.copyfile(path, os.path.join(folder, name))
        except OSError:
            continue
        copied[namespace] = f"{contract.CAPTURE_LIBS}/{name}"
    return copied


def _python_ops(ep):
    """The source that defines each custom op of the program that Python defines (pyops.py), for minify."""
    try:
        return pyops.record(ep)
    except Exception as exc:  # a torch whose custom-op internals moved: minify says so and refuses the op
        return {"ops": {}, "pieces": {}, "no_fake": [],
                "problems": {"*": f"its source could not be read: {type(exc).__name__}: {exc}"[:300]}}


def on_load(model, package_path):
    """After a package loaded: wrap its class's __call__ once, and remember which program it holds."""
    if not enabled() or model is None:
        return
    try:
        _models[model] = package_path
    except TypeError:
        pass
    cls = type(model)
    if getattr(cls.__call__, "_aoti_bisect_capture", False):
        return
    cls.__call__ = _wrap_call(cls.__call__)


def _program_for(model):
    path = _models.get(model) if model is not None else None
    return _programs.get(path) or _state["program"]


def _wrap_call(original):
    @functools.wraps(original)
    def __call__(self, *args, **kwargs):
        _before_call(self, args, kwargs)
        result = original(self, *args, **kwargs)
        _after_call(result)
        return result
    __call__._aoti_bisect_capture = True
    return __call__


def _guard(fn):
    def guarded(*args):
        try:
            fn(*args)
        except Exception as exc:
            if report_error is not None:
                report_error(f"capture: {fn.__name__}: {type(exc).__name__}: {exc}")
            else:
                sys.stderr.write(f"aoti-bisect hook: capture: {type(exc).__name__}: {exc}\n")
    guarded.__name__ = fn.__name__
    return guarded


@_guard
def _before_call(model, args, kwargs):
    call = _state["calls"]
    # An earlier call that raised never reached _after_call: its eager outputs are not this call's reference.
    _state["calls"], _state["eager"], _state["walk"] = call + 1, None, None
    if _on(contract.CAPTURE_ENV):
        name, problem = _save("inputs.pt", {"call": call, "args": list(args), "kwargs": dict(kwargs)},
                              f"the inputs of call {call}")
        _write_manifest(calls=call + 1, inputs=name, inputs_problem=problem, outputs=None,
                        outputs_problem=f"call {call} has not returned (it raised, or the process died in it)")
    if _on(contract.FAKECHECK_ENV):
        _state["eager"] = fakecheck.check_call(_program_for(model), args, kwargs, call,
                                               os.path.join(run_folder(), contract.FAKECHECK_RESULT))
    _state["walk"] = eagerwalk.before_call(_program_for(model), args, kwargs, call, max_bytes())


@_guard
def _after_call(result):
    call = _state["calls"] - 1
    eager, _state["eager"] = _state["eager"], None
    walk, _state["walk"] = _state["walk"], None
    if walk is not None:
        eagerwalk.after_call(walk, result, call, os.path.join(run_folder(), contract.EAGER_WALK_RESULT))
    if eager is not None:
        fakecheck.write_json(os.path.join(run_folder(), contract.DIFFERENTIAL_RESULT),
                             fakecheck.differential(eager, result, call))
    if _on(contract.CAPTURE_ENV):
        name, problem = _save("outputs.pt", {"call": call, "outputs": result}, f"the outputs of call {call}")
        _write_manifest(outputs=name, outputs_problem=problem)
