"""Constants convicted: a parameter or buffer that holds NaN/Inf, or finite values outside the domain of an op
it feeds (a negative running_var under batch norm's rsqrt, a zero divisor), read from the package by the
in-process hook.

The level-2 printer never prints constants, so the walk ends at the kernel that reads a bad weight ("produced
bad values from good inputs"). The hook read every constant of the loaded package (child/hook/constants.py);
here a constant with non-finite values takes the conviction when the walk's kernel reads it, or when nothing
else was convicted for a NaN/Inf failure. Either way it is reported: a non-finite weight is a finding of its own.
A finite constant outside its op's domain takes the conviction from the walk's kernel that reads it: which op
it feeds, and as which argument, comes from the exported graph the hook saw compiled (ConstantName.uses), or,
for a package the run did not build, from the op words of the reading kernel's name.
"""
from __future__ import annotations

import dataclasses
import enum
import functools
import re
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Optional

from ..aoti import wrapper
from ..aoti.constants import ConstantValue
from ..aoti.hook_record import ConstantName, HookRecord
from ..failure import FailureKind
from ..verdict import Verdict
from .advice import next_steps
from .facts import Fact, FactKind, Namer, Subject, SubjectKind, fact, kernel
from .findings import Culprit, CulpritKind, Findings

MAX_WRAPPER_BYTES = 64 << 20


def gather(records: list[HookRecord]) -> tuple[list[ConstantValue], list[str], Optional[tuple[Optional[str], str]]]:
    """(the first reading of each constant, why some loads read none, the package it came from) over the hooked
    runs' loads. Every run loads the same weights; a later reading of a constant only repeats the first."""
    seen: dict[str, ConstantValue] = {}
    why: list[str] = []
    package = None
    for record in records:
        for e in record.events:
            read = e.constant_values
            if read is None:
                continue
            if read.skipped:
                why.append(read.skipped)
            for v in read.values:
                if v.placeholder not in seen or (seen[v.placeholder].skipped and not v.skipped):
                    seen[v.placeholder] = v
                    package = package or (e.path, read.so)
    return list(seen.values()), list(dict.fromkeys(why)), package


def package_graph(package: Optional[tuple[Optional[str], Optional[str]]]) -> Optional[wrapper.WrapperGraph]:
    """The launch graph of a loaded package's own wrapper source (a package this run did not compile)."""
    path, so = package or (None, None)
    if not path or not so:
        return None
    try:
        with zipfile.ZipFile(path) as z:
            info = z.getinfo(so[: -len(".so")] + ".cpp")
            if info.file_size > MAX_WRAPPER_BYTES:
                return None
            text = z.read(info).decode(errors="replace")
    except (OSError, KeyError, zipfile.BadZipFile):
        return None
    return wrapper.parse_wrapper(text, f"{path}:{info.filename}")


def readers(graph: Optional[wrapper.WrapperGraph], placeholder: str) -> list[str]:
    """The launches that take the constant, in launch order."""
    if graph is None:
        return []
    return list(dict.fromkeys(l.name for l in graph.launches
                              if any(graph.storage(a) == placeholder for a in l.args)))


def _readers(graph: Optional[wrapper.WrapperGraph], inlined: set[str], names: dict[str, ConstantName],
             v: ConstantValue) -> list[str]:
    """The launches that take the constant; for one Inductor inlined into its kernels (no wrapper name), the
    launches named after an op it feeds (`..._batch_norm_...` for a batch norm's running_var)."""
    if v.placeholder not in inlined:
        return readers(graph, v.placeholder)
    ops = {op for op, _ in names[v.fqn].uses} if v.fqn in names else set()
    return list(dict.fromkeys(l.name for l in (graph.launches if graph else ()) if any(op in l.name for op in ops)))


def _first_read(graph: Optional[wrapper.WrapperGraph], by: list[str]) -> int:
    order = {l.name: l.index for l in reversed(graph.launches)} if graph else {}
    return min((order[name] for name in by if name in order), default=1 << 30)


def describe(v: ConstantValue, kind: Optional[str], by: list[str], inlined: bool = False) -> Fact:
    """'parameter `proj.bias` (wrapper proj_bias) holds NaN (3 of 16 elements); read by aoti_torch_cpu_addmm_out'"""
    subject = Namer(constants={v.placeholder: v.fqn} if v.fqn else {}).constant(v.placeholder)
    template = "{kind} `{label}`" + (INLINED if inlined else " (wrapper {name})" if v.fqn else
                                     " (folded by Inductor)") + " holds {holds}; " + (
        "read by {by:, }" if by else "no launch in the wrapper reads it by name")
    return fact(FactKind.CONSTANT, template, kind=kind or "constant", label=v.label, name=v.placeholder,
                holds=v.holds(), by=tuple(by), constant=subject)


