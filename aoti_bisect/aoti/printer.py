"""Parsers for AOTI's intermediate value printer output (levels 2 and 3): pure functions over text, streaming.

Reading a log file (in pieces, in parallel for big ones) is level2_file.py's job."""
from __future__ import annotations

import functools
import math
import re
import sys
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple, Optional

_LAUNCH = re.compile(r"^\[ (?P<when>before|after)_launch: (?P<kernel>[^\]\s]+) \]\s*$")
# The header may follow a scalar's text on the same line: scalars are printed with a literal "\n".
BLOCK_HEADER = re.compile(r"\[  (?:(?P<when>before_launch|after_launch) - (?P<kernel>\S+) - (?P<arg>[^\]\s:]+)"
                    r"|aoti_model_inputs - (?P<input>[^\]\s]+))  \]:")
_SCALAR = re.compile(r"\[  (?P<when>before|after)_launch - (?P<kernel>\S+) - (?P<arg>[^\]\s:]+): (?P<value>-?\d+)  \]")


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


class TensorStats(NamedTuple):
    """One printed tensor or scalar. A NamedTuple: as immutable as a frozen dataclass, and four times
    cheaper to build, which counts when a gigabyte log holds millions of blocks."""

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
        return _is_float_dtype(self.dtype)

    @property
    def dims(self) -> list[int]:
        """The printed size as numbers: `[5, 4]` -> [5, 4]."""
        return [int(d) for d in re.findall(r"\d+", self.size)]

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


@functools.cache
def _is_float_dtype(dtype: str) -> bool:
    return any(t in dtype for t in ("float", "half", "double", "bfloat"))


def _fmt(v: float) -> str:
    if math.isnan(v):
        return "nan"
    return f"{v:.6g}"


def _num(text: str) -> float:
    try:
        return float(text)  # float() itself ignores surrounding whitespace
    except ValueError:
        return math.nan


def _count(text: str) -> int:
    try:
        return int(text)  # the usual case, and cheaper than through float
    except ValueError:
        value = _num(text)
        return int(value) if math.isfinite(value) else 0


# The block's fields in print order: printed name -> (TensorStats field, parser).
_FIELDS: dict[str, tuple[str, Callable[[str], object]]] = {
    "Number of elements": ("numel", _count), "Dtype": ("dtype", str), "Mean value": ("mean", _num),
    "Min value": ("min", _num), "Max value": ("max", _num), "Device": ("device", str),
    "Size": ("size", str), "Stride": ("stride", str)}


# The fields as every capture prints them (CPU and CUDA, torch 2.11-2.13): read with one match per block.
_TRAILER = "\n".join(f"{name}: ([^\n]*)" for name in _FIELDS)
_TRAILER_RE = re.compile(_TRAILER)
# A whole regular block, from the line end before its header (a header after other text on its line is
# irregular, and one at a piece's start is read line by line) to its trailer's end: the header's groups, then the
# rest of the header line and the value lines, then the trailer's. The lazy value lines stop at a line that starts
# with a mark: a block without a trailer must not send the search on to a later block's trailer (rescanning the rest
# of the piece from each such one).
_WHOLE = re.compile(r"\n" + BLOCK_HEADER.pattern + r"(?P<values>[^\n]*\n(?:(?!\[  )[^\n]*\n)*?)" + _TRAILER)
_MARK = "[  "  # every header and scalar starts so; value and field lines never hold it


def parse_blocks(lines: Iterable[str]) -> Iterator[TensorStats]:
    """Level 2: one TensorStats per printed tensor or scalar, streamed (values themselves are skipped).

    `lines` may also be pieces of many lines, each ending at a line end (read_pieces): logs reach
    gigabytes, and in a piece a regular block is read by one regex match in C instead of a Python step
    per line. Anything irregular (scalars, stray field lines, a block cut by a piece's end) is read line
    by line; the result is the same as reading line by line.
    """
    block: Optional[dict] = None  # the fields so far of the block being read
    for text in lines:
        pos = 0  # text[:pos] has been read
        for whole in _WHOLE.finditer(text):
            start, end = whole.span()
            values, trailer = whole.span("values")
            # Irregular, so read line by line with the text before the next regular block: a ":" among the
            # values (a scalar, a header or a field line), or a mark among the fields (a scalar or a header).
            # A mark among the values is harmless: without a ":" it is neither. Both searches are cheap (":"
            # by memchr, the fields are short); searching the values for ": " and marks cost a tenth of the parse.
            if text.find(":", values, trailer) >= 0 or text.find(_MARK, trailer, end) >= 0:
                continue
            if block is not None or text.find(_MARK, pos, start) >= 0:
                block = yield from _read_lines(block, text[pos:start + 1])
                if block is not None and (done := _stats(block)):  # closed by this header
                    yield done
            g = whole.groups()
            yield _with_trailer("input", "", g[3], g[5:]) if g[3] else _with_trailer(g[0], g[1], g[2], g[5:])
            block, pos = None, end
        block = yield from _read_lines(block, text[pos:])
    if block is not None and (done := _stats(block)):
        yield done


def _read_lines(block: Optional[dict], text: str) -> Generator[TensorStats, None, Optional[dict]]:
    """Whole lines read one by one, but for the marker-free stretches between marks, which only an open
    block reads (in one go, by _read_body). Returns the block still open."""
    pos = 0
    while True:
        mark = text.find(_MARK, pos)
        start = len(text) if mark < 0 else max(pos, text.rfind("\n", pos, mark) + 1)
        if block is not None and text.find(": ", pos, start) >= 0:
            block, done = _read_body(block, text[pos:start])
            if done:
                yield done
        if mark < 0:
            return block
        end = text.find("\n", mark)
        end = len(text) if end < 0 else end
        line = text[start:end]
        pos = end + 1
        if ": " in line:  # a scalar (a header ends in "]:")
            for m in _SCALAR.finditer(line):
                yield TensorStats(m["when"], m["kernel"], m["arg"], scalar=int(m["value"]))
        header = BLOCK_HEADER.search(line)
        if header:
            if block is not None and (done := _stats(block)):
                yield done
            block = _opened(header)
        elif block is not None and ": " in line:
            block, done = _read_body(block, line)
            if done:
                yield done


