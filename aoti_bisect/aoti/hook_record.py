"""What the in-process hook (child/hook/recorder.py) wrote beside a run's log, as frozen records.

`parse` is pure; `read_hook` reads a run folder's hook.json and the hook-<pid>.json of any later recording
process. A file the hook never wrote (the repro compiled and loaded nothing, or ran without the hook) gives
an empty record; a damaged one gives a problem line, never an exception.
"""
from __future__ import annotations

import glob
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Optional, Union

from ..child import contract
from ..files.own import NotOwnFile, loads_child_json, open_own
from .constants import ConstantValue, ConstantValues, parse_value, parse_values
from .provenance import ProgramNode, parse_program

COMPILE = "aoti_compile_and_package"
MAX_RECORD_BYTES = 16 << 20
# What a record the repro damaged (or wrote itself) can raise while it is parsed: malformed or too deeply
# nested JSON (loads_child_json), a wrong type or shape anywhere, a number like 1e999 where a size goes
# (OverflowError). Each is one problem line; none may end the bisection with 255.
_DAMAGE = (ValueError, KeyError, IndexError, TypeError, AttributeError, ArithmeticError)


@dataclass(frozen=True)
class InputName:
    """A model input: the name the user's forward gives it, and what the generated wrapper calls it."""
    name: str
    placeholder: Optional[str]
    # Per dimension as the export allows it: a static size, or (lo, hi) with None for an open end.
    dims: tuple[Union[int, tuple[Optional[int], Optional[int]]], ...] = ()


@dataclass(frozen=True)
class ConstantName:
    """A parameter, buffer or lifted constant by its FQN; placeholder None: folded or inlined by Inductor."""
    fqn: str
    kind: str
    placeholder: Optional[str]
    uses: tuple[tuple[str, str], ...] = ()  # the exported graph's ops it feeds, and as which argument
    # No placeholder: the exported program's value (Inductor inlined or folded it; the package holds no copy).
    values: Optional[ConstantValue] = None


@dataclass(frozen=True)
class PackageEvent:
    call: str  # aoti_compile_and_package | aoti_load_package | load_package
    status: str  # started (the process died inside the call) | returned | raised
    path: Optional[str]  # None: an in-memory buffer
    sha256: Optional[str]
    built_here: bool  # compiled by this call, or (a load) by an earlier call in the same process
    existed_before: Optional[bool] = None  # a compile: the path held a file before it (a fixed-path cache)
    error: Optional[str] = None
    inputs: tuple[InputName, ...] = ()
    constants: tuple[ConstantName, ...] = ()
    naming_problem: Optional[str] = None
    constant_values: Optional[ConstantValues] = None  # a returned load: what its constants hold
    # The file really compiled to or loaded (the hook's redirect.py): a private path inside the run folder for
    # a compile to a fixed path outside it, or an instrumented copy of a package the run did not build.
    served_from: Optional[str] = None
    redirect: Optional[str] = None  # private | instrumented
    requested_path: Optional[str] = None  # a compile made private: where the repro asked it to go
    nodes: tuple[ProgramNode, ...] = ()  # a compile: the exported program's nodes and their source lines
    # A compile under reuse (child/hook/reuse.py): "reused" (served from the flag set's package), "compiled",
    # or "compiling"/"waiting" (the process died there); None: the run had no reuse.
    reuse: Optional[str] = None
    reuse_reason: Optional[str] = None  # why a compile under reuse compiled
    called_again: bool = False  # a load: the repro called the model it returned more than once

    @property
    def compiled(self) -> bool:
        return self.call == COMPILE

    @property
    def action(self) -> str:
        if not self.compiled:
            return "loaded"
        return "reused" if self.reuse == "reused" else "compiled"


@dataclass(frozen=True)
class HookRecord:
    events: tuple[PackageEvent, ...] = ()
    problems: tuple[str, ...] = ()
    loaded: bool = False  # a process of the run installed the hook (its marker file exists)


def _dims(raw: object) -> tuple:
    if not isinstance(raw, list):
        return ()
    return tuple(d if isinstance(d, int) else (d[0], d[1]) for d in raw if isinstance(d, (int, list)) and
                 (isinstance(d, int) or len(d) == 2))


def _inlined(raw: dict) -> Optional[ConstantValue]:
    """A constant's exported value, where the hook summarised one; damage loses it, not the record."""
    try:
        return parse_value({**raw["values"], "fqn": raw["fqn"], "name": raw["fqn"]}) if raw.get("values") else None
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def _text(raw: object) -> Optional[str]:
    """A field the hook writes as a string or null; anything else in its place (the repro wrote the file) is
    null, so no reader of the event meets a list where it expects a path."""
    return raw if isinstance(raw, str) else None


