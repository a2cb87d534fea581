"""The report: report.json (the record, schema below) and report.md rendered from it. It owns the exit code."""
from __future__ import annotations

import datetime as _dt
import json
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Optional

from .. import __version__
from ..diagnose.findings import Culprit, CulpritKind, Entry, Findings, Stage
from ..exits import (
    EXIT_INCONCLUSIVE,
    EXIT_INTERRUPTED,
    EXIT_NOT_REPRODUCED,
    EXIT_REPRODUCED,
    UsageFailure,
)
from ..failure import FailureKind
from ..files.own import NotOwnFile, read_own_text
from ..files.runfolder import RunFolder, RunFolderError
from ..files.write import atomic_write, valid_utf8
from ..text import printable
from ..verdict import Verdict
from .excerpt import log_excerpt
from .facts import fact_json, render, tensor_json
from .markdown import minify_step, render_markdown, verdict_words
from .record import SCHEMA_VERSION, Malformed, Minified, NewerSchema, ReportRecord
from .redact import Redactor, process_redactor

# A report holds excerpts, not logs: even 10,000 runs' paths make a few MB. More is not a report.
MAX_REPORT_BYTES = 64 << 20
# minify's record, written at the end of every minify (minify/__init__.py's RESULT in the minify folder).
MINIFY_RECORD = "minify/minify.json"

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
    broken = (data.get("signature") or {}).get("kind") == FailureKind.SCRIPT_ERROR
    return "script_broken" if broken else "infra"


# PyTorch's in-process minifier (diagnose/advice.py): aoti-bisect minify does it from the run directory, which
# only the report knows, in a process of its own.
_PYTORCH_MINIFIER_STEP = "Shrink the graph with the AOTI minifier:"


@dataclass
class Report:
    """report.json as written (`data`, what --json prints and the bundle redacts) and as typed records
    (`record`, what every reader reads)."""
    run_dir: str
    command: list[str]
    data: dict = field(default_factory=dict)
    record: ReportRecord = field(init=False)

    def __post_init__(self) -> None:
        self.record = ReportRecord.from_json(self.data)

    @classmethod
    def from_findings(cls, run_dir: str, command: list[str], outcome: Findings, environment: Optional[dict] = None,
                      redactor: Redactor = Redactor(), packages: Sequence[dict] = (), compiles: Sequence[dict] = (),
                      reuse: Optional[str] = None, ahead: Sequence[dict] = ()) -> Report:
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
            "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
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
            "ledger": [entry_json(e) for e in outcome.ledger],
            "packages": list(packages),
            "constants": _constants(outcome.constants),
            "reuse": reuse,
            "compiled_ahead": list(ahead),
            "next_steps": [minify_step(run_dir, command) if step.startswith(_PYTORCH_MINIFIER_STEP) else step
                           for step in outcome.next_steps],
            "environment": environment or {},
            "run_dir": run_dir,
            "paths_redacted": bool(redactor.paths),
        }
        data["exit_reason"] = exit_reason(data)
        return cls(run_dir, command, redact_data(data, redactor))

    @classmethod
    def load(cls, run_dir: str) -> Report:
        """The run's report.json, checked against the schema; anything else is one line (UsageFailure)."""
        path = os.path.join(run_dir, "report.json")
        if not os.path.lexists(path):
            raise UsageFailure(f"{run_dir} holds no report.json (not an aoti-bisect run directory?)")
        try:
            data = RunFolder(run_dir).read_json("report.json", MAX_REPORT_BYTES)
        except OSError as exc:
            raise UsageFailure(f"cannot read {path}: {exc.strerror}")
        # The record checks the fields it takes; a field only a renderer indexes (a compile count, a vector
        # ISA) is checked by rendering once: one line, never a traceback.
        try:
            report = cls(run_dir, list(data.get("command") or []) if isinstance(data, dict) else [], data)
            render_markdown(report.record)
            report.headline()
        except NewerSchema as exc:
            raise UsageFailure(f"{path} has {exc}")
        except Malformed as exc:
            raise UsageFailure(f"{path} is malformed: {printable(str(exc))[:300]}")
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
        self.write_markdown(None)

    def write_markdown(self, minified: Optional[Minified]) -> None:
        atomic_write(os.path.join(self.run_dir, "report.md"), valid_utf8(render_markdown(self.record, minified)))

    def headline(self) -> str:
        """One line for the terminal; control characters from the child are escaped."""
        r = self.record
        c = r.culprit
        line = f"verdict: {verdict_words(r.verdict)}"
        if r.signature:
            line += f" | {r.signature.kind} in {r.signature.phase}"
        line += (" | the repro could not run here" if r.reproduction.could_not_run
                 else f" | {r.reproduction.failures}/{r.reproduction.runs} runs failed")
        if r.masked:
            line += " | masked at baseline"
        if c.kind is CulpritKind.KERNEL:
            line += f" | culprit kernel: {c.kernel}"
            where = [f"{os.path.basename(s.path)}:{s.line}" for s in (c.origin.lines if c.origin else ())]
            line += f" (from {', '.join(where)})" if where else ""
        elif c.kind is CulpritKind.MODEL_INPUT:
            line += f" | culprit: {c.who()}"
        elif c.kind:
            line += f" | culprit: {c.kind}" + (f" ({c.who()})" if c.kernel or c.input_name or c.user_name or c.op
                                               else "")
        if not r.complete:
            line += " | INTERRUPTED: partial report"
        return printable(line)


def minified_record(run_dir: str, redactor: Redactor) -> Optional[Minified]:
    """minify's record of the run, redacted; None where minify has not run, or left nothing it could have
    written (a link, not JSON, a field of the wrong type): the report then has no "Minified repro" section."""
    try:
        return Minified.from_json(redactor.data(RunFolder(run_dir).read_json(MINIFY_RECORD)))
    except (RunFolderError, OSError, Malformed):
        return None


def rewrite_markdown(run_dir: str) -> None:
    """report.md again from report.json and minify's record: the last thing `aoti-bisect minify` does, so that
    the report's "Minified repro" section and next steps say what minify made."""
    report = Report.load(run_dir)
    report.write_markdown(minified_record(run_dir, process_redactor(report.record.paths_redacted)))


def culprit_json(c: Culprit) -> dict:
    """report.json's `culprit`: each fact as a sentence (`evidence`) and as data (`facts`)."""
    tensors = [t for f in c.evidence for t in f.tensors()]
    return {"kind": str(c.kind), "kernel": c.kernel, "summary": render(c.headline),
            "conviction": render(c.headline, origins=False),
            "input_index": c.input_index, "input_name": c.input_name, "user_name": c.user_name,
            "evidence": [render(f) for f in c.evidence], "facts": [fact_json(f) for f in c.evidence],
            "stats": [tensor_json(t) for t in tensors], "probes": c.probes, "op": c.op,
            "convicted_by": [entry_json(e) for e in c.convicted_by], "gaps": [g.to_json() for g in c.gaps],
            "origin": c.origin.to_json() if c.origin else None,
            "kernel_origins": {name: o.to_json() for f in c.evidence for name, o in f.origins}}


def entry_json(e: Entry) -> dict:
    """One entry of the evidence ledger (diagnose/judge.py): its kind, the stage and run that saw it, what it names."""
    return {**e.to_json(), "text": render(e.fact)}


def stage_json(stage: Stage) -> dict:
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
