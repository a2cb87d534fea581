#!/usr/bin/env python3
"""Benchmarks for issue #7: aoti-bisect's time-to-verdict against its floor and against the alternatives.

Every figure is the median of --repeats invocations with the spread (min-max); every ratio is taken
between measurements made in the same repeat, one after the other, on the same machine. Heavy work runs
in subprocesses that are timed from here; each aoti-bisect invocation gets a fresh --out under a temporary
folder (and runs with that folder as its cwd), so nothing is written into the caller's directory.

1  overhead   harness overhead per run against running the script directly: scripts/bench_overhead.py
              (kept as its own script because the README quotes it), run from here with --runs/--repeats.
2  parallel   N baseline runs of one script through the CLI (`--runs N --stages baseline`) with
              `--jobs 1` and with `--jobs J`. Workloads: `cpu-1s`, a single-threaded pure-Python loop
              calibrated to about 1 s (nothing to compile, so this measures the scheduling alone), and
              optionally `flaky_custom_op_crash`, the real flaky AOTI scenario, with its caches warm (a
              cache filled once by an untimed run is copied into each fresh --out before the timed run).
              Speed-up = time(--jobs 1) / time(--jobs J).
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
5  parse      a generated 1 GB level-2 log (real CPU and CUDA captures from tests/logs, repeated with varied
              kernel/buffer names and values, scalar lines and NaNs mixed in) read exactly as the ladder
              reads one (Ladder.inspect): printer.read_level2(path, bound), which cuts a large log at block
              headers into ranges that two worker processes parse and fold (one CPU: in-process).
              Throughput = bytes / parse time (warm page cache) in a fresh subprocess; peak RSS = the peak,
              sampled every 10 ms, of the summed RSS of that subprocess and its workers, shown beside the
              same interpreter's RSS after its imports alone. The log lives in a temporary folder that is
              deleted afterwards.

Usage: python scripts/bench.py [--only 2,3,...] [--repeats 3] [--scenarios a,b] [--runs 20] [--jobs 2]
"""
from __future__ import annotations

import argparse
import datetime
import getpass
import importlib.metadata
import json
import math
import os
import platform
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Optional

from aoti_bisect.aoti import flags, printer
from aoti_bisect.run.harness import CHILD_ENV, compile_key
from aoti_bisect.scenarios import Scenario, compare, culprit_matches, load_manifest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
LOGS = os.path.join(REPO, "tests", "logs")


# -- measurement helpers ---------------------------------------------------------------------------------
def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
               platform.processor() or platform.machine())
    return (f"machine: {cpu}, {os.cpu_count()} cores, Linux {platform.release()}, Python "
            f"{platform.python_version()}, torch {importlib.metadata.version('torch')}; "
            f"{datetime.datetime.now().strftime('%Y-%m-%d %H:%M')}; load average at start "
            f"{os.getloadavg()[0]:.2f}")


def spread(values: list[float], fmt: str = "{:.2f}") -> str:
    """median (min-max)"""
    if not values:
        return "-"
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows)]
    line = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()
    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows])


@dataclass
class Timed:
    seconds: float
    returncode: Optional[int]  # None: killed at the timeout
    timed_out: bool = False