class Outside(enum.Enum):
    """What a domain-restricted argument must not hold."""
    NEGATIVE = "negative"
    ZERO = "zero"
    NOT_POSITIVE = "negative or zero"


@dataclass(frozen=True)
class Rule:
    """An op argument with a restricted domain: `op` is a word of the aten op's name (and of the fused kernel's
    name), `arg` the schema's argument name; `says` what the op computes of it."""
    op: str
    arg: str
    outside: Outside
    says: str


RULES = (
    Rule("batch_norm", "running_var", Outside.NEGATIVE, "rsqrt(running_var + eps) of batch_norm"),
    Rule("rsqrt", "self", Outside.NOT_POSITIVE, "rsqrt"),
    Rule("sqrt", "self", Outside.NEGATIVE, "sqrt"),
    Rule("log", "self", Outside.NOT_POSITIVE, "log"),
    Rule("log2", "self", Outside.NOT_POSITIVE, "log2"),
    Rule("log10", "self", Outside.NOT_POSITIVE, "log10"),
    Rule("pow", "self", Outside.NEGATIVE, "pow (a negative base to a fractional power is NaN)"),
    Rule("div", "other", Outside.ZERO, "division"),
    Rule("reciprocal", "self", Outside.ZERO, "reciprocal"),
)


@dataclass(frozen=True)
class Violation:
    """A constant whose finite values an op it feeds cannot take: the first offending element and how many."""
    value: ConstantValue
    rule: Rule
    index: tuple[int, ...]
    element: Optional[float]
    count: int
    seen_in: str  # "the exported graph" | "the kernel's name"


def _offending(v: ConstantValue, outside: Outside):
    """(count, first offending element) of what `outside` forbids, or None."""
    neg = (v.negative, v.first_negative) if v.negative and v.first_negative else None
    zero = (v.zero, v.first_zero) if v.zero and v.first_zero else None
    if outside is Outside.NEGATIVE:
        return neg
    if outside is Outside.ZERO:
        return zero
    if neg or zero:
        return (v.negative + v.zero, (neg or zero)[1])
    return None


def _op_matches(rule: Rule, op: str) -> bool:
    return op == rule.op or (rule.op == "batch_norm" and "batch_norm" in op)


def violations(v: ConstantValue, name: Optional[ConstantName], kernel: Optional[str]) -> list[Violation]:
    """The domain rules the constant breaks: by the ops the exported graph feeds it to where that is known (a
    package this run compiled), else by the reading kernel's name (`cpp_fused__native_batch_norm_..._1`) for a
    buffer named running_var."""
    found = []
    if name is not None and name.uses:
        for rule in RULES:
            if any(_op_matches(rule, op) and arg == rule.arg for op, arg in name.uses):
                found.append((rule, "the exported graph"))
    elif kernel:
        # Only batch norm's rule: its argument is told by the buffer's own name. A `log` in a kernel's name says
        # nothing of which operand it takes, and weights are often negative: that would convict innocent ones.
        words = set(re.split(r"_+", kernel))
        if "batch" in words and "norm" in words and v.label.rsplit(".", 1)[-1] == "running_var":
            found.append((RULES[0], "the kernel's name"))
    out = []
    for rule, seen_in in found:
        hit = _offending(v, rule.outside)
        if hit is not None:
            count, (index, element) = hit
            out.append(Violation(v, rule, index, element, count, seen_in))
    return out


INLINED = " (inlined into its kernels by Inductor: the package holds no copy; the exported value)"


def describe_violation(x: Violation, kind: Optional[str], by: list[str], inlined: bool = False) -> Fact:
    """'buffer `bn.running_var` (bn_running_var): element [5] = -0.3 (1 of 8 negative) feeds rsqrt(running_var +
    eps) of batch_norm, read by cpp_fused_...: outside the op's domain, so the kernel makes NaN from finite values'"""
    v = x.value
    subject = Namer(constants={v.placeholder: v.fqn} if v.fqn else {}).constant(v.placeholder)
    return fact(FactKind.CONSTANT, "{kind} {constant:quoted}" + (INLINED if inlined else "")
                + ": element [{index}] = {element:.6g} ({count} of {numel} {outside}) feeds {op} (per {seen_in}), "
                + ("read by {by:, }" if by else "read by no launch by name")
                + ": outside the op's domain, so finite inputs give NaN/Inf there",
                kind=kind or "constant", constant=subject, index=", ".join(map(str, x.index)),
                element=x.element if x.element is not None else float("nan"), count=x.count, numel=v.numel,
                outside=x.rule.outside.value, op=x.rule.says, seen_in=x.seen_in, by=tuple(by))