def _opened(header: re.Match) -> dict:
    if header["input"]:
        return {"when": "input", "kernel": "", "arg": header["input"]}
    return {"when": header["when"], "kernel": header["kernel"], "arg": header["arg"]}


def _with_trailer(when: str, kernel: str, arg: str, trailer: tuple[str, ...]) -> TensorStats:
    """The trailer's groups set every field, so any read before it is overwritten."""
    numel, dtype, mean, low, high, device, size, stride = trailer
    # Positional, in TensorStats' field order: keywords cost a measurable share of a gigabyte's parse.
    try:  # int() and float() directly: what _count and _num return for every well-formed block, but cheaper
        return TensorStats(when, kernel, arg, int(numel), dtype.strip(), float(mean), float(low), float(high),
                           size.strip(), stride.strip(), device.strip())
    except ValueError:
        return TensorStats(when, kernel, arg, _count(numel), dtype.strip(), _num(mean), _num(low), _num(high),
                           size.strip(), stride.strip(), device.strip())


def _read_body(block: dict, text: str) -> tuple[Optional[dict], Optional[TensorStats]]:
    """Marker-free lines inside an open block: (the block if still open, else None; the stats it closed with)."""
    m = _TRAILER_RE.search(text)
    whole = m is not None and (m.start() == 0 or text[m.start() - 1] == "\n")
    before = text[:m.start()] if whole else text
    if ": " in before:
        for line in before.split("\n"):
            if ": " in line and _field(block, line):
                return None, _stats(block)
    if not whole:
        return block, None
    return None, _with_trailer(block["when"], block["kernel"], block["arg"], m.groups())


def _field(block: dict, line: str) -> bool:
    """Reads one field line into the block; True when it was the last field (Stride)."""
    key, _, value = line.strip().partition(": ")
    field = _FIELDS.get(key)
    if field is None:
        return False
    name, parse = field
    block[name] = parse(value.strip())
    return name == "stride"


def _stats(block: dict) -> Optional[TensorStats]:
    return TensorStats(**block) if "numel" in block else None


@dataclass
class KernelView:
    """Everything level 2 showed about one kernel: before/after stats per argument (first and worst kept)."""

    kernel: str
    before: dict[str, TensorStats]
    after: dict[str, TensorStats]


# What the level-2 printer showed: per-kernel views, and the model inputs' stats by name.
Observation = tuple[dict[str, KernelView], dict[str, TensorStats]]


def collect(stats: Iterable[TensorStats], bound: Optional[int] = None) -> Observation:
    """Fold a block stream into per-kernel views and model-input stats, of one call of the model (collect_call)."""
    return collect_call(stats, bound)[0]


def collect_call(stats: Iterable[TensorStats], bound: Optional[int] = None) -> tuple[Observation, bool]:
    """collect's views, and whether a value in them is bad.

    A script may call its model many times (a loop, a decoder feeding each output back in as the next input). The
    printer starts every call with the model's inputs, so an input seen again starts the next call. The views are
    those of the first call that showed a bad value, else of the first call: one call's inputs beside another's
    outputs would tell of good inputs that were never the bad output's, or of a bad input fed back from an output
    the walk must start at. A call is bad by what a launch left (after_launch) or the model was given: before its
    launch an output buffer holds whatever memory it was given (NaNs seen there on a call whose values were all
    finite). Within a call, a kernel launched many times keeps per argument the first bad observation if any was
    bad, else the first: a flaky bad value must not be averaged away.
    """
    first: Optional[Observation] = None
    views: dict[str, KernelView] = {}
    inputs: dict[str, TensorStats] = {}
    bad = False
    for s in stats:
        if s.when == "input":
            if s.arg in inputs:  # the next call
                if bad:
                    return (views, inputs), True
                first = first or (views, inputs)
                views, inputs = {}, {}
            table = inputs
        else:
            view = views.get(s.kernel)
            if view is None:  # not setdefault: that would build a KernelView for each of millions of blocks
                view = views[s.kernel] = KernelView(s.kernel, {}, {})
            table = view.before if s.when == "before_launch" else view.after
        old = table.get(s.arg)
        if old is None:
            table[s.arg] = _interned(s)
            bad = bad or (s.when != "before_launch" and is_bad(s, bound))
        # most observations are good, and then old need not be looked at
        elif is_bad(s, bound) and not is_bad(old, bound):
            table[s.arg] = _interned(s)
            bad = bad or s.when != "before_launch"
    if bad or first is None:
        return (views, inputs), bad
    return first, False


def _interned(s: TensorStats) -> TensorStats:
    """s with its strings interned. A big log's views keep tens of thousands of entries that repeat a few
    names, dtypes, devices and shapes; shared strings make them a third of the size, here and in the
    pickles that read_level2's workers send."""
    return TensorStats._make(sys.intern(v) if type(v) is str else v for v in s)


def is_bad(s: TensorStats, bound: Optional[int]) -> bool:
    """non_finite or out_of_range, in one step: collect asks this of every block of a gigabyte log."""
    if s.scalar is not None or not s.numel:
        return False
    if _is_float_dtype(s.dtype):
        return not (_isfinite(s.mean) and _isfinite(s.min) and _isfinite(s.max))
    return bound is not None and (s.min < -bound or s.max >= bound)


_isfinite = math.isfinite
