"""report.json as typed records: loading with its schema version, the first screen read from them, minify's
section rewritten into report.md, and the bundle of a minified run read back from the tarball."""
import glob
import json
import os
import subprocess
import sys
import tarfile

import pytest

from aoti_bisect.failure import FailureKind, Phase
from aoti_bisect.report.bundle import write_bundle
from aoti_bisect.report.markdown import minify_step, render_markdown
from aoti_bisect.report.model import Report, rewrite_markdown
from aoti_bisect.report.record import Malformed, NewerSchema, ReportRecord
from aoti_bisect.report.redact import MASK, Redactor
from aoti_bisect.verdict import Verdict

DATA = os.path.join(os.path.dirname(__file__), "data", "report-nan_after_matmul.json")
# report.json of real runs: the captured one and docs/examples' (each README says how it was made).
REAL_REPORTS = [DATA, *sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "docs", "examples",
                                                     "*.report.json")))]
GH_TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
LINE = "h = torch.log(x - 0.5) * 2.0"
SOURCE = f" [cpp_fused_add_log_mul_relu_sub_0: line 14 of nan_after_matmul.py: `{LINE}`]"


def real() -> dict:
    with open(DATA) as f:
        return json.load(f)


def with_source(data: dict) -> dict:
    """The real report as the current aoti-bisect writes it: the culprit's line, and the conviction apart."""
    c = data["culprit"]
    c["origin"] = {"lines": [{"path": "/w/nan_after_matmul.py", "line": 14, "code": LINE}], "nodes": ["log"]}
    c["conviction"] = c["summary"]
    c["summary"] += SOURCE
    return data


def run_folder(tmp_path, data: dict) -> str:
    run = tmp_path / "run"
    (run / "minify").mkdir(parents=True)
    data["run_dir"] = str(run)
    (run / "report.json").write_text(json.dumps(data))
    return str(run)


def test_report_json_loads_into_typed_records():
    r = ReportRecord.from_json(real())
    assert r.schema_version == 1 and r.verdict is Verdict.REPRODUCED
    assert r.signature.kind is FailureKind.NAN_INF and r.signature.phase is Phase.RUN
    assert r.signature.kind == "nan_inf"  # a StrEnum: still equal to the word report.json holds
    assert [s.name for s in r.stages][:3] == ["baseline", "sanity", "determinism"]
    assert r.reproduction.runs == 2 and r.reproduction.ci95[1] == 1.0
    assert r.culprit.who() == "cpp_fused_add_log_mul_relu_sub_0" and r.environment.torch == "2.13.0+cpu"
    with pytest.raises(Exception):
        r.verdict = Verdict.ERROR  # frozen


def _lost(written, again, where="") -> list[str]:
    """Where `again` lacks a value `written` holds, or holds another."""
    if isinstance(written, dict) and isinstance(again, dict):
        return [lost for key, value in written.items()
                for lost in (_lost(value, again[key], f"{where}.{key}") if key in again else [f"{where}.{key}"])]
    if isinstance(written, list) and isinstance(again, list) and len(written) == len(again):
        return [lost for i, (a, b) in enumerate(zip(written, again)) for lost in _lost(a, b, f"{where}[{i}]")]
    return [] if written == again else [where]


@pytest.mark.parametrize("path", REAL_REPORTS, ids=os.path.basename)
def test_report_json_round_trips_through_the_typed_record(tmp_path, path):
    """report.json is written from the record: read into it, written, read back, it is the same record, and every
    field the real run wrote is still there with its value (the schema other readers rely on is kept)."""
    written = json.load(open(path))
    record = ReportRecord.from_json(written)
    Report(str(tmp_path), record).write()
    again = json.loads((tmp_path / "report.json").read_text())
    assert again == record.to_json()
    assert Report.load(str(tmp_path)).record == record
    assert _lost(written, again) == []


@pytest.mark.parametrize("edit, words", [
    (lambda d: d.update(schema_version=7), "schema_version 7, newer than"),
    (lambda d: d["signature"].update(kind="sideways"), "signature.kind 'sideways' is none of"),
    (lambda d: d["stages"][1].update(runs="two"), "stages[1].runs is str, not int"),
    (lambda d: d["reproduction"].update(ci95=[0.5]), "reproduction.ci95 is not a list of 2 numbers"),
    (lambda d: d["culprit"].update(stats=[{"arg": 3}]), "culprit.stats[0].arg is int, not string"),
    (lambda d: d.pop("stages"), "stages is missing"),
])
def test_a_field_that_is_not_what_aoti_bisect_writes_is_named(edit, words):
    data = real()
    edit(data)
    with pytest.raises(Malformed) as caught:
        ReportRecord.from_json(data)
    assert words in str(caught.value)
    assert isinstance(caught.value, NewerSchema) == ("newer" in words)


