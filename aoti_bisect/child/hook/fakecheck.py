"""Checks, inside the repro's process, each custom op's fake function against the real op, on a call's inputs.

It runs here because both halves live only here: a custom op and its fake function are registered by the
repro's own code (a Python `register_fake`, a C++ library built by load_inline), which no other process has.

Before the compiled model runs on a call, the exported program runs eagerly (ep.module()) on clones of the
call's inputs, under a dispatch mode that, for every op of the graph outside torch's own namespaces, calls
the op's fake function on fake copies of its arguments and then the real op, and compares what each returns:
shape, dtype, device and the strides of every dimension longer than one (the comparison torch's own
CrossRefFakeMode makes). The RNG state is restored afterwards, so the package's call draws what it would have.

fakecheck.json (rewritten after each op, so a process that dies inside the real op still says which op):
  {"schema_version": 1, "call": n, "custom_ops": ["ns::op", ...], "status": "running" | "done" | "eager_raised"
   | "no_program", "problem": str | null, "ops": [{"op": "ns::op", "overload": "default",
   "status": "running" | "match" | "mismatch" | "no_fake" | "fake_raised" | "op_raised",
   "real": [{"shape", "stride", "dtype", "device"} | null per output], "fake": [...], "mismatches": [str],
   "error": str | null}], "ops_dropped": k}
A call is checked until one shows a mismatch (the file then keeps that call's result), and only the first
MAX_CALLS calls: each check runs the whole program eagerly, and a repro that calls the model in a long loop
would otherwise run many times slower in this stage than in the others.

The same eager run is the reference for the package's outputs on that call: differential.json
  {"schema_version": 1, "call": n, "outputs": [{"index": i, "shape": [...], "dtype": "float32",
   "rtol": r, "atol": a, "max_abs": d | null, "close": bool, "problem": str | null}]}
with torch.testing.assert_close's tolerances for the dtype; `close` is assert_close's verdict (NaNs equal).
"""
import json

from . import atomic

SCHEMA_VERSION = 1
MAX_CALLS = 16
MAX_OPS = 64  # op calls recorded per model call; later ones are counted in ops_dropped
# torch's own ops: their fake functions are torch's, checked by torch's own tests.
TORCH_NAMESPACES = {"aten", "prims", "higher_order", "inductor", "profiler", "rngprims", "debugprims",
                    "_c10d_functional", "_c10d_functional_autograd", "c10d", "c10d_functional", "_dtensor",
                    "quantized", "_quantized", "quantized_decomposed", "mkldnn", "onednn", "_inductor_test"}

_found = {"mismatch": False}


def write_json(path, doc):
    with atomic.replacing(path) as f:
        json.dump(doc, f, indent=1)


def custom_ops(ep):
    """The schema names (`ns::op`) of the graph's ops outside torch's namespaces, a HOP's wrapped op included."""
    import torch
    names = []
    for node in ep.graph.nodes:
        if node.op != "call_function":
            continue
        for target in (node.target, *(a for a in node.args if isinstance(a, torch._ops.OpOverload))):
            if isinstance(target, torch._ops.OpOverload) and target.namespace not in TORCH_NAMESPACES:
                names.append(target._schema.name)
    return sorted(set(names))


def _describe(value):
    import torch
    import torch.utils._pytree as pytree
    out = []
    for leaf in pytree.tree_leaves(value):
        if isinstance(leaf, torch.Tensor):
            out.append({"shape": [_int(s) for s in leaf.shape], "stride": [_int(s) for s in leaf.stride()],
                        "dtype": str(leaf.dtype).replace("torch.", ""), "device": str(leaf.device)})
        else:
            out.append(None)
    return out


def _int(s):
    try:
        return int(s)
    except Exception:  # an unbacked size (a data-dependent output shape): compared as its text
        return str(s)


