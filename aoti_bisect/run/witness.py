"""Crash forensics from the run that crashed: where it faulted, told by the run itself, so that one crash names
its culprit without waiting for more.

On the CPU a small library (witness.c, built once per bisection with the C compiler AOTI needs anyway) is
preloaded into every run; on a fatal signal it appends the faulting thread's native stack to the run's
CRASH_FILE and lets the signal end the process as it would have (exit status and faulthandler's Python stack
unchanged). The parent picks the innermost frame outside the system, Python and torch libraries and names it
with addr2line. On CUDA a run carries the driver's core dump settings (aoti/cudacore.py) and cuda-gdb reads
the dump of a device exception.

The parsers here are pure functions over text; `Witness` is the process side (build, addr2line, cuda-gdb).
"""
from __future__ import annotations

import os
import re
import shutil
import signal as _signal
import threading
from dataclasses import dataclass
from typing import Optional

from ..aoti import cudacore
from ..aoti.wrapper import generated
from ..child.contract import CRASH_FILE, CRASH_FILE_ENV
from ..files.own import NotOwnFile, read_own_text
from . import process
from .classify import Frame, KernelThrow, kernel_throw, parse_frames, signal_name, triton_assert
from .types import DEVICE_ASSERT, DEVICE_DUMP, KERNEL_THROW, CrashSite, ProcessExit

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "witness.c")
LIBRARY = "libaoti_bisect_witness.so"
DUMP_READING = "cuda-gdb.log"  # beside output.log: what cuda-gdb read from a crashed run's core dump
MAX_CRASH_TEXT = 256 << 10  # a witness file is a few KiB; a repro that writes more is not read past this
MAX_DUMP_BYTES = 256 << 20  # a dump without memory contents is a few MiB (docs/gpu.md); a larger one is not read
READ_TIMEOUT_S = 60.0  # addr2line or cuda-gdb; a reader that hangs costs the run this much, then "unreadable"
# Folders whose code is never the culprit of a repro's crash: the C library, Python, torch and its wheels' libraries.
_SYSTEM = re.compile(r"^/(usr/)?lib(32|64|x32)?/|^/usr/local/cuda|/lib-dynload/|/libpython[\d.]+\.so|/bin/python[\d.]*$"
                     r"|/site-packages/(torch|nvidia|triton|numpy|functorch)/|" + re.escape(LIBRARY) + "$")
FATAL = frozenset({_signal.SIGSEGV, _signal.SIGBUS, _signal.SIGILL, _signal.SIGFPE, _signal.SIGABRT})  # witness.c's
_HEADER = re.compile(r"^aoti-bisect-crash pid=(?P<pid>\d{1,10}) signal=(?P<signal>\d{1,10}) "
                     r"addr=(?P<addr>0x[0-9a-f]+)$")
_FRAME = re.compile(r"^frame (?P<pc>0x[0-9a-f]+)(?: (?P<offset>0x[0-9a-f]+) (?P<object>\S+)(?: (?P<symbol>\S+))?)?$")
_MODEL_SO = re.compile(r"aotinductor|\.wrapper\.so$|/data/aotinductor/", re.I)


@dataclass(frozen=True)
class NativeFrame:
    pc: int
    offset: Optional[int] = None  # from the start of its object
    object: Optional[str] = None
    symbol: Optional[str] = None  # the dynamic symbol, mangled; None where the object exports none for it

    @property
    def system(self) -> bool:
        return self.object is None or bool(_SYSTEM.search(self.object))


@dataclass(frozen=True)
class NativeCrash:
    pid: int
    signal: int
    address: int  # the faulting address (si_addr)
    frames: tuple[NativeFrame, ...]  # the handler's stack, innermost first

    def faulting(self) -> tuple[NativeFrame, ...]:
        """The stack from the faulting instruction outwards: below the last signal frame. The handler was entered
        through the kernel's trampoline, which is the handler's caller (frame 1); a handler before ours (Python's
        faulthandler) that re-raised adds a second one."""
        if len(self.frames) < 2:
            return self.frames
        trampoline = self.frames[1].pc
        last = max(i for i, f in enumerate(self.frames) if f.pc == trampoline)
        return self.frames[last + 1:]


