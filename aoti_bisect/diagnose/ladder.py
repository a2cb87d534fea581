"""The escalation ladder: it runs the registered stages (diagnose/stages/) in order, and only decides.

Each stage is a set of fresh runs under an env overlay. The ladder starts no process and opens no file: it is
handed `run_batch` (runs specs, reports each result as it lands) and an `Evidence` (reads what a finished run
left behind), so its every decision can be driven by fakes (tests/test_ladder.py). Stages hand what they found
to later ones through one typed record, `Clues`, never through fields of the ladder.
"""
from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from typing import Optional

from ..aoti import checks, flags, reinstrument, wrapper
from ..aoti.hook_record import HookRecord, Names, PackageEvent
from ..failure import FailureKind
from ..run.checkers import Missing
from ..run.classify import slow_not_stuck
from ..run.types import Outcome, RunBatch, RunResult, RunSpec
from ..stats import Rate, runs_to_observe
from ..verdict import Verdict
from . import after_verdict, bounds
from .advice import next_steps
from .context import Clues, Options
from .evidence import Evidence
from .facts import FactKind, Namer, Subject, SubjectKind, fact, joined
from .findings import Culprit, CulpritKind, Findings, Stage, StageName, dominant, interrupted
from .judge import Ledger, crash_verdict
from .no_aoti import without_aoti
from .stages import AHEAD, LATER, baseline, eager, unmask
from .stages.rung import Rung
from .walk import first_probe

# Failures only a CUDA repro has: a package the runs did not build (nothing compiled, no hook record) is still
# checked by compute-sanitizer, not valgrind.
CUDA_MESSAGE = re.compile(r"\bCUDA (error|driver error)\b|cudaErrorIllegalAddress|AcceleratorError")
# Stages that wait for a crash to read one (sanity, trace, inspect): what a flaky fault costs without a checker.
CRASH_WAITS = 3
# A checked run that costs at most this many plain runs goes right after the baseline's first run passed.
EARLY_COST = 2.0


def _identity(c: Optional[Culprit]) -> tuple:
    """What a culprit names, whatever its evidence: a walk that convicts the same kernel keeps the verdict."""
    return (c.kind, c.kernel, c.input_index, c.input_name, c.user_name) if c is not None else ()


def _told(named: Optional[Culprit], now: Culprit) -> bool:
    """Whether the crash's own evidence already named the model input the walk convicts (bounds.index_given)."""
    told = {v.name for f in (named.evidence if named else ()) if f.kind is FactKind.INDEX
            for v in f.values.values() if isinstance(v, Subject) and v.kind is SubjectKind.INPUT}
    return now.kind is CulpritKind.MODEL_INPUT and now.input_name in told


