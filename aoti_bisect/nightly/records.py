"""`aoti-bisect nightly`: run every repro of a set many times and keep each run as one JSON line.

A night is written as record files (JSON lines): a header with the host's environment, one line per repro,
one line per run, and an end line. One unsharded night writes one file; `--shard i/N` writes its part, and
`merge` folds the parts. Everything after the runs (history, change detection, summaries) reads only these
files, so a sharded night and an unsharded one are judged by the same code.
"""
from __future__ import annotations

import datetime as _dt
import glob
import hashlib
import json
import os
import re
import socket
import tomllib
from dataclasses import dataclass, field
from typing import Callable, Optional

from ..exits import UsageFailure
from ..run.types import Outcome, RunResult, RunSpec
from ..stats import wilson

RECORD_SCHEMA = 1


class SetError(UsageFailure):
    """A problem with the SET, the shard or the record files, said in one line."""


def iso(t: _dt.datetime) -> str:
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def now_iso() -> str:
    return iso(_dt.datetime.now(_dt.timezone.utc))


@dataclass(frozen=True)
class Repro:
    name: str
    argv: tuple[str, ...]
    device: str = "auto"
    timeout: float = 600.0

    @property
    def slug(self) -> str:
        return re.sub(r"[^A-Za-z0-9_.-]+", "_", self.name)


def load_set(path: str, python: str, only: tuple[str, ...] = ()) -> list[Repro]:
    """A manifest (`scenarios/manifest.toml` format), a folder holding one, or a folder of *.py repros."""
    if os.path.isdir(path):
        manifest = os.path.join(path, "manifest.toml")
        if os.path.isfile(manifest):
            repros = _from_manifest(manifest, python)
        else:
            scripts = sorted(p for p in glob.glob(os.path.join(path, "**", "*.py"), recursive=True)
                             if not os.path.basename(p).startswith("_"))
            if not scripts:
                raise SetError(f"{path} holds no manifest.toml and no *.py repros")
            repros = [Repro(os.path.relpath(p, path)[:-3], (python, os.path.abspath(p))) for p in scripts]
    elif os.path.isfile(path):
        if not path.endswith(".toml"):
            raise SetError(f"{path} is neither a folder of repros nor a manifest (.toml)")
        repros = _from_manifest(path, python)
    else:
        raise SetError(f"no such file or folder: {path}")
    if only:
        unknown = sorted(set(only) - {r.name for r in repros})
        if unknown:
            raise SetError(f"not in {path}: {', '.join(unknown)}")
        repros = [r for r in repros if r.name in only]
    return repros


def _from_manifest(path: str, python: str) -> list[Repro]:
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except tomllib.TOMLDecodeError as exc:
        raise SetError(f"{path}: not valid TOML: {exc}")
    entries = data.get("scenario") or data.get("repro") or []
    if not entries:
        raise SetError(f"{path} lists no [[scenario]] or [[repro]] entries")
    base = os.path.dirname(os.path.abspath(path))
    repros, seen = [], set()
    for t in entries:
        name, script = t.get("name"), t.get("script")
        if not name or not script:
            raise SetError(f"{path}: every entry needs a name and a script")
        if name in seen:
            raise SetError(f"{path}: the name {name} is used twice")
        seen.add(name)
        script_path = os.path.join(base, script)
        if not os.path.isfile(script_path):
            raise SetError(f"{path}: {name}: no such script {script}")
        device = t.get("device", "auto")
        if device not in ("cpu", "cuda", "auto"):
            raise SetError(f"{path}: {name}: device must be cpu, cuda or auto, not {device}")
        args = tuple(str(a) for a in t.get("args", ()))
        repros.append(Repro(name, (python, script_path, *args), device, float(t.get("timeout", 600))))
    return repros


