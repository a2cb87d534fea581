"""Run in a fresh process (by path, with the repro's Python; imports only torch): load the captured program and
inputs, run its graph eagerly node by node, and write graph.json (the nodes, their arguments, what each
computed) and values.pt (every tensor a node or input computed, by name) into OUT_DIR.

A node that raises ends the walk: it and everything after it are "unknown" (such a node cannot be replaced by
its value). The walk runs on the CPU whatever device the program runs on; values.pt holds CPU tensors and
graph.json each value's device in the compiled program. A crash here kills only this process; the minifier
says so and stops.

A custom op is loaded from the library the capture carried (LIB_DIR, the capture's libs/) and run like any
node; `skip` leaves custom ops unrun (after a walk that crashed in one). graph.json records, for each custom op
without a fake of its own, how a fake can make its output (fake_rule).

A custom op the repro defines in Python is defined first from DEFINITIONS, the source the capture took of it
(child/hook/pyops.py), run as the candidates will run it.

usage: python extract_child.py PROGRAM.pt2 INPUTS.pt OUT_DIR [run|skip] [LIB_DIR] [DEFINITIONS.py]
"""
import json
import logging
import math
import operator
import os
import pickle
import re
import sys

import torch
import torch.utils._pytree as pytree
from torch.export.graph_signature import InputKind


def encode(arg):
    """An FX argument as JSON: {"ref": name} for a node, lists as lists, literals as themselves, the rest as
    {"py": source text} that evaluates with only torch imported."""
    if isinstance(arg, torch.fx.Node):
        return {"ref": arg.name}
    if isinstance(arg, (list, tuple)):
        return [encode(a) for a in arg]
    if isinstance(arg, float) and not math.isfinite(arg):
        return {"py": f"float('{arg}')"}
    if arg is None or isinstance(arg, (bool, int, float, str)):
        return arg
    if isinstance(arg, torch.device):
        return {"py": f"torch.device({str(arg)!r})"}
    if isinstance(arg, (torch.dtype, torch.layout, torch.memory_format)):
        return {"py": str(arg)}
    raise TypeError(f"cannot write {type(arg).__name__} {arg!r} as source")


def describe(value, device=None):
    """What a value was; `device` the one the compiled program holds it on (the walk runs on the CPU)."""
    if isinstance(value, torch.Tensor):
        floating = value.dtype.is_floating_point or value.dtype.is_complex
        nan = floating and bool(torch.isnan(value).any())
        finite = not floating or bool(torch.isfinite(value).all())
        return {"kind": "tensor", "shape": list(value.shape), "dtype": str(value.dtype).replace("torch.", ""),
                "device": str(device or value.device), "finite": finite, "nan": nan}
    if isinstance(value, (bool, int, float)) and not isinstance(value, torch.SymInt):
        return {"kind": "literal", "py": repr(value) if math.isfinite(value) else f"float('{value}')"}
    return {"kind": "other"}


def target_name(target):
    if isinstance(target, torch._ops.OpOverload):
        return f"{target.namespace}::{target._opname}.{target._overloadname}"
    if target is operator.getitem:
        return "operator.getitem"
    if getattr(target, "__module__", None) in ("_operator", "operator"):
        return f"operator.{target.__name__}"
    return f"python::{getattr(target, '__qualname__', repr(target))}"


def _on_cpu(arg):
    # The walk runs on the CPU even for a CUDA program: an out-of-bounds index there raises an IndexError
    # instead of a device assert that would leave this process's CUDA context unusable.
    return torch.device("cpu") if isinstance(arg, torch.device) else arg


class _Errors(logging.Handler):
    def __init__(self):
        super().__init__()
        self.exceptions = []

    def emit(self, record):
        if record.exc_info and record.exc_info[1] is not None:
            self.exceptions.append(record.exc_info[1])


def load_libraries(folder):
    """Loads each library the capture carried (the hook's copy of what registers the program's custom ops);
    returns their file names."""
    names = sorted(os.listdir(folder)) if folder and os.path.isdir(folder) else []
    for name in names:
        torch.ops.load_library(os.path.join(folder, name))
    return names


def fake_rule(node):
    """How a fake of a custom op that has none can make its output from its arguments, judged from the output the
    program recorded: {"like": i} (the i-th argument's shape, dtype and device) or {"shape", "dtype"}. None where
    the op has a Meta kernel of its own (or a composite one), or returns anything but one tensor."""
    name = f"{node.target.namespace}::{node.target._opname}"
    opdef = torch._library.custom_ops.OPDEFS.get(name)
    if opdef is not None and opdef._abstract_fn is not None:
        return None
    if opdef is None and any(torch._C._dispatch_has_kernel_for_dispatch_key(name, key)
           for key in ("Meta", "CompositeImplicitAutograd", "CompositeExplicitAutograd")):
        return None
    out = node.meta.get("val")
    if not isinstance(out, torch.Tensor):
        return None
    for i, arg in enumerate(node.args):
        val = arg.meta.get("val") if isinstance(arg, torch.fx.Node) else None
        if isinstance(val, torch.Tensor) and val.shape == out.shape and val.dtype == out.dtype:
            return {"like": i}
    return {"shape": [int(d) for d in out.shape], "dtype": str(out.dtype).replace("torch.", "")}


