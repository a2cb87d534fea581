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


def _whole(env: dict[str, str], name: str, default: Optional[int] = None) -> int:
    text = env.get(name)
    if text is None and default is not None:
        return default
    try:
        return int(text)
    except (TypeError, ValueError):
        raise SetError(f"{name} must be a whole number, not {text!r}")


def slurm_shard(env: dict[str, str]) -> Optional[Shard]:
    """This Slurm array task's shard, or None outside an array.

    Slurm hands each task its id, not its position: `--array=5-9:2%1` gives ids 5, 7, 9 (MIN 5, STEP 2,
    COUNT 3), so the shard index is (ID - MIN) / STEP. A list array with uneven gaps (`--array=1,2,7`) has
    no such position and is refused."""
    if "SLURM_ARRAY_TASK_ID" not in env:
        return None
    task = _whole(env, "SLURM_ARRAY_TASK_ID")
    low = _whole(env, "SLURM_ARRAY_TASK_MIN", 0)
    step = _whole(env, "SLURM_ARRAY_TASK_STEP", 1)
    count = _whole(env, "SLURM_ARRAY_TASK_COUNT", 0)
    high = _whole(env, "SLURM_ARRAY_TASK_MAX", low + step * max(count - 1, 0))
    if step < 1:
        raise SetError(f"SLURM_ARRAY_TASK_STEP must be at least 1, not {step}")
    if (task - low) % step:
        raise SetError(f"Slurm array task {task} is not on the array's step ({low}, {low + step}, ...)")
    if count and (high - low) // step + 1 != count:
        raise SetError(f"an irregular Slurm array (ids {low}..{high} step {step}, but {count} tasks) has no "
                       "shard order; give --shard i/N")
    return Shard((task - low) // step, count)


def parse_shard(text: Optional[str], env: dict[str, str]) -> Shard:
    """`i/N`; or `N` with i from the scheduler; or, with no option, a Slurm array's own index and count."""
    slurm = slurm_shard(env)
    if text is None:
        if slurm is not None and slurm.count:
            return _checked(slurm.index, slurm.count)
        return Shard()
    m = re.fullmatch(r"(?:(\d+)/)?(\d+)", text.strip())
    if not m:
        raise SetError(f"--shard must be i/N or N, not {text!r}")
    count = int(m.group(2))
    if m.group(1) is not None:
        return _checked(int(m.group(1)), count)
    if slurm is not None:
        return _checked(slurm.index, count)
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
    # --sanitize: one run of each repro under its device's memory checker, by the shard holding run index 0.
    sanitize: bool = False
    sanitizer: Optional[str] = None  # compute-sanitizer to use (default: found as `aoti-bisect run` finds it)

    @property
    def checks_here(self) -> bool:
        """Whether this shard makes the night's checked runs: exactly one shard does, so each repro gets one."""
        return self.sanitize and 0 in self.shard.indices(self.runs)

    def enough(self, failures: int, runs: int) -> bool:
        if not self.until_confident or runs < self.min_runs:
            return False
        lo, hi = wilson(failures, runs)
        return hi - lo <= 2 * self.precision

    def to_json(self) -> dict:
        return {"runs": self.runs, "until_confident": self.until_confident, "precision": self.precision,
                "min_runs": self.min_runs, "timeout_s": self.timeout, "sanitize": self.sanitize}
