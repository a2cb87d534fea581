"""Compile reuse (aoti_bisect/child/hook/reuse.py): later runs of a flag set take the package the first one built.

Real children under the real harness and real torch: export, torch.export.save, Inductor's config and the
hook are torch's own. Only Inductor's backend (`_aoti_compile_and_package_inner`, which the public
aoti_compile_and_package calls) is swapped in the child for one that writes a small zip and says COMPILING,
so that a test can count compiles in seconds; one heavy test compiles for real. Each child still imports torch
and exports (seconds a child, 2-4 children a test), so the tests with children are marked slow: out of the fast
loop, in the default run. The scheduler's tests that read only when runs started and ended run a stand-in child
without torch (STAND_IN).
"""
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import threading
import zipfile

import pytest

from aoti_bisect.aoti.hook_record import ahead_row, compile_counts, package_rows, read_hook
from aoti_bisect.child import contract
from aoti_bisect.run.environment import VEC_ISA_ANSWER, VEC_ISA_OK
from aoti_bisect.run.harness import Harness
from aoti_bisect.run.layout import compile_key
from aoti_bisect.diagnose.evidence import RunEvidence
from aoti_bisect.run.types import Outcome, ProcessExit, RunResult, RunSpec

NAN = (("TORCHINDUCTOR_NAN_ASSERTS", "1"),)

REPRO = """
import os, sys, time, zipfile
print("START", time.time(), flush=True)
import torch, torch._inductor

SCALE = float(os.environ.get("SCALE", "2"))  # baked into the graph: another value, another program


class M(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) * SCALE


def backend(gm, args, kwargs, *, inductor_configs, package_path=None, **rest):
    print("COMPILING", flush=True)
    time.sleep(float(os.environ.get("COMPILE_S", "0")))
    with zipfile.ZipFile(package_path, "w") as z:
        z.writestr("m/data/aotinductor/model/m.wrapper.cpp", f"scale={SCALE} nan={torch._inductor.config.nan_asserts}")
    return package_path


if os.environ.get("FAKE_BACKEND", "1") == "1":
    torch._inductor._aoti_compile_and_package_inner = backend
if os.environ.get("SET_CONFIG"):
    torch._inductor.config.max_autotune = True  # the repro changes Inductor's config in code
ep = torch.export.export(M(), (torch.randn(2, 3) if os.environ.get("RANDOM_EXAMPLE") else torch.ones(2, 3),))
configs = {"max_autotune_gemm": True} if os.environ.get("INDUCTOR_CONFIGS") else None
path = os.path.abspath("m.pt2")
returned = torch._inductor.aoti_compile_and_package(ep, package_path=path, inductor_configs=configs)
assert returned == path, returned
if os.environ.get("FAKE_BACKEND", "1") == "1":
    with zipfile.ZipFile(path) as z:
        print("PACKAGE", z.read("m/data/aotinductor/model/m.wrapper.cpp").decode())
    if os.environ.get("LOAD"):  # as a repro goes on to run what it compiled (the fake package cannot load)
        try:
            torch._inductor.aoti_load_package(path)
        except Exception:
            pass
        print("AFTER LOAD", flush=True)
else:
    print("OUT", torch._inductor.aoti_load_package(path)(torch.ones(2, 3)).tolist())
print("END", time.time(), flush=True)
"""


# For the scheduler's tests whose assertions read only when runs started and ended: a real process under the real
# harness and scheduler, without the 4 s of CPU a torch import and an export cost each REPRO child.
STAND_IN = """
import os, time
print("START", time.time(), flush=True)
time.sleep(float(os.environ.get("COMPILE_S", "0")))
print("END", time.time(), flush=True)
"""


@pytest.fixture
def repro(write_script):
    return write_script("repro.py", REPRO)


@pytest.fixture
def stand_in(write_script):
    return write_script("stand_in.py", STAND_IN)


