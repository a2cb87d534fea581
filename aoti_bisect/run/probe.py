"""The environment probe, run with the repro's interpreter (a broken torch or CUDA cannot take aoti-bisect down)."""
from __future__ import annotations

import json
import os
from typing import Optional

from ..files import read_log
from . import process

PROBE_SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "child", "probe.py")

_ENV_PREFIXES = ("TORCH", "AOT", "AOTI", "INDUCTOR", "CUDA", "PYTORCH", "TRITON", "CXX", "CC", "NCCL", "LD_LIBRARY")


def relevant_env(env: dict[str, str]) -> dict[str, str]:
    """The variables that change AOTI/Inductor/CUDA behaviour."""
    return {k: v for k, v in sorted(env.items()) if k.startswith(_ENV_PREFIXES)}


def probe_environment(python: str, probe_dir: str, base_env: dict[str, str],
                      cancel: Optional[process.Cancel] = None) -> dict:
    """What the repro's interpreter sees: torch, its git revision, CUDA, GPU and driver, compiler."""
    os.makedirs(probe_dir, exist_ok=True)
    log = os.path.join(probe_dir, "environment.log")
    env = dict(base_env, PYTHONUNBUFFERED="1", TMPDIR=probe_dir)
    exit = process.execute([python, PROBE_SCRIPT], env, probe_dir, log, timeout=120, cancel=cancel)
    line = next((l for l in read_log(log).splitlines() if l.startswith("AOTI_BISECT_PROBE ")), None)
    if line is None:
        return {"probe_error": f"no answer from {python} (exit {exit.returncode}); see {log}"}
    return json.loads(line.split(" ", 1)[1])
