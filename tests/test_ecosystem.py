"""aoti-bisect among other tools: git bisect run's exit codes, install and packaging, the repro's interpreter,
the environment report, progress on a terminal, relative paths in --cmd. Tiny Python children stand in for a
repro; one test builds and installs a real wheel."""
import glob
import json
import os
import pty
import re
import select
import shutil
import subprocess
import sys
import zipfile

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _env(**extra):
    # Children started as `python -m aoti_bisect` import this tree, whatever is installed.
    return dict(os.environ, PYTHONPATH=REPO, **extra)


def _tool(*args, cwd=None, env=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "aoti_bisect", *args], capture_output=True, text=True, cwd=cwd,
                          env=env or _env(), timeout=timeout)


@pytest.fixture(scope="module")
def torchless_python(tmp_path_factory):
    """A real second interpreter, without torch: a venv with no site-packages."""
    venv = tmp_path_factory.mktemp("venv") / "v"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return str(venv / "bin" / "python")


# -- 29: exit codes a `git bisect run` can trust --------------------------------------------------------------

def _git(repo, *args):
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=repo,
                          capture_output=True, text=True, check=True).stdout.strip()


def test_git_bisect_run_names_the_first_bad_commit_and_skips_the_unbuildable_one(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "repro.py").write_text("import model\nout = model.square(3)\nassert out == 9, f'bad output {out}'\n")
    (repo / ".gitignore").write_text("aoti-bisect-runs/\n")
    history = [("good", "def square(x):\n    return x * x\n"),
               ("good: a comment", "# squares\ndef square(x):\n    return x * x\n"),
               # The stand-in for a commit that does not build: the repro cannot even import the model.
               ("unbuildable", "# squares\ndef square(x)\n    return x * x\n"),
               ("good: fixed", "# squares\ndef square(x):\n    return x * x\n"),
               ("bad", "# squares\ndef square(x):\n    return x * x + 1\n")]
    shas = []
    for message, source in history:
        (repo / "model.py").write_text(source)
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", message)
        shas.append(_git(repo, "rev-parse", "HEAD"))
    _git(repo, "bisect", "start", shas[-1], shas[0])
    run = subprocess.run(["git", "bisect", "run", sys.executable, "-m", "aoti_bisect", "repro.py", "--stages",
                          "baseline", "--runs", "1"], cwd=repo, capture_output=True, text=True, env=_env(),
                         timeout=600)
    log = _git(repo, "bisect", "log")
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"{shas[4]} is the first bad commit" in run.stdout, run.stdout
    assert f"git bisect skip {shas[2]}" in log, log


def test_a_repro_that_cannot_run_says_125_with_its_reason(tmp_path, torchless_python):
    (tmp_path / "imports_torch.py").write_text("import torch\n")
    (tmp_path / "broken.py").write_text("import not_a_real_module_xyz\n")
    (tmp_path / "bad_syntax.py").write_text("def f(:\n")
    out = _tool(str(tmp_path / "imports_torch.py"), "--python", torchless_python, "--runs", "1", "--json",
                "--out", str(tmp_path / "a"))
    assert out.returncode == 125, out.stderr
    assert json.loads(out.stdout)["exit_reason"] == "infra"
    out = _tool(str(tmp_path / "broken.py"), "--runs", "1", "--json", "--out", str(tmp_path / "b"))
    assert out.returncode == 125, out.stderr
    assert json.loads(out.stdout)["exit_reason"] == "script_broken"
    for script, words in (("missing.py", "no such file"), ("bad_syntax.py", "syntax error")):
        out = _tool(script, "--runs", "1", cwd=tmp_path)
        assert out.returncode == 125 and out.stderr.count("\n") == 1 and words in out.stderr, out.stderr
    out = _tool("--cmd", "no-such-command-xyz", cwd=tmp_path)
    assert out.returncode == 125 and "command not found" in out.stderr
    # A bad command line is the same at every commit: 2, which `git bisect run` reads as bad; check it once.
    assert _tool(str(tmp_path / "broken.py"), "--runs", "0").returncode == 2
    assert _tool("missing.py", "--runs", "0").returncode == 2  # the command line is judged first


def test_an_internal_error_exits_255_with_one_line_and_a_saved_traceback(tmp_path):
    (tmp_path / "ok.py").write_text("print('ok')\n")
    out_dir = tmp_path / "out"
    # A bug planted in the session, as a real one would surface: an exception nobody catches.
    bug = ("import sys; from aoti_bisect import cli; from aoti_bisect import session; "
           "session.Session.execute = lambda self: 1 / 0; sys.argv[0] = 'aoti-bisect'; cli.entry()")
    out = subprocess.run([sys.executable, "-c", bug, str(tmp_path / "ok.py"), "--runs", "1", "--out", str(out_dir)],
                         capture_output=True, text=True, timeout=120, env=_env())
    assert out.returncode == 255, out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("aoti-bisect: internal error: ") and "Traceback" not in out.stderr
    saved = out_dir / "crash-traceback.txt"
    assert str(saved) in last and "Traceback (most recent call last)" in saved.read_text()