def harness(tmp_path, reuse="all", jobs=1, check_isa=False, **env):
    # Keying asks torch for its vector ISAs, which a fresh cache answers with a C++ build per ISA; the fake
    # backend compiles nothing, so only the tests of that answer pay for it.
    isa = {} if check_isa else {VEC_ISA_OK: "1"}
    return Harness(str(tmp_path / "run"), base_env={**os.environ, **isa, **env}, jobs=jobs, reuse=reuse)


def run(h, repro, index, flags=(), stage="baseline"):
    result = h.run(RunSpec((sys.executable, repro), stage, index, flags, 300.0, stage != "baseline"))
    with open(result.log_path) as f:
        log = f.read()
    assert result.outcome is Outcome.PASSED, log
    (event,) = [e for e in read_hook(result.run_dir).events if e.compiled]
    return log, event, result


@pytest.fixture(scope="module")
def first_run_template(tmp_path_factory):
    """A repro.py and the run folder of `harness()` after its first run (index 0, the default flag set, which
    compiles and stores its package): the same child began six tests below, about 5 s each (a torch import and an
    export). Each of them copies the run folder (`after_first_run`) and goes on from there with the same repro.py,
    never edited: the key takes the exported program, whose stack traces name the script's path, so only the
    same path hits (a test that edits the script runs its own first run)."""
    folder = tmp_path_factory.mktemp("first-run")
    (folder / "repro.py").write_text(REPRO)
    first = run(harness(folder / "template"), str(folder / "repro.py"), 0)
    return folder, first


@pytest.fixture
def after_first_run(tmp_path, first_run_template):
    """(the template's repro.py, its first run's (log, event, result)), with a copy of its run folder where
    `harness(tmp_path)` takes it, which the test may change without another seeing it."""
    folder, first = first_run_template
    shutil.copytree(folder / "template" / "run", tmp_path / "run", symlinks=True)
    return str(folder / "repro.py"), first


@pytest.mark.slow
def test_a_later_run_of_the_flag_set_reuses_the_first_ones_package(tmp_path, after_first_run):
    repro, (first_log, first, _) = after_first_run
    h = harness(tmp_path)
    second_log, second, result = run(h, repro, 1)
    assert first_log.count("COMPILING") == 1 and "COMPILING" not in second_log
    assert (first.reuse, first.reuse_reason) == ("compiled", "no cached package for this key")
    assert (second.reuse, second.reuse_reason) == ("reused", None)
    assert first.sha256 == second.sha256 and "PACKAGE scale=2.0" in second_log
    assert [r["action"] for r in package_rows("baseline", [read_hook(result.run_dir)])] == ["reused"]
    assert compile_counts("baseline", [read_hook(result.run_dir)], True).describe() == \
        "baseline: 0 of 1 run(s) compiled, 1 reused the flag set's package"


def test_a_baseline_whose_later_runs_took_the_stored_package_says_how_each_part_came_by_it():
    row = dataclasses.replace(compile_counts("baseline", [], True, unhooked=2), runs=26, reused=26)
    assert row.describe() == ("baseline: 2 run(s) without the hook, each compiling as the script does; of the "
                                    "26 with it, 0 compiled, 26 reused the flag set's package")


@pytest.mark.slow
def test_example_inputs_drawn_afresh_each_run_still_hit(tmp_path, repro):
    h = harness(tmp_path, RANDOM_EXAMPLE="1")  # unseeded torch.randn: other values every run, the same program
    run(h, repro, 0)
    log, event, _ = run(h, repro, 1)
    assert "COMPILING" not in log and event.reuse == "reused"


@pytest.mark.slow
def test_another_program_misses(tmp_path, after_first_run):
    repro, _ = after_first_run
    h = harness(tmp_path)
    h.environment.base_env["SCALE"] = "3"
    log, event, _ = run(h, repro, 1)
    assert "COMPILING" in log and "PACKAGE scale=3.0" in log
    assert (event.reuse, event.reuse_reason) == ("compiled", "no cached package for this key")


