"""How many runs go at once where `--jobs` is not given: as many as the machine has room for (docs/slots.md).

A bisection holds one slot per core this process may use. A run starts beside others only while the machine has
room for one more like the largest seen so far:
- host memory: the memory available at the start holds one more such run beside ours, and the memory available now
  holds one (its peak: its processes' resident memory, sampled while it ran, process.resident_bytes; with a
  margin; before any run has ended, PRIOR_HOST);
- GPU memory, where runs have used a GPU: at most as many runs on it as its free memory at the bisection's start
  holds their peak (what the hook saw torch reserve, plus a CUDA context); before a run has told its peak,
  PRIOR_PER_GPU of them, or one once a run has run out of memory (seen: a run of 24 GiB, 4 at once).
A run that has nothing beside it always starts. Runs of other bisections count through the memory they take from
the host; on the GPU only through its free memory at the start.
"""
from __future__ import annotations

import os
import threading
from typing import Optional

from ..failure import FailureKind
from .types import RunResult

MARGIN = 1.25  # a run's peak varies from run to run (a rare crash's inputs, a compile's workers)
PRIOR_HOST = 2 << 30  # bytes a run is taken to need before one has ended: a torch process that compiles
PRIOR_PER_GPU = 4  # runs on one GPU before one has told its peak: 4 small processes per H100 (docs/minify.md)
CUDA_CONTEXT = 700 << 20  # bytes a CUDA process holds beside what torch's allocator reserved (docs/slots.md)


def cores() -> int:
    return max(1, len(os.sched_getaffinity(0)))


def available_memory() -> Optional[int]:
    """MemAvailable now, in bytes; None off Linux."""
    try:
        with open("/proc/meminfo", "rb") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith(b"MemAvailable:"))
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def admit(busy: int, slots: int, memory: tuple[Optional[int], Optional[int]], host_peak: Optional[int], gpu: bool,
          gpu_free: Optional[int], gpu_peak: Optional[int], oom: bool = False) -> bool:
    """Whether one more run may start beside `busy` runs; `memory`: the host's available memory at the start and
    now; `gpu`: the runs may use one; `oom`: a run has run out of memory. Pure."""
    if busy == 0:
        return True
    if busy >= slots:
        return False
    need = MARGIN * (host_peak or PRIOR_HOST)
    at_start, now = memory
    # Our own runs by their count (a run just started has not taken its memory yet), other work by what it took.
    if (at_start is not None and (busy + 1) * need > at_start) or (now is not None and now < need):
        return False
    if not gpu or gpu_peak == 0:  # no GPU, or every run that told its peak used none
        return True
    if gpu_peak is None or gpu_free is None:
        return busy < (1 if oom else PRIOR_PER_GPU)
    return busy < max(1, int(gpu_free / (MARGIN * (gpu_peak + CUDA_CONTEXT))))


class Room:
    """The machine as the scheduler sees it with `--jobs` unset: slots by cores, each start admitted by memory."""

    def __init__(self, slots: int, gpu: bool) -> None:
        self.slots = slots
        self.gpu = gpu  # the runs may use a GPU (a driver is here)
        self.memory_at_start = available_memory()
        self.gpu_free: Optional[int] = None  # bytes free on the GPU at the start, once the probe has told
        self._lock = threading.Lock()
        self._host_peak: Optional[int] = None
        self._gpu_peak: Optional[int] = None
        self._oom = False  # a run ran out of memory: runs of unknown size no longer share the GPU

    @classmethod
    def of_machine(cls) -> Room:
        return cls(cores(), os.path.exists("/dev/nvidiactl"))

    def admit(self, busy: int) -> bool:
        with self._lock:
            return admit(busy, self.slots, (self.memory_at_start, available_memory()), self._host_peak, self.gpu,
                         self.gpu_free, self._gpu_peak, self._oom)

    def note(self, result: RunResult) -> None:
        """A run ended: its peaks raise the need of the next one."""
        with self._lock:
            if result.exit.peak_rss:
                self._host_peak = max(self._host_peak or 0, result.exit.peak_rss)
            if result.gpu_peak is not None:
                self._gpu_peak = max(self._gpu_peak or 0, result.gpu_peak)
            if result.signature is not None and result.signature.kind is FailureKind.OUT_OF_MEMORY:
                self._oom = True

    def describe(self) -> dict:
        with self._lock:
            return {"slots": self.slots, "host_peak_bytes": self._host_peak, "gpu": self.gpu,
                    "gpu_peak_bytes": self._gpu_peak, "gpu_free_bytes": self.gpu_free}
