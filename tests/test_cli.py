"""`aoti-bisect` as a user runs it: bad input, exit codes, --help's imports, Ctrl-C."""
import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest
from conftest import torch_sees_a_gpu


def test_sigint_kills_children_and_writes_partial_report(tmp_path, write_script):
    marker = tmp_path / "first-done"
    pidfile = tmp_path / "pids"
    child = write_script("slow.py", f"""
        import os, sys, time
        with open({str(pidfile)!r}, "a") as f:
            f.write(f"{{os.getpid()}}\\n")
        if not os.path.exists({str(marker)!r}):
            open({str(marker)!r}, "w").close()
            raise SystemExit("first run fails fast")
        time.sleep(1000)
    """)
    out = tmp_path / "out"
    # A shell's background job inherits SIGINT ignored, and aoti-bisect keeps an ignored SIGINT ignored.
    proc = subprocess.Popen([sys.executable, "-m", "aoti_bisect", child, "--runs", "4", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    first = out / "runs" / "baseline-000" / "result.json"  # the first run counted, on a loaded machine too
    while time.monotonic() < deadline and (len(pidfile.read_text().split() if pidfile.exists() else []) < 2
                                           or not first.exists()):
        time.sleep(0.2)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)  # killing the run's tree and writing the report: slow under load
    assert proc.returncode == 130, err
    report = json.loads((out / "report.json").read_text())
    assert report["complete"] is False
    assert report["reproduction"]["runs"] == 1 and report["reproduction"]["failures"] == 1
    assert "Traceback" not in err
    time.sleep(0.5)
    for pid in map(int, pidfile.read_text().split()):
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


@pytest.mark.parametrize("args, code, words", [
    # A repro that cannot run at this commit: 125, so that `git bisect run` skips the commit.
    (["missing.py"], 125, "no such file"),
    (["{tmp}"], 125, "is a directory"),
    (["{tmp}/data.bin"], 125, "not a Python script"),
    (["{tmp}/broken.py"], 125, "syntax error"),
    (["--cmd", "no-such-command-xyz --flag"], 125, "command not found"),
    (["{tmp}/ok.py", "--runs", "0"], 2, "--runs must be at least 1"),
    (["{tmp}/ok.py", "--out", "/proc/forbidden"], 2, "cannot write to --out"),
    (["--bogus-option"], 2, "No such option"),
])
def test_bad_input_gets_one_line_and_exit_code(tmp_path, args, code, words):
    (tmp_path / "data.bin").write_bytes(b"\x00\x01\x02binary")
    (tmp_path / "broken.py").write_text("def f(:\n")
    (tmp_path / "ok.py").write_text("print('ok')\n")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in args]
    out = subprocess.run([sys.executable, "-m", "aoti_bisect", *argv], capture_output=True, text=True,
                         cwd=tmp_path)
    assert out.returncode == code
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], out.stderr
    assert out.stdout == ""


def test_passing_script_exits_zero_with_upper_bound(tmp_path):
    (tmp_path / "ok.py").write_text("print('fine')\n")
    out = subprocess.run([sys.executable, "-m", "aoti_bisect", str(tmp_path / "ok.py"), "--runs", "3", "--json",
                          "--out", str(tmp_path / "out")], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["verdict"] == "not_reproduced"
    assert report["reproduction"]["runs"] == 3 and report["reproduction"]["ci95"][1] > 0.5
    assert sorted(os.listdir(tmp_path)) == ["ok.py", "out"]  # nothing left in the user's cwd


def test_help_does_not_import_torch():
    code = "import sys; from aoti_bisect import cli; assert 'torch' not in sys.modules; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "ok", out.stderr
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "aoti_bisect", "--help"],
                         capture_output=True, text=True)
    assert out.returncode == 0 and "Exit codes" in out.stdout
    assert " torch" not in out.stderr


def test_cuda_repro_without_gpu_is_an_infrastructure_error(tmp_path):
    # The opposite of the `cuda` marker: this needs a host where torch sees no GPU, so it is skipped on one.
    if torch_sees_a_gpu():
        pytest.skip("torch sees a CUDA GPU here; this test needs a host without one")
    (tmp_path / "needs_gpu.py").write_text("import torch\nx = torch.ones(2, device='cuda')\nprint(x)\n")
    out = subprocess.run([sys.executable, "-m", "aoti_bisect", str(tmp_path / "needs_gpu.py"), "--runs", "2",
                          "--json", "--out", str(tmp_path / "out")], capture_output=True, text=True)
    assert out.returncode == 125, out.stderr
    report = json.loads(out.stdout)
    assert report["verdict"] == "error" and report["signature"]["kind"] == "infra"


