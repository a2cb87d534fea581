"""Pure search: delta debugging over a set of items, and a one-at-a-time simplification pass.

Nothing here runs a process or imports torch. The caller hands in `first_failing(candidates)`: it tests a batch
of candidates (in parallel, or from a cache) and returns the index of the first one in list order that still
fails the same way, or None. Taking the first in list order, not the first to finish, keeps the result the
same whatever the number of jobs.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Optional, TypeVar

T = TypeVar("T")


def _chunks(items: Sequence[T], n: int) -> list[tuple[T, ...]]:
    size, extra = divmod(len(items), n)
    out, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        out.append(tuple(items[start:end]))
        start = end
    return [c for c in out if c]


def ddmin(items: Sequence[T], first_failing: Callable[[list[tuple[T, ...]]], Optional[int]],
          stop: Callable[[], bool] = lambda: False) -> tuple[T, ...]:
    """Zeller's ddmin: a 1-minimal subsequence of items that still fails (items itself is taken to fail).

    Each round splits the current set into n chunks and tries every chunk, then every complement, as one batch;
    the first failing one wins. `stop()` true (budget spent) ends the search with the best set so far.
    """
    current, n = tuple(items), 2
    while len(current) >= 2 and not stop():
        chunks = _chunks(current, n)
        complements = [tuple(x for j, c in enumerate(chunks) if j != i for x in c) for i in range(len(chunks))]
        # With two chunks each complement is the other chunk: trying them twice would only cost runs.
        batch = chunks + (complements if len(chunks) > 2 else [])
        hit = first_failing(batch)
        if hit is not None and hit < len(chunks):
            current, n = batch[hit], 2
        elif hit is not None:
            current, n = batch[hit], max(n - 1, 2)
        elif n < len(current):
            n = min(2 * n, len(current))
        else:
            break
    return current


def simplify_each(items: Sequence[T], still_fails: Callable[[tuple[T, ...]], bool],
                  stop: Callable[[], bool] = lambda: False) -> tuple[T, ...]:
    """Greedy: for each item in order, keep it in the returned set when `still_fails(chosen + (item,))` holds.

    Used for simplifications that are independent yes/no choices per item (replace this input by a constant),
    where ddmin's splitting buys little and a simple pass is easier to read in the log.
    """
    chosen: tuple[T, ...] = ()
    for item in items:
        if stop():
            break
        if still_fails(chosen + (item,)):
            chosen += (item,)
    return chosen


def sequential(test: Callable[[T], bool]) -> Callable[[list[T]], Optional[int]]:
    """first_failing from a one-candidate test, trying them in order (the tests' and --jobs 1's form)."""
    def first_failing(batch: list[T]) -> Optional[int]:
        return next((i for i, c in enumerate(batch) if test(c)), None)
    return first_failing


def shrink_sizes(sizes: dict[str, tuple[int, ...]], first_failing: Callable[[list[dict]], Optional[int]],
                 stop: Callable[[], bool] = lambda: False) -> dict[str, tuple[int, ...]]:
    """Smaller shapes, one dimension at a time: try size 1, then half, keeping the first that still fails, and
    halve again from there. `first_failing` gets whole {name: shape} maps, smallest first."""
    current = dict(sizes)
    for name, shape in sizes.items():
        for dim in range(len(shape)):
            while not stop():
                n = current[name][dim]
                tries = sorted({1, n // 2} - {0, n})
                if not tries:
                    break
                options = [{**current, name: current[name][:dim] + (t,) + current[name][dim + 1:]} for t in tries]
                hit = first_failing(options)
                if hit is None:
                    break
                current = options[hit]
    return current
