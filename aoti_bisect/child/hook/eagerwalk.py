"""Compares, inside the repro's process, every tensor the package's kernels read and wrote with eager values.

The eager stage compiles with printer level 1, where the generated wrapper saves each kernel's tensor
arguments before and after its launch (torch's aoti_torch_save_tensor_handle, into <cwd>/tmp/aoti_torch...;
torch 2.13 drops the slash: `tmp/aoti_torchbefore_launch_<kernel>_<arg>_<device>.pt`). Before each call of the
compiled model this module runs the exported program eagerly on clones of the call's inputs with an FX
Interpreter, keeping every node's value; after the call, it compares the package's outputs with eager's. The
first call whose outputs differ is kept: each saved tensor is compared with every eager value of its shape.
Which eager node a kernel's buffer stands for is decided on the aoti_bisect side, from Inductor's provenance
(aoti/eagerwalk.py, diagnose/eagerwalk.py); this side only measures.

eager_walk.json in the run folder (rewritten after each call):
  {"schema_version": 1, "status": "agree" | "differs" | "no_program" | "eager_raised",
   "calls": k, "call": n | null, "problem": str | null, "factor": F, "outputs": [fakecheck's differential rows],
   "outputs_problem": str | null (the differential's own problem: eager and the package return unlike trees),
   "values": count of eager values kept,
   "dumps": [{"when": "before" | "after", "stem": "<kernel>_<arg>", "device": "cpu", "shape": [...],
              "dtype": "float32", "rtol": r, "atol": a, "pairs": [[node, max_abs | null, close], ...],
              "pairs_dropped": j, "problem": str | null}]}
Tolerances are torch.testing.assert_close's for the saved tensor's dtype, times FACTOR: kernels reorder
floating-point arithmetic, so a correct fused kernel can miss eager by a few ulps more than one op does.
The saved tensors are removed after each call (the kept call's after comparing): they never pile up.
"""
import os
import re

from . import contract, fakecheck

SCHEMA_VERSION = 1
FACTOR = 10
MAX_PAIRS = 256  # per saved tensor: the closest eager values of its shape
MAX_CALLS = fakecheck.MAX_CALLS
_DUMP = re.compile(r"^(?:aoti_torch)?(before|after)_launch_(.+)_([a-z]+(?::\d+)?)\.pt$")

_state = {"kept": False}


def enabled():
    return os.environ.get(contract.EAGER_WALK_ENV) == "1"


def _dump_files():
    """(path, when, stem, device) of every tensor the level-1 wrapper saved so far."""
    base = os.path.join(os.getcwd(), "tmp")
    found = []
    for folder in (base, os.path.join(base, "aoti_torch")):
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            m = _DUMP.match(name)
            if m and (folder != base or name.startswith("aoti_torch")):
                found.append((os.path.join(folder, name), m[1], m[2], m[3]))
    return sorted(found)


def _clear():
    for path, *_ in _dump_files():
        try:
            os.remove(path)
        except OSError:
            pass


def _interpreter_class():
    import torch

    class Recorder(torch.fx.Interpreter):
        def __init__(self, gm, budget):
            super().__init__(gm)
            self.values, self.budget, self.dropped = {}, budget, 0

        def run_node(self, n):
            out = super().run_node(n)
            if isinstance(out, torch.Tensor) and n.op != "output":
                size = out.untyped_storage().nbytes()
                if size <= self.budget:
                    # A later in-place op of the graph would change what this node computed.
                    self.values[n.name] = out.detach().clone()
                    self.budget -= size
                else:
                    self.dropped += 1
            return out

    return Recorder


