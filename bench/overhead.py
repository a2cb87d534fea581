#!/usr/bin/env python3
"""Item 1 of issue #7: aoti-bisect's overhead per run against running the same script directly.

N runs of a fast script, sequentially both ways (and aoti-bisect with one run, to separate its fixed
start-up cost from the per-run cost); repeated R times, median and spread reported.

Usage: python bench/overhead.py [--runs 20] [--repeats 3]
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

from _common import main, tool_argv

SCRIPTS = {
    "print-only": "print('ok')\n",
    "import-torch": "import torch\nprint(float(torch.ones(4).sum()))\n",
}


def direct(script: str, n: int, workdir: str) -> float:
    start = time.perf_counter()
    for i in range(n):
        with open(os.path.join(workdir, f"direct-{i}.log"), "w") as log:
            subprocess.run([sys.executable, script], stdout=log, stderr=subprocess.STDOUT, check=True)
    return time.perf_counter() - start


def tool(script: str, n: int, workdir: str, tag: str) -> float:
    start = time.perf_counter()
    subprocess.run(tool_argv(script, "--runs", str(n), "--stages", "baseline", "-q",
                             "--out", os.path.join(workdir, f"tool-{tag}")), check=False, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def run(args) -> None:
    n = args.runs
    print(f"item 1: overhead per run, N={n} sequential runs, {args.repeats} repeats, medians (min-max)")
    print("fixed = one aoti-bisect run minus one direct run (start-up, environment probe, report);")
    print("per-run = (aoti-bisect with N runs - with 1 run) / (N-1) - direct per-run time\n")
    print(f"{'script':<13} {'direct N s':>11} {'aoti-bisect N s':>16} {'ratio':>6} {'fixed s':>8} "
          f"{'per-run overhead ms':>22}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, body in SCRIPTS.items():
            script = os.path.join(tmp, f"{name}.py")
            with open(script, "w") as f:
                f.write(body)
            direct_run, total, fixed, per_run, ratio = [], [], [], [], []
            for r in range(args.repeats):
                d = direct(script, n, tmp) / n
                one = tool(script, 1, tmp, f"{name}-{r}-1")
                many = tool(script, n, tmp, f"{name}-{r}-n")
                direct_run.append(d * 1000)
                total.append(many)
                fixed.append(one - d)
                per_run.append(((many - one) / (n - 1) - d) * 1000)
                ratio.append(many / (d * n))
            med = statistics.median
            print(f"{name:<13} {med(direct_run) * n / 1000:11.2f} {med(total):16.2f} {med(ratio):6.3f} {med(fixed):8.2f} "
                  f"{med(per_run):10.1f} ({min(per_run):.1f} to {max(per_run):.1f})")
    print()


if __name__ == "__main__":
    main(__doc__, run, ("runs", "repeats"))
