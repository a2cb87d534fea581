#!/usr/bin/env python3
"""Items 3 and 4 of issue #7: aoti-bisect's time to verdict against its floor, and against the ladder by
hand and torch's compiler_bisector.

3  floor      each CPU scenario of scenarios/manifest.toml, end to end, with the options `aoti-bisect
              scenarios check` gives it (--runs, --max-runs, --timeout from the manifest; all stages;
              --jobs 1), from a cold cache (a fresh --out holds the only cache). Then, in the same repeat,
              its FLOOR: the runs that finished run's report.json lists, stage by stage in the same order,
              started directly with subprocess (no aoti-bisect), each with the stage's flags.
              floor = sum of those runs' wall times, where the first run of each distinct set of compile-time
              flags (the harness's compile key) compiles cold into a fresh Inductor/Triton cache of its own
              and every later run of that set reuses it; precompiled headers and C++ extensions are shared
              by all runs, as the harness shares them. A run that times out counts its full timeout.
              So the floor is "one compile per flag set the ladder used, plus the runs its sequential rule
              made" -- the runs the flake rate demands, as the tool decided them.
              strict floor = the cold first run of each flag set only (one run per flag set).
              Reported: tool / floor (target <= 1.25) and tool / strict floor. The tool runs first in each
              pair (the floor needs its plan); one untimed AOTI compile+run before item 3 fills the page
              cache, so that the first measurement does not alone pay for reading torch and g++ from disk.
4  compare    the same scenarios three ways, side by side: aoti-bisect (the item-3 run), the ladder by
              hand, and `python -m torch._inductor.compiler_bisector run`. Wall time, processes started
              (script launches; aoti-bisect also counts its environment probe) and whether the answer is
              right by the manifest.
              By hand = the four stages of the AOTI debugging guide as four cold, separate runs: sanity
              (AOTI_RUNTIME_CHECK_INPUTS=1 TORCHINDUCTOR_NAN_ASSERTS=1), determinism
              (PYTORCH_NO_CUDA_MEMORY_CACHING=1 CUDA_LAUNCH_BLOCKING=1), printer level 3, then printer level
              2 with AOT_INDUCTOR_FILTERED_KERNELS_TO_PRINT set to the kernel level 3 launched last
              (unfiltered when level 3 printed no launch). Each run gets a fresh Inductor cache; precompiled
              headers and C++ extensions are shared, as a user's /tmp and ~/.cache would be.
              Its answer, mechanically: no run failed -> not reproduced; else the sanity run's log has an
              input-check rejection `input_handles[i]` -> model input i; else, if the level-3 run failed and
              printed launches, the last launched kernel (what the guide says to read) -> kernel; else
              reproduced with no culprit named.
              compiler_bisector: run on `python SCRIPT` through a shim that counts launches, with a fresh
              cache, under an outer timeout of 3x the scenario's timeout (the bisector has none). It
              bisects torch.compile backends and subsystems, so its answer is a backend / subsystem /
              bisect number, never a kernel or an input.
              Right = reproduced or not as the manifest says, and the culprit matching the manifest's by
              the rule `scenarios check` uses (kind, then the kernel pattern or input index; where none is
              expected, none named). compiler_bisector is right only on the passing control ("no issue
              found"): on a failing AOTI script it blames the first backend it tries, since the script
              ignores the backend it sets, and that names no kernel, input or phase.

Figures: see bench/_common.py.

Usage: python bench/floor.py [--only 3,4] [--repeats 3] [--scenarios a,b]
"""
from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Optional

from _common import Sandbox, Timed, clean_env, main, read, spread, table, timed, tool_argv

from aoti_bisect.aoti import flags, printer
from aoti_bisect.run.layout import compile_key
from aoti_bisect.scenarios import Scenario, compare, culprit_matches, load_manifest
from aoti_bisect.scenarios import _found_culprit as _describe  # the words `scenarios check` uses for a culprit


@dataclass
class Plan:
    """The runs a finished aoti-bisect run made: [(stage, flags, runs)] in order."""
    steps: list[tuple[str, dict[str, str], int]]

    @classmethod
    def from_report(cls, report: dict) -> "Plan":
        return cls([(s["name"], s["env"], s["runs"]) for s in report["stages"] if s["runs"]])

    @property
    def keys(self) -> list[str]:
        return list(dict.fromkeys(compile_key(env) for _, env, _ in self.steps))

    @property
    def runs(self) -> int:
        return sum(n for _, _, n in self.steps)


