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
from .facts import Fact, FactKind, Namer, Subject, fact, kernel, note
from .findings import Culprit, CulpritKind

MAX_NAMED = 4


@dataclass(frozen=True)
class Judged:
    state: str  # agrees | differs | unjudged
    node: Optional[str] = None  # the eager value it equals, or the nearest it was held against
    max_abs: Optional[float] = None
    saved: Optional[Saved] = None
    others: tuple[tuple[str, Optional[float]], ...] = ()  # the other eager values it was held against

    def describe(self, var: Optional[Subject]) -> Fact:
        """`var`: the tensor's subject (None: the sentence around it names the tensor)."""
        s = self.saved
        if var is None:  # the sentence names the tensor already
            tensor = fact(FactKind.EAGER, "({shape})", shape=s.tensor()) if s else fact(FactKind.EAGER, "it")
        else:
            tensor = fact(FactKind.EAGER, "{var} ({shape})", var=var, shape=s.tensor()) if s else \
                fact(FactKind.EAGER, "{var}", var=var)
        if self.state == "agrees":
            return fact(FactKind.EAGER, "{tensor} = eager `{node}`" + (" (max |diff| {diff:.3g})" if self.max_abs
                                                                       else ""),
                        tensor=tensor, node=self.node, diff=self.max_abs or 0.0)
        if self.state == "differs":
            by = ", ".join(f"`{n}` by up to {'?' if d is None else f'{d:.4g}'}"
                           for n, d in ((self.node, self.max_abs), *self.others))
            return fact(FactKind.EAGER, "{tensor} differs from eager {by} (tolerance rtol {rtol:g}, atol {atol:g})",
                        tensor=tensor, by=by, rtol=s.rtol, atol=s.atol)
        return fact(FactKind.EAGER, "{tensor} (not compared: {why})", tensor=tensor,
                    why=s.problem if s and s.problem else "no eager value of its shape")


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


def walk_eager(graph: WrapperGraph, walk: EagerWalk, nodes_of: Callable[[Launch], tuple[str, ...]],
               namer: Optional[Namer] = None) -> Culprit:
    """`nodes_of(launch)`: the FX node names provenance gives the launch (empty where none was recorded)."""
    namer = namer or Namer(placeholders=tuple(graph.inputs))
    if walk.status != "differs":
        return Culprit(CulpritKind.UNKNOWN, evidence=[_no_walk(walk)])
    head = [*(note(line) for line in walk.outputs),
            fact(FactKind.EAGER, "compared on call {call} of the compiled model, the first whose outputs differ from "
                 "the exported program run eagerly on the same inputs", call=walk.call)]
    for launch in graph.launches:
        reads = [v for v in launch.args if graph.storage(v) in launch.reads]
        writes = [v for v in launch.args if graph.storage(v) in launch.writes]
        seen = {v: judge(walk.around("before", launch.name, v), _read_nodes(graph, launch, v, nodes_of))
                for v in reads}
        for v in reads:
            if seen[v].state == "differs":
                return _bad_read(graph, launch, v, seen[v], head, namer)
        made = {v: judge(walk.around("after", launch.name, v), nodes_of(launch)) for v in writes}
        bad = [v for v in writes if made[v].state == "differs"]
        if bad:
            return _bad_kernel(launch, bad, made, seen, head, namer)
    return Culprit(CulpritKind.UNKNOWN, evidence=[*head, note(
        "every tensor the instrumented kernels read and wrote agrees with eager within tolerance: the difference "
        "arises outside them (an output copy or view, a custom op, state carried between calls)")])


def _read_nodes(graph: WrapperGraph, launch: Launch, var: str,
                nodes_of: Callable[[Launch], tuple[str, ...]]) -> tuple[str, ...]:
    producer = graph.producer(var, launch.index)
    return nodes_of(producer) if producer is not None else ()


def _bad_kernel(launch: Launch, bad: list[str], made: dict[str, Judged], seen: dict[str, Judged],
                head: list[Fact], namer: Namer) -> Culprit:
    c = Culprit(CulpritKind.KERNEL, kernel=launch.name)
    k = kernel(launch.name)
    good = tuple(j.describe(namer.var(v)) for v, j in seen.items() if j.state == "agrees")
    unseen = tuple(j.describe(namer.var(v)) for v, j in seen.items() if j.state == "unjudged")
    c.summary = fact(FactKind.EAGER, "{kernel}'s output {output}" + ("" if unseen else
                                                                      ", from inputs that agree with eager"),
                     kernel=k, output=made[bad[0]].describe(namer.var(bad[0])))
    c.evidence = [c.summary, *head,
                  fact(FactKind.EAGER, "{kernel} read {good}", kernel=k,
                       good=good or "no tensor eager could be compared with"),
                  *(fact(FactKind.EAGER, "{kernel}'s output {output} as well", kernel=k,
                         output=made[v].describe(namer.var(v))) for v in bad[1:])]
    if unseen:
        c.evidence.append(fact(FactKind.UNVERIFIED, "unverified: {kernel} also read {unseen:, }", kernel=k,
                               unseen=unseen))
    return c


def _bad_read(graph: WrapperGraph, launch: Launch, var: str, j: Judged, head: list[Fact], namer: Namer) -> Culprit:
    storage = graph.storage(var)
    if graph.is_model_input(var):
        idx = graph.inputs.index(storage)
        who = namer.input(idx, storage)
        c = Culprit(CulpritKind.MODEL_INPUT, input_index=idx, input_name=storage, user_name=who.user_name)
        what = fact(FactKind.EAGER, "{who:phrase}", who=who)
        why = "the package read it otherwise than the script passed it (strides, a copy, or an earlier write)"
    elif graph.is_constant(var):
        who = namer.constant(storage)
        c = Culprit(CulpritKind.CONSTANT, input_name=storage, user_name=who.user_name)
        what = fact(FactKind.EAGER, "{who:phrase}", who=who)
        why = "the package's state differs from the program's (a buffer not written back, or written twice)"
    else:
        c = Culprit(CulpritKind.OUTSIDE_INSTRUMENTED_KERNELS)
        what = fact(FactKind.EAGER, "{who}", who=namer.var(var))
        why = "its producer wrote it as eager computes it, so it changed between the launches"
    c.summary = fact(FactKind.EAGER, "{kernel} read {what} as {judged}: {why}", kernel=kernel(launch.name), what=what,
                     judged=j.describe(None), why=why)
    c.evidence = [c.summary, *head]
    return c


def _no_walk(walk: EagerWalk) -> Fact:
    if walk.status == "agree":
        return fact(FactKind.EAGER, "the package's outputs agree with eager on every call compared ({calls}): the "
                    "script's check fails on something other than the compiled model's outputs", calls=walk.calls)
    return fact(FactKind.EAGER, "no eager comparison: {why}", why=walk.problem or walk.status)
