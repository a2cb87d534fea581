"""The baseline: the repro as the user runs it, as often as it takes to know whether, and how often, it fails."""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from ...run.types import RunResult
from ...stats import baseline_should_stop
from ...verdict import Verdict
from ..facts import FactKind, fact
from ..findings import Findings, Stage, StageName, dominant

if TYPE_CHECKING:
    from ..ladder import Ladder


def run(ladder: "Ladder") -> tuple[Findings, Optional[str]]:
    """The findings the baseline supports, and why the ladder stops here (None: it climbs on)."""
    opt = ladder.opt
    stage = Stage(StageName.BASELINE, {})
    if opt.runs is not None:
        ladder.run_stage(stage, opt.runs)
    else:
        def stop(rs: list[RunResult]) -> bool:
            # A memory fault that a checker sees cheaper than a wait for more crashes: the verdict does not wait
            # for the rate, which runs on after it (Ladder.rate_after_verdict).
            return (baseline_should_stop(sum(r.failed for r in rs), len(rs), opt.min_runs, opt.max_runs)
                    or (len(rs) >= opt.min_runs and ladder.check_first(rs)))
        ladder.run_stage(stage, opt.max_runs, stop)
        ladder.clues.rate_left = opt.max_runs - len(stage.results) if ladder.check_first(stage.results) else 0
    rate = stage.rate
    sig = dominant(stage.results)
    ladder.clues.estimate = max(rate.ci95[0], 1e-9)
    out = Findings(Verdict.REPRODUCED, sig, rate, ladder.stages)
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
