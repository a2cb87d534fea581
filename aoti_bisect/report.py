"""The report: report.json (the record, schema below) and report.md rendered from it. It owns the exit code."""
from __future__ import annotations

import datetime as _dt
import json
import os
import re
from dataclasses import dataclass, field
from typing import Optional

from tabulate import tabulate

from .classify import collapse_repeats
from .records import EXIT_INTERRUPTED, VERDICT_EXIT, Verdict
from .redact import Redactor

SCHEMA_VERSION = 1
MD_LIMIT = 65536


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
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "command": command,
            "verdict": outcome.verdict.value,
            "complete": not outcome.interrupted,
            "summary": outcome.summary,
            "signature": sig.to_json() if sig else None,
            "reproduction": outcome.baseline.to_json(),
            "stages": stages,
            "culprit": c_json or {"kind": None, "kernel": None, "evidence": []},
            "next_steps": outcome.next_steps,
            "environment": environment or {},
            "run_dir": run_dir,
        }
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
        tmp = os.path.join(self.run_dir, "report.json.tmp")
        with open(tmp, "w") as f:
            json.dump(self.data, f, indent=2)
        os.replace(tmp, os.path.join(self.run_dir, "report.json"))
        with open(os.path.join(self.run_dir, "report.md"), "w") as f:
            f.write(render_markdown(self.data))

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


def md_cell(text: object) -> str:
    """Table cell text that cannot break a GFM table or open a code span."""
    s = " ".join(str(text if text is not None else "").split())
    return s.replace("\\", "\\\\").replace("|", "\\|").replace("`", "\\`").replace("<", "&lt;")


def _fence(text: str) -> str:
    """A code fence longer than any backtick run inside the text."""
    longest = run = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    return "`" * max(3, longest + 1)


def _code(text: str, lang: str = "") -> str:
    f = _fence(text)
    return f"{f}{lang}\n{text}\n{f}"


def rate_cell(r: dict) -> str:
    lo, hi = r["ci95"]
    if r["runs"] == 0:
        return "no runs"
    return f"{r['failures']}/{r['runs']} ({r['rate']:.0%}, 95% CI {lo:.0%}–{hi:.0%})"


def render_markdown(d: dict) -> str:
    c = d.get("culprit") or {}
    sig = d.get("signature") or {}
    out = [f"# aoti-bisect report: {d['verdict']}", ""]
    if not d.get("complete", True):
        out += ["> **Interrupted**: this report covers only the runs that finished; later stages are missing.", ""]
    summary = [("Verdict", d["verdict"]), ("Failure", f"{sig.get('kind', '-')} in phase {sig.get('phase', '-')}"),
               ("Message", sig.get("message", "-")), ("Reproduction", rate_cell(d["reproduction"]))]
    if c.get("kind"):
        who = c.get("kernel") or (f"model input {c.get('input_index')} ({c.get('input_name')})"
                                  if c["kind"] == "model_input" else c.get("input_name") or "-")
        summary.append(("Culprit", f"{c['kind']}: {who}"))
        if c.get("summary"):
            summary.append(("Evidence", c["summary"]))
    out.append(tabulate([(k, md_cell(v)) for k, v in summary], headers=["", ""], tablefmt="github"))
    out += ["", "## Stages", ""]
    rows = []
    for s in d["stages"]:
        env = " ".join(f"{k}={v}" for k, v in s["env"].items()) or "(none)"
        rows.append((s["name"], md_cell(env), "yes" if s["recompiled"] else "no",
                     s["runs"], s["failures"], md_cell(s["skipped"] and f"skipped: {s['skipped']}" or s["finding"])))
    out.append(tabulate(rows, headers=["stage", "flags", "recompiled", "runs", "failures", "finding"],
                        tablefmt="github"))
    if c.get("evidence"):
        out += ["", "## Evidence chain", ""] + [f"{i}. {md_cell(e)}" for i, e in enumerate(c["evidence"], 1)]
    if c.get("source_nodes"):
        out += ["", f"Source nodes: {md_cell(c['source_nodes'])}"]
    if c.get("source"):
        out += ["", f"## Culprit source (`{md_cell(os.path.basename(c['source']['path']))}`)", "",
                _code(c["source"]["excerpt"], "cpp" if c["source"]["path"].endswith(".cpp") else "python")]
    if d.get("next_steps"):
        out += ["", "## Next steps", ""] + [f"- {md_cell(s)}" for s in d["next_steps"]]
    out += ["", "## Reproduce each stage", ""]
    for s in d["stages"]:
        if s.get("rerun_script"):
            out += [f"**{s['name']}**", "", _code(s["rerun_script"], "sh"), ""]
    env = d.get("environment") or {}
    if env:
        out += ["## Environment", "", tabulate([(k, md_cell(v)) for k, v in env.items()], headers=["", ""],
                                               tablefmt="github"), ""]
    text = "\n".join(out) + "\n"
    logs = [_details(s) for s in d["stages"] if s.get("excerpt")]
    if logs:
        text += "\n## Log excerpts\n\n"
    for name, block in logs:
        # Whole blocks or none: a cut inside a <details> or a fence would break the rest of the page.
        if len(text) + len(block) + 200 < MD_LIMIT:
            text += block
        else:
            text += f"- log excerpt of stage {name} left out: the report is at GitHub's issue size limit\n"
    if len(text) > MD_LIMIT:
        text = text[: MD_LIMIT - 200] + "\n\n*(report truncated to fit a GitHub issue body)*\n"
    return text