def _load(program):
    """torch.export.load, or one plain line and exit 3 where the program calls a custom op nobody registered."""
    errors = _Errors()
    logging.getLogger("torch.export").addHandler(errors)  # torch logs the real error, then raises a vague one
    try:
        return torch.export.load(program)
    except Exception as exc:
        ops, todo = [], [exc, *errors.exceptions]
        while todo:
            cause = todo.pop()
            ops += re.findall(r"resolve (torch\.ops\.[\w.]+) to an operator", str(cause))
            todo += [c for c in (cause.__cause__, cause.__context__) if c is not None]
        if not ops:
            raise
        print(f"aoti-bisect minify: the program calls the custom op {ops[0]}, which the repro defines in Python "
              "(no shared library in its process registers it): its graph cannot be cut in a process of its own",
              file=sys.stderr)
        raise SystemExit(3)


def _load_inputs(path):
    """The captured call's inputs, unpickled with weights_only: a run folder can come from anyone (a bundle, a
    colleague's disk), and a full unpickle of it would run whatever code its author put there."""
    try:
        return torch.load(path, weights_only=True)
    except pickle.UnpicklingError as exc:
        print("aoti-bisect minify: the captured inputs hold objects other than tensors and plain values, which "
              f"are not loaded from a run folder (torch.load weights_only): {str(exc).splitlines()[0][:200]}",
              file=sys.stderr)
        raise SystemExit(3)


def _create(path, mode):
    """A new file in place of whatever the name held: a link planted there is removed, never written through
    (O_EXCL|O_NOFOLLOW: one planted again in between makes the open fail, not follow it)."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666), mode)


def define(path):
    """Runs the captured source of the repro's Python custom ops (it registers them), or one plain line and exit 3
    where it fails in a process of its own (a module it imports is missing here)."""
    if not path:
        return
    with open(path) as f:
        text = f.read()
    try:
        exec(compile(text, path, "exec"), {"__name__": "aoti_bisect_custom_ops"})
    except Exception as exc:
        print(f"aoti-bisect minify: the source of the repro's Python custom ops does not run on its own: "
              f"{type(exc).__name__}: {exc}"[:400], file=sys.stderr)
        raise SystemExit(3)


def main(program, inputs_path, out, custom="run", libs=None, definitions=None):
    libraries = load_libraries(libs)
    define(definitions)
    ep = _load(program)
    captured = _load_inputs(inputs_path)
    flat_user, _ = pytree.tree_flatten((tuple(captured["args"]), dict(captured["kwargs"])))
    user = iter(flat_user)
    values, placeholders = {}, []
    gm = ep.graph_module
    specs = {s.arg.name: s for s in ep.graph_signature.input_specs}
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        spec = specs[node.name]
        if spec.kind == InputKind.USER_INPUT:
            value = next(user)
        elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER):
            value = ep.state_dict[spec.target] if spec.target in ep.state_dict else ep.constants[spec.target]
        elif spec.kind == InputKind.CONSTANT_TENSOR:
            value = ep.constants[spec.target]
        else:
            raise SystemExit(f"aoti-bisect minify: input {node.name} is a {spec.kind.name}, not supported")
        if isinstance(value, torch.nn.Parameter):
            value = value.detach()
        device = value.device if isinstance(value, torch.Tensor) else None
        values[node.name] = value.cpu() if isinstance(value, torch.Tensor) else value
        placeholders.append({"name": node.name, "user": spec.kind == InputKind.USER_INPUT,
                             "value": describe(values[node.name], device)})

    nodes, failed = [], None
    env = dict(values)
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        record = {"name": node.name, "target": target_name(node.target), "args": encode(node.args),
                  "kwargs": {k: encode(v) for k, v in node.kwargs.items()},
                  "value": {"kind": "unknown"}}
        if isinstance(node.target, torch._ops.OpOverload) and not torch._library.utils.is_builtin(node.target):
            record["fake"] = fake_rule(node)
            if custom == "skip" and failed is None:
                # The first walk died inside a custom op (a crash of the op is the failure, often): its value
                # and everything after it stay unknown.
                failed = f"{node.name}: not run eagerly (a custom op, and the walk that ran it crashed)"
        if failed is None:
            try:
                args = pytree.tree_map(_on_cpu, torch.fx.node.map_arg(node.args, lambda n: env[n.name]))
                kwargs = pytree.tree_map(_on_cpu, torch.fx.node.map_arg(node.kwargs, lambda n: env[n.name]))
                env[node.name] = node.target(*args, **kwargs)
                meta = node.meta.get("val")
                record["value"] = describe(env[node.name], getattr(meta, "device", None))
            except Exception as exc:  # the eager twin of the failure: what follows has no value
                failed = f"{node.name}: {type(exc).__name__}: {exc}"[:300]
        nodes.append(record)
    output = next(n for n in gm.graph.nodes if n.op == "output")
    tensors = {k: v for k, v in env.items() if isinstance(v, torch.Tensor)}
    with _create(os.path.join(out, "values.pt"), "wb") as f:
        torch.save(tensors, f)
    with _create(os.path.join(out, "graph.json"), "w") as f:
        json.dump({"placeholders": placeholders, "nodes": nodes, "output": encode(output.args[0]),
                   "eager_failure": failed, "libraries": libraries}, f, indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:7])
