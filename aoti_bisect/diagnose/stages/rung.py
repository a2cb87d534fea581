"""What a stage declares: its name, when it applies, and how it runs. One module per stage registers one Rung."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from ..findings import CulpritKind, Findings, StageName

if TYPE_CHECKING:  # the ladder hands itself in: run helpers, evidence, clues
    from ..ladder import Ladder


@dataclass(frozen=True)
class Rung:
    name: StageName
    run: Callable[["Ladder", Findings], None]  # runs its runs and records what they show in the findings
    applies: Callable[["Ladder", Findings], bool] = lambda ladder, out: True  # False: no entry in the report
    runtime: bool = True  # needs kernels to run: skipped for failures in the export, compile or load phase
    requestable: bool = True  # offered by --stages
    after: frozenset[CulpritKind] = frozenset()  # pinned culprits it still runs after (a wrong fake explains them)
    # Only finds the faulting kernel again: skipped once a crashed run named it (Clues.crash).
    refinds: bool = False
