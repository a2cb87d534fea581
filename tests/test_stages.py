"""Each stage on its own, handed a fake of the one thing it may use: its StageContext (diagnose/context.py).

No Ladder here: `Context` runs a stage's runs in a `World` and reads them through a `Seen` (tests/test_ladder.py,
where the whole climb is tested), one run a stage.
"""
from typing import Optional

from aoti_bisect.aoti import checks, flags, printer
from aoti_bisect.diagnose.judge import Ledger
from aoti_bisect.diagnose.context import Clues, Options
from aoti_bisect.diagnose.facts import Namer
from aoti_bisect.diagnose.facts import FactKind, fact
from aoti_bisect.diagnose.findings import Cause, Control, Culprit, CulpritKind, Findings, Precision, Stage, StageName
from aoti_bisect.diagnose.stages import determinism, fakecheck, memcheck, sanity, trace
from aoti_bisect.report.facts import render
from aoti_bisect.run.types import RunSpec, Signature
from aoti_bisect.stats import Rate
from aoti_bisect.verdict import Verdict
from test_ladder import CHECKERS, Seen, World, always, sig


class Context:
    """A StageContext over a World and a Seen: every stage takes one run; the repro is CUDA only where told."""

    def __init__(self, world: World, seen: Seen, cuda: bool = False, **options) -> None:
        self.world = world
        self.evidence = seen
        self.cuda = cuda
        self.opt = Options(**options)
        self.clues = Clues()
        self.namer = Namer()
        self.stages: list[Stage] = []
        self.ledger = Ledger()

    def run_stage(self, stage, n, stop=lambda rs: False, prefix=(), slowdown=1.0):
        self.stages.append(stage)
        return self.extend(stage, n, stop, prefix, slowdown)

    def extend(self, stage, n, stop=lambda rs: False, prefix=(), slowdown=1.0):
        specs = [RunSpec((*prefix, "python", "repro.py"), str(stage.name), len(stage.results) + i,
                         tuple(sorted(stage.env.items())), 1.0, stage.hook) for i in range(n)]
        self.world.run_batch(specs, stage.results.append, stop)
        return stage

    def until_seen(self, stage):
        return self.run_stage(stage, 1)

    def compile_only(self, env):
        pass

    def repeat(self, rate=None):
        return 1

    def skip(self, name, why):
        self.stages.append(Stage(name, {}, skipped=why))

    def ran(self, name):
        return any(s.name == name for s in self.stages)

    def graph(self, stage):
        return self.evidence.graph(stage.results[0]) if stage is not None and stage.results else None

    def any_graph(self):
        return self.evidence.wrapper

    def is_cuda(self, default=True):
        return self.cuda

    def gpu_env(self):
        return dict(flags.DETERMINISM) if self.cuda else {}

    def instrumented(self, level, kernels=()):
        return {}, ()

    def check_first(self, results):
        return True


def findings(signature: Optional[Signature] = None) -> Findings:
    return Findings(Verdict.REPRODUCED, signature, Rate(1, 1), [])


def test_the_input_check_convicts_the_model_input():
    hit = checks.InputRejected(1, "unmatched dim value at 0")
    ctx = Context(always(sig("input_mismatch", "run", "unmatched dim value")),
                  Seen("cpu/wrapper_index_oob_level3.cpp", sanity=hit))
    out = findings()
    sanity.run(ctx, out)
    assert out.culprit.kind == "model_input" and out.culprit.input_name == "arg1_1"
    assert ctx.world.ran("sanity")[0].env_dict == flags.SANITY


def test_the_determinism_stage_runs_nothing_on_a_cpu_repro():
    ctx = Context(always(sig("segfault")), Seen())
    determinism.run(ctx, findings(sig("segfault")))
    (det,) = ctx.stages
    assert det.name == StageName.DETERMINISM and "CPU-only" in det.skipped and not ctx.world.specs


