"""The scenario library: a manifest of real failing repros with known answers, and the checker."""
from __future__ import annotations

import json
import os
import re
import sys
import time
import tomllib
from dataclasses import asdict, dataclass, field
from typing import Optional

from tabulate import tabulate

from .diagnose.findings import CulpritKind, StageName
from .exits import UsageFailure
from .files.own import read_log
from .files.write import user_name
from .report.markdown import GAP_ROWS, GAP_SECTION, render_markdown
from .run import process
from .run.layout import headers_folder
from .verdict import Verdict

_HERE = os.path.dirname(os.path.abspath(__file__))
# A wheel carries the scenarios as aoti_bisect/scenario_data (setup.py maps the folder there); a source
# checkout, editable installs included, keeps them at the repository root, where the README runs them.
_PLACES = (os.path.join(_HERE, "scenario_data"), os.path.join(os.path.dirname(_HERE), "scenarios"))
SCENARIO_DIR = next((d for d in _PLACES if os.path.isfile(os.path.join(d, "manifest.toml"))), _PLACES[0])


@dataclass(frozen=True)
class Scenario:
    name: str
    script: str
    device: str
    demonstrates: str
    verdict: str
    kind: Optional[str]
    phase: Optional[str]
    culprit: dict
    flaky: bool
    rate: tuple[float, float]
    stage: str
    runs: int
    timeout: float
    observed: str = ""
    args: tuple[str, ...] = field(default_factory=tuple)
    sanitize: bool = False  # the ladder runs its memory checker even where the repro passes (--sanitize)
    evidence: tuple[str, ...] = ()  # regexes each of which the culprit's summary or evidence must match
    # A script (relative to this folder) and its args, run once before the bisection: what a repro needs to
    # find in place (a package built by someone else, a warm cache). `{setup}` in setup and args is the
    # scenario's own folder under the check's output, outside every run's folder.
    setup: tuple[str, ...] = ()
    line: Optional[str] = None  # `model.py:11`: a line the culprit kernel comes from (its provenance)
    # The check runs the baseline as a plain `aoti-bisect SCRIPT` does (adaptive, `runs` at most) instead of
    # exactly `runs` runs: where the ladder's own plan is what the scenario shows (a rare fault).
    adaptive: bool = False
    seconds: Optional[float] = None  # what `scenarios check` of it took, measured (the manifest says where)

    @property
    def path(self) -> str:
        return os.path.join(SCENARIO_DIR, self.script)

    def expected_culprit(self) -> str:
        c = self.culprit
        if c.get("kind") == CulpritKind.MODEL_INPUT:
            return f"model_input {c.get('input')}"
        said = f"{c['kind']} ~ {c['pattern']}" if c.get("pattern") else c.get("kind", "none")
        return said + (f" (cause {c['cause']})" if c.get("cause") else "")


def load_manifest(path: Optional[str] = None) -> list[Scenario]:
    with open(path or os.path.join(SCENARIO_DIR, "manifest.toml"), "rb") as f:
        data = tomllib.load(f)
    out = []
    for t in data.get("scenario", []):
        out.append(Scenario(
            name=t["name"], script=t["script"], device=t["device"], demonstrates=t["demonstrates"],
            verdict=t["verdict"], kind=t.get("kind"), phase=t.get("phase"), culprit=t.get("culprit", {}),
            flaky=t.get("flaky", False), rate=tuple(t.get("rate", (0.0, 1.0))), stage=t.get("stage", "baseline"),
            runs=t.get("runs", 2), timeout=t.get("timeout", 300), observed=t.get("observed", ""),
            args=tuple(t.get("args", ())), sanitize=t.get("sanitize", False),
            evidence=tuple(t.get("evidence", ())), setup=tuple(t.get("setup", ())), line=t.get("line"),
            adaptive=t.get("adaptive", False), seconds=t.get("seconds")))
    return out


def load_bundled() -> list[Scenario]:
    path = os.path.join(SCENARIO_DIR, "manifest.toml")
    if not os.path.isfile(path):
        raise UsageFailure(f"this installation of aoti-bisect lacks its scenarios ({path} is missing); "
                           "reinstall it, or run it from a source checkout")
    return load_manifest(path)


def list_table(scenarios: list[Scenario], wide: bool = False) -> str:
    """One row a scenario, within 100 columns; `wide` adds the phase, the expected culprit and what it
    demonstrates."""
    rows = [(s.name, s.device, s.kind or "-", _rate(s), s.stage, _seconds(s),
             *((s.phase or "-", s.expected_culprit(), s.demonstrates) if wide else ())) for s in scenarios]
    return tabulate(rows, headers=["name", "device", "kind", "rate", "pinned by", "seconds",
                                   *(("phase", "culprit", "demonstrates") if wide else ())], disable_numparse=True)