def test_the_first_screen_says_where_it_ran_and_how_to_rerun_it_and_names_the_source_once():
    first = render_markdown(with_source(real())).split("\n## ")[0]
    assert "- **Ran on**: torch 2.13.0+cpu (CPU-only build), device cpu; g++ (Debian 12.2.0-14+deb12u1) 12.2.0;" in first
    rerun = "/root/.pyenv/versions/3.11.7/bin/python /work/main/scenarios/cpu/nan_after_matmul.py"
    assert f"- **Rerun**: `{rerun}`" in first
    assert "[rerun.sh](<runs/baseline-000/rerun.sh>)" in first
    assert first.count("line 14 of nan_after_matmul.py") == 1  # in Source, not again in Convicted by
    assert "- **Convicted by**: cpp_fused_add_log_mul_relu_sub_0 produced bad values" in first
    assert len(first.splitlines()) <= 20


def test_minify_rewrites_the_minified_section_and_the_next_step_of_report_md(tmp_path):
    data = with_source(real())
    run = run_folder(tmp_path, data)
    data["next_steps"] = [data["next_steps"][0], minify_step(run, data["command"])]
    data["minify_step"] = 1
    open(os.path.join(run, "report.json"), "w").write(json.dumps(data))
    Report.load(run).write()
    before = flat(open(os.path.join(run, "report.md")).read())
    assert f"aoti-bisect minify {run}" in before and "DUMP_AOTI_MINIFIER" not in before
    assert "## Minified repro" not in before
    record = {"schema_version": 1, "status": "verified", "message": "minified 4 -> 1 node(s)",
              "repro": f"{run}/minify/repro.py", "nodes_before": 4, "nodes_after": 1, "ops_after": ["log"],
              "lines_before": 30, "lines_after": 12, "candidates": 3, "seconds": 20.5, "verified": True}
    open(os.path.join(run, "minify", "minify.json"), "w").write(json.dumps(record))
    for _ in range(2):  # a second minify rewrites the section, it does not add another
        rewrite_markdown(run)
    after = flat(open(os.path.join(run, "report.md")).read())
    assert after.count("## Minified repro") == 1 and "graph nodes: 4 -> 1 (log)" in after
    steps = after.split("## Next steps")[1].split(" ## ")[0]
    assert f"Attach the minified repro, {run}/minify/" in steps and "aoti-bisect minify" not in steps
    assert after.index("## Next steps") < after.index("## Minified repro") < after.index("Compiles (--reuse")


def test_a_minify_record_that_minify_did_not_write_leaves_the_section_out(tmp_path):
    run = run_folder(tmp_path, real())
    open(os.path.join(run, "minify", "minify.json"), "w").write(json.dumps({"message": "m", "nodes_after": "x"}))
    rewrite_markdown(run)
    md = open(os.path.join(run, "report.md")).read()
    assert md.startswith("# aoti-bisect report: reproduced") and "## Minified repro" not in md


def flat(md: str) -> str:
    """report.md with its wrapped lines joined: a path may be cut at the page's width."""
    return " ".join(md.split())


