"""Compares, inside the repro's process, every tensor the package's kernels read and wrote with eager values.

The eager stage compiles with printer level 1, where the generated wrapper saves each kernel's tensor
arguments before and after its launch (torch's aoti_torch_save_tensor_handle, into <cwd>/tmp/aoti_torch...;
torch 2.13 drops the slash: `tmp/aoti_torchbefore_launch_<kernel>_<arg>_<device>.pt`). Before each call of the
compiled model this module runs the exported program eagerly on clones of the call's inputs with an FX
Interpreter, keeping every node's value; after the call, it compares the package's outputs with eager's. The
first call whose outputs differ is kept: each saved tensor is compared with every eager value of its shape.
Which eager node a kernel's buffer stands for is decided on the aoti_bisect side, from Inductor's provenance
(aoti/eagerwalk.py, diagnose/eagerwalk.py); this side only measures, and keeps two things that side cannot
compute: each node's aten op (an extern kernel computes one op, which may be only part of its FX node), and
the parts of a node an extern computes alone. Inductor splits `linear` into an extern mm and a bias add it
fuses into the next kernel (CUDA), and runs a linear of a 3-D input as a 2-D addmm: the node's value never
equals that extern's output, so `linear:mm` (no bias) and `linear:addmm` (flattened to 2-D) are kept beside it.
On the call kept, the program runs again in float64: a node whose float32 value misses its float64 value
beyond the tolerance is an unstable reference, and a kernel that misses it is not convicted on it.
Around each compile (`compiling`) the hook notes whether TF32 matmuls were allowed: a Triton GEMM template bakes
that setting into its code, so the package rounds its operands to TF32 whatever the setting when it runs, and eager
run at "highest" does not. Under TF32_OFF_ENV it compiles with them off: the precision stage's control.

eager_walk.json in the run folder (rewritten after each call):
  {"schema_version": 1, "status": "agree" | "differs" | "no_program" | "eager_raised",
   "calls": k, "call": n | null, "problem": str | null, "factor": F, "outputs": [fakecheck's differential rows],
   "outputs_problem": str | null (the differential's own problem: eager and the package return unlike trees),
   "values": count of eager values kept,
   "targets": {node: "aten.linear.default", part: "aten.linear.default:mm" for a part such as "linear:mm"},
   "unstable": {node: max abs of float32 eager against float64 eager, where beyond the tolerance},
   "float64": {node: [max abs, RMSE] of eager's value against the program run in float64},
   "unwritten": [{"fqn", "stale": {differ, max_abs_diff, index, package (as built), module (now)}}]: state the
                program writes whose build values reproduce the package's outputs exactly, where eager's differ,
   "stability_problem": str | null (why the float64 run was not made or failed),
   "tf32": whether TF32 matmuls were allowed when the program was compiled (null: no compile seen),
   "born": {"node", "target", "trace"} | null: the first node whose eager value is non-finite from finite inputs
           (trace: its stack trace's tail), where eager itself makes a NaN or Inf,
   "random": {node: {"target", "module" | null, "class" | null, "from"?}}: the nodes that draw random numbers on
             every call (an op tagged nondeterministic_seeded; a dropout only in training mode; a torch.cond whose
             branch draws), with the module that made it; and, with "from": the drawing node, every node computed
             from a draw (its value differs from eager's wherever the draws do),
   "dumps": [{"when": "before" | "after", "stem": "<kernel>_<arg>", "device": "cpu", "shape": [...],
              "dtype": "float32", "rtol": r, "atol": a,
              "pairs": [[node, max_abs | null, close, max_rel | null, f64 max_abs | null, f64 RMSE | null,
                         ulp | null, cosine | null], ...],
              "pairs_dropped": j, "problem": str | null}]}
ulp: max |saved - eager| in units of the last place of the larger of the two in the saved dtype; cosine: the
cosine similarity of the two over the elements finite in both (null where either is all zero).
Tolerances are torch.testing.assert_close's for the saved tensor's dtype, times FACTOR: kernels reorder
floating-point arithmetic, so a correct fused kernel can miss eager by a few ulps more than one op does.
The saved tensors are removed after each call (the kept call's after comparing): they never pile up.
"""
import contextlib
import os
import re
import sys

