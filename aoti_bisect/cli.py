"""Command line. Chatter (progress, warnings) goes to stderr; stdout carries the answer: a run's verdict and next
commands (or report.json with --json), a report, a bundle's path, minify's result."""
from __future__ import annotations

import signal
import sys
import threading
from types import FrameType
from typing import TYPE_CHECKING, NoReturn, Optional


def _interrupted_early(signum: int, frame: Optional[FrameType]) -> NoReturn:
    """Ctrl-C while this module and its imports load, before entry() has its handlers: one line and 130, not
    Python's KeyboardInterrupt traceback from inside some import."""
    print("aoti-bisect: interrupted", file=sys.stderr)
    raise SystemExit(130)


# First thing: the imports below take most of the start-up. Another program's handler (a host importing us)
# stays, and so does everything when a thread other than the main one imports us (only it may set handlers).
if signal.getsignal(signal.SIGINT) is signal.default_int_handler and threading.current_thread() is \
        threading.main_thread():
    signal.signal(signal.SIGINT, _interrupted_early)

import errno
import json
import math
import os
import shlex
from collections.abc import Callable

import click

from . import stopping
from .aoti.flags import REUSE_MODES
from .child.contract import DB_ENV
from .diagnose.stages import REQUESTABLE as STAGE_NAMES
from .exits import EXIT_BROKEN_PIPE, EXIT_INCONCLUSIVE, EXIT_INTERRUPTED, EXIT_USAGE, UsageFailure
from .files.out import claim_out, default_out, prepare_out, release_empty_claim
from .files.write import report_crash
from .report.redact import console
from .repro import check_python_runs, repro_argv, unknown_word, validate_python
from .stats import DEFAULT_MAX_RUNS
from .validate import MAX_JOBS, MAX_RUNS, check_count, check_seconds, check_timeout
from .verdict import Verdict

if TYPE_CHECKING:  # for annotations only: a real run or night imports them when it starts
    from .nightly.command import Finished
    from .report.model import Report

EXIT_CODES_HELP = """\b
Exit codes (a `git bisect run` predicate: 0 good, 1 bad, 125 skip, above 127 stop):
  0    did not reproduce
  1    reproduced
  2    bad command line, the same at every commit (unknown option or command word, bad --runs,
       --timeout below 1 s): check it once by hand
  125  cannot decide at this commit: the repro or its environment cannot run (--python missing or
       broken, torch not importable, no GPU, script missing or broken, command not found, full
       or read-only disk) or runs were inconclusive; report.json's exit_reason says which
  130  interrupted (a partial report is still written)
  255  internal error of aoti-bisect only (one line; the traceback is saved in the run directory)
"""

SANITIZER_TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")


