"""One judge: the evidence of every run of every stage in one ledger, and what it convicts.

Stages produce evidence; the judge decides. Every run that lands adds what it saw to the `Ledger` (a crashed run's
own account of its fault: core dump, native stack, a device assert's printed lines, a generated kernel's throw; a
failure of another kind than the baseline's), and the stages add what they read (a checker's report, the walk's
finding). After each stage the ladder asks `crash_verdict`: the first crash that names a kernel or op pins it,
whichever stage ran it. Two accounts of one fault that name different launches, or a device fault in a generated
kernel the wrapper never launches, are stated and convict nothing. Pure: no process, no file.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Optional

from ..aoti.wrapper import WrapperGraph, generated, spelling
from ..failure import MEMORY_FAULTS, FailureKind
from ..run.types import CrashSite, RunResult
from .facts import Fact, FactKind, fact, kernel
from .findings import Culprit, CulpritKind, Entry, EvidenceKind, Stage
from .memcheck import convict_function, launch_for


@dataclass
class Ledger:
    entries: list[Entry] = field(default_factory=list)
    _runs: set[str] = field(default_factory=set)

    def add(self, entry: Entry) -> None:
        if entry not in self.entries:
            self.entries.append(entry)

    def add_runs(self, stages: Iterable[Stage], graph: Optional[WrapperGraph]) -> None:
        """What the runs not read yet saw: each crash's account, each failure whose kind differs from the
        baseline's. A run is read once, with the launch graph known when it is read."""
        stages = list(stages)
        base = next((r.signature.kind for s in stages[:1] for r in s.failures if r.signature), None)
        for s in stages:
            for r in s.results:
                if r.spec.name in self._runs:
                    continue
                self._runs.add(r.spec.name)
                for entry in run_entries(str(s.name), r, graph, base):
                    self.add(entry)

    def walked(self, stage: str, run: str, culprit: Culprit) -> None:
        """A walk convicted from the values run `run` printed or saved: on the ledger, and among what convicted."""
        entry = Entry(EvidenceKind.WALK, stage, run, culprit.kernel or culprit.input_name, culprit.headline)
        self.add(entry)
        culprit.convicted_by = (*culprit.convicted_by, entry)

    def crashes(self) -> list[Entry]:
        return [e for e in self.entries if e.kind is EvidenceKind.CRASH]

    def memory_fault(self) -> Optional[Entry]:
        """The first run, of any stage, whose failure was a memory fault though the baseline's was not."""
        return next((e for e in self.entries if e.kind is EvidenceKind.KIND_CHANGE
                     and e.fact.values.get("now") in MEMORY_FAULTS), None)


def run_entries(stage: str, r: RunResult, graph: Optional[WrapperGraph], base: Optional[str]) -> list[Entry]:
    if not r.failed or r.signature is None or r.spec.compile_only:
        return []
    found = []
    sig = r.signature
    if base is not None and sig.kind != base and sig.kind != FailureKind.INFRA:
        found.append(Entry(EvidenceKind.KIND_CHANGE, stage, r.spec.name, None, fact(
            FactKind.REPRODUCTION, "run {run} failed with {now}, not with the baseline's {was}: {message}",
            run=r.spec.name, now=sig.kind, was=base, message=sig.message)))
    if r.crash is None or sig.phase.before_run:
        return found
    site, problem = account(r, graph)
    if problem is not None:
        found.append(Entry(EvidenceKind.CONTRADICTION, stage, r.spec.name, None, problem))
    elif site is not None:
        found.append(Entry(EvidenceKind.CRASH, stage, r.spec.name, _launched(site.function, graph), fact(
            FactKind.CRASH, "{run} faulted in {site}, by the run's own {source}", run=r.spec.name,
            site=site.describe(), source=site.source), site))
    return found


def account(r: RunResult, graph: Optional[WrapperGraph]) -> tuple[Optional[CrashSite], Optional[Fact]]:
    """(the crash site a run's accounts agree on, None) or (None, why they cannot be believed)."""
    sites = [s for s in (r.crash, r.crash_also) if s is not None]
    if graph is None:
        return (sites[0] if sites else None), None
    mapped = [(s, launch) for s in sites if (launch := launch_for(bare(s.function), graph)) is not None]
    if len({spelling(launch.name) for _, launch in mapped}) > 1:
        (a, _), (b, _) = mapped[:2]
        return None, fact(FactKind.CRASH, "{run}'s accounts disagree: its {a} names {fa}, its {b} names {fb}; both "
                          "are launches of the wrapper, so neither convicts", run=r.spec.name, a=a.source,
                          fa=kernel(a.function), b=b.source, fb=kernel(b.function))
    if mapped:
        return mapped[0][0], None
    unknown = [s for s in sites if s.on_device and generated(bare(s.function))]
    if unknown:
        return None, fact(FactKind.CRASH, "{run}'s {source} names {function}, a generated kernel the wrapper never "
                          "launches: not believed", run=r.spec.name, source=unknown[0].source,
                          function=kernel(unknown[0].function))
    return (sites[0] if sites else None), None


def crash_verdict(ledger: Ledger, graph: Optional[WrapperGraph]) -> Optional[Culprit]:
    """The culprit the crashed runs of every stage name, when any could tell where it faulted: the site most of them
    name, a device's account before a host's (an abort as a CUDA error unwinds is where it was reported)."""
    sites = [(e, e.site) for e in ledger.crashes() if e.site is not None]
    sites = [(e, s) for e, s in sites if s.on_device] or sites
    if not sites:
        return None
    counts = Counter(bare(s.function) for _, s in sites)
    function, count = counts.most_common(1)[0]
    first, site = next((e, s) for e, s in sites if bare(s.function) == function)
    evidence = [fact(FactKind.CRASH, "{n}/{of} crashed run(s) faulted in {site}, by the run's own {source} "
                     "(first: {run}, {stage} stage)", n=count, of=len(sites), site=site.describe(),
                     source=site.source, run=first.run, stage=first.stage)]
    if len(counts) > 1:
        evidence.append(fact(FactKind.CRASH, "other crashed runs faulted in {others:, }",
                             others=tuple(f for f in counts if f != function)))
    evidence += [e.fact for e in ledger.entries if e.kind is EvidenceKind.CONTRADICTION]
    if graph is None and not site.on_device and not generated(function):
        culprit = Culprit(CulpritKind.OUTSIDE_INSTRUMENTED_KERNELS, kernel=site.function, evidence=evidence)
    else:
        culprit = convict_function(function, graph, None, evidence, FactKind.CRASH)
    culprit.summary = culprit.evidence[0]
    culprit.convicted_by = tuple(e for e, s in sites if bare(s.function) == function)
    return culprit


def _launched(function: str, graph: Optional[WrapperGraph]) -> str:
    launch = launch_for(bare(function), graph)
    return launch.name if launch is not None else bare(function)


def bare(function: str) -> str:
    """A kernel's name as the wrapper launches it: without a C++ signature or an OpenMP outlining suffix."""
    return function.split("(", 1)[0].split("._omp_fn", 1)[0] if generated(function) else function
