"""Rates and the run counts derived from them."""
import pytest

from aoti_bisect.stats import (
    Rate,
    baseline_should_stop,
    fisher_exact,
    runs_to_observe,
    wilson,
)


def test_wilson_known_values():
    lo, hi = wilson(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.2775, abs=1e-3)
    lo, hi = wilson(5, 10)
    assert (lo, hi) == (pytest.approx(0.2366, abs=1e-3), pytest.approx(0.7634, abs=1e-3))
    assert wilson(0, 0) == (0.0, 1.0)


def test_describe_says_upper_bound_when_nothing_failed():
    assert Rate(0, 10).describe() == "0/10 (95% upper bound 28%)"


def test_runs_to_observe():
    assert runs_to_observe(1.0) == 1
    assert runs_to_observe(0.5) == 5  # 0.5**5 < 0.05
    assert runs_to_observe(0.1, cap=10) == 10


def test_fisher_exact():
    assert fisher_exact(5, 10, 5, 10) == pytest.approx(1.0)
    assert fisher_exact(1, 20, 15, 20) < 0.001


@pytest.mark.parametrize("k, n, stop", [(1, 1, False), (2, 2, True), (0, 2, False), (0, 10, True),
                                        (3, 5, False), (5, 10, True)])
def test_adaptive_baseline(k, n, stop):
    assert baseline_should_stop(k, n, 2, 10) is stop