def list_json(scenarios: list[Scenario]) -> list[dict]:
    return [{**asdict(s), "expected_culprit": s.expected_culprit()} for s in scenarios]


def _rate(s: Scenario) -> str:
    return f"{s.rate[0]:.0%}-{s.rate[1]:.0%}" if s.flaky else ("0%" if s.verdict == Verdict.NOT_REPRODUCED else "100%")


def _seconds(s: Scenario) -> str:
    return f"{s.seconds:.0f}" if s.seconds is not None else "-"


# The manifest's word for a scenario whose bisection convicts no culprit: `culprit = { kind = "none" }`.
NO_CULPRIT = "none"


def expected_kind(expected: dict) -> Optional[CulpritKind]:
    """The culprit kind a scenario's manifest entry expects; None where it expects no culprit."""
    kind = expected.get("kind", NO_CULPRIT)
    return None if kind == NO_CULPRIT else CulpritKind(kind)


def culprit_matches(expected: dict, found: Optional[dict]) -> bool:
    kind = expected_kind(expected)
    if kind is None:
        return not found or not found.get("kind")
    if not found or found.get("kind") != kind:
        return False
    if kind == CulpritKind.MODEL_INPUT:
        return found.get("input_index") == expected.get("input")
    if expected.get("cause") and (found.get("precision") or {}).get("cause") != expected["cause"]:
        return False  # a precision question's cause, as its control recompile told it
    pattern = expected.get("pattern")
    return not pattern or bool(re.search(pattern, found.get("kernel") or found.get("op") or "", re.I))


def _found_culprit(c: Optional[dict]) -> str:
    if not c or not c.get("kind"):
        return "none"
    if c["kind"] == CulpritKind.MODEL_INPUT:
        return f"model_input {c.get('input_index')}"
    cause = (c.get("precision") or {}).get("cause")
    return f"{c['kind']} {c.get('kernel') or c.get('op') or ''}".strip() + (f" (cause {cause})" if cause else "")


def _gap_table(report: dict) -> list[str]:
    """A wrong value the eager stage pins has the per-kernel gap in report.md: a table of at most GAP_ROWS rows, or,
    where the walk compared no launch, why."""
    md = render_markdown(report)
    if GAP_SECTION not in md:
        return ["report.md has no per-kernel numeric gap"]
    section = md.split(GAP_SECTION, 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| #")]
    if len(rows) > GAP_ROWS:
        return [f"report.md's numeric gap has {len(rows)} rows, over {GAP_ROWS}"]
    return [] if rows or not (report.get("culprit") or {}).get("gaps") else ["report.md's numeric gap has no row"]


def compare(s: Scenario, report: dict) -> list[str]:
    """Mismatches between the manifest's answer and the report (empty: the tool got it right)."""
    problems = []
    sig = report.get("signature") or {}
    if report["verdict"] != s.verdict:
        problems.append(f"verdict {report['verdict']} != {s.verdict}")
    if s.kind and sig.get("kind") != s.kind:
        problems.append(f"kind {sig.get('kind')} != {s.kind}")
    if s.phase and sig.get("phase") != s.phase:
        problems.append(f"phase {sig.get('phase')} != {s.phase}")
    if not culprit_matches(s.culprit, report.get("culprit")):
        problems.append(f"culprit {_found_culprit(report.get('culprit'))} != {s.expected_culprit()}")
    c = report.get("culprit") or {}
    told = "\n".join([c.get("summary") or "", *(c.get("evidence") or [])])
    problems += [f"culprit evidence lacks /{e}/" for e in s.evidence if not re.search(e, told)]
    lines = [line.get("where") for line in (c.get("origin") or {}).get("lines") or ()]
    if s.line and s.line not in lines:
        problems.append(f"culprit source {', '.join(lines) or 'none'} lacks {s.line}")
    if s.stage == StageName.EAGER:  # a wrong value: the per-kernel gap is in report.md
        problems += _gap_table(report)
    lo, hi = report["reproduction"]["ci95"]
    if s.flaky and (hi < s.rate[0] or lo > s.rate[1]):
        problems.append(f"rate CI {lo:.0%}-{hi:.0%} outside the expected {s.rate[0]:.0%}-{s.rate[1]:.0%}")
    return problems


def cuda_visible(run_dir: str) -> bool:
    log = os.path.join(run_dir, "cuda-probe.log")
    code = "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"
    exit = process.execute([sys.executable, "-c", code], dict(os.environ), run_dir, log, timeout=120)
    return exit.returncode == 0 and "Error" not in read_log(log)


def in_setup(args: tuple[str, ...], folder: str) -> list[str]:
    """A scenario's setup or args with `{setup}` naming its setup folder."""
    return [a.replace("{setup}", folder) for a in args]


def run_setup(s: Scenario, folder: str, headers: Optional[str] = None) -> Optional[str]:
    """Runs the scenario's setup step in `folder` (its compile cache and temporary files stay there); None when
    it succeeded or there is none, else why it failed, in one line. `headers`: the precompiled headers' folder of
    the runs (run/layout.py), linked in as the setup's $TMPDIR/torchinductor_<user> so that its compile builds
    them for the runs, not once more for itself."""
    if not s.setup:
        return None
    os.makedirs(os.path.join(folder, "tmp"), exist_ok=True)
    link = os.path.join(folder, "tmp", f"torchinductor_{user_name()}")
    if headers and not os.path.lexists(link):
        os.makedirs(headers, exist_ok=True)
        os.symlink(headers, link)
    argv = [sys.executable, os.path.join(SCENARIO_DIR, s.setup[0]), *in_setup(s.setup[1:], folder)]
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": os.path.join(folder, "inductor"),
           "TMPDIR": os.path.join(folder, "tmp")}
    log = os.path.join(folder, "setup.log")
    exit = process.execute(argv, env, folder, log, s.timeout)
    if exit.launch_error or exit.returncode != 0:
        return f"setup {s.setup[0]} failed ({exit.launch_error or f'exit {exit.returncode}'}); see {log}"
    return None


