"""Which lines of the user's code each generated kernel comes from, from Inductor's own provenance. Pure.

Two sources, both written by the compile itself, never by reading the user's files:
- kernel_information.json, which Inductor writes beside the generated wrapper when INDUCTOR_PROVENANCE=1
  (flags.PROVENANCE): per kernel `name:handle`, the stack traces of the FX nodes it was generated from and
  those nodes' names. The wrapper marks each launch with the same `// [Provenance debug handles] name:handle`,
  so two launches of one extern op (two `aoti_torch_cpu_mm_out`) keep their own lines.
- the exported program's nodes as the in-process hook recorded them (child/hook/provenance.py): each node's
  stack trace and module. They turn node names (a kernel Inductor traced no stack for, a wrapper's "Source
  Nodes" comment) into lines.
A stack trace quotes the line's text itself; that one line is all a report shows of the user's source.
"""
from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Optional

from ..files.own import loads_child_json, read_run_file

KERNEL_INFORMATION = "kernel_information.json"
MAX_KERNEL_INFORMATION_BYTES = 32 << 20
_FRAME = re.compile(r'File "(?P<path>[^"]+)", line (?P<line>\d{1,9}), in (?P<func>[^\n]*)(?:\n(?P<code>[^\n]*))?')
# torch's own frames (nn.Linear's forward, F.linear) and the code it generates and runs from no file
# (`<eval_with_key>.5`: a traced higher-order op's body): the user's line is the innermost frame outside them.
_TORCH_OWN = re.compile(r"[/\\]torch[/\\]|^<eval_with_key>")
_NODE_LIST = re.compile(r"^\[(?P<nodes>[^\]]*)\]")


@dataclass(frozen=True)
class SourceLine:
    path: str
    line: int
    code: str  # the line's text, as the stack trace quotes it ("" where the trace had none)

    @property
    def where(self) -> str:
        return f"{os.path.basename(self.path)}:{self.line}"

    def describe(self) -> str:
        return f"line {self.line} of {os.path.basename(self.path)}" + (f": `{self.code}`" if self.code else "")

    def to_json(self) -> dict:
        return {"path": self.path, "line": self.line, "where": self.where, "code": self.code}


@dataclass(frozen=True)
class Origin:
    """Where one launch comes from: the user's lines (may be none), the FX nodes, and how we know."""
    lines: tuple[SourceLine, ...]
    nodes: tuple[str, ...]
    how: str  # inductor (kernel_information.json) | program (the hook's nodes) | nodes (names only) | none

    def describe(self) -> str:
        if self.lines:
            return "; ".join(line.describe() for line in self.lines)
        if self.nodes:
            return f"FX nodes {', '.join(self.nodes)} (no source line recorded)"
        return "no provenance recorded"

    def to_json(self) -> dict:
        return {"lines": [line.to_json() for line in self.lines], "nodes": list(self.nodes), "how": self.how}


def user_line(trace: str) -> Optional[SourceLine]:
    """The innermost frame of a stack trace outside torch itself (the innermost frame if all are torch's)."""
    frames = [SourceLine(m["path"], int(m["line"]), (m["code"] or "").strip()) for m in _FRAME.finditer(trace)]
    mine = [f for f in frames if not _TORCH_OWN.search(f.path)]
    return (mine or frames or [None])[-1]


def _lines(traces: Iterable[str]) -> tuple[SourceLine, ...]:
    found = {(s.path, s.line): s for t in traces if (s := user_line(t)) is not None}
    return tuple(found[k] for k in sorted(found))


@dataclass(frozen=True)
class KernelInfo:
    traces: tuple[str, ...]
    nodes: tuple[str, ...]  # pre-grad names first: they are the exported program's own


def parse_kernel_information(text: str) -> dict[str, KernelInfo]:
    """`name:handle` -> what Inductor recorded; {} for anything that is not its JSON."""
    try:
        data = loads_child_json(text)
    except ValueError:
        return {}
    if not isinstance(data, dict):
        return {}
    out = {}
    for key, info in data.items():
        if isinstance(info, dict):
            nodes = [*(info.get("pre_grad_nodes") or ()), *(info.get("post_grad_nodes") or ())]
            out[str(key)] = KernelInfo(tuple(str(t) for t in info.get("stack_traces") or ()),
                                       tuple(dict.fromkeys(str(n) for n in nodes)))
    return out


def read_kernel_information(wrapper_path: str) -> dict[str, KernelInfo]:
    """kernel_information.json beside a generated wrapper ({} where the compile ran without provenance)."""
    path = os.path.join(os.path.dirname(wrapper_path), KERNEL_INFORMATION)
    try:
        return parse_kernel_information(read_run_file(path, MAX_KERNEL_INFORMATION_BYTES))
    except OSError:
        return {}


@dataclass(frozen=True)
class ProgramNode:
    name: str
    target: str
    module: Optional[str]  # `proj (Linear)`
    trace: Optional[str]


def parse_program(raw: object) -> tuple[ProgramNode, ...]:
    """The hook's `provenance` field of a compile event; () for anything else."""
    if not isinstance(raw, dict):
        return ()
    traces = raw.get("traces") or []
    out = []
    for row in raw.get("nodes") or ():
        if isinstance(row, list) and len(row) == 4:
            name, target, module, index = row
            trace = traces[index] if isinstance(index, int) and 0 <= index < len(traces) else None
            out.append(ProgramNode(str(name), str(target), module and str(module), trace and str(trace)))
    return tuple(out)


def source_nodes(comment: str) -> tuple[str, ...]:
    """The node names of a wrapper's `Topologically Sorted Source Nodes: [a, b], Original ATen: [...]`."""
    m = _NODE_LIST.match(comment.strip())
    return tuple(n.strip() for n in m["nodes"].split(",") if n.strip()) if m else ()


@dataclass(frozen=True)
class SourceMap:
    kernels: dict[str, KernelInfo]  # kernel_information.json of the compile whose wrapper the walk read
    program: dict[str, ProgramNode]  # the exported program's nodes by name (the hook's record)

    def origin(self, name: str, handle: Optional[str] = None, comment: str = "") -> Origin:
        """A launch's origin: by its provenance handle, else by its name where only one kernel has it, else
        through the node names of its wrapper comment."""
        info = self.kernels.get(handle) if handle else None
        if info is None:
            named = [i for key, i in self.kernels.items() if key.rsplit(":", 1)[0].lower() == name.lower()]
            info = named[0] if len(named) == 1 else None
        nodes = info.nodes if info else source_nodes(comment)
        if info and info.traces:
            return Origin(_lines(info.traces), nodes, "inductor")
        known = [self.program[n] for n in nodes if n in self.program]
        lines = _lines(n.trace for n in known if n.trace)
        if lines:
            return Origin(lines, nodes, "program")
        return Origin((), nodes, "nodes" if nodes else "none")
