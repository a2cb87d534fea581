"""What the ladder concludes: each stage's runs and finding, the culprit and its evidence, the verdict. Data only:
report/ renders it (report/facts.py for the sentences, report/model.py for report.json)."""
from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass, field
from typing import Optional

from ..aoti import flags
from ..aoti.provenance import Origin
from ..run.types import CrashSite, Outcome, RunResult, Signature
from ..stats import Rate
from ..verdict import Verdict
from .facts import Fact, FactKind, fact


class CulpritKind(enum.StrEnum):
    KERNEL = "kernel"
    MODEL_INPUT = "model_input"
    CONSTANT = "constant"
    STALE_CONSTANT = "stale_constant"  # changed on the module after packaging: the package computes with its old copy
    FOLDED_CONSTANT = "folded_constant"  # folded into the generated code, then changed: no copy to update but a rebuild
    PRECISION = "precision"  # no conviction: where a rounding gap arises, the package the side nearer float64
    CUSTOM_OP = "custom_op"  # its fake function disagrees with the op
    OUTSIDE_INSTRUMENTED_KERNELS = "outside_instrumented_kernels"
    MISSING_CUSTOM_OP = "missing_custom_op"
    LOAD_ENVIRONMENT = "load_environment"
    UNKNOWN = "unknown"


class Cause(enum.StrEnum):
    """What a precision gap may come from, each told by a control recompile that removes it
    (diagnose/stages/precision.py)."""
    EAGER_ROUNDING = "eager_rounding"  # eager rounds a low-precision model after every op, a fused kernel once
    TF32 = "tf32"  # the package's matmul was compiled with TF32 allowed; eager's runs in full float32


class Control(enum.StrEnum):
    """What the control recompile for a cause showed."""
    PASSES = "passes"  # the script's check passes without the cause: the gap is the cause's
    STILL_FAILS = "still_fails"  # the gap is not the cause's alone
    INCONCLUSIVE = "inconclusive"  # it failed otherwise, or did not run: it says nothing of the gap


@dataclass(frozen=True)
class Precision:
    """A gap a control recompile is to explain: the cause it tests, and what it showed."""
    cause: Cause
    control: Optional[Control] = None  # None: not run yet


class StageName(enum.StrEnum):
    """The names of the stages that code names (the ladder, the stages that read each other's); the order they are
    climbed in is the registry's (diagnose/stages/__init__.py). A stage nothing else names needs no member here."""
    BASELINE = "baseline"
    SANITY = "sanity"
    DOCTOR = "doctor"
    DETERMINISM = "determinism"
    TRACE = "trace"
    FAKECHECK = "fakecheck"
    MEMCHECK = "memcheck"
    INSPECT = "inspect"
    EAGER = "eager"


class EvidenceKind(enum.StrEnum):
    CRASH = "crash"  # a crashed run's own account of where it faulted
    CONTRADICTION = "contradiction"  # accounts that cannot all be true: none of them convicts
    KIND_CHANGE = "kind_change"  # a flag set turned the failure into another kind
    CHECKER = "checker"  # a memory checker's report
    WALK = "walk"  # values a run printed or saved: the walk back from a bad value, or the comparison with eager


@dataclass(frozen=True)
class Entry:
    """One piece of a bisection's evidence ledger (diagnose/judge.py): what a run, or a stage's reading, saw."""
    kind: EvidenceKind
    stage: str
    run: str  # the run's folder under runs/; "" for a reading over a stage's runs
    names: Optional[str]  # the kernel, op or function it names, as the wrapper launches it where it maps
    fact: Fact
    site: Optional[CrashSite] = None  # a crash's: where the run's accounts agree it faulted (judge.account)


    def to_json(self) -> dict:
        return {"kind": self.kind.value, "stage": self.stage, "run": self.run, "names": self.names}


@dataclass(frozen=True)
class Gap:
    """One tensor a launch wrote, against eager (diagnose/eagerwalk.py): the walk's per-kernel numeric gap. The
    float64 columns say which side the program run in float64 takes, where the hook ran it."""
    launch: int  # the launch's place in the wrapper
    kernel: str
    tensor: str  # the buffer, by the user's name where it has one
    state: str  # agrees | differs | unjudged
    node: Optional[str] = None  # the eager value it was held against (the nearest)
    max_abs: Optional[float] = None
    max_rel: Optional[float] = None
    f64: Optional[float] = None  # the package's max abs against that node run in float64
    eager_f64: Optional[float] = None  # eager's own max abs against it
    rtol: Optional[float] = None
    atol: Optional[float] = None
    ulp: Optional[float] = None  # the gap to eager in units of the last place of the larger value in its dtype
    cosine: Optional[float] = None  # the cosine similarity of the package's tensor and eager's

    def to_json(self) -> dict:
        return {"launch": self.launch, "kernel": self.kernel, "tensor": self.tensor, "state": self.state,
                "node": self.node, "max_abs": self.max_abs, "max_rel": self.max_rel, "f64": self.f64,
                "eager_f64": self.eager_f64, "rtol": self.rtol, "atol": self.atol, "ulp": self.ulp,
                "cosine": self.cosine}


