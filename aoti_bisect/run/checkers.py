"""Memory checkers the memcheck stage can run the repro under, found on this machine (or not, with the reason).

A checker is a prefix to the repro's command line plus an environment overlay; the ladder builds the run,
the parser for its report lives in aoti/sanitizer.py, keyed by `Checker.tool`.
"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Checker:
    tool: str  # which parser reads its report: "compute-sanitizer", ...
    device: str  # "cuda" or "cpu": the repros it can check
    prefix: tuple[str, ...]  # argv put before the repro's own
    env: tuple[tuple[str, str], ...] = ()
    slowdown: float = 10.0  # how much longer than a plain run a checked run may take (its timeout grows so)


@dataclass(frozen=True)
class Missing:
    """No checker for this device here: why, and how to get one."""

    device: str
    why: str


def compute_sanitizer(path: Optional[str] = None, tools: tuple[str, ...] = ("memcheck",),
                      env: Optional[dict[str, str]] = None) -> list[Checker] | Missing:
    """compute-sanitizer from --sanitizer PATH, else PATH, else $CUDA_HOME/bin, else /usr/local/cuda/bin.

    Memcheck runs with PYTORCH_NO_CUDA_MEMORY_CACHING=1: with the caching allocator on, an access inside one
    of its segments but outside the tensor is invisible to the checker (NOTES-aoti)."""
    env = os.environ if env is None else env
    candidates = [path] if path else [shutil.which("compute-sanitizer", path=env.get("PATH")),
                                      os.path.join(env.get("CUDA_HOME", "/usr/local/cuda"), "bin", "compute-sanitizer"),
                                      "/usr/local/cuda/bin/compute-sanitizer"]
    found = next((c for c in candidates if c and os.path.isfile(c) and os.access(c, os.X_OK)), None)
    if found is None:
        return Missing("cuda", f"compute-sanitizer not found{f' at {path}' if path else ' (PATH, CUDA_HOME/bin)'}: "
                               "it ships with the CUDA toolkit; point --sanitizer at it")
    return [Checker("compute-sanitizer", "cuda",
                    (found, "--tool", tool, "--print-limit", "100", "--show-backtrace", "no"),
                    (("PYTORCH_NO_CUDA_MEMORY_CACHING", "1"),) if tool == "memcheck" else ())
            for tool in tools]


def find(sanitizer: Optional[str] = None, tools: tuple[str, ...] = ("memcheck",)
         ) -> tuple[tuple[str, tuple[Checker, ...] | Missing], ...]:
    """The checker for each device, as the ladder's options take them."""
    cuda = compute_sanitizer(sanitizer, tools)
    return (("cuda", cuda if isinstance(cuda, Missing) else tuple(cuda)),
            ("cpu", Missing("cpu", "no CPU memory checker is configured")))