@dataclass
class Result:
    seconds: float
    processes: int
    answer: str
    right: bool


@dataclass
class Row:
    tool: list[Result] = field(default_factory=list)
    floor: list[float] = field(default_factory=list)
    strict: list[float] = field(default_factory=list)
    by_hand: list[Result] = field(default_factory=list)
    bisector: list[Result] = field(default_factory=list)
    plan: Optional[Plan] = None


def run_tool(s: Scenario, tmp: str, tag: str) -> tuple[Result, dict]:
    out = os.path.join(tmp, f"tool-{tag}")
    t = timed(tool_argv(s.path, *s.args, "--runs", str(s.runs), "--max-runs", str(max(s.runs, 10)),
                        "--timeout", str(s.timeout), "--jobs", "1", "-q", "--out", out),
              clean_env(), tmp, os.path.join(tmp, f"tool-{tag}.log"))
    with open(os.path.join(out, "report.json")) as f:
        report = json.load(f)
    processes = Plan.from_report(report).runs + 1  # + the environment probe
    return Result(t.seconds, processes, _describe(report.get("culprit")), not compare(s, report)), report


def run_floor(s: Scenario, plan: Plan, tmp: str) -> tuple[float, float]:
    """(floor, strict floor): the plan's runs started directly, cold once per compile key."""
    box = Sandbox(tmp)
    argv = [sys.executable, s.path, *s.args]
    total = strict = 0.0
    seen: set[str] = set()
    for _, env, n in plan.steps:
        key = compile_key(env)
        for _ in range(n):
            t, _ = box.run(argv, env, key, s.timeout)
            total += t.seconds
            if key not in seen:
                strict += t.seconds
                seen.add(key)
    return total, strict


_INPUT_CHECK = re.compile(r"input_handles\[(\d+)\]")


@dataclass
class Answer:
    reproduced: bool
    culprit: Optional[dict] = None  # as report.json's culprit


def by_hand_answer(sanity: tuple[Timed, str], trace: tuple[Timed, str], runs: list[Timed]) -> Answer:
    """What the four guide stages name, read mechanically (see the module docstring)."""
    if all(r.returncode == 0 for r in runs):
        return Answer(False)
    m = _INPUT_CHECK.search(read(sanity[1]))
    if sanity[0].returncode != 0 and m:
        return Answer(True, {"kind": "model_input", "input_index": int(m.group(1))})
    launches = printer.parse_trace(read(trace[1]).splitlines()).launches
    if trace[0].returncode != 0 and launches:
        return Answer(True, {"kind": "kernel", "kernel": launches[-1].kernel})
    return Answer(True)


def run_by_hand(s: Scenario, tmp: str) -> Result:
    box = Sandbox(tmp)
    argv = [sys.executable, s.path, *s.args]
    start = time.perf_counter()
    stages = [box.run(argv, flags, f"hand-{i}", s.timeout)
              for i, flags in enumerate((flags.SANITY, flags.DETERMINISM, flags.TRACE))]
    launches = printer.parse_trace(read(stages[2][1]).splitlines()).launches
    inspect = dict(flags.INSPECT, **({flags.FILTER: launches[-1].kernel} if launches else {}))
    stages.append(box.run(argv, inspect, "hand-3", s.timeout))
    took = time.perf_counter() - start
    answer = by_hand_answer(stages[0], stages[2], [t for t, _ in stages])
    said = _describe(answer.culprit) if answer.reproduced else "not reproduced"
    return Result(took, len(stages), said, _right(s, answer))


_COUNT_SHIM = "import os, sys\nopen(sys.argv[1], 'a').write('x\\n')\nos.execv(sys.argv[2], sys.argv[2:])\n"
_BISECT_RESULT = re.compile(r"Bisection complete: (.*)")


def run_bisector(s: Scenario, tmp: str) -> Result:
    box = Sandbox(tmp)
    shim, counts = os.path.join(tmp, "count_shim.py"), os.path.join(tmp, "launches")
    with open(shim, "w") as f:
        f.write(_COUNT_SHIM)
    env, cwd = box.env({}, "bisector")
    log = os.path.join(tmp, "bisector.log")
    t = timed([sys.executable, "-m", "torch._inductor.compiler_bisector", "run", sys.executable, shim, counts,
               sys.executable, s.path, *s.args], env, cwd, log, timeout=3 * s.timeout)
    launches = len(read(counts).splitlines()) if os.path.exists(counts) else 0
    m = _BISECT_RESULT.search(read(log))
    said = m.group(1).strip() if m else ("timed out" if t.timed_out else f"exit {t.returncode}, no result")
    return Result(t.seconds, launches, said, s.verdict == "not_reproduced" and said == "no issue found")