from . import contract, fakecheck, provenance

SCHEMA_VERSION = 7
FACTOR = 10
MAX_PAIRS = 256  # per saved tensor: the closest eager values of its shape
MAX_CALLS = fakecheck.MAX_CALLS
_DUMP = re.compile(r"^(?:aoti_torch)?(before|after)_launch_(.+)_([a-z]+(?::\d+)?)\.pt$")

_state: dict = {"kept": False, "tf32": None}
# id(ExportedProgram) -> {FQN: its value at the build} of each parameter or buffer the program writes: a package that
# does not carry the program's writes between calls computes from these values forever (pytorch#165444).
_built: dict = {}


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
            self.values, self.targets, self.budget, self.dropped = {}, {}, budget, 0
            self.nonfinite, self.born = set(), None

        def run_node(self, n):
            out = super().run_node(n)
            if n.op != "output":
                self.note_nonfinite(n, out)
            if isinstance(out, torch.Tensor) and n.op != "output":
                if n.op == "call_function":
                    self.targets[n.name] = str(n.target)
                self.keep(n.name, out)
                if n.op == "call_function" and n.target in (torch.ops.aten.linear.default,
                                                            torch.ops.aten.matmul.default):
                    for part, value in _parts(torch, n, *self.fetch_args_kwargs_from_env(n), out):
                        self.targets[f"{n.name}:{part}"] = f"{n.target}:{part}"
                        self.keep(f"{n.name}:{part}", value)
            return out

        def note_nonfinite(self, n, out):
            """The first node whose value is non-finite while every node it read is finite: where eager itself makes
            a NaN or Inf (a placeholder's is the input's own; a node that returns several values, torch.cond's or a
            split's, is judged by them all)."""
            values = out if isinstance(out, (tuple, list)) else (out,)
            if all(not isinstance(t, torch.Tensor) or not t.is_floating_point() or bool(torch.isfinite(t).all())
                   for t in values):
                return
            self.nonfinite.add(n.name)
            if self.born is None and n.op == "call_function" and not any(
                    a.name in self.nonfinite for a in n.all_input_nodes):
                self.born = {"node": n.name, "target": str(n.target),
                             "trace": (n.meta.get("stack_trace") or "")[-provenance.MAX_TRACE_CHARS:] or None}

        def keep(self, name, value):
            size = value.untyped_storage().nbytes()
            if size <= self.budget:
                # A later in-place op of the graph would change what this node computed.
                self.values[name] = value.detach().clone()
                self.budget -= size
            else:
                self.dropped += 1

    return Recorder


def _draws(torch, node):
    """Whether the node draws random numbers when it runs: its op is tagged nondeterministic_seeded, and a dropout
    (or rrelu) is in training mode with p > 0. Export keeps an eval-mode dropout as aten.dropout with train=False,
    which draws nothing."""
    op = node.target
    if node.op != "call_function" or torch.Tag.nondeterministic_seeded not in getattr(op, "tags", ()):
        return False
    schema = getattr(op, "_schema", None)
    for i, arg in enumerate(schema.arguments if schema is not None else ()):
        value = node.args[i] if i < len(node.args) else node.kwargs.get(arg.name, arg.default_value)
        if arg.name in ("train", "training") and value is not None and not value:
            return False
        if arg.name == "p" and isinstance(value, (int, float)) and value == 0:
            return False
    return True


