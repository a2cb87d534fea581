"""What a run's child gets on top of the user's environment (what rerun.sh sets): its folders and caches, the
diagnostic stages' settings, the in-process hook and package reuse, torch's vector-ISA answer shared between
hooked runs, and their bytecode cache."""
from __future__ import annotations

import functools
import importlib.util
import os
import threading
from typing import Optional

from ..aoti import flags
from ..child import contract, hook
from ..files.own import read_child_json
from . import process
from .checkers import checked
from .layout import Layout, compile_key
from .types import RunSpec
from .witness import Witness

WITNESS_DIR = "witness"  # in the run directory: the crash witness library, built once

CHILD_ENV = {"PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1"}
# Only the diagnostic (hooked) runs: it makes a CPU kernel's exception name the kernel, but it also changes
# what the repro prints (a symbolized C++ stack under every c10 error), so the runs that stand for the user's
# own (baseline, determinism) go without it.
DIAGNOSTIC_ENV = {"TORCH_SHOW_CPP_STACKTRACES": "1", contract.CONSTANTS_ENV: "1"}
# Torch's vector-ISA answer, left in the run directory by the first hooked run that had it (child/hook/vecisa.py).
VEC_ISA_ANSWER = "vec-isa.json"
VEC_ISA_OK = "TORCHINDUCTOR_VEC_ISA_OK"
NO_BYTECODE, PYCACHE_PREFIX = "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX"


class Environment:
    def __init__(self, layout: Layout, base_env: Optional[dict[str, str]] = None, reuse: str = "hooked",
                 gpu_slots: Optional[list[str]] = None, cancel: Optional[process.Cancel] = None) -> None:
        self.layout = layout
        self.base_env = {k: v for k, v in (base_env if base_env is not None else os.environ).items()
                         if not k.startswith(flags.OWNED)}
        if reuse not in flags.REUSE_MODES:
            raise ValueError(f"reuse must be one of {flags.REUSE_MODES}, not {reuse!r}")
        self.reuse = reuse
        # A run's slot names its GPU on a GPU host.
        self.gpu_slots = list(gpu_slots or [])
        self.vec_isa_skipped = 0  # runs that took an earlier run's vector-ISA answer (vec_isa)
        # Every run can tell where it crashed: the witness library it preloads, built once in the run directory.
        self.witness = Witness(os.path.join(layout.run_dir, WITNESS_DIR), self.base_env, cancel)
        self._lock = threading.Lock()

    def hooked_stage(self, hook: bool) -> bool:
        """Whether a stage's runs carry the hook: its own choice, or reuse for every run."""
        return hook or self.reuse == "all"

    def hooked(self, spec: RunSpec) -> bool:
        return self.hooked_stage(spec.hook) or (spec.reuse and self.reuse != "none")

    def reuse_dir(self, spec: RunSpec) -> Optional[str]:
        """The flag set's package folder, shared by its runs in every slot; None: this run compiles."""
        if self.reuse == "none" or not self.hooked(spec):
            return None
        return self.layout.cache_dir(spec.env_dict) + ".reuse"

    def for_run(self, spec: RunSpec, run_path: str, slot: int) -> dict[str, str]:
        """The overlay of a run about to start, counted for vec_isa_skipped."""
        overlay = self.overlay(spec, run_path, slot)
        answer = self.vec_isa_answer() if contract.VEC_ISA_ENV in overlay else None
        # VEC_ISA_OK is ours here: vec_isa() never adds it over the user's own setting.
        if overlay.get(VEC_ISA_OK) == "1" or (answer and answer.get("builds")):
            with self._lock:
                self.vec_isa_skipped += 1
        return overlay

    def overlay(self, spec: RunSpec, run_path: str, slot: int = 0) -> dict[str, str]:
        """Every variable a run gets on top of the user's environment (what rerun.sh sets)."""
        cache = self.layout.cache_dir(spec.env_dict, slot)
        tmp = os.path.join(run_path, "tmp")
        env = dict(CHILD_ENV)
        if self.gpu_slots:
            env["CUDA_VISIBLE_DEVICES"] = self.gpu_slots[slot]
        env.update({
            # A repro may seed its randomness per run from this (the nightly's seeded tests do).
            contract.RUN_INDEX_ENV: str(spec.index),
            "TMPDIR": tmp,
            "TORCHINDUCTOR_CACHE_DIR": os.path.join(cache, "inductor"),
            "TRITON_CACHE_DIR": os.path.join(cache, "triton"),
            "TRITON_HOME": os.path.join(cache, "triton-home"),
            "XDG_CACHE_HOME": os.path.join(self.layout.cache_root, "xdg"),
            # Extensions do not depend on Inductor flags; sharing them saves a C++ build per stage.
            "TORCH_EXTENSIONS_DIR": os.path.join(self.layout.cache_root, "torch_extensions"),
        })
        env.update(self.witness.env(run_path, checked(spec.argv)))
        if spec.hook:  # a diagnostic stage's own: never a baseline run, even one that carries the hook for reuse
            env.update(DIAGNOSTIC_ENV)
        if spec.compile_only:
            env[contract.AHEAD_ENV] = "1"
        if self.hooked(spec):
            # First on the path, ahead of the user's own entries (kept): its sitecustomize runs theirs.
            user_path = self.base_env.get("PYTHONPATH")
            env["PYTHONPATH"] = hook.SITE_DIR + (os.pathsep + user_path if user_path else "")
            env[contract.HOOK_ENV] = os.path.join(run_path, contract.HOOK_RECORD)
            env.update(self.vec_isa())
            env.update(self.bytecode_cache())
        reuse = self.reuse_dir(spec)
        if reuse:
            env[contract.REUSE_ENV] = reuse
            env[contract.FLAG_SET_ENV] = compile_key(spec.env_dict)
        env.update(spec.env_dict)
        return env

    def vec_isa(self) -> dict[str, str]:
        """What a hooked run gets for torch's vector-ISA check: where to leave the answer and, once an earlier
        run's answer says that every ISA the CPU claims passed its check, the setting that skips the check and
        gives the same answer. The baseline and determinism runs of `--reuse hooked` check as the user's do."""
        env = {contract.VEC_ISA_ENV: os.path.join(self.layout.run_dir, VEC_ISA_ANSWER)}
        if VEC_ISA_OK in self.base_env:  # the user's own setting stands
            return env
        answer = self.vec_isa_answer() or {}
        if answer.get("checked") and answer.get("checked") == answer.get("claimed"):
            env[VEC_ISA_OK] = "1"
        return env

    def vec_isa_answer(self) -> Optional[dict]:
        """The answer the first hooked run left ({"checked": [...], "claimed": [...]}); None before it did."""
        try:
            answer = read_child_json(os.path.join(self.layout.run_dir, VEC_ISA_ANSWER), 1 << 20)
        except (OSError, ValueError):  # the hook writes it in the repro's process: anything may stand there
            return None
        return answer if isinstance(answer, dict) else None

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
        return {NO_BYTECODE: "", PYCACHE_PREFIX: os.path.join(self.layout.cache_root, "pycache")}


@functools.cache
def torch_bytecode_missing() -> bool:
    """Whether torch, as this interpreter finds it, has no cached bytecode beside its sources (the repro's
    interpreter is this one unless --python names another). Finding the spec imports nothing."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return False
    return not os.path.exists(importlib.util.cache_from_source(spec.origin))
