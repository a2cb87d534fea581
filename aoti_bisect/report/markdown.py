"""report.md: the report's JSON rendered as GitHub-flavoured Markdown, and the escaping every Markdown page here uses."""
from __future__ import annotations

import os
import re
import shlex
import textwrap
import urllib.parse

from tabulate import tabulate

from ..aoti.hook_record import describe_counts
from ..text import printable

MD_LIMIT = 65536
# How the hook's redirect.py served a package (aoti/hook_record.py's PackageEvent.redirect).
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


def rate_cell(r: dict) -> str:
    lo, hi = r["ci95"]
    if r["runs"] == 0:
        return "could not run" if r.get("could_not_run") else "no runs"
    return f"{r['failures']}/{r['runs']} ({r['rate']:.0%}, 95% CI {lo:.0%}–{hi:.0%})"


def culprit_who(c: dict) -> str:
    """The culprit in a few words: a kernel, or a model input / constant by the user's name where known."""
    name = c.get("input_name")
    if c.get("user_name"):
        name = f"`{c['user_name']}`, wrapper {name}"
    if c.get("kind") == "model_input":  # before its kernel: an index computed from it faulted there
        return f"model input {c.get('input_index')} ({name})"
    if c.get("kernel"):
        return c["kernel"]
    if c.get("op"):
        return c["op"]
    return name or "-"


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


def _rates(d: dict) -> str:
    parts = [f"baseline {rate_cell(d['reproduction'])}"]
    parts += [f"{s['name']} {s['failures']}/{s['runs']}" for s in d["stages"][1:] if s["runs"]]
    return "; ".join(parts)


def culprit_source(c: dict) -> str:
    """The culprit kernel's lines in the user's code ("line 11 of model.py: `...`"), or its FX nodes, saying so."""
    o = c.get("origin") or {}
    if o.get("lines"):
        return "; ".join(f"line {line['line']} of {os.path.basename(line['path'])}: `{line['code']}`"
                         if line.get("code") else f"line {line['line']} of {os.path.basename(line['path'])}"
                         for line in o["lines"])
    if o.get("nodes"):
        return f"FX nodes {', '.join(o['nodes'])} (no source line recorded)"
    return ""


