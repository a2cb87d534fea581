"""CUDA core dumps of a device exception: the environment that makes the driver write one into a run's folder,
the cuda-gdb command line that reads it in batch mode, and `parse`, a pure function from cuda-gdb's output to the
faulting kernel, its source line, the exception and the thread that hit it (`DeviceFault`).

What the driver and cuda-gdb 13.0 really do (H200, driver 580.159.04, torch 2.11.0+cu130, 2026-11-26;
docs/evidence/cuda-coredump-2026-11-26.md):
  * An illegal address in a user Triton kernel is dumped in every run (3 of 3, 3.4-5.6 MB, written in ~6 ms).
  * A Triton device-side assert is dumped only now and then (3 of 13 runs): the host sees the error while the
    driver is still collecting the asserting warps, and the process's exit cuts the dump short or stops it.
    A dump cut short makes cuda-gdb itself die of an internal error; `parse` then returns None.
  * Without `skip_abort` the driver aborts the process once the dump is written (SIGABRT, "Fatal Python error:
    Aborted" instead of the repro's own RuntimeError, and a device assert's printed lines are lost), so the
    dump environment here carries `skip_abort`: the run fails as it would without it.
  * In the file name, %p (pid), %h (host) and %t (seconds since the epoch) are expanded.

Only `find_cuda_gdb` touches the filesystem; nothing here starts a process or imports torch.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Optional

from ..failure import FailureKind

DUMP_NAME = "cudacore"

# No memory contents (global, shared, local, constant banks) and only the relocated ELF images: a few MB that
# still name the kernel, its line and the thread. skip_abort: see the module docstring.
GENERATION_FLAGS = ("skip_nonrelocated_elf_images,skip_global_memory,skip_shared_memory,skip_local_memory,"
                    "skip_constbank_memory,skip_abort")


def dump_env(folder: str) -> dict[str, str]:
    """The variables a CUDA run gets so that a device exception leaves `folder/cudacore.<pid>` and no host core."""
    return {
        "CUDA_ENABLE_COREDUMP_ON_EXCEPTION": "1",
        "CUDA_ENABLE_CPU_COREDUMP_ON_EXCEPTION": "0",
        "CUDA_COREDUMP_GENERATION_FLAGS": GENERATION_FLAGS,
        "CUDA_COREDUMP_FILE": os.path.join(folder, DUMP_NAME + ".%p"),
    }


# `info cuda lanes` lists the focus warp's lanes with each one's exception: the only place a device assert's
# kind is named ("Warp Assert"); cuda-gdb prints just "Assertion failed." for it otherwise.
READ_COMMANDS = ("info cuda kernels", "bt", "info cuda lanes")


def reader_argv(cuda_gdb: str, dump: str) -> list[str]:
    """cuda-gdb in batch mode over one dump: -nx so that no user or system gdbinit runs. A read took 0.3-0.4 s."""
    argv = [cuda_gdb, "-nx", "-batch", "-ex", f"target cudacore {dump}"]
    for command in READ_COMMANDS:
        argv += ["-ex", command]
    return argv


def find_cuda_gdb(env: dict[str, str]) -> Optional[str]:
    """The cuda-gdb to read dumps with: on PATH, else under $CUDA_HOME (or $CUDA_PATH), else /usr/local/cuda."""
    folders = [d for d in env.get("PATH", "").split(os.pathsep) if d]
    folders += [os.path.join(env[k], "bin") for k in ("CUDA_HOME", "CUDA_PATH") if env.get(k)]
    folders.append("/usr/local/cuda/bin")
    for folder in folders:
        path = os.path.join(folder, "cuda-gdb")
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


# The failure kind (run/classify.py's) of a device exception cuda-gdb names. The dump is the authority: where the
# driver stops the context to write it, a device assert's printed lines can be lost and the host only sees a
# launch failure.
_KINDS = (("Assert", FailureKind.DEVICE_ASSERT), ("Address", FailureKind.ILLEGAL_MEMORY_ACCESS))


def failure_kind(exception: str) -> Optional[FailureKind]:
    return next((kind for word, kind in _KINDS if word in exception), None)


Dim3 = tuple[int, int, int]


@dataclass(frozen=True)
class DeviceFault:
    """The device exception a dump holds, as cuda-gdb names it."""

    exception: str  # "Warp Illegal Address", "Warp Assert", ... (cuda-gdb's words)
    kernel: str  # the device function: the user's @triton.jit name (gather_rows) or Inductor's triton_poi_...
    source: Optional[str]  # the kernel's source file (the Triton .py in the Inductor cache), as cuda-gdb names it
    # The faulting instruction's line where cuda-gdb names it (an illegal address: the load), else the line the
    # warp stopped at (an assert: the tl.device_assert line).
    line: Optional[int]
    frame_line: Optional[int] = None  # the line the warp stopped at; for an illegal address often the next one
    block: Optional[Dim3] = None  # the focus thread's block and thread: the first one cuda-gdb found faulting
    thread: Optional[Dim3] = None
    grid_dim: Optional[Dim3] = None  # the launch's grid and block sizes
    block_dim: Optional[Dim3] = None
    pc: Optional[str] = None  # the faulting instruction's address (the exception PC, else the frame's)

    def describe(self) -> str:
        where = f" ({os.path.basename(self.source) if self.source else '?'}:{self.line})" if self.line else ""
        who = ""
        if self.block is not None and self.thread is not None:
            who = f" in block {_dim3_text(self.block)}, thread {_dim3_text(self.thread)}"
        return f"{self.exception} in {self.kernel}{where}{who}"


def _dim3_text(d: Dim3) -> str:
    return "(" + ",".join(str(v) for v in d) + ")"


# Numbers are capped at 9 digits: int() refuses strings past 4300 digits, and parse must never raise.
_N = r"\d{1,9}"
_DIM3 = rf"\(\s*{_N}\s*,\s*{_N}\s*,\s*{_N}\s*\)"
# An exception's name, as cuda-gdb spells them: "Warp Illegal Address", "Warp Out-of-range Address", ...
_KIND = r"(?P<kind>[A-Za-z][A-Za-z /-]{0,80}?)"
_EXCEPTION = re.compile(r"^\s*CUDA Exception: " + _KIND + r"\s*$", re.M)
# gdb's own report when the exception stops a live process (older cuda-gdb prints it for dumps too).
_SIGNAL = re.compile(r"received signal CUDA_EXCEPTION_\d{1,4}, " + _KIND + r"\.?\s*$", re.M)
_ASSERT = re.compile(r"^\s*Assertion failed\.\s*$", re.M)  # a device assert; not gdb's "Assertion `...' failed."
# "The exception was triggered at PC 0x...  gather_rows  (k.py:22)": the faulting instruction, not where the warp
# stands (an illegal address is reported at a later instruction that waits on the load).
_TRIGGERED = re.compile(r"^\s*The exception was triggered at PC (?P<pc>0x[0-9a-fA-F]{1,16})"
                        r"(?:\s+(?P<func>[^\s()<]{1,400})(?=[\s(]|$))?"
                        r"\s*(?:\((?P<file>[^()\n:]{1,4000}):(?P<line>" + _N + r")\))?", re.M)
_FOCUS = re.compile(r"(?:Current focus set to|Switching focus to) CUDA kernel [^\n]*?block (?P<block>" + _DIM3 +
                    r"), thread (?P<thread>" + _DIM3 + r")")
# A backtrace's frame 0: "#0  0x... in gather_rows<<<(256,1,1),(128,1,1)>>> () at /path/k.py:23". The " at
# file:line" tail is split off by hand (the last " at "), so that a long hostile line costs one pass, not a search.
_FRAME = re.compile(r"^(?:#0\s+)?(?P<pc>0x[0-9a-fA-F]{1,16}) in (?P<func>[^\s<(]{1,400})(?=[\s<(]|$)"
                    r"(?:<<<(?P<launch>[^>\n]{0,200})>>>)?(?P<rest>[^\n]*)$", re.M)
_AT_LINE = re.compile(r"^(?P<file>.+):(?P<line>" + _N + r")\s*$")
# `info cuda kernels`: the focus kernel's row (Kernel Parent Dev Grid Status SMs-Mask GridDim BlockDim Invocation).
_KERNEL_ROW = re.compile(r"^\*\s+\d{1,9}\s+\S+\s+\d{1,9}\s+\d{1,9}\s+\S+\s+\S+\s+(?P<grid>" + _DIM3 +
                         r")\s+(?P<blk>" + _DIM3 + r")\s+(?P<func>[^\s(]{1,400})\(", re.M)
# `info cuda lanes`: the focus lane's row ends with its exception.
_FOCUS_LANE = re.compile(r"^\*\s+\d{1,2}\s+\w+\s+0x[0-9a-fA-F]{1,16}\s+" + _DIM3 + r"\s+" + _KIND + r"\s*$", re.M)


def _dim3(text: Optional[str]) -> Optional[Dim3]:
    if not text:
        return None
    a, b, c = (int(v) for v in re.findall(_N, text)[:3])
    return a, b, c


def _at(rest: str) -> tuple[Optional[str], Optional[int]]:
    """(file, line) from the part of a frame after the function: "() at /path/k.py:23"."""
    _, sep, tail = rest.rpartition(" at ")
    m = _AT_LINE.match(tail.strip()) if sep else None
    return (m.group("file"), int(m.group("line"))) if m else (None, None)


def parse(text: str) -> Optional[DeviceFault]:
    """The device exception in cuda-gdb's batch output over a dump, or None where it names none (not a dump, a
    dump cut short, cuda-gdb's own internal error, a read killed half way) or names no kernel."""
    if not isinstance(text, str):
        return None
    exc = _EXCEPTION.search(text) or _SIGNAL.search(text)
    lane = _FOCUS_LANE.search(text)
    if exc:
        kind = exc.group("kind").strip()
    elif lane:
        kind = lane.group("kind").strip()
    elif _ASSERT.search(text):
        kind = "Warp Assert"
    else:
        return None

    trig = _TRIGGERED.search(text)
    frame = _FRAME.search(text)
    row = _KERNEL_ROW.search(text)
    kernel = ((trig and trig.group("func")) or (frame and frame.group("func")) or (row and row.group("func"))
              or None)
    if not kernel:
        return None

    source, frame_line = _at(frame.group("rest")) if frame else (None, None)
    line = frame_line
    if trig and trig.group("line"):
        line = int(trig.group("line"))
        # The exception line names the file alone; the frame has its full path when it is the same file.
        if not source or os.path.basename(source) != trig.group("file").strip():
            source = trig.group("file").strip()

    grid_dim = block_dim = None
    if row:
        grid_dim, block_dim = _dim3(row.group("grid")), _dim3(row.group("blk"))
    elif frame and frame.group("launch"):
        dims = re.findall(_DIM3, frame.group("launch"))
        if len(dims) == 2:
            grid_dim, block_dim = _dim3(dims[0]), _dim3(dims[1])
    focus = _FOCUS.search(text)
    return DeviceFault(
        exception=kind,
        kernel=kernel,
        source=source,
        line=line,
        frame_line=frame_line,
        block=_dim3(focus.group("block")) if focus else None,
        thread=_dim3(focus.group("thread")) if focus else None,
        grid_dim=grid_dim,
        block_dim=block_dim,
        pc=(trig and trig.group("pc")) or (frame and frame.group("pc")) or None,
    )
