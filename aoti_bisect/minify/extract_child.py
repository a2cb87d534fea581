"""Run in a fresh process (by path, with the repro's Python; imports only torch): load the captured program and
inputs, run its graph eagerly node by node, and write graph.json (the nodes, their arguments, what each
computed) and values.pt (every tensor a node or input computed, by name) into OUT_DIR.

A node that raises ends the walk: it and everything after it are "unknown" (such a node cannot be replaced by
its value). The walk runs on the CPU whatever device the program runs on; values.pt holds CPU tensors and
graph.json each value's device in the compiled program. A crash here kills only this process; the minifier
says so and stops.

usage: python extract_child.py PROGRAM.pt2 INPUTS.pt OUT_DIR
"""
import json
import logging
import math
import operator
import os
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
        print(f"aoti-bisect minify: the program calls the custom op {ops[0]}, which only the repro's own code "
              "registers: the failure may need that op's state, and its graph cannot be cut in a process of "
              "its own", file=sys.stderr)
        raise SystemExit(3)


def main(program, inputs_path, out):
    ep = _load(program)
    captured = torch.load(inputs_path, weights_only=False)
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
    torch.save(tensors, os.path.join(out, "values.pt"))
    with open(os.path.join(out, "graph.json"), "w") as f:
        json.dump({"placeholders": placeholders, "nodes": nodes, "output": encode(output.args[0]),
                   "eager_failure": failed}, f, indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:4])
