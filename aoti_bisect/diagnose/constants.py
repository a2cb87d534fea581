"""Constants convicted: a parameter or buffer that holds NaN/Inf, read from the package by the in-process hook.

The level-2 printer never prints constants, so the walk ends at the kernel that reads a bad weight ("produced
bad values from good inputs"). The hook read every constant of the loaded package (child/hook/constants.py);
here a constant with non-finite values takes the conviction when the walk's kernel reads it, or when nothing
else was convicted for a NaN/Inf failure. Either way it is reported: a non-finite weight is a finding of its own.
"""
from __future__ import annotations

import zipfile
from typing import Optional

from ..aoti import wrapper
from ..aoti.constants import ConstantValue
from ..aoti.hook_record import HookRecord
from ..verdict import Verdict
from .advice import next_steps
from .facts import Fact, FactKind, Namer, fact
from .findings import Culprit, CulpritKind, Findings

MAX_WRAPPER_BYTES = 64 << 20


def gather(records: list[HookRecord]) -> tuple[list[ConstantValue], list[str], Optional[str]]:
    """(the first reading of each constant, why some loads read none, the package it came from) over the hooked
    runs' loads. Every run loads the same weights; a later reading of a constant only repeats the first."""
    seen: dict[str, ConstantValue] = {}
    why: list[str] = []
    package = None
    for record in records:
        for e in record.events:
            read = e.constant_values
            if read is None:
                continue
            if read.skipped:
                why.append(read.skipped)
            for v in read.values:
                if v.placeholder not in seen or (seen[v.placeholder].skipped and not v.skipped):
                    seen[v.placeholder] = v
                    package = package or (e.path, read.so)
    return list(seen.values()), list(dict.fromkeys(why)), package


def package_graph(package: Optional[tuple[Optional[str], Optional[str]]]) -> Optional[wrapper.WrapperGraph]:
    """The launch graph of a loaded package's own wrapper source (a package this run did not compile)."""
    path, so = package or (None, None)
    if not path or not so:
        return None
    try:
        with zipfile.ZipFile(path) as z:
            info = z.getinfo(so[: -len(".so")] + ".cpp")
            if info.file_size > MAX_WRAPPER_BYTES:
                return None
            text = z.read(info).decode(errors="replace")
    except (OSError, KeyError, zipfile.BadZipFile):
        return None
    return wrapper.parse_wrapper(text, f"{path}:{info.filename}")


def readers(graph: Optional[wrapper.WrapperGraph], placeholder: str) -> list[str]:
    """The launches that take the constant, in launch order."""
    if graph is None:
        return []
    return list(dict.fromkeys(l.name for l in graph.launches
                              if any(graph.storage(a) == placeholder for a in l.args)))


def _first_read(graph: Optional[wrapper.WrapperGraph], by: list[str]) -> int:
    order = {l.name: l.index for l in reversed(graph.launches)} if graph else {}
    return min((order[name] for name in by if name in order), default=1 << 30)


def describe(v: ConstantValue, kind: Optional[str], by: list[str]) -> Fact:
    """'parameter `proj.bias` (wrapper proj_bias) holds NaN (3 of 16 elements); read by aoti_torch_cpu_addmm_out'"""
    subject = Namer(constants={v.placeholder: v.fqn} if v.fqn else {}).constant(v.placeholder)
    template = "{kind} `{label}`" + (" (wrapper {name})" if v.fqn else " (folded by Inductor)") + " holds {holds}; " + (
        "read by {by:, }" if by else "no launch in the wrapper reads it by name")
    return fact(FactKind.CONSTANT, template, kind=kind or "constant", label=v.label, name=v.placeholder,
                holds=v.holds(), by=tuple(by), constant=subject)


def convict_constants(out: Findings, records: list[HookRecord], graph: Optional[wrapper.WrapperGraph],
                      argv: list[str]) -> None:
    """Fills out.constants (report.json's `constants`) and, where a bad constant explains the failure, makes it
    the culprit. graph: the launch graph a run compiled, for when the loaded package's own wrapper cannot be read."""
    values, not_read, package = gather(records)
    if not values and not not_read:
        return
    graph = package_graph(package) or graph  # what ran: the loaded package's own wrapper, where it is readable
    kinds = {c.fqn: c.kind for r in records for e in r.events for c in e.constants}
    # Launch order: with nothing else convicted, the bad constant read first is where the NaN enters.
    bad = sorted(((v, readers(graph, v.placeholder)) for v in values if v.bad),
                 key=lambda vb: _first_read(graph, vb[1]))
    lines = [describe(v, kinds.get(v.fqn or ""), by) for v, by in bad]
    out.constants = {"read": sum(v.skipped is None for v in values), "not_read": not_read,
                     "skipped": [{"wrapper": v.placeholder, "fqn": v.fqn, "why": v.skipped}
                                 for v in values if v.skipped][:20],
                     "nonfinite": [v.to_json() | {"kind": kinds.get(v.fqn or ""), "readers": by, "finding": line}
                                   for (v, by), line in zip(bad, lines)]}
    if not bad or out.verdict is not Verdict.REPRODUCED:
        return
    c = out.culprit
    pick = None
    if c is not None and c.kind == CulpritKind.KERNEL:
        pick = next((i for i, (_, by) in enumerate(bad) if c.kernel in by), None)
    elif (c is None or not c.pinned) and out.signature is not None and out.signature.kind == "nan_inf":
        pick = 0
    if pick is None:
        if c is not None and c.kind != CulpritKind.CONSTANT:
            c.evidence.extend(_also(line) for line in lines)
        return
    v, _ = bad[pick]
    convicted = Culprit(CulpritKind.CONSTANT, input_name=v.placeholder, user_name=v.fqn,
                        probes=c.probes if c else [], summary=lines[pick])
    convicted.evidence = [*(c.evidence if c else []), lines[pick], *(_also(x) for i, x in enumerate(lines)
                                                                      if i != pick)]
    out.culprit = convicted
    out.source, out.source_nodes = None, ""  # the reader's source is not the culprit's
    out.next_steps = next_steps(argv, out.signature, convicted, cuda=bool(graph and graph.cuda))


def _also(line: Fact) -> Fact:
    return fact(FactKind.CONSTANT, "also: {line}", line=line)
