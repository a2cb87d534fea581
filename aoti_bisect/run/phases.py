"""Where a run's time went, from the clock its hook record keeps (child/hook/recorder.py) and the harness's own.

    start     launch to the hook's start: the interpreter's start and `site` (a warm run's fork)
    setup     the hook's start to the repro's first export, compile or load: its imports and its own work
    export    torch.export.export calls
    compile   aoti_compile_and_package calls that compiled
    reuse     aoti_compile_and_package calls served from the flag set's stored package (hook/reuse.py)
    load      package loads
    run       the last compile or load's end to the process's exit: the model's calls and the script's rest
    tool      the process's exit to the run's result: reading its crash witness, core dump and log

Only a run that carried the hook has the first seven; every run has `tool` and its duration. A pure function of
the record, so bench/ reads the same figures from a run folder later.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

PHASES = ("start", "setup", "export", "compile", "reuse", "load", "run", "tool")
_CALLS = {"aoti_compile_and_package": "compile", "load_package": "load", "aoti_load_package": "load"}


def phases(hook: Optional[Mapping[str, Any]], launched: float, duration: float, tool: float) -> dict[str, float]:
    """Seconds per phase (PHASES' names; those a run had). `launched`: wall clock at launch; `duration`: launch to
    exit; `tool`: exit to result."""
    out = {"tool": round(tool, 3)}
    clock = (hook or {}).get("clock")
    if not isinstance(clock, Mapping) or not isinstance(clock.get("hook_start"), (int, float)):
        return out
    spans = [("export", s[1], s[2]) for s in hook.get("spans") or () if _span(s)]
    for e in hook.get("events") or ():
        what = _CALLS.get(e.get("call")) if isinstance(e, Mapping) else None
        if what and isinstance(e.get("t"), (int, float)) and isinstance(e.get("t_end"), (int, float)):
            reused = ((e.get("reuse") or {}).get("outcome") == "reused")
            spans.append(("reuse" if what == "compile" and reused else what, e["t"], e["t_end"]))
    start = clock["hook_start"] - launched
    out["start"] = round(max(start, 0.0), 3)
    if not spans:
        return out
    first = min(t0 for _, t0, _ in spans)
    last = max(t1 for _, _, t1 in spans)
    out["setup"] = round(first, 3)
    for what, t0, t1 in spans:
        out[what] = round(out.get(what, 0.0) + t1 - t0, 3)
    out["run"] = round(max(duration - start - last, 0.0), 3)
    return {name: out[name] for name in PHASES if name in out}


def _span(s: Any) -> bool:
    return (isinstance(s, list) and len(s) == 3 and s[0] == "export"
            and all(isinstance(t, (int, float)) for t in s[1:]))
