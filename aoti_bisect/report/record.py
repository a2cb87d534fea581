"""report.json as typed, frozen records: the report is built as a `ReportRecord` (report/model.py), written from it
(`to_json`) and read back into it by report.md, `report`, the bundle and minify.

`ReportRecord.from_json` checks every field it takes as it takes it; a report.json that aoti-bisect did not
write (edited by hand, cut short, of a newer schema) raises Malformed, which says where, in one line. The
schema itself is in docs/report.md. Parts that only pass through to one reader (the compile counts, the
compile-ahead rows, the constants' rows, the CPU's vector ISAs) stay read-only JSON mappings: their reader
(aoti/hook_record.describe_counts, markdown's environment) indexes them and the loader checks them when it
renders once (model.Report.load)."""
from __future__ import annotations

import enum
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, Optional, TypeVar, Union

from .. import stats
from ..aoti.hook_record import CompileCounts, CompiledAhead
from ..aoti.provenance import Origin, SourceLine
from ..diagnose.facts import FactKind, Subject, SubjectKind
from ..diagnose.findings import Cause, Control, CulpritKind, EvidenceKind
from ..failure import FailureKind, Phase
from ..run.types import Signature
from ..verdict import Verdict

SCHEMA_VERSION = 1
TOOL = "aoti-bisect"
T = TypeVar("T")
E = TypeVar("E", bound=enum.Enum)
_REQUIRED = object()


class Malformed(ValueError):
    """A report.json field that is not what aoti-bisect writes; the message names the field."""


class NewerSchema(Malformed):
    """report.json of a newer aoti-bisect: its fields may mean what this one cannot know."""


def _name(kind: type | tuple[type, ...]) -> str:
    if isinstance(kind, tuple):
        return "number"
    return {dict: "object", list: "list", str: "string", int: "int", bool: "bool"}.get(kind, str(kind))


def _take(data: Mapping, key: str, kind: Any, where: str, default: Any = _REQUIRED) -> Any:
    """data[key] of type `kind`; `default` where the key is missing or null (no default: a required field)."""
    value = data.get(key)
    if value is None:
        if default is _REQUIRED:
            raise Malformed(f"{where}{key} is missing")
        return default
    # A JSON true is an int to isinstance; a count or a number is never a bool.
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise Malformed(f"{where}{key} is {type(value).__name__}, not {_name(kind)}")
    return value


def _object(data: Mapping, key: str, where: str, required: bool = False) -> Optional[Mapping]:
    return _take(data, key, dict, where, _REQUIRED if required else None)


def _each(data: Mapping, key: str, where: str, read: Callable[[Any, str], T], required: bool = False) -> tuple[T, ...]:
    """A list field, each item read by `read(item, "key[i].")`; missing or null is empty unless required."""
    items = _take(data, key, list, where, _REQUIRED if required else [])
    return tuple(read(item, f"{where}{key}[{i}].") for i, item in enumerate(items))


def _maybe(data: Mapping, key: str, where: str, read: Callable[[Mapping, str], T]) -> Optional[T]:
    """An object field read by `read(value, "key.")`; None where it is missing or null."""
    value = _object(data, key, where)
    return None if value is None else read(value, f"{where}{key}.")


def _string(item: Any, at: str) -> str:
    if not isinstance(item, str):
        raise Malformed(f"{at.rstrip('.')} is {type(item).__name__}, not string")
    return item


def _strings(data: Mapping, key: str, where: str) -> tuple[str, ...]:
    return _each(data, key, where, _string)


def _string_list(item: Any, at: str) -> tuple[str, ...]:
    """An item that is itself a list of strings (an inspection probe's kernels)."""
    if not isinstance(item, list):
        raise Malformed(f"{at.rstrip('.')} is {type(item).__name__}, not list")
    return tuple(_string(x, f"{at.rstrip('.')}[{i}]") for i, x in enumerate(item))


def _mapping(item: Any, at: str) -> Mapping:
    if not isinstance(item, dict):
        raise Malformed(f"{at.rstrip('.')} is {type(item).__name__}, not object")
    return MappingProxyType(item)


