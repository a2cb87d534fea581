"""Checks of the numbers every command takes: counts and time limits, with their bounds and why."""
from __future__ import annotations

import math
from typing import Optional

from .exits import UsageFailure

# Bounds on what one `run` may ask for. Runs: the ladder builds each stage's run list up front, and 10,000
# runs already see a 1-in-2,000 failure with 99% odds (runs_to_observe) at hours of wall time; 10^9 would be
# gigabytes of specs before the first run. Jobs: each one is a thread and a private compile cache.
MAX_RUNS = 10_000
MAX_JOBS = 1024


def check_count(name: str, value: Optional[int], high: int, low: int = 1) -> None:
    """The one check of a count option (`--runs`, `--jobs`, ...): every command shares it."""
    if value is not None and not low <= value <= high:
        raise UsageFailure(f"{name} must be at least {low}, got {value}" if value < low
                           else f"{name} must be at most {high}, got {value}")


def check_seconds(name: str, value: Optional[float]) -> None:
    """A time limit: NaN compares false with everything and inf never expires, so both would disable it."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise UsageFailure(f"{name} must be a finite number of seconds above 0, got {value}")


# Below this a run's time limit measures the interpreter's start-up (tens of milliseconds idle, seconds on a
# loaded machine or a cold disk), not the repro: a passing script became "reproduced: timeout".
MIN_TIMEOUT_S = 1.0


def check_timeout(name: str, value: Optional[float]) -> None:
    """A run's time limit: check_seconds, and at least MIN_TIMEOUT_S (a usage error, the same at every commit)."""
    check_seconds(name, value)
    if value is not None and value < MIN_TIMEOUT_S:
        raise UsageFailure(f"{name} must be at least {MIN_TIMEOUT_S:g} s (below it the interpreter's start-up "
                           f"decides the outcome, not the repro), got {value:g}")
