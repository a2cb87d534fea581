"""The load doctor's process work: what a fresh process of the repro's interpreter registers and loads
(child/registry.py), and the debugger that gives a native backtrace of a crash."""
from __future__ import annotations

import os
import re
import shutil
from typing import Optional

from ..child.contract import REGISTRY_MARK
from ..files.own import loads_child_json, read_log
from . import process

REGISTRY_SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "child", "registry.py")
_GDB_FRAME = re.compile(r"^#(?P<n>\d+)\s+(?:0x[0-9a-f]+ in )?(?P<func>\S+)(?P<rest>.*)$")
_WHERE = re.compile(r" (at|from) (\S+)$")


def fresh_process(python: Optional[str], ops: tuple[str, ...], out_dir: str, base_env: dict[str, str],
                  cancel: Optional[process.Cancel] = None) -> dict:
    """{"torch", "ops": {op: registered}, "cpu_capability", "cuda", "libstdcxx"}, or {"error": why}."""
    if python is None:
        return {"error": "the repro's Python is unknown: give --python"}
    os.makedirs(out_dir, exist_ok=True)
    log = os.path.join(out_dir, "registry.log")
    exit = process.execute([python, REGISTRY_SCRIPT, *ops], dict(base_env, TMPDIR=out_dir), out_dir, log,
                           timeout=120, cancel=cancel)
    line = next((l for l in read_log(log).splitlines() if l.startswith(REGISTRY_MARK + " ")), None)
    if line is None:
        return {"error": f"no answer from {python} (exit {exit.returncode}); see {log}"}
    try:
        answer = loads_child_json(line.split(" ", 1)[1])
    except ValueError:  # the repro's environment runs in that process too (a sitecustomize can print anything)
        answer = None
    return answer if isinstance(answer, dict) else {"error": f"a garbled answer from {python}; see {log}"}


def debugger() -> tuple[tuple[str, ...], Optional[str]]:
    """(command prefix that runs a command under gdb and prints the crashing thread's backtrace, None), or
    ((), why there is none)."""
    gdb = shutil.which("gdb")
    if gdb is None:
        return (), "gdb is not installed (apt-get install gdb): no native backtrace"
    # -return-child-result: the run keeps the repro's exit status; a crash stops gdb at the signal, before
    # faulthandler, and `bt` prints the native frames there.
    return (gdb, "-q", "-batch", "-return-child-result", "-ex", "set pagination off", "-ex", "run",
            "-ex", "bt 40", "--args"), None


def native_backtrace(text: str, limit: int = 20) -> list[str]:
    """The frames gdb printed after the program received a signal (none: it did not crash under gdb)."""
    at = text.rfind("received signal")
    if at < 0:
        return []
    frames = []
    for line in text[at:].splitlines():
        m = _GDB_FRAME.match(line)
        if m:
            # Without the arguments (long, and values of this run only): the function and where it lives.
            where = _WHERE.search(m["rest"])
            frames.append(f"#{m['n']} {m['func']}" + (f" {where.group(1)} {where.group(2)}" if where else ""))
    return frames[:limit]
