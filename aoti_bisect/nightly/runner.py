"""This host's share of a night: the environment it records, the GPUs it pins runs to, and the runs."""
from __future__ import annotations

import hashlib
import json
import os
import re
import socket
from collections.abc import Callable
from typing import Optional

from ..files.own import read_log
from ..run import checkers, process
from ..run.checkers import Checker, Missing
from ..run.harness import Harness
from ..run.probe import probe_environment, relevant_env
from ..run.types import Outcome, RunBatch, RunResult, RunSpec
from ..stats import wilson
from .plan import Plan
from .records import RecordWriter, now_iso, record_path, records_dir
from .sets import Repro

Say = Callable[[str], None]


def environment_fingerprint(environment: dict, env: dict[str, str]) -> str:
    """Hash of what, besides the torch build and the GPU, can change a repro's behaviour."""
    keys = ("python", "platform", "cuda_runtime", "cxx_version", "libstdcxx")
    basis = {k: environment.get(k) for k in keys}
    basis["env"] = env
    return hashlib.sha1(json.dumps(basis, sort_keys=True).encode()).hexdigest()[:12]


def host_environment(probe: dict, relevant_env: dict[str, str]) -> dict:
    gpu, driver = None, None
    if probe.get("gpu"):
        gpu, _, driver = (part.strip() for part in probe["gpu"].partition(","))
    return {"host": socket.gethostname(), "torch": probe.get("torch"), "torch_git": probe.get("torch_git"),
            "cuda_runtime": probe.get("cuda_runtime"), "gpu": gpu, "driver": driver or None,
            "python": probe.get("python"), "env_fp": environment_fingerprint(probe, relevant_env),
            "probe_error": probe.get("probe_error") or probe.get("torch_error")}


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
    # The pid too: two jobs started on one host in the same millisecond would otherwise share a name, and the
    # second would be refused as a night already in the history.
    return f"{socket.gethostname()}-{now_iso()}-{os.getpid()}"


def checker_device(repro: Repro, has_cuda: bool) -> str:
    """Which memory checker a repro needs: a manifest's device, or for `auto` the CUDA one where a GPU is visible."""
    return "cuda" if repro.device == "cuda" or (repro.device == "auto" and has_cuda) else "cpu"


def check_memory(repro: Repro, plan: Plan, run_batch: RunBatch, writer: RecordWriter,
                 found: tuple[Checker, ...] | Missing, say: Say) -> None:
    """One run of the repro under its memory checker, built as the ladder's memcheck stage builds one."""
    if isinstance(found, Missing):
        writer.memcheck(repro, skipped=found.why)
        say(f"{repro.name}: memcheck skipped ({found.why})")
        return
    checker = found[0]
    spec = RunSpec((*checker.prefix, *repro.argv), f"memcheck/{repro.slug}", 0, checker.env,
                   (plan.timeout or repro.timeout) * checker.slowdown)
    landed: list[RunResult] = []
    run_batch([spec], landed.append, lambda done: False)
    if not landed:  # cancelled: the night is being interrupted
        return
    report = checkers.read_report(checker.tool, landed[0].run_dir, landed[0].log_path)  # never the merged log
    writer.memcheck(repro, checker.tool, landed[0], report)
    say(f"{repro.name}: {checker.tool}: " + (
        f"refused: {report.refused}" if report.refused else
        "never finished" if not report.finished else
        f"{report.total} error(s)" + (f": {report.errors[0].describe()}" if report.errors else "")))


def run_set(repros: list[Repro], plan: Plan, run_batch: RunBatch, writer: RecordWriter, has_cuda: bool,
            say: Callable[[str], None], found: dict[str, tuple[Checker, ...] | Missing]) -> None:
    """The night's runs of each repro, then (--sanitize) its checked run; `found`: the checker per device."""
    for repro in repros:
        if repro.device == "cuda" and not has_cuda:
            writer.repro(repro, skipped="no CUDA GPU visible")
            say(f"{repro.name}: skipped (no CUDA GPU visible)")
            continue
        writer.repro(repro)
        specs = [RunSpec(repro.argv, repro.slug, i, timeout=plan.timeout or repro.timeout)
                 for i in plan.shard.indices(plan.runs)]
        results: list[RunResult] = []

        def keep(r: RunResult, repro: Repro = repro, results: list[RunResult] = results) -> None:
            results.append(r)
            writer.run(repro, r)

        def stop(done: list[RunResult]) -> bool:
            counted = [r for r in done if r.outcome is not Outcome.INFRA_ERROR]
            return plan.enough(sum(r.failed for r in counted), len(counted))

        run_batch(specs, keep, stop)
        counted = [r for r in results if r.outcome is not Outcome.INFRA_ERROR]
        failures = sum(r.failed for r in counted)
        lo, hi = wilson(failures, len(counted))
        say(f"{repro.name}: {failures}/{len(counted)} failed "
            f"(95% CI {lo:.0%}-{hi:.0%})" + (f", {len(results) - len(counted)} infra errors"
                                              if len(results) > len(counted) else ""))
        # A checked run can see what no plain run shows (an out-of-bounds read that does not crash), so it
        # is made whatever the plain runs did.
        if plan.checks_here:
            check_memory(repro, plan, run_batch, writer, found[checker_device(repro, has_cuda)], say)


def run_records(repros: list[Repro], plan: Plan, set_path: str, out: str, batch: str, jobs: Optional[int],
                say: Say, on_run: Callable = lambda r: None) -> str:
    """Runs this host's share of the night; returns its record file. Ctrl-C keeps every finished run."""
    # Everything a shard writes besides its record stays inside its own folder: shards of one night may run
    # at once into one --out (submitit's array, or hosts on a shared disk); a compile cache shared by
    # concurrent runs is corrupted (see run/layout.py), and a shared probe log tore another shard's answer.
    folder = os.path.join(out, f"shard-{plan.shard.index}")
    scratch = os.path.join(folder, "probe")
    os.makedirs(scratch, exist_ok=True)
    os.makedirs(records_dir(out), exist_ok=True)
    gpus = visible_gpus(dict(os.environ), scratch)
    slots = jobs or len(gpus) or os.cpu_count() or 1
    harness = Harness(folder, jobs=slots,
                      gpu_slots=[gpus[i % len(gpus)] for i in range(slots)] if gpus else None)
    probe = probe_environment(repros[0].argv[0], scratch, harness.environment.base_env, harness.cancel)
    header = {"batch": batch, "set": os.path.abspath(set_path), "shard": str(plan.shard), "started": now_iso(),
              "plan": plan.to_json(), "gpu_slots": gpus,
              "environment": host_environment(probe, relevant_env(dict(os.environ)))}
    say(f"aoti-bisect: nightly {batch}, shard {plan.shard}: {len(repros)} repro(s), {slots} slot(s)"
        + (f" on GPU(s) {','.join(gpus)}" if gpus else ""))

    def run_batch(specs: list[RunSpec], on_result: Callable[[RunResult], None],
                  stop: Callable[[list[RunResult]], bool]) -> None:
        def landed(r: RunResult) -> None:
            on_result(r)
            on_run(r)
        harness.scheduler.run_many(specs, on_result=landed, stop=stop)

    writer = RecordWriter(record_path(out, plan.shard), header)
    interrupted = True
    try:
        run_set(repros, plan, run_batch, writer, bool(gpus), say,
                dict(checkers.find(plan.sanitizer)) if plan.checks_here else {})
        interrupted = False
    except KeyboardInterrupt:
        harness.cancel.set()
        raise
    finally:
        writer.close(interrupted)
    return writer.path
