"""The escalation ladder: baseline, sanity, determinism, kernel trace, inspection. It only decides.

Each stage is a set of fresh runs under an env overlay. The ladder starts no process and opens no file: it is
handed `run_batch` (runs specs, reports each result as it lands) and an `Evidence` (reads what a finished run
left behind), so its every decision can be driven by fakes (tests/test_ladder.py).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Callable, Optional

from ..aoti import checks, flags, reinstrument, wrapper
from ..aoti.fakecheck import no_mismatch
from ..aoti.hook_record import PackageEvent
from ..aoti.provenance import SourceMap
from ..run.checkers import Checker, Missing
from ..run.types import RunBatch, RunResult, RunSpec, Signature
from ..stats import DEFAULT_MAX_RUNS, Rate, baseline_should_stop, fisher_exact, runs_to_observe
from .advice import next_steps
from .eagerwalk import walk_eager
from .evidence import Evidence
from ..verdict import Verdict
from .findings import Culprit, Findings, Stage
from .loaddoctor import CRASHES, diagnose_load
from .memcheck import MEMORY_FAULTS, memcheck_culprit
from .sanity import sanity_culprit
from .stages import STAGES
from .walk import walk

# Culprits a wrong fake function explains: a kernel that reads the op's output by the fake's layout, or a
# fault the trace put after every instrumented launch. A custom op's fake check still runs after them.
FAKE_VICTIMS = ("kernel", "outside_instrumented_kernels")

# Later stages whose compile-time flags do not hang on what earlier stages find: their packages can be built in
# the slots the baseline's first run leaves idle (Harness.ahead), so that the stages find them waiting.
AHEAD = (("sanity", flags.SANITY), ("trace", flags.TRACE))

# Failures that stop the process (or hang it): when every instrumented launch finished, the fault lies outside.
FAULT_KINDS = {"illegal_memory_access", "device_assert", "index_out_of_bounds", "segfault", "abort", "crash",
               "timeout", "out_of_memory"}


@dataclass
class Options:
    runs: Optional[int] = None  # explicit baseline runs; None = adaptive
    min_runs: int = 2
    max_runs: int = DEFAULT_MAX_RUNS
    timeout: float = 600.0
    stages: tuple[str, ...] = STAGES
    inspect_cap: int = 8
    # The memory checker per device ("cuda", "cpu"), or why there is none; found by the session.
    checkers: tuple[tuple[str, tuple[Checker, ...] | Missing], ...] = ()
    sanitize: bool = False  # run the memcheck stage whatever the failure (or none) looks like
    # The load doctor's debugger: (command prefix, None), or ((), why there is none); found by the session.
    debugger: tuple[tuple[str, ...], Optional[str]] = ((), "no debugger looked for")


def dominant(results: list[RunResult]) -> Optional[Signature]:
    sigs = [r.signature for r in results if r.failed and r.signature]
    if not sigs:
        return None
    top, _ = Counter(s.fingerprint for s in sigs).most_common(1)[0]
    return next(s for s in sigs if s.fingerprint == top)


class Ladder:
    def __init__(self, argv: list[str], run_batch: RunBatch, evidence: Evidence, options: Options,
                 ahead: Callable[[list[RunSpec]], None] = lambda specs: None) -> None:
        self.argv = argv
        self.run_batch = run_batch
        self.ahead = ahead  # takes compile-only runs for later stages, to run where a slot would sit idle
        self.evidence = evidence
        self.opt = options
        self.stages: list[Stage] = []
        self.counter = 0
        self.estimate = 1.0
        self.trace_stage: Optional[Stage] = None
        self.suspect: Optional[str] = None
        self.prebuilt: Optional[list[PackageEvent]] = None  # what the failing runs loaded but did not build

    # -- running ---------------------------------------------------------------------------------
    def _run(self, stage: Stage, n: int, stop: Callable[[list[RunResult]], bool] = lambda rs: False,
             prefix: tuple[str, ...] = (), slowdown: float = 1.0) -> Stage:
        """Runs the stage; it joins self.stages first so that an interrupted stage keeps what finished."""
        self.stages.append(stage)
        env = tuple(sorted(stage.env.items()))
        argv = (*prefix, *self.argv)
        specs = [RunSpec(argv, stage.name, self.counter + i, env, self.opt.timeout * slowdown, stage.hook)
                 for i in range(n)]
        self.run_batch(specs, stage.results.append, stop)
        # Runs are started in index order and every started run lands, so the unused indices are reusable.
        self.counter += len(stage.results)
        stage.results.sort(key=lambda r: r.spec.index)
        return stage

    def _repeat(self, rate: Optional[float] = None) -> int:
        """Runs a later stage needs to see the failure at least once (99%). Planned from the lower end of
        the best interval seen so far, not its point estimate: 2 failures in 2 runs is a rate of 34% or
        more, and planning one run for it misses a flaky fault two times in three."""
        return runs_to_observe(self.estimate if rate is None else rate, miss_probability=0.01,
                               cap=self.opt.max_runs)

    def _raise_estimate(self, rate: Rate) -> None:
        self.estimate = max(self.estimate, rate.ci95[0])

    def _run_until_seen(self, stage: Stage) -> Stage:
        """A later stage reads one failing run, so it stops at the first: later runs would cost, not inform."""
        return self._run(stage, self._repeat(), stop=lambda rs: any(r.failed for r in rs))

    # -- the stages ------------------------------------------------------------------------------
    def baseline(self) -> Stage:
        stage = Stage("baseline", {})
        if self.opt.runs is not None:
            return self._run(stage, self.opt.runs)

        def stop(rs: list[RunResult]) -> bool:
            return baseline_should_stop(sum(r.failed for r in rs), len(rs), self.opt.min_runs, self.opt.max_runs)
        return self._run(stage, self.opt.max_runs, stop)

    def run(self) -> Findings:
        self.ahead([RunSpec(tuple(self.argv), f"ahead-{name}", 0, tuple(sorted(env.items())), self.opt.timeout, True)
                    for name, env in AHEAD if name in self.opt.stages])
        base = self.baseline()
        rate = base.rate
        sig = dominant(base.results)
        self.estimate = max(rate.ci95[0], 1e-9)
        out = Findings(Verdict.REPRODUCED, sig, rate, self.stages)
        infra = [r for r in base.results if r.signature and r.signature.kind == "infra"]
        if infra and len(infra) == len(base.results):
            out.verdict, out.signature = Verdict.ERROR, infra[0].signature
            base.finding = out.summary = f"the repro cannot run here: {infra[0].signature.message}"
            return self._skip_rest(out, "infrastructure error")
        if rate.failures == 0:
            out.verdict = Verdict.INCONCLUSIVE if infra else Verdict.NOT_REPRODUCED
            base.finding = f"did not reproduce: {rate.describe()}" + (
                f"; {len(infra)} run(s) could not run: {infra[0].signature.message}" if infra else "")
            out.summary = base.finding
            if infra or not self._unmask(out):
                return self._skip_rest(out, "baseline did not reproduce")
            if out.verdict is Verdict.REPRODUCED and out.culprit is not None:
                self._finish(out)
                return self._skip_rest(out, "baseline did not reproduce; the memory checker found the fault")
            sig = out.signature
        elif all(r.signature and r.signature.kind == "script_error" for r in base.failures):
            out.verdict = Verdict.ERROR
            base.finding = out.summary = f"the repro itself is broken: {sig.message}"
            return self._skip_rest(out, "the repro itself is broken")
        else:
            base.finding = f"reproduced {rate.describe()}: {sig.kind} in {sig.phase}: {sig.message}"
            out.summary = base.finding
        if sig.phase == "load" and set(self.opt.stages) - {"baseline"}:
            self.doctor(out)
        if sig.phase in ("export", "compile", "load"):
            out.next_steps = next_steps(self.argv, sig, out.culprit, self._is_cuda())
            return self._skip_rest(out, f"the failure is in the {sig.phase} phase: no kernel runs, so the "
                                        "runtime ladder cannot localise it")
        for name, step in (("sanity", self.sanity), ("determinism", self.determinism), ("trace", self.trace),
                           ("fakecheck", self.fakecheck), ("memcheck", self.memcheck), ("inspect", self.inspect),
                           ("eager", self.eager)):
            if any(s.name == name for s in self.stages):
                continue  # un-masking ran it already
            if name not in self.opt.stages:
                self.stages.append(Stage(name, {}, skipped="not requested (--stages)"))
                continue
            if out.culprit is not None and out.culprit.kind != "unknown" and not (
                    name == "fakecheck" and out.culprit.kind in FAKE_VICTIMS):
                self.stages.append(Stage(name, {}, skipped="culprit already pinned"))
                continue
            step(out)
        self._finish(out)
        return out

    def partial(self) -> Findings:
        """What the finished runs support, for a report written after an interrupt."""
        base = self.stages[0].rate if self.stages else Rate(0, 0)
        verdict = Verdict.REPRODUCED if base.failures else Verdict.INCONCLUSIVE
        sig = dominant(self.stages[0].results) if self.stages else None
        return Findings(verdict, sig, base, self.stages, summary="interrupted: " + (
            f"baseline {base.describe()}" if base.runs else "no run finished"), interrupted=True)

    def _skip_rest(self, out: Findings, why: str) -> Findings:
        for name in STAGES[1:]:
            if not any(s.name == name for s in self.stages):
                self.stages.append(Stage(name, {}, skipped=why))
        return out

    def _unmask(self, out: Findings) -> bool:
        """A baseline that never failed is not yet a pass for a CUDA repro (or under --sanitize): an
        out-of-bounds access the caching allocator masks reads other memory silently. Climb on when the
        determinism flags make it fail; conclude here when only the memory checker sees it."""
        cuda = self._is_cuda(default=False)
        if not (cuda or self.opt.sanitize):
            return False
        if cuda and "determinism" in self.opt.stages:
            self.determinism(out)
            det = self.stages[-1]
            if det.rate.failures:
                out.verdict, out.signature = Verdict.REPRODUCED, dominant(det.results)
                out.masked = (f"passes at baseline ({out.baseline.describe()}) but fails with "
                              f"{', '.join(flags.DETERMINISM)} ({det.rate.describe()})")
                out.summary = det.finding = out.masked
                self.estimate = max(det.rate.ci95[0], 1e-9)
                return True
        if "memcheck" not in self.opt.stages and not self.opt.sanitize:
            return False
        self.memcheck(out, unmasking=True)
        if out.culprit is not None:  # the checker saw errors, whether or not it could name their kernel
            out.verdict = Verdict.REPRODUCED
            out.masked = f"passes at baseline ({out.baseline.describe()}); {out.culprit.summary}"
            out.summary = out.masked
            return True
        return False

    def doctor(self, out: Findings) -> None:
        """A load failure: one hooked run tells which package was loaded, then the cheap experiments."""
        sig = out.signature
        prefix, no_trace = self.opt.debugger if sig.kind in CRASHES else (
            (), "the load raised an exception (its traceback is in the log); it did not crash in native code")
        stage = Stage("doctor", {}, tool=" ".join(prefix) or None)
        # Under gdb a run is several times slower (symbols of every library torch loads).
        self._run(stage, self._repeat(), stop=lambda rs: any(r.failed for r in rs), prefix=prefix,
                  slowdown=4.0 if prefix else 1.0)
        run = (stage.failures or stage.results or [None])[0]
        facts = self.evidence.package(run) if run else None
        fresh = self.evidence.fresh_process(facts.custom_ops) if facts and not facts.problem else {}
        trace = self.evidence.backtrace(run) if run and prefix else []
        if prefix and not trace:
            no_trace = "the run did not crash under gdb"
        toolchains = (self.evidence.toolchains(facts.path) if facts and not facts.problem and sig.kind in CRASHES
                      else None)
        out.culprit = diagnose_load(sig, facts, fresh, trace, None if trace else no_trace, toolchains)
        stage.finding = out.culprit.summary or out.culprit.evidence[0]
        if out.culprit.kind != "unknown":
            out.summary += f"; {out.culprit.summary}"

    def sanity(self, out: Findings) -> None:
        stage = self._run_until_seen(Stage("sanity", dict(flags.SANITY)))
        graph = self._graph(stage)
        for r in stage.failures:
            hit = self.evidence.sanity(r)
            if hit is not None:
                out.culprit, stage.finding = sanity_culprit(hit, graph)
                return
        stage.finding = (f"no input or NaN check fired ({stage.rate.describe()} failed as before)"
                         if stage.rate.failures else
                         f"not reproduced under these flags: {stage.rate.describe()}")

    def determinism(self, out: Findings) -> None:
        if not self._is_cuda():
            self.stages.append(Stage("determinism", dict(flags.DETERMINISM), skipped=(
                "CPU-only repro: no CUDA caching allocator and no asynchronous launches, so "
                "PYTORCH_NO_CUDA_MEMORY_CACHING and CUDA_LAUNCH_BLOCKING cannot change anything")))
            return
        # It measures a rate to compare with the baseline's: as many runs, planned from the point estimate.
        n = max(self.stages[0].rate.runs, self._repeat(self.stages[0].rate.value))
        stage = self._run(Stage("determinism", dict(flags.DETERMINISM)), n)
        base, now = self.stages[0].rate, stage.rate
        p = fisher_exact(base.failures, base.runs, now.failures, now.runs)
        sig = dominant(stage.results)
        parts = [f"{now.describe()} vs baseline {base.describe()} (Fisher p = {p:.3g})"]
        if now.failures == now.runs and base.failures < base.runs:
            parts.append("the failure becomes deterministic under these flags")
        if sig and out.signature and sig.kind != out.signature.kind:
            parts.append(f"the failure changes kind: {out.signature.kind} -> {sig.kind} ({sig.message})")
        if now.failures == 0:
            parts.append("not reproduced under these flags")
        stage.finding = "; ".join(parts)
        if now.failures:
            self._raise_estimate(now)

    def _gpu_env(self) -> dict[str, str]:
        det = next((s for s in self.stages if s.name == "determinism" and not s.skipped), None)
        return dict(flags.DETERMINISM) if det and det.rate.failures else {}

    def _instrumented(self, level: int, kernels: tuple[str, ...] = ()) -> tuple[dict[str, str], tuple[str, ...]]:
        """The env that hands a stage's runs instrumented copies of the packages the failing hooked runs
        loaded without building them (a prebuilt .pt2, a fixed-path cache left before the bisection): no
        compile-time flag reaches those. Also one line per package that cannot be re-instrumented."""
        self._find_prebuilt()
        if not self.prebuilt:
            return {}, ()
        files = [e for e in self.prebuilt if e.path is not None]
        problems: tuple[str, ...] = ()
        if len(files) < len(self.prebuilt):
            problems = ("a package loaded from an in-memory buffer cannot be re-instrumented: save it to a file "
                        "and load it by path",)
        if not files:
            return {}, problems
        got = self.evidence.instrumented(files, level, kernels)
        return got.env, problems + got.problems

    def _find_prebuilt(self) -> None:
        """What the failing hooked runs so far loaded without building it, once."""
        if self.prebuilt is not None:
            return
        hooked = [r for s in self.stages for r in s.results if r.spec.hook]
        if not hooked:
            return
        runs = [r for r in hooked if r.failed] or hooked
        found: dict[str, PackageEvent] = {}
        for r in runs:
            for e in self.evidence.hook(r).events:
                if not e.compiled and not e.built_here and e.redirect != "private" and e.sha256:
                    found.setdefault(e.sha256, e)
        self.prebuilt = list(found.values())

    def trace(self, out: Findings) -> None:
        copies, problems = self._instrumented(reinstrument.TRACE_LEVEL)
        stage = self._run_until_seen(Stage("trace", {**self._gpu_env(), **flags.TRACE, **copies}))
        self.trace_stage = stage
        graph = self._graph(stage)
        if not stage.failures:
            # Passing runs' traces say nothing about where the failure happens: conclude nothing from them,
            # but a kernel that the failing runs of earlier stages name themselves still stands.
            stage.finding = f"not reproduced under these flags: {stage.rate.describe()}"
            out.culprit = self._named_by_failures() or Culprit("unknown", evidence=[
                f"the trace stage did not reproduce the failure ({stage.rate.describe()}), so no launch can be "
                "blamed"])
            return
        traces = [self.evidence.trace(r) for r in stage.failures]
        if not any(t.launches for t in traces):
            why = ("; ".join(problems) if problems and not copies else
                   "no generated C++ wrapper was compiled under these flags: the repro most likely loads a "
                   "prebuilt .pt2 (compile-time flags never take effect) or uses plain torch.compile (the "
                   "Python wrapper prints nothing at level 3). Make the repro call "
                   "torch._inductor.aoti_compile_and_package itself." if graph is None else
                   "the wrapper was compiled but printed no launch: the failure happens before the first "
                   "kernel launch (loading, input handling)")
            stage.finding = (stage.finding + "; " if stage.finding else "") + "no launch lines: " + why
            out.culprit = Culprit("unknown", evidence=[stage.finding])
            return
        unfinished = Counter(t.unfinished for t in traces if t.unfinished)
        sig = dominant(stage.failures) or out.signature
        if unfinished:
            kernel, count = unfinished.most_common(1)[0]
            self.suspect = kernel
            stage.finding = (f"last launch without after_launch: {kernel} ({count}/{len(traces)} failing runs)")
            if len(unfinished) > 1:
                stage.finding += f"; other runs ended in {', '.join(k for k in unfinished if k != kernel)}"
            return
        last = Counter(t.last_finished for t in traces).most_common(1)[0][0]
        if sig and sig.kind in FAULT_KINDS:
            nxt = graph.next_after(last) if graph else None
            c = Culprit("outside_instrumented_kernels", kernel=nxt)
            c.evidence.append(f"every instrumented launch finished (last: {last}); the fault happened outside "
                              f"instrumented kernels (a custom op through the proxy executor, a copy, a later "
                              f"sync); next in the wrapper after {last}: {nxt or 'unknown'}")
            out.culprit = c
            stage.finding = c.evidence[0]
            return
        stage.finding = (f"all {len(traces[0].launches)} launches finished (last: {last}): the model ran to "
                         f"the end and the script's check failed, so the walk starts at the graph's outputs")

    def _named_by_failures(self) -> Optional[Culprit]:
        """The kernel the failure messages of earlier stages name (a CPU kernel's exception, a Triton
        assert's source), when one is named: weaker than a trace, stronger than nothing."""
        named = Counter(r.signature.kernel for s in self.stages for r in s.failures
                        if r.signature and r.signature.kernel and not r.signature.kernel.endswith(".py"))
        if not named:
            return None
        kernel, count = named.most_common(1)[0]
        c = Culprit("kernel", kernel=kernel)
        c.evidence.append(f"the trace stage did not reproduce the failure ({self.stages[-1].rate.describe()}); "
                          f"{count} failing run(s) of earlier stages name {kernel} in their error message")
        c.summary = c.evidence[0]
        return c

    def fakecheck(self, out: Findings) -> None:
        """A custom op run through the proxy executor hands the package a tensor that the package lays out by
        the op's fake function: checked against the real op on the failing call's inputs, a mismatch
        convicts the op ahead of any kernel that reads its output."""
        if out.signature and out.signature.kind == "timeout" and out.culprit is not None and \
                "::" in (out.culprit.kernel or ""):
            # Checking the op runs it for real on the same inputs: it would hang again, for another timeout.
            self.stages.append(Stage("fakecheck", {}, skipped=f"the run hangs inside {out.culprit.kernel}: "
                                     "checking its fake function would run it, and hang, again"))
            return
        graph = self._graph(self.trace_stage) or next(
            (g for s in self.stages if (g := self._graph(s)) is not None), None)
        ops = sorted({launch.name for launch in graph.launches if "::" in launch.name}) if graph else []
        if not ops:
            self.stages.append(Stage("fakecheck", {}, skipped="no compiled wrapper to find custom ops in"
                                     if graph is None else "no custom op runs through the proxy executor"))
            return
        stage = self._run_until_seen(Stage("fakecheck", dict(flags.FAKECHECK)))
        runs = stage.failures or stage.results
        checks = [self.evidence.fakecheck(r) for r in runs]
        hit = next((c for c in checks if c.mismatch), None)
        if hit is None:
            stage.finding = no_mismatch(checks) or f"no custom op was checked ({', '.join(ops)})"
            return
        c = Culprit("custom_op", kernel=hit.mismatch.op, evidence=hit.conviction(bool(stage.failures)))
        c.summary = c.evidence[0]
        if out.culprit is not None and out.culprit.kind in FAKE_VICTIMS:
            was = out.culprit
            c.evidence.append(f"the earlier stages' suspect, {was.kind} {was.kernel or ''}".rstrip() + ": "
                              + (was.summary or (was.evidence or [""])[0]))
        stage.finding = c.summary
        out.culprit = c

    def memcheck(self, out: Findings, unmasking: bool = False) -> None:
        cuda = self._is_cuda(default=False)
        device = "cuda" if cuda else "cpu"
        checkers = dict(self.opt.checkers).get(device, Missing(device, f"no memory checker for {device} repros"))
        kind = out.signature.kind if out.signature else None
        if isinstance(checkers, Missing):
            self.stages.append(Stage("memcheck", {}, skipped=checkers.why))
            return
        if not (unmasking or self.opt.sanitize or kind in MEMORY_FAULTS):
            self.stages.append(Stage("memcheck", {}, skipped=(
                f"a {kind} is not a memory fault; --sanitize runs the checker anyway")))
            return
        for checker in checkers:
            stage = Stage("memcheck", dict(checker.env), tool=" ".join(checker.prefix))
            reports: dict[int, object] = {}

            def report(r: RunResult, tool: str = checker.tool):
                if r.spec.index not in reports:
                    reports[r.spec.index] = self.evidence.memcheck(r, tool)
                return reports[r.spec.index]

            # Checked runs cost ten times a plain one: a few, stopping at the first that shows an error. A
            # checker sees an invalid access whether or not it crashed, so a low crash rate does not matter.
            self._run(stage, min(3, self.opt.max_runs), lambda rs: any(report(r).errors for r in rs),
                      checker.prefix, checker.slowdown)
            graph = self._graph(self.trace_stage) or next(
                (g for s in self.stages if (g := self._graph(s)) is not None), None)
            found = memcheck_culprit([report(r) for r in stage.results], graph, self.suspect)
            stage.finding = found.finding
            if found.culprit is not None:
                if found.culprit.kind == "kernel" and self.trace_stage is not None and self.trace_stage.failures \
                        and not unmasking:
                    self.suspect = found.culprit.kernel  # the walk reads its inputs; the checker's lines stay
                    out.checker_evidence = found.culprit.evidence
                else:
                    out.culprit = found.culprit
                return

    def inspect(self, out: Findings) -> None:
        graph = self._graph(self.trace_stage)
        if graph is None or not self.trace_stage.failures:
            self.stages.append(Stage("inspect", {}, skipped="no generated wrapper to read the launch graph from"
                                     if graph is None else "the trace stage did not reproduce the failure"))
            return
        sig = out.signature
        bound = checks.index_bound(sig.message) if sig else None
        suspect = self.suspect
        crashed = suspect is not None
        inspect_stages: list[Stage] = []

        def observe(kernels: list[str]):
            copies, problems = self._instrumented(reinstrument.INSPECT_LEVEL, tuple(kernels))
            env = {**self._gpu_env(), **flags.INSPECT, flags.FILTER: ",".join(kernels), **copies}
            stage = self._run_until_seen(Stage("inspect", env))
            stage.finding = "; ".join(problems)
            inspect_stages.append(stage)
            fresh = self._graph(stage)
            if fresh is not None and [l.name for l in fresh.launches] != [l.name for l in graph.launches]:
                stage.finding = ("kernel names drifted between the trace and the inspection compile: "
                                 f"{[l.name for l in graph.launches]} vs {[l.name for l in fresh.launches]}")
            runs = stage.failures if (crashed and stage.failures) else stage.results
            views: dict = {}
            inputs: dict = {}
            for r in runs:
                v, i = self.evidence.level2(r, bound.value if bound else None)
                for k, view in v.items():
                    views.setdefault(k, view)
                for k, s in i.items():
                    inputs.setdefault(k, s)
            stage.finding = stage.finding or (
                f"inspected {', '.join(kernels)}: printer showed {len(views)} kernel(s)"
                + ("" if stage.failures or not crashed else "; the failure did not reproduce under level 2"))
            return views, inputs

        culprit = walk(graph, observe, suspect, crashed, bound, self.opt.inspect_cap)
        culprit.evidence[:0] = out.checker_evidence
        if culprit.kind == "unknown" and crashed and suspect:
            # The level-2 view could not convict anything, but the trace did name the faulting launch.
            culprit.kind, culprit.kernel = "kernel", suspect
            culprit.evidence.insert(0, f"the trace shows {suspect} never finished; inspection could not read "
                                       "its inputs, so this rests on the trace alone")
        out.culprit = culprit
        if inspect_stages:
            inspect_stages[-1].finding += "; " + (culprit.evidence[-1] if culprit.evidence else "")

    def eager(self, out: Findings) -> None:
        """A wrong but finite output: no NaN or bad index marks where it went wrong, so the package's every
        saved tensor is held against the exported program run eagerly on the failing call's inputs."""
        graph = self._graph(self.trace_stage)
        sig = out.signature
        why = ("no generated wrapper to walk" if graph is None else
               "the trace stage did not reproduce the failure" if not self.trace_stage.failures else
               "a launch never finished: the fault is not a wrong value" if self.suspect else
               f"a {sig.kind} is not a wrong value" if sig and sig.kind in FAULT_KINDS else None)
        if why:
            self.stages.append(Stage("eager", {}, skipped=why))
            return
        stage = self._run_until_seen(Stage("eager", dict(flags.EAGER)))
        walks = [self.evidence.eager_walk(r) for r in stage.failures or stage.results]
        seen = next((w for w in walks if w.status == "differs"), walks[0])
        compiled = self._graph(stage) or graph
        sources = SourceMap(self.evidence.kernel_information(compiled), {})
        culprit = walk_eager(compiled, seen, lambda l: sources.origin(l.name, l.handle, l.source_nodes).nodes)
        stage.finding = culprit.summary or culprit.evidence[0]
        if culprit.kind == "unknown" and out.culprit is not None:
            out.culprit.evidence.extend(culprit.evidence)
            return
        out.culprit = culprit

    # -- helpers ---------------------------------------------------------------------------------
    def _graph(self, stage: Optional[Stage]) -> Optional[wrapper.WrapperGraph]:
        """The launch graph a stage's compile generated."""
        return self.evidence.graph(stage.results[0]) if stage is not None and stage.results else None

    def _is_cuda(self, default: bool = True) -> bool:
        """Whether the compiled graph targets CUDA; else whether the packages the runs loaded without building
        them do; `default` when neither is known."""
        for stage in self.stages:
            g = self._graph(stage)
            if g is not None:
                return g.cuda or "cuda" in g.path
        self._find_prebuilt()
        devices = {self.evidence.package_device(e.path) for e in self.prebuilt or () if e.path}
        if devices and None not in devices:
            return "cuda" in devices
        return default

    def _finish(self, out: Findings) -> None:
        c = out.culprit
        if c is None:
            return
        if c.kernel:
            out.source = self.evidence.kernel_source(c.kernel, [s.results[0] for s in self.stages if s.results])
            graph = self._graph(self.trace_stage)
            hits = graph.by_name(c.kernel) if graph else []
            out.source_nodes = hits[0].source_nodes if hits else ""
        out.next_steps = next_steps(self.argv, out.signature, c, self._is_cuda())
