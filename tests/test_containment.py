"""Containment of a repro's process tree (issue #21, items 10-15), against real processes.

Each repro notes the pid of every process it starts in a pid file; a test passes only when every one of
them is gone. Whatever a failing test leaves behind is killed at teardown.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from aoti_bisect.files.own import read_log
from aoti_bisect.run.harness import Harness
from aoti_bisect.run.types import Outcome, RunSpec

NOTE = """
import os, signal, subprocess, sys, time
def note(pid):
    with open({pidfile!r}, "a") as f:
        f.write(f"{{pid}}\\n")
"""

# Ignores SIGTERM, as a repro stuck in a CUDA call or a careless signal handler does.
STUBBORN = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(1000)"


def _script(tmp_path, name, body, pidfile):
    path = tmp_path / name
    path.write_text(NOTE.format(pidfile=str(pidfile)) + textwrap.dedent(body))
    return str(path)


def _pids(pidfile):
    return [int(p) for p in pidfile.read_text().split()] if pidfile.exists() else []


def _alive(pid):
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _survivors(pidfile, within=0.0):
    deadline = time.monotonic() + within
    while (left := [p for p in _pids(pidfile) if _alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


@pytest.fixture
def pidfile(tmp_path):
    path = tmp_path / "pids"
    yield path
    for pid in _pids(path):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _wait_for(pidfile, n, proc=None, seconds=90):
    deadline = time.monotonic() + seconds
    while len(_pids(pidfile)) < n:
        assert time.monotonic() < deadline, "the repro never started"
        assert proc is None or proc.poll() is None, proc.communicate()
        time.sleep(0.1)


def _spec(path, timeout):
    return RunSpec((sys.executable, path), "baseline", 0, (), timeout)


DAEMON = """
    # The classic double fork: the daemon's parent exits at once, so it is nobody's descendant any more.
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            note(os.getpid())
            while True:
                os.write(1, b"daemon still writing\\n" * 100)
                time.sleep(0.02)
        os._exit(0)
    os.wait()
"""


@pytest.mark.parametrize("ending", ["timeout", "exit"])
def test_double_forked_daemon_is_killed_and_stops_writing_the_log(tmp_path, pidfile, ending):
    child = _script(tmp_path, "daemon.py", DAEMON + """
    note(os.getpid())
    time.sleep(1000 if sys.argv[1] == "timeout" else 1.0)
    """, pidfile)
    r = Harness(str(tmp_path / "run")).run(RunSpec((sys.executable, child, ending), "baseline", 0, (), 2.0))
    assert r.outcome is (Outcome.TIMEOUT if ending == "timeout" else Outcome.PASSED)
    assert "daemon still writing" in read_log(r.log_path)
    assert _survivors(pidfile, within=0.5) == []
    size = os.path.getsize(r.log_path)
    time.sleep(0.5)
    assert os.path.getsize(r.log_path) == size


def test_setsid_children_started_up_to_the_kill_are_killed(tmp_path, pidfile):
    # A TERM-ignoring spawner keeps starting setsid children through the whole kill grace.
    child = _script(tmp_path, "spawner.py", """
    if os.fork() == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        note(os.getpid())
        while True:
            note(subprocess.Popen(["sleep", "1000"], start_new_session=True).pid)
            time.sleep(0.05)
    note(os.getpid())
    time.sleep(1000)
    """, pidfile)
    r = Harness(str(tmp_path / "run")).run(_spec(child, 2.0))
    assert r.outcome is Outcome.TIMEOUT
    assert len(_pids(pidfile)) > 10
    assert _survivors(pidfile, within=0.5) == []


def test_parallel_runs_kill_only_their_own_orphans(tmp_path, pidfile):
    # Run 0 hangs and is killed at its timeout while run 1 still needs the daemon it double-forked.
    child = _script(tmp_path, "pair.py", """
    if os.environ["AOTI_BISECT_RUN_INDEX"] == "0":
        note(os.getpid())
        time.sleep(1000)
    flag = os.path.join(os.getcwd(), "daemon-alive")
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            for _ in range(60):
                # the reader must never see the file between its truncation and its write
                open(flag + ".tmp", "w").write(str(time.monotonic()))
                os.replace(flag + ".tmp", flag)
                time.sleep(0.1)
            os._exit(0)
        os._exit(0)
    os.wait()
    time.sleep(3.0)
    age = time.monotonic() - float(open(flag).read())
    print("daemon age", age)
    raise SystemExit(0 if age < 1.0 else "daemon died")
    """, pidfile)
    h = Harness(str(tmp_path / "run"), jobs=2)
    h.layout.mark_warm(_spec(child, 30.0))  # both runs at once: no cold-cache first run
    results = h.scheduler.run_many([RunSpec((sys.executable, child), "baseline", i, (), 1.5 if i == 0 else 30.0)
                          for i in range(2)])
    assert [r.outcome for r in results] == [Outcome.TIMEOUT, Outcome.PASSED], read_log(results[1].log_path)


def _from_a_shell():
    # A test suite started in the background (`cmd &` in a script, nohup) hands its children SIGINT and SIGHUP
    # ignored, and aoti-bisect rightly keeps ignoring them: these tests stand for a user at a terminal.
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)


def _start_cli(tmp_path, child):
    return subprocess.Popen([sys.executable, "-m", "aoti_bisect", child, "--runs", "1", "--out",
                             str(tmp_path / "out")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_from_a_shell)


STUBBORN_TREE = f"""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    note(os.getpid())
    note(subprocess.Popen([sys.executable, "-c", {STUBBORN!r}], start_new_session=True).pid)
    time.sleep(1000)