def _enum(kind: type[E], value: str, where: str) -> E:
    try:
        return kind(value)
    except ValueError:
        raise Malformed(f"{where} {value!r} is none of {', '.join(e.value for e in kind)}") from None


JSONValue = Union[str, int, float, bool, None, Mapping[str, "JSONValue"], tuple["JSONValue", ...]]


def to_json(value: Any) -> Any:
    """A record's part as json.dumps takes it: a frozen mapping a dict, a tuple a list, an enum its word."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Mapping):
        return {k: to_json(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [to_json(v) for v in value]
    return value.to_json() if hasattr(value, "to_json") else value


def frozen(value: Any) -> Any:
    """JSON as a record holds it: an object a read-only mapping, a list a tuple, all the way down."""
    if isinstance(value, Mapping):
        return MappingProxyType({k: frozen(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(frozen(v) for v in value)
    return value


def _flat(record: Any) -> dict:
    """A record of plain fields as its JSON object, keys in field order."""
    return {f.name: to_json(getattr(record, f.name)) for f in fields(record)}


@dataclass(frozen=True)
class Rate:
    runs: int
    failures: int
    rate: float
    ci95: tuple[float, float]
    could_not_run: bool = False  # only the baseline's: no run could run here

    @classmethod
    def of(cls, rate: stats.Rate, could_not_run: bool = False) -> Rate:
        lo, hi = rate.ci95
        return cls(rate.runs, rate.failures, round(rate.value, 4), (round(lo, 4), round(hi, 4)), could_not_run)

    @classmethod
    def from_json(cls, d: Mapping, where: str) -> Rate:
        ci95 = _take(d, "ci95", list, where)
        if len(ci95) != 2 or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in ci95):
            raise Malformed(f"{where}ci95 is not a list of 2 numbers")
        return cls(_take(d, "runs", int, where), _take(d, "failures", int, where),
                   _take(d, "rate", (int, float), where), (ci95[0], ci95[1]),
                   _take(d, "could_not_run", bool, where, False))

    def to_json(self) -> dict:
        return {"runs": self.runs, "failures": self.failures, "rate": self.rate, "ci95": list(self.ci95)}


def _signature(d: Mapping, where: str) -> Signature:
    """The baseline's dominant failure (run/classify.py's record, read back)."""
    return Signature(_enum(FailureKind, _take(d, "kind", str, where), f"{where}kind"),
                     _enum(Phase, _take(d, "phase", str, where), f"{where}phase"),
                     _take(d, "message", str, where, ""), _take(d, "kernel", str, where, None),
                     _take(d, "fingerprint", str, where, ""))


@dataclass(frozen=True)
class Excerpt:
    log: str
    bytes: int
    key_lines: tuple[str, ...]
    head: str
    tail: str

    @classmethod
    def from_json(cls, d: Mapping, where: str) -> Excerpt:
        return cls(_take(d, "log", str, where), _take(d, "bytes", int, where), _strings(d, "key_lines", where),
                   _take(d, "head", str, where), _take(d, "tail", str, where))

    def to_json(self) -> dict:
        return _flat(self)


def _source_line(d: Any, where: str) -> SourceLine:
    d = _mapping(d, where)  # `where` (file:line) is derived from the path and line
    return SourceLine(_take(d, "path", str, where), _take(d, "line", int, where), _take(d, "code", str, where, ""))


def _origin(d: Any, where: str) -> Origin:
    """The user's lines a kernel came from, or its FX nodes where no line was recorded (aoti/provenance.py)."""
    d = _mapping(d, where)
    return Origin(_each(d, "lines", where, _source_line), _strings(d, "nodes", where), _take(d, "how", str, where, ""))


def _origins(d: Mapping, key: str, where: str) -> Mapping[str, Origin]:
    """Each kernel's origin by its name."""
    found = _object(d, key, where) or {}
    return MappingProxyType({name: _origin(o, f"{where}{key}.{name}.") for name, o in found.items()})


