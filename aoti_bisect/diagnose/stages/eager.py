"""The eager stage: a wrong but finite output, when no earlier stage pinned a culprit and no launch faulted. No
NaN or bad index marks where it went wrong, so the package's every saved tensor is held against the exported
program run eagerly on the failing call's inputs (diagnose/eagerwalk.py)."""
from __future__ import annotations

from typing import Optional

from ...aoti import flags
from ...aoti.provenance import SourceMap
from ...aoti.wrapper import WrapperGraph
from ...failure import FailureKind, Phase
from ...run.types import Signature
from ..context import StageContext
from ..eagerwalk import walk_eager
from ..findings import Culprit, CulpritKind, Findings, Stage, StageName
from .rung import Rung


def likely(sig: Optional[Signature]) -> bool:
    """Whether the baseline's failure looks like one this stage will be asked to explain: the script's own check
    failed at run time, and no fault or non-finite value gives the earlier stages a mark to follow (a hint for
    compiling its flag set early, never a decision)."""
    return sig is not None and sig.phase is Phase.RUN and not sig.kind.stops_the_process and sig.kind not in (
        FailureKind.NAN_INF, FailureKind.SCRIPT_ERROR, FailureKind.INFRA)


def run(ctx: StageContext, out: Findings) -> None:
    trace = ctx.clues.trace
    graph = ctx.graph(trace)
    sig = out.signature
    why = ("no generated wrapper to walk" if graph is None else
           "the trace stage did not reproduce the failure" if not trace.failures else
           "a launch never finished: the fault is not a wrong value" if ctx.clues.suspect else
           f"a {sig.kind} is not a wrong value" if sig and sig.kind.stops_the_process else None)
    if why:
        ctx.skip(StageName.EAGER, why)
        return
    stage = ctx.until_seen(Stage(StageName.EAGER, dict(flags.EAGER)))
    culprit, run, status = walk(ctx, stage, graph)
    ctx.clues.eager_walked = status in WALKED
    stage.finding = culprit.headline
    # A precision difference names where a rounding gap arises and convicts nothing: no entry on the ledger. A
    # conviction rounding may explain (a TF32 matmul) waits on the precision stage's control, which enters it.
    if culprit.kind is not CulpritKind.PRECISION and culprit.precision is None and culprit.pinned and \
            culprit.headline is not None:
        ctx.ledger.walked(StageName.EAGER, run, culprit)
    if not culprit.pinned and out.culprit is not None:
        if culprit.summary is None or out.culprit.pinned:
            out.culprit.evidence.extend(culprit.evidence)
            out.culprit.gaps = culprit.gaps
            return
        culprit.evidence.extend(out.culprit.evidence)  # the walk's account of the gap leads an earlier unknown
    out.culprit = culprit


def walk(ctx: StageContext, stage: Stage, graph: Optional[WrapperGraph] = None) -> tuple[Culprit, str, str]:
    """The walk over a stage's level-1 runs (this stage's, or the precision stage's control): the culprit, the run
    whose record it read (the first whose outputs differ from eager), and that record's status."""
    runs = stage.failures or stage.results
    walks = [ctx.evidence.eager_walk(r) for r in runs]
    seen = next((w for w in walks if w.status == "differs"), walks[0])
    compiled = ctx.graph(stage) or graph
    if compiled is None:
        return Culprit(CulpritKind.UNKNOWN), runs[walks.index(seen)].spec.name, "no wrapper"
    sources = SourceMap(ctx.evidence.kernel_information(compiled), {})
    culprit = walk_eager(compiled, seen, lambda l: sources.origin(l.name, l.handle, l.source_nodes).nodes,
                         ctx.namer)
    return culprit, runs[walks.index(seen)].spec.name, seen.status


def goes_first(ctx: StageContext, out: Findings) -> bool:
    """A wrong value (likely) goes before the inspect stage: this stage's walk compares every tensor the package
    saved on the failing call with eager, so level 2's view of a few of them (a NaN, an index past a bound) adds
    nothing where it ran, and the inspect stage then runs only if it could not."""
    return out.culprit is None and ctx.clues.named is None and likely(out.signature)


# What the walk's outcome says of its run: it compared the failing call's tensors (the inspect stage need not look).
WALKED = ("differs", "agree")
# Once a crash or the checker named the kernel, the walk after the verdict reads its inputs: comparing every tensor
# with eager would only find the values that kernel's fault left (a stray store's victim), not who made them.
RUNG = Rung(StageName.EAGER, run, refinds=True)
# The same stage ahead of the inspect stage, where goes_first says so; the ladder then passes over RUNG, as it ran.
FIRST = Rung(StageName.EAGER, run, applies=goes_first, requestable=False)
