"""One `aoti-bisect run`: probe the environment, climb the ladder, write the report (even when interrupted)."""
from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Callable
from typing import Any, Optional

from .aoti.hook_record import CompileCounts, HookRecord, ahead_row, compile_counts, package_rows
from .config import RunConfig
from .diagnose.constants import convict_constants
from .diagnose.context import Options
from .diagnose.evidence import RunEvidence
from .diagnose.facts import note
from .diagnose.findings import Findings, Stage
from .diagnose.ladder import Ladder
from .diagnose.source import locate_findings, source_map, walked_graph
from .exits import EXIT_INCONCLUSIVE, UsageFailure
from .progress import Progress
from .report.bundle import keep_repro_script, record_secret_spans
from .report.facts import render
from .report.model import Report
from .report.redact import Redactor
from .run import checkers, toolchains
from .run.environment import PYCACHE_PREFIX
from .run.harness import Harness
from .run.layout import compile_key
from .run.probe import interpreter_of, probe_environment, relevant_env
from .run.registry import debugger, fresh_process
from .run.types import Outcome, RunResult, RunSpec
from .stats import Rate
from .text import printable
from .verdict import Verdict

PROBE_WAIT_S = 120.0  # how long a batch of nothing but infrastructure errors waits for the environment probe


HOOK_ABSENT = ("no run's Python loaded aoti-bisect's in-process hook (it ignores PYTHONPATH: python -I, -E or -S; or "
               "the command starts no Python), so the packages were not recorded, package caches at fixed paths "
               "were not made private to each run, no prebuilt package was instrumented, and custom ops and eager "
               "were not checked: run the script with a plain `python`")