@dataclass(frozen=True)
class TensorStat:
    """A tensor the printer or the hook saw around a kernel's launch (aoti/printer.py's TensorStats, with the kernel
    and the user's name); statistics are shown as recorded. A scalar has `scalar` and no statistics."""
    kernel: Optional[str]
    when: str
    arg: str
    dtype: Optional[str] = None
    size: JSONValue = ""
    stride: Optional[str] = None
    numel: Optional[int] = None
    min: JSONValue = None
    max: JSONValue = None
    mean: JSONValue = None
    device: Optional[str] = None
    scalar: Optional[int] = None
    user_name: Optional[str] = None

    @property
    def key(self) -> tuple[Optional[str], str, str]:
        """Which tensor it is, whatever it held: (kernel, arg, when)."""
        return self.kernel, self.arg, self.when

    @classmethod
    def from_json(cls, d: Any, where: str) -> TensorStat:
        d = _mapping(d, where)
        return cls(_take(d, "kernel", str, where, None), _take(d, "when", str, where, ""),
                   _take(d, "arg", str, where, "?"), _take(d, "dtype", str, where, None), frozen(d.get("size", "")),
                   _take(d, "stride", str, where, None), _take(d, "numel", int, where, None), frozen(d.get("min")),
                   frozen(d.get("max")), frozen(d.get("mean")), _take(d, "device", str, where, None),
                   _take(d, "scalar", int, where, None), _take(d, "user_name", str, where, None))

    def to_json(self) -> dict:
        shown = ({"scalar": self.scalar} if self.scalar is not None else
                 {"dtype": self.dtype, "size": to_json(self.size), "stride": self.stride, "numel": self.numel,
                  "min": self.min, "max": self.max, "mean": self.mean, "device": self.device})
        return {"arg": self.arg, "when": self.when, **shown, "kernel": self.kernel,
                **({"user_name": self.user_name} if self.user_name else {})}


@dataclass(frozen=True)
class LedgerEntry:
    """One entry of the evidence ledger (diagnose/judge.py): what a run of a stage saw, and what it names."""
    kind: EvidenceKind
    stage: str
    run: str
    names: Optional[str]
    text: str

    @classmethod
    def from_json(cls, d: Any, where: str) -> LedgerEntry:
        d = _mapping(d, where)
        return cls(_enum(EvidenceKind, _take(d, "kind", str, where), f"{where}kind"), _take(d, "stage", str, where, ""),
                   _take(d, "run", str, where, ""),
                   _take(d, "names", str, where, None), _take(d, "text", str, where, ""))

    def to_json(self) -> dict:
        return _flat(self)


@dataclass(frozen=True)
class Gap:
    """One launch's output against eager, and both against float64 (diagnose/findings.py's Gap)."""
    launch: int
    kernel: str
    tensor: str
    state: str  # agrees | differs | unjudged
    node: Optional[str]
    max_abs: Optional[float]
    max_rel: Optional[float]
    f64: Optional[float]
    eager_f64: Optional[float]
    rtol: Optional[float]
    atol: Optional[float]
    ulp: Optional[float] = None  # the gap in units of the last place of the larger value in the tensor's dtype
    cosine: Optional[float] = None

    @classmethod
    def from_json(cls, d: Any, where: str) -> Gap:
        d = _mapping(d, where)
        number = (int, float)
        return cls(_take(d, "launch", int, where), _take(d, "kernel", str, where), _take(d, "tensor", str, where),
                   _take(d, "state", str, where), _take(d, "node", str, where, None),
                   *(_take(d, key, number, where, None) for key in ("max_abs", "max_rel", "f64", "eager_f64", "rtol",
                                                                     "atol", "ulp", "cosine")))

    def to_json(self) -> dict:
        return _flat(self)


def _subject(d: Any, where: str) -> Subject:
    d = _mapping(d, where)
    return Subject(_enum(SubjectKind, _take(d, "kind", str, where), f"{where}kind"), _take(d, "name", str, where),
                   _take(d, "user_name", str, where, None), _take(d, "index", int, where, None))


