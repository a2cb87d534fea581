"""Command line. Human chatter goes to stderr; stdout carries only machine output (--json)."""
from __future__ import annotations

import datetime as _dt
import json
import os
import shlex
import shutil
import signal
import sys
from typing import Optional

import click

from .diagnose.stages import STAGES as STAGE_NAMES
from .exits import EXIT_INFRA, EXIT_INTERRUPTED, EXIT_USAGE, UsageFailure

EXIT_CODES_HELP = """\b
Exit codes (usable as a `git bisect run` predicate):
  0    did not reproduce
  1    reproduced
  2    usage error (bad arguments, missing or broken script)
  3    infrastructure error (torch not importable, no GPU for a CUDA repro)
  125  inconclusive
  130  interrupted (a partial report is still written)
"""

class _DefaultGroup(click.Group):
    """`aoti-bisect SCRIPT ...` means `aoti-bisect run SCRIPT ...`."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h", "--version"):
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
    aoti-bisect nightly SET [--runs N | --until-confident] [--shard i/N]
    aoti-bisect merge RECORDS... ; aoti-bisect history [REPRO...]
    """


def _validate_script(script: str) -> None:
    if not os.path.exists(script):
        raise UsageFailure(f"no such file: {script}")
    if os.path.isdir(script):
        raise UsageFailure(f"{script} is a directory, not a Python script")
    try:
        with open(script, "rb") as f:
            source = f.read()
    except OSError as exc:
        raise UsageFailure(f"cannot read {script}: {exc.strerror}")
    try:
        compile(source, script, "exec")
    except SyntaxError as exc:
        if not script.endswith(".py") and (b"\0" in source or exc.lineno in (None, 1)):
            raise UsageFailure(f"{script} is not a Python script")
        raise UsageFailure(f"{script}:{exc.lineno}: syntax error: {exc.msg}")
    except ValueError:
        raise UsageFailure(f"{script} is not a Python script (it contains NUL bytes)")


def _prepare_out(out: Optional[str]) -> str:
    path = out or os.path.join("aoti-bisect-runs", _dt.datetime.now().strftime("%Y%m%d-%H%M%S-%f"))
    path = os.path.abspath(path)
    try:
        os.makedirs(path, exist_ok=True)
        probe = os.path.join(path, ".writable")
        with open(probe, "w"):
            pass
        os.remove(probe)
    except OSError as exc:
        raise UsageFailure(f"cannot write to --out {path}: {exc.strerror}")
    return path


    def run(self, r) -> None:
        self.done += 1
        if self.verbosity < 0:
            return
        sig = r.signature
        text = f"[{r.spec.name}] {r.outcome.value} in {r.exit.duration:.1f}s"
        if sig:
            text += f": {sig.kind}/{sig.phase}" + (f": {sig.message}" if self.verbosity > 0 else "")
        if self.live:
            sys.stderr.write("\r\033[K" + text[: shutil.get_terminal_size().columns - 1])
            sys.stderr.flush()
        else:
            print(text, file=sys.stderr, flush=True)



@main.command("run", epilog=EXIT_CODES_HELP)
@click.argument("script", required=False)
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
@click.option("--cmd", help="Run this command (argv-split, no shell) instead of SCRIPT.")
@click.option("--runs", type=int, help="Exactly N baseline runs (default: adaptive, 2 to --max-runs).")
@click.option("--max-runs", type=int, default=10, show_default=True, help="Cap on runs of any one stage.")
@click.option("--timeout", type=float, default=600.0, show_default=True, help="Seconds per run.")
@click.option("--out", type=str, help="Run directory (default: ./aoti-bisect-runs/<timestamp>).")
@click.option("--json", "as_json", is_flag=True, help="Print report.json on stdout and nothing else.")
@click.option("--jobs", type=int, default=1, show_default=True, help="Runs in parallel.")
@click.option("--stages", default=",".join(STAGE_NAMES), show_default=True,
              help="Comma-separated stages to run (baseline always runs).")