def parse(text: str) -> list[NativeCrash]:
    """Every complete crash block of a witness file (a process that died mid-block leaves none)."""
    crashes: list[NativeCrash] = []
    frames: list[NativeFrame] = []
    header: Optional[re.Match[str]] = None
    for line in text.splitlines():
        if (m := _HEADER.match(line)) is not None:
            header, frames = m, []
        elif header is not None and (f := _FRAME.match(line)) is not None:
            frames.append(NativeFrame(int(f["pc"], 16), int(f["offset"], 16) if f["offset"] else None,
                                      f["object"], f["symbol"]))
        elif header is not None and line == "end":
            crashes.append(NativeCrash(int(header["pid"]), int(header["signal"]), int(header["addr"], 16),
                                       tuple(frames)))
            header = None
        else:
            header = None
    return crashes


# An abort through these is std::terminate ending an exception nobody caught: a CUDA error rethrown by a destructor
# at exit, say. The throw is where an earlier failure was reported, not where anything faulted.
_TERMINATE = frozenset({"__cxa_throw", "__cxa_rethrow", "__cxa_call_terminate", "_ZSt9terminatev"})


def uncaught_exception(crash: NativeCrash) -> bool:
    return crash.signal == _signal.SIGABRT and any(f.symbol in _TERMINATE for f in crash.faulting())


def culprit_frame(crash: NativeCrash) -> Optional[tuple[NativeFrame, bool, Optional[NativeFrame]]]:
    """(the innermost frame of the repro's own native code, whether it is the faulting instruction itself, the
    system frame it called into), or None when every frame is the system's."""
    stack = crash.faulting()
    for i, frame in enumerate(stack):
        if not frame.system:
            return frame, i == 0, stack[i - 1] if i else None
    return None


def thrown_site(log: str) -> Optional[CrashSite]:
    """A generated kernel's own check threw and nothing caught it (an OpenMP region ends in std::terminate): the
    throw is the fault, in that kernel, at its check's line."""
    if "terminate called after throwing" not in log:
        return None
    thrown: Optional[KernelThrow] = kernel_throw(log)
    if thrown is None or not generated(thrown.kernel):
        return None
    return CrashSite("SIGABRT", thrown.kernel, thrown.location, None, thrown.what, KERNEL_THROW)


def python_op_frame(log: str) -> Optional[Frame]:
    """The frame of Python code that torch called back into when the process crashed: a custom op implemented in
    Python, run by the compiled model (faulthandler's stack of the crashing thread, classify.parse_frames)."""
    frames = parse_frames(log)[::-1]  # innermost first
    own = next((i for i, f in enumerate(frames) if not f.in_library), None)
    if own is None or not any("/torch/" in f.path for f in frames[own + 1:]):
        return None  # the script's own call into torch, not code torch called
    return frames[own]


def parse_addr2line(text: str) -> tuple[Optional[str], Optional[str]]:
    """(function, file:line) of `addr2line -f -C -i`'s first answer (the innermost inlined function)."""
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    if len(lines) < 2:
        return None, None
    function = None if lines[0] == "??" else lines[0]
    where = lines[1].split(" (discriminator")[0]
    file, colon, line = where.rpartition(":")
    location = None if where.startswith("??") or not colon else f"{os.path.basename(file)}:{line}"
    return function, location


def native_site(crash: NativeCrash, found: tuple[NativeFrame, bool, Optional[NativeFrame]],
                resolved: tuple[Optional[str], Optional[str]], log: str) -> CrashSite:
    """The crash site a native crash names: its innermost own frame (`found`, culprit_frame's answer), named as
    addr2line `resolved` it; a compiled model that crashed in Python it called back into names the Python function
    instead."""
    frame, _, callee = found
    function, location = resolved
    name = function or frame.symbol or f"{os.path.basename(frame.object or '?')}+{frame.offset or 0:#x}"
    via = f"called into {callee.symbol}" if callee is not None and callee.symbol else ""
    if frame.object and _MODEL_SO.search(frame.object) and not generated(name):
        py = python_op_frame(log)
        if py is not None:
            return python_site(crash, py, "the compiled model called this Python function")
    return CrashSite(signal_name(crash.signal), name, location, os.path.basename(frame.object or ""), via)


