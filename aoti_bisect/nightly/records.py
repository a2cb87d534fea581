"""The record files of a night: their format (JSON lines), their place under --out, and folding them into one
Night.

A night is written as record files: a header with the host's environment, one line per repro, one line per
run, one line per checked run (`--sanitize`: the repro under a memory checker), and an end line. One unsharded
night writes one file; `--shard i/N` writes its part, and `merge` folds the parts. Everything after the runs
(history, change detection, summaries) reads only these files, so a sharded night and an unsharded one are judged
by the same code.
"""
from __future__ import annotations

import datetime as _dt
import enum
import glob
import json
import os
import re
from dataclasses import dataclass, field
from typing import Optional

from ..aoti.sanitizer import AccessError, SanitizerReport
from ..exits import UsageFailure
from ..files.own import loads_child_json
from ..report.redact import Redactor, process_redactor
from ..run.classify import fingerprint
from ..run.types import Outcome, RunResult
from .plan import Shard
from .sets import Repro

# 2 added the memcheck line. A reader of schema 1 would skip that line without a word and judge a silent
# out-of-bounds read as "not reproduced", so it must refuse the file instead; schema 1 files still read.
RECORD_SCHEMA = 2
READABLE_SCHEMAS = (1, 2)


class RecordError(UsageFailure):
    """A record file that cannot be read or folded, said in one line."""


class RecordType(enum.StrEnum):
    """A record line's `type`: what the line records."""
    HEADER = "header"  # the host's environment, the batch and the shard: the file's first line
    REPRO = "repro"  # one repro of the set
    RUN = "run"  # one run of a repro
    MEMCHECK = "memcheck"  # the repro's checked run (--sanitize) and what its checker reported
    END = "end"  # the shard finished (or was interrupted)

    @classmethod
    def of(cls, obj: object) -> Optional[RecordType]:
        """The type of a record line; None for a line that names none this aoti-bisect knows."""
        kind = obj.get("type") if isinstance(obj, dict) else None
        return cls(kind) if kind in cls._value2member_map_ else None


# What each field of each record kind must hold: a record file may come from another host, another version
# or a hand edit, and a wrong field must stop the merge with its file and line, not deep in the judging.
_TEXT = (lambda v: isinstance(v, str), "a string")
_MAYBE_TEXT = (lambda v: v is None or isinstance(v, str), "a string or null")
_INDEX = (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0, "a whole number")
_SECONDS = (lambda v: v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)), "a number or null")
_OBJECT = (lambda v: isinstance(v, dict), "an object")
_FLAG = (lambda v: isinstance(v, bool), "true or false")
_ARGV = (lambda v: isinstance(v, list) and all(isinstance(a, str) for a in v), "a list of strings")
_MAYBE_COUNT = (lambda v: v is None or _INDEX[0](v), "a whole number or null")
_FINDINGS = (lambda v: isinstance(v, list) and all(
    isinstance(f, dict) and isinstance(f.get("fingerprint"), str) and isinstance(f.get("description"), str)
    for f in v), "a list of {fingerprint, description} objects")
_SHARD = (lambda v: isinstance(v, str) and re.fullmatch(r"\d+/[1-9]\d*", v) is not None
          and int(v.split("/")[0]) < int(v.split("/")[1]), "i/N with 0 <= i < N")
