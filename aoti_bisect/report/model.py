"""The report: report.json (the record, schema below) and report.md rendered from it. It owns the exit code."""
from __future__ import annotations

import datetime as _dt
import json
import os
from dataclasses import dataclass, field
from typing import Optional

from .. import __version__
from ..diagnose.findings import Verdict
from ..exits import (
    EXIT_INCONCLUSIVE,
    EXIT_INTERRUPTED,
    EXIT_NOT_REPRODUCED,
    EXIT_REPRODUCED,
)
from ..files import atomic_write, read_text
from .excerpt import log_excerpt
from .markdown import render_markdown
from .redact import Redactor

SCHEMA_VERSION = 1

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
                      redactor: Redactor = Redactor()) -> "Report":
        sig = outcome.signature
        culprit = outcome.culprit
        c_json = None
        if culprit is not None:
            c_json = culprit.to_json()
            c_json["source"] = ({"path": outcome.source[0], "excerpt": outcome.source[1]}
                                if outcome.source else None)
            c_json["source_nodes"] = outcome.source_nodes or None
        stages = []
        for stage in outcome.stages:
            s = stage.to_json()
            s["rerun_script"] = _read(s["rerun"][0]) if s["rerun"] else None
            log = s["failing_log"] or (s["logs"][0] if s["logs"] else None)
            s["excerpt"] = log_excerpt(log) if log else None
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
            "summary": outcome.summary,
            "signature": sig.to_json() if sig else None,
            "reproduction": outcome.baseline.to_json(),
            "stages": stages,
            "culprit": c_json or {"kind": None, "kernel": None, "evidence": []},
            "next_steps": outcome.next_steps,
            "environment": environment or {},
            "run_dir": run_dir,
        }
        data["exit_reason"] = exit_reason(data)
        return cls(run_dir, command, redact_data(data, redactor))

    @classmethod
    def load(cls, run_dir: str) -> "Report":
        with open(os.path.join(run_dir, "report.json")) as f:
            data = json.load(f)
        return cls(run_dir, data.get("command", []), data)

    @property
    def exit_code(self) -> int:
        if not self.data.get("complete", True):
            return EXIT_INTERRUPTED
        return VERDICT_EXIT[Verdict(self.data["verdict"])]

    def write(self) -> None:
        atomic_write(os.path.join(self.run_dir, "report.json"), json.dumps(self.data, indent=2))
        atomic_write(os.path.join(self.run_dir, "report.md"), render_markdown(self.data))

    def headline(self) -> str:
        d = self.data
        c = d["culprit"]
        line = f"verdict: {d['verdict']}"
        if d.get("signature"):
            s = d["signature"]
            line += f" | {s['kind']} in {s['phase']}"
        r = d["reproduction"]
        line += f" | {r['failures']}/{r['runs']} runs failed"
        if c and c.get("kind") == "kernel":
            line += f" | culprit kernel: {c['kernel']}"
        elif c and c.get("kind") == "model_input":
            line += f" | culprit: model input {c['input_index']} ({c['input_name']})"
        elif c and c.get("kind"):
            line += f" | culprit: {c['kind']}" + (f" ({c['kernel']})" if c.get("kernel") else "")
        if not d.get("complete", True):
            line += " | INTERRUPTED: partial report"
        return line


def _read(path: str) -> str:
    try:
        return read_text(path).strip()
    except OSError:
        return f"(missing: {path})"


def redact_data(data: dict, redactor: Redactor) -> dict:
    """Every string of the report goes through the redactor: the JSON is the only source of the Markdown."""
    return json.loads(redactor(json.dumps(data)))


