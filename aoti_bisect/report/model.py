"""The report: report.json (the record, schema below) and report.md rendered from it. It owns the exit code."""
from __future__ import annotations

import datetime as _dt
import json
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Optional

from .. import __version__
from ..verdict import Verdict
from ..exits import (
    EXIT_INCONCLUSIVE,
    EXIT_INTERRUPTED,
    EXIT_NOT_REPRODUCED,
    EXIT_REPRODUCED,
    UsageFailure,
)
from ..files import NotOwnFile, RunFolder, atomic_write, read_own_text, valid_utf8
from ..text import printable
from .excerpt import log_excerpt
from .facts import fact_json, render, tensor_json
from .markdown import culprit_who, render_markdown
from .redact import Redactor

SCHEMA_VERSION = 1
# A report holds excerpts, not logs: even 10,000 runs' paths make a few MB. More is not a report.
MAX_REPORT_BYTES = 64 << 20

VERDICT_EXIT = {
    Verdict.NOT_REPRODUCED: EXIT_NOT_REPRODUCED,
    Verdict.REPRODUCED: EXIT_REPRODUCED,
    Verdict.INCONCLUSIVE: EXIT_INCONCLUSIVE,
    # The repro cannot run at this commit (or here): `git bisect run` must skip it, not call it bad.
    Verdict.ERROR: EXIT_INCONCLUSIVE,
}


def exit_reason(data: dict) -> str:
    """The finer reason behind the exit code: not_reproduced, reproduced, inconclusive (some runs could not
    run, none failed), infra (no run could run here: torch not importable, no GPU), script_broken (the repro
    fails before it tests anything: a syntax or import error), interrupted."""
    if not data.get("complete", True):
        return "interrupted"
    if data["verdict"] != Verdict.ERROR.value:
        return data["verdict"]
    return "script_broken" if (data.get("signature") or {}).get("kind") == "script_error" else "infra"