def _random(torch, module):
    """{node: {"target", "module", "class"}} of the nodes that draw, each with the module that made it (`drop`,
    `Dropout`) where the export recorded one below the root. A node that runs a subgraph (torch.cond's branches, a
    while_loop's body) draws when the subgraph does: it is named with the node inside that draws, and so is that
    node, which the kernels Inductor builds for the branch name in their provenance. Every node computed from a
    draw follows, with "from": the draw (the graph is in topological order): the walk cannot see the launches
    inside a branch, so it finds what they wrote by the nodes of the launches that read it."""
    found = {}
    for node in module.graph.nodes:
        inner = _drawing(torch, module, node)
        if inner is not None:
            stack = list((inner.meta.get("nn_module_stack") or {}).values())
            path, cls = stack[-1] if stack and stack[-1][0] else (None, None)
            # the class as a type, or by its qualified name (torch.nn.modules.dropout.Dropout)
            name = None if cls is None else str(getattr(cls, "__name__", cls)).rsplit(".", 1)[-1]
            for drawn in {node.name, inner.name}:
                found.setdefault(drawn, {"target": str(inner.target), "module": path, "class": name})
        elif node.op == "call_function":
            origin = next((found[n.name].get("from", n.name) for n in node.all_input_nodes if n.name in found), None)
            if origin is not None:
                found[node.name] = {"target": str(node.target), "module": None, "class": None, "from": origin}
    return found


def _drawing(torch, module, node):
    """The node that makes `node` draw: itself, or the first that draws in a subgraph it runs; None if none."""
    if _draws(torch, node):
        return node
    for arg in node.all_input_nodes:
        sub = _submodule(module, arg) if arg.op == "get_attr" else None
        if isinstance(sub, torch.fx.GraphModule):
            inner = next((d for n in sub.graph.nodes if (d := _drawing(torch, sub, n)) is not None), None)
            if inner is not None:
                return inner
    return None


def _submodule(module, node):
    try:
        return module.get_submodule(str(node.target))
    except AttributeError:
        return None


def _parts(torch, node, args, kwargs, out):
    """(extern op, value) for what an extern kernel computes of a linear or matmul node alone: the 2-D product
    before the bias (an mm whose bias Inductor fused into a later kernel; the node itself for a linear without
    one), and a 3-D result as the 2-D addmm/mm Inductor runs it as. Only where the weight is 2-D, so that
    flattening the leading dimensions is the op."""
    x, w = args[0], args[1]
    if w.dim() != 2 or x.dim() < 2:
        return []
    is_linear = node.target == torch.ops.aten.linear.default
    bias = (args[2] if len(args) > 2 else kwargs.get("bias")) if is_linear else None
    flat = out.reshape(-1, out.shape[-1])
    if bias is None:  # the product is the node (flattened): an mm computes it whole
        return [("mm", flat)] if is_linear or out.dim() > 2 else []
    parts = [("mm", torch.nn.functional.linear(x, w).reshape(-1, out.shape[-1]))]
    return parts + [("addmm", flat)] if out.dim() > 2 else parts

@contextlib.contextmanager
def compiling():
    """Around the outermost aoti_compile_and_package: notes whether TF32 matmuls are allowed, and under TF32_OFF_ENV
    turns them off for the compile alone (the script's own setting is back when it returns). Off through the API
    scripts set it with: on an H100 (torch 2.11) the legacy `allow_tf32 = False` after
    set_float32_matmul_precision("high") left the two APIs at odds, and Inductor's lowering raised reading them."""
    torch = sys.modules.get("torch")
    matmul = getattr(getattr(getattr(torch, "backends", None), "cuda", None), "matmul", None)
    if matmul is None:
        yield
        return
    allowed = bool(matmul.allow_tf32)
    # Where the script's setting cannot be read back, this raises: the control fails to compile and says nothing,
    # where compiling with TF32 still on would pass for a control that kept the gap.
    was = torch.get_float32_matmul_precision() if os.environ.get(contract.TF32_OFF_ENV) == "1" and allowed else None
    _state["tf32"] = allowed and was is None  # as the compile sees it
    if was is not None:
        torch.set_float32_matmul_precision("highest")
    try:
        yield
    finally:
        if was is not None:
            torch.set_float32_matmul_precision(was)