class _DefaultGroup(click.Group):
    """`aoti-bisect SCRIPT ...` means `aoti-bisect run SCRIPT ...`."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h", "--version"):
            if unknown_word(args[0], list(self.commands)):
                raise UsageFailure(unknown_word(args[0], list(self.commands)))
            args = ["run", *args]
        return super().parse_args(ctx, args)


@click.group(cls=_DefaultGroup, context_settings={"help_option_names": ["-h", "--help"]},
             epilog=EXIT_CODES_HELP)
@click.version_option(package_name="aoti-bisect")
def main() -> None:
    """Find out, on its own, what is wrong with a failing AOTInductor repro and where.

    \b
    aoti-bisect [OPTIONS] SCRIPT [-- SCRIPT_ARGS...]   (same as `aoti-bisect run ...`)
    aoti-bisect scenarios list|check [NAME...]
    aoti-bisect report RUN_DIR [--format md|json|text]
    aoti-bisect minify RUN_DIR [--jobs N] [--budget S] [--max-candidates N] [--max-runs N]
    aoti-bisect nightly SET [--runs N | --until-confident] [--shard i/N]
    aoti-bisect merge RECORDS... ; aoti-bisect history [REPRO...]
    """


def _claim(out: Optional[str], prefix: str) -> str:
    """The command's own run directory; from here on an internal error's traceback is saved in it."""
    global _run_dir
    _run_dir = claim_out(out or default_out(prefix))
    return _run_dir


# Where an internal error's traceback goes (entry); set once this command has a run directory.
_run_dir: Optional[str] = None



@main.command("run", epilog=EXIT_CODES_HELP)
@click.argument("script", required=False)
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
@click.option("--cmd", help="Run this command (argv-split, no shell) instead of SCRIPT. Its arguments that name "
                           "existing files or folders, relative to the current directory, are made absolute.")
@click.option("--python", "python", metavar="PATH",
              help="The repro's interpreter: it runs SCRIPT and the environment probe (default: the one running "
                   "aoti-bisect).")
@click.option("--runs", type=int, help="Exactly N baseline runs (default: adaptive, 2 to --max-runs).")
@click.option("--max-runs", type=int, default=DEFAULT_MAX_RUNS, show_default=True, help="Cap on runs of any one stage.")
@click.option("--timeout", type=float, default=600.0, show_default=True, help="Seconds per run.")
@click.option("--out", type=str, help="Run directory (default: ./aoti-bisect-runs/<timestamp>).")
@click.option("--cache-dir", metavar="DIR", help="Keep the compile caches here instead of in the run directory "
                                                 "(one folder per set of compile-time flags; reusable by later "
                                                 "invocations on the same repro, never by two at once).")
@click.option("--json", "as_json", is_flag=True, help="Print report.json on stdout and nothing else.")
@click.option("--jobs", type=int, default=None,
              help="Runs in parallel [default: as many as the machine has room for: a core each, each start beside "
                   "others admitted by the memory the runs so far took (docs/slots.md)].")
@click.option("--reuse", type=click.Choice(REUSE_MODES), default="hooked", show_default=True,
              help="Which runs take a flag set's package from its first compile instead of compiling: the hooked "
                   "stages' (the baseline and determinism compile every run, as the script does), all, or none.")
@click.option("--ahead/--no-ahead", default=True, show_default=True,
              help="With two slots or more, compile the sanity and trace stages' flag sets in the slots the "
                   "baseline's first run leaves idle; --no-ahead where other work already takes every core.")
@click.option("--warm/--cold", default=True, show_default=True,
              help="Fork the runs that take a stored package from a warm interpreter of the repro's Python, torch "
                   "already imported (docs/warm.md); --cold starts every run as a fresh interpreter.")
@click.option("--stages", default=",".join(STAGE_NAMES), show_default=True,
              help="Comma-separated stages to run (baseline always runs).")
@click.option("--budget", type=float, default=300.0, show_default=True, metavar="SECONDS",
              help="After the verdict the baseline's rate runs on, until its 95% interval is within 15 points, "
                   "for at most this long (0: end at the verdict, reporting the rate as it stands).")
@click.option("--redact-paths", is_flag=True, help="Replace home directories and the user name in the report.")
@click.option("--sanitize", is_flag=True, help="Run the memory checker (memcheck stage) whatever the failure, "
                                               "also when the repro passes but its output is known to be wrong.")
@click.option("--sanitizer", metavar="PATH", help="compute-sanitizer to use (default: PATH, then CUDA_HOME/bin).")
@click.option("--sanitizer-tools", default="memcheck", show_default=True,
              help="compute-sanitizer tools to run, comma-separated: memcheck, racecheck, initcheck, synccheck.")
@click.option("--minify", "then_minify", is_flag=True,
              help="After a reproduced verdict, cut the failing program down to a standalone repro in "
                   "RUN_DIR/minify/ (as `aoti-bisect minify RUN_DIR` with its defaults); the exit code stays the "
                   "verdict's.")
@click.option("-q", "--quiet", count=True, help="Less on stderr.")
@click.option("-v", "--verbose", count=True, help="More on stderr.")
def run_cmd(script: Optional[str], script_args: tuple[str, ...], cmd: Optional[str], python: Optional[str],
            runs: Optional[int], max_runs: int, timeout: float, out: Optional[str], cache_dir: Optional[str],
            as_json: bool, jobs: Optional[int], reuse: str, ahead: bool, warm: bool, stages: str, budget: float,
            redact_paths: bool, sanitize: bool, sanitizer: Optional[str], sanitizer_tools: str, then_minify: bool,
            quiet: int, verbose: int) -> None:
    """Rerun a failing repro under the debugging ladder and localise the fault."""
    wanted = tuple(s.strip() for s in stages.split(",") if s.strip())
    unknown = [s for s in wanted if s not in STAGE_NAMES]
    if unknown:
        raise UsageFailure(f"unknown stage(s): {', '.join(unknown)} (known: {', '.join(STAGE_NAMES)})")
    check_count("--runs", runs, MAX_RUNS)
    check_count("--max-runs", max_runs, MAX_RUNS)
    check_count("--jobs", jobs, MAX_JOBS)
    check_timeout("--timeout", timeout)
    if not (math.isfinite(budget) and budget >= 0):  # NaN passes every comparison's "else"
        raise UsageFailure(f"--budget must be a finite number of seconds, 0 or more, got {budget:g}")
    tools = tuple(s.strip() for s in sanitizer_tools.split(",") if s.strip())
    bad_tools = [s for s in tools if s not in SANITIZER_TOOLS]
    if bad_tools or not tools:
        raise UsageFailure(f"unknown --sanitizer-tools: {', '.join(bad_tools) or '(none)'} "
                           f"(known: {', '.join(SANITIZER_TOOLS)})")
    _check_sanitizer(sanitizer)
    if python:
        python = validate_python(python)
    # After every check of the command line: its faults (2) are the same at every commit, the script's (125) not.
    argv = repro_argv(script, script_args, cmd, python)
    run_dir = _claim(out, "")
    if cache_dir:
        cache_dir = prepare_out(cache_dir, "--cache-dir")
    if python:
        check_python_runs(python, run_dir)
    # psutil, the harness and the ladder load only for a real run
    from .config import RunConfig
    from .progress import Progress
    from .run.probe import interpreter_of
    from .session import Session

    config = RunConfig(run_dir, tuple(argv), jobs=jobs, runs=runs, max_runs=max_runs, timeout=timeout,
                       stages=("baseline", *wanted), python_script=cmd is None, redact_paths=redact_paths,
                       python=interpreter_of(argv, python), sanitize=sanitize, sanitizer=sanitizer,
                       sanitizer_tools=tools, cache_root=cache_dir, reuse=reuse, ahead=ahead,
                       budget=budget, warm=warm)
    session = Session(config, Progress(verbose - quiet))
    report = session.execute()
    if then_minify and report.record.verdict is Verdict.REPRODUCED:
        _minify_after_verdict(run_dir, jobs, quiet, argv, config.python or sys.executable)
    if as_json:
        print(json.dumps(report.data, indent=2))
    else:
        _answer(report)
    sys.exit(report.exit_code)


def _answer(report: Report) -> None:
    """The run's last lines, on stdout: the answer and the next commands (report/plain.py); the chatter before them
    went to stderr. Read after a --minify, so they name what minify made."""
    from .report.model import minified_record
    from .report.plain import answer
    from .report.redact import process_redactor

    minified = minified_record(report.run_dir, process_redactor(report.record.paths_redacted))
    print("\n".join(answer(report.record, report.headline(), minified, sys.stdout.isatty())), flush=True)


def _minify_after_verdict(run_dir: str, jobs: Optional[int], quiet: int, argv: list[str], python: str) -> None:
    """The --minify stage: its outcome is said on stderr and in report.md (minify rewrites it), never in the exit
    code, which answers `git bisect run` about the repro, not about the reducer."""
    from .minify import MinifyOptions, minify

    try:
        result = minify(run_dir, MinifyOptions(jobs=jobs, repro=tuple(argv), python=python), _say(quiet))
    except UsageFailure as exc:  # the repro planted a link or a file where minify writes: said, not a crash
        print(f"aoti-bisect: minify: {exc}", file=sys.stderr)
        return
    except Exception as exc:  # a reducer's bug must not cost the verdict already reported
        report_crash(exc, run_dir)
        return
    print(f"aoti-bisect: minify: {console(result.message)}", file=sys.stderr)


def _check_sanitizer(path: Optional[str]) -> None:
    if path and not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise UsageFailure(f"--sanitizer {path}: not an executable file")


REPORT_EXIT_HELP = """\b
Exit codes:
  0, 1, 125, 130  the run's own exit code (as `aoti-bisect run` exited), for --format md|json|text
  0    with --bundle: the bundle was written (its path is on stdout)
  2    bad command line, or RUN_DIR holds no report.json aoti-bisect wrote, or --bundle would overwrite
       a file of the run or cannot be written there
  125  a full or read-only disk where the bundle goes
