"""End to end on real AOTI compiles: every CPU scenario through `aoti-bisect scenarios check`.

The scenarios run in lanes at once, each one `scenarios check` with its own folder and cache (a compile cache is
never written by two at once): one with --ahead for the scenarios whose later stages take what compile-ahead
built, one with --no-ahead for those pinned before (see `lanes`), and a third for the scenarios whose time is
waiting (a hang sits out its timeouts on an idle core). Three CPU-bound lanes on 2 cores pushed cold
builds past the hang and load-error scenarios' timeouts (seen 2026-11-23). The lanes start with the session's first
test (tests/conftest.py, e2e_lanes) and run beside the rest of the suite, the light tests first; the tests here, which
read their results, run last. Scenarios in HEAVY prove again what a default one proves (the source line, a NaN
constant, the toolchain experiment):
`python -m pytest -q -m heavy tests/test_e2e.py` runs them.
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import threading
from typing import Callable

import pytest

from aoti_bisect.scenarios import load_manifest

pytestmark = pytest.mark.slow

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CPU = [s for s in load_manifest() if s.device == "cpu"]
# Each proves again what CI proves elsewhere, and runs with `-m heavy`: nan_source_line's source line is
# nan_after_matmul's; nan_constant and prebuilt_nan_constant convict a NaN constant as tests/test_constants.py does
# on a real package; tests/test_toolchains.py runs crashing_toolchain's experiment on a real package;
# bn_negative_running_var_inlined proves the constant-domain check in the plain lane, and the other root-cause
# scenarios (a buffer read from the package, a stale buffer, a prebuilt package's names) have their decisions
# tested on captured records (tests/test_constants.py, test_hook.py); symbolic_index_bound and empty_batch on
# their captured logs (tests/test_dynamic_shapes.py); wrong_fake_custom_op's check runs on its real program in
# tests/test_fakecheck.py; flaky_custom_op_crash's crash-driven ladder is bench/flaky.py's subject and
# rare_oob_custom_op's in CI; stale_parameter and stale_buffer_after_linear are stale constants as stale_buffer
# (tests/test_constants.py), index_from_bucketize an index's origin as index_plus_offsets in CI (its captured
# kernel in tests/test_index_origin.py). Keeping them out keeps `.ci/run` under 30 minutes on 2 cores.
# flaky_python_op_oob is convicted by its crash's own stack as rare_oob_custom_op is; tests/test_minify.py bisects it.
# stale_parameter_replaced and folded_temperature: the hook's lookup of the live module and its folded values run on
# real exported programs in tests/test_constants.py, and folded_temperature's decision on its captured records;
# bf16_rounding (the precision class) runs in CI; wrong_value_pass_bf16 is wrong_value_pass's miscompile in bfloat16,
# its decision (a stable node missed, farther from float64 than eager) as tests/test_eagerwalk.py's on captured walks;
# unwritten_buffer's hook and decision run on a real exported program in tests/test_eagerwalk.py, and
# dropout_in_training's and dropout_in_cond's naming of the draws on real exported programs, their decisions on their
# captured records there.
# rare_crash_custom_op's first crash convicts from its native stack as rare_oob_custom_op's does (and bench/flaky.py
# measures it); fixed_path_cache's package, built before the bisection, is walked through an instrumented copy as
# prebuilt_package's is; index_from_cumsum's computed index is followed to its model input on its captured kernel
# (tests/test_index_origin.py), as index_plus_offsets' is to its constant in CI. Keeping these out keeps the suite's
# CPU time, which on 2 cores is its wall time, near CI's 20 minutes (docs/benchmarks.md#the-test-suite).
# slow_cold_compile (a run its limit stops inside the compile, beside passes) is judged on its real stopped run's log
# (tests/test_classify.py) and by the ladder's rule against fake runs (tests/test_ladder.py): in a lane its stopped
# run would sit out two minutes.
# exact_float32_check's decision (a rounding difference below the walk's tolerance) runs on its captured record in
# tests/test_eagerwalk.py; the eager stage's path to it is wrong_value_pass's and bf16_rounding's in CI.
# nan_fed_back: its input check's NaN on a later call convicts no input (tests/test_ladder.py, on the hook's real
# record of a model called twice in tests/test_hook.py), and its walk reads the first bad call
# (tests/test_aoti_parsers.py).
HEAVY = ["slow_cold_compile", "exact_float32_check", "nan_fed_back",
         "nan_source_line", "nan_constant", "crashing_toolchain", "bn_negative_running_var", "stale_buffer",
         "prebuilt_named_inputs", "prebuilt_nan_constant", "symbolic_index_bound", "empty_batch",
         "wrong_fake_custom_op", "flaky_custom_op_crash", "stale_parameter", "stale_buffer_after_linear",
         "index_from_bucketize", "flaky_python_op_oob", "stale_parameter_replaced", "folded_temperature",
         "rare_crash_custom_op", "fixed_path_cache", "index_from_cumsum", "wrong_value_pass_bf16",
         "unwritten_buffer", "dropout_in_training", "dropout_in_cond"]
# silent_oob_custom_op (a silent read that only --sanitize's valgrind run sees) proves valgrind's conviction of a
# custom op's line in CI; rare_oob_custom_op's crashes now convict from their own stack before the checker is
# needed. Its own test below reads its report.
SILENT = "silent_oob_custom_op"
# CHECKED need valgrind (asked for with --sanitize, or a memory fault the memcheck stage pins): they run only where
# it is installed.
PLAIN = [s.name for s in CPU if not s.sanitize and s.stage != "memcheck" and s.name not in HEAVY]
CHECKED = [s.name for s in CPU if (s.sanitize or s.stage == "memcheck") and s.name not in HEAVY]


# Wall time spent waiting, not computing: hang_custom_op's three runs each sit out the manifest's timeout (the
# cold first run reached the op after 75 s beside the two busy lanes, 2026-11-25).
WAITING = {"hang_custom_op"}
# The stages pinned after every flag set --ahead compiles (the sanity and trace stages'; inspect and eager take
# them on the way). A scenario pinned before (a passing control, a compile or load error, a crash convicted by its
# own stack, valgrind's read) leaves its compiles ahead unused, and one pinned at the sanity stage (an input
# rejected) the trace one's, a compile (about 30 s of a core) for nothing on a machine whose every core is taken
# (measured in docs/benchmarks.md#the-test-suite): those run --no-ahead.
AHEAD_TAKEN = {"trace", "inspect", "eager"}
STAGE = {s.name: s.stage for s in CPU}
# The lanes and all they start run at a lower priority than the pytest process: its own tests are one chain of
# processes, one at a time, the suite's longest; the lanes take what that chain leaves of both cores
# (docs/benchmarks.md#the-test-suite). `nice`, not a preexec_fn: a follow-up starts from a thread.
YIELD = ("nice", "-n", "10")


def lanes(valgrind: bool) -> list[tuple[list[str], bool, int]]:
    """[(scenarios, ahead, jobs)] of each lane: the waiting scenarios in a lane of their own without compile-ahead
    and one job (and, after them, valgrind's silent read: two of its baseline runs compiling at once beside the busy
    lanes took 293 s and 300 s, its limit, in CI on 2026-11-28), then the scenarios whose later stages take what compile-ahead built, with --ahead and two jobs (so that both are
    checked end to end on real AOTI), and those pinned before them with --no-ahead (the tool's advice where other
    work takes every core: their compiles ahead would go unused) and one job: two runs of a cold key at once each
    compile it, one after the other the second finds Inductor's cache warm (15-19% less CPU for these scenarios,
    docs/benchmarks.md#the-test-suite). Each lane runs its scenarios in the manifest's order."""
    names = (CHECKED if valgrind else []) + PLAIN
    # valgrind's run (minutes of one core) follows the hang's timeouts, which leave the cores to the other lanes: in
    # the --no-ahead lane it was the suite's last piece, one core busy and the other idle.
    after_wait = [SILENT] if SILENT in names else []
    busy = [n for n in names if n not in WAITING and n not in after_wait]
    return [([n for n in names if n in WAITING] + after_wait, False, 1),
            ([n for n in busy if STAGE[n] in AHEAD_TAKEN], True, 2),
            ([n for n in busy if STAGE[n] not in AHEAD_TAKEN], False, 1)]


