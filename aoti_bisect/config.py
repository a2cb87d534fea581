"""What one `aoti-bisect run` is asked to do: built once by its caller (the CLI, a scenario check, a night's
bisection), read by the session that carries it out."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .run.process import OutputLimits
from .stats import DEFAULT_MAX_RUNS


@dataclass(frozen=True)
class RunConfig:
    run_dir: str
    argv: tuple[str, ...]
    jobs: Optional[int] = None  # None: as many at once as the machine has room for (run/slots.py)
    runs: Optional[int] = None  # None: the ladder's own count (diagnose/ladder.py)
    max_runs: int = DEFAULT_MAX_RUNS
    timeout: float = 600.0
    stages: Optional[tuple[str, ...]] = None  # the stages asked for; None: every one (a night's bisection)
    python_script: bool = True  # argv runs a Python script: keep a copy, and torch must import
    limits: OutputLimits = OutputLimits()
    cache_root: Optional[str] = None  # None: <run_dir>/cache
    redact_paths: bool = False
    python: Optional[str] = None  # the repro's interpreter; None: the one argv names (run/probe.py interpreter_of)
    sanitize: bool = False
    sanitizer: Optional[str] = None
    sanitizer_tools: tuple[str, ...] = ("memcheck",)
    reuse: str = "hooked"  # aoti/flags.py REUSE_MODES
    warm: bool = True  # repeated runs fork from a warm interpreter (run/warm.py)
    ahead: bool = True  # compile later stages' flag sets in idle slots (Scheduler.ahead)
    budget: float = 300.0  # seconds the baseline's rate may run on after a verdict that did not wait for it

    def __post_init__(self) -> None:  # a caller's lists, kept as tuples: the record never changes
        object.__setattr__(self, "argv", tuple(self.argv))
        if self.stages is not None:
            object.__setattr__(self, "stages", tuple(self.stages))