@dataclass(frozen=True)
class Fact:
    """A sentence of the evidence as data (report/facts.py's fact_record): its kind, its sentence, what it is about,
    the tensors it shows and the user's lines of each kernel it names."""
    kind: FactKind
    text: str
    subjects: tuple[Subject, ...]
    tensors: tuple[TensorStat, ...]
    source: Optional[Mapping[str, Origin]]

    @property
    def shown(self) -> tuple[tuple[Optional[str], str, str], ...]:
        """Which tensors it shows (TensorStat.key of each)."""
        return tuple(t.key for t in self.tensors)

    @classmethod
    def from_json(cls, d: Any, where: str) -> Fact:
        d = _mapping(d, where)
        return cls(_enum(FactKind, _take(d, "kind", str, where), f"{where}kind"), _take(d, "text", str, where, ""),
                   _each(d, "subjects", where, _subject), _each(d, "tensors", where, TensorStat.from_json),
                   _origins(d, "source", where) if d.get("source") is not None else None)

    def to_json(self) -> dict:
        return _flat(self)


@dataclass(frozen=True)
class KernelSource:
    path: str
    excerpt: str

    @classmethod
    def from_json(cls, d: Mapping, where: str) -> KernelSource:
        return cls(_take(d, "path", str, where), _take(d, "excerpt", str, where))

    def to_json(self) -> dict:
        return _flat(self)


class GapCause(enum.StrEnum):
    """What a precision question's gap comes from, as its control recompile told it (culprit.precision.cause)."""
    EAGER_ROUNDING = "eager_rounding"  # gone with the package built rounding as eager does
    TF32 = "tf32"  # gone with the package built with TF32 matmuls off
    MISCOMPILE = "miscompile"  # still there without TF32: a kernel is convicted from the control's own walk
    UNKNOWN = "unknown"  # the control did not run, failed otherwise, or left the gap without naming it


@dataclass(frozen=True)
class Precision:
    """A gap rounding may explain, and what its control recompile told of it (diagnose/stages/precision.py): the
    cause (`cause`), the source of rounding the control removed (`tested`) and what the control showed (`control`;
    None where it did not run)."""
    cause: GapCause
    tested: Cause
    control: Optional[Control] = None

    @classmethod
    def told(cls, tested: Cause, control: Optional[Control], kind: Optional[CulpritKind]) -> Precision:
        """The cause a control names: the source it removed where the gap went with it; a miscompile where a kernel
        is convicted from the control's own walk; else unknown (a low-precision gap the control did not clear still
        has float64 on the package's side, which convicts nothing)."""
        if control is Control.PASSES:
            return cls(GapCause(tested.value), tested, control)
        if control is Control.STILL_FAILS and kind is CulpritKind.KERNEL:
            return cls(GapCause.MISCOMPILE, tested, control)
        return cls(GapCause.UNKNOWN, tested, control)

    @classmethod
    def from_json(cls, d: Mapping, where: str) -> Precision:
        control = _take(d, "control", str, where, None)
        return cls(_enum(GapCause, _take(d, "cause", str, where), f"{where}cause"),
                   _enum(Cause, _take(d, "tested", str, where), f"{where}tested"),
                   None if control is None else _enum(Control, control, f"{where}control"))

    def to_json(self) -> dict:
        return _flat(self)


_NO_CULPRIT: dict[str, Any] = {"kind": None, "kernel": None, "evidence": []}


