"""The memcheck stage: the repro under a memory checker (compute-sanitizer on CUDA, valgrind on CPU), which sees
an invalid access whether or not it crashed (diagnose/memcheck.py decides what its report convicts)."""
from __future__ import annotations

from ...aoti import flags
from ...failure import MEMORY_FAULTS
from ...run.checkers import Missing
from ...run.types import RunResult
from ..context import StageContext
from ..findings import CulpritKind, Entry, EvidenceKind, Findings, Stage, StageName
from ..memcheck import memcheck_culprit
from .rung import Rung

# Checked runs cost ten times a plain one: a few, stopping at the first that shows an error.
CHECKED_RUNS = 3


def run(ctx: StageContext, out: Findings, unmasking: bool = False) -> None:
    cuda = ctx.is_cuda(default=False)
    device = "cuda" if cuda else "cpu"
    checkers = dict(ctx.opt.checkers).get(device, Missing(device, f"no memory checker for {device} repros"))
    kind = out.signature.kind if out.signature else None
    if isinstance(checkers, Missing):
        ctx.skip(StageName.MEMCHECK, checkers.why)
        return
    # A failure that another stage's flags turned into a memory fault (blocking launches make a wrong output an
    # illegal access) is checked under those flags.
    turned = ctx.ledger.memory_fault() if kind not in MEMORY_FAULTS else None
    # On CUDA a user Triton kernel or custom op is where values cannot look (the printer wraps neither) and where a
    # stray store turns up as a wrong value, not a fault: compute-sanitizer costs about a plain run and sees it.
    graph = ctx.any_graph()
    unseen = graph.unwrapped() if graph is not None and cuda and not (out.culprit and out.culprit.pinned) else ()
    if not (unmasking or ctx.opt.sanitize or kind in MEMORY_FAULTS or turned or unseen):
        ctx.skip(StageName.MEMCHECK, f"a {kind} is not a memory fault; --sanitize runs the checker anyway")
        return
    under = next((dict(s.env) for s in ctx.stages if turned and s.name == turned.stage), {})
    for checker in checkers:
        env = {**{k: v for k, v in under.items() if k in flags.RUNTIME}, **dict(checker.env)}
        if flags.needs_compile(env):
            # The checker's flag set is compiled by a plain run first, so the checked runs load it: a compile under
            # valgrind takes many times a plain one.
            ctx.compile_only(env)
        stage = Stage(StageName.MEMCHECK, env, tool=" ".join(checker.prefix))
        reports: dict[int, object] = {}

        def report(r: RunResult, tool: str = checker.tool, reports: dict[int, object] = reports):
            if r.spec.index not in reports:
                reports[r.spec.index] = ctx.evidence.memcheck(r, tool)
            return reports[r.spec.index]

        # A checker sees an invalid access whether or not it crashed, so a low crash rate does not matter.
        ctx.run_stage(stage, min(CHECKED_RUNS, ctx.opt.max_runs), lambda rs: any(report(r).errors for r in rs),
                         checker.prefix, checker.slowdown)
        found = memcheck_culprit([report(r) for r in stage.results], graph, ctx.clues.suspect)
        stage.finding = found.finding
        if found.culprit is not None and not found.culprit.pinned:
            # An error that names no kernel (a device assert stops in the runtime's __assertfail) is a lead, never a
            # verdict that stops the runs: the checked run's own printed assert names the kernel (judge.py).
            ctx.clues.checker = found.culprit.evidence
            return
        if found.culprit is not None:
            seen = next(r for r in stage.results if report(r).errors)
            entry = Entry(EvidenceKind.CHECKER, str(stage.name), seen.spec.name, found.culprit.kernel, found.finding)
            ctx.ledger.add(entry)
            found.culprit.convicted_by = (entry,)
            trace = ctx.clues.trace
            lead = out.culprit if out.culprit is not None and out.culprit.kind in LEADS else None
            # A fault's kernel is where the walk starts; a wrong value's stray access is itself the culprit (the walk
            # reads values, and the kernel that made the access is one the printer does not wrap).
            faulted = kind in MEMORY_FAULTS or turned is not None
            walkable = found.culprit.kind == CulpritKind.KERNEL and not unmasking and lead is None
            if walkable and trace is not None and trace.failures and faulted:
                ctx.clues.suspect = found.culprit.kernel  # the walk reads its inputs; the checker's lines stay
                ctx.clues.checker = found.culprit.evidence
            elif walkable and not faulted and ctx.opt.asked(StageName.INSPECT):
                # The access convicts, as a crash's account does; the walk after the verdict reads the kernel's
                # inputs for the operand that carried the stray address (an index past every dimension).
                ctx.clues.named, ctx.clues.suspect, ctx.clues.checker = (found.culprit, found.culprit.kernel,
                                                                         found.culprit.evidence)
            else:
                out.culprit = found.culprit  # the checker saw the access: it outweighs the trace's inference
                if lead is not None:
                    out.culprit.evidence.extend(lead.evidence)
            return


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
