"""Every decision of the ladder, driven by fakes: no process, no file but captured wrappers and printer logs.

A `World` decides each run's outcome from its spec (stage, index, flags); a `Seen` hands the ladder what
those runs would have left behind, from real captured text (tests/logs/). Shaped like pytest-xdist's
scheduler tests: the ladder is handed both, exactly as the session hands it the harness and RunEvidence.
"""
from typing import Callable, Optional

import pytest

from aoti_bisect.report.facts import render, render_all
from aoti_bisect.aoti import checks, flags, printer, wrapper
from aoti_bisect.aoti.hook_record import HookRecord, PackageEvent
from aoti_bisect.verdict import Verdict
from aoti_bisect.diagnose.ladder import Ladder, Options
from aoti_bisect.diagnose.stages import baseline
from aoti_bisect.diagnose.findings import Stage, StageName
from aoti_bisect.aoti.eagerwalk import EagerWalk, read_eager_walk
from aoti_bisect.aoti.fakecheck import FakeCheck
from aoti_bisect.aoti.provenance import read_kernel_information
from aoti_bisect.aoti.sanitizer import parse as parse_sanitizer, parse_compute_sanitizer
from aoti_bisect.run.checkers import Checker, Missing
from aoti_bisect.run.classify import fingerprint
from aoti_bisect.run.layout import compile_key
from aoti_bisect.run.types import DEVICE_DUMP, CrashSite, Outcome, ProcessExit, RunResult, RunSpec, Signature

LOGS = "tests/logs/"


def sig(kind: str, phase: str = "run", message: str = "boom", kernel: Optional[str] = None) -> Signature:
    return Signature(kind, phase, message, kernel, fingerprint(kind, phase, message, kernel))


class World:
    """run_batch over a repro whose runs fail as `behave(spec)` says (None: the run passes)."""

    def __init__(self, behave: Callable[[RunSpec], Optional[Signature]],
                 site: Optional[CrashSite] | Callable[[RunSpec], Optional[CrashSite]] = None) -> None:
        self.behave = behave
        # Where each failing run crashed, as its witness told (None: it could not tell); or that, per run.
        self.site = site if callable(site) else lambda spec: site
        self.specs: list[RunSpec] = []
        self.asked: list[list[str]] = []  # the names of each batch's specs, as the ladder handed them over

    def run_batch(self, specs, on_result, stop) -> None:
        self.asked.append([spec.name for spec in specs])
        done: list[RunResult] = []
        for spec in specs:
            if stop(done):
                return
            self.specs.append(spec)
            s = self.behave(spec)
            outcome = Outcome.PASSED if s is None else Outcome.INFRA_ERROR if s.kind == "infra" else Outcome.FAILED
            result = RunResult(spec, outcome, ProcessExit(0 if s is None else 1, None, False, 0.1, 0),
                               f"runs/{spec.name}", f"runs/{spec.name}/output.log", s,
                               f"cache/{compile_key(spec.env_dict)}", crash=self.site(spec) if s is not None else None)
            done.append(result)
            on_result(result)

    def ran(self, stage: str) -> list[RunSpec]:
        return [s for s in self.specs if s.stage == stage]


class Seen:
    """The Evidence a fake world leaves: one wrapper for every compile, per-stage logs as parsed objects."""

    def __init__(self, wrapper_log: Optional[str] = None, sanity=None, trace: Optional[printer.Trace] = None,
                 level2_log: Optional[str] = None, memcheck_log: Optional[str] = None) -> None:
        self.wrapper = wrapper.parse_wrapper(_text(wrapper_log), wrapper_log, wrapper.extern_nodes_for(
            LOGS + wrapper_log)) if wrapper_log else None
        self.sanity_hit = sanity
        self.the_trace = trace or printer.Trace(())
        self.level2_log = level2_log
        self.memcheck_log = memcheck_log
        self.filters: list[list[str]] = []

    def sanity(self, result):
        return self.sanity_hit if result.failed else None

    def trace(self, result):
        return self.the_trace

    def level2(self, result, bound):
        # The printer shows only the filtered kernels: hide the others, as a filtered compile would.
        wanted = result.spec.env_dict[flags.FILTER].lower().split(",")
        self.filters.append(wanted)
        if self.level2_log is None:
            return {}, {}
        views, inputs = printer.collect(printer.parse_blocks(_text(self.level2_log).splitlines()), bound)
        return {k: v for k, v in views.items() if k.lower() in wanted}, inputs

    def graph(self, result):
        return self.wrapper

    def hook(self, result):
        return HookRecord()

    def kernel_source(self, kernel, results, max_lines=80):
        return ("kernel.cpp", f"void {kernel}(...)") if self.wrapper else None

    def fakecheck(self, result):
        return getattr(self, "fake_check", FakeCheck())

    def eager_walk(self, result):
        return getattr(self, "walk", EagerWalk("missing", problem="no eager run in this world"))

    def kernel_information(self, graph):
        return getattr(self, "kernel_info", {})

    def memcheck(self, result, tool):
        assert tool == "compute-sanitizer" and result.spec.argv[0] == "compute-sanitizer"
        return parse_compute_sanitizer(_text(self.memcheck_log) if self.memcheck_log else "")


def _text(name: str) -> str:
    with open(LOGS + name) as f:
        return f.read()


def trace_of(name: str) -> printer.Trace:
    return printer.parse_trace(_text(name).splitlines())


def climb(world: World, seen: Seen, **options):
    """The ladder up to its verdict: budget 0 stops the rate there, unless a test asks for the rate after it."""
    ladder = Ladder(["python", "repro.py"], world.run_batch, seen, Options(**{"budget": 0.0, **options}))
    return ladder, ladder.run()


def stage(out, name):
    return next(s for s in out.stages if s.name == name)


def always(signature: Optional[Signature]) -> World:
    return World(lambda spec: signature)


def test_a_repro_that_cannot_run_anywhere_is_an_error_and_climbs_no_further():
    world = always(sig("infra", "unknown", "No module named 'torch'"))
    _, out = climb(world, Seen())
    assert out.verdict is Verdict.ERROR and "cannot run here" in render(out.summary)
    assert [s.skipped for s in out.stages[1:]] == ["infrastructure error"] * 7
    assert {s.stage for s in world.specs} == {"baseline"}


def test_a_passing_baseline_is_not_reproduced_with_an_upper_bound():
    world = always(None)
    _, out = climb(world, Seen(), max_runs=5)
    assert out.verdict is Verdict.NOT_REPRODUCED
    assert len(world.ran("baseline")) == 5  # a pass proves little: the adaptive baseline runs to the cap
    assert "upper bound" in render(out.summary)
    assert all(s.skipped == "baseline did not reproduce" for s in out.stages[1:])
    # A rare fault passes five runs often: the advice says how rare a fault these runs leave open, and what more runs
    # would show; a reproduced verdict (the control) gets no such advice.
    assert out.next_steps == ["None of 5 run(s) failed, as a fault of 45% of runs or rarer still does at least 5% of "
                              "the time: if the failure is rare, give it more runs (59, with --max-runs 59, show a "
                              "fault of 1 run in 20 with 95% odds)"]
    _, failing = climb(always(sig("nan_inf", "run", "non-finite output")), Seen(), max_runs=5)
    assert failing.verdict is Verdict.REPRODUCED and not any("more runs" in s for s in failing.next_steps)


