"""What the ladder reads from a finished run, behind one small interface so that the ladder only decides; and
the instrumented copies of packages the runs did not build, which it has built (run/rebuild.py) on request.

The ladder is handed an `Evidence` the way it is handed `run_batch`: `RunEvidence` reads the logs and the
generated sources a real run left behind; the ladder's tests hand it a fake built from captured text.
"""
from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Optional, Protocol

from ..aoti import checks, level2_file, printer, reinstrument, sanitizer, wrapper
from ..aoti.eagerwalk import EagerWalk, read_eager_walk
from ..aoti.fakecheck import FakeCheck, read_fakecheck
from ..aoti.hook_record import HookRecord, PackageEvent, read_hook
from ..aoti.package import PackageFacts, read_package
from ..aoti.provenance import KernelInfo, read_kernel_information
from ..child.contract import REDIRECT_ENV
from ..files.own import read_log, read_own_text
from ..files.runfolder import RunFolder, RunFolderError
from ..files.write import atomic_write
from ..run import process, rebuild
from ..run.registry import native_backtrace
from ..run.toolchains import Experiment
from ..run.types import RunResult

# The kernels a walk's first compile prints, picked from a launch graph (diagnose/walk.py, first_probe).
Probe = Callable[[wrapper.WrapperGraph], tuple[str, ...]]


@dataclass(frozen=True)
class Instrumented:
    """Instrumented copies of the packages a stage's runs load without building them: `env` points the hook
    at them; `problems`: one line per package that cannot be re-instrumented, and why."""
    env: dict[str, str] = field(default_factory=dict)
    copies: tuple[rebuild.Copy, ...] = ()
    problems: tuple[str, ...] = ()


class Evidence(Protocol):
    def sanity(self, result: RunResult) -> Optional[checks.InputRejected | checks.NanAssert]:
        """The input check or NaN assert that fired in the run, if any."""

    def trace(self, result: RunResult) -> printer.Trace:
        """The level-3 launch trace the run printed."""

    def level2(self, result: RunResult, bound: Optional[int]) -> printer.Observation:
        """What the level-2 printer showed: per-kernel views and model-input stats."""

    def graph(self, result: RunResult) -> Optional[wrapper.WrapperGraph]:
        """The launch graph of the wrapper the run compiled (None: it compiled none)."""

    def kernel_source(self, kernel: str, results: list[RunResult], max_lines: int = 80) -> Optional[tuple[str, str]]:
        """(path, excerpt) of the kernel's generated source, from what these runs compiled."""

    def memcheck(self, result: RunResult, tool: str) -> sanitizer.SanitizerReport:
        """The memory checker's report in a run made under checker `tool`."""

    def hook(self, result: RunResult) -> HookRecord:
        """The packages the run compiled and loaded, as the in-process hook recorded them."""

    def instrumented(self, packages: list[PackageEvent], level: int, kernels: tuple[str, ...]) -> Instrumented:
        """Copies of `packages` (loaded, not built, by the runs) printing what printer `level` prints."""

    def prepare(self, packages: list[PackageEvent], level: int, walk: Optional[Probe] = None) -> None:
        """Starts building the copies `instrumented` will be asked for at `level`, beside the runs before that; with
        `walk`, then the walk's first copies: printer level 2 for the kernels `walk` picks from the launch graph
        the first copy shows."""

    def package_device(self, path: str) -> Optional[str]:
        """The device a package on disk was compiled for (None: unreadable)."""

    def fakecheck(self, result: RunResult) -> FakeCheck:
        """The custom ops' fake functions against the real ops, as the hook checked them in a FAKECHECK run."""

    def eager_walk(self, result: RunResult) -> EagerWalk:
        """The tensors a level-1 run saved around each launch against eager values, as the hook compared them."""

    def kernel_information(self, graph: wrapper.WrapperGraph) -> dict[str, KernelInfo]:
        """Inductor's provenance of the compile that generated `graph` ({} where it recorded none)."""

    def package(self, result: RunResult) -> Optional[PackageFacts]:
        """What the last package the run loaded needs (None: the hook saw no load of a package file)."""

    def fresh_process(self, ops: tuple[str, ...]) -> dict:
        """What a fresh process of the repro's interpreter registers of `ops` and loads (run/registry.py)."""

    def backtrace(self, result: RunResult) -> list[str]:
        """The native frames of a run made under the debugger (none: it did not crash there)."""

    def toolchains(self, package: str) -> Experiment:
        """A package that crashes while loading, rebuilt by each other C++ toolchain here and loaded
        (run/toolchains.py)."""