FOLDED = " is folded into the generated code (the package lists no constant of that name) and stale there"


def describe_stale(v: ConstantValue, kind: Optional[str], by: list[str], folded: bool = False) -> Fact:
    """'buffer `scale` (scale) is stale in the package: changed on the module after the build, 64 of 64 elements
    differ by up to 0.5 (first [0]: 1 packaged, 1.5 in the module now); read by cpp_fused_mul_0'. A constant
    Inductor folded into the code is said so: its readers are the launches named after an op it feeds."""
    x = v.stale
    subject = Namer(constants={v.placeholder: v.fqn} if v.fqn else {}).constant(v.placeholder)
    tail = "; " + ("read by {by:, }" if by else "no launch in the wrapper reads it by name")
    where = FOLDED if folded else " is stale in the package"
    if not x.differ:
        return fact(FactKind.CONSTANT, "{kind} {constant:quoted}" + where + ": the module's tensor has "
                    "shape {shape} now, the package's {was}" + tail, kind=kind or "constant", constant=subject,
                    shape=list(x.shape or ()), was=list(v.shape), by=tuple(by))
    return fact(FactKind.CONSTANT, "{kind} {constant:quoted}" + where + ": changed on the module after "
                "the build, {differ} of {numel} elements differ by up to {diff:.6g} (first [{index}]: {package:.6g} "
                "packaged, {module:.6g} in the module now)" + tail, kind=kind or "constant", constant=subject,
                differ=x.differ, numel=v.numel, diff=x.max_abs_diff if x.max_abs_diff is not None else float("nan"),
                index=", ".join(map(str, x.index)), package=_num(x.package), module=_num(x.module), by=tuple(by))


def _num(v: Optional[float]) -> float:
    return float("nan") if v is None else v


def convict_constants(out: Findings, records: list[HookRecord], graph: Optional[wrapper.WrapperGraph],
                      argv: list[str]) -> None:
    """Fills out.constants (report.json's `constants`) and, where a bad constant explains the failure, makes it
    the culprit. graph: the launch graph a run compiled, for when the loaded package's own wrapper cannot be read."""
    values, not_read, package = gather(records)
    names = {c.fqn: c for r in records for e in r.events for c in e.constants}
    read = {v.fqn for v in values}
    # A folded constant's staleness is measured at load against the value the compile kept (the hook's `folded`).
    folded = {fqn: x for r in records for e in r.events if e.constant_values for fqn, x in e.constant_values.folded}
    inlined = [dataclasses.replace(c.values, stale=folded.get(c.fqn)) for c in names.values()
               if c.values is not None and c.fqn not in read]
    values += inlined
    if not values and not not_read:
        return
    graph = package_graph(package) or graph  # what ran: the loaded package's own wrapper, where it is readable
    kinds = {fqn: c.kind for fqn, c in names.items()}
    read_by = functools.partial(_readers, graph, {v.placeholder for v in inlined}, names)
    # Launch order: with nothing else convicted, the bad constant read first is where the NaN enters.
    bad = sorted(((v, read_by(v)) for v in values if v.bad),
                 key=lambda vb: _first_read(graph, vb[1]))
    lines = [describe(v, kinds.get(v.fqn or ""), by, v in inlined) for v, by in bad]
    c = out.culprit
    walked = c.kernel if c is not None and c.kind == CulpritKind.KERNEL else None
    outside = _outside_domain(values, names, read_by, walked)
    outside_lines = [describe_violation(x, kinds.get(x.value.fqn or ""), by, x.value in inlined)
                     for x, by in outside]
    stale = [(v, read_by(v)) for v in values if v.stale is not None]
    stale_lines = [describe_stale(v, kinds.get(v.fqn or ""), by, v in inlined) for v, by in stale]
    index = index_operand(c, values, read_by, inlined, kinds)
    if c is not None:
        c.evidence.extend(maker_constants(c, values, kinds))
    row = lambda v, by, line, **more: v.to_json() | {"kind": kinds.get(v.fqn or ""), "readers": by,  # noqa: E731
                                                     "finding": line, **more}
    out.constants = {"read": sum(v.skipped is None for v in values if v not in inlined), "not_read": not_read,
                     "skipped": [{"wrapper": v.placeholder, "fqn": v.fqn, "why": v.skipped}
                                 for v in values if v.skipped][:20],
                     "nonfinite": [row(v, by, line) for (v, by), line in zip(bad, lines)],
                     "outside_domain": [row(x.value, by, line, op=x.rule.says, index=list(x.index), element=x.element)
                                        for (x, by), line in zip(outside, outside_lines)],
                     "stale": [row(v, by, line, folded=v in inlined) for (v, by), line in zip(stale, stale_lines)]}
    if (not bad and not outside and not stale and not index) or out.verdict is not Verdict.REPRODUCED:
        return
    suspects = [(v, by, line, CulpritKind.CONSTANT) for (v, by), line in zip(bad, lines)] + \
               [(x.value, by, line, CulpritKind.CONSTANT) for (x, by), line in zip(outside, outside_lines)] + \
               [(v, by, line, CulpritKind.FOLDED_CONSTANT if v in inlined else CulpritKind.STALE_CONSTANT)
                for (v, by), line in zip(stale, stale_lines)]
    if index is not None:  # the walk's kernel faulted on an index this constant took out of range
        suspects.insert(0, (*index, CulpritKind.CONSTANT))
    pick = 0 if index is not None else _pick(out, suspects, walked, bad, outside, stale)
    if pick is None:
        if c is not None and c.kind != CulpritKind.CONSTANT:
            c.evidence.extend(_also(line) for _, _, line, _ in suspects)
        return
    _convict(out, suspects, pick, argv, cuda=bool(graph and graph.cuda))


