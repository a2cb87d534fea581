"""`aoti-bisect minify RUN_DIR`: cut the failing call's exported program down to a small standalone repro.

1. The program and the failing call's inputs: a run's capture/ (the hook's, child/contract.py CAPTURE_ENV), else
   one more hooked run of the repro the user names (--script/--cmd, never a command read from the run folder)
   that captures them into RUN_DIR/minify/runs/capture-000/.
2. extract_child.py, in its own process, runs the graph eagerly node by node: graph.json + values.pt.
3. The search (ddmin.py, pure) over candidates (graph.py, pure): first the culprit kernel's nodes and what
   feeds them, then ddmin over those nodes, then inputs replaced by zeros one at a time, then each input's
   dimensions cut (to 1, else halved, while it still fails). Every candidate is a
   standalone program run in a fresh process (search.py) and kept when it fails with the run's kind and phase
   while still holding an op of the culprit kernel.
4. The smallest becomes RUN_DIR/minify/repro.py + inputs.pt, run once more from a copy in a fresh temporary
   folder (verified), and RUN_DIR/minify/minify.json records sizes, counts, seconds and the outcome.
"""
from __future__ import annotations

import enum
import glob
import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Optional

from ..child.contract import CAPTURE_DIR, CAPTURE_ENV, CAPTURE_LIBS, CAPTURE_RECORD
from ..failure import FailureKind
from ..files.own import read_log
from ..files.runfolder import RunFolder, RunFolderError
from ..report.model import Report, rewrite_markdown
from ..run import slots
from ..run.layout import HEADERS_ENV, headers_folder
from ..stats import runs_to_observe
from ..verdict import Verdict
from .ddmin import ddmin, shrink_sizes, simplify_each
from .graph import PACKAGE, Candidate, Check, Graph, ValueKind
from .graph import definitions as definitions_source
from .search import Expected, SearchCounts, Trials, scratch

if TYPE_CHECKING:
    from ..report.record import ReportRecord
    from ..stats import Rate
    from .graph import Source

EXTRACT_CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "extract_child.py")
RESULT = "minify.json"
# minify's own cache root, for the capture run's compile and the precompiled headers every candidate links: minify
# never writes into the run's caches, whose generated sources report.json names and a bundle carries as recorded.
CACHE = "minify/cache"
DEFINITIONS = "custom_ops.py"  # the source of the repro's Python custom ops, which the eager walk runs first
CAPTURE_TRIES = 5  # runs of the repro to capture a call that fails, for a failure that comes and goes


class Status(enum.StrEnum):
    VERIFIED = "verified"  # repro.py fails alone, from a copy of its folder, as the run did
    UNVERIFIED = "unverified"  # reduced, but the copy did not fail the same way when run once more
    NOT_REPRODUCED = "not_reproduced"  # no standalone program of the graph fails as the run did (says why)
    NO_PROGRAM = "no_program"  # the exported program or the failing inputs cannot be had


EXIT_CODES = {Status.VERIFIED: 0, Status.UNVERIFIED: 1, Status.NOT_REPRODUCED: 1, Status.NO_PROGRAM: 125}


@dataclass(frozen=True)
class MinifyOptions:
    jobs: Optional[int] = None  # None: default_jobs
    budget_s: float = 1800.0
    max_candidates: int = 60
    timeout_s: float = 300.0
    max_runs: int = 12  # runs that judge one candidate at most, however rare the failure
    # What runs is the user's word, never the run folder's: the repro's command (to capture, and to trust the
    # capture's custom-op code) and the interpreter of the eager walk and the candidates.
    repro: tuple[str, ...] = ()
    python: str = sys.executable


def runs_per_candidate(failures: int, runs: int, cap: int) -> int:
    """Runs that judge one candidate: enough that a failure at the run's own rate (report.json's reproduction)
    shows at least once with 95% probability (stats.runs_to_observe), at most `cap`. Pure."""
    if runs <= 0 or failures <= 0:
        return 1  # no rate to go by: the capture's failing call is taken to fail again
    return runs_to_observe(failures / runs, cap=cap)


# Candidates at once on one GPU by default: a candidate's time is mostly its host compile, one core each, and a GPU
# holds several small processes (4 per H100 measured, docs/minify.md); a model too big for that takes --jobs.
PER_GPU = 4


