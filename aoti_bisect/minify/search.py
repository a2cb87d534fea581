"""Runs candidates: each in its own folder minify/candidates/NNN/ (repro.py, inputs.pt, output.log), in a
fresh process, several at once (--jobs), within a budget of runs and seconds; a cache answers a candidate
tried before. A candidate is judged by up to `runs` runs (the run's own failure rate decides how many): the
first compiles it, the later ones run the package it built (`repro.py --reuse`), and the first run that fails
the same way keeps it. What counts as "fails the same way" is `same_failure` (kind and phase of the run's
signature; for wrong values, an output that reads the culprit's ops) plus the pure checks of `refuse` before
anything runs.
"""
from __future__ import annotations

import json
import os
import queue
import re
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from ..files.own import read_log
from ..files.runfolder import RunFolder
from ..files.write import user_name, write_file
from ..run import process
from ..run.classify import classify
from ..run.types import Outcome, ProcessExit, Signature
from ..stats import Rate
from .graph import PACKAGE, Candidate, Check, Graph, Source, render

if TYPE_CHECKING:  # the options are minify's own (minify/__init__.py), which imports this module
    from . import MinifyOptions

PROGRAM = "repro.py"
INPUTS = "inputs.pt"
# Runs of the reduced repro from a copy, at least: its stated rate rests on more than one run even where one
# candidate run was enough to judge (the later runs reuse its package, so they cost a load and a run).
VERIFY_RUNS = 3


@dataclass(frozen=True)
class Expected:
    kind: str
    phase: str
    family: frozenset  # op names of the culprit kernel's nodes; a candidate keeps at least one
    check: Check
    headline: str
    rate: tuple[int, int] = (0, 0)  # the run's (failures, runs), which the repro's docstring states


@dataclass(frozen=True)
class SearchCounts:
    """What the search spent: minify.json's counts of candidates, runs and seconds."""
    candidates: int  # candidates run
    refused_without_running: int
    jobs: int  # candidates at once
    runs_per_candidate: int  # at most
    candidate_runs: int
    candidate_seconds: float
    seconds_per_candidate: Optional[float]  # the median
    verify_run_seconds: tuple[float, ...]  # each run of the final check, in run order

    def to_json(self) -> dict:
        return {**vars(self), "verify_run_seconds": list(self.verify_run_seconds)}


@dataclass(frozen=True)
class Trial:
    number: int
    folder: str
    kind: Optional[str]  # None: passed (the last run's, or the one that failed the same way)
    phase: Optional[str]
    seconds: float  # all its runs
    interesting: bool
    runs: int = 1


# The check a candidate makes for wrong values names the output that differs (graph.py, Check.EAGER).
MISMATCH = re.compile(r"aoti-bisect repro: output \d+ \((\w+)\) differs from eager")


def differing_output(log: str) -> Optional[str]:
    """The node whose output the candidate's eager comparison found wrong (None: no such line). Pure."""
    found = MISMATCH.findall(log)
    return found[-1] if found else None


def same_failure(graph: Graph, kept: tuple[str, ...], expected: Expected, signature: Optional[Signature],
                 log: str) -> bool:
    """Whether one run failed as the run did: its kind and phase, and for wrong values an output that differs
    from eager and reads an op of the culprit kernel (another wrong output is another bug). Pure."""
    if signature is None or signature.kind != expected.kind or signature.phase != expected.phase:
        return False
    if expected.check is not Check.EAGER:
        return True
    node = differing_output(log)
    if node is None:
        return False  # a Python exception that is not the comparison (an export error, a script's own raise)
    return not expected.family or any(graph.node(n).op in expected.family for n in graph.within(kept, node))


def refuse(graph: Graph, candidate: Candidate, expected: Expected) -> Optional[str]:
    """Why a candidate is not worth a run (None: run it). Pure."""
    problem = graph.problem(candidate.kept)
    if problem:
        return problem
    if expected.family and not any(graph.node(n).op in expected.family for n in candidate.kept):
        return "keeps no op of the culprit kernel"
    if expected.check in (Check.FINITE, Check.NAN):
        # A NaN fed in from outside is not the NaN the culprit makes.
        for name in graph.feeds(candidate.kept):
            if name not in candidate.zeros and graph.value(name).get("finite") is False:
                return f"input {name} is already non-finite"
    return None


