"""The nightly on a real single-node Slurm (tests/slurm_fixture.py): submitit arrays, plain `sbatch --array`
with --shard, partial nights, GPU requests on a node without GPUs, stdout kept for data.

Skipped, with the reason, where Slurm cannot start (not installed, not root); `-m "not slurm"` skips them too.
"""
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

import pytest

from aoti_bisect.nightly.slurm import ACTIVE, gres_gpus, partition_gpus
from nightly_helpers import by_name, manifest, nightly, seeded_failures, seeded_set, summary, tool
from slurm_fixture import SlurmUnavailable, start_slurm


def on_slurm(test):
    """A test on the real Slurm: it submits jobs and waits on Slurm's scheduling (10-25 s each under load), so it is
    slow as well (left out of the fast loop, `-m "not slow"`), and it waits (the file alone: 31 s, 8 s of CPU)."""
    return pytest.mark.slow(pytest.mark.slurm(pytest.mark.waits(test)))


@pytest.fixture(scope="module")
def slurm():
    pytest.importorskip("submitit")
    # A short root: the munge socket's path must fit in a sockaddr_un (108 bytes).
    root = tempfile.mkdtemp(prefix="aoti-slurm-", dir="/tmp")
    try:
        cluster = start_slurm(root)
    except SlurmUnavailable as exc:
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip(f"cannot start Slurm: {exc}".splitlines()[0])
    yield cluster
    cluster.stop()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def env(slurm):
    slurm.wait_until_empty()
    return slurm.env


def wait_for_array(slurm, job, timeout=90):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = slurm.run("squeue", "-h", "-r", "--states=all", "-j", job, "-o", "%T").stdout.split()
        if states and not set(states) & ACTIVE:
            return states
        time.sleep(0.5)
    raise AssertionError(f"array {job} still running: {slurm.run('squeue', '-r').stdout}")


def sbatch(slurm, tmp_path, array, command):
    got = slurm.run("sbatch", "--parsable", f"--array={array}", "-o", str(tmp_path / "slurm-%A_%a.out"),
                    "--chdir", str(tmp_path), "--wrap", command)
    assert got.returncode == 0, got.stderr
    return got.stdout.strip().split(";")[0]


REPROS = {"a": (0.5, 9), "b": (0.3, 4, "abort")}


def expected(repros, runs):
    return {name: seeded_failures(args[0], args[1], range(runs)) for name, args in repros.items()}


def failures(data):
    return {name: r["rate"]["failures"] for name, r in by_name(data).items()}


@on_slurm
def test_submitit_array_on_slurm_equals_an_unsharded_night(tmp_path, env):
    set_path = seeded_set(tmp_path / "set.toml", REPROS)
    whole = nightly(tmp_path, set_path, "whole", "--runs", "6", "--jobs", "1", db="whole.sqlite3")
    assert whole.returncode == 0, whole.stderr
    night = nightly(tmp_path, set_path, "night", "--runs", "6", "--jobs", "1", "--executor", "submitit",
                    "--cluster", "slurm", "--shards", "2", "--json", env=env, timeout=120)
    assert night.returncode == 0, night.stderr
    # Only the summary on stdout: submitit's log lines and Slurm's sacct complaints go to stderr.
    data = json.loads(night.stdout)
    assert data["complete"] and data["shards"] == ["0/2", "1/2"]
    assert failures(data) == failures(summary(tmp_path, "whole")) == expected(REPROS, 6)
    assert all(r["rate"]["runs"] == 6 for r in data["repros"])
    assert "submitted to submitit (slurm)" in night.stderr
    # The node has no GPU: the default request (1 per shard) falls back to none instead of pending forever.
    assert "Slurm partition debug has no GPUs" in night.stderr


@on_slurm
def test_stepped_sbatch_array_with_shard_then_merge(slurm, tmp_path, env):
    set_path = seeded_set(tmp_path / "set.toml", REPROS)
    # Ids 0 and 2 (step 2) are shards 0/2 and 1/2; both write into one folder, as on a shared disk.
    job = sbatch(slurm, tmp_path, "0-3:2", f"{sys.executable} -m aoti_bisect nightly {set_path} --runs 6 "
                                           f"--jobs 1 --shard 2 --out {tmp_path / 'night'}")
    assert wait_for_array(slurm, job) == ["COMPLETED", "COMPLETED"]
    merged = tool(tmp_path, "merge", "night", "--out", "merged", "--db", "h.sqlite3", "--json")
    assert merged.returncode == 0, merged.stderr
    data = json.loads(merged.stdout)
    assert data["complete"] and data["shards"] == ["0/2", "1/2"] and data["batch"] == f"slurm-{job}"
    assert failures(data) == expected(REPROS, 6)


