"""The environment probe, run with the repro's interpreter (a broken torch or CUDA cannot take aoti-bisect down)."""
from __future__ import annotations

import os
import re
import shutil
from typing import Optional

from ..child.contract import PROBE_MARK
from ..files.own import loads_child_json, read_log
from . import process

PROBE_SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "child", "probe.py")

_ENV_PREFIXES = ("TORCH", "AOT", "AOTI", "INDUCTOR", "CUDA", "PYTORCH", "TRITON", "CXX", "CC", "NCCL", "LD_LIBRARY")
PYTHON_NAME = re.compile(r"python[\d.]*$")


def relevant_env(env: dict[str, str]) -> dict[str, str]:
    """The variables that change AOTI/Inductor/CUDA behaviour."""
    return {k: v for k, v in sorted(env.items()) if k.startswith(_ENV_PREFIXES)}


def interpreter_of(argv: list[str], python: Optional[str] = None) -> Optional[str]:
    """The Python a command runs in: argv[0] when it is one, else `python` (--python), else the Python named
    by argv[0]'s #! line (a console script such as torchrun); None when none of these says."""
    exe = shutil.which(argv[0]) or argv[0]
    if PYTHON_NAME.match(os.path.basename(exe)):
        return exe
    if python:
        return python
    try:
        with open(exe, "rb") as f:
            head = f.read(256).split(b"\n", 1)[0].decode(errors="replace")
    except OSError:
        return None
    words = head[2:].split() if head.startswith("#!") else []
    if words and os.path.basename(words[0]) == "env":
        words = [w for w in words[1:] if not w.startswith("-")][:1]
        words = [shutil.which(words[0]) or ""] if words else []
    return words[0] if words and PYTHON_NAME.match(os.path.basename(words[0])) else None


def probe_environment(python: Optional[str], probe_dir: str, base_env: dict[str, str],
                      cancel: Optional[process.Cancel] = None) -> dict:
    """What the repro's interpreter sees: torch, its git revision, CUDA, GPU and driver, compiler, and torch's
    collect_env report; None for `python` says the interpreter is unknown."""
    if python is None:
        return {"probe_error": "the repro's Python is unknown (the command is no Python and names none in a #! "
                               "line): give --python to describe its environment"}
    os.makedirs(probe_dir, exist_ok=True)
    log = os.path.join(probe_dir, "environment.log")
    env = dict(base_env, PYTHONUNBUFFERED="1", TMPDIR=probe_dir)
    exit = process.execute([python, PROBE_SCRIPT], env, probe_dir, log, timeout=120, cancel=cancel)
    line = next((l for l in read_log(log).splitlines() if l.startswith(PROBE_MARK + " ")), None)
    if line is None:
        return {"probe_error": f"no answer from {python} (exit {exit.returncode}); see {log}"}
    try:
        answer = loads_child_json(line.split(" ", 1)[1])
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        # Seen when two probes shared one log (shards of a night in one folder): one line held both answers.
        return {"probe_error": f"a garbled answer from {python} (exit {exit.returncode}); see {log}"}
    return answer
