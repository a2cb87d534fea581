"""What the submitit executor asks Slurm itself: the GPUs a partition's nodes offer (before submitting) and the
state of each array task (while waiting). Parsers are pure; the two queries run sinfo and squeue."""
from __future__ import annotations

import re
import subprocess
from typing import Optional

from ..exits import UsageFailure

# A task in one of these may still write its result; anything else (or gone from squeue) has ended.
ACTIVE = frozenset({"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "REQUEUE_HOLD",
                    "REQUEUE_FED", "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED", "RESV_DEL_HOLD"})


def gres_gpus(gres: str) -> int:
    """GPUs in one node's sinfo %G: `gpu:8`, `gpu:a100:4(S:0-1),gpu:v100:2`, `(null)`."""
    return sum(int(n) for n in re.findall(r"(?:^|,)gpu(?::[^:,(]+)?:(\d+)", gres))


def partition_gpus(sinfo: str, partition: Optional[str]) -> tuple[Optional[str], int]:
    """From `sinfo -h -N -o %P|%G` lines: the partition meant (the default one, marked *, when None) and the
    most GPUs one of its nodes has."""
    best, name = 0, None
    for line in sinfo.splitlines():
        part, _, gres = line.partition("|")
        default = part.endswith("*")
        part = part.rstrip("*")
        if part == partition or (partition is None and default):
            name = part
            best = max(best, gres_gpus(gres))
    return name, best


def _query(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def gpus_offered(partition: Optional[str]) -> tuple[str, int]:
    """The partition a job would land in and the most GPUs one of its nodes has; one line when Slurm is
    not reachable or the partition does not exist."""
    try:
        got = _query(["sinfo", "-h", "-N", "-o", "%P|%G"])
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageFailure(f"cannot ask Slurm which GPUs it has: sinfo: {exc}")
    if got.returncode != 0:
        raise UsageFailure("cannot ask Slurm which GPUs it has: sinfo: "
                           + (got.stderr.strip().splitlines() or [f"exit {got.returncode}"])[0])
    name, gpus = partition_gpus(got.stdout, partition)
    if name is None:
        raise UsageFailure(f"Slurm has no partition {partition}" if partition else
                           "Slurm has no default partition; give --partition")
    return name, gpus


def task_states(job_id: str) -> Optional[dict[str, str]]:
    """State of each task of an array (`12_0` -> `RUNNING`), finished ones included while the controller
    keeps them (MinJobAge); None when squeue cannot answer right now."""
    try:
        got = _query(["squeue", "-h", "-r", "--states=all", "-j", job_id, "-o", "%i|%T"])
    except (OSError, subprocess.TimeoutExpired):
        return None
    if got.returncode != 0:
        # squeue exits 1 for a job id the controller has already forgotten: then every task has ended.
        return {} if "Invalid job id" in got.stderr else None
    return dict(line.split("|", 1) for line in got.stdout.split() if "|" in line)