@on_slurm
def test_cancelled_array_task_leaves_the_night_unjudged_until_asked(slurm, tmp_path, env):
    set_path = seeded_set(tmp_path / "set.toml", REPROS)
    # %1 throttles the array to one task at a time, so task 1 is still pending when it is cancelled.
    job = sbatch(slurm, tmp_path, "0-1%1", f"{sys.executable} -m aoti_bisect nightly {set_path} --runs 6 "
                                           f"--jobs 1 --out {tmp_path / 'night'}")
    assert slurm.run("scancel", f"{job}_1").returncode == 0
    assert "COMPLETED" in wait_for_array(slurm, job)  # a task cancelled while pending leaves squeue at once

    held = tool(tmp_path, "merge", "night", "--out", "m1", "--db", "h.sqlite3", "--json")
    assert held.returncode == 4, held.stderr
    assert "shard(s) 1/2 missing" in held.stderr and f"--batch slurm-{job}" in held.stderr
    assert json.loads(held.stdout) == {"complete": False, "judged": False, "batch": f"slurm-{job}",
                                       "redo": ["1/2"], "problems": ["shard(s) 1/2 missing"]}
    assert not (tmp_path / "h.sqlite3").exists() and not (tmp_path / "m1" / "summary.json").exists()

    partial = tool(tmp_path, "merge", "night", "--out", "m2", "--db", "h.sqlite3", "--allow-partial")
    assert partial.returncode == 0, partial.stderr
    data = summary(tmp_path, "m2")
    assert not data["complete"] and all(r["rate"]["runs"] == 3 for r in data["repros"])

    # Resuming: the missing shard run by hand under the night's batch, then both merged.
    rerun = nightly(tmp_path, set_path, "rerun", "--runs", "6", "--jobs", "1", "--shard", "1/2",
                    "--batch", f"slurm-{job}")
    assert rerun.returncode == 0, rerun.stderr
    whole = tool(tmp_path, "merge", "night", "rerun", "--out", "m3", "--db", "h3.sqlite3")
    assert whole.returncode == 0, whole.stderr
    assert summary(tmp_path, "m3")["complete"] and failures(summary(tmp_path, "m3")) == expected(REPROS, 6)


