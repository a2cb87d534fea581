#!/usr/bin/env python3
"""Item 2 of issue #7: the speed-up of parallel runs, `--jobs 1` against `--jobs J`.

N baseline runs of one script through the CLI (`--runs N --stages baseline`) with `--jobs 1` and with
`--jobs J`. Workloads: `cpu-1s`, a single-threaded pure-Python loop calibrated to about 1 s (nothing to
compile, so this measures the scheduling alone), and optionally `flaky_custom_op_crash`, the real flaky
AOTI scenario, with its caches warm (a cache filled once by an untimed run is copied for each timed run and
handed to it with --cache-dir). Speed-up = time(--jobs 1) / time(--jobs J). Figures: see bench/_common.py.

Usage: python bench/parallel.py [--repeats 3] [--runs 20] [--jobs 2] [--parallel cpu-1s,flaky_custom_op_crash]
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from typing import Optional

from _common import clean_env, main, spread, table, timed, tool_argv

from aoti_bisect.scenarios import load_manifest


def _busy_loop_iterations(seconds: float) -> int:
    def spin(n: int) -> float:
        start = time.perf_counter()
        x = 0
        for i in range(n):
            x = (x * 31 + i) & 0xFFFF
        return time.perf_counter() - start
    n = 200_000
    return int(n * seconds / min(spin(n) for _ in range(3)))


def _parallel_workload(name: str, tmp: str) -> tuple[str, Optional[str]]:
    """(script, warm cache folder to copy into each --out, or None)."""
    if name == "cpu-1s":
        script = os.path.join(tmp, "cpu_1s.py")
        with open(script, "w") as f:
            # In a function, as calibrated: module-level names would make the loop twice as slow.
            f.write(f"def spin(n):\n    x = 0\n    for i in range(n):\n        x = (x * 31 + i) & 0xFFFF\n"
                    f"    return x\n\n\nprint(spin({_busy_loop_iterations(1.0)}))\n")
        return script, None
    scenario = next(s for s in load_manifest() if s.name == name)
    warm = os.path.join(tmp, f"warm-{name}")
    subprocess.run(tool_argv(scenario.path, "--runs", "1", "--stages", "baseline", "-q", "--out", warm),
                   cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return scenario.path, os.path.join(warm, "cache")


def run(args) -> None:
    jobs = args.jobs
    print(f"item 2: parallel speed-up, {args.runs} baseline runs, --jobs 1 vs --jobs {jobs} "
          f"({os.cpu_count()} cores); {args.repeats} repeats, median (min-max)\n")
    rows = []
    for name in args.parallel:
        with tempfile.TemporaryDirectory(prefix="bench-par-") as tmp:
            script, warm = _parallel_workload(name, tmp)
            serial, parallel, speedup = [], [], []
            for r in range(args.repeats):
                took = {}
                for j in (1, jobs):
                    out = os.path.join(tmp, f"out-{r}-{j}")
                    cache = []
                    if warm:  # a run directory is always new: the warm cache comes in through --cache-dir
                        shutil.copytree(warm, os.path.join(tmp, f"cache-{r}-{j}"), symlinks=True)
                        cache = ["--cache-dir", os.path.join(tmp, f"cache-{r}-{j}")]
                    took[j] = timed(tool_argv(script, "--runs", str(args.runs), "--stages", "baseline", "--jobs",
                                              str(j), "-q", "--out", out, *cache), clean_env(), tmp,
                                    os.path.join(tmp, f"log-{r}-{j}")).seconds
                serial.append(took[1])
                parallel.append(took[jobs])
                speedup.append(took[1] / took[jobs])
            rows.append([name, spread(serial), spread(parallel), spread(speedup, "{:.2f}x")])
    print(table(["workload", "--jobs 1 s", f"--jobs {jobs} s", "speed-up"], rows))
    print()


if __name__ == "__main__":
    main(__doc__, run, ("repeats", "runs", "jobs", "parallel"))