"""


@main.command("report", epilog=REPORT_EXIT_HELP)
@click.argument("run_dir")
@click.option("--format", "fmt", type=click.Choice(["md", "json", "text"]), default="md", show_default=True)
@click.option("--bundle", "bundle", is_flag=False, flag_value="", default=None, metavar="[PATH]",
              help="Instead, pack report, logs, commands, the culprit's generated sources and the minified repro "
                   "into a redacted .tar.gz (default RUN_DIR/bundle.tar.gz) and print its path.")
@click.option("--redact-paths", is_flag=True, help="Replace home directories and the user name.")
def report_cmd(run_dir: str, fmt: str, bundle: Optional[str], redact_paths: bool) -> None:
    """Re-render a finished run's report without rerunning anything."""
    from .report.markdown import render_markdown
    from .report.model import Report, minified_record
    from .report.plain import render_text
    from .report.redact import Redactor

    ctx = click.get_current_context()
    if bundle is not None and ctx.get_parameter_source("fmt").name != "DEFAULT":
        raise UsageFailure("--bundle writes a tarball and prints its path: give --format without it")
    rep = Report.load(run_dir)
    redactor = Redactor.from_env(dict(os.environ), redact_paths)
    if bundle is not None:
        from .report.bundle import write_bundle

        dest = bundle or os.path.join(run_dir, "bundle.tar.gz")
        left_out = write_bundle(run_dir, dest, rep.record, redactor)
        if left_out:
            print(f"aoti-bisect: warning: {len(left_out)} file(s) left out of the bundle, their secrets unknown "
                  "(see LEFT_OUT.txt in the bundle)", file=sys.stderr)
        print(dest)
        sys.exit(0)
    shown = redactor.data(rep.record)
    if fmt == "json":
        print(json.dumps(shown.to_json(), indent=2))
    elif fmt == "md":
        print(render_markdown(shown, minified_record(run_dir, redactor)))
    else:
        print(render_text(shown, minified_record(run_dir, redactor)), end="")
    sys.exit(rep.exit_code)


