"""Findings as data: each piece of evidence is a `Fact`, a kind and a sentence template whose names are typed
subjects (a kernel, a model input, a constant, a custom op, a buffer) carrying the user's names from the start.

Diagnosing code never renders text: it says which subjects a sentence is about, and report/facts.py renders
them (the user's name beside the wrapper's, a tensor's statistics, a kernel's source line). A change of
wording changes a template, never whether a name is shown.
"""
from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Optional, Union

from ..aoti.printer import TensorStats
from ..aoti.provenance import Origin


class FactKind(enum.StrEnum):
    """What a fact establishes; report.json's `culprit.facts[].kind`."""
    REPRODUCTION = "reproduction"  # how often, and how, the repro fails
    INPUT_REJECTED = "input_rejected"  # the runtime's input check refused a model input
    NAN_ASSERT = "nan_assert"  # TORCHINDUCTOR_NAN_ASSERTS fired on a buffer
    LAUNCH = "launch"  # the level-3 trace: which launch never finished, or that all did
    BAD_VALUE = "bad_value"  # a buffer, input or constant holds NaN/Inf or an out-of-range index
    CONVICTION = "conviction"  # a kernel made bad values from good inputs (or faulted on them)
    UNVERIFIED = "unverified"  # what the evidence could not see
    INDEX = "index"  # an index bound in the user's terms, and the guide's usual causes
    CHECKER = "checker"  # a memory checker's finding
    CRASH = "crash"  # where a crashed run faulted, by its own native stack or CUDA core dump
    FAKE = "fake"  # a custom op's fake function against the op
    EAGER = "eager"  # the package's tensors against eager
    CONSTANT = "constant"  # a constant's values
    LOAD = "load"  # the load doctor's experiments
    SOURCE = "source"  # where a kernel comes from in the user's code
    NOTE = "note"  # anything else the ladder says of a stage


class SubjectKind(enum.StrEnum):
    KERNEL = "kernel"
    INPUT = "input"  # a model input: the wrapper's argN_1
    CONSTANT = "constant"  # a parameter, buffer or folded constant
    OP = "op"  # a custom op, `ns::name`
    BUFFER = "buffer"  # an intermediate the wrapper allocates


@dataclass(frozen=True)
class Subject:
    kind: SubjectKind
    name: str  # the generated code's: arg1_1, proj_weight, buf0, cpp_fused_log_0, bisectlab::op
    user_name: Optional[str] = None  # the forward's parameter name, or the constant's FQN
    index: Optional[int] = None  # a model input's place in the call

    def to_json(self) -> dict:
        return {"kind": self.kind.value, "name": self.name, "user_name": self.user_name, "index": self.index}


@dataclass(frozen=True)
class Tensor:
    """A tensor (or scalar) the printer showed, and whose it is."""
    subject: Subject
    stats: TensorStats


Arg = Union[Subject, Tensor, "Fact", str, int, float, tuple]


@dataclass(frozen=True)
class Fact:
    """One sentence of evidence. `template` is str.format text over `args`: a Subject renders as its mention,
    `{x:phrase}` as "model input 1 (`x`, wrapper arg1_1)"; a Tensor as its statistics; a tuple of them joined
    by "; "; a nested Fact as its own sentence. Templates are constant text: everything variable is an arg."""
    kind: FactKind
    template: str
    args: tuple[tuple[str, Arg], ...] = ()
    # Kernels whose source line the report tells after this sentence (diagnose/source.py decides which).
    origins: tuple[tuple[str, Origin], ...] = ()

    @property
    def values(self) -> dict[str, Arg]:
        return dict(self.args)

    def subjects(self) -> list[Subject]:
        """Every subject the fact names, in order, nested facts' and tensors' included."""
        out: list[Subject] = []
        for _, value in self.args:
            for item in value if isinstance(value, tuple) else (value,):
                if isinstance(item, Subject):
                    out.append(item)
                elif isinstance(item, Tensor):
                    out.append(item.subject)
                elif isinstance(item, Fact):
                    out += item.subjects()
        return out

    def tensors(self) -> list[Tensor]:
        out: list[Tensor] = []
        for _, value in self.args:
            for item in value if isinstance(value, tuple) else (value,):
                if isinstance(item, Tensor):
                    out.append(item)
                elif isinstance(item, Fact):
                    out += item.tensors()
        return out

    def told(self, kernel: str, origin: Origin) -> Fact:
        return replace(self, origins=(*self.origins, (kernel, origin)))


def fact(kind: FactKind, template: str, /, **args: Arg) -> Fact:
    return Fact(kind, template, tuple(args.items()))


def note(text: str) -> Fact:
    """A sentence that names no subject: its text is all there is."""
    return Fact(FactKind.NOTE, "{text}", (("text", text),))


def joined(*parts: Optional[Fact], sep: str = "; ") -> Optional[Fact]:
    """Several facts said as one sentence (a stage's finding): the first one's kind."""
    kept = [p for p in parts if p is not None]
    if not kept:
        return None
    if len(kept) == 1:
        return kept[0]
    return Fact(kept[0].kind, sep.join(f"{{p{i}}}" for i in range(len(kept))),
                tuple((f"p{i}", p) for i, p in enumerate(kept)))


@dataclass
class Namer:
    """Subjects with the user's names, as far as the hooked runs so far have recorded them (aoti/hook_record.py
    Names): the ladder updates it as runs land, so every fact is made with the names known at that moment."""
    inputs: Mapping[str, str] = field(default_factory=dict)  # arg3_1 -> x
    constants: Mapping[str, str] = field(default_factory=dict)  # proj_weight -> proj.weight
    placeholders: tuple[str, ...] = ()  # the wrapper's model inputs in call order, where a graph is known
    # (arg3_1, dim) -> the range the export allowed ((n, n): static): a narrower package check is Inductor's
    exported: Mapping[tuple[str, int], tuple[Optional[int], Optional[int]]] = field(default_factory=dict)

    def input(self, index: int, name: str) -> Subject:
        return Subject(SubjectKind.INPUT, name, self.inputs.get(name), index)

    def constant(self, name: str) -> Subject:
        return Subject(SubjectKind.CONSTANT, name, self.constants.get(name))

    def var(self, name: str) -> Subject:
        """A tensor the generated code names, whatever it is."""
        if name in self.inputs or name in self.placeholders:
            index = self.placeholders.index(name) if name in self.placeholders else \
                list(self.inputs).index(name)
            return self.input(index, name)
        if name in self.constants:
            return self.constant(name)
        return Subject(SubjectKind.BUFFER, name)

    def tensor(self, stats: TensorStats) -> Tensor:
        return Tensor(self.var(stats.arg), stats)


def kernel(name: str) -> Subject:
    return Subject(SubjectKind.KERNEL, name)


def op(name: str) -> Subject:
    return Subject(SubjectKind.OP, name)
