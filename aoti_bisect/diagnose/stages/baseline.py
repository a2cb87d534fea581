"""The baseline: the repro as the user runs it, as often as it takes to know whether, and how often, it fails."""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from ...run.types import RunResult
from ...stats import baseline_should_stop
from ...verdict import Verdict
from ..facts import FactKind, fact
from ..findings import Findings, Stage, StageName, dominant
from . import memcheck

if TYPE_CHECKING:
    from ..ladder import Ladder


def run(ladder: "Ladder") -> tuple[Findings, Optional[str]]:
    """The findings the baseline supports, and why the ladder stops here (None: it climbs on)."""
    opt = ladder.opt
    planned = opt.runs if opt.runs is not None else opt.max_runs
    stage = Stage(StageName.BASELINE, {}, planned=planned)
    out = Findings(Verdict.REPRODUCED, None, stage.rate, ladder.stages)
    # The first wave is as wide as the rule below ever stops at: a failure seen every time is then known after
    # one run's time where slots allow (the scheduler starts twins of a run that compiles anyway beside it). A
    # run that passes ends the wave: a CUDA repro's checker goes right after it (check_early).
    ladder.run_stage(stage, min(opt.min_runs, planned), stop=lambda rs: any(not r.failed for r in rs))
    if ladder.check_early(stage.results):
        memcheck.run(ladder, out, unmasking=True)  # no failure yet: as when un-masking, any error convicts
    # The verdict does not wait for the rate when a checker convicted, or when a flaky memory fault's checker is
    # cheaper than waiting for crashes: the rest of the baseline runs on after the verdict (rate_after_verdict).
    if out.culprit is None:
        def stop(rs: list[RunResult]) -> bool:
            if opt.runs is not None:
                return False
            return (baseline_should_stop(sum(r.failed for r in rs), len(rs), opt.min_runs, opt.max_runs)
                    or (len(rs) >= opt.min_runs and ladder.check_first(rs)))
        ladder.extend(stage, planned - len(stage.results), stop)
    if out.culprit is not None or ladder.check_first(stage.results):
        ladder.clues.rate_left = planned - len(stage.results)
    rate = stage.rate
    sig = dominant(stage.results)
    ladder.clues.estimate = max(rate.ci95[0], 1e-9)
    ladder.clues.likely = rate.value
    out.signature, out.baseline = sig, rate
    if out.culprit is not None:
        stage.finding = fact(FactKind.REPRODUCTION, "{rate} before the checker convicted", rate=rate.describe())
        out.summary = out.culprit.headline
        return out, None
    infra = [r for r in stage.results if r.signature and r.signature.kind == "infra"]
    if infra and len(infra) == len(stage.results):
        out.verdict, out.signature = Verdict.ERROR, infra[0].signature
        stage.finding = out.summary = fact(FactKind.REPRODUCTION, "the repro cannot run here: {message}",
                                           message=infra[0].signature.message)
        return out, "infrastructure error"
    if rate.failures == 0:
        out.verdict = Verdict.INCONCLUSIVE if infra else Verdict.NOT_REPRODUCED
        stage.finding = out.summary = (
            fact(FactKind.REPRODUCTION, "did not reproduce: {rate}; {n} run(s) could not run: {message}",
                 rate=rate.describe(), n=len(infra), message=infra[0].signature.message) if infra else
            fact(FactKind.REPRODUCTION, "did not reproduce: {rate}", rate=rate.describe()))
        return out, "baseline did not reproduce"
    if all(r.signature and r.signature.kind == "script_error" for r in stage.failures):
        out.verdict = Verdict.ERROR
        stage.finding = out.summary = fact(FactKind.REPRODUCTION, "the repro itself is broken: {message}",
                                           message=sig.message)
        return out, "the repro itself is broken"
    stage.finding = out.summary = fact(FactKind.REPRODUCTION, "reproduced {rate}: {kind} in {phase}: {message}",
                                       rate=rate.describe(), kind=sig.kind, phase=sig.phase, message=sig.message)
    return out, None
