"""A night's verdicts: per-repro rates, signatures and changes, as JSON, Markdown and JUnit XML."""
from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from collections import Counter
from typing import Optional

from tabulate import tabulate

from .. import __version__
from ..exits import EXIT_INFRA, EXIT_NOT_REPRODUCED, EXIT_REPRODUCED
from ..report.markdown import md_cell, rate_cell
from ..stats import Rate
from .history import History
from .judge import Change, judge
from .records import Night

SUMMARY_SCHEMA = 1


def signature_label(s: dict) -> str:
    return f"{s['kind']}/{s['phase']} {s['fingerprint']}"


def _status(rate: Rate, skipped: Optional[str]) -> str:
    if skipped:
        return "skipped"
    if rate.runs == 0:
        return "infra_error"
    if rate.failures == 0:
        return "not_reproduced"
    return "reproduced" if rate.failures == rate.runs else "flaky"


def build(night: Night, history: History, alpha: float = 0.01, window: int = 7,
          bisect_reports: Optional[dict[str, str]] = None) -> dict:
    """Judges every repro of the night against its history; the night must already be in the history."""
    repros = []
    for name, meta in night.repros.items():
        runs = [r for r in night.runs if r["repro"] == name]
        counted = [r for r in runs if r["outcome"] != "infra_error"]
        failed = [r for r in counted if r["outcome"] in ("failed", "crashed", "timeout")]
        rate = Rate(len(failed), len(counted))
        seen = history.seen(name)
        known = history.known_fingerprints(name, night)
        baseline = history.baseline(name, night, window)
        signatures = []
        for fp, count in Counter(r["fingerprint"] for r in failed).most_common():
            example = next(r for r in failed if r["fingerprint"] == fp)
            first, last = seen.get(fp, (None, None))
            signatures.append({"fingerprint": fp, "kind": example["kind"], "phase": example["phase"],
                               "message": example["message"], "kernel": example["kernel"], "count": count,
                               "first_seen": first, "last_seen": last,
                               "new": baseline is not None and fp not in known, "example_log": example["log"]})
        new = tuple(signature_label(s) for s in signatures if s["new"])
        change = judge(rate, baseline, new, alpha).to_json()
        if meta.get("skipped"):
            change["text"] = f"not run: {meta['skipped']}"
        repros.append({
            "name": name, "argv": meta["argv"], "status": _status(rate, meta.get("skipped")),
            "skipped": meta.get("skipped"), "rate": rate.to_json(), "infra_errors": len(runs) - len(counted),
            "duration_s": round(sum(r["duration_s"] or 0 for r in runs), 1), "signatures": signatures,
            "change": change,
            "baseline": None if baseline is None else {**baseline.rate.to_json(), "nights": baseline.nights,
                                                       "torch": baseline.torch, "torch_git": baseline.torch_git},
            "torch": sorted({r["torch"] or "?" for r in runs}),
            "bisect_report": (bisect_reports or {}).get(name)})
    worse = [r["name"] for r in repros if r["change"]["change"] == Change.WORSE.value]
    if worse:
        code = EXIT_REPRODUCED
    elif any(r["status"] == "infra_error" for r in repros):
        code = EXIT_INFRA
    else:
        code = EXIT_NOT_REPRODUCED
    return {"schema": SUMMARY_SCHEMA, "tool": f"aoti-bisect {__version__}", "batch": night.batch,
            "set": night.set_path, "started": night.started, "finished": night.finished,
            "complete": night.complete, "problems": night.problems, "shards": night.shards, "plan": night.plan,
            "hosts": night.hosts, "db": history.path, "alpha": alpha, "window": window, "worse": worse,
            "exit_code": code, "repros": repros}


def changed(data: dict) -> list[str]:
    """Repros whose signature is new or whose rate changed either way: the ones worth a full ladder."""
    return [r["name"] for r in data["repros"]
            if r["change"]["change"] in (Change.WORSE.value, Change.BETTER.value)]


def _hosts_line(data: dict) -> str:
    parts = []
    for key, label in (("torch", "torch"), ("torch_git", "git"), ("gpu", "GPU"), ("driver", "driver")):
        values = sorted({h.get(key) for h in data["hosts"] if h.get(key)})
        if values:
            parts.append(f"{label} {', '.join(values)}")
    return " · ".join(parts)


