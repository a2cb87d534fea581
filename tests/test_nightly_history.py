"""The nightly history database: shared by concurrent jobs, read by `aoti-bisect history`."""
import sqlite3
import subprocess
import sys

import pytest

from nightly_helpers import (
    seeded_set,
)


@pytest.mark.slow
def test_two_nightly_jobs_share_one_database(tmp_path):
    set_path = seeded_set(tmp_path / "set.toml", {"a": (0.5, 8)})
    args = [sys.executable, "-m", "aoti_bisect", "nightly", set_path, "--runs", "15", "--jobs", "1", "--db",
            "shared.sqlite3", "-q"]
    jobs = [subprocess.Popen(args + ["--out", out], cwd=tmp_path, stderr=subprocess.PIPE, text=True)
            for out in ("x", "y")]
    for job in jobs:
        assert job.wait(timeout=300) in (0, 1), job.stderr.read()
    with sqlite3.connect(tmp_path / "shared.sqlite3") as db:
        assert db.execute("SELECT COUNT(DISTINCT batch), COUNT(*) FROM runs").fetchone() == (2, 30)