def on_compile(ep):
    """Keeps the values the program's written parameters and buffers had when it was compiled."""
    if enabled():
        held = {**ep.state_dict, **ep.constants}
        _built[id(ep)] = {fqn: held[fqn].detach().clone() for fqn in fakecheck._written(ep) if fqn in held}


def _as_built(torch, ep, positional, budget):
    """(the program's outputs with its written state as built, [FQN]) where that state has moved since the build;
    else None. A package that keeps its state as built gives these outputs on every call."""
    built = _built.get(id(ep)) or {}
    held = {**ep.state_dict, **ep.constants}
    moved = [fqn for fqn, value in built.items() if fqn in held and not torch.equal(held[fqn], value)]
    if not moved:
        return None
    import torch.utils._pytree as pytree
    module = fakecheck.private_module(ep)
    for fqn in moved:
        owner, _, leaf = fqn.rpartition(".")
        getattr(module.get_submodule(owner), leaf).data.copy_(built[fqn])  # the private copy, not the user's
    inputs = pytree.tree_map_only(torch.Tensor, lambda t: t.detach().clone(), positional)
    return _run(torch, _interpreter_class()(module, budget), inputs), moved


def before_call(ep, args, kwargs, call, budget):
    """The eager run of this call, {"status", "outputs", "values", "targets", "problem", "rerun"}, or None when not
    wanted. `rerun`: what the float64 run needs, the program and the placeholders' values."""
    if not enabled() or _state["kept"] or call >= MAX_CALLS:
        return None
    _clear()
    if ep is None:
        return {"status": "no_program", "outputs": None, "values": {}, "targets": {}, "rerun": None, "problem": (
            "the process compiled no program itself (a prebuilt package): nothing to run eagerly")}
    import torch
    import torch.utils._pytree as pytree
    positional, named = pytree.tree_map_only(torch.Tensor, lambda t: t.detach().clone(), (list(args), dict(kwargs)))
    module = fakecheck.private_module(ep)
    recorder = _interpreter_class()(module, budget)
    try:
        # The graph's placeholders are the leaves of (args, kwargs) with kwargs in the exported signature's order,
        # whatever order the call gave them in.
        if named:
            from torch.export._tree_utils import reorder_kwargs
            positional = [*positional, reorder_kwargs(named, ep.call_spec.in_spec)]
        outputs = _run(torch, recorder, positional)
        as_built = _as_built(torch, ep, positional, budget)
    except Exception as exc:
        return {"status": "eager_raised", "outputs": None, "values": recorder.values, "targets": recorder.targets,
                "rerun": None, "problem": f"the program raised when run eagerly: {fakecheck._error(exc)}"}
    return {"status": None, "outputs": outputs, "values": recorder.values, "targets": recorder.targets,
            "born": recorder.born, "random": _random(torch, module), "rerun": (ep, positional, budget),
            "as_built": as_built, "problem": (
                f"{recorder.dropped} eager values were not kept: over the capture cap" if recorder.dropped else None)}


def _run(torch, recorder, positional):
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []
    with torch.random.fork_rng(devices=devices), torch.no_grad():
        return recorder.run(*positional)


