"""report.md read at a glance on GitHub: rendered through a GitHub-flavoured Markdown parser (tables on), the
first screen, line widths, the kernel chain as Mermaid, the culprit's source alone, short rerun commands."""
import json
import os
import subprocess
import sys
import tarfile

from markdown_it import MarkdownIt

from aoti_bisect.aoti.wrapper import kernel_source
from aoti_bisect.report.markdown import minify_step, render_markdown
from aoti_bisect.report.plain import answer, render_text
from aoti_bisect.report.record import Minified, ReportRecord

DATA = os.path.join(os.path.dirname(__file__), "data")
# A real report: `aoti-bisect scenarios/cpu/nan_after_matmul.py` on torch 2.13.0+cpu (see data/README.md).
REAL = os.path.join(DATA, "report-nan_after_matmul.json")
GFM = MarkdownIt("commonmark", {"html": True}).enable("table")
TABLE_LINE = 160  # wider, and GitHub scrolls the table sideways (issue #16)


def real_report() -> dict:
    with open(REAL) as f:
        return json.load(f)


def with_line(data: dict) -> dict:
    """The real report as this version writes it: the culprit's line in the user's code (it predates them)."""
    data["culprit"]["origin"] = {"lines": [{"path": "/w/nan_after_matmul.py", "line": 14, "code": LINE}],
                                 "nodes": ["log"]}
    return data


LINE = "h = torch.log(x - 0.5) * 2.0  # BUG: NaN wherever x < 0.5"


def outside_fences(md: str) -> list[str]:
    lines, fence = [], None
    for line in md.splitlines():
        stripped = line.lstrip()
        if fence is None and stripped.startswith("```"):
            fence = stripped[: len(stripped) - len(stripped.lstrip("`"))]
        elif fence is not None and stripped.startswith(fence) and not stripped.strip("`"):
            fence = None
        elif fence is None:
            lines.append(line)
    return lines


def test_first_screen_says_verdict_culprit_conviction_and_rates():
    md = render_markdown(real_report())
    first = md.split("\n## ")[0]  # everything above the first section
    assert "reproduced: nan_inf in phase run" in first
    assert "kernel: cpp_fused_add_log_mul_relu_sub_0" in first
    assert "produced bad values from good inputs" in first  # the one line that convicts
    assert "baseline 2/2 (100%" in first and "inspect 1/1" in first
    assert len(first.splitlines()) <= 20


def test_tables_parse_and_no_line_is_wider_than_the_page():
    d = real_report()
    md = render_markdown(d)
    tokens = GFM.parse(md)
    rows = [t for t in tokens if t.type == "tr_open"]
    assert sum(t.type == "table_open" for t in tokens) >= 2  # stages, environment
    assert len(rows) >= len(d["stages"]) + 1
    for line in outside_fences(md):
        if line.startswith("|"):
            assert len(line) <= TABLE_LINE, line
        elif not line.startswith("<details>"):
            assert len(line) <= TABLE_LINE, line
    html = GFM.render(md)
    assert html.count("<table>") >= 2 and "<td>inspect</td>" in html


def test_kernel_chain_is_a_mermaid_block_ending_at_the_culprit():
    tokens = GFM.parse(render_markdown(real_report()))
    mermaid = [t.content for t in tokens if t.type == "fence" and t.info == "mermaid"]
    assert len(mermaid) == 1 and mermaid[0].startswith("flowchart LR")
    chart = mermaid[0]
    assert '["cpp_fused_add_log_mul_relu_sub_0' in chart and ":::culprit" in chart
    culprit_line = next(line for line in chart.splitlines() if ":::culprit" in line)
    assert "cpp_fused_add_log_mul_relu_sub_0" in culprit_line and "min nan" in culprit_line
    assert "arg1_1" in chart and "k0 --> k1" in chart  # good input -> culprit -> the kernel after it
    assert all(len(line) <= TABLE_LINE for line in chart.splitlines())


