"""bench/'s pure parts: what it reads from a report, how it judges the by-hand ladder, its log; and that
each benchmark starts."""
import importlib.util
import json
import os
import subprocess
import sys

import pytest
from conftest import LOGS

from aoti_bisect.aoti import level2_file, printer
from aoti_bisect.scenarios import load_manifest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(REPO, "bench")
sys.path.append(BENCH)  # the benchmarks import their shared _common as a script's neighbour does


def _load(name):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", os.path.join(BENCH, f"{name}.py"))
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


floor, parse = _load("floor"), _load("parse")


def scenario(name):
    return next(s for s in load_manifest() if s.name == name)


def test_plan_reads_runs_and_compile_keys_from_a_report():
    with open(os.path.join(REPO, "docs", "examples", "nan_after_matmul.report.json")) as f:
        report = json.load(f)
    plan = floor.Plan.from_report(report)
    assert [name for name, _, _ in plan.steps] == ["baseline", "sanity", "trace", "inspect"]  # determinism: 0 runs
    # The baseline's runs: the rate ran on after the verdict, as many as the example's run took.
    baseline = report["stages"][0]["runs"]
    assert baseline > 2 and plan.runs == baseline + 3 and len(plan.keys) == 4


def test_by_hand_reads_the_last_launch_and_the_input_check(tmp_path):
    failed, passed = floor.Timed(10.0, 1), floor.Timed(10.0, 0)
    quiet = tmp_path / "quiet.log"
    quiet.write_text("ok\n")
    checked = tmp_path / "checked.log"
    checked.write_text("RuntimeError: input_handles[0]: unmatched stride value at 0, expected: 32, but got: 1\n")
    trace = (failed, os.path.join(LOGS, "cpu", "index_oob_level3.log"))
    answer = floor.by_hand_answer((failed, str(quiet)), trace, [failed] * 4)
    assert answer == floor.Answer(True, {"kind": "kernel", "kernel": "cpp_fused_add_index_mul_sin_sum_0"})
    assert floor._right(scenario("index_oob"), answer)
    assert not floor._right(scenario("nan_after_matmul"), answer)
    answer = floor.by_hand_answer((failed, str(checked)), trace, [failed] * 4)
    assert answer.culprit == {"kind": "model_input", "input_index": 0}
    assert floor._right(scenario("input_mismatch"), answer)
    none_named = floor.by_hand_answer((failed, str(quiet)), (failed, str(quiet)), [failed] * 4)
    assert floor._right(scenario("compile_error"), none_named) and not floor._right(scenario("index_oob"), none_named)
    not_reproduced = floor.by_hand_answer((passed, str(quiet)), (passed, str(quiet)), [passed] * 4)
    assert floor._right(scenario("passing_control"), not_reproduced)
    assert not floor._right(scenario("compile_error"), not_reproduced)


def test_generated_level2_log_parses_like_a_real_one(tmp_path):
    path = str(tmp_path / "l2.log")
    size = parse.write_level2_log(path, 9 << 20)
    assert size >= 9 << 20
    views, inputs = printer.collect(printer.parse_blocks(level2_file.read_pieces(path)))
    assert 100 < len(views) <= 6 * 500 and inputs  # a bounded set of kernels, launched again and again
    assert any(printer.is_bad(s, None) for v in views.values() for s in v.after.values())


@pytest.mark.parametrize("name", ["all", "overhead", "parallel", "floor", "parse"])
def test_each_benchmark_answers_help(name):
    out = subprocess.run([sys.executable, os.path.join(BENCH, f"{name}.py"), "--help"], capture_output=True,
                         text=True, cwd=REPO)
    assert out.returncode == 0 and "--repeats" in out.stdout, out.stderr


def test_the_flaky_benchmark_answers_help_and_judges_as_the_manifest_does():
    out = subprocess.run([sys.executable, os.path.join(BENCH, "flaky.py"), "--help"], capture_output=True,
                         text=True, cwd=REPO)
    assert out.returncode == 0 and "--bisections" in out.stdout, out.stderr
    sys.path.insert(0, BENCH)
    import flaky

    manifest = next(s for s in load_manifest() if s.name == "flaky_custom_op_crash")
    found = {"verdict": "reproduced", "culprit": {"kind": "outside_instrumented_kernels",
                                                  "kernel": "bisectlab::shifted_gather"}}
    assert flaky.right(found) and manifest.culprit["kind"] == found["culprit"]["kind"]
    assert not flaky.right({**found, "culprit": {"kind": "unknown", "kernel": None}})


def _runs(tmp_path, outcomes_and_seconds):
    for i, (outcome, seconds) in enumerate(outcomes_and_seconds):
        folder = tmp_path / "runs" / f"baseline-{i:03d}"
        folder.mkdir(parents=True)
        (folder / "result.json").write_text(json.dumps({"outcome": outcome, "duration_s": seconds}))
    return str(tmp_path)


def test_the_floor_of_a_rare_crash_is_one_compile_and_the_cheap_runs_to_it_over_the_slots(tmp_path):
    sys.path.insert(0, BENCH)
    import flaky

    # Run 0 compiles (50 s), runs 1-4 pass at 2 s, run 5 crashes: five cheap runs on two slots are three waves.
    out = _runs(tmp_path, [("passed", 50.0), ("passed", 2.0), ("passed", 3.0), ("passed", 2.0), ("passed", 2.0),
                           ("crashed", 0.8)])
    assert flaky.floor(out, 2) == (5, 50.0 + 3 * 2.0)
    assert flaky.floor(out, 1) == (5, 50.0 + 5 * 2.0)
    assert flaky.floor_cells(60.0, *flaky.floor(out, 2)) == ["5", "56", "1.07"]


def test_a_bisection_whose_runs_all_passed_or_whose_first_run_failed_has_the_floor_it_can(tmp_path):
    sys.path.insert(0, BENCH)
    import flaky

    assert flaky.floor(_runs(tmp_path / "a", [("passed", 50.0), ("passed", 2.0)]), 2) == (None, None)
    assert flaky.floor(_runs(tmp_path / "b", [("crashed", 40.0)]), 2) == (0, 40.0)
    assert flaky.floor_cells(None, 0, 40.0) == ["0", "-", "-"]
    # Run 1 crashed and none passed after the compile: the crashed run's own time stands for a cheap one.
    assert flaky.floor(_runs(tmp_path / "c", [("passed", 50.0), ("crashed", 0.8)]), 2) == (1, 50.8)
