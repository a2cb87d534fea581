"""report.json as typed, frozen records: what report.md, `report`, the bundle and minify read.

`ReportRecord.from_json` checks every field it takes as it takes it; a report.json that aoti-bisect did not
write (edited by hand, cut short, of a newer schema) raises Malformed, which says where, in one line. The
schema itself is in docs/report.md. Parts that only pass through to one reader (the compile counts, the
compile-ahead rows, the CPU's vector ISAs) stay mappings: their reader (aoti/hook_record.describe_counts,
markdown's environment) indexes them and the loader checks them when it renders once (model.Report.load)."""
from __future__ import annotations

import enum
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Optional, TypeVar

from ..diagnose.findings import CulpritKind
from ..failure import FailureKind, Phase
from ..verdict import Verdict

SCHEMA_VERSION = 1
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


def _strings(data: Mapping, key: str, where: str) -> tuple[str, ...]:
    def one(item: Any, at: str) -> str:
        if not isinstance(item, str):
            raise Malformed(f"{at.rstrip('.')} is {type(item).__name__}, not string")
        return item
    return _each(data, key, where, one)


def _mapping(item: Any, at: str) -> Mapping:
    if not isinstance(item, dict):
        raise Malformed(f"{at.rstrip('.')} is {type(item).__name__}, not object")
    return MappingProxyType(item)


def _enum(kind: type[E], value: str, where: str) -> E:
    try:
        return kind(value)
    except ValueError:
        raise Malformed(f"{where} {value!r} is none of {', '.join(e.value for e in kind)}") from None


@dataclass(frozen=True)
class Rate:
    runs: int
    failures: int
    rate: float
    ci95: tuple[float, float]
    could_not_run: bool = False

    @classmethod
    def from_json(cls, d: Mapping, where: str) -> Rate:
        ci95 = _take(d, "ci95", list, where)
        if len(ci95) != 2 or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in ci95):
            raise Malformed(f"{where}ci95 is not a list of 2 numbers")
        return cls(_take(d, "runs", int, where), _take(d, "failures", int, where),
                   _take(d, "rate", (int, float), where), (ci95[0], ci95[1]),
                   _take(d, "could_not_run", bool, where, False))


@dataclass(frozen=True)
class Signature:
    """The baseline's dominant failure (run/classify.py)."""
    kind: FailureKind
    phase: Phase
    message: str
    kernel: Optional[str]

    @classmethod
    def from_json(cls, d: Mapping, where: str) -> Signature:
        return cls(_enum(FailureKind, _take(d, "kind", str, where), f"{where}kind"),
                   _enum(Phase, _take(d, "phase", str, where), f"{where}phase"),
                   _take(d, "message", str, where, ""), _take(d, "kernel", str, where, None))


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


@dataclass(frozen=True)
class Stage:
    name: str
    env: Mapping[str, str]
    recompiled: bool
    runs: int
    failures: int
    finding: str
    skipped: Optional[str]
    logs: tuple[str, ...]
    rerun: tuple[str, ...]  # the first run's rerun.sh
    rerun_script: Optional[str]  # its text: the exact command
    excerpt: Optional[Excerpt]
    tool: Optional[str]  # the memory checker a memcheck stage ran under
    compiles: Optional[Mapping]  # aoti/hook_record.compile_counts

    @classmethod
    def from_json(cls, d: Any, where: str) -> Stage:
        d = _mapping(d, where)
        excerpt = _object(d, "excerpt", where)
        return cls(_take(d, "name", str, where), MappingProxyType(_take(d, "env", dict, where)),
                   _take(d, "recompiled", bool, where), _take(d, "runs", int, where),
                   _take(d, "failures", int, where), _take(d, "finding", str, where),
                   _take(d, "skipped", str, where, None), _strings(d, "logs", where), _strings(d, "rerun", where),
                   _take(d, "rerun_script", str, where, None),
                   Excerpt.from_json(excerpt, f"{where}excerpt.") if excerpt is not None else None,
                   _take(d, "tool", str, where, None), _object(d, "compiles", where))


@dataclass(frozen=True)
class SourceLine:
    path: str
    line: int
    code: Optional[str]

    @classmethod
    def from_json(cls, d: Any, where: str) -> SourceLine:
        d = _mapping(d, where)
        return cls(_take(d, "path", str, where), _take(d, "line", int, where), _take(d, "code", str, where, None))


@dataclass(frozen=True)
class Origin:
    """The user's lines a kernel came from, or its FX nodes where no line was recorded."""
    lines: tuple[SourceLine, ...]
    nodes: tuple[str, ...]

    @classmethod
    def from_json(cls, d: Mapping, where: str) -> Origin:
        return cls(_each(d, "lines", where, SourceLine.from_json), _strings(d, "nodes", where))