def python_site(crash: NativeCrash, frame: Frame, detail: str = "") -> CrashSite:
    name = os.path.basename(frame.path)
    return CrashSite(signal_name(crash.signal), frame.func, f"{name}:{frame.line}", name, detail, "Python stack")


def device_site(fault: cudacore.DeviceFault) -> CrashSite:
    location = f"{os.path.basename(fault.source)}:{fault.line}" if fault.source and fault.line else None
    detail = _threads(("grid", fault.grid_dim), ("block", fault.block), ("thread", fault.thread))
    return CrashSite(fault.exception, fault.kernel, location, None, detail, DEVICE_DUMP)


def _threads(*dims: tuple[str, tuple[int, ...]]) -> str:
    return ", ".join(f"{name} ({','.join(map(str, value))})" for name, value in dims if value)


def assert_site(kernel: Optional[str], log: str) -> Optional[CrashSite]:
    """Where a failed Triton device assert faulted, from the lines the device printed: `kernel` is the one its source
    file defines (run/harness.py reads it), the line and the first asserting thread are the print's. The driver dumps
    such an assert only now and then (aoti/cudacore.py); the printed lines come in every run that lived to flush
    them, so a device assert names its kernel from the run that failed."""
    failed = triton_assert(log)
    if failed is None or not kernel or not generated(kernel):
        return None
    return CrashSite(f"Assertion `{failed.condition[:120]}` failed", kernel,
                     f"{os.path.basename(failed.path)}:{failed.line}", None,
                     _threads(("block", failed.block), ("thread", failed.thread)), DEVICE_ASSERT)