def capture_wave(failures: int, runs: int, cores: int) -> int:
    """Capture runs at once: one for a failure that failed every run, else as many as one failure takes at the run's
    rate (runs_per_candidate), at most the cores and CAPTURE_TRIES. Pure."""
    if runs <= 0 or failures >= runs:
        return 1
    return max(1, min(cores, CAPTURE_TRIES, runs_per_candidate(failures, runs, CAPTURE_TRIES)))


def default_jobs(graph: Graph) -> tuple[int, int]:
    """(candidates at once, GPUs to spread them over): one per core this process may use, and where the program
    runs on CUDA at most PER_GPU per GPU."""
    cores = slots.cores()
    cuda = any(str(graph.value(n).get("device", "")).startswith("cuda")
               for n in (*graph.inputs, *(x.name for x in graph.nodes)) if graph.kind(n) is ValueKind.TENSOR)
    if cuda:
        import torch  # only here: counting the GPUs

        gpus = torch.cuda.device_count()
        return max(1, min(cores, PER_GPU * max(1, gpus))), gpus
    return cores, 0


@dataclass(frozen=True)
class Program:
    """The program minify cuts down, and what a candidate must do to count (search.Expected): fail with the run's
    kind and phase, by `check`, keeping an op of the culprit kernel (`op_family`)."""
    kind: str
    phase: str
    check: Check
    op_family: tuple[str, ...]
    nodes_before: int
    eager_failure: Optional[str]  # what the eager walk of the whole program raised, if it did
    custom_ops: tuple[str, ...]  # the custom ops the graph calls, and the libraries that define them
    libraries: tuple[str, ...]

    def to_json(self) -> dict:
        custom = {"custom_ops": list(self.custom_ops), "libraries": list(self.libraries)} if self.custom_ops else {}
        return {"signature": {"kind": self.kind, "phase": self.phase}, "check": self.check.value,
                "op_family": list(self.op_family), "nodes_before": self.nodes_before,
                "eager_failure": self.eager_failure, **custom}


@dataclass(frozen=True)
class Reduction:
    """The smallest program that still failed as the run did, and how its copy failed alone."""
    lines_before: int  # the whole program written out the same way
    nodes_after: int
    lines_after: int
    kept: tuple[str, ...]  # its nodes
    zeros: tuple[str, ...]  # the inputs it feeds zeros
    inputs: tuple[str, ...]
    shapes: Mapping[str, tuple[list, list]]  # each tensor it is fed: (the shape captured, the shape it takes)
    ops_after: tuple[str, ...]
    verified: bool
    verify_signature: Optional[str]  # how the copy failed alone, where it did not fail as the run did
    repro_failure_rate: Rate
    seconds: float  # the whole minify
    step_seconds: Mapping[str, float]  # each step's: capture, extract, search, verify
    why_not_smaller: Optional[str] = None  # said where it kept more than a few nodes
    custom_ops_kept: Optional[str] = None  # the custom ops it keeps, in a sentence

    def to_json(self) -> dict:
        body = {**vars(self), "kept": list(self.kept), "zeros": list(self.zeros), "inputs": list(self.inputs),
                "shapes": {n: list(pair) for n, pair in self.shapes.items()}, "ops_after": list(self.ops_after),
                "repro_failure_rate": self.repro_failure_rate.to_json(), "step_seconds": dict(self.step_seconds)}
        # A sentence minify.json holds only where it applies.
        return {key: value for key, value in body.items()
                if value is not None or key not in ("why_not_smaller", "custom_ops_kept")}


@dataclass(frozen=True)
class MinifyResult:
    """How a minify ended and, as far as it got, the program, the search and the reduction: minify.json
    (`to_json`), and the terminal's line (`message`)."""
    status: Status
    message: str  # one line for the terminal
    repro: Optional[str] = None  # RUN_DIR/minify/repro.py
    capture: Optional[str] = None  # the capture folder the program and inputs came from
    program: Optional[Program] = None
    search: Optional[SearchCounts] = None
    reduction: Optional[Reduction] = None

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]

    def to_json(self) -> dict:
        parts = (self.program, self.search, self.reduction)
        return {"schema_version": 1, "status": self.status.value, "message": self.message, "repro": self.repro,
                **({"capture": self.capture} if self.capture else {}),
                **{key: value for part in parts if part is not None for key, value in part.to_json().items()}}


