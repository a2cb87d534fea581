"""Running a night's shards on submitit: Slurm job arrays on a GPU pool, or its local executor on one host.

Each array task runs `--shard i/N` of the night exactly as a hand-started shard would (same function, same
record file), and this host then merges the records. submitit brings the scheduling; nothing here schedules.
"""
from __future__ import annotations

import dataclasses
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Optional

from .plan import Plan, Shard
from .records import records_in
from .sets import Repro, SetError
from .slurm import ACTIVE, task_states


@dataclass(frozen=True)
class ShardTask:
    repros: tuple[Repro, ...]
    plan: Plan
    set_path: str
    out: str
    batch: str
    jobs: Optional[int]


def run_shard(task: ShardTask) -> str:
    """The body of one array task, on whichever host the scheduler picked."""
    from .runner import run_records

    return run_records(list(task.repros), task.plan, task.set_path, task.out, task.batch, task.jobs,
                       lambda text: print(text, file=sys.stderr, flush=True))


def route_logging_to_stderr() -> None:
    """submitit logs INFO and below to stdout, which carries only data here (--json): send all of it to stderr,
    once (its own stderr handler already takes WARNING and up)."""
    import logging

    for handler in list(logging.getLogger("submitit").handlers):
        if isinstance(handler, logging.StreamHandler) and handler.stream is sys.stdout:
            handler.setStream(sys.stderr)
            handler.addFilter(lambda record: record.levelno < logging.WARNING)


def shard_gpus(requested: Optional[int], cluster: str, partition: Optional[str],
               local_gpus: Callable[[], list[str]], say: Callable[[str], None]) -> int:
    """GPUs each array task asks for. On Slurm a request no node of the partition can meet would pend forever
    (or be refused by sbatch), so it is checked first: an explicit --gpus-per-shard is refused in one line, the
    default (1) falls back to none and says so."""
    if cluster != "slurm":
        return len(local_gpus()) if requested is None else requested
    if requested == 0:
        return 0
    from .slurm import gpus_offered

    name, offered = gpus_offered(partition)
    if requested is None:
        if offered:
            return 1
        say(f"aoti-bisect: Slurm partition {name} has no GPUs (sinfo %G); the shards run without one")
        return 0
    if requested > offered:
        raise SetError(f"--gpus-per-shard {requested}: no node of Slurm partition {name} has "
                       f"{'that many GPUs' if offered else 'a GPU'} (the most is {offered}); the job would never "
                       "start. Give --partition with GPU nodes, or --gpus-per-shard 0")
    return requested


@dataclass(frozen=True)
class Submitit:
    """--executor submitit: the night runs as an array of `shards` tasks, then this host merges them."""

    shards: int
    cluster: Optional[str]  # None: what submitit finds (Slurm where srun exists, else local)
    gpus_per_shard: Optional[int]  # None: 1 on Slurm where the partition has GPUs, else this host's
    partition: Optional[str]
    timeout_min: int


def run_on_submitit(repros: list[Repro], plan: Plan, sub: Submitit, set_path: str, out: str, batch: str,
                    jobs: Optional[int], local_gpus: Callable[[], list[str]],
                    say: Callable[[str], None]) -> tuple[list[str], list[str]]:
    """Runs the shards as one submitit array and waits for it; returns the record files they wrote and one
    line per shard that did not finish."""
    try:
        import submitit
    except ImportError:
        raise SetError("--executor submitit needs submitit: pip install 'aoti-bisect[submitit]'")
    route_logging_to_stderr()
    cluster = sub.cluster or submitit.AutoExecutor.which()
    gpus = shard_gpus(sub.gpus_per_shard, cluster, sub.partition, local_gpus, say)
    executor = submitit.AutoExecutor(folder=os.path.join(out, "submitit", "%j"), cluster=cluster)
    params = {"timeout_min": sub.timeout_min, "tasks_per_node": 1, "name": f"aoti-bisect-{batch}"}
    if gpus:
        params["gpus_per_node"] = gpus
    if sub.partition:
        params["slurm_partition"] = sub.partition
    executor.update_parameters(**params)
    tasks = [ShardTask(tuple(repros), dataclasses.replace(plan, shard=Shard(i, sub.shards)), set_path, out, batch,
                       jobs) for i in range(sub.shards)]
    try:
        array = executor.map_array(run_shard, tasks)
    except submitit.core.utils.FailedJobError as exc:
        raise SetError(f"the array was not submitted: {(str(exc).strip().splitlines() or ['?'])[-1]}")
    say(f"aoti-bisect: {sub.shards} shard(s) submitted to submitit ({executor.cluster}): "
        + ", ".join(job.job_id for job in array))
    try:
        failed = _wait(array, executor.cluster == "slurm", submitit)
    except KeyboardInterrupt:
        for job in array:
            job.cancel(check=False)
        raise
    for line in failed:
        say(f"aoti-bisect: {line}")
    # A shard that died still left the runs it finished; judging says which shards are missing or torn.
    return records_in(out), failed


def _wait(array: list[Any], on_slurm: bool, submitit: ModuleType) -> list[str]:
    """Waits for every task of the array; returns one line per shard that did not finish.

    On Slurm a task's end is read from squeue, not from submitit: submitit asks sacct, which many clusters
    (and a plain slurmctld) do not run, and a task killed before it wrote its result then looks pending
    forever."""
    left, failed, count = dict(enumerate(array)), [], len(array)
    while left:
        # States first, results second: a task writes its result before it ends, so one seen ended here
        # without a result never had one.
        states = task_states(array[0].job_id.split("_")[0]) if on_slurm else None
        for i, job in list(left.items()):
            where = f"shard {i}/{count} (job {job.job_id})"
            if job.paths.result_pickle.exists() or (not on_slurm and job.done()):
                del left[i]
                try:
                    job.result()
                except submitit.core.utils.UncompletedJobError as exc:
                    failed.append(f"{where} did not complete: {str(exc).splitlines()[0]}")
                except Exception as exc:  # a shard's own failure arrives re-raised here; the others still count
                    failed.append(f"{where} failed: {type(exc).__name__}: {exc}".splitlines()[0])
            elif states is not None and states.get(job.job_id, "ENDED") not in ACTIVE:
                del left[i]
                failed.append(f"{where} ended {states.get(job.job_id, '(no longer in squeue)')} without finishing")
        if left:
            time.sleep(1)
    return failed
