"""The walk against eager: the first kernel whose output differs from eager's while what it read agrees. Pure.

For a wrong-but-finite output no NaN or bad index marks the first bad value: eager is the reference. The
hook compared every tensor the level-1 wrapper saved around each launch with the exported program's node
values on the same call (aoti/eagerwalk.py). Which node a kernel's output stands for comes from Inductor's
provenance of that compile (the kernel's FX nodes); where provenance names no node of the buffer's shape (an
intermediate such as a softmax's running max), the buffer agrees if it equals any eager value of its shape
and is otherwise left unjudged rather than convicted.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from ..aoti.eagerwalk import EagerWalk, Saved
from ..aoti.wrapper import Launch, WrapperGraph
from .findings import Culprit, constant_phrase, input_phrase

MAX_NAMED = 4


@dataclass(frozen=True)
class Judged:
    state: str  # agrees | differs | unjudged
    node: Optional[str] = None  # the eager value it equals, or the nearest it was held against
    max_abs: Optional[float] = None
    saved: Optional[Saved] = None
    others: tuple[tuple[str, Optional[float]], ...] = ()  # the other eager values it was held against

    def describe(self, var: str) -> str:
        s = self.saved
        tensor = f"{var} ({s.tensor()})" if s else var
        if self.state == "agrees":
            return f"{tensor} = eager `{self.node}`" + (f" (max |diff| {self.max_abs:.3g})" if self.max_abs else "")
        if self.state == "differs":
            by = ", ".join(f"`{n}` by up to {'?' if d is None else f'{d:.4g}'}"
                           for n, d in ((self.node, self.max_abs), *self.others))
            return f"{tensor} differs from eager {by} (tolerance rtol {s.rtol:g}, atol {s.atol:g})"
        return f"{tensor} (not compared: {s.problem if s and s.problem else 'no eager value of its shape'})"


def judge(saved: Optional[Saved], nodes: tuple[str, ...]) -> Judged:
    """A saved tensor against the eager values it may stand for: `nodes` (provenance), else any of its shape."""
    if saved is None or saved.problem:
        return Judged("unjudged", saved=saved)
    named = [p for p in saved.pairs if p.node in nodes]
    if named:
        hit = next((p for p in named if p.close), None)
        if hit:
            return Judged("agrees", hit.node, hit.max_abs, saved)
        # Which of the kernel's nodes this buffer holds is not recorded: each one it was held against is said.
        return Judged("differs", named[0].node, named[0].max_abs, saved,
                      tuple((p.node, p.max_abs) for p in named[1:MAX_NAMED]))
    equal = next((p for p in saved.pairs if p.close), None)
    if equal is not None:
        return Judged("agrees", equal.node, equal.max_abs, saved)
    if saved.pairs and not nodes and not saved.dropped:
        return Judged("differs", saved.pairs[0].node, saved.pairs[0].max_abs, saved)
    return Judged("unjudged", saved=saved)


def walk_eager(graph: WrapperGraph, walk: EagerWalk, nodes_of: Callable[[Launch], tuple[str, ...]]) -> Culprit:
    """`nodes_of(launch)`: the FX node names provenance gives the launch (empty where none was recorded)."""
    if walk.status != "differs":
        return Culprit("unknown", evidence=[_no_walk(walk)])
    head = [*walk.outputs, f"compared on call {walk.call} of the compiled model, the first whose outputs differ "
                           f"from the exported program run eagerly on the same inputs"]
    for launch in graph.launches:
        reads = [v for v in launch.args if graph.storage(v) in launch.reads]
        writes = [v for v in launch.args if graph.storage(v) in launch.writes]
        seen = {v: judge(walk.around("before", launch.name, v), _read_nodes(graph, launch, v, nodes_of))
                for v in reads}
        for v in reads:
            if seen[v].state == "differs":
                return _bad_read(graph, launch, v, seen[v], head)
        made = {v: judge(walk.around("after", launch.name, v), nodes_of(launch)) for v in writes}
        bad = [v for v in writes if made[v].state == "differs"]
        if bad:
            return _bad_kernel(launch, bad, made, seen, head)
    return Culprit("unknown", evidence=[*head, "every tensor the instrumented kernels read and wrote agrees with "
                                               "eager within tolerance: the difference arises outside them (an "
                                               "output copy or view, a custom op, state carried between calls)"])


def _read_nodes(graph: WrapperGraph, launch: Launch, var: str,
                nodes_of: Callable[[Launch], tuple[str, ...]]) -> tuple[str, ...]:
    producer = graph.producer(var, launch.index)
    return nodes_of(producer) if producer is not None else ()


def _bad_kernel(launch: Launch, bad: list[str], made: dict[str, Judged], seen: dict[str, Judged],
                head: list[str]) -> Culprit:
    c = Culprit("kernel", kernel=launch.name)
    good = [j.describe(v) for v, j in seen.items() if j.state == "agrees"]
    unseen = [v for v, j in seen.items() if j.state == "unjudged"]
    c.summary = f"{launch.name}'s output {made[bad[0]].describe(bad[0])}" + (
        "" if unseen else ", from inputs that agree with eager")
    c.evidence = [c.summary, *head,
                  f"{launch.name} read {'; '.join(good) if good else 'no tensor eager could be compared with'}",
                  *(f"{launch.name}'s output {made[v].describe(v)} as well" for v in bad[1:])]
    if unseen:
        c.evidence.append(f"unverified: {launch.name} also read {', '.join(seen[v].describe(v) for v in unseen)}")
    return c


def _bad_read(graph: WrapperGraph, launch: Launch, var: str, j: Judged, head: list[str]) -> Culprit:
    storage = graph.storage(var)
    if graph.is_model_input(var):
        idx = graph.inputs.index(storage)
        c = Culprit("model_input", input_index=idx, input_name=storage)
        what = input_phrase(idx, storage)
        why = "the package read it otherwise than the script passed it (strides, a copy, or an earlier write)"
    elif graph.is_constant(var):
        c = Culprit("constant", input_name=storage)
        what = constant_phrase(storage)
        why = "the package's state differs from the program's (a buffer not written back, or written twice)"
    else:
        c = Culprit("outside_instrumented_kernels")
        what = var
        why = "its producer wrote it as eager computes it, so it changed between the launches"
    c.summary = f"{launch.name} read {what} as {j.describe(var).split(' ', 1)[1]}: {why}"
    c.evidence = [c.summary, *head]
    return c


def _no_walk(walk: EagerWalk) -> str:
    if walk.status == "agree":
        return (f"the package's outputs agree with eager on every call compared ({walk.calls}): the script's "
                "check fails on something other than the compiled model's outputs")
    return f"no eager comparison: {walk.problem or walk.status}"