@dataclass
class Culprit:
    kind: CulpritKind
    kernel: Optional[str] = None  # a custom_op's: the op (`ns::op`), as the wrapper's proxy call names it
    input_index: Optional[int] = None
    input_name: Optional[str] = None  # the wrapper's name (arg1_1, proj_weight)
    user_name: Optional[str] = None  # the user's: forward's parameter name, or the constant's FQN
    evidence: list[Fact] = field(default_factory=list)
    probes: list[list[str]] = field(default_factory=list)
    summary: Optional[Fact] = None  # the one fact that convicts; the evidence list is the whole chain
    op: Optional[str] = None  # a custom op (`mylib::scale`) the package needs and the loading process lacks
    origin: Optional[Origin] = None  # the culprit kernel's source lines (diagnose/source.py)
    convicted_by: tuple[Entry, ...] = ()  # the ledger's entries the judge convicted from, each with its run
    gaps: tuple[Gap, ...] = ()  # a wrong value's walk against eager: each launch's output, in launch order
    precision: Optional[Precision] = None  # a precision gap's cause, as a control recompile tests it

    def __post_init__(self) -> None:
        # Given as its word too (a test, a stage's table): held as the enum, and a word that is none is refused.
        self.kind = CulpritKind(self.kind)

    @property
    def headline(self) -> Optional[Fact]:
        return self.summary or (self.evidence[0] if self.evidence else None)

    @property
    def pinned(self) -> bool:
        return self.kind != CulpritKind.UNKNOWN

    @property
    def from_crash(self) -> bool:
        """Whether a crashed run's own account of its fault named it (diagnose/judge.py)."""
        return self.headline is not None and self.headline.kind is FactKind.CRASH

    @property
    def named_by(self) -> str:
        """Who named it, in a sentence: a crashed run's account, else the memory checker's report."""
        return "the crashed run" if self.from_crash else "the memory checker"


# Stages whose failure rates are compared (with the baseline's, by Fisher's test) run exactly as the user runs
# the repro; the others carry the in-process hook, which records the packages they compile and load.
UNHOOKED = (StageName.BASELINE, StageName.DETERMINISM)


@dataclass
class Stage:
    name: str  # a StageName, or the word of a stage no other code names
    env: dict[str, str]
    results: list[RunResult] = field(default_factory=list)
    finding: Optional[Fact] = None
    skipped: Optional[str] = None
    tool: Optional[str] = None  # the checker the runs ran under (memcheck), as a command prefix
    planned: int = 0  # the runs the stage plans at most (progress says `run i/planned`); 0: each batch's own count
    hooked: Optional[bool] = None  # whether its runs carry the hook; None: by its name (UNHOOKED run the user's way)
    reuse_from: Optional[int] = None  # its runs from this one on take the flag set's stored package (RunSpec.reuse)

    @property
    def recompiled(self) -> bool:
        return flags.needs_compile(self.env)

    @property
    def hook(self) -> bool:
        return self.name not in UNHOOKED if self.hooked is None else self.hooked

    @property
    def rate(self) -> Rate:
        """Over the runs that ran: one that could not (an infrastructure error, a timeout the limit explains) is
        evidence neither way, and counted as a pass it would narrow the bound on a rare fault."""
        ran = [r for r in self.results if r.outcome is not Outcome.INFRA_ERROR]
        return Rate(sum(r.failed for r in ran), len(ran))

    @property
    def failures(self) -> list[RunResult]:
        return [r for r in self.results if r.failed]


@dataclass
class Findings:
    verdict: Verdict
    signature: Optional[Signature]
    baseline: Rate
    stages: list[Stage]
    culprit: Optional[Culprit] = None
    summary: Optional[Fact] = None
    source: Optional[tuple[str, str]] = None
    source_nodes: str = ""
    next_steps: list[str] = field(default_factory=list)
    interrupted: bool = False
    masked: Optional[Fact] = None  # how a fault that passes at baseline was shown anyway
    constants: dict = field(default_factory=dict)  # report.json's `constants` (diagnose/constants.py)
    verdict_s: Optional[float] = None  # seconds from the first run to the culprit; the rate may run on after it
    verdict_runs: Optional[int] = None  # runs of every stage up to the verdict (compile-only runs not counted)
    ledger: list[Entry] = field(default_factory=list)  # every run's evidence, whichever stage ran it (judge.py)


def dominant(results: list[RunResult]) -> Optional[Signature]:
    """The most common failure signature among the runs."""
    sigs = [r.signature for r in results if r.failed and r.signature]
    if not sigs:
        return None
    top, _ = Counter(s.fingerprint for s in sigs).most_common(1)[0]
    return next(s for s in sigs if s.fingerprint == top)


def interrupted(stages: list[Stage]) -> Findings:
    """What the finished runs support where an interrupt came before the verdict: the baseline's rate so far."""
    base = stages[0].rate if stages else Rate(0, 0)
    verdict = Verdict.REPRODUCED if base.failures else Verdict.INCONCLUSIVE
    sig = dominant(stages[0].results) if stages else None
    summary = (fact(FactKind.REPRODUCTION, "interrupted: baseline {rate}", rate=base.describe()) if base.runs
               else fact(FactKind.REPRODUCTION, "interrupted: no run finished"))
    return Findings(verdict, sig, base, stages, summary=summary, interrupted=True)