@dataclass(frozen=True)
class Culprit:
    kind: Optional[CulpritKind] = None  # None before localisation
    kernel: Optional[str] = None
    summary: str = ""  # the one line that convicts, with the culprit's source lines
    conviction: str = ""  # the same line without them (the first screen names the source once)
    input_index: Optional[int] = None
    input_name: Optional[str] = None
    user_name: Optional[str] = None
    evidence: tuple[str, ...] = ()
    facts: tuple[Fact, ...] = ()  # the evidence as data, one per sentence (empty in a report that has none)
    stats: tuple[TensorStat, ...] = ()
    probes: tuple[tuple[str, ...], ...] = ()  # the kernels each inspection probe printed
    op: Optional[str] = None
    convicted_by: tuple[LedgerEntry, ...] = ()  # the ledger's entries the judge convicted from, each with its run
    gaps: tuple[Gap, ...] = ()  # a wrong value's walk against eager, launch by launch
    origin: Optional[Origin] = None
    kernel_origins: Mapping[str, Origin] = field(default_factory=lambda: MappingProxyType({}))
    source: Optional[KernelSource] = None
    source_nodes: Optional[str] = None
    precision: Optional[Precision] = None  # where rounding may explain the gap: its cause, as the control told it

    @classmethod
    def from_json(cls, d: Mapping, where: str) -> Culprit:
        kind = _take(d, "kind", str, where, None)
        summary, nodes = _take(d, "summary", str, where, ""), d.get("source_nodes")
        return cls(_enum(CulpritKind, kind, f"{where}kind") if kind is not None else None,
                   _take(d, "kernel", str, where, None), summary, _take(d, "conviction", str, where, summary),
                   _take(d, "input_index", int, where, None), _take(d, "input_name", str, where, None),
                   _take(d, "user_name", str, where, None), _strings(d, "evidence", where),
                   _each(d, "facts", where, Fact.from_json), _each(d, "stats", where, TensorStat.from_json),
                   _each(d, "probes", where, _string_list), _take(d, "op", str, where, None),
                   _each(d, "convicted_by", where, LedgerEntry.from_json), _each(d, "gaps", where, Gap.from_json),
                   _maybe(d, "origin", where, _origin), _origins(d, "kernel_origins", where),
                   _maybe(d, "source", where, KernelSource.from_json),
                   None if nodes is None else str(nodes), _maybe(d, "precision", where, Precision.from_json))

    def to_json(self) -> dict:
        return _flat(self) if self.kind is not None else dict(_NO_CULPRIT)

    def who(self) -> str:
        """The culprit in a few words: a kernel, or a model input / constant by the user's name where known."""
        name = self.input_name
        if self.user_name:
            name = f"`{self.user_name}`" + (f", wrapper {name}" if name else "")  # a folded constant has none
        if self.kind is CulpritKind.MODEL_INPUT:  # before its kernel: an index computed from it faulted there
            return f"model input {self.input_index} ({name})"
        return self.kernel or self.op or name or "-"


@dataclass(frozen=True)
class Package:
    """One distinct package a hooked stage compiled or loaded (aoti/hook_record.py's package_rows)."""
    stage: str
    action: str
    path: Optional[str]
    sha256: Optional[str]
    built_here: bool
    runs: int
    raised: int = 0
    unfinished: int = 0  # calls the process never returned from (it died inside)
    existed_before: int = 0
    redirect: Optional[str] = None  # how the hook served it (aoti/hook_record.py's PackageEvent.redirect)
    requested_path: Optional[str] = None

    @classmethod
    def from_json(cls, d: Any, where: str) -> Package:
        d = _mapping(d, where)
        return cls(_take(d, "stage", str, where), _take(d, "action", str, where), _take(d, "path", str, where, None),
                   _take(d, "sha256", str, where, None), _take(d, "built_here", bool, where, False),
                   _take(d, "runs", int, where), _take(d, "raised", int, where, 0),
                   _take(d, "unfinished", int, where, 0), _take(d, "existed_before", int, where, 0),
                   _take(d, "redirect", str, where, None), _take(d, "requested_path", str, where, None))

    def to_json(self) -> dict:
        return _flat(self)