MINIFY_EXIT_HELP = """\b
Exit codes:
  0    minified, and RUN_DIR/minify/repro.py failed the same way when run alone from a copy
  1    could not reproduce the failure in isolation, or the reduced repro did not fail alone (says why)
  2    bad command line, or RUN_DIR holds no report.json, or one aoti-bisect did not write
       (malformed, nested too deep, not UTF-8, of a newer schema), or a link or a file stands
       where minify reads or writes (report.json, minify/, a capture): one line says which
  125  cannot run here: no exported program or inputs of the failing call can be had (the run
       folder holds no capture and no --script/--cmd names the repro, a prebuilt package carries
       none, a capture over the size cap, custom-op code in the folder and no repro named, a custom
       op defined in Python whose source cannot be written into a file of its own: the line says
       which), or --python is missing or does not run
"""


@main.command("minify", epilog=MINIFY_EXIT_HELP)
@click.argument("run_dir")
@click.option("--jobs", type=int, default=None,
              help="Candidates compiled and run in parallel [default: the machine's cores, at most 4 per GPU where "
                   "the program runs on CUDA].")
@click.option("--budget", type=float, default=1800.0, show_default=True,
              help="Seconds for the whole minify, from its start: no candidate starts that would leave the final "
                   "check too little.")
@click.option("--max-candidates", type=int, default=60, show_default=True, help="Candidate runs at most.")
@click.option("--max-runs", type=int, default=12, show_default=True,
              help="Runs that judge one candidate at most: a flaky failure gets as many as its rate needs to show "
                   "once with 95% probability, up to this.")
