"""Builds an instrumented copy of a .pt2 package the run did not build (aoti/reinstrument.py says how).

Every compiler and linker call is a process of run/process.py with its log in the copy's folder. The original
package is only read; the copy, its sources and objects live under the folder given (the run's --out).
"""
from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass
from typing import Optional

from ..aoti import reinstrument
from ..aoti.reinstrument import Unusable
from ..files.own import read_log
from . import process

BUILD_TIMEOUT_S = 900.0


@dataclass(frozen=True)
class Copy:
    """An instrumented copy of one package, or why there is none."""
    original: str
    sha256: str
    path: Optional[str] = None  # the copy's .pt2
    sources: Optional[str] = None  # the folder holding the copy's instrumented wrapper and kernel sources
    problem: Optional[str] = None


def copy_key(sha256: str, level: int, kernels: tuple[str, ...]) -> str:
    wanted = ",".join(sorted(k.lower() for k in kernels))
    return f"{sha256[:16]}-L{level}" + (f"-{hashlib.sha1(wanted.encode()).hexdigest()[:8]}" if wanted else "")


def build(original: str, sha256: str, level: int, kernels: tuple[str, ...], folder: str, env: dict[str, str],
          cancel: Optional[process.Cancel] = None, model: str = "model", compiler: Optional[str] = None) -> Copy:
    """The copy of `original` instrumented at `level` (2 with `kernels` as the filter; reinstrument.PLAIN: not
    instrumented), built in `folder` by the recorded compiler or by `compiler`."""
    try:
        path, sources = _build(original, level, kernels, folder, env, cancel, model, compiler)
    except Unusable as exc:
        return Copy(original, sha256, problem=str(exc))
    return Copy(original, sha256, path, sources)


def _build(original: str, level: int, kernels: tuple[str, ...], folder: str, env: dict[str, str],
           cancel: Optional[process.Cancel], model: str, compiler: Optional[str]) -> tuple[str, str]:
    import zipfile

    package = reinstrument.read_package(original, model)
    with zipfile.ZipFile(original) as z:
        wrapper = z.read(package.wrapper).decode(errors="replace")
        kernel = z.read(package.kernel).decode(errors="replace") if package.kernel else None
        so = z.read(package.so)
    commands = reinstrument.with_compiler(reinstrument.recorded_commands(wrapper, "wrapper source"), compiler)
    kernel_commands = (reinstrument.with_compiler(reinstrument.recorded_commands(kernel, "kernel source"), compiler)
                       if kernel is not None else None)
    weights = reinstrument.weights(so)
    instrumented = reinstrument.instrument(wrapper, level, kernels)

    src = os.path.join(folder, "sources")
    os.makedirs(src, exist_ok=True)
    stem = os.path.join(src, os.path.basename(package.wrapper)[: -len(".wrapper.cpp")])
    _write(stem + ".wrapper.cpp", instrumented.encode())
    _write(stem + ".weights.bin", weights.blob)
    _write(stem + ".weights.S", reinstrument.weights_asm(stem + ".weights.bin").encode())
    steps = [("wrapper", reinstrument.compile_command(commands.compile, stem + ".wrapper.cpp", stem + ".wrapper.o"))]
    objects = {".wrapper.o": stem + ".wrapper.o", ".weights.o": stem + ".weights.o"}
    if kernel is not None:
        kstem = os.path.join(src, os.path.basename(package.kernel)[: -len(".kernel.cpp")])
        _write(kstem + ".kernel.cpp", kernel.encode())
        steps.append(("kernel", reinstrument.compile_command(kernel_commands.compile, kstem + ".kernel.cpp",
                                                             kstem + ".kernel.o")))
        objects[".kernel.o"] = kstem + ".kernel.o"
    compiler = commands.compile[0]
    steps.append(("weights", [compiler, "-c", "-fPIC", stem + ".weights.S", "-o", stem + ".weights.o"]))
    so_path = stem + ".wrapper.so"
    steps.append(("link", reinstrument.link_command(commands.link, objects, so_path)))
    if shutil.which(compiler, path=env.get("PATH")) is None:
        raise Unusable(f"the compiler {compiler} (the package's recorded one, unless another was asked for) is "
                       "not on PATH: install it (or put it on PATH) to rebuild the package")
    for what, argv in steps:
        missing = reinstrument.missing_paths(argv)
        if missing:
            raise Unusable(f"the package was built against {missing[0]}, which this machine lacks (built on "
                           "another machine or torch installation): re-run aoti-bisect where it was built")
        log = os.path.join(folder, f"{what}.log")
        exit = process.execute(argv, env, folder, log, BUILD_TIMEOUT_S, cancel=cancel)
        if exit.launch_error or exit.returncode != 0:
            tail = [line for line in read_log(log).splitlines() if "error" in line.lower()][:1]
            raise Unusable(f"rebuilding the package's {what} failed ({exit.launch_error or f'exit {exit.returncode}'})"
                           + (f": {tail[0].strip()[:200]}" if tail else "") + f"; see {log}")
    reinstrument.append_tail(so_path, weights.tail)
    with open(so_path, "rb") as f:
        rebuilt = f.read()
    copy = os.path.join(folder, os.path.basename(original))
    reinstrument.repackage(original, copy, {package.wrapper: instrumented.encode(), package.so: rebuilt})
    return copy, src


def _write(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