def test_rerun_commands_show_only_what_the_stage_adds():
    d = real_report()
    md = render_markdown(d)
    html = GFM.render(md)
    rerun = next(line for line in " ".join(md.split("\n## ")[0].split()).split("- **") if line.startswith("Rerun"))
    assert rerun.startswith("Rerun**: `") and "nan_after_matmul.py` ([rerun.sh](<runs/baseline-000/rerun.sh>)" in rerun
    adds = [line for line in " ".join(md.split()).split("- **") if "): adds `" in line]
    assert len(adds) == sum(1 for s in d["stages"] if s.get("rerun_script") and s["env"])
    for text in [rerun, *adds]:
        for internal in ("TMPDIR=", "TORCHINDUCTOR_CACHE_DIR=", "TRITON_CACHE_DIR=", "XDG_CACHE_HOME=",
                         "AOTI_BISECT_RUN_INDEX", d["run_dir"]):
            assert internal not in text
    assert "<code>AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER=3</code>" in html
    assert "[rerun.sh](<runs/trace-003/rerun.sh>)" in md  # the exact command, one click away


def test_culprit_source_is_the_culprit_kernel_alone(tmp_path):
    # The real kernel.cpp of nan_after_matmul: two kernels in one file, then the compile command.
    cache = tmp_path / "inductor" / "cb"
    cache.mkdir(parents=True)
    (cache / "k.kernel.cpp").write_text(open(os.path.join(DATA, "nan_after_matmul.kernel.cpp")).read())
    path, excerpt = kernel_source("cpp_fused_add_log_mul_relu_sub_0", [str(tmp_path / "inductor")])
    assert excerpt.startswith('extern "C"') and "tmp3.log()" in excerpt
    assert excerpt.rstrip().endswith("}") and "cpp_fused_mul_tanh_1" not in excerpt
    assert "Compile cmd" not in excerpt