@click.option("--timeout", type=float, default=300.0, show_default=True, help="Seconds per candidate run.")
@click.option("--script", metavar="PATH",
              help="The repro, run with --python (default: the Python running aoti-bisect) to capture the failing "
                   "call where RUN_DIR holds no capture; naming it also lets minify run the custom-op code a capture "
                   "carries. Nothing read from RUN_DIR ever chooses what runs.")
@click.option("--cmd", help="As --script, a whole command (argv-split, no shell), as for `aoti-bisect run --cmd`.")
@click.option("--python", "python", metavar="PATH",
              help="The interpreter of the eager walk and every candidate, whose torch they use (default: the one "
                   "--cmd names, else the one running aoti-bisect).")
@click.option("-q", "--quiet", count=True, help="Nothing on stderr (the result is on stdout).")
def minify_cmd(run_dir: str, jobs: Optional[int], budget: float, max_candidates: int, max_runs: int, timeout: float,
               script: Optional[str], cmd: Optional[str], python: Optional[str], quiet: int) -> None:
    """Cut a finished run's failing program down to a standalone repro in RUN_DIR/minify/.

    Every candidate is compiled with AOTI and run in its own process; it is kept when it fails with the
    run's kind and phase and still holds an op of the culprit kernel. The result, repro.py with
    inputs.pt beside it, is one folder to attach to a ticket.
    """
    if jobs is not None:
        check_count("--jobs", jobs, MAX_JOBS)
    check_count("--max-candidates", max_candidates, MAX_RUNS)
    check_count("--max-runs", max_runs, MAX_RUNS)
    check_seconds("--budget", budget)
    check_timeout("--timeout", timeout)
    if not os.path.isfile(os.path.join(run_dir, "report.json")):
        raise UsageFailure(f"{run_dir}: no report.json (not a finished aoti-bisect run directory)")
    if python:
        python = validate_python(python)
    argv = repro_argv(script, (), cmd, python) if script or cmd else []
    global _run_dir
    _run_dir = run_dir
    from .minify import MinifyOptions, Status, minify
    from .run.probe import interpreter_of

    python = python or (argv and interpreter_of(argv)) or sys.executable
    result = minify(run_dir, MinifyOptions(jobs, budget, max_candidates, timeout, max_runs, tuple(argv), python),
                    _say(quiet))
    if result.status is Status.NO_PROGRAM:  # cannot run here (125): one line on stderr, as every such refusal
        print(f"aoti-bisect: minify: {console(result.message)}", file=sys.stderr)
        sys.exit(result.exit_code)
    # The result is the command's data, on stdout: the answer, the folder to attach and the next command.
    print(f"minify: {console(result.message)}")
    if result.repro:
        print(f"folder: {os.path.dirname(result.repro)}/ (repro.py + inputs.pt)")
        print(f"next: aoti-bisect report {shlex.quote(run_dir)} --bundle", flush=True)
    sys.exit(result.exit_code)


@main.group("scenarios")
def scenarios_group() -> None:
    """The bundled library of real failing AOTI repros with known answers."""


@scenarios_group.command("list")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), help="Only the scenarios of this device.")
@click.option("--wide", is_flag=True, help="Also the expected culprit and what each demonstrates (long rows).")
@click.option("--json", "as_json", is_flag=True, help="Every field of every scenario as JSON.")
def scenarios_list(device: Optional[str], wide: bool, as_json: bool) -> None:
    """List bundled scenarios: kind, rate, the stage that pins it, and the seconds its check takes."""
    from .scenarios import list_json, list_table, load_bundled

    chosen = [s for s in load_bundled() if device in (None, s.device)]
    print(json.dumps(list_json(chosen), indent=2) if as_json else list_table(chosen, wide))