def before_call(ep, args, kwargs, call, budget):
    """The eager run of this call, {"status", "outputs", "values", "problem"}, or None when not wanted."""
    if not enabled() or _state["kept"] or call >= MAX_CALLS:
        return None
    _clear()
    if ep is None:
        return {"status": "no_program", "outputs": None, "values": {}, "problem": (
            "the process compiled no program itself (a prebuilt package): nothing to run eagerly")}
    import torch
    import torch.utils._pytree as pytree
    positional, named = pytree.tree_map_only(torch.Tensor, lambda t: t.detach().clone(), (list(args), dict(kwargs)))
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []
    recorder = _interpreter_class()(ep.module(), budget)
    try:
        # The graph's placeholders are the leaves of (args, kwargs) with kwargs in the exported signature's
        # order, whatever order the call gave them in.
        if named:
            from torch.export._tree_utils import reorder_kwargs
            positional = [*positional, reorder_kwargs(named, ep.call_spec.in_spec)]
        with torch.random.fork_rng(devices=devices), torch.no_grad():
            outputs = recorder.run(*positional)
    except Exception as exc:
        return {"status": "eager_raised", "outputs": None, "values": recorder.values,
                "problem": f"the program raised when run eagerly: {fakecheck._error(exc)}"}
    return {"status": None, "outputs": outputs, "values": recorder.values, "problem": (
        f"{recorder.dropped} eager values were not kept: over the capture cap" if recorder.dropped else None)}


def after_call(eager, result, call, path):
    """Compares the call's outputs with eager's; on the first call that differs, every saved tensor too."""
    doc = {"schema_version": SCHEMA_VERSION, "status": eager["status"], "calls": call + 1, "call": None,
           "problem": eager["problem"], "factor": FACTOR, "outputs": [], "outputs_problem": None,
           "values": len(eager["values"]), "dumps": []}
    if eager["status"] is None:
        differential = fakecheck.differential(eager["outputs"], result, call)
        doc.update(outputs=differential["outputs"], outputs_problem=differential["problem"], call=call)
        differs = bool(differential["problem"]) or not all(row["close"] for row in differential["outputs"])
        doc["status"] = "differs" if differs else "agree"
        if differs:
            _state["kept"] = True
            as_double = {}  # each eager value on the CPU in float64, made once for every saved tensor of its shape
            doc["dumps"] = [_compare(*found, eager["values"], as_double) for found in _dump_files()]
    _clear()
    fakecheck.write_json(path, doc)


def _compare(path, when, stem, device, values, as_double):
    import torch
    from torch.testing._comparison import default_tolerances
    row = {"when": when, "stem": stem, "device": device, "shape": None, "dtype": None, "rtol": None,
           "atol": None, "pairs": [], "pairs_dropped": 0, "problem": None}
    try:
        saved = torch.load(path, map_location="cpu")
    except Exception as exc:
        row["problem"] = f"cannot load {os.path.basename(path)}: {fakecheck._error(exc)}"
        return row
    if not isinstance(saved, torch.Tensor):
        row["problem"] = f"{os.path.basename(path)} holds no tensor"
        return row
    rtol, atol = default_tolerances(saved)
    rtol, atol = rtol * FACTOR, atol * FACTOR
    row.update(shape=list(saved.shape), dtype=str(saved.dtype).replace("torch.", ""), rtol=rtol, atol=atol)
    pairs = []
    a = saved.double()
    for name, value in values.items():
        if value.shape != saved.shape or value.is_floating_point() != saved.is_floating_point():
            continue
        if name not in as_double:
            as_double[name] = value.detach().to("cpu").double()
        b = as_double[name]
        close = bool(torch.isclose(a, b, rtol, atol, equal_nan=True).all())
        both = torch.isfinite(a) & torch.isfinite(b)
        max_abs = float((a[both] - b[both]).abs().max()) if both.any() else None
        pairs.append([name, max_abs, close])
    pairs.sort(key=lambda p: (not p[2], float("inf") if p[1] is None else p[1]))
    row["pairs"], row["pairs_dropped"] = pairs[:MAX_PAIRS], max(0, len(pairs) - MAX_PAIRS)
    return row
