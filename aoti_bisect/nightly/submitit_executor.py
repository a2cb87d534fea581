"""Running a night's shards on submitit: Slurm job arrays on a GPU pool, or its local executor on one host.

Each array task runs `--shard i/N` of the night exactly as a hand-started shard would (same function, same
record file), and this host then merges the records. submitit brings the scheduling; nothing here schedules.
"""
from __future__ import annotations

import dataclasses
import os
import sys
from dataclasses import dataclass
from typing import Optional

from .plan import Plan, Shard
from .records import records_in
from .sets import Repro, SetError


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


def run_on_submitit(repros: list[Repro], plan: Plan, shards: int, set_path: str, out: str, batch: str,
                    jobs: Optional[int], cluster: Optional[str], gpus_per_shard: int, timeout_min: int,
                    partition: Optional[str], say) -> list[str]:
    """Runs the shards as one submitit array and waits for it; returns the record files they wrote."""
    try:
        import submitit
    except ImportError:
        raise SetError("--executor submitit needs submitit: pip install 'aoti-bisect[submitit]'")
    route_logging_to_stderr()
    executor = submitit.AutoExecutor(folder=os.path.join(out, "submitit", "%j"), cluster=cluster)
    params = {"timeout_min": timeout_min, "gpus_per_node": gpus_per_shard, "tasks_per_node": 1,
              "name": f"aoti-bisect-{batch}"}
    if partition:
        params["slurm_partition"] = partition
    executor.update_parameters(**params)
    tasks = [ShardTask(tuple(repros), dataclasses.replace(plan, shard=Shard(i, shards)), set_path, out, batch, jobs)
             for i in range(shards)]
    array = executor.map_array(run_shard, tasks)
    say(f"aoti-bisect: {shards} shard(s) submitted to submitit ({executor.cluster}): "
        + ", ".join(job.job_id for job in array))
    try:
        for job in array:
            try:
                job.result()
            except submitit.core.utils.UncompletedJobError as exc:
                say(f"aoti-bisect: shard job {job.job_id} did not complete: {str(exc).splitlines()[0]}")
            except Exception as exc:  # a shard's own failure arrives re-raised here; the others still count
                say(f"aoti-bisect: shard job {job.job_id} failed: {type(exc).__name__}: {exc}".splitlines()[0])
    except KeyboardInterrupt:
        for job in array:
            job.cancel(check=False)
        raise
    # A shard that died still left the runs it finished; merging says which shards are missing or torn.
    return records_in(out)
