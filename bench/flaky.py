#!/usr/bin/env python3
"""Issue #18, item 3: how often a bisection of a flaky fault names the right culprit.

N bisections of scenarios/cpu/flaky_custom_op_crash.py with FLAKY_CRASH_PERCENT=P (the share of runs whose
custom op reads 512 GiB out of bounds and segfaults; 30 by default), each with the tool's default options
(adaptive baseline, every stage) through the CLI, `--jobs J`, K of them at a time (`--parallel K`, on a
machine with the cores for it). Each of the K lanes keeps one compile cache that its bisections reuse, one
after the other, through `--cache-dir` (a cache is never shared by two at once), and every run takes its flag
set's package (`--reuse all`, the default here; `--reuse none` compiles every run as the script does): the
figure is about the ladder's decisions, not the compiler; `--cold` gives each bisection a cache of its own instead,
so that each pays one compile as a user's first bisection does. `--record FILE` appends each bisection's line as it
ends.

Right = verdict reproduced, culprit outside the instrumented kernels naming `bisectlab::shifted_gather` (the
manifest's answer). Prints each bisection as it ends (verdict, the reported rate and its 95% interval, culprit,
runs, seconds to the verdict and runs to it, seconds in all), then the success rate with its 95% Wilson interval,
how many reported intervals lie inside 20%-80% (an honest rate for a coin-flip failure: issue #41), and the median
time to the verdict and per bisection. `--budget S` is the tool's (0: the rate stops at the verdict).

The floor (issue #50) of each bisection, from its own baseline runs (runs/baseline-NNN/result.json): the first
run's time (the compile, or the stored package's first load) plus the runs after it up to and including the first
that failed (run i, shown as "first failed"), at the median time of the baseline's passing runs after the first
(where none passed, of the runs up to that one), spread over the --jobs slots:
floor = t(run 0) + ceil(i / jobs) * t(cheap run). Verdict / floor is the tool's own cost over it: the probe, the
crash's forensics, the stages the verdict waited for.

Usage: python bench/flaky.py [--bisections 20] [--percent 30] [--jobs 2] [--parallel 1] [--reuse all] [--budget 300]
                             [--cold] [--record FILE]
"""
from __future__ import annotations

import argparse
import glob
import json
import math
import os
import re
import statistics
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Optional

from _common import REPO, clean_env, machine, spread, table, timed, tool_argv

from aoti_bisect.stats import wilson

SCENARIO = os.path.join(REPO, "scenarios", "cpu", "flaky_custom_op_crash.py")


def right(report: dict) -> bool:
    c = report.get("culprit") or {}
    return (report.get("verdict") == "reproduced" and c.get("kind") == "outside_instrumented_kernels"
            and bool(re.search("bisectlab::shifted_gather", c.get("kernel") or "")))


def floor(out: str, jobs: int) -> tuple[Optional[int], Optional[float]]:
    """(index of the first baseline run that failed, the bisection's floor (the module's docstring)), Nones where no
    baseline run failed."""
    results = []
    for folder in sorted(glob.glob(os.path.join(out, "runs", "baseline-*"))):
        try:
            with open(os.path.join(folder, "result.json")) as f:
                results.append(json.load(f))
        except (OSError, ValueError):
            return None, None
    first = next((i for i, r in enumerate(results) if r["outcome"] != "passed"), None)
    if first is None:
        return None, None
    # Where no run after the first passed, the runs to the crash are the cheap runs (a crash ends a run early: the
    # floor is then lower, never flattering).
    cheap = [r["duration_s"] for r in results[1:] if r["outcome"] == "passed"] or \
        [r["duration_s"] for r in results[1:first + 1]]
    return first, results[0]["duration_s"] + (math.ceil(first / jobs) * statistics.median(cheap) if first else 0.0)


