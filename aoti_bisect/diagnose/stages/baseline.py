"""The baseline: the repro as the user runs it, as often as it takes to know whether, and how often, it fails."""
from __future__ import annotations

import os
from typing import Optional

from ...failure import FailureKind
from ...run.classify import relative_missing
from ...run.types import RunResult
from ...stats import Rate, baseline_should_stop, fisher_exact, runs_to_observe
from ...validate import MAX_RUNS
from ...verdict import Verdict
from ..context import StageContext
from ..facts import Fact, FactKind, fact, joined
from ..findings import Findings, Stage, StageName, dominant
from . import memcheck

REUSE_ALPHA = 0.05  # the runs that reuse a package fail differently from the user's way: they stop reusing


def run(ctx: StageContext) -> tuple[Findings, Optional[str]]:
    """The findings the baseline supports, and why the ladder stops here (None: it climbs on)."""
    opt = ctx.opt
    planned = opt.runs if opt.runs is not None else opt.max_runs
    stage = Stage(StageName.BASELINE, {}, planned=planned)
    out = Findings(Verdict.REPRODUCED, None, stage.rate, ctx.stages)
    # The first wave is as wide as the rule below ever stops at: a failure seen every time is then known after
    # one run's time where slots allow (the scheduler starts twins of a run that compiles anyway beside it). A
    # run that passes ends the wave: a CUDA repro's checker goes right after it (check_early).
    ctx.run_stage(stage, min(opt.min_runs, planned), stop=lambda rs: any(not r.failed for r in rs))
    if opt.reuse_baseline:
        stage.reuse_from = len(stage.results)  # the first wave ran the user's way; the rest need not compile
    if ctx.check_early(stage.results):
        memcheck.run(ctx, out, unmasking=True)  # no failure yet: as when un-masking, any error convicts
        ctx.judge(out)  # a checked run that crashed tells where, as any run does
    # The verdict does not wait for the rate when a checker convicted, when a crashed run told where it faulted,
    # or when a flaky memory fault's checker is cheaper than waiting for crashes: the rest of the baseline runs on
    # after the verdict (diagnose/after_verdict.py).
    if not _pinned(out) and ctx.clues.named is None:
        def stop(rs: list[RunResult]) -> bool:
            if opt.runs is not None:
                return False
            return (baseline_should_stop(sum(r.failed for r in rs), len(rs), opt.min_runs, opt.max_runs)
                    or any(r.failed and r.crash is not None for r in rs)
                    or (len(rs) >= opt.min_runs and ctx.check_first(rs)))
        ctx.extend(stage, planned - len(stage.results), stop)
        ctx.judge(out)
    ctx.clues.rate_left = planned - len(stage.results)
    reuse = joined(check_reuse(stage), untold(stage))
    rate = stage.rate
    sig = dominant(stage.results)
    ctx.clues.estimate = max(rate.ci95[0], 1e-9)
    ctx.clues.likely = rate.value
    out.signature, out.baseline = sig, rate
    named = out.culprit if _pinned(out) else ctx.clues.named
    if named is not None:
        stage.finding = joined(fact(FactKind.REPRODUCTION, "{rate} before the {who} named the culprit",
                                    rate=rate.describe(),
                                    who="crashed run" if named.from_crash else "checker"),
                               reuse)
        out.summary = named.headline
        return out, None
    return out, _verdict(stage, out, reuse)


RARE = 20  # the rarer fault a not-reproduced verdict's advice sizes a rerun for: 1 run in RARE


def rarer_fault(runs: int) -> str:
    """What a run of no failures leaves open, and the runs that would close it: a fault of one run in 20 passes 30
    runs (stats.DEFAULT_MAX_RUNS) 21% of the time, and a user who knows the failure is rare must not read the verdict
    as its absence."""
    missed = 1.0 - 0.05 ** (1.0 / runs)  # the rate that passes `runs` runs 5% of the time
    # Two figures: at 30 runs it is 9.5%, and "10%" would be a rate that passes them all only 4.2% of the time.
    needed = runs_to_observe(1 / RARE, cap=MAX_RUNS)
    return (f"None of {runs} run(s) failed, as a fault of {100 * missed:.2g}% of runs or rarer still does at least 5% "
            f"of the time: if the failure is rare, give it more runs ({needed}, with --max-runs {needed}, show a fault "
            f"of 1 run in {RARE} with 95% odds)")


