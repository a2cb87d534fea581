"""Memory checkers the memcheck stage can run the repro under, found on this machine (or not, with the reason).

A checker is a prefix to the repro's command line plus an environment overlay; the ladder builds the run,
the parser for its report lives in aoti/sanitizer.py, keyed by `Checker.tool`.

The checker's report comes from its own channel, never from the repro's merged output: a repro that prints
`==PID== Invalid read` or `========= Invalid __global__ read` lines must not fake a finding. Each checker is
told `--log-file` = CHECKER_LOG, relative to the run's cwd (runs/<stage>-NNN/cwd), so it lands in the run folder
beside output.log, outside the child's cwd and tmp, and a rerun.sh (which cds there) writes it to the same place.
process.execute creates that file (O_EXCL, never through a planted link) before the child starts, and
`read_report` reads it without following a link.
"""
from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Optional

from ..aoti import sanitizer
from ..files.own import NotOwnFile, open_own

CHECKER_LOG_NAME = "checker.log"
CHECKER_LOG = os.path.join(os.pardir, CHECKER_LOG_NAME)  # from the run's cwd: runs/<stage>-NNN/checker.log


@dataclass(frozen=True)
class Checker:
    tool: str  # which parser reads its report (aoti/sanitizer.py parse): "compute-sanitizer", "valgrind"
    device: str  # "cuda" or "cpu": the repros it can check
    prefix: tuple[str, ...]  # argv put before the repro's own
    env: tuple[tuple[str, str], ...] = ()
    slowdown: float = 10.0  # how much longer than a plain run a checked run may take (its timeout grows so)
    # What one checked run costs, in plain runs: the ladder checks first when waiting for a crash costs more.
    # compute-sanitizer: 70-72 s against 69-95 s plain (the compile dominates); valgrind: 13-21x (docs/gpu.md).
    cost: float = 1.5


@dataclass(frozen=True)
class Missing:
    """No checker for this device here: why, and how to get one."""

    device: str
    why: str


# Bytes of padding compute-sanitizer puts after every allocation: an access up to this far past a tensor's end is
# reported even where, unpadded, it lands in a neighbour's live allocation (a user Triton kernel's store 1 MiB past
# its 2 MiB output: 0 errors unpadded, 130 invalid writes padded, same run time; H100, 2026-11-28). It costs this
# much device memory per live allocation, which the checked run's PYTORCH_NO_CUDA_MEMORY_CACHING makes one per tensor.
MEMCHECK_PADDING = 4 << 20


def compute_sanitizer(path: Optional[str] = None, tools: tuple[str, ...] = ("memcheck",),
                      env: Optional[Mapping[str, str]] = None) -> list[Checker] | Missing:
    """compute-sanitizer from --sanitizer PATH, else PATH, else $CUDA_HOME/bin, else /usr/local/cuda/bin.

    Memcheck runs with PYTORCH_NO_CUDA_MEMORY_CACHING=1: with the caching allocator on, an access inside one
    of its segments but outside the tensor is invisible to the checker (docs/aoti-facts.md). Without the cache each
    tensor is its own allocation, but cudaMalloc packs them side by side, so a store that lands in the next live
    tensor is still invisible: MEMCHECK_PADDING puts an unallocated gap after every allocation (docs/gpu.md)."""
    env = os.environ if env is None else env
    candidates = [path] if path else [shutil.which("compute-sanitizer", path=env.get("PATH")),
                                      os.path.join(env.get("CUDA_HOME", "/usr/local/cuda"), "bin", "compute-sanitizer"),
                                      "/usr/local/cuda/bin/compute-sanitizer"]
    found = next((c for c in candidates if c and os.path.isfile(c) and os.access(c, os.X_OK)), None)
    if found is None:
        return Missing("cuda", f"compute-sanitizer not found{f' at {path}' if path else ' (PATH, CUDA_HOME/bin)'}: "
                               "it ships with the CUDA toolkit; point --sanitizer at it")
    return [Checker("compute-sanitizer", "cuda",
                    (found, "--tool", tool, "--print-limit", "100", "--show-backtrace", "no",
                     *(("--padding", str(MEMCHECK_PADDING)) if tool == "memcheck" else ()), "--log-file", CHECKER_LOG),
                    (("PYTORCH_NO_CUDA_MEMORY_CACHING", "1"),) if tool == "memcheck" else ())
            for tool in tools]


VALGRIND_ERROR_EXIT = 99  # valgrind's exit status when memcheck reported an error the suppressions did not hide
VALGRIND_SUPPRESSIONS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "valgrind.supp")