class Witness:
    """The process side: the preloaded library (built on first use, once), and reading a crashed run's witness
    file and core dump."""

    def __init__(self, folder: str, base_env: dict[str, str], cancel: Optional[process.Cancel] = None) -> None:
        self.folder = folder  # inside the run directory
        self.base_env = base_env
        self.cancel = cancel
        self.cuda_gdb = cudacore.find_cuda_gdb(base_env)
        self._library: Optional[str] = None
        self.problem: Optional[str] = None  # why there is no native witness (no compiler): said once, in the report
        self._lock = threading.Lock()
        self._built = False

    def library(self) -> Optional[str]:
        with self._lock:
            if not self._built:
                self._built = True
                self._library, self.problem = self._build()
            return self._library

    def _build(self) -> tuple[Optional[str], Optional[str]]:
        os.makedirs(self.folder, exist_ok=True)
        out = os.path.join(self.folder, LIBRARY)
        for cc in dict.fromkeys(c for c in (self.base_env.get("CC"), "cc", "gcc", "clang") if c):
            path = shutil.which(cc, path=self.base_env.get("PATH"))
            if path is None:
                continue
            exit = process.execute([path, "-shared", "-fPIC", "-O1", "-o", out, SOURCE, "-ldl"], self.base_env,
                                   self.folder, os.path.join(self.folder, "build.log"), 60, cancel=self.cancel)
            if exit.returncode == 0 and os.path.isfile(out):
                return out, None
        return None, ("no C compiler built the crash witness (CC, cc, gcc, clang): a crash is not located from its "
                      "own run")

    def env(self, run_path: str, checked: bool = False) -> dict[str, str]:
        """What a run gets so that a crash can tell where it happened; nothing for a run under a memory checker,
        which reports the access itself and handles the process's signals and device exceptions its own way."""
        if checked:
            return {}
        env = cudacore.dump_env(run_path) if self.cuda_gdb else {}
        lib = self.library()
        if lib is not None:
            theirs = self.base_env.get("LD_PRELOAD")
            env["LD_PRELOAD"] = lib + (f":{theirs}" if theirs else "")
            env[CRASH_FILE_ENV] = os.path.join(run_path, CRASH_FILE)
        return env

    def read(self, run_path: str, exit: ProcessExit, log: str) -> tuple[Optional[CrashSite], Optional[str]]:
        """(where the run faulted, None) or (None, why it cannot tell); (None, None) for a run that did not crash."""
        # Only where we asked the driver for a dump (dump_env) is a cudacore* file one: the repro can name a file so.
        dumps = sorted(n for n in os.listdir(run_path) if n.startswith(cudacore.DUMP_NAME)) \
            if self.cuda_gdb and os.path.isdir(run_path) else []
        if dumps:
            return self._read_dump(run_path, dumps[0])
        if exit.signal not in FATAL or exit.timed_out:
            return None, None  # no crash (a kill by the timeout or the OOM killer is not one of the process's own)
        if exit.signal == _signal.SIGABRT and (thrown := thrown_site(log)) is not None:
            return thrown, None
        try:
            text = read_own_text(os.path.join(run_path, CRASH_FILE), MAX_CRASH_TEXT)
        except NotOwnFile:
            return None, "the crash witness's file was replaced by a link: not read"
        except OSError:
            return None, self.problem or "the crashed process left no native stack (it cleared LD_PRELOAD, or died " \
                                         "by a signal it sent itself before any fault)"
        crashes = [c for c in parse(text) if c.signal == exit.signal] or parse(text)
        if not crashes:
            return None, "the crash witness's file holds no complete stack"
        crash = crashes[-1]
        if uncaught_exception(crash):
            return None, ("the process aborted on a C++ exception nobody caught (std::terminate): where it was "
                          "thrown is not where it faulted")
        found = culprit_frame(crash)
        if found is None:
            py = python_op_frame(log)
            if py is not None:
                return python_site(crash, py), None
            return None, "every native frame of the crash is in the system's, Python's or torch's libraries"
        frame, exact, _ = found
        return native_site(crash, found, self._addr2line(run_path, frame, exact), log), None

    def _addr2line(self, run_path: str, frame: NativeFrame, exact: bool) -> tuple[Optional[str], Optional[str]]:
        tool = shutil.which("addr2line", path=self.base_env.get("PATH"))
        if tool is None or frame.object is None or frame.offset is None or not os.path.isfile(frame.object):
            return None, None
        # A return address points after its call: one byte back is inside the call's line.
        offset = frame.offset if exact else frame.offset - 1
        log = os.path.join(run_path, "addr2line.log")
        exit = process.execute([tool, "-f", "-C", "-i", "-e", frame.object, hex(offset)], self.base_env, run_path,
                               log, READ_TIMEOUT_S, cancel=self.cancel)
        if exit.returncode != 0:
            return None, None
        try:
            return parse_addr2line(read_own_text(log, 1 << 16))
        except OSError:
            return None, None

    def _read_dump(self, run_path: str, name: str) -> tuple[Optional[CrashSite], Optional[str]]:
        dump = os.path.join(run_path, name)
        if os.path.islink(dump) or not os.path.isfile(dump):
            return None, f"{name} is a link or not a file: not read"
        if os.path.getsize(dump) > MAX_DUMP_BYTES:
            return None, f"{name} is larger than {MAX_DUMP_BYTES >> 20} MiB: not read"
        log = os.path.join(run_path, DUMP_READING)
        exit = process.execute(cudacore.reader_argv(self.cuda_gdb, dump), self.base_env, run_path, log,
                               READ_TIMEOUT_S, cancel=self.cancel)
        if exit.timed_out:
            return None, f"cuda-gdb did not read {name} within {READ_TIMEOUT_S:.0f} s"
        try:
            fault = cudacore.parse(read_own_text(log, MAX_CRASH_TEXT))
        except OSError:
            fault = None
        if fault is None:
            return None, f"cuda-gdb found no device exception in {name}"
        return device_site(fault), None
