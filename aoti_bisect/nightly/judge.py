"""Change detection: tonight's rate and signatures against a repro's earlier nights, by a statistical test."""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Optional

from ..stats import Rate, fisher_exact
from .history import Baseline


class Change(str, enum.Enum):
    WORSE = "worse"
    BETTER = "better"
    UNCHANGED = "unchanged"
    FIRST_NIGHT = "first_night"
    NO_DATA = "no_data"


@dataclass(frozen=True)
class Verdict:
    change: Change
    text: str
    p_value: Optional[float] = None
    new_signatures: tuple[str, ...] = ()

    def to_json(self) -> dict:
        return {"change": self.change.value, "text": self.text,
                "p_value": None if self.p_value is None else round(self.p_value, 6),
                "new_signatures": list(self.new_signatures)}


def _pct(rate: Rate) -> str:
    return f"{rate.value:.0%}"


def _p(p: float) -> str:
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def judge(now: Rate, before: Optional[Baseline], new_signatures: tuple[str, ...], alpha: float) -> Verdict:
    """A rate change counts only when Fisher's exact test rejects "same rate" at `alpha` (two-sided); a
    failure signature never seen on this repro before is news on its own, whatever the rate does."""
    if now.runs == 0:
        return Verdict(Change.NO_DATA, "no runs counted (all skipped or infrastructure errors)")
    if before is None or before.rate.runs == 0:
        return Verdict(Change.FIRST_NIGHT, f"first night: {now.describe()}")
    nights = f"{before.nights} night{'s' if before.nights > 1 else ''}"
    p = fisher_exact(now.failures, now.runs, before.rate.failures, before.rate.runs)
    rate = f"{_pct(now)} ({now.failures}/{now.runs}; was {_pct(before.rate)}, " \
           f"{before.rate.failures}/{before.rate.runs} over {nights}; {_p(p)})"
    if p >= alpha:
        change, text = Change.UNCHANGED, f"unchanged at {rate}"
    elif now.value > before.rate.value:
        change, text = Change.WORSE, f"now reproduces at {rate}"
    elif now.failures == 0:
        change, text = Change.BETTER, f"no longer reproduces in {now.runs} runs (95% upper bound " \
                                      f"{now.ci95[1]:.0%}; was {_pct(before.rate)}, {_p(p)})"
    else:
        change, text = Change.BETTER, f"now reproduces at only {rate}"
    if new_signatures:
        change = Change.WORSE
        text += f"; new signature{'s' if len(new_signatures) > 1 else ''}: {', '.join(new_signatures)}"
    return Verdict(change, text, p, new_signatures)