@pytest.mark.slow
def test_an_edit_of_the_script_misses(tmp_path, repro):
    # A user Triton kernel is saved in the program by its op's name only: the edit must show some other way.
    h = harness(tmp_path)
    run(h, repro, 0)
    with open(repro, "a") as f:
        f.write("# an edit that leaves the exported program as it was\n")
    log, event, _ = run(h, repro, 1)
    assert "COMPILING" in log and event.reuse == "compiled"


@pytest.mark.slow
@pytest.mark.parametrize("change", ["SET_CONFIG", "INDUCTOR_CONFIGS"])
def test_a_change_of_inductors_config_in_code_or_in_the_call_misses(tmp_path, after_first_run, change):
    repro, _ = after_first_run
    h = harness(tmp_path)
    h.environment.base_env[change] = "1"
    log, event, _ = run(h, repro, 1)
    assert "COMPILING" in log and event.reuse == "compiled"
    log, event, _ = run(h, repro, 2)  # the changed call now has a package of its own
    assert "COMPILING" not in log and event.reuse == "reused"


@pytest.mark.slow
def test_flag_sets_never_share_a_package(tmp_path, after_first_run):
    repro, _ = after_first_run
    h = harness(tmp_path)
    log, event, result = run(h, repro, 1, NAN, "sanity")
    assert "COMPILING" in log and "nan=True" in log and event.reuse == "compiled"
    assert os.listdir(os.path.join(h.layout.cache_root, compile_key(dict(NAN)) + ".reuse"))
    with open(os.path.join(result.run_dir, "hook.json")) as f:
        assert json.load(f)["events"][0]["reuse"]["flag_set"] == compile_key(dict(NAN))


@pytest.mark.slow
def test_a_damaged_cached_package_is_compiled_again_and_the_record_says_why(tmp_path, after_first_run):
    repro, _ = after_first_run
    h = harness(tmp_path)
    folder = os.path.join(h.layout.cache_root, "default.reuse")
    (stored,) = [os.path.join(folder, n) for n in os.listdir(folder) if n.endswith(".pt2")]
    with open(stored, "r+b") as f:
        f.truncate(10)
    log, event, result = run(h, repro, 1)
    assert "COMPILING" in log and event.reuse == "compiled"
    assert event.reuse_reason.startswith("cached package failed its check: sha256 ")
    counts = compile_counts("baseline", [read_hook(result.run_dir)], True)
    assert counts.compiled == 1 and list(counts.reasons) == [event.reuse_reason]
    assert zipfile.ZipFile(stored).testzip() is None  # the compile stored a whole one again
    log, event, _ = run(h, repro, 2)
    assert event.reuse == "reused"


