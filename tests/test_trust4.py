"""Issue #51, "Trust, round 4": a received run folder is data, never code; every parser total; paths are paths;
Markdown and secrets by rule. Each class is proved where a user meets it: the `aoti-bisect` CLI in a real
process on a hostile or received folder, and property tests (hypothesis) over every parser of child output."""
import json
import os
import subprocess
import sys
import tarfile

DATA = os.path.join(os.path.dirname(__file__), "data", "report-nan_after_matmul.json")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cli(*args, cwd=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "aoti_bisect", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env={**os.environ, "PYTHONPATH": REPO})


def one_line(proc) -> bool:
    return "Traceback" not in proc.stderr and proc.stderr.count("\n") <= 1


def run_folder(path, edit=None):
    """A finished run's folder: the captured report.json of a real run (a reproduced nan_inf)."""
    path.mkdir(parents=True)
    data = json.load(open(DATA))
    if edit:
        edit(data)
    (path / "report.json").write_text(json.dumps(data))
    return path


# --- 1. A received run folder is data, never code ----------------------------------------------------------------

def hostile_command(data):
    data["command"] = ["/bin/sh", "-c", "touch PWNED; touch \"$HOME/PWNED\""]


def test_a_received_bundle_whose_report_names_a_command_runs_nothing_when_minified(tmp_path):
    sender = run_folder(tmp_path / "sender", hostile_command)
    (sender / "runs" / "baseline-000").mkdir(parents=True)
    (sender / "runs" / "baseline-000" / "output.log").write_text("RuntimeError: non-finite output\n")
    made = cli("report", str(sender), "--bundle", str(tmp_path / "b.tar.gz"))
    assert made.returncode == 0, made.stderr
    received = tmp_path / "received"
    with tarfile.open(tmp_path / "b.tar.gz") as tar:
        tar.extractall(received, filter="data")
    [folder] = [p for p in received.rglob("report.json")]
    assert json.loads(folder.read_text())["command"][0] == "/bin/sh"
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    before = sorted(p.name for p in folder.parent.rglob("*"))
    home = tmp_path / "home"
    home.mkdir()
    proc = subprocess.run([sys.executable, "-m", "aoti_bisect", "minify", str(folder.parent)], capture_output=True,
                          text=True, timeout=300, cwd=cwd, env={**os.environ, "PYTHONPATH": REPO, "HOME": str(home)})
    assert proc.returncode == 125 and one_line(proc), proc.stderr
    assert "--script" in proc.stderr and "runs no command read from a run folder" in proc.stderr
    assert not list(tmp_path.rglob("PWNED")) and os.listdir(cwd) == [] and os.listdir(home) == []
    assert sorted(p.name for p in folder.parent.rglob("*")) == before  # refused before anything was written


def test_minify_runs_the_repro_the_user_names_never_the_reports(tmp_path):
    folder = run_folder(tmp_path / "run", hostile_command)
    named = tmp_path / "named.py"
    named.write_text(f"open({str(tmp_path / 'NAMED-RAN')!r}, 'w').close()\n")
    proc = cli("minify", str(folder), "--script", str(named), "-q", cwd=tmp_path)
    # The named script ran (hooked, with capture on) and compiled nothing: no program to cut, 125.
    assert proc.returncode == 125 and one_line(proc), proc.stderr
    assert (tmp_path / "NAMED-RAN").exists() and not list(tmp_path.rglob("PWNED"))
    assert "compiled no program" in proc.stderr


def test_custom_op_code_in_a_capture_runs_only_for_a_named_repro(tmp_path):
    folder = run_folder(tmp_path / "run")
    capture = folder / "runs" / "fakecheck-004" / "capture"
    (capture / "libs").mkdir(parents=True)
    for name in ("program.pt2", "inputs.pt"):
        (capture / name).write_bytes(b"")
    (capture / "libs" / "libevil.so").write_bytes(b"\x7fELF")
    proc = cli("minify", str(folder), "-q")
    assert proc.returncode == 125 and one_line(proc), proc.stderr
    assert "custom ops whose code is in the run folder" in proc.stderr and "libs" in proc.stderr
