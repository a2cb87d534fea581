"""What the ladder reads from a finished run, behind one small interface so that the ladder only decides.

The ladder is handed an `Evidence` the way it is handed `run_batch`: `RunEvidence` reads the logs and the
generated sources a real run left behind; the ladder's tests hand it a fake built from captured text.
"""
from __future__ import annotations

import os
from typing import Callable, Optional, Protocol

from ..aoti import checks, level2_file, printer, sanitizer, wrapper
from ..aoti.hook_record import HookRecord, read_hook
from ..aoti.package import PackageFacts, read_package
from ..files import read_log
from ..run.registry import native_backtrace
from ..run.types import RunResult


class Evidence(Protocol):
    def sanity(self, result: RunResult) -> Optional[checks.InputRejected | checks.NanAssert]:
        """The input check or NaN assert that fired in the run, if any."""

    def trace(self, result: RunResult) -> printer.Trace:
        """The level-3 launch trace the run printed."""

    def level2(self, result: RunResult, bound: Optional[int]) -> printer.Observation:
        """What the level-2 printer showed: per-kernel views and model-input stats."""

    def graph(self, result: RunResult) -> Optional[wrapper.WrapperGraph]:
        """The launch graph of the wrapper the run compiled (None: it compiled none)."""

    def kernel_source(self, kernel: str, results: list[RunResult]) -> Optional[tuple[str, str]]:
        """(path, excerpt) of the kernel's generated source, from what these runs compiled."""

    def memcheck(self, result: RunResult, tool: str) -> sanitizer.SanitizerReport:
        """The memory checker's report in a run made under checker `tool`."""

    def hook(self, result: RunResult) -> HookRecord:
        """The packages the run compiled and loaded, as the in-process hook recorded them."""

    def package(self, result: RunResult) -> Optional[PackageFacts]:
        """What the last package the run loaded needs (None: the hook saw no load of a package file)."""

    def fresh_process(self, ops: tuple[str, ...]) -> dict:
        """What a fresh process of the repro's interpreter registers of `ops` and loads (run/registry.py)."""

    def backtrace(self, result: RunResult) -> list[str]:
        """The native frames of a run made under the debugger (none: it did not crash there)."""


class RunEvidence:
    """Reads a real run's log and its compile cache. Runs of one flag set share one cache: each cache's
    wrapper is parsed once."""

    def __init__(self, fresh: Callable[[tuple[str, ...]], dict] = lambda ops: {"error": "not asked"}) -> None:
        self._graphs: dict[str, Optional[wrapper.WrapperGraph]] = {}
        self._fresh = fresh

    def sanity(self, result: RunResult) -> Optional[checks.InputRejected | checks.NanAssert]:
        return checks.sanity_hit(read_log(result.log_path))

    def trace(self, result: RunResult) -> printer.Trace:
        return printer.parse_trace(read_log(result.log_path).splitlines())

    def level2(self, result: RunResult, bound: Optional[int]) -> printer.Observation:
        return level2_file.read_level2(result.log_path, bound)

    def graph(self, result: RunResult) -> Optional[wrapper.WrapperGraph]:
        cache = result.cache_dir
        if cache not in self._graphs:
            self._graphs[cache] = None
            for path in wrapper.find_wrappers(os.path.join(cache, "inductor")):
                with open(path, errors="replace") as f:
                    graph = wrapper.parse_wrapper(f.read(), path, wrapper.extern_nodes_for(path))
                if graph.launches:
                    self._graphs[cache] = graph
                    break
        return self._graphs[cache]

    def kernel_source(self, kernel: str, results: list[RunResult]) -> Optional[tuple[str, str]]:
        roots = [os.path.join(r.cache_dir, "inductor") for r in results]
        return wrapper.kernel_source(kernel, list(dict.fromkeys(roots)))

    def memcheck(self, result: RunResult, tool: str) -> sanitizer.SanitizerReport:
        return sanitizer.parse(tool, read_log(result.log_path))

    def hook(self, result: RunResult) -> HookRecord:
        return read_hook(result.run_dir)

    def package(self, result: RunResult) -> Optional[PackageFacts]:
        loads = [e for e in read_hook(result.run_dir).events if not e.compiled and e.path]
        return read_package(loads[-1].path) if loads else None

    def fresh_process(self, ops: tuple[str, ...]) -> dict:
        return self._fresh(ops)

    def backtrace(self, result: RunResult) -> list[str]:
        return native_backtrace(read_log(result.log_path))