def test_bundle_carries_the_repro_script_redacted(tmp_path):
    token = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
    script = tmp_path / "repro.py"
    script.write_text(f"TOKEN = '{token}'\nraise SystemExit('non-finite output')\n")
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "aoti_bisect", str(script), "--stages", "baseline", "--runs", "1",
                           "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr
    bundle = tmp_path / "b.tar.gz"
    proc = subprocess.run([sys.executable, "-m", "aoti_bisect", "report", str(out), "--bundle", str(bundle)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout == f"{bundle}\n", proc.stderr  # the path alone, for a script
    with tarfile.open(bundle) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("/repro/repro.py"))
        text = tar.extractfile(member).read().decode()
    assert "raise SystemExit('non-finite output')" in text and token not in text


def test_a_wrapped_line_never_starts_a_block():
    d = real_report()
    d["culprit"]["evidence"] = ["a" * 99 + f" {marker} rest" for marker in ("# heading", "- item", "1. one", "====")]
    tokens = GFM.parse(render_markdown(d))
    headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert not [h for h in headings if "heading" in h or "aaaa" in h]
    evidence = [t for t in tokens if t.type == "ordered_list_open"]
    assert len(evidence) == 1  # one list, not a list per broken item
    start = tokens.index(evidence[0])
    inside = tokens[start: next(i for i, t in enumerate(tokens) if i > start and t.type == "ordered_list_close")]
    assert sum(t.type == "list_item_open" for t in inside) == 4
    assert not any(t.type == "bullet_list_open" for t in inside)


def test_the_compile_counts_leave_the_culprit_sections_in_place():
    # A loop over the stages' compile counts once reused the culprit's name: the evidence chain and the
    # culprit's source vanished from every report whose runs were counted.
    data = json.load(open(os.path.join(os.path.dirname(__file__), "data", "report-nan_after_matmul.json")))
    data["stages"][0]["compiles"] = {"stage": "baseline", "runs": 2, "compiled": 1, "reused": 1, "hooked": True,
                                     "reasons": {}}
    md = render_markdown(data)
    assert "Compiles (--reuse hooked)" in md and "## Evidence chain" in md and "<summary>Culprit source: " in md


def test_the_readme_example_is_the_stored_real_run():
    # docs/examples/refresh.py wrote the README's example blocks from a real run's files; an edit by hand, or
    # files refreshed without the README, would make them differ.
    refresh = os.path.join(os.path.dirname(DATA), "..", "docs", "examples", "refresh.py")
    proc = subprocess.run([sys.executable, refresh, "--check"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    readme = open(os.path.join(os.path.dirname(DATA), "..", "README.md")).read()
    assert readme.count("<!-- example:") == 3 and "- **Ran on**: torch" in readme


def test_the_console_ends_with_the_answer_and_the_exact_next_commands():
    d = with_line(real_report())
    script = d["command"][1]
    d["command"] = [sys.executable, script]
    d["next_steps"][1] = minify_step(d["run_dir"], d["command"])  # as a run of this version writes it
    d["minify_step"] = 1
    lines = answer(ReportRecord.from_json(d), "verdict: reproduced", None, terminal=False)
    assert lines[0] == "verdict: reproduced"
    assert lines[1] == f"  nan_after_matmul.py:14: {LINE}"
    assert lines[2].startswith("convicted by: cpp_fused_add_log_mul_relu_sub_0 produced bad values from good inputs")
    # minify runs only a repro its command line names: the command names the run's own script
    assert lines[-3:] == ["report: /tmp/example/report.md", f"next: aoti-bisect minify /tmp/example --script {script}",
                          "next: aoti-bisect report /tmp/example --bundle"]
    d["command"] = ["/opt/other/bin/python3", script]
    assert f"--script {script} --python /opt/other/bin/python3" in answer(
        ReportRecord.from_json(d), "", None, False)[-2]
    # In a terminal the report's line says how to read it there; once minify ran, its repro and the bundle are next.
    done = Minified("minified 8 -> 1 node(s)", "/tmp/example/minify/repro.py", None)
    lines = answer(ReportRecord.from_json(d), "", done, terminal=True)
    assert "minified repro: /tmp/example/minify/repro.py" in lines
    assert lines[-2:] == ["report: /tmp/example/report.md (to read it here: aoti-bisect report /tmp/example --format "
                          "text)", "next: aoti-bisect report /tmp/example --bundle"]


def test_the_text_rendering_is_the_first_screen_without_markdown():
    d = with_line(real_report())
    text = render_text(ReportRecord.from_json(d))
    assert text.startswith("aoti-bisect report: reproduced\n\nVerdict:")
    assert "line 14 of nan_after_matmul.py: `h = torch.log(x - 0.5) * 2.0 # BUG: NaN wherever x" in text
    for markup in ("\\*", "\\`", "&lt;", "**", "<details>"):
        assert markup not in text
    assert "Evidence chain:" in text and "inspect" in text and "/tmp/example/report.md" in text
    assert max(len(line) for line in text.splitlines()) <= 100


# -- the layered page of a run of this version: first screen, then folded blocks that hold what report.json has ------

EXAMPLE = os.path.join(os.path.dirname(DATA), "..", "docs", "examples", "nan_after_matmul.report.json")


def _text(tokens) -> str:
    """What a reader sees of rendered tokens: tags dropped, entities decoded, whitespace as single spaces."""
    import html
    import re

    rendered = GFM.renderer.render(tokens, GFM.options, {})
    blocks = re.sub(r"</?(?:p|li|ul|ol|pre|h\d|table|thead|tbody|tr|td|th|details|summary)\b[^>]*>", " ", rendered)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", blocks)).split())


def _first_screen(tokens) -> dict[str, str]:
    """The first screen's list, label -> what it says, from the tokens before the first section heading."""
    end = next(i for i, t in enumerate(tokens) if t.type == "heading_open" and t.tag == "h2")
    items = [_text([t]) for t in tokens[:end] if t.type == "inline" and t.content.startswith("**")]
    return dict(item.split(": ", 1) for item in items)


def _folded(tokens) -> dict[str, str]:
    """Each <details> block: its summary -> the text of what it folds."""
    import re

    blocks, start = {}, None
    for i, t in enumerate(tokens):
        if t.type == "html_block" and t.content.startswith("<details>"):
            start, summary = i, re.search(r"<summary>(.*)</summary>", t.content).group(1)
        elif t.type == "html_block" and t.content.startswith("</details>") and start is not None:
            blocks[summary], start = _text(tokens[start + 1: i]), None
    return blocks


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_the_page_a_maintainer_reads_holds_report_json_in_layers():
    with open(EXAMPLE) as f:
        d = json.load(f)
    md = render_markdown(d)
    assert len(md.splitlines()) <= 150  # issue #52: one screen, then the evidence, then what folds
    tokens = GFM.parse(md)
    first = _first_screen(tokens)
    assert list(first) == ["Verdict", "Message", "Culprit", "Source", "Convicted by", "Rates", "Time to verdict",
                           "Ran on", "Rerun", "Next"]
    sig, c, env, rate = d["signature"], d["culprit"], d["environment"], d["reproduction"]
    assert first["Verdict"] == f"{d['verdict']}: {sig['kind']} in phase {sig['phase']}"
    assert first["Message"] == sig["message"] and first["Culprit"] == f"{c['kind']}: {c['kernel']}"
    assert all(_flat(line["code"]) in first["Source"] for line in c["origin"]["lines"])
    runs = ", ".join(f"{e['run']} ({e['stage']}, {e['kind']})" for e in c["convicted_by"])
    assert first["Convicted by"] == _flat(c["conviction"]) + f" [evidence from run {runs}]" and runs
    assert first["Rates"].startswith(f"baseline {rate['failures']}/{rate['runs']} (")
    assert all(value in first["Ran on"] for value in (env["torch"], env["python"], env["cxx_version"],
                                                      "Debian GNU/Linux"))
    assert first["Rerun"].startswith(" ".join(d["command"]))
    assert f"aoti-bisect minify {d['run_dir']} --script {d['command'][1]}" in first["Next"]
    assert first["Next"].endswith(f"aoti-bisect report {d['run_dir']} --bundle")

    folded = _folded(tokens)
    stages = folded["Each stage in full: what it adds to the Rerun command, and its whole finding"]
    for s in d["stages"]:
        if s["rerun_script"]:
            assert all(f"{k}={v}" in stages for k, v in s["env"].items()), s["name"]
        finding = s["skipped"] and f"skipped: {s['skipped']}" or s["finding"]
        assert _flat(finding) in stages or _flat(finding) in _text(tokens), s["name"]  # whole, here or in its cell
    source = next(text for summary, text in folded.items() if summary.startswith("Culprit source: "))
    assert _flat(c["source"]["excerpt"]) == source
    packages = folded["Compiles (--reuse hooked) and packages"]
    runs: dict = {}
    for p in d["packages"]:
        runs[(p["stage"], p["sha256"][:12], p["action"])] = runs.get((p["stage"], p["sha256"][:12], p["action"]), 0) \
            + p["runs"]
    for (stage, sha, action), n in runs.items():
        assert f"{stage} " in packages and f"{sha} " in packages and f"{action} {n}" in packages
    assert packages.count(" | ") == 0 and sum(t.type == "tr_open" for t in tokens) >= len(d["stages"]) + 1
    environment = folded["Environment: torch, CUDA, GPU and driver, compiler, Python, OS"]
    for value in (env["torch"], env["torch_git"][:12], env["python"], env["cxx_version"], env["libstdcxx"]):
        assert value in environment
    assert "environment.collect_env" in environment and "Vulnerability" not in md
    # The baseline's key lines say only the message (on the first screen): no log block; every excerpt is in report.json.
    assert d["stages"][0]["excerpt"]["key_lines"] == [sig["message"]] and not any("Log" in k for k in folded)
    # The compile-only runs and the warm forks: one line each, whatever the slots.
    assert packages.count("compiled ahead in idle slots") <= 1 and packages.count("forked from a warm") <= 1
    # The chain names the culprit's lines once, on the first screen; report.json's evidence keeps them beside it too.
    chain = md.split("## Evidence chain")[1].split("```")[0]
    said = f"[{c['kernel']}: "
    assert said not in chain and any(said in sentence for sentence in c["evidence"])


def test_the_numeric_gap_is_a_table_of_at_most_15_rows_around_the_first_output_beyond_tolerance():
    d = real_report()
    long = "cpp_fused__softmax_abs_all_amax_div_eq_ge_mul_ne_neg_scalar_tensor_sub_where_1"
    d["culprit"]["gaps"] = [{"launch": i, "kernel": long if i == 13 else f"cpp_fused_{i}", "tensor": f"buf{i}",
                             "state": "differs" if i >= 12 else "agrees", "node": f"mul_{i}", "max_abs": 0.5 * i,
                             "max_rel": 0.01, "f64": 1e-6, "eager_f64": 1e-7, "rtol": 1.3e-5, "atol": 1e-4,
                             "ulp": 4096 * i, "cosine": 0.9999876}
                            for i in range(30)]
    md = render_markdown(d)
    table = md.split("## Numeric gap, kernel by kernel")[1].split("\n## ")[0]
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| #")]
    assert len(rows) == 15 and rows[0].startswith("| 5 |") and rows[-1].startswith("| 19 |")
    assert "Rows 6-20 of 30; all in report.json (`culprit.gaps`)." in " ".join(table.split())
    assert rows[7] == ("| 12 | cpp_fused_12 | buf12 | mul_12 | 6 (rel 0.01) | 4.92e+04 | 0.9999876 | 1e-06 | 1e-07 | "
                       "differs **first** |")
    assert rows[8].startswith("| 13 | cpp_fused\\_\\_softmax_abs_all_amax_div_eq_ge_m… |")  # a long name is cut
    assert all(len(line) <= TABLE_LINE for line in table.splitlines())
    assert "<td>cpp_fused_12</td>" in GFM.render(md)


def test_every_wrong_value_the_eager_stage_pins_has_its_per_kernel_gap_in_report_md_or_why_none():
    # The H100's reports (docs/evidence): a folded buffer whose walk compared two launches has its table; a replaced
    # parameter's package agrees with the exported program, so the walk compared no launch, and the section says why.
    # `scenarios check` holds every wrong value the eager stage pins (the manifest's stage) to this.
    from aoti_bisect.scenarios import compare, load_manifest
    evidence = os.path.join(os.path.dirname(DATA), "..", "docs", "evidence")
    scenarios = {s.name: s for s in load_manifest()}
    for name, rows in (("folded_temperature_cuda", 2), ("stale_parameter_replaced_cuda", 0)):
        with open(os.path.join(evidence, "gpu-wrong-values-2026-11-28", f"{name}.json")) as f:
            d = json.load(f)
        section = render_markdown(d).split("## Numeric gap, kernel by kernel")[1].split("\n## ")[0]
        assert len([line for line in section.splitlines() if line.startswith("| ") and "| # |" not in line]) == rows
        assert compare(scenarios[name], d) == []
    assert " ".join(section.split()).startswith(
        "No launch's output was held against eager, so no kernel has a row: the package's outputs agree with eager "
        "on every call compared (1): the script's check fails on something the exported program does not hold")
    d["culprit"]["gaps"] = [{"launch": i, "kernel": f"cpp_fused_{i}", "tensor": f"buf{i}", "state": "agrees"}
                            for i in range(20)]
    assert compare(scenarios[name], d) == []  # 15 rows shown, every one in report.json
    d["stages"] = [s for s in d["stages"] if s["name"] != "eager"]
    d["culprit"]["gaps"] = []
    assert compare(scenarios[name], d) == ["report.md has no per-kernel numeric gap"]


def test_a_precision_scenario_is_held_to_the_cause_its_control_told():
    from aoti_bisect.scenarios import compare, load_manifest
    fp16 = next(s for s in load_manifest() if s.name == "fp16_rounding_cuda")
    with open(os.path.join(os.path.dirname(DATA), "..", "docs", "evidence", "gpu-wrong-values-2026-11-28b",
                           "fp16_rounding_cuda.json")) as f:
        d = json.load(f)  # written before report.json held the cause
    assert compare(fp16, d) == ["culprit precision triton_poi_fused_exp_mul_neg_sub_0 != precision ~ "
                                "^triton_.*exp.*_[0-9]+$ (cause eager_rounding)"]
    d["culprit"]["precision"] = {"cause": "eager_rounding", "tested": "eager_rounding", "control": "passes"}
    assert compare(fp16, d) == []