def compare(real, fake):
    """Lines saying how the fake's outputs differ from the real op's; empty when they agree."""
    if len(real) != len(fake):
        return [f"the fake returns {len(fake)} outputs, the op {len(real)}"]
    lines = []
    for i, (r, f) in enumerate(zip(real, fake)):
        which = "" if len(real) == 1 else f" (output {i})"
        if (r is None) != (f is None):
            lines.append(f"the fake returns {'no tensor' if f is None else 'a tensor'}{which}, the op "
                         f"{'no tensor' if r is None else 'a tensor'}")
            continue
        if r is None:
            continue
        if r["shape"] != f["shape"]:
            lines.append(f"the fake returns {f['shape']}, the op returns {r['shape']}{which}")
            continue
        for key in ("dtype", "device"):
            if r[key] != f[key]:
                lines.append(f"the fake returns {key} {f[key]}, the op {r[key]}{which}")
        significant = [d for d, n in enumerate(r["shape"]) if n != 1]
        if [r["stride"][d] for d in significant] != [f["stride"][d] for d in significant]:
            lines.append(f"the fake returns strides {f['stride']}, the op {r['stride']} for shape "
                         f"{r['shape']}{which}")
    return lines


def _error(exc):
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:300]


def _mode_class():
    import torch
    import torch.utils._pytree as pytree
    from torch._subclasses.fake_tensor import FakeTensorMode, UnsupportedOperatorException
    from torch.utils._python_dispatch import TorchDispatchMode

    class CrossCheck(TorchDispatchMode):
        def __init__(self, wanted, doc, path):
            super().__init__()
            self.wanted, self.doc, self.path = wanted, doc, path

        def _fake(self, func, args, kwargs):
            mode = FakeTensorMode()
            fake_args, fake_kwargs = pytree.tree_map_only(
                torch.Tensor, lambda t: mode.from_tensor(t, static_shapes=True), (args, kwargs))
            with mode:
                return func(*fake_args, **fake_kwargs)

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func._schema.name not in self.wanted:
                return func(*args, **kwargs)
            ops = self.doc["ops"]
            if len(ops) >= MAX_OPS:
                self.doc["ops_dropped"] += 1
                return func(*args, **kwargs)
            entry = {"op": func._schema.name, "overload": func._overloadname, "status": "running",
                     "inputs": _describe((args, kwargs)), "real": None, "fake": None, "mismatches": [],
                     "error": None}
            ops.append(entry)
            fake = None
            try:  # before the real op: an op that mutates its inputs would hand the fake changed ones
                fake = _describe(self._fake(func, args, kwargs))
            except UnsupportedOperatorException as exc:
                entry["status"], entry["error"] = "no_fake", _error(exc)
            except Exception as exc:
                entry["status"], entry["error"] = "fake_raised", _error(exc)
            write_json(self.path, self.doc)
            try:
                real = func(*args, **kwargs)
            except Exception as exc:
                entry["status"], entry["error"] = "op_raised", _error(exc)
                write_json(self.path, self.doc)
                raise
            entry["real"], entry["fake"] = _describe(real), fake
            if fake is not None:
                entry["mismatches"] = compare(entry["real"], fake)
                entry["status"] = "mismatch" if entry["mismatches"] else "match"
            write_json(self.path, self.doc)
            return real

    return CrossCheck


def check_call(ep, args, kwargs, call, path):
    """Runs the program eagerly on this call's inputs, checking its custom ops; writes `path`. Returns the
    eager outputs (None: not run)."""
    if _found["mismatch"] or call >= MAX_CALLS:
        return None
    doc = {"schema_version": SCHEMA_VERSION, "call": call, "custom_ops": [], "status": "running",
           "problem": None, "ops": [], "ops_dropped": 0}
    if ep is None:
        doc.update(status="no_program", problem="the process called a compiled model but compiled no program "
                                                "itself (a prebuilt package): nothing to run eagerly")
        write_json(path, doc)
        return None
    import torch
    import torch.utils._pytree as pytree
    doc["custom_ops"] = custom_ops(ep)
    write_json(path, doc)
    if not doc["custom_ops"]:
        doc["status"] = "done"
        write_json(path, doc)
        return None
    clones = pytree.tree_map_only(torch.Tensor, lambda t: t.detach().clone(), (list(args), dict(kwargs)))
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []
    eager = None
    try:
        with torch.random.fork_rng(devices=devices), torch.no_grad(), \
                _mode_class()(set(doc["custom_ops"]), doc, path):
            eager = private_module(ep)(*clones[0], **clones[1])
        doc["status"] = "done"
    except Exception as exc:
        doc.update(status="eager_raised", problem=f"the program raised when run eagerly: {_error(exc)}")
    write_json(path, doc)
    _found["mismatch"] = any(op["status"] == "mismatch" for op in doc["ops"])
    return eager


