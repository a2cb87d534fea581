"""One `aoti-bisect nightly`, shard or merge: wires the harness, the history, the summaries and the ladder."""
from __future__ import annotations

import json
import os
import re
import socket
import sys
from dataclasses import dataclass
from typing import Callable, Optional

from ..files import atomic_write, read_log
from ..run import process
from ..run.harness import Harness
from ..run.probe import probe_environment, relevant_env
from .history import History, default_path
from .records import (
    Plan,
    RecordWriter,
    Repro,
    host_environment,
    now_iso,
    read_records,
    run_set,
)
from .summary import build, changed, render_junit, render_markdown

Say = Callable[[str], None]


def visible_gpus(env: dict[str, str], scratch: str) -> list[str]:
    """The GPUs runs may be pinned to: CUDA_VISIBLE_DEVICES as given, or the UUID of every GPU nvidia-smi lists.

    UUIDs, not indices: nvidia-smi numbers GPUs in PCI order, CUDA (by default) fastest first, so on a host with
    mixed GPUs index i can name two different devices."""
    if "CUDA_VISIBLE_DEVICES" in env:
        return [d.strip() for d in env["CUDA_VISIBLE_DEVICES"].split(",") if d.strip() and d.strip() != "-1"]
    log = os.path.join(scratch, "nvidia-smi.log")
    exit = process.execute(["nvidia-smi", "-L"], dict(env), scratch, log, timeout=60)
    if exit.returncode != 0:
        return []
    return re.findall(r"^GPU \d+:.*\(UUID: (\S+?)\)", read_log(log), re.M)


def default_batch(env: dict[str, str]) -> str:
    # Shards of one Slurm array share its job id, so their records fold into one night without --batch.
    if env.get("SLURM_ARRAY_JOB_ID"):
        return f"slurm-{env['SLURM_ARRAY_JOB_ID']}"
    return f"{socket.gethostname()}-{now_iso()}"


@dataclass(frozen=True)
class Judging:
    db: Optional[str] = None
    alpha: float = 0.01
    window: int = 7
    bisect_on_change: bool = False
    jobs: Optional[int] = None


def record_path(out: str, plan: Plan) -> str:
    return os.path.join(out, "records", f"shard-{plan.shard.index}-of-{plan.shard.count}.jsonl")


def run_records(repros: list[Repro], plan: Plan, set_path: str, out: str, batch: str, jobs: Optional[int],
                say: Say, on_run: Callable = lambda r: None) -> str:
    """Runs this host's share of the night; returns its record file. Ctrl-C keeps every finished run."""
    scratch = os.path.join(out, "probe")
    os.makedirs(scratch, exist_ok=True)
    os.makedirs(os.path.dirname(record_path(out, plan)), exist_ok=True)
    gpus = visible_gpus(dict(os.environ), scratch)
    slots = jobs or len(gpus) or os.cpu_count() or 1
    # The cache stays inside the shard's own folder: shards of one night may run at once into one --out
    # (submitit's array, or hosts on a shared disk), and a compile cache shared by concurrent runs is
    # corrupted (see Harness).
    harness = Harness(os.path.join(out, f"shard-{plan.shard.index}"), jobs=slots,
                      gpu_slots=[gpus[i % len(gpus)] for i in range(slots)] if gpus else None)
    probe = probe_environment(repros[0].argv[0], scratch, harness.base_env, harness.cancel)
    header = {"batch": batch, "set": os.path.abspath(set_path), "shard": str(plan.shard), "started": now_iso(),
              "plan": plan.to_json(), "gpu_slots": gpus,
              "environment": host_environment(probe, relevant_env(dict(os.environ)))}
    say(f"aoti-bisect: nightly {batch}, shard {plan.shard}: {len(repros)} repro(s), {slots} slot(s)"
        + (f" on GPU(s) {','.join(gpus)}" if gpus else ""))

    def run_batch(specs, on_result, stop):
        def landed(r):
            on_result(r)
            on_run(r)
        harness.run_many(specs, on_result=landed, stop=stop)

    writer = RecordWriter(record_path(out, plan), header)
    interrupted = True
    try:
        run_set(repros, plan, run_batch, writer, bool(gpus), say)
        interrupted = False
    except KeyboardInterrupt:
        harness.cancel.set()
        raise
    finally:
        writer.close(interrupted)
    return writer.path


def judge_night(record_files: list[str], out: str, judging: Judging, say: Say) -> dict:
    """Folds record files into the history and writes summary.json, summary.md and junit.xml under out."""
    night = read_records(record_files)
    history = History(judging.db or default_path())
    try:
        added = history.add(night)
        say(f"aoti-bisect: {added} run(s) added to {history.path}")
        data = build(night, history, judging.alpha, judging.window)
        _write_summaries(out, data)
        if judging.bisect_on_change and changed(data):
            reports = _bisect(night, changed(data), out, judging.jobs, say)
            data = build(night, history, judging.alpha, judging.window, reports)
            _write_summaries(out, data)
    finally:
        history.close()
    for r in data["repros"]:
        say(f"  {r['name']}: {r['status']}, {r['change']['text']}")
    say(f"aoti-bisect: summary: {os.path.join(out, 'summary.md')}")
    return data


def _write_summaries(out: str, data: dict) -> None:
    for name, text in (("summary.json", json.dumps(data, indent=2) + "\n"), ("summary.md", render_markdown(data)),
                       ("junit.xml", render_junit(data))):
        atomic_write(os.path.join(out, name), text)


def _bisect(night, names: list[str], out: str, jobs: Optional[int], say: Say) -> dict[str, str]:
    """The full ladder on each changed repro; returns report.md paths, relative to out."""
    from ..diagnose.session import Session
    from ..progress import Progress

    reports = {}
    for name in names:
        argv = night.repros[name]["argv"]
        run_dir = os.path.join(out, "bisect", Repro(name, tuple(argv)).slug)
        say(f"aoti-bisect: {name} changed; running the ladder in {run_dir}")
        session = Session(run_dir, list(argv), Progress(indent="    ", write=say), jobs=jobs or 1,
                          cache_root=os.path.join(out, "cache"), python_script=argv[0] == sys.executable)
        session.execute()
        reports[name] = os.path.relpath(os.path.join(run_dir, "report.md"), out)
    return reports
