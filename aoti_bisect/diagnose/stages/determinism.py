"""The determinism stage (CUDA only): the caching allocator off and launches blocking; its rate against the
baseline's, by Fisher's exact test."""
from __future__ import annotations

from ...aoti import flags
from ...stats import fisher_exact
from ..context import StageContext
from ..facts import FactKind, fact, joined
from ..findings import Findings, Stage, StageName, dominant
from .rung import Rung


def run(ctx: StageContext, out: Findings) -> None:
    if not ctx.is_cuda():
        ctx.stages.append(Stage(StageName.DETERMINISM, dict(flags.DETERMINISM), skipped=(
            "CPU-only repro: no CUDA caching allocator and no asynchronous launches, so "
            "PYTORCH_NO_CUDA_MEMORY_CACHING and CUDA_LAUNCH_BLOCKING cannot change anything")))
        return
    base = ctx.stages[0].rate
    # It measures a rate to compare with the baseline's: as many runs, planned from the point estimate. A baseline
    # that failed every run leaves no rate to raise: one run says whether the flags keep the failure (the trace
    # then carries them, so its last launch is the faulting one). That run carries the trace's flags and the hook:
    # it takes the package compiled ahead for the trace (these flags are read at run time) instead of compiling
    # the user's way, which would cost a whole compile on the way to the verdict.
    if base.failures == base.runs:
        stage = ctx.run_stage(Stage(StageName.DETERMINISM, {**flags.DETERMINISM, **flags.TRACE}, hooked=True), 1)
    else:
        n = max(base.runs, ctx.repeat(base.value))
        # Its flags are read at run time, so its runs take the package the baseline's stored where the baseline's
        # runs that took it failed as the user's way did (baseline.check_reuse): ten compiles at once cost a
        # passing CUDA control 85 s on the way to its verdict.
        reuse_from = 0 if ctx.stages[0].reuse_from is not None else None
        stage = ctx.run_stage(Stage(StageName.DETERMINISM, dict(flags.DETERMINISM), reuse_from=reuse_from), n)
    now = stage.rate
    p = fisher_exact(base.failures, base.runs, now.failures, now.runs)
    sig = dominant(stage.results)
    parts = [fact(FactKind.REPRODUCTION, "{now} vs baseline {base} (Fisher p = {p:.3g})", now=now.describe(),
                  base=base.describe(), p=p)]
    if now.failures == now.runs and base.failures < base.runs:
        parts.append(fact(FactKind.REPRODUCTION, "the failure becomes deterministic under these flags"))
    if sig and out.signature and sig.kind != out.signature.kind:
        parts.append(fact(FactKind.REPRODUCTION, "the failure changes kind: {was} -> {now} ({message})",
                          was=out.signature.kind, now=sig.kind, message=sig.message))
    if now.failures == 0:
        parts.append(fact(FactKind.REPRODUCTION, "not reproduced under these flags"))
    stage.finding = joined(*parts)
    if now.failures:
        ctx.raise_estimate(now)


RUNG = Rung(StageName.DETERMINISM, run, refinds=True)