@pytest.mark.slow
def test_two_concurrent_runs_of_a_flag_set_compile_once(tmp_path, repro):
    h = harness(tmp_path, jobs=2, COMPILE_S="4")
    results = {}
    threads = [threading.Thread(target=lambda i=i: results.setdefault(i, run(h, repro, i))) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    logs = [results[i][0] for i in (0, 1)]
    events = [results[i][1] for i in (0, 1)]
    assert sum(log.count("COMPILING") for log in logs) == 1
    assert sorted(e.reuse for e in events) == ["compiled", "reused"]
    assert {e.sha256 for e in events} == {events[0].sha256}
    with open(os.path.join(results[[e.reuse for e in events].index("reused")][2].run_dir, "hook.json")) as f:
        assert json.load(f)["events"][0]["reuse"]["waited_s"] > 1.0


def test_only_the_runs_the_mode_names_get_reuse(tmp_path):
    base = RunSpec(("python", "x.py"), "baseline", 0, (), 1.0, False)
    trace = RunSpec(("python", "x.py"), "trace", 1, (("AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER", "3"),),
                    1.0, True)
    for mode, baseline_reuses, trace_reuses in (("hooked", False, True), ("all", True, True),
                                                ("none", False, False)):
        h = harness(tmp_path, reuse=mode)
        on = {name: h.environment.overlay(spec, "/r/x") for name, spec in (("baseline", base), ("trace", trace))}
        assert (contract.REUSE_ENV in on["baseline"], contract.REUSE_ENV in on["trace"]) == \
            (baseline_reuses, trace_reuses)
        # reuse is the hook's: the baseline then carries it
        assert (contract.HOOK_ENV in on["baseline"]) == (mode == "all")
    assert on["trace"][contract.HOOK_ENV] and contract.FLAG_SET_ENV not in on["trace"]
    assert h.environment.reuse_dir(trace) is None
    assert harness(tmp_path).environment.reuse_dir(trace).endswith(compile_key(trace.env_dict) + ".reuse")


# 34 s: the e2e lanes' sanity and trace runs reuse real packages (and those built ahead) and name the manifest's
# culprits; keeps `python -m pytest -q` under CI's 30 minutes (see the README's set-up section).
@pytest.mark.heavy
def test_a_real_compile_is_reused_and_the_reused_package_gives_the_same_output(tmp_path, repro):
    h = harness(tmp_path, FAKE_BACKEND="0")
    first_log, first, _ = run(h, repro, 0)
    second_log, second, _ = run(h, repro, 1)
    assert (first.reuse, second.reuse) == ("compiled", "reused") and first.sha256 == second.sha256
    out = [line for line in first_log.splitlines() if line.startswith("OUT")]
    assert out == [line for line in second_log.splitlines() if line.startswith("OUT")] == \
        ["OUT [[2.0, 2.0, 2.0], [2.0, 2.0, 2.0]]"]


def _bench():
    import importlib.util
    bench = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")
    sys.path.append(bench)  # it imports its neighbour _common as a script does
    spec = importlib.util.spec_from_file_location("bench_reuse_gpu", os.path.join(bench, "reuse_gpu.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_benchmarks_floor_is_one_compile_per_key_plus_the_other_runs_over_the_slots():
    module = _bench()
    runs = [("default", 60.0, 0.0), ("default", 5.5, 0.5), ("default", 5.0, 0.0), ("abc", 70.0, 0.2),
            ("abc", 6.2, 0.2)]
    assert module.floor(runs, 1) == 60.0 + 5.0 + 5.0 + 70.0 + 6.0
    assert module.floor(runs, 2) == 60.0 + 70.0 + (5.0 + 5.0 + 6.0) / 2


def test_the_benchmark_counts_a_flag_sets_compile_where_it_ran_ahead(tmp_path):
    module = _bench()
    for name, seconds in (("baseline-000", 60.0), ("sanity-001", 5.0)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "result.json").write_text(json.dumps({"duration_s": seconds}))
    sanity = {"NAN": "1"}
    report = {"stages": [{"name": "baseline", "env": {}, "logs": [str(tmp_path / "baseline-000" / "output.log")]},
                         {"name": "sanity", "env": sanity, "logs": [str(tmp_path / "sanity-001" / "output.log")]}],
              "compiled_ahead": [{"flag_set": compile_key(sanity), "seconds": 58.0, "compiled": 1,
                                  "ended": "stopped before its first package load"},
                                 {"flag_set": "killed", "seconds": 9.0, "compiled": 1,
                                  "ended": "killed: the ladder needed nothing more"}]}
    runs = module.runs_of(report)
    assert runs == [(compile_key(sanity), 58.0, 0.0), ("default", 60.0, 0.0), (compile_key(sanity), 5.0, 0.0)]
    assert module.floor(runs, 2) == 58.0 + 60.0 + 5.0 / 2  # the stage's reused run is not its key's compile


@pytest.mark.slow
def test_the_report_says_per_stage_which_runs_compiled_and_which_reused(tmp_path, repro):
    from aoti_bisect.diagnose.findings import Findings, Stage
    from aoti_bisect.report.model import Report
    from aoti_bisect.stats import Rate
    from aoti_bisect.verdict import Verdict

    h = harness(tmp_path, reuse="hooked", LOAD="1")
    trace = Stage("trace", dict(NAN))
    for i in (0, 1):
        trace.results.append(run(h, repro, i, NAN, "trace")[2])
    baseline = Stage("baseline", {})
    baseline.results.append(h.run(RunSpec((sys.executable, repro), "baseline", 2, (), 300.0, False)))
    ahead = h.run(RunSpec((sys.executable, repro), "ahead-trace", 0, NAN, 300.0, True, compile_only=True))
    stages = [baseline, trace]
    compiles = [compile_counts(s.name, [read_hook(r.run_dir) for r in s.results], h.environment.hooked_stage(s.hook))
                for s in stages]
    out = Findings(Verdict.NOT_REPRODUCED, None, Rate(0, 1), stages)
    report = Report.from_findings(str(tmp_path), ["python", "repro.py"], out, compiles=compiles,
                                  reuse=h.environment.reuse,
                                  ahead=(ahead_row(ahead.spec.name, read_hook(ahead.run_dir), 12.34, False),))
    assert report.data["reuse"] == "hooked"
    assert [s["compiles"]["reused"] for s in report.data["stages"]] == [0, 1]
    report.write()
    markdown = " ".join((tmp_path / "report.md").read_text().split())  # list items wrap at 100 columns
    assert "- baseline: 1 run(s) without the hook, each compiling as the script does (no reuse)" in markdown
    assert ("- trace: 1 of 2 run(s) compiled, 1 reused the flag set's package; compiled because: no cached "
            "package for this key (1)") in markdown
    assert "- compiled ahead in idle slots, for later stages: ahead-trace-000 12.3 s (0 compiled, 1 reused)" in markdown


def test_the_gpu_benchmark_answers_help():
    import subprocess
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, os.path.join(repo, "bench", "reuse_gpu.py"), "--help"], capture_output=True,
                         text=True, cwd=repo)
    assert out.returncode == 0 and "--skip-off" in out.stdout, out.stderr


def test_a_run_served_from_its_flag_sets_package_finds_the_wrapper_its_key_compiled(tmp_path):
    """Under reuse, a later slot's run compiles nothing in its own cache (seen in the flaky benchmark, where a
    trace run in slot 1 lost the launch after the last finished kernel): the key's first slot has the sources."""
    compiled = tmp_path / "cache" / "7a73aa2576" / "inductor" / "cx"
    compiled.mkdir(parents=True)
    with open(os.path.join(os.path.dirname(__file__), "data", "eagerwalk", "wrong_value_pass.wrapper.cpp")) as f:
        (compiled / "w.wrapper.cpp").write_text(f.read())
    (tmp_path / "cache" / "7a73aa2576.slot1" / "inductor").mkdir(parents=True)
    run = RunResult(RunSpec(("python", "r.py"), "trace", 3, ()), Outcome.PASSED, ProcessExit(0, None, False, 1.0, 0),
                    str(tmp_path / "runs" / "trace-003"), str(tmp_path / "log"), None,
                    str(tmp_path / "cache" / "7a73aa2576.slot1"))
    graph = RunEvidence().graph(run)
    assert graph is not None and [launch.name for launch in graph.launches][-1] == "cpp_fused__softmax_add_mul_sum_1"


@pytest.mark.slow
def test_the_first_runs_vector_isa_answer_spares_the_later_hooked_runs_the_check(tmp_path, repro):
    h = harness(tmp_path, check_isa=True)
    run(h, repro, 0)
    with open(os.path.join(h.layout.run_dir, VEC_ISA_ANSWER)) as f:
        answer = json.load(f)
    assert answer["checked"] and answer["pid"]
    _, second, result = run(h, repro, 1)
    with open(os.path.join(result.run_dir, "spec.json")) as f:
        overlay = json.load(f)["env_overlay"]
    same = answer["checked"] == answer["claimed"]
    assert overlay.get(VEC_ISA_OK) == ("1" if same else None)
    assert h.environment.vec_isa_skipped == int(same or bool(answer.get("builds")))
    assert second.reuse == "reused"  # the shortcut gives the same ISAs: the flag set's package still serves
    assert result.gpu_peak == 0  # its hook noted at exit that it used no GPU: no GPU bounds the runs (slots.py)


@pytest.mark.parametrize("answer, user, shortcut", [
    (None, None, False),
    ({"checked": ["avx512", "avx2"], "claimed": ["avx512", "avx2"]}, None, True),
    ({"checked": ["avx2"], "claimed": ["avx512", "avx2"]}, None, False),  # a dry compile failed: keep checking
    ({"checked": [], "claimed": []}, None, False),
    ({"checked": ["avx2"], "claimed": ["avx2"]}, "0", False),  # the user's own setting stands
])
def test_the_vector_isa_shortcut_only_where_it_gives_the_checked_answer(tmp_path, answer, user, shortcut):
    h = harness(tmp_path, check_isa=True, **({VEC_ISA_OK: user} if user else {}))
    os.makedirs(h.layout.run_dir, exist_ok=True)
    if answer is not None:
        with open(os.path.join(h.layout.run_dir, VEC_ISA_ANSWER), "w") as f:
            json.dump(answer, f)
    env = h.environment.vec_isa()
    assert env[contract.VEC_ISA_ENV] == os.path.join(h.layout.run_dir, VEC_ISA_ANSWER)
    assert (env.get(VEC_ISA_OK) == "1") == shortcut
    trace = RunSpec(("python", "x.py"), "trace", 1, (), 1.0, True)
    base = RunSpec(("python", "x.py"), "baseline", 0, (), 1.0, False)
    assert contract.VEC_ISA_ENV in h.environment.overlay(trace, "/r/x")
    checked = harness(tmp_path, reuse="hooked", check_isa=True)
    assert contract.VEC_ISA_ENV not in checked.environment.overlay(base, "/r/x")


def test_the_reports_environment_says_which_isas_were_taken_and_how_many_runs_skipped_the_check():
    from aoti_bisect.report.markdown import _environment
    same = "\n".join(_environment({"vec_isa": {"checked": ["avx512", "avx2"], "claimed": ["avx512", "avx2"],
                                               "runs_that_skipped_the_check": 5}}, None))
    assert "avx512, avx2 (checked by the first hooked run; 5 later hooked run(s) took its answer)" in same
    differ = "\n".join(_environment({"vec_isa": {"checked": ["avx2"], "claimed": ["avx512", "avx2"],
                                                 "runs_that_skipped_the_check": 0}}, None))
    assert "avx2 (checked by the first hooked run; the CPU claims avx512, avx2; 0 later hooked run(s) took" in differ


ISA_CHILD = """
import json
from aoti_bisect.child.hook import vecisa
vecisa.prime()
from torch._inductor import cpu_vec_isa
print(json.dumps([str(isa) for isa in cpu_vec_isa.valid_vec_isa_list()]))
vecisa.share()
"""


@pytest.mark.slow
def test_a_later_run_takes_each_dry_compile_outcome_from_the_first_runs_answer_and_makes_none(tmp_path):
    # The checks for AVX-512 BF16, VNNI and AMX ignore TORCHINDUCTOR_VEC_ISA_OK (13 s a run on the H100 host): a
    # later run answers every check the first one made from its outcome. Flipping the outcomes to failures shows
    # that none of them was made again: every ISA is then refused.
    answer = tmp_path / VEC_ISA_ANSWER
    env = {k: v for k, v in os.environ.items() if k != VEC_ISA_OK}
    env.update({contract.VEC_ISA_ENV: str(answer), "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")})
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

    def child() -> list:
        out = subprocess.run([sys.executable, "-c", ISA_CHILD], env=env, cwd=repo, capture_output=True, text=True,
                             timeout=300)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    first = child()
    recorded = json.loads(answer.read_text())
    assert recorded["checked"] == first and recorded["builds"]
    assert all(isinstance(v, bool) for v in recorded["builds"].values())
    answer.write_text(json.dumps({**recorded, "builds": {k: False for k in recorded["builds"]}}))
    assert child() == []


