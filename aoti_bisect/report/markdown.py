"""report.md: the report's JSON rendered as GitHub-flavoured Markdown, and the escaping every Markdown page here uses."""
from __future__ import annotations

import os
import re

from tabulate import tabulate

from ..aoti.hook_record import describe_counts
from ..text import printable

MD_LIMIT = 65536


def md_cell(text: object) -> str:
    """Table cell text that cannot break a GFM table or open a code span."""
    s = " ".join(str(text if text is not None else "").split())
    return s.replace("\\", "\\\\").replace("|", "\\|").replace("`", "\\`").replace("<", "&lt;")


def _table(rows: list, headers: list[str]) -> str:
    # disable_numparse: a cell is shown as given; tabulate would print a Python version "3.10" as 3.1.
    return tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True)


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


def culprit_who(c: dict) -> str:
    """The culprit in a few words: a kernel, or a model input / constant by the user's name where known."""
    name = c.get("input_name")
    if c.get("user_name"):
        name = f"`{c['user_name']}`, wrapper {name}"
    if c.get("kernel"):
        return c["kernel"]
    if c.get("kind") == "model_input":
        return f"model input {c.get('input_index')} ({name})"
    return name or "-"


def render_markdown(d: dict) -> str:
    c = d.get("culprit") or {}
    sig = d.get("signature") or {}
    out = [f"# aoti-bisect report: {md_cell(d['verdict'])}", ""]
    if not d.get("complete", True):
        out += ["> **Interrupted**: this report covers only the runs that finished; later stages are missing.", ""]
    summary = [("Verdict", d["verdict"]), ("Failure", f"{sig.get('kind', '-')} in phase {sig.get('phase', '-')}"),
               ("Message", sig.get("message", "-")), ("Reproduction", rate_cell(d["reproduction"]))]
    if d.get("masked"):
        summary.append(("Masked", d["masked"]))
    if c.get("kind"):
        summary.append(("Culprit", f"{c['kind']}: {culprit_who(c)}"))
        if c.get("summary"):
            summary.append(("Evidence", c["summary"]))
    out.append(_table([(k, md_cell(v)) for k, v in summary], headers=["", ""]))
    out += ["", "## Stages", ""]
    rows = []
    for s in d["stages"]:
        env = " ".join(f"{k}={v}" for k, v in s["env"].items()) or "(none)"
        rows.append((md_cell(s["name"]), md_cell(env), "yes" if s["recompiled"] else "no",
                     s["runs"], s["failures"], md_cell(s["skipped"] and f"skipped: {s['skipped']}" or s["finding"])))
    out.append(_table(rows, headers=["stage", "flags", "recompiled", "runs", "failures", "finding"]))
    counts = [s["compiles"] for s in d["stages"] if s.get("compiles") and s["compiles"]["runs"]]
    if counts:
        out += ["", f"Compiles (`--reuse {md_cell(d.get('reuse') or 'hooked')}`):", ""]
        out += [f"- {md_cell(describe_counts(c))}" for c in counts]
    if d.get("packages"):
        out += ["", "## Packages", "", "What the hooked runs compiled (or reused) and loaded; runs without the hook "
                "(the baseline's, unless `--reuse all`) are not listed.", ""]
        out.append(_table([(md_cell(p["stage"]), p["action"], md_cell(p["path"] or "(in memory)"),
                            (p["sha256"] or "-")[:12], "yes" if p["built_here"] else "no", p["runs"])
                           for p in d["packages"]],
                          headers=["stage", "action", "package", "sha256", "built by the run", "runs"]))
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
            out += [f"**{md_cell(s['name'])}**", "", _code(s["rerun_script"], "sh"), ""]
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
