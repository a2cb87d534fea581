"""The walk-back: from a suspect (or the graph's outputs) to the first kernel that made bad values from good inputs.

Pure search logic: it never runs anything itself. `observe(kernel_names)` is injected; it compiles and runs
the repro with the level-2 printer filtered to those kernels and returns what the printer showed.
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable, Container, Iterator
from typing import Optional

from ..aoti.checks import IndexBound, index_operands, index_terms
from ..aoti.printer import KernelView, Observation, TensorStats, is_bad
from ..aoti.wrapper import Launch, WrapperGraph
from .bounds import Addend, explain
from .facts import Fact, FactKind, Namer, Tensor, fact, kernel
from .findings import Culprit, CulpritKind

Observe = Callable[[list[str]], Observation]
Source = Callable[[str], Optional[str]]  # a kernel's generated source, where it can be found
_VAR = re.compile(r"\b(buf\d+|arg\d+_\d+)\b")


def spread(items: list, k: int) -> list:
    """k evenly spaced items (all of them when there are few): one compile inspects a whole chain."""
    if k <= 0:
        return []
    if len(items) <= k:
        return list(items)
    if k == 1:
        return [items[-1]]
    return [items[round(i * (len(items) - 1) / (k - 1))] for i in range(k)]


def _batch(graph: WrapperGraph, launches: list[Launch], seen: Container[str], cap: int) -> list[str]:
    """The kernels one compile prints: these launches not `seen` yet, and a spread of their unseen ancestors."""
    wanted = [launch for launch in launches if launch.name not in seen]
    if not wanted:
        return []
    names = list(dict.fromkeys(launch.name for launch in wanted))
    ancestors: dict[int, Launch] = {}
    for launch in wanted:
        ancestors.update((a.index, a) for a in graph.ancestors(launch) if a.name not in seen)
    extra = [a.name for a in spread([ancestors[i] for i in sorted(ancestors)], cap - len(names))]
    return list(dict.fromkeys(names + extra))


def first_probe(graph: WrapperGraph, start: Optional[str], cap: int = 8) -> list[str]:
    """The kernels the walk's first compile prints, known before anything is observed: a copy of a package the
    runs did not build can be instrumented for them while earlier stages run."""
    launches = graph.output_producers() if start is None else graph.by_name(start)[:1]
    return _batch(graph, launches, {}, max(1, cap))


class _Walk:
    def __init__(self, graph: WrapperGraph, observe: Observe, bound: Optional[IndexBound], cap: int,
                 namer: Namer, source: Source) -> None:
        self.graph = graph
        self.source = source
        self._operands: dict[int, tuple[str, ...]] = {}  # launch index -> what its failed check indexes with
        self.namer = namer
        self.observe = observe
        self.check = bound
        # Values are judged against a bound fixed at export only: a symbolic bound is another input's run-time
        # size, so an index past it is a disagreement between two inputs, told by explain_bound, not one bad input.
        self.bound = bound.value if bound else None
        self.cap = max(1, cap)
        self.views: dict[str, KernelView] = {}
        self.inputs: dict[str, TensorStats] = {}
        self.culprit = Culprit(CulpritKind.UNKNOWN)

    def ensure(self, launches: list[Launch]) -> None:
        """Observe these launches (and, in the same compile, a spread of their unobserved ancestors)."""
        batch = _batch(self.graph, launches, self.views, self.cap)
        if not batch:
            return
        self.culprit.probes.append(batch)
        views, inputs = self.observe(batch)
        self.views.update(views)
        self.inputs.update(inputs)

    def stats(self, launch: Launch, var: str, when: str) -> Optional[TensorStats]:
        view = self.views.get(launch.name)
        if view is None:
            return None
        return (view.before if when == "before" else view.after).get(var)

    def _arg_stats(self, launch: Launch, storages: tuple[str, ...], when: str) -> Iterator[tuple[str, TensorStats]]:
        for var in launch.args:
            if self.graph.storage(var) in storages and (s := self.stats(launch, var, when)) is not None:
                yield var, s

    def bound_for(self, launch: Launch, var: str) -> Optional[int]:
        """The bound a read is judged against: where the kernel's source says which tensor the failed check
        indexes with, another integer tensor (token ids for their own, larger table) is not held to it."""
        if self.bound is None:
            return None
        if launch.index not in self._operands:
            self._operands[launch.index] = self.operands(launch)
        mine = {self.graph.storage(o) for o in self._operands[launch.index]}
        return self.bound if not mine or self.graph.storage(var) in mine else None

    def bad_inputs(self, launch: Launch) -> list[tuple[str, TensorStats]]:
        return [(v, s) for v, s in self._arg_stats(launch, launch.reads, "before")
                if is_bad(s, self.bound_for(launch, v))]

    def good_inputs(self, launch: Launch) -> list[TensorStats]:
        return [s for v, s in self._arg_stats(launch, launch.reads, "before")
                if not is_bad(s, self.bound_for(launch, v))]

    def bad_outputs(self, launch: Launch, by_bound: bool = True) -> list[tuple[str, TensorStats]]:
        """by_bound=False: non-finite values only, not integers past the bound."""
        bound = self.bound if by_bound else None
        return [(v, s) for v, s in self._arg_stats(launch, launch.writes, "after") if is_bad(s, bound)]

    def suspicious_indices(self, launch: Launch, inputs: list[TensorStats]) -> list[Fact]:
        """Integer inputs holding values past every dimension the kernel touches: likely wild indices.

        Not a verdict (an index may be scaled before use), but the first thing a reader should check.
        """
        dims = [d for s in inputs for d in s.dims]
        if not dims:
            return []
        found = []
        for s in inputs:
            if not s.is_float and s.scalar is None and s.numel and (s.max >= max(dims) or s.min < 0):
                found.append(self.note(fact(FactKind.INDEX, "{arg} of {kernel} holds values up to "
                               "{max:.6g} (min {min:.6g}), past every dimension of its tensors (largest {largest}): "
                               "a likely out-of-range index", arg=self.namer.var(s.arg), kernel=kernel(launch.name),
                               max=s.max, min=s.min, largest=max(dims))))
        return found

    def explain_bound(self, launch: Launch) -> Optional[str]:
        """The failed bound check in the user's terms: the input dimension, its run-time size, the index. Returns
        the model input a computed index derives from, where there is one."""
        if self.check is None:
            return None
        reads = [s for _, s in self._arg_stats(launch, launch.reads, "before")]
        # Where the source does not say what the index is loaded from (a vectorised load spread over lines), an
        # integer an earlier launch made past this bound is it: its maker is followed to its own inputs.
        operands = self.operands(launch) or tuple(v for v, _ in self.computed_indices(launch, self.bad_inputs(launch)))
        story = explain(self.check, launch.name, self.graph, self.inputs, reads, self.namer, operands,
                        self.terms(launch))
        for line in story.lines:
            self.note(line)
        self.culprit.summary = fact(FactKind.INDEX, "{kernel} faulted: {story}", kernel=kernel(launch.name),
                                    story=story.summary)
        return story.origin

    def operands(self, launch: Launch) -> tuple[str, ...]:
        """The launch's variables the failed check's index is computed from, read from the kernel's source."""
        text = self.source(launch.name) if self.check is not None else None
        params = index_operands(text, self.check) if text else ()
        found = [m for p in params for m in _VAR.findall(self.graph.size_argument(launch.name, p) or "")]
        return tuple(dict.fromkeys(found))

    def terms(self, launch: Launch) -> tuple[Addend, ...]:
        """The failed check's index as the sum the kernel computes, its parameters as the launch's variables; ()
        where the source is not at hand or the index is no such sum."""
        text = self.source(launch.name) if self.check is not None else None
        found = []
        for t in index_terms(text, self.check) if text else ():
            var = _VAR.findall(self.graph.size_argument(launch.name, t.param) or "") if t.param else [None]
            if not var:
                return ()
            found.append(Addend(t.scale, var[0], t.literal))
        return tuple(found)

    def computed_indices(self, launch: Launch, bad: list[tuple[str, TensorStats]]) -> list[tuple[str, TensorStats]]:
        """The bad reads of a kernel whose index check failed that are integer tensors an earlier launch made:
        finite indices, past this bound only."""
        if self.check is None:
            return []
        return [(v, s) for v, s in bad if not s.is_float and math.isfinite(s.max) and
                not self.graph.is_model_input(v) and self.graph.producer(v, launch.index) is not None]

    def note(self, f: Fact) -> Fact:
        self.culprit.evidence.append(f)
        return f

    def tensor(self, s: TensorStats) -> Tensor:
        return self.namer.tensor(s)

    # -- the walk's steps ---------------------------------------------------------------------------------
    def from_outputs(self) -> Optional[Launch]:
        """Where a failure that did not crash starts: the launch that wrote the first bad graph output (None, and
        a note why, where there is none to start from)."""
        producers = self.graph.output_producers()
        if not producers:
            self.note(fact(FactKind.NOTE, "the wrapper hands back no kernel-produced output; nothing to walk"))
            return None
        self.ensure(producers)
        if not any(p.name in self.views for p in producers):
            # Unprinted outputs are not finite ones: the repro ran a package this compile did not make.
            self.note(fact(FactKind.UNVERIFIED, "the level-2 run printed nothing for {kernels}: the repro ran code "
                           "other than the wrapper compiled under these flags (a prebuilt or cached package), or the "
                           "failure did not reproduce under the printer",
                           kernels=tuple(kernel(p.name) for p in producers)))
            return None
        bad = [p for p in producers if self.bad_outputs(p)]
        if not bad:
            self.note(fact(FactKind.NOTE, "level 2 shows finite, in-range graph outputs: the failure is not a NaN/Inf "
                           "or an out-of-range index the printer can see (a wrong-but-finite value needs a reference)"))
            return None
        current = bad[0]
        var, s = self.bad_outputs(current)[0]
        self.note(fact(FactKind.BAD_VALUE, "graph output {var} is bad after {kernel}: {tensor}",
                       var=self.namer.var(var), kernel=kernel(current.name), tensor=self.tensor(s)))
        return current

    def from_suspect(self, start: str) -> Optional[Launch]:
        """The suspect's launch in this wrapper (None, and a note why, where its name is not there)."""
        hits = self.graph.by_name(start)
        if not hits:
            self.note(fact(FactKind.NOTE, "kernel {kernel} from the trace is not in the generated wrapper: kernel "
                           "names drifted between compiles (autotuning?); not guessing a match", kernel=kernel(start)))
            return None
        return hits[0]

    def back_from(self, current: Launch, faulted_at: Optional[str]) -> Culprit:
        """From `current` back through the bad values to where they began. faulted_at: the launch that never
        finished (it has no after_launch values, so good inputs convict it), or None."""
        visited: set[int] = set()
        # Past a failed index check, a finite integer tensor beyond its bound is bad only where it indexes: the
        # ancestor that made it (a Triton `cumsum`) made a valid tensor, and computed_indices follows it instead.
        ancestors_by_bound = not (faulted_at is not None and self.check is not None)
        while True:
            visited.add(current.index)
            self.ensure([current])
            if current.name not in self.views:
                self.note(fact(FactKind.UNVERIFIED, "the level-2 run printed nothing for {kernel}: its name drifted "
                               "between compiles, or the failure did not reproduce under the printer",
                               kernel=kernel(current.name)))
                return self.culprit
            earlier = self.earlier_bad(current, visited, ancestors_by_bound)
            if earlier is not None:
                current = earlier
                continue
            faulted = faulted_at == current.name
            bad_in = self.bad_inputs(current)
            if faulted:
                bad_in = self.past_computed_indices(current, bad_in)
            if not bad_in:
                return self.convict(current, faulted)
            producer = self.follow(current, *bad_in[0], visited)
            if producer is None:
                return self.culprit
            current = producer

    def earlier_bad(self, current: Launch, visited: set[int], by_bound: bool) -> Optional[Launch]:
        """The first ancestor of `current`, not walked yet, that already writes a bad value."""
        earlier = [a for a in self.graph.ancestors(current) if a.name in self.views
                   and self.bad_outputs(a, by_bound) and a.index not in visited]
        if not earlier:
            return None
        first = earlier[0]
        var, s = self.bad_outputs(first, by_bound)[0]
        self.note(fact(FactKind.BAD_VALUE, "{first} (an ancestor of {current}) already writes bad {var}: {tensor}",
                       first=kernel(first.name), current=kernel(current.name), var=self.namer.var(var),
                       tensor=self.tensor(s)))
        return first

    def past_computed_indices(self, launch: Launch,
                              bad_in: list[tuple[str, TensorStats]]) -> list[tuple[str, TensorStats]]:
        """The faulted launch's bad reads less the indices an earlier launch computed: an index past this kernel's
        bound is bad only here, and the op that made it made a valid tensor, so the walk stops at the fault and
        follows the index to its origin instead (bounds.py, explain_bound)."""
        computed = self.computed_indices(launch, bad_in)
        if not computed:
            return bad_in
        var, s = computed[0]
        producer = self.graph.producer(var, launch.index)
        self.note(fact(FactKind.BAD_VALUE, "{kernel} faulted on an index past its bound, {var}: {tensor}, made by "
                       "{producer}", kernel=kernel(launch.name), var=self.namer.var(var), tensor=self.tensor(s),
                       producer=kernel(producer.name)))
        return [b for b in bad_in if b not in computed]

    def convict(self, launch: Launch, faulted: bool) -> Culprit:
        """A launch whose inputs are good: it made the bad values (or faulted) itself. Values convict only a launch
        whose inputs were seen good: one with none seen may have had its output overwritten by a launch the printer
        does not wrap (a user Triton kernel's stray store, a custom op), so it is a lead, not a culprit."""
        good = self.good_inputs(launch)
        if not good and not faulted:
            self.culprit.summary = self.note(fact(
                FactKind.UNVERIFIED, "{kernel}'s output is bad but no input of it was seen (no tensor input, or none "
                "the printer shows): values convict nothing here; a launch the printer does not wrap (a user Triton "
                "kernel, a custom op) may have written it", kernel=kernel(launch.name)))
            return self.culprit
        # Without a failed index check to judge integers by, "good" means only finite.
        self.culprit.summary = self.note(fact(
            FactKind.CONVICTION, ("{kernel} faulted from good inputs: {good}" if self.check is not None else
                                  "{kernel} faulted from finite inputs: {good}") if faulted else
            "{kernel} produced bad values from good inputs: {good}", kernel=kernel(launch.name),
            good=tuple(self.tensor(s) for s in good) or "no tensor inputs"))  # only a fault gets here without any
        for var, s in self.bad_outputs(launch):
            self.note(fact(FactKind.BAD_VALUE, "{kernel} wrote bad {var}: {tensor}", kernel=kernel(launch.name),
                           var=self.namer.var(var), tensor=self.tensor(s)))
        if faulted and self.check is None:
            wild = self.suspicious_indices(launch, good)
            if wild:
                self.culprit.summary = wild[0]  # what a reader checks first, before the list of finite inputs
        unseen = [v for v in launch.args if self.graph.storage(v) in launch.reads
                  and self.stats(launch, v, "before") is None]
        if unseen:
            self.note(fact(FactKind.UNVERIFIED, "unverified: {kernel} also reads {unseen:, }, which level 2 does "
                           "not print (constants and extern-kernel weights are never printed); a bad value there "
                           "would look exactly like this", kernel=kernel(launch.name),
                           unseen=tuple(self.namer.var(v) for v in unseen)))
        came_from = self.explain_bound(launch) if faulted else None
        self.culprit.kind, self.culprit.kernel = CulpritKind.KERNEL, launch.name
        if came_from is not None:  # a computed index: the model input it derives from is what to change
            idx = self.graph.inputs.index(came_from)
            self.culprit.kind, self.culprit.input_index, self.culprit.input_name = (CulpritKind.MODEL_INPUT, idx,
                                                                                  came_from)
            self.culprit.user_name = self.namer.input(idx, came_from).user_name
        return self.culprit

    def follow(self, launch: Launch, var: str, s: TensorStats, visited: set[int]) -> Optional[Launch]:
        """A bad read: the launch that wrote it, to walk on from; or None, its origin convicted (a model input, a
        constant, or a change outside the instrumented kernels)."""
        storage = self.graph.storage(var)
        if self.graph.is_model_input(var):
            idx = self.graph.inputs.index(storage)
            who = self.namer.input(idx, storage)
            self.culprit.summary = self.note(fact(FactKind.BAD_VALUE, "{kernel} reads {input:phrase} and it is "
                                                  "already bad: {tensor}", kernel=kernel(launch.name), input=who,
                                                  tensor=self.tensor(s)))
            self.culprit.kind, self.culprit.input_index, self.culprit.input_name = (CulpritKind.MODEL_INPUT, idx,
                                                                                  storage)
            self.culprit.user_name = who.user_name
            return None
        if self.graph.is_constant(var):
            who = self.namer.constant(storage)
            self.culprit.summary = self.note(fact(FactKind.BAD_VALUE, "{kernel} reads {constant:phrase} and it is "
                                                  "already bad: {tensor}", kernel=kernel(launch.name), constant=who,
                                                  tensor=self.tensor(s)))
            self.culprit.kind, self.culprit.input_name, self.culprit.user_name = (CulpritKind.CONSTANT, storage,
                                                                                who.user_name)
            return None
        producer = self.graph.producer(var, launch.index)
        if producer is None or producer.index in visited:
            self.culprit.summary = self.note(fact(
                FactKind.BAD_VALUE, "{kernel} reads bad {var} but no instrumented kernel wrote it bad: the value "
                "changed outside instrumented kernels (a custom op, a copy, or memory another kernel overran)",
                kernel=kernel(launch.name), var=self.namer.var(var), tensor=self.tensor(s)))
            self.culprit.kind = CulpritKind.OUTSIDE_INSTRUMENTED_KERNELS
            return None
        self.note(fact(FactKind.BAD_VALUE, "{kernel} reads bad {var} ({tensor}), written by {producer}",
                       kernel=kernel(launch.name), var=self.namer.var(var), tensor=self.tensor(s),
                       producer=kernel(producer.name)))
        return producer


def walk(graph: WrapperGraph, observe: Observe, start: Optional[str], crashed: bool,
         bound: Optional[IndexBound] = None, cap: int = 8, namer: Optional[Namer] = None,
         source: Source = lambda kernel_name: None) -> Culprit:
    """Find the first kernel whose inputs are good and whose outputs are bad.

    start: the suspect kernel's name (the trace's unfinished launch), or None to start from the graph's
    outputs (failures that do not crash: a NaN or a wrong value the script's own check reports).
    crashed: the suspect never finished, so it has no after_launch values; good inputs then convict it.
    """
    w = _Walk(graph, observe, bound, cap, namer or Namer(placeholders=tuple(graph.inputs)), source)
    current = w.from_outputs() if start is None else w.from_suspect(start)
    if current is None:
        return w.culprit
    return w.back_from(current, start if crashed else None)