def _log(result) -> str:
    with open(result.log_path) as f:
        return f.read()


def _stamp(result, word: str) -> float:
    return float(next(line.split()[1] for line in _log(result).splitlines() if line.startswith(word)))


@pytest.mark.slow
def test_a_compile_ahead_run_stores_its_flag_sets_package_and_stops_at_its_first_load(tmp_path, repro):
    h = harness(tmp_path, jobs=2, LOAD="1")
    ahead = h.run(RunSpec((sys.executable, repro), "ahead-trace", 0, NAN, 300.0, True, compile_only=True))
    assert ahead.outcome is Outcome.PASSED and "COMPILING" in _log(ahead) and "AFTER LOAD" not in _log(ahead)
    row = ahead_row("ahead-trace", read_hook(ahead.run_dir), ahead.exit.duration, False)
    assert (row.counts.compiled, row.counts.reused, row.ended) == (1, 0, "stopped before its first package load")
    log, event, _ = run(h, repro, 1, NAN, "trace")
    assert "COMPILING" not in log and "AFTER LOAD" in log and event.reuse == "reused"


@pytest.mark.slow
def test_the_slot_a_cold_first_run_leaves_idle_compiles_a_later_stages_flag_set_ahead(tmp_path, repro):
    h = harness(tmp_path, reuse="hooked", jobs=2, COMPILE_S="3", LOAD="1")
    argv = (sys.executable, repro)
    h.scheduler.ahead([RunSpec(argv, "ahead-trace", 0, NAN, 300.0, True)])
    base = h.scheduler.run_many([RunSpec(argv, "baseline", i, (), 300.0, False) for i in range(2)])
    trace = h.scheduler.run_many([RunSpec(argv, "trace", 2 + i, NAN, 300.0, True) for i in range(2)])
    h.scheduler.finish_ahead()
    (ahead,) = h.scheduler.ahead_results
    assert ahead.spec.compile_only and ahead.outcome is Outcome.PASSED and "COMPILING" in _log(ahead)
    assert _stamp(ahead, "START") < _stamp(base[0], "END")  # beside the baseline's first run, not after it
    assert all("COMPILING" in _log(r) for r in base)  # the baseline runs the user's way: no hook, no reuse
    for r in trace:
        (event,) = [e for e in read_hook(r.run_dir).events if e.compiled]
        assert "COMPILING" not in _log(r) and event.reuse == "reused"


