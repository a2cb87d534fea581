"""What this host runs tonight: the Plan (how many runs, when to stop) and its Shard (which run indices)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from ..stats import wilson
from .sets import SetError


@dataclass(frozen=True)
class Shard:
    """Shard i of N runs the run indices i, i+N, i+2N, ... of every repro, so N shards together run exactly
    the indices one unsharded night runs (a repro seeded by its run index fails the same way in both)."""

    index: int = 0
    count: int = 1

    def indices(self, runs: int) -> range:
        return range(self.index, runs, self.count)

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: Optional[str], env: dict[str, str]) -> Shard:
    """`i/N`; or `N` with i from the scheduler; or, with no option, a Slurm array's own index and count."""
    slurm_id, slurm_count = env.get("SLURM_ARRAY_TASK_ID"), env.get("SLURM_ARRAY_TASK_COUNT")
    slurm_index = None
    if slurm_id is not None:
        slurm_index = int(slurm_id) - int(env.get("SLURM_ARRAY_TASK_MIN", "0"))
    if text is None:
        if slurm_index is not None and slurm_count:
            return _checked(slurm_index, int(slurm_count))
        return Shard()
    m = re.fullmatch(r"(?:(\d+)/)?(\d+)", text.strip())
    if not m:
        raise SetError(f"--shard must be i/N or N, not {text!r}")
    count = int(m.group(2))
    if m.group(1) is not None:
        return _checked(int(m.group(1)), count)
    if slurm_index is not None:
        return _checked(slurm_index, count)
    if env.get("JOB_COMPLETION_INDEX", "").isdigit():
        return _checked(int(env["JOB_COMPLETION_INDEX"]), count)
    raise SetError(f"--shard {text}: no shard index: give i/{count}, or run as a Slurm array task "
                   "(SLURM_ARRAY_TASK_ID) or a Kubernetes indexed job (JOB_COMPLETION_INDEX)")


def _checked(index: int, count: int) -> Shard:
    if count < 1 or not 0 <= index < count:
        raise SetError(f"shard {index}/{count} is out of range (0 <= i < N)")
    return Shard(index, count)


@dataclass(frozen=True)
class Plan:
    runs: int = 20
    until_confident: bool = False
    # --until-confident stops a repro once its 95% Wilson interval is at most 2 * precision wide.
    precision: float = 0.1
    min_runs: int = 10
    timeout: Optional[float] = None
    shard: Shard = Shard()

    def enough(self, failures: int, runs: int) -> bool:
        if not self.until_confident or runs < self.min_runs:
            return False
        lo, hi = wilson(failures, runs)
        return hi - lo <= 2 * self.precision

    def to_json(self) -> dict:
        return {"runs": self.runs, "until_confident": self.until_confident, "precision": self.precision,
                "min_runs": self.min_runs, "timeout_s": self.timeout}