_OUTCOME = (lambda v: v in {o.value for o in Outcome}, f"one of {', '.join(o.value for o in Outcome)}")
_REQUIRED = {
    RecordType.HEADER: {"batch": _TEXT, "shard": _SHARD, "started": _TEXT, "environment": _OBJECT},
    RecordType.REPRO: {"repro": _TEXT, "argv": _ARGV},
    RecordType.RUN: {"repro": _TEXT, "index": _INDEX, "started": _TEXT, "outcome": _OUTCOME, "duration_s": _SECONDS,
            "kind": _MAYBE_TEXT, "phase": _MAYBE_TEXT, "fingerprint": _MAYBE_TEXT, "message": _MAYBE_TEXT,
            "kernel": _MAYBE_TEXT, "log": _MAYBE_TEXT},
    RecordType.MEMCHECK: {"repro": _TEXT, "tool": _MAYBE_TEXT, "errors": _MAYBE_COUNT, "findings": _FINDINGS,
                 "refused": _MAYBE_TEXT, "skipped": _MAYBE_TEXT, "duration_s": _SECONDS, "log": _MAYBE_TEXT},
    RecordType.END: {"finished": _TEXT, "interrupted": _FLAG},
}
_OPTIONAL = {RecordType.HEADER: {"set": _TEXT, "plan": _OBJECT}, RecordType.REPRO: {"skipped": _MAYBE_TEXT}}


def _check_record(obj: object, where: str) -> None:
    if not isinstance(obj, dict):
        raise RecordError(f"{where}: not a JSON object")
    kind = RecordType.of(obj)
    for name, (ok, what) in _REQUIRED.get(kind, {}).items() if kind else ():
        if name not in obj:
            raise RecordError(f"{where}: {kind} record without {name}")
        if not ok(obj[name]):
            raise RecordError(f"{where}: {kind} record: {name} must be {what}, not {json.dumps(obj[name])[:40]}")
    for name, (ok, what) in _OPTIONAL.get(kind, {}).items() if kind else ():
        if name in obj and not ok(obj[name]):
            raise RecordError(f"{where}: {kind} record: {name} must be {what}, not {json.dumps(obj[name])[:40]}")
    if kind is RecordType.HEADER:
        for name in _RUN_ENV_KEYS:
            if not _MAYBE_TEXT[0](obj["environment"].get(name)):
                raise RecordError(f"{where}: header record: environment.{name} must be {_MAYBE_TEXT[1]}")


def iso(t: _dt.datetime) -> str:
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def now_iso() -> str:
    return iso(_dt.datetime.now(_dt.UTC))


def records_dir(out: str) -> str:
    return os.path.join(out, "records")


def record_path(out: str, shard: Shard) -> str:
    return os.path.join(records_dir(out), f"shard-{shard.index}-of-{shard.count}.jsonl")


def records_in(out: str) -> list[str]:
    """Every record file a night's shards wrote into one --out."""
    return sorted(glob.glob(os.path.join(glob.escape(records_dir(out)), "*.jsonl")))


def find_records(paths: tuple[str, ...]) -> list[str]:
    """Record files named, or found under named folders (a night's --out, or a folder of collected shards)."""
    files = []
    for path in paths:
        if os.path.isdir(path):
            found = sorted(glob.glob(os.path.join(glob.escape(path), "**", "shard-*.jsonl"), recursive=True))
            if not found:
                raise RecordError(f"{path} holds no shard-*.jsonl record files")
            files += found
        elif os.path.isfile(path):
            files.append(path)
        else:
            raise RecordError(f"no such file or folder: {path}")
    return files


