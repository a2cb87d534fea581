"""What a failing run's signature says: the kind of failure and the AOTI phase it happened in (run/classify.py
decides them; report.json's `signature` and every stage's `signatures` hold their values)."""
from __future__ import annotations

import enum


class FailureKind(enum.StrEnum):
    ILLEGAL_MEMORY_ACCESS = "illegal_memory_access"
    DEVICE_ASSERT = "device_assert"
    INDEX_OUT_OF_BOUNDS = "index_out_of_bounds"
    NAN_INF = "nan_inf"
    INPUT_MISMATCH = "input_mismatch"
    DEVICE_MISMATCH = "device_mismatch"
    OUT_OF_MEMORY = "out_of_memory"
    SEGFAULT = "segfault"
    ABORT = "abort"
    CRASH = "crash"
    TIMEOUT = "timeout"
    PYTHON_EXCEPTION = "python_exception"
    SCRIPT_ERROR = "script_error"
    COMPILE_ERROR = "compile_error"
    INFRA = "infra"

    @property
    def is_crash(self) -> bool:
        """The process died on a signal (or aborted) without saying why in Python: a debugger's backtrace says."""
        return self in CRASHES

    @property
    def is_memory_fault(self) -> bool:
        """A bad access, on the device or in the process: what a memory checker can explain."""
        return self in MEMORY_FAULTS

    @property
    def is_cuda_fault(self) -> bool:
        """A fault only a GPU raises: the repro is a CUDA one whatever else it says."""
        return self in CUDA_FAULTS

    @property
    def stops_the_process(self) -> bool:
        """The failure stops the process (or hangs it) at a kernel, rather than letting it compute a wrong value:
        where every instrumented launch finished, the fault lies outside them."""
        return self in STOPS_THE_PROCESS


CRASHES = frozenset({FailureKind.SEGFAULT, FailureKind.ABORT, FailureKind.CRASH})
MEMORY_FAULTS = CRASHES | {FailureKind.ILLEGAL_MEMORY_ACCESS}
CUDA_FAULTS = frozenset({FailureKind.ILLEGAL_MEMORY_ACCESS, FailureKind.DEVICE_ASSERT})
STOPS_THE_PROCESS = MEMORY_FAULTS | CUDA_FAULTS | {FailureKind.INDEX_OUT_OF_BOUNDS, FailureKind.TIMEOUT,
                                                   FailureKind.OUT_OF_MEMORY}


class Phase(enum.StrEnum):
    EXPORT = "export"
    COMPILE = "compile"
    LOAD = "load"
    RUN = "run"
    UNKNOWN = "unknown"

    @property
    def before_run(self) -> bool:
        """The failure happened before any kernel of the model ran (the load doctor's, not the runtime ladder's)."""
        return self in BEFORE_RUN


BEFORE_RUN = frozenset({Phase.EXPORT, Phase.COMPILE, Phase.LOAD})

