#!/usr/bin/env python3
"""What the crash witness (run/witness.py, preloaded into every run) costs a run that does not crash.

Pairs of the same passing process, with and without the witness's environment, one after the other in each pair
(the order alternating), so that the machine's drift cancels in each pair's difference. The witness acts only on a
fatal signal; at load it installs its handlers and warms the unwinder up, once per process (a run starts several:
Python, the compiler, the linker).

Usage: python bench/witness.py [--runs 20]
"""
import os
import statistics
import sys
import tempfile

from _common import main, spread, timed

from aoti_bisect.child.contract import CRASH_FILE
from aoti_bisect.run.witness import Witness

SCRIPTS = {
    "print-only": [sys.executable, "-c", "print('ok')"],
    "import-torch": [sys.executable, "-c", "import torch; print(float(torch.ones(4).sum()))"],
    # a process that starts others, as a compile does: each of them loads the witness too
    "16-children": ["sh", "-c", "for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16; do true; /bin/true; done"],
}


def run(args) -> None:
    print(f"crash witness: wall seconds of a passing process, {args.runs} pairs each, median (min-max); "
          "difference = with - without, per pair\n")
    with tempfile.TemporaryDirectory() as tmp:
        witness = Witness(os.path.join(tmp, "witness"), dict(os.environ))
        if witness.library() is None:
            print(f"no witness: {witness.problem}")
            return
        run_dir = os.path.join(tmp, "run")
        os.makedirs(run_dir)
        with_env = {**os.environ, **witness.env(run_dir)}
        rows = []
        for name, argv in SCRIPTS.items():
            plain, witnessed = [], []
            for i in range(args.runs):
                log = os.path.join(tmp, f"{name}-{i}.log")
                order = [(plain, dict(os.environ)), (witnessed, with_env)]
                for times, env in (order if i % 2 else order[::-1]):
                    times.append(timed(argv, env, tmp, log).seconds)
            diffs = [(w - p) * 1000 for p, w in zip(plain, witnessed)]
            rows.append((name, spread(plain, "{:.3f}"), spread(witnessed, "{:.3f}"),
                         f"{statistics.median(diffs):+.1f} ms"))
        for row in [("process", "without s", "with s", "median difference"), *rows]:
            print(f"{row[0]:<14} {row[1]:>22} {row[2]:>22} {row[3]:>18}")
        print(f"\nno witness file was left by a passing run: {not os.path.exists(os.path.join(run_dir, CRASH_FILE))}")


if __name__ == "__main__":
    main(__doc__, run, ("runs",), runs=20)