def minify(run_dir: str, options: MinifyOptions, say: Callable[[str], None]) -> MinifyResult:
    """Raises RunFolderError (UsageFailure, one line) for a report.json or minify folder that is not what
    aoti-bisect wrote: a link, a file where a folder goes, bad or future-schema JSON."""
    start = time.monotonic()
    # Every file of the run folder is read and written through `run`: a repro, or whoever sent the folder, may
    # have planted a link at any name in it (files/runfolder.RunFolder).
    run = RunFolder(run_dir)
    report = Report.load(run.root).record
    signature = report.signature
    if report.verdict is not Verdict.REPRODUCED or signature is None:
        return MinifyResult(Status.NOT_REPRODUCED, f"the run did not reproduce a failure "
                                                   f"(verdict {report.verdict.value!r}): nothing to minify")
    found = _find_capture(run, signature.kind)
    if found is None and not options.repro:
        # Refused before anything is written: the folder may be a stranger's, and its report.json's command is
        # theirs to name, not ours to run.
        return MinifyResult(Status.NO_PROGRAM, NO_CAPTURE)
    out = _fresh_folder(run)
    python = options.python
    steps = _Steps(start)
    capture, problem = found or _capture(run, out, report, options, say)
    steps.done("capture")
    if capture is None:
        return _finish(run, MinifyResult(Status.NO_PROGRAM, problem))
    say(f"minify: program and inputs from {capture}")
    python_ops = _python_ops(run, capture)
    problem = (_untrusted_code(capture, python_ops, options) or _unwritable(python_ops)
               or _extract(python, capture, out, options, say, python_ops))
    if problem:
        return _finish(run, MinifyResult(Status.NO_PROGRAM, problem, capture=capture))
    steps.done("extract")
    graph = Graph.from_json({**run.read_json("minify/graph.json"), "python_ops": python_ops})
    return _search(run, out, report, graph, capture, options, say, steps)


def _search(run: RunFolder, out: str, report: ReportRecord, graph: Graph, capture: str, options: MinifyOptions,
            say: Callable[[str], None], steps: _Steps) -> MinifyResult:
    """The search over the extracted graph: the smallest program that still fails as the run did, verified alone."""
    python, start = options.python, steps.start
    expected = _expected(report, graph)
    jobs, gpus = default_jobs(graph)
    runs = runs_per_candidate(report.reproduction.failures, report.reproduction.runs, options.max_runs)
    if runs > 1:
        say(f"minify: the run failed in {report.reproduction.failures} of {report.reproduction.runs} runs: each "
            f"candidate gets up to {runs} runs")
    trials = Trials(out, graph, expected, python, options, say, os.path.join(capture, CAPTURE_LIBS), runs,
                    options.jobs or jobs, gpus, _headers(run), start)
    custom = sorted({n.target for n in graph.nodes if n.custom})
    program = Program(expected.kind, expected.phase, expected.check, tuple(sorted(expected.family)), len(graph.nodes),
                      graph.eager_failure, tuple(custom), tuple(graph.libraries) if custom else ())

    whole = graph.order(n.name for n in graph.nodes)
    seeds = list(dict.fromkeys((_cut(graph, report), whole)))
    first = trials.first_failing([Candidate(s) for s in seeds])
    if first is None:
        return _finish(run, MinifyResult(Status.NOT_REPRODUCED, f"the failure does not reproduce in isolation: "
                                                                f"{_why_not_alone(trials, custom)}", None, capture,
                                         program, trials.summary()))
    seed = seeds[first]
    # Before: the whole program written out the same way (the user's script may hide it behind imports).
    lines_before = trials.lines_of(Candidate(whole))
    say(f"minify: {len(seed)} node(s) reproduce alone; ddmin over them")
    best = _reduce(graph, trials, seed)
    source = trials.write_final(best, out)
    steps.done("search")
    rate, verify_sig = trials.verify(out, best)
    steps.done("verify")
    reduction = _reduction(graph, trials, best, source, lines_before, (rate, verify_sig), steps)
    return _finish(run, _result(MinifyResult(Status.VERIFIED, "", os.path.join(out, "repro.py"), capture, program,
                                             trials.summary(), reduction)))