def private_module(ep):
    """ep.module() with a copy of each parameter or buffer the program writes. They are the user's module's own
    tensors, so running it as is would move the repro's state (a counter's `add_`) once more for every check: the
    repro's next eager call would then see another value than it does without aoti-bisect."""
    import torch
    module = ep.module()
    for fqn in _written(ep):
        owner, _, leaf = fqn.rpartition(".")
        parent = module.get_submodule(owner)
        old = getattr(parent, leaf)
        copy = old.detach().clone()
        setattr(parent, leaf, torch.nn.Parameter(copy, old.requires_grad) if isinstance(old, torch.nn.Parameter)
                else copy)
    return module


def _written(ep):
    """The FQNs of the parameters and buffers the program writes: a functional mutation (buffers_to_mutate), or an
    in-place op on the placeholder, which torch 2.13's export keeps in the graph (`aten.add_` of a counter)."""
    import torch
    names = set()
    for node in ep.graph.nodes:
        schema = getattr(node.target, "_schema", None)
        if node.op != "call_function" or schema is None or not schema.is_mutable:
            continue
        for i, arg in enumerate(schema.arguments):
            value = node.args[i] if i < len(node.args) else node.kwargs.get(arg.name)
            if arg.alias_info is not None and arg.alias_info.is_write and isinstance(value, torch.fx.Node):
                names.add(value.name)
    held = {s.arg.name: s.target for s in ep.graph_signature.input_specs if s.kind.name in ("PARAMETER", "BUFFER")}
    return {held[n] for n in names if n in held} | set(ep.graph_signature.buffers_to_mutate.values())


def _differ(i, eager, package):
    import torch
    from torch.testing._comparison import default_tolerances
    row = {"index": i, "shape": None, "dtype": None, "rtol": None, "atol": None, "max_abs": None,
           "close": False, "problem": None}
    if not (isinstance(eager, torch.Tensor) and isinstance(package, torch.Tensor)):
        row["close"] = type(eager) is type(package) and eager == package
        row["problem"] = None if row["close"] else f"eager gives {type(eager).__name__}, the package " \
                                                   f"{type(package).__name__}"
        return row
    row.update(shape=list(package.shape), dtype=str(package.dtype).replace("torch.", ""))
    if eager.shape != package.shape or eager.dtype != package.dtype:
        row["problem"] = f"eager gives {list(eager.shape)} {eager.dtype}, the package {list(package.shape)} " \
                         f"{package.dtype}"
        return row
    rtol, atol = default_tolerances(package)
    a, b = package.detach().to(eager.device), eager.detach()
    row.update(rtol=rtol, atol=atol, close=bool(torch.isclose(a, b, rtol, atol, equal_nan=True).all()))
    if a.numel() and (a.is_floating_point() or a.is_complex()):
        both = torch.isfinite(a) & torch.isfinite(b)
        row["max_abs"] = float((a[both] - b[both]).abs().max()) if both.any() else None
    elif a.numel():
        row["max_abs"] = float((a.long() - b.long()).abs().max())
    return row


def differential(eager, outputs, call):
    """The package's outputs of a call against the eager run's on the same inputs (differential.json)."""
    import torch.utils._pytree as pytree
    mine, theirs = pytree.tree_leaves(outputs), pytree.tree_leaves(eager)
    doc = {"schema_version": SCHEMA_VERSION, "call": call, "outputs": [], "problem": None}
    if len(mine) != len(theirs):
        doc["problem"] = f"eager returns {len(theirs)} outputs, the package {len(mine)}"
    else:
        doc["outputs"] = [_differ(i, e, p) for i, (e, p) in enumerate(zip(theirs, mine))]
    return doc
