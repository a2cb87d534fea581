"""report.md: the report's JSON rendered as GitHub-flavoured Markdown, and the escaping every Markdown page here
uses."""
from __future__ import annotations

import itertools
import os
import re
import shlex
import sys
import textwrap
import urllib.parse
from collections.abc import Mapping
from typing import Optional

from tabulate import tabulate

from ..aoti.hook_record import CompileCounts
from ..diagnose.facts import FactKind
from ..diagnose.findings import Cause, Control, CulpritKind, StageName
from ..text import html_text, longest_backtick_run, md_cell, md_code, printable
from ..verdict import Verdict
from .facts import told
from .record import Culprit, Environment, GapCause, Minified, ReportRecord, Stage, TensorStat

MD_LIMIT = 65536
# How the hook's redirect.py served a package (aoti/hook_record.py's PackageEvent.redirect).
# The next step that names `aoti-bisect minify` (minify_step), found again once minify has written a repro.
MINIFY_STEP = "Cut the failing program down to a standalone repro (repro.py + inputs.pt):"
_REDIRECTS = {"private": "at a private path in its run folder", "instrumented": "loaded an instrumented copy"}


def _table(rows: list, headers: list[str]) -> str:
    # disable_numparse: a cell is shown as given; tabulate would print a Python version "3.10" as 3.1.
    return tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True)


def _fence(text: str) -> str:
    """A code fence longer than any backtick run inside the text."""
    return "`" * max(3, longest_backtick_run(text) + 1)


def _code(text: str, lang: str = "") -> str:
    f = _fence(text)
    return f"{f}{lang}\n{text}\n{f}"


def rate_cell(r: Mapping) -> str:
    """A rate as a report or a night shows it; `r` is report.json's or a night's {runs, failures, rate, ci95}."""
    lo, hi = r["ci95"]
    if r["runs"] == 0:
        return "could not run" if r.get("could_not_run") else "no runs"
    return f"{r['failures']}/{r['runs']} ({r['rate']:.0%}, 95% CI {lo:.0%}–{hi:.0%})"


# GitHub shows a table as wide as its longest row, and a line wider than the page scrolls sideways: table
# cells are cut at these widths (the whole text follows the table), prose is wrapped at WRAP.
TABLE_LINE = 160
FINDING_CELL = 95
WRAP = 100


