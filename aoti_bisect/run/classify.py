"""Pure functions from a run's log text (and exit status) to an outcome and a failure signature."""
from __future__ import annotations

import dataclasses
import hashlib
import re
import signal as _signal
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Optional

from ..aoti.printer import parse_trace
from ..failure import FailureKind, Phase
from ..text import printable
from .types import Outcome, ProcessExit, RunResult, Signature

_TB_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d{1,9}),? in (?P<func>\S+)')
_FINAL_EXC = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Failed|Fault))(?:: (?P<msg>.*))?$")
_THREAD_SPAM = re.compile(r"block: \[[\d,]+\], thread: \[[\d,]+\]")
_TRITON_ASSERT = re.compile(r"^(?P<path>/\S+\.py):(?P<line>\d{1,9}): \S+: "
                            r"block: \[(?P<block>\d{1,9}(?:,\d{1,9}){0,2})\], "
                            r"thread: \[(?P<thread>\d{1,9}(?:,\d{1,9}){0,2})\].*Assertion `(?P<cond>.*)` failed", re.M)
_CPP_KERNEL = re.compile(r"Exception raised from (?P<kernel>(?:cpp_fused|triton|cpp)_\w+) at (?P<path>\S+?)"
                         r"(?::(?P<line>\d{1,9}))? ")
_GLOG_PREFIX = re.compile(r"^\[[EWIF]\d{4} [\d:.]+ \S+\] ")
_HASH_TOKEN = re.compile(r"\b[a-z0-9]{40,64}\b")
_NUMBER = re.compile(r"0x[0-9a-fA-F]+|\d+")
# A C++ backtrace under a c10 error (TORCH_SHOW_CPP_STACKTRACES, or a repro that prints the exception it
# caught): none of its lines is the error, which is the line above "Exception raised from".
_CPP_TRACE_LINE = re.compile(r"^\s*(?:#\d+ .* from \S+$|frame #\d+: |C\+\+ CapturedTraceback:|"
                             r"Exception raised from \S+ at |<omitting python frames>)")

# (kind, regex over the whole log); first match wins, so the most specific come first.
_TEXT_KINDS: list[tuple[FailureKind, re.Pattern]] = [
    (FailureKind.ILLEGAL_MEMORY_ACCESS, re.compile(
        r"illegal memory access|illegal address|misaligned address"
        r"|operation not supported on global/shared address space", re.I)),
    (FailureKind.DEVICE_ASSERT, re.compile(
        r"device-side assert triggered|^\S+\.py:\d+: \S+: block: \[.*Assertion", re.M)),
    (FailureKind.INDEX_OUT_OF_BOUNDS, re.compile(r"index out of bounds|IndexError: index -?\d+ is out of bounds")),
    (FailureKind.DEVICE_MISMATCH, re.compile(
        r"unmatched device type|Expected all tensors to be on the same device|found at least two devices"
        r"|Expected a '\w+' device type|is on \w+(:\d+)? but expected|expected device \w+", re.I)),
    (FailureKind.INPUT_MISMATCH, re.compile(
        r"input_handles\[\d+\]: unmatched|unmatched (dim|stride) value|unmatched dtype")),
    (FailureKind.NAN_INF, re.compile(
        r"At least one (NaN|INF) in|non-?finite|\b(nan|inf)s? (detected|found|in output)", re.I)),
    (FailureKind.OUT_OF_MEMORY, re.compile(r"out of memory|OutOfMemoryError|can't allocate memory", re.I)),
    (FailureKind.COMPILE_ERROR, re.compile(r"CppCompileError|InductorError|LoweringException|BackendCompilerFailed|"
                                           r"CalledProcessError: Command .*(g\+\+|c\+\+|clang)")),
]
# What only a kernel's run (or the script's check of its output) fails with: in no known phase, it is the run's.
_KERNEL_FAILURES = frozenset({FailureKind.NAN_INF, FailureKind.DEVICE_ASSERT, FailureKind.ILLEGAL_MEMORY_ACCESS,
                              FailureKind.INDEX_OUT_OF_BOUNDS, FailureKind.INPUT_MISMATCH, FailureKind.DEVICE_MISMATCH})
