"""What a stage declares: its name, when it applies, and how it runs. One module per stage declares one Rung, and
the registry (stages/__init__.py) places it in the climb."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional

from ..context import Options, StageContext
from ..findings import Culprit, CulpritKind, Findings


@dataclass(frozen=True)
class Rung:
    name: str  # a StageName, or a new stage's own word (a stage no other code names needs no StageName)
    run: Callable[[StageContext, Findings], None]  # runs its runs and records what they show in the findings
    applies: Callable[[StageContext, Findings], bool] = lambda ctx, out: True  # False: no entry in the report
    runtime: bool = True  # needs kernels to run: skipped for failures in the export, compile or load phase
    requestable: bool = True  # offered by --stages
    after: frozenset[CulpritKind] = frozenset()  # pinned culprits it still runs after (a wrong fake explains them)
    # Only finds the faulting kernel again: skipped once a run's own evidence named it (Clues.named).
    refinds: bool = False
    # Culprits it still runs after where an earlier stage inferred them and no crash named them: leads to confirm.
    leads: frozenset[CulpritKind] = frozenset()

    def why_not(self, out: Findings, opt: Options, named: Optional[Culprit]) -> Optional[str]:
        """Why the ladder skips this rung, from its fields alone (None: it runs): the failure is before any kernel
        ran, --stages did not ask for it, the culprit is pinned, or a run's own evidence `named` the faulting kernel
        it would only find again."""
        sig = out.signature
        if self.runtime and sig is not None and sig.phase.before_run:
            return (f"the failure is in the {sig.phase} phase: no kernel runs, so the runtime ladder cannot "
                    "localise it")
        if self.requestable and not opt.asked(self.name):
            return "not requested (--stages)"
        c = out.culprit
        if c is not None and c.pinned and c.kind not in self.after and (c.kind not in self.leads or c.from_crash):
            if c.from_crash:
                return "culprit already pinned: the crashed run's own stack named where it faulted"
            return "culprit already pinned"
        if self.refinds and named is not None:
            return (f"{named.named_by} named the faulting kernel, {named.kernel}: this stage would only find it "
                    "again (the walk reads its inputs)")
        return None
