"""The run directory's layout: runs/<stage>-NNN/{output.log,rerun.sh,spec.json,result.json,hook.json,cwd,tmp},
cache/<key>/ per compile key, its slot copies and warm snapshot, cache/<key>.reuse/ (the flag set's packages,
for runs under reuse: child/hook/reuse.py), and the files a run leaves for whoever reruns it.

Parallel runs never share a writable compile cache: AOTI rewrites files in it on every compile, even a cached one
(`extern_kernel_nodes.json` is truncated, then written), so a run packaging its model beside another one's
compile can read a half-written file (seen: 2 of 40 runs of flaky_custom_op_crash at --jobs 2 failed to load
their package with "attempting to parse an empty input"). Each slot s > 0 runs in cache/<key>.slot<s>, a copy of
the snapshot (cache/<key>.warm) taken when the key's first run, which runs alone unless its runs compile anyway
(run/scheduler.py), finished: one compile per key still serves every slot.
"""
from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import threading
from typing import Optional

from ..aoti import flags
from ..child.contract import HEADERS_ENV
from ..files.runfolder import RunFolder, RunFolderError
from ..files.write import user_name, write_new
from .types import RunResult, RunSpec

# HEADERS_ENV: a folder of precompiled headers shared beyond one cache root (several bisections or a test session
# on one machine), where the environment names one; else each cache root keeps its own (precompiled-headers/).


def headers_folder(cache_root: str) -> str:
    """Where runs under `cache_root` keep Inductor's precompiled headers. Their names hash the preprocessed header,
    the compiler and its flags, and Inductor builds each under a file lock, so runs of any flag set, repro or
    process may share one folder: a header built once serves them all (10-20 s a pair saved per cache root)."""
    shared = os.environ.get(HEADERS_ENV)
    return os.path.realpath(shared) if shared else os.path.join(cache_root, "precompiled-headers")


def compile_key(env: dict[str, str]) -> str:
    """Runs with the same compile-time flags may share a compile cache; others never do."""
    items = sorted((k, v) for k, v in env.items() if k not in flags.RUNTIME)
    if not items:
        return "default"
    return hashlib.sha1(json.dumps(items).encode()).hexdigest()[:10]


def warm_key(spec: RunSpec) -> tuple:
    # Two repros never warm each other's cache, even with the same flags.
    return spec.argv, compile_key(spec.env_dict)