@scenarios_group.command("check")
@click.argument("names", nargs=-1)
@click.option("--jobs", type=int, default=1, show_default=True)
@click.option("--out", type=str, help="Folder for the scenario runs (default: ./aoti-bisect-runs/scenarios-<ts>).")
@click.option("--stages", default=",".join(STAGE_NAMES), show_default=True)
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True,
              help="Which scenarios to run: auto = CPU ones, plus CUDA ones where a GPU is visible.")
@click.option("--reuse", type=click.Choice(REUSE_MODES), default="hooked", show_default=True,
              help="As for `aoti-bisect run`.")
@click.option("--ahead/--no-ahead", default=True, show_default=True, help="As for `aoti-bisect run`.")
def scenarios_check(names: tuple[str, ...], jobs: int, out: Optional[str], stages: str, device: str, reuse: str,
                    ahead: bool) -> None:
    """Run aoti-bisect on scenarios and compare with the manifest; non-zero exit on any mismatch."""
    from .scenarios import check, load_bundled

    scenarios = load_bundled()
    unknown = [n for n in names if n not in {s.name for s in scenarios}]
    if unknown:
        raise UsageFailure(f"unknown scenario(s): {', '.join(unknown)}; see `aoti-bisect scenarios list`")
    check_count("--jobs", jobs, MAX_JOBS)
    run_dir = _claim(out, "scenarios-")
    chosen = [s for s in scenarios if not names or s.name in names]
    ok = check(chosen, run_dir, jobs=jobs, stages=tuple(s for s in stages.split(",") if s), device=device,
               reuse=reuse, ahead=ahead)
    sys.exit(0 if ok else 1)


NIGHTLY_EXIT_HELP = """\b
Exit codes:
  0    nothing changed for the worse
  1    a repro changed for the worse (rate up, p < --alpha, or a new failure signature)
  2    usage error, the same every night: an unknown or contradictory option (--precision without
       --until-confident, --shards without --executor submitit, judging options on a --shard), a
       timeout below 1 s, a SET entry that is no script (a FIFO, a folder named *.py, a link loop),
       a records file that is not one
  3    a repro had only infrastructure errors (and nothing changed for the worse)
  4    incomplete night: a shard is missing, failed or did not finish; not judged, nothing added
       to the history (re-run those shards and merge, or merge --allow-partial)
  130  interrupted (the runs that finished are still recorded and summarised)
"""


def _say(quiet: int) -> Callable[[str], None]:
    return (lambda text: None) if quiet else (lambda text: print(console(text), file=sys.stderr, flush=True))


def _judging_options(f: Callable[..., None]) -> Callable[..., None]:
    for option in reversed([
        click.option("--db", envvar=DB_ENV, help="History database (default: "
                     f"$XDG_DATA_HOME/aoti-bisect/history.sqlite3; env {DB_ENV})."),
        click.option("--alpha", type=float, default=0.01, show_default=True,
                     help="Significance level of the change test (Fisher's exact, two-sided)."),
        click.option("--window", type=int, default=7, show_default=True,
                     help="Earlier nights pooled as the baseline."),
        click.option("--bisect-on-change", is_flag=True,
                     help="Run the full ladder on repros with a new signature or a changed rate."),
        click.option("--allow-partial", is_flag=True,
                     help="Judge a night with shards missing or unfinished (else: not judged, exit 4)."),
        click.option("--json", "as_json", is_flag=True, help="Print summary.json on stdout."),
        click.option("-q", "--quiet", count=True, help="Nothing on stderr."),
    ]):
        f = option(f)
    return f


def _finish(finished: Finished, as_json: bool) -> NoReturn:
    if as_json and finished.summary is not None:
        print(json.dumps(finished.summary, indent=2))
    sys.exit(finished.exit_code)


@main.command("nightly", epilog=NIGHTLY_EXIT_HELP)
@click.argument("set_path", metavar="SET")
@click.option("--only", multiple=True, help="Run only this repro (repeatable).")
@click.option("--runs", type=int, default=20, show_default=True,
              help="Runs per repro (the cap, with --until-confident).")