def _reduction(graph: Graph, trials: Trials, best: Candidate, source: Source, lines_before: int,
               verify: tuple[Rate, Optional[str]], steps: _Steps) -> Reduction:
    """What the search kept, and how its copy failed alone (`verify`: the rate, and how it failed otherwise)."""
    kept, (rate, verify_sig) = best.kept, verify
    shapes = {n: (graph.value(n)["shape"], best.shape(graph, n)) for n in graph.feeds(kept)
              if graph.kind(n) is ValueKind.TENSOR}
    return Reduction(lines_before, len(kept), source.text.count("\n"), kept, tuple(best.zeros), tuple(source.inputs),
                     shapes, tuple(sorted({graph.node(n).op for n in kept})), rate.failures > 0, verify_sig, rate,
                     round(time.monotonic() - steps.start, 1), dict(steps.seconds),
                     None if len(kept) <= 5 else
                     "ddmin stopped at a 1-minimal set: removing any one node loses the failure"
                     if not trials.spent() else "the budget ran out first",
                     _custom_ops_kept(graph, kept, source.libraries))


def _result(found: MinifyResult) -> MinifyResult:
    """The search's result, said in one line."""
    program, search, done = found.program, found.search, found.reduction
    assert program is not None and search is not None and done is not None
    rate, carried = done.repro_failure_rate, done.custom_ops_kept
    message = (f"minified {program.nodes_before} -> {done.nodes_after} node(s) in {search.candidates} candidate(s) "
               f"({search.jobs} at once, {search.seconds_per_candidate or 0:.0f}s each at the median), "
               f"{done.seconds:.0f}s: {found.repro} "
               + (f"fails alone as the run did: {rate.describe()} of runs from a copy" if done.verified else
                  f"did NOT fail the same way in {rate.runs} runs alone from a copy ({done.verify_signature})")
               + (f"; it {carried}" if carried else ""))
    return replace(found, status=Status.VERIFIED if done.verified else Status.UNVERIFIED, message=message)


class _Steps:
    """Seconds of each step of a minify (capture, extract, search, verify): where a slow one spent its time."""

    def __init__(self, start: float) -> None:
        self.start = self.last = start
        self.seconds = dict[str, float]()

    def done(self, step: str) -> None:
        now = time.monotonic()
        self.seconds[step], self.last = round(now - self.last, 1), now


def _headers(run: RunFolder) -> str:
    """The precompiled headers the capture run and every candidate link: the folder AOTI_BISECT_HEADERS names where
    it is set (as the run's own runs had them, run/layout.py), else minify's own, built by its first compile."""
    if os.environ.get(HEADERS_ENV):
        shared = headers_folder(run.root)
        os.makedirs(shared, exist_ok=True)
        return shared
    return run.folder(os.path.relpath(headers_folder(run.path(CACHE)), run.root))  # made here: no link followed


def _fresh_folder(run: RunFolder) -> str:
    """The minify folder, without an earlier minify's files: they would mix with this one's (its capture is kept
    and reused), and removing them first means every file this minify writes is a new one."""
    out = run.folder("minify")
    run.folder("minify/cache")  # where every child's TMPDIR and caches go: a link planted there stops minify first
    for stale in ("candidates", "repro.py", "inputs.pt", PACKAGE, RESULT, "graph.json", "values.pt", DEFINITIONS,
                  "extract.log", "verify.log",
                  *(os.path.basename(p) for p in glob.glob(os.path.join(glob.escape(out), "*.so")))):
        run.remove(f"minify/{stale}")
    return out


def _why_not_alone(trials: Trials, custom: list[str]) -> str:
    why = trials.why_not()
    if custom:
        return why + (f"; the graph calls custom ops ({', '.join(custom)}): the failure may need the custom op's "
                      "state or registration, which only the repro's own code holds")
    return why + ("; the failure needs state the graph does not hold: a graph pass or Inductor setting the "
                  "script makes, or a package built from other code than this program")


