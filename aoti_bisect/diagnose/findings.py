"""What the ladder concludes: each stage's runs and finding, the culprit and its evidence, the verdict."""
from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Optional

from ..aoti import flags
from ..aoti.provenance import Origin
from ..run.types import RunResult, Signature
from ..stats import Rate
from ..verdict import Verdict


@dataclass
class Culprit:
    kind: str  # kernel | model_input | constant | custom_op | outside_instrumented_kernels | missing_custom_op |
    # load_environment | unknown
    kernel: Optional[str] = None  # a custom_op's: the op (`ns::op`), as the wrapper's proxy call names it
    input_index: Optional[int] = None
    input_name: Optional[str] = None  # the wrapper's name (arg1_1, proj_weight)
    user_name: Optional[str] = None  # the user's: forward's parameter name, or the constant's FQN
    evidence: list[str] = field(default_factory=list)
    stats: list[dict] = field(default_factory=list)
    probes: list[list[str]] = field(default_factory=list)
    summary: str = ""  # the one line that convicts; the evidence list is the whole chain
    op: Optional[str] = None  # a custom op (`mylib::scale`) the package needs and the loading process lacks
    origin: Optional[Origin] = None  # the culprit kernel's source lines (diagnose/source.py)
    kernel_origins: dict[str, dict] = field(default_factory=dict)  # each kernel the evidence names -> its origin

    def to_json(self) -> dict:
        return {"kind": self.kind, "kernel": self.kernel, "summary": self.summary or (self.evidence or [""])[0],
                "input_index": self.input_index,
                "input_name": self.input_name, "user_name": self.user_name, "evidence": self.evidence, "stats": self.stats,
                "probes": self.probes, "op": self.op, "origin": self.origin.to_json() if self.origin else None,
                "kernel_origins": self.kernel_origins}


def input_phrase(index: int, placeholder: str, user: Optional[str] = None) -> str:
    """How evidence names a model input; diagnose/names.py rewrites exactly this phrase once names are known."""
    return f"model input {index} (`{user}`, wrapper {placeholder})" if user else f"model input {index} ({placeholder})"


def constant_phrase(placeholder: str, fqn: Optional[str] = None) -> str:
    return f"constant `{fqn}` (wrapper {placeholder})" if fqn else f"constant {placeholder}"


# Stages whose failure rates are compared (with the baseline's, by Fisher's test) run exactly as the user runs
# the repro; the others carry the in-process hook, which records the packages they compile and load.
UNHOOKED = ("baseline", "determinism")


@dataclass
class Stage:
    name: str
    env: dict[str, str]
    results: list[RunResult] = field(default_factory=list)
    finding: str = ""
    skipped: Optional[str] = None
    tool: Optional[str] = None  # the checker the runs ran under (memcheck), as a command prefix

    @property
    def recompiled(self) -> bool:
        return flags.needs_compile(self.env)

    @property
    def hook(self) -> bool:
        return self.name not in UNHOOKED

    @property
    def rate(self) -> Rate:
        return Rate(sum(r.failed for r in self.results), len(self.results))

    @property
    def failures(self) -> list[RunResult]:
        return [r for r in self.results if r.failed]

    def to_json(self) -> dict:
        return {"name": self.name, "env": self.env, "recompiled": self.recompiled, "runs": self.rate.runs,
                "failures": self.rate.failures, "rate": self.rate.to_json(), "finding": self.finding,
                "skipped": self.skipped, "logs": [r.log_path for r in self.results],
                "rerun": [os.path.join(r.run_dir, "rerun.sh") for r in self.results[:1]],
                "failing_log": self.failures[0].log_path if self.failures else None,
                "signatures": dict(Counter(r.signature.kind for r in self.failures if r.signature)),
                "tool": self.tool}


@dataclass
class Findings:
    verdict: Verdict
    signature: Optional[Signature]
    baseline: Rate
    stages: list[Stage]
    culprit: Optional[Culprit] = None
    summary: str = ""
    source: Optional[tuple[str, str]] = None
    source_nodes: str = ""
    next_steps: list[str] = field(default_factory=list)
    interrupted: bool = False
    masked: Optional[str] = None  # how a fault that passes at baseline was shown anyway
    checker_evidence: list[str] = field(default_factory=list)  # a memory checker's lines, ahead of the walk's
    constants: dict = field(default_factory=dict)  # report.json's `constants` (diagnose/constants.py)