@click.option("--until-confident", is_flag=True,
              help="Stop a repro once its 95% interval is at most 2 x --precision wide (sequential rule).")
@click.option("--precision", type=float, default=0.1, show_default=True)
@click.option("--min-runs", type=int, default=10, show_default=True, help="Floor for --until-confident.")
@click.option("--jobs", type=int, help="Parallel runs (default: one per visible GPU, else one per CPU core).")
@click.option("--timeout", type=float, help="Seconds per run (default: the manifest's, else 600).")
@click.option("--out", type=str, help="Night folder (default: ./aoti-bisect-runs/nightly-<timestamp>).")
@click.option("--shard", "shard_text", metavar="i/N|N",
              help="Run only shard i of N and write its records, no judging (merge them with `merge`). "
                   "With N alone, i comes from SLURM_ARRAY_TASK_ID or JOB_COMPLETION_INDEX; a Slurm array is "
                   "detected without the option.")
@click.option("--batch", help="Name of the night; shards of one night must share it (default: the Slurm "
                              "array job id, else host, time and process id).")
@click.option("--executor", type=click.Choice(["local", "submitit"]), default="local", show_default=True,
              help="submitit: run --shards array tasks through submitit (Slurm, or its local executor), "
                   "then merge.")
@click.option("--shards", type=int, default=2, show_default=True, help="Array size for --executor submitit.")
@click.option("--cluster", type=click.Choice(["auto", "slurm", "local"]), default="auto", show_default=True,
              help="submitit cluster (auto: Slurm where sbatch exists, else local).")
@click.option("--gpus-per-shard", type=int, help="GPUs each array task asks for (default: Slurm 1, or none where "
                                                  "the partition has no GPUs; local: this host's visible GPUs).")
@click.option("--partition", help="Slurm partition for --executor submitit.")
@click.option("--shard-timeout-min", type=int, default=720, show_default=True)
@click.option("--sanitize", is_flag=True, help="Also run each repro once under its device's memory checker "
                                               "(compute-sanitizer on CUDA, valgrind on CPU) and report its findings.")
@click.option("--sanitizer", metavar="PATH", help="compute-sanitizer to use with --sanitize (default: PATH, then "
                                                  "CUDA_HOME/bin).")
@_judging_options
@click.option("-v", "--verbose", count=True, help="One line per run on stderr.")
def nightly_cmd(set_path: str, only: tuple[str, ...], runs: int, until_confident: bool, precision: float,
                min_runs: int, jobs: Optional[int], timeout: Optional[float], out: Optional[str],
                shard_text: Optional[str], batch: Optional[str], executor: str, shards: int, cluster: str,
                gpus_per_shard: Optional[int], partition: Optional[str], shard_timeout_min: int, sanitize: bool,
                sanitizer: Optional[str], db: Optional[str], alpha: float, window: int, bisect_on_change: bool,
                allow_partial: bool, as_json: bool, quiet: int, verbose: int) -> None:
    """Run every repro of SET many times; record rates and signatures, compare with history, report changes.

    SET is a manifest (the scenarios/manifest.toml format), a folder holding manifest.toml, or a folder of
    *.py repros (each one a repro, run with this Python).
    """
    from .nightly.command import Judging, NightlyRequest, Submitit, check_option_combinations, nightly
    from .nightly.plan import Plan

    ctx = click.get_current_context()
    check_option_combinations({p for p in ctx.params if ctx.get_parameter_source(p).name != "DEFAULT"}, ctx.params)

    for name, value, high in (("--runs", runs, MAX_RUNS), ("--jobs", jobs, MAX_JOBS),
                              ("--min-runs", min_runs, MAX_RUNS), ("--shards", shards, MAX_JOBS)):
        check_count(name, value, high)
    check_count("--gpus-per-shard", gpus_per_shard, MAX_JOBS, low=0)
    check_timeout("--timeout", timeout)
    if not 0 < precision < 0.5:
        raise UsageFailure(f"--precision must be between 0 and 0.5, got {precision}")
    if sanitizer and not sanitize:
        raise UsageFailure("--sanitizer is used only with --sanitize")
    _check_sanitizer(sanitizer)
    submitit = None
    if executor == "submitit":
        submitit = Submitit(shards, None if cluster == "auto" else cluster, gpus_per_shard, partition,
                            shard_timeout_min)
    plan = Plan(runs, until_confident, precision, min(min_runs, runs), timeout, sanitize=sanitize,
                sanitizer=sanitizer and os.path.abspath(sanitizer))
    request = NightlyRequest(set_path, tuple(only), plan, shard_text, out, batch, jobs,
                             Judging(db, alpha, window, bisect_on_change, jobs, allow_partial), submitit,
                             bool(verbose))
    _finish(nightly(request, _say(quiet)), as_json)


