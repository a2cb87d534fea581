"""The value types of one run, passed between the harness, the classifier, the ladder and the nightly."""
from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Optional

from ..failure import FailureKind, Phase


class Outcome(str, enum.Enum):
    PASSED = "passed"
    FAILED = "failed"
    CRASHED = "crashed"
    TIMEOUT = "timeout"
    INFRA_ERROR = "infra_error"

    @property
    def is_failure(self) -> bool:
        return self in (Outcome.FAILED, Outcome.CRASHED, Outcome.TIMEOUT)


@dataclass(frozen=True)
class RunSpec:
    """One execution of the repro: what to run and under which env overlay."""

    argv: tuple[str, ...]
    stage: str
    index: int
    env: tuple[tuple[str, str], ...] = ()
    timeout: float = 600.0
    hook: bool = False  # run with the in-process hook (child/hook), which records packages in hook.json
    # Compiles for a later stage and stops at its first package load (Scheduler.ahead): it stands for no stage.
    compile_only: bool = False
    # Carries the hook only to take its flag set's stored package (a baseline run after its first wave): nothing
    # diagnostic, so it fails as the user's runs do, without a compile each time.
    reuse: bool = False
    place: tuple[int, int] = (0, 0)  # run i of the n its stage plans, for progress lines; (0, 0): not known

    @property
    def env_dict(self) -> dict[str, str]:
        return dict(self.env)

    @property
    def name(self) -> str:
        return f"{self.stage}-{self.index:03d}"


@dataclass(frozen=True)
class Signature:
    kind: FailureKind
    phase: Phase
    message: str
    kernel: Optional[str] = None
    fingerprint: str = ""

    def __post_init__(self) -> None:
        # Given as their words too (a record read back): held as the enums, and a word that is none is refused.
        object.__setattr__(self, "kind", FailureKind(self.kind))
        object.__setattr__(self, "phase", Phase(self.phase))

    def to_json(self) -> dict:
        return {
            "kind": self.kind,
            "phase": self.phase,
            "message": self.message,
            "kernel": self.kernel,
            "fingerprint": self.fingerprint,
        }


@dataclass(frozen=True)
class ProcessExit:
    """What the operating system told us about a finished child."""

    returncode: Optional[int]
    signal: Optional[int]
    timed_out: bool
    duration: float
    log_bytes: int
    dropped_bytes: int = 0
    launch_error: Optional[str] = None
    warm: bool = False  # forked from a warm interpreter (run/warm.py), not started cold
    peak_rss: Optional[int] = None  # bytes the run's processes held at most, sampled (process.resident_bytes)


DEVICE_DUMP = "CUDA core dump"
DEVICE_ASSERT = "device-side assert's printed lines"
KERNEL_THROW = "exception, thrown by the kernel's own check"


@dataclass(frozen=True)
class CrashSite:
    """Where a crashed run faulted, as the run itself told: its native stack (run/witness.py) or its CUDA core
    dump (aoti/cudacore.py)."""

    how: str  # "SIGSEGV", "Warp Illegal Address", "Warp Assert"
    function: str  # the faulting function as its object names it: a C++ function, a Triton kernel, a Python function
    location: Optional[str] = None  # "main.cpp:18", "c4xy....py:23"
    library: Optional[str] = None  # the file it lives in (basename)
    detail: str = ""  # grid/block/thread of a device fault; the native frame that called it; the faulting address
    source: str = "native stack"  # what told: "native stack", "Python stack", DEVICE_DUMP, DEVICE_ASSERT, KERNEL_THROW

    @property
    def on_device(self) -> bool:
        """A device exception the driver dumped, or a failed device assert the device printed: a kernel faulted,
        whatever the host did next."""
        return self.source in (DEVICE_DUMP, DEVICE_ASSERT)

    def describe(self) -> str:
        where = f" ({self.location})" if self.location else (f" (in {self.library})" if self.library else "")
        return f"{self.how} in {self.function}{where}" + (f"; {self.detail}" if self.detail else "")

    def to_json(self) -> dict:
        return {"how": self.how, "function": self.function, "location": self.location, "library": self.library,
                "detail": self.detail, "source": self.source}


@dataclass(frozen=True)
class RunResult:
    spec: RunSpec
    outcome: Outcome
    exit: ProcessExit
    run_dir: str
    log_path: str
    signature: Optional[Signature] = None
    cache_dir: str = ""
    crash: Optional[CrashSite] = None  # where the run faulted, when it crashed and could tell
    # Why a crashed run could not tell where (no witness, an unreadable dump): one line for the report.
    crash_problem: Optional[str] = None
    # A second account of the same fault that names another function: a device assert's printed lines beside the
    # core dump (cuda-gdb spells some kernels its own way, and a dump can be of another lane's fault).
    crash_also: Optional[CrashSite] = None
    phases: Optional[Mapping[str, float]] = None  # seconds per phase of the run (run/phases.py)
    gpu_peak: Optional[int] = None  # bytes torch's allocator reserved at most on a GPU, as the hook saw at exit

    @property
    def failed(self) -> bool:
        return self.outcome.is_failure

    def to_json(self) -> dict:
        return {
            "name": self.spec.name,
            "outcome": self.outcome.value,
            "returncode": self.exit.returncode,
            "signal": self.exit.signal,
            "duration_s": round(self.exit.duration, 3),
            "log": self.log_path,
            "log_bytes": self.exit.log_bytes,
            "dropped_bytes": self.exit.dropped_bytes,
            "warm": self.exit.warm,
            "signature": self.signature.to_json() if self.signature else None,
            "crash": self.crash.to_json() if self.crash else None,
            "crash_problem": self.crash_problem,
            "crash_also": self.crash_also.to_json() if self.crash_also else None,
            "phases": dict(self.phases) if self.phases is not None else None,
            "peak_rss_bytes": self.exit.peak_rss,
            "gpu_peak_bytes": self.gpu_peak,
        }


# run_batch(specs, on_result, stop): runs specs (in index order, several at once where allowed) until all ran
# or stop(results so far) says enough; on_result sees each result as it lands. The harness is one; the
# ladder's and the nightly's tests hand in fakes.
RunBatch = Callable[[list[RunSpec], Callable[[RunResult], None], Callable[[list[RunResult]], bool]], None]