def render_markdown(data: dict) -> str:
    """Fits a CI step summary or a GitHub comment: a headline, one table, then the news in detail."""
    worse = data["worse"]
    head = f"**{len(worse)} changed for the worse**" if worse else "**nothing changed for the worse**"
    out = [f"# aoti-bisect nightly: {md_cell(os.path.basename(data['set'].rstrip('/')) or data['set'])}", "",
           f"{head} · batch `{md_cell(data['batch'])}` · {md_cell(_hosts_line(data))}", ""]
    if not data["complete"]:
        out += ["> **Incomplete night:** " + md_cell("; ".join(data["problems"])), ""]
    rows = []
    for r in data["repros"]:
        change = md_cell(r["change"]["text"])
        if r["bisect_report"]:
            change += f" ([ladder report](<{r['bisect_report']}>))"
        rows.append((md_cell(r["name"]), r["status"], rate_cell(r["rate"]), len(r["signatures"]), change))
    out.append(tabulate(rows, headers=["repro", "status", "failed (rate, 95% CI)", "signatures", "change"],
                        tablefmt="github"))
    sig_rows = [(md_cell(r["name"]), md_cell(f"{s['kind']}/{s['phase']}"), f"`{s['fingerprint']}`"
                 + (" **new**" if s["new"] else ""), s["count"], md_cell((s["first_seen"] or "")[:16]),
                 md_cell((s["last_seen"] or "")[:16]), md_cell((s["message"] or "")[:160]))
                for r in data["repros"] for s in r["signatures"]]
    if sig_rows:
        out += ["", "## Failure signatures", "",
                tabulate(sig_rows, headers=["repro", "kind/phase", "fingerprint", "runs", "first seen (UTC)",
                                            "last seen (UTC)", "message"], tablefmt="github")]
    out += ["", f"Rates are failures over runs that ran (infrastructure errors excluded), with 95% Wilson "
            f"intervals; a change is reported when Fisher's exact test against the last {data['window']} "
            f"nights gives p < {data['alpha']}. History: `{md_cell(data['db'])}`."]
    return "\n".join(out) + "\n"


# XML 1.0 cannot carry most control characters, even escaped; a log line may hold any byte.
_NOT_XML = re.compile("[^\x09\x0a\x0d\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _x(text: object) -> str:
    return _NOT_XML.sub("?", str(text))


def render_junit(data: dict) -> str:
    """One testcase per repro. A repro that fails every run is a failure; one that fails some runs is marked
    flaky the way Maven Surefire and Jenkins read it (<flakyFailure> in a passing case), unless it changed
    for the worse, which is a failure either way."""
    suite = ET.Element("testsuite", name=_x(f"aoti-bisect nightly {data['batch']}"), timestamp=data["started"],
                       hostname=",".join(sorted({h.get("host") or "?" for h in data["hosts"]})))
    props = ET.SubElement(suite, "properties")
    for key in ("batch", "set", "db", "alpha", "window"):
        ET.SubElement(props, "property", name=key, value=_x(data[key]))
    counts = Counter()
    for r in data["repros"]:
        case = ET.SubElement(suite, "testcase", name=_x(r["name"]), classname="aoti_bisect.nightly",
                             time=f"{r['duration_s']:.3f}")
        rate = rate_cell(r["rate"])
        change = r["change"]
        if r["status"] == "skipped":
            ET.SubElement(case, "skipped", message=_x(r["skipped"]))
            counts["skipped"] += 1
        elif r["status"] == "infra_error":
            ET.SubElement(case, "error", type="infra_error",
                          message=f"every run was an infrastructure error ({r['infra_errors']} runs)")
            counts["errors"] += 1
        elif change["change"] == Change.WORSE.value:
            ET.SubElement(case, "failure", type="changed_for_the_worse", message=_x(change["text"])).text = rate
            counts["failures"] += 1
        elif r["status"] == "reproduced":
            ET.SubElement(case, "failure", type="reproduced", message=f"reproduced in every run: {rate}")
            counts["failures"] += 1
        elif r["status"] == "flaky":
            ET.SubElement(case, "flakyFailure", type="flaky", message=_x(f"flaky: {rate}; {change['text']}"))
        ET.SubElement(case, "system-out").text = _x("\n".join(
            [f"rate: {rate}", f"change: {change['text']}"]
            + [f"signature {signature_label(s)} x{s['count']}: {s['message']}" for s in r["signatures"]]))
    suite.set("tests", str(len(data["repros"])))
    for key in ("failures", "errors", "skipped"):
        suite.set(key, str(counts[key]))
    suite.set("time", f"{sum(r['duration_s'] for r in data['repros']):.3f}")
    root = ET.Element("testsuites", name="aoti-bisect nightly")
    root.append(suite)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
