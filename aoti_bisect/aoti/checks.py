"""The lines AOTI's own checks print, parsed: the input check, the NaN asserts, an index's bound. Pure."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

_INPUT_CHECK = re.compile(r"input_handles\[(?P<i>\d+)\]: (?P<what>[^\n]*)")
_NAN_ASSERT = re.compile(r"At least one (?P<what>NaN|INF) in (?P<var>\w+)")
_INDEX_BOUND = re.compile(r"index out of bounds: 0 <= \w+ < (?P<bound>\d+)")


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


def index_bound(text: str) -> Optional[int]:
    """The numeric bound of an `index out of bounds: 0 <= tmpN < B` check (CPU raise or Triton assert)."""
    m = _INDEX_BOUND.search(text)
    return int(m["bound"]) if m else None
