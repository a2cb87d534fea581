"""The constant values the in-process hook read from a loaded package (child/hook/constants.py), as records.

Pure. A damaged section becomes a `skipped` reason on its own load event; the rest of the record stands.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional


@dataclass(frozen=True)
class Stale:
    """The package's copy of a constant against the loading process's module at load: it changed after the build.
    `differ` 0 with a shape: the module's tensor has another shape or dtype now."""
    differ: int = 0
    max_abs_diff: Optional[float] = None
    index: tuple[int, ...] = ()
    package: Optional[float] = None  # the first differing element, as packaged and as the module holds it now
    module: Optional[float] = None
    shape: Optional[tuple[int, ...]] = None

    def to_json(self) -> dict:
        return {"differ": self.differ, "max_abs_diff": self.max_abs_diff, "index": list(self.index),
                "package": self.package, "module": self.module,
                "shape": list(self.shape) if self.shape is not None else None}


@dataclass(frozen=True)
class ConstantValue:
    """One constant: its FQN (None: folded by Inductor, no FQN), the wrapper's name, and what it holds."""
    fqn: Optional[str]
    placeholder: str
    dtype: Optional[str] = None
    shape: tuple[int, ...] = ()
    numel: int = 0
    nan: int = 0
    posinf: int = 0
    neginf: int = 0
    min: Optional[float] = None  # of the finite elements
    max: Optional[float] = None
    mean: Optional[float] = None
    skipped: Optional[str] = None
    negative: int = 0  # finite values outside an op's domain: how many, and the first one (index, value)
    zero: int = 0
    first_negative: Optional[tuple[tuple[int, ...], Optional[float]]] = None
    first_zero: Optional[tuple[tuple[int, ...], Optional[float]]] = None
    stale: Optional[Stale] = None  # None: equal to the module's, or no module to compare with
    first_max: Optional[tuple[tuple[int, ...], Optional[float]]] = None  # where the largest value first sits

    @property
    def bad(self) -> bool:
        return bool(self.nan or self.posinf or self.neginf)

    @property
    def label(self) -> str:
        return self.fqn or self.placeholder

    def holds(self) -> str:
        """'NaN (3 of 16 elements)', 'NaN (3) and +Inf (1) of 16 elements'; '' for a finite constant."""
        parts = [(n, word) for n, word in ((self.nan, "NaN"), (self.posinf, "+Inf"), (self.neginf, "-Inf")) if n]
        if not parts:
            return ""
        if len(parts) == 1:
            return f"{parts[0][1]} ({parts[0][0]} of {self.numel} elements)"
        return " and ".join(f"{word} ({n})" for n, word in parts) + f" of {self.numel} elements"

    def to_json(self) -> dict:
        return {"fqn": self.fqn, "wrapper": self.placeholder, "dtype": self.dtype, "shape": list(self.shape),
                "numel": self.numel, "nan": self.nan, "posinf": self.posinf, "neginf": self.neginf,
                "min": self.min, "max": self.max, "mean": self.mean, "skipped": self.skipped,
                "negative": self.negative, "zero": self.zero,
                "stale": self.stale.to_json() if self.stale else None}


@dataclass(frozen=True)
class ConstantValues:
    """What one load's read found: the package's wrapper .so member, its constants, or why none were read."""
    so: Optional[str] = None
    values: tuple[ConstantValue, ...] = ()
    skipped: Optional[str] = None
    left_out: int = 0  # constants past the hook's row limit
    # (FQN, how it differs) of each constant folded into the generated code whose module tensor changed since the
    # build: the hook kept the compiled value, since the package holds none to read.
    folded: tuple[tuple[str, Stale], ...] = ()


def _count(raw: dict, key: str) -> int:
    value = raw.get(key) or 0
    if not isinstance(value, int) or value < 0:
        raise ValueError(f"{key} is {value!r}")
    return value


def _element(raw: Any) -> Optional[tuple[tuple[int, ...], Optional[float]]]:
    if not raw:
        return None
    return tuple(int(i) for i in raw["index"]), raw.get("value")


def parse_value(raw: dict) -> ConstantValue:
    return ConstantValue(raw.get("fqn") or None, str(raw["name"]), raw.get("dtype"),
                         tuple(int(d) for d in raw.get("shape") or ()), _count(raw, "numel"), _count(raw, "nan"),
                         _count(raw, "posinf"), _count(raw, "neginf"), raw.get("min"), raw.get("max"),
                         raw.get("mean"), raw.get("skipped"), _count(raw, "negative"), _count(raw, "zero"),
                         _element(raw.get("first_negative")), _element(raw.get("first_zero")),
                         parse_stale(raw.get("stale")), _element(raw.get("first_max")))


def parse_stale(raw: Any) -> Optional[Stale]:
    if not raw:
        return None
    return Stale(_count(raw, "differ"), raw.get("max_abs_diff"), tuple(int(i) for i in raw.get("index") or ()),
                 raw.get("package"), raw.get("module"),
                 tuple(int(d) for d in raw["shape"]) if raw.get("shape") is not None else None)


def parse_values(raw: Any) -> Optional[ConstantValues]:
    """A load event's `constant_values` (None: the hook did not read them, e.g. an older hook or a failed load)."""
    if raw is None:
        return None
    try:
        return ConstantValues(raw.get("so"), tuple(parse_value(r) for r in raw.get("constants") or ()),
                              raw.get("skipped"), _count(raw, "left_out"),
                              tuple((str(r["fqn"]), parse_stale(r["stale"])) for r in raw.get("folded") or ()
                                    if r.get("stale")))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        return ConstantValues(skipped=f"the hook's constant values are damaged: {type(exc).__name__}: {exc}"[:300])