def render_markdown(d: dict) -> str:
    c = d.get("culprit") or {}
    sig = d.get("signature") or {}
    out = [f"# aoti-bisect report: {md_cell(d['verdict'])}", ""]
    if not d.get("complete", True):
        out += ["> **Interrupted**: this report covers only the runs that finished; later stages are missing.", ""]
    # The first screen: what failed, who did it, the line that convicts, how often.
    summary = [("Verdict", f"{d['verdict']}: {sig.get('kind', '-')} in phase {sig.get('phase', '-')}"),
               ("Message", sig.get("message", "-"))]
    if c.get("kind"):
        summary.append(("Culprit", f"{c['kind']}: {culprit_who(c)}"))
        if culprit_source(c):
            summary.append(("Source", culprit_source(c)))
        elif c.get("source_nodes"):
            summary.append(("FX nodes", c["source_nodes"]))
        if c.get("summary"):
            summary.append(("Convicted by", c["summary"]))
    summary.append(("Rates", _rates(d)))
    if d.get("verdict_s") is not None:
        runs = f", {d['verdict_runs']} run(s)" if d.get("verdict_runs") is not None else ""
        summary.append(("Time to verdict", f"{d['verdict_s']:g} s from the first run{runs}"))
    if d.get("masked"):
        summary.append(("Masked", d["masked"]))
    for key, value in summary:
        out += _item(f"**{key}**: {md_cell(value)}")
    chain = kernel_chain(c)
    if chain:
        out += ["", "## Kernel chain", "", chain]
    out += ["", "## Stages", ""]
    rows, cut = [], []
    for s in d["stages"]:
        finding = s["skipped"] and f"skipped: {s['skipped']}" or s["finding"]
        cell, was_cut = _short(finding, FINDING_CELL)
        if was_cut:
            cut.append((s["name"], finding))
        rows.append((md_cell(s["name"]), "yes" if s["recompiled"] else "no", s["runs"], s["failures"],
                     md_cell(cell)))
    out.append(_table(rows, headers=["stage", "recompiled", "runs", "failures", "finding"]))
    if cut:
        out += ["", "Findings in full:", ""]
        same: dict[str, list[str]] = {}  # stages skipped for one reason are said once
        for name, finding in cut:
            same.setdefault(finding, []).append(name)
        for finding, names in same.items():
            out += _item(f"**{md_cell(', '.join(names))}**: {md_cell(finding)}")
    counts = [s["compiles"] for s in d["stages"] if s.get("compiles") and s["compiles"]["runs"]]
    ahead = d.get("compiled_ahead") or []
    if counts or ahead:
        out += ["", f"Compiles ({md_code('--reuse ' + str(d.get('reuse') or 'hooked'))}):", ""]
        for count in counts:
            out += _item(md_cell(describe_counts(count)))
        # Compile-only runs for a later stage, in slots the baseline's first run left idle (run/harness.py).
        for row in ahead:
            out += _item(md_cell(f"{describe_counts(row)} ({row['seconds']} s, compiling ahead for a later stage; "
                                 f"{row['ended']})"))
    if d.get("packages"):
        out += ["", "## Packages", "", *textwrap.wrap(
            "What the hooked runs compiled (or reused) and loaded; runs without the hook (the baseline's, unless "
            "`--reuse all`) are not listed.", WRAP), ""]
        out.append(_table([(md_cell(p["stage"]), md_cell(p["action"]),
                            md_cell(_package_path(p["path"], d.get("run_dir"))), md_cell((p["sha256"] or "-")[:12]),
                            ("yes" if p["built_here"] else "no")
                            + (f" ({_REDIRECTS[p['redirect']]})" if p.get("redirect") in _REDIRECTS else ""), p["runs"])
                           for p in d["packages"]],
                          headers=["stage", "action", "package", "sha256", "built by the run", "runs"]))
    consts = d.get("constants") or {}
    if consts:
        out += ["", "## Constants", "", f"The hook read {consts['read']} constant(s) of the loaded package; "
                f"holding NaN/Inf: {len(consts['nonfinite'])}.", ""]
        out += [f"- {md_cell(x['finding'])}" for x in [*consts["nonfinite"], *consts.get("outside_domain", ()),
                                                          *consts.get("stale", ())]]
        out += [f"- not read: {md_cell(why)}" for why in consts.get("not_read") or ()]
    if c.get("evidence"):
        out += ["", "## Evidence chain", ""]
        for i, e in enumerate(c["evidence"], 1):
            out += _item(md_cell(e), f"{i}. ")
    if c.get("source"):
        # The generated file's name is a 52-character hash: under the heading, not in it.
        out += ["", "## Culprit source", "", f"{md_code(os.path.basename(c['source']['path']))}:", "",
                _code(c["source"]["excerpt"], "cpp" if c["source"]["path"].endswith(".cpp") else "python")]
    if d.get("next_steps"):
        out += ["", "## Next steps", ""]
        for step in d["next_steps"]:
            out += _item(md_cell(step))
    out += ["", "## Reproduce each stage", "",
            *textwrap.wrap("What each stage sets on top of the repro's command. Each run's rerun.sh (linked) "
                           "reruns it exactly: its folder, caches and every variable aoti-bisect set.", WRAP), ""]
    command = d.get("command") or []
    for s in d["stages"]:
        if s.get("rerun_script"):
            link = _run_link(s["rerun"][0], d.get("run_dir")) if s.get("rerun") else None
            out += [f"**{md_cell(s['name'])}**" + (f" ([rerun.sh](<{link}>))" if link else ""), "",
                    _code(stage_command(s, command), "sh"), ""]
    if d.get("environment"):
        out += ["## Environment", "", *_environment(d["environment"], d.get("tool_version")), ""]
    # Logs and messages are the child's bytes: escaped here, a report shown with cat cannot drive the terminal.
    text = printable("\n".join(out) + "\n")
    logs = [_details(s) for s in d["stages"] if s.get("excerpt")]
    if logs:
        text += "\n## Log excerpts\n\n"
    for name, block in logs:
        # Whole blocks or none: a cut inside a <details> or a fence would break the rest of the page.
        if len(text) + len(block) + 200 < MD_LIMIT:
            text += block
        else:
            text += f"- log excerpt of stage {md_cell(name)} left out: the report is at GitHub's issue size limit\n"
    if len(text) > MD_LIMIT:
        text = text[: MD_LIMIT - 200] + "\n\n*(report truncated to fit a GitHub issue body)*\n"
    return text