def test_fakecheck_does_not_run_again_the_custom_op_a_run_hangs_in():
    ctx = Context(always(sig("timeout")), Seen("cpu/wrapper_load_error.cpp"))
    out = findings(sig("timeout"))
    out.culprit = Culprit(CulpritKind.OUTSIDE_INSTRUMENTED_KERNELS, kernel="bisectlab::fused_norm")
    fakecheck.run(ctx, out)
    assert "hangs inside bisectlab::fused_norm" in ctx.stages[0].skipped and not ctx.world.specs


def test_memcheck_skips_a_failure_that_is_no_memory_fault_and_says_how_to_force_it():
    ctx = Context(always(sig("python_exception")), Seen(), cuda=True, checkers=CHECKERS)
    memcheck.run(ctx, findings(sig("python_exception")))
    assert "--sanitize" in ctx.stages[0].skipped and not ctx.world.specs


def test_the_checker_goes_first_only_while_nothing_is_pinned():
    ctx = Context(always(sig("segfault")), Seen())
    ctx.run_stage(Stage(StageName.BASELINE, {}), 1)
    assert memcheck.goes_first(ctx, findings())
    ctx.clues.named = Culprit(CulpritKind.KERNEL, kernel="cpp_fused_0")
    assert not memcheck.goes_first(ctx, findings())


def test_the_trace_names_the_launch_that_never_finished():
    unfinished = printer.Trace((printer.TraceEvent("gather_rows_0", False),))
    ctx = Context(always(sig("illegal_memory_access")), Seen("cuda/wrapper_ima_user_triton.cpp", trace=unfinished),
                  cuda=True)
    trace.run(ctx, findings(sig("illegal_memory_access")))
    assert ctx.clues.suspect == "gather_rows_0" and ctx.clues.trace is ctx.stages[0]
    assert ctx.world.ran("trace")[0].env_dict == {**flags.DETERMINISM, **flags.TRACE}
    assert "gather_rows_0" in render(ctx.stages[0].finding)


def test_the_precision_control_recompiles_rounding_as_eager_and_convicts_nothing():
    from aoti_bisect.diagnose.stages import precision

    wrong = sig("python_exception", "run", "wrong values: max abs difference 0.5")
    # as bf16_rounding does (checked with TORCHINDUCTOR_EMULATE_PRECISION_CASTS=1): the control passes
    world = World(lambda spec: None if "TORCHINDUCTOR_EMULATE_PRECISION_CASTS" in spec.env_dict else wrong)
    out = Findings(Verdict.REPRODUCED, wrong, Rate(2, 2), [])
    out.culprit = Culprit(CulpritKind.PRECISION, kernel="cpp_fused_exp_mul_neg_sub_0",
                          precision=Precision(Cause.EAGER_ROUNDING))
    ctx = Context(world, Seen())
    assert precision.applies(ctx, out) and not precision.applies(ctx, findings(wrong))
    precision.run(ctx, out)
    assert ctx.world.ran("precision")[0].env_dict == flags.EMULATE_PRECISION and len(ctx.world.specs) == 1
    assert out.culprit.kind == "precision" and render(out.culprit.evidence[-1]) == (
        "control recompile: the package built rounding as eager does (emulate_precision_casts) passes the script's "
        "check: the gap is eager's intermediate rounding")
    # a control that still fails says so; one that fails otherwise says nothing of the gap
    for behaves, said in ((wrong, "still fails the script's check"), (sig("compile_error", "compile"), None)):
        out.culprit = Culprit(CulpritKind.PRECISION, kernel="k", precision=Precision(Cause.EAGER_ROUNDING))
        ctx = Context(always(behaves), Seen())
        precision.run(ctx, out)
        assert out.culprit.kind == "precision" and not precision.applies(ctx, out)  # the control ran: once
        assert (said in render(out.culprit.evidence[-1])) if said else not out.culprit.evidence
        assert said or "failed otherwise (compile_error in compile)" in render(ctx.stages[0].finding)


