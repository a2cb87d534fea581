"""What the benchmarks in bench/ share: the machine line, timing a process tree, sandboxed caches laid out
as the harness lays them out, the median-and-spread tables, and the command-line options.

Every figure is the median of --repeats invocations with the spread (min-max); every ratio is taken
between measurements made in the same repeat, one after the other, on the same machine. Heavy work runs
in subprocesses that are timed from here; each aoti-bisect invocation gets a fresh --out under a temporary
folder (and runs with that folder as its cwd), so nothing is written into the caller's directory.
"""
from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Callable, Optional

from aoti_bisect.files.write import user_name
from aoti_bisect.run.environment import CHILD_ENV

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOGS = os.path.join(REPO, "tests", "logs")


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
               platform.processor() or platform.machine())
    usable = len(os.sched_getaffinity(0))
    return (f"machine: {cpu}, {os.cpu_count()} cores" + (f" ({usable} usable)" if usable != os.cpu_count() else "")
            + f", Linux {platform.release()}, Python {platform.python_version()}, torch "
            f"{importlib.metadata.version('torch')}; commit {_commit()}; "
            f"{datetime.datetime.now().strftime('%Y-%m-%d %H:%M')}; load average at start "
            f"{os.getloadavg()[0]:.2f}")


def _commit() -> str:
    """The checkout's commit, with a + where its tracked files differ from it; 'unknown' outside git."""
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        sha = subprocess.run(["git", "-C", here, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", here, "diff", "--quiet", "HEAD"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return (sha + ("+" if dirty.returncode == 1 else "")) if sha else "unknown"


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
        os.symlink(self.headers, os.path.join(tmp, f"torchinductor_{user_name()}"))
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




def read(path: str) -> str:
    with open(path, errors="replace") as f:
        return f.read()


# -- command line ----------------------------------------------------------------------------------------
# One definition per option, so that a benchmark run alone and bench/all.py read the same flags alike.
OPTIONS = {
    "only": dict(default="1,2,3,4,5", help="comma-separated items (default: all)"),
    "repeats": dict(type=int, default=3),
    "scenarios": dict(default="", help="CPU scenarios for items 3-4 (default: all CPU ones)"),
    "runs": dict(type=int, default=20, help="runs per invocation for items 1-2"),
    "jobs": dict(type=int, default=2, help="parallel jobs for item 2"),
    "parallel": dict(default="cpu-1s", help="item-2 workloads: cpu-1s and/or flaky_custom_op_crash"),
    "log_mb": dict(type=int, default=1024, help="size of the item-5 log"),
}
_LISTS = ("only", "scenarios", "parallel")  # comma-separated on the command line


def main(doc: str, run: Callable[[argparse.Namespace], None], options: tuple[str, ...], **defaults) -> None:
    """Parses `options` (keys of OPTIONS; `defaults` overrides theirs), prints the machine line, runs."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    for name in options:
        ap.add_argument("--" + name.replace("_", "-"), **OPTIONS[name])
    ap.set_defaults(**defaults)
    args = ap.parse_args()
    for name in _LISTS:
        if name in options:
            setattr(args, name, [n.strip() for n in getattr(args, name).split(",") if n.strip()])
    print(machine() + "\n", flush=True)
    run(args)
    sys.stdout.flush()