@dataclass(frozen=True)
class Constants:
    """The constants the hooked runs' loads read (diagnose/constants.py): each group's rows as written, each
    with its `finding`, the report's line for it."""
    read: int
    not_read: tuple[str, ...]
    skipped: tuple[Mapping[str, JSONValue], ...]
    nonfinite: tuple[Mapping[str, JSONValue], ...]
    outside_domain: tuple[Mapping[str, JSONValue], ...]
    stale: tuple[Mapping[str, JSONValue], ...]

    @property
    def findings(self) -> tuple[str, ...]:
        """One line per non-finite, out-of-domain or stale constant."""
        return tuple(str(row["finding"]) for rows in (self.nonfinite, self.outside_domain, self.stale) for row in rows)

    @classmethod
    def from_json(cls, d: Mapping, where: str) -> Constants:
        def row(item: Any, at: str) -> Mapping:
            _take(_mapping(item, at), "finding", str, at)
            return frozen(item)
        return cls(_take(d, "read", int, where), _strings(d, "not_read", where),
                   _each(d, "skipped", where, lambda item, at: frozen(_mapping(item, at))),
                   *(_each(d, key, where, row) for key in ("nonfinite", "outside_domain", "stale")))

    def to_json(self) -> dict:
        return _flat(self)


@dataclass(frozen=True)
class Environment:
    """The repro's interpreter as the probe saw it (child/probe.py, run/probe.py); every field may be missing."""
    python: Optional[str] = None
    executable: Optional[str] = None
    platform: Optional[str] = None
    torch: Optional[str] = None
    torch_git: Optional[str] = None
    cuda_runtime: Optional[str] = None  # the CUDA torch was built with; None for a CPU build
    gpu: Optional[str] = None
    cxx: Optional[str] = None
    cxx_version: Optional[str] = None
    libstdcxx: Optional[str] = None
    collect_env: Optional[str] = None
    torch_error: Optional[str] = None
    probe_error: Optional[str] = None
    collect_env_error: Optional[str] = None
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    vec_isa: Optional[Mapping[str, JSONValue]] = None
    bytecode_cache: Optional[str] = None
    gpu_free_mib: Optional[str] = None  # the first GPU's free memory when the probe ran
    slots: Optional[Mapping[str, JSONValue]] = None  # how many runs went at once, and why (run/slots.py)

    @property
    def present(self) -> bool:
        return any(vars(self).values())

    @property
    def os(self) -> Optional[str]:
        """The OS as collect_env names it ("Debian GNU/Linux 12 (bookworm) (x86_64)"), else Python's platform."""
        found = re.search(r"^OS: (.+)$", self.collect_env or "", re.M)
        return found.group(1).strip() if found else self.platform

    @classmethod
    def from_json(cls, d: Mapping, where: str) -> Environment:
        vec_isa, slots = (_object(d, key, where) for key in ("vec_isa", "slots"))
        texts = [f.name for f in fields(cls) if f.name not in ("env", "vec_isa", "slots")]
        return cls(**{key: _printable(d.get(key)) for key in texts}, env=frozen(_object(d, "env", where) or {}),
                   vec_isa=frozen(vec_isa) if vec_isa is not None else None,
                   slots=frozen(slots) if slots is not None else None)

    def to_json(self) -> dict:
        return _flat(self)


def _printable(value: Any) -> Optional[str]:
    """An environment field as text: the probe writes strings, an older one a GPU as a list or an object."""
    return None if value is None or value == "" else str(value)


@dataclass(frozen=True)
class Stage:
    name: str
    env: Mapping[str, str]
    recompiled: bool
    runs: int
    failures: int
    rate: Optional[Rate]
    finding: str
    fact: Optional[Fact]  # the finding as data
    skipped: Optional[str]
    logs: tuple[str, ...]
    rerun: tuple[str, ...]  # the first run's rerun.sh
    failing_log: Optional[str]
    signatures: Mapping[str, int]  # how many failing runs failed so, by failure kind
    tool: Optional[str]  # the memory checker a memcheck stage ran under
    compiles: Optional[CompileCounts]  # how its runs came by their packages
    rerun_script: Optional[str]  # the first run's rerun.sh's text: the exact command
    excerpt: Optional[Excerpt]

    @classmethod
    def from_json(cls, d: Any, where: str) -> Stage:
        d = _mapping(d, where)
        return cls(_take(d, "name", str, where), frozen(_take(d, "env", dict, where)),
                   _take(d, "recompiled", bool, where), _take(d, "runs", int, where),
                   _take(d, "failures", int, where), _maybe(d, "rate", where, Rate.from_json),
                   _take(d, "finding", str, where), _maybe(d, "fact", where, Fact.from_json),
                   _take(d, "skipped", str, where, None), _strings(d, "logs", where), _strings(d, "rerun", where),
                   _take(d, "failing_log", str, where, None), frozen(_object(d, "signatures", where) or {}),
                   _take(d, "tool", str, where, None), _maybe(d, "compiles", where, _compile_counts),
                   _take(d, "rerun_script", str, where, None), _maybe(d, "excerpt", where, Excerpt.from_json))

    def to_json(self) -> dict:
        return _flat(self)


