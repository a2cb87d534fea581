"""The sanity stage: the runtime's input check and Inductor's NaN asserts (AOTI_RUNTIME_CHECK_INPUTS,
TORCHINDUCTOR_NAN_ASSERTS)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ...aoti import flags
from ..facts import FactKind, fact
from ..findings import Findings, Stage, StageName
from ..sanity import sanity_culprit
from .rung import Rung

if TYPE_CHECKING:
    from ..ladder import Ladder


def run(ladder: "Ladder", out: Findings) -> None:
    stage = ladder.until_seen(Stage(StageName.SANITY, dict(flags.SANITY)))
    graph = ladder.graph(stage)
    for r in stage.failures:
        hit = ladder.evidence.sanity(r)
        if hit is not None:
            out.culprit, stage.finding = sanity_culprit(hit, graph, ladder.namer)
            return
    stage.finding = (fact(FactKind.NOTE, "no input or NaN check fired ({rate} failed as before)",
                          rate=stage.rate.describe()) if stage.rate.failures else
                     fact(FactKind.NOTE, "not reproduced under these flags: {rate}", rate=stage.rate.describe()))


RUNG = Rung(StageName.SANITY, run, refinds=True)