"""


def _survivors_at_report_line(proc, pidfile):
    """Who is still alive when aoti-bisect names its report (on stdout, among its last lines), just before it exits
    (and its watchdog acts)."""
    for line in proc.stdout:
        if line.startswith("report: "):
            left = [p for p in _pids(pidfile) if _alive(p)]
            proc.wait(timeout=30)
            return left, proc.stderr.read()
    proc.wait(timeout=30)
    return None, proc.stderr.read()


def test_second_ctrl_c_during_the_kill_grace_still_kills_everything(tmp_path, pidfile):
    proc = _start_cli(tmp_path, _script(tmp_path, "stubborn.py", STUBBORN_TREE, pidfile))
    _wait_for(pidfile, 2, proc)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.5)
    start = time.monotonic()
    proc.send_signal(signal.SIGINT)
    left, err = _survivors_at_report_line(proc, pidfile)
    assert proc.returncode == 130, err
    assert left == [], err
    assert time.monotonic() - start < 2.0, err  # the second Ctrl-C cut the 3 s SIGTERM grace short
    assert json.loads((tmp_path / "out" / "report.json").read_text())["complete"] is False
    assert "Traceback" not in err


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM])
def test_hangup_and_terminate_kill_the_tree_and_write_a_partial_report(tmp_path, pidfile, sig):
    proc = _start_cli(tmp_path, _script(tmp_path, "stubborn.py", STUBBORN_TREE, pidfile))
    _wait_for(pidfile, 2, proc)
    proc.send_signal(sig)
    left, err = _survivors_at_report_line(proc, pidfile)
    assert proc.returncode == 130, err
    assert left == [], err
    assert json.loads((tmp_path / "out" / "report.json").read_text())["complete"] is False
    assert "Traceback" not in err


def test_sigkill_of_aoti_bisect_takes_the_repro_tree_with_it(tmp_path, pidfile):
    proc = _start_cli(tmp_path, _script(tmp_path, "stubborn.py", DAEMON + STUBBORN_TREE, pidfile))
    _wait_for(pidfile, 3, proc)
    proc.kill()
    proc.communicate(timeout=10)
    assert _survivors(pidfile, within=5.0) == []


@pytest.fixture
def full_disk(tmp_path):
    """A 1 MiB tmpfs, filled up; needs root (mount), skipped otherwise."""
    mnt = tmp_path / "full"
    mnt.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tiny tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        with open(mnt / "filler", "wb") as f:
            try:
                while True:
                    f.write(b"\0" * 65536)
                    f.flush()
            except OSError:
                pass
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)])


def test_full_disk_is_one_line_and_stops_a_bisection(tmp_path, full_disk):
    (tmp_path / "ok.py").write_text("print('fine')\n")
    out = subprocess.run([sys.executable, "-m", "aoti_bisect", str(tmp_path / "ok.py"), "--runs", "1",
                          "--out", str(full_disk / "run")], capture_output=True, text=True, timeout=120)
    assert out.returncode == 125, out.stderr  # an environment fault: skip (issue #30); 255 is our own bugs only
    assert "Traceback" not in out.stderr
    errors = [line for line in out.stderr.splitlines() if line.startswith("aoti-bisect: error:")]
    assert len(errors) == 1, out.stderr
    assert "No space left on device" in errors[0] and "no report could be written" in errors[0], out.stderr


def test_closing_the_terminal_kills_the_tree_and_writes_a_partial_report(tmp_path, pidfile):
    # A real hangup: aoti-bisect on a pseudo-terminal whose far end closes (ssh dropped, window closed).
    import pty
    import select

    child = _script(tmp_path, "stubborn.py", STUBBORN_TREE, pidfile)
    pid, master = pty.fork()
    if pid == 0:
        _from_a_shell()
        os.execv(sys.executable, [sys.executable, "-m", "aoti_bisect", child, "--runs", "1", "--out",
                                  str(tmp_path / "out")])
    deadline = time.monotonic() + 90
    while len(_pids(pidfile)) < 2 and time.monotonic() < deadline:
        if select.select([master], [], [], 0.1)[0]:
            os.read(master, 4096)
    os.close(master)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 130
    assert _survivors(pidfile, within=0.3) == []
    assert json.loads((tmp_path / "out" / "report.json").read_text())["complete"] is False
