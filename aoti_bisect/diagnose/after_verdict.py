"""The baseline's rate after the verdict: it runs on until its 95% interval is narrow (docs/ladder.md, "An honest
rate after the verdict"), bounded by runs and by the --budget seconds. Pure: it runs through the `extend` it is
handed and reads the `clock` it is handed."""
from __future__ import annotations

from collections.abc import Callable

from ..run.types import RunResult
from ..stats import Rate
from ..verdict import Verdict
from .context import Options
from .facts import FactKind, fact, joined
from .findings import Findings, Stage, dominant
from .stages import baseline

# The baseline's rate runs on until its 95% interval is this narrow on either side (or the budget or --max-runs ends
# it): 10 runs for a failure that fails every time, about 40 for one that fails half the time.
HONEST_HALF_WIDTH = 0.15
HONEST_MIN_RUNS = 10  # 9/9 is already within ±15 points; "10/10" is what a reader takes for "every run"
# The rate after the verdict may take up to this many times --max-runs: a failure of about half the runs needs about
# 40 runs for ±15 points, and 20 leave a coin-flip failure's interval as wide as 11%-47% or 53%-89% (bench/flaky.py).
HONEST_RUNS_FACTOR = 2

Extend = Callable[[Stage, int, Callable[[list[RunResult]], bool]], Stage]


def honest(results: list[RunResult]) -> bool:
    lo, hi = Rate(sum(r.failed for r in results), len(results)).ci95
    return len(results) >= HONEST_MIN_RUNS and (hi - lo) / 2 <= HONEST_HALF_WIDTH


def runs_left(out: Findings, base: Stage, opt: Options, rate_left: int) -> int:
    """Baseline runs the rate may still take after the verdict: an adaptive baseline's up to twice --max-runs (its
    stopping rule, a checker or a crash may have ended it at a wide interval), an explicit --runs' remainder
    (`rate_left`)."""
    if out.interrupted or out.verdict is not Verdict.REPRODUCED or opt.budget <= 0:
        return 0
    if opt.runs is not None:
        return rate_left
    if not base.rate.failures and out.culprit is None:
        return 0
    return max(0, HONEST_RUNS_FACTOR * opt.max_runs - len(base.results)) if not honest(base.results) else 0


def run_on(out: Findings, base: Stage, left: int, budget: float, clock: Callable[[], float], extend: Extend) -> None:
    """The baseline runs on after the verdict until its rate's 95% interval is within HONEST_HALF_WIDTH, bounded by
    `left` runs and `budget` seconds: a maintainer reads 20/20 or 10/20, not 2/2 (34%-100%)."""
    if not left:
        return
    deadline = clock() + budget
    before = base.rate
    extend(base, left, lambda rs: clock() > deadline or honest(rs))
    out.baseline = base.rate
    out.signature = out.signature or dominant(base.results)
    if out.culprit is not None and not base.rate.failures:
        out.masked = fact(FactKind.CHECKER, "passes at baseline ({base}); {found}", base=base.rate.describe(),
                          found=out.culprit.headline)
        out.summary = out.masked
    why = (f"its 95% interval is within ±{HONEST_HALF_WIDTH * 100:.0f} points" if honest(base.results)
           else f"the budget of {budget:.0f} s ran out" if clock() > deadline
           else f"its {base.rate.runs} runs are all the rate may take (twice --max-runs, or --runs)")
    base.finding = joined(base.finding, fact(
        FactKind.REPRODUCTION, "the rate ran on after the verdict: {now} ({more} more run(s); stopped because "
        "{why})", now=base.rate.describe(), more=base.rate.runs - before.runs, why=why),
        baseline.check_reuse(base))