@dataclass(frozen=True)
class TensorStat:
    """A tensor the printer or the hook saw around a kernel's launch; statistics are shown as recorded."""
    kernel: Optional[str]
    when: str
    arg: str
    dtype: Optional[str]
    size: Any
    min: Any
    max: Any
    device: Optional[str]

    @classmethod
    def from_json(cls, d: Any, where: str) -> TensorStat:
        d = _mapping(d, where)
        return cls(_take(d, "kernel", str, where, None), _take(d, "when", str, where, ""),
                   _take(d, "arg", str, where, "?"), _take(d, "dtype", str, where, None), d.get("size", ""),
                   d.get("min"), d.get("max"), _take(d, "device", str, where, None))


@dataclass(frozen=True)
class LedgerEntry:
    """One entry of the evidence ledger (diagnose/judge.py): what a run of a stage saw, and what it names."""
    kind: str  # findings.EvidenceKind
    stage: str
    run: str
    names: Optional[str]
    text: str

    @classmethod
    def from_json(cls, d: Any, where: str) -> LedgerEntry:
        d = _mapping(d, where)
        return cls(_take(d, "kind", str, where), _take(d, "stage", str, where, ""), _take(d, "run", str, where, ""),
                   _take(d, "names", str, where, None), _take(d, "text", str, where, ""))


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

    @classmethod
    def from_json(cls, d: Any, where: str) -> Gap:
        d = _mapping(d, where)
        number = (int, float)
        return cls(_take(d, "launch", int, where), _take(d, "kernel", str, where), _take(d, "tensor", str, where),
                   _take(d, "state", str, where), _take(d, "node", str, where, None),
                   *(_take(d, key, number, where, None) for key in ("max_abs", "max_rel", "f64", "eager_f64", "rtol",
                                                                     "atol")))


@dataclass(frozen=True)
class Fact:
    """A sentence of the evidence as data (report/facts.py's fact_json): its kind and the tensors it shows."""
    kind: str
    tensors: tuple[tuple[Optional[str], str, str], ...]  # (kernel, arg, when) of each

    @classmethod
    def from_json(cls, d: Any, where: str) -> Fact:
        d = _mapping(d, where)
        tensors = _each(d, "tensors", where, lambda t, at: _mapping(t, at))
        return cls(_take(d, "kind", str, where, ""), tuple((t.get("kernel"), str(t.get("arg")), str(t.get("when")))
                                                          for t in tensors))


@dataclass(frozen=True)
class KernelSource:
    path: str
    excerpt: str


@dataclass(frozen=True)
class Culprit:
    kind: Optional[CulpritKind]  # None before localisation
    kernel: Optional[str]
    summary: str  # the one line that convicts, with the culprit's source lines
    conviction: str  # the same line without them (the first screen names the source once)
    input_index: Optional[int]
    input_name: Optional[str]
    user_name: Optional[str]
    op: Optional[str]
    evidence: tuple[str, ...]
    facts: tuple[Fact, ...]  # the evidence as data, one per sentence (empty in a report that has none)
    stats: tuple[TensorStat, ...]
    origin: Optional[Origin]
    source: Optional[KernelSource]
    source_nodes: Optional[str]
    convicted_by: tuple[LedgerEntry, ...] = ()  # the ledger's entries the judge convicted from, each with its run
    gaps: tuple[Gap, ...] = ()  # a wrong value's walk against eager, launch by launch

    @classmethod
    def from_json(cls, d: Mapping, where: str) -> Culprit:
        origin, source = _object(d, "origin", where), _object(d, "source", where)
        summary = _take(d, "summary", str, where, "")
        nodes, kind = d.get("source_nodes"), _take(d, "kind", str, where, None)
        return cls(_enum(CulpritKind, kind, f"{where}kind") if kind is not None else None,
                   _take(d, "kernel", str, where, None), summary,
                   _take(d, "conviction", str, where, summary), _take(d, "input_index", int, where, None),
                   _take(d, "input_name", str, where, None), _take(d, "user_name", str, where, None),
                   _take(d, "op", str, where, None), _strings(d, "evidence", where),
                   _each(d, "facts", where, Fact.from_json), _each(d, "stats", where, TensorStat.from_json),
                   Origin.from_json(origin, f"{where}origin.") if origin is not None else None,
                   KernelSource(_take(source, "path", str, f"{where}source."),
                                _take(source, "excerpt", str, f"{where}source.")) if source is not None else None,
                   None if nodes is None else str(nodes), _each(d, "convicted_by", where, LedgerEntry.from_json),
                   _each(d, "gaps", where, Gap.from_json))

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
    stage: str
    action: str
    path: Optional[str]
    sha256: Optional[str]
    built_here: bool
    redirect: Optional[str]  # how the hook served it (aoti/hook_record.py's PackageEvent.redirect)
    runs: int

    @classmethod
    def from_json(cls, d: Any, where: str) -> Package:
        d = _mapping(d, where)
        return cls(_take(d, "stage", str, where), _take(d, "action", str, where), _take(d, "path", str, where, None),
                   _take(d, "sha256", str, where, None), _take(d, "built_here", bool, where, False),
                   _take(d, "redirect", str, where, None), _take(d, "runs", int, where))