_SIGNAL_KINDS: dict[Optional[int], FailureKind] = {
    _signal.SIGSEGV: FailureKind.SEGFAULT, _signal.SIGBUS: FailureKind.SEGFAULT, _signal.SIGABRT: FailureKind.ABORT}
_INFRA = re.compile(
    r"No module named 'torch'|Found no NVIDIA driver|Torch not compiled with CUDA enabled|"
    r"No CUDA GPUs are available|CUDA driver version is insufficient")
# CPython reports a script that does not compile without a "Traceback" header: the file and line, the
# source line, a caret, then the error. Only the main script fails like this; a compile() inside it has one.
_UNCOMPILABLE = re.compile(r'^  File "[^"]*", line \d+\n(?:    .*\n){0,3}(?P<line>(?:SyntaxError|IndentationError|'
                           r'TabError): .*)$', re.M)
# The comparison helpers a script checks the model's outputs with (torch.testing.assert_close,
# numpy.testing.assert_allclose, a unittest assertion): what they raise is the script's check failing.
_CHECKS = re.compile(r"/(?:torch/testing|numpy/testing|unittest)/")
_RELATIVE_MISSING = re.compile(r"No such file or directory: '((?!/)[^']+)'")
_SCRIPT_ERRORS = ("SyntaxError", "IndentationError", "TabError", "ModuleNotFoundError", "ImportError",
                  "FileNotFoundError", "NameError")

_PHASE_BY_FUNC: dict[str, Phase] = {func: phase for phase, funcs in (
    (Phase.EXPORT, ("export", "_export", "export_for_training", "_export_for_training")),
    (Phase.COMPILE, ("aoti_compile_and_package", "aot_compile", "compile_fx", "compile_fx_aot",
                     "_aoti_compile_and_package_inner")),
    (Phase.LOAD, ("aoti_load_package", "load_package", "load_pt2", "_load_aoti")),
    (Phase.RUN, ("__call__", "boxed_run", "forward", "_call_impl", "_wrapped_call_impl", "run")),
) for func in funcs}
_CPP_PHASE = [(Phase.RUN, re.compile(r"AOTInductorModelContainerRun|AOTIModelContainerRunner::run|run_impl")),
              (Phase.LOAD, re.compile(r"AOTIModelPackageLoader::AOTIModelPackageLoader|parse_device_str|"
                                  r"AOTInductorModelContainerCreate"))]


@dataclass(frozen=True)
class Frame:
    path: str
    func: str
    line: int = 0

    @property
    def in_library(self) -> bool:
        return "site-packages/" in self.path or "/lib/python3" in self.path or self.path.startswith("<frozen")


def collapse_repeats(lines: Iterable[str]) -> list[str]:
    """Per-thread device-assert spam (hundreds of lines differing only in block/thread) becomes one line."""
    out: list[str] = []
    counts: dict[str, int] = {}
    order: list[str] = []
    for line in lines:
        if _THREAD_SPAM.search(line):
            key = _THREAD_SPAM.sub("block: [*], thread: [*]", line)
            if key not in counts:
                order.append(key)
                out.append(key)
            counts[key] = counts.get(key, 0) + 1
        else:
            out.append(line)
    return [f"{line}  (x{counts[line]} threads)" if line in counts and counts[line] > 1 else line for line in out]


def _last_index(lines: list[str], prefix: str) -> int:
    return max((i for i, line in enumerate(lines) if line.startswith(prefix)), default=-1)