class RecordWriter:
    """Appends one JSON line per event and flushes it: an interrupted night keeps every run that finished."""

    def __init__(self, path: str, header: dict) -> None:
        self.path = path
        self._f = open(path, "a", buffering=1)
        self._write({"type": RecordType.HEADER, "schema": RECORD_SCHEMA, **header})

    def _write(self, obj: dict) -> None:
        # Masked here, by the shard whose environment holds the secrets (a merge runs elsewhere, without them):
        # a record is the source of the history, the summaries and junit.xml, all made to be published.
        self._f.write(json.dumps(process_redactor().data(obj), sort_keys=True) + "\n")

    def repro(self, repro: Repro, skipped: Optional[str] = None) -> None:
        self._write({"type": RecordType.REPRO, "repro": repro.name, "argv": list(repro.argv), "device": repro.device,
                     "skipped": skipped})

    def run(self, repro: Repro, r: RunResult) -> None:
        sig = r.signature
        # A result lands as its run ends, so the start is now minus the run's duration.
        started = _dt.datetime.now(_dt.UTC) - _dt.timedelta(seconds=r.exit.duration)
        self._write({"type": RecordType.RUN, "repro": repro.name, "index": r.spec.index, "started": iso(started),
                     "outcome": r.outcome.value, "duration_s": round(r.exit.duration, 3),
                     "kind": sig.kind if sig else None, "phase": sig.phase if sig else None,
                     "fingerprint": sig.fingerprint if sig else None, "message": sig.message if sig else None,
                     "kernel": sig.kernel if sig else None, "log": r.log_path,
                     # where it faulted, from the run's own native stack or CUDA core dump (run/witness.py)
                     "crash": r.crash.describe() if r.crash else None})

    def memcheck(self, repro: Repro, tool: Optional[str] = None, r: Optional[RunResult] = None,
                 report: Optional[SanitizerReport] = None, skipped: Optional[str] = None) -> None:
        """The repro's checked run and what its checker reported, or why there was none (skipped)."""
        self._write({"type": RecordType.MEMCHECK, "repro": repro.name, "tool": tool,
                     "errors": report.total if report else None,  # None: the checker never printed its summary
                     "findings": [{"fingerprint": finding_fingerprint(tool, e), "description": e.describe()}
                                  for e in (report.errors if report else ())],
                     "refused": report.refused if report else None, "skipped": skipped,
                     "duration_s": round(r.exit.duration, 3) if r else None, "log": r.log_path if r else None})

    def close(self, interrupted: bool) -> None:
        self._write({"type": RecordType.END, "finished": now_iso(), "interrupted": interrupted})
        self._f.close()


def finding_fingerprint(tool: str, err: AccessError) -> str:
    """A checker finding's identity across nights: its kind and function with numbers masked (classify's rule),
    so a kernel renumbered by a recompile, or the same access at another address or count, is not news."""
    return fingerprint(err.kind, tool, err.function or "", None)


@dataclass
class Night:
    """One batch of runs, folded from one or more record files."""

    batch: str
    started: str
    finished: Optional[str]
    set_path: str
    shards: list[str]
    complete: bool
    problems: list[str]
    redo: list[str]  # shards missing or unfinished ("i/N"): what to run again for a complete night
    finished_files: list[str]  # the record files of shards that finished
    plan: dict
    hosts: list[dict]
    repros: dict[str, dict] = field(default_factory=dict)
    runs: list[dict] = field(default_factory=list)
    memchecks: dict[str, dict] = field(default_factory=dict)  # repro -> its checked run's record


def read_records(paths: list[str]) -> Night:
    """Folds record files into one night; shard files of one batch may come in any order."""
    if not paths:
        raise RecordError("no record files given")
    fold = _Fold(process_redactor())
    for path in paths:
        fold.add(path)
    return fold.night()


