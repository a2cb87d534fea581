"""The SET, the shard and the record files: bad input is one line and exit 2; shards from the scheduler."""
import json
import os
import sqlite3

import pytest

from aoti_bisect.nightly.plan import parse_shard
from aoti_bisect.nightly.records import read_records
from aoti_bisect.nightly.sets import SetError
from nightly_helpers import (
    nightly,
    seeded_set,
    tool,
)


@pytest.mark.parametrize("args, message", [
    (["nightly", "nowhere"], "no such file or folder: nowhere"),
    (["nightly", "set.toml", "--shard", "3/2"], "shard 3/2 is out of range"),
    (["nightly", "set.toml", "--shard", "2"], "no shard index"),
    (["nightly", "set.toml", "--until-confident", "--shard", "0/2"], "--until-confident cannot be sharded"),
    (["nightly", "set.toml", "--only", "zzz"], "not in set.toml: zzz"),
    (["nightly", "set.toml", "--db", "newer.sqlite3"], "has schema v99; this aoti-bisect knows up to v2"),
    (["nightly", "set.toml", "--db", "set.toml"], "file is not a database"),
    (["nightly", "bad.toml"], "not valid TOML"),
    (["merge", "set.toml"], "set.toml:1: not a JSON line"),
    (["history", "--db", "missing.sqlite3"], "no history database at"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    seeded_set(tmp_path / "set.toml", {"a": (0.5, 1)})
    (tmp_path / "bad.toml").write_text("[[repro]\n")
    with sqlite3.connect(tmp_path / "newer.sqlite3") as db:
        db.execute("PRAGMA user_version = 99")
    r = tool(tmp_path, *args, "--out", "out") if args[0] == "nightly" else tool(tmp_path, *args)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and message in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "out" / "records").exists() or not os.listdir(tmp_path / "out" / "records")


def test_shard_from_the_scheduler():
    assert str(parse_shard(None, {})) == "0/1"
    slurm = {"SLURM_ARRAY_TASK_ID": "7", "SLURM_ARRAY_TASK_MIN": "5", "SLURM_ARRAY_TASK_COUNT": "4"}
    assert str(parse_shard(None, slurm)) == "2/4"
    assert str(parse_shard("4", {"JOB_COMPLETION_INDEX": "3"})) == "3/4"
    assert str(parse_shard("1/3", slurm)) == "1/3"
    with pytest.raises(SetError):
        parse_shard("x/y", {})


@pytest.mark.slow
def test_a_torn_last_record_line_costs_only_that_line(tmp_path):
    set_path = seeded_set(tmp_path / "set.toml", {"a": (0.5, 1)})
    night = nightly(tmp_path, set_path, "night", "--runs", "4", "--shard", "0/1")
    assert night.returncode == 0, night.stderr
    path = tmp_path / "night" / "records" / "shard-0-of-1.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    assert [json.loads(l)["type"] for l in lines][-1] == "end"
    path.write_text("".join(lines[:-2]) + lines[-2][:20])
    got = read_records([str(path)])
    assert len(got.runs) == 3 and not got.complete
    assert any("incomplete" in p for p in got.problems) and any("no end line" in p for p in got.problems)
