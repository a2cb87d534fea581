"""`aoti-bisect nightly --sanitize`: one checked run per repro, its record line, its history table (schema v2,
upgraded in place from v1) and its judging (status silent; a finding never seen before is news).

Real nightly processes throughout; tests/repros/fake_checker.py stands in for valgrind and compute-sanitizer (it
runs the repro, then prints that checker's report), as the real checkers are proven in test_sanitizer,
test_memcheck and test_e2e."""
import json
import os
import shutil
import sqlite3
import sys

import pytest

from aoti_bisect.nightly.records import RecordError, read_records
from nightly_helpers import HERE, by_name, junit_checked, nightly, summary, tool

FAKE = os.path.join(HERE, "repros", "fake_checker.py")


def _checker(folder, name):
    """The fake checker as an executable called `name` in folder."""
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(f"#!{sys.executable}\n" + open(FAKE).read())
    path.chmod(0o755)
    return str(path)


def _set(tmp_path, devices):
    """A set of repros that never fail (they print ok), one per name, on the devices given."""
    (tmp_path / "quiet.py").write_text("print('ok')\n")
    (tmp_path / "set.toml").write_text("".join(
        f'[[repro]]\nname = "{name}"\nscript = "quiet.py"\ndevice = "{device}"\ntimeout = 60\n\n'
        for name, device in devices.items()))
    return "set.toml"


def _cpu_night(tmp_path, out, finds, *args):
    """A night with a fake valgrind first on PATH, reporting an invalid read in `finds` (None: clean)."""
    _checker(tmp_path / "bin", "valgrind")
    env = {"PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}", "FAKE_CHECKER_FINDS": finds or ""}
    return nightly(tmp_path, "set.toml", out, "--runs", "2", "--sanitize", "--batch", out, *args, env=env)


@pytest.mark.slow
def test_a_silent_finding_is_news_the_first_night_it_differs_and_known_after(tmp_path):
    _set(tmp_path, {"quiet": "cpu"})
    clean = _cpu_night(tmp_path, "n1", None)
    assert clean.returncode == 0, clean.stderr
    r = by_name(summary(tmp_path, "n1"))["quiet"]
    assert r["status"] == "not_reproduced"
    assert {k: r["memcheck"][k] for k in ("tool", "errors", "finding", "skipped")} == \
        {"tool": "valgrind", "errors": 0, "finding": None, "skipped": None}
    # The checked run is the repro behind the checker's options, in the checker's environment.
    log = open(r["memcheck"]["log"]).read()
    assert "PYTHONMALLOC=malloc options=--tool=memcheck" in log and "\nok\n" in log

    found = _cpu_night(tmp_path, "n2", "oob_kernel_3")
    assert found.returncode == 1, found.stderr
    data = summary(tmp_path, "n2")
    r = by_name(data)["quiet"]
    assert r["status"] == "silent" and r["rate"]["failures"] == 0 and data["worse"] == ["quiet"]
    assert r["memcheck"]["errors"] == 2 and r["memcheck"]["finding"].startswith("Invalid read of size 4 bytes in "
                                                                               "oob_kernel_3 (oob.cpp:12)")
    assert [f["new"] for f in r["memcheck"]["findings"]] == [True]
    assert "new memcheck finding: Invalid read" in r["change"]["text"]
    md = (tmp_path / "n2" / "summary.md").read_text()
    assert "memcheck: 2 invalid accesses: Invalid read of size 4 bytes in oob_kernel_3" in md
    _, cases = junit_checked(tmp_path / "n2" / "junit.xml")
    assert [type(x).__name__ for x in cases["quiet"].result] == ["Failure"]
    assert "new memcheck finding" in cases["quiet"].result[0].message

    # The same access in a renumbered kernel is the same finding: shown, not news.
    again = _cpu_night(tmp_path, "n3", "oob_kernel_7")
    assert again.returncode == 0, again.stderr
    r = by_name(summary(tmp_path, "n3"))["quiet"]
    assert r["status"] == "silent" and [f["new"] for f in r["memcheck"]["findings"]] == [False]
    assert r["change"]["change"] == "unchanged"
    doc, cases = junit_checked(tmp_path / "n3" / "junit.xml")
    assert doc.xpath("//testcase[@name='quiet']/skipped/@type") == ["known_silent"]
    assert "memcheck: 2 invalid accesses" in (tmp_path / "n3" / "summary.md").read_text()


