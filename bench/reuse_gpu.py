#!/usr/bin/env python3
"""Issue #17: each CUDA scenario's ladder time with compile reuse on and off, against its floor.

For each scenario of scenarios/manifest.toml with device = cuda (or --device cpu, for a smoke test), in turn:
  on     `aoti-bisect SCRIPT --reuse all` with the options `scenarios check` gives it (--runs, --max-runs,
         --timeout from the manifest; all stages), --jobs J, from a cold cache (a fresh --out).
  floor  from that run's own runs: the first run of each distinct set of compile-time flags (the harness's
         compile key) in full -- the run that compiles it: a compile-only run beside the baseline (report.json's
         compiled_ahead) or the stage's own first run -- plus every other run's wall time less the seconds the
         hook spent keying the call and waiting for the lock (hook.json's key_s and waited_s), divided by J.
         That is one compile per flag set, one after another, plus what each run's process start, import, load
         and execution cost, spread over J slots; the environment probe and the report are not in it. Compiling
         ahead overlaps compiles, so a ladder can come in under this floor.
  off    the same with `--reuse none` (every run compiles, as before #17); --skip-off leaves it out (it is the
         slow one: 60-107 s a compile on torch 2.11, ~18 minutes for the 40-run flaky ladder at --jobs 4).
Printed as each measurement ends: wall seconds, runs/compile keys, compiled/reused runs, the baseline's failure
rate (with reuse on, the baseline compiles once too: compare its rate with off's), on/floor (target <= 1.25)
and off/on. The machine line names the machine, the date, the load and the torch version.

On the lent GPU machine, export CXX=g++ first (see docs/gpu.md: the image's /opt/gcc g++ builds packages that
segfault while loading). About 8 minutes on one H100 for the CUDA set with --skip-off.

Usage: python bench/reuse_gpu.py [--jobs 4] [--skip-off] [--scenarios a,b] [--device cuda|cpu] [--keep DIR]
"""
from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile

from _common import clean_env, machine, timed, tool_argv

from aoti_bisect.aoti.hook_record import compile_counts, read_hook
from aoti_bisect.run.layout import compile_key
from aoti_bisect.scenarios import Scenario, load_manifest
from aoti_bisect.stats import Rate


def ladder(s: Scenario, tmp: str, reuse: str, jobs: int) -> tuple[float, dict]:
    out = os.path.join(tmp, f"ladder-{reuse}")
    t = timed(tool_argv(s.path, *s.args, "--runs", str(s.runs), "--max-runs", str(max(s.runs, 10)),
                        "--timeout", str(s.timeout), "--jobs", str(jobs), "--reuse", reuse, "-q", "--out", out),
              clean_env(), tmp, os.path.join(tmp, f"ladder-{reuse}.log"))
    with open(os.path.join(out, "report.json")) as f:
        return t.seconds, json.load(f)


def runs_of(report: dict) -> list[tuple[str, float, float]]:
    """(compile key, wall seconds, seconds the hook spent keying and waiting) of each run: the compile-only runs
    that built a flag set's package first (they started beside the baseline), then the stages' runs in order."""
    out = [(row["flag_set"], row["seconds"], 0.0) for row in report.get("compiled_ahead") or ()
           if row["compiled"] and row["ended"].startswith("stopped")]
    for stage in report["stages"]:
        for log in stage["logs"]:
            run_dir = os.path.dirname(log)
            with open(os.path.join(run_dir, "result.json")) as f:
                seconds = json.load(f)["duration_s"]
            overhead = 0.0
            hook_json = os.path.join(run_dir, "hook.json")
            if os.path.exists(hook_json):
                with open(hook_json) as f:
                    for event in json.load(f)["events"]:
                        reuse = event.get("reuse") or {}
                        overhead += (reuse.get("key_s") or 0.0) + (reuse.get("waited_s") or 0.0)
            out.append((compile_key(stage["env"]), seconds, overhead))
    return out


def first_and_rest(runs: list[tuple[str, float, float]]) -> tuple[dict[str, float], list[tuple[float, float]]]:
    """Each key's first run's seconds (the run that compiles it, alone), and (seconds, overhead) of every other."""
    first: dict[str, float] = {}
    rest = []
    for key, seconds, overhead in runs:
        if key in first:
            rest.append((seconds, overhead))
        else:
            first[key] = seconds
    return first, rest


def floor(runs: list[tuple[str, float, float]], jobs: int) -> float:
    """One compile per key (the key's first run, whole) + the other runs' own cost, over `jobs` slots."""
    first, rest = first_and_rest(runs)
    return sum(first.values()) + sum(max(0.0, s - o) for s, o in rest) / max(1, jobs)


