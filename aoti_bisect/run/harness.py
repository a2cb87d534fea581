"""Turns a RunSpec into an isolated child run and a classified RunResult; runs batches in parallel.

The pieces it composes are named for what they own, and callers use them by those names: the run directory
(`harness.layout`, layout.py), what a child gets on top of the user's environment (`harness.environment`,
environment.py), and which run goes when (`harness.scheduler`, scheduler.py: run_many, ahead).
"""
from __future__ import annotations

import dataclasses
import os
import time
from typing import Optional

from ..aoti import cudacore
from ..aoti.hook_record import MAX_RECORD_BYTES
from ..aoti.wrapper import spelling, triton_kernel_name
from ..child import contract
from ..failure import FailureKind
from ..files.own import read_child_json, read_log, read_own_text
from . import process
from .classify import classify, fingerprint
from .environment import Environment
from .layout import Layout
from .phases import phases
from .scheduler import Scheduler
from .slots import Room
from .types import CrashSite, Outcome, ProcessExit, RunResult, RunSpec, Signature
from .warm import WarmPool, plain_script
from .witness import assert_site

MAX_KERNEL_SOURCE = 1 << 20  # a generated Triton kernel's file is a few KiB


# A compile for a later stage runs beside the runs the verdict waits on: on a host shared by several bisections it
# takes the cores they leave (measured on an H100 host: docs/benchmarks.md, "Time to verdict on one H100").
AHEAD_NICENESS = 10


class Harness:
    def __init__(self, run_dir: str, base_env: Optional[dict[str, str]] = None, jobs: Optional[int] = 1,
                 limits: process.OutputLimits = process.OutputLimits(),
                 cancel: Optional[process.Cancel] = None, cache_root: Optional[str] = None,
                 gpu_slots: Optional[list[str]] = None, reuse: str = "hooked", warm: bool = True) -> None:
        self.layout = Layout(run_dir, cache_root)
        # Repeated runs that take a stored package fork from a warm interpreter (run/warm.py); --cold: never.
        self.warm = WarmPool(os.path.join(self.layout.cache_root, "warm")) if warm else None
        self.cancel = cancel or process.Cancel()
        self.environment = Environment(self.layout, base_env, reuse, gpu_slots, self.cancel)
        self.limits = limits
        # jobs None: as many at once as the machine has room for (run/slots.py).
        self.room = Room.of_machine() if jobs is None and not gpu_slots else None
        slots = len(gpu_slots) if gpu_slots else self.room.slots if self.room is not None else max(1, jobs or 1)
        self.scheduler = Scheduler(self.run, self.layout, slots, self.cancel, self.environment.reuse_dir, self.room)

    def run(self, spec: RunSpec, cancel: Optional[process.Cancel] = None) -> RunResult:
        run_path = self.layout.run_path(spec)
        log_path = os.path.join(run_path, "output.log")
        with self.scheduler.slot() as slot:
            problem = None
            try:
                env = self._prepare(spec, run_path, slot)
            except OSError as exc:
                # A link where this run's folder or files go (refused), a full disk: this run cannot happen.
                problem = f"cannot set up {run_path}: {exc}"
            launched = time.time()
            exit = (ProcessExit(None, None, False, 0.0, 0, launch_error=problem) if problem else
                    process.execute(list(spec.argv), env, os.path.join(run_path, "cwd"), log_path, spec.timeout,
                                    self.limits, cancel or self.cancel, AHEAD_NICENESS if spec.compile_only else 0,
                                    self.warm.start if self.warm is not None and self.warm_start(spec) else None))
            if exit.launch_error != "cancelled" and self.scheduler.jobs > 1:
                self.layout.snapshot_if_first(spec, slot)
        text = "" if exit.launch_error else read_log(log_path)
        outcome, signature = classify(text, exit)
        if signature and signature.kernel and signature.kernel.endswith(".py"):
            signature = _resolve_triton_source(signature)
        crash, crash_problem = (self.environment.witness.read(run_path, exit, text) if outcome.is_failure
                                else (None, None))
        also = None
        if signature is not None and signature.kind is FailureKind.DEVICE_ASSERT:
            # The driver dumps an assert only now and then; the lines the device printed name it in every run that
            # flushed them. Where both tell, both are kept: the judge holds each against the wrapper's launches.
            printed = assert_site(signature.kernel, text)
            if crash is None:
                crash, crash_problem = printed, (crash_problem if printed is None else None)
            elif printed is not None and spelling(printed.function) != spelling(crash.function):
                also = printed
        if crash is not None and signature is not None:
            signature = _with_crash(signature, crash)
        record = self._hook_doc(spec, run_path)
        timing = phases(record, launched, exit.duration, time.time() - launched - exit.duration)
        gpu_peak = record.get("gpu_peak") if record is not None else None
        result = RunResult(spec, outcome, exit, run_path, log_path, signature,
                           self.layout.cache_dir(spec.env_dict, slot), crash, crash_problem, also, timing,
                           gpu_peak if isinstance(gpu_peak, int) and gpu_peak >= 0 else None)
        if not problem:
            self.layout.write_result(result)
        if outcome is not Outcome.INFRA_ERROR:
            self.layout.mark_warm(spec, stored=self.environment.reuse_dir(spec) is not None)
        return result

    def _hook_doc(self, spec: RunSpec, run_path: str) -> Optional[dict]:
        """The hook record (its clock, spans and events for run/phases.py, its GPU peak for run/slots.py), where the
        run carried the hook."""
        if not self.environment.hooked(spec):
            return None
        try:
            doc = read_child_json(os.path.join(run_path, contract.HOOK_RECORD), MAX_RECORD_BYTES)
        except (OSError, ValueError):  # no record (no package call) or a damaged one: the ladder says which
            return None
        return doc if isinstance(doc, dict) else None

    def warm_start(self, spec: RunSpec) -> bool:
        """A run of a plain `python script.py` whose flag set has a package stored for it to take (Layout.is_stored):
        what a warm interpreter saves it (the imports) is most of its time. A run that would compile starts cold."""
        return (not spec.compile_only and self.layout.is_stored(spec) and self.environment.reuse_dir(spec) is not None
                and plain_script(list(spec.argv)))

    def close(self) -> None:
        if self.warm is not None:
            self.warm.close()

    def _prepare(self, spec: RunSpec, run_path: str, slot: int) -> dict[str, str]:
        self.layout.prepare(spec, run_path, slot, self.environment.reuse_dir(spec))
        overlay = self.environment.for_run(spec, run_path, slot)
        self.layout.write_run_files(spec, run_path, overlay)
        return {**self.environment.base_env, **overlay}


def _with_crash(sig: Signature, crash: CrashSite) -> Signature:
    """Failures group by the function they crashed in (nightly signatures, the ladder's dominant one), and a device
    exception the driver dumped is of the kind the dump says."""
    kind = (cudacore.failure_kind(crash.how) if crash.on_device else None) or sig.kind
    if sig.kernel and kind == sig.kind:
        return sig
    kernel = sig.kernel or crash.function
    return dataclasses.replace(sig, kind=kind, kernel=kernel,
                               fingerprint=fingerprint(kind, sig.phase, sig.message, kernel))


def _resolve_triton_source(sig: Signature) -> Signature:
    """A Triton device assert names the kernel's source file; the kernel's name is inside it."""
    try:
        name = triton_kernel_name(read_own_text(sig.kernel, MAX_KERNEL_SOURCE))
    except OSError:
        return sig
    return dataclasses.replace(sig, kernel=name) if name else sig