def test_torch_not_importable_is_an_infrastructure_error(tmp_path):
    (tmp_path / "r.py").write_text("import torch\n")
    cmd = f"{sys.executable} -S {tmp_path / 'r.py'}"  # -S: no site-packages, so no torch
    out = subprocess.run([sys.executable, "-m", "aoti_bisect", "--cmd", cmd, "--runs", "1", "--out",
                          str(tmp_path / "out")], capture_output=True, text=True)
    assert out.returncode == 125, out.stderr
    assert "No module named 'torch'" in json.loads((tmp_path / "out" / "report.json").read_text())["summary"]


def test_broken_repro_is_an_error_not_a_reproduction(tmp_path):
    (tmp_path / "r.py").write_text("import not_a_real_module_xyz\n")
    out = subprocess.run([sys.executable, "-m", "aoti_bisect", str(tmp_path / "r.py"), "--json", "--out",
                          str(tmp_path / "out")], capture_output=True, text=True)
    assert out.returncode == 125, out.stderr
    report = json.loads(out.stdout)
    assert report["verdict"] == "error" and report["signature"]["kind"] == "script_error"
    assert report["reproduction"]["runs"] == 2  # adaptive: stops once every run failed the same way


def test_the_first_progress_line_comes_within_seconds_when_piped(tmp_path):
    (tmp_path / "slow.py").write_text("import time\ntime.sleep(60)\n")
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "aoti_bisect", str(tmp_path / "slow.py"), "--runs", "1",
                             "--out", str(tmp_path / "out")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        first = proc.stdout.readline()
        took = time.monotonic() - start
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=120)
    # Held in a buffer, the line would come at the exit, after the child's 60 s sleep; a few seconds is the quiet
    # machine's figure, and a loaded one (two suites on 2 cores) took longer.
    assert first.startswith("aoti-bisect: run directory") and took < 30, (first, took)


def test_scenarios_list_fits_100_columns_and_filters_by_device():
    from click.testing import CliRunner

    from aoti_bisect.cli import main

    def listed(*args):
        result = CliRunner().invoke(main, ["scenarios", "list", *args])
        assert result.exit_code == 0, result.output
        return result.output
    table = listed("--device", "cpu").splitlines()
    assert "seconds" in table[0] and max(len(line) for line in table) <= 100
    rows = {line.split()[0]: line.split() for line in table[2:]}
    assert rows["nan_after_matmul"][1] == "cpu" and rows["nan_after_matmul"][-1].isdigit()
    assert all(row[1] == "cpu" for row in rows.values())
    assert "demonstrates" in listed("--wide").splitlines()[0]
    every = json.loads(listed("--json"))
    assert {s["device"] for s in every} == {"cpu", "cuda"} and all("demonstrates" in s for s in every)


def test_nightly_only_says_nothing_of_the_repros_left_aside(tmp_path, capsys):
    from aoti_bisect.nightly.sets import SetError, load_set

    (tmp_path / "a.py").write_text("print('ok')\n")
    (tmp_path / "manifest.toml").write_text(
        '[[scenario]]\nname = "plain"\nscript = "a.py"\n\n'
        '[[scenario]]\nname = "built"\nscript = "a.py"\nsetup = ["a.py", "{setup}/p.pt2"]\n')
    assert [r.name for r in load_set(str(tmp_path), sys.executable, only=("plain",))] == ["plain"]
    assert capsys.readouterr().err == ""
    with pytest.raises(SetError, match="built has a setup step"):
        load_set(str(tmp_path), sys.executable, only=("built",))


def test_a_run_ends_with_its_answer_on_stdout_and_its_progress_on_stderr(tmp_path):
    (tmp_path / "bad.py").write_text("raise SystemExit('non-finite output')\n")
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "aoti_bisect", str(tmp_path / "bad.py"), "--runs", "1", "--stages",
                           "baseline", "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.splitlines() == ["verdict: reproduced | nan_inf in run | 1/1 runs failed",
                                        f"report: {out}/report.md", f"next: aoti-bisect report {out} --bundle"]
    assert "[baseline-000] failed" in proc.stderr and "report:" not in proc.stderr


@pytest.mark.slow
def test_a_failure_without_aoti_is_told_after_the_first_hooked_run_and_the_ladder_stops(tmp_path):
    # The script fails with torch imported but no AOTI compile or load: the sanity stage's hooked run shows it.
    (tmp_path / "eager.py").write_text("import torch\nraise SystemExit('non-finite output')\n")
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "aoti_bisect", str(tmp_path / "eager.py"), "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert "advice: the failure happens without any AOTI compile or load" in proc.stdout
    report = json.loads((out / "report.json").read_text())
    assert [s["name"] for s in report["stages"] if s["runs"]] == ["baseline", "sanity"]
