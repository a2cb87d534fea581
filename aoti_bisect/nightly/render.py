"""A judged night's summary written out: summary.json, summary.md (a CI step summary) and junit.xml."""
from __future__ import annotations

import json
import os
import re
import urllib.parse
import xml.etree.ElementTree as ET
from collections import Counter

from tabulate import tabulate

from ..files.write import atomic_write, valid_utf8
from ..report.markdown import md_cell, md_code, rate_cell
from ..report.redact import process_redactor
from ..text import printable
from .judge import Change, Status, signature_label


def _hosts_line(data: dict) -> str:
    parts = []
    for key, label in (("torch", "torch"), ("torch_git", "git"), ("gpu", "GPU"), ("driver", "driver")):
        values = sorted({h.get(key) for h in data["hosts"] if h.get(key)})
        if values:
            parts.append(f"{label} {', '.join(values)}")
    return " · ".join(parts)


def memcheck_text(m: dict) -> str:
    """A repro's checked run in one line, beside its rate."""
    if m["skipped"] and not m["findings"]:
        return f"memcheck: skipped ({m['skipped']})"
    n = m["errors"] if m["errors"] is not None else len(m["findings"])
    text = f"memcheck: {n} invalid access{'' if n == 1 else 'es'}"
    if m["findings"]:
        text += f": {m['finding']}" + (" (new)" if any(f["new"] for f in m["findings"]) else "")
    return text


def render_markdown(data: dict) -> str:
    """Fits a CI step summary or a GitHub comment: a headline, one table, then the news in detail."""
    worse = data["worse"]
    head = f"**{len(worse)} changed for the worse**" if worse else "**nothing changed for the worse**"
    out = [f"# aoti-bisect nightly: {md_cell(os.path.basename(data['set'].rstrip('/')) or data['set'])}", "",
           f"{head} · batch {md_code(data['batch'])} · {md_cell(_hosts_line(data))}", ""]
    if not data["complete"]:
        out += ["> **Incomplete night:** " + md_cell("; ".join(data["problems"])), ""]
    checked = any(r["memcheck"] for r in data["repros"])
    rows = []
    for r in data["repros"]:
        change = md_cell(r["change"]["text"])
        if r["bisect_report"]:
            change += f" ([ladder report](<{urllib.parse.quote(r['bisect_report'])}>))"
        memcheck = (md_cell(memcheck_text(r["memcheck"])) if r["memcheck"] else "-",) if checked else ()
        rows.append((md_cell(r["name"]), r["status"], rate_cell(r["rate"]), *memcheck, len(r["signatures"]), change))
    out.append(tabulate(rows, headers=["repro", "status", "failed (rate, 95% CI)", *(("memory checker",) if checked
                                       else ()), "signatures", "change"], tablefmt="github"))
    sig_rows = [(md_cell(r["name"]), md_cell(f"{s['kind']}/{s['phase']}"), md_code(s["fingerprint"])
                 + (" **new**" if s["new"] else ""), s["count"], md_cell((s["first_seen"] or "")[:16]),
                 md_cell((s["last_seen"] or "")[:16]), md_cell(s.get("crash") or s.get("kernel") or "-"),
                 md_cell((s["message"] or "")[:160]))
                for r in data["repros"] for s in r["signatures"]]
    if sig_rows:
        # "where": the function a crashed run faulted in, told by its own native stack or core dump (else the
        # kernel the failure message names); signatures of crashes in different functions are different rows.
        out += ["", "## Failure signatures", "",
                tabulate(sig_rows, headers=["repro", "kind/phase", "fingerprint", "runs", "first seen (UTC)",
                                            "last seen (UTC)", "where", "message"], tablefmt="github")]
    out += ["", f"Rates are failures over runs that ran (infrastructure errors excluded), with 95% Wilson "
            f"intervals; a change is reported when Fisher's exact test against the last {data['window']} "
            f"nights gives p < {data['alpha']}. History: {md_code(data['db'])}."]
    return "\n".join(out) + "\n"