@dataclass
class Report:
    run_dir: str
    command: list[str]
    data: dict = field(default_factory=dict)

    @classmethod
    def from_findings(cls, run_dir: str, command: list[str], outcome, environment: Optional[dict] = None,
                      redactor: Redactor = Redactor(), packages: tuple[dict, ...] = (), compiles: tuple[dict, ...] = (),
                      reuse: Optional[str] = None, ahead: tuple[dict, ...] = ()) -> "Report":
        """`packages`: aoti/hook_record.package_rows of each stage, what the hooked runs compiled and loaded;
        `compiles`: aoti/hook_record.compile_counts of each stage, in order; `reuse`: the harness's reuse mode;
        `ahead`: aoti/hook_record.ahead_row of each compile-only run."""
        sig = outcome.signature
        culprit = outcome.culprit
        c_json = None
        if culprit is not None:
            c_json = culprit_json(culprit)
            c_json["source"] = ({"path": outcome.source[0], "excerpt": outcome.source[1]}
                                if outcome.source else None)
            c_json["source_nodes"] = outcome.source_nodes or None
        stages = []
        for i, stage in enumerate(outcome.stages):
            s = stage_json(stage)
            s["compiles"] = compiles[i] if i < len(compiles) else None
            s["rerun_script"] = _read(s["rerun"][0]) if s["rerun"] else None
            log = s["failing_log"] or (s["logs"][0] if s["logs"] else None)
            s["excerpt"] = log_excerpt(log, redactor=redactor) if log else None
            stages.append(s)
        data = {
            "schema_version": SCHEMA_VERSION,
            "tool": "aoti-bisect",
            "tool_version": __version__,
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "command": command,
            "verdict": outcome.verdict.value,
            "complete": not outcome.interrupted,
            "exit_reason": None,
            "summary": render(outcome.summary),
            "signature": sig.to_json() if sig else None,
            "reproduction": {**outcome.baseline.to_json(),
                             "could_not_run": outcome.verdict is Verdict.ERROR and outcome.baseline.runs == 0},
            "stages": stages,
            "culprit": c_json or {"kind": None, "kernel": None, "evidence": []},
            "masked": render(outcome.masked) or None,
            "verdict_s": outcome.verdict_s,
            "verdict_runs": outcome.verdict_runs,
            "packages": list(packages),
            "constants": _constants(outcome.constants),
            "reuse": reuse,
            "compiled_ahead": list(ahead),
            "next_steps": outcome.next_steps,
            "environment": environment or {},
            "run_dir": run_dir,
        }
        data["exit_reason"] = exit_reason(data)
        return cls(run_dir, command, redact_data(data, redactor))

    @classmethod
    def load(cls, run_dir: str) -> "Report":
        """The run's report.json, checked against the schema; anything else is one line (UsageFailure)."""
        path = os.path.join(run_dir, "report.json")
        if not os.path.lexists(path):
            raise UsageFailure(f"{run_dir} holds no report.json (not an aoti-bisect run directory?)")
        try:
            data = RunFolder(run_dir).read_json("report.json", MAX_REPORT_BYTES)
        except OSError as exc:
            raise UsageFailure(f"cannot read {path}: {exc.strerror}")
        version = data.get("schema_version")
        if type(version) is int and version > SCHEMA_VERSION:
            raise UsageFailure(f"{path} has schema_version {version}, newer than this aoti-bisect reads "
                               f"({SCHEMA_VERSION}): upgrade aoti-bisect")
        problem = _schema_problem(data)
        if problem:
            raise UsageFailure(f"{path} is malformed: {printable(problem)}")
        report = cls(run_dir, data.get("command") or [], data)
        # The schema covers what is indexed everywhere; a field only a renderer reads (a summary that is a
        # number, an origin that is a string) is found by rendering once: one line, never a traceback.
        try:
            render_markdown(data)
            report.headline()
        except (TypeError, KeyError, AttributeError, ValueError, IndexError, RecursionError) as exc:
            raise UsageFailure(f"{path} is malformed (edited by hand?): {type(exc).__name__}: "
                               f"{printable(str(exc))[:200]}")
        return report

    @property
    def exit_code(self) -> int:
        if not self.data.get("complete", True):
            return EXIT_INTERRUPTED
        return VERDICT_EXIT[Verdict(self.data["verdict"])]

    def write(self) -> None:
        atomic_write(os.path.join(self.run_dir, "report.json"), json.dumps(self.data, indent=2))
        atomic_write(os.path.join(self.run_dir, "report.md"), valid_utf8(render_markdown(self.data)))

    def headline(self) -> str:
        """One line for the terminal; control characters from the child are escaped."""
        d = self.data
        c = d.get("culprit")
        line = f"verdict: {d['verdict']}"
        if d.get("signature"):
            s = d["signature"]
            line += f" | {s['kind']} in {s['phase']}"
        r = d["reproduction"]
        line += (" | the repro could not run here" if r.get("could_not_run")
                 else f" | {r['failures']}/{r['runs']} runs failed")
        if d.get("masked"):
            line += " | masked at baseline"
        if c and c.get("kind") == "kernel":
            line += f" | culprit kernel: {c.get('kernel')}"
            where = [f"{os.path.basename(s['path'])}:{s['line']}" for s in (c.get("origin") or {}).get("lines") or ()]
            line += f" (from {', '.join(where)})" if where else ""
        elif c and c.get("kind") == "model_input":
            line += f" | culprit: {culprit_who(c)}"
        elif c and c.get("kind"):
            line += f" | culprit: {c['kind']}" + (f" ({culprit_who(c)})" if c.get("kernel") or c.get("input_name") or c.get("op")
                                                  else "")
        if not d.get("complete", True):
            line += " | INTERRUPTED: partial report"
        return printable(line)


def culprit_json(c) -> dict:
    """report.json's `culprit`: each fact as a sentence (`evidence`) and as data (`facts`)."""
    tensors = [t for f in c.evidence for t in f.tensors()]
    return {"kind": str(c.kind), "kernel": c.kernel, "summary": render(c.headline),
            "input_index": c.input_index, "input_name": c.input_name, "user_name": c.user_name,
            "evidence": [render(f) for f in c.evidence], "facts": [fact_json(f) for f in c.evidence],
            "stats": [tensor_json(t) for t in tensors], "probes": c.probes, "op": c.op,
            "origin": c.origin.to_json() if c.origin else None,
            "kernel_origins": {name: o.to_json() for f in c.evidence for name, o in f.origins}}


