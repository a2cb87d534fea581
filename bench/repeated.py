#!/usr/bin/env python3
"""The cost of a repeated run, phase by phase, started cold and forked warm (run/warm.py), and whether the warm
start changes what the runs measure.

For each scenario: `aoti-bisect SCRIPT --stages "" --runs N --jobs J` twice, one after the other, `--cold` then
`--warm`, each from a fresh --out (so each compiles once). Counted are the runs that took the flag set's stored
package (a `reuse` phase in their result.json), the repeated runs a rare fault's baseline is made of; each row
gives their median duration and median phases (run/phases.py), their failure rate with its Wilson 95% interval,
and their failure signatures. The last line per scenario: warm/cold median duration and Fisher's exact test of the
two failure counts (two-sided; a p under 0.05 would say the warm start changed the rate).

A scenario is a script under scenarios/ with optional variables, `cpu/flaky_custom_op_crash.py:FLAKY_CRASH_PERCENT=30`.

Usage: python bench/repeated.py [--scenarios a,b] [--runs 40] [--jobs 2]
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
from collections import Counter

from _common import REPO, clean_env, main, table, timed, tool_argv

sys.path.insert(0, REPO)
from aoti_bisect.run.phases import PHASES  # noqa: E402
from aoti_bisect.stats import fisher_exact, wilson  # noqa: E402

DEFAULT = ["cpu/flaky_custom_op_crash.py:FLAKY_CRASH_PERCENT=30", "cpu/flaky_python_op_oob.py"]


def measure(script: str, env: dict[str, str], mode: str, runs: int, jobs: int, root: str) -> list[dict]:
    out = os.path.join(root, mode)
    argv = tool_argv(os.path.join(REPO, "scenarios", script), "--stages", "", "--runs", str(runs), "--jobs", str(jobs),
                     "--budget", "0", "--out", out, f"--{mode}", "-q")
    timed(argv, env, root, os.path.join(root, f"{mode}.log"))
    rows = []
    for name in sorted(os.listdir(os.path.join(out, "runs"))):
        try:
            with open(os.path.join(out, "runs", name, "result.json")) as f:
                rows.append(json.load(f))
        except (OSError, ValueError):
            continue
    return [r for r in rows if "reuse" in (r.get("phases") or {})]


def row(mode: str, rows: list[dict]) -> list[str]:
    if not rows:
        return [mode, "0"]
    failed = [r for r in rows if r["outcome"] != "passed"]
    lo, hi = wilson(len(failed), len(rows))
    kinds = Counter(f"{r['signature']['kind']}/{(r.get('crash') or {}).get('function', '-')[:40]}"
                    for r in failed if r.get("signature"))
    phases = [f"{statistics.median(r['phases'].get(p, 0.0) for r in rows):.2f}" for p in PHASES]
    return [mode, str(len(rows)), f"{sum(r['warm'] for r in rows)}",
            f"{statistics.median(r['duration_s'] for r in rows):.2f}", *phases,
            f"{len(failed)}/{len(rows)} ({lo:.2f}-{hi:.2f})", "; ".join(f"{k} x{n}" for k, n in kinds.items())]


def run(args) -> None:
    for item in args.scenarios or DEFAULT:
        script, _, assigns = item.partition(":")
        env = {**clean_env(), **dict(a.split("=", 1) for a in assigns.split(",") if a)}
        with tempfile.TemporaryDirectory(prefix="aoti-bisect-bench-") as root:
            cold = measure(script, env, "cold", args.runs, args.jobs, root)
            warm = measure(script, env, "warm", args.runs, args.jobs, root)
            for mode, rows in (("cold", cold), ("warm", warm)):
                if not rows:  # what aoti-bisect said, to see why no run took the stored package
                    with open(os.path.join(root, f"{mode}.log"), errors="replace") as f:
                        print(f"{mode}: no run took the stored package; aoti-bisect's last lines:\n{f.read()[-2000:]}")
        print(f"{item}: --runs {args.runs} --jobs {args.jobs}; runs that took the stored package")
        print(table(["start", "runs", "warm", "median s", *PHASES, "failed (95% CI)", "signatures"],
                    [row("cold", cold), row("warm", warm)]))
        if cold and warm:
            k1, k2 = (sum(r["outcome"] != "passed" for r in rs) for rs in (cold, warm))
            ratio = statistics.median(r["duration_s"] for r in warm) / statistics.median(r["duration_s"] for r in cold)
            print(f"warm/cold median duration {ratio:.2f}; Fisher's exact p = {fisher_exact(k1, len(cold), k2, len(warm)):.3f}")
        print(flush=True)


if __name__ == "__main__":
    main(__doc__, run, ("scenarios", "runs", "jobs"), runs=40, jobs=2, scenarios="")