@dataclass(frozen=True)
class Shard:
    """Shard i of N runs the run indices i, i+N, i+2N, ... of every repro, so N shards together run exactly
    the indices one unsharded night runs (a repro seeded by its run index fails the same way in both)."""

    index: int = 0
    count: int = 1

    def indices(self, runs: int) -> range:
        return range(self.index, runs, self.count)

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: Optional[str], env: dict[str, str]) -> Shard:
    """`i/N`; or `N` with i from the scheduler; or, with no option, a Slurm array's own index and count."""
    slurm_id, slurm_count = env.get("SLURM_ARRAY_TASK_ID"), env.get("SLURM_ARRAY_TASK_COUNT")
    slurm_index = None
    if slurm_id is not None:
        slurm_index = int(slurm_id) - int(env.get("SLURM_ARRAY_TASK_MIN", "0"))
    if text is None:
        if slurm_index is not None and slurm_count:
            return _checked(slurm_index, int(slurm_count))
        return Shard()
    m = re.fullmatch(r"(?:(\d+)/)?(\d+)", text.strip())
    if not m:
        raise SetError(f"--shard must be i/N or N, not {text!r}")
    count = int(m.group(2))
    if m.group(1) is not None:
        return _checked(int(m.group(1)), count)
    if slurm_index is not None:
        return _checked(slurm_index, count)
    if env.get("JOB_COMPLETION_INDEX", "").isdigit():
        return _checked(int(env["JOB_COMPLETION_INDEX"]), count)
    raise SetError(f"--shard {text}: no shard index: give i/{count}, or run as a Slurm array task "
                   "(SLURM_ARRAY_TASK_ID) or a Kubernetes indexed job (JOB_COMPLETION_INDEX)")


def _checked(index: int, count: int) -> Shard:
    if count < 1 or not 0 <= index < count:
        raise SetError(f"shard {index}/{count} is out of range (0 <= i < N)")
    return Shard(index, count)


@dataclass(frozen=True)
class Plan:
    runs: int = 20
    until_confident: bool = False
    # --until-confident stops a repro once its 95% Wilson interval is at most 2 * precision wide.
    precision: float = 0.1
    min_runs: int = 10
    timeout: Optional[float] = None
    shard: Shard = Shard()

    def enough(self, failures: int, runs: int) -> bool:
        if not self.until_confident or runs < self.min_runs:
            return False
        lo, hi = wilson(failures, runs)
        return hi - lo <= 2 * self.precision

    def to_json(self) -> dict:
        return {"runs": self.runs, "until_confident": self.until_confident, "precision": self.precision,
                "min_runs": self.min_runs, "timeout_s": self.timeout}


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


class RecordWriter:
    """Appends one JSON line per event and flushes it: an interrupted night keeps every run that finished."""

    def __init__(self, path: str, header: dict) -> None:
        self.path = path
        self._f = open(path, "a", buffering=1)
        self._write({"type": "header", "schema": RECORD_SCHEMA, **header})

    def _write(self, obj: dict) -> None:
        self._f.write(json.dumps(obj, sort_keys=True) + "\n")

    def repro(self, repro: Repro, skipped: Optional[str] = None) -> None:
        self._write({"type": "repro", "repro": repro.name, "argv": list(repro.argv), "device": repro.device,
                     "skipped": skipped})

    def run(self, repro: Repro, r: RunResult) -> None:
        sig = r.signature
        # A result lands as its run ends, so the start is now minus the run's duration.
        started = _dt.datetime.now(_dt.timezone.utc) - _dt.timedelta(seconds=r.exit.duration)
        self._write({"type": "run", "repro": repro.name, "index": r.spec.index, "started": iso(started),
                     "outcome": r.outcome.value, "duration_s": round(r.exit.duration, 3),
                     "kind": sig.kind if sig else None, "phase": sig.phase if sig else None,
                     "fingerprint": sig.fingerprint if sig else None, "message": sig.message if sig else None,
                     "kernel": sig.kernel if sig else None, "log": r.log_path})

    def close(self, interrupted: bool) -> None:
        self._write({"type": "end", "finished": now_iso(), "interrupted": interrupted})
        self._f.close()


RunBatch = Callable[[list[RunSpec], Callable[[RunResult], None], Callable[[list[RunResult]], bool]], None]