def test_exit_code_help_is_written_for_git_bisect():
    out = _tool("run", "--help")
    assert "125" in out.stdout and "255" in out.stdout and "git bisect" in out.stdout
    assert not re.search(r"^\s*3\s", out.stdout, re.M)


# -- 30: torch optional, --python --------------------------------------------------------------------------

def test_python_option_runs_the_script_and_the_probe_in_that_interpreter(tmp_path, torchless_python):
    (tmp_path / "who.py").write_text("import sys\nprint('RUN BY', sys.executable)\n")
    out = _tool(str(tmp_path / "who.py"), "--python", torchless_python, "--runs", "1", "--stages", "baseline",
                "--json", "--out", str(tmp_path / "o"))
    report = json.loads(out.stdout)
    assert report["command"][0] == torchless_python
    assert f"RUN BY {torchless_python}" in (tmp_path / "o" / "runs" / "baseline-000" / "output.log").read_text()
    env = report["environment"]
    assert env["executable"] == torchless_python and "torch_error" in env
    assert out.returncode == 125 and report["exit_reason"] == "infra"  # a SCRIPT needs torch


@pytest.mark.parametrize("value, words", [("/no/such/python", "no such file"), ("{tmp}", "not an executable"),
                                          ("/bin/false", "does not run as Python 3")])
def test_a_bad_python_option_is_a_skip(tmp_path, value, words):
    # A venv per commit (README): one that failed to build is this commit's state, skipped (125), not bad (2).
    (tmp_path / "ok.py").write_text("print('ok')\n")
    out = _tool(str(tmp_path / "ok.py"), "--python", value.replace("{tmp}", str(tmp_path)), "--out",
                str(tmp_path / "o"))
    assert out.returncode == 125 and words in out.stderr and out.stderr.count("\n") == 1, out.stderr


def test_cmd_probes_the_commands_interpreter_not_ours(tmp_path, torchless_python):
    (tmp_path / "r.py").write_text("print('fine')\n")
    (tmp_path / "r.sh").write_text("echo fine\n")
    out = _tool("--cmd", f"{torchless_python} r.py", "--runs", "1", "--json", "--out", str(tmp_path / "a"),
                cwd=tmp_path)
    env = json.loads(out.stdout)["environment"]
    assert env["executable"] == torchless_python and "torch_error" in env
    out = _tool("--cmd", "sh r.sh", "--runs", "1", "--json", "--out", str(tmp_path / "b"), cwd=tmp_path)
    assert "--python" in json.loads(out.stdout)["environment"]["probe_error"]
    out = _tool("--cmd", "sh r.sh", "--python", torchless_python, "--runs", "1", "--json", "--out",
                str(tmp_path / "c"), cwd=tmp_path)
    assert json.loads(out.stdout)["environment"]["executable"] == torchless_python


# -- 31: a wheel that works outside the repository ------------------------------------------------------------

@pytest.mark.slow
def test_the_wheel_ships_the_scenarios_a_license_and_no_torch_requirement(tmp_path):
    # A copy: pip builds in the source tree (build/, *.egg-info), which must stay the checkout's own.
    src = tmp_path / "src"
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(".git", "build", "*.egg-info", "aoti-bisect-runs",
                                                             "__pycache__"))
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                    str(wheels), str(src)], check=True, capture_output=True, cwd=tmp_path)
    wheel = glob.glob(str(wheels / "aoti_bisect-*.whl"))[0]
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        meta = z.read(next(n for n in names if n.endswith("METADATA"))).decode()
    assert "Requires-Python: >=3.11" in meta
    assert [r for r in re.findall(r"^Requires-Dist: (torch.*)$", meta, re.M) if "extra ==" not in r] == []
    assert any(n.endswith("licenses/LICENSE") for n in names)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--no-deps", "--ignore-installed", wheel], check=True,
                   capture_output=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    listed = subprocess.run([str(venv / "bin" / "aoti-bisect"), "scenarios", "list"], capture_output=True,
                            text=True, cwd=tmp_path, env=env)
    assert listed.returncode == 0 and "nan_after_matmul" in listed.stdout, listed.stderr
    where = subprocess.run([str(venv / "bin" / "python"), "-c", "import aoti_bisect.scenarios as s; print(s.SCENARIO_DIR)"],
                           capture_output=True, text=True, cwd=tmp_path, env=env).stdout.strip()
    assert where.startswith(str(venv))  # the installed copy, not this checkout
    shutil.rmtree(where)
    missing = subprocess.run([str(venv / "bin" / "aoti-bisect"), "scenarios", "list"], capture_output=True,
                             text=True, cwd=tmp_path, env=env)
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "lacks its scenarios" in missing.stderr


# -- 32: the environment PyTorch's bug template asks for --------------------------------------------------------