@click.option("--redact-paths", is_flag=True, help="Replace home directories and the user name in the report.")
@click.option("-q", "--quiet", count=True, help="Less on stderr.")
@click.option("-v", "--verbose", count=True, help="More on stderr.")
def run_cmd(script, script_args, cmd, runs, max_runs, timeout, out, as_json, jobs, stages, redact_paths, quiet,
            verbose):
    """Rerun a failing repro under the debugging ladder and localise the fault."""
    argv = _argv(script, script_args, cmd)
    wanted = tuple(s.strip() for s in stages.split(",") if s.strip())
    unknown = [s for s in wanted if s not in STAGE_NAMES]
    if unknown:
        raise UsageFailure(f"unknown stage(s): {', '.join(unknown)} (known: {', '.join(STAGE_NAMES)})")
    for name, value, low in (("--runs", runs, 1), ("--max-runs", max_runs, 1), ("--jobs", jobs, 1)):
        if value is not None and value < low:
            raise UsageFailure(f"{name} must be at least {low}, got {value}")
    if timeout <= 0:
        raise UsageFailure(f"--timeout must be positive, got {timeout}")
    run_dir = _prepare_out(out)
    from .diagnose.session import (
        Session,  # psutil, the harness and the ladder load only for a real run
    )
    from .progress import Progress

    session = Session(run_dir, argv, Progress(verbose - quiet), jobs=jobs, runs=runs, max_runs=max_runs,
                      timeout=timeout, stages=("baseline", *wanted), python_script=cmd is None,
                      redact_paths=redact_paths)
    report = session.execute()
    if as_json:
        print(json.dumps(report.data, indent=2))
    sys.exit(report.exit_code)


def _argv(script: Optional[str], script_args: tuple[str, ...], cmd: Optional[str]) -> list[str]:
    if cmd and script:
        raise UsageFailure("give either SCRIPT or --cmd, not both")
    if cmd:
        try:
            argv = shlex.split(cmd)
        except ValueError as exc:
            raise UsageFailure(f"cannot split --cmd: {exc}")
        if not argv:
            raise UsageFailure("--cmd is empty")
        if shutil.which(argv[0]) is None and not os.path.isfile(argv[0]):
            raise UsageFailure(f"command not found: {argv[0]}")
        return argv
    if not script:
        raise UsageFailure("missing SCRIPT (or --cmd); see --help")
    _validate_script(script)
    return [sys.executable, os.path.abspath(script), *script_args]


@main.command("report")
@click.argument("run_dir")
@click.option("--format", "fmt", type=click.Choice(["md", "json", "text"]), default="md", show_default=True)
@click.option("--bundle", "bundle", is_flag=False, flag_value="", default=None, metavar="[PATH]",
              help="Also pack report, logs, commands and the culprit's generated sources into a .tar.gz "
                   "(default RUN_DIR/bundle.tar.gz).")
@click.option("--redact-paths", is_flag=True, help="Replace home directories and the user name.")
def report_cmd(run_dir, fmt, bundle, redact_paths):
    """Re-render a finished run's report without rerunning anything."""
    from .report.markdown import render_markdown
    from .report.model import Report, redact_data
    from .report.redact import Redactor

    if not os.path.isfile(os.path.join(run_dir, "report.json")):
        raise UsageFailure(f"{run_dir} holds no report.json (not an aoti-bisect run directory?)")
    rep = Report.load(run_dir)
    redactor = Redactor.from_env(dict(os.environ), redact_paths)
    data = redact_data(rep.data, redactor)
    if bundle is not None:
        from .report.bundle import write_bundle

        dest = bundle or os.path.join(run_dir, "bundle.tar.gz")
        write_bundle(run_dir, dest, data, redactor)
        print(f"aoti-bisect: bundle: {dest}", file=sys.stderr)
    if fmt == "json":
        print(json.dumps(data, indent=2))
    elif fmt == "md":
        print(render_markdown(data))
    else:
        print(rep.headline())
        for e in (data.get("culprit") or {}).get("evidence") or []:
            print(f"  - {e}")
    sys.exit(rep.exit_code)


@main.group("scenarios")
def scenarios_group():
    """The bundled library of real failing AOTI repros with known answers."""


@scenarios_group.command("list")
def scenarios_list():
    """List bundled scenarios."""
    from .scenarios import list_table, load_manifest

    print(list_table(load_manifest()))