def test_the_first_checked_night_sets_the_baseline(tmp_path):
    _set(tmp_path, {"quiet": "cpu"})
    first = _cpu_night(tmp_path, "n1", "oob_kernel_3")
    assert first.returncode == 0, first.stderr
    r = by_name(summary(tmp_path, "n1"))["quiet"]
    assert r["status"] == "silent" and [f["new"] for f in r["memcheck"]["findings"]] == [False]


@pytest.mark.slow
def test_a_sharded_night_checks_each_repro_once_with_the_checker_of_its_device(tmp_path):
    _set(tmp_path, {"gpu": "auto", "host": "cpu"})
    sanitizer = _checker(tmp_path / "cuda", "compute-sanitizer")
    # A GPU "visible" by CUDA_VISIBLE_DEVICES makes `auto` a CUDA repro; no valgrind on this PATH.
    env = {"CUDA_VISIBLE_DEVICES": "GPU-fake", "PATH": str(tmp_path / "cuda"), "FAKE_CHECKER_FINDS": "k_0"}
    for i in range(2):
        r = tool(tmp_path, "nightly", "set.toml", "--runs", "3", "--shard", f"{i}/2", "--batch", "b", "--out", "n",
                 "--sanitize", "--sanitizer", sanitizer, env=env)
        assert r.returncode == 0, r.stderr
    lines = {i: [json.loads(x) for x in open(tmp_path / "n" / "records" / f"shard-{i}-of-2.jsonl")] for i in (0, 1)}
    assert [x["repro"] for x in lines[0] if x["type"] == "memcheck"] == ["gpu", "host"]
    assert not [x for x in lines[1] if x["type"] == "memcheck"]
    merged = tool(tmp_path, "merge", "n", "--db", "h.sqlite3", "--out", "m")
    assert merged.returncode == 0, merged.stderr
    repros = by_name(summary(tmp_path, "m"))
    gpu, host = repros["gpu"]["memcheck"], repros["host"]["memcheck"]
    assert gpu["tool"] == "compute-sanitizer" and gpu["errors"] == 1 and gpu["finding"].startswith(
        "Invalid __global__ read of size 4 bytes in k_0 (oob.cu:12)")
    assert "PYTORCH_NO_CUDA_MEMORY_CACHING=1 options=--tool memcheck" in open(gpu["log"]).read()
    # A missing checker is a reason, not an error.
    assert host["tool"] is None and host["skipped"].startswith("valgrind not found on PATH")
    assert repros["host"]["status"] == "not_reproduced"
    assert "memcheck: skipped (valgrind not found on PATH" in (tmp_path / "m" / "summary.md").read_text()


def test_a_refusing_checker_is_recorded_as_skipped_with_its_reason(tmp_path):
    _set(tmp_path, {"quiet": "cpu"})
    _checker(tmp_path / "bin", "valgrind")
    r = nightly(tmp_path, "set.toml", "n", "--runs", "1", "--sanitize",
                env={"PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}", "FAKE_CHECKER_REFUSE": "1"})
    assert r.returncode == 0, r.stderr
    m = by_name(summary(tmp_path, "n"))["quiet"]["memcheck"]
    assert m["errors"] is None and m["skipped"] == ("valgrind could not check this repro: failed to start tool "
                                                    "'memcheck' for platform 'amd64-linux'")


