"""The findings in the user's source lines: the culprit kernel and each kernel of the walk, with its line.

The walk speaks kernel names; aoti/provenance.py knows which lines of the user's code each kernel comes from
(Inductor's kernel_information.json of the compile the walk read, and the exported program's nodes the hook
recorded). Each kernel is told once, where the evidence first names it; a kernel without a recorded line is
told by its FX node names, and the culprit says plainly when nothing was recorded.
"""
from __future__ import annotations

from typing import Optional

from ..aoti.hook_record import HookRecord
from ..aoti.provenance import Origin, ProgramNode, SourceMap, read_kernel_information
from ..aoti.wrapper import WrapperGraph
from .evidence import Evidence
from .facts import Fact, FactKind, SubjectKind, fact, kernel
from .findings import Findings, StageName


def source_map(graph: Optional[WrapperGraph], records: list[HookRecord]) -> SourceMap:
    """The provenance of the wrapper the walk read, and the exported program's nodes where every compile the
    hook saw exported the same program (several models' node names would collide)."""
    programs = {e.nodes for r in records for e in r.events if e.compiled and e.status == "returned" and e.nodes}
    program: dict[str, ProgramNode] = {n.name: n for n in programs.pop()} if len(programs) == 1 else {}
    return SourceMap(read_kernel_information(graph.path) if graph and graph.path else {}, program)


def walked_graph(out: Findings, evidence: Evidence) -> Optional[WrapperGraph]:
    """The wrapper the trace stage compiled (the one the walk read, with provenance), else any stage's."""
    for stage in sorted(out.stages, key=lambda s: s.name != StageName.TRACE):
        if stage.results and (graph := evidence.graph(stage.results[0])) is not None:
            return graph
    return None


def locate_findings(out: Findings, graph: Optional[WrapperGraph], sources: SourceMap) -> None:
    c = out.culprit
    if c is None or graph is None or not graph.launches:
        return
    origins: dict[str, Origin] = {}
    for launch in graph.launches:
        origins.setdefault(launch.name, sources.origin(launch.name, launch.handle, launch.source_nodes))
    told: set[str] = set()

    def tell(f: Fact) -> Fact:
        for s in f.subjects():
            origin = origins.get(s.name)
            if s.kind == SubjectKind.KERNEL and origin is not None and s.name not in told and origin.how != "none":
                told.add(s.name)
                return f.told(s.name, origin)
        return f

    step = next((i for i, f in enumerate(c.evidence) if f is c.summary), None)
    c.evidence[:] = [tell(f) for f in c.evidence]
    if step is not None:
        c.summary = c.evidence[step]
    if c.kernel and c.kernel in origins:
        c.origin = origins[c.kernel]
        if c.origin.how == "none":
            c.evidence.append(fact(FactKind.SOURCE, "no source line for {kernel}: the compile the walk read recorded "
                                   "no provenance (a prebuilt package, or a torch without INDUCTOR_PROVENANCE)",
                                   kernel=kernel(c.kernel)))
        elif not c.origin.lines:
            c.evidence.append(fact(FactKind.SOURCE, "no source line for {kernel}: the compile recorded only its FX "
                                   "nodes ({nodes}); the hook saw no exported program naming them",
                                   kernel=kernel(c.kernel), nodes=", ".join(c.origin.nodes)))
        elif c.summary is not None and not any(name == c.kernel for name, _ in c.summary.origins):
            c.summary = c.summary.told(c.kernel, c.origin)
