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


class Phase(enum.StrEnum):
    EXPORT = "export"
    COMPILE = "compile"
    LOAD = "load"
    RUN = "run"
    UNKNOWN = "unknown"


# A failure in these phases happened before any kernel of the model ran (the load doctor's, not the runtime ladder's).
BEFORE_RUN = frozenset({Phase.EXPORT, Phase.COMPILE, Phase.LOAD})