def render_minified(record: dict) -> str:
    """The "Minified repro" section from minify.json's record, redacted by the caller (minify.markdown_section)."""
    lines = ["", "## Minified repro", "", f"- **Result**: {md_cell(record.get('message', ''))}"]
    if "nodes_after" in record:
        ops = record.get("ops_after")
        repro = record.get("repro")
        lines += ["", f"- graph nodes: {md_cell(record.get('nodes_before'))} -> {md_cell(record['nodes_after'])} "
                      f"({md_cell(', '.join(map(str, ops)) if isinstance(ops, list) else ops)})",
                  f"- lines: {md_cell(record.get('lines_before'))} -> {md_cell(record.get('lines_after'))}",
                  f"- candidates run: {md_cell(record.get('candidates'))}, {md_cell(record.get('seconds'))} s",
                  f"- verified alone from a copy of its folder: {'yes' if record.get('verified') else 'no'}",
                  f"- attach: {md_code(os.path.dirname(repro) + '/' if isinstance(repro, str) else '-')} "
                  "(repro.py + inputs.pt)"]
    return "\n".join(lines) + "\n"


def stage_command(stage: dict, command: list[str]) -> str:
    """The repro's command with only what the stage adds (its flags, a checker's prefix), one per line."""
    parts = [f"{k}={shlex.quote(str(v))}" for k, v in stage["env"].items()]
    if stage.get("tool"):
        parts.append(stage["tool"])
    parts.append(" ".join(shlex.quote(str(a)) for a in command))
    return " \\\n  ".join(parts)


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


def kernel_chain(c: dict) -> str | None:
    """The walk as a Mermaid flowchart in launch order: the culprit's good inputs, the culprit, and each later
    kernel whose output went bad, down to the graph output. GitHub renders a ```mermaid block as a diagram."""
    stats = [s for s in c.get("stats") or () if s.get("kernel")]
    kernels = list(dict.fromkeys(s["kernel"] for s in stats))[::-1]  # the walk went backwards
    if not kernels:
        return None
    culprit = c.get("kernel") if c.get("kind") == "kernel" else None
    ids = {k: f"k{i}" for i, k in enumerate(kernels)}
    lines = ["flowchart LR", "  classDef culprit fill:#fdd,stroke:#c00,stroke-width:2px",
             "  classDef good fill:#dfd,stroke:#080"]
    edges = []
    for k in kernels:
        wrote = [s for s in stats if s["kernel"] == k and s["when"].startswith("after")]
        label = k + "".join(f"<br/>wrote {s['arg']}: {_range(s)}" for s in dict(
            (s["arg"], s) for s in wrote).values())
        lines.append(f"  {ids[k]}[\"{_mermaid(label)}\"]" + (":::culprit" if k == culprit else ""))
        if k == culprit:
            for j, s in enumerate(s for s in stats if s["kernel"] == k and s["when"].startswith("before")):
                lines.append(f"  in{j}[\"{_mermaid(s['arg'] + ': ' + _range(s))}\"]:::good")
                edges.append(f"in{j} --> {ids[k]}")
    edges += [f"{ids[a]} --> {ids[b]}" for a, b in zip(kernels, kernels[1:])]
    return _code("\n".join(lines + [f"  {e}" for e in edges]), "mermaid")


