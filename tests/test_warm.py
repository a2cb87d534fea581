"""Warm starts (run/warm.py, child/warm.py): a run forked from a warm interpreter of the repro's Python, with torch
imported, sees itself as a cold `python script.py` does, ends as it would, and is contained as any run is. Real
processes throughout: the warm interpreter imports the installed torch."""
import json
import os
import signal
import sys
import textwrap

import psutil
import pytest

from aoti_bisect.child import contract
from aoti_bisect.run import process
from aoti_bisect.run.warm import WarmPool, plain_script

SELF_VIEW = textwrap.dedent("""
    import json, os, sys, tempfile, threading
    import numpy
    view = {"argv": sys.argv, "name": __name__, "file": __file__, "path0": sys.path[0], "cwd": os.getcwd(),
            "tmp": tempfile.gettempdir(), "index": os.environ.get("AOTI_BISECT_RUN_INDEX"),
            "main": sys.modules["__main__"].__file__, "threads": threading.active_count(),
            "numpy": float(numpy.random.rand()), "spec": repr(__spec__)}
    print("VIEW " + json.dumps(view))
    sys.exit(int(sys.argv[1]))
""")


@pytest.fixture
def pool(tmp_path):
    pool = WarmPool(str(tmp_path / "warm"))
    yield pool
    pool.close()


def _run(tmp_path, name, script, args=(), fork=None, timeout=120.0, index="7"):
    folder = tmp_path / name
    (folder / "cwd").mkdir(parents=True)
    (folder / "tmp").mkdir()
    env = {**os.environ, "TMPDIR": str(folder / "tmp"), contract.RUN_INDEX_ENV: index}
    log = folder / "output.log"
    exit = process.execute([sys.executable, str(script), *args], env, str(folder / "cwd"), str(log), timeout,
                           fork=fork)
    return exit, log.read_text()


def _view(text):
    return json.loads(next(line for line in text.splitlines() if line.startswith("VIEW "))[5:])


def test_a_warm_run_sees_itself_as_a_cold_one_does(tmp_path, pool):
    script = tmp_path / "repro.py"
    script.write_text(SELF_VIEW)
    cold, cold_log = _run(tmp_path, "cold", script, ["3"])
    warm, warm_log = _run(tmp_path, "warm", script, ["3"], fork=pool.start)
    again, again_log = _run(tmp_path, "again", script, ["0"], fork=pool.start, index="8")
    assert not pool.problems
    assert (cold.warm, warm.warm, again.warm) == (False, True, True)
    assert (cold.returncode, warm.returncode, again.returncode) == (3, 3, 0)
    seen = {name: _view(text) for name, text in (("cold", cold_log), ("warm", warm_log), ("again", again_log))}
    for key in ("argv", "name", "file", "path0", "main", "threads", "spec"):
        assert seen["warm"][key] == seen["cold"][key], key
    assert seen["warm"]["cwd"] == str(tmp_path / "warm" / "cwd") and seen["warm"]["tmp"] == str(tmp_path / "warm" / "tmp")
    assert seen["again"]["index"] == "8"
    # numpy's global generator, seeded at the warm interpreter's import, is drawn afresh in each run, as in a cold one
    assert len({seen[n]["numpy"] for n in seen}) == 3


def test_a_warm_run_ends_as_a_cold_one_would(tmp_path, pool):
    raises = tmp_path / "raises.py"
    raises.write_text("def f():\n    raise ValueError('the repro failed')\nf()\n")
    aborts = tmp_path / "aborts.py"
    aborts.write_text("import os\nos.abort()\n")
    cold, cold_log = _run(tmp_path, "cold", raises)
    warm, warm_log = _run(tmp_path, "warm", raises, fork=pool.start)
    assert (cold.returncode, warm.returncode) == (1, 1) and warm.warm
    # The traceback from the script's frame down, as Python's own top level prints it: no frame of ours
    assert warm_log == cold_log
    crashed, _ = _run(tmp_path, "crashed", aborts, fork=pool.start)
    assert crashed.warm and crashed.signal == signal.SIGABRT and crashed.returncode is None


def test_a_warm_run_is_timed_out_and_killed_with_its_tree(tmp_path, pool):
    script = tmp_path / "hangs.py"
    script.write_text("import subprocess, sys, time\n"
                      "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])\n"
                      "print('started', flush=True)\ntime.sleep(300)\n")
    quick = tmp_path / "quick.py"
    quick.write_text("pass\n")
    # The run's clock starts before its fork: the first one also waits for the warm interpreter to import torch,
    # which beside the suite's busy lanes took longer than this test's timeout.
    assert _run(tmp_path, "quick", quick, fork=pool.start)[0].warm
    exit, log = _run(tmp_path, "hang", script, fork=pool.start, timeout=8)
    assert exit.warm and exit.timed_out and "started" in log
    assert not [p for p in psutil.Process().children(recursive=True) if "time.sleep(300)" in _cmdline(p)]


def _cmdline(p):
    try:
        return " ".join(p.cmdline())
    except psutil.Error:  # a zombie (another test's orphan, reparented to us) or gone
        return ""


def test_only_a_plain_script_is_started_warm():
    assert plain_script(["/usr/bin/python3", "repro.py", "--x"])
    assert not plain_script(["/usr/bin/python3", "-X", "dev", "repro.py"])
    assert not plain_script(["/usr/bin/python3", "-m", "repro"])
    assert not plain_script(["compute-sanitizer", "python", "repro.py"])
    assert not plain_script(["/usr/bin/python3", "repro.sh"])


def test_a_warm_interpreter_that_cannot_serve_leaves_its_runs_cold(tmp_path):
    pool = WarmPool(str(tmp_path / "warm"))
    script = tmp_path / "repro.py"
    script.write_text("print('ran')\n")
    folder = tmp_path / "run"
    (folder / "cwd").mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "shadow")}
    (tmp_path / "shadow").mkdir()
    (tmp_path / "shadow" / "torch.py").write_text("raise ImportError('no torch here')\n")
    try:
        exit = process.execute([sys.executable, str(script)], env, str(folder / "cwd"), str(folder / "output.log"),
                               60, fork=pool.start)
    finally:
        pool.close()
    assert exit.returncode == 0 and not exit.warm
    assert pool.problems and "cannot import torch" in pool.problems[0]