def _verdict(stage: Stage, out: Findings, reuse: Optional[Fact]) -> Optional[str]:
    """The baseline's verdict where no run named the culprit, said in its finding; why the ladder stops here (None:
    it reproduced, and the ladder climbs on)."""
    rate, sig = out.baseline, out.signature
    infra = [r for r in stage.results if r.signature and r.signature.kind is FailureKind.INFRA]
    if infra and len(infra) == len(stage.results):
        out.verdict, out.signature = Verdict.ERROR, infra[0].signature
        stage.finding = out.summary = fact(FactKind.REPRODUCTION, "the repro cannot run here: {message}",
                                           message=infra[0].signature.message)
        return "infrastructure error"
    if rate.failures == 0:
        out.verdict = Verdict.INCONCLUSIVE if infra else Verdict.NOT_REPRODUCED
        stage.finding = out.summary = (
            fact(FactKind.REPRODUCTION, "did not reproduce: {rate}; {n} run(s) could not run: {message}",
                 rate=rate.describe(), n=len(infra), message=infra[0].signature.message) if infra else
            fact(FactKind.REPRODUCTION, "did not reproduce: {rate}", rate=rate.describe()))
        out.next_steps.append(rarer_fault(rate.runs))
        return "baseline did not reproduce"
    if all(r.signature and r.signature.kind is FailureKind.SCRIPT_ERROR for r in stage.failures):
        out.verdict = Verdict.ERROR
        stage.finding = out.summary = fact(FactKind.REPRODUCTION, "the repro itself is broken: {message}",
                                           message=sig.message)
        missing = relative_missing(sig.message)
        if missing is not None and os.path.exists(missing):
            # aoti-bisect's own working directory is the user's: the file is there, and only the run's is not.
            out.next_steps.append(
                f"Each run has a working directory of its own (runs/<stage>-NNN/cwd), so the repro's relative path "
                f"'{missing}' does not reach the file where you ran it ({os.path.abspath(missing)}): open it by an "
                f"absolute path, and write the repro's own files (the package) relative to the working directory, so "
                f"that parallel runs never share one")
        return "the repro itself is broken"
    out.summary = fact(FactKind.REPRODUCTION, "reproduced {rate}: {kind} in {phase}: {message}",
                       rate=rate.describe(), kind=sig.kind, phase=sig.phase, message=sig.message)
    stage.finding = joined(out.summary, reuse)
    return None


def _pinned(out: Findings) -> bool:
    return out.culprit is not None and out.culprit.pinned


def untold(stage: Stage) -> Optional[Fact]:
    """Why crashed runs could not say where they faulted (no witness, an unreadable dump), once each."""
    why = sorted({r.crash_problem for r in stage.failures if r.crash is None and r.crash_problem})
    return fact(FactKind.CRASH, "the crashed runs could not tell where they faulted: {why:; }",
                why=tuple(why)) if why else None


def check_reuse(stage: Stage) -> Optional[Fact]:
    """Whether the runs that took the stored package fail as the user's way does: a rate that differs by Fisher's
    test, or another kind of failure, ends the reuse (later runs compile again) and says so."""
    user = [r for r in stage.results if not r.spec.reuse]
    reused = [r for r in stage.results if r.spec.reuse]
    if not reused or not user:
        return None
    a, b = Rate(sum(r.failed for r in user), len(user)), Rate(sum(r.failed for r in reused), len(reused))
    p = fisher_exact(a.failures, a.runs, b.failures, b.runs)
    mine, theirs = dominant(user), dominant(reused)
    changed = p < REUSE_ALPHA or (mine is not None and theirs is not None and mine.kind != theirs.kind)
    if not changed:  # the counts say it: the intervals are the rate's, a line above
        return fact(FactKind.REPRODUCTION, "{n} run(s) took the stored package instead of compiling: {b}/{n} against "
                    "{a}/{m} the user's way (Fisher p = {p:.3g})", n=b.runs, b=b.failures, a=a.failures, m=a.runs,
                    p=p)
    stage.reuse_from = None
    return fact(FactKind.REPRODUCTION, "{n} run(s) took the stored package instead of compiling: {reused} against "
                "{user} the user's way (Fisher p = {p:.3g}); that changes the failure, so later runs compile again",
                n=b.runs, reused=b.describe(), user=a.describe(), p=p)

