#!/usr/bin/env python3
"""Issues #28 and #50: time to verdict of each scenario's bisection, with the default flags.

For each scenario of scenarios/manifest.toml of the chosen device (default cuda), `aoti-bisect SCRIPT` (with
--jobs J where given; by default the tool sizes its slots by the machine, docs/slots.md) with the manifest's --max-runs
(or, with --tool-max-runs, the tool's own default) and --timeout (the adaptive baseline, every stage, the default
reuse), from a cold cache. Printed per scenario, as each one ends:
  verdict_s  report.json's seconds from the first run to the culprit (the baseline's rate may run on after it,
             within --budget: the wall time includes that)
  wall       the whole bisection, process start to exit
  runs       every run of every stage (compile-ahead runs not counted), and how many failed
  compiles   runs that compiled the model (hooked runs that reused a flag set's package did not)
  right      whether verdict, kind and culprit match the manifest (scenarios.compare)
--parallel P runs P bisections at once (one GPU, the host's cores shared): each one's times are then an upper
bound of what it takes alone. --cap S kills a bisection after S seconds and says so (a `before` run of a
version that may take far longer). The machine line names the machine, the date, the load and torch.

--scenarios a,b picks scenarios and their order.

Usage: python bench/verdict.py [--jobs J] [--parallel 1] [--scenarios a,b] [--device cuda|cpu] [--cap 1800]
       [--budget 300] [--keep DIR] [--tool-max-runs]
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
from concurrent.futures import ThreadPoolExecutor

from _common import clean_env, machine, table, timed, tool_argv

from aoti_bisect.scenarios import Scenario, compare, in_setup, load_manifest, run_setup


def bisect(s: Scenario, folder: str, jobs: int, cap: float, budget: float, tool_max_runs: bool) -> list[str]:
    out = os.path.join(folder, s.name)
    setup = os.path.join(folder, "setup", s.name)
    problem = run_setup(s, setup)  # a package built before the bisection: not part of its time
    if problem:
        return [s.name, "-", "-", "-", "-", problem]
    args = in_setup(s.args, setup)
    jobs_flag = ["--jobs", str(jobs)] if jobs else []  # none: aoti-bisect sizes its slots by the machine
    runs_flag = [] if tool_max_runs else ["--max-runs", str(max(s.runs, 10))]
    t = timed(tool_argv(s.path, *runs_flag, "--timeout", str(s.timeout), *jobs_flag,
                        "--budget", str(budget), "-q", "--out", out, "--", *args), clean_env(), folder,
              os.path.join(folder, f"{s.name}.log"), timeout=cap)
    try:
        with open(os.path.join(out, "report.json")) as f:
            report = json.load(f)
    except (OSError, ValueError):
        return [s.name, "-", f"{t.seconds:.0f}" + (" (capped)" if t.timed_out else ""), "-", "-", "no report"]
    runs = [st for st in report["stages"] if st["runs"]]
    compiled = sum((st.get("compiles") or {}).get("compiled") or 0 for st in report["stages"])
    # The baseline's record counts its runs made the user's way (`unhooked`); a stage all of whose runs were is
    # recorded as not hooked.
    unhooked = sum(st["compiles"].get("unhooked", 0 if st["compiles"]["hooked"] else st["runs"])
                   for st in report["stages"] if st.get("compiles"))
    problems = compare(s, report)
    return [s.name, f"{report.get('verdict_s') or '-'}", f"{t.seconds:.0f}",
            f"{sum(st['runs'] for st in runs)} ({sum(st['failures'] for st in runs)} failed)",
            f"{compiled} hooked + {unhooked} unhooked",
            "yes" if not problems else "NO: " + "; ".join(problems)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jobs", type=int, default=0, help="aoti-bisect's --jobs (0: its default, sized by the machine)")
    p.add_argument("--parallel", type=int, default=1)
    p.add_argument("--scenarios", default="")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--cap", type=float, default=1800.0)
    p.add_argument("--budget", type=float, default=300.0, help="aoti-bisect's --budget: the rate after a verdict")
    p.add_argument("--keep", help="Keep the run directories here.")
    p.add_argument("--tool-max-runs", action="store_true", help="aoti-bisect's own --max-runs, not the manifest's")
    a = p.parse_args()
    wanted = [n for n in a.scenarios.split(",") if n]
    mine = {s.name: s for s in load_manifest() if s.device == a.device}
    unknown = [n for n in wanted if n not in mine]
    if unknown:
        p.error(f"no {a.device} scenario named {', '.join(unknown)}")
    chosen = [mine[n] for n in wanted] if wanted else list(mine.values())  # in the order asked: first come first
    runs = ", the tool's own --max-runs" if a.tool_max_runs else ""
    print(machine(), f"| --jobs {a.jobs or 'unset'}, {a.parallel} bisection(s) at once{runs}", flush=True)
    folder = a.keep or tempfile.mkdtemp(prefix="verdict-")
    os.makedirs(folder, exist_ok=True)
    headers = ["scenario", "verdict_s", "wall_s", "runs", "compiles", "right"]
    rows = []
    with ThreadPoolExecutor(max_workers=a.parallel) as pool:
        for row in pool.map(lambda s: bisect(s, folder, a.jobs, a.cap, a.budget, a.tool_max_runs), chosen):
            print(" | ".join(row), flush=True)
            rows.append(row)
    print(table(headers, rows))


if __name__ == "__main__":
    main()