def scratch(minify_folder: RunFolder, rel: str, caches: Optional[str] = None,
            headers: Optional[str] = None) -> dict[str, str]:
    """A child's TMPDIR under `rel`, its Inductor and Triton caches under `caches` (default `rel`), real folders
    of the minify folder: torch would otherwise make $TMPDIR/torchinductor_<user> outside every folder aoti-bisect
    owns, and a run folder received from someone may hold a link at any of these names (RunFolder.folder refuses
    it). Inductor keeps its precompiled headers in $TMPDIR/torchinductor_<user>: with `headers` that name is a
    link to one folder for every child (the run's own, warm from its runs; as run/layout.py does), where a
    private TMPDIR would build them again (10-20 s) in each."""
    caches = caches or rel
    tmp = minify_folder.folder(f"{rel}/tmp")
    if headers:
        link = os.path.join(tmp, f"torchinductor_{user_name()}")
        if os.path.islink(link) and os.readlink(link) != headers:
            os.unlink(link)  # a link an earlier child left there is replaced, never followed
        if not os.path.lexists(link):
            os.symlink(headers, link)
    return {"TMPDIR": tmp, "TORCHINDUCTOR_CACHE_DIR": minify_folder.folder(f"{caches}/inductor"),
            "TRITON_CACHE_DIR": minify_folder.folder(f"{caches}/triton")}


# Every candidate's compile cache: candidates share the precompiled headers, Triton's compiled kernels and any
# graph they have in common. Inductor locks each AOT compile by its key (codecache.AotCodeCompiler), so two
# slots building the same graph at once wait for each other instead of writing one folder together.
SHARED_CACHE = "cache/shared"