class Ladder:
    """Runs the stages and decides; to each stage it is the StageContext (context.py)."""

    def __init__(self, argv: list[str], run_batch: RunBatch, evidence: Evidence, options: Options,
                 ahead: Callable[[list[RunSpec], bool], None] = lambda specs, now: None,
                 clock: Callable[[], float] = time.monotonic,
                 on_verdict: Callable[[Findings, int], None] = lambda out, left: None,
                 on_walk: Callable[[Findings], None] = lambda out: None) -> None:
        self.clock = clock
        self.argv = argv
        self.run_batch = run_batch
        # Takes compile-only runs for later stages, to run where a slot would sit idle (True: also in the slots idle
        # now, not only beside a cold first run).
        self.ahead = ahead
        self.on_verdict = on_verdict  # told the verdict before the rate runs on, and how many runs it may take
        self.on_walk = on_walk  # told the verdict a rare crash named, before the walk waits for another crash
        self.verdict: Optional[Findings] = None  # the finished findings, kept by an interrupt of the rate after them
        self.evidence = evidence
        self.opt = options
        self.stages: list[Stage] = []
        self.counter = 0
        self.clues = Clues()
        self.ledger = Ledger()  # every run's evidence, whichever stage ran it (judge.py)
        self.started = clock()
        self.namer = Namer()
        self._hooks: dict[str, HookRecord] = {}  # each hooked run's record, by its spec's name: read once
        self._copies_prepared = False

    # -- running ---------------------------------------------------------------------------------
    def run_stage(self, stage: Stage, n: int, stop: Callable[[list[RunResult]], bool] = lambda rs: False,
                  prefix: tuple[str, ...] = (), slowdown: float = 1.0) -> Stage:
        """Runs the stage; it joins self.stages first so that an interrupted stage keeps what finished."""
        self.stages.append(stage)
        return self.extend(stage, n, stop, prefix, slowdown)

    def extend(self, stage: Stage, n: int, stop: Callable[[list[RunResult]], bool] = lambda rs: False,
               prefix: tuple[str, ...] = (), slowdown: float = 1.0) -> Stage:
        """Up to n more runs of a stage already in self.stages; `stop` sees all of the stage's results."""
        env = tuple(sorted(stage.env.items()))
        argv = (*prefix, *self.argv)
        before = list(stage.results)
        total = max(stage.planned, len(before) + n)
        reuse_from = stage.reuse_from if stage.reuse_from is not None else total
        specs = [RunSpec(argv, str(stage.name), self.counter + i, env, self.opt.timeout * slowdown, stage.hook,
                         reuse=len(before) + i >= reuse_from, place=(len(before) + i + 1, total)) for i in range(n)]

        def land(result: RunResult) -> None:
            # Every timeout of the stage is judged again by the passes landed so far: a pass may land after it.
            stage.results.append(result)
            passed = [r.exit.duration for r in stage.results if r.outcome is Outcome.PASSED]
            stage.results[:] = [slow_not_stuck(r, passed) for r in stage.results]

        # `stop` reads the stage's results, as landed: a timeout the limit explains counts as no failure there too.
        self.run_batch(specs, land, lambda rs: stop(list(stage.results)))
        # Runs are started in index order and every started run lands, so the unused indices are reusable.
        self.counter += len(stage.results) - len(before)
        stage.results.sort(key=lambda r: r.spec.index)
        if stage.hook:
            self._learn_names(stage)
            self._prepare_copies()
        return stage

    def compile_only(self, env: dict[str, str]) -> None:
        """One run that compiles the repro's packages under `env` and ends at their first load (the hook stores
        them for the flag set's later runs): no stage's, counted in no rate."""
        spec = RunSpec(tuple(self.argv), "compile", self.counter, tuple(sorted(env.items())), self.opt.timeout, True,
                       compile_only=True)
        self.counter += 1
        self.run_batch([spec], lambda r: None, lambda rs: False)

    def until_seen(self, stage: Stage) -> Stage:
        """A later stage reads one failing run, so it stops at the first: later runs would cost, not inform. Its
        runs go in waves of about the runs one failure takes at the best rate seen (one, for a failure that never
        passed): parallel slots beyond that would run what the first failure makes moot."""
        planned = stage.planned = self.repeat()
        wave = max(1, min(planned, math.ceil(1 / max(self.clues.likely, 1 / planned))))
        self.stages.append(stage)
        while len(stage.results) < planned and not stage.failures:
            ran = len(stage.results)
            self.extend(stage, min(wave, planned - ran), stop=lambda rs: any(r.failed for r in rs))
            if len(stage.results) == ran:  # cancelled: nothing more will run
                break
        return stage

    def repeat(self, rate: Optional[float] = None) -> int:
        """Runs a later stage needs to see the failure at least once (99%). Planned from the lower end of
        the best interval seen so far, not its point estimate: 2 failures in 2 runs is a rate of 34% or
        more, and planning one run for it misses a flaky fault two times in three."""
        return runs_to_observe(self.clues.estimate if rate is None else rate, miss_probability=0.01,
                               cap=self.opt.max_runs)

    def raise_estimate(self, rate: Rate) -> None:
        self.clues.estimate = max(self.clues.estimate, rate.ci95[0])
        self.clues.likely = max(self.clues.likely, rate.value)

    def skip(self, name: str, why: str) -> None:
        self.stages.append(Stage(name, {}, skipped=why))

    def ran(self, name: str) -> bool:
        return any(s.name == name for s in self.stages)

    def _learn_names(self, stage: Stage) -> None:
        names = Names.of([self._hook(r) for s in self.stages if s.hook for r in s.results])
        graph = next((g for s in self.stages if (g := self.graph(s)) is not None), None)
        # In place: a walk under way holds this namer, and the runs it waits for are what teach the names.
        self.namer.inputs, self.namer.constants = names.inputs, names.constants
        self.namer.placeholders, self.namer.exported = tuple(graph.inputs) if graph else (), names.exported

    # -- the climb -------------------------------------------------------------------------------
    def run(self) -> Findings:
        self.started = self.clock()
        self.ahead([self._ahead_spec(name, env) for name, env in AHEAD if self.opt.asked(name)], False)
        out, stop = baseline.run(self)
        if stop is not None:
            if out.verdict is not Verdict.NOT_REPRODUCED or not unmask.run(self, out):
                return self._skip_rest(out, stop)
            if out.culprit is not None:
                self.finish(out)
                return self._skip_rest(out, "baseline did not reproduce; the memory checker found the fault")
        after: Optional[Rung] = None
        for rung in LATER:
            outside = without_aoti([self._hook(r) for r in self._hooked() if r.failed])
            if outside is not None:  # every later stage only sets AOTI's flags (diagnose/no_aoti.py)
                self.finish(out)
                out.next_steps.append(outside)
                return self._skip_rest(out, outside)
            if self.ran(rung.name):
                continue  # un-masking, or an earlier rung of the same stage (memcheck.FIRST), ran it already
            if not rung.applies(self, out):
                continue
            why = rung.why_not(out, self.opt, self.clues.named)
            if why:
                self.skip(rung.name, why)
                continue
            if self._walks_after_verdict(rung):
                after = rung
                continue
            rung.run(self, out)
            self.judge(out)
            if rung.name == StageName.SANITY and eager.goes_first(self, out) and self.opt.asked(StageName.EAGER):
                # A wrong value the input and NaN checks did not explain: the eager stage's compile overlaps the
                # one-run stages before it, instead of following them.
                self.ahead([self._ahead_spec(StageName.EAGER, flags.EAGER)], True)
        if (out.culprit is None or not out.culprit.pinned) and self.clues.named is not None:
            out.culprit = self.clues.named  # no walk ran (yet, or at all): the crash's or checker's word stands
        self.finish(out)
        if after is not None:
            self._walk_after_verdict(after, out)
        left = after_verdict.runs_left(out, self.stages[0], self.opt, self.clues.rate_left)
        self.verdict = out
        self.on_verdict(out, left)
        after_verdict.run_on(out, self.stages[0], left, self.opt.budget, self.clock, self.extend)
        return out

    def _ahead_spec(self, name: str, env: dict[str, str]) -> RunSpec:
        return RunSpec(tuple(self.argv), f"ahead-{name}", 0, tuple(sorted(env.items())), self.opt.timeout, True)

    def _walks_after_verdict(self, rung: Rung) -> bool:
        """Whether the walk goes after the verdict: a crashed run named the faulting kernel, which convicts. The walk
        costs a compile of its own, and where some runs pass it waits for another crash (1/rate runs) to read the
        kernel's inputs; the verdict waits for neither."""
        return rung.name == StageName.INSPECT and self.clues.named is not None

    def _walk_after_verdict(self, rung: Rung, out: Findings) -> None:
        """The walk from the kernel the crash named, after the verdict: it keeps the culprit (adding what its inputs
        showed) or moves it to an earlier producer, and then the verdict's time is the walk's."""
        named, said = out.culprit, (out.verdict_s, out.verdict_runs)
        self.verdict = out  # an interrupt during the walk keeps the verdict
        self.on_walk(out)
        rung.run(self, out)
        moved = out.culprit is None or (_identity(out.culprit) != _identity(named) and not _told(named, out.culprit))
        if out.culprit is not None and named is not None and not moved:
            # The crash or checker named the kernel; the walk read its inputs (and may have named the operand).
            out.culprit.convicted_by = (*named.convicted_by,
                                        *(e for e in out.culprit.convicted_by if e not in named.convicted_by))
        self.finish(out)
        if not moved:
            out.verdict_s, out.verdict_runs = said
        walked = [s for s in self.stages if s.name == rung.name]
        if walked:
            walked[-1].finding = joined(walked[-1].finding, fact(
                FactKind.NOTE, "the walk ran after the verdict, which {who} gave at {at:g} s; it {how}",
                who="the crashed run's own account of its fault" if named is None or named.from_crash
                else "the memory checker's report", at=said[0],
                how="moved the culprit to an earlier producer" if moved else "kept the culprit"))

    def judge(self, out: Findings) -> None:
        """Reads the runs so far into the ledger, then what it convicts: a crash that names a kernel or op pins it,
        whichever stage ran it. A generated kernel is where the walk starts (it reads that kernel's inputs, to the
        first bad producer); an op or function outside the kernels, which no printer reads, is the culprit."""
        graph = self.any_graph()
        self.ledger.add_runs(self.stages, graph)
        if self.clues.named is not None or (out.culprit is not None and out.culprit.pinned):
            return
        found = crash_verdict(self.ledger, graph)
        if found is None or not found.pinned:
            return
        if found.kind is CulpritKind.KERNEL:
            self._index_given(found, found.kernel)
        if found.kind is CulpritKind.KERNEL and self.opt.asked(StageName.INSPECT):
            self.clues.named, self.clues.suspect, self.clues.checker = found, found.kernel, found.evidence
        else:
            out.culprit = found

    def check_first(self, results: list[RunResult]) -> bool:
        """Whether the memory checker goes before the stages that wait for crashes: a flaky failure was a memory
        fault, the checker for its device is here and asked for, and one checked run costs less than waiting for
        crashes does (each of the sanity, trace and inspect stages waits 1/rate runs for one). A failure that
        never passed keeps the classic order: its trace costs one run and its walk reads the inputs."""
        faults = [r for r in results if r.failed and r.signature and r.signature.kind.is_memory_fault]
        rate = Rate(sum(r.failed for r in results), len(results))
        if not faults or rate.failures == rate.runs or not self.opt.asked(StageName.MEMCHECK):
            return False
        on_device = faults[0].signature.kind is FailureKind.ILLEGAL_MEMORY_ACCESS or self.is_cuda(False)
        device = "cuda" if on_device else "cpu"
        checkers = dict(self.opt.checkers).get(device)
        if not checkers or isinstance(checkers, Missing):
            return False
        return CRASH_WAITS / rate.value > min(c.cost for c in checkers)

    def check_early(self, results: list[RunResult]) -> bool:
        """Whether a CUDA repro's checker runs after the baseline's first run passed: compute-sanitizer costs about
        a plain run (the compile dominates) and sees an invalid access in any run, so a rare or masked fault is
        convicted without waiting for crashes; a clean check costs one run and the baseline goes on."""
        if not results or any(r.failed for r in results) or not self.opt.asked(StageName.MEMCHECK) \
                or self.ran(StageName.MEMCHECK) or not self.is_cuda(default=False):
            return False
        checkers = dict(self.opt.checkers).get("cuda")
        return bool(checkers) and not isinstance(checkers, Missing) and min(c.cost for c in checkers) <= EARLY_COST

    def partial(self) -> Findings:
        """What the finished runs support, for a report written after an interrupt: the verdict itself where the
        interrupt came while its rate ran on."""
        if self.verdict is None:
            return interrupted(self.stages)
        self.verdict.baseline = self.stages[0].rate
        self.verdict.interrupted = True
        return self.verdict

    def _skip_rest(self, out: Findings, why: str) -> Findings:
        if out.verdict_s is None:
            self._verdict_now(out)
        for rung in LATER:
            if rung.requestable and not self.ran(rung.name):
                self.skip(rung.name, why)
        return out

    # -- what the stages share ---------------------------------------------------------------------
    def graph(self, stage: Optional[Stage]) -> Optional[wrapper.WrapperGraph]:
        """The launch graph a stage's compile generated."""
        return self.evidence.graph(stage.results[0]) if stage is not None and stage.results else None

    def any_graph(self) -> Optional[wrapper.WrapperGraph]:
        """The trace stage's launch graph, else the first any stage compiled."""
        return self.graph(self.clues.trace) or next(
            (g for s in self.stages if (g := self.graph(s)) is not None), None)

    def is_cuda(self, default: bool = True) -> bool:
        """Whether the compiled graph targets CUDA; else whether the packages the runs loaded without building
        them do; else whether a failure is one only CUDA has; `default` when none of these tells."""
        for stage in self.stages:
            g = self.graph(stage)
            if g is not None:
                return g.cuda or "cuda" in g.path
        self.find_prebuilt()
        devices = {self.evidence.package_device(e.path) for e in self.clues.prebuilt or () if e.path}
        if devices and None not in devices:
            return "cuda" in devices
        if any(r.signature and (r.signature.kind.is_cuda_fault or CUDA_MESSAGE.search(r.signature.message))
               for s in self.stages for r in s.failures):
            return True  # the failure itself says so, whatever the runs compiled or loaded
        return default

    def find_prebuilt(self) -> None:
        """What the failing hooked runs so far loaded without building it, once."""
        if self.clues.prebuilt is None and self._hooked():
            self.clues.prebuilt = self._prebuilt()

    def _hooked(self) -> list[RunResult]:
        return [r for s in self.stages for r in s.results if r.spec.hook or r.spec.reuse]

    def _prebuilt(self) -> list[PackageEvent]:
        hooked = self._hooked()
        runs = [r for r in hooked if r.failed] or hooked
        found: dict[str, PackageEvent] = {}
        for r in runs:
            for e in self._hook(r).events:
                if not e.compiled and not e.built_here and e.redirect != "private" and e.sha256:
                    found.setdefault(e.sha256, e)
        return list(found.values())

    def _hook(self, result: RunResult) -> HookRecord:
        if result.spec.name not in self._hooks:
            self._hooks[result.spec.name] = self.evidence.hook(result)
        return self._hooks[result.spec.name]

    def _prepare_copies(self) -> None:
        """The trace's copies of a package the runs loaded without building it start building as soon as a hooked
        run shows it: each costs a compile, which then overlaps the stages before the trace. Where the walk's start
        is known before the trace runs (a crash named its kernel, or a failure the trace names no kernel for, which
        starts at the graph's outputs), the walk's first copy follows, for the kernels the trace's copy shows."""
        if self._copies_prepared or not self.opt.asked(StageName.TRACE) or self.ran(StageName.TRACE):
            return
        files = [e for e in self._prebuilt() if e.path is not None]
        if not files:
            return
        self._copies_prepared = True
        sig = dominant(self.stages[0].failures)
        probe = None
        if self.opt.asked(StageName.INSPECT) and (self.clues.suspect is not None or
                                                   (sig is not None and not sig.kind.stops_the_process)):
            suspect, cap = self.clues.suspect, self.opt.inspect_cap
            probe = lambda graph: tuple(first_probe(graph, suspect, cap))  # noqa: E731
        self.evidence.prepare(files, reinstrument.TRACE_LEVEL, probe)

    def instrumented(self, level: int, kernels: tuple[str, ...] = ()) -> tuple[dict[str, str], tuple[str, ...]]:
        """The env that hands a stage's runs instrumented copies of the packages the failing hooked runs
        loaded without building them (a prebuilt .pt2, a fixed-path cache left before the bisection): no
        compile-time flag reaches those. Also one line per package that cannot be re-instrumented."""
        self.find_prebuilt()
        if not self.clues.prebuilt:
            return {}, ()
        files = [e for e in self.clues.prebuilt if e.path is not None]
        problems: tuple[str, ...] = ()
        if len(files) < len(self.clues.prebuilt):
            problems = ("a package loaded from an in-memory buffer cannot be re-instrumented: save it to a file "
                        "and load it by path",)
        if not files:
            return {}, problems
        got = self.evidence.instrumented(files, level, kernels)
        return got.env, problems + got.problems

    def gpu_env(self) -> dict[str, str]:
        """The determinism flags, where they made the failure show: later stages keep what reproduces it. A CUDA
        repro whose determinism stage did not run (--stages) gets them too: with asynchronous launches, the
        trace's last launch without its after_launch need not be the one that faulted."""
        det = next((s for s in self.stages if s.name == StageName.DETERMINISM and not s.skipped), None)
        if det is None:
            return dict(flags.DETERMINISM) if self.is_cuda(default=False) else {}
        return dict(flags.DETERMINISM) if det.rate.failures else {}

    def _index_given(self, c: Culprit, faulted: str) -> None:
        """A crash on a failed index check names the model input the index is, where the kernel's source shows it
        takes the input's value as it stands: no need to wait for another crash under the printer to say so."""
        bound = next((b for s in self.stages for r in s.failures
                      if r.signature and (b := checks.index_bound(r.signature.message)) is not None), None)
        graph = self.any_graph()
        found = self.evidence.kernel_source(faulted, [s.results[0] for s in self.stages if s.results],
                                            max_lines=1 << 20) if bound and graph else None
        given = bounds.index_given(bound, faulted, graph, checks.index_terms(found[1], bound), self.namer) \
            if found else None
        if given is None:
            return
        # Said again at the verdict, with the user's names the hooked runs since taught the namer.
        earlier = next((i for i, f in enumerate(c.evidence) if f == self.clues.given), None)
        if earlier is not None:
            c.evidence[earlier] = given
        elif given not in c.evidence:
            c.evidence.append(given)
        self.clues.given = given if bound.value is not None else None

    def _verdict_now(self, out: Findings) -> None:
        out.verdict_s = round(self.clock() - self.started, 1)
        out.verdict_runs = sum(len(s.results) for s in self.stages)

    def finish(self, out: Findings) -> None:
        self._verdict_now(out)
        out.ledger = list(self.ledger.entries)
        c = out.culprit
        early = out.signature is not None and out.signature.phase.before_run
        if c is None:
            if early:  # no kernel ran: the advice for the phase is all there is
                out.next_steps = next_steps(self.argv, out.signature, None, self.is_cuda())
            return
        if c.kind is CulpritKind.KERNEL and c.from_crash:
            self._index_given(c, c.kernel)
        elif self.clues.given is not None and self.clues.named is not None:
            self._index_given(c, self.clues.named.kernel)  # the walk moved on from the kernel: names, said again
        if c.kernel:
            out.source = self.evidence.kernel_source(c.kernel, [s.results[0] for s in self.stages if s.results])
            graph = self.graph(self.clues.trace)
            hits = graph.by_name(c.kernel) if graph else []
            out.source_nodes = hits[0].source_nodes if hits else ""
        out.next_steps = next_steps(self.argv, out.signature, c, self.is_cuda())
