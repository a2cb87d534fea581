"""The report: report.json (the record, schema below) and report.md rendered from it. It owns the exit code."""
from __future__ import annotations

import datetime as _dt
import json
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Optional

from .. import __version__
from ..aoti.hook_record import CompileCounts, CompiledAhead
from ..diagnose.advice import Step
from ..diagnose.findings import CulpritKind, Entry, Findings, Stage
from ..exits import (
    EXIT_INCONCLUSIVE,
    EXIT_INTERRUPTED,
    EXIT_NOT_REPRODUCED,
    EXIT_REPRODUCED,
    UsageFailure,
)
from ..files.own import NotOwnFile, read_own_text
from ..files.runfolder import RunFolder, RunFolderError
from ..files.write import atomic_write, valid_utf8
from ..text import printable
from ..verdict import Verdict
from . import record
from .excerpt import log_excerpt
from .facts import fact_record, render, tensor_record
from .markdown import minify_step, render_markdown, verdict_words
from .record import Malformed, Minified, NewerSchema, ReportRecord, frozen
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


@dataclass(frozen=True)
class Report:
    """report.json as its typed record (`record`, what is written and what every reader reads), in its run folder."""
    run_dir: str
    record: ReportRecord

    @property
    def data(self) -> dict:
        """report.json as written: what --json prints and a bundle's secret spans are recorded from."""
        return self.record.to_json()

    @classmethod
    def from_findings(cls, run_dir: str, command: list[str], outcome: Findings, environment: Optional[dict] = None,
                      redactor: Redactor = Redactor(), packages: Sequence[dict] = (),
                      compiles: Sequence[CompileCounts] = (), reuse: Optional[str] = None,
                      ahead: Sequence[CompiledAhead] = ()) -> Report:
        """`packages`: aoti/hook_record.package_rows of each stage, what the hooked runs compiled and loaded;
        `compiles`: aoti/hook_record.compile_counts of each stage, in order; `reuse`: the harness's reuse mode;
        `ahead`: aoti/hook_record.ahead_row of each compile-only run. Every string goes through the redactor."""
        built = ReportRecord(
            record.SCHEMA_VERSION, __version__, _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"), tuple(command),
            outcome.verdict, not outcome.interrupted, render(outcome.summary), outcome.signature,
            record.Rate.of(outcome.baseline, outcome.verdict is Verdict.ERROR and outcome.baseline.runs == 0),
            tuple(stage_record(stage, compiles[i] if i < len(compiles) else None, redactor)
                  for i, stage in enumerate(outcome.stages)),
            culprit_record(outcome) if outcome.culprit is not None else record.Culprit(),
            render(outcome.masked) or None, outcome.verdict_s, outcome.verdict_runs,
            tuple(entry_record(e) for e in outcome.ledger), tuple(record.Package(**row) for row in packages),
            _constants(outcome.constants), reuse, tuple(ahead),
            tuple(minify_step(run_dir, command) if step is Step.MINIFY else step for step in outcome.next_steps),
            record.Environment.from_json(environment or {}, "environment."), run_dir, bool(redactor.paths),
            next((i for i, step in enumerate(outcome.next_steps) if step is Step.MINIFY), None))
        return cls(run_dir, redactor.data(built))

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
            report = cls(run_dir, ReportRecord.from_json(data))
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
        if not self.record.complete:
            return EXIT_INTERRUPTED
        return VERDICT_EXIT[self.record.verdict]

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


def culprit_record(outcome: Findings) -> record.Culprit:
    """report.json's `culprit`: each fact as a sentence (`evidence`) and as data (`facts`), and its source."""
    c = outcome.culprit
    assert c is not None
    origins = {name: o for f in c.evidence for name, o in f.origins}
    return record.Culprit(
        c.kind, c.kernel, render(c.headline), render(c.headline, origins=False), c.input_index, c.input_name,
        c.user_name, tuple(render(f) for f in c.evidence), tuple(fact_record(f) for f in c.evidence),
        tuple(tensor_record(t) for f in c.evidence for t in f.tensors()), tuple(tuple(p) for p in c.probes), c.op,
        tuple(entry_record(e) for e in c.convicted_by), tuple(record.Gap(**vars(g)) for g in c.gaps), c.origin,
        MappingProxyType(origins), record.KernelSource(*outcome.source) if outcome.source else None,
        outcome.source_nodes or None,
        record.Precision.told(c.precision.cause, c.precision.control, c.kind) if c.precision else None)


def entry_record(e: Entry) -> record.LedgerEntry:
    """One entry of the evidence ledger (diagnose/judge.py): its kind, the stage and run that saw it, what it names."""
    return record.LedgerEntry(e.kind, e.stage, e.run, e.names, render(e.fact))


def stage_record(stage: Stage, compiles: Optional[CompileCounts], redactor: Redactor) -> record.Stage:
    """One stage's row, with its first run's exact command and its (first failing) log's excerpt."""
    failures = stage.failures
    logs = tuple(r.log_path for r in stage.results)
    rerun = tuple(os.path.join(r.run_dir, "rerun.sh") for r in stage.results[:1])
    failing_log = failures[0].log_path if failures else None
    log = failing_log or (logs[0] if logs else None)
    return record.Stage(
        str(stage.name), MappingProxyType(dict(stage.env)), stage.recompiled, stage.rate.runs, stage.rate.failures,
        record.Rate.of(stage.rate), render(stage.finding), fact_record(stage.finding) if stage.finding else None,
        stage.skipped, logs, rerun, failing_log,
        MappingProxyType(dict(Counter(str(r.signature.kind) for r in failures if r.signature))), stage.tool,
        compiles, _read(rerun[0]) if rerun else None,
        log_excerpt(log, redactor=redactor) if log else None)


def _constants(constants: dict) -> Optional[record.Constants]:
    """diagnose/constants.py's rows, each finding rendered."""
    if not constants:
        return None
    rows = {key: tuple(frozen({**row, "finding": render(row["finding"])}) for row in constants.get(key) or ())
            for key in ("nonfinite", "outside_domain", "stale")}
    return record.Constants(constants["read"], tuple(constants.get("not_read") or ()),
                     tuple(frozen(row) for row in constants.get("skipped") or ()), **rows)


def _read(path: str) -> str:
    try:
        return read_own_text(path).strip()
    except NotOwnFile:
        return f"(not read, a link: {path})"
    except OSError:
        return f"(missing: {path})"