def test_report_carries_collect_env_of_the_repros_interpreter(tmp_path):
    (tmp_path / "ok.py").write_text("print('ok')\n")
    out = _tool(str(tmp_path / "ok.py"), "--runs", "1", "--stages", "baseline", "--json", "--out",
                str(tmp_path / "o"))
    report = json.loads(out.stdout)
    env = report["environment"]
    for key in ("torch", "torch_git", "cuda_runtime", "python", "cxx_version", "libstdcxx"):
        assert key in env  # the nightly reads these
    assert report["tool_version"] and report["schema_version"] == 1
    import torch

    text = env["collect_env"]
    assert f"PyTorch version: {torch.__version__}" in text and "Python version: " in text
    assert f"CUDA used to build PyTorch: {torch.version.cuda}" in text
    assert f"[pip3] torch=={torch.__version__}" in text
    # report.md: what a maintainer asks for, on the first screen and in a table; collect_env whole in report.json
    md = (tmp_path / "o" / "report.md").read_text()
    assert f"- **Ran on**: torch {torch.__version__} (" in md.split("\n## ")[0]
    assert f"| PyTorch " in md and "report.json's `environment.collect_env`" in md and "Vulnerability" not in md


# -- 34: progress that shows life ---------------------------------------------------------------------------

def _on_a_terminal(*args) -> str:
    """What aoti-bisect writes to stderr when stderr is a terminal (a pty), up to its exit."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "aoti_bisect", *args], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=slave, env=_env(COLUMNS="80"))
    os.close(slave)
    seen = b""
    while select.select([master], [], [], 120)[0]:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the other end closed: aoti-bisect exited
            break
        if not chunk:
            break
        seen += chunk
    proc.wait(timeout=60)
    os.close(master)
    return seen.decode(errors="replace")


@pytest.mark.slow
def test_a_terminal_gets_a_live_line_while_a_run_is_still_going(tmp_path):
    (tmp_path / "slow.py").write_text("import time\ntime.sleep(4)\n")
    text = _on_a_terminal(str(tmp_path / "slow.py"), "--runs", "1", "--stages", "baseline", "--out",
                          str(tmp_path / "o"))
    live = re.search(r"\[baseline-000\] running (\d+)s \(baseline run 1/1\)", text)
    assert live and int(live.group(1)) >= 1, text
    assert text.index(live.group(0)) < text.index("passed in"), text


def test_verbose_lines_on_a_terminal_are_not_cut_at_its_width(tmp_path):
    message = "the output differs from the reference " + "x" * 120 + " END"
    (tmp_path / "fails.py").write_text(f"raise SystemExit({message!r})\n")
    text = _on_a_terminal(str(tmp_path / "fails.py"), "--runs", "1", "--stages", "baseline", "-v", "--out",
                          str(tmp_path / "o"))
    assert message in text, text


def test_plain_logs_get_a_line_per_run_start_at_verbose(tmp_path):
    (tmp_path / "ok.py").write_text("print('ok')\n")
    out = _tool(str(tmp_path / "ok.py"), "--runs", "2", "--stages", "baseline", "-v", "--out", str(tmp_path / "o"))
    assert "[baseline-000] started (baseline run 1/2)" in out.stderr
    assert "[baseline-001] started (baseline run 2/2)" in out.stderr


# -- 35: relative paths in --cmd ----------------------------------------------------------------------------

def test_cmd_arguments_naming_files_relative_to_the_users_directory_reach_the_run(tmp_path):
    (tmp_path / "repro.py").write_text("import sys\nprint(open(sys.argv[1]).read())\n")
    (tmp_path / "data.txt").write_text("hello\n")
    out = _tool("--cmd", "python repro.py data.txt --label not-a-file", "--runs", "1", "--json", "--out",
                str(tmp_path / "o"), cwd=tmp_path)
    report = json.loads(out.stdout)
    assert out.returncode == 0 and report["verdict"] == "not_reproduced", out.stderr
    assert report["command"] == ["python", str(tmp_path / "repro.py"), str(tmp_path / "data.txt"), "--label",
                                 "not-a-file"]


def test_the_readmes_torchrun_example_runs(tmp_path):
    if not shutil.which("torchrun"):
        pytest.skip("torchrun is not on PATH")
    (tmp_path / "repro.py").write_text("print('one rank ran')\n")
    out = _tool("--cmd", "torchrun --nproc-per-node 1 repro.py", "--runs", "1", "--stages", "baseline", "--json",
                "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert out.returncode == 0 and json.loads(out.stdout)["verdict"] == "not_reproduced", out.stderr


def test_a_garbled_probe_answer_is_a_probe_error_not_a_crash(tmp_path):
    # Two probes appending to one log once left both answers on one line (shards of a night in one folder).
    from aoti_bisect.run.probe import probe_environment
    twice = tmp_path / "twice"
    twice.write_text("#!/bin/sh\nprintf 'AOTI_BISECT_PROBE {\"torch\": 1}AOTI_BISECT_PROBE {\"torch\": 1}\\n'\n")
    twice.chmod(0o755)
    got = probe_environment(str(twice), str(tmp_path / "probe"), dict(os.environ))
    assert got["probe_error"].startswith(f"a garbled answer from {twice}"), got
