"""The inspect stage: printer level 2 filtered to a few kernels per compile, walking back from the suspect (or
the graph's outputs) to the first kernel that made bad values from good inputs (diagnose/walk.py)."""
from __future__ import annotations

from typing import Optional

from ...aoti import checks, flags, reinstrument
from ...aoti.printer import Observation
from ...aoti.wrapper import WrapperGraph
from ..context import StageContext
from ..facts import FactKind, fact, joined, kernel
from ..findings import Culprit, CulpritKind, Findings, Stage, StageName
from ..walk import Observe, walk
from .rung import Rung


def run(ctx: StageContext, out: Findings) -> None:
    trace = ctx.clues.trace
    crash = ctx.clues.named  # a crashed run or the checker named the kernel: the walk starts from its word
    graph = ctx.graph(trace) if crash is None else ctx.any_graph()
    if graph is None or (crash is None and not trace.failures) or ctx.clues.eager_walked:
        ctx.skip(StageName.INSPECT, "no generated wrapper to read the launch graph from" if graph is None else
                 "the trace stage did not reproduce the failure" if crash is None and not trace.failures else
                 "the eager walk compared every tensor the package saved on the failing call: level 2 would show "
                 "a few of the same")
        return
    bound = _index_bound(ctx, out)
    suspect = ctx.clues.suspect
    crashed = suspect is not None
    probes: list[Stage] = []

    def source(name: str) -> Optional[str]:
        """The whole kernel: a failed index check can lie far down it (checks.index_operands)."""
        found = ctx.evidence.kernel_source(name, [s.results[0] for s in [*probes, trace] if s and s.results],
                                              max_lines=1 << 20)
        return found[1] if found else None

    observe = _observer(ctx, graph, bound, crashed, probes)
    culprit = walk(graph, observe, suspect, crashed, bound, ctx.opt.inspect_cap, ctx.namer, source)
    out.culprit = _settled(ctx, out, culprit, suspect, probes)


def _settled(ctx: StageContext, out: Findings, culprit: Culprit, suspect: Optional[str],
             probes: list[Stage]) -> Culprit:
    """The culprit the walk gives, on the ledger where it convicts; where it convicts nothing, the word of the
    crash or checker that named the kernel, else the trace's never-finished launch, stands."""
    crash, crashed = ctx.clues.named, suspect is not None
    culprit.evidence[:0] = ctx.clues.checker
    read = probes[-1].failures or probes[-1].results if probes else []
    if culprit.pinned and read and culprit.headline is not None:
        ctx.ledger.walked(StageName.INSPECT, read[0].spec.name, culprit)
    if not culprit.pinned and crash is not None:
        # The walk could not convict anything further back: the crash's (or the checker's) own word stands.
        culprit = crash
        culprit.evidence.append(fact(FactKind.NOTE, "inspection could not read past {kernel}'s inputs, so this rests "
                                     "on {who} alone", kernel=kernel(suspect), who=crash.named_by))
    elif not culprit.pinned and crashed and suspect:
        # The level-2 view could not convict anything, but the trace did name the faulting launch.
        culprit.kind, culprit.kernel = CulpritKind.KERNEL, suspect
        culprit.evidence.insert(0, fact(FactKind.LAUNCH, "the trace shows {kernel} never finished; inspection could "
                                        "not read its inputs, so this rests on the trace alone",
                                        kernel=kernel(suspect)))
    if probes:
        probes[-1].finding = joined(probes[-1].finding, culprit.evidence[-1] if culprit.evidence else None)
    if out.culprit is not None and not out.culprit.pinned:
        # what an earlier stage learnt without convicting (the eager walk)
        culprit.evidence.extend(out.culprit.evidence)
    return culprit


def _observer(ctx: StageContext, graph: WrapperGraph, bound: Optional[checks.IndexBound], crashed: bool,
              probes: list[Stage]) -> Observe:
    """The walk's eyes: a level-2 run filtered to the kernels asked for (each appended to `probes`), and the views
    and model-input statistics it printed, from the failing runs where a crash is walked."""

    def observe(kernels: list[str]) -> Observation:
        copies, problems = ctx.instrumented(reinstrument.INSPECT_LEVEL, tuple(kernels))
        env = {**ctx.gpu_env(), **flags.INSPECT, flags.FILTER: ",".join(kernels), **copies}
        stage = ctx.until_seen(Stage(StageName.INSPECT, env))
        probes.append(stage)
        notes = [fact(FactKind.NOTE, "{problem}", problem=p) for p in problems]
        fresh = ctx.graph(stage)
        if fresh is not None and [l.name for l in fresh.launches] != [l.name for l in graph.launches]:
            notes = [fact(FactKind.NOTE, "kernel names drifted between the trace and the inspection compile: "
                          "{was} vs {now}", was=str([l.name for l in graph.launches]),
                          now=str([l.name for l in fresh.launches]))]
        runs = stage.failures if (crashed and stage.failures) else stage.results
        views: dict = {}
        inputs: dict = {}
        for r in runs:
            v, i = ctx.evidence.level2(r, bound.value if bound else None)
            for k, view in v.items():
                views.setdefault(k, view)
            for k, s in i.items():
                inputs.setdefault(k, s)
        stage.finding = joined(*notes) or fact(
            FactKind.NOTE, "inspected {kernels:, }: printer showed {n} kernel(s)" + (
                "" if stage.failures or not crashed else "; the failure did not reproduce under level 2"),
            kernels=tuple(kernel(k) for k in kernels), n=len(views))
        return views, inputs

    return observe


def _index_bound(ctx: StageContext, out: Findings) -> Optional[checks.IndexBound]:
    """The failed index check, from the failure's message, else from another failing run's of the same kind: in a
    run whose device assert the driver dumped, the assert's printed lines can be lost (the host saw a failed
    launch), and a crash that names the kernel can end the baseline at that run."""
    sig = out.signature
    if sig is None:
        return None
    messages = [sig.message] + [r.signature.message for s in ctx.stages for r in s.failures
                                if r.signature and r.signature.kind == sig.kind]
    return next((b for m in messages if (b := checks.index_bound(m)) is not None), None)


RUNG = Rung(StageName.INSPECT, run)