def _compile_counts(d: Mapping, where: str) -> CompileCounts:
    reasons = _object(d, "reasons", where) or {}
    for why, n in reasons.items():
        if not isinstance(n, int) or isinstance(n, bool):
            raise Malformed(f"{where}reasons.{why} is {type(n).__name__}, not int")
    return CompileCounts(_take(d, "stage", str, where), _take(d, "hooked", bool, where), _take(d, "runs", int, where),
                         _take(d, "compiled", int, where, 0), _take(d, "reused", int, where, 0),
                         MappingProxyType(dict(reasons)), _take(d, "unhooked", int, where, 0),
                         _take(d, "warm", int, where, 0), _strings(d, "cold_because", where))


def _compiled_ahead(d: Any, where: str) -> CompiledAhead:
    d = _mapping(d, where)
    return CompiledAhead(_compile_counts(d, where), _take(d, "seconds", (int, float), where),
                         _take(d, "ended", str, where), _take(d, "flag_set", str, where, None))


@dataclass(frozen=True)
class Minified:
    """What report.md says of minify/minify.json, minify's record (minify/__init__.py writes it); `reduced` is
    None where minify wrote no repro (it said why in `message`)."""
    message: str
    repro: Optional[str]
    reduced: Optional[Reduction]

    @classmethod
    def from_json(cls, d: Any) -> Minified:
        d = _mapping(d, "minify.json ")
        repro = _take(d, "repro", str, "", None)
        reduced = Reduction.from_json(d) if "nodes_after" in d else None
        return cls(_take(d, "message", str, "", ""), repro, reduced)


@dataclass(frozen=True)
class Reduction:
    nodes: tuple[Optional[int], int]
    ops: tuple[str, ...]
    lines: tuple[Optional[int], Optional[int]]
    candidates: Optional[int]
    seconds: Optional[float]
    verified: bool

    @classmethod
    def from_json(cls, d: Mapping) -> Reduction:
        return cls((_take(d, "nodes_before", int, "", None), _take(d, "nodes_after", int, "")),
                   _strings(d, "ops_after", ""),
                   (_take(d, "lines_before", int, "", None), _take(d, "lines_after", int, "", None)),
                   _take(d, "candidates", int, "", None), _take(d, "seconds", (int, float), "", None),
                   _take(d, "verified", bool, "", False))


# report.json's keys in the order a reader meets them.
_ORDER = ("schema_version", "tool", "tool_version", "created", "command", "verdict", "complete", "exit_reason",
          "summary", "signature", "reproduction", "stages", "culprit", "masked", "verdict_s", "verdict_runs", "ledger",
          "packages", "constants", "reuse", "compiled_ahead", "next_steps", "minify_step", "environment", "run_dir",
          "paths_redacted")