@pytest.mark.slow
def test_a_flag_set_queued_between_stages_compiles_at_once_and_its_stage_waits_for_it(tmp_path, repro):
    # A finding that calls for a later stage's flag set (a wrong value: the eager stage) queues it with now=True:
    # it starts in an idle slot at once, and that stage's first run waits for it rather than compiling it again.
    h = harness(tmp_path, reuse="hooked", jobs=2, COMPILE_S="3", LOAD="1")
    argv = (sys.executable, repro)
    h.scheduler.ahead([RunSpec(argv, "ahead-trace", 0, NAN, 300.0, True)], now=True)
    (trace,) = h.scheduler.run_many([RunSpec(argv, "trace", 1, NAN, 300.0, True)])
    h.scheduler.finish_ahead()
    (ahead,) = h.scheduler.ahead_results
    assert "COMPILING" in _log(ahead) and "COMPILING" not in _log(trace)
    # A compile-only run ends at its first load, before END: it compiled for COMPILE_S (3 s) after its START.
    assert _stamp(trace, "START") > _stamp(ahead, "START") + 3


@pytest.mark.slow
def test_a_batch_whose_slots_all_compile_ahead_waits_for_one_instead_of_ending_with_its_runs_unrun(tmp_path,
                                                                                                   stand_in):
    # Two compile-only runs of other flag sets hold both slots when a stage's batch begins: the batch waits for a
    # slot (narrowed_dynamic_dim's sanity stage once ended with no run this way, and the input went unnamed).
    h = harness(tmp_path, reuse="hooked", jobs=2, COMPILE_S="3")
    argv = (sys.executable, stand_in)
    h.scheduler.ahead([RunSpec(argv, "ahead-trace", 0, NAN, 300.0, True),
                       RunSpec(argv, "ahead-printer", 0, (("AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER", "3"),),
                               300.0, True)], now=True)
    ran = h.scheduler.run_many([RunSpec(argv, "sanity", 1, (("AOTI_RUNTIME_CHECK_INPUTS", "1"),), 300.0, True)])
    h.scheduler.finish_ahead()
    assert len(ran) == 1 and len(h.scheduler.ahead_results) == 2
    assert _stamp(ran[0], "START") > min(_stamp(a, "END") for a in h.scheduler.ahead_results)


