#!/usr/bin/env python3
"""Issue #31: the time `aoti-bisect minify` takes on the CPU scenarios with a kernel culprit, and what it makes.

For each scenario: `aoti-bisect scenarios check NAME --stages baseline,sanity,trace,inspect` (untimed: it
only makes the run directory, with the manifest's setup and arguments), then, timed, `aoti-bisect minify
RUN_DIR --jobs J`. Printed: the outcome, graph nodes and program lines before -> after, candidates run (and
refused without a run), the minify wall time, and whether repro.py failed alone from a copy of its folder.

usage: PYTHONPATH=. python bench/minify.py [NAME...] [--jobs 2] [--out DIR] [--max-candidates N]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from _common import REPO, machine, table

KERNEL_CULPRIT_CPU = ("index_oob", "nan_after_matmul", "symbolic_index_bound", "nan_source_line",
                      "prebuilt_package", "fixed_path_cache")


def _cli(*args: str, timeout: float) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "aoti_bisect", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def one(name: str, out: str, jobs: int, max_candidates: int) -> list[str]:
    check_dir = os.path.join(out, f"check-{name}")
    _cli("scenarios", "check", name, "--out", check_dir, "--jobs", str(jobs),
         "--stages", "sanity,trace,inspect", timeout=1800)
    run_dir = os.path.join(check_dir, name)
    if not os.path.isfile(os.path.join(run_dir, "report.json")):
        return [name, "no run", "-", "-", "-", "-", "-"]
    started = time.monotonic()
    proc = _cli("minify", run_dir, "--jobs", str(jobs), "--max-candidates", str(max_candidates), "-q",
                timeout=3600)
    seconds = time.monotonic() - started
    try:
        with open(os.path.join(run_dir, "minify", "minify.json")) as f:
            record = json.load(f)
    except OSError:
        return [name, f"exit {proc.returncode}", "-", "-", "-", f"{seconds:.0f}", "-"]
    nodes = (f"{record['nodes_before']} -> {record['nodes_after']}" if "nodes_after" in record
             else str(record.get("nodes_before", "-")))
    lines = f"{record.get('lines_before', '-')} -> {record.get('lines_after', '-')}"
    return [name, f"{record['status']} (exit {proc.returncode})", nodes, lines,
            f"{record.get('candidates', 0)} (+{record.get('refused_without_running', 0)} refused)",
            f"{seconds:.0f}", ", ".join(record.get("ops_after", [])) or record["message"][:80]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", default=list(KERNEL_CULPRIT_CPU))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--max-candidates", type=int, default=60)
    parser.add_argument("--out", help="Keep the run directories here (default: a temporary folder).")
    args = parser.parse_args()
    print(f"# bench/minify.py {' '.join(sys.argv[1:])}")
    print(machine())
    with tempfile.TemporaryDirectory(prefix="bench-minify-") as tmp:
        out = args.out or tmp
        rows = []
        for name in args.names:
            rows.append(one(name, out, args.jobs, args.max_candidates))
            print("  " + "  ".join(rows[-1]), file=sys.stderr, flush=True)
    print(table(["scenario", "outcome", "nodes", "lines", "candidates", "minify s", "ops kept / why not"], rows))


if __name__ == "__main__":
    main()
