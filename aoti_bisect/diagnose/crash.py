"""What a crashed run's own account of its fault convicts (run/witness.py reads it from the run): the kernel, custom
op or native function it faulted in, mapped to the wrapper's launch as a memory checker's access is
(diagnose/memcheck.py). One crash is enough: the stages that would only find the same kernel again (the trace, the
determinism stage's rate comparison) have nothing left to say."""
from __future__ import annotations

from collections import Counter
from typing import Optional

from ..aoti.wrapper import WrapperGraph, generated
from ..run.types import RunResult
from .facts import FactKind, fact
from .findings import Culprit, CulpritKind
from .memcheck import convict_function


def crash_culprit(results: list[RunResult], graph: Optional[WrapperGraph]) -> Optional[Culprit]:
    """The culprit the crashed runs name, when any could tell where it faulted; the site most of them name."""
    # A crash while exporting, compiling or loading is the load doctor's: no kernel of the model ran.
    crashed = [r for r in results if r.failed and r.crash is not None
               and not (r.signature and r.signature.phase in ("export", "compile", "load"))]
    # The driver's dump names the kernel that faulted; a host stack of the same failure (an abort as the CUDA error
    # unwinds) only where it was reported.
    crashed = [r for r in crashed if r.crash.on_device] or crashed
    if not crashed:
        return None
    counts = Counter(r.crash.function for r in crashed)
    function, count = counts.most_common(1)[0]
    site = next(r.crash for r in crashed if r.crash.function == function)
    evidence = [fact(FactKind.CRASH, "{n}/{of} crashed run(s) faulted in {site}, by the run's own {source}",
                     n=count, of=len(crashed), site=site.describe(), source=site.source)]
    if len(counts) > 1:
        evidence.append(fact(FactKind.CRASH, "other crashed runs faulted in {others:, }",
                             others=tuple(f for f in counts if f != function)))
    if graph is None and not site.on_device and not generated(_bare(function)):
        culprit = Culprit(CulpritKind.OUTSIDE_INSTRUMENTED_KERNELS, kernel=function, evidence=evidence)
    else:
        culprit = convict_function(_bare(function), graph, None, evidence, FactKind.CRASH)
    culprit.summary = culprit.evidence[0]
    return culprit


def _bare(function: str) -> str:
    """A kernel's name as the wrapper launches it: without a C++ signature or an OpenMP outlining suffix."""
    return function.split("(", 1)[0].split("._omp_fn", 1)[0] if generated(function) else function