def check(scenarios: list[Scenario], run_dir: str, jobs: int = 1, stages: tuple[str, ...] = (),
          device: str = "auto", reuse: str = "hooked", ahead: bool = True) -> bool:
    from .config import RunConfig
    from .progress import Progress
    from .session import Session

    has_cuda = device == "cuda" or (device == "auto" and cuda_visible(run_dir))
    rows, ok = [], True
    results: list[dict[str, object]] = []
    for s in scenarios:
        if s.device == "cuda" and not has_cuda:
            rows.append((s.name, s.device, "SKIPPED", "no CUDA GPU visible", "", "", "", ""))
            results.append({"name": s.name, "status": "skipped", "why": "no CUDA GPU visible"})
            continue
        if device == "cpu" and s.device != "cpu":
            continue
        print(f"scenario {s.name}: {s.demonstrates}", file=sys.stderr, flush=True)
        started = time.monotonic()
        setup_dir = os.path.join(run_dir, "setup", s.name)
        problem = run_setup(s, setup_dir, headers_folder(os.path.realpath(os.path.join(run_dir, "cache"))))
        if problem:
            ok = False
            rows.append((s.name, s.device, "MISMATCH", problem, "", "", "", ""))
            results.append({"name": s.name, "status": "mismatch", "problems": [problem]})
            print(f"scenario {s.name}: MISMATCH: {problem}", file=sys.stderr, flush=True)
            continue
        args = in_setup(s.args, setup_dir)
        config = RunConfig(os.path.join(run_dir, s.name), (sys.executable, s.path, *args), jobs=jobs,
                           runs=None if s.adaptive else s.runs, max_runs=s.runs if s.adaptive else max(s.runs, 10),
                           timeout=s.timeout, stages=("baseline", *stages),
                           cache_root=os.path.join(run_dir, "cache"), sanitize=s.sanitize, reuse=reuse, ahead=ahead,
                           # The check compares the verdict and the rate so far with the manifest; the rate a
                           # user gets on after a checker's verdict (--budget) would only lengthen it.
                           budget=0.0)
        session = Session(config, Progress(indent="  ", runs_only=True))
        report = session.execute().data
        problems = compare(s, report)
        ok &= not problems
        sig = report.get("signature") or {}
        r = report["reproduction"]
        rows.append((s.name, s.device, "ok" if not problems else "MISMATCH",
                     f"{report['verdict']} / {s.verdict}", f"{sig.get('kind')} / {s.kind}",
                     f"{sig.get('phase')} / {s.phase}",
                     f"{_found_culprit(report.get('culprit'))} / {s.expected_culprit()}",
                     f"{r['failures']}/{r['runs']} / {s.rate[0]:.0%}-{s.rate[1]:.0%}"))
        results.append({"name": s.name, "status": "ok" if not problems else "mismatch", "problems": problems,
                        "run_dir": session.run_dir, "seconds": round(time.monotonic() - started, 1)})
        print(f"scenario {s.name}: {'ok' if not problems else 'MISMATCH: ' + '; '.join(problems)}",
              file=sys.stderr, flush=True)
    table = tabulate(rows, headers=["scenario", "device", "status", "verdict (found / expected)",
                                    "kind", "phase", "culprit", "rate"], tablefmt="github")
    print(table)
    with open(os.path.join(run_dir, "scenarios-check.json"), "w") as f:
        json.dump(results, f, indent=2)
    with open(os.path.join(run_dir, "scenarios-check.md"), "w") as f:
        f.write(table + "\n")
    return ok
