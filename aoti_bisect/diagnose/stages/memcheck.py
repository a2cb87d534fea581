"""The memcheck stage: the repro under a memory checker (compute-sanitizer on CUDA, valgrind on CPU), which sees
an invalid access whether or not it crashed (diagnose/memcheck.py decides what its report convicts)."""
from __future__ import annotations

from typing import Optional

from ...aoti import flags
from ...aoti.sanitizer import SanitizerReport
from ...aoti.wrapper import WrapperGraph
from ...failure import MEMORY_FAULTS
from ...run.checkers import Checker, Missing
from ...run.types import RunResult
from ..context import StageContext
from ..findings import Culprit, CulpritKind, Entry, EvidenceKind, Findings, Stage, StageName
from ..memcheck import CheckerFinding, memcheck_culprit
from .rung import Rung

# Checked runs cost ten times a plain one: a few, stopping at the first that shows an error.
CHECKED_RUNS = 3


def run(ctx: StageContext, out: Findings, unmasking: bool = False) -> None:
    cuda = ctx.is_cuda(default=False)
    device = "cuda" if cuda else "cpu"
    checkers = dict(ctx.opt.checkers).get(device, Missing(device, f"no memory checker for {device} repros"))
    if isinstance(checkers, Missing):
        ctx.skip(StageName.MEMCHECK, checkers.why)
        return
    kind = out.signature.kind if out.signature else None
    # A failure that another stage's flags turned into a memory fault (blocking launches make a wrong output an
    # illegal access) is checked under those flags.
    turned = ctx.ledger.memory_fault() if kind not in MEMORY_FAULTS else None
    faulted = kind in MEMORY_FAULTS or turned is not None
    graph = ctx.any_graph()
    if not worth_checking(ctx, out, unmasking, faulted, graph if cuda else None):
        ctx.skip(StageName.MEMCHECK, f"a {kind} is not a memory fault; --sanitize runs the checker anyway")
        return
    under = next((dict(s.env) for s in ctx.stages if turned and s.name == turned.stage), {})
    for checker in checkers:
        stage, found, seen = checked_runs(ctx, checker, under, graph)
        if found.culprit is not None:
            convict(ctx, out, stage, found.culprit, seen, faulted, unmasking)
            return


def worth_checking(ctx: StageContext, out: Findings, unmasking: bool, faulted: bool,
                   cuda_graph: Optional[WrapperGraph]) -> bool:
    """Whether the checker runs: when un-masking, when asked (--sanitize), for a memory fault (the baseline's, or one
    another stage's flags turned it into), or where a CUDA repro's launch graph has kernels values cannot look into."""
    # On CUDA a user Triton kernel or custom op is where values cannot look (the printer wraps neither) and where a
    # stray store turns up as a wrong value, not a fault: compute-sanitizer costs about a plain run and sees it.
    pinned = out.culprit is not None and out.culprit.pinned
    unseen = cuda_graph.unwrapped() if cuda_graph is not None and not pinned else ()
    return bool(unmasking or ctx.opt.sanitize or faulted or unseen)


def checked_runs(ctx: StageContext, checker: Checker, under: dict[str, str],
                 graph: Optional[WrapperGraph]) -> tuple[Stage, CheckerFinding, Optional[RunResult]]:
    """The stage's runs under one checker (and the runtime flags in `under`), what their reports convict, and the first
    run whose report shows an error."""
    env = {**{k: v for k, v in under.items() if k in flags.RUNTIME}, **dict(checker.env)}
    if flags.needs_compile(env):
        # The checker's flag set is compiled by a plain run first, so the checked runs load it: a compile under
        # valgrind takes many times a plain one.
        ctx.compile_only(env)
    stage = Stage(StageName.MEMCHECK, env, tool=" ".join(checker.prefix))
    reports: dict[int, SanitizerReport] = {}

    def report(r: RunResult) -> SanitizerReport:
        if r.spec.index not in reports:
            reports[r.spec.index] = ctx.evidence.memcheck(r, checker.tool)
        return reports[r.spec.index]

    # A checker sees an invalid access whether or not it crashed, so a low crash rate does not matter.
    ctx.run_stage(stage, min(CHECKED_RUNS, ctx.opt.max_runs), lambda rs: any(report(r).errors for r in rs),
                  checker.prefix, checker.slowdown)
    found = memcheck_culprit([report(r) for r in stage.results], graph, ctx.clues.suspect)
    stage.finding = found.finding
    return stage, found, next((r for r in stage.results if report(r).errors), None)


def convict(ctx: StageContext, out: Findings, stage: Stage, culprit: Culprit, seen: Optional[RunResult],
            faulted: bool, unmasking: bool) -> None:
    """What a checker's error decides. One that names no kernel is a lead; one that does is a ledger entry, and either
    the walk's start (a fault's kernel), the named kernel a wrong value's walk reads, or the culprit."""
    if not culprit.pinned:
        # An error that names no kernel (a device assert stops in the runtime's __assertfail) is a lead, never a
        # verdict that stops the runs: the checked run's own printed assert names the kernel (judge.py).
        ctx.clues.checker = culprit.evidence
        return
    entry = Entry(EvidenceKind.CHECKER, str(stage.name), seen.spec.name, culprit.kernel, stage.finding)
    ctx.ledger.add(entry)
    culprit.convicted_by = (entry,)
    trace = ctx.clues.trace
    lead = out.culprit if out.culprit is not None and out.culprit.kind in LEADS else None
    # A fault's kernel is where the walk starts; a wrong value's stray access is itself the culprit (the walk reads
    # values, and the kernel that made the access is one the printer does not wrap).
    walkable = culprit.kind == CulpritKind.KERNEL and not unmasking and lead is None
    if walkable and trace is not None and trace.failures and faulted:
        ctx.clues.suspect = culprit.kernel  # the walk reads its inputs; the checker's lines stay
        ctx.clues.checker = culprit.evidence
    elif walkable and not faulted and ctx.opt.asked(StageName.INSPECT):
        # The access convicts, as a crash's account does; the walk after the verdict reads the kernel's inputs for
        # the operand that carried the stray address (an index past every dimension).
        ctx.clues.named, ctx.clues.suspect, ctx.clues.checker = culprit, culprit.kernel, culprit.evidence
    else:
        out.culprit = culprit  # the checker saw the access: it outweighs the trace's inference
        if lead is not None:
            out.culprit.evidence.extend(lead.evidence)


def goes_first(ctx: StageContext, out: Findings) -> bool:
    """A flaky memory fault whose checker costs less than waiting for crashes (StageContext.check_first): the checker
    sees the access in any run, crashed or not, so it goes before the stages that wait for a crash."""
    return out.culprit is None and ctx.clues.named is None and ctx.check_first(ctx.stages[0].results)


# The trace's "outside the instrumented kernels" is inferred from launches that finished, not seen: a user kernel or
# custom op the printer does not wrap may have made the access, and the checker sees which.
LEADS = frozenset({CulpritKind.OUTSIDE_INSTRUMENTED_KERNELS})
RUNG = Rung(StageName.MEMCHECK, run, refinds=True, leads=LEADS)
# The same stage ahead of the others, where goes_first says so; the ladder then passes over RUNG, as it ran.
FIRST = Rung(StageName.MEMCHECK, run, applies=goes_first, runtime=False, requestable=False)