def bisect_once(i: int, lane: int, tmp: str, args: argparse.Namespace, env: dict[str, str]) -> list[str]:
    out = os.path.join(tmp, f"bisection-{i:02d}")
    cache = () if args.cold else ("--cache-dir", os.path.join(tmp, f"cache-{lane}"))
    t = timed(tool_argv(SCENARIO, "--jobs", str(args.jobs), *cache,
                        "--reuse", args.reuse, "--budget", str(args.budget), "-q", "--out", out), env, tmp,
              os.path.join(tmp, f"log-{i:02d}"))
    try:
        with open(os.path.join(out, "report.json")) as f:
            report = json.load(f)
    except (OSError, ValueError):
        return [str(i), "WRONG", "no report", "-", "-", "-", "-", "-", "-", "-", "-", "-", f"{t.seconds:.0f}"]
    c, r = report["culprit"], report["reproduction"]
    lo, hi = r["ci95"]
    return [str(i), "right" if right(report) else "WRONG", report["verdict"], f"{r['failures']}/{r['runs']}",
            f"{lo:.0%}-{hi:.0%}", f"{c.get('kind')} {c.get('kernel') or ''}".strip(),
            str(sum(s["runs"] for s in report["stages"])), f"{report.get('verdict_s') or 0:.0f}",
            str(report.get("verdict_runs") or "-"), *floor_cells(report.get("verdict_s"), *floor(out, args.jobs)),
            f"{t.seconds:.0f}"]


def floor_cells(verdict_s: Optional[float], first: Optional[int], floor_s: Optional[float]) -> list[str]:
    if not verdict_s or not floor_s:
        return ["-" if first is None else str(first), "-", "-"]
    return [str(first), f"{floor_s:.0f}", f"{verdict_s / floor_s:.2f}"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bisections", type=int, default=20)
    ap.add_argument("--percent", type=int, default=30, help="share of runs that crash")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--parallel", type=int, default=1, help="bisections at a time")
    ap.add_argument("--reuse", choices=("all", "hooked", "none"), default="all")
    ap.add_argument("--budget", type=float, default=300.0, help="the tool's --budget (0: stop the rate at the verdict)")
    ap.add_argument("--cold", action="store_true", help="a cache of its own for each bisection (one compile each)")
    ap.add_argument("--record", help="append each bisection's line to this file as it ends")
    args = ap.parse_args()
    print(machine(), flush=True)
    print("options:", " ".join(f"--{k} {v}" for k, v in vars(args).items() if k != "record") + "\n", flush=True)
    env = dict(clean_env(), FLAKY_CRASH_PERCENT=str(args.percent))
    rows: list[list[str]] = []
    lock = threading.Lock()

    def lane(k: int, tmp: str) -> None:
        for i in range(k, args.bisections, args.parallel):
            row = bisect_once(i, k, tmp, args, env)
            with lock:
                rows.append(row)
                line = "  ".join(row)
                print(line, flush=True)
                if args.record:
                    with open(args.record, "a") as f:
                        f.write(line + "\n")

    with tempfile.TemporaryDirectory(prefix="bench-flaky-") as tmp:
        with ThreadPoolExecutor(args.parallel) as pool:
            list(pool.map(lambda k: lane(k, tmp), range(args.parallel)))
    rows.sort(key=lambda r: int(r[0]))
    wins = sum(r[1] == "right" for r in rows)
    seconds = [float(r[-1]) for r in rows]
    to_verdict = [float(r[7]) for r in rows if r[7] != "-"]
    inside = sum(r[4] != "-" and 20 <= int(r[4].split("-")[0][:-1]) and int(r[4].split("-")[1][:-1]) <= 80
                 for r in rows)
    lo, hi = wilson(wins, len(rows))
    print()
    print(table(["#", "", "verdict", "rate", "95% CI", "culprit", "runs", "verdict s", "verdict runs",
                 "first failed", "floor s", "verdict/floor", "s"], rows))
    print(f"\nright in {wins}/{len(rows)} bisections ({wins / len(rows):.0%}, 95% CI {lo:.0%}-{hi:.0%}) at a "
          f"{args.percent}% crash rate; the reported interval inside 20%-80% in {inside}/{len(rows)}; median "
          f"{statistics.median(to_verdict) if to_verdict else 0:.0f} s to the verdict, verdict/floor "
          f"{spread([float(r[11]) for r in rows if r[11] != '-'])}, "
          f"{statistics.median(seconds):.0f} s a bisection, {args.parallel} at a time")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
