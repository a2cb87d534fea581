"""Rates with honest intervals, and how many runs a rate demands."""
from __future__ import annotations

import math
from dataclasses import dataclass

Z95 = 1.959963984540054


@dataclass(frozen=True)
class Rate:
    failures: int
    runs: int

    @property
    def value(self) -> float:
        return self.failures / self.runs if self.runs else 0.0

    @property
    def ci95(self) -> tuple[float, float]:
        return wilson(self.failures, self.runs)

    def describe(self) -> str:
        lo, hi = self.ci95
        if self.runs == 0:
            return "no runs"
        if self.failures == 0:
            return f"0/{self.runs} (95% upper bound {hi:.0%})"
        return f"{self.failures}/{self.runs} = {self.value:.0%} (95% CI {lo:.0%}-{hi:.0%})"

    def to_json(self) -> dict:
        lo, hi = self.ci95
        return {"runs": self.runs, "failures": self.failures, "rate": round(self.value, 4),
                "ci95": [round(lo, 4), round(hi, 4)]}


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    if n == 0:
        return 0.0, 1.0
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def runs_to_observe(rate: float, miss_probability: float = 0.05, cap: int = 20) -> int:
    """Runs needed so that a failure of this rate shows at least once with 1 - miss_probability."""
    if rate >= 1.0:
        return 1
    if rate <= 0.0:
        return cap
    return max(1, min(cap, math.ceil(math.log(miss_probability) / math.log(1.0 - rate))))


def fisher_exact(k1: int, n1: int, k2: int, n2: int) -> float:
    """Two-sided p-value that two failure counts come from one rate."""
    total_k, total_n = k1 + k2, n1 + n2

    def prob(a: int) -> float:
        return math.comb(n1, a) * math.comb(n2, total_k - a) / math.comb(total_n, total_k)

    observed = prob(k1)
    lo, hi = max(0, total_k - n2), min(n1, total_k)
    return min(1.0, sum(p for a in range(lo, hi + 1) if (p := prob(a)) <= observed * (1 + 1e-9)))


# A baseline that has seen no failure stops here. At 10 runs a 30%-rate fault passed every run in 2.8% of
# bisections (seen in bench/flaky.py); at 20 a 10% fault passes them all 12% of the time (2 of 16 rare crashes did,
# docs/benchmarks.md), at 30 4.2%: a flaky fault of one run in ten is localised in about 96% of bisections.
DEFAULT_MAX_RUNS = 30


def baseline_should_stop(failures: int, runs: int, min_runs: int, max_runs: int) -> bool:
    """Adaptive baseline: a deterministic answer after min_runs, otherwise up to max_runs."""
    if runs < min_runs:
        return False
    if failures == runs:
        return True
    if runs >= max_runs:
        return True
    lo, hi = wilson(failures, runs)
    return failures > 0 and hi - lo <= 0.3