@dataclass(frozen=True)
class ReportRecord:
    """report.json: built as this record from the findings (report/model.py), written from it (`to_json`) and read
    back into it (`from_json`)."""
    schema_version: int
    tool_version: Optional[str]
    created: Optional[str]  # when the report was made, ISO 8601 in UTC
    command: tuple[str, ...]
    verdict: Verdict
    complete: bool
    summary: str
    signature: Optional[Signature]
    reproduction: Rate
    stages: tuple[Stage, ...]
    culprit: Culprit
    masked: Optional[str]
    verdict_s: Optional[float]
    verdict_runs: Optional[int]
    ledger: tuple[LedgerEntry, ...]  # every run's evidence, whichever stage ran it
    packages: tuple[Package, ...]
    constants: Optional[Constants]
    reuse: Optional[str]
    compiled_ahead: tuple[CompiledAhead, ...]  # each compile-only run
    next_steps: tuple[str, ...]
    environment: Environment
    run_dir: Optional[str]
    paths_redacted: bool  # --redact-paths: what is added to the report later is redacted the same way
    # The index in next_steps of the step that asks for minify (`aoti-bisect minify RUN_DIR`): the first screen's
    # next command until minify has run, then the minified repro's step. None where no step asks for it, and in a
    # report.json written before the field (its steps are listed as they are).
    minify_step: Optional[int] = None

    @property
    def exit_reason(self) -> str:
        """The finer reason behind the exit code: not_reproduced, reproduced, inconclusive (some runs could not
        run, none failed), infra (no run could run here: torch not importable, no GPU), script_broken (the repro
        fails before it tests anything: a syntax or import error), interrupted."""
        if not self.complete:
            return "interrupted"
        if self.verdict is not Verdict.ERROR:
            return self.verdict.value
        broken = self.signature is not None and self.signature.kind is FailureKind.SCRIPT_ERROR
        return "script_broken" if broken else "infra"

    @classmethod
    def from_json(cls, d: Any) -> ReportRecord:
        if not isinstance(d, dict):
            raise Malformed(f"the report is {type(d).__name__}, not object")
        version = _take(d, "schema_version", int, "")
        if version > SCHEMA_VERSION:
            raise NewerSchema(f"schema_version {version}, newer than this aoti-bisect reads ({SCHEMA_VERSION}): "
                              "upgrade aoti-bisect")
        verdict_s = _take(d, "verdict_s", (int, float), "", None)
        return cls(version, _take(d, "tool_version", str, "", None), _take(d, "created", str, "", None),
                   _strings(d, "command", ""), _enum(Verdict, _take(d, "verdict", str, ""), "verdict"),
                   _take(d, "complete", bool, "", True), _take(d, "summary", str, "", ""),
                   _maybe(d, "signature", "", _signature),
                   Rate.from_json(_object(d, "reproduction", "", required=True), "reproduction."),
                   _each(d, "stages", "", Stage.from_json, required=True),
                   Culprit.from_json(_object(d, "culprit", "") or {}, "culprit."), _take(d, "masked", str, "", None),
                   verdict_s if verdict_s is None or math.isfinite(verdict_s) else None,
                   _take(d, "verdict_runs", int, "", None), _each(d, "ledger", "", LedgerEntry.from_json),
                   _each(d, "packages", "", Package.from_json),
                   _maybe(d, "constants", "", Constants.from_json), _take(d, "reuse", str, "", None),
                   _each(d, "compiled_ahead", "", _compiled_ahead),
                   _strings(d, "next_steps", ""),
                   Environment.from_json(_object(d, "environment", "") or {}, "environment."),
                   _take(d, "run_dir", str, "", None), _take(d, "paths_redacted", bool, "", False),
                   _take(d, "minify_step", int, "", None))

    def to_json(self) -> dict:
        """report.json, keys in the order a reader meets them."""
        body = {**_flat(self), "tool": TOOL, "exit_reason": self.exit_reason}
        body["reproduction"]["could_not_run"] = self.reproduction.could_not_run
        return {key: body[key] for key in _ORDER}

    @property
    def device(self) -> str:
        """Where the failing program ran: the devices of the tensors the runs saw, else what the probe says."""
        seen = sorted({s.device.split(":")[0] for s in self.culprit.stats if s.device})
        env = self.environment
        gpu = f" ({env.gpu})" if env.gpu else ""
        if seen:
            return ", ".join(d + (gpu if d == "cuda" else "") for d in seen)
        if env.torch and not env.cuda_runtime:  # a CPU-only torch
            return "cpu"
        return f"cuda{gpu}" if env.gpu else "not recorded"
