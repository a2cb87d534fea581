"""The nightly commands end to end (`nightly`, `merge`, `history`): what runs, in which order, and what it
returns to the CLI. Each piece of work lives in its own module; this one only sequences them."""
from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional

from ..exits import EXIT_INCOMPLETE, EXIT_INTERRUPTED, UsageFailure
from ..files.out import default_out, out_lock, prepare_out
from ..report.redact import process_redactor
from .history import History, HistoryError, default_path, reused_batch
from .plan import Plan, Shard, parse_shard
from .records import Night, find_records, read_records, record_path, records_dir
from .sets import Repro, load_set
from .submitit_executor import Submitit

Say = Callable[[str], None]


@dataclass(frozen=True)
class Judging:
    db: Optional[str] = None
    alpha: float = 0.01
    window: int = 7
    bisect_on_change: bool = False
    jobs: Optional[int] = None
    # A night with a shard missing, failed or unfinished is judged only when asked: its rates would be
    # computed on the runs that happened to finish, and a history row would make them look like a full night.
    allow_partial: bool = False

    def check(self) -> None:
        if not 0 < self.alpha < 1:
            raise UsageFailure(f"--alpha must be between 0 and 1, got {self.alpha}")
        if self.window < 1:
            raise UsageFailure(f"--window must be at least 1, got {self.window}")


# Options that mean something only beside another: given without it, they were silently ignored.
_NEEDS = (
    (("precision", "min_runs"), "until_confident", True, "--until-confident"),
    (("shards", "cluster", "gpus_per_shard", "partition", "shard_timeout_min"), "executor", "submitit",
     "--executor submitit"),
)
# A shard only writes records (`merge` judges): judging options on one were silently ignored.
_JUDGING = ("alpha", "window", "bisect_on_change", "allow_partial", "as_json")


def check_option_combinations(given: set[str], params: dict) -> None:
    """Refuses (usage error, 2) options that contradict each other or go with an option not given. `given`: the
    parameters set on the command line or by the environment, not left at their defaults."""
    def flag(name: str) -> str:
        return {"as_json": "--json", "shard_text": "--shard"}.get(name, "--" + name.replace("_", "-"))

    for names, needed, value, words in _NEEDS:
        used = [flag(n) for n in names if n in given]
        if used and params.get(needed) != value:
            raise UsageFailure(f"{', '.join(used)} {'is' if len(used) == 1 else 'are'} used only with {words}")
    if params.get("until_confident") and "min_runs" in given and params["min_runs"] > params["runs"]:
        raise UsageFailure(f"--min-runs {params['min_runs']} is above --runs {params['runs']}, the cap")
    if params.get("shard_text") and params.get("executor") == "submitit":
        raise UsageFailure("--shard runs one shard here; --executor submitit runs them all: give one of them")
    judging = [flag(n) for n in _JUDGING if n in given]
    if params.get("shard_text") and judging:
        raise UsageFailure(f"{', '.join(judging)}: a shard (--shard) is not judged; give them to `merge`")


@dataclass(frozen=True)
class NightlyRequest:
    set_path: str
    only: tuple[str, ...]
    plan: Plan  # its shard is replaced by the one --shard or the scheduler gives
    shard_text: Optional[str]
    out: Optional[str]
    batch: Optional[str]
    jobs: Optional[int]
    judging: Judging
    submitit: Optional[Submitit] = None
    verbose: bool = False


@dataclass(frozen=True)
class Finished:
    """What the CLI needs from a command: its exit code and, where a night was judged, the summary."""

    exit_code: int
    summary: Optional[dict] = None


NIGHT_LOCK = ".aoti-bisect-nightly.lock"


def _night_folder(out: Optional[str], prefix: str) -> str:
    return prepare_out(out or default_out(f"{prefix}-"))


def nightly(req: NightlyRequest, say: Say) -> Finished:
    req.judging.check()
    shard = parse_shard(req.shard_text, dict(os.environ))
    if req.plan.until_confident and (shard.count > 1 or req.submitit):
        raise UsageFailure("--until-confident cannot be sharded: its stopping rule needs every run of a repro "
                           "in one place; give --runs N")
    repros = load_set(req.set_path, sys.executable, req.only)
    from .runner import default_batch

    batch = req.batch or default_batch(dict(os.environ))
    if shard.count == 1:
        # A database this night could not be judged into should stop it before its hours of runs, not after.
        store = History(req.judging.db or default_path())
        try:
            if store.has_batch(batch):
                raise HistoryError(reused_batch(batch, store.path))
        finally:
            store.close()
    plan = dataclasses.replace(req.plan, shard=shard)
    out = _night_folder(req.out, "nightly")
    whole = req.submitit is not None or shard.count == 1
    # Two nights at once in one --out both ran every repro into the same record file and folders, and both
    # were lost. A whole night (unsharded, or submitit's array) holds the night's lock alone; hand-started
    # shards of one night may share the folder, so each shares the night's lock and holds its own index's
    # (the folder shard-<i> it works in) alone.
    busy = "another `aoti-bisect nightly` (a night, or a shard of one)"
    with out_lock(out, NIGHT_LOCK, shared=not whole, holder=busy), \
            (contextlib.nullcontext() if whole else
             out_lock(out, f".aoti-bisect-nightly-shard-{shard.index}.lock",
                      holder=f"another `aoti-bisect nightly` running shard {shard.index} of this night")):
        return _run_night(req, repros, plan, batch, out, say)