@dataclass
class _Fold:
    """The record files read so far (read_records folds them one by one), then the night they make."""

    redactor: Redactor
    headers: list[dict] = field(default_factory=list)
    repros: dict[str, dict] = field(default_factory=dict)
    runs: list[dict] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    ends: dict[str, dict] = field(default_factory=dict)
    memchecks: dict[str, dict] = field(default_factory=dict)
    unfinished: set[str] = field(default_factory=set)
    finished_files: list[str] = field(default_factory=list)

    def add(self, path: str) -> None:
        """One record file: its header, then its lines in order; a torn last line or no end line is a problem of
        the night (the shard did not finish), anything else malformed is a RecordError."""
        header, n_end, before = None, 0, len(self.problems)
        try:
            with open(path, "rb") as f:
                lines = f.readlines()
        except OSError as exc:
            raise RecordError(f"cannot read {path}: {exc.strerror}")
        for lineno, line in enumerate(lines, 1):
            try:
                # Not UTF-8 is a ValueError too; a lone surrogate's escape becomes U+FFFD (files/own.no_surrogates)
                obj = loads_child_json(line.decode("utf-8"))
            except ValueError:  # not JSON, not UTF-8, or nested past MAX_JSON_DEPTH or the parser's recursion
                # A shard killed mid-write leaves a torn last line; everything before it still counts.
                if lineno == len(lines):
                    self.problems.append(f"{path}: last line is incomplete (the shard was killed?)")
                    continue
                raise RecordError(f"{path}:{lineno}: not a JSON line")
            if RecordType.of(obj) is RecordType.HEADER and obj.get("schema") not in READABLE_SCHEMAS:
                raise RecordError(f"{path}:{lineno}: record schema {obj.get('schema')} (this aoti-bisect reads "
                                  f"{' and '.join(map(str, READABLE_SCHEMAS))})")
            _check_record(obj, f"{path}:{lineno}")
            obj = self.redactor.data(obj)  # again with this process's secrets: a record may come from an older writer
            if RecordType.of(obj) is RecordType.HEADER:
                header = obj
                self.headers.append(obj)
            elif header is None:
                raise RecordError(f"{path}:{lineno}: records before the header (not an aoti-bisect record file?)")
            else:
                n_end += self._line(obj, header, path, f"{path}:{lineno}")
        if header is None:
            raise RecordError(f"{path}: no header line (not an aoti-bisect record file?)")
        if not n_end:
            self.problems.append(f"{path}: no end line (the shard did not finish)")
        if len(self.problems) > before:
            self.unfinished.add(header["shard"])
        else:
            self.finished_files.append(path)

    def _line(self, obj: dict, header: dict, path: str, where: str) -> int:
        """One record after its file's header; 1 for an end line, else 0."""
        kind = RecordType.of(obj)
        if kind is RecordType.REPRO:
            self.repros.setdefault(obj["repro"], obj)
        elif kind is RecordType.RUN:
            self.runs.append({**obj, **{k: header["environment"].get(k) for k in _RUN_ENV_KEYS},
                              "shard": header["shard"]})
        elif kind is RecordType.MEMCHECK:
            if obj["repro"] not in self.repros:
                raise RecordError(f"{where}: memcheck record for {obj['repro']} before its repro record")
            self.memchecks.setdefault(obj["repro"], obj)
        elif kind is RecordType.END:
            self.ends[path] = obj
            if obj.get("interrupted"):
                self.problems.append(f"{path}: the shard was interrupted")
            return 1
        return 0

    def night(self) -> Night:
        """The night the files make: one sharding, each shard once, a run counted once however often it was
        recorded; missing or unfinished shards are problems, and what to run again."""
        headers, problems = self.headers, self.problems
        counts = {h["shard"].split("/")[1] for h in headers}
        if len(counts) > 1:
            raise RecordError(f"record files come from different shardings: {', '.join(sorted(counts))} shards")
        shards = sorted({h["shard"] for h in headers}, key=lambda s: int(s.split("/")[0]))
        total = int(next(iter(counts)))
        missing = sorted(set(range(total)) - {int(s.split("/")[0]) for s in shards})
        if missing:
            problems.append(f"shard(s) {', '.join(f'{i}/{total}' for i in missing)} missing")
        if len(shards) < len(headers):
            raise RecordError("the same shard appears in two record files")
        batches = sorted({h["batch"] for h in headers})
        seen, unique = set(), []
        for r in self.runs:
            key = (r["repro"], r["index"])
            if key not in seen:
                seen.add(key)
                unique.append(r)
        return Night(batch="+".join(batches), started=min(h["started"] for h in headers),
                     finished=max((e["finished"] for e in self.ends.values()), default=None),
                     set_path=headers[0].get("set", ""), shards=shards, complete=not problems, problems=problems,
                     redo=sorted(self.unfinished | {f"{i}/{total}" for i in missing},
                                 key=lambda s: int(s.split("/")[0])),
                     finished_files=self.finished_files, plan=headers[0].get("plan", {}),
                     hosts=[h["environment"] for h in headers], repros=self.repros, runs=unique,
                     memchecks=self.memchecks)


_RUN_ENV_KEYS = ("host", "torch", "torch_git", "gpu", "driver", "env_fp")