class Session:
    def __init__(self, config: RunConfig, progress: Progress) -> None:
        self.config = config
        self.run_dir = config.run_dir
        self.argv = list(config.argv)
        # The interpreter the probe describes: the repro's, never aoti-bisect's own (see interpreter_of).
        self.python = config.python or interpreter_of(self.argv)
        self.progress = progress
        self.harness = Harness(config.run_dir, jobs=config.jobs, limits=config.limits, cache_root=config.cache_root,
                               reuse=config.reuse, warm=config.warm)
        self.options = Options(runs=config.runs, max_runs=config.max_runs, timeout=config.timeout,
                               stages=config.stages, sanitize=config.sanitize, budget=config.budget,
                               reuse_baseline=config.reuse != "none",
                               checkers=checkers.find(config.sanitizer, config.sanitizer_tools), debugger=debugger())
        self.environment: dict = {}
        self.redactor = Redactor.from_env(dict(os.environ), config.redact_paths)

    def probe(self) -> Optional[str]:
        """Fills self.environment; returns an error line when the repro's Python cannot import torch."""
        try:
            self.environment = probe_environment(self.python, os.path.join(self.run_dir, "probe"),
                                                 self.harness.environment.base_env, self.harness.cancel)
        except OSError as exc:  # in a thread: the runs meet the same full or read-only disk and say so
            self.environment = {"probe_error": f"{exc.strerror or exc}: {exc.filename or self.run_dir}"}
        # A probe_error is not fatal: the runs say for themselves whether the repro can run.
        self.environment["env"] = self.redactor.env(relevant_env(dict(os.environ)))
        free = str(self.environment.get("gpu_free_mib") or "")
        if self.harness.room is not None and free.isdigit():
            self.harness.room.gpu_free = int(free) << 20
        if "torch_error" in self.environment and self.config.python_script:
            return f"torch is not importable by {self.python}: {self.environment['torch_error']}"
        return None

    def _vec_isa(self) -> dict:
        """Torch's vector-ISA answer as the first hooked run had it, and whether later hooked runs skipped the
        check (run/environment.py's vec_isa)."""
        answer = self.harness.environment.vec_isa_answer()
        if answer is None:
            return {}
        return {"vec_isa": {"checked": answer.get("checked"), "claimed": answer.get("claimed"),
                            "runs_that_skipped_the_check": self.harness.environment.vec_isa_skipped}}

    def _hook_never_loaded(self, outcome: Findings, hooks: list) -> bool:
        ran = [h for s, (_, records) in zip(outcome.stages, hooks) for r, h in zip(s.results, records)
               if self.harness.environment.hooked(r.spec) and r.outcome is not Outcome.INFRA_ERROR]
        return bool(ran) and not any(h.loaded for h in ran)

    def _run_batch(self, specs: list[RunSpec], on_result: Callable[[RunResult], None],
                   stop: Callable[[list[RunResult]], bool]) -> None:
        def landed(r: RunResult) -> None:
            on_result(r)
            self.progress.run(r)
        self.progress.batch(specs)
        # A probe that found the repro cannot run here (no torch) stops the batch: no more instant infra runs.
        self.harness.scheduler.run_many(specs, on_result=landed, stop=lambda rs: stop(rs) or self._cannot_run(rs),
                              on_start=self.progress.start)

    def _probe_beside(self) -> None:
        try:
            self._probe.setdefault("problem", self.probe())
        finally:
            self._probed.set()

    def _cannot_run(self, results: list[RunResult]) -> bool:
        """Only infrastructure errors so far: wait for the probe, and stop if it found the repro cannot run here. A
        batch with a run that ran is not stopped: the probe's problem (a torch it cannot import) is not the runs'."""
        if not results or not all(r.outcome is Outcome.INFRA_ERROR for r in results):
            return False
        self._probed.wait(PROBE_WAIT_S)
        return bool(self._probe.get("problem"))

    def _compiles(self, stage: Stage, records: list[HookRecord]) -> CompileCounts:
        """compile_counts of a stage: an unhooked stage whose later runs took the stored package (the baseline's,
        under reuse) is counted over those runs, its first wave's said apart."""
        env = self.harness.environment
        if env.hooked_stage(stage.hook):
            row = compile_counts(stage.name, records, True)
        else:
            took = [h for r, h in zip(stage.results, records) if env.hooked(r.spec)]
            row = (compile_counts(stage.name, took, True, len(records) - len(took)) if took else
                   compile_counts(stage.name, records, False))
        warm = sum(r.exit.warm for r in stage.results)
        eligible = any(self.harness.warm_start(r.spec) for r in stage.results)
        problems = self.harness.warm.problems if self.harness.warm is not None and eligible and not warm else []
        return dataclasses.replace(row, warm=warm, cold_because=tuple(problems))

    def _announce(self, out: Findings, left: int) -> None:
        """The verdict as soon as it stands, when the rate still runs on after it (diagnose/after_verdict.py)."""
        # No stage runs after the verdict: a compile still under way for one would hold a slot the rate could use.
        self.harness.scheduler.finish_ahead()
        if not left:
            return
        self._say_verdict(out)
        self.progress.say(f"aoti-bisect: the rate runs on: up to {left} more baseline runs within "
                          f"{self.options.budget:.0f}s (--budget 0 skips this; Ctrl-C keeps the verdict)")

    def _announce_walk(self, out: Findings) -> None:
        """The verdict a rare crash gave, before the walk waits for another crash (Ladder._walk_after_verdict)."""
        self._say_verdict(out)
        self.progress.say("aoti-bisect: the walk reads the faulting kernel's inputs next, in the next crash under "
                          "the printer; it keeps this culprit or moves it to an earlier producer (Ctrl-C keeps "
                          "the verdict)")

    def _say_verdict(self, out: Findings) -> None:
        what = (out.culprit.headline if out.culprit is not None and out.culprit.headline is not None else out.summary)
        self.progress.say(f"aoti-bisect: verdict after {out.verdict_s:.0f}s and {out.verdict_runs} runs: "
                          f"{out.verdict.value}" + (f": {printable(self.redactor(render(what)))}" if what else ""))

    def execute(self) -> Report:
        evidence = self._evidence()
        compile_ahead = self.harness.scheduler.ahead if self.config.ahead else lambda specs, now: None
        ladder = Ladder(self.argv, self._run_batch, evidence, self.options, compile_ahead,
                        on_verdict=self._announce, on_walk=self._announce_walk)
        self.progress.say(f"aoti-bisect: run directory {self.run_dir}")
        if self.config.python_script:
            try:
                keep_repro_script(self.run_dir, self.argv)
            except OSError as exc:  # the bundle goes without it; the runs do not need it
                self.progress.say(f"aoti-bisect: cannot keep a copy of the repro script: {exc.strerror or exc}")
        outcome, failure = self._climb(ladder)
        report = self._report(outcome, evidence)
        try:
            report.write()
            record_secret_spans(self.run_dir, report.record, self.redactor)  # a later bundle knows this run's secrets
        except OSError as exc:
            failure = failure or f"{exc.strerror or exc}: {exc.filename or self.run_dir}"
            raise UsageFailure(f"{failure}; no report could be written", EXIT_INCONCLUSIVE)
        if failure:
            raise UsageFailure(f"{failure}; partial report: {os.path.join(self.run_dir, 'report.md')}",
                               EXIT_INCONCLUSIVE)
        return report  # the caller says the answer: `run` on stdout (cli._answer), a night in its own lines

    def _evidence(self) -> RunEvidence:
        base_env, cancel = self.harness.environment.base_env, self.harness.cancel
        return RunEvidence(os.path.join(self.run_dir, "prebuilt"), base_env, cancel, self.progress.say,
                           lambda ops: fresh_process(self.python, ops, os.path.join(self.run_dir, "doctor"),
                                                     base_env, cancel),
                           lambda path: toolchains.experiment(path, self.python,
                                                              os.path.join(self.run_dir, "doctor", "toolchains"),
                                                              base_env, cancel))

    def _climb(self, ladder: Ladder) -> tuple[Findings, Optional[str]]:
        """The ladder's findings, with the environment probe running beside the baseline. A Ctrl-C gives the partial
        findings; a run directory that cannot be written (full disk, quota, read-only) gives them with what failed."""
        probe: dict[str, Any] = {}
        self._probe = probe
        self._probed = threading.Event()
        thread = threading.Thread(target=self._probe_beside, daemon=True)
        thread.start()
        failure = None
        try:
            try:
                outcome = ladder.run()
            finally:
                self.harness.scheduler.finish_ahead()
                self.harness.close()
            thread.join()
        except KeyboardInterrupt:
            self.harness.cancel.set()
            thread.join()  # the probe's kill, too, finishes before we exit
            outcome = ladder.partial()
            self.progress.say("aoti-bisect: interrupted; writing a partial report")
        except OSError as exc:  # the run directory: full disk, quota, read-only, I/O error
            self.harness.cancel.set()
            failure = f"{exc.strerror or exc}: {exc.filename or self.run_dir}"
            outcome = dataclasses.replace(ladder.partial(), verdict=Verdict.ERROR, summary=note(f"stopped: {failure}"))
        problem = probe.get("problem")
        if problem and not outcome.interrupted:
            ran = any(r.outcome is not Outcome.INFRA_ERROR for s in outcome.stages[:1] for r in s.results)
            outcome = Findings(Verdict.ERROR, outcome.signature, outcome.baseline if ran else Rate(0, 0),
                               outcome.stages, summary=note(problem))  # Rate(0, 0): "could not run", not 0/20
            self.progress.say(f"aoti-bisect: error: {problem}")
        return outcome, failure

    def _report(self, outcome: Findings, evidence: RunEvidence) -> Report:
        """The findings as the report: with the environment, what the hooked runs compiled and loaded, the constants'
        conviction and the culprit's source lines, all read from what the runs left."""
        self.environment.update(self._vec_isa())
        room = self.harness.room
        self.environment["slots"] = room.describe() if room is not None else {"jobs": self.harness.scheduler.jobs}
        cache = self.harness.environment.bytecode_cache()
        if cache:
            self.environment["bytecode_cache"] = cache[PYCACHE_PREFIX]
        hooks = [(s.name, [evidence.hook(r) for r in s.results]) for s in outcome.stages]  # a name may repeat
        records = [h for _, stage_records in hooks for h in stage_records]
        if self._hook_never_loaded(outcome, hooks):
            outcome.next_steps.append(HOOK_ABSENT)
            self.progress.say(f"aoti-bisect: {HOOK_ABSENT}")
        graph = walked_graph(outcome, evidence)
        convict_constants(outcome, records, graph, self.argv)
        locate_findings(outcome, graph, source_map(graph, records))
        packages = [row for stage, records in hooks for row in package_rows(stage, records)]
        compiles = [self._compiles(s, records) for s, (_, records) in zip(outcome.stages, hooks)]
        ahead = [ahead_row(r.spec.name, evidence.hook(r), r.exit.duration, r.exit.launch_error == "cancelled",
                           compile_key(r.spec.env_dict)) for r in self.harness.scheduler.ahead_results]
        return Report.from_findings(self.run_dir, self.argv, outcome, self.environment, self.redactor, packages,
                                    compiles, self.harness.environment.reuse, ahead)