class RunEvidence:
    """Reads a real run's log and its compile cache. Runs of one flag set share one cache: each cache's
    wrapper is parsed once."""

    def __init__(self, prebuilt_dir: str = "", env: Optional[dict[str, str]] = None,
                 cancel: Optional[process.Cancel] = None, say: Callable[[str], None] = lambda line: None,
                 fresh: Callable[[tuple[str, ...]], dict] = lambda ops: {"error": "not asked"},
                 rebuilt: Callable[[str], Experiment] = lambda path: Experiment(skipped="not asked")) -> None:
        self._graphs: dict[str, Optional[wrapper.WrapperGraph]] = {}
        self.prebuilt_dir = prebuilt_dir  # where instrumented copies are built: inside the run directory
        self.env = dict(os.environ if env is None else env)
        self.cancel = cancel
        self._copies: dict[str, Future] = {}  # by copy key: a copy built, or being built (prepare)
        self._lock = threading.Lock()
        self._builder: Optional[ThreadPoolExecutor] = None
        self.say = say
        self._fresh = fresh
        self._rebuilt = rebuilt

    def sanity(self, result: RunResult) -> Optional[checks.InputRejected | checks.NanAssert]:
        return checks.sanity_hit(read_log(result.log_path))

    def trace(self, result: RunResult) -> printer.Trace:
        return printer.parse_trace(read_log(result.log_path).splitlines())

    def level2(self, result: RunResult, bound: Optional[int]) -> printer.Observation:
        return level2_file.read_level2(result.log_path, bound)

    def graph(self, result: RunResult) -> Optional[wrapper.WrapperGraph]:
        """The wrapper the run compiled; else the one of the instrumented copy it was handed."""
        cache = result.cache_dir
        if cache not in self._graphs:
            self._graphs[cache] = None
            self._graphs[cache] = _first_graph(wrapper.find_wrappers(*self._roots(result)))
        return self._graphs[cache]

    def kernel_source(self, kernel: str, results: list[RunResult], max_lines: int = 80) -> Optional[tuple[str, str]]:
        roots = [root for r in results for root in self._roots(r)]
        return wrapper.kernel_source(kernel, list(dict.fromkeys(roots)), max_lines)

    def memcheck(self, result: RunResult, tool: str) -> sanitizer.SanitizerReport:
        from ..run.checkers import read_report

        return read_report(tool, result.run_dir, result.log_path)  # the checker's own file, never the merged log

    def hook(self, result: RunResult) -> HookRecord:
        return read_hook(result.run_dir)

    def _roots(self, result: RunResult) -> list[str]:
        mapping = result.spec.env_dict.get(REDIRECT_ENV)
        copies = []
        if mapping:
            # Ours (instrumented, below), but in a folder the runs' children can write: a link, a FIFO, a
            # damaged or hostile file is no mapping, never a path to follow or a crash.
            try:
                found = RunFolder(os.path.dirname(mapping)).read_json(os.path.basename(mapping))
                copies = [c for c in found.values() if isinstance(c, str)]
            except (OSError, RunFolderError):
                pass
        # A run served from its flag set's package (reuse) compiled nothing in its own slot's cache: the compile
        # that built the package left its sources in the key's first slot or its snapshot.
        base = re.sub(r"\.slot\d+$", "", result.cache_dir)
        caches = dict.fromkeys([result.cache_dir, base, base + ".warm",
                                *sorted(glob.glob(glob.escape(base) + ".slot*"))])
        return [*(os.path.join(c, "inductor") for c in caches),
                *(os.path.join(os.path.dirname(c), "sources") for c in copies)]

    def package_device(self, path: str) -> Optional[str]:
        return reinstrument.device_of(path)

    def prepare(self, packages: list[PackageEvent], level: int, walk: Optional[Probe] = None) -> None:
        with self._lock:
            if self._builder is None:
                self._builder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="instrument")
        for p in packages:
            self._builder.submit(self._copy, p, level, ())
        if walk is not None:
            for p in packages:
                self._builder.submit(self._walk_copy, p, level, walk)

    def _walk_copy(self, p: PackageEvent, level: int, walk: Probe) -> None:
        graph = self._copied_graph(self._copy(p, level, ()))
        if graph is not None:
            self._copy(p, reinstrument.INSPECT_LEVEL, walk(graph))

    @staticmethod
    def _copied_graph(copy: rebuild.Copy) -> Optional[wrapper.WrapperGraph]:
        return _first_graph(wrapper.find_wrappers(copy.sources)) if copy.sources else None

    def _copy(self, p: PackageEvent, level: int, kernels: tuple[str, ...]) -> rebuild.Copy:
        """The copy, built once: a second asker of a key being built waits for it (two builds would share a folder)."""
        key = rebuild.copy_key(p.sha256, level, kernels)
        with self._lock:
            future, mine = self._copies.get(key), False
            if future is None:
                future, mine = self._copies.setdefault(key, Future()), True
        if mine:
            try:
                folder = os.path.join(self.prebuilt_dir, key)
                os.makedirs(folder, exist_ok=True)
                self.say(f"aoti-bisect: building a copy of {p.path} that prints as printer level {level} does"
                         + (f" for {', '.join(kernels)}" if kernels else ""))
                future.set_result(rebuild.build(p.path, p.sha256, level, kernels, folder, self.env, self.cancel))
            except BaseException as exc:
                future.set_exception(exc)
                raise
        return future.result()

    def instrumented(self, packages: list[PackageEvent], level: int, kernels: tuple[str, ...]) -> Instrumented:
        copies = [self._copy(p, level, kernels) for p in packages]
        built = {c.sha256: c.path for c in copies if c.path}
        problems = tuple(f"{c.original} cannot be re-instrumented: {c.problem}" for c in copies if c.problem)
        if not built:
            return Instrumented(copies=tuple(copies), problems=problems)
        text = json.dumps(built, indent=1, sort_keys=True)
        mapping = os.path.join(self.prebuilt_dir, f"redirect-{hashlib.sha1(text.encode()).hexdigest()[:12]}.json")
        atomic_write(mapping, text)
        return Instrumented({REDIRECT_ENV: mapping}, tuple(copies), problems)

    def fakecheck(self, result: RunResult) -> FakeCheck:
        return read_fakecheck(result.run_dir)

    def eager_walk(self, result: RunResult) -> EagerWalk:
        return read_eager_walk(result.run_dir)

    def kernel_information(self, graph: wrapper.WrapperGraph) -> dict[str, KernelInfo]:
        return read_kernel_information(graph.path) if graph.path else {}

    def package(self, result: RunResult) -> Optional[PackageFacts]:
        loads = [e for e in read_hook(result.run_dir).events if not e.compiled and e.path]
        return read_package(loads[-1].path) if loads else None

    def fresh_process(self, ops: tuple[str, ...]) -> dict:
        return self._fresh(ops)

    def backtrace(self, result: RunResult) -> list[str]:
        return native_backtrace(read_log(result.log_path))

    def toolchains(self, package: str) -> Experiment:
        self.say(f"aoti-bisect: rebuilding {package} with the other C++ toolchains here and loading each copy")
        return self._rebuilt(package)


MAX_WRAPPER = 256 << 20  # a generated wrapper is KiB to a few MiB; one larger is no wrapper Inductor wrote


def _first_graph(paths: list[str]) -> Optional[wrapper.WrapperGraph]:
    """The launch graph of the first of these wrappers that launches anything. They lie in compile caches the runs'
    children write: a link or an unreadable file is skipped, never followed."""
    for path in paths:
        try:
            graph = wrapper.parse_wrapper(read_own_text(path, MAX_WRAPPER), path, wrapper.extern_nodes_for(path))
        except OSError:
            continue
        if graph.launches:
            return graph
    return None
