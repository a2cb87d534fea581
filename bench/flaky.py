#!/usr/bin/env python3
"""Issue #18, item 3: how often a bisection of a flaky fault names the right culprit.

N bisections, one after the other, of scenarios/cpu/flaky_custom_op_crash.py with FLAKY_CRASH_PERCENT=P (the
share of runs whose custom op reads 512 GiB out of bounds and segfaults; 30 by default), each with the
tool's default options (adaptive baseline, every stage) through the CLI, `--jobs J`. The first bisection
fills a compile cache that the later ones reuse through `--cache-dir` (they run one at a time, so it is
never shared by two at once): the figure is about the ladder's decisions, not the compiler.

Right = verdict reproduced, culprit outside the instrumented kernels naming `bisectlab::shifted_gather` (the
manifest's answer). Prints each bisection as it ends (verdict, baseline rate, culprit, runs, seconds), then
the success rate with its 95% Wilson interval and the median time per bisection.

Usage: python bench/flaky.py [--bisections 20] [--percent 30] [--jobs 2]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile

from _common import REPO, clean_env, machine, table, timed, tool_argv

from aoti_bisect.stats import wilson

SCENARIO = os.path.join(REPO, "scenarios", "cpu", "flaky_custom_op_crash.py")


def right(report: dict) -> bool:
    c = report.get("culprit") or {}
    return (report.get("verdict") == "reproduced" and c.get("kind") == "outside_instrumented_kernels"
            and bool(re.search("bisectlab::shifted_gather", c.get("kernel") or "")))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bisections", type=int, default=20)
    ap.add_argument("--percent", type=int, default=30, help="share of runs that crash")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    print(machine() + "\n", flush=True)
    env = dict(clean_env(), FLAKY_CRASH_PERCENT=str(args.percent))
    rows, seconds, wins = [], [], 0
    with tempfile.TemporaryDirectory(prefix="bench-flaky-") as tmp:
        cache = os.path.join(tmp, "cache")
        for i in range(args.bisections):
            out = os.path.join(tmp, f"bisection-{i:02d}")
            t = timed(tool_argv(SCENARIO, "--jobs", str(args.jobs), "--cache-dir", cache, "-q", "--out", out),
                      env, tmp, os.path.join(tmp, f"log-{i:02d}"))
            with open(os.path.join(out, "report.json")) as f:
                report = json.load(f)
            ok = right(report)
            wins += ok
            seconds.append(t.seconds)
            c = report["culprit"]
            r = report["reproduction"]
            rows.append([str(i), "right" if ok else "WRONG", report["verdict"], f"{r['failures']}/{r['runs']}",
                         f"{c.get('kind')} {c.get('kernel') or ''}".strip(),
                         str(sum(s["runs"] for s in report["stages"])), f"{t.seconds:.0f}"])
            print("  ".join(rows[-1]), flush=True)
    lo, hi = wilson(wins, args.bisections)
    print()
    print(table(["#", "", "verdict", "baseline", "culprit", "runs", "s"], rows))
    print(f"\nright in {wins}/{args.bisections} bisections ({wins / args.bisections:.0%}, 95% CI {lo:.0%}-{hi:.0%}) "
          f"at a {args.percent}% crash rate; median {statistics.median(seconds):.0f} s a bisection "
          f"(first, cold: {seconds[0]:.0f} s)")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