def valgrind(path: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
             cpuinfo: str = "/proc/cpuinfo") -> list[Checker] | Missing:
    """valgrind's memcheck from --valgrind PATH, else PATH (Debian, Ubuntu: apt-get install valgrind).

    Addressability errors only (--undef-value-errors=no): an out-of-bounds access is one, and undefined-value
    tracking doubles the run time and floods the log with CPython's own reports. PYTHONMALLOC=malloc puts
    Python objects on the checked malloc (CPython's Misc/README.valgrind). --trace-children=no: the repro's
    compiler runs go unchecked, so argv[0] must be the interpreter itself, not a shell wrapper (a pyenv shim
    would be checked in its place). Measured 13x (silent_oob_custom_op) and 21x (flaky_custom_op_crash) a warm
    plain run, most of it importing torch under valgrind: slowdown 30 leaves room on a loaded machine."""
    env = os.environ if env is None else env
    found = path if path else shutil.which("valgrind", path=env.get("PATH"))
    if not found or not (os.path.isfile(found) and os.access(found, os.X_OK)):
        return Missing("cpu", f"valgrind not found{f' at {path}' if path else ' on PATH'}: "
                              "install it (Debian, Ubuntu: apt-get install valgrind)")
    return [Checker("valgrind", "cpu",
                    (found, "--tool=memcheck", "--undef-value-errors=no", f"--error-exitcode={VALGRIND_ERROR_EXIT}",
                     "--trace-children=no", "--leak-check=no", "--num-callers=40",
                     f"--suppressions={VALGRIND_SUPPRESSIONS}", f"--log-file={CHECKER_LOG}"),
                    (("PYTHONMALLOC", "malloc"), *(AVX2_ONLY if avx512_host(env, cpuinfo) else ())),
                    slowdown=30.0,
                    cost=20.0)]


# valgrind emulates no AVX-512: on a CPU that has it, Inductor's -march=native and its AVX-512 kernels die of
# SIGILL under the checker ("Unrecognised instruction", tests/logs/cpu/valgrind-rare_oob_custom_op-avx512.log).
# The checked runs get a package built for AVX2 instead: its own compile key, compiled outside the checker first.
AVX2_ONLY = (("TORCHINDUCTOR_CPP_MARCH", "x86-64-v3"), ("ATEN_CPU_CAPABILITY", "avx2"))


def avx512_host(env: Mapping[str, str], cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Whether this CPU has AVX-512 and the user did not choose a -march or an ATen ISA of their own."""
    if "TORCHINDUCTOR_CPP_MARCH" in env or "ATEN_CPU_CAPABILITY" in env:
        return False
    try:
        with open(cpuinfo) as f:
            return any(line.startswith("flags") and " avx512f" in line for line in f)
    except OSError:
        return False


def find(sanitizer: Optional[str] = None, tools: tuple[str, ...] = ("memcheck",)
         ) -> tuple[tuple[str, tuple[Checker, ...] | Missing], ...]:
    """The checker for each device, as the ladder's options take them."""
    cuda = compute_sanitizer(sanitizer, tools)
    cpu = valgrind()
    return (("cuda", cuda if isinstance(cuda, Missing) else tuple(cuda)),
            ("cpu", cpu if isinstance(cpu, Missing) else tuple(cpu)))


def checker_log(run_dir: str) -> str:
    """Where a checked run's checker wrote its report: the run folder (RunResult.run_dir)."""
    return os.path.join(run_dir, CHECKER_LOG_NAME)


def read_report(tool: str, run_dir: str, output_log: str) -> sanitizer.SanitizerReport:
    """The checker's report, from its own file only. A checker that could not start (valgrind's "failed to start
    tool", compute-sanitizer's "Device not supported") may say so before it opens its file, on the merged
    output: a refusal, and only a refusal, is taken from there (it can only withhold a finding, never fake one)."""
    try:
        with os.fdopen(open_own(checker_log(run_dir)), "rb") as f:
            text = f.read(64 << 20).decode("utf-8", errors="replace")
    except NotOwnFile:
        return sanitizer.SanitizerReport(tool, (), None, refused="its report file was replaced by a link")
    except OSError:
        text = ""
    report = sanitizer.parse(tool, text)
    if report.refused or report.finished or report.errors:
        return report
    from ..files.own import read_log

    try:
        merged = sanitizer.parse(tool, read_log(output_log))
    except OSError:
        return report
    return replace(report, refused=merged.refused) if merged.refused else report


def checked(argv: list[str] | tuple[str, ...]) -> bool:
    """Whether a run's command line runs the repro under a checker (it names the checker's report file)."""
    return any(a == CHECKER_LOG or a.endswith("=" + CHECKER_LOG) for a in argv)


def create_checker_log(argv: list[str], cwd: str) -> None:
    """Called by process.execute before the child starts: a run whose argv names CHECKER_LOG gets that file new
    (O_EXCL|O_NOFOLLOW: a link or file planted there fails the run instead of being written through)."""
    if not checked(argv):
        return
    fd = os.open(os.path.join(cwd, CHECKER_LOG), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    os.close(fd)
