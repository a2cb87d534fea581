"""The load doctor's toolchain experiment: rebuild a package that crashes while loading with each other C++
toolchain on this machine, and load each copy in a fresh process of the repro's interpreter.

A package's library runs code of the toolchain that built it (its libstdc++ inlines, its static runtime) inside
the loading process; a toolchain whose runtime disagrees with the one the process already has crashes at load
(seen on the GPU machine: /opt/gcc's g++ against the system libstdc++). The copies are rebuilt from the package's
own sources with its recorded commands, only argv[0] changed (run/rebuild.py), and are not instrumented. Every
process is one of run/process.py's, with its log beside the copy, under `folder`; the original is only read.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import zipfile
from dataclasses import dataclass
from typing import Optional

from ..aoti import reinstrument
from ..aoti.reinstrument import Unusable
from ..child import contract
from ..files.own import read_log
from . import process, rebuild
from .classify import classify

LOAD_SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "child", "loads.py")
LOAD_TIMEOUT_S = 120.0
_FAMILIES = ("g++", "clang++", "c++")
_NAMES = re.compile(r"^(g\+\+|clang\+\+|c\+\+)(-[\d.]+)?$")


@dataclass(frozen=True)
class Trial:
    """One toolchain's copy: whether it loads, and one line saying what happened."""
    compiler: str
    version: str  # the first line of `compiler --version`
    loads: bool
    outcome: str


@dataclass(frozen=True)
class Experiment:
    built_by: Optional[str] = None  # the recorded compiler, as found on PATH
    trials: tuple[Trial, ...] = ()
    skipped: Optional[str] = None  # why no toolchain was tried


def find(built_by: str, env: dict[str, str]) -> list[str]:
    """The C++ compilers of this machine other than `built_by`: CXX, then g++/g++-N, clang++/clang++-N and c++
    on PATH, one per real file (g++, c++ and g++-12 are often one binary: the first name found is kept)."""
    path = env.get("PATH", "")
    names = [shlex.split(env["CXX"])[0]] if env.get("CXX", "").strip() else []
    found_on_path = []
    for rank, folder in enumerate(path.split(os.pathsep)):
        try:
            found_on_path += [(_FAMILIES.index(m[1]), rank, n, folder) for n in os.listdir(folder)
                              if (m := _NAMES.match(n))]
        except OSError:
            continue
    names += [os.path.join(folder, n) for _, _, n, folder in sorted(found_on_path)]
    seen = {os.path.realpath(built_by)}
    found = []
    for name in names:
        full = shutil.which(name, path=path)
        if full and os.path.realpath(full) not in seen:
            seen.add(os.path.realpath(full))
            found.append(full)
    return found


def experiment(package: str, python: Optional[str], folder: str, env: dict[str, str],
               cancel: Optional[process.Cancel] = None, load_timeout: float = LOAD_TIMEOUT_S) -> Experiment:
    if python is None:
        return Experiment(skipped="the repro's Python is unknown (give --python): no process could load a copy")
    try:
        wrapper = reinstrument.read_package(package).wrapper
        with zipfile.ZipFile(package) as z:
            recorded = reinstrument.recorded_commands(z.read(wrapper).decode(errors="replace"), "wrapper source")
    except (Unusable, OSError, zipfile.BadZipFile) as exc:
        return Experiment(skipped=f"the package cannot be rebuilt from its own sources: {exc}")
    built_by = shutil.which(recorded.compile[0], path=env.get("PATH")) or recorded.compile[0]
    os.makedirs(folder, exist_ok=True)
    # A control: the crash must come with the package itself, not with something the repro does first.
    original = _load(python, package, os.path.join(folder, "original-load.log"), folder, env, cancel, load_timeout)
    if original[0]:
        return Experiment(built_by, skipped="the package as built loads in a fresh process of the repro's Python: "
                                            "the crash needs something the repro does first, not its toolchain")
    others = find(built_by, env)
    if not others:
        return Experiment(built_by, skipped=f"no C++ toolchain other than {built_by} is on PATH (looked for CXX, "
                                            "g++, g++-N, clang++, clang++-N, c++)")
    return Experiment(built_by, tuple(_trial(package, python, cc, os.path.join(folder, f"{i}-{os.path.basename(cc)}"),
                                             env, cancel, load_timeout) for i, cc in enumerate(others)))


def _trial(package: str, python: str, compiler: str, folder: str, env: dict[str, str],
           cancel: Optional[process.Cancel], load_timeout: float) -> Trial:
    os.makedirs(folder, exist_ok=True)
    log = os.path.join(folder, "version.log")
    said = process.execute([compiler, "--version"], env, folder, log, 30, cancel=cancel)
    version = (next(iter(read_log(log).splitlines()), "").strip() if said.returncode == 0 else "") or "version unknown"
    copy = rebuild.build(package, "", reinstrument.PLAIN, (), folder, env, cancel, compiler=compiler)
    if copy.problem:
        return Trial(compiler, version, False, copy.problem)
    loads, outcome = _load(python, copy.path, os.path.join(folder, "load.log"), folder, env, cancel, load_timeout)
    return Trial(compiler, version, loads, outcome)


def _load(python: str, package: str, log: str, folder: str, env: dict[str, str], cancel: Optional[process.Cancel],
          timeout: float) -> tuple[bool, str]:
    """(loads, one line): aoti_load_package of `package` in a fresh process of the repro's Python."""
    # TMPDIR holds Inductor's default cache: a load runs Inductor's ISA check, which builds and caches a
    # library with the g++ on PATH; that must not land in a cache the repro's runs share.
    exit = process.execute([python, LOAD_SCRIPT, package], dict(env, TMPDIR=folder), folder, log, timeout,
                           cancel=cancel)
    text = read_log(log)
    if exit.returncode == 0 and contract.LOADED_MARK in text:
        return True, "loads"
    if exit.timed_out:
        return False, f"the load did not finish in {timeout:.0f} s; see {log}"
    if exit.launch_error:
        return False, f"no process could load it: {exit.launch_error}"
    _, sig = classify(text, exit)
    what = f"{sig.kind}: {sig.message}" if sig else f"exit {exit.returncode}"
    return False, f"does not load ({what[:200]}); see {log}"
