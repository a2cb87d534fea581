"""The trace stage: printer level 3, so the faulting kernel is the last `before_launch` without its
`after_launch`; a fault after every instrumented launch lies outside them."""
from __future__ import annotations

from collections import Counter
from typing import Optional

from ...aoti import flags, reinstrument
from ..context import StageContext
from ..facts import FactKind, fact, joined, kernel
from ..findings import Culprit, CulpritKind, Findings, Stage, StageName, dominant
from .rung import Rung


def run(ctx: StageContext, out: Findings) -> None:
    copies, problems = ctx.instrumented(reinstrument.TRACE_LEVEL)
    stage = ctx.until_seen(Stage(StageName.TRACE, {**ctx.gpu_env(), **flags.TRACE, **copies}))
    ctx.clues.trace = stage
    graph = ctx.graph(stage)
    if not stage.failures:
        # Passing runs' traces say nothing about where the failure happens: conclude nothing from them,
        # but a kernel that the failing runs of earlier stages name themselves still stands.
        stage.finding = fact(FactKind.LAUNCH, "not reproduced under these flags: {rate}", rate=stage.rate.describe())
        out.culprit = _named_by_failures(ctx) or Culprit(CulpritKind.UNKNOWN, evidence=[fact(
            FactKind.LAUNCH, "the trace stage did not reproduce the failure ({rate}), so no launch can be blamed",
            rate=stage.rate.describe())])
        return
    traces = [ctx.evidence.trace(r) for r in stage.failures]
    if not any(t.launches for t in traces):
        why = ("; ".join(problems) if problems and not copies else
               "no generated C++ wrapper was compiled under these flags: the repro most likely loads a "
               "prebuilt .pt2 (compile-time flags never take effect) or uses plain torch.compile (the "
               "Python wrapper prints nothing at level 3). Make the repro call "
               "torch._inductor.aoti_compile_and_package itself." if graph is None else
               "the wrapper was compiled but printed no launch: the failure happens before the first "
               "kernel launch (loading, input handling)")
        stage.finding = joined(stage.finding, fact(FactKind.LAUNCH, "no launch lines: {why}", why=why))
        out.culprit = Culprit(CulpritKind.UNKNOWN, evidence=[stage.finding])
        return
    unfinished = Counter(t.unfinished for t in traces if t.unfinished)
    sig = dominant(stage.failures) or out.signature
    if unfinished:
        name, count = unfinished.most_common(1)[0]
        ctx.clues.suspect = name
        stage.finding = fact(FactKind.LAUNCH, "last launch without after_launch: {kernel} ({count}/{n} failing runs)",
                             kernel=kernel(name), count=count, n=len(traces))
        if len(unfinished) > 1:
            stage.finding = joined(stage.finding, fact(FactKind.LAUNCH, "other runs ended in {others:, }",
                                                       others=tuple(kernel(k) for k in unfinished if k != name)))
        return
    last = Counter(t.last_finished for t in traces).most_common(1)[0][0]
    if sig and sig.kind.stops_the_process:
        nxt = graph.next_after(last) if graph else None
        c = Culprit(CulpritKind.OUTSIDE_INSTRUMENTED_KERNELS, kernel=nxt)
        c.evidence.append(fact(FactKind.LAUNCH, "every instrumented launch finished (last: {last}); the fault "
                               "happened outside instrumented kernels (a custom op through the proxy executor, a "
                               "copy, a later sync); next in the wrapper after {last}: {next}", last=kernel(last),
                               next=kernel(nxt) if nxt else "unknown"))
        out.culprit = c
        stage.finding = c.evidence[0]
        return
    stage.finding = fact(FactKind.LAUNCH, "all {n} launches finished (last: {last}): the model ran to the end and "
                         "the script's check failed, so the walk starts at the graph's outputs",
                         n=len(traces[0].launches), last=kernel(last))


def _named_by_failures(ctx: StageContext) -> Optional[Culprit]:
    """The kernel the failure messages of earlier stages name (a CPU kernel's exception, a Triton assert's
    source), when one is named: weaker than a trace, stronger than nothing."""
    named = Counter(r.signature.kernel for s in ctx.stages for r in s.failures
                    if r.signature and r.signature.kernel and not r.signature.kernel.endswith(".py"))
    if not named:
        return None
    name, count = named.most_common(1)[0]
    c = Culprit(CulpritKind.KERNEL, kernel=name)
    c.evidence.append(fact(FactKind.LAUNCH, "the trace stage did not reproduce the failure ({rate}); {count} failing "
                           "run(s) of earlier stages name {kernel} in their error message",
                           rate=ctx.stages[-1].rate.describe(), count=count, kernel=kernel(name)))
    c.summary = c.evidence[0]
    return c


RUNG = Rung(StageName.TRACE, run, refinds=True)

