"""Judging a night: each repro's rate and signatures against its earlier nights (a statistical test), the
summary that says so, and the night's exit code."""
from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass
from typing import Optional

from .. import __version__
from ..exits import EXIT_INFRA, EXIT_NOT_REPRODUCED, EXIT_REPRODUCED
from ..run.types import Outcome
from ..stats import Rate, fisher_exact
from .history import Baseline, History
from .records import Night

SUMMARY_SCHEMA = 1


class Change(str, enum.Enum):
    WORSE = "worse"
    BETTER = "better"
    UNCHANGED = "unchanged"
    FIRST_NIGHT = "first_night"
    NO_DATA = "no_data"


class Status(enum.StrEnum):
    """What a repro did tonight, in summary.json and junit.xml."""
    SKIPPED = "skipped"  # not run (the set said why)
    INFRA_ERROR = "infra_error"  # every run was an infrastructure error
    SILENT = "silent"  # no run failed, yet the memory checker saw invalid accesses
    NOT_REPRODUCED = "not_reproduced"
    REPRODUCED = "reproduced"  # every run failed
    FLAKY = "flaky"  # some runs failed


@dataclass(frozen=True)
class Judgement:
    change: Change
    text: str
    p_value: Optional[float] = None
    new_signatures: tuple[str, ...] = ()

    def to_json(self) -> dict:
        return {"change": self.change.value, "text": self.text,
                "p_value": None if self.p_value is None else round(self.p_value, 6),
                "new_signatures": list(self.new_signatures)}


def _pct(rate: Rate) -> str:
    return f"{rate.value:.0%}"


def _p(p: float) -> str:
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def judge(now: Rate, before: Optional[Baseline], new_signatures: tuple[str, ...], alpha: float,
          new_findings: tuple[str, ...] = ()) -> Judgement:
    """A rate change counts only when Fisher's exact test rejects "same rate" at `alpha` (two-sided); a
    failure signature, or a memory checker's finding, never seen on this repro before is news on its own,
    whatever the rate does."""
    rated = _judge_rate(now, before, new_signatures, alpha)
    if not new_findings:
        return rated
    text = f"{rated.text}; new memcheck finding{'s' if len(new_findings) > 1 else ''}: {'; '.join(new_findings)}"
    return Judgement(Change.WORSE, text, rated.p_value, rated.new_signatures)


def _judge_rate(now: Rate, before: Optional[Baseline], new_signatures: tuple[str, ...], alpha: float) -> Judgement:
    if now.runs == 0:
        return Judgement(Change.NO_DATA, "no runs counted (all skipped or infrastructure errors)")
    if before is None or before.rate.runs == 0:
        return Judgement(Change.FIRST_NIGHT, f"first night: {now.describe()}")
    nights = f"{before.nights} night{'s' if before.nights > 1 else ''}"
    p = fisher_exact(now.failures, now.runs, before.rate.failures, before.rate.runs)
    rate = f"{_pct(now)} ({now.failures}/{now.runs}; was {_pct(before.rate)}, " \
           f"{before.rate.failures}/{before.rate.runs} over {nights}; {_p(p)})"
    if p >= alpha:
        change, text = Change.UNCHANGED, f"unchanged at {rate}"
    elif now.value > before.rate.value:
        change, text = Change.WORSE, f"now reproduces at {rate}"
    elif now.failures == 0:
        change, text = Change.BETTER, f"no longer reproduces in {now.runs} runs (95% upper bound " \
                                      f"{now.ci95[1]:.0%}; was {_pct(before.rate)}, {_p(p)})"
    else:
        change, text = Change.BETTER, f"now reproduces at only {rate}"
    if new_signatures:
        change = Change.WORSE
        text += f"; new signature{'s' if len(new_signatures) > 1 else ''}: {', '.join(new_signatures)}"
    return Judgement(change, text, p, new_signatures)


def signature_label(s: dict) -> str:
    return f"{s['kind']}/{s['phase']} {s['fingerprint']}"


def _status(rate: Rate, skipped: Optional[str], memcheck: Optional[dict]) -> Status:
    if skipped:
        return Status.SKIPPED
    if rate.runs == 0:
        return Status.INFRA_ERROR
    if rate.failures == 0:
        # No run failed, yet the checker saw invalid accesses: the bug is there, only silent.
        return Status.SILENT if memcheck and memcheck["findings"] else Status.NOT_REPRODUCED
    return Status.REPRODUCED if rate.failures == rate.runs else Status.FLAKY


