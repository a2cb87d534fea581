"""Un-masking: a baseline that never failed is not yet a pass for a CUDA repro (or under --sanitize). An
out-of-bounds access the caching allocator masks reads other memory silently: the ladder climbs on when the
determinism flags make it fail, and concludes when only the memory checker sees it."""
from __future__ import annotations

from ...aoti import flags
from ...verdict import Verdict
from ..context import StageContext
from ..facts import FactKind, fact
from ..findings import Findings, StageName, dominant
from . import determinism, memcheck


def run(ctx: StageContext, out: Findings) -> bool:
    """True when the fault showed after all (the verdict is then `reproduced`)."""
    cuda = ctx.is_cuda(default=False)
    if not (cuda or ctx.opt.sanitize):
        return False
    if cuda and ctx.opt.asked(StageName.DETERMINISM):
        determinism.run(ctx, out)
        det = ctx.stages[-1]
        if det.rate.failures:
            out.verdict, out.signature = Verdict.REPRODUCED, dominant(det.results)
            out.masked = fact(FactKind.REPRODUCTION, "passes at baseline ({base}) but fails with {flags} ({rate})",
                              base=out.baseline.describe(), flags=", ".join(flags.DETERMINISM),
                              rate=det.rate.describe())
            out.summary = det.finding = out.masked
            ctx.clues.estimate = max(det.rate.ci95[0], 1e-9)
            ctx.clues.likely = det.rate.value
            return True
    if (not ctx.opt.asked(StageName.MEMCHECK) and not ctx.opt.sanitize) or ctx.ran(StageName.MEMCHECK):
        return False  # not asked for, or it checked already, after the baseline's first run, and found nothing
    memcheck.run(ctx, out, unmasking=True)
    if out.culprit is not None:  # the checker saw errors, whether or not it could name their kernel
        out.verdict = Verdict.REPRODUCED
        out.masked = fact(FactKind.CHECKER, "passes at baseline ({base}); {found}", base=out.baseline.describe(),
                          found=out.culprit.headline)
        out.summary = out.masked
        return True
    return False
