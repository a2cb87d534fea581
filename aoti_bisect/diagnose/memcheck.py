"""What a memory checker's reports convict: an invalid access names the kernel (or native function) that made it."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from ..aoti.sanitizer import SanitizerReport
from ..aoti.wrapper import Launch, WrapperGraph, spelling
from .facts import Fact, FactKind, fact, kernel, note
from .findings import Culprit, CulpritKind


@dataclass(frozen=True)
class CheckerFinding:
    finding: Fact
    culprit: Optional[Culprit] = None


def launch_for(function: Optional[str], graph: Optional[WrapperGraph]) -> Optional[Launch]:
    """The wrapper's launch of the kernel a checker, a core dump or a native stack names. Inductor's kernels carry
    their launch name; a user Triton kernel `k` is launched as `k_0` (one suffix per specialisation)."""
    if not function or graph is None:
        return None
    exact = graph.by_name(function)
    if exact:
        return exact[0]
    named = spelling(function)
    suffixed = re.compile(rf"{re.escape(named)}_\d+")
    return next((launch for launch in graph.launches if spelling(launch.name) == named), None) or next(
        (launch for launch in graph.launches if suffixed.fullmatch(spelling(launch.name))), None)


def memcheck_culprit(reports: list[SanitizerReport], graph: Optional[WrapperGraph],
                     suspect: Optional[str]) -> CheckerFinding:
    with_errors = [r for r in reports if r.errors]
    if not with_errors:
        if reports and all(r.refused for r in reports):
            return CheckerFinding(fact(FactKind.CHECKER, "the checker could not check this repro: {why}",
                                       why=reports[0].refused))
        if not any(r.finished for r in reports):
            return CheckerFinding(fact(FactKind.CHECKER, "the checker never finished ({n} run(s): crashed or timed "
                                       "out before its summary), so it proves nothing either way", n=len(reports)))
        return CheckerFinding(fact(FactKind.CHECKER, "0 errors in {n} checked run(s)", n=len(reports)))
    report = with_errors[0]
    # An access names the kernel that made it; API errors and asserts that follow it name none.
    err = next((e for e in report.errors if e.function), report.errors[0])
    total = report.total if report.total is not None else sum(e.count for e in report.errors)
    finding = fact(FactKind.CHECKER, "{tool} found {total} error(s) in {n}/{of} checked run(s): {error}",
                   tool=report.tool, total=total, n=len(with_errors), of=len(reports), error=err.describe())
    evidence = [fact(FactKind.CHECKER, "{tool}: {error}", tool=report.tool, error=err.describe())] + [
        fact(FactKind.CHECKER, "{tool} also: {error}", tool=report.tool, error=e.describe())
        for e in report.errors if e is not err][:3]
    culprit = convict_function(err.function, graph, suspect, evidence, FactKind.CHECKER)
    culprit.summary = culprit.evidence[0]
    return CheckerFinding(finding, culprit)


def convict_function(function: Optional[str], graph: Optional[WrapperGraph], suspect: Optional[str],
                     evidence: list[Fact], kind: FactKind) -> Culprit:
    """The culprit a native or device function names (a checker's access, a crash's faulting frame): the wrapper's
    launch of it, else the graph's custom op it belongs to, else the function itself, outside the kernels."""
    launch = launch_for(function, graph)
    if launch is not None:
        if suspect and suspect.lower() != launch.name.lower():
            evidence.append(fact(kind, "the trace's unfinished launch was {suspect}, not {launch}: the "
                                 "checker saw the access itself, the trace only where the process stopped",
                                 suspect=kernel(suspect), launch=kernel(launch.name)))
        return Culprit(CulpritKind.KERNEL, kernel=launch.name, evidence=evidence)
    if function is None:
        return Culprit(CulpritKind.UNKNOWN, evidence=evidence + [note("the checker named no function for the access")])
    if graph is None:
        return Culprit(CulpritKind.KERNEL, kernel=function, evidence=evidence + [fact(
            kind, "{function} is not mapped to a launch: no generated wrapper was compiled by these runs",
            function=kernel(function))])
    custom = [launch.name for launch in graph.launches if "::" in launch.name]
    # A C++ op's function usually bears the op's name (`rare_gather(at::Tensor const&, ...)` for `ns::rare_gather`).
    named = [op for op in custom if re.search(rf"\b{re.escape(op.split('::')[-1])}\b", function)]
    if len(named) == 1 or len(custom) == 1:
        op = named[0] if len(named) == 1 else custom[0]
        evidence.append(fact(kind, "{function} is not a kernel of the generated wrapper; the graph's custom op "
                             "{op} runs outside instrumented kernels", function=function, op=kernel(op)))
        return Culprit(CulpritKind.OUTSIDE_INSTRUMENTED_KERNELS, kernel=op, evidence=evidence)
    evidence.append(fact(kind, "{function} is not a kernel of the generated wrapper" + (
        " (custom ops in the graph: {custom:, })" if custom else ""), function=function, custom=tuple(custom)))
    return Culprit(CulpritKind.OUTSIDE_INSTRUMENTED_KERNELS, kernel=function, evidence=evidence)
