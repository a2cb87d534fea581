"""Which run goes when: up to `jobs` at a time, each holding a slot; the first run of a cold compile key alone
(or beside runs of its key that compile anyway); compile-only runs of later stages' flag sets in the slots that
first run leaves idle, or at once where slots are idle when they are queued."""
from __future__ import annotations

import contextlib
import dataclasses
import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Optional

from . import process
from .layout import Layout, warm_key
from .slots import Room
from .types import Outcome, RunResult, RunSpec

Run = Callable[[RunSpec, Optional[process.Cancel]], RunResult]


class Scheduler:
    def __init__(self, run: Run, layout: Layout, jobs: int, cancel: process.Cancel,
                 reuse_dir: Callable[[RunSpec], Optional[str]], room: Optional[Room] = None) -> None:
        self._run = run
        self._room = room  # --jobs unset: a start beside others also needs the machine's room (slots.py)
        self._layout = layout
        self._reuse_dir = reuse_dir
        self.jobs = jobs
        self.cancel = cancel
        self._lock = threading.Lock()
        # A run holds a slot while it runs: the slot names its private cache and, on a GPU host, its GPU.
        self._slots: queue.Queue = queue.Queue()
        for slot in range(self.jobs):
            self._slots.put(slot)
        self._ahead_queue: list[RunSpec] = []
        self._ahead_running: dict = {}  # future -> the spec it compiles
        self._ahead_pool: Optional[ThreadPoolExecutor] = None
        self._ahead_cancel = process.Cancel(self.cancel)
        self.ahead_results: list[RunResult] = []  # the compile-only runs that ran, in the order they ended
        self._busy = 0  # runs of the current batch in flight: ahead() starts its runs at once in the slots left

    @contextlib.contextmanager
    def slot(self) -> Iterator[int]:
        slot = self._slots.get()
        try:
            yield slot
        finally:
            self._slots.put(slot)

    def run_many(self, specs: Iterable[RunSpec], on_result: Callable[[RunResult], None] = lambda r: None,
                 stop: Callable[[list[RunResult]], bool] = lambda rs: False,
                 on_start: Callable[[RunSpec], None] = lambda spec: None) -> list[RunResult]:
        """Runs specs, up to `jobs` at a time, until all ran or `stop(results so far)` says enough.

        The first run of a cold compile key runs alone: parallel runs would all compile the same thing. The
        slots it leaves idle run the queued compile-only runs (`ahead`). Runs that take no package (the baseline's,
        compiling the user's way) compile the same thing whenever they go, so those beside a cold first run use
        the slots left over after the queued compile-only runs.
        """
        pending = list(specs)
        results: list[RunResult] = []
        with ThreadPoolExecutor(max_workers=self.jobs) as pool:
            running: set[Future] = set()
            try:
                self._drive(pool, pending, running, results, on_result, stop, on_start)
            except BaseException:
                # Set before the pool's exit waits on its threads (an interrupt, or a full disk in another
                # run): each one then kills its child tree instead of running on.
                self.cancel.set()
                raise
        results.sort(key=lambda r: r.spec.index)
        return results

    def _drive(self, pool: ThreadPoolExecutor, pending: list[RunSpec], running: set[Future],
               results: list[RunResult], on_result: Callable[[RunResult], None],
               stop: Callable[[list[RunResult]], bool], on_start: Callable[[RunSpec], None]) -> None:
        alone, first = None, None  # a cold key's first run, and its spec
        while (pending or running) and not self.cancel.is_set():
            while pending and self._admit(len(running) + len(self._ahead_running)) and not stop(results):
                spec = pending[0]
                cold = not self._layout.is_warm(spec)
                if cold and self._compiling_ahead(spec) is not None:
                    break  # its package is being built ahead: waiting costs less than building it twice
                twin = alone in running and self._twin(spec, first, len(running))
                if cold and running and not twin:
                    break
                self._drop_ahead(spec)
                on_start(spec)
                future = pool.submit(self._run, pending.pop(0), None)
                running.add(future)
                if cold and not twin:
                    alone, first = future, spec
                    if self._reuse_dir(spec) is not None:
                        break
            self._busy = len(running)
            if alone in running:
                self._start_ahead(len(running))
            if not running:
                # Nothing of the batch runs: it is done, or compile-only runs hold the slots (or build the key
                # the next run needs), and then the batch waits for one of them, never ends with runs unrun.
                with self._lock:
                    holding = list(self._ahead_running)
                if not pending or stop(results) or not holding:
                    break
                wait(holding, timeout=0.5, return_when=FIRST_COMPLETED)
                continue
            done, _ = wait(running, timeout=0.5, return_when=FIRST_COMPLETED)
            running -= done
            self._busy = len(running)
            for fut in sorted(done, key=id):
                result = fut.result()
                if result.exit.launch_error == "cancelled":
                    continue
                results.append(result)
                if self._room is not None:
                    self._room.note(result)
                on_result(result)

    def _admit(self, busy: int) -> bool:
        """Whether a run may start beside `busy` others: a slot is free and, with --jobs unset, the machine has room."""
        return busy < self.jobs and (self._room is None or self._room.admit(busy))

    def _twin(self, spec: RunSpec, first: Optional[RunSpec], busy: int) -> bool:
        """Whether a run may start beside its cold key's first run: it takes no package, and a slot is left once
        the queued compile-only runs have theirs."""
        return (first is not None and warm_key(spec) == warm_key(first) and self._reuse_dir(spec) is None
                and busy + len(self._ahead_running) + len(self._ahead_queue) < self.jobs)

    # -- compile-only runs for later stages ------------------------------------------------------------
    def ahead(self, specs: Iterable[RunSpec], now: bool = False) -> None:
        """Queues compile-only runs (RunSpec.compile_only) of flag sets that later stages will run, for the
        slots a cold first run leaves idle; `now`: also in the slots idle at this moment (a flag set a finding
        called for, between stages). Only where a flag set's runs take its package (reuse) and there is a slot to
        spare; a key that is warm, queued or being built already is left out."""
        if self.jobs < 2:
            return
        with self._lock:
            for spec in specs:
                key = warm_key(spec)
                if (self._reuse_dir(spec) and not self._layout.is_warm(spec)
                        and all(warm_key(s) != key for s in [*self._ahead_queue, *self._ahead_running.values()])):
                    self._ahead_queue.append(dataclasses.replace(spec, compile_only=True))
        if now:
            self._start_ahead(self._busy)

    def _compiling_ahead(self, spec: RunSpec) -> Optional[Future]:
        """The running compile-only run that builds this spec's package, if one is."""
        key = warm_key(spec)
        with self._lock:
            return next((f for f, s in self._ahead_running.items() if warm_key(s) == key), None)

    def _drop_ahead(self, spec: RunSpec) -> None:
        """A stage has come to run this key: its own first run compiles it, unless an ahead run already is."""
        with self._lock:
            self._ahead_queue = [s for s in self._ahead_queue if warm_key(s) != warm_key(spec)]

    def _start_ahead(self, busy: int) -> None:
        started = []
        with self._lock:
            while self._ahead_queue and self._admit(busy + len(self._ahead_running)):
                if self._ahead_pool is None:
                    self._ahead_pool = ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="ahead")
                spec = self._ahead_queue.pop(0)
                future = self._ahead_pool.submit(self._run, spec, self._ahead_cancel)
                self._ahead_running[future] = spec
                started.append(future)
        for future in started:  # outside the lock: a future already done runs its callback here, at once
            future.add_done_callback(self._ahead_done)

    def _ahead_done(self, future: Future) -> None:
        with self._lock:
            self._ahead_running.pop(future, None)
            if not future.cancelled() and future.exception() is None:
                result = future.result()
                if result.outcome is Outcome.INFRA_ERROR:
                    # No torch, no driver: every run here fails so, and each compile queued would start only to.
                    self._ahead_queue.clear()
                self.ahead_results.append(result)
                if self._room is not None:
                    self._room.note(result)

    def finish_ahead(self) -> None:
        """Drops the queued compile-only runs and kills the running ones: the ladder needs nothing more."""
        with self._lock:
            self._ahead_queue.clear()
            pool = self._ahead_pool
        self._ahead_cancel.set()
        if pool is not None:
            pool.shutdown(wait=True)