def parse_frames(text: str) -> list[Frame]:
    """Frames of the last Python traceback or faulthandler dump (the crashing thread), outermost first."""
    lines = text.splitlines()
    tb_start = _last_index(lines, "Traceback (most recent call last)")
    fh_start = _last_index(lines, "Current thread 0x")
    frames = []
    for line in lines[max(tb_start, fh_start) + 1:] if max(tb_start, fh_start) >= 0 else []:
        m = _TB_FRAME.match(line)
        if m:
            frames.append(Frame(m["path"], m["func"], int(m["line"])))
        elif fh_start > tb_start or (_FINAL_EXC.match(line) and frames):
            break  # a faulthandler dump ends at its first non-frame line
    return frames[::-1] if fh_start > tb_start else frames


def final_exception(text: str) -> Optional[tuple[str, str]]:
    """(type, message) of the last traceback's exception, if the log has one (a script that does not compile
    has one without a traceback)."""
    lines = text.splitlines()
    start = _last_index(lines, "Traceback (most recent call last)")
    if start < 0:
        m = _UNCOMPILABLE.search(text)
        return tuple(m["line"].split(": ", 1)) if m else None
    for line in lines[start + 1:]:
        if line.startswith((" ", "\t")):
            continue
        m = _FINAL_EXC.match(line.strip())
        if m:
            return m["type"], (m["msg"] or "").strip()
    return None


def phase_of(frames: list[Frame], text: str) -> Phase:
    """The AOTI phase the failure happened in: the library function the user's code called into."""
    for i, frame in enumerate(frames):
        if frame.in_library and (i == 0 or not frames[i - 1].in_library):
            phase = _PHASE_BY_FUNC.get(frame.func)
            if phase:
                return phase
            for inner in frames[i:]:
                if inner.func in _PHASE_BY_FUNC and inner.func not in ("__call__", "forward", "run"):
                    return _PHASE_BY_FUNC[inner.func]
            if "/torch/export/" in frame.path and "pt2_archive" not in frame.path:
                return Phase.EXPORT
            if "/torch/_inductor/" in frame.path:
                return Phase.COMPILE
    for phase, pattern in _CPP_PHASE:
        if pattern.search(text):
            return phase
    return Phase.UNKNOWN


@dataclass(frozen=True)
class TritonAssert:
    """The first line a failed Triton device assert printed: its kernel's source file and line, and who hit it."""

    path: str
    line: int
    block: tuple[int, ...]
    thread: tuple[int, ...]
    condition: str


def triton_assert(text: str) -> Optional[TritonAssert]:
    m = _TRITON_ASSERT.search(text)
    if m is None:
        return None
    block, thread = (tuple(int(x) for x in m[k].split(",") if x) for k in ("block", "thread"))
    return TritonAssert(m["path"], int(m["line"]), block, thread, m["cond"])


@dataclass(frozen=True)
class KernelThrow:
    """A generated CPU kernel's own check threw (`TORCH_CHECK` in its source): the kernel, its file:line, the what()."""
    kernel: str
    location: Optional[str]
    what: str


def kernel_throw(text: str) -> Optional[KernelThrow]:
    """The c10::Error a generated kernel threw, from its "Exception raised from <kernel> at <file>:<line>" line and
    the message above it. None where the log names no generated kernel as the thrower."""
    m = _CPP_KERNEL.search(text)
    if m is None:
        return None
    above = [l.strip() for l in text[:m.start()].splitlines()[-3:] if l.strip()]
    what = above[-1].removeprefix("what():").strip() if above else ""
    where = f"{m['path'].rsplit('/', 1)[-1]}:{m['line']}" if m["line"] else None
    return KernelThrow(m["kernel"], where, _one_line(printable(what), 200))


def kernel_named(text: str) -> Optional[str]:
    """A kernel the log itself names: a CPU kernel's exception, a Triton assert's source, the last printer launch."""
    m = _CPP_KERNEL.search(text)
    if m:
        return m["kernel"]
    failed = triton_assert(text)
    if failed:
        return failed.path
    return parse_trace(text.splitlines()).unfinished