def _outside_domain(values: list[ConstantValue], names: dict[str, ConstantName],
                    read_by: Callable[[ConstantValue], list[str]],
                    walked: Optional[str]) -> list[tuple[Violation, list[str]]]:
    """Each constant outside an op's domain, with its readers. Judged for the walk's kernel where it reads the
    constant (its name's op words stand in for a graph the hook did not see), else for each reader, else only by the
    exported graph's uses."""
    outside = []
    for v in values:
        by = read_by(v)
        for kernel_name in ([walked] if walked in by else []) or by or [None]:
            found = violations(v, names.get(v.fqn or ""), kernel_name)
            if found:
                outside.append((found[0], by))
                break
    return outside


def _pick(out: Findings, suspects: list, walked: Optional[str], bad: list[tuple[ConstantValue, list[str]]],
          outside: list[tuple[Violation, list[str]]], stale: list[tuple[ConstantValue, list[str]]]) -> Optional[int]:
    """Which suspect the failure convicts, where no index fault names one: the one the walk's kernel reads; for a
    NaN/Inf with nothing pinned, the first non-finite constant (else one the exported graph feeds outside its domain);
    the constant the walk convicted; or, for a wrong or NaN output with nothing pinned, the first stale one."""
    c = out.culprit
    pick = None
    if walked is not None:
        pick = next((i for i, (_, by, _, _) in enumerate(suspects) if walked in by), None)
    elif (c is None or not c.pinned) and out.signature is not None and out.signature.kind == FailureKind.NAN_INF:
        pick = 0 if bad else next((i for i, (x, _) in enumerate(outside) if x.seen_in == "the exported graph"),
                                  None)
    if pick is None and c is not None and c.kind == CulpritKind.CONSTANT:
        # The walk convicted a constant already (eager saw the package read it otherwise): what is wrong with it.
        pick = next((i for i, (v, _, _, _) in enumerate(suspects) if v.placeholder == c.input_name), None)
    if pick is None and stale and (c is None or not c.pinned) and out.signature is not None and \
            out.signature.kind in (FailureKind.NAN_INF, FailureKind.PYTHON_EXCEPTION):
        # A wrong or NaN output and nothing pinned: the package computes from values the module no longer holds
        # (the eager reference, saved with the program at the build, holds the stale copy too and agrees).
        pick = len(bad) + len(outside)
    return pick


def _convict(out: Findings, suspects: list, pick: int, argv: list[str], cuda: bool) -> None:
    c = out.culprit
    v, _, line, kind = suspects[pick]
    # A folded constant has no wrapper name: the package lists none.
    wrapper_name = None if kind is CulpritKind.FOLDED_CONSTANT else v.placeholder
    convicted = Culprit(kind, input_name=wrapper_name, user_name=v.fqn, probes=c.probes if c else [], summary=line,
                        gaps=c.gaps if c else ())  # the walk's numeric gap still shows where the values went wrong
    convicted.evidence = [*(c.evidence if c else []), line, *(_also(x) for i, (_, _, x, _) in enumerate(suspects)
                                                               if i != pick)]
    out.culprit = convicted
    out.source, out.source_nodes = None, ""  # the reader's source is not the culprit's
    out.next_steps = next_steps(argv, out.signature, convicted, cuda=cuda)