def _right(s: Scenario, answer: Answer) -> bool:
    return answer.reproduced == (s.verdict == "reproduced") and culprit_matches(s.culprit, answer.culprit)


def cpu_scenarios(names: list[str]) -> list[Scenario]:
    chosen = [s for s in load_manifest() if s.device == "cpu" and (not names or s.name in names)]
    missing = set(names) - {s.name for s in chosen}
    if missing:
        sys.exit(f"unknown or non-CPU scenario(s): {', '.join(sorted(missing))}")
    return chosen


def warm_up(tmp: str) -> None:
    """One untimed AOTI compile+run, so that the first measurement does not alone pay for reading torch,
    g++ and the headers from disk into the page cache."""
    s = next(s for s in load_manifest() if s.name == "passing_control")
    Sandbox(tmp).run([sys.executable, s.path], {}, "warm-up", s.timeout)


def run(args) -> None:
    want_floor, want_compare = "3" in args.only, "4" in args.only
    rows: dict[str, Row] = {}
    with tempfile.TemporaryDirectory(prefix="bench-warm-up-") as tmp:
        warm_up(tmp)
    for s in cpu_scenarios(args.scenarios):
        row = rows[s.name] = Row()
        for r in range(args.repeats):
            with tempfile.TemporaryDirectory(prefix=f"bench-{s.name}-") as tmp:
                result, report = run_tool(s, tmp, str(r))
                row.tool.append(result)
                row.plan = Plan.from_report(report)
                if want_floor:
                    floor, strict = run_floor(s, row.plan, os.path.join(tmp, "floor"))
                    row.floor.append(floor)
                    row.strict.append(strict)
                if want_compare:
                    row.by_hand.append(run_by_hand(s, os.path.join(tmp, "hand")))
                    row.bisector.append(run_bisector(s, os.path.join(tmp, "bisector")))
            # Each repeat's figures as it ends: a run of hours must not lose them all to one interruption.
            done = [f"aoti-bisect {row.tool[-1].seconds:.1f}s"]
            if want_floor:
                done.append(f"floor {row.floor[-1]:.1f}s strict {row.strict[-1]:.1f}s")
            if want_compare:
                done += [f"by hand {row.by_hand[-1].seconds:.1f}s right={row.by_hand[-1].right}",
                         f"bisector {row.bisector[-1].seconds:.1f}s right={row.bisector[-1].right}"]
            print(f"  {s.name} repeat {r + 1}/{args.repeats}: {'; '.join(done)}", file=sys.stderr, flush=True)
    if want_floor:
        print(f"item 3: time to verdict vs the floor, cold cache, --jobs 1; {args.repeats} repeats, "
              "median (min-max)\n")
        out = []
        for name, row in rows.items():
            tool = [t.seconds for t in row.tool]
            out.append([name, f"{row.plan.runs}/{len(row.plan.keys)}", spread(tool), spread(row.floor),
                        spread([a / b for a, b in zip(tool, row.floor)], "{:.3f}"), spread(row.strict),
                        spread([a / b for a, b in zip(tool, row.strict)], "{:.2f}")])
        print(table(["scenario", "runs/keys", "aoti-bisect s", "floor s", "tool/floor", "strict floor s",
                     "tool/strict"], out))
        print()
    if want_compare:
        print(f"item 4: aoti-bisect vs the ladder by hand vs compiler_bisector; {args.repeats} repeats, "
              "wall s median (min-max), processes, right answers/repeats\n")
        out = []
        for name, row in rows.items():
            cells = [name]
            for results in (row.tool, row.by_hand, row.bisector):
                cells += [spread([x.seconds for x in results], "{:.0f}"),
                          "/".join(sorted({str(x.processes) for x in results})),
                          f"{sum(x.right for x in results)}/{len(results)}"]
            out.append(cells)
        print(table(["scenario", "aoti-bisect s", "procs", "right", "by hand s", "procs", "right",
                     "bisector s", "procs", "right"], out))
        print("\nwhat each one concluded (last repeat):")
        for name, row in rows.items():
            print(f"  {name}: aoti-bisect: {row.tool[-1].answer}; by hand: {row.by_hand[-1].answer}; "
                  f"compiler_bisector: {row.bisector[-1].answer}")
        print()


if __name__ == "__main__":
    main(__doc__, run, ("only", "repeats", "scenarios"), only="3,4")
