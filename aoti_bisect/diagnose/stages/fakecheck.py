"""The fakecheck stage: a custom op run through the proxy executor hands the package a tensor that the package
lays out by the op's fake function; checked against the real op on the failing call's inputs, a mismatch
convicts the op ahead of any kernel that reads its output."""
from __future__ import annotations

from ...aoti import flags
from ...aoti.fakecheck import no_mismatch
from ...failure import FailureKind
from ..context import StageContext
from ..facts import FactKind, fact, kernel, note
from ..findings import Culprit, CulpritKind, Findings, Stage, StageName
from .rung import Rung

# Culprits a wrong fake function explains: a kernel that reads the op's output by the fake's layout, or a
# fault the trace put after every instrumented launch. A custom op's fake check still runs after them.
FAKE_VICTIMS = frozenset({CulpritKind.KERNEL, CulpritKind.OUTSIDE_INSTRUMENTED_KERNELS})


def run(ctx: StageContext, out: Findings) -> None:
    if out.signature and out.signature.kind == FailureKind.TIMEOUT and out.culprit is not None and \
            "::" in (out.culprit.kernel or ""):
        # Checking the op runs it for real on the same inputs: it would hang again, for another timeout.
        ctx.skip(StageName.FAKECHECK, f"the run hangs inside {out.culprit.kernel}: checking its fake function "
                                         "would run it, and hang, again")
        return
    graph = ctx.any_graph()
    ops = sorted({launch.name for launch in graph.launches if "::" in launch.name}) if graph else []
    if not ops:
        ctx.skip(StageName.FAKECHECK, "no compiled wrapper to find custom ops in" if graph is None else
                    "no custom op runs through the proxy executor")
        return
    stage = Stage(StageName.FAKECHECK, dict(flags.FAKECHECK))
    if out.culprit is not None and out.culprit.from_crash:
        # The crash already named the op: a fake function's layout is checked on every call, crashing or not, so
        # one run asks it without waiting for another crash.
        ctx.run_stage(stage, 1)
    else:
        ctx.until_seen(stage)
    runs = stage.failures or stage.results
    checks = [ctx.evidence.fakecheck(r) for r in runs]
    hit = next((c for c in checks if c.mismatch), None)
    if hit is None:
        stage.finding = note(no_mismatch(checks) or f"no custom op was checked ({', '.join(ops)})")
        return
    lines = hit.conviction(bool(stage.failures))
    c = Culprit(CulpritKind.CUSTOM_OP, kernel=hit.mismatch.op,
                evidence=[fact(FactKind.FAKE, "{line}", line=lines[0], op=kernel(hit.mismatch.op)),
                          *(fact(FactKind.FAKE, "{line}", line=line) for line in lines[1:])])
    c.summary = c.evidence[0]
    was = out.culprit
    if was is not None and was.kind in FAKE_VICTIMS:
        c.evidence.append(fact(FactKind.FAKE, "the earlier stages' suspect, {kind}{who}: {said}", kind=was.kind.value,
                               who=f" {was.kernel}" if was.kernel else "", said=was.headline or ""))
    stage.finding = c.summary
    out.culprit = c


RUNG = Rung(StageName.FAKECHECK, run, after=FAKE_VICTIMS)