def _facts(facts) -> Iterator[Fact]:
    for f in facts:
        if isinstance(f, Fact):
            yield f
            yield from _facts(f.values.values())


def index_operand(c: Optional[Culprit], values: list[ConstantValue], read_by, inlined: list[ConstantValue],
                  kinds: dict) -> Optional[tuple[ConstantValue, list[str], Fact]]:
    """(the constant, its readers, the line) that takes the walk's faulting kernel's computed index past its bound.
    bounds.index_sum named the index's addends with what level 2 printed of them; constants it never prints: a
    constant the kernel reads by name, or one Inductor inlined as a literal the index adds (its largest element).
    Adding the addends in that order, model inputs first, the constant whose value carries the sum past the bound
    is the operand that takes the index out of range."""
    told = next((f for f in _facts(c.evidence if c is not None and c.kind == CulpritKind.KERNEL else [])
                 if "addends" in f.values), None)
    if told is None or told.values["bound"] < 0:
        return None
    bound, total, parts = told.values["bound"], 0.0, []
    for who, scale, high in zip(told.values["addends"], told.values["scales"], told.values["highs"]):
        v = _addend_constant(who, values, inlined, read_by, c.kernel)
        element = v.first_max if v is not None and v.first_max else None
        if element is not None:
            high = element[1] * (scale if isinstance(who, Subject) else 1)  # a literal is the scaled value
            parts.append(fact(FactKind.CONSTANT, "{who:quoted}[{index}] = {value:g}", index=_index(element[0]),
                              value=high, who=_constant(v)))
        else:
            parts.append(fact(FactKind.CONSTANT, "{who:quoted} ≤ {high:g}", who=who, high=high)
                         if isinstance(who, Subject) else fact(FactKind.CONSTANT, "{n:g}", n=who))
        total += high
        if total >= bound:
            if element is None:
                return None  # an addend the walk printed takes it out: bounds.py has said so
            line = fact(FactKind.CONSTANT, "{kind} {constant:quoted}" + (INLINED if v in inlined else "") +
                        ": element [{index}] = {value:g} takes the index of {kernel} out of range: {parts: plus } "
                        "gives {total:g} ≥ {bound} ({target})", kind=kinds.get(v.fqn or "") or "constant",
                        constant=_constant(v), index=_index(element[0]), value=high, kernel=kernel(c.kernel),
                        parts=tuple(parts), total=total, bound=bound, target=told.values["target"])
            return v, read_by(v), line
    return None


def maker_constants(c: Culprit, values: list[ConstantValue], kinds: dict) -> list[Fact]:
    """What the constants an index's maker also read hold ('buffer `bounds` (bounds) holds 10..90 over 9 elements'),
    where bounds.py followed a computed index to the launch that made it: level 2 never prints constants, and the
    model input's values mean something only against them (an age of 91 above the last of bucketize's bounds)."""
    told = next((f for f in _facts(c.evidence) if "maker" in f.values and f.values.get("constants")), None)
    if told is None:
        return []
    by_name = {v.placeholder: v for v in values}
    return [fact(FactKind.CONSTANT, "{kind} {constant:quoted}, which {maker} also reads, holds {lo:g}..{hi:g} over "
                 "{numel} elements", kind=kinds.get(v.fqn or "") or "constant", constant=_constant(v),
                 maker=told.values["maker"], lo=v.min, hi=v.max, numel=v.numel)
            for who in told.values["constants"] if (v := by_name.get(who.name)) is not None and v.min is not None]


def _addend_constant(who, values: list[ConstantValue], inlined: list[ConstantValue], read_by,
                     kernel_name: str) -> Optional[ConstantValue]:
    """The constant an addend is: one the kernel reads by name, or the inlined constant whose largest element is
    the literal and that feeds an op of the kernel."""
    if isinstance(who, Subject):
        return next((v for v in values if who.kind == SubjectKind.CONSTANT and v.placeholder == who.name), None)
    return next((v for v in inlined if v.first_max and v.first_max[1] == who and kernel_name in read_by(v)), None)


def _constant(v: ConstantValue) -> Subject:
    return Namer(constants={v.placeholder: v.fqn} if v.fqn else {}).constant(v.placeholder)


def _index(index: tuple[int, ...]) -> str:
    return ", ".join(map(str, index))


def _also(line: Fact) -> Fact:
    return fact(FactKind.CONSTANT, "also: {line}", line=line)