def fingerprint(kind: str, phase: str, message: str, kernel: Optional[str]) -> str:
    """Stable across runs: numbers, hashes and paths are normalised away, kernel hash suffixes too."""
    msg = _NUMBER.sub("N", _HASH_TOKEN.sub("H", message))
    msg = re.sub(r"/\S+/", "", msg)
    stem = re.sub(r"_\d+$", "", kernel.rsplit("/", 1)[-1]) if kernel else ""
    return hashlib.sha1(f"{kind}|{phase}|{msg}|{stem}".encode()).hexdigest()[:12]


def _one_line(s: str, limit: int = 300) -> str:
    s = " ".join(s.split())
    return s if len(s) <= limit else s[: limit - 3] + "..."


def _last_words(text: str) -> str:
    for line in reversed(text.splitlines()):
        if line.strip() and not line.startswith(("  File ", "Extension modules:")) and not _CPP_TRACE_LINE.match(line):
            return line.strip()
    return ""


def signal_name(sig: int) -> str:
    try:
        return _signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def classify(text: str, exit: ProcessExit) -> tuple[Outcome, Optional[Signature]]:
    """The outcome of one run and, for a failure, its signature."""
    if exit.launch_error:
        return Outcome.INFRA_ERROR, _sig(FailureKind.INFRA, Phase.UNKNOWN, exit.launch_error, None)
    crashed = exit.signal is not None
    if not exit.timed_out and not crashed and exit.returncode == 0:
        return Outcome.PASSED, None
    frames = parse_frames(text)
    exc = final_exception(text)
    phase = phase_of(frames, text)
    kernel = kernel_named(text)
    message = _failure_message(text, exc, exit)

    if exit.timed_out:
        where = f"; stuck in {frames[-1].func} ({frames[-1].path.rsplit('/', 1)[-1]})" if frames else ""
        return Outcome.TIMEOUT, _sig(FailureKind.TIMEOUT, phase, f"no exit after {exit.duration:.0f}s{where}", kernel)
    if _INFRA.search(text):
        return Outcome.INFRA_ERROR, _sig(FailureKind.INFRA, phase, _one_line(_INFRA.search(text).group(0)), kernel)
    if _is_script_error(text, exc, frames):
        return Outcome.FAILED, _sig(FailureKind.SCRIPT_ERROR, Phase.UNKNOWN, message, None)
    outcome = Outcome.CRASHED if crashed else Outcome.FAILED
    for kind, pattern in _TEXT_KINDS:
        m = pattern.search(text)
        if m:
            if kind is FailureKind.COMPILE_ERROR and phase not in (Phase.COMPILE, Phase.UNKNOWN):
                continue
            if not (exc and pattern.search(exc[1])):
                # The final exception is often a generic wrapper ("run_func_(...) API call failed"): the
                # line that names the failure says more.
                message = _one_line(_GLOG_PREFIX.sub("", _line_at(text, m.start())))
            if kind is FailureKind.DEVICE_ASSERT and (a := triton_assert(text)):
                message = f"device-side assert: `{a.condition}` failed at {a.path.rsplit('/', 1)[-1]}:{a.line}"
            if phase is Phase.UNKNOWN and kind in _KERNEL_FAILURES:
                # Only kernels running (or the script checking their output) fail like this; CUDA errors
                # surface at a later sync, often in the script's own frame.
                phase = Phase.RUN
            return outcome, _sig(kind, phase, message, kernel)
    fatal = re.search(r"^Fatal Python error: (Segmentation fault|Bus error|Aborted)", text, re.M)
    if crashed or fatal:
        kind = _SIGNAL_KINDS.get(exit.signal, FailureKind.CRASH)
        if fatal and kind is FailureKind.CRASH:
            kind = FailureKind.ABORT if fatal.group(1) == "Aborted" else FailureKind.SEGFAULT
        return outcome, _sig(kind, phase, message, kernel)
    if exc and phase is Phase.COMPILE:
        return outcome, _sig(FailureKind.COMPILE_ERROR, phase, message, kernel)
    if phase is Phase.UNKNOWN and _the_scripts_check(frames):
        phase = Phase.RUN  # the script's check of what the model returned
    return outcome, _sig(FailureKind.PYTHON_EXCEPTION, phase, message, kernel)