def _short(text: str, width: int) -> tuple[str, bool]:
    """One line of at most `width` characters, and whether it was cut."""
    s = " ".join(str(text).split())
    if len(s) <= width:
        return s, False
    cut = s[: width - 1]
    return (cut.rsplit(" ", 1)[0] if " " in cut[width // 2:] else cut).rstrip(" ,;:") + "…", True


# What would start a list, heading, quote or setext underline at the start of a line (and so end the item).
_BLOCK_START = re.compile(r"(?:[-+*]|#{1,6}|\d{1,9}[.)])(?=[ \t]|$)|[>=]|[-*_][-*_ \t]*$")


def _item(text: str, bullet: str = "- ") -> list[str]:
    """A list item, wrapped: continuation lines are indented so that they stay in the item, and a wrapped
    line that begins like a block (`- x`, `# x`, `1. x`) has that first character escaped."""
    lines = textwrap.wrap(text, WRAP - len(bullet), break_long_words=False, break_on_hyphens=False) or [""]
    indent = " " * len(bullet)
    return [bullet + lines[0]] + [indent + _unblock(l) for l in lines[1:]]


def _unblock(line: str) -> str:
    m = _BLOCK_START.match(line)
    if not m:
        return line
    # The marker's first punctuation: `-`, `#`, or the `.` of `1.` (a backslash before a digit shows).
    at = len(m.group()) - 1 if line[0].isdigit() else 0
    return line[:at] + "\\" + line[at:]


def render_markdown(report: ReportRecord | Mapping, minified: Optional[Minified] = None) -> str:
    """report.md from report.json's record (or its data), and from minify/minify.json's record where minify ran, in
    layers: the first screen, the evidence, the stages, then what only some readers open, folded (<details>); the
    rest stays in report.json and the bundle. One function per section; at most MD_LIMIT characters."""
    r = report if isinstance(report, ReportRecord) else ReportRecord.from_json(report)
    sections = [_title(r), _first_screen(r, minified), _evidence(r), _gaps(r), _stages(r), _culprit_source(r),
                _next_steps(r, minified), _minified(minified), _constants(r), _packages(r),
                _environment_section(r)]
    # Logs and messages are the child's bytes: escaped here, a report shown with cat cannot drive the terminal.
    text = printable("\n".join(line for section in sections for line in section) + "\n")
    return _with_logs(text, r)


def _title(r: ReportRecord) -> list[str]:
    out = [f"# aoti-bisect report: {md_cell(verdict_words(r.verdict))}", ""]
    if not r.complete:
        out += ["> **Interrupted**: this report covers only the runs that finished; later stages are missing.", ""]
    return out


def verdict_words(verdict: Verdict) -> str:
    return verdict.value.replace("_", " ")


def first_screen(r: ReportRecord, minified: Optional[Minified] = None) -> list[tuple[str, str]]:
    """What failed, who did it, the line that convicts, how often, where it ran, how to run it again and what to
    do next, as (label, plain text) pairs: report.md and the terminal's text render the same screen."""
    sig, c = r.signature, r.culprit
    items = [("Verdict", verdict_line(r))]
    if sig and sig.message:
        items.append(("Message", sig.message))
    if c.kind:
        items.append(("Culprit", f"{c.kind}: {c.who()}"))
        if culprit_source(c):
            items.append(("Source", culprit_source(c)))
        elif c.source_nodes:
            items.append(("FX nodes", c.source_nodes))
        items += convicted_by(c)
        items += cause(c)
    items.append(("Rates", _rates(r)))
    if r.verdict_s is not None:
        runs = f", {r.verdict_runs} run(s)" if r.verdict_runs is not None else ""
        items.append(("Time to verdict", f"{r.verdict_s:g} s from the first run{runs}"))
    if r.masked:
        items.append(("Masked", r.masked))
    items.append(("Ran on", environment_line(r)))
    rerun = r.stages[0] if r.stages and r.command else None
    if rerun is not None:
        items.append(("Rerun", stage_command(rerun, r.command, " ")))
    commands = next_commands(r, minified)
    if commands:
        items.append(("Next", "; ".join(commands)))
    return items


# Where a rounding gap arises, or what explains a failure no culprit was convicted of (random draws): said, not a
# conviction.
NOT_CONVICTED = (CulpritKind.PRECISION, CulpritKind.UNKNOWN)


def convicted_by(c: Culprit) -> list[tuple[str, str]]:
    """The one line of evidence that convicts the culprit, without its source lines (the screen names them once)."""
    if not c.conviction:
        return []
    if c.kind in NOT_CONVICTED:
        return [("Found", c.conviction)]
    runs = ", ".join(f"{e.run} ({e.stage}, {e.kind})" for e in c.convicted_by)
    return [("Convicted by", c.conviction + (f" [evidence from run {runs}]" if runs else ""))]


# The source of rounding each control recompile removes, and the package it builds without it.
_TESTED = {Cause.EAGER_ROUNDING: ("eager's intermediate rounding", "rounding as eager does (emulate_precision_casts)"),
           Cause.TF32: ("TF32's rounding of the matmul's operands", "with TF32 matmuls off")}


def cause(c: Culprit) -> list[tuple[str, str]]:
    """Where rounding may explain the gap, its cause as report.json's culprit.precision holds it, in one line."""
    p = c.precision
    if p is None:
        return []
    source, built = _TESTED[p.tested]
    if p.cause is GapCause.MISCOMPILE:
        return [("Cause", f"a miscompile: the package built {built} still misses eager beyond the walk's tolerance, "
                          f"so the gap is not {source}")]
    if p.cause is not GapCause.UNKNOWN:
        return [("Cause", f"{source}: the package built {built} clears the gap (control recompile)")]
    why = {None: f"the package built {built} was not run (the precision stage did not run)",
           Control.INCONCLUSIVE: f"the package built {built} says nothing of the gap (the precision stage says why)",
           Control.STILL_FAILS: f"the package built {built} still fails the script's check, so the gap is not "
                                f"{source} alone"}[p.control]
    return [("Cause", f"unknown: {why}")]


def verdict_line(r: ReportRecord) -> str:
    """The verdict with the failure's kind and phase; without a failure, what the runs showed instead."""
    sig, rate = r.signature, r.reproduction
    if sig:
        return f"{verdict_words(r.verdict)}: {sig.kind} in phase {sig.phase}"
    if r.verdict is Verdict.NOT_REPRODUCED:
        return f"not reproduced: none of {rate.runs} run(s) failed"
    return f"{verdict_words(r.verdict)}: {r.summary}" if r.summary else verdict_words(r.verdict)


def environment_line(r: ReportRecord) -> str:
    """What a PyTorch maintainer asks first, on one line: torch and the CUDA it was built with, the device (GPU and
    driver), the compiler, Python and the OS."""
    env = r.environment
    if not env.torch:
        return f"torch {'(not probed)' if not env.torch_error else 'not importable'}, device {r.device}"
    build = f"CUDA {env.cuda_runtime}" if env.cuda_runtime else "CPU-only build"
    parts = [f"torch {env.torch} ({build}), device {r.device}", env.cxx_version, env.python and f"Python {env.python}",
             env.os]
    return "; ".join(p for p in parts if p)


def next_commands(r: ReportRecord, minified: Optional[Minified] = None) -> list[str]:
    """The commands the run asks for next, exactly: minify where a step asks for it and minify has not run, then the
    bundle for the ticket (the report, logs, generated sources and the minified repro, redacted)."""
    if not r.run_dir or r.verdict is Verdict.NOT_REPRODUCED:
        return []
    minify = not minified and r.minify_step is not None
    return ([minify_command(r.run_dir, r.command)] if minify else []) + \
        [f"aoti-bisect report {shlex.quote(r.run_dir)} --bundle"]


def _first_screen(r: ReportRecord, minified: Optional[Minified]) -> list[str]:
    out = []
    for key, value in first_screen(r, minified):
        if key == "Rerun":
            link = _run_link(r.stages[0].rerun[0], r.run_dir) if r.stages[0].rerun else None
            text = md_code(value) + (f" ([rerun.sh](<{link}>) is the exact command)" if link else "")
        elif key == "Source" and c_lines(r.culprit):
            text = "; ".join(f"line {line.line} of {md_cell(os.path.basename(line.path))}"
                             + (f": {md_code(line.code)}" if line.code else "") for line in c_lines(r.culprit))
        elif key == "Next":
            text = "; ".join(md_code(command) for command in next_commands(r, minified))
        else:
            text = md_cell(value)
        out += _item(f"**{key}**: {text}")
    return out


def _rates(r: ReportRecord) -> str:
    parts = [f"baseline {rate_cell(vars(r.reproduction))}"]
    parts += [f"{s.name} {s.failures}/{s.runs}" for s in r.stages[1:] if s.runs]
    return "; ".join(parts)


def c_lines(c: Culprit) -> tuple:
    return c.origin.lines if c.origin else ()


def culprit_source(c: Culprit) -> str:
    """The culprit kernel's lines in the user's code ("line 11 of model.py: `...`"), or its FX nodes, saying so."""
    o = c.origin
    if o and o.lines:
        return "; ".join(f"line {line.line} of {os.path.basename(line.path)}"
                         + (f": `{line.code}`" if line.code else "") for line in o.lines)
    if o and o.nodes:
        return f"FX nodes {', '.join(o.nodes)} (no source line recorded)"
    return ""


def evidence_chain(c: Culprit) -> list[str]:
    """The evidence sentences, less those that only show again tensors an earlier one showed (the walk says a
    kernel wrote a bad buffer as an ancestor, then as the culprit), and less the culprit's source lines, which the
    first screen's Source says: report.json keeps them all."""
    if len(c.facts) != len(c.evidence):
        return list(c.evidence)
    shown: set = set()
    chain = []
    for sentence, fact in zip(c.evidence, c.facts):
        if fact.shown and fact.kind is not FactKind.CONVICTION and shown.issuperset(fact.shown):
            continue
        shown.update(fact.shown)
        origin = (fact.source or {}).get(c.kernel or "")
        if c.kernel and origin is not None and origin == c.origin and origin.lines:
            sentence = sentence.replace(told(c.kernel, origin), "")
        chain.append(sentence)
    return chain


def _evidence(r: ReportRecord) -> list[str]:
    """The chain from what the script caught back to the culprit, and the walk as a diagram GitHub draws."""
    chain = evidence_chain(r.culprit)
    if not chain:
        return []
    out = ["", "## Evidence chain", ""] + [line for i, e in enumerate(chain, 1) for line in _item(md_cell(e), f"{i}. ")]
    diagram = kernel_chain(r.culprit)
    return out + (["", diagram] if diagram else [])


GAP_ROWS = 15  # report.json's culprit.gaps holds every row
GAP_SECTION = "## Numeric gap, kernel by kernel"


def _gaps(r: ReportRecord) -> list[str]:
    """A wrong value's walk against eager as a table: each launch's output in launch order, its gap to eager and
    both sides' gap to float64, the first beyond tolerance marked. Past GAP_ROWS rows, those around that first."""
    gaps = r.culprit.gaps
    if not gaps:
        return _no_gaps(r)
    first = next((i for i, g in enumerate(gaps) if g.state == "differs"), None)
    start = 0 if first is None or len(gaps) <= GAP_ROWS else max(0, min(first - GAP_ROWS // 2, len(gaps) - GAP_ROWS))
    shown = gaps[start:start + GAP_ROWS]
    intro = ("Each launch's output against the eager value it was held against (max abs, max rel, the largest gap "
             "in units of the last place of the larger value in the output's dtype, and the cosine similarity), and "
             "against that value run in float64: the package's max abs error and eager's own. Tolerance: "
             "assert_close's for the dtype, times 10, on max abs and max rel; **first** marks the first output "
             "beyond it." +
             (f" Rows {start + 1}-{start + len(shown)} of {len(gaps)}; all in report.json (`culprit.gaps`)."
              if len(shown) < len(gaps) else ""))
    out = ["", GAP_SECTION, "", *textwrap.wrap(intro, 100), "",
           "| # | kernel | output | eager node | gap to eager | ULP | cosine | package vs float64 | eager vs float64 "
           "| judged |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for i, g in enumerate(shown, start):
        gap = "-" if g.max_abs is None else _g(g.max_abs) + ("" if g.max_rel is None else f" (rel {_g(g.max_rel)})")
        judged = g.state + (" **first**" if i == first else "")
        out.append(f"| {g.launch} | {md_cell(_short(g.kernel, 44)[0])} | {md_cell(g.tensor)} | "
                   f"{md_cell(_short(g.node or '-', 20)[0])} | {gap} | {_g(g.ulp)} | "
                   f"{'-' if g.cosine is None else f'{g.cosine:.7g}'} | {_g(g.f64)} | {_g(g.eager_f64)} | {judged} |")
    return out


def _no_gaps(r: ReportRecord) -> list[str]:
    """Where the eager stage walked a wrong value and compared no launch's output (the package agrees with the
    exported program, or equals it run with the state as built), why: the gap is not in a kernel."""
    walked = next((s for s in r.stages if s.name == StageName.EAGER and s.runs and not s.skipped), None)
    if walked is None or not walked.finding:
        return []
    text = f"No launch's output was held against eager, so no kernel has a row: {md_cell(walked.finding)}"
    return ["", GAP_SECTION, "", *(_unblock(line) for line in textwrap.wrap(text, WRAP, break_long_words=False,
                                                                           break_on_hyphens=False))]


def _g(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:.3g}"


def _folded(summary: str, lines: list[str]) -> list[str]:
    """A <details> block: on GitHub a closed line the reader opens; `summary` is HTML, where Markdown is not read.
    The blank line after its summary lets the Markdown inside render; `</details>` needs none before it, since a
    closing tag starts an HTML block anywhere."""
    return ["", f"<details><summary>{summary}</summary>", "", *lines, "</details>"] if lines else []


def _stages(r: ReportRecord) -> list[str]:
    """The stage table, cut to the page; folded under it, each stage in full: what it adds to the first screen's
    Rerun command (its rerun.sh, linked, is the run exactly) and the finding the table cut."""
    # full: a stage's full text -> the stages it is said of (skipped for one reason: said once)
    rows, full = [], dict[str, list[str]]()
    for s in r.stages:
        finding = (s.skipped and f"skipped: {s.skipped}") or s.finding
        cell, was_cut = _short(finding, FINDING_CELL)
        rows.append((md_cell(s.name), "yes" if s.recompiled else "no", s.runs, s.failures, md_cell(cell)))
        link = _run_link(s.rerun[0], r.run_dir) if s.rerun_script and s.rerun else None
        adds = stage_command(s, (), " ").strip() if s.rerun_script else ""
        parts = ([f"adds {md_code(adds)}"] if adds else []) + ([md_cell(finding)] if was_cut else [])
        if parts:
            text = (f" ([rerun.sh](<{link}>))" if link else "") + ": " + "; ".join(parts)
            full.setdefault(text, []).append(s.name)
    items = [line for text, names in full.items() for line in _item(f"**{md_cell(', '.join(names))}**{text}")]
    return (["", "## Stages", "", _table(rows, headers=["stage", "recompiled", "runs", "failures", "finding"])]
            + _folded("Each stage in full: what it adds to the Rerun command, and its whole finding", items))


def package_groups(r: ReportRecord) -> list[dict]:
    """report.json's packages, one row per distinct package (its sha256, else its path) per stage: the actions
    with their run counts and every path it had (each run keeps its package in its own folder)."""
    groups: dict[tuple, dict] = {}
    for p in r.packages:
        g = groups.setdefault((p.stage, p.sha256 or p.path), {"stage": p.stage, "sha256": p.sha256, "paths": [],
                                                              "actions": {}, "built_here": False, "redirect": None})
        if p.path not in g["paths"]:
            g["paths"].append(p.path)
        g["actions"][p.action] = g["actions"].get(p.action, 0) + p.runs
        g["built_here"] |= p.built_here
        g["redirect"] = g["redirect"] or p.redirect
    return list(groups.values())


def _compiles(r: ReportRecord) -> list[str]:
    """How the stages' runs came by their packages, where the package table below does not say it all: a stage's one
    hooked run that compiled, or took its flag set's package, is its row there."""
    counts = [s.compiles for s in r.stages if s.compiles and s.compiles.runs]
    out = [line for c in counts if not _said_by_packages(c) for line in _item(md_cell(c.describe()))]
    # One item each for the warm forks and the compile-only runs of later stages (in slots the baseline's first run
    # left idle, run/scheduler.py), whose details report.json keeps: a run with slots to spare reads as long as one
    # without.
    warm = [f"{c.stage} {c.warm}" for c in counts if c.warm]
    if warm:
        out += _item(md_cell(f"forked from a warm interpreter (torch imported once, docs/warm.md): {', '.join(warm)}"))
    if r.compiled_ahead:
        out += _item(md_cell("compiled ahead in idle slots, for later stages: "
                             + ", ".join(row.describe() for row in r.compiled_ahead)))
    return out


def _said_by_packages(count: CompileCounts) -> bool:
    """The package table's row says it all: the stage's one hooked run compiled, or took the flag set's package."""
    return (count.hooked and count.runs == 1 and count.compiled + count.reused == 1 and not count.unhooked
            and not count.cold_because)


def _packages(r: ReportRecord) -> list[str]:
    """How each stage's runs came by their packages (compiled or reused, and why), and the packages themselves."""
    compiles, groups = _compiles(r), package_groups(r)
    if not compiles and not groups:
        return []
    rows = [(md_cell(g["stage"]), md_cell(_paths(g["paths"], r.run_dir)), md_cell((g["sha256"] or "-")[:12]),
             md_cell(", ".join(f"{action} {n}" for action, n in g["actions"].items())),
             ("yes" if g["built_here"] else "no") + (f" ({_REDIRECTS[g['redirect']]})" if g["redirect"] in _REDIRECTS
                                                     else "")) for g in groups]
    headers = ["stage", "package", "sha256", "runs that did it", "built by the run"]
    table = [_table(rows, headers=headers)] if rows else []
    return _folded(f"Compiles (--reuse {html_text(r.reuse or 'hooked')}) and packages",
                   compiles + ([""] if compiles and table else []) + table)


def _paths(paths: list, run_dir: str | None) -> str:
    """One path, or the run folders' paths of one package as one pattern (runs/*/cwd/model.pt2)."""
    shown = sorted({_package_path(p, run_dir) for p in paths})
    pattern = sorted({re.sub(r"^runs/[^/]+/", "runs/*/", p) for p in shown})
    return shown[0] if len(shown) == 1 else pattern[0] if len(pattern) == 1 else f"{shown[0]} (+{len(shown) - 1})"


def _constants(r: ReportRecord) -> list[str]:
    """Only what the constants showed: a count of zero says nothing report.json does not."""
    k = r.constants
    if k is None or not (k.findings or k.not_read):
        return []
    return (["", "## Constants", "", f"The hook read {k.read} constant(s) of the loaded package; holding NaN/Inf: "
             f"{len(k.nonfinite)}.", ""] + [f"- {md_cell(finding)}" for finding in k.findings]
            + [f"- not read: {md_cell(why)}" for why in k.not_read])


def _culprit_source(r: ReportRecord) -> list[str]:
    source = r.culprit.source
    if source is None:
        return []
    # The generated file's name is a 52-character hash: in the summary, not in a heading.
    return _folded(f"Culprit source: {html_text(r.culprit.kernel or '')} in {html_text(os.path.basename(source.path))}",
                   [_code(source.excerpt, "cpp" if source.path.endswith(".cpp") else "python")])


def next_steps(r: ReportRecord, minified: Optional[Minified]) -> list[str]:
    """The diagnosis's steps; before minify, its step is the first screen's Next command, and once minify has
    written a repro, its step names that repro instead."""
    repro = minified.repro if minified else None
    return [minified_step(repro) if i == r.minify_step and repro else step for i, step in enumerate(r.next_steps)
            if repro or i != r.minify_step]


def _next_steps(r: ReportRecord, minified: Optional[Minified]) -> list[str]:
    steps = next_steps(r, minified)
    return ["", "## Next steps", ""] + [line for step in steps for line in _item(md_cell(step))] if steps else []


def minify_step(run_dir: str, command: tuple[str, ...] | list[str]) -> str:
    """report.json's next step for a reproduced failure of the program's kernels (model.Report.from_findings)."""
    return f"{MINIFY_STEP} {minify_command(run_dir, command)}"


def minify_command(run_dir: str, command: tuple[str, ...] | list[str]) -> str:
    """`aoti-bisect minify` as it must be typed: minify runs only a repro its own command line names, never the
    one report.json holds, so the command names the run's: `--script` for `python SCRIPT` (with `--python` where
    that is not the Python running aoti-bisect, which the next aoti-bisect will be too), else `--cmd`."""
    base = f"aoti-bisect minify {shlex.quote(run_dir)}"
    if len(command) == 2 and os.path.basename(command[0]).startswith("python"):
        python = "" if os.path.realpath(command[0]) == os.path.realpath(sys.executable) else \
            f" --python {shlex.quote(command[0])}"
        return f"{base} --script {shlex.quote(command[1])}{python}"
    return f"{base} --cmd {shlex.quote(shlex.join(command))}" if command else base


def minified_step(repro: str) -> str:
    return (f"Attach the minified repro, {os.path.dirname(repro)}/ (repro.py + inputs.pt, see Minified repro "
            f"below); run it alone with: python {shlex.quote(repro)}")


def _minified(m: Optional[Minified]) -> list[str]:
    """The "Minified repro" section from minify's record, redacted by the caller."""
    if m is None:
        return []
    lines = ["", "## Minified repro", "", f"- **Result**: {md_cell(m.message)}"]
    if m.reduced is not None:
        r = m.reduced
        lines += [f"- graph nodes: {_count(r.nodes[0])} -> {r.nodes[1]} ({md_cell(', '.join(r.ops))})",
                  f"- lines: {_count(r.lines[0])} -> {_count(r.lines[1])}",
                  f"- candidates run: {_count(r.candidates)}, {_count(r.seconds)} s",
                  f"- verified alone from a copy of its folder: {'yes' if r.verified else 'no'}",
                  f"- attach: {md_code(os.path.dirname(m.repro) + '/' if m.repro else '-')} (repro.py + inputs.pt)"]
    return lines


def _count(n: Optional[float]) -> str:
    return "-" if n is None else f"{n:g}"


def _with_logs(text: str, r: ReportRecord) -> str:
    """The key lines of the baseline's log and of a memory checker's, folded, where they say more than the first
    screen's message: whole blocks or none (a cut inside a <details> or a fence would break the rest of the page);
    then the page cut to GitHub's issue size. Every stage's key lines, head and tail are in report.json's
    excerpts, the logs themselves in the bundle."""
    message = (r.signature.message,) if r.signature else ()
    blocks = [(s.name, printable(f"- {md_cell(s.name)}: {md_cell(os.path.basename(os.path.dirname(s.excerpt.log)))} "
                                 f"({s.excerpt.bytes} bytes):\n\n"
                                 f"{_code(chr(10).join(s.excerpt.key_lines), 'text')}\n\n"))
              for i, s in enumerate(r.stages) if s.excerpt and s.excerpt.key_lines and (i == 0 or s.tool)
              and s.excerpt.key_lines != message]
    if blocks:
        text += "\n<details><summary>Log key lines (every stage's, with heads and tails: report.json; the logs: the " \
                "bundle)</summary>\n\n"
    for name, block in blocks:
        if len(text) + len(block) + 200 < MD_LIMIT:
            text += block
        else:
            text += f"- log excerpt of stage {md_cell(name)} left out: the report is at GitHub's issue size limit\n"
    if blocks:
        text += "</details>\n"
    if len(text) > MD_LIMIT:
        text = text[: MD_LIMIT - 200] + "\n\n*(report truncated to fit a GitHub issue body)*\n"
    return text


def stage_command(stage: Stage, command: tuple[str, ...], joint: str = " \\\n  ") -> str:
    """The repro's command with only what the stage adds (its flags, a checker's prefix), one per `joint`."""
    parts = [f"{k}={shlex.quote(str(v))}" for k, v in stage.env.items()]
    if stage.tool:
        parts.append(stage.tool)
    parts.append(" ".join(shlex.quote(str(a)) for a in command))
    return joint.join(parts)


def _run_link(path: str, run_dir: str | None) -> str | None:
    """rerun.sh relative to report.md (which sits in the run directory), if it lies inside it."""
    if not run_dir or not path.startswith(run_dir.rstrip("/") + "/"):
        return None
    # Percent-encoded: a `>`, space or newline in a folder name cannot end the link or the line.
    return urllib.parse.quote(os.path.relpath(path, run_dir))


def _package_path(path: str | None, run_dir: str | None) -> str:
    if not path:
        return "(in memory)"
    shown = os.path.relpath(path, run_dir) if run_dir and path.startswith(run_dir.rstrip("/") + "/") else path
    return shown if len(shown) <= 60 else "…" + shown[-59:]


def kernel_chain(c: Culprit) -> str | None:
    """The walk as a Mermaid flowchart in launch order: the culprit's good inputs, the culprit, and each later
    kernel whose output went bad, down to the graph output. GitHub renders a ```mermaid block as a diagram."""
    stats = [s for s in c.stats if s.kernel]
    kernels = list(dict.fromkeys(s.kernel for s in stats))[::-1]  # the walk went backwards
    if not kernels:
        return None
    culprit = c.kernel if c.kind is CulpritKind.KERNEL else None
    ids = {k: f"k{i}" for i, k in enumerate(kernels)}
    lines = ["flowchart LR", "  classDef culprit fill:#fdd,stroke:#c00,stroke-width:2px",
             "  classDef good fill:#dfd,stroke:#080"]
    edges = []
    for k in kernels:
        wrote = [s for s in stats if s.kernel == k and s.when.startswith("after")]
        label = k + "".join(f"<br/>wrote {s.arg}: {_range(s)}" for s in {s.arg: s for s in wrote}.values())
        lines.append(f"  {ids[k]}[\"{_mermaid(label)}\"]" + (":::culprit" if k == culprit else ""))
        if k == culprit:
            for j, s in enumerate(s for s in stats if s.kernel == k and s.when.startswith("before")):
                lines.append(f"  in{j}[\"{_mermaid(s.arg + ': ' + _range(s))}\"]:::good")
                edges.append(f"in{j} --> {ids[k]}")
    edges += [f"{ids[a]} --> {ids[b]}" for a, b in itertools.pairwise(kernels)]
    return _code("\n".join(lines + [f"  {e}" for e in edges]), "mermaid")


def _range(s: TensorStat) -> str:
    return f"{s.dtype or '?'} {s.size} min {s.min} max {s.max}"


def _mermaid(text: str) -> str:
    """A quoted Mermaid label: no quote, no angle bracket but our <br/>, and short enough for one line."""
    parts = (p.replace('"', "#quot;").replace("<", "#lt;").replace(">", "#gt;") for p in text.split("<br/>"))
    return "<br/>".join(parts)[:150]


def _environment_section(r: ReportRecord) -> list[str]:
    if not r.environment.present:
        return []
    return _folded("Environment: torch, CUDA, GPU and driver, compiler, Python, OS",
                   _environment(r.environment, r.tool_version))


def _environment(env: Environment | Mapping, tool_version: str | None) -> list[str]:
    """What PyTorch's bug template asks for, from the repro's interpreter: the table a maintainer reads, then where
    collect_env's whole report is (its CPU section alone is longer than this page's first screen)."""
    if isinstance(env, Mapping):
        env = Environment.from_json(env, "environment.")
    torch = env.torch
    if torch and env.torch_git:
        torch += f" (git {env.torch_git[:12]})"
    rows = [("PyTorch", torch), ("CUDA used to build PyTorch", torch and (env.cuda_runtime or "None")),
            ("GPU, driver", env.gpu), ("Python", env.python and f"{env.python} ({env.executable or '?'})"),
            ("C++ compiler", env.cxx_version), ("libstdc++", env.libstdcxx), ("OS", env.os),
            ("CPU vector ISAs (Inductor)", _vec_isa(env.vec_isa)), ("Runs at once", _slots(env.slots)),
            ("Python bytecode", env.bytecode_cache and (
                f"PYTHONDONTWRITEBYTECODE is set: the hooked runs kept theirs in {env.bytecode_cache}; the runs "
                "without the hook compiled it afresh, as the user's do")),
            ("aoti-bisect", tool_version), ("torch error", env.torch_error),
            ("probe error", env.probe_error), ("collect_env error", env.collect_env_error)]
    out = [_table([(k, md_cell(v)) for k, v in rows if v], headers=["", ""])]
    if env.env:
        out += ["", "Variables that change AOTI, Inductor or CUDA:", "",
                _code("\n".join(f"{k}={v}" for k, v in env.env.items()), "sh")]
    if env.collect_env:
        out += ["", "`python -m torch.utils.collect_env`, whole: report.json's `environment.collect_env` and the "
                "bundle."]
    return out


def _slots(slots: Mapping | None) -> str | None:
    """`--jobs N`, or how many the machine held (run/slots.py) and the largest run it was sized by."""
    if not slots:
        return None
    if slots.get("jobs"):
        return f"{slots['jobs']} (--jobs)"
    peaks = [f"{what} {slots[key] / (1 << 30):.1f} GiB" for what, key in
             (("host", "host_peak_bytes"), ("GPU", "gpu_peak_bytes"))
             if isinstance(slots.get(key), int) and (what == "host" or slots.get("gpu"))]
    return (f"up to {slots.get('slots')}, one per core, each start beside others admitted by memory"
            + (f" (the largest run: {', '.join(peaks)})" if peaks else ""))


def _vec_isa(answer: Mapping | None) -> str | None:
    if not answer:
        return None
    checked = ", ".join(answer.get("checked") or []) or "none"
    claimed = "" if answer.get("checked") == answer.get("claimed") else \
        f"; the CPU claims {', '.join(answer.get('claimed') or []) or 'none'}"
    skipped = answer.get("runs_that_skipped_the_check") or 0
    return f"{checked} (checked by the first hooked run{claimed}; {skipped} later hooked run(s) took its answer)"