def run_set(repros: list[Repro], plan: Plan, run_batch: RunBatch, writer: RecordWriter, has_cuda: bool,
            say: Callable[[str], None]) -> None:
    for repro in repros:
        if repro.device == "cuda" and not has_cuda:
            writer.repro(repro, skipped="no CUDA GPU visible")
            say(f"{repro.name}: skipped (no CUDA GPU visible)")
            continue
        writer.repro(repro)
        specs = [RunSpec(repro.argv, repro.slug, i, timeout=plan.timeout or repro.timeout)
                 for i in plan.shard.indices(plan.runs)]
        results: list[RunResult] = []

        def keep(r: RunResult, repro=repro) -> None:
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


@dataclass
class Night:
    """One batch of runs, folded from one or more record files."""

    batch: str
    started: str
    finished: Optional[str]
    set_path: str
    shards: list[str]
    complete: bool
    problems: list[str]
    plan: dict
    hosts: list[dict]
    repros: dict[str, dict] = field(default_factory=dict)
    runs: list[dict] = field(default_factory=list)


def read_records(paths: list[str]) -> Night:
    """Folds record files into one night; shard files of one batch may come in any order."""
    if not paths:
        raise SetError("no record files given")
    headers, repros, runs, problems, ends = [], {}, [], [], {}
    for path in paths:
        header, n_end = None, 0
        try:
            with open(path, encoding="utf-8") as f:
                lines = f.readlines()
        except OSError as exc:
            raise SetError(f"cannot read {path}: {exc.strerror}")
        for lineno, line in enumerate(lines, 1):
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                # A shard killed mid-write leaves a torn last line; everything before it still counts.
                if lineno == len(lines):
                    problems.append(f"{path}: last line is incomplete (the shard was killed?)")
                    continue
                raise SetError(f"{path}:{lineno}: not a JSON line")
            kind = obj.get("type")
            if kind == "header":
                if obj.get("schema") != RECORD_SCHEMA:
                    raise SetError(f"{path}: record schema {obj.get('schema')} (this aoti-bisect reads "
                                   f"{RECORD_SCHEMA})")
                header = obj
                headers.append(obj)
            elif header is None:
                raise SetError(f"{path}: records before the header (not an aoti-bisect record file?)")
            elif kind == "repro":
                repros.setdefault(obj["repro"], obj)
            elif kind == "run":
                runs.append({**obj, **{k: header["environment"].get(k) for k in _RUN_ENV_KEYS},
                             "shard": header["shard"]})
            elif kind == "end":
                n_end += 1
                ends[path] = obj
                if obj.get("interrupted"):
                    problems.append(f"{path}: the shard was interrupted")
        if header is None:
            raise SetError(f"{path}: no header line (not an aoti-bisect record file?)")
        if not n_end:
            problems.append(f"{path}: no end line (the shard did not finish)")
    counts = {h["shard"].split("/")[1] for h in headers}
    if len(counts) > 1:
        raise SetError(f"record files come from different shardings: {', '.join(sorted(counts))} shards")
    shards = sorted({h["shard"] for h in headers}, key=lambda s: int(s.split("/")[0]))
    total = int(next(iter(counts)))
    missing = sorted(set(range(total)) - {int(s.split("/")[0]) for s in shards})
    if missing:
        problems.append(f"shard(s) {', '.join(f'{i}/{total}' for i in missing)} missing")
    if len(shards) < len(headers):
        raise SetError("the same shard appears in two record files")
    batches = sorted({h["batch"] for h in headers})
    seen, unique = set(), []
    for r in runs:
        key = (r["repro"], r["index"])
        if key not in seen:
            seen.add(key)
            unique.append(r)
    return Night(batch="+".join(batches), started=min(h["started"] for h in headers),
                 finished=max((e["finished"] for e in ends.values()), default=None),
                 set_path=headers[0].get("set", ""), shards=shards, complete=not problems, problems=problems,
                 plan=headers[0].get("plan", {}), hosts=[h["environment"] for h in headers], repros=repros,
                 runs=unique)


_RUN_ENV_KEYS = ("host", "torch", "torch_git", "gpu", "driver", "env_fp")
