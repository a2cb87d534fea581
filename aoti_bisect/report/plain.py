"""The report as plain text for a terminal (`aoti-bisect report RUN_DIR --format text`), and the lines a run ends
with on stdout: the answer and the next commands. report.md stays GitHub's Markdown (markdown.py), whose escapes
(`\\*`, `&lt;`) a terminal would show as typed; both render the same first screen (markdown.first_screen)."""
from __future__ import annotations

import os
import shlex
import textwrap
from typing import Optional

from tabulate import tabulate

from ..text import printable
from .markdown import (
    NOT_CONVICTED,
    WRAP,
    _short,
    c_lines,
    cause,
    evidence_chain,
    first_screen,
    next_commands,
    next_steps,
    verdict_words,
)
from .record import Minified, ReportRecord

FINDING_WIDTH = 64  # a terminal's 100 columns less the stage table's other columns (at most 36)


def _wrapped(text: str, first: str, rest: str) -> list[str]:
    return textwrap.wrap(" ".join(text.split()), WRAP, initial_indent=first, subsequent_indent=rest,
                         break_long_words=False, break_on_hyphens=False) or [first.rstrip()]


def render_text(r: ReportRecord, minified: Optional[Minified] = None) -> str:
    """The first screen, the evidence chain, the stage table and the next steps; the rest is report.md's."""
    out = [f"aoti-bisect report: {verdict_words(r.verdict)}"]
    if not r.complete:
        out.append("INTERRUPTED: this report covers only the runs that finished; later stages are missing.")
    items = first_screen(r, minified)
    width = max(len(key) for key, _ in items) + 2
    out.append("")
    for key, value in items:
        out += _wrapped(value, f"{key + ':':<{width}}", " " * width)
    chain = evidence_chain(r.culprit)
    if chain:
        out += ["", "Evidence chain:"]
        out += [line for i, e in enumerate(chain, 1) for line in _wrapped(e, f"{i:>2}. ", "    ")]
    rows = [(s.name, s.runs, s.failures, _short((s.skipped and f"skipped: {s.skipped}") or s.finding, FINDING_WIDTH)[0])
            for s in r.stages]
    out += ["", tabulate(rows, headers=["stage", "runs", "failures", "finding"], tablefmt="simple",
                         disable_numparse=True)]
    steps = next_steps(r, minified)
    if steps:
        out += ["", "Next steps:"] + [line for step in steps for line in _wrapped(step, "  - ", "    ")]
    if r.run_dir:
        out += [""] + _wrapped(f"Each stage in full, the culprit's source, packages, environment and logs: "
                               f"{os.path.join(r.run_dir, 'report.md')}; all of it as data: "
                               f"{os.path.join(r.run_dir, 'report.json')}", "", "")
    return printable("\n".join(out)) + "\n"


def answer(r: ReportRecord, headline: str, minified: Optional[Minified], terminal: bool) -> list[str]:
    """What a run prints on stdout as its last lines: the verdict, the user's lines the culprit came from, the
    evidence that convicts it (without a culprit, the advice), where the report is and the exact next commands."""
    lines = [headline]
    lines += [f"  {os.path.basename(line.path)}:{line.line}: {line.code}" for line in c_lines(r.culprit) if line.code]
    if r.culprit.conviction:  # a precision difference or an unknown culprit convicts nothing: what was found
        label = "found" if r.culprit.kind in NOT_CONVICTED else "convicted by"
        lines.append(f"{label}: {r.culprit.conviction}")
    lines += [f"cause: {text}" for _, text in cause(r.culprit)]  # where rounding may explain the gap
    if r.culprit.kind is None:  # no culprit: the advice is the answer (a failure outside AOTI, what to try next)
        lines += [f"advice: {step}" for step in next_steps(r, minified)]
    if minified and minified.repro:
        lines.append(f"minified repro: {minified.repro}")
    if r.run_dir:
        report = os.path.join(r.run_dir, "report.md")
        read_here = f" (to read it here: aoti-bisect report {shlex.quote(r.run_dir)} --format text)" if terminal else ""
        lines.append(f"report: {report}{read_here}")
    lines += [f"next: {command}" for command in next_commands(r, minified)]
    return [printable(line) for line in lines]