@on_slurm
def test_submitit_night_with_a_cancelled_task_says_which_shard(slurm, tmp_path, env):
    """Without accounting (sacct) submitit never learns that a killed task ended; the executor reads squeue."""
    slow = tmp_path / "slow.py"
    # An odd run index marks that it started, then outlasts the repro's timeout: shard 1 runs only those.
    slow.write_text(f"import os, pathlib, time\ni = int(os.environ['AOTI_BISECT_RUN_INDEX'])\nif i % 2:\n"
                    f"    pathlib.Path({str(tmp_path)!r}, f'started-{{i}}').touch()\n    time.sleep(120)\n")
    set_path = manifest(tmp_path / "set.toml", {"slow": (str(slow), [])})
    job = subprocess.Popen([sys.executable, "-m", "aoti_bisect", "nightly", set_path, "--runs", "4", "--jobs", "1",
                            "--executor", "submitit", "--cluster", "slurm", "--shards", "2", "--out", "night",
                            "--db", "h.sqlite3", "--json"], cwd=tmp_path, env={**os.environ, **env},
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Shard 1 is running once one of its runs has started. No fixed wait fits every load: alone this takes
        # seconds, under the full suite on 2 cores it once took minutes, so the deadline is generous and
        # the loop ends at once if the night itself exits.
        deadline = time.monotonic() + 480
        task = None
        while task is None and job.poll() is None and time.monotonic() < deadline:
            if list(tmp_path.glob("started-*")):
                array = slurm.run("squeue", "-h", "-r", "-o", "%i").stdout.split()
                task = next((t for t in array if t.endswith("_1")), None)
            time.sleep(0.5)
        assert task is not None, started_or_why(slurm, tmp_path, job)
        assert slurm.run("scancel", task).returncode == 0
        out, err = job.communicate(timeout=90)
    finally:
        job.kill()
    assert job.returncode == 4, err
    assert f"shard 1/2 (job {task}) ended CANCELLED without finishing" in err
    assert "incomplete night" in err and "re-run shard(s) 1/2" in err
    assert json.loads(out)["redo"] == ["1/2"]
    with sqlite3.connect(tmp_path / "h.sqlite3") as db:  # created by the check of --batch before any run
        assert db.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0

    # Asked to, the same records are judged on the runs that finished: shard 0's two, and (a known limit)
    # shard 1's run that Slurm's SIGTERM killed, recorded as a crash.
    partial = tool(tmp_path, "merge", "night", "--out", "m", "--db", "h.sqlite3", "--allow-partial", "--json")
    assert partial.returncode in (0, 1), partial.stderr
    data = json.loads(partial.stdout)
    assert not data["complete"] and data["repros"][0]["rate"]["runs"] >= 2


def started_or_why(slurm, tmp_path, job):
    """Why shard 1 was never seen running: the night's own end, the queue, Slurm's logs, submitit's logs."""
    lines = ["shard 1's array task was never seen running"]
    if job.poll() is not None:
        out, err = job.communicate()
        lines += [f"the night exited {job.returncode}:", err[-3000:]]
    lines += [slurm.run("squeue", "-r", "--states=all").stdout, slurm.logs()]
    lines += [f"== {p}\n{p.read_text(errors='replace')[-1500:]}" for p in sorted(tmp_path.glob("night/submitit/*/*.err"))]
    return "\n".join(lines)


@on_slurm
@pytest.mark.parametrize("args, line", [
    (["--gpus-per-shard", "1"], "--gpus-per-shard 1: no node of Slurm partition debug has a GPU"),
    (["--gpus-per-shard", "1", "--partition", "nope"], "Slurm has no partition nope"),
])
def test_gpu_request_the_node_cannot_meet_is_one_line_before_submitting(slurm, tmp_path, env, args, line):
    set_path = seeded_set(tmp_path / "set.toml", {"a": (0.5, 1)})
    started = time.monotonic()
    night = nightly(tmp_path, set_path, "night", "--runs", "2", "--executor", "submitit", "--cluster", "slurm",
                    *args, env=env, timeout=60)
    assert night.returncode == 2 and night.stdout == ""
    errors = [x for x in night.stderr.splitlines() if x.startswith("aoti-bisect: error:")]
    assert len(errors) == 1 and line in errors[0], night.stderr
    assert "Traceback" not in night.stderr and time.monotonic() - started < 30
    assert not (tmp_path / "night" / "submitit").exists() and slurm.run("squeue", "-h").stdout == "", \
        "nothing may be submitted"


@pytest.mark.parametrize("gres, gpus", [("(null)", 0), ("gpu:8", 8), ("gpu:a100:4(S:0-1)", 4),
                                        ("gpu:a100:4,gpu:v100:2", 6), ("shard:gpu:3", 0), ("mps:100", 0)])
def test_gres_gpus(gres, gpus):
    assert gres_gpus(gres) == gpus


def test_partition_gpus_takes_the_default_partition_or_the_named_one():
    sinfo = "cpu*|(null)\ngpu|gpu:h100:8(S:0-1)\ngpu|gpu:h100:4\n"
    assert partition_gpus(sinfo, None) == ("cpu", 0)
    assert partition_gpus(sinfo, "gpu") == ("gpu", 8)
    assert partition_gpus(sinfo, "other") == (None, 0)


@pytest.mark.slow
def test_partial_merge_is_not_judged_without_allow_partial(tmp_path):
    """The same rule without Slurm: one shard of two merged alone."""
    set_path = seeded_set(tmp_path / "set.toml", {"a": (0.5, 2)})
    s0 = nightly(tmp_path, set_path, "s", "--runs", "4", "--jobs", "1", "--shard", "0/2", "--batch", "b")
    assert s0.returncode == 0, s0.stderr
    held = tool(tmp_path, "merge", "s", "--out", "m", "--db", "h.sqlite3")
    assert held.returncode == 4 and "shard(s) 1/2 missing" in held.stderr
    assert not (tmp_path / "h.sqlite3").exists(), "an unjudged night adds nothing to the history"
    assert tool(tmp_path, "merge", "s", "--out", "m2", "--db", "h.sqlite3", "--allow-partial").returncode == 0
    with sqlite3.connect(tmp_path / "h.sqlite3") as db:
        assert db.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 2
