"""Turns a RunSpec into an isolated child run and a classified RunResult; runs batches in parallel."""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.util
import json
import os
import queue
import shlex
import shutil
import threading
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from typing import Callable, Iterable, Optional

from ..aoti import flags
from ..aoti.wrapper import triton_kernel_name
from ..child import hook
from ..files import read_log, user_name, write_file
from . import process
from .classify import classify
from .types import Outcome, ProcessExit, RunResult, RunSpec, Signature

CHILD_ENV = {"PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1"}
# Only the diagnostic (hooked) runs: it makes a CPU kernel's exception name the kernel, but it also changes
# what the repro prints (a symbolized C++ stack under every c10 error), so the runs that stand for the user's
# own (baseline, determinism) go without it.
DIAGNOSTIC_ENV = {"TORCH_SHOW_CPP_STACKTRACES": "1", hook.CONSTANTS_ENV: "1"}
# Torch's vector-ISA answer, left in the run directory by the first hooked run that had it (child/hook/vecisa.py).
VEC_ISA_ANSWER = "vec-isa.json"
VEC_ISA_OK = "TORCHINDUCTOR_VEC_ISA_OK"
NO_BYTECODE, PYCACHE_PREFIX = "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX"
HOOK_RECORD = "hook.json"  # beside output.log; a second recording process writes hook-<pid>.json



def compile_key(env: dict[str, str]) -> str:
    """Runs with the same compile-time flags may share a compile cache; others never do."""
    items = sorted((k, v) for k, v in env.items() if k not in flags.RUNTIME)
    if not items:
        return "default"
    return hashlib.sha1(json.dumps(items).encode()).hexdigest()[:10]



