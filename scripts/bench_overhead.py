#!/usr/bin/env python3
"""Benchmark: aoti-bisect's overhead per run against running the same script directly.

N runs of a fast script, sequentially both ways; repeated R times, median and spread reported.
Usage: python scripts/bench_overhead.py [--runs 20] [--repeats 3]
"""
import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

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
    subprocess.run([sys.executable, "-m", "aoti_bisect", script, "--runs", str(n), "--stages", "baseline", "-q",
                    "--out", os.path.join(workdir, f"tool-{tag}")], check=False, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}, Python "
          f"{platform.python_version()}; N={args.runs} sequential runs, {args.repeats} repeats")
    print(f"{'script':<14} {'direct s':>9} {'aoti-bisect s':>14} {'overhead/run ms':>16} {'ratio':>7}  spread")
    with tempfile.TemporaryDirectory() as tmp:
        for name, body in SCRIPTS.items():
            script = os.path.join(tmp, f"{name}.py")
            with open(script, "w") as f:
                f.write(body)
            d, t = [], []
            for r in range(args.repeats):
                d.append(direct(script, args.runs, tmp))
                t.append(tool(script, args.runs, tmp, f"{name}-{r}"))
            per_run = [(b - a) / args.runs * 1000 for a, b in zip(d, t)]
            md, mt = statistics.median(d), statistics.median(t)
            print(f"{name:<14} {md:9.2f} {mt:14.2f} {statistics.median(per_run):16.1f} {mt / md:7.3f}  "
                  f"overhead/run {min(per_run):.1f}-{max(per_run):.1f} ms")


if __name__ == "__main__":
    main()
