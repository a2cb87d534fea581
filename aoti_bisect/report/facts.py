"""Facts rendered to text: the one place a finding becomes a sentence (diagnose/facts.py says what they hold).

A subject is mentioned as the user's name beside the generated code's (`x` (arg1_1)), or by the generated
name alone where the user's is unknown or the same; `{x:phrase}` says what it is ("model input 1 (`x`,
wrapper arg1_1)", "constant `proj.weight` (wrapper proj_weight)").
"""
from __future__ import annotations

import math
import string
from collections.abc import Iterable
from types import MappingProxyType
from typing import TYPE_CHECKING, Union

from ..diagnose.facts import Fact, Subject, SubjectKind, Tensor
from . import record

if TYPE_CHECKING:
    from ..aoti.provenance import Origin


def mention(s: Subject) -> str:
    if s.user_name and s.user_name != s.name:
        return f"`{s.user_name}` ({s.name})"
    return s.name


def phrase(s: Subject) -> str:
    if s.kind == SubjectKind.INPUT:
        return (f"model input {s.index} (`{s.user_name}`, wrapper {s.name})" if s.user_name
                else f"model input {s.index} ({s.name})")
    if s.kind == SubjectKind.CONSTANT:
        return f"constant `{s.user_name}` (wrapper {s.name})" if s.user_name else f"constant {s.name}"
    return mention(s)


def quoted(s: Subject) -> str:
    """A name inside backticks, as the index-bound sentences write it: `x` (arg0_1), or `arg0_1`."""
    if s.user_name and s.user_name != s.name:
        return f"`{s.user_name}` ({s.name})"
    return f"`{s.name}`"


def _number(v: float) -> str:
    return "nan" if math.isnan(v) else f"{v:.6g}"


def tensor(t: Tensor) -> str:
    st = t.stats
    if st.scalar is not None:
        return f"{mention(t.subject)} = {st.scalar}"
    return (f"{mention(t.subject)}: {st.dtype} size {st.size} stride {st.stride} "
            f"min {_number(st.min)} max {_number(st.max)} mean {_number(st.mean)}")


class _Formatter(string.Formatter):
    def format_field(self, value: object, spec: str) -> str:
        return _value(value, spec)


def _value(value: object, spec: str = "") -> str:
    if isinstance(value, Subject):
        return phrase(value) if spec == "phrase" else quoted(value) if spec == "quoted" else mention(value)
    if isinstance(value, Tensor):
        return tensor(value)
    if isinstance(value, Fact):
        return render(value)
    if isinstance(value, tuple):
        return (spec or "; ").join(_value(v) for v in value) if spec not in ("phrase", "quoted") else \
            ", ".join(_value(v, spec) for v in value)
    return format(value, spec)


_FORMATTER = _Formatter()


def render(f: Union[Fact, str, None], origins: bool = True) -> str:
    """The fact's sentence; with `origins`, each kernel's lines in the user's code after it."""
    if f is None:
        return ""
    if isinstance(f, str):
        return f
    text = _FORMATTER.vformat(f.template, (), f.values)
    for name, origin in f.origins if origins else ():
        text += told(name, origin)
    return text


def told(kernel: str, origin: Union[Origin, record.Origin]) -> str:
    """What a sentence says after a kernel it names: the kernel's lines in the user's code (an Origin of
    aoti/provenance.py, or its record read back from report.json)."""
    return f" [{kernel}: {origin.describe()}]"


def render_all(facts: Iterable[Fact]) -> list[str]:
    return [render(f) for f in facts]


def fact_record(f: Fact) -> record.Fact:
    """report.json's structured form of a fact, beside its sentence."""
    return record.Fact(f.kind, render(f), tuple(_unique(f.subjects())), tuple(tensor_record(t) for t in f.tensors()),
                       MappingProxyType(dict(f.origins)) or None)


def tensor_record(t: Tensor) -> record.TensorStat:
    st = t.stats
    if st.scalar is not None:
        return record.TensorStat(st.kernel, st.when, st.arg, scalar=st.scalar, user_name=t.subject.user_name)
    shown = st.to_json()  # its statistics as the printer words them (a NaN as "nan")
    return record.TensorStat(st.kernel, st.when, st.arg, st.dtype, st.size, st.stride, st.numel, shown["min"],
                             shown["max"], shown["mean"], st.device, user_name=t.subject.user_name)


def _unique(subjects: list[Subject]) -> list[Subject]:
    return list(dict.fromkeys(subjects))
