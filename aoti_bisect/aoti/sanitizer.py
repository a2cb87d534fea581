"""Memory checkers' reports, parsed: compute-sanitizer on CUDA (its `========= ` lines) and valgrind's memcheck on
CPU (its `==PID== ` lines), pure functions over text; `parse(tool, text)` picks the parser by `Checker.tool`.

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

    kind: str  # e.g. "Invalid __global__ read", "Uninitialized __global__ memory read" (CUDA), "Invalid read" (CPU)
    function: Optional[str]  # the kernel (CUDA) or the innermost native function in op or kernel code (CPU)
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
                       r"(?: of size (?P<size>\d{1,18}) bytes?)?\s*$")
_CS_AT = re.compile(r"^\s+at (?P<func>[^\s+]+)(?:\+0x[0-9a-f]+)?(?: in (?P<loc>\S+))?")
_CS_BY = re.compile(r"^\s+by thread \((?P<thread>[\d,]+)\) in block \((?P<block>[\d,]+)\)")
_CS_WHERE = re.compile(r"^\s+(?:Access to \S+ (?P<what>is .*)|(?P<more>and is .*))$")
_CS_SUMMARY = re.compile(r"^ERROR SUMMARY: (?P<n>\d{1,18}) errors?\s*$")
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


_VG_LINE = re.compile(r"^==(?P<pid>\d+)== (?P<text>.*)$")
_VG_ERROR = re.compile(r"^(?P<kind>Invalid (?:read|write)|Invalid free\(\).*|Mismatched free\(\).*|"
                       r"Conditional jump or move depends on uninitialised value\(s\)|Use of uninitialised value|"
                       r"Syscall param .* points to (?:unaddressable|uninitialised) byte\(s\)|"
                       r"Source and destination overlap in .*|Argument .* has a fishy .*)"
                       r"(?: of size (?P<size>\d{1,18}))?\s*$")
_VG_FRAME = re.compile(r"^\s+(?:at|by) 0x[0-9A-Fa-f]+: (?P<func>.*?)"
                       r"(?: \((?:in (?P<obj>[^()]+)|(?P<loc>[^()\s]+:\d+))\))?\s*$")
# Where the bad address lies ("0 bytes after a block of size 32,768 alloc'd"); the stacks after it are the
# block's allocation or free, not the access.
_VG_WHERE = re.compile(r"^\s+Address 0x[0-9A-Fa-f]+ (?P<where>is .*)$")
_VG_SUMMARY = re.compile(r"^ERROR SUMMARY: (?P<n>\d{1,18}) errors? from")
_VG_REFUSED = re.compile(r"^(?:==\d+== )?valgrind: (?P<why>failed to start tool .*|Fatal error at startup.*|"
                         r"the 'impossible' happened.*|Unrecognised instruction.*)$", re.M)
# Frames of the runtime around the op: CPython, glibc and ld.so, the C++ runtime, libtorch, valgrind's
# preloaded allocator. CPython and glibc are C, ops and AOTI kernels C++: a frame with only a source line
# (no object named) counts as op code when the file is C++ and the function is not a runtime one.
_RUNTIME_OBJECT = re.compile(r"^/(?:usr/)?lib(?:64)?/(?:[\w-]+-linux-gnu/)?[^/]+$|/torch/lib/|"
                             r"/lib(?:python[\d.]*|c|m|stdc\+\+|gcc_s|gomp)\.so|/ld-linux[^/]*$|/vgpreload_[^/]*$|"
                             r"/bin/python[\d.]*$")
_RUNTIME_FUNCTION = re.compile(r"^(?:_*Py|\(below main\)|_start$|__libc_|_dl_|dl_|__GI_|_IO_|c10::|at::|"
                               r"torch::(?!aot_inductor::AOTInductorModel::)|std::|__gnu_cxx::|pybind11::|"
                               r"operator (?:new|delete)|(?:malloc|calloc|realloc|free|memalign|posix_memalign|"
                               r"aligned_alloc)$|_*(?:mem|str)[a-z_]*(?:@@?\S+)?$)")
_CXX_SOURCE = re.compile(r"\.(?:cpp|cc|cxx|c\+\+|hpp|hh|hxx|cuh?)$", re.I)


def _is_op_frame(func: str, obj: Optional[str], loc: Optional[str]) -> bool:
    if func == "???" or _RUNTIME_FUNCTION.match(func):
        return False
    if obj:
        return not _RUNTIME_OBJECT.search(obj)
    return bool(loc and _CXX_SOURCE.search(loc.rsplit(":", 1)[0]))


def parse_valgrind(text: str) -> SanitizerReport:
    """valgrind memcheck's report from a log that also holds the repro's own output. Tested on captured runs of
    the CPU scenarios (tests/logs/cpu/valgrind-*.log).

    Each error is named by its innermost frame in op or kernel code. Errors whose every frame lies in the
    runtime (CPython, glibc, libtorch) are dropped when any error reaches op code, and kept, named by their
    innermost frame, when none does: then they are all the checker found."""
    found: list[dict] = []
    total: Optional[int] = None
    current: Optional[dict] = None
    for raw in text.splitlines():
        if not (m := _VG_LINE.match(raw)):
            continue
        line = m["text"]
        if (m := _VG_ERROR.match(line)):
            current = {"kind": m["kind"].strip(), "size": int(m["size"]) if m["size"] else None, "where": [],
                       "frames": [], "access": True}
            found.append(current)
        elif current is not None and current["access"] and (m := _VG_FRAME.match(line)):
            current["frames"].append((m["func"], m["obj"], m["loc"]))
        elif current is not None and (m := _VG_WHERE.match(line)):
            current["where"].append(m["where"])
            current["access"] = False
        elif (m := _VG_SUMMARY.match(line)):
            total = int(m["n"])
        elif not line.startswith(" "):
            current = None  # a line of its own (a signal, a warning): what follows is no error's stack
    for f in found:
        frames = f.pop("frames")
        op = [fr for fr in frames if _is_op_frame(*fr)]
        f["op"] = bool(op)
        func, _, loc = (op or frames or [(None, None, None)])[0]
        f["function"], f["location"] = func, loc
    if any(f["op"] for f in found):
        found = [f for f in found if f["op"]]
    refused = _VG_REFUSED.search(text)
    return SanitizerReport("valgrind", _grouped(found), total, refused["why"].strip() if refused else None)


PARSERS = {"compute-sanitizer": parse_compute_sanitizer, "valgrind": parse_valgrind}


def parse(tool: str, text: str) -> SanitizerReport:
    """The report of the checker `tool` (a `Checker.tool`) from a run's log."""
    return PARSERS[tool](text)
