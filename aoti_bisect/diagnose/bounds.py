"""An index bound in the user's terms: which input dimension a kernel's `0 <= tmpN < B` check guards, its size
at run time, the index values that broke it, and which of the guide's usual causes held. Pure.

Inputs are named as the wrapper names them (`arg0_1`) unless `names` maps them to the user's names: the
mapping is data, so a hook that learns the user's names later changes no logic here.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping, Optional

from ..aoti.checks import DimRejected, IndexBound
from ..aoti.printer import TensorStats
from ..aoti.wrapper import WrapperGraph

_WORD = re.compile(r"\b[A-Za-z_]\w*\b")


@dataclass(frozen=True)
class DimRef:
    """Dimension `dim` of model input `input` (the wrapper's variable)."""

    input: str
    dim: int


@dataclass(frozen=True)
class BoundStory:
    lines: tuple[str, ...]  # evidence, one fact a line
    summary: str  # the verdict's sentence


def bound_dims(bound: IndexBound, kernel: str, graph: WrapperGraph) -> list[DimRef]:
    """The model-input dimensions a bound is made of.

    A symbolic bound's `ksM` is a parameter of the kernel: the launch passes it a wrapper expression of size
    symbols (`s70`), each read from one input's dimension. A numeric bound was fixed at export: the static
    dimensions of the inputs the kernel reads that have that size (more than one when sizes repeat)."""
    if bound.value is None:
        refs = []
        for param in bound.symbols:
            arg = graph.size_argument(kernel, param) or ""
            refs += [DimRef(*graph.sizes[w]) for w in _WORD.findall(arg) if w in graph.sizes]
        return list(dict.fromkeys(refs))
    hits = graph.by_name(kernel)
    inputs = [v for v in hits[0].reads if graph.is_model_input(v)] if hits else []
    return [DimRef(var, d) for var in inputs
            for d, size in enumerate(graph.expected.get(var, ("", ""))[0].split(","))
            if size.strip() == str(bound.value)]


def run_time_size(ref: DimRef, inputs: Mapping[str, TensorStats]) -> Optional[int]:
    """The dimension's size in the failing run, from the level-2 printer's model-input sizes."""
    s = inputs.get(ref.input)
    dims = s.dims if s is not None else []
    return dims[ref.dim] if ref.dim < len(dims) else None


def explain(bound: IndexBound, kernel: str, graph: WrapperGraph, inputs: Mapping[str, TensorStats],
            reads: list[TensorStats], names: Optional[Mapping[str, str]] = None) -> BoundStory:
    """The story of a failed bound check in `kernel`. inputs: level 2's model-input stats by variable;
    reads: level 2's stats of what the kernel read just before it faulted."""
    names = names or {}

    def dim(ref: DimRef) -> str:
        return f"dim {ref.dim} of `{names.get(ref.input, ref.input)}`"

    refs = bound_dims(bound, kernel, graph)
    sizes = [run_time_size(r, inputs) for r in refs]
    value = bound.value if bound.value is not None else (sizes[0] if len(refs) == 1 and bound.symbols == (
        bound.bound,) else None)
    lines = []
    if bound.value is None:
        args = ", ".join(f"{p} = {graph.size_argument(kernel, p) or '?'}" for p in bound.symbols)
        where = " and ".join(f"{dim(r)} ({'?' if n is None else n} at run time)" for r, n in zip(refs, sizes))
        lines.append(f"the bound `{bound.bound}` of {kernel} is a size known only at run time: {args}, read from "
                     + (where or "no model input the wrapper names (an intermediate size)"))
    elif refs:
        lines.append(f"the bound {bound.value} of {kernel} was fixed at export: the size of "
                     + " or ".join(dim(r) for r in refs))
    else:
        lines.append(f"the bound {bound.value} of {kernel} is no static dimension of a model input it reads "
                     "(an intermediate buffer's size)")
    target = _target(refs, sizes, bound, value, dim)
    ints = [s for s in reads if not s.is_float and s.scalar is None and s.numel]
    sources = ", ".join(f"`{names.get(s.arg, s.arg)}`" for s in ints)
    past = [s for s in ints if value is not None and s.max >= value]
    if past:
        sentence = (f"index into {target} reached {max(s.max for s in past):g}; the values come from "
                    + ", ".join(f"`{names.get(s.arg, s.arg)}`" for s in past))
    elif value is not None and ints and min(s.min for s in ints) < -value:
        sentence = (f"index into {target} went to {min(s.min for s in ints):g}, below zero even after a "
                    f"negative index wraps by adding {value}; the values come from {sources}")
    elif ints:
        sentence = (f"index into {target} went out of range; {kernel} computes it from {sources} (values "
                    f"{min(s.min for s in ints):g}..{max(s.max for s in ints):g}), so the index itself is not printed")
    else:
        sentence = f"index into {target} went out of range; {kernel} reads no integer tensor the printer shows"
    held, checked = causes(graph, inputs, ints, value, names)
    lines += [*checked, sentence]  # the conclusion last: the inspect stage's finding quotes the last line
    summary = sentence + ("; held: " + "; ".join(held) if held else
                          "; none of the guide's usual causes held (zero-size dimension, negative index, "
                          "size outside the exported range)")
    return BoundStory(tuple(lines), summary)


def _target(refs: list[DimRef], sizes: list[Optional[int]], bound: IndexBound, value: Optional[int], dim) -> str:
    if len(refs) != 1:
        return f"a dimension of size {value if value is not None else bound.bound}"
    if bound.value is not None:
        return f"{dim(refs[0])} (size {bound.value}, fixed at export)"
    n = sizes[0]
    unit = "rows" if refs[0].dim == 0 else "entries"
    return f"{dim(refs[0])} ({'?' if n is None else n} {unit} at run time)"


def causes(graph: WrapperGraph, inputs: Mapping[str, TensorStats], ints: list[TensorStats],
           value: Optional[int], names: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """The guide's usual causes of an out-of-bounds index: (those that held, one evidence line each)."""
    def name(var: str) -> str:
        return f"`{names.get(var, var)}`"

    if not inputs:
        return [], ["usual causes not checked: level 2 printed no model-input sizes"]
    held, lines = [], []
    empty = [f"dim {d} of {name(var)} is 0" for var, s in inputs.items() for d, n in enumerate(s.dims) if n == 0]
    if empty:
        held.append(f"a zero-size dimension at run time ({', '.join(empty)}: an empty tensor)")
    negative = [s for s in ints if s.min < 0]
    if negative:
        held.append("an index below zero (" + ", ".join(f"{name(s.arg)} holds {s.min:g}" for s in negative)
                    + (f"; a negative index wraps once by adding {value}" if value is not None else "") + ")")
    outside = []
    for (var, d), (lo, hi) in sorted(graph.ranges.items()):
        n = run_time_size(DimRef(var, d), inputs)
        if n is not None and ((lo is not None and n < lo) or (hi is not None and n > hi)):
            outside.append(f"dim {d} of {name(var)} is {n}, exported for {range_text(lo, hi)}")
    if outside:
        held.append(f"a size outside the exported range ({'; '.join(outside)})")
    lines.append("usual cause, a zero-size dimension at run time: " + (
        "held: " + ", ".join(empty) if empty else "no (no model input has one)"))
    lines.append("usual cause, an index below zero: " + (
        "held: " + ", ".join(f"{name(s.arg)} min {s.min:g}" for s in negative) if negative else
        "no" + (f" ({', '.join(f'{name(s.arg)} min {s.min:g}' for s in ints)})" if ints else
                " (the kernel reads no integer tensor)")))
    lines.append("usual cause, a size outside the exported range: " + (
        "held: " + "; ".join(outside) if outside else
        "no (" + (", ".join(f"dim {d} of {name(v)} in {range_text(lo, hi)}" for (v, d), (lo, hi)
                            in sorted(graph.ranges.items())) or "no dynamic dimension") + ")"))
    return held, lines


def range_text(lo: Optional[int], hi: Optional[int]) -> str:
    return f"{'' if lo is None else lo}..{'' if hi is None else hi}"


def rejected_dim(rejected: DimRejected, var: str, graph: Optional[WrapperGraph],
                 names: Optional[Mapping[str, str]] = None) -> str:
    """An input check's refusal of one dimension, in the user's terms, naming the cause it is."""
    who = f"dim {rejected.dim} of `{(names or {}).get(var, var)}` is {rejected.got} at run time"
    lo, hi = graph.ranges.get((var, rejected.dim), (None, None)) if graph else (None, None)
    if rejected.expected.startswith("=="):
        text = f"{who}, but the package was compiled for a static size {rejected.expected[3:]}"
    elif lo is not None or hi is not None:
        text = f"{who}, outside its exported range {range_text(lo, hi)}: a size outside the exported range"
    else:
        text = f"{who}, but the package requires {rejected.expected}: a size outside the exported range"
    return text + (" (a zero-size dimension at run time)" if rejected.got == 0 else "")