@dataclass(frozen=True)
class Constants:
    read: int
    nonfinite: int
    findings: tuple[str, ...]  # one line per non-finite, out-of-domain or stale constant
    not_read: tuple[str, ...]

    @classmethod
    def from_json(cls, d: Mapping, where: str) -> Constants:
        def finding(row: Any, at: str) -> str:
            return _take(_mapping(row, at), "finding", str, at)
        groups = {key: _each(d, key, where, finding) for key in ("nonfinite", "outside_domain", "stale")}
        return cls(_take(d, "read", int, where), len(groups["nonfinite"]), sum(groups.values(), ()),
                   _strings(d, "not_read", where))


@dataclass(frozen=True)
class Environment:
    """The repro's interpreter as the probe saw it (run/probe.py); every field may be missing."""
    torch: Optional[str] = None
    torch_git: Optional[str] = None
    cuda_runtime: Optional[str] = None  # the CUDA torch was built with; None for a CPU build
    gpu: Optional[str] = None
    python: Optional[str] = None
    executable: Optional[str] = None
    platform: Optional[str] = None
    cxx_version: Optional[str] = None
    libstdcxx: Optional[str] = None
    vec_isa: Optional[Mapping] = None
    bytecode_cache: Optional[str] = None
    collect_env: Optional[str] = None
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    torch_error: Optional[str] = None
    probe_error: Optional[str] = None
    collect_env_error: Optional[str] = None

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
        texts = ("torch", "torch_git", "cuda_runtime", "python", "executable", "platform", "cxx_version", "libstdcxx",
                 "bytecode_cache", "collect_env", "torch_error", "probe_error", "collect_env_error")
        gpu = d.get("gpu")
        return cls(**{key: _printable(d.get(key)) for key in texts}, gpu=_printable(gpu),
                   vec_isa=_object(d, "vec_isa", where), env=MappingProxyType(_object(d, "env", where) or {}))


def _printable(value: Any) -> Optional[str]:
    """An environment field as text: the probe writes strings, an older one a GPU as a list or an object."""
    return None if value is None or value == "" else str(value)


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


@dataclass(frozen=True)
class ReportRecord:
    schema_version: int
    verdict: Verdict
    complete: bool
    summary: str
    command: tuple[str, ...]
    signature: Optional[Signature]
    reproduction: Rate
    stages: tuple[Stage, ...]
    culprit: Culprit
    masked: Optional[str]
    verdict_s: Optional[float]
    verdict_runs: Optional[int]
    reuse: Optional[str]
    compiles_ahead: tuple[Mapping, ...]  # aoti/hook_record.ahead_row of each compile-only run
    packages: tuple[Package, ...]
    constants: Optional[Constants]
    next_steps: tuple[str, ...]
    environment: Environment
    tool_version: Optional[str]
    run_dir: Optional[str]
    paths_redacted: bool  # --redact-paths: what is added to the report later is redacted the same way
    ledger: tuple[LedgerEntry, ...] = ()  # every run's evidence, whichever stage ran it

    @classmethod
    def from_json(cls, d: Any) -> ReportRecord:
        if not isinstance(d, dict):
            raise Malformed(f"the report is {type(d).__name__}, not object")
        version = _take(d, "schema_version", int, "")
        if version > SCHEMA_VERSION:
            raise NewerSchema(f"schema_version {version}, newer than this aoti-bisect reads ({SCHEMA_VERSION}): "
                              "upgrade aoti-bisect")
        signature, constants = _object(d, "signature", ""), _object(d, "constants", "")
        verdict_s = _take(d, "verdict_s", (int, float), "", None)
        return cls(version, _enum(Verdict, _take(d, "verdict", str, ""), "verdict"),
                   _take(d, "complete", bool, "", True), _take(d, "summary", str, "", ""), _strings(d, "command", ""),
                   Signature.from_json(signature, "signature.") if signature is not None else None,
                   Rate.from_json(_object(d, "reproduction", "", required=True), "reproduction."),
                   _each(d, "stages", "", Stage.from_json, required=True),
                   Culprit.from_json(_object(d, "culprit", "") or {}, "culprit."),
                   _take(d, "masked", str, "", None),
                   verdict_s if verdict_s is None or math.isfinite(verdict_s) else None,
                   _take(d, "verdict_runs", int, "", None), _take(d, "reuse", str, "", None),
                   _each(d, "compiled_ahead", "", _mapping), _each(d, "packages", "", Package.from_json),
                   Constants.from_json(constants, "constants.") if constants is not None else None,
                   _strings(d, "next_steps", ""), Environment.from_json(_object(d, "environment", "") or {},
                                                                        "environment."),
                   _take(d, "tool_version", str, "", None), _take(d, "run_dir", str, "", None),
                   _take(d, "paths_redacted", bool, "", False), _each(d, "ledger", "", LedgerEntry.from_json))

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
