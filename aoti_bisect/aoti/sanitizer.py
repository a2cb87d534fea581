"""Memory checkers' reports, parsed: compute-sanitizer on CUDA (its `========= ` lines), pure functions over text.

A checker's lines are mixed into the repro's own output in one log; only the checker's prefixed lines are read.
Every error is grouped with its twins (one per thread, often hundreds) under its kind, function and location.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class AccessError:
    """One distinct invalid access (or other checker finding), with how many times the checker printed it."""

    kind: str  # e.g. "Invalid __global__ read", "Invalid __global__ write", "Uninitialized __global__ memory read"
    function: Optional[str]  # the kernel (CUDA) or native function the access was made in
    location: Optional[str]  # source file:line the checker names
    size: Optional[int] = None  # bytes per access
    thread: Optional[str] = None  # the first printed occurrence's thread and block
    block: Optional[str] = None
    where: str = ""  # "out of bounds and is N bytes after the nearest allocation ... of size M bytes"
    count: int = 1

    def describe(self) -> str:
        parts = [f"{self.kind}" + (f" of size {self.size} bytes" if self.size else "")]
        if self.function:
            parts.append(f"in {self.function}" + (f" ({self.location})" if self.location else ""))
        if self.block or self.thread:
            parts.append(f"by thread ({self.thread}) in block ({self.block})")
        if self.where:
            parts.append(self.where)
        return " ".join(parts) + (f" [x{self.count}]" if self.count > 1 else "")


@dataclass(frozen=True)
class SanitizerReport:
    tool: str
    errors: tuple[AccessError, ...]  # distinct, first printed first
    total: Optional[int]  # from the checker's summary line; None when it printed none
    refused: Optional[str] = None  # the checker could not check this device or process, and said why

    @property
    def finished(self) -> bool:
        return self.total is not None

    @property
    def clean(self) -> bool:
        return self.total == 0 and not self.errors


_CS = "========= "
_CS_ERROR = re.compile(r"^(?P<kind>(?:Invalid|Uninitialized|Misaligned) [^\n]*?(?P<access>read|write|access)|"
                       r"Race reported[^\n]*|Program hit [^\n]*|Out-of-range [^\n]*|Warp assert)"
                       r"(?: of size (?P<size>\d+) bytes?)?\s*$")
_CS_AT = re.compile(r"^\s+at (?P<func>[^\s+]+)(?:\+0x[0-9a-f]+)?(?: in (?P<loc>\S+))?")
_CS_BY = re.compile(r"^\s+by thread \((?P<thread>[\d,]+)\) in block \((?P<block>[\d,]+)\)")
_CS_WHERE = re.compile(r"^\s+(?:Access to \S+ (?P<what>is .*)|(?P<more>and is .*))$")
_CS_SUMMARY = re.compile(r"^ERROR SUMMARY: (?P<n>\d+) errors?\s*$")
_CS_REFUSED = re.compile(r"^(?:Error: )?(?P<why>Device not supported.*|.*[Uu]nable to .*|Target application "
                         r"terminated before first instrumented API call.*)$")


def parse_compute_sanitizer(text: str) -> SanitizerReport:
    """compute-sanitizer's report (any tool: memcheck, racecheck, initcheck) from a log that also holds the
    repro's own output. Tested on captured memcheck output (tests/logs/cuda/compute-sanitizer-*.log)."""
    lines = [line[len(_CS):] for line in text.splitlines() if line.startswith(_CS.rstrip())]
    found: list[dict] = []
    total: Optional[int] = None
    refused: Optional[str] = None
    current: Optional[dict] = None
    for line in lines:
        if (m := _CS_ERROR.match(line)):
            current = {"kind": m["kind"].strip(), "size": int(m["size"]) if m["size"] else None, "where": []}
            found.append(current)
        elif current is not None and (m := _CS_AT.match(line)) and "function" not in current:
            # A device-side assert stops in the runtime's __assertfail, which names no kernel of the repro's.
            internal = m["func"].startswith("__")
            current["function"], current["location"] = (None, None) if internal else (m["func"], m["loc"])
        elif current is not None and (m := _CS_BY.match(line)) and "thread" not in current:
            current["thread"], current["block"] = m["thread"], m["block"]
        elif current is not None and (m := _CS_WHERE.match(line)):
            current["where"].append(m["what"] or m["more"])
        elif (m := _CS_SUMMARY.match(line)):
            total = int(m["n"]) if total is None else total
        elif (m := _CS_REFUSED.match(line)):
            refused = refused or m["why"].strip()
    return SanitizerReport("compute-sanitizer", _grouped(found), total, refused if total is None else None)


def _grouped(found: list[dict]) -> tuple[AccessError, ...]:
    keys = [(f["kind"], f.get("function"), f.get("location")) for f in found]
    counts = Counter(keys)
    first: dict[tuple, AccessError] = {}
    for key, f in zip(keys, found):
        if key not in first:
            first[key] = AccessError(f["kind"], f.get("function"), f.get("location"), f["size"], f.get("thread"),
                                     f.get("block"), " ".join(f["where"]), counts[key])
    return tuple(first.values())


PARSERS = {"compute-sanitizer": parse_compute_sanitizer}


def parse(tool: str, text: str) -> SanitizerReport:
    """The report of checker `tool` (a run.checkers.Checker's tool) in a run's log."""
    return PARSERS[tool](text)