@scenarios_group.command("check")
@click.argument("names", nargs=-1)
@click.option("--jobs", type=int, default=1, show_default=True)
@click.option("--out", type=str, help="Folder for the scenario runs (default: ./aoti-bisect-runs/scenarios-<ts>).")
@click.option("--stages", default=",".join(STAGE_NAMES), show_default=True)
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True,
              help="Which scenarios to run: auto = CPU ones, plus CUDA ones where a GPU is visible.")
def scenarios_check(names, jobs, out, stages, device):
    """Run aoti-bisect on scenarios and compare with the manifest; non-zero exit on any mismatch."""
    from .scenarios import check, load_manifest

    scenarios = load_manifest()
    unknown = [n for n in names if n not in {s.name for s in scenarios}]
    if unknown:
        raise UsageFailure(f"unknown scenario(s): {', '.join(unknown)}; see `aoti-bisect scenarios list`")
    run_dir = _prepare_out(out or os.path.join("aoti-bisect-runs",
                                               "scenarios-" + _dt.datetime.now().strftime("%Y%m%d-%H%M%S")))
    chosen = [s for s in scenarios if not names or s.name in names]
    ok = check(chosen, run_dir, jobs=jobs, stages=tuple(s for s in stages.split(",") if s), device=device)
    sys.exit(0 if ok else 1)


NIGHTLY_EXIT_HELP = """\b
Exit codes:
  0    nothing changed for the worse
  1    a repro changed for the worse (rate up, p < --alpha, or a new failure signature)
  2    usage error
  3    a repro had only infrastructure errors (and nothing changed for the worse)
  130  interrupted (the runs that finished are still recorded and summarised)
"""


def _say(quiet: int):
    return (lambda text: None) if quiet else (lambda text: print(text, file=sys.stderr, flush=True))


def _judging_options(f):
    for option in reversed([
        click.option("--db", envvar="AOTI_BISECT_DB", help="History database (default: "
                     "$XDG_DATA_HOME/aoti-bisect/history.sqlite3; env AOTI_BISECT_DB)."),
        click.option("--alpha", type=float, default=0.01, show_default=True,
                     help="Significance level of the change test (Fisher's exact, two-sided)."),
        click.option("--window", type=int, default=7, show_default=True,
                     help="Earlier nights pooled as the baseline."),
        click.option("--bisect-on-change", is_flag=True,
                     help="Run the full ladder on repros with a new signature or a changed rate."),
        click.option("--json", "as_json", is_flag=True, help="Print summary.json on stdout."),
        click.option("-q", "--quiet", count=True, help="Nothing on stderr."),
    ]):
        f = option(f)
    return f


def _judge(records, out, db, alpha, window, bisect_on_change, jobs, as_json, say, interrupted=False):
    from .nightly.runner import Judging, judge_night

    if not 0 < alpha < 1:
        raise UsageFailure(f"--alpha must be between 0 and 1, got {alpha}")
    if window < 1:
        raise UsageFailure(f"--window must be at least 1, got {window}")
    data = judge_night(records, out, Judging(db, alpha, window, bisect_on_change and not interrupted, jobs), say)
    if as_json:
        print(json.dumps(data, indent=2))
    sys.exit(EXIT_INTERRUPTED if interrupted else data["exit_code"])


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
                              "array job id, else host and time).")
@click.option("--executor", type=click.Choice(["local", "submitit"]), default="local", show_default=True,
              help="submitit: run --shards array tasks through submitit (Slurm, or its local executor), "
                   "then merge.")
@click.option("--shards", type=int, default=2, show_default=True, help="Array size for --executor submitit.")
@click.option("--cluster", type=click.Choice(["auto", "slurm", "local"]), default="auto", show_default=True,
              help="submitit cluster (auto: Slurm where sbatch exists, else local).")
@click.option("--gpus-per-shard", type=int, help="GPUs each array task asks for (default: Slurm 1; "
                                                  "local: this host's visible GPUs).")
