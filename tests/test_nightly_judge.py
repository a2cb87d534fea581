"""Judging a night: change detection across nights, the summaries (JSON, Markdown, JUnit) and exit codes."""
import json

import pytest

from nightly_helpers import (
    SEEDED,
    by_name,
    junit_checked,
    manifest,
    nightly,
    seeded_failures,
    seeded_set,
    summary,
    tool,
)


# 20 runs a night: every change below is still decided (fixed 8/20 -> 0/20, p = 0.003 < the default alpha 0.01;
# rising 0/20 -> 12/20, p < 0.001; steady 3/20 both nights) in half the runs of 40, each a Python process.
RUNS = 20


@pytest.mark.slow
def test_two_nights_judge_changes_and_report_them(tmp_path):
    night1 = {"steady": (0.3, 1), "rising": (0.05, 2), "fixed": (0.5, 3), "new_way": (0.3, 4)}
    night2 = {"steady": (0.3, 1), "rising": (0.6, 2), "fixed": (0.0, 3), "new_way": (0.3, 4, "abort")}
    first = nightly(tmp_path, seeded_set(tmp_path / "n1.toml", night1), "n1", "--runs", str(RUNS))
    assert first.returncode == 0, first.stderr
    assert {r["change"]["change"] for r in summary(tmp_path, "n1")["repros"]} == {"first_night"}

    second = nightly(tmp_path, seeded_set(tmp_path / "n2.toml", night2), "n2", "--runs", str(RUNS), "--json")
    assert second.returncode == 1, second.stderr
    data = json.loads(second.stdout)
    assert data == summary(tmp_path, "n2")
    repros = by_name(data)
    assert repros["steady"]["change"]["change"] == "unchanged"
    assert repros["rising"]["change"]["change"] == "worse"
    assert repros["rising"]["change"]["p_value"] < 0.01
    assert repros["rising"]["change"]["text"].startswith("now reproduces at ")
    assert repros["fixed"]["change"]["change"] == "better"
    assert repros["fixed"]["change"]["text"].startswith("no longer reproduces in 20 runs (95% upper bound 16%")
    assert repros["new_way"]["change"]["change"] == "worse"
    assert "new signature: abort/" in repros["new_way"]["change"]["text"]
    assert [s["new"] for s in repros["new_way"]["signatures"]] == [True]
    assert sorted(data["worse"]) == ["new_way", "rising"]
    assert repros["rising"]["baseline"]["nights"] == 1 and repros["rising"]["baseline"]["runs"] == RUNS

    md = (tmp_path / "n2" / "summary.md").read_text()
    assert "**2 changed for the worse**" in md and "| rising " in md and "now reproduces at" in md

    doc, cases = junit_checked(tmp_path / "n2" / "junit.xml")
    assert set(cases) == set(night2)
    assert [type(r).__name__ for r in cases["rising"].result] == ["Failure"]
    assert "now reproduces at" in cases["rising"].result[0].message
    assert cases["fixed"].is_passed
    # A flaky repro that did not change is a known failure: skipped (as pytest reports xfail), never passed.
    assert [type(r).__name__ for r in cases["steady"].result] == ["Skipped"]
    assert doc.xpath("//testcase[@name='steady']/flakyFailure/@message")[0].startswith("flaky: ")
    suite = doc.xpath("//testsuite")[0]
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("4", "2", "0")

    trend = tool(tmp_path, "history", "--db", "history.sqlite3", "rising", "--json", "--plot", "trend.png")
    assert trend.returncode == 0, trend.stderr
    rows = json.loads(trend.stdout)
    assert [r["failures"] for r in rows] == [seeded_failures(p, 2, range(RUNS)) for p in (0.05, 0.6)]
    assert (tmp_path / "trend.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = tool(tmp_path, "history", "--db", "history.sqlite3")
    assert table.returncode == 0 and table.stdout.count("new_way") == 2


@pytest.mark.slow
def test_bisect_on_change_runs_the_ladder_and_links_its_report(tmp_path):
    script = tmp_path / "breaks.py"
    script.write_text("import sys\nif sys.argv[1] == 'bad':\n    raise ValueError('broken tonight')\n")
    good = nightly(tmp_path, manifest(tmp_path / "good.toml", {"r": (str(script), ["good"])}), "n1", "--runs", "10")
    assert good.returncode == 0, good.stderr
    bad = nightly(tmp_path, manifest(tmp_path / "bad.toml", {"r": (str(script), ["bad"])}), "n2", "--runs", "10",
                  "--bisect-on-change")
    assert bad.returncode == 1, bad.stderr
    r = summary(tmp_path, "n2")["repros"][0]
    assert r["change"]["change"] == "worse" and r["bisect_report"] == "bisect/r/report.md"
    report = json.loads((tmp_path / "n2" / "bisect" / "r" / "report.json").read_text())
    assert report["verdict"] == "reproduced"
    # the whole ladder, not the baseline alone: a night asks for every stage
    assert not [s["name"] for s in report["stages"] if (s.get("skipped") or "").startswith("not requested")]
    assert "(<bisect/r/report.md>)" in (tmp_path / "n2" / "summary.md").read_text()


def test_a_repro_that_cannot_run_is_an_infrastructure_error_not_a_pass(tmp_path):
    script = tmp_path / "no_gpu.py"
    script.write_text('raise RuntimeError("Found no NVIDIA driver on your system")\n')
    set_path = manifest(tmp_path / "set.toml", {"cannot_run": (str(script), []), "fine": (SEEDED, ["0.0", "1"])})
    night = nightly(tmp_path, set_path, "night", "--runs", "3")
    assert night.returncode == 3, night.stderr
    repros = by_name(summary(tmp_path, "night"))
    assert repros["cannot_run"]["status"] == "infra_error" and repros["cannot_run"]["infra_errors"] == 3
    assert repros["cannot_run"]["rate"]["runs"] == 0 and repros["fine"]["status"] == "not_reproduced"
    doc, cases = junit_checked(tmp_path / "night" / "junit.xml")
    assert [type(r).__name__ for r in cases["cannot_run"].result] == ["Error"] and cases["fine"].is_passed