def test_sanitizer_needs_sanitize(tmp_path):
    _set(tmp_path, {"quiet": "cpu"})
    r = tool(tmp_path, "nightly", "set.toml", "--sanitizer", sys.executable, "--out", "n")
    assert r.returncode == 2 and r.stderr.strip() == "aoti-bisect: error: --sanitizer is used only with --sanitize"


HEADER = {"type": "header", "schema": 2, "batch": "b", "shard": "0/1", "started": "2026-01-01T00:00:00Z",
          "environment": {}}
REPRO = {"type": "repro", "repro": "r", "argv": ["python", "r.py"]}
CHECKED = {"type": "memcheck", "repro": "r", "tool": "valgrind", "errors": 2, "duration_s": 1.5, "log": None,
           "findings": [{"fingerprint": "abc", "description": "Invalid read of size 4"}], "refused": None,
           "skipped": None}
END = {"type": "end", "finished": "2026-01-01T01:00:00Z", "interrupted": False}


def _records(tmp_path, *lines):
    path = tmp_path / "shard-0-of-1.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return [str(path)]


def test_the_memcheck_record_line_is_read(tmp_path):
    night = read_records(_records(tmp_path, HEADER, REPRO, CHECKED, END))
    assert night.complete and night.memchecks == {"r": CHECKED}
    # Record files written before the line existed (schema 1) still read.
    assert read_records(_records(tmp_path, {**HEADER, "schema": 1}, REPRO, END)).memchecks == {}


@pytest.mark.parametrize("line, message", [
    ({**CHECKED, "errors": -1}, "memcheck record: errors must be a whole number or null"),
    ({**CHECKED, "errors": "2"}, "memcheck record: errors must be a whole number or null"),
    ({**CHECKED, "findings": [{"fingerprint": "abc"}]}, "memcheck record: findings must be a list of"),
    ({k: v for k, v in CHECKED.items() if k != "skipped"}, "memcheck record without skipped"),
    ({**CHECKED, "repro": "other"}, "memcheck record for other before its repro record"),
])
def test_a_bad_memcheck_line_stops_the_merge_with_its_line(tmp_path, line, message):
    with pytest.raises(RecordError) as err:
        read_records(_records(tmp_path, HEADER, REPRO, line, END))
    assert ":3: " in str(err.value) and message in str(err.value)


def test_a_v1_history_is_upgraded_in_place_by_nightly_never_by_history(tmp_path):
    db = tmp_path / "history.sqlite3"
    shutil.copy(os.path.join(HERE, "data", "history-v1.sqlite3"), db)
    before = db.read_bytes()
    looked = tool(tmp_path, "history", "--db", str(db))
    assert looked.returncode == 2 and "has schema v1; a nightly or merge upgrades it to v2" in looked.stderr
    assert db.read_bytes() == before

    _set(tmp_path, {"quiet": "cpu"})
    night = _cpu_night(tmp_path, "n", "oob_kernel_3", "--db", str(db))
    assert night.returncode == 0, night.stderr
    with sqlite3.connect(db) as con:
        assert con.execute("PRAGMA user_version").fetchone() == (2,)
        assert con.execute("SELECT batch, COUNT(*) FROM runs GROUP BY batch ORDER BY batch").fetchall() == \
            [("n", 2), ("v1-night", 2)]
        (row,) = con.execute("SELECT batch, repro, tool, errors, finding, refused, skipped FROM memchecks")
    assert row[:4] == ("n", "quiet", "valgrind", 2) and row[4].startswith("Invalid read of size 4 bytes")
    assert row[5:] == (None, None)
    # The v1 night had no checked run: tonight's finding is the baseline, not news.
    assert by_name(summary(tmp_path, "n"))["quiet"]["status"] == "silent"
    trend = tool(tmp_path, "history", "--db", str(db), "--json")
    assert trend.returncode == 0 and [r["batch"] for r in json.loads(trend.stdout)] == ["v1-night", "n"]