@click.option("--partition", help="Slurm partition for --executor submitit.")
@click.option("--shard-timeout-min", type=int, default=720, show_default=True)
@_judging_options
@click.option("-v", "--verbose", count=True, help="One line per run on stderr.")
def nightly_cmd(set_path, only, runs, until_confident, precision, min_runs, jobs, timeout, out, shard_text, batch,
                executor, shards, cluster, gpus_per_shard, partition, shard_timeout_min, db, alpha, window,
                bisect_on_change, as_json, quiet, verbose):
    """Run every repro of SET many times; record rates and signatures, compare with history, report changes.

    SET is a manifest (the scenarios/manifest.toml format), a folder holding manifest.toml, or a folder of
    *.py repros (each one a repro, run with this Python).
    """
    from .nightly.records import Plan, load_set, parse_shard

    for name, value, low in (("--runs", runs, 1), ("--jobs", jobs, 1), ("--min-runs", min_runs, 1),
                             ("--shards", shards, 1)):
        if value is not None and value < low:
            raise UsageFailure(f"{name} must be at least {low}, got {value}")
    if timeout is not None and timeout <= 0:
        raise UsageFailure(f"--timeout must be positive, got {timeout}")
    if not 0 < precision < 0.5:
        raise UsageFailure(f"--precision must be between 0 and 0.5, got {precision}")
    shard = parse_shard(shard_text, dict(os.environ))
    if until_confident and (shard.count > 1 or executor != "local"):
        raise UsageFailure("--until-confident cannot be sharded: its stopping rule needs every run of a repro "
                           "in one place; give --runs N")
    repros = load_set(set_path, sys.executable, tuple(only))
    if shard.count == 1:
        from .nightly.history import History, default_path

        # A database this night could not be judged into should stop it before its hours of runs, not after.
        History(db or default_path()).close()
    plan = Plan(runs, until_confident, precision, min(min_runs, runs), timeout, shard)
    out = _prepare_out(out or os.path.join("aoti-bisect-runs", "nightly-" + _dt.datetime.now().strftime(
        "%Y%m%d-%H%M%S")))
    from .nightly.runner import default_batch, record_path, run_records, visible_gpus

    # Shards of one night may share a folder (one --out on a shared disk); a second night may not reuse it.
    taken = record_path(out, plan) if executor == "local" else os.path.join(out, "records")
    if os.path.isfile(taken) or (os.path.isdir(taken) and os.listdir(taken)):
        raise UsageFailure(f"{out} already holds this night's records; give a fresh --out")

    batch = batch or default_batch(dict(os.environ))
    say = _say(quiet)
    from .progress import run_line

    on_run = (lambda r: say("    " + run_line(r))) if verbose else (lambda r: None)
    if executor == "submitit":
        from .nightly.submitit_executor import run_on_submitit

        if gpus_per_shard is None:
            gpus_per_shard = 1 if cluster == "slurm" else len(visible_gpus(dict(os.environ), out))
        records = run_on_submitit(repros, plan, shards, set_path, out, batch, jobs,
                                  None if cluster == "auto" else cluster, gpus_per_shard, shard_timeout_min,
                                  partition, say)
        return _judge(records, out, db, alpha, window, bisect_on_change, jobs, as_json, say)
    try:
        record = run_records(repros, plan, set_path, out, batch, jobs, say, on_run)
    except KeyboardInterrupt:
        say("aoti-bisect: interrupted; summarising the runs that finished")
        record, interrupted = record_path(out, plan), True
    else:
        interrupted = False
    if shard.count > 1:
        say(f"aoti-bisect: shard {shard} recorded in {record}; fold the shards with `aoti-bisect merge`")
        sys.exit(EXIT_INTERRUPTED if interrupted else 0)
    _judge([record], out, db, alpha, window, bisect_on_change, jobs, as_json, say, interrupted)


@main.command("merge", epilog=NIGHTLY_EXIT_HELP)
@click.argument("records", nargs=-1, required=True)
@click.option("--out", type=str, help="Folder for the summaries (default: ./aoti-bisect-runs/merge-<timestamp>).")
@click.option("--jobs", type=int, help="Parallel runs for --bisect-on-change.")
@_judging_options
def merge_cmd(records, out, jobs, db, alpha, window, bisect_on_change, as_json, quiet):
    """Fold shard record files (or folders holding them) into the history and summarise the night."""
    import glob

    files = []
    for path in records:
        if os.path.isdir(path):
            found = sorted(glob.glob(os.path.join(path, "**", "shard-*.jsonl"), recursive=True))
            if not found:
                raise UsageFailure(f"{path} holds no shard-*.jsonl record files")
            files += found
        elif os.path.isfile(path):
            files.append(path)
        else:
            raise UsageFailure(f"no such file or folder: {path}")
    out = _prepare_out(out or os.path.join("aoti-bisect-runs", "merge-" + _dt.datetime.now().strftime(
        "%Y%m%d-%H%M%S")))
    _judge(files, out, db, alpha, window, bisect_on_change, jobs, as_json, _say(quiet))


