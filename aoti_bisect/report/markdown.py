"""report.md: the report's JSON rendered as GitHub-flavoured Markdown, and the escaping every Markdown page here uses."""
from __future__ import annotations

import os
import re
import shlex
import textwrap
import urllib.parse
from typing import Mapping, Optional

from tabulate import tabulate

from ..aoti.hook_record import describe_counts
from ..text import printable
from ..diagnose.findings import CulpritKind
from .record import Culprit, Environment, Minified, ReportRecord, Stage, TensorStat

MD_LIMIT = 65536
# How the hook's redirect.py served a package (aoti/hook_record.py's PackageEvent.redirect).
# The next step that names `aoti-bisect minify` (minify_step), found again once minify has written a repro.
MINIFY_STEP = "Cut the failing program down to a standalone repro (repro.py + inputs.pt):"
_REDIRECTS = {"private": "at a private path in its run folder", "instrumented": "loaded an instrumented copy"}


# Backslash-escaped wherever they stand: code spans, emphasis, strikethrough, table cells, math. `_` only where
# it could open or close emphasis: inside a word (cpp_fused_add_0) it never does. A link or image needs `](`:
# its `(` is escaped, so `size [4, 16]` stays readable. (`[x]` alone links only to a reference definition, which
# must start a line, and md_cell's text never does: it follows a bullet, a label or a table's `|`.)
_MD_PUNCT = re.compile(r"[\\`*~|$]|(?<=\])\(|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
# What GitHub turns into a notification or a cross-link: a mention (@user, @org/team), an issue reference (#123,
# owner/repo#7, GH-5). A zero-width space (written as an entity, never raw) after the `@`, `#` or `GH-` leaves the
# text as it reads and matches none of GitHub's filters (Renovate does the same). ASCII classes: GitHub's filters
# are Ruby regexes, whose \w is ASCII (`é@user` is a mention there).
_LIVE_REFERENCE = re.compile(r"(?<![A-Za-z0-9_])@(?=[A-Za-z0-9])|#(?=\d)|(?i:GH-)(?=\d)")


def md_cell(text: object) -> str:
    """The one way child-derived text enters a Markdown page: one line that renders as exactly what it says.

    Whitespace becomes single spaces (nothing can end a table row, list item or paragraph), entities and HTML are
    shown as typed, Markdown punctuation is escaped, mentions and issue references are not live, and control,
    bidi and zero-width characters are shown as visible escapes (text.printable). Callers pass redacted text: the
    report's data goes through the redactor before any renderer sees it (model.redact_data)."""
    s = printable(" ".join(str(text if text is not None else "").split()))
    s = s.replace("&", "&amp;").replace("<", "&lt;")
    s = _MD_PUNCT.sub(lambda m: "\\" + m.group(), s)
    return _LIVE_REFERENCE.sub(lambda m: m.group() + "&#8203;", s)


def md_code(text: object) -> str:
    """Child-derived text as inline code: GitHub links no mention or reference and decodes no entity in code,
    so it is shown as typed; a `|` is still escaped (a table splits cells before it reads code spans)."""
    s = printable(" ".join(str(text if text is not None else "").split())).replace("|", "\\|")
    fence = "`" * (_longest_backtick_run(s) + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def _table(rows: list, headers: list[str]) -> str:
    # disable_numparse: a cell is shown as given; tabulate would print a Python version "3.10" as 3.1.
    return tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True)


def _longest_backtick_run(text: str) -> int:
    longest = run = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    return longest


def _fence(text: str) -> str:
    """A code fence longer than any backtick run inside the text."""
    return "`" * max(3, _longest_backtick_run(text) + 1)


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
_BLOCK_START = re.compile(r"(?:[-+*>#=]|\d+[.)])")


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
    at = m.end() - 1  # the marker's punctuation: `-`, `#`, or the `.` of `1.` (a backslash before a digit shows)
    return line[:at] + "\\" + line[at:]


def render_markdown(report: ReportRecord | Mapping, minified: Optional[Minified] = None) -> str:
    """report.md from report.json's record (or its data), and from minify/minify.json's record where minify ran:
    one function per section, in the order a reader needs them; at most MD_LIMIT characters."""
    r = report if isinstance(report, ReportRecord) else ReportRecord.from_json(report)
    sections = [_title(r), _first_screen(r), _kernel_chain(r), _stages(r), _packages(r), _constants(r),
                _evidence(r), _culprit_source(r), _next_steps(r, minified), _minified(minified), _reproduce(r),
                _environment_section(r)]
    # Logs and messages are the child's bytes: escaped here, a report shown with cat cannot drive the terminal.
    text = printable("\n".join(line for section in sections for line in section) + "\n")
    return _with_logs(text, r)


def _title(r: ReportRecord) -> list[str]:
    out = [f"# aoti-bisect report: {md_cell(r.verdict.value)}", ""]
    if not r.complete:
        out += ["> **Interrupted**: this report covers only the runs that finished; later stages are missing.", ""]
    return out


def _first_screen(r: ReportRecord) -> list[str]:
    """What failed, who did it, the line that convicts, how often, where it ran and how to run it again."""
    sig, c = r.signature, r.culprit
    items = [("Verdict", f"{r.verdict.value}: {sig.kind if sig else '-'} in phase {sig.phase if sig else '-'}"),
             ("Message", sig.message if sig else "-")]
    if c.kind:
        items.append(("Culprit", f"{c.kind}: {c.who()}"))
        if culprit_source(c):
            items.append(("Source", culprit_source(c)))
        elif c.source_nodes:
            items.append(("FX nodes", c.source_nodes))
        if c.conviction:
            items.append(("Convicted by", c.conviction))
    items.append(("Rates", _rates(r)))
    if r.verdict_s is not None:
        runs = f", {r.verdict_runs} run(s)" if r.verdict_runs is not None else ""
        items.append(("Time to verdict", f"{r.verdict_s:g} s from the first run{runs}"))
    if r.masked:
        items.append(("Masked", r.masked))
    env = r.environment
    items.append(("Ran on", f"torch {env.torch or '(not probed)'}, device {r.device}"))
    out = [line for key, value in items for line in _item(f"**{key}**: {md_cell(value)}")]
    rerun = r.stages[0] if r.stages and r.command else None
    if rerun is not None:
        link = _run_link(rerun.rerun[0], r.run_dir) if rerun.rerun else None
        out += _item(f"**Rerun**: {md_code(stage_command(rerun, r.command, ' '))}"
                     + (f" ([rerun.sh](<{link}>) is the exact command)" if link else ""))
    return out


def _rates(r: ReportRecord) -> str:
    parts = [f"baseline {rate_cell(vars(r.reproduction))}"]
    parts += [f"{s.name} {s.failures}/{s.runs}" for s in r.stages[1:] if s.runs]
    return "; ".join(parts)


def culprit_source(c: Culprit) -> str:
    """The culprit kernel's lines in the user's code ("line 11 of model.py: `...`"), or its FX nodes, saying so."""
    o = c.origin
    if o and o.lines:
        return "; ".join(f"line {line.line} of {os.path.basename(line.path)}"
                         + (f": `{line.code}`" if line.code else "") for line in o.lines)
    if o and o.nodes:
        return f"FX nodes {', '.join(o.nodes)} (no source line recorded)"
    return ""


def _kernel_chain(r: ReportRecord) -> list[str]:
    chain = kernel_chain(r.culprit)
    return ["", "## Kernel chain", "", chain] if chain else []


def _stages(r: ReportRecord) -> list[str]:
    """The stage table, cut to the page; the findings it cut, in full; the compiles each stage made."""
    rows, cut = [], []
    for s in r.stages:
        finding = s.skipped and f"skipped: {s.skipped}" or s.finding
        cell, was_cut = _short(finding, FINDING_CELL)
        if was_cut:
            cut.append((s.name, finding))
        rows.append((md_cell(s.name), "yes" if s.recompiled else "no", s.runs, s.failures, md_cell(cell)))
    out = ["", "## Stages", "", _table(rows, headers=["stage", "recompiled", "runs", "failures", "finding"])]
    if cut:
        out += ["", "Findings in full:", ""]
        same: dict[str, list[str]] = {}  # stages skipped for one reason are said once
        for name, finding in cut:
            same.setdefault(finding, []).append(name)
        for finding, names in same.items():
            out += _item(f"**{md_cell(', '.join(names))}**: {md_cell(finding)}")
    return out + _compiles(r)


def _compiles(r: ReportRecord) -> list[str]:
    counts = [s.compiles for s in r.stages if s.compiles and s.compiles["runs"]]
    if not counts and not r.compiles_ahead:
        return []
    out = ["", f"Compiles ({md_code('--reuse ' + (r.reuse or 'hooked'))}):", ""]
    for count in counts:
        out += _item(md_cell(describe_counts(count)))
    # Compile-only runs for a later stage, in slots the baseline's first run left idle (run/harness.py).
    for row in r.compiles_ahead:
        out += _item(md_cell(f"{describe_counts(row)} ({row['seconds']} s, compiling ahead for a later stage; "
                             f"{row['ended']})"))
    return out


def _packages(r: ReportRecord) -> list[str]:
    if not r.packages:
        return []
    rows = [(md_cell(p.stage), md_cell(p.action), md_cell(_package_path(p.path, r.run_dir)),
             md_cell((p.sha256 or "-")[:12]),
             ("yes" if p.built_here else "no") + (f" ({_REDIRECTS[p.redirect]})" if p.redirect in _REDIRECTS else ""),
             p.runs) for p in r.packages]
    return ["", "## Packages", "", *textwrap.wrap(
        "What the hooked runs compiled (or reused) and loaded; runs without the hook (the baseline's, unless "
        "`--reuse all`) are not listed.", WRAP), "",
        _table(rows, headers=["stage", "action", "package", "sha256", "built by the run", "runs"])]


def _constants(r: ReportRecord) -> list[str]:
    k = r.constants
    if k is None:
        return []
    return (["", "## Constants", "", f"The hook read {k.read} constant(s) of the loaded package; holding NaN/Inf: "
             f"{k.nonfinite}.", ""] + [f"- {md_cell(finding)}" for finding in k.findings]
            + [f"- not read: {md_cell(why)}" for why in k.not_read])


def _evidence(r: ReportRecord) -> list[str]:
    if not r.culprit.evidence:
        return []
    return ["", "## Evidence chain", ""] + [line for i, e in enumerate(r.culprit.evidence, 1)
                                            for line in _item(md_cell(e), f"{i}. ")]


def _culprit_source(r: ReportRecord) -> list[str]:
    source = r.culprit.source
    if source is None:
        return []
    # The generated file's name is a 52-character hash: under the heading, not in it.
    return ["", "## Culprit source", "", f"{md_code(os.path.basename(source.path))}:", "",
            _code(source.excerpt, "cpp" if source.path.endswith(".cpp") else "python")]


def _next_steps(r: ReportRecord, minified: Optional[Minified]) -> list[str]:
    """The diagnosis's steps; once minify has written a repro, its step names that repro instead of the command."""
    repro = minified.repro if minified else None
    steps = [minified_step(repro) if step.startswith(MINIFY_STEP) and repro else step for step in r.next_steps]
    return ["", "## Next steps", ""] + [line for step in steps for line in _item(md_cell(step))] if steps else []


def minify_step(run_dir: str) -> str:
    """report.json's next step for a reproduced failure of the program's kernels (model.Report.from_findings)."""
    return f"{MINIFY_STEP} aoti-bisect minify {shlex.quote(run_dir)}"


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


def _reproduce(r: ReportRecord) -> list[str]:
    out = ["", "## Reproduce each stage", "",
           *textwrap.wrap("What each stage sets on top of the repro's command. Each run's rerun.sh (linked) "
                          "reruns it exactly: its folder, caches and every variable aoti-bisect set.", WRAP), ""]
    for s in r.stages:
        if s.rerun_script:
            link = _run_link(s.rerun[0], r.run_dir) if s.rerun else None
            out += [f"**{md_cell(s.name)}**" + (f" ([rerun.sh](<{link}>))" if link else ""), "",
                    _code(stage_command(s, r.command), "sh"), ""]
    return out


def _with_logs(text: str, r: ReportRecord) -> str:
    """The log excerpts, whole blocks or none (a cut inside a <details> or a fence would break the rest of the
    page), then the page cut to GitHub's issue size."""
    logs = [_details(s) for s in r.stages if s.excerpt]
    if logs:
        text += "\n## Log excerpts\n\n"
    for name, block in logs:
        if len(text) + len(block) + 200 < MD_LIMIT:
            text += block
        else:
            text += f"- log excerpt of stage {md_cell(name)} left out: the report is at GitHub's issue size limit\n"
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
        label = k + "".join(f"<br/>wrote {s.arg}: {_range(s)}" for s in dict((s.arg, s) for s in wrote).values())
        lines.append(f"  {ids[k]}[\"{_mermaid(label)}\"]" + (":::culprit" if k == culprit else ""))
        if k == culprit:
            for j, s in enumerate(s for s in stats if s.kernel == k and s.when.startswith("before")):
                lines.append(f"  in{j}[\"{_mermaid(s.arg + ': ' + _range(s))}\"]:::good")
                edges.append(f"in{j} --> {ids[k]}")
    edges += [f"{ids[a]} --> {ids[b]}" for a, b in zip(kernels, kernels[1:])]
    return _code("\n".join(lines + [f"  {e}" for e in edges]), "mermaid")


def _range(s: TensorStat) -> str:
    return f"{s.dtype or '?'} {s.size} min {s.min} max {s.max}"


def _mermaid(text: str) -> str:
    """A quoted Mermaid label: no quote, no angle bracket but our <br/>, and short enough for one line."""
    parts = (p.replace('"', "#quot;").replace("<", "#lt;").replace(">", "#gt;") for p in text.split("<br/>"))
    return "<br/>".join(parts)[:150]


_SYSTEM_CUDA = re.compile(r"^CUDA runtime version: (?!Could not collect|No CUDA|N/A)(.+)$", re.M)


def _environment_section(r: ReportRecord) -> list[str]:
    return ["## Environment", "", *_environment(r.environment, r.tool_version), ""] if r.environment.present else []


def _environment(env: Environment | Mapping, tool_version: str | None) -> list[str]:
    """What PyTorch's bug template asks for: collect_env's report, from the repro's interpreter, whole."""
    if isinstance(env, Mapping):
        env = Environment.from_json(env, "environment.")
    torch = env.torch
    if torch and env.torch_git:
        torch += f" (git {env.torch_git[:12]})"
    rows = [("PyTorch", torch), ("CUDA used to build PyTorch", torch and (env.cuda_runtime or "None")),
            ("GPU, driver", env.gpu), ("Python", env.python and f"{env.python} ({env.executable or '?'})"),
            ("C++ compiler", env.cxx_version), ("libstdc++", env.libstdcxx),
            ("CPU vector ISAs (Inductor)", _vec_isa(env.vec_isa)),
            ("Python bytecode", env.bytecode_cache and (
                f"PYTHONDONTWRITEBYTECODE is set: the hooked runs kept theirs in {env.bytecode_cache}; the runs "
                "without the hook compiled it afresh, as the user's do")),
            ("aoti-bisect", tool_version), ("torch error", env.torch_error),
            ("probe error", env.probe_error), ("collect_env error", env.collect_env_error)]
    out = [_table([(k, md_cell(v)) for k, v in rows if v], headers=["", ""])]
    nvcc = _SYSTEM_CUDA.search(env.collect_env or "")
    if env.torch and not env.cuda_runtime and nvcc:
        out += ["", f"This torch is a CPU-only build (CUDA used to build PyTorch: None): the CUDA runtime "
                    f"{md_cell(nvcc.group(1))} in collect_env below is the system's nvcc, which it does not use."]
    if env.env:
        out += ["", "Variables that change AOTI, Inductor or CUDA:", "",
                _code("\n".join(f"{k}={v}" for k, v in env.env.items()), "sh")]
    if env.collect_env:
        out += ["", "<details><summary>collect_env (python -m torch.utils.collect_env)</summary>", "",
                _code(env.collect_env, "text"), "", "</details>"]
    return out


def _vec_isa(answer: Mapping | None) -> str | None:
    if not answer:
        return None
    checked = ", ".join(answer.get("checked") or []) or "none"
    if answer.get("checked") != answer.get("claimed"):
        return (f"{checked} (the CPU claims {', '.join(answer.get('claimed') or []) or 'none'}: every run "
                "checks them itself)")
    skipped = answer.get("runs_that_skipped_the_check") or 0
    return f"{checked} (checked by the first hooked run; {skipped} later hooked run(s) took its answer)"


def _details(stage: Stage) -> tuple[str, str]:
    e = stage.excerpt
    parts = [f"<details><summary>{md_cell(stage.name)}: {md_cell(os.path.basename(os.path.dirname(e.log)))} "
             f"({e.bytes} bytes)</summary>", ""]
    if e.key_lines:
        parts += ["Key lines:", "", _code("\n".join(e.key_lines), "text"), ""]
    if e.head:
        parts += ["Head:", "", _code(e.head, "text"), ""]
    parts += ["Tail:", "", _code(e.tail, "text"), "", "</details>", "", ""]
    return stage.name, printable("\n".join(parts))