def _custom_ops_kept(graph: Graph, kept: tuple[str, ...], libraries: Sequence[str]) -> Optional[str]:
    """Said plainly: the file is only as standalone as the library or the source it carries, and one call cannot
    hold the op's state."""
    kept_custom = sorted({graph.node(n).target for n in kept if graph.node(n).custom})
    if not kept_custom:
        return None
    python_defined = [t for t in kept_custom if t.rsplit(".", 1)[0] in (graph.python_ops.get("ops") or {})]
    built = [t for t in kept_custom if t not in python_defined]
    carried = ([f"{', '.join(built)} loaded from {', '.join(libraries) or 'no library'} beside repro.py "
                "(the repro's build, not its source)"] if built else [])
    carried += ([f"{', '.join(python_defined)} defined in repro.py by the repro's own Python source (its "
                 "module's values as they were at compile time)"] if python_defined else [])
    return (f"keeps the custom op(s) {'; '.join(carried)}; a failure that needs what the op kept from earlier "
            "calls does not reproduce from this one call")


def _reduce(graph: Graph, trials: Trials, seed: tuple[str, ...]) -> Candidate:
    """ddmin over the nodes, then zeros for inputs, then smaller inputs: each step keeps what still fails."""
    kept = ddmin(seed, lambda batch: trials.first_failing([Candidate(k) for k in batch]), trials.spent)
    saved = [f for f in graph.feeds(kept) if graph.kind(f) is ValueKind.TENSOR]
    zeros = simplify_each(saved, lambda z: trials.first_failing([Candidate(kept, z)]) == 0, trials.spent)
    shapes = {f: tuple(graph.value(f)["shape"]) for f in saved}

    def cut(sizes: dict) -> tuple:
        return tuple((n, s) for n, s in sizes.items() if s != shapes[n])
    sizes = shrink_sizes(shapes, lambda options: trials.first_failing([Candidate(kept, zeros, cut(o))
                                                                       for o in options]), trials.spent)
    return Candidate(kept, zeros, cut(sizes))


def _finish(run: RunFolder, result: MinifyResult) -> MinifyResult:
    run.write_text(f"minify/{RESULT}", json.dumps(result.to_json(), indent=2) + "\n")
    rewrite_markdown(run.root)  # report.md's "Minified repro" section and next steps say what minify made
    return result


NO_CAPTURE = ("the run folder holds no captured program, and minify runs no command read from a run folder: name "
              "the repro to capture it with --script PATH or --cmd CMD (and --python PATH)")


def _untrusted_code(capture: str, python_ops: dict, options: MinifyOptions) -> Optional[str]:
    """A capture's custom ops are code (a library the hook copied, a Python source it took): they run only for a
    user who named the repro, and so said the folder's code is theirs to run."""
    if options.repro:
        return None
    libraries = os.path.join(capture, CAPTURE_LIBS)
    code = ([f"the libraries in {libraries}"] if os.path.isdir(libraries) and os.listdir(libraries) else []) + \
        ([f"the Python source of {', '.join(sorted(python_ops['ops']))}"] if python_ops.get("ops") else [])
    if not code:
        return None
    return (f"the captured program calls custom ops whose code is in the run folder ({'; '.join(code)}); minify "
            "runs it only for a repro you name with --script PATH or --cmd CMD (do so only where you would run "
            "the repro itself)")


def _missing(run: RunFolder, capture: str) -> list[str]:
    """The files of a capture folder that minify needs and the hook did not write (or that are links, or lie
    under one: a capture is read from the run folder only)."""
    rel = os.path.relpath(capture, run.root)
    return [f for f in ("program.pt2", "inputs.pt") if not run.is_file(os.path.join(rel, f))]


def _failed_as(run: RunFolder, run_folder: str, kind: str) -> bool:
    result = _read_json(run, os.path.join(os.path.relpath(run_folder, run.root), "result.json"))
    return ((result.get("signature") or {}).get("kind")) == kind


def _find_capture(run: RunFolder, kind: str) -> Optional[tuple[str, None]]:
    """A whole capture of the run, one from a run that failed as the run did first: the inputs of a flaky
    failure's passing call would only pass again."""
    # The run folder's path is a path, not a pattern: `[`, `*`, `?` in it are escaped.
    root = glob.escape(run.root)
    folders = [f for f in sorted(glob.glob(os.path.join(root, "runs", "*", CAPTURE_DIR))
                                 + glob.glob(os.path.join(root, "minify", "runs", "*", CAPTURE_DIR)))
               if not _missing(run, f)]
    folders.sort(key=lambda f: not _failed_as(run, os.path.dirname(f), kind))
    return (folders[0], None) if folders else None