def summarize(night: Night, history: History, alpha: float = 0.01, window: int = 7) -> dict:
    """Judges every repro of the night against its history; the night must already be in the history."""
    repros = []
    for name, meta in night.repros.items():
        runs = [r for r in night.runs if r["repro"] == name]
        counted = [r for r in runs if r["outcome"] != Outcome.INFRA_ERROR.value]
        failed = [r for r in counted if Outcome(r["outcome"]).is_failure]
        rate = Rate(len(failed), len(counted))
        past = history.past(name, night, window)
        baseline = past.baseline
        signatures = []
        for fp, count in Counter(r["fingerprint"] for r in failed).most_common():
            example = next(r for r in failed if r["fingerprint"] == fp)
            first, last = past.seen.get(fp, (None, None))
            signatures.append({"fingerprint": fp, "kind": example["kind"], "phase": example["phase"],
                               "message": example["message"], "kernel": example["kernel"], "count": count,
                               "crash": example.get("crash"),
                               "first_seen": first, "last_seen": last,
                               "new": baseline is not None and fp not in past.known_fingerprints,
                               "example_log": example["log"]})
        new = tuple(signature_label(s) for s in signatures if s["new"])
        checked = night.memchecks.get(name)
        memcheck = _memcheck(checked, past.memcheck_known)
        new_findings = tuple(f["description"] for f in (memcheck or {}).get("findings", ()) if f["new"])
        change = judge(rate, baseline, new, alpha, new_findings).to_json()
        if meta.get("skipped"):
            change["text"] = f"not run: {meta['skipped']}"
        repros.append({
            "name": name, "argv": meta["argv"], "status": _status(rate, meta.get("skipped"), memcheck),
            "skipped": meta.get("skipped"), "rate": rate.to_json(), "infra_errors": len(runs) - len(counted),
            "duration_s": round(sum(r["duration_s"] or 0 for r in runs) + ((checked or {}).get("duration_s") or 0), 1),
            "signatures": signatures,
            "change": change, "memcheck": memcheck,
            "baseline": None if baseline is None else {**baseline.rate.to_json(), "nights": baseline.nights,
                                                       "torch": baseline.torch, "torch_git": baseline.torch_git},
            "torch": sorted({r["torch"] or "?" for r in runs}),
            "bisect_report": None})
    worse = [r["name"] for r in repros if r["change"]["change"] == Change.WORSE.value]
    return {"schema": SUMMARY_SCHEMA, "tool": f"aoti-bisect {__version__}", "batch": night.batch,
            "set": night.set_path, "started": night.started, "finished": night.finished,
            "complete": night.complete, "problems": night.problems, "shards": night.shards, "plan": night.plan,
            "hosts": night.hosts, "db": history.path, "alpha": alpha, "window": window, "worse": worse,
            "exit_code": exit_code(repros), "repros": repros}


def _memcheck(record: Optional[dict], known: Optional[frozenset[str]]) -> Optional[dict]:
    """A repro's checked run for the summary; None when the night made none. A finding is new only against
    earlier checked nights, as a signature is only against earlier nights: the first night it is looked for
    it is the baseline."""
    if record is None:
        return None
    skipped = record["skipped"]
    if skipped is None and record["refused"]:
        skipped = f"{record['tool']} could not check this repro: {record['refused']}"
    elif skipped is None and record["errors"] is None and not record["findings"]:
        skipped = f"{record['tool']} never finished (crashed or timed out before its summary)"
    findings = [{**f, "new": known is not None and f["fingerprint"] not in known} for f in record["findings"]]
    return {"tool": record["tool"], "errors": record["errors"],
            "finding": findings[0]["description"] if findings else None, "skipped": skipped,
            "findings": findings, "log": record["log"]}


def exit_code(repros: list[dict]) -> int:
    """1 when anything changed for the worse, else 3 when a repro had only infrastructure errors, else 0."""
    if any(r["change"]["change"] == Change.WORSE.value for r in repros):
        return EXIT_REPRODUCED
    if any(r["status"] == Status.INFRA_ERROR for r in repros):
        return EXIT_INFRA
    return EXIT_NOT_REPRODUCED


def changed(data: dict) -> list[str]:
    """Repros whose signature is new or whose rate changed either way: the ones worth a full ladder."""
    return [r["name"] for r in data["repros"]
            if r["change"]["change"] in (Change.WORSE.value, Change.BETTER.value)]


def attach_reports(data: dict, reports: dict[str, str]) -> None:
    """Links each bisected repro's ladder report (a path relative to the night folder) into the summary."""
    for r in data["repros"]:
        r["bisect_report"] = reports.get(r["name"], r["bisect_report"])