@main.command("history")
@click.argument("repros", nargs=-1)
@click.option("--db", envvar="AOTI_BISECT_DB", help="History database (default as for nightly).")
@click.option("--nights", type=int, default=14, show_default=True, help="Latest nights per repro.")
@click.option("--json", "as_json", is_flag=True, help="Rows as JSON.")
@click.option("--plot", type=str, metavar="PNG", help="Also draw the rates over time (needs aoti-bisect[plot]).")
def history_cmd(repros, db, nights, as_json, plot):
    """The trend of each repro's rate over the recorded nights."""
    from .nightly.history import History, default_path

    path = db or default_path()
    if not os.path.isfile(path):
        raise UsageFailure(f"no history database at {path} (run `aoti-bisect nightly` first, or give --db)")
    history = History(path)
    try:
        rows = history.trend(tuple(repros), nights)
    finally:
        history.close()
    if repros and not rows:
        raise UsageFailure(f"no nights recorded for {', '.join(repros)} in {path}")
    if plot:
        from .nightly.plot import plot_trend

        plot_trend(rows, plot)
        print(f"aoti-bisect: plot: {plot}", file=sys.stderr)
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    from tabulate import tabulate

    from .report.markdown import rate_cell

    print(tabulate([(r["repro"], r["started"][:16].replace("T", " "), r["batch"], r["torch"],
                     (r["torch_git"] or "")[:10], r["gpu"] or "-", rate_cell(r), r["signatures"], r["infra_errors"])
                    for r in rows],
                   headers=["repro", "night (UTC)", "batch", "torch", "git", "gpu", "failed (rate, 95% CI)",
                            "signatures", "infra"]))


# Ctrl-C, a scheduler's SIGTERM and a closed terminal's SIGHUP all stop the same way: kill the runs, write
# the partial report, exit 130. A signal already ignored when we start (nohup, `cmd &` in a script) stays so.
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_terminal_fds: tuple[int, ...] = ()


def _stop(signum, frame):
    for sig in _STOP_SIGNALS:
        if signal.getsignal(sig) is _stop:
            signal.signal(sig, _stop_again)
    _leave_dead_terminal(signum)
    raise KeyboardInterrupt


def _stop_again(signum, frame):
    """A second signal must not abandon the kill under way (TERM-ignoring repros would outlive us): it only
    cuts the SIGTERM grace short."""
    _leave_dead_terminal(signum)
    process = sys.modules.get("aoti_bisect.run.process")  # not loaded: no run to hurry
    if process is not None:
        process.hurry()
        try:
            os.write(2, b"aoti-bisect: stopping: killing the runs now, then writing the partial report\n")
        except OSError:
            pass


def _leave_dead_terminal(signum: int) -> None:
    # After a hangup, writing to the terminal fails with EIO, which would lose the report's last lines.
    if signum == signal.SIGHUP:
        devnull = os.open(os.devnull, os.O_WRONLY)
        for fd in _terminal_fds:
            os.dup2(devnull, fd)
        os.close(devnull)


def entry() -> None:
    global _terminal_fds
    _terminal_fds = tuple(fd for fd in (1, 2) if os.isatty(fd))
    for sig in _STOP_SIGNALS:
        if signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, _stop)
    try:
        main.main(standalone_mode=False, prog_name="aoti-bisect")
    except UsageFailure as exc:
        print(f"aoti-bisect: error: {exc}", file=sys.stderr)
        sys.exit(exc.code)

    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        print(f"aoti-bisect: error: {exc.format_message()}", file=sys.stderr)
        sys.exit(EXIT_USAGE)
    except click.exceptions.Abort:
        sys.exit(EXIT_INTERRUPTED)
    except KeyboardInterrupt:
        sys.exit(EXIT_INTERRUPTED)
    except BrokenPipeError:
        sys.exit(EXIT_INFRA)
