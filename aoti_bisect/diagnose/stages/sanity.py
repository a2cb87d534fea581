"""The sanity stage: the runtime's input check and Inductor's NaN asserts (AOTI_RUNTIME_CHECK_INPUTS,
TORCHINDUCTOR_NAN_ASSERTS)."""
from __future__ import annotations

from ...aoti import flags
from ...aoti.checks import InputRejected
from ..context import StageContext
from ..facts import FactKind, fact
from ..findings import Findings, Stage, StageName
from ..sanity import sanity_culprit
from .rung import Rung


def run(ctx: StageContext, out: Findings) -> None:
    if ctx.clues.named is not None and ctx.clues.given is not None:
        ctx.skip(StageName.SANITY, "the crashed run's kernel checks a model input's value as given against a bound "
                 "fixed at export: no input's size or dtype explains that fault")
        return
    if ctx.clues.named is not None:
        _input_check_once(ctx, out)
        return
    stage = ctx.until_seen(Stage(StageName.SANITY, dict(flags.SANITY)))
    graph = ctx.graph(stage)
    for r in stage.failures:
        hit = ctx.evidence.sanity(r)
        if hit is not None:
            again = any(e.called_again for e in ctx.evidence.hook(r).events)
            out.culprit, stage.finding = sanity_culprit(hit, graph, ctx.namer, again)
            return
    stage.finding = (fact(FactKind.NOTE, "no input or NaN check fired ({rate} failed as before)",
                          rate=stage.rate.describe()) if stage.rate.failures else
                     fact(FactKind.NOTE, "not reproduced under these flags: {rate}", rate=stage.rate.describe()))


def _input_check_once(ctx: StageContext, out: Findings) -> None:
    """After a crash named the faulting kernel the NaN asserts have nothing to add, but the input check may still
    name the input that made it fault (a size outside the package's range): it is read at run time, and shapes,
    dtypes and devices do not change between runs, so one run on a package already built answers: the baseline's
    stored one where its runs took it, else the sanity flag set's (compiled ahead; its NaN asserts are not read)."""
    stored = any(r.spec.reuse for r in ctx.stages[0].results)
    env = {k: v for k, v in flags.SANITY.items() if k in flags.RUNTIME} if stored else dict(flags.SANITY)
    stage = ctx.run_stage(Stage(StageName.SANITY, env), 1)
    hit = next((h for r in stage.failures if isinstance(h := ctx.evidence.sanity(r), InputRejected)), None)
    if hit is not None:
        out.culprit, stage.finding = sanity_culprit(hit, ctx.graph(stage), ctx.namer)
        return
    stage.finding = fact(FactKind.NOTE, "the input check accepted every input ({rate}); one run, as the crashed run "
                         "already named the faulting kernel", rate=stage.rate.describe())


RUNG = Rung(StageName.SANITY, run)