def breakdown(runs: list[tuple[str, float, float]]) -> str:
    """Where the floor's time is: each key's first run, and the median of the others."""
    first, rest = first_and_rest(runs)
    firsts = ", ".join(f"{s:.0f}" for s in first.values())
    median = statistics.median(s for s, _ in rest) if rest else 0
    return f"first run of each key {firsts} s; other runs median {median:.1f} s"


def timeline(report: dict) -> str:
    """Each run's start and end, in seconds from the first start (result.json's mtime is its run's end)."""
    spans = []
    for run_dir in sorted(glob.glob(os.path.join(report["run_dir"], "runs", "*", "result.json"))):
        with open(run_dir) as f:
            seconds = json.load(f)["duration_s"]
        end = os.path.getmtime(run_dir)
        spans.append((end - seconds, end, os.path.basename(os.path.dirname(run_dir))))
    if not spans:
        return "no runs"
    zero = min(start for start, _, _ in spans)
    return "; ".join(f"{name} {start - zero:.0f}-{end - zero:.0f}" for start, end, name in sorted(spans))


def summary(report: dict) -> str:
    counts = [compile_counts(s["name"], [read_hook(os.path.dirname(log)) for log in s["logs"]], True)
              for s in report["stages"]]
    compiled, reused = sum(c["compiled"] for c in counts), sum(c["reused"] for c in counts)
    base = report["stages"][0]
    rate = Rate(base["failures"], base["runs"])
    ahead = sum(row["compiled"] for row in report.get("compiled_ahead") or ())
    made = (f"compiled {compiled} (+{ahead} ahead), reused {reused}" if compiled + reused else
            "runs without the hook, each compiled")
    isa = (report.get("environment") or {}).get("vec_isa") or {}
    skipped = f"; vector-ISA check skipped by {isa.get('runs_that_skipped_the_check', 0)} run(s)" if isa else ""
    return (f"{report['verdict']}; {made}{skipped}; baseline {rate.failures}/{rate.runs} "
            f"failed (95% {rate.ci95[0]:.2f}-{rate.ci95[1]:.2f})")


def run(args: argparse.Namespace) -> None:
    chosen = [s for s in load_manifest() if s.device == args.device and (not args.scenarios or s.name in args.scenarios)]
    if args.scenarios:  # in the order asked for: the device time may run out before the last
        chosen.sort(key=lambda s: args.scenarios.index(s.name))
    if not chosen:
        sys.exit(f"no {args.device} scenario matches {args.scenarios or 'the manifest'}")
    print(f"jobs {args.jobs}; reuse off {'skipped' if args.skip_off else 'measured'}\n", flush=True)
    for s in chosen:
        with _folder(args.keep, s.name) as tmp:
            on, report = ladder(s, tmp, "all", args.jobs)
            runs = runs_of(report)
            low = floor(runs, args.jobs)
            keys = len({k for k, _, _ in runs})
            print(f"{s.name}: reuse on {on:.1f}s, {len(runs)} runs/{keys} keys; floor {low:.1f}s; "
                  f"on/floor {on / low:.2f}; {summary(report)}; {breakdown(runs)}", flush=True)
            print(f"  timeline (s): {timeline(report)}", flush=True)
            if not args.skip_off:
                off, report = ladder(s, tmp, "none", args.jobs)
                print(f"{s.name}: reuse off {off:.1f}s, {len(runs_of(report))} runs; off/on {off / on:.2f}; "
                      f"off/floor {off / low:.2f}; {summary(report)}", flush=True)


@contextlib.contextmanager
def _folder(keep: str, name: str):
    """Where one scenario's ladders run: under --keep when given (kept), else a temporary folder."""
    if not keep:
        with tempfile.TemporaryDirectory(prefix=f"bench-reuse-{name}-") as tmp:
            yield tmp
        return
    folder = os.path.join(keep, name)
    os.makedirs(folder, exist_ok=True)
    yield folder


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--skip-off", action="store_true", help="measure reuse on only")
    ap.add_argument("--scenarios", default="", help="comma-separated names (default: every one of --device)")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--keep", default="", help="keep each ladder's run directory under this folder")
    args = ap.parse_args()
    args.scenarios = [n.strip() for n in args.scenarios.split(",") if n.strip()]
    print(machine(), flush=True)
    try:  # not through torch: this process must hold no CUDA context while the ladders run
        gpus = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=60).stdout.strip().replace("\n", ", ")
    except (OSError, subprocess.SubprocessError):
        gpus = "none seen"
    print(f"gpus: {gpus}; CXX={os.environ.get('CXX')}", flush=True)
    run(args)


if __name__ == "__main__":
    main()