def test_the_bundle_of_a_minified_run_holds_the_repro_its_inputs_and_libraries_and_no_secret(tmp_path):
    run = run_folder(tmp_path, with_source(real()))
    minify = os.path.join(run, "minify")
    open(os.path.join(minify, "repro.py"), "w").write(f"TOKEN = '{GH_TOKEN}'\nimport torch\n")
    open(os.path.join(minify, "inputs.pt"), "wb").write(b"PK\x03\x04 tensors \x00\xff")
    open(os.path.join(minify, "libop.so"), "wb").write(b"\x7fELF \x00\x01")
    open(os.path.join(minify, "libleak.so"), "wb").write(b"\x7fELF " + GH_TOKEN.encode() + b"\x00")
    open(os.path.join(minify, "minify.json"), "w").write(json.dumps(
        {"status": "verified", "message": "minified", "repro": f"{minify}/repro.py", "nodes_after": 1}))
    os.symlink("/etc/passwd", os.path.join(minify, "liblink.so"))
    dest = tmp_path / "b.tar.gz"
    left_out = write_bundle(run, str(dest), Report.load(run).record, Redactor())
    with tarfile.open(dest) as tar:
        files = {m.name.split("/", 1)[1]: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    assert files["minify/inputs.pt"] == b"PK\x03\x04 tensors \x00\xff"  # whole: a masked zip would not load
    assert files["minify/libop.so"] == b"\x7fELF \x00\x01" and "minify/minify.json" in files
    assert MASK in files["minify/repro.py"].decode() and "import torch" in files["minify/repro.py"].decode()
    assert "minify/libleak.so" in left_out and "minify/liblink.so" not in files
    assert "## Minified repro" in files["report.md"].decode()
    assert not [name for name, blob in files.items() if GH_TOKEN.encode() in blob]


def test_report_bundle_with_a_format_is_one_line_and_exit_2(tmp_path):
    run = run_folder(tmp_path, real())
    proc = subprocess.run([sys.executable, "-m", "aoti_bisect", "report", run, "--bundle", "--format", "json"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "--bundle" in proc.stderr


def test_a_run_that_did_not_reproduce_reads_cleanly(tmp_path):
    data = real()
    data.update(verdict="not_reproduced", signature=None, culprit={"kind": None, "kernel": None, "evidence": []},
                reproduction={"runs": 3, "failures": 0, "rate": 0.0, "ci95": [0.0, 0.56]}, next_steps=[])
    for stage in data["stages"]:
        stage["failures"] = 0
    md = render_markdown(data)
    first = md.split("\n## ")[0]
    assert first.startswith("# aoti-bisect report: not reproduced\n")
    assert "- **Verdict**: not reproduced: none of 3 run(s) failed" in first
    assert " - " not in first and "Message" not in first and "**Next**" not in first
    report = Report(str(tmp_path), ReportRecord.from_json(data))
    assert report.headline() == "verdict: not reproduced | 0/3 runs failed"


def test_advice_names_the_minify_step_and_the_report_words_it_with_the_run_folder(tmp_path):
    from aoti_bisect.diagnose.advice import Step, next_steps
    from aoti_bisect.diagnose.findings import Culprit, Findings
    from aoti_bisect.run.types import Signature
    from aoti_bisect.stats import Rate

    sig, culprit, argv = Signature(FailureKind.NAN_INF, Phase.RUN, "nan"), Culprit("kernel", kernel="k"), ["python", "r.py"]
    steps = next_steps(argv, sig, culprit, cuda=False)
    assert Step.MINIFY in steps  # a value, not a sentence the report would find by its words
    out = Findings(Verdict.REPRODUCED, sig, Rate(2, 2), [], culprit=culprit, next_steps=steps)
    record = Report.from_findings(str(tmp_path), argv, out).record
    assert record.next_steps[record.minify_step] == minify_step(str(tmp_path), argv)
    assert Step.MINIFY not in record.next_steps


@pytest.mark.parametrize("tested, control, kind, cause, said", [
    ("eager_rounding", "passes", "precision", "eager_rounding", "eager's intermediate rounding: the package built "
     "rounding as eager does (emulate_precision_casts) clears the gap (control recompile)"),
    ("tf32", "passes", "precision", "tf32", "TF32's rounding of the matmul's operands: the package built with TF32 "
     "matmuls off clears the gap (control recompile)"),
    ("tf32", "still_fails", "kernel", "miscompile", "a miscompile: the package built with TF32 matmuls off still "
     "misses eager beyond the walk's tolerance, so the gap is not TF32's rounding of the matmul's operands"),
    ("tf32", "inconclusive", "unknown", "unknown", "unknown: the package built with TF32 matmuls off says nothing "
     "of the gap (the precision stage says why)"),
    ("eager_rounding", "still_fails", "precision", "unknown", "unknown: the package built rounding as eager does "
     "(emulate_precision_casts) still fails the script's check, so the gap is not eager's intermediate rounding alone"),
    ("eager_rounding", None, "precision", "unknown", "unknown: the package built rounding as eager does "
     "(emulate_precision_casts) was not run (the precision stage did not run)"),
])
def test_the_cause_of_a_precision_gap_is_a_field_of_report_json_and_report_md_says_it_from_there(
        tmp_path, tested, control, kind, cause, said):
    from aoti_bisect.diagnose.facts import FactKind, fact
    from aoti_bisect.diagnose.findings import Cause, Control, Culprit, Findings, Precision
    from aoti_bisect.report.plain import answer
    from aoti_bisect.run.types import Signature
    from aoti_bisect.stats import Rate
    sig = Signature(FailureKind.PYTHON_EXCEPTION, Phase.RUN, "wrong values: max abs difference 0.5", None, "f")
    culprit = Culprit(kind, kernel=None if kind == "unknown" else "cpp_fused_exp_mul_neg_sub_0",
                      precision=Precision(Cause(tested), control and Control(control)))
    culprit.evidence = [fact(FactKind.EAGER, "cpp_fused_exp_mul_neg_sub_0's output buf1 misses eager")]
    culprit.summary = None if kind == "unknown" else culprit.evidence[0]
    out = Findings(Verdict.REPRODUCED, sig, Rate(2, 2), [], culprit=culprit)
    report = Report.from_findings(str(tmp_path), ["python", "repro.py"], out)
    report.write()
    written = json.loads((tmp_path / "report.json").read_text())["culprit"]["precision"]
    assert written == {"cause": cause, "tested": tested, "control": control}
    record = Report.load(str(tmp_path)).record
    assert record.culprit.precision.cause == cause
    assert f"- **Cause**: {said}" in " ".join((tmp_path / "report.md").read_text().split("\n  "))
    assert f"cause: {said}" in answer(record, report.headline(), None, False)


def test_a_report_json_written_before_the_cause_was_recorded_reads_without_it():
    gpu = os.path.join(os.path.dirname(__file__), "..", "docs", "evidence", "gpu-wrong-values-2026-11-28b",
                       "tf32_matmul_cuda.json")
    for data in (real(), json.load(open(gpu))):
        record = ReportRecord.from_json(data)
        assert record.culprit.precision is None and "**Cause**" not in render_markdown(record)