@pytest.mark.slow
@pytest.mark.parametrize("jobs, twins", [(4, True), (2, False)])
def test_runs_that_compile_anyway_start_beside_their_keys_first_run_in_slots_the_ahead_runs_leave(tmp_path,
                                                                                                 stand_in, jobs,
                                                                                                 twins):
    # The baseline's runs take no package under --reuse hooked: a twin started after the first run would compile
    # the same thing, only later. With 4 slots and one compile-only run queued, two slots are left for twins.
    h = harness(tmp_path, reuse="hooked", jobs=jobs, COMPILE_S="3")
    argv = (sys.executable, stand_in)
    h.scheduler.ahead([RunSpec(argv, "ahead-trace", 0, NAN, 300.0, True)])
    base = h.scheduler.run_many([RunSpec(argv, "baseline", i, (), 300.0, False) for i in range(3)])
    h.scheduler.finish_ahead()
    (ahead,) = h.scheduler.ahead_results
    assert _stamp(ahead, "START") < _stamp(base[0], "END")  # the queued compile-only run keeps its slot
    beside = [_stamp(r, "START") < _stamp(base[0], "END") for r in base[1:]]
    assert beside == ([True, True] if twins else [False, False])
    assert os.path.isdir(tmp_path / "run" / "cache" / "default.warm")