def _the_scripts_check(frames: list[Frame]) -> bool:
    """Whether the script's own code raised, or the library function it called is a comparison helper."""
    first = next((f for f in frames if f.in_library), None)
    return first is None or bool(_CHECKS.search(first.path))


def _line_at(text: str, pos: int) -> str:
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    return text[start: end if end >= 0 else len(text)]


def _failure_message(text: str, exc: Optional[tuple[str, str]], exit: ProcessExit) -> str:
    if exit.signal is not None:
        fatal = re.search(r"^Fatal Python error: (.*)$", text, re.M)
        return _one_line(f"killed by {signal_name(exit.signal)}" + (f" ({fatal.group(1)})" if fatal else ""))
    if exc:
        return _one_line(f"{exc[0]}: {exc[1]}" if exc[1] else exc[0])
    return _one_line(_last_words(text) or f"exit status {exit.returncode}")


def relative_missing(message: str) -> Optional[str]:
    """The relative path a FileNotFoundError names (the repro opened it relative to its working directory), if it
    does: torch's own missing files (caches, temporary folders) are named absolute."""
    m = _RELATIVE_MISSING.search(message)
    return m.group(1) if m else None


def _is_script_error(text: str, exc: Optional[tuple[str, str]], frames: list[Frame]) -> bool:
    if re.search(r"can't open file .*No such file or directory", text):
        return True
    if not exc or exc[0].rsplit(".", 1)[-1] not in _SCRIPT_ERRORS:
        return False
    if exc[0].rsplit(".", 1)[-1] == "FileNotFoundError" and relative_missing(exc[1]):
        return True  # torch.load("inputs.pt") fails inside torch, but the path is the script's
    # An import error raised inside torch (a broken .so, say) is not the script's fault.
    return not frames or not frames[-1].in_library


def _sig(kind: FailureKind, phase: Phase, message: str, kernel: Optional[str]) -> Signature:
    # The message is the child's text and ends up on the terminal (the run line) and in every summary.
    message = printable(message)
    return Signature(kind, phase, message, kernel, fingerprint(kind, phase, message, kernel))


# A run ends at its limit; a passing run of the same stage that took more than this share of the limit says the
# limit measures the machine's load, not a hang: two cold compiles beside other work took 293 s (passed) and 300 s
# (timed out in its compile) under a 300 s limit, and the timeout alone read as "reproduced: timeout".
SLOW_SHARE = 0.5


def slow_not_stuck(result: RunResult, passed: Iterable[float]) -> RunResult:
    """`result`, or an infrastructure error in its place where it timed out and its stage's passing runs (`passed`:
    their seconds) say the limit ended it, not a hang: one took over SLOW_SHARE of the limit, or the run was stopped
    inside its AOTI compile where any passed. A pass may have taken a compile cache the stopped run was still
    filling (a slot's first run compiles cold, its later runs pass in seconds), so a compile that outlasts the limit
    beside passes is no evidence that the compile hangs. A run stopped in a C++ extension's build is in no AOTI
    phase, and only the first rule covers it."""
    passed = list(passed)
    if result.outcome is not Outcome.TIMEOUT or not passed:
        return result
    slowest = max(passed)
    phase = result.signature.phase if result.signature else Phase.UNKNOWN
    if slowest > SLOW_SHARE * result.spec.timeout:
        why = f"where a passing run of the stage took {slowest:.0f} s"
    elif phase is Phase.COMPILE:
        why = "inside its compile, where other runs of the stage passed (a cold compile outlasts a cached one)"
    else:
        return result
    return dataclasses.replace(result, outcome=Outcome.INFRA_ERROR, signature=_sig(
        FailureKind.INFRA, phase, f"stopped at its {result.spec.timeout:.0f} s limit {why}: the limit ended it, "
        f"not a hang (raise --timeout)", None))