class Checks:
    """One `scenarios check` per lane, started at once. Each lane's stdout and stderr go to files beside its folder:
    a pipe that nobody reads while the rest of the suite runs would fill and stall the lane."""

    def __init__(self, root, groups: list[tuple[list[str], bool, int]]):
        self.checks = []  # (out, process, scenarios) of each lane
        self._lock = threading.Lock()
        self._stopped = False
        self._then: dict[str, tuple[threading.Thread, dict]] = {}
        for i, (names, ahead, jobs) in enumerate(g for g in groups if g[0]):
            out = root / f"group-{i}"
            with open(root / f"group-{i}.stdout", "w") as stdout, open(root / f"group-{i}.stderr", "w") as stderr:
                proc = subprocess.Popen(
                    [*YIELD, sys.executable, "-m", "aoti_bisect", "scenarios", "check", *names, "--device", "cpu",
                     "--jobs", str(jobs), "--ahead" if ahead else "--no-ahead", "--out", str(out)], stdout=stdout,
                    stderr=stderr, stdin=subprocess.DEVNULL)
            self.checks.append((out, proc, names))

    def wait(self, timeout: float):
        """[(returncode, stdout, stderr)] of each lane and every scenario's result, once all have ended."""
        outputs, results = [], {}
        for out, proc, _ in self.checks:
            proc.wait(timeout=timeout)
            stdout, stderr = (open(f"{out}.{name}").read() for name in ("stdout", "stderr"))
            outputs.append((proc.returncode, stdout, stderr))
            results.update(_results(out))
        return outputs, results

    def then(self, name: str, argv: Callable[[str], list[str]]) -> None:
        """Starts `argv(the scenario's run folder)` the moment the lane that checks `name` ends, beside the rest of
        the suite, rather than when the test that reads it runs: in the suite's last minutes, one core idle."""
        out, proc = next((out, proc) for out, proc, names in self.checks if name in names)
        state: dict = {}

        def follow():
            proc.wait()
            with self._lock:
                try:
                    result = None if self._stopped else _results(out).get(name)
                except FileNotFoundError:  # the lane died before its record: the test says so
                    result = None
                if result is not None:
                    state["run_dir"], state["log"] = result["run_dir"], out.parent / f"{name}.then.log"
                    with open(state["log"], "w") as log:
                        state["proc"] = subprocess.Popen([*YIELD, *argv(result["run_dir"])], stdout=log,
                                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

        thread = threading.Thread(target=follow, daemon=True)
        thread.start()
        self._then[name] = (thread, state)

    def follow_up(self, name: str, timeout: float) -> tuple[int, str, str]:
        """(returncode, output, run folder) of what `then` started for `name`, once it has ended."""
        thread, state = self._then[name]
        thread.join(timeout)
        assert "proc" in state, f"the lane checking {name} ended without a result for it"
        state["proc"].wait(timeout=timeout)
        return state["proc"].returncode, open(state["log"]).read(), state["run_dir"]

    def stop(self):
        """Ends the lanes still running (the session stopped early). SIGKILL: `scenarios check` went on after a SIGTERM
        (2026-11-27); each run's watchdog then ends that run's process tree (seen: nothing of the lanes left)."""
        with self._lock:
            self._stopped = True
        procs = [proc for _, proc, _ in self.checks] + [s["proc"] for _, s in self._then.values() if "proc" in s]
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def _results(out) -> dict:
    with open(out / "scenarios-check.json") as f:
        return {r["name"]: r for r in json.load(f)}


def start_lanes(root) -> Checks:
    """The default run's lanes (tests/conftest.py starts them when the session begins), and index_oob's minify
    once its lane has bisected it (test_minify_cuts_index_oob_to_a_few_nodes_that_fail_alone reads it)."""
    checks = Checks(root, lanes(shutil.which("valgrind") is not None))
    checks.then("index_oob", lambda run_dir: [sys.executable, "-m", "aoti_bisect", "minify", run_dir, "--jobs", "2",
                                              "--max-candidates", "3", "--script",
                                              os.path.join(REPO, "scenarios", "cpu", "index_oob.py")])
    return checks


def run_checks(root, groups: list[tuple[list[str], bool, int]], timeout: float):
    return Checks(root, groups).wait(timeout)


@pytest.fixture(scope="module")
def check_run(e2e_lanes):
    """The lanes' results; tests/conftest.py started the lanes when the session began (see e2e_lanes there)."""
    checks, root = e2e_lanes
    outputs, results = checks.wait(3600)
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
    culprit = next(line for line in proc.stdout.splitlines() if line.startswith("Culprit:"))
    assert proc.returncode == 1 and culprit.split(":", 1)[1].strip() == "kernel: cpp_fused_add_log_mul_relu_sub_0"


def test_rerun_script_reproduces_the_stage(check_run):
    _, results, _ = check_run
    run_dir = results["index_oob"]["run_dir"]
    report = json.load(open(os.path.join(run_dir, "report.json")))
    trace = next(s for s in report["stages"] if s["name"] == "trace")
    proc = subprocess.run(["sh", trace["rerun"][0]], capture_output=True, text=True, timeout=600)
    assert proc.returncode != 0
    assert "[ before_launch: cpp_fused_add_index_mul_sin_sum_0 ]" in proc.stdout + proc.stderr


def test_a_prebuilt_package_is_walked_through_an_instrumented_copy_and_left_untouched(check_run):
    _, results, _ = check_run
    result = results["prebuilt_package"]
    assert result["status"] == "ok", result.get("problems")
    report = json.loads(open(os.path.join(result["run_dir"], "report.json")).read())
    rows = [p for p in report["packages"] if p.get("redirect") == "instrumented"]
    assert rows and all(not p["built_here"] for p in rows)
    assert {p["stage"] for p in rows} >= {"trace", "inspect"}


@pytest.mark.heavy
@pytest.mark.parametrize("name", HEAVY)
def test_heavy_scenario_matches_manifest(tmp_path, name):
    outputs, results = run_checks(tmp_path, [([name], STAGE[name] in AHEAD_TAKEN, 2)], 1800)
    assert outputs[0][0] == 0, outputs[0][1] + outputs[0][2][-4000:]
    assert results[name]["status"] == "ok", results[name].get("problems")


def test_a_silent_out_of_bounds_read_in_a_custom_op_is_convicted_by_valgrind(check_run):
    if shutil.which("valgrind") is None:
        pytest.skip("valgrind is not installed (apt-get install valgrind): the CPU memcheck stage cannot run")
    _, results, _ = check_run
    result = results[SILENT]
    assert result["status"] == "ok", result.get("problems")
    report = json.loads(open(os.path.join(result["run_dir"], "report.json")).read())
    assert report["reproduction"]["failures"] == 0 and report["masked"]  # every plain run passed
    assert "window_sum" in report["culprit"]["summary"] and "main.cpp:" in report["culprit"]["summary"]
    assert [s["name"] for s in report["stages"] if s["runs"]] == ["baseline", "memcheck"]
    # On an AVX-512 host the checked run's flag set builds AVX2 code, compiled ahead outside valgrind, where torch
    # sees more ISAs than under it: the run under valgrind takes that package instead of compiling under the checker.
    memcheck = next(s for s in report["stages"] if s["name"] == "memcheck")
    assert (memcheck["compiles"]["compiled"], memcheck["compiles"]["reused"]) == (0, 1), memcheck["compiles"]


def test_a_rare_crash_in_a_custom_op_is_convicted_from_its_first_crash(check_run):
    """rare_oob_custom_op crashes one run in 8, the 4th (the draw is fixed by the run's index): the crashing run's own
    native stack names the op's function, so the verdict comes within 1/rate + 3 runs."""
    _, results, _ = check_run
    result, rate = results["rare_oob_custom_op"], 8
    assert result["status"] == "ok", result.get("problems")
    report = json.loads(open(os.path.join(result["run_dir"], "report.json")).read())
    assert "by the run's own native stack" in report["culprit"]["summary"]
    assert report["verdict_runs"] <= rate + 3
    stages = {s["name"]: s for s in report["stages"]}
    assert "own stack" in stages["trace"]["skipped"] and not stages["memcheck"]["runs"]
    assert report["reproduction"]["failures"] == 1  # a check stops the rate at the verdict


def test_a_rare_kernel_abort_convicts_the_kernel_and_names_the_input_from_its_first_crash(check_run):
    """rare_index_abort: one run in 10 (the 4th) aborts as the embedding kernel's own index check throws; the bad id
    exists only in that run. The crash names the kernel and the kernel's source names the input, within 1/rate + 4
    runs; the walk after the verdict reads the input's values in its next crash under the printer."""
    _, results, _ = check_run
    result = results["rare_index_abort"]
    assert result["status"] == "ok", result.get("problems")
    report = json.loads(open(os.path.join(result["run_dir"], "report.json")).read())
    assert report["verdict_runs"] <= 10 + 4
    told = "\n".join(report["culprit"]["evidence"])
    assert "by the run's own exception, thrown by the kernel's own check (first: baseline-003" in told
    assert "`ids`" in report["culprit"]["summary"]
    stages = {s["name"]: s for s in report["stages"]}
    assert "crashed run named the faulting kernel" in stages["trace"]["skipped"] and not stages["memcheck"]["runs"]
    # The baseline's runs after its first wave took the stored package, forked from a warm interpreter (docs/warm.md),
    # and the answer above is theirs; each says where its time went.
    runs = [json.loads(open(p).read()) for p in glob.glob(os.path.join(result["run_dir"], "runs", "baseline-*",
                                                                         "result.json"))]
    warm = [r for r in runs if r["warm"]]
    assert warm and all({"start", "setup", "reuse", "run"} <= set(r["phases"]) for r in warm)


def test_minify_cuts_index_oob_to_a_few_nodes_that_fail_alone(check_run, e2e_lanes):
    # The lane's bisection of index_oob, then `aoti-bisect minify` on its folder (started when that lane ended:
    # start_lanes): a capture run, the walk, and 3 candidates, each a real AOTI compile in a fresh process: the
    # whole graph (it must still fail), then ddmin's two halves in one wave of 2, the half that holds the index
    # failing (6 -> 3 nodes). A 4th candidate cut it to 2 nodes, one more compile that the assertions below do not
    # need; ddmin's further cuts are tests/test_minify.py's, on fakes.
    returncode, output, run_dir = e2e_lanes[0].follow_up("index_oob", 1200)
    assert returncode == 0, output[-3000:]
    record = json.load(open(os.path.join(run_dir, "minify", "minify.json")))
    assert record["verified"] and record["nodes_after"] <= 5 and record["nodes_before"] == 6
    assert "index" in record["ops_after"]
    assert record["signature"] == {"kind": "index_out_of_bounds", "phase": "run"}
    text = open(os.path.join(run_dir, "minify", "repro.py")).read()
    assert "torch.ops.aten.index.Tensor" in text
    report = subprocess.run([sys.executable, "-m", "aoti_bisect", "report", run_dir], capture_output=True, text=True)
    assert "## Minified repro" in report.stdout