def _run_night(req: NightlyRequest, repros: list[Repro], plan: Plan, batch: str, out: str, say: Say) -> Finished:
    from .runner import run_records, visible_gpus

    shard = plan.shard
    # Shards of one night may share a folder (one --out on a shared disk); a second night may not reuse it.
    taken = record_path(out, plan.shard) if req.submitit is None else records_dir(out)
    if os.path.isfile(taken) or (os.path.isdir(taken) and os.listdir(taken)):
        raise UsageFailure(f"{out} already holds this night's records; give a fresh --out")
    if req.submitit:
        from .submitit_executor import run_on_submitit

        records, failed = run_on_submitit(repros, plan, req.submitit, req.set_path, out, batch, req.jobs,
                                          lambda: visible_gpus(dict(os.environ), out), say)
        if not records:
            every = [str(Shard(i, req.submitit.shards)) for i in range(req.submitit.shards)]
            return _not_judged(failed + [f"no shard left records in {records_dir(out)}"], every, [], batch, say)
        return judge_night(records, out, req.judging, say)
    from ..progress import run_line

    on_run = (lambda r: say("    " + run_line(r))) if req.verbose else (lambda r: None)
    try:
        record = run_records(repros, plan, req.set_path, out, batch, req.jobs, say, on_run)
    except KeyboardInterrupt:
        say("aoti-bisect: interrupted; summarising the runs that finished")
        record, interrupted = record_path(out, plan.shard), True
    else:
        interrupted = False
    if shard.count > 1:
        say(f"aoti-bisect: shard {shard} recorded in {record}; fold the shards with `aoti-bisect merge`")
        return Finished(EXIT_INTERRUPTED if interrupted else 0)
    return judge_night([record], out, req.judging, say, interrupted)


def merge(paths: tuple[str, ...], out: Optional[str], judging: Judging, say: Say) -> Finished:
    judging.check()
    files = find_records(paths)
    return judge_night(files, _night_folder(out, "merge"), judging, say)


def history(repros: tuple[str, ...], db: Optional[str], nights: int, plot: Optional[str], say: Say) -> list[dict]:
    """The trend rows of `aoti-bisect history`; draws them too when plot names a PNG."""
    path = db or default_path()
    if not os.path.isfile(path):
        raise UsageFailure(f"no history database at {path} (run `aoti-bisect nightly` first, or give --db)")
    store = History(path, readonly=True)
    try:
        rows = process_redactor().data(store.trend(repros, nights))  # rows an older aoti-bisect stored unmasked
    finally:
        store.close()
    if repros and not rows:
        raise UsageFailure(f"no nights recorded for {', '.join(repros)} in {path}")
    if plot:
        from .plot import plot_trend

        plot_trend(rows, plot)
        say(f"aoti-bisect: plot: {plot}")
    return rows


def judge_night(record_files: list[str], out: str, judging: Judging, say: Say, interrupted: bool = False) -> Finished:
    """Folds record files into the history and writes summary.json, summary.md and junit.xml under out; an
    interrupted night is summarised but not bisected."""
    from .judge import attach_reports, changed, summarize
    from .render import write_summaries

    night = read_records(record_files)
    if not night.complete and not (judging.allow_partial or interrupted):
        return _not_judged(night.problems, night.redo, night.finished_files, night.batch, say)
    store = History(judging.db or default_path())
    try:
        added = store.add(night)
        say(f"aoti-bisect: {added} run(s) added to {store.path}")
        data = summarize(night, store, judging.alpha, judging.window)
    finally:
        store.close()
    data = process_redactor().data(data)  # what --json prints too
    write_summaries(out, data)
    if judging.bisect_on_change and not interrupted and changed(data):
        attach_reports(data, _bisect(night, changed(data), out, judging.jobs, say))
        data = process_redactor().data(data)
        write_summaries(out, data)
    for r in data["repros"]:
        say(f"  {r['name']}: {r['status']}, {r['change']['text']}")
    say(f"aoti-bisect: summary: {os.path.join(out, 'summary.md')}")
    return Finished(EXIT_INTERRUPTED if interrupted else data["exit_code"], data)


def _not_judged(problems: list[str], redo: list[str], finished: list[str], batch: str, say: Say) -> Finished:
    """An incomplete night, not judged: which shards to run again, and how to fold them in."""
    for line in problems:
        say(f"aoti-bisect: incomplete night: {line}")
    say(f"aoti-bisect: not judged, nothing added to the history; re-run shard(s) {', '.join(redo)} with "
        f"`aoti-bisect nightly SET --runs N --shard i/N --batch {batch} --out NEW` and merge "
        f"{' '.join(finished + ['NEW'])}, or merge with --allow-partial to judge the runs that finished")
    return Finished(EXIT_INCOMPLETE, {"complete": False, "judged": False, "batch": batch, "redo": redo,
                                      "problems": problems})


def _bisect(night: Night, names: list[str], out: str, jobs: Optional[int], say: Say) -> dict[str, str]:
    """The full ladder on each changed repro; returns report.md paths, relative to out."""
    from ..config import RunConfig
    from ..progress import Progress
    from ..session import Session

    reports = {}
    for name in names:
        argv = night.repros[name]["argv"]
        run_dir = os.path.join(out, "bisect", Repro(name, tuple(argv)).slug)
        say(f"aoti-bisect: {name} changed; running the ladder in {run_dir}")
        config = RunConfig(run_dir, argv, jobs=jobs or 1, cache_root=os.path.join(out, "cache"),
                           python_script=argv[0] == sys.executable)
        session = Session(config, Progress(indent="    ", write=say))
        say(f"    aoti-bisect: {session.execute().headline()}")
        reports[name] = os.path.relpath(os.path.join(run_dir, "report.md"), out)
    return reports
