"""The findings in the user's source lines: the culprit kernel and each kernel of the walk, with its line.

The walk speaks kernel names; aoti/provenance.py knows which lines of the user's code each kernel comes from
(Inductor's kernel_information.json of the compile the walk read, and the exported program's nodes the hook
recorded). Each kernel is told once, where the evidence first names it; a kernel without a recorded line is
told by its FX node names, and the culprit says plainly when nothing was recorded.
"""
from __future__ import annotations

import re
from typing import Optional

from ..aoti.hook_record import HookRecord
from ..aoti.provenance import Origin, ProgramNode, SourceMap, read_kernel_information
from ..aoti.wrapper import WrapperGraph
from .findings import Findings


def source_map(graph: Optional[WrapperGraph], records: list[HookRecord]) -> SourceMap:
    """The provenance of the wrapper the walk read, and the exported program's nodes where every compile the
    hook saw exported the same program (several models' node names would collide)."""
    programs = {e.nodes for r in records for e in r.events if e.compiled and e.status == "returned" and e.nodes}
    program: dict[str, ProgramNode] = {n.name: n for n in programs.pop()} if len(programs) == 1 else {}
    return SourceMap(read_kernel_information(graph.path) if graph and graph.path else {}, program)


def walked_graph(out: Findings, evidence) -> Optional[WrapperGraph]:
    """The wrapper the trace stage compiled (the one the walk read, with provenance), else any stage's."""
    for stage in sorted(out.stages, key=lambda s: s.name != "trace"):
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
    # Longest names first: cpp_fused_1 must not match inside cpp_fused_10.
    named = re.compile("|".join(rf"(?<!\w){re.escape(n)}(?!\w)" for n in sorted(origins, key=len, reverse=True)))
    told: dict[str, Origin] = {}

    def tell(text: str) -> str:
        for m in named.finditer(text):
            origin = origins[m[0]]
            if m[0] not in told and origin.how != "none":
                told[m[0]] = origin
                return f"{text} [{m[0]}: {origin.describe()}]"
        return text

    step = c.evidence.index(c.summary) if c.summary in c.evidence else None
    c.evidence[:] = [tell(line) for line in c.evidence]
    if step is not None:
        c.summary = c.evidence[step]
    if c.kernel and c.kernel in origins:
        c.origin = origins[c.kernel]
        if c.origin.how == "none":
            c.evidence.append(f"no source line for {c.kernel}: the compile the walk read recorded no provenance "
                              "(a prebuilt package, or a torch without INDUCTOR_PROVENANCE)")
        elif not c.origin.lines:
            c.evidence.append(f"no source line for {c.kernel}: the compile recorded only its FX nodes "
                              f"({', '.join(c.origin.nodes)}); the hook saw no exported program naming them")
        elif c.summary and c.origin.describe() not in c.summary:
            c.summary = f"{c.summary} [{c.kernel}: {c.origin.describe()}]"
    c.kernel_origins = {name: o.to_json() for name, o in told.items()}
