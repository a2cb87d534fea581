"""End to end on real AOTI compiles: every CPU scenario through `aoti-bisect scenarios check`.

The scenarios run as two checks at once, each with its own folder and cache (a compile cache is never
written by two at once): the library, and beside it the one that needs the memory checker, whose single
valgrind run takes minutes on one core. Three at once on 2 cores pushed cold builds past the hang and
load-error scenarios' timeouts (seen 2026-11-23).
"""
import json
import os
import shutil
import subprocess
import sys

import pytest

from aoti_bisect.scenarios import load_manifest

pytestmark = pytest.mark.slow

CPU = [s for s in load_manifest() if s.device == "cpu"]
PLAIN = [s.name for s in CPU if not s.sanitize]
GROUPS = [PLAIN, [s.name for s in CPU if s.sanitize]]


@pytest.fixture(scope="module")
def check_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("scenarios")
    if shutil.which("valgrind") is None:
        GROUPS[1].clear()  # its test skips, saying why
    checks = []
    for i, names in enumerate(g for g in GROUPS if g):
        out = root / f"group-{i}"
        checks.append((out, subprocess.Popen(
            [sys.executable, "-m", "aoti_bisect", "scenarios", "check", *names, "--device", "cpu", "--jobs", "2",
             "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
    outputs, results = [], {}
    for out, proc in checks:
        stdout, stderr = proc.communicate(timeout=2400)
        outputs.append((proc.returncode, stdout, stderr))
        with open(out / "scenarios-check.json") as f:
            results.update({r["name"]: r for r in json.load(f)})
    return outputs, results, root


def test_check_exits_zero_and_prints_table(check_run):
    outputs, _, _ = check_run
    for returncode, stdout, stderr in outputs:
        assert returncode == 0, stdout + stderr[-4000:]
        assert "| scenario" in stdout


@pytest.mark.parametrize("name", PLAIN)
def test_scenario_matches_manifest(check_run, name):
    _, results, _ = check_run
    assert results[name]["status"] == "ok", results[name].get("problems")


def test_nan_report_has_walk_back_evidence_and_rerenders(check_run):
    _, results, _ = check_run
    run_dir = results["nan_after_matmul"]["run_dir"]
    report = json.load(open(os.path.join(run_dir, "report.json")))
    assert report["schema_version"] == 1 and report["complete"] is True
    stages = {s["name"]: s for s in report["stages"]}
    assert stages["determinism"]["skipped"].startswith("CPU-only repro")
    assert stages["trace"]["recompiled"] and stages["inspect"]["recompiled"]
    assert any("from good inputs" in e for e in report["culprit"]["evidence"])
    assert "cpp_fused_add_log_mul_relu_sub_0" in report["culprit"]["source"]["excerpt"]
    md = open(os.path.join(run_dir, "report.md")).read()
    assert "## Evidence chain" in md and len(md) <= 65536
    proc = subprocess.run([sys.executable, "-m", "aoti_bisect", "report", run_dir, "--format", "text"],
                          capture_output=True, text=True)
    assert proc.returncode == 1 and "culprit kernel: cpp_fused_add_log_mul_relu_sub_0" in proc.stdout


def test_rerun_script_reproduces_the_stage(check_run):
    _, results, _ = check_run
    run_dir = results["index_oob"]["run_dir"]
    report = json.load(open(os.path.join(run_dir, "report.json")))
    trace = next(s for s in report["stages"] if s["name"] == "trace")
    proc = subprocess.run(["sh", trace["rerun"][0]], capture_output=True, text=True, timeout=600)
    assert proc.returncode != 0
    assert "[ before_launch: cpp_fused_add_index_mul_sin_sum_0 ]" in proc.stdout + proc.stderr


def test_prebuilt_package_gets_no_launch_lines_and_says_why(tmp_path):
    build = (
        "import torch, sys\n"
        "class M(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return torch.log(x - 0.5) * 2\n"
        "ep = torch.export.export(M(), (torch.rand(4, 16),))\n"
        "torch._inductor.aoti_compile_and_package(ep, package_path=sys.argv[1])\n")
    pkg = tmp_path / "prebuilt.pt2"
    env = dict(os.environ, TMPDIR=str(tmp_path), TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "build-cache"))
    subprocess.run([sys.executable, "-c", build, str(pkg)], check=True, env=env, capture_output=True, timeout=600)
    repro = tmp_path / "load_prebuilt.py"
    repro.write_text(
        "import sys, torch\n"
        "runner = torch._inductor.aoti_load_package(sys.argv[1])\n"
        "if not torch.isfinite(runner(torch.rand(4, 16))).all():\n"
        "    raise SystemExit('non-finite output')\n")
    out = subprocess.run([sys.executable, "-m", "aoti_bisect", str(repro), "--json", "--out", str(tmp_path / "run"),
                          "--", str(pkg)], capture_output=True, text=True, timeout=900)
    assert out.returncode == 1, out.stderr
    report = json.loads(out.stdout)
    trace = next(s for s in report["stages"] if s["name"] == "trace")
    assert "no launch lines" in trace["finding"] and "prebuilt .pt2" in trace["finding"]
    assert report["culprit"]["kind"] == "unknown"
    assert not any(s["recompiled"] and s["runs"] and s["name"] == "inspect" for s in report["stages"])


def test_a_silent_out_of_bounds_read_in_a_custom_op_is_convicted_by_valgrind(check_run):
    if shutil.which("valgrind") is None:
        pytest.skip("valgrind is not installed (apt-get install valgrind): the CPU memcheck stage cannot run")
    _, results, _ = check_run
    result = results["silent_oob_custom_op"]
    assert result["status"] == "ok", result.get("problems")
    report = json.loads(open(os.path.join(result["run_dir"], "report.json")).read())
    assert report["reproduction"]["failures"] == 0 and report["masked"]  # every plain run passed
    assert "window_sum" in report["culprit"]["summary"] and "main.cpp:" in report["culprit"]["summary"]
    assert [s["name"] for s in report["stages"] if s["runs"]] == ["baseline", "memcheck"]