@pytest.mark.slow
def test_hooked_runs_of_a_cold_key_still_wait_for_its_first_run(tmp_path, repro):
    h = harness(tmp_path, reuse="hooked", jobs=4, COMPILE_S="2", LOAD="1")
    runs = h.scheduler.run_many([RunSpec((sys.executable, repro), "trace", i, NAN, 300.0, True) for i in range(3)])
    assert all(_stamp(r, "START") > _stamp(runs[0], "END") for r in runs[1:])
    assert ["COMPILING" in _log(r) for r in runs] == [True, False, False]


@pytest.mark.slow
@pytest.mark.parametrize("jobs, reuse", [(1, "hooked"), (2, "none")])
def test_nothing_compiles_ahead_without_a_spare_slot_or_without_reuse(tmp_path, stand_in, jobs, reuse):
    h = harness(tmp_path, reuse=reuse, jobs=jobs)
    argv = (sys.executable, stand_in)
    h.scheduler.ahead([RunSpec(argv, "ahead-trace", 0, NAN, 300.0, True)])
    h.scheduler.run_many([RunSpec(argv, "baseline", 0, (), 300.0, False)])
    h.scheduler.finish_ahead()
    assert h.scheduler.ahead_results == [] and not os.path.exists(tmp_path / "run" / "runs" / "ahead-trace-000")


@pytest.mark.slow
def test_a_compile_ahead_run_the_ladder_no_longer_needs_is_killed_and_says_so(tmp_path, stand_in):
    h = harness(tmp_path, jobs=2, COMPILE_S="120")
    argv = (sys.executable, stand_in)
    h.scheduler.ahead([RunSpec(argv, "ahead-trace", 0, NAN, 300.0, True)])
    h.scheduler.run_many([RunSpec(argv, "baseline", 0, (("COMPILE_S", "0"),), 300.0, False)])
    h.scheduler.finish_ahead()
    (ahead,) = h.scheduler.ahead_results
    assert ahead.exit.launch_error == "cancelled" and ahead.exit.duration < 60
    row = ahead_row(ahead.spec.name, read_hook(ahead.run_dir), ahead.exit.duration, True)
    assert row.ended == "killed: the ladder needed nothing more"