@main.command("merge", epilog=NIGHTLY_EXIT_HELP)
@click.argument("records", nargs=-1, required=True)
@click.option("--out", type=str, help="Folder for the summaries (default: ./aoti-bisect-runs/merge-<timestamp>).")
@click.option("--jobs", type=int, help="Parallel runs for --bisect-on-change.")
@_judging_options
def merge_cmd(records: tuple[str, ...], out: Optional[str], jobs: Optional[int], db: Optional[str], alpha: float,
              window: int, bisect_on_change: bool, allow_partial: bool, as_json: bool, quiet: int) -> None:
    """Fold shard record files (or folders holding them) into the history and summarise the night."""
    from .nightly.command import Judging, merge

    _finish(merge(records, out, Judging(db, alpha, window, bisect_on_change, jobs, allow_partial), _say(quiet)),
            as_json)


@main.command("history")
@click.argument("repros", nargs=-1)
@click.option("--db", envvar=DB_ENV, help="History database (default as for nightly).")
@click.option("--nights", type=int, default=14, show_default=True, help="Latest nights per repro.")
@click.option("--json", "as_json", is_flag=True, help="Rows as JSON.")
@click.option("--plot", type=str, metavar="PNG", help="Also draw the rates over time (needs aoti-bisect[plot]).")
def history_cmd(repros: tuple[str, ...], db: Optional[str], nights: int, as_json: bool, plot: Optional[str]) -> None:
    """The trend of each repro's rate over the recorded nights."""
    from .nightly.command import history
    from .nightly.render import render_history

    if nights < 1:
        raise UsageFailure(f"--nights must be at least 1, got {nights}")

    rows = history(tuple(repros), db, nights, plot, _say(0))
    print(json.dumps(rows, indent=2) if as_json else render_history(rows))


_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO)


def entry() -> None:
    try:
        stopping.install()
        main.main(standalone_mode=False, prog_name="aoti-bisect")
    except UsageFailure as exc:
        print(f"aoti-bisect: error: {exc}", file=sys.stderr)
        sys.exit(exc.code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        print(f"aoti-bisect: error: {exc.format_message()}", file=sys.stderr)
        sys.exit(EXIT_USAGE)
    except (click.exceptions.Abort, KeyboardInterrupt):
        print("aoti-bisect: interrupted", file=sys.stderr)
        release_empty_claim(_run_dir)  # stopped before writing anything: the --out folder can be used again
        sys.exit(EXIT_INTERRUPTED)
    except BrokenPipeError:
        sys.exit(EXIT_BROKEN_PIPE)
    except OSError as exc:
        if exc.errno not in _FULL:
            sys.exit(report_crash(exc, _run_dir))
        # A full or read-only disk is the machine's state, not a bug: no "please report it", still no decision.
        print(f"aoti-bisect: error: {exc.strerror}" + (f": {exc.filename}" if exc.filename else "")
              + " (the output could not be written)", file=sys.stderr)
        sys.exit(EXIT_INCONCLUSIVE)  # the machine's state at this commit: skip it (125), never 255
    except Exception as exc:
        # Python's own exit status for an uncaught exception is 1, which `git bisect run` reads as "bad".
        sys.exit(report_crash(exc, _run_dir))
