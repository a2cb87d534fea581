"""What a stage declares: its name, when it applies, and how it runs. One module per stage declares one Rung, and
the registry (stages/__init__.py) places it in the climb."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..context import StageContext
from ..findings import CulpritKind, Findings


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
