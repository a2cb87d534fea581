"""Parsers for AOTI's intermediate value printer output (levels 2 and 3): pure, line-streaming."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Iterable, Iterator, Optional

_LAUNCH = re.compile(r"^\[ (?P<when>before|after)_launch: (?P<kernel>[^\]\s]+) \]\s*$")
# The header may follow a scalar's text on the same line: scalars are printed with a literal "\n".
_BLOCK = re.compile(r"\[  (?P<label>(?:before|after)_launch - \S+ - [^\]\s:]+|aoti_model_inputs - [^\]\s]+)  \]:")
_SCALAR = re.compile(r"\[  (?P<when>before|after)_launch - (?P<kernel>\S+) - (?P<arg>[^\]\s:]+): (?P<value>-?\d+)  \]")
_FIELD = re.compile(r"^(Number of elements|Dtype|Mean value|Min value|Max value|Device|Size|Stride): (.*)$")


@dataclass(frozen=True)
class TraceEvent:
    kernel: str
    finished: bool


@dataclass(frozen=True)
class Trace:
    launches: tuple[TraceEvent, ...]

    @property
    def unfinished(self) -> Optional[str]:
        """The faulting kernel: the last launch that never printed its after_launch."""
        if self.launches and not self.launches[-1].finished:
            return self.launches[-1].kernel
        return None

    @property
    def last_finished(self) -> Optional[str]:
        return self.launches[-1].kernel if self.launches and self.launches[-1].finished else None

    @property
    def kernels(self) -> list[str]:
        """Distinct kernels in first-launch order."""
        seen: dict[str, None] = {}
        for launch in self.launches:
            seen.setdefault(launch.kernel)
        return list(seen)


def parse_trace(lines: Iterable[str]) -> Trace:
    """Level 3: `[ before_launch: K ]` / `[ after_launch: K ]` pairs, in order."""
    launches: list[TraceEvent] = []
    for line in lines:
        m = _LAUNCH.match(line.rstrip("\n"))
        if not m:
            continue
        if m["when"] == "before":
            launches.append(TraceEvent(m["kernel"], False))
        elif launches and launches[-1].kernel == m["kernel"] and not launches[-1].finished:
            launches[-1] = TraceEvent(m["kernel"], True)
    return Trace(tuple(launches))


@dataclass(frozen=True)
class TensorStats:
    when: str  # before_launch | after_launch | input
    kernel: str  # "" for model inputs
    arg: str
    numel: int = 0
    dtype: str = ""
    mean: float = math.nan
    min: float = math.nan
    max: float = math.nan
    size: str = ""
    stride: str = ""
    device: str = ""
    scalar: Optional[int] = None

    @property
    def is_float(self) -> bool:
        return any(t in self.dtype for t in ("float", "half", "double", "bfloat"))

    @property
    def non_finite(self) -> bool:
        """NaN/Inf anywhere: a NaN or Inf element always poisons the mean, min or max."""
        if self.scalar is not None or self.numel == 0 or not self.is_float:
            return False
        return any(math.isnan(v) or math.isinf(v) for v in (self.mean, self.min, self.max))

    def out_of_range(self, bound: Optional[int]) -> bool:
        """An integer tensor holding values outside [-bound, bound): a suspect index."""
        if bound is None or self.is_float or self.scalar is not None or self.numel == 0:
            return False
        return self.min < -bound or self.max >= bound

    def describe(self) -> str:
        if self.scalar is not None:
            return f"{self.arg} = {self.scalar}"
        return (f"{self.arg}: {self.dtype} size {self.size} stride {self.stride} "
                f"min {_fmt(self.min)} max {_fmt(self.max)} mean {_fmt(self.mean)}")

    def to_json(self) -> dict:
        if self.scalar is not None:
            return {"arg": self.arg, "when": self.when, "scalar": self.scalar}
        return {"arg": self.arg, "when": self.when, "dtype": self.dtype, "size": self.size, "stride": self.stride,
                "numel": self.numel, "min": _fmt(self.min), "max": _fmt(self.max), "mean": _fmt(self.mean),
                "device": self.device}


def _fmt(v: float) -> str:
    if math.isnan(v):
        return "nan"
    return f"{v:.6g}"


def _num(text: str) -> float:
    try:
        return float(text.strip())
    except ValueError:
        return math.nan


def _label(label: str) -> tuple[str, str, str]:
    parts = [p.strip() for p in label.split(" - ")]
    if parts[0] == "aoti_model_inputs":
        return "input", "", parts[1]
    return parts[0], parts[1], parts[2]


def parse_blocks(lines: Iterable[str]) -> Iterator[TensorStats]:
    """Level 2: one TensorStats per printed tensor or scalar, streamed (values themselves are skipped)."""
    current: Optional[dict] = None

    def flush() -> Optional[TensorStats]:
        if current is None or "numel" not in current:
            return None
        return TensorStats(**current)

    for line in lines:
        for m in _SCALAR.finditer(line):
            yield TensorStats(m["when"], m["kernel"], m["arg"], scalar=int(m["value"]))
        header = _BLOCK.search(line)
        if header:
            done = flush()
            if done:
                yield done
            when, kernel, arg = _label(header["label"])
            current = {"when": when, "kernel": kernel, "arg": arg}
            continue
        if current is None:
            continue
        f = _FIELD.match(line.strip())
        if not f:
            continue
        key, value = f.group(1), f.group(2).strip()
        if key == "Number of elements":
            current["numel"] = int(_num(value)) if not math.isnan(_num(value)) else 0
        elif key == "Dtype":
            current["dtype"] = value
        elif key == "Mean value":
            current["mean"] = _num(value)
        elif key == "Min value":
            current["min"] = _num(value)
        elif key == "Max value":
            current["max"] = _num(value)
        elif key == "Device":
            current["device"] = value
        elif key == "Size":
            current["size"] = value
        elif key == "Stride":
            current["stride"] = value
            done = flush()
            if done:
                yield done
            current = None
    done = flush()
    if done:
        yield done


@dataclass
class KernelView:
    """Everything level 2 showed about one kernel: before/after stats per argument (first and worst kept)."""

    kernel: str
    before: dict[str, TensorStats]
    after: dict[str, TensorStats]


def collect(stats: Iterable[TensorStats], bound: Optional[int] = None) -> tuple[dict[str, KernelView], dict[str, TensorStats]]:
    """Fold a block stream into per-kernel views and model-input stats.

    A kernel launched many times (a script that runs its model in a loop) keeps, per argument, the first
    bad observation if any was bad, else the first one: a flaky bad value must not be averaged away.
    """
    views: dict[str, KernelView] = {}
    inputs: dict[str, TensorStats] = {}

    def keep(table: dict[str, TensorStats], s: TensorStats) -> None:
        old = table.get(s.arg)
        if old is None or (not is_bad(old, bound) and is_bad(s, bound)):
            table[s.arg] = s

    for s in stats:
        if s.when == "input":
            keep(inputs, s)
            continue
        view = views.setdefault(s.kernel, KernelView(s.kernel, {}, {}))
        keep(view.before if s.when == "before_launch" else view.after, s)
    return views, inputs


def is_bad(s: TensorStats, bound: Optional[int]) -> bool:
    return s.non_finite or s.out_of_range(bound)