class Trials:
    def __init__(self, out: str, graph: Graph, expected: Expected, python: str, options: MinifyOptions,
                 say: Callable[[str], None],
                 libraries: str = "", runs: int = 1, jobs: int = 1, gpus: int = 0,
                 headers: Optional[str] = None, start: Optional[float] = None) -> None:
        self.out, self.graph, self.expected, self.python = out, graph, expected, python
        self.options, self.say = options, say
        self.runs = max(1, runs)  # runs that judge one candidate: enough to see the run's own rate fail once
        self.jobs = max(1, jobs)
        self.gpus = gpus  # slot i runs on GPU i % gpus where the program runs on CUDA
        self.headers = headers  # the precompiled headers' folder every candidate shares
        self.libraries = libraries  # the capture's folder of custom-op libraries, copied beside each program
        self.start = time.monotonic() if start is None else start  # the minify's: --budget covers its capture too
        self.cache: dict[Candidate, bool] = {}
        self.folders: dict[Candidate, str] = {}  # the folder each candidate ran in (its package, for verify)
        self.verify_seconds: list[float] = []  # each run of the final check, in run order
        self.trials: list[Trial] = []
        self.refused = 0
        self._lock = threading.Lock()
        self._values: Optional[dict] = None  # values.pt, loaded by the first candidate with inputs
        self._durations: tuple[list[float], list[float]] = ([], [])  # candidates' first runs, their later runs
        self._slots: queue.Queue = queue.Queue()
        for slot in range(self.jobs):
            self._slots.put(slot)

    def spent(self) -> bool:
        """No candidate may start: --max-candidates reached, or its first run would end past the budget."""
        return len(self.trials) >= self.options.max_candidates or self.out_of_time(self._median(False))

    def out_of_time(self, ahead: float = 0.0) -> bool:
        """--budget is for the whole minify: the search stops in time for the final check from a copy, and starts
        no run (`ahead`: what it will take, judged from the runs so far) that would end past that point."""
        return time.monotonic() - self.start + ahead > self.options.budget_s - self._verify_estimate()

    def _median(self, later: bool) -> float:
        """The candidates' first runs (each compiles) or later runs (each loads the package) so far, at the median;
        a later run not yet seen is judged by a first."""
        with self._lock:
            first, rest = list(self._durations[0]), list(self._durations[1])
        runs = (rest or first) if later else first
        return statistics.median(runs) if runs else 0.0

    @property
    def _verify_runs(self) -> int:
        return max(self.runs, VERIFY_RUNS)

    def _verify_estimate(self) -> float:
        """What verify will take, judged from the candidates' runs so far: its first run compiles while the later
        ones load the final candidate's package in the other slots, or, with no slot beside it, after it."""
        first, later = self._median(False), self._median(True)
        beside = self.jobs - 1
        if not first or not beside:
            return first + (self._verify_runs - 1) * later
        return max(first, -(-(self._verify_runs - 1) // beside) * later)

    def first_failing(self, batch: list[Candidate]) -> Optional[int]:
        """The first candidate in list order that fails the same way, trying up to --jobs at once."""
        pending: list[tuple[int, Candidate]] = []
        for i, candidate in enumerate(batch):
            if self.cache.get(candidate):
                # The ones before it still go first: the answer must not depend on --jobs.
                hit = self._run_window(pending)
                return hit if hit is not None else i
            if candidate in self.cache:
                continue
            if refuse(self.graph, candidate, self.expected):
                self.cache[candidate] = False
                self.refused += 1
                continue
            pending.append((i, candidate))
            if len(pending) == self.jobs:
                hit = self._run_window(pending)
                if hit is not None:
                    return hit
                pending = []
        return self._run_window(pending)

    def _run_window(self, window: list[tuple[int, Candidate]]) -> Optional[int]:
        window = window[:self.options.max_candidates - len(self.trials)]  # never past --max-candidates
        if not window or self.spent():
            return None
        with ThreadPoolExecutor(len(window)) as pool:
            results = list(pool.map(lambda ic: self._try(ic[1]), window))
        return next((i for (i, _), hit in zip(window, results) if hit), None)

    def _try(self, candidate: Candidate) -> bool:
        with self._lock:
            number = len(self.trials)
            self.trials.append(None)  # reserve the number
        folder = os.path.join(self.out, "candidates", f"{number:03d}")
        os.makedirs(folder, exist_ok=True)
        self._write(candidate, folder)
        slots = [self._slots.get()]
        seconds, runs = 0.0, list[tuple[Outcome, Optional[Signature], bool]]()
        try:
            while len(runs) < self.runs:
                if runs:
                    # The later runs take the package the first built: they go at once, in the slot this candidate
                    # holds and in those no other candidate does.
                    slots += self._idle_slots(self.runs - len(runs) - len(slots))
                wave = slots[:self.runs - len(runs)]  # the first run alone: no slot is borrowed before it
                for exit, text in self._wave(folder, wave, len(runs)):
                    outcome, signature = classify(text, exit)
                    seconds += exit.duration
                    with self._lock:
                        self._durations[bool(runs)].append(exit.duration)
                    runs.append((outcome, signature, same_failure(self.graph, candidate.kept, self.expected,
                                                                   signature, text)))
                hit = next((i for i, r in enumerate(runs) if r[2]), None)
                if hit is not None:
                    runs = runs[:hit + 1]
                    break
                if self.out_of_time(self._median(True)):  # the candidate count is no reason: this one is counted
                    break
        finally:
            for slot in slots:
                self._slots.put(slot)
        outcome, signature, interesting = runs[-1]
        trial = Trial(number, folder, signature.kind if signature else None, signature.phase if signature else None,
                      round(seconds, 1), interesting, len(runs))
        write_file(os.path.join(folder, "trial.json"), json.dumps(
            {"kept": list(candidate.kept), "zeros": list(candidate.zeros), "sizes": dict(candidate.sizes),
             "outcome": outcome.value, "runs": len(runs), "of_runs": self.runs,
             "signature": signature.to_json() if signature else None, "interesting": interesting,
             "seconds": trial.seconds}, indent=2))
        with self._lock:
            self.trials[number] = trial
            self.cache[candidate] = interesting
            self.folders[candidate] = folder
        self.say(f"minify: [{number:03d}] {len(candidate.kept)} node(s), {len(candidate.zeros)} zeroed, "
                 f"{len(candidate.sizes)} cut: "
                 + (f"{trial.kind}/{trial.phase}" if trial.kind else "passed")
                 + (f" in run {len(runs)} of {self.runs}" if self.runs > 1 and interesting else
                    f" in each of {len(runs)} runs" if len(runs) > 1 else "")
                 + (" (kept)" if interesting else "") + f" in {trial.seconds:.0f}s")
        return interesting

    def _idle_slots(self, n: int) -> list[int]:
        taken: list[int] = []
        while len(taken) < n:
            try:
                taken.append(self._slots.get_nowait())
            except queue.Empty:
                break
        return taken

    def _wave(self, folder: str, slots: list[int], first: int) -> list:
        """Runs first, first+1, ... of the folder's repro.py, one in each slot, at once; in run order."""
        if len(slots) == 1:
            return [self._execute(folder, slots[0], first)]
        with ThreadPoolExecutor(len(slots)) as pool:
            return list(pool.map(lambda i: self._execute(folder, slots[i], first + i), range(len(slots))))

    def _execute(self, folder: str, slot: int, run: int = 0) -> tuple[ProcessExit, str]:
        """One run of the folder's repro.py; the first compiles it, later ones run the package it built."""
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1",
               **scratch(RunFolder(self.out), f"cache/slot{slot}", SHARED_CACHE, self.headers)}
        if self.gpus:
            env["CUDA_VISIBLE_DEVICES"] = str(slot % self.gpus)
        log = os.path.join(folder, "output.log" if run == 0 else f"output.{run}.log")
        exit = process.execute([self.python, os.path.join(folder, PROGRAM), *(["--reuse"] if run else [])], env,
                               folder, log, self.options.timeout_s)
        return exit, read_log(log)

    def _write(self, candidate: Candidate, folder: str) -> Source:
        source = render(self.graph, candidate, self.expected.check, self.expected.headline, self.expected.rate)
        write_file(os.path.join(folder, PROGRAM), source.text)
        for lib in source.libraries:
            if not os.path.exists(os.path.join(folder, lib)):
                shutil.copyfile(os.path.join(self.libraries, lib), os.path.join(folder, lib))
        if source.inputs:
            import torch  # only here: the search and the program text need none

            with self._lock:
                if self._values is None:
                    self._values = torch.load(os.path.join(self.out, "values.pt"), weights_only=True)
            sizes = dict(candidate.sizes)
            # A cut input is saved cut (and contiguous): inputs.pt holds only what the repro reads.
            torch.save({name: self._values[name][tuple(slice(0, n) for n in sizes[name])].clone()
                        if name in sizes else self._values[name] for name in source.inputs},
                       os.path.join(folder, INPUTS))
        return source

    def lines_of(self, candidate: Candidate) -> int:
        return render(self.graph, candidate, self.expected.check, self.expected.headline,
                      self.expected.rate).text.count("\n")

    def write_final(self, candidate: Candidate, out: str) -> Source:
        for name in (PROGRAM, INPUTS, *self.graph.libraries):
            if os.path.lexists(os.path.join(out, name)):  # a link is removed, never written through
                os.remove(os.path.join(out, name))
        return self._write(candidate, out)

    def verify(self, out: str, best: Candidate) -> tuple[Rate, Optional[str]]:
        """Runs repro.py from a copy of just its files in a fresh temporary folder, max(runs, VERIFY_RUNS) times:
        how often it fails as the run did, and the first failure's signature (else the last run's answer). The
        first run compiles the copy; the others load a package (`--reuse`), --jobs at once: the one the final
        candidate built from the same repro.py and inputs.pt, beside the first run's compile, else the first's."""
        failures, first, last = 0, None, "passed"
        n = self._verify_runs
        built = os.path.join(self.folders.get(best, ""), PACKAGE)
        with tempfile.TemporaryDirectory(prefix="aoti-bisect-minify-") as tmp:
            fresh = self._copy(out, tmp, "compiles")
            if self.jobs > 1 and n > 1 and os.path.isfile(built):
                loads = self._copy(out, tmp, "loads")
                shutil.copy(built, loads)
                with ThreadPoolExecutor(1) as pool:
                    compiled = pool.submit(self._execute, fresh, 0, 0)
                    later = self._waves(loads, list(range(1, self.jobs)), 1, n)
                    done = [compiled.result(), *later]
            else:
                done = [self._execute(fresh, 0, 0), *self._waves(fresh, list(range(self.jobs)), 1, n)]
            for run, (exit, text) in enumerate(done):
                _, signature = classify(text, exit)
                if run == 0:
                    write_file(os.path.join(out, "verify.log"), text)
                if signature is not None:
                    last = f"{signature.kind}/{signature.phase}: {signature.message}"
                if same_failure(self.graph, best.kept, self.expected, signature, text):
                    failures += 1
                    first = first or last
            self.verify_seconds = [round(exit.duration, 1) for exit, _ in done]
        rate = Rate(failures, n)
        self.say(f"minify: verify from a copy: failed as the run did in {rate.describe()}")
        return rate, first or last

    def _copy(self, out: str, tmp: str, name: str) -> str:
        folder = os.path.join(tmp, name)
        os.mkdir(folder)
        for file in (PROGRAM, INPUTS, *self.graph.libraries):
            if os.path.isfile(os.path.join(out, file)):
                shutil.copy(os.path.join(out, file), folder)
        return folder

    def _waves(self, folder: str, slots: list[int], start: int, end: int) -> list:
        """Runs start .. end-1 of the folder's repro.py, len(slots) at once."""
        done = []
        for first in range(start, end, len(slots)):
            done += self._wave(folder, slots[:end - first], first)
        return done

    def why_not(self) -> str:
        ran = [t for t in self.trials if t is not None]
        if not ran:
            return "no candidate could be built or run"
        seen = sorted({f"{t.kind}/{t.phase}" if t.kind else "passed" for t in ran})
        return (f"expected {self.expected.kind}/{self.expected.phase}, the standalone programs gave "
                f"{', '.join(seen)} (see {os.path.join(self.out, 'candidates')})")

    def summary(self) -> SearchCounts:
        ran = [t for t in self.trials if t is not None]
        return SearchCounts(len(ran), self.refused, self.jobs, self.runs, sum(t.runs for t in ran),
                            round(sum(t.seconds for t in ran), 1),
                            round(statistics.median(t.seconds for t in ran), 1) if ran else None,
                            tuple(self.verify_seconds))