class Harness:
    """Owns the run directory layout: runs/<stage>-NNN/{output.log,rerun.sh,spec.json,hook.json,cwd,tmp},
    cache/<key>/, and cache/<key>.reuse/ (the flag set's packages, for runs under reuse: child/hook/reuse.py).

    Parallel runs never share a writable compile cache: AOTI rewrites files in it on every compile, even a
    cached one (`extern_kernel_nodes.json` is truncated, then written), so a run packaging its model beside
    another one's compile can read a half-written file (seen: 2 of 40 runs of flaky_custom_op_crash at
    --jobs 2 failed to load their package with "attempting to parse an empty input"). Each slot s > 0 runs
    in cache/<key>.slot<s>, a copy of the snapshot (cache/<key>.warm) taken when the key's first run, which
    runs alone, finished: one compile per key still serves every slot.

    While a cold key's first run runs alone, the other slots would sit idle: compile-only runs of the flag sets
    later stages will need (`ahead`) take them, so that those stages find their packages built (under reuse).
    """

    def __init__(self, run_dir: str, base_env: Optional[dict[str, str]] = None, jobs: int = 1,
                 limits: process.OutputLimits = process.OutputLimits(),
                 cancel: Optional[process.Cancel] = None, cache_root: Optional[str] = None,
                 gpu_slots: Optional[list[str]] = None, reuse: str = "hooked") -> None:
        # Real paths: a run's folder is checked against them for links (see _prepare).
        self.run_dir = os.path.realpath(run_dir)
        # Several sessions (a scenario check) may share one cache root: keys include the flags and the graph.
        self.cache_root = os.path.realpath(cache_root or os.path.join(self.run_dir, "cache"))
        self.base_env = {k: v for k, v in (base_env if base_env is not None else os.environ).items()
                         if not k.startswith(flags.OWNED)}
        self.jobs = max(1, jobs)
        if reuse not in flags.REUSE_MODES:
            raise ValueError(f"reuse must be one of {flags.REUSE_MODES}, not {reuse!r}")
        self.reuse = reuse
        self.limits = limits
        self.cancel = cancel or process.Cancel()
        self._warm: set[tuple] = set()
        self.vec_isa_skipped = 0  # runs that took an earlier run's vector-ISA answer (vec_isa)
        self._synced: set[tuple] = set()
        self._lock = threading.Lock()
        # A run holds a slot while it runs: the slot names its private cache and, on a GPU host, its GPU.
        self._gpu_slots = list(gpu_slots or [])
        if gpu_slots:
            self.jobs = len(gpu_slots)
        self._slots: queue.Queue = queue.Queue()
        for slot in range(self.jobs):
            self._slots.put(slot)
        self._ahead_queue: list[RunSpec] = []
        self._ahead_running: set = set()
        self._ahead_pool: Optional[ThreadPoolExecutor] = None
        self._ahead_cancel = process.Cancel(self.cancel)
        self.ahead_results: list[RunResult] = []  # the compile-only runs that ran, in the order they ended

    def cache_dir(self, overlay: dict[str, str], slot: int = 0) -> str:
        base = os.path.join(self.cache_root, compile_key(overlay))
        return base if slot == 0 else f"{base}.slot{slot}"

    def hooked_stage(self, hook: bool) -> bool:
        """Whether a stage's runs carry the hook: its own choice, or reuse for every run."""
        return hook or self.reuse == "all"

    def hooked(self, spec: RunSpec) -> bool:
        return self.hooked_stage(spec.hook)

    def reuse_dir(self, spec: RunSpec) -> Optional[str]:
        """The flag set's package folder, shared by its runs in every slot; None: this run compiles."""
        if self.reuse == "none" or not self.hooked(spec):
            return None
        return self.cache_dir(spec.env_dict) + ".reuse"

    def overlay(self, spec: RunSpec, run_path: str, slot: int = 0) -> dict[str, str]:
        """Every variable a run gets on top of the user's environment (what rerun.sh sets)."""
        cache = self.cache_dir(spec.env_dict, slot)
        tmp = os.path.join(run_path, "tmp")
        env = dict(CHILD_ENV)
        if self._gpu_slots:
            env["CUDA_VISIBLE_DEVICES"] = self._gpu_slots[slot]
        env.update({
            # A repro may seed its randomness per run from this (the nightly's seeded tests do).
            "AOTI_BISECT_RUN_INDEX": str(spec.index),
            "TMPDIR": tmp,
            "TORCHINDUCTOR_CACHE_DIR": os.path.join(cache, "inductor"),
            "TRITON_CACHE_DIR": os.path.join(cache, "triton"),
            "TRITON_HOME": os.path.join(cache, "triton-home"),
            "XDG_CACHE_HOME": os.path.join(self.cache_root, "xdg"),
            # Extensions do not depend on Inductor flags; sharing them saves a C++ build per stage.
            "TORCH_EXTENSIONS_DIR": os.path.join(self.cache_root, "torch_extensions"),
        })
        if spec.hook:  # a diagnostic stage's own: never a baseline run, even one that carries the hook for reuse
            env.update(DIAGNOSTIC_ENV)
        if spec.compile_only:
            env[hook.AHEAD_ENV] = "1"
        if self.hooked(spec):
            # First on the path, ahead of the user's own entries (kept): its sitecustomize runs theirs.
            user_path = self.base_env.get("PYTHONPATH")
            env["PYTHONPATH"] = hook.SITE_DIR + (os.pathsep + user_path if user_path else "")
            env[hook.ENV] = os.path.join(run_path, HOOK_RECORD)
            env.update(self.vec_isa())
            env.update(self.bytecode_cache())
        reuse = self.reuse_dir(spec)
        if reuse:
            env[hook.REUSE_ENV] = reuse
            env[hook.FLAG_SET_ENV] = compile_key(spec.env_dict)
        env.update(spec.env_dict)
        return env

    def vec_isa(self) -> dict[str, str]:
        """What a hooked run gets for torch's vector-ISA check: where to leave the answer and, once an earlier
        run's answer says that every ISA the CPU claims passed its check, the setting that skips the check and
        gives the same answer. The baseline and determinism runs of `--reuse hooked` check as the user's do."""
        env = {hook.VEC_ISA_ENV: os.path.join(self.run_dir, VEC_ISA_ANSWER)}
        if VEC_ISA_OK in self.base_env:  # the user's own setting stands
            return env
        answer = self.vec_isa_answer() or {}
        if answer.get("checked") and answer.get("checked") == answer.get("claimed"):
            env[VEC_ISA_OK] = "1"
        return env

    def bytecode_cache(self) -> dict[str, str]:
        """Where the user's environment turns Python's bytecode cache off (PYTHONDONTWRITEBYTECODE, common in
        container images) and torch was installed without bytecode, every process compiles torch's sources
        afresh: 5-7 s an import on the lent H100 host against 2.6 s, and torch 2.11's vector-ISA checks import
        torch again in a subprocess per ISA. A hooked run then keeps the bytecode under the cache root (the same
        code, compiled once for the bisection); the runs that stand for the user's keep the user's setting, as
        does a user's own PYTHONPYCACHEPREFIX. Where torch's bytecode exists (pip writes it at install), a
        prefix would only make Python ignore it and compile everything again."""
        if not self.base_env.get(NO_BYTECODE) or PYCACHE_PREFIX in self.base_env or not torch_bytecode_missing():
            return {}
        return {NO_BYTECODE: "", PYCACHE_PREFIX: os.path.join(self.cache_root, "pycache")}

    def vec_isa_answer(self) -> Optional[dict]:
        """The answer the first hooked run left ({"checked": [...], "claimed": [...]}); None before it did."""
        try:
            with open(os.path.join(self.run_dir, VEC_ISA_ANSWER)) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def _prepare(self, spec: RunSpec, run_path: str, slot: int) -> dict[str, str]:
        cwd = os.path.join(run_path, "cwd")
        tmp = os.path.join(run_path, "tmp")
        # An earlier run's child (or whoever filled the folder) may have put a link where this run's folders
        # go: following it would write this run's files, and its child's, outside the run directory.
        if any(os.path.realpath(d) != d for d in (cwd, tmp)):
            raise OSError(f"a symbolic link lies on the way to {cwd} or {tmp}")
        cache = self.cache_dir(spec.env_dict, slot)
        self._sync_slot(spec, slot, cache)
        headers = os.path.join(self.cache_root, "precompiled-headers")
        for d in (cwd, tmp, os.path.join(cache, "inductor"), headers, self.reuse_dir(spec)):
            if d is None:
                continue
            os.makedirs(d, exist_ok=True)
        # Inductor keeps precompiled headers under $TMPDIR/torchinductor_<user>; a private TMPDIR would
        # rebuild them (10-20 s) every run. Their names hash the header and the compiler flags, so one
        # folder can serve every run and every flag set.
        link = os.path.join(tmp, f"torchinductor_{user_name()}")
        if not os.path.lexists(link):
            os.symlink(headers, link)
        overlay = self.overlay(spec, run_path, slot)
        if overlay.get(VEC_ISA_OK) == "1":  # ours: vec_isa() never adds it over the user's own setting
            with self._lock:
                self.vec_isa_skipped += 1
        self._write_rerun(spec, run_path, cwd, overlay)
        write_file(os.path.join(run_path, "output.log"), "")  # refuses a link; the child appends to a file
        return {**self.base_env, **overlay}

    def _write_rerun(self, spec: RunSpec, run_path: str, cwd: str, overlay: dict[str, str]) -> None:
        write_file(os.path.join(run_path, "spec.json"), json.dumps(
            {"argv": list(spec.argv), "cwd": cwd, "env_overlay": overlay, "stage": spec.stage,
             "timeout_s": spec.timeout}, indent=2))
        lines = ["#!/bin/sh", f"# aoti-bisect run {spec.name}: rerun exactly as aoti-bisect ran it",
                 f"cd {shlex.quote(cwd)} || exit 3"]
        lines.append("env " + " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(overlay.items()))
                     + " \\\n  " + " ".join(shlex.quote(a) for a in spec.argv))
        write_file(os.path.join(run_path, "rerun.sh"), "\n".join(lines) + "\n", executable=True)

    def _sync_slot(self, spec: RunSpec, slot: int, cache: str) -> None:
        """Brings a slot's private cache up to the key's snapshot, once per repro and key; the slot is ours."""
        key = _warm_key(spec)
        snapshot = self.cache_dir(spec.env_dict) + ".warm"
        with self._lock:
            due = key in self._warm and (key, slot) not in self._synced and os.path.isdir(snapshot)
            self._synced.add((key, slot))
        if due:
            shutil.copytree(snapshot, cache, symlinks=True, dirs_exist_ok=True)

    def run(self, spec: RunSpec, cancel: Optional[process.Cancel] = None) -> RunResult:
        run_path = os.path.join(self.run_dir, "runs", spec.name)
        log_path = os.path.join(run_path, "output.log")
        slot = self._slots.get()
        try:
            problem = None
            try:
                env = self._prepare(spec, run_path, slot)
            except OSError as exc:
                # A link where this run's folder or files go (refused), a full disk: this run cannot happen.
                problem = f"cannot set up {run_path}: {exc}"
            exit = (ProcessExit(None, None, False, 0.0, 0, launch_error=problem) if problem else
                    process.execute(list(spec.argv), env, os.path.join(run_path, "cwd"), log_path, spec.timeout,
                                    self.limits, cancel or self.cancel))
            cache = self.cache_dir(spec.env_dict, slot)
            if exit.launch_error != "cancelled" and self.jobs > 1:
                self._snapshot_if_first(spec, cache)
        finally:
            self._slots.put(slot)
        outcome, signature = classify("" if exit.launch_error else read_log(log_path), exit)
        if signature and signature.kernel and signature.kernel.endswith(".py"):
            signature = _resolve_triton_source(signature)
        result = RunResult(spec, outcome, exit, run_path, log_path, signature, cache)
        if not problem:
            write_file(os.path.join(run_path, "result.json"), json.dumps(result.to_json(), indent=2))
        if outcome is not Outcome.INFRA_ERROR:
            with self._lock:
                self._warm.add(_warm_key(spec))
        return result

    def _snapshot_if_first(self, spec: RunSpec, cache: str) -> None:
        # The first run of a key runs alone (run_many), so nothing writes its cache while it is copied.
        with self._lock:
            if _warm_key(spec) in self._warm:
                return
        shutil.copytree(cache, self.cache_dir(spec.env_dict) + ".warm", symlinks=True, dirs_exist_ok=True)

    def run_many(self, specs: Iterable[RunSpec], on_result: Callable[[RunResult], None] = lambda r: None,
                 stop: Callable[[list[RunResult]], bool] = lambda rs: False,
                 on_start: Callable[[RunSpec], None] = lambda spec: None) -> list[RunResult]:
        """Runs specs, up to `jobs` at a time, until all ran or `stop(results so far)` says enough.

        The first run of a cold compile key runs alone: parallel runs would all compile the same thing. The
        slots it leaves idle run the queued compile-only runs (`ahead`).
        """
        pending = list(specs)
        results: list[RunResult] = []
        with ThreadPoolExecutor(max_workers=self.jobs) as pool:
            running = set()
            try:
                self._drive(pool, pending, running, results, on_result, stop, on_start)
            except BaseException:
                # Set before the pool's exit waits on its threads (an interrupt, or a full disk in another
                # run): each one then kills its child tree instead of running on.
                self.cancel.set()
                raise
        results.sort(key=lambda r: r.spec.index)
        return results

    def _drive(self, pool, pending, running, results, on_result, stop, on_start) -> None:
        alone = None  # a cold key's first run
        while (pending or running) and not self.cancel.is_set():
            while pending and len(running) + len(self._ahead_running) < self.jobs and not stop(results):
                cold = _warm_key(pending[0]) not in self._warm
                if cold and running:
                    break
                self._drop_ahead(pending[0])
                on_start(pending[0])
                future = pool.submit(self.run, pending.pop(0))
                running.add(future)
                if cold:
                    alone = future
                    break
            if alone in running:
                self._start_ahead(len(running))
            if not running:
                break
            done, _ = wait(running, timeout=0.5, return_when=FIRST_COMPLETED)
            running -= done
            for fut in sorted(done, key=id):
                result = fut.result()
                if result.exit.launch_error == "cancelled":
                    continue
                results.append(result)
                on_result(result)

    # -- compile-only runs for later stages ------------------------------------------------------------
    def ahead(self, specs: Iterable[RunSpec]) -> None:
        """Queues compile-only runs (RunSpec.compile_only) of flag sets that later stages will run, for the
        slots a cold first run leaves idle. Only where a flag set's runs take its package (reuse) and there is
        a slot to spare; a key that is warm, or queued already, is left out."""
        if self.jobs < 2:
            return
        with self._lock:
            for spec in specs:
                key = _warm_key(spec)
                if (self.reuse_dir(spec) and key not in self._warm
                        and all(_warm_key(s) != key for s in self._ahead_queue)):
                    self._ahead_queue.append(dataclasses.replace(spec, compile_only=True))

    def _drop_ahead(self, spec: RunSpec) -> None:
        """A stage has come to run this key: its own first run compiles it, unless an ahead run already is."""
        with self._lock:
            self._ahead_queue = [s for s in self._ahead_queue if _warm_key(s) != _warm_key(spec)]

    def _start_ahead(self, busy: int) -> None:
        started = []
        with self._lock:
            while self._ahead_queue and busy + len(self._ahead_running) < self.jobs:
                if self._ahead_pool is None:
                    self._ahead_pool = ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="ahead")
                future = self._ahead_pool.submit(self.run, self._ahead_queue.pop(0), self._ahead_cancel)
                self._ahead_running.add(future)
                started.append(future)
        for future in started:  # outside the lock: a future already done runs its callback here, at once
            future.add_done_callback(self._ahead_done)

    def _ahead_done(self, future) -> None:
        with self._lock:
            self._ahead_running.discard(future)
            if not future.cancelled() and future.exception() is None:
                self.ahead_results.append(future.result())

    def finish_ahead(self) -> None:
        """Drops the queued compile-only runs and kills the running ones: the ladder needs nothing more."""
        with self._lock:
            self._ahead_queue.clear()
            pool = self._ahead_pool
        self._ahead_cancel.set()
        if pool is not None:
            pool.shutdown(wait=True)


@functools.lru_cache(maxsize=None)
def torch_bytecode_missing() -> bool:
    """Whether torch, as this interpreter finds it, has no cached bytecode beside its sources (the repro's
    interpreter is this one unless --python names another). Finding the spec imports nothing."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return False
    return not os.path.exists(importlib.util.cache_from_source(spec.origin))


def _warm_key(spec: RunSpec) -> tuple:
    # Two repros never warm each other's cache, even with the same flags.
    return spec.argv, compile_key(spec.env_dict)


def _resolve_triton_source(sig: Signature) -> Signature:
    """A Triton device assert names the kernel's source file; the kernel's name is inside it."""
    try:
        with open(sig.kernel, errors="replace") as f:
            name = triton_kernel_name(f.read())
    except OSError:
        return sig
    return dataclasses.replace(sig, kernel=name) if name else sig