def stage_json(stage) -> dict:
    failures = stage.failures
    return {"name": str(stage.name), "env": stage.env, "recompiled": stage.recompiled, "runs": stage.rate.runs,
            "failures": stage.rate.failures, "rate": stage.rate.to_json(), "finding": render(stage.finding),
            "fact": fact_json(stage.finding), "skipped": stage.skipped, "logs": [r.log_path for r in stage.results],
            "rerun": [os.path.join(r.run_dir, "rerun.sh") for r in stage.results[:1]],
            "failing_log": failures[0].log_path if failures else None,
            "signatures": dict(Counter(r.signature.kind for r in failures if r.signature)), "tool": stage.tool}


def _constants(constants: dict) -> Optional[dict]:
    if not constants:
        return None
    return {**constants, **{key: [{**row, "finding": render(row["finding"])} for row in constants.get(key) or ()]
                            for key in ("nonfinite", "outside_domain", "stale")}}


def _read(path: str) -> str:
    try:
        return read_own_text(path).strip()
    except NotOwnFile:
        return f"(not read, a link: {path})"
    except OSError:
        return f"(missing: {path})"


def redact_data(data: dict, redactor: Redactor) -> dict:
    """Every string value of the report goes through the redactor: the JSON is the only source of the Markdown.
    The verdict is our own word, never user text, and the exit code is read from it."""
    return {**redactor.data(data), "verdict": data["verdict"]}


@dataclass(frozen=True)
class _Opt:
    """The key may be missing, the value null."""
    shape: object


@dataclass(frozen=True)
class _List:
    item: object
    length: Optional[int] = None


_NUM = (int, float)
_RATE = {"runs": int, "failures": int, "rate": _NUM, "ci95": _List(_NUM, 2)}
_EXCERPT = {"log": str, "bytes": int, "key_lines": _List(str), "head": str, "tail": str}
_STAGE = {"name": str, "env": dict, "recompiled": bool, "runs": int, "failures": int, "skipped": _Opt(str),
          "finding": str, "rerun_script": _Opt(str), "excerpt": _Opt(_EXCERPT), "logs": _Opt(_List(str))}
_CULPRIT = {"kind": _Opt(str), "kernel": _Opt(str), "evidence": _Opt(list),
            "source": _Opt({"path": str, "excerpt": str}),
            "origin": _Opt({"nodes": _Opt(_List(str)), "lines": _Opt(_List(dict))})}
# What the renderers and the bundle index: a report.json edited by hand, or written by a bug, is refused
# in one line instead of failing somewhere in the rendering.
_REPORT = {"schema_version": int, "verdict": str, "complete": _Opt(bool), "command": _Opt(_List(str)),
           "reproduction": _RATE, "stages": _List(_STAGE), "culprit": _Opt(_CULPRIT),
           "signature": _Opt({"kind": str, "phase": str}), "next_steps": _Opt(list), "environment": _Opt(dict),
           "packages": _Opt(_List({"stage": str, "action": str, "runs": int})),
           "constants": _Opt({"read": int, "nonfinite": _List({"finding": str})})}


def _schema_problem(data: object) -> Optional[str]:
    try:
        _check(data, _REPORT, "the report")
    except ValueError as exc:
        return str(exc)
    if data["verdict"] not in {v.value for v in Verdict}:
        return f"verdict {data['verdict']!r} is none of {', '.join(v.value for v in Verdict)}"
    return None


def _check(value: object, shape: object, where: str) -> None:
    if isinstance(shape, _Opt):
        if value is not None:
            _check(value, shape.shape, where)
    elif isinstance(shape, _List):
        if not isinstance(value, list) or shape.length not in (None, len(value)):
            raise ValueError(f"{where} is not a list" + (f" of {shape.length}" if shape.length else ""))
        for i, item in enumerate(value):
            _check(item, shape.item, f"{where}[{i}]")
    elif isinstance(shape, dict):
        if not isinstance(value, dict):
            raise ValueError(f"{where} is not an object")
        for key, sub in shape.items():
            if key not in value and not isinstance(sub, _Opt):
                raise ValueError(f"{where} has no {key!r}")
            _check(value.get(key), sub, f"{key}" if where == "the report" else f"{where}.{key}")
    elif not isinstance(value, shape):
        raise ValueError(f"{where} is {type(value).__name__}, not {_name(shape)}")


def _name(shape: object) -> str:
    return "number" if shape == _NUM else shape.__name__