class Layout:
    def __init__(self, run_dir: str, cache_root: Optional[str] = None) -> None:
        # Real paths: a run's folder is checked against them for links (see prepare).
        self.run_dir = os.path.realpath(run_dir)
        # Several sessions (a scenario check) may share one cache root: keys include the flags and the graph.
        self.cache_root = os.path.realpath(cache_root or os.path.join(self.run_dir, "cache"))
        self._warm: set[tuple] = set()
        self._stored: set[tuple] = set()  # keys a run that carried the hook for reuse ended in: its package is stored
        self._synced: set[tuple] = set()
        self._snapshots: dict[tuple, threading.Event] = {}  # set once the key's snapshot is whole
        self._lock = threading.Lock()

    def run_path(self, spec: RunSpec) -> str:
        return os.path.join(self.run_dir, "runs", spec.name)

    def cache_dir(self, overlay: dict[str, str], slot: int = 0) -> str:
        base = os.path.join(self.cache_root, compile_key(overlay))
        return base if slot == 0 else f"{base}.slot{slot}"

    def is_warm(self, spec: RunSpec) -> bool:
        with self._lock:
            return warm_key(spec) in self._warm

    def is_stored(self, spec: RunSpec) -> bool:
        with self._lock:
            return warm_key(spec) in self._stored

    def mark_warm(self, spec: RunSpec, stored: bool = False) -> None:
        """A run of the key ended; `stored`: it carried the hook for reuse, so it stored the key's package or took
        it (the reuse folder alone may hold another repro's: a scenario check's repros share a cache root)."""
        with self._lock:
            self._warm.add(warm_key(spec))
            if stored:
                self._stored.add(warm_key(spec))

    def prepare(self, spec: RunSpec, run_path: str, slot: int, reuse_dir: Optional[str]) -> None:
        """Makes a run's folders and brings its slot's cache up to the key's snapshot."""
        cwd = os.path.join(run_path, "cwd")
        tmp = os.path.join(run_path, "tmp")
        cache = self.cache_dir(spec.env_dict, slot)
        headers = headers_folder(self.cache_root)
        # An earlier run's child (or whoever filled the folder) may have put a link where this run's folders
        # go, or on the way to them: following it would write this run's files, and its child's, outside the
        # run directory. Each folder is made by RunFolder, which follows no link below the run directory
        # (or the cache root, which may lie outside it); the slot's cache is made before it is filled.
        try:
            shared = os.environ.get(HEADERS_ENV)
            if shared:
                os.makedirs(headers, exist_ok=True)  # the user's, as named: outside every folder aoti-bisect owns
            for root, d in [(self.run_dir, cwd), (self.run_dir, tmp), (None if shared else self.cache_root, headers),
                            (self.cache_root, os.path.join(cache, "inductor")), (self.cache_root, reuse_dir)]:
                if d is not None and root is not None:
                    os.makedirs(root, exist_ok=True)  # the run directory or the cache root: the user's, as given
                    RunFolder(root).folder(os.path.relpath(d, root))
        except RunFolderError as exc:
            raise OSError(str(exc))  # this run cannot happen (harness.run); the others still can
        self._sync_slot(spec, slot, cache)
        # Inductor keeps precompiled headers under $TMPDIR/torchinductor_<user>; a private TMPDIR would
        # rebuild them (10-20 s) every run. Their names hash the header and the compiler flags, so one
        # folder can serve every run and every flag set (headers_folder).
        link = os.path.join(tmp, f"torchinductor_{user_name()}")
        if not os.path.lexists(link):
            os.symlink(headers, link)

    def write_run_files(self, spec: RunSpec, run_path: str, overlay: dict[str, str]) -> None:
        """spec.json and rerun.sh (the run exactly as it will go), and the empty output.log the child appends to."""
        cwd = os.path.join(run_path, "cwd")
        # write_new: a link planted at any of these names (by an earlier run's child) is replaced, never
        # written through, hard links included.
        write_new(os.path.join(run_path, "spec.json"), json.dumps(
            {"argv": list(spec.argv), "cwd": cwd, "env_overlay": overlay, "stage": spec.stage,
             "timeout_s": spec.timeout}, indent=2))
        lines = ["#!/bin/sh", f"# aoti-bisect run {spec.name}: rerun exactly as aoti-bisect ran it",
                 f"cd {shlex.quote(cwd)} || exit 3"]
        lines.append("env " + " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(overlay.items()))
                     + " \\\n  " + " ".join(shlex.quote(a) for a in spec.argv))
        write_new(os.path.join(run_path, "rerun.sh"), "\n".join(lines) + "\n", executable=True)
        write_new(os.path.join(run_path, "output.log"), "")

    def write_result(self, result: RunResult) -> None:
        write_new(os.path.join(result.run_dir, "result.json"), json.dumps(result.to_json(), indent=2))

    def _sync_slot(self, spec: RunSpec, slot: int, cache: str) -> None:
        """Brings a slot's private cache up to the key's snapshot, once per repro and key; the slot is ours."""
        key = warm_key(spec)
        snapshot = self.cache_dir(spec.env_dict) + ".warm"
        with self._lock:
            due = key in self._warm and (key, slot) not in self._synced and os.path.isdir(snapshot)
            self._synced.add((key, slot))
        if due:
            shutil.copytree(snapshot, cache, symlinks=True, dirs_exist_ok=True)

    def snapshot_if_first(self, spec: RunSpec, slot: int) -> None:
        """The first run of a cold key to end leaves its slot's cache as the key's snapshot. Runs beside it (the
        scheduler's twins) write only their own slots' caches, and wait here until the snapshot is whole: a slot
        synced from a half-copied snapshot would hold half-written files."""
        key = warm_key(spec)
        with self._lock:
            copying = self._snapshots.get(key)
            first = copying is None and key not in self._warm
            if first:
                copying = self._snapshots[key] = threading.Event()
        if not first:
            if copying is not None:
                copying.wait()
            return
        try:
            shutil.copytree(self.cache_dir(spec.env_dict, slot), self.cache_dir(spec.env_dict) + ".warm",
                            symlinks=True, dirs_exist_ok=True)
        finally:
            copying.set()
