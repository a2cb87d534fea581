"""The lines AOTI's own checks print, parsed: the input check, the NaN asserts, an index's bound. Pure."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

_INPUT_CHECK = re.compile(r"input_handles\[(?P<i>\d+)\]: (?P<what>[^\n]*)")
_NAN_ASSERT = re.compile(r"At least one (?P<what>NaN|INF) in (?P<var>\w+)")
# The bound runs to the message's end: a CPU raise ends the line, a Triton assert closes with a quote or backtick.
_INDEX_BOUND = re.compile(r"index out of bounds: 0 <= (?P<index>\w+) < (?P<bound>[^`\"'\n]+)")
_INT_LITERAL = re.compile(r"\b(\d+)L\b")
_DIM_CHECK = re.compile(
    r"dim value is too (?:small|large) at (?P<dim>\d+), expected (?:it )?to be (?P<op>>=|<=) (?P<n>-?\d+), "
    r"but got: (?P<got>-?\d+)|unmatched dim value at (?P<sdim>\d+), expected: (?P<sn>-?\d+), but got: (?P<sgot>-?\d+)")


@dataclass(frozen=True)
class InputRejected:
    """AOTI_RUNTIME_CHECK_INPUTS refused model input `index`."""

    index: int
    what: str


@dataclass(frozen=True)
class NanAssert:
    """TORCHINDUCTOR_NAN_ASSERTS found `what` (NaN or INF) in buffer `var`."""

    what: str
    var: str


def sanity_hit(text: str) -> Optional[InputRejected | NanAssert]:
    """The first check the sanity flags made fire in a run's log: the input check, else a NaN assert."""
    m = _INPUT_CHECK.search(text)
    if m:
        return InputRejected(int(m["i"]), m["what"].strip())
    m = _NAN_ASSERT.search(text)
    if m:
        return NanAssert(m["what"], m["var"])
    return None


@dataclass(frozen=True)
class IndexBound:
    """An `index out of bounds: 0 <= tmpN < B` check: B is a number fixed at export (`16`) or an
    expression of the kernel's size parameters (`ks0`), known only at run time."""

    index: str  # the kernel's temporary, tmpN
    bound: str  # as the check prints it, without C++'s L suffixes: "16", "ks0", "2*ks0"

    @property
    def value(self) -> Optional[int]:
        """The bound when it is a number (a symbolic bound's value is read from the run-time sizes)."""
        return int(self.bound) if self.bound.isdigit() else None

    @property
    def symbols(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(re.findall(r"\b[A-Za-z_]\w*\b", self.bound)))


@dataclass(frozen=True)
class DimRejected:
    """AOTI_RUNTIME_CHECK_INPUTS refused one dimension's size: `expected` is ">= 2", "<= 64" or "== 4"."""

    dim: int
    got: int
    expected: str


def index_bound(text: str) -> Optional[IndexBound]:
    """The first `index out of bounds: 0 <= tmpN < B` check in a message (CPU raise or Triton assert)."""
    m = _INDEX_BOUND.search(text)
    return IndexBound(m["index"], _INT_LITERAL.sub(r"\1", m["bound"]).strip()) if m else None


def dim_rejected(what: str) -> Optional[DimRejected]:
    """The dimension an input check's message names: `dim value is too small at 0, expected it to be >= 6,
    but got: 3` (a dynamic dimension outside its exported range) or `unmatched dim value at 1` (a static one)."""
    m = _DIM_CHECK.search(what)
    if not m:
        return None
    if m["dim"] is not None:
        return DimRejected(int(m["dim"]), int(m["got"]), f"{m['op']} {m['n']}")
    return DimRejected(int(m["sdim"]), int(m["sgot"]), f"== {m['sn']}")


# A temporary's definition in a generated kernel: C++ `auto tmp7 = c10::convert<int64_t>(tmp6);`, Triton
# `tmp7 = tmp6.to(tl.int64)`.
_TMP_DEF = re.compile(r"^\s*(?:auto\s+)?(?P<tmp>tmp\d+)\s*=\s*(?P<expr>[^;\n]*)", re.M)
_PARAM = re.compile(r"\b(in_ptr\d+|in_out_ptr\d+|ks\d+)\b")


def index_operands(source: str, bound: IndexBound) -> tuple[str, ...]:
    """The kernel parameters (`in_ptr2`) the checked index is computed from, read from the kernel's source:
    which tensor the index into this bound comes from, when the kernel reads several integer tensors (token ids
    for one table, positions for another). Each temporary's latest definition before its use is followed back;
    () when the check or its definitions are not in the source."""
    check = source.find(f"index out of bounds: 0 <= {bound.index} <")
    if check < 0:
        return ()
    defs = [(m.start(), m["tmp"], m["expr"]) for m in _TMP_DEF.finditer(source, 0, check)]
    found: dict[str, None] = {}
    todo, seen = [(bound.index, check)], set()
    while todo:
        tmp, at = todo.pop()
        if (tmp, at) in seen:
            continue
        seen.add((tmp, at))
        where = next(((pos, expr) for pos, name, expr in reversed(defs) if name == tmp and pos < at), None)
        if where is None:
            continue
        pos, expr = where
        found.update(dict.fromkeys(p for p in _PARAM.findall(expr) if not p.startswith("ks")))
        todo += [(t, pos) for t in re.findall(r"\btmp\d+\b", expr)]
    return tuple(found)
