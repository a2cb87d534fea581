"""An index bound in the user's terms: which input dimension a kernel's `0 <= tmpN < B` check guards, its size
at run time, the index values that broke it, and which of the guide's usual causes held. Pure.

Inputs are subjects made by the ladder's Namer: they carry the user's names where the hooked runs recorded them.
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Optional

from ..aoti.checks import DimRejected, IndexBound, Term
from ..aoti.printer import TensorStats
from ..aoti.provenance import source_nodes
from ..aoti.wrapper import Launch, WrapperGraph
from .facts import Arg, Fact, FactKind, Namer, Subject, fact, kernel

_WORD = re.compile(r"\b[A-Za-z_]\w*\b")
_VAR = re.compile(r"\b(buf\d+|arg\d+_\d+)\b")


@dataclass(frozen=True)
class DimRef:
    """Dimension `dim` of model input `input` (the wrapper's variable)."""

    input: str
    dim: int


@dataclass(frozen=True)
class BoundStory:
    lines: tuple[Fact, ...]  # evidence, one fact a line
    summary: Fact  # the verdict's sentence
    origin: Optional[str] = None  # the model input a computed index derives from (the wrapper's variable)


@dataclass(frozen=True)
class IndexOrigin:
    """Where a computed index comes from: the model inputs and constants it is made of, and the launch that
    made it (an extern op such as aoti_torch_cpu_cumsum, or a kernel)."""
    sources: tuple[str, ...]  # model inputs first, then constants
    maker: Optional[Launch]


def origin(graph: WrapperGraph, var: str, before: int) -> IndexOrigin:
    """Follows `var` back through the launches that wrote it, and theirs, to the graph's inputs."""
    maker = graph.producer(var, before)
    found: dict[str, None] = {}
    stack, seen = [(var, before)], set()
    while stack:
        cur, at = stack.pop()
        if graph.is_model_input(cur) or graph.is_constant(cur):
            found[graph.storage(cur)] = None
            continue
        p = graph.producer(cur, at)
        if p is None or p.index in seen:
            continue
        seen.add(p.index)
        stack += [(r, p.index) for r in p.reads]
    ordered = sorted(found, key=lambda v: (not graph.is_model_input(v), v))
    return IndexOrigin(tuple(ordered), maker)


def index_given(bound: IndexBound, kernel_name: str, graph: WrapperGraph, terms: tuple[Term, ...],
                namer: Namer) -> Optional[Fact]:
    """Where a kernel faulted on its index check and its source shows the index is a model input's value as it
    stands (one addend, loaded from the input, nothing added): that input carried the bad value, whatever it was.
    Read from the source alone, so a crash names the input in the run that crashed; None for a computed index."""
    if len(terms) != 1 or terms[0].param is None or terms[0].scale != 1:
        return None
    var = next(iter(_VAR.findall(graph.size_argument(kernel_name, terms[0].param) or "")), None)
    if var is None or not graph.is_model_input(var):
        return None
    storage = graph.storage(var)
    who = namer.input(graph.inputs.index(storage), storage)
    return fact(FactKind.INDEX, "{kernel} checks {input:phrase} as the model was given it against the bound {bound}, "
                "computing nothing from it: the value past the bound came in with that input",
                kernel=kernel(kernel_name), input=who, bound=bound.bound)


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
    found = [DimRef(var, d) for var in inputs
             for d, size in enumerate(graph.expected.get(var, ("", ""))[0].split(","))
             if size.strip() == str(bound.value)]
    # None of the inputs: a table the model holds (an embedding's weight), whose shape the wrapper declares.
    tables = [graph.storage(v) for v in hits[0].reads if graph.is_constant(v)] if hits and not found else []
    return found or [DimRef(var, d) for var in tables for d, size in enumerate(graph.constant_shapes.get(var, ()))
                     if size == bound.value]


def run_time_size(ref: DimRef, inputs: Mapping[str, TensorStats]) -> Optional[int]:
    """The dimension's size in the failing run, from the level-2 printer's model-input sizes."""
    s = inputs.get(ref.input)
    dims = s.dims if s is not None else []
    return dims[ref.dim] if ref.dim < len(dims) else None


def explain(bound: IndexBound, kernel_name: str, graph: WrapperGraph, inputs: Mapping[str, TensorStats],
            reads: list[TensorStats], namer: Optional[Namer] = None, operands: tuple[str, ...] = (),
            terms: tuple[Addend, ...] = ()) -> BoundStory:
    """The story of a failed bound check in `kernel_name`. inputs: level 2's model-input stats by variable;
    reads: level 2's stats of what the kernel read just before it faulted; operands: the launch's variables the
    checked index is computed from (from the kernel's source, checks.index_operands; () when unknown); terms: the
    index as the sum the kernel computes (checks.index_terms, its parameters as the launch's variables)."""
    namer = namer or Namer(placeholders=tuple(graph.inputs))
    k = kernel(kernel_name)

    def dim(ref: DimRef) -> Fact:
        return fact(FactKind.INDEX, "dim {dim} of {input:quoted}", dim=ref.dim, input=namer.var(ref.input))

    refs = bound_dims(bound, kernel_name, graph)
    sizes = [run_time_size(r, inputs) for r in refs]
    value = bound.value if bound.value is not None else (sizes[0] if len(refs) == 1 and bound.symbols == (
        bound.bound,) else None)
    lines = [_bound_fact(bound, kernel_name, graph, refs, sizes, dim)]
    target = _target(refs, sizes, bound, value, dim)
    ints = [s for s in reads if not s.is_float and s.scalar is None and s.numel]
    if operands:  # another integer tensor the kernel reads indexes another table: not this bound's suspect
        mine = {graph.storage(o) for o in operands}
        ints = [s for s in ints if graph.storage(s.arg) in mine]
    came = _came_from(graph, kernel_name, operands, inputs, value, namer)
    sources = tuple(namer.var(s.arg) for s in ints)
    past = [s for s in ints if value is not None and s.max >= value]
    total = index_sum(terms, graph, [*inputs.values(), *reads], value, target, k, namer)
    sentence = total if total is not None else _reached(target, k, ints, past, value, sources, namer)
    held, checked = causes(graph, inputs, ints, value, namer)
    if came is not None:  # a computed index: where it came from is the cause, whichever usual one held
        lines += [*checked, sentence, came[0]]
        return BoundStory(tuple(lines), fact(FactKind.INDEX, "{came}; {sentence}", came=came[0], sentence=sentence),
                          came[1])
    lines += [*checked, sentence]  # the conclusion last: the inspect stage's finding quotes the last line
    summary = (fact(FactKind.INDEX, "{sentence}; held: {held}", sentence=sentence, held=tuple(held)) if held else
               fact(FactKind.INDEX, "{sentence}; none of the guide's usual causes held (zero-size dimension, "
                    "negative index, size outside the exported range)", sentence=sentence))
    return BoundStory(tuple(lines), summary)


def _bound_fact(bound: IndexBound, kernel_name: str, graph: WrapperGraph, refs: list[DimRef],
                sizes: list[Optional[int]], dim: Callable[[DimRef], Fact]) -> Fact:
    """Where the bound comes from: a size known only at run time (and which), a dimension fixed at export, or no
    dimension of a model input at all."""
    k = kernel(kernel_name)
    if bound.value is None:
        args = ", ".join(f"{p} = {graph.size_argument(kernel_name, p) or '?'}" for p in bound.symbols)
        where = tuple(fact(FactKind.INDEX, "{dim} ({size} at run time)", dim=dim(r), size="?" if n is None else n)
                      for r, n in zip(refs, sizes))
        return fact(FactKind.INDEX, "the bound `{bound}` of {kernel} is a size known only at run time: "
                    "{args}, read from {where: and }", bound=bound.bound, kernel=k, args=args,
                    where=where or ("no model input the wrapper names (an intermediate size)",))
    if refs:
        return fact(FactKind.INDEX, "the bound {value} of {kernel} was fixed at export: the size of "
                    "{dims: or }", value=bound.value, kernel=k, dims=tuple(dim(r) for r in refs))
    return fact(FactKind.INDEX, "the bound {value} of {kernel} is no static dimension of a model input "
                "it reads (an intermediate buffer's size)", value=bound.value, kernel=k)


def _reached(target: Fact, k: Subject, ints: list[TensorStats], past: list[TensorStats], value: Optional[int],
             sources: tuple[Subject, ...], namer: Namer) -> Fact:
    """How far the index went, from the integer tensors the kernel read (where the index is no sum of known terms):
    past the bound, below zero after a negative index wraps, or out of range by a computation not printed."""
    if past:
        return fact(FactKind.INDEX, "index into {target} reached {max:g}; the values come from {sources:quoted}",
                    target=target, max=max(s.max for s in past), sources=tuple(namer.var(s.arg) for s in past))
    if value is not None and ints and min(s.min for s in ints) < -value:
        return fact(FactKind.INDEX, "index into {target} went to {min:g}, below zero even after a negative index "
                    "wraps by adding {value}; the values come from {sources:quoted}", target=target,
                    min=min(s.min for s in ints), value=value, sources=sources)
    if ints:
        return fact(FactKind.INDEX, "index into {target} went out of range; {kernel} computes it from "
                    "{sources:quoted} (values {lo:g}..{hi:g}), so the index itself is not printed", target=target,
                    kernel=k, sources=sources, lo=min(s.min for s in ints), hi=max(s.max for s in ints))
    return fact(FactKind.INDEX, "index into {target} went out of range; {kernel} reads no integer tensor the "
                "printer shows", target=target, kernel=k)


@dataclass(frozen=True)
class Addend:
    """One addend of a computed index: `scale` times the launch's variable `var`, or the literal `literal`."""
    scale: int
    var: Optional[str]
    literal: int = 0


def index_sum(terms: tuple[Addend, ...], graph: WrapperGraph, printed: list[TensorStats], value: Optional[int],
              target: Fact, k: Subject, namer: Namer) -> Optional[Fact]:
    """'K computes the index as `ids` (arg2_1) + 55: `ids` 1..19 plus 55 reaches 74, past ...; 55 takes it out of
    range': the addends in the order they are judged (model inputs as given, then what the model adds to them),
    each with its run-time range where level 2 printed it. The first addend whose largest value carries the sum
    past the bound is the one named. None: the index is not a sum of two or more addends."""
    if len(terms) < 2:
        return None
    stats = {graph.storage(s.arg): s for s in printed if not s.is_float and s.scalar is None and s.numel}
    order = sorted(terms, key=lambda t: (t.var is None, not (t.var and graph.is_model_input(t.var))))
    subjects, shown, highs, ranges, hi, out = [], [], [], [], 0.0, None
    for t in order:
        s = stats.get(graph.storage(t.var)) if t.var else None
        who = namer.var(t.var) if t.var else t.scale * t.literal
        label = fact(FactKind.INDEX, "{n:g}", n=who) if t.var is None else \
            fact(FactKind.INDEX, "{who:quoted}", who=who) if t.scale == 1 else \
            fact(FactKind.INDEX, "{scale} × {who:quoted}", scale=t.scale, who=who)
        if t.var is not None:
            lo_t, hi_t = sorted((t.scale * s.min, t.scale * s.max)) if s else (math.nan, math.nan)
        else:
            lo_t = hi_t = t.scale * t.literal
        ranges.append(label if t.var is None else fact(FactKind.INDEX, "{label} {lo:g}..{hi:g}", label=label,
                                                         lo=lo_t, hi=hi_t) if s else
                      fact(FactKind.INDEX, "{label} (not printed)", label=label))
        subjects.append(who)
        shown.append(label)
        highs.append(hi_t)
        hi += hi_t
        if out is None and value is not None and hi >= value:
            out = label
    told: dict[str, Arg] = dict(kernel=k, target=target, shown=tuple(shown), ranges=tuple(ranges),
                                addends=tuple(subjects), scales=tuple(t.scale for t in order), highs=tuple(highs))
    head = "{kernel} computes the index into {target} as {shown: + }: {ranges: plus }"
    if out is None:
        return fact(FactKind.INDEX, head + (" stays below the bound" if not math.isnan(hi) else
                                            ", so its largest value is not known"),
                    bound=value if value is not None else -1, **told)
    taker = out if isinstance(subjects[shown.index(out)], Subject) else \
        fact(FactKind.INDEX, "the literal {n} (a constant Inductor inlined into the kernel)", n=out)
    return fact(FactKind.INDEX, head + " reach {hi:g} ≥ {bound}; {taker} takes it out of range", hi=hi, bound=value,
                taker=taker, **told)


def _came_from(graph: WrapperGraph, kernel_name: str, operands: tuple[str, ...],
               inputs: Mapping[str, TensorStats], value: Optional[int],
               namer: Namer) -> Optional[tuple[Fact, Optional[str]]]:
    """(the sentence, the model input) for an index computed from the graph's inputs rather than handed in: by an
    earlier launch (`cumsum` of a mask, an extern op) or inside the faulting kernel itself (`(scores * 100).long()`
    from a float input). None: the index is a model input as it stands, or its operands are unknown."""
    hits = graph.by_name(kernel_name)
    if not operands or not hits:
        return None
    launch = hits[0]
    var = operands[0]
    if graph.is_model_input(var) and not getattr(inputs.get(graph.storage(var)), "is_float", False):
        return None  # an integer model input (or an unprinted one) is the index as it stands: the usual story
    o = (IndexOrigin((graph.storage(var),), None) if graph.is_model_input(var) else
         origin(graph, var, launch.index))
    made = [i for i in o.sources if graph.is_model_input(i)]
    if not made:
        return None
    source = made[0]
    s = inputs.get(source)
    maker = o.maker or launch
    nodes = ", ".join(source_nodes(maker.source_nodes))
    held = tuple(namer.var(c) for c in o.sources if graph.is_constant(c))  # what the op holds it against
    args: dict[str, Arg] = dict(input=namer.var(source), maker=kernel(maker.name), nodes=nodes,
                bound="?" if value is None else value, constants=held)
    op = "{maker} ({nodes})" if nodes else "{maker}"  # the FX nodes it computes, where the wrapper names them
    also = ", and from {constants:quoted}" if held else ""
    where = ("the index is computed, not handed in: " + op + " makes it from {input:phrase}" if o.maker
             else "the index is computed inside " + op + " from {input:phrase}")
    if s is not None:
        return fact(FactKind.INDEX, where + ", which holds {lo:g}..{hi:g} at run time" + also + "; that op takes it "
                    "past the bound {bound}", lo=s.min, hi=s.max, **args), source
    return fact(FactKind.INDEX, where + " (its run-time values were not printed)" + also + "; that op takes it past "
                "the bound {bound}", **args), source


def _target(refs: list[DimRef], sizes: list[Optional[int]], bound: IndexBound, value: Optional[int],
            dim: Callable[[DimRef], Fact]) -> Fact:
    if len(refs) != 1:
        return fact(FactKind.INDEX, "a dimension of size {size}", size=value if value is not None else bound.bound)
    if bound.value is not None:
        return fact(FactKind.INDEX, "{dim} (size {value}, fixed at export)", dim=dim(refs[0]), value=bound.value)
    n = sizes[0]
    return fact(FactKind.INDEX, "{dim} ({size} {unit} at run time)", dim=dim(refs[0]), size="?" if n is None else n,
                unit="rows" if refs[0].dim == 0 else "entries")


def causes(graph: WrapperGraph, inputs: Mapping[str, TensorStats], ints: list[TensorStats],
           value: Optional[int], namer: Namer) -> tuple[list[Fact], list[Fact]]:
    """The guide's usual causes of an out-of-bounds index: (those that held, one evidence line each)."""
    def name(var: str) -> Subject:
        return namer.var(var)

    if not inputs:
        return [], [fact(FactKind.INDEX, "usual causes not checked: level 2 printed no model-input sizes")]
    held, lines = [], []
    empty = tuple(fact(FactKind.INDEX, "dim {d} of {input:quoted} is 0", d=d, input=name(var))
                  for var, s in inputs.items() for d, n in enumerate(s.dims) if n == 0)
    if empty:
        held.append(fact(FactKind.INDEX, "a zero-size dimension at run time ({empty:, }: an empty tensor)",
                         empty=empty))
    negative = [s for s in ints if s.min < 0]
    if negative:
        held.append(fact(FactKind.INDEX, "an index below zero ({holds:, }" + (
            "; a negative index wraps once by adding {value})" if value is not None else ")"),
            holds=tuple(fact(FactKind.INDEX, "{input:quoted} holds {min:g}", input=name(s.arg), min=s.min)
                        for s in negative), value=value))
    outside = []
    for (var, d), (lo, hi) in sorted(graph.ranges.items()):
        n = run_time_size(DimRef(var, d), inputs)
        if n is not None and ((lo is not None and n < lo) or (hi is not None and n > hi)):
            outside.append(fact(FactKind.INDEX, "dim {d} of {input:quoted} is {n}, exported for {range}", d=d,
                                input=name(var), n=n, range=range_text(lo, hi)))
    if outside:
        held.append(fact(FactKind.INDEX, "a size outside the exported range ({outside})", outside=tuple(outside)))
    lines.append(fact(FactKind.INDEX, "usual cause, a zero-size dimension at run time: held: {empty:, }",
                      empty=empty) if empty else
                 fact(FactKind.INDEX, "usual cause, a zero-size dimension at run time: no (no model input has one)"))
    mins = tuple(fact(FactKind.INDEX, "{input:quoted} min {min:g}", input=name(s.arg), min=s.min) for s in ints)
    if negative:
        lines.append(fact(FactKind.INDEX, "usual cause, an index below zero: held: {mins:, }", mins=tuple(
            fact(FactKind.INDEX, "{input:quoted} min {min:g}", input=name(s.arg), min=s.min) for s in negative)))
    elif ints:
        lines.append(fact(FactKind.INDEX, "usual cause, an index below zero: no ({mins:, })", mins=mins))
    else:
        lines.append(fact(FactKind.INDEX, "usual cause, an index below zero: no (the kernel reads no integer tensor)"))
    ranges = tuple(fact(FactKind.INDEX, "dim {d} of {input:quoted} in {range}", d=d, input=name(v),
                        range=range_text(lo, hi)) for (v, d), (lo, hi) in sorted(graph.ranges.items()))
    lines.append(fact(FactKind.INDEX, "usual cause, a size outside the exported range: held: {outside}",
                      outside=tuple(outside)) if outside else
                 fact(FactKind.INDEX, "usual cause, a size outside the exported range: no ({ranges:, })",
                      ranges=ranges) if ranges else
                 fact(FactKind.INDEX, "usual cause, a size outside the exported range: no (no dynamic dimension)"))
    return held, lines


def range_text(lo: Optional[int], hi: Optional[int]) -> str:
    return f"{'' if lo is None else lo}..{'' if hi is None else hi}"


def rejected_dim(rejected: DimRejected, var: str, graph: Optional[WrapperGraph],
                 namer: Optional[Namer] = None) -> Fact:
    """An input check's refusal of one dimension, in the user's terms, naming the cause it is."""
    namer = namer or Namer(placeholders=tuple(graph.inputs) if graph else ())
    who: dict[str, Arg] = dict(dim=rejected.dim, input=namer.var(var), got=rejected.got)
    lo, hi = graph.ranges.get((var, rejected.dim), (None, None)) if graph else (None, None)
    zero = " (a zero-size dimension at run time)" if rejected.got == 0 else ""
    head = "dim {dim} of {input:quoted} is {got} at run time"
    narrowed = _narrowed(rejected, namer.exported.get((var, rejected.dim)), lo, hi)
    if narrowed is not None:
        return fact(FactKind.INPUT_REJECTED, head + ", inside the range the export allows ({exported}), but Inductor "
                    "narrowed it to {package} while compiling the package (its input check requires {expected}): a "
                    "specialisation by the compiler, not a size outside the exported range" + zero,
                    exported=narrowed[0], package=narrowed[1], expected=rejected.expected, **who)
    if rejected.expected.startswith("=="):
        return fact(FactKind.INPUT_REJECTED, head + ", but the package was compiled for a static size {size}" + zero,
                    size=rejected.expected[3:], **who)
    if lo is not None or hi is not None:
        return fact(FactKind.INPUT_REJECTED, head + ", outside its exported range {range}: a size outside the "
                    "exported range" + zero, range=range_text(lo, hi), **who)
    return fact(FactKind.INPUT_REJECTED, head + ", but the package requires {expected}: a size outside the exported "
                "range" + zero, expected=rejected.expected, **who)


def _narrowed(rejected: DimRejected, exported: Optional[tuple[Optional[int], Optional[int]]], lo: Optional[int],
              hi: Optional[int]) -> Optional[tuple[str, str]]:
    """(the export's range, the package's) when the package's check is narrower than what the export allowed and
    the rejected size lies inside the export's range: Inductor specialised the dimension while lowering."""
    if exported is None:
        return None
    n = rejected.expected.split()[-1]
    if rejected.expected.startswith("=="):
        lo = hi = int(n)
    elif rejected.expected.startswith(">=") and lo is None:
        lo = int(n)
    elif rejected.expected.startswith("<=") and hi is None:
        hi = int(n)
    ex_lo, ex_hi = exported
    inside = (ex_lo is None or rejected.got >= ex_lo) and (ex_hi is None or rejected.got <= ex_hi)
    narrower = (lo is not None and (ex_lo is None or lo > ex_lo)) or (hi is not None and (ex_hi is None or hi < ex_hi))
    if not inside or not narrower:
        return None
    show = lambda a, b: str(a) if a is not None and a == b else range_text(a, b)  # noqa: E731
    return show(ex_lo, ex_hi), show(lo, hi)
