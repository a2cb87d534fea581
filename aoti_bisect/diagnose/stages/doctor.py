"""The load doctor, for failures while loading a package: one hooked run tells which package was loaded, then
the cheap experiments (diagnose/loaddoctor.py decides what they show)."""
from __future__ import annotations

from ...failure import Phase
from ..context import StageContext
from ..facts import joined
from ..findings import Findings, Stage, StageName
from ..loaddoctor import diagnose_load
from .rung import Rung


def applies(ctx: StageContext, out: Findings) -> bool:
    return bool(out.signature and out.signature.phase == Phase.LOAD and ctx.opt.asked_beyond_baseline())


def run(ctx: StageContext, out: Findings) -> None:
    sig = out.signature
    prefix, no_trace = ctx.opt.debugger if sig.kind.is_crash else (
        (), "the load raised an exception (its traceback is in the log); it did not crash in native code")
    stage = Stage(StageName.DOCTOR, {}, tool=" ".join(prefix) or None)
    # Under gdb a run is several times slower (symbols of every library torch loads).
    ctx.run_stage(stage, ctx.repeat(), stop=lambda rs: any(r.failed for r in rs), prefix=prefix,
                     slowdown=4.0 if prefix else 1.0)
    run = (stage.failures or stage.results or [None])[0]
    evidence = ctx.evidence
    facts = evidence.package(run) if run else None
    fresh = evidence.fresh_process(facts.custom_ops) if facts and not facts.problem else {}
    trace = evidence.backtrace(run) if run and prefix else []
    if prefix and not trace:
        no_trace = "the run did not crash under gdb"
    toolchains = evidence.toolchains(facts.path) if facts and not facts.problem and sig.kind.is_crash else None
    out.culprit = diagnose_load(sig, facts, fresh, trace, None if trace else no_trace, toolchains)
    stage.finding = out.culprit.headline
    if out.culprit.pinned:
        out.summary = joined(out.summary, out.culprit.summary)


RUNG = Rung(StageName.DOCTOR, run, applies=applies, runtime=False, requestable=False)