def test_a_relative_path_only_the_users_directory_holds_is_a_broken_repro_that_says_so(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # where the user started aoti-bisect
    (tmp_path / "inputs.pt").write_text("")
    lost = sig("script_error", "unknown", "FileNotFoundError: [Errno 2] No such file or directory: 'inputs.pt'")
    _, out = climb(always(lost), Seen())
    assert out.verdict is Verdict.ERROR and "the repro itself is broken" in render(out.summary)
    assert len(out.next_steps) == 1 and f"where you ran it ({tmp_path / 'inputs.pt'})" in out.next_steps[0]
    # The control: a file missing where the user ran it too is the repro's own business, with no advice on paths.
    gone = sig("script_error", "unknown", "FileNotFoundError: [Errno 2] No such file or directory: 'weights.pt'")
    _, out = climb(always(gone), Seen())
    assert out.verdict is Verdict.ERROR and out.next_steps == []


def test_infra_errors_beside_passes_are_inconclusive_not_a_pass():
    world = World(lambda spec: sig("infra", "unknown", "no GPU") if spec.index % 2 else None)
    _, out = climb(world, Seen(), runs=4)
    assert out.verdict is Verdict.INCONCLUSIVE and "could not run" in render(out.summary)


class Loaded(World):
    """Even runs pass after `passing_s`; odd runs reach their limit, stopped in `phase` (a timeout in their compile);
    `first`: the odd runs land before the even ones."""

    def __init__(self, passing_s: float, phase: str = "compile", first: bool = False) -> None:
        super().__init__(lambda spec: None)
        self.passing_s, self.phase, self.first = passing_s, phase, first

    def run_batch(self, specs, on_result, stop) -> None:
        done: list[RunResult] = []
        for spec in sorted(specs, key=lambda s: (not (self.first and s.index % 2 == 1), s.index)):
            if stop(done):
                return
            self.specs.append(spec)
            late = spec.index % 2 == 1
            result = RunResult(spec, Outcome.TIMEOUT if late else Outcome.PASSED,
                               ProcessExit(None, None, late, spec.timeout if late else self.passing_s, 0),
                               f"runs/{spec.name}", f"runs/{spec.name}/output.log",
                               sig("timeout", self.phase, "no exit after 300s") if late else None)
            done.append(result)
            on_result(result)


def test_a_timeout_beside_a_pass_that_took_most_of_the_limit_is_the_limit_not_a_hang():
    # Seen in CI: two cold compiles beside other work, 293 s (passed) and 300 s (timed out) under a 300 s limit.
    _, out = climb(Loaded(passing_s=293.0), Seen(), runs=4, timeout=300.0)
    assert out.verdict is Verdict.INCONCLUSIVE and out.baseline.failures == 0
    assert "took 293 s: the limit ended it, not a hang (raise --timeout)" in render(out.summary)
    # The passes landing after the timeouts: each timeout is judged again as they land.
    _, out = climb(Loaded(passing_s=293.0, first=True), Seen(), runs=4, timeout=300.0)
    assert out.verdict is Verdict.INCONCLUSIVE and out.baseline.failures == 0
    # Control: a pass in 5 s says a run that sat out 300 s in the model's run hung; that timeout is the failure.
    _, out = climb(Loaded(passing_s=5.0, phase="run"), Seen(), runs=4, timeout=300.0)
    assert out.verdict is Verdict.REPRODUCED and out.baseline.failures == 2 and out.signature.kind == "timeout"


def test_a_timeout_inside_the_compile_beside_passes_is_the_limit_not_a_hang():
    # Seen in CI: a slot's cold first run (its extension build and compile) outlasted the limit, and the runs after
    # it, whose caches were warm, passed in seconds: the timeout alone read as "reproduced: timeout".
    _, out = climb(Loaded(passing_s=5.0), Seen(), runs=4, timeout=300.0)
    # The stopped runs are in no rate: 0 of the 2 that ran, not 0 of 4.
    assert out.verdict is Verdict.INCONCLUSIVE and (out.baseline.failures, out.baseline.runs) == (0, 2)
    assert "inside its compile, where other runs of the stage passed" in render(out.summary)
    # Control: every run stopped inside its compile; nothing says the compile ends, so the timeout stands.
    _, out = climb(always(sig("timeout", "compile", "no exit after 300s")), Seen(), runs=4, timeout=300.0)
    assert out.verdict is Verdict.REPRODUCED and out.signature.kind == "timeout"
    assert any("inside their AOTI compile at the --timeout limit" in step for step in out.next_steps)
    _, out = climb(always(sig("timeout", "run", "no exit after 300s")), Seen(), runs=4, timeout=300.0)
    assert not any("AOTI compile" in step for step in out.next_steps)


def test_a_broken_script_is_an_error_not_a_reproduction():
    _, out = climb(always(sig("script_error", "unknown", "SyntaxError: invalid syntax")), Seen())
    assert out.verdict is Verdict.ERROR and "broken" in render(out.summary)


@pytest.mark.parametrize("phase", ["export", "compile"])  # load: tests/test_load_doctor.py (the doctor runs)
def test_a_failure_before_any_kernel_runs_skips_the_runtime_ladder(phase):
    world = always(sig("compile_error" if phase == "compile" else "python_exception", phase))
    _, out = climb(world, Seen())
    assert out.verdict is Verdict.REPRODUCED
    assert all(f"{phase} phase" in s.skipped for s in out.stages[1:])
    assert out.next_steps and {s.stage for s in world.specs} == {"baseline"}


class SeenWithoutAoti(Seen):
    """Every hooked run loaded the hook and compiled or loaded nothing: the script does not use AOTI."""

    def __init__(self, events=()):
        super().__init__()
        self.events = events

    def hook(self, result):
        return HookRecord(self.events, loaded=result.spec.hook or result.spec.reuse)


def test_a_failure_whose_hooked_runs_touch_no_aoti_stops_the_ladder_and_says_so():
    world = always(sig("nan_inf"))
    _, out = climb(world, SeenWithoutAoti())
    assert out.verdict is Verdict.REPRODUCED and out.culprit is None
    # The first hooked stage's failing run compiled and loaded nothing: no later stage runs.
    assert {s.stage for s in world.specs} == {"baseline", "sanity"}
    why = "the failure happens without any AOTI compile or load"
    assert all(s.skipped.startswith(why) for s in out.stages[2:]) and out.next_steps[-1].startswith(why)
    # One package event in those runs, and the ladder climbs on.
    compiled = PackageEvent("aoti_compile_and_package", "returned", "/tmp/m.pt2", "ab" * 32, True)
    world = always(sig("nan_inf"))
    _, out = climb(world, SeenWithoutAoti((compiled,)))
    assert "trace" in {s.stage for s in world.specs}


def test_the_input_check_convicts_the_model_input_and_pins_it():
    fail = sig("input_mismatch", "run", "unmatched dim value")
    seen = Seen("cpu/wrapper_index_oob_level3.cpp", sanity=checks.InputRejected(1, "unmatched dim value at 0"))
    world = World(lambda spec: fail)
    _, out = climb(world, seen)
    assert out.culprit.kind == "model_input" and out.culprit.input_index == 1
    assert out.culprit.input_name == "arg1_1"
    assert stage(out, "sanity").env == flags.SANITY
    assert stage(out, "trace").skipped == stage(out, "inspect").skipped == "culprit already pinned"


def test_a_nan_assert_blames_the_kernel_that_wrote_the_buffer():
    seen = Seen("cpu/wrapper_nan_after_matmul_level2.cpp", sanity=checks.NanAssert("NaN", "buf0"))
    _, out = climb(always(sig("nan_inf", "run", "At least one NaN in buf0")), seen)
    assert out.culprit.kind == "kernel" and out.culprit.kernel == "cpp_fused_add_log_mul_relu_sub_0"
    assert out.source == ("kernel.cpp", "void cpp_fused_add_log_mul_relu_sub_0(...)")


class Looped(Seen):
    """Seen, where each run called the model it loaded more than once (a decoder's loop)."""

    def hook(self, result):
        return HookRecord((PackageEvent("aoti_load_package", "returned", "m.pt2", "ab", True, called_again=True),))


def test_a_nan_in_a_model_input_on_a_later_call_is_not_the_inputs_own():
    # A decoder that feeds each output back in: the input check finds the NaN a kernel made on the call before.
    nan = sig("nan_inf", "run", "At least one NaN in arg1_1")
    looped = Looped("cpu/wrapper_nan_after_matmul_level2.cpp", sanity=checks.NanAssert("NaN", "arg1_1"))
    _, out = climb(always(nan), looped)
    assert out.culprit.kind != "model_input" and not stage(out, "trace").skipped
    assert "called the model more than once: an earlier call's output fed back in reads the same" in \
        render(stage(out, "sanity").finding)
    # Control: one call, and the NaN is the input's own.
    _, out = climb(always(nan), Seen("cpu/wrapper_nan_after_matmul_level2.cpp",
                                     sanity=checks.NanAssert("NaN", "arg1_1")))
    assert (out.culprit.kind, out.culprit.input_name) == ("model_input", "arg1_1")


def test_determinism_is_skipped_on_cpu_and_compared_on_cuda():
    _, cpu = climb(always(sig("segfault", "run")), Seen("cpu/wrapper_index_oob_level3.cpp"))
    assert "CPU-only" in stage(cpu, "determinism").skipped

    # Flaky at baseline (1 in 3), every run under the determinism flags: a CUDA repro's classic shape.
    world = World(lambda spec: sig("illegal_memory_access") if spec.stage != "baseline" or spec.index % 3 == 0
                  else None)
    _, cuda = climb(world, Seen("cuda/wrapper_ima_user_triton.cpp"), runs=9)
    det = stage(cuda, "determinism")
    assert det.env == flags.DETERMINISM and not det.recompiled
    assert det.rate.failures == det.rate.runs >= 9 and "becomes deterministic" in render(det.finding)
    assert stage(cuda, "trace").env == {**flags.DETERMINISM, **flags.TRACE}  # what made it reproduce stays on


def test_a_cuda_failure_seen_every_run_takes_one_baseline_wave_and_a_determinism_run_that_compiles_nothing():
    assert_fail = sig("device_assert", "run", "index out of bounds: 0 <= tmp8 < 100")
    world = always(assert_fail)
    _, out = climb(world, Seen("cuda/wrapper_ima_user_triton.cpp"))
    assert world.asked[0] == ["baseline-000", "baseline-001"]  # one wave, as wide as the adaptive rule stops at
    assert stage(out, "baseline").rate.runs == 2
    # No rate to compare: its one run carries the trace's compile-time flags and the hook, so it takes the
    # package compiled ahead for the trace instead of compiling the user's way.
    det = stage(out, "determinism")
    assert det.env == {**flags.DETERMINISM, **flags.TRACE} and det.hook and det.rate.runs == 1
    assert compile_key(det.env) == compile_key(stage(out, "trace").env)
    assert stage(out, "trace").env == {**flags.DETERMINISM, **flags.TRACE}


def test_determinism_takes_the_stored_package_where_the_baseline_showed_it_fails_as_the_users_way():
    # Its flags are read at run time: ten compiles at once cost a passing CUDA control 85 s on an H200.
    world = always(None)
    _, out = climb(world, Seen("cuda/wrapper_ima_user_triton.cpp"), max_runs=6, reuse_baseline=True)
    assert out.verdict is Verdict.NOT_REPRODUCED
    assert world.ran("determinism") and all(s.reuse for s in world.ran("determinism"))
    # Control: the baseline's runs that took the package fail otherwise than the user's way, so no later run takes it.
    world = World(lambda spec: None if spec.index % 2 else sig("illegal_memory_access" if spec.reuse else "device_assert"))
    _, out = climb(world, Seen("cuda/wrapper_ima_user_triton.cpp"), max_runs=12, reuse_baseline=True)
    assert "that changes the failure" in render(stage(out, "baseline").finding)
    assert world.ran("determinism") and not any(s.reuse for s in world.ran("determinism"))


def test_a_cuda_trace_without_the_determinism_stage_still_launches_blocking():
    # --stages without determinism: with asynchronous launches the last unfinished launch can be a later kernel
    # (seen on an H100: device_assert_oob's trace then ended at the reduction after the faulting gather).
    world = always(sig("device_assert", "run", "index out of bounds: 0 <= tmp8 < 100"))
    _, out = climb(world, Seen("cuda/wrapper_ima_user_triton.cpp"), stages=("baseline", "trace", "inspect"))
    assert stage(out, "trace").env == {**flags.DETERMINISM, **flags.TRACE}
    _, cpu = climb(always(sig("segfault")), Seen("cpu/wrapper_index_oob_level3.cpp"), stages=("baseline", "trace"))
    assert stage(cpu, "trace").env == flags.TRACE


def test_the_unfinished_launch_is_the_suspect_and_good_inputs_convict_it():
    fail = sig("index_out_of_bounds", "run", "RuntimeError: index out of bounds: 0 <= tmp16 < 16L")
    seen = Seen("cpu/wrapper_index_oob_level3.cpp", trace=trace_of("cpu/index_oob_level3.log"),
                level2_log="cpu/index_oob_level2_filtered.log")
    _, out = climb(always(fail), seen)
    assert "last launch without after_launch: cpp_fused_add_index_mul_sin_sum_0" in render(stage(out, "trace").finding)
    assert out.culprit.kind == "kernel" and out.culprit.kernel == "cpp_fused_add_index_mul_sin_sum_0"
    assert "faulted from good inputs" in render_all(out.culprit.evidence)[0]
    assert "faulted: index into dim 1 of `arg0_1` (size 16, fixed at export)" in render(out.culprit.summary)
    assert seen.filters == [["cpp_fused_add_index_mul_sin_sum_0"]]
    inspect = stage(out, "inspect")
    assert inspect.env[flags.PRINTER] == "2" and inspect.recompiled


@pytest.mark.parametrize("stages", [None, ("baseline", "sanity", "determinism", "memcheck", "inspect")])
def test_later_stages_flag_sets_go_ahead_under_the_keys_those_stages_then_run_under(stages):
    fail = sig("index_out_of_bounds", "run", "RuntimeError: index out of bounds: 0 <= tmp16 < 16L")
    seen = Seen("cpu/wrapper_index_oob_level3.cpp", trace=trace_of("cpu/index_oob_level3.log"),
                level2_log="cpu/index_oob_level2_filtered.log")
    world, asked = always(fail), []
    options = Options() if stages is None else Options(stages=stages)
    out = Ladder(["python", "repro.py"], world.run_batch, seen, options, lambda specs, now: asked.extend(specs)).run()
    assert [s.stage for s in asked] == ["ahead-sanity", "ahead-trace"][:1 if stages else 2]
    assert all(s.hook and s.argv == world.specs[0].argv for s in asked)
    for spec in asked:  # a flag set built ahead is the one its stage's runs key their packages by
        ran = stage(out, spec.stage.removeprefix("ahead-"))
        assert compile_key(spec.env_dict) == compile_key(ran.env) != compile_key({})


def test_a_failing_output_check_walks_back_from_the_graph_outputs():
    finished = printer.Trace(tuple(printer.TraceEvent(k, True) for k in (
        "cpp_fused_add_log_mul_relu_sub_0", "aoti_torch_cpu_mm_out", "cpp_fused_mul_tanh_1")))
    seen = Seen("cpu/wrapper_nan_after_matmul_level2.cpp", trace=finished,
                level2_log="cpu/nan_after_matmul_level2.log")
    _, out = climb(always(sig("nan_inf", "run", "SystemExit: non-finite output")), seen)
    assert "walk starts at the graph's outputs" in render(stage(out, "trace").finding)
    assert out.culprit.kind == "kernel" and out.culprit.kernel == "cpp_fused_add_log_mul_relu_sub_0"
    assert len(seen.filters) == 1  # the whole three-kernel chain in one filtered compile
    # The walk's conviction is on the ledger with the run whose printed values it read.
    (entry,) = out.culprit.convicted_by
    assert (entry.kind, entry.stage, entry.names) == ("walk", "inspect", "cpp_fused_add_log_mul_relu_sub_0")
    assert entry.run.startswith("inspect-") and entry in out.ledger


EAGER_DATA = "tests/data/eagerwalk/"


def wrong_value_world(walk: EagerWalk) -> Seen:
    """The wrong_value_pass scenario: its level-1 wrapper and provenance, and what its eager run recorded."""
    seen = Seen()
    path = EAGER_DATA + "wrong_value_pass.wrapper.cpp"
    with open(path) as f:
        seen.wrapper = wrapper.parse_wrapper(f.read(), path, [])
    seen.the_trace = printer.Trace(tuple(printer.TraceEvent(launch.name, True) for launch in seen.wrapper.launches))
    seen.walk, seen.kernel_info = walk, read_kernel_information(path)
    return seen


def test_a_wrong_but_finite_output_is_walked_against_eager_to_the_kernel_that_first_differs():
    world = always(sig("python_exception", "run", "wrong values: max abs difference 1.76"))
    _, out = climb(world, wrong_value_world(read_eager_walk(EAGER_DATA)))
    eager = stage(out, "eager")
    assert eager.env == flags.EAGER and eager.recompiled and len(world.ran("eager")) == 1
    assert out.culprit.kind == "kernel" and out.culprit.kernel == "cpp_fused__softmax_add_mul_sum_1"
    assert render(out.culprit.summary) == render(eager.finding) and "from inputs that agree with eager" in render(eager.finding)
    assert [(e.kind, e.stage, e.run) for e in out.culprit.convicted_by] == [("walk", "eager", eager.results[0].spec.name)]


def test_a_wrong_value_is_walked_against_eager_before_the_inspect_stage_which_then_has_nothing_to_add():
    world = always(sig("python_exception"))
    _, out = climb(world, wrong_value_world(EagerWalk("agree", calls=2)))
    assert out.culprit.kind == "unknown" and not world.ran("inspect")
    assert "agree with eager on every call compared (2)" in render_all(out.culprit.evidence)[0]
    assert "level 2 would show a few of the same" in stage(out, "inspect").skipped
    assert [s.name for s in out.stages].index("eager") < [s.name for s in out.stages].index("inspect")


def test_an_eager_walk_that_could_not_compare_leaves_the_inspect_stage_to_run_and_keeps_its_lines():
    world = always(sig("python_exception"))
    _, out = climb(world, wrong_value_world(EagerWalk("missing", problem="no eager run")))
    assert out.culprit.kind == "unknown" and world.ran("inspect")
    lines = render_all(out.culprit.evidence)
    assert "level-2 run printed nothing" in lines[0] and "no eager comparison: no eager run" in lines[-1]


@pytest.mark.parametrize("kind, expected", [("python_exception", True), ("nan_inf", False), ("segfault", False)])
def test_a_wrong_value_has_the_eager_flag_set_built_at_once_after_the_sanity_stage(kind, expected):
    # A hint, never a decision: a fault or a NaN gives the earlier stages a mark to follow, so their flag set waits.
    asked = []
    seen = wrong_value_world(read_eager_walk(EAGER_DATA))
    out = Ladder(["python", "repro.py"], always(sig(kind, "run", "wrong values")).run_batch, seen, Options(budget=0.0),
                 lambda specs, now: asked.extend((s, now) for s in specs)).run()
    eager_asked = [(s, now) for s, now in asked if s.stage == "ahead-eager"]
    assert bool(eager_asked) == expected
    if expected:
        (spec, now), = eager_asked
        assert now and compile_key(spec.env_dict) == compile_key(stage(out, "eager").env)


def test_a_fault_is_not_walked_against_eager():
    seen = wrong_value_world(read_eager_walk(EAGER_DATA))
    seen.the_trace = printer.Trace((printer.TraceEvent("cpp_fused_mul_tanh_0", False),))
    world = always(sig("segfault"))
    _, out = climb(world, seen)
    assert stage(out, "eager").skipped and not world.ran("eager")


def test_every_launch_finished_but_the_process_crashed_points_outside_the_kernels():
    finished = printer.Trace((printer.TraceEvent("aoti_torch_cpu_addmm_out", True),
                              printer.TraceEvent("cpp_fused_fused_norm_relu_0", True)))
    _, out = climb(always(sig("segfault")), Seen("cpu/wrapper_load_error.cpp", trace=finished))
    assert out.culprit.kind == "outside_instrumented_kernels" and out.culprit.kernel == "bisectlab::fused_norm"
    assert stage(out, "inspect").skipped == "culprit already pinned"

    assert not stage(out, "fakecheck").skipped


def test_a_hang_inside_a_custom_op_is_not_run_again_to_check_its_fake():
    finished = printer.Trace((printer.TraceEvent("aoti_torch_cpu_addmm_out", True),
                              printer.TraceEvent("cpp_fused_fused_norm_relu_0", True)))
    world = always(sig("timeout"))
    _, out = climb(world, Seen("cpu/wrapper_load_error.cpp", trace=finished))
    assert out.culprit.kind == "outside_instrumented_kernels" and out.culprit.kernel == "bisectlab::fused_norm"
    assert "hangs inside bisectlab::fused_norm" in stage(out, "fakecheck").skipped and not world.ran("fakecheck")


def test_a_trace_that_does_not_reproduce_concludes_nothing():
    world = World(lambda spec: sig("segfault") if spec.stage == "baseline" else None)
    _, out = climb(world, Seen("cpu/wrapper_index_oob_level3.cpp", trace=trace_of("cpu/index_oob_level3.log")))
    assert out.culprit.kind == "unknown" and "did not reproduce" in render_all(out.culprit.evidence)[0]
    assert stage(out, "inspect").skipped == "the trace stage did not reproduce the failure"


def test_no_launch_lines_and_no_wrapper_means_a_package_the_run_did_not_build():
    _, out = climb(always(sig("segfault")), Seen(None))
    assert out.culprit.kind == "unknown" and "prebuilt .pt2" in render(stage(out, "trace").finding)


def test_later_stages_plan_from_the_baseline_interval_and_stop_at_their_first_failure():
    # 1 failure in 2 runs is a rate of 9% or more (95%): seeing it with 99% takes more than the cap of 30
    # runs, so a stage that never fails runs all 30; the trace fails first at its 3rd run and stops there.
    def behave(spec):
        if spec.stage == "baseline":
            return sig("segfault") if spec.index == 0 else None
        if spec.stage == "trace":
            return sig("segfault") if len(world.ran("trace")) == 3 else None
        return None
    world = World(behave)
    _, out = climb(world, Seen("cpu/wrapper_index_oob_level3.cpp", trace=trace_of("cpu/index_oob_level3.log"),
                               level2_log="cpu/index_oob_level2_filtered.log"), runs=2)
    assert len(world.ran("sanity")) == 30  # never failed: ran the whole planned count
    assert len(world.ran("trace")) == 3
    indices = [s.index for s in world.specs]
    assert indices == sorted(indices) and len(set(indices)) == len(indices)  # one run folder per run


def test_stages_left_out_by_the_user_say_so():
    _, out = climb(always(sig("segfault")), Seen("cpu/wrapper_index_oob_level3.cpp"),
                   stages=("baseline", "trace"))
    assert stage(out, "sanity").skipped == stage(out, "inspect").skipped == "not requested (--stages)"


def test_an_interrupt_keeps_what_the_finished_runs_support():
    world = always(sig("segfault"))
    ladder = Ladder(["python", "repro.py"], world.run_batch, Seen(), Options(runs=3))
    baseline.run(ladder)
    out = ladder.partial()
    assert out.interrupted and out.verdict is Verdict.REPRODUCED and out.baseline.failures == 3


SANITIZER = Checker("compute-sanitizer", "cuda", ("compute-sanitizer", "--tool", "memcheck"),
                    (("PYTORCH_NO_CUDA_MEMORY_CACHING", "1"),))
CHECKERS = (("cuda", (SANITIZER,)), ("cpu", Missing("cpu", "no CPU checker here")))


def test_a_flaky_fault_that_failed_every_baseline_run_is_still_hunted_for_many_runs():
    # 2/2 at baseline looks deterministic, but its 95% interval reaches down to 34%: the trace must keep
    # trying. Here the fault shows in the trace's 4th run; planning from the point estimate ran one run.
    def behave(spec):
        if spec.stage == "trace":
            return sig("segfault") if len(world.ran("trace")) == 4 else None
        return sig("segfault") if spec.stage == "baseline" else None
    world = World(behave)
    _, out = climb(world, Seen("cpu/wrapper_index_oob_level3.cpp", trace=trace_of("cpu/index_oob_level3.log"),
                               level2_log="cpu/index_oob_level2_filtered.log"))
    assert out.baseline.failures == out.baseline.runs == 2
    assert len(world.ran("trace")) == 4
    assert out.culprit.kind == "kernel" and out.culprit.kernel == "cpp_fused_add_index_mul_sin_sum_0"


def test_when_the_trace_never_reproduces_a_kernel_named_by_earlier_failures_still_stands():
    named = sig("index_out_of_bounds", kernel="cpp_fused_add_index_mul_sin_sum_0")
    world = World(lambda spec: named if spec.stage in ("baseline", "sanity") else None)
    _, out = climb(world, Seen("cpu/wrapper_index_oob_level3.cpp"))
    assert out.culprit.kind == "kernel" and out.culprit.kernel == "cpp_fused_add_index_mul_sin_sum_0"
    assert "did not reproduce" in render(out.culprit.summary) and "name cpp_fused_add_index_mul_sin_sum_0" in render(out.culprit.summary)


def test_a_masked_cuda_fault_is_unmasked_by_the_memory_checker():
    # Passes every plain run and every run under the determinism flags; only the checker sees the read.
    world = always(None)
    seen = Seen("cuda/wrapper_ima_user_triton.cpp",
                memcheck_log="cuda/compute-sanitizer-memcheck-user-triton-oob.log")
    _, out = climb(world, seen, checkers=CHECKERS, max_runs=4, budget=300.0)
    assert out.verdict is Verdict.REPRODUCED and render(out.masked).startswith("passes at baseline (0/8")
    assert out.culprit.kind == "kernel" and out.culprit.kernel == "gather_rows_0"
    assert "Invalid __global__ read of size 16 bytes in gather_rows" in render(out.culprit.summary)
    # The checker goes right after the first plain run passed (issue #28), before any stage that waits for crashes;
    # the baseline's rate runs on after the verdict.
    assert [s.name for s in out.stages][:2] == ["baseline", "memcheck"]
    check = stage(out, "memcheck")
    assert len(check.results) == 1 and check.results[0].spec.argv[:3] == SANITIZER.prefix
    assert check.env == {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"} and check.tool.startswith("compute-sanitizer")
    assert check.results[0].spec.timeout == 600.0 * SANITIZER.slowdown


def test_a_masked_fault_that_fails_under_the_determinism_flags_climbs_the_ladder_from_there():
    world = World(lambda spec: sig("illegal_memory_access") if spec.stage != "baseline" else None)
    seen = Seen("cuda/wrapper_ima_user_triton.cpp", trace=printer.Trace((printer.TraceEvent("gather_rows_0", False),)))
    _, out = climb(world, seen, checkers=CHECKERS, max_runs=4)
    assert out.verdict is Verdict.REPRODUCED and "fails with PYTORCH_NO_CUDA_MEMORY_CACHING" in render(out.masked)
    assert stage(out, "trace").env == {**flags.DETERMINISM, **flags.TRACE}
    assert out.culprit.kernel == "gather_rows_0"


def test_a_clean_checker_run_leaves_a_passing_cuda_repro_not_reproduced():
    seen = Seen("cuda/wrapper_ima_user_triton.cpp", memcheck_log="cuda/compute-sanitizer-memcheck-clean.log")
    _, out = climb(always(None), seen, checkers=CHECKERS, max_runs=3)
    assert out.verdict is Verdict.NOT_REPRODUCED and out.masked is None
    assert render(stage(out, "memcheck").finding) == "0 errors in 3 checked run(s)"


def test_a_cpu_repro_that_passes_is_not_unmasked_unless_asked():
    world = always(None)
    _, out = climb(world, Seen("cpu/wrapper_index_oob_level3.cpp"), checkers=CHECKERS, max_runs=3)
    assert out.verdict is Verdict.NOT_REPRODUCED and {s.stage for s in world.specs} == {"baseline"}
    _, asked = climb(always(None), Seen("cpu/wrapper_index_oob_level3.cpp"), checkers=CHECKERS, max_runs=3,
                     sanitize=True)
    assert stage(asked, "memcheck").skipped == "no CPU checker here"


class SeenOnCpu(Seen):
    def memcheck(self, result, tool):
        assert tool == "valgrind" and result.spec.argv[0] == "valgrind"
        return parse_sanitizer("valgrind", _text(self.memcheck_log))


VALGRIND = Checker("valgrind", "cpu", ("valgrind", "--tool=memcheck"), (("PYTHONMALLOC", "malloc"),), slowdown=30.0,
                   cost=20.0)


def test_sanitize_convicts_a_cpu_custom_op_whose_every_run_passes_from_valgrinds_line():
    # silent_oob_custom_op's shape (its scenario check is heavy): every plain run passes, --sanitize asks for the
    # checker, and valgrind's report (captured from the real scenario) names the op's function and line.
    world = always(None)
    seen = SeenOnCpu(memcheck_log="cpu/valgrind-silent_oob_custom_op.log")
    _, out = climb(world, seen, checkers=(("cpu", (VALGRIND,)),), max_runs=2, runs=2, sanitize=True)
    assert out.verdict is Verdict.REPRODUCED and render(out.masked).startswith("passes at baseline (0/2")
    assert "window_sum(at::Tensor const&) (main.cpp:19)" in render(out.culprit.summary)
    assert [s.name for s in out.stages if s.results] == ["baseline", "memcheck"]
    assert stage(out, "memcheck").results[0].spec.timeout == 600.0 * VALGRIND.slowdown


def test_the_checker_cross_checks_the_trace_and_the_walk_keeps_its_lines():
    fail = sig("illegal_memory_access")
    seen = Seen("cuda/wrapper_ima_user_triton.cpp", trace=printer.Trace((
        printer.TraceEvent("gather_rows_0", True), printer.TraceEvent("triton_poi_fused_mul_tanh_0", False))),
        memcheck_log="cuda/compute-sanitizer-memcheck-user-triton-oob.log")
    _, out = climb(always(fail), seen, checkers=CHECKERS)
    assert "unfinished launch was triton_poi_fused_mul_tanh_0, not gather_rows_0" in " ".join(render_all(out.culprit.evidence))
    assert out.culprit.kernel == "gather_rows_0" and seen.filters[0][0] == "gather_rows_0"


def test_a_failure_that_is_no_memory_fault_skips_the_checker_and_says_how_to_force_it():
    # Only Inductor's kernels in the graph (a user kernel would be checked: the next tests).
    seen = Seen("cuda/wrapper_nan_triton.cpp", trace=printer.Trace((printer.TraceEvent("triton_poi_fused_log_mul_0",
                                                                                       False),)))
    _, out = climb(always(sig("python_exception")), seen, checkers=CHECKERS)
    assert "--sanitize" in stage(out, "memcheck").skipped


# -- rare faults: the evidence drives the plan (issue #28) ---------------------------------------------------

def rare(every: int = 10):
    """A CUDA repro whose invalid read happens every run but crashes one run in `every`."""
    return World(lambda spec: sig("illegal_memory_access") if spec.stage == "baseline" and spec.index % every == 1
                 else None)


def test_a_rare_memory_fault_is_convicted_by_the_checker_from_a_run_that_did_not_crash():
    world = rare()
    seen = Seen("cuda/wrapper_ima_user_triton.cpp", memcheck_log="cuda/compute-sanitizer-memcheck-user-triton-oob.log")
    clock = iter(range(0, 10 ** 6, 1))
    ladder = Ladder(["python", "repro.py"], world.run_batch, seen, Options(checkers=CHECKERS, budget=5.0),
                    clock=lambda: next(clock))
    out = ladder.run()
    # The first run passed, the checker went next, and its run passed too: it convicts without a crash.
    assert [s.stage for s in world.specs][:2] == ["baseline", "memcheck"]
    assert world.asked[0] == ["baseline-000", "baseline-001"]  # the passing first run ended its wave
    assert out.verdict_runs == 2  # one plain run, one checked: the rate's runs came after the verdict
    assert not any(r.failed for r in stage(out, "memcheck").results)
    assert out.verdict is Verdict.REPRODUCED and out.culprit.kind == "kernel" and out.culprit.kernel == "gather_rows_0"
    assert {s.name for s in out.stages if s.skipped == "culprit already pinned"} >= {"sanity", "trace", "inspect"}
    # The rate ran on after the verdict, within the budget (the fake clock ticks once a look), and says so.
    base = out.stages[0]
    assert out.baseline.runs == base.rate.runs > 2 and [s.stage for s in world.specs][-1] == "baseline"
    assert "the rate ran on after the verdict" in render(base.finding)


def test_without_a_checker_a_rare_fault_waits_for_crashes_as_before():
    world = rare(2)
    seen = Seen("cuda/wrapper_ima_user_triton.cpp", trace=printer.Trace((printer.TraceEvent("gather_rows_0", False),)))
    _, out = climb(world, seen, checkers=(("cuda", Missing("cuda", "no compute-sanitizer")),), max_runs=4)
    assert [s.stage for s in world.specs][:5] == ["baseline"] * 4 + ["sanity"]
    assert stage(out, "memcheck").skipped == "no compute-sanitizer"


def test_a_silent_checker_falls_back_to_the_crash_driven_ladder():
    world = rare(2)
    seen = Seen("cuda/wrapper_ima_user_triton.cpp", trace=printer.Trace((printer.TraceEvent("gather_rows_0", False),)),
                memcheck_log="cuda/compute-sanitizer-memcheck-clean.log")
    _, out = climb(world, seen, checkers=CHECKERS, max_runs=4)
    assert render(stage(out, "memcheck").finding).startswith("0 errors in")
    assert "sanity" in [s.stage for s in world.specs] and out.culprit is not None


def test_a_checker_whose_flags_need_a_compile_gets_its_package_built_outside_it_first():
    avx2 = Checker("valgrind", "cpu", ("valgrind",), (("PYTHONMALLOC", "malloc"), ("TORCHINDUCTOR_CPP_MARCH", "x86-64-v3")))
    seen = Seen("cpu/wrapper_index_oob_level3.cpp")
    seen.memcheck = lambda result, tool: parse_compute_sanitizer("")
    world = always(sig("segfault"))
    _, out = climb(world, seen, checkers=(("cpu", (avx2,)),), sanitize=True, stages=("baseline", "memcheck"))
    compile_run, checked = [s for s in world.specs if s.stage in ("compile", "memcheck")][:2]
    assert compile_run.compile_only and compile_run.hook and compile_run.argv == ("python", "repro.py")
    assert compile_run.env == checked.env and checked.argv[0] == "valgrind"


# -- every crash convicts: a crashed run that tells where it faulted pins the culprit from its first crash ------
def test_a_rare_crash_is_convicted_from_its_first_crash_and_the_rate_runs_on_after_the_verdict():
    segv = sig("segfault", "run", "killed by SIGSEGV")
    site = CrashSite("SIGSEGV", "shifted_gather(at::Tensor const&, at::Tensor const&)", "main.cpp:18", "op.so")
    world = World(lambda spec: segv if spec.stage == "baseline" and spec.index % 10 == 3 else None, site)
    seen = Seen("cpu/wrapper_flaky_custom_op_crash.cpp")
    ladder = Ladder(["python", "repro.py"], world.run_batch, seen, Options(budget=300.0))
    out = ladder.run()
    assert out.culprit.kind == "outside_instrumented_kernels" and out.culprit.kernel == "bisectlab::shifted_gather"
    # The 4th run crashed and convicted; the op's fake function was checked in one run, not waiting for a crash.
    assert out.verdict_runs == 5 and len(world.ran("fakecheck")) == 1
    skipped = {s.name: s.skipped for s in out.stages if s.skipped}
    assert "own stack" in skipped["trace"] and "own stack" in skipped["sanity"]
    assert {s.stage for s in world.specs} == {"baseline", "fakecheck"}
    # The rate ran on after the verdict until its interval was within ±15 points: 2/18 (3%-33%).
    assert (out.baseline.failures, out.baseline.runs) == (2, 18)
    assert "within ±15 points" in render(out.stages[0].finding)


def test_a_deterministic_failure_reports_ten_of_ten_after_a_verdict_reached_at_two():
    world = always(sig("index_out_of_bounds", "run", "index out of bounds: 0 <= tmp16 < 16L",
                       kernel="cpp_fused_add_index_mul_sin_sum_0"))
    seen = Seen("cpu/wrapper_index_oob_level3.cpp", trace=trace_of("cpu/index_oob_level3.log"))
    announced = []
    ladder = Ladder(["python", "repro.py"], world.run_batch, seen, Options(budget=300.0),
                    on_verdict=lambda out, left: announced.append((out.verdict_runs, left)))
    out = ladder.run()
    assert announced == [(out.verdict_runs, 58)]  # told before the rate ran on, with the runs it may take (2 x 30)
    assert out.baseline.runs == 10 and out.baseline.failures == 10  # measured, not assumed: 10/10 (72%-100%)
    assert "within ±15 points" in render(out.stages[0].finding)


def test_a_coin_flip_failure_runs_on_to_an_interval_inside_20_to_80_percent():
    world = World(lambda spec: sig("segfault") if spec.stage == "baseline" and spec.index % 2 else None)
    seen = Seen("cpu/wrapper_index_oob_level3.cpp")
    out = Ladder(["python", "repro.py"], world.run_batch, seen, Options(budget=300.0)).run()
    lo, hi = out.baseline.ci95
    assert out.baseline.runs <= 40 and 0.2 <= lo and hi <= 0.8 and (hi - lo) / 2 <= 0.15


def test_budget_zero_stops_the_rate_at_the_verdict_and_an_interrupt_after_it_keeps_the_culprit():
    world = always(sig("index_out_of_bounds", "run", "index out of bounds", kernel="cpp_fused_0"))
    seen = Seen("cpu/wrapper_index_oob_level3.cpp", trace=trace_of("cpu/index_oob_level3.log"))
    _, out = climb(world, seen)
    assert out.baseline.runs == 2
    ladder = Ladder(["python", "repro.py"], world.run_batch, seen, Options(budget=300.0))

    def interrupted(specs, on_result, stop):
        if ladder.verdict is not None:
            raise KeyboardInterrupt
        world.run_batch(specs, on_result, stop)
    ladder.run_batch = interrupted
    with pytest.raises(KeyboardInterrupt):
        ladder.run()
    partial = ladder.partial()
    assert partial.interrupted and partial.culprit is not None and partial.culprit.kind == "kernel"


def test_a_cuda_failure_in_a_package_the_runs_did_not_build_is_checked_as_cuda():
    # No wrapper compiled and no hook record: only the failure says CUDA, and compute-sanitizer is the checker.
    world = always(sig("illegal_memory_access", "run", "CUDA error: an illegal memory access was encountered"))
    ladder = Ladder(["python", "repro.py"], world.run_batch, Seen(), Options())
    ladder.run_stage(Stage(StageName.BASELINE, {}), 2)
    assert ladder.is_cuda(default=False)


def test_a_crash_in_a_generated_kernel_skips_the_trace_and_the_walk_reads_that_kernels_inputs():
    segv = sig("segfault", "run", "killed by SIGSEGV")
    site = CrashSite("SIGSEGV", "cpp_fused_add_index_mul_sin_sum_0._omp_fn.0", None, "model.wrapper.so")
    world = World(lambda spec: segv if spec.stage in ("baseline", "inspect") else None, site)
    seen = Seen("cpu/wrapper_index_oob_level3.cpp", level2_log="cpu/index_oob_level2_filtered.log")
    _, out = climb(world, seen)
    skipped = {s.name: s.skipped for s in out.stages if s.skipped}
    assert "would only find it again" in skipped["trace"] and "would only find it again" in skipped["determinism"]
    assert world.ran("inspect") and not world.ran("trace")
    # The input check, once, on the sanity flag set's package (compiled ahead): no baseline run stored the plain one.
    sanity = next(s for s in out.stages if s.name == "sanity")
    assert sanity.rate.runs == 1 and sanity.env == flags.SANITY
    assert seen.filters[0] == ["cpp_fused_add_index_mul_sin_sum_0"]  # the walk starts at the crashed kernel
    assert out.culprit.pinned and "by the run's own native stack" in render(out.culprit.evidence[0])


def test_a_rare_crash_that_names_a_generated_kernel_convicts_at_once_and_the_walk_runs_after_the_verdict():
    # rare_only_ima_user_triton's shape: the bad index exists only in the runs that crash (about 1 in 5 here), so the
    # walk has to wait for another crash under the printer; the verdict does not wait with it.
    ima = sig("illegal_memory_access", "run", "CUDA error: an illegal memory access was encountered")
    site = CrashSite("Warp Illegal Address", "cpp_fused_add_index_mul_sin_sum_0", "k.py:26", None, "", DEVICE_DUMP)
    world = World(lambda spec: ima if spec.stage in ("baseline", "inspect") and spec.index % 5 == 3 else None, site)
    seen = Seen("cpu/wrapper_index_oob_level3.cpp", level2_log="cpu/index_oob_level2_filtered.log")
    told = []
    ladder = Ladder(["python", "repro.py"], world.run_batch, seen, Options(budget=0.0, reuse_baseline=True),
                    on_walk=lambda out: told.append((out.culprit.kernel, out.verdict_runs, len(world.specs))))
    out = ladder.run()
    # The baseline's later runs took the stored package: the input check runs on it, with no compile.
    assert stage(out, "sanity").env == {"AOTI_RUNTIME_CHECK_INPUTS": "1"}
    (kernel, runs, ran), = told
    assert kernel == "cpp_fused_add_index_mul_sin_sum_0" and runs == ran  # said before any inspect run started
    assert not any(spec.stage == "inspect" for spec in world.specs[:ran]) and world.ran("inspect")
    assert out.culprit.kernel == kernel and out.verdict_runs == runs  # the walk kept the culprit: the verdict's time
    assert "the walk ran after the verdict" in render(stage(out, "inspect").finding)


def test_a_crash_that_fails_every_run_convicts_before_the_walk_compiles():
    ima = sig("illegal_memory_access", "run", "CUDA error: an illegal memory access was encountered")
    site = CrashSite("Warp Illegal Address", "cpp_fused_add_index_mul_sin_sum_0", "k.py:26", None, "", DEVICE_DUMP)
    told = []
    world = World(lambda spec: ima, site)
    out = Ladder(["python", "repro.py"], world.run_batch,
                 Seen("cpu/wrapper_index_oob_level3.cpp", level2_log="cpu/index_oob_level2_filtered.log"),
                 Options(budget=0.0), on_walk=lambda out: told.append(len(world.specs))).run()
    (ran,) = told
    assert not any(spec.stage == "inspect" for spec in world.specs[:ran]) and world.ran("inspect")
    assert out.culprit.kernel == "cpp_fused_add_index_mul_sin_sum_0" and out.verdict_runs == ran


def test_after_a_crash_the_input_check_still_convicts_the_input_that_made_the_kernel_fault():
    # size_dependent_ima's shape: a kernel faults because a size is past the package's range; the crash names the
    # kernel, the input check names the input.
    ima = sig("illegal_memory_access", "run", "CUDA error: an illegal memory access was encountered")
    rejected = sig("input_mismatch", "run", "dim value is too large")
    site = CrashSite("Warp Illegal Address", "cpp_fused_add_index_mul_sin_sum_0", "k.py:26", None, "", DEVICE_DUMP)
    world = World(lambda spec: rejected if spec.stage == "sanity" else ima, site)
    hit = checks.InputRejected(0, "dim value is too large at 0, expected to be <= 2147483647, but got: 2147487744")
    _, out = climb(world, Seen("cpu/wrapper_index_oob_level3.cpp", sanity=hit))
    assert out.culprit.kind == "model_input" and out.culprit.input_index == 0
    assert not world.ran("inspect") and not world.ran("trace")


def test_a_crash_in_a_generated_kernel_without_the_walk_convicts_that_kernel():
    segv = sig("segfault", "run", "killed by SIGSEGV")
    site = CrashSite("SIGSEGV", "cpp_fused_add_index_mul_sin_sum_0", None, "model.wrapper.so")
    world = World(lambda spec: segv, site)
    _, out = climb(world, Seen("cpu/wrapper_index_oob_level3.cpp"), stages=("baseline", "trace"))
    assert out.culprit.kind == "kernel" and out.culprit.kernel == "cpp_fused_add_index_mul_sin_sum_0"
    assert not world.ran("trace")


def test_a_crash_that_lost_the_asserts_message_still_walks_with_the_index_check_another_run_printed():
    # index_from_cumsum_cuda on an H200: the run whose device assert the driver dumped printed no assert line (its
    # host saw an abort), the other runs printed `index out of bounds: 0 <= tmp11 < 16`; the walk needs the check.
    dumped = sig("device_assert", "run", "killed by SIGABRT (Aborted)")
    printed = sig("device_assert", "run", "k.py:40: block: [0,0,0] Assertion `index out of bounds: 0 <= tmp11 < 16` "
                                          "failed")
    site = CrashSite("Warp Assert", "cpp_fused_add_index_mul_sin_sum_0", None, None, "", DEVICE_DUMP)
    world = World(lambda spec: dumped if spec.stage == "baseline" and spec.index == 0 else printed, site)

    class Bounds(Seen):
        asked: list = []

        def level2(self, result, bound):
            self.asked.append(bound)
            return super().level2(result, bound)
    seen = Bounds("cpu/wrapper_index_oob_level3.cpp", level2_log="cpu/index_oob_level2_filtered.log")
    climb(world, seen)
    assert seen.asked and set(seen.asked) == {16}


# -- one judge: a crash convicts in whichever stage it happens (diagnose/judge.py) ----------------------------------
def test_a_crash_first_seen_in_a_later_stage_convicts_from_that_crash():
    # The baseline's failures could not tell where they faulted (an abort nobody traced); the sanity stage's run
    # crashed and its own account named the kernel: that convicts, the trace is skipped, the walk goes after.
    abort = sig("index_out_of_bounds", "run", "what(): index out of bounds: 0 <= tmp16 < 16L")
    site = CrashSite("SIGABRT", "cpp_fused_add_index_mul_sin_sum_0", "k.cpp:26", None, "index out of bounds",
                     "exception, thrown by the kernel's own check")
    world = World(lambda spec: abort if spec.stage in ("baseline", "sanity") else None,
                  lambda spec: site if spec.stage == "sanity" else None)
    ladder, out = climb(world, Seen("cpu/wrapper_index_oob_level3.cpp"))
    assert out.culprit.kind == "kernel" and out.culprit.kernel == "cpp_fused_add_index_mul_sin_sum_0"
    assert "sanity stage" in render(out.culprit.summary)
    assert "crashed run named the faulting kernel" in stage(out, "trace").skipped and not world.ran("trace")
    assert [e.stage for e in ladder.ledger.crashes()] == ["sanity"]


def test_a_checkers_error_that_names_no_kernel_does_not_stop_the_baseline():
    # A device assert under compute-sanitizer stops in __assertfail: the checker names no kernel. That is a lead,
    # not a culprit: the baseline runs on to its crash, which names the kernel.
    assert_sig = sig("device_assert", "run", "device-side assert triggered")
    site = CrashSite("Warp Assert", "triton_poi_fused_add_index_mul_sin_0", "k.py:35", None, "", DEVICE_DUMP)
    world = World(lambda spec: assert_sig if spec.stage == "baseline" and spec.index % 4 == 3 else None,
                  lambda spec: site if spec.stage == "baseline" else None)
    seen = Seen("cuda/wrapper_device_assert_oob_level3.cpp", memcheck_log="cuda/memcheck_device_assert.log")
    _, out = climb(world, seen, checkers=CHECKERS)
    assert world.ran("memcheck") and any(r.failed for r in stage(out, "baseline").results)
    assert out.culprit.kind == "kernel" and out.culprit.kernel == "triton_poi_fused_add_index_mul_sin_0"
    assert out.culprit.from_crash


def test_a_failure_that_blocking_launches_turn_into_a_memory_fault_is_checked_and_the_trace_is_only_a_lead():
    # A user Triton kernel writes out of bounds; the script's own check raises. Under blocking launches the failure
    # becomes an illegal memory access; every instrumented launch finished, so the trace infers "outside the
    # instrumented kernels". That is a lead: the checker runs under the flags that showed the fault and sees the
    # user kernel's access, which convicts.
    checked = sig("python_exception", "run", "1 output rows were never written")
    ima = sig("illegal_memory_access", "run", "CUDA error: an illegal memory access was encountered")
    world = World(lambda spec: ima if spec.stage == "determinism" else checked)
    finished = printer.Trace((printer.TraceEvent("triton_poi_fused_gelu_zeros_like_1", True),))
    seen = Seen("cuda/wrapper_ima_user_triton.cpp", trace=finished,
                memcheck_log="cuda/compute-sanitizer-memcheck-user-triton-oob.log")
    _, out = climb(world, seen, checkers=CHECKERS)
    memcheck = stage(out, "memcheck")
    assert not memcheck.skipped and memcheck.env["CUDA_LAUNCH_BLOCKING"] == "1"
    assert out.culprit.kind == "kernel" and out.culprit.kernel == "gather_rows_0"


def test_a_wrong_value_with_a_user_kernel_in_the_graph_is_checked_and_the_checker_convicts_that_kernel():
    # scatter_rows_oob_write's shape: the script's own check fails (no fault), the graph launches a user Triton kernel
    # the printer does not wrap; compute-sanitizer sees its stray access, which convicts it before any value is
    # compared with eager (where the zero fill it scatters into would look wrong). The walk then reads that kernel's
    # inputs after the verdict, for the operand that carried the stray address, as after a crash.
    checked = sig("python_exception", "run", "1 output rows were never written")
    world = World(lambda spec: checked)
    seen = Seen("cuda/wrapper_ima_user_triton.cpp", memcheck_log="cuda/compute-sanitizer-memcheck-user-triton-oob.log")
    _, out = climb(world, seen, checkers=CHECKERS)
    assert not stage(out, "memcheck").skipped
    assert out.culprit.kind == "kernel" and out.culprit.kernel == "gather_rows_0"
    assert out.culprit.convicted_by[0].kind == "checker"
    assert not world.ran("eager") and world.ran("inspect")
    assert "which the memory checker's report gave" in render(stage(out, "inspect").finding)
    assert "the memory checker named the faulting kernel" in stage(out, "eager").skipped