def _event(raw: dict) -> PackageEvent:
    program = raw.get("program") or {}
    inputs = tuple(InputName(str(i["name"]), _text(i.get("placeholder")), _dims(i.get("dims")))
                   for i in program.get("inputs") or () if i.get("name"))
    constants = tuple(ConstantName(str(c["fqn"]), str(c.get("kind")), _text(c.get("placeholder")),
                                   tuple((str(op), str(arg)) for op, arg in c.get("uses") or ()),
                                   _inlined(c))
                      for c in program.get("constants") or () if c.get("fqn"))
    reuse = raw.get("reuse") or {}
    existed = raw.get("existed_before")
    return PackageEvent(str(raw["call"]), str(raw.get("status")), _text(raw.get("path")), _text(raw.get("sha256")),
                        bool(raw.get("built_here")), existed if isinstance(existed, bool) else None,
                        _text(raw.get("error")), inputs, constants, _text(program.get("naming_problem")),
                        parse_values(raw.get("constant_values")), _text(raw.get("served_from")),
                        _text(raw.get("redirect")), _text(raw.get("requested_path")),
                        parse_program(raw.get("provenance")), _text(reuse.get("outcome")),
                        _text(reuse.get("reason")), raw.get("called_again") is True)


def parse(text: str, where: str = contract.HOOK_RECORD) -> HookRecord:
    """One process's record. An empty file is a process that died between claiming the file and writing it."""
    if not text.strip():
        return HookRecord()
    try:
        data = loads_child_json(text)
        events = tuple(_event(e) for e in data["events"])
        problems = tuple(f"{where}: {e}" for e in data.get("hook_errors") or ())
    except _DAMAGE as exc:
        return HookRecord(problems=(f"{where} is not a hook record: {type(exc).__name__}: {exc}"[:300],))
    return HookRecord(events, problems)


def read_hook(run_dir: str) -> HookRecord:
    """Every recording process's events in one record, the first process's first."""
    first = os.path.join(run_dir, contract.HOOK_RECORD)
    stem, ext = os.path.splitext(contract.HOOK_RECORD)
    rest = sorted(glob.glob(os.path.join(glob.escape(run_dir), f"{stem}-*{ext}")))
    events: list[PackageEvent] = []
    problems: list[str] = []
    for path in [first, *rest]:
        try:
            # open_own: the repro can plant a link at its record's name, to a file of the user's.
            with os.fdopen(open_own(path), "rb") as f:
                blob = f.read(MAX_RECORD_BYTES + 1)
        except FileNotFoundError:
            continue
        except NotOwnFile:
            problems.append(f"{path} is a link or not a regular file: not read")
            continue
        except OSError as exc:
            problems.append(f"cannot read {path}: {exc.strerror}")
            continue
        record = (HookRecord(problems=(f"{path} is over {MAX_RECORD_BYTES >> 20} MiB",))
                  if len(blob) > MAX_RECORD_BYTES else parse(blob.decode(errors="replace"), os.path.basename(path)))
        events.extend(record.events)
        problems.extend(record.problems)
    loaded = os.path.exists(os.path.join(run_dir, contract.HOOK_LOADED))
    return HookRecord(tuple(events), tuple(problems), loaded)


@dataclass(frozen=True)
class Names:
    """Wrapper placeholders -> the user's names, where every compiled program agrees on them."""
    inputs: dict[str, str]  # arg3_1 -> x
    constants: dict[str, str]  # proj_weight -> proj.weight
    # (arg3_1, dim) -> the range the export allows that dimension ((n, n): static), to compare with the package's
    exported: dict[tuple[str, int], tuple[Optional[int], Optional[int]]] = field(default_factory=dict)

    @classmethod
    def of(cls, records: list[HookRecord]) -> Names:
        programs = {(e.inputs, e.constants) for r in records for e in r.events
                    if e.compiled and e.status == "returned" and (e.inputs or e.constants)}
        # No compile seen: a prebuilt package's names as the hook read them at load (keyword inputs, FQNs).
        programs = programs or {(e.inputs, e.constants) for r in records for e in r.events
                                if not e.compiled and e.status == "returned" and (e.inputs or e.constants)}
        if len(programs) != 1:  # none, or several models whose argN_1 mean different things
            return cls({}, {})
        inputs, constants = programs.pop()
        return cls({i.placeholder: i.name for i in inputs if i.placeholder},
                   {c.placeholder: c.fqn for c in constants if c.placeholder},
                   {(i.placeholder, d): (r, r) if isinstance(r, int) else r
                    for i in inputs if i.placeholder for d, r in enumerate(i.dims)})


def package_rows(stage: str, records: list[HookRecord]) -> list[dict]:
    """report.json's `packages` rows for one stage: each distinct package compiled or loaded, and in how many
    of the stage's runs; `unfinished` counts calls the process never returned from (it died inside)."""
    rows: dict[tuple, dict] = {}
    for record in records:
        seen: set[tuple] = set()
        for e in record.events:
            key = (e.action, e.path, e.sha256, e.built_here, e.redirect)
            row = rows.setdefault(key, {"stage": stage, "action": key[0], "path": e.path, "sha256": e.sha256,
                                        "built_here": e.built_here, "runs": 0, "raised": 0, "unfinished": 0,
                                        "existed_before": 0, "redirect": e.redirect,
                                        "requested_path": e.requested_path})
            if key not in seen:
                seen.add(key)
                row["runs"] += 1
            row["raised"] += e.status == "raised"
            row["unfinished"] += e.status == "started"
            row["existed_before"] += bool(e.existed_before)
    return list(rows.values())