def _details(stage: dict) -> tuple[str, str]:
    e = stage["excerpt"]
    parts = [f"<details><summary>{md_cell(stage['name'])}: {md_cell(os.path.basename(os.path.dirname(e['log'])))} "
             f"({e['bytes']} bytes)</summary>", ""]
    if e["key_lines"]:
        parts += ["Key lines:", "", _code("\n".join(e["key_lines"]), "text"), ""]
    if e["head"]:
        parts += ["Head:", "", _code(e["head"], "text"), ""]
    parts += ["Tail:", "", _code(e["tail"], "text"), "", "</details>", "", ""]
    return stage["name"], "\n".join(parts)


def _read(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read().strip()
    except OSError:
        return f"(missing: {path})"


def redact_data(data: dict, redactor: Redactor) -> dict:
    """Every string of the report goes through the redactor: the JSON is the only source of the Markdown."""
    return json.loads(redactor(json.dumps(data)))


_KEY_LINE = re.compile(r"Error|error:|Exception|Assertion|Fatal Python error|Segmentation fault|Aborted|"
                       r"terminate called|_launch: |At least one|unmatched|non-finite|illegal|killed|dropped here")
EXCERPT_READ = 256 << 10
LINE_CHARS = 240


def log_excerpt(path: str, head_lines: int = 15, tail_lines: int = 40, key_lines: int = 20) -> dict:
    """Key lines first, then head and tail; reads at most 2 x 256 KiB of the log whatever its size."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(EXCERPT_READ).decode("utf-8", errors="replace")
            if size > 2 * EXCERPT_READ:
                f.seek(size - EXCERPT_READ)
                tail = f.read().decode("utf-8", errors="replace")
                tail = tail[tail.find("\n") + 1:]
            else:
                tail = head[len(head) // 2:] if size > EXCERPT_READ else head
                head = head if size <= EXCERPT_READ else head[: len(head) // 2]
    except OSError:
        return {"log": path, "bytes": 0, "key_lines": [], "head": "", "tail": "(log missing)"}
    lines_h, lines_t = head.splitlines(), tail.splitlines()
    whole = lines_h if size <= EXCERPT_READ else lines_h + lines_t
    keys = [line for line in collapse_repeats(whole) if _KEY_LINE.search(line)]
    clip = lambda ls: "\n".join(l if len(l) <= LINE_CHARS else l[:LINE_CHARS] + " [...]" for l in ls)  # noqa: E731
    return {"log": path, "bytes": size, "key_lines": [l[:LINE_CHARS] for l in dict.fromkeys(keys[-key_lines:])],
            "head": clip(lines_h[:head_lines]) if len(whole) > head_lines + tail_lines else "",
            "tail": clip(whole[-tail_lines:])}
