"""What a stage may use of the ladder that runs it, declared: `StageContext`, with the options and the clues it reads.

The ladder (ladder.py) implements StageContext; a stage (stages/) is handed one and knows nothing else of the ladder,
so a stage's test hands it a fake.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Optional, Protocol

from ..aoti.hook_record import PackageEvent
from ..aoti.wrapper import WrapperGraph
from ..run.checkers import Checker, Missing
from ..run.types import RunResult
from ..stats import DEFAULT_MAX_RUNS, Rate
from .evidence import Evidence
from .facts import Fact, Namer
from .findings import Culprit, Findings, Stage
from .judge import Ledger


@dataclass
class Options:
    runs: Optional[int] = None  # explicit baseline runs; None = adaptive
    min_runs: int = 2
    max_runs: int = DEFAULT_MAX_RUNS
    timeout: float = 600.0
    stages: Optional[tuple[str, ...]] = None  # the stages --stages asked for by name; None: every one (asked)
    inspect_cap: int = 8
    budget: float = 300.0  # seconds the baseline's rate may run on after the verdict
    reuse_baseline: bool = False  # the baseline's runs after its first wave take the stored package (RunSpec.reuse)
    # The memory checker per device ("cuda", "cpu"), or why there is none; found by the session.
    checkers: tuple[tuple[str, tuple[Checker, ...] | Missing], ...] = ()
    sanitize: bool = False  # run the memcheck stage whatever the failure (or none) looks like
    # The load doctor's debugger: (command prefix, None), or ((), why there is none); found by the session.
    debugger: tuple[tuple[str, ...], Optional[str]] = ((), "no debugger looked for")

    def asked(self, name: str) -> bool:
        """Whether --stages asked for this stage."""
        return self.stages is None or name in self.stages

    def asked_beyond_baseline(self) -> bool:
        """Whether --stages asked for more than the baseline, which always runs."""
        return self.stages is None or bool(set(self.stages) - {"baseline"})


@dataclass
class Clues:
    """What earlier stages found that later ones read."""
    estimate: float = 1.0  # the failure rate runs are planned from: the lower end of the best interval so far
    likely: float = 1.0  # the best rate's point estimate: how many runs go at once (StageContext.until_seen)
    trace: Optional[Stage] = None  # the trace stage: its compile's launch graph, its failing runs
    suspect: Optional[str] = None  # the launch the failing runs never finished (or the checker's kernel)
    checker: list[Fact] = field(default_factory=list)  # a memory checker's lines, ahead of the walk's
    prebuilt: Optional[list[PackageEvent]] = None  # what the failing hooked runs loaded but did not build
    rate_left: int = 0  # baseline runs of an explicit --runs left for after the verdict (a checker or crash went first)
    # A kernel a run's own evidence named: a crashed run's account of its fault (diagnose/judge.py), or a checker's
    # invalid access behind a wrong value (stages/memcheck.py). The walk starts there, after the verdict, and it is
    # the culprit unless the walk finds where its bad inputs came from.
    named: Optional[Culprit] = None
    # The crash's kernel checks a model input's value as given against a bound fixed at export (bounds.index_given):
    # no size of an input explains that fault.
    given: Optional[Fact] = None
    eager_walked: bool = False  # the eager stage compared the failing call's every saved tensor with eager


Stop = Callable[[list[RunResult]], bool]


class StageContext(Protocol):
    """The ladder as a stage sees it: run helpers, the evidence of the runs so far, clues and options."""
    opt: Options
    clues: Clues
    evidence: Evidence
    namer: Namer  # the user's names, learnt from the hooked runs so far
    ledger: Ledger  # every run's evidence so far, whichever stage ran it (judge.py)
    stages: list[Stage]  # every stage so far, in the order it ran: the baseline first

    # -- running: each adds its stage to `stages` ---------------------------------------------------
    def run_stage(self, stage: Stage, n: int, stop: Stop = ..., prefix: tuple[str, ...] = (),
                  slowdown: float = 1.0) -> Stage:
        """Up to n runs of a new stage; `stop` sees its results so far."""

    def extend(self, stage: Stage, n: int, stop: Stop = ..., prefix: tuple[str, ...] = (),
               slowdown: float = 1.0) -> Stage:
        """Up to n more runs of a stage already run."""

    def until_seen(self, stage: Stage) -> Stage:
        """Runs of a new stage until its first failure, at most the runs that see one with 99% probability."""

    def compile_only(self, env: dict[str, str]) -> None:
        """One run that only compiles the repro's packages under `env`, for a later stage to load."""

    def repeat(self, rate: Optional[float] = None) -> int:
        """Runs that see a failure of `rate` (default: the planning rate) with 99% probability."""

    def raise_estimate(self, rate: Rate) -> None:
        """A stage measured a higher rate: later stages plan from it."""

    def skip(self, name: str, why: str) -> None:
        """The stage does not run, and says why."""

    def ran(self, name: str) -> bool:
        """Whether a stage of that name ran (or was skipped) already."""

    # -- reading the runs so far ----------------------------------------------------------------------
    def graph(self, stage: Optional[Stage]) -> Optional[WrapperGraph]:
        """The launch graph a stage's compile generated."""

    def any_graph(self) -> Optional[WrapperGraph]:
        """The trace stage's launch graph, else the first any stage compiled."""

    def is_cuda(self, default: bool = True) -> bool:
        """Whether the repro runs on CUDA, as far as the runs so far tell (`default` where they do not)."""

    def instrumented(self, level: int, kernels: tuple[str, ...] = ()) -> tuple[dict[str, str], tuple[str, ...]]:
        """The env that hands runs instrumented copies of the packages they loaded without building them."""

    def gpu_env(self) -> dict[str, str]:
        """The determinism flags, where later stages keep them."""

    # -- the baseline's questions -----------------------------------------------------------------------
    def check_early(self, results: list[RunResult]) -> bool:
        """Whether a CUDA repro's checker runs now, after a first run that passed."""

    def check_first(self, results: list[RunResult]) -> bool:
        """Whether the memory checker goes before the stages that wait for crashes."""

    def judge(self, out: Findings) -> None:
        """Reads the runs so far into the evidence ledger and convicts what a crash named (diagnose/judge.py)."""
