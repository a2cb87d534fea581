"""Untrusted input (issue #21, items 1-9 and 22): arguments, run directories, report files, child output.

Every test drives the real CLI (`python -m aoti_bisect`) with tiny scripts standing in for a repro.
"""
import json
import os
import re
import resource
import shutil
import stat
import subprocess
import sys
import tarfile
import time

import pytest
from markdown_it import MarkdownIt

from aoti_bisect.exits import EXIT_INCONCLUSIVE, EXIT_NOT_REPRODUCED, EXIT_REPRODUCED, EXIT_USAGE
from aoti_bisect.run.classify import classify
from aoti_bisect.run.types import Outcome, ProcessExit

LOGS = os.path.join(os.path.dirname(__file__), "logs", "cpu")
# Bytes no terminal or Markdown page should get from a child: C0 controls but \t and \n, DEL, C1 controls.
CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _cap_memory():
    # A regression that reads or builds without bound must fail fast here, not take the shared host down.
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def cli(*args, cwd=None, timeout=120, stdin=subprocess.DEVNULL):
    return subprocess.run([sys.executable, "-m", "aoti_bisect", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout, stdin=stdin, preexec_fn=_cap_memory)


def one_line_error(proc, words):
    assert proc.returncode == EXIT_USAGE, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("aoti-bisect: error: ") and words in lines[0], proc.stderr
    assert proc.stdout == ""


@pytest.fixture
def ok(tmp_path):
    path = tmp_path / "ok.py"
    path.write_text("print('fine')\n")
    return path


def finished_run(tmp_path, body="raise SystemExit('boom')\n"):
    script = tmp_path / "repro.py"
    script.write_text(body)
    out = tmp_path / "run"
    proc = cli(script, "--stages", "baseline", "--runs", "1", "--out", out)
    assert proc.returncode in (EXIT_NOT_REPRODUCED, EXIT_REPRODUCED), proc.stderr
    return out


# -- 1. --out is exclusive ------------------------------------------------------------------------------


def test_non_empty_out_is_refused_and_left_alone(tmp_path, ok):
    out = tmp_path / "out"
    (out / "runs" / "baseline-000").mkdir(parents=True)
    (out / "runs" / "baseline-000" / "output.log").write_text("another script's run\n")
    one_line_error(cli(ok, "--runs", "1", "--out", out), "is not empty")
    assert sorted(p.name for p in out.iterdir()) == ["runs"]
    assert (out / "runs" / "baseline-000" / "output.log").read_text() == "another script's run\n"


def test_a_finished_run_directory_is_not_reused(tmp_path, ok):
    out = tmp_path / "out"
    assert cli(ok, "--runs", "1", "--out", out).returncode == EXIT_NOT_REPRODUCED
    report = (out / "report.json").read_text()
    one_line_error(cli(ok, "--runs", "1", "--out", out), str(out))
    assert (out / "report.json").read_text() == report


def test_two_concurrent_runs_cannot_share_out(tmp_path, ok):
    release = tmp_path / "release"
    slow = tmp_path / "slow.py"
    slow.write_text(f"import os, time\nwhile not os.path.exists({str(release)!r}):\n    time.sleep(0.1)\n")
    out = tmp_path / "out"
    first = subprocess.Popen([sys.executable, "-m", "aoti_bisect", str(slow), "--runs", "1", "--out", str(out)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (out / "runs" / "baseline-000" / "output.log").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        one_line_error(cli(ok, "--runs", "1", "--out", out), "already holds an aoti-bisect run")
    finally:
        release.write_text("")
        _, err = first.communicate(timeout=120)
    assert first.returncode == EXIT_NOT_REPRODUCED, err
    # Its own compile ahead (a slot per core, --jobs unset) may have started beside its first run.
    assert [n for n in sorted(os.listdir(out / "runs")) if not n.startswith("ahead-")] == ["baseline-000"]


def test_default_out_and_an_empty_out_still_work(tmp_path, ok):
    (tmp_path / "empty").mkdir()
    assert cli(ok, "--runs", "1", "--out", tmp_path / "empty").returncode == EXIT_NOT_REPRODUCED
    proc = cli(ok, "--runs", "1", cwd=tmp_path)
    assert proc.returncode == EXIT_NOT_REPRODUCED, proc.stderr
    assert len(os.listdir(tmp_path / "aoti-bisect-runs")) == 1


# -- 2. symlinks in the run directory -------------------------------------------------------------------


def test_planted_links_in_out_never_write_outside(tmp_path, ok):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    victim.chmod(0o600)
    out = tmp_path / "out"
    (out / "runs" / "baseline-000").mkdir(parents=True)
    os.symlink(victim, out / "report.md")
    os.symlink(victim, out / "runs" / "baseline-000" / "rerun.sh")
    proc = cli(ok, "--stages", "baseline", "--runs", "1", "--out", out)
    assert proc.returncode == EXIT_USAGE, proc.stderr
    assert victim.read_text() == "precious\n" and stat.S_IMODE(victim.stat().st_mode) == 0o600


def test_links_a_child_plants_for_later_runs_are_not_followed(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    victim.chmod(0o600)
    victim_dir = tmp_path / "victim_dir"
    victim_dir.mkdir()
    # Run 0 sits in runs/baseline-000/cwd; it booby-traps the folders of runs 1 and 2.
    script = tmp_path / "trap.py"
    script.write_text(f"""import os
runs = os.path.abspath(os.path.join(os.getcwd(), "..", ".."))
if os.path.basename(os.path.dirname(os.getcwd())) == "baseline-000":
    os.makedirs(os.path.join(runs, "baseline-001"))
    for name in ("rerun.sh", "spec.json", "output.log", "result.json"):
        os.symlink({str(victim)!r}, os.path.join(runs, "baseline-001", name))
    os.symlink({str(victim_dir)!r}, os.path.join(runs, "baseline-002"))
""")
    proc = cli(script, "--stages", "baseline", "--runs", "3", "--out", tmp_path / "out")
    assert "Traceback" not in proc.stderr, proc.stderr
    assert victim.read_text() == "precious\n" and stat.S_IMODE(victim.stat().st_mode) == 0o600
    assert os.listdir(victim_dir) == []
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["reproduction"]["runs"] == 3


def test_bundle_packs_no_link_and_nothing_outside_the_run(tmp_path):
    out = finished_run(tmp_path)
    secret = tmp_path / "shadow"
    secret.write_text("root:SECRET-HASH\n")
    log = out / "runs" / "baseline-000" / "output.log"
    log.unlink()
    os.symlink(secret, log)
    os.symlink(secret, out / "runs" / "baseline-000" / "spec.json.lnk")
    (out / "runs" / "baseline-000" / "rerun.sh").unlink()
    os.symlink(secret, out / "runs" / "baseline-000" / "rerun.sh")
    data = json.loads((out / "report.json").read_text())
    data["culprit"]["source"] = {"path": str(secret), "excerpt": "x"}
    (out / "report.json").write_text(json.dumps(data))
    bundle = tmp_path / "b.tar.gz"
    proc = cli("report", out, "--bundle", bundle)
    assert proc.returncode == 0, proc.stderr
    with tarfile.open(bundle) as tar:
        members = tar.getmembers()
        blobs = [tar.extractfile(m).read() for m in members if m.isfile()]
    assert all(m.isfile() for m in members)
    assert not any(b"SECRET-HASH" in b for b in blobs)
    assert any(m.name.endswith("runs/baseline-000/result.json") for m in members)


# -- 3. the script must be a regular file ---------------------------------------------------------------


def test_fifo_script_is_refused_without_hanging(tmp_path):
    fifo = tmp_path / "repro.py"
    os.mkfifo(fifo)
    one_line_error(cli(fifo, "--out", tmp_path / "out", timeout=30), "not a regular file")


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/stdin"])
def test_device_script_is_refused(tmp_path, device):
    one_line_error(cli(device, "--out", tmp_path / "out", timeout=60), "not a regular file")
    assert not (tmp_path / "out").exists()


def test_oversized_script_is_refused_unread(tmp_path):
    big = tmp_path / "big.py"
    with open(big, "wb") as f:
        f.truncate(1 << 30)  # sparse: a gigabyte of nothing, costs no disk
    one_line_error(cli(big, "--out", tmp_path / "out", timeout=60), "too large")


# -- 4, 5. numeric bounds -------------------------------------------------------------------------------


@pytest.mark.parametrize("args, words", [
    (["--timeout", "nan"], "--timeout must be a finite number of seconds"),
    (["--timeout", "inf"], "--timeout must be a finite number of seconds"),
    (["--timeout", "-5"], "--timeout must be a finite number of seconds"),
    (["--runs", str(10 ** 9)], "--runs must be at most"),
    (["--max-runs", str(10 ** 9)], "--max-runs must be at most"),
    (["--jobs", str(10 ** 9)], "--jobs must be at most"),
])
def test_numbers_out_of_bounds_are_refused(tmp_path, ok, args, words):
    one_line_error(cli(ok, *args, "--out", tmp_path / "out", timeout=60), words)
    assert not (tmp_path / "out").exists()


# -- 6, 8. report on a malformed or newer report.json ---------------------------------------------------


@pytest.fixture(scope="module")
def finished_template(tmp_path_factory):
    """One real finished run (the CLI on a failing script) that the tests below copy and then damage: each gets
    its own copy, so none sees another's edits, and the CLI bisects once instead of once a test."""
    return finished_run(tmp_path_factory.mktemp("template"))


@pytest.fixture
def valid_report(tmp_path, finished_template):
    out = tmp_path / "run"
    shutil.copytree(finished_template, out, symlinks=True)
    return out, json.loads((out / "report.json").read_text())


def _broken(data):
    """report.json files aoti-bisect never wrote: empty, cut short, not an object, not UTF-8, wrong types."""
    texts = ["{}", json.dumps(data)[:200], "[1, 2, 3]", "null", "[" * 100_000,
             json.dumps(dict(data, stages=5)),
             json.dumps(dict(data, stages=[{"name": "baseline"}])),
             json.dumps(dict(data, reproduction={"runs": "many", "failures": 1, "rate": 1, "ci95": [0, 1]})),
             json.dumps(dict(data, reproduction=dict(data["reproduction"], ci95=[0.5]))),
             json.dumps(dict(data, verdict="sideways")),
             json.dumps(dict(data, culprit=[1])),
             json.dumps(dict(data, signature="oops")),
             json.dumps(dict(data, schema_version="1"))]
    return [t.encode() for t in texts] + [b"\xff\xfe not utf-8"]


@pytest.mark.slow
def test_malformed_report_json_gets_one_line(valid_report):
    out, data = valid_report
    # Each damaged file is read in one of the three formats, in turn (each format reads several): report.json is
    # read and checked before the format is chosen, and 14 CLI processes instead of 42 prove the same.
    for i, blob in enumerate(_broken(data)):
        (out / "report.json").write_bytes(blob)
        one_line_error(cli("report", out, "--format", ("md", "text", "json")[i % 3]), "report.json")


def test_newer_schema_is_refused(valid_report):
    out, data = valid_report
    (out / "report.json").write_text(json.dumps(dict(data, schema_version=999)))
    one_line_error(cli("report", out), "schema_version 999")


def test_a_valid_report_still_renders(valid_report):
    out, _ = valid_report
    for fmt in ("md", "text", "json"):
        proc = cli("report", out, "--format", fmt)
        assert proc.returncode == EXIT_REPRODUCED and proc.stdout, proc.stderr


# -- 7. Markdown escaping -------------------------------------------------------------------------------


def test_hostile_names_cannot_break_the_markdown(valid_report):
    out, data = valid_report
    hostile = "<script>alert(1)</script>|x\n# heading"
    data["stages"][0]["name"] = hostile
    data["stages"][0]["env"] = {hostile: hostile}
    data["stages"][0]["rerun_script"] = "echo hi"
    data["environment"] = {hostile: hostile, "python": "3.10"}
    (out / "report.json").write_text(json.dumps(data))
    proc = cli("report", out, "--format", "md")
    assert proc.returncode == EXIT_REPRODUCED, proc.stderr
    tokens = MarkdownIt("commonmark").enable("table").parse(proc.stdout)
    inline = [c for t in tokens for c in (t.children or [])]
    assert not [t for t in tokens + inline if t.type in ("html_block", "html_inline") and "<script" in t.content]
    headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert not [h for h in headings if "heading" in h]
    for row in proc.stdout.splitlines():
        if row.startswith("|") and "script" in row:
            assert len(re.findall(r"(?<!\\)\|", row)) in (3, 6, 7), row  # a 2-, 5- or 6-column table row
    assert "3.10" in proc.stdout  # text that looks like a number is shown as given, not as 3.1


# -- 9. control characters from the child ---------------------------------------------------------------


def test_control_characters_from_the_child_are_escaped(tmp_path):
    body = ("import sys\n"
            "sys.stdout.write('\\x1b]0;pwned\\x07\\x1b[2J\\x00 boom \\x9b31m \\r hidden\\n')\n"
            "raise SystemExit('Error: bad \\x1b[31mred\\x07 \\x00 end')\n")
    script = tmp_path / "repro.py"
    script.write_text(body)
    out = tmp_path / "run"
    proc = cli(script, "--stages", "baseline", "--runs", "1", "--out", out, "-v")
    assert proc.returncode == EXIT_REPRODUCED, proc.stderr
    assert not CONTROLS.search(proc.stderr), repr(proc.stderr)
    assert "\x1b" in (out / "runs" / "baseline-000" / "output.log").read_text()  # the raw log stays raw
    assert not CONTROLS.search((out / "report.md").read_text())
    assert "\\x1b" in (out / "report.md").read_text()  # shown, not dropped
    for fmt in ("md", "text", "json"):
        shown = cli("report", out, "--format", fmt)
        assert shown.returncode == EXIT_REPRODUCED, shown.stderr
        assert not CONTROLS.search(shown.stdout + shown.stderr), repr(shown.stdout)


def test_control_characters_in_a_hand_edited_report_are_escaped(valid_report):
    out, data = valid_report
    data["culprit"] = {"kind": "kernel", "kernel": "k\x1b[2J", "evidence": ["e\x07\x00vil"], "summary": "s\x9b"}
    data["signature"] = dict(data["signature"], message="x\x1b[31m", kernel="run\x07")
    (out / "report.json").write_text(json.dumps(data))
    for fmt in ("md", "text"):
        shown = cli("report", out, "--format", fmt)
        assert shown.returncode == EXIT_REPRODUCED, shown.stderr
        assert not CONTROLS.search(shown.stdout), repr(shown.stdout)


# -- 22. a SyntaxError without a Traceback header is a broken script -----------------------------------


def test_syntax_error_log_without_traceback_is_a_script_error():
    with open(os.path.join(LOGS, "syntax_error.log")) as f:
        text = f.read()
    assert "Traceback" not in text
    outcome, sig = classify(text, ProcessExit(1, None, False, 0.1, len(text)))
    assert outcome is Outcome.FAILED and sig.kind == "script_error"
    assert "SyntaxError: invalid syntax" in sig.message


def test_an_indentation_error_of_the_script_is_a_script_error(tmp_path):
    (tmp_path / "bad.py").write_text("if True:\nprint(1)\n")
    proc = subprocess.run([sys.executable, str(tmp_path / "bad.py")], capture_output=True, text=True)
    outcome, sig = classify(proc.stderr, ProcessExit(proc.returncode, None, False, 0.1, len(proc.stderr)))
    assert sig.kind == "script_error" and sig.message.startswith("IndentationError")


def test_run_cmd_on_a_script_that_does_not_compile_is_an_error(tmp_path):
    (tmp_path / "bad.py").write_text("import torch\n\ndef f(:\n    return 1\n")
    out = tmp_path / "out"
    proc = cli("--cmd", f"{sys.executable} {tmp_path / 'bad.py'}", "--runs", "1", "--stages", "baseline", "--json",
               "--out", out)
    assert proc.returncode == EXIT_INCONCLUSIVE, proc.stderr  # cannot run: `git bisect run` skips it
    report = json.loads(proc.stdout)
    assert report["verdict"] == "error" and report["signature"]["kind"] == "script_error"
    proc = cli("--cmd", f"{sys.executable} -c 'def f(:'", "--runs", "1", "--stages", "baseline", "--json",
               "--out", tmp_path / "out2")
    assert proc.returncode == EXIT_INCONCLUSIVE, proc.stderr  # cannot run: `git bisect run` skips it


def test_a_syntax_error_raised_by_the_repro_at_run_time_is_still_a_traceback():
    # compile() or exec() of generated code inside the repro prints a full traceback: unchanged behaviour.
    text = ('Traceback (most recent call last):\n  File "/r/repro.py", line 3, in <module>\n'
            '    compile("def f(:", "gen", "exec")\n  File "gen", line 1\n    def f(:\n          ^\n'
            'SyntaxError: invalid syntax\n')
    outcome, sig = classify(text, ProcessExit(1, None, False, 0.1, len(text)))
    assert sig.kind == "script_error"


@pytest.fixture(scope="module")
def passed_template(tmp_path_factory):
    """One real finished run of a passing script, copied by each test that may damage it."""
    folder = tmp_path_factory.mktemp("passed")
    (folder / "ok.py").write_text("print('ok')\n")
    subprocess.run([sys.executable, "-m", "aoti_bisect", str(folder / "ok.py"), "--stages", "baseline",
                    "--runs", "1", "--out", str(folder / "run")], capture_output=True, text=True, timeout=120,
                   check=True)
    return folder / "run"


@pytest.mark.parametrize("where", ["run/report.json", "run/runs", "missing/parent/b.tgz", "run"])
def test_a_bundle_never_overwrites_the_run_and_a_bad_destination_is_one_line(tmp_path, passed_template, where):
    run = tmp_path / "run"
    shutil.copytree(passed_template, run, symlinks=True)
    before = (run / "report.json").read_bytes()
    out = subprocess.run([sys.executable, "-m", "aoti_bisect", "report", str(run), "--bundle", str(tmp_path / where)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.count("aoti-bisect: error:") == 1
    assert (run / "report.json").read_bytes() == before