@dataclass(frozen=True)
class CompileCounts:
    """How a stage's runs came by their packages (report.json's `compiles` of a stage): how many compiled, how many
    reused the flag set's first compile, and why the ones under reuse compiled. `hooked` False: the runs ran without
    the hook, as the user's script runs, and compiled whenever the script does (nothing is known of them here).
    `unhooked`: runs of a hooked row that ran so beside the counted ones (the baseline's first wave, before its runs
    took the package); `warm`: runs forked from a warm interpreter; `cold_because`: why none was."""
    stage: str
    hooked: bool
    runs: int
    compiled: int = 0
    reused: int = 0
    reasons: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    unhooked: int = 0
    warm: int = 0
    cold_because: tuple[str, ...] = ()

    def to_json(self) -> dict:
        """report.json's object; `warm` and `cold_because` only where there is something to say."""
        row: dict[str, Any] = {"stage": self.stage, "hooked": self.hooked, "runs": self.runs,
                               "compiled": self.compiled, "reused": self.reused, "reasons": dict(self.reasons),
                               "unhooked": self.unhooked}
        return {**row, **({"warm": self.warm} if self.warm else {}),
                **({"cold_because": list(self.cold_because)} if self.cold_because else {})}

    def describe(self) -> str:
        """One line for report.md (how many were forked warm is report.md's one line for every stage)."""
        if not self.hooked:
            return f"{self.stage}: {self.runs} run(s) without the hook, each compiling as the script does (no reuse)"
        none = self.runs - self.compiled - self.reused
        text = (f"{self.stage}: {self.compiled} of {self.runs} run(s) compiled, "
                f"{self.reused} reused the flag set's package")
        if self.unhooked:
            text = (f"{self.stage}: {self.unhooked} run(s) without the hook, each compiling as the script does; of "
                    f"the {self.runs} with it, {self.compiled} compiled, {self.reused} reused the flag set's package")
        if none:
            text += f", {none} compiled nothing"
        if self.reasons:
            text += "; compiled because: " + "; ".join(f"{why} ({n})" for why, n in sorted(self.reasons.items()))
        if self.cold_because:
            text += "; none warm: " + "; ".join(self.cold_because)
        return text


STOPPED_AT_LOAD = "stopped before its first package load"  # how a compile-only run usually ends


@dataclass(frozen=True)
class CompiledAhead:
    """One compile-only run (run/scheduler.py `ahead`), report.json's `compiled_ahead` row: what it compiled, or
    found built, for a later stage's flag set, in how many seconds, and how it ended."""
    counts: CompileCounts
    seconds: float
    ended: str
    flag_set: Optional[str] = None  # the flag set's compile key (run/layout.compile_key)

    def to_json(self) -> dict:
        """One flat object: the counts' fields beside seconds, ended and flag_set."""
        return {**self.counts.to_json(), "seconds": self.seconds, "ended": self.ended,
                **({"flag_set": self.flag_set} if self.flag_set is not None else {})}

    def describe(self) -> str:
        """A few words for report.md's one line of every compile-only run (their why is report.json's): its seconds,
        and what it did and how it ended where that is not the usual one compile stopped at its first load."""
        c = self.counts
        unusual = ([] if (c.compiled, c.reused) == (1, 0) else [f"{c.compiled} compiled, {c.reused} reused"]) + \
                  ([] if self.ended == STOPPED_AT_LOAD else [self.ended])
        return f"{c.stage} {self.seconds} s" + (f" ({'; '.join(unusual)})" if unusual else "")


def compile_counts(stage: str, records: list[HookRecord], hooked: bool, unhooked: int = 0) -> CompileCounts:
    """How the runs of `records` came by their packages (CompileCounts)."""
    compiled = reused = 0
    reasons: dict[str, int] = {}
    for record in records:
        compiles = [e for e in record.events if e.compiled]
        if not compiles:
            continue
        if all(e.reuse == "reused" for e in compiles):
            reused += 1
        else:
            compiled += 1
        for e in compiles:
            if e.reuse != "reused" and e.reuse_reason:
                reasons[e.reuse_reason] = reasons.get(e.reuse_reason, 0) + 1
    return CompileCounts(stage, hooked, len(records), compiled, reused, MappingProxyType(reasons), unhooked)


def ahead_row(stage: str, record: HookRecord, seconds: float, cancelled: bool,
              flag_set: Optional[str] = None) -> CompiledAhead:
    """report.json's row for one compile-only run for `stage`."""
    stopped = any(e.status.startswith("not loaded") for e in record.events)
    return CompiledAhead(compile_counts(stage, [record], True), round(seconds, 1),
                         "killed: the ladder needed nothing more" if cancelled else
                         STOPPED_AT_LOAD if stopped else "ran to its end", flag_set)