def _capture(run: RunFolder, out: str, report: ReportRecord, options: MinifyOptions,
             say: Callable[[str], None]) -> tuple[Optional[str], str]:
    """One more hooked run of the repro with capture on, through the harness (the same overlay as the ladder's
    hooked stages); returns (capture folder, None) or (None, why not in one line)."""
    from ..run.harness import Harness
    from ..run.types import RunResult, RunSpec

    argv = options.repro
    say("minify: no captured program in the run; running the named repro to capture it")
    run.folder("minify/runs")  # where the harness makes its run folder: a planted link is refused, not followed
    # minify's own cache root: the capture compiles with the flags of the run's baseline, and in the run's cache it
    # would rewrite the generated files the report names (the culprit's source in a later bundle).
    kind = report.signature.kind
    wave = capture_wave(report.reproduction.failures, report.reproduction.runs,
                        options.jobs or slots.cores())
    harness = Harness(out, jobs=wave, reuse="none", cache_root=run.folder(CACHE))

    def fails_as_the_run(r: RunResult) -> bool:
        return bool(r.signature and r.signature.kind == kind)

    def done(rs: list[RunResult]) -> bool:  # a flaky failure: only a call that failed holds inputs that fail
        return any(fails_as_the_run(r) or _missing(run, os.path.join(r.run_dir, CAPTURE_DIR)) for r in rs)

    results: list = []
    while len(results) < CAPTURE_TRIES and not done(results):
        if results:
            say(f"minify: {len(results)} capture run(s) did not fail as the run did; trying again")
        more = min(wave, CAPTURE_TRIES - len(results))
        results += harness.scheduler.run_many(
            [RunSpec(argv, "capture", len(results) + i, ((CAPTURE_ENV, "1"),), options.timeout_s, hook=True)
             for i in range(more)])
    if not results:
        return None, "no capture run finished (interrupted)"
    result = next((r for r in results if fails_as_the_run(r)), results[-1])
    folder = os.path.join(result.run_dir, CAPTURE_DIR)
    manifest = _read_json(run, os.path.relpath(os.path.join(folder, CAPTURE_RECORD), run.root))
    if not _missing(run, folder):
        return folder, None
    why = manifest.get("program_problem") or manifest.get("inputs_problem")
    if not manifest or (manifest.get("program") is None and not why):
        why = ("the repro compiled no program in this process (it loads a prebuilt package, which carries no "
               "exported program to cut down, or it compiles nothing with AOTI)")
    return None, f"cannot get the exported program of the failing call: {why} (see {result.log_path})"


def _read_json(run: RunFolder, rel: str) -> dict:
    """A file that only informs (a run's result, the capture's manifest, an earlier minify.json): what cannot
    be read as aoti-bisect wrote it is taken as absent."""
    try:
        return run.read_json(rel)
    except (RunFolderError, OSError):
        return {}


def _python_ops(run: RunFolder, capture: str) -> dict:
    """The capture's record of the custom ops the repro defines in Python (child/hook/pyops.py), {} if none: what
    cannot be read as the hook wrote it counts as absent, and extraction then says which op it could not define."""
    record = _read_json(run, os.path.join(os.path.relpath(capture, run.root), CAPTURE_RECORD)).get("python_ops")
    if not isinstance(record, dict):
        return {}
    ops, pieces, problems = record.get("ops"), record.get("pieces"), record.get("problems") or {}
    if not (isinstance(ops, dict) and isinstance(pieces, dict) and isinstance(problems, dict)
            and all(isinstance(v, str) for v in (*pieces.values(), *problems.values()))
            and all(isinstance(keys, list) and all(k in pieces for k in keys) for keys in ops.values())):
        return {}
    return {"ops": ops, "pieces": pieces, "problems": problems}


def _unwritable(python_ops: dict) -> Optional[str]:
    """The first custom op the repro defines in Python whose source the capture could not take, in one line."""
    for op, why in (python_ops.get("problems") or {}).items():
        return (f"the program calls the custom op {op}, which the repro defines in Python, and its source cannot be "
                f"written into a file of its own: {why}; its graph cannot be cut in a process of its own")
    return None