def _range(s: dict) -> str:
    return f"{s.get('dtype', '?')} {s.get('size', '')} min {s.get('min')} max {s.get('max')}"


def _mermaid(text: str) -> str:
    """A quoted Mermaid label: no quote, no angle bracket but our <br/>, and short enough for one line."""
    parts = (p.replace('"', "#quot;").replace("<", "#lt;").replace(">", "#gt;") for p in text.split("<br/>"))
    return "<br/>".join(parts)[:150]


_SYSTEM_CUDA = re.compile(r"^CUDA runtime version: (?!Could not collect|No CUDA|N/A)(.+)$", re.M)


def _environment(env: dict, tool_version: str | None) -> list[str]:
    """What PyTorch's bug template asks for: collect_env's report, from the repro's interpreter, whole."""
    torch = env.get("torch")
    if torch and env.get("torch_git"):
        torch += f" (git {env['torch_git'][:12]})"
    rows = [("PyTorch", torch), ("CUDA used to build PyTorch", torch and (env.get("cuda_runtime") or "None")),
            ("GPU, driver", env.get("gpu")),
            ("Python", env.get("python") and f"{env['python']} ({env.get('executable', '?')})"),
            ("C++ compiler", env.get("cxx_version")), ("libstdc++", env.get("libstdcxx")),
            ("CPU vector ISAs (Inductor)", _vec_isa(env.get("vec_isa"))),
            ("Python bytecode", env.get("bytecode_cache") and (
                f"PYTHONDONTWRITEBYTECODE is set: the hooked runs kept theirs in {env['bytecode_cache']}; the runs "
                "without the hook compiled it afresh, as the user's do")),
            ("aoti-bisect", tool_version), ("torch error", env.get("torch_error")),
            ("probe error", env.get("probe_error")), ("collect_env error", env.get("collect_env_error"))]
    out = [_table([(k, md_cell(v)) for k, v in rows if v], headers=["", ""])]
    text = env.get("collect_env")
    nvcc = _SYSTEM_CUDA.search(text or "")
    if env.get("torch") and not env.get("cuda_runtime") and nvcc:
        out += ["", f"This torch is a CPU-only build (CUDA used to build PyTorch: None): the CUDA runtime "
                    f"{md_cell(nvcc.group(1))} in collect_env below is the system's nvcc, which it does not use."]
    if env.get("env"):
        out += ["", "Variables that change AOTI, Inductor or CUDA:", "",
                _code("\n".join(f"{k}={v}" for k, v in env["env"].items()), "sh")]
    if text:
        out += ["", "<details><summary>collect_env (python -m torch.utils.collect_env)</summary>", "",
                _code(text, "text"), "", "</details>"]
    return out


def _vec_isa(answer: dict | None) -> str | None:
    if not answer:
        return None
    checked = ", ".join(answer.get("checked") or []) or "none"
    if answer.get("checked") != answer.get("claimed"):
        return (f"{checked} (the CPU claims {', '.join(answer.get('claimed') or []) or 'none'}: every run "
                "checks them itself)")
    skipped = answer.get("runs_that_skipped_the_check") or 0
    return f"{checked} (checked by the first hooked run; {skipped} later hooked run(s) took its answer)"


def _details(stage: dict) -> tuple[str, str]:
    e = stage["excerpt"]
    parts = [f"<details><summary>{md_cell(stage['name'])}: {md_cell(os.path.basename(os.path.dirname(e['log'])))} "
             f"({e['bytes']} bytes)</summary>", ""]
    if e["key_lines"]:
        parts += ["Key lines:", "", _code("\n".join(e["key_lines"]), "text"), ""]
    if e["head"]:
        parts += ["Head:", "", _code(e["head"], "text"), ""]
    parts += ["Tail:", "", _code(e["tail"], "text"), "", "</details>", "", ""]
    return stage["name"], printable("\n".join(parts))