def timed(argv: list[str], env: dict[str, str], cwd: str, log: str, timeout: Optional[float] = None) -> Timed:
    """Wall time of one process tree, output to a file; at the timeout the whole group is killed."""
    with open(log, "wb") as out:
        start = time.perf_counter()
        child = subprocess.Popen(argv, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            rc = child.wait(timeout=timeout)
            took = time.perf_counter() - start
        except subprocess.TimeoutExpired:
            took = time.perf_counter() - start
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            return Timed(took, None, True)
    try:
        # Inductor compile workers may outlive their parent; they must not eat the next measurement's CPU.
        os.killpg(child.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return Timed(took, rc)


def tool_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "aoti_bisect", *args]


def clean_env() -> dict[str, str]:
    """The caller's environment without anything that would point a run at an existing cache."""
    drop = ("TORCHINDUCTOR_", "TRITON_", "TORCH_EXTENSIONS_DIR", "XDG_CACHE_HOME", "AOT_INDUCTOR_",
            "AOTI_RUNTIME_CHECK_INPUTS", "TORCH_COMPILE_BACKEND", "TORCH_BISECT_")
    return {k: v for k, v in os.environ.items() if not k.startswith(drop)}


class Sandbox:
    """Fresh caches for direct runs, laid out as the harness lays them out (one Inductor cache per
    compile key; precompiled headers, C++ extensions and XDG cache shared by every run)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.count = 0
        self.headers = os.path.join(root, "precompiled-headers")
        os.makedirs(self.headers, exist_ok=True)

    def env(self, flags: dict[str, str], cache_key: str) -> tuple[dict[str, str], str]:
        """(env, cwd) for one more run with these flags in the Inductor cache named cache_key."""
        self.count += 1
        run = os.path.join(self.root, f"run-{self.count:03d}")
        cwd, tmp = os.path.join(run, "cwd"), os.path.join(run, "tmp")
        os.makedirs(cwd)
        os.makedirs(tmp)
        os.symlink(self.headers, os.path.join(tmp, f"torchinductor_{_user()}"))
        cache = os.path.join(self.root, "cache", cache_key)
        env = {**clean_env(), **CHILD_ENV, "TMPDIR": tmp, "TORCHINDUCTOR_CACHE_DIR": os.path.join(cache, "inductor"),
               "TRITON_CACHE_DIR": os.path.join(cache, "triton"), "TRITON_HOME": os.path.join(cache, "triton-home"),
               "XDG_CACHE_HOME": os.path.join(self.root, "xdg"),
               "TORCH_EXTENSIONS_DIR": os.path.join(self.root, "torch_extensions"), **flags}
        return env, cwd

    def run(self, argv: list[str], flags: dict[str, str], cache_key: str, timeout: float) -> tuple[Timed, str]:
        env, cwd = self.env(flags, cache_key)
        log = os.path.join(os.path.dirname(cwd), "output.log")
        return timed(argv, env, cwd, log, timeout), log


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid_{os.getuid()}"


def read(path: str) -> str:
    with open(path, errors="replace") as f:
        return f.read()


# -- item 1 ----------------------------------------------------------------------------------------------
def bench_overhead(args) -> None:
    subprocess.run([sys.executable, os.path.join(HERE, "bench_overhead.py"), "--runs", str(args.runs),
                    "--repeats", str(args.repeats)], check=True)


# -- item 2 ----------------------------------------------------------------------------------------------
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


def bench_parallel(args) -> None:
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
                    if warm:
                        shutil.copytree(warm, os.path.join(out, "cache"), symlinks=True)
                    took[j] = timed(tool_argv(script, "--runs", str(args.runs), "--stages", "baseline", "--jobs",
                                              str(j), "-q", "--out", out), clean_env(), tmp,
                                    os.path.join(tmp, f"log-{r}-{j}")).seconds
                serial.append(took[1])
                parallel.append(took[jobs])
                speedup.append(took[1] / took[jobs])
            rows.append([name, spread(serial), spread(parallel), spread(speedup, "{:.2f}x")])
    print(table(["workload", "--jobs 1 s", f"--jobs {jobs} s", "speed-up"], rows))
    print()


# -- items 3 and 4 ---------------------------------------------------------------------------------------
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


def _describe(c: Optional[dict]) -> str:
    if not c or not c.get("kind"):
        return "none"
    if c["kind"] == "model_input":
        return f"model_input {c.get('input_index')}"
    return f"{c['kind']} {c.get('kernel') or ''}".strip()


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


def bench_scenarios(args) -> None:
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


# -- item 5 ----------------------------------------------------------------------------------------------
_BLOCK_START = re.compile(r"^\[  (?:before_launch|after_launch|aoti_model_inputs) - ", re.M)
_NAME = re.compile(r"\b(cpp_fused_\w+?|triton_\w+?|aoti_torch_\w+?)_(\d+)\b")
_STAT = re.compile(r"^(Mean|Min|Max) value: .*$", re.M)


def _template_blocks() -> list[str]:
    """Blocks of real level-2 captures (values, headers, scalar lines), one string each."""
    blocks = []
    for name in ("cpu/nan_after_matmul_level2.log", "cpu/index_oob_level2_filtered.log",
                 "cuda/nan_triton_level2.log"):
        text = read(os.path.join(LOGS, name))
        starts = [m.start() for m in _BLOCK_START.finditer(text)] + [len(text)]
        blocks += [text[a:b] for a, b in zip(starts, starts[1:])]
    return blocks


def _varied_chunk(rng: random.Random, blocks: list[str], size: int) -> str:
    """About `size` bytes of blocks with kernels renamed within a fixed pool (a real model has a bounded
    set of kernels, launched again on every iteration), buffers renamed and statistics redrawn."""
    parts, total = [], 0
    while total < size:
        b = rng.choice(blocks)
        k = rng.randrange(500)
        b = _NAME.sub(lambda m: f"{m.group(1)}_{k}", b)
        b = re.sub(r"\bbuf\d+\b", lambda m: f"buf{rng.randrange(200)}", b)
        mean, half = rng.gauss(0, 10), abs(rng.gauss(0, 10))
        value = {"Mean": mean, "Min": mean - half, "Max": mean + half}
        if rng.random() < 0.001:
            value = dict.fromkeys(value, math.nan)
        b = _STAT.sub(lambda m: f"{m.group(1)} value: {value[m.group(1)]:.6g}", b)
        parts.append(b)
        total += len(b)
    return "".join(parts)


def write_level2_log(path: str, size: int) -> int:
    """Cycles through 8 differently drawn 4 MB chunks (drawing 1 GB would take minutes)."""
    rng = random.Random(7)
    blocks = _template_blocks()
    chunks = [_varied_chunk(rng, blocks, 4 << 20) for _ in range(8)]
    written = 0
    with open(path, "w") as f:
        while written < size:
            piece = chunks[written // (4 << 20) % len(chunks)]
            f.write(piece)
            written += len(piece)
    return os.path.getsize(path)


_PARSE = """
import json, sys, time
from aoti_bisect.aoti import printer
from aoti_bisect.diagnose import ladder  # ladder: the same imports, hence the same RSS, as a real run
if __name__ == "__main__" and sys.argv[2] == "parse":
    start = time.perf_counter()
    views, inputs = printer.read_level2(sys.argv[1], 16)  # as Ladder.inspect reads a log
    took = time.perf_counter() - start
    print(json.dumps({"seconds": took, "kernels": len(views), "inputs": len(inputs)}))
"""


def _tree_rss(argv: list[str]) -> tuple[str, float]:
    """(stdout, peak of the summed RSS of the child and its descendants in MB).
    The sum is sampled every 10 ms: the parse's worker processes live for seconds, so a peak is not missed
    by more than what a worker gains in 10 ms."""
    import psutil
    child = subprocess.Popen(argv, stdout=subprocess.PIPE)
    proc, peak_sum = psutil.Process(child.pid), 0
    reader = ThreadPoolExecutor(1).submit(child.stdout.read)
    while child.poll() is None:
        try:
            total = sum(p.memory_info().rss for p in [proc, *proc.children(recursive=True)])
            peak_sum = max(peak_sum, total)
        except psutil.Error:  # a worker exited between the listing and the reading
            pass
        time.sleep(0.01)
    out = reader.result().decode()
    if child.returncode:
        sys.exit(f"parse child failed: {argv}")
    return out, peak_sum / 2**20


def bench_parse(args) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-parse-") as tmp:
        path = os.path.join(tmp, "level2.log")
        size = write_level2_log(path, args.log_mb << 20)
        rates, peaks = [], []
        _, imports = _tree_rss([sys.executable, "-c", _PARSE, path, "imports-only"])
        for _ in range(args.repeats):
            out, peak = _tree_rss([sys.executable, "-c", _PARSE, path, "parse"])
            got = json.loads(out)
            rates.append(size / 1e6 / got["seconds"])
            peaks.append(peak)
    print(f"item 5: level-2 log parsing (printer.read_level2, as Ladder.inspect reads a log), {size / 1e6:.0f} MB "
          f"log, {got['kernels']} kernels, {os.cpu_count()} CPUs; {args.repeats} repeats, median (min-max)\n")
    print(table(["throughput MB/s", "peak RSS MB (all processes)", "RSS after imports MB"],
                [[spread(rates, "{:.0f}"), spread(peaks, "{:.0f}"), f"{imports:.0f}"]]))
    print()


ITEMS: dict[str, Callable] = {"1": bench_overhead, "2": bench_parallel, "5": bench_parse}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="1,2,3,4,5", help="comma-separated items (default: all)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--scenarios", default="", help="CPU scenarios for items 3-4 (default: all CPU ones)")
    ap.add_argument("--runs", type=int, default=20, help="runs per invocation for items 1-2")
    ap.add_argument("--jobs", type=int, default=2, help="parallel jobs for item 2")
    ap.add_argument("--parallel", default="cpu-1s", help="item-2 workloads: cpu-1s and/or flaky_custom_op_crash")
    ap.add_argument("--log-mb", type=int, default=1024, help="size of the item-5 log")
    args = ap.parse_args()
    args.only = {i.strip() for i in args.only.split(",") if i.strip()}
    args.scenarios = [n for n in args.scenarios.split(",") if n]
    args.parallel = [n for n in args.parallel.split(",") if n]
    print(machine() + "\n", flush=True)
    for item in sorted(args.only):
        if item in ITEMS:
            ITEMS[item](args)
        elif item == "3" or (item == "4" and "3" not in args.only):
            bench_scenarios(args)
        sys.stdout.flush()


if __name__ == "__main__":
    main()