def after_call(eager, result, call, path):
    """Compares the call's outputs with eager's; on the first call that differs, every saved tensor too."""
    doc = {"schema_version": SCHEMA_VERSION, "status": eager["status"], "calls": call + 1, "call": None,
           "problem": eager["problem"], "factor": FACTOR, "outputs": [], "outputs_problem": None,
           "values": len(eager["values"]), "targets": eager["targets"], "unstable": {}, "float64": {}, "unwritten": [],
           "stability_problem": None, "tf32": _state.get("tf32"), "born": eager.get("born"),
           "random": eager.get("random") or {}, "dumps": []}
    if eager["status"] is None:
        differential = fakecheck.differential(eager["outputs"], result, call)
        doc.update(outputs=differential["outputs"], outputs_problem=differential["problem"], call=call)
        differs = bool(differential["problem"]) or not all(row["close"] for row in differential["outputs"])
        doc["status"] = "differs" if differs else "agree"
        if differs:
            _state["kept"] = True
            doc["unwritten"] = _unwritten(eager, result, call)
            wide, doc["unstable"], doc["float64"], doc["stability_problem"] = _unstable(eager["values"],
                                                                                       *eager["rerun"])
            as_double = {}  # each eager value on the CPU in float64, made once for every saved tensor of its shape
            doc["dumps"] = [_compare(*found, eager["values"], as_double, wide) for found in _dump_files()]
    _clear()
    fakecheck.write_json(path, doc)


def _unwritten(eager, result, call):
    """[{"fqn", "stale"}] of the written state, where the package's outputs equal the program run with that state as
    built while they differ from it run as the module holds it now: the package does not carry the program's writes
    between calls. [] otherwise."""
    import torch

    from . import constants
    if not eager.get("as_built"):
        return []
    outputs, moved = eager["as_built"]
    same = fakecheck.differential(outputs, result, call)
    if same["problem"] or not all(row["close"] for row in same["outputs"]):
        return []
    ep = eager["rerun"][0]
    held = {**ep.state_dict, **ep.constants}
    return [{"fqn": fqn, "stale": constants._stale(torch, _built[id(ep)][fqn], held[fqn])} for fqn in moved]


def _unstable(values, ep, positional, budget):
    """(the float64 run's node values, {node: max abs difference} of the float32 eager values that miss it beyond
    the tolerance, {node: [max abs, RMSE]} of every eager value against it, why the float64 run was not made or
    failed). Rounding of the reference itself then exceeds what a kernel is held to, so a kernel that misses such
    a node may be right; the errors say which side float64 takes (a bfloat16 eager rounds after every op, a fused
    kernel once).

    On a GPU the program also runs in float32 on the CPU, and the larger of the two float32 errors counts: CUDA's
    tree reductions can land near float64 by luck of their order, while a correct kernel that sums in another
    order misses by far more where the computation cancels (a one-pass variance: a kernel 35 off a reference
    that float64 confirmed to 1e-4, on an H200). Two float32 orders that disagree show the rounding a kernel may
    carry; one that happens to be accurate does not."""
    import torch
    import torch.utils._pytree as pytree
    try:
        wide = _record(torch, ep, positional, torch.float64, None, 2 * budget)
    except Exception as exc:
        return {}, {}, {}, f"the program could not run in float64: {fakecheck._error(exc)}"
    runs, problems = [values], []
    if any(t.device.type != "cpu" for t in pytree.tree_leaves(positional) if isinstance(t, torch.Tensor)):
        try:
            runs.append(_record(torch, ep, positional, None, "cpu", budget).values)
        except Exception as exc:
            problems.append(f"the program could not run in float32 on the CPU: {fakecheck._error(exc)}")
    if wide.dropped:
        problems.append(f"{wide.dropped} float64 values were not kept: over the capture cap")
    gaps: dict = {}  # node -> each float32 run's miss (None: no finite element to measure it on)
    for values_of in runs:
        for name, miss in _misses(torch, values_of, wide.values).items():
            gaps.setdefault(name, []).append(miss)
    found = {name: max((g for g in misses if g is not None), default=None) for name, misses in gaps.items()}
    errors = {name: list(_errors(torch, value, wide.values[name])) for name, value in values.items()
              if name in wide.values and value.is_floating_point() and value.shape == wide.values[name].shape}
    return wide.values, found, errors, "; ".join(problems) or None


