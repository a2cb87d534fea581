"""One `aoti-bisect run`: probe the environment, climb the ladder, write the report (even when interrupted)."""
from __future__ import annotations

import json
import os
import sys
import threading
from typing import Optional

from ..report.model import Report
from ..report.redact import Redactor
from ..run import process
from ..run.harness import Harness, read_log
from ..run.types import RunResult
from .findings import Verdict
from .ladder import Findings, Ladder, Options

# Runs in the repro's interpreter, so a broken torch or CUDA context cannot take aoti-bisect down. Nothing in
# it imports torch: it answers where torch is broken, and costs the runs beside it a tenth of a second.
_PROBE = r"""
import importlib.metadata as md, importlib.util, json, os, platform, re, shutil, subprocess, sys
info = {"python": sys.version.split()[0], "platform": platform.platform()}
def first_line(cmd):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.TimeoutExpired):
        return None
spec = importlib.util.find_spec("torch")
if spec is None or not spec.submodule_search_locations:
    info["torch_error"] = "No module named 'torch'"
else:
    info["torch"] = md.version("torch")
    try:
        text = open(os.path.join(spec.submodule_search_locations[0], "version.py")).read()
        for key, var in (("torch_git", "git_version"), ("cuda_runtime", "cuda")):
            m = re.search(rf"^{var}\s*(?::\s*\S+)?\s*=\s*'([^']*)'", text, re.M)
            info[key] = m.group(1) if m else None
    except OSError:
        pass
if shutil.which("nvidia-smi"):
    info["gpu"] = first_line(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"])
cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
info["cxx"] = cxx
info["cxx_version"] = first_line([cxx, "--version"]) if cxx else None
lib = first_line([cxx, "-print-file-name=libstdc++.so.6"]) if cxx else None
info["libstdcxx"] = os.path.realpath(lib) if lib and os.path.exists(lib) else None
try:
    # collect_env is loaded from torch's own file with `import torch` blocked: it is written to run without
    # torch and then reads only the system (compilers, OS, libc, driver, GPUs, cuDNN). Importing torch would
    # cost ~1.6 s of CPU, taken from the runs beside the probe, for fields the lines above already hold.
    sys.modules["torch"] = None
    path = os.path.join(spec.submodule_search_locations[0], "utils", "collect_env.py")
    source = importlib.util.spec_from_file_location("collect_env", path)
    collect_env = importlib.util.module_from_spec(source)
    source.loader.exec_module(collect_env)
    skip = {"pip_packages", "conda_packages", "cpu_info"}
    # `pip list` would be the dearest part (~0.75 s of CPU) and is skipped anyway.
    collect_env.get_pip_packages = lambda run_lambda, patterns=None: (None, None)
    for key, value in collect_env.get_env_info()._asdict().items():
        if key not in skip and value not in (None, "", "N/A"):
            info["collect_env." + key] = " ".join(str(value).split())[:300]
except Exception as exc:
    info["collect_env"] = f"unavailable: {type(exc).__name__}: {exc}"[:300]
print("AOTI_BISECT_PROBE " + json.dumps(info))
"""

_ENV_PREFIXES = ("TORCH", "AOT", "AOTI", "INDUCTOR", "CUDA", "PYTORCH", "TRITON", "CXX", "CC", "NCCL", "LD_LIBRARY")


def relevant_env(env: dict[str, str]) -> dict[str, str]:
    """The variables that change AOTI/Inductor/CUDA behaviour."""
    return {k: v for k, v in sorted(env.items()) if k.startswith(_ENV_PREFIXES)}


def probe_environment(python: str, probe_dir: str, base_env: dict[str, str],
                      cancel: Optional[process.Cancel] = None) -> dict:
    """What the repro's interpreter sees: torch, its git revision, CUDA, GPU and driver, compiler."""
    os.makedirs(probe_dir, exist_ok=True)
    log = os.path.join(probe_dir, "environment.log")
    env = dict(base_env, PYTHONUNBUFFERED="1", TMPDIR=probe_dir)
    exit = process.execute([python, "-c", _PROBE], env, probe_dir, log, timeout=120, cancel=cancel)
    line = next((l for l in read_log(log).splitlines() if l.startswith("AOTI_BISECT_PROBE ")), None)
    if line is None:
        return {"probe_error": f"no answer from {python} (exit {exit.returncode}); see {log}"}
    return json.loads(line.split(" ", 1)[1])


class Session:
    def __init__(self, run_dir: str, argv: list[str], progress, jobs: int = 1, runs: Optional[int] = None,
                 max_runs: int = 10, timeout: float = 600.0, stages: tuple[str, ...] = (),
                 python_script: bool = True, limits: process.OutputLimits = process.OutputLimits(),
                 cache_root: Optional[str] = None, redact_paths: bool = False) -> None:
        self.run_dir = run_dir
        self.argv = argv
        self.progress = progress
        self.python_script = python_script
        self.harness = Harness(run_dir, jobs=jobs, limits=limits, cache_root=cache_root)
        self.options = Options(runs=runs, max_runs=max_runs, timeout=timeout, stages=stages)
        self.environment: dict = {}
        self.redactor = Redactor.from_env(dict(os.environ), redact_paths)

    def probe(self) -> Optional[str]:
        """Fills self.environment; returns an error line when the repro's Python cannot import torch."""
        python = self.argv[0] if self.python_script else sys.executable
        self.environment = probe_environment(python, os.path.join(self.run_dir, "probe"), self.harness.base_env,
                                             self.harness.cancel)
        if "probe_error" in self.environment:
            # Not fatal: the runs say for themselves whether the repro can run.
            return None
        self.environment["env"] = self.redactor.env(relevant_env(dict(os.environ)))
        if "torch_error" in self.environment and self.python_script:
            return f"torch is not importable by {python}: {self.environment['torch_error']}"
        return None

    def _run_batch(self, specs, stop, sink) -> None:
        def landed(r: RunResult) -> None:
            sink(r)
            self.progress.run(r)
        self.harness.run_many(specs, on_result=landed, stop=stop)

    def execute(self) -> Report:
        ladder = Ladder(self.argv, self._run_batch, self.options)
        self.progress.say(f"aoti-bisect: run directory {self.run_dir}")
        # The probe runs beside the baseline, not before it.
        probe: dict = {}
        thread = threading.Thread(target=lambda: probe.setdefault("problem", self.probe()), daemon=True)
        thread.start()
        try:
            outcome = ladder.run()
            thread.join()
        except KeyboardInterrupt:
            self.harness.cancel.set()
            outcome = ladder.partial()
            self.progress.say("aoti-bisect: interrupted; writing a partial report")
        problem = probe.get("problem")
        if problem and not outcome.interrupted:
            outcome = Findings(Verdict.ERROR, outcome.signature, outcome.baseline, outcome.stages, summary=problem)
            self.progress.say(f"aoti-bisect: error: {problem}")
        report = Report.from_findings(self.run_dir, self.argv, outcome, self.environment, self.redactor)
        report.write()
        self.progress.say(f"aoti-bisect: {report.headline()}")
        self.progress.say(f"aoti-bisect: report: {os.path.join(self.run_dir, 'report.md')}")
        return report