# XML 1.0 cannot carry most control characters, even escaped; a log line may hold any byte.
_NOT_XML = re.compile("[^\x09\x0a\x0d\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _x(text: object) -> str:
    """XML-safe text, with bidi and zero-width characters shown as escapes: CI shows these messages to people."""
    return _NOT_XML.sub("?", printable(str(text)))


def render_junit(data: dict) -> str:
    """One testcase per repro, failing exactly when the exit code does: a change for the worse is a
    <failure>, a repro that had only infrastructure errors an <error>. A repro that still fails, unchanged,
    is a known failure and reported the way pytest reports an expected failure (xfail): <skipped>, never
    passed, with type known_failure or flaky (plus Surefire's <flakyFailure> for readers that know it); one
    that never failed but whose memory checker found only known invalid accesses likewise, as known_silent."""
    suite = ET.Element("testsuite", name=_x(f"aoti-bisect nightly {data['batch']}"), timestamp=data["started"],
                       hostname=",".join(sorted({h.get("host") or "?" for h in data["hosts"]})))
    props = ET.SubElement(suite, "properties")
    for key in ("batch", "set", "db", "alpha", "window"):
        ET.SubElement(props, "property", name=key, value=_x(data[key]))
    counts: Counter[str] = Counter()
    for r in data["repros"]:
        case = ET.SubElement(suite, "testcase", name=_x(r["name"]), classname="aoti_bisect.nightly",
                             time=f"{r['duration_s']:.3f}")
        rate = rate_cell(r["rate"])
        change = r["change"]
        if r["status"] == Status.SKIPPED:
            ET.SubElement(case, "skipped", message=_x(r["skipped"]))
            counts["skipped"] += 1
        elif r["status"] == Status.INFRA_ERROR:
            ET.SubElement(case, "error", type="infra_error",
                          message=f"every run was an infrastructure error ({r['infra_errors']} runs)")
            counts["errors"] += 1
        elif change["change"] == Change.WORSE.value:
            ET.SubElement(case, "failure", type="changed_for_the_worse", message=_x(change["text"])).text = rate
            counts["failures"] += 1
        elif r["status"] == Status.REPRODUCED:
            ET.SubElement(case, "skipped", type="known_failure",
                          message=_x(f"known failure, reproduced in every run: {rate}; {change['text']}"))
            counts["skipped"] += 1
        elif r["status"] == Status.SILENT:
            # Invalid accesses seen before: a known bug that does not crash, reported as a known failure is.
            ET.SubElement(case, "skipped", type="known_silent",
                          message=_x(f"silent: {rate}; {memcheck_text(r['memcheck'])}; {change['text']}"))
            counts["skipped"] += 1
        elif r["status"] == Status.FLAKY:
            message = _x(f"flaky: {rate}; {change['text']}")
            ET.SubElement(case, "flakyFailure", type="flaky", message=message)
            ET.SubElement(case, "skipped", type="flaky", message=message)
            counts["skipped"] += 1
        ET.SubElement(case, "system-out").text = _x("\n".join(
            [f"rate: {rate}", f"change: {change['text']}"]
            + ([memcheck_text(r["memcheck"])] if r["memcheck"] else [])
            + [f"signature {signature_label(s)} x{s['count']}: {s['message']}"
               + (f" (faulted in {s['crash']})" if s.get("crash") else "") for s in r["signatures"]]))
    suite.set("tests", str(len(data["repros"])))
    for key in ("failures", "errors", "skipped"):
        suite.set(key, str(counts[key]))
    suite.set("time", f"{sum(r['duration_s'] for r in data['repros']):.3f}")
    root = ET.Element("testsuites", name="aoti-bisect nightly")
    root.append(suite)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def write_summaries(out: str, data: dict) -> None:
    """summary.json, summary.md and junit.xml, every string masked (report/redact.py): CI publishes them."""
    data = process_redactor().data(data)
    for name, text in (("summary.json", json.dumps(data, indent=2) + "\n"), ("summary.md", render_markdown(data)),
                       ("junit.xml", render_junit(data))):
        atomic_write(os.path.join(out, name), valid_utf8(text))


def render_history(rows: list[dict]) -> str:
    """`aoti-bisect history`'s table: one row per repro and night."""
    # A shared database is anyone's to write: its text reaches the terminal only with controls made visible.
    return tabulate([tuple(printable(c) if isinstance(c, str) else c for c in (
                         r["repro"], r["started"][:16].replace("T", " "), r["batch"], r["torch"],
                         (r["torch_git"] or "")[:10], r["gpu"] or "-", rate_cell(r), r["signatures"],
                         r["infra_errors"]))
                     for r in rows],
                    headers=["repro", "night (UTC)", "batch", "torch", "git", "gpu", "failed (rate, 95% CI)",
                             "signatures", "infra"])