def _errors(torch, value, reference):
    """(max abs, RMSE) of `value` against `reference` over the elements finite in both (None, None: none is). RMSE
    is dynamo's accuracy metric against float64 (torch/_dynamo/utils.py `same`)."""
    a, b = value.detach().double().cpu(), reference.detach().double().cpu()
    both = torch.isfinite(a) & torch.isfinite(b)
    if not bool(both.any()):
        return None, None
    diff = a[both] - b[both]
    return float(diff.abs().max()), float(diff.pow(2).mean().sqrt())


def _record(torch, ep, positional, dtype, device, budget):
    """The program run again with its parameters and inputs in `dtype` and/or on `device`: its recorder."""
    import copy

    import torch.utils._pytree as pytree

    def move(t):
        return t.to(device=device, dtype=dtype if dtype is not None and t.is_floating_point() else t.dtype)
    # A copy: .to() would convert the parameters the program shares with the user's module in place.
    program = copy.deepcopy(ep.module()).to(device=device, dtype=dtype)
    recorder = _interpreter_class()(program, budget)
    _run(torch, recorder, pytree.tree_map_only(torch.Tensor, move, positional))
    return recorder


def _misses(torch, narrow_values, references):
    """{node: max abs difference} of the float32 values that miss their float64 value beyond the tolerance."""
    from torch.testing._comparison import default_tolerances
    found = {}
    for name, narrow in narrow_values.items():
        reference = references.get(name)
        if reference is None or not narrow.is_floating_point() or narrow.dtype == torch.float64 or \
                reference.shape != narrow.shape:
            continue
        rtol, atol = (t * FACTOR for t in default_tolerances(narrow))
        a, b = narrow.double().cpu(), reference.double().cpu()
        if not bool(torch.isclose(a, b, rtol, atol, equal_nan=True).all()):
            both = torch.isfinite(a) & torch.isfinite(b)
            found[name] = float((a[both] - b[both]).abs().max()) if both.any() else None
    return found


def _shape_of_gap(torch, dtype, a, b):
    """(max ULP, cosine) of the package's elements `a` against eager's `b` (finite in both, as float64): the gap in
    units of the last place of the larger of the two in `dtype`, which says whether it is rounding (a few) or not;
    and the cosine similarity, which says whether the two point the same way. None where not defined. The larger of
    the two, not eager's alone: where eager holds an exact 0 the package's 1e-5 would be 1e34 of 0's last place."""
    if not dtype.is_floating_point or a.numel() == 0:
        return None, None
    info = torch.finfo(dtype)
    # x = m * 2**e with m in [0.5, 1): its last place is eps * 2**(e - 1); below the smallest normal the spacing is
    # the subnormals', that of the smallest normal.
    _, e = torch.frexp(torch.maximum(a.abs(), b.abs()).clamp_min(info.tiny))
    ulp = float(((a - b).abs() / torch.ldexp(torch.full_like(b, info.eps), e - 1)).max())
    norms = float(a.norm() * b.norm())
    return ulp, (float(a @ b) / norms if norms > 0 else None)


def _compare(path, when, stem, device, values, as_double, wide):
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
        gap = (a[both] - b[both]).abs()
        max_abs = float(gap.max()) if both.any() else None
        # Relative to eager's magnitude, over the elements eager holds away from zero.
        scale = b[both].abs()
        max_rel = float((gap[scale > 0] / scale[scale > 0]).max()) if bool((scale > 0).any()) else None
        exact = wide.get(name)
        # Against the node's float64 value too: which of the package and eager float64 takes, where they differ.
        f64 = _errors(torch, saved, exact) if exact is not None and exact.shape == saved.shape else (None, None)
        pairs.append([name, max_abs, close, max_rel, *f64, *_shape_of_gap(torch, saved.dtype, a[both], b[both])])
    pairs.sort(key=lambda p: (not p[2], float("inf") if p[1] is None else p[1]))
    row["pairs"], row["pairs_dropped"] = pairs[:MAX_PAIRS], max(0, len(pairs) - MAX_PAIRS)
    return row