def test_the_tf32_control_clears_a_matmul_kernel_or_convicts_it_from_its_own_walk():
    import dataclasses

    from aoti_bisect.aoti import wrapper
    from aoti_bisect.aoti.eagerwalk import EagerWalk, read_eager_walk
    from aoti_bisect.aoti.provenance import read_kernel_information
    from aoti_bisect.diagnose.stages import precision
    from test_eagerwalk import TF32

    wrong = sig("python_exception", "run", "wrong values: max abs difference 0.0015")
    path = f"{TF32}/tf32_matmul.wrapper.cpp"

    def walked(control_walk):  # as the eager walk leaves the H100's TF32 template, its conviction waiting
        out = Findings(Verdict.REPRODUCED, wrong, Rate(2, 2), [])
        out.culprit = Culprit(CulpritKind.KERNEL, kernel="triton_tem_fused_addmm_t_0", precision=Precision(Cause.TF32))
        out.culprit.summary = fact(FactKind.EAGER, "triton_tem_fused_addmm_t_0's output buf0 differs")
        out.culprit.evidence = [out.culprit.summary]
        seen = Seen()
        with open(path) as f:
            seen.wrapper = wrapper.parse_wrapper(f.read(), path, [])
        seen.kernel_info = read_kernel_information(path)
        if control_walk is not None:  # else the world's: no eager run
            seen.walk = control_walk
        return out, seen

    # gone with TF32 off (the hook compiles with it off), the script's check passing: TF32's rounding, cleared
    out, seen = walked(None)
    ctx = Context(World(lambda spec: None if "AOTI_BISECT_TF32_OFF" in spec.env_dict else wrong), seen, cuda=True)
    assert precision.applies(ctx, out)
    precision.run(ctx, out)
    assert ctx.world.ran("precision")[0].env_dict == {**flags.EAGER, **flags.TF32_OFF}  # walked as the eager stage
    c = out.culprit
    assert (c.kind, c.kernel, c.precision.control) == ("precision", "triton_tem_fused_addmm_t_0", "passes")
    assert render(c.summary) == (
        "a precision difference, not a miscompile: triton_tem_fused_addmm_t_0's output buf0 differs; the program was "
        "compiled with TF32 matmuls allowed, and the package built with them off clears the gap: the gap is TF32's "
        "rounding of the matmul's operands (10 mantissa bits), which the compile allowed. No kernel is convicted")
    assert not ctx.ledger.entries and not precision.applies(ctx, out)
    # still failing the script's stricter check, but its walk finds no kernel beyond the walk's tolerance: cleared
    out, seen = walked(EagerWalk("agree", calls=1))
    precision.run(Context(always(wrong), seen, cuda=True), out)
    assert out.culprit.kind == "precision" and "no kernel of it misses eager beyond the walk's tolerance" in render(
        out.culprit.evidence[-1])
    # still beyond it without TF32 (the H100's record as a control compiled without TF32 would leave it): a
    # miscompile, convicted from the control's own walk and run
    out, seen = walked(dataclasses.replace(read_eager_walk(TF32), tf32=False))
    ctx = Context(always(wrong), seen, cuda=True)
    precision.run(ctx, out)
    assert (out.culprit.kind, out.culprit.kernel, out.culprit.precision) == (
        "kernel", "triton_tem_fused_addmm_t_0", Precision(Cause.TF32, Control.STILL_FAILS))  # the question it answered
    assert [(e.kind, e.stage, e.names) for e in out.culprit.convicted_by] == [
        ("walk", "precision", "triton_tem_fused_addmm_t_0")]
    assert "differs from eager the mm part of `linear` by up to 0.001795" in render(out.culprit.summary)
    assert "still fails the script's check and its walk convicts a kernel without TF32" in render(
        out.culprit.evidence[-1])
    # a control that fails otherwise, or whose walk did not run, tells nothing: not convicted
    for behaves, control_walk in ((sig("compile_error", "compile"), None), (wrong, None)):
        out, seen = walked(control_walk)
        precision.run(Context(always(behaves), seen, cuda=True), out)
        assert (out.culprit.kind, out.culprit.kernel, out.culprit.convicted_by) == ("unknown", None, ())
        assert render(out.culprit.evidence[0]).startswith(
            "not convicted: triton_tem_fused_addmm_t_0's output buf0 differs, but the program was compiled with TF32 "
            "matmuls allowed")