def _extract(python: str, capture: str, out: str, options: MinifyOptions, say: Callable[[str], None],
             python_ops: Optional[dict] = None) -> Optional[str]:
    from ..run import process
    from ..run.environment import CHILD_ENV

    log = os.path.join(out, "extract.log")
    libraries = os.path.join(capture, CAPTURE_LIBS)
    minify_folder = RunFolder(out)
    definitions = ""
    if python_ops and python_ops.get("ops"):
        minify_folder.write_text(DEFINITIONS, definitions_source(python_ops, python_ops["ops"]) + "\n")
        definitions = os.path.join(out, DEFINITIONS)
    env = {**os.environ, **CHILD_ENV, **scratch(minify_folder, "cache/extract")}
    for custom in ("run", "skip"):
        exit = process.execute([python, EXTRACT_CHILD, os.path.join(capture, "program.pt2"),
                                os.path.join(capture, "inputs.pt"), out, custom, libraries, definitions], env, out,
                               log, options.timeout_s)
        if exit.returncode == 0 and os.path.isfile(os.path.join(out, "graph.json")):
            return None
        if exit.signal is None or not (os.path.isdir(libraries) or definitions):
            break
        # Killed by a signal with custom ops loaded: most likely the op's own crash, the failure itself.
        say(f"minify: the eager walk died of signal {exit.signal}; walking again without running custom ops")
    if exit.timed_out:  # killed by us, not a program that failed to load
        return (f"the eager walk of the captured program ran past --timeout ({options.timeout_s:g} s); give it "
                f"more time (see {log})")
    lines = [line.strip() for line in read_log(log).splitlines() if line.strip()]
    ours = [line.split(": ", 1)[1] for line in lines if line.startswith("aoti-bisect minify: ")]
    if ours:  # extract_child.py's own plain line (a custom op, an input kind it cannot feed)
        return f"{ours[-1]} (see {log})"
    last = lines[-1] if lines else f"exit {exit.returncode}"
    return f"cannot load and run the captured program on its own: {last[:300]} (see {log})"


def _expected(report: ReportRecord, graph: Graph) -> Expected:
    signature, culprit = report.signature, report.culprit
    origin = [n for n in (culprit.origin.nodes if culprit.origin else ()) if n in {x.name for x in graph.nodes}]
    family = {graph.node(n).op for n in origin}
    if not family and culprit.kernel:
        # No node names to go by: the fused ops a kernel name lists (cpp_fused_add_index_mul_sin_sum_0).
        words = set(culprit.kernel.split("_"))
        family = {n.op for n in graph.nodes if n.op in words}
    # A custom op named as the culprit (outside the instrumented kernels: bisectlab::shifted_gather) is the family
    # alone: the origin also lists the fused nodes around the op, which cannot make its crash.
    op = {n.op for n in graph.nodes if culprit.kernel and n.custom and n.target.split(".", 1)[0] == culprit.kernel}
    family = op or family
    kind = signature.kind
    # A NaN is checked by finiteness, an exception (the script's own check of the values) against eager's values;
    # any other failure (a crash, a check that raises inside the package) is its own check: the program fails.
    check = Check.FINITE if kind == FailureKind.NAN_INF else Check.EAGER if kind == FailureKind.PYTHON_EXCEPTION \
        else Check.RUN
    first_bad = next((n for n in graph.nodes if n.op in family and n.value.get("finite") is False), None)
    if check is Check.FINITE and first_bad is not None and first_bad.value.get("nan"):
        # The culprit made a NaN when run eagerly: a candidate must make a NaN too, not merely an Inf.
        check = Check.NAN
    headline = f"{kind} in {signature.phase}" + (f", culprit kernel {culprit.kernel}" if culprit.kernel else "")
    rate = (report.reproduction.failures, report.reproduction.runs)
    return Expected(kind, signature.phase, frozenset(family), check, headline, rate)


def _cut(graph: Graph, report: ReportRecord) -> tuple[str, ...]:
    """The culprit's nodes and everything that feeds them (the whole graph when the report names none)."""
    origin = report.culprit.origin.nodes if report.culprit.origin else ()
    known = [n for n in origin if n in {x.name for x in graph.nodes}]
    return graph.ancestors(known) if known else graph.order(n.name for n in graph.nodes)
