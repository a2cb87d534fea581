"""The memcheck stage: the repro under a memory checker (compute-sanitizer on CUDA, valgrind on CPU), which sees
an invalid access whether or not it crashed (diagnose/memcheck.py decides what its report convicts)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ...aoti import flags
from ...run.checkers import Missing
from ...run.types import RunResult
from ..findings import CulpritKind, Findings, Stage, StageName
from ..memcheck import MEMORY_FAULTS, memcheck_culprit
from .rung import Rung

if TYPE_CHECKING:
    from ..ladder import Ladder

# Checked runs cost ten times a plain one: a few, stopping at the first that shows an error.
CHECKED_RUNS = 3


def run(ladder: "Ladder", out: Findings, unmasking: bool = False) -> None:
    cuda = ladder.is_cuda(default=False)
    device = "cuda" if cuda else "cpu"
    checkers = dict(ladder.opt.checkers).get(device, Missing(device, f"no memory checker for {device} repros"))
    kind = out.signature.kind if out.signature else None
    if isinstance(checkers, Missing):
        ladder.skip(StageName.MEMCHECK, checkers.why)
        return
    if not (unmasking or ladder.opt.sanitize or kind in MEMORY_FAULTS):
        ladder.skip(StageName.MEMCHECK, f"a {kind} is not a memory fault; --sanitize runs the checker anyway")
        return
    for checker in checkers:
        if flags.needs_compile(dict(checker.env)):
            # The checker's flag set is compiled by a plain run first, so the checked runs load it: a compile under
            # valgrind takes many times a plain one.
            ladder.compile_only(dict(checker.env))
        stage = Stage(StageName.MEMCHECK, dict(checker.env), tool=" ".join(checker.prefix))
        reports: dict[int, object] = {}

        def report(r: RunResult, tool: str = checker.tool):
            if r.spec.index not in reports:
                reports[r.spec.index] = ladder.evidence.memcheck(r, tool)
            return reports[r.spec.index]

        # A checker sees an invalid access whether or not it crashed, so a low crash rate does not matter.
        ladder.run_stage(stage, min(CHECKED_RUNS, ladder.opt.max_runs), lambda rs: any(report(r).errors for r in rs),
                         checker.prefix, checker.slowdown)
        found = memcheck_culprit([report(r) for r in stage.results], ladder.any_graph(), ladder.clues.suspect)
        stage.finding = found.finding
        if found.culprit is not None:
            trace = ladder.clues.trace
            if found.culprit.kind == CulpritKind.KERNEL and trace is not None and trace.failures and not unmasking:
                ladder.clues.suspect = found.culprit.kernel  # the walk reads its inputs; the checker's lines stay
                ladder.clues.checker = found.culprit.evidence
            else:
                out.culprit = found.culprit
            return


RUNG = Rung(StageName.MEMCHECK, run, refinds=True)
