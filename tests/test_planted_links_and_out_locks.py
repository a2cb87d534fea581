"""Run folders read and written with the guards (issue #38, what was left): one process per --out (nightly), a
hook record no JSON can crash, logs and run files never written through a planted link (symbolic or hard), a run's
folders made without following one, the redirect mapping read through RunFolder, and the hook's temporary files
new (O_EXCL|O_NOFOLLOW, a random name). Each test plants what a
hostile repro would, and fails on the code before the fix."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from nightly_helpers import manifest, summary

from aoti_bisect.aoti.hook_record import parse, read_hook
from aoti_bisect.child import contract
from aoti_bisect.child.hook import atomic, fakecheck
from aoti_bisect.child.hook.recorder import Record
from aoti_bisect.diagnose.evidence import RunEvidence
from aoti_bisect.exits import UsageFailure
from aoti_bisect.files import out as out_module
from aoti_bisect.files.out import LOCK_NAME, OutInUse, claim_out, out_lock
from aoti_bisect.files.write import user_name
from aoti_bisect.run import process
from aoti_bisect.run.layout import HEADERS_ENV, Layout, compile_key
from aoti_bisect.run.types import Outcome, ProcessExit, RunResult, RunSpec

SECRET = "the user's own file\n"


def victim(tmp_path):
    """A file of the user's, outside any run folder, that a repro would like to see overwritten."""
    path = tmp_path / "home" / "notes.txt"
    path.parent.mkdir(exist_ok=True)
    path.write_text(SECRET)
    return path


# -- one process per --out --------------------------------------------------------------------------------------

HOLDER = textwrap.dedent("""
    import sys
    from aoti_bisect.files.out import out_lock
    with out_lock(sys.argv[1], "x.lock", shared=sys.argv[2] == "shared"):
        print("held", flush=True)
        sys.stdin.read()
""")


def hold(folder, mode):
    """Another process holding the lock, until its stdin closes (or it is killed)."""
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder), mode], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == "held\n"
    return holder


def test_an_out_lock_held_by_another_process_refuses_at_once_and_dies_with_it(tmp_path):
    holder = hold(tmp_path, "exclusive")
    with pytest.raises(OutInUse, match="is in use by"):
        with out_lock(str(tmp_path), "x.lock"):
            pass
    with pytest.raises(OutInUse):
        with out_lock(str(tmp_path), "x.lock", shared=True):
            pass
    holder.kill()  # SIGKILL: no handler runs, yet no stale lock is left behind
    holder.wait()
    with out_lock(str(tmp_path), "x.lock"):
        pass


def test_shared_out_locks_admit_each_other_but_not_an_exclusive_one(tmp_path):
    holder = hold(tmp_path, "shared")
    try:
        with out_lock(str(tmp_path), "x.lock", shared=True):
            with pytest.raises(OutInUse):
                with out_lock(str(tmp_path), "x.lock"):
                    pass
    finally:
        holder.communicate("")


def test_an_out_lock_follows_no_link(tmp_path):
    target = victim(tmp_path)
    os.symlink(target, tmp_path / "x.lock")
    with pytest.raises(Exception, match="symbolic link"):
        with out_lock(str(tmp_path), "x.lock"):
            pass
    os.remove(tmp_path / "x.lock")
    os.link(target, tmp_path / "x.lock")
    with pytest.raises(Exception, match="not aoti-bisect's lock file"):
        with out_lock(str(tmp_path), "x.lock"):
            pass
    assert target.read_text() == SECRET


CLAIMER = textwrap.dedent("""
    import sys, time
    from aoti_bisect.exits import UsageFailure
    from aoti_bisect.files.out import claim_out
    time.sleep(max(0.0, float(sys.argv[2]) - time.time()))
    try:
        claim_out(sys.argv[1])
        print("claimed")
    except UsageFailure as exc:
        print("refused", exc)
""")


def test_two_runs_racing_on_a_fresh_out_never_both_claim_it(tmp_path):
    """`run` claims its --out with an O_EXCL lock file before it looks at the folder (files/out.claim_out): of two
    real processes started at the same instant on a fresh folder, one runs and the other is refused."""
    for attempt in range(8):
        out = tmp_path / f"out{attempt}"
        start = time.time() + 1.0
        racers = [subprocess.Popen([sys.executable, "-c", CLAIMER, str(out), str(start)], stdout=subprocess.PIPE,
                                   text=True) for _ in range(2)]
        said = sorted(r.communicate(timeout=60)[0].split()[0] for r in racers)
        assert said == ["claimed", "refused"], said
        assert os.listdir(out) == [LOCK_NAME]


def test_a_claim_writes_nothing_but_its_lock_so_a_racer_never_sees_a_probe(tmp_path, monkeypatch):
    # The race the test above lost once under load: the second claimer saw the first's write probe (a temporary
    # file), called the folder not empty and dropped its lock; the first, finding that lock still there, was refused
    # too. The O_EXCL lock is the claim's write probe.
    def no_probe(*args, **kwargs):
        raise AssertionError("claim_out wrote a probe file beside its lock")
    monkeypatch.setattr(out_module.tempfile, "mkstemp", no_probe)
    out = tmp_path / "out"
    assert claim_out(str(out)) == str(out) and os.listdir(out) == [LOCK_NAME]
    # Control: anything else in the folder is a folder in use, a leftover probe's name included.
    for name in ("report.json", ".writable_x1y2"):
        other = tmp_path / name.strip(".")
        other.mkdir()
        (other / name).write_text("{}")
        with pytest.raises(UsageFailure, match="not empty"):
            claim_out(str(other))


def _nightly(cwd, *args, **kw):
    return subprocess.Popen([sys.executable, "-m", "aoti_bisect", "nightly", *args], cwd=cwd, text=True, **kw)


def test_a_second_nightly_on_a_running_nights_out_is_refused_and_the_first_is_unharmed(tmp_path):
    slow = tmp_path / "slow.py"
    slow.write_text("import time\ntime.sleep(0.3)\nraise SystemExit(1)\n")
    set_path = manifest(tmp_path / "set.toml", {"slow": (str(slow), [])})
    first = _nightly(tmp_path, set_path, "--runs", "200", "--jobs", "1", "--out", "night", "--db", "h.sqlite3",
                     stderr=subprocess.PIPE, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    records = tmp_path / "night" / "records" / "shard-0-of-1.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (records.exists() and '"type": "run"' in records.read_text()):
        time.sleep(0.2)
    for extra in ((), ("--shard", "1/2", "--batch", "b")):
        second = _nightly(tmp_path, set_path, "--runs", "2", "--out", "night", "--db", "other.sqlite3", *extra,
                          stderr=subprocess.PIPE)
        _, err = second.communicate(timeout=60)  # at once: before the fix it ran every repro too
        assert second.returncode == 2 and "is in use by another `aoti-bisect nightly`" in err, err
        assert "Traceback" not in err and err.count("\n") == 1
    assert first.poll() is None, "the first night must still be running"
    first.send_signal(signal.SIGINT)
    assert first.wait(timeout=120) == 130, first.stderr.read()
    data = summary(tmp_path, "night")
    assert data["repros"][0]["rate"]["runs"] >= 1


def test_a_shard_is_refused_only_by_its_own_twin(tmp_path):
    from aoti_bisect.nightly.command import NIGHT_LOCK

    quick = tmp_path / "quick.py"
    quick.write_text("raise SystemExit(0)\n")
    set_path = manifest(tmp_path / "set.toml", {"quick": (str(quick), [])})
    night = tmp_path / "night"
    night.mkdir()
    # This process runs shard 0 of the night, as another host sharing the folder would.
    with out_lock(str(night), NIGHT_LOCK, shared=True), out_lock(str(night), ".aoti-bisect-nightly-shard-0.lock"):
        for shard, code in (("0/2", 2), ("1/2", 0)):
            proc = subprocess.run([sys.executable, "-m", "aoti_bisect", "nightly", set_path, "--runs", "2",
                                   "--shard", shard, "--batch", "b", "--out", str(night)], capture_output=True,
                                  text=True, timeout=300)
            assert proc.returncode == code and ("is in use by" in proc.stderr) == (code == 2), proc.stderr


# -- the hook record --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    '{"events": ' + "[" * 100_000 + "]" * 100_000 + "}",  # json.loads: RecursionError
    '{"events": [{"call": "aoti_load_package", "error": ' + "[" * 500 + "]" * 500 + "}]}",
    '{"events": [{"call": "aoti_load_package", "status": "returned", '
    '"constant_values": {"constants": [{"name": "w", "shape": [1e999]}]}}]}',  # int(inf): OverflowError
], ids=["past-recursion", "nested-field", "overflow"])
def test_a_hook_record_no_json_can_crash(text):
    record = parse(text)
    assert not record.events and len(record.problems) == 1 and "\n" not in record.problems[0]


def test_a_repro_writing_a_deeply_nested_hook_record_gets_its_verdict_not_255(tmp_path):
    repro = tmp_path / "deep.py"
    repro.write_text(textwrap.dedent("""
        import os
        with open(os.path.join(os.path.dirname(os.getcwd()), "hook.json"), "w") as f:  # the run's hook record
            f.write('{"events": ' + "[" * 100000 + "]" * 100000 + "}")
        raise SystemExit("the output is wrong")
    """))
    proc = subprocess.run([sys.executable, "-m", "aoti_bisect", str(repro), "--out", str(tmp_path / "out"), "--runs",
                           "1"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1 and "internal error" not in proc.stderr, proc.stderr


def test_a_hook_records_wrong_types_are_dropped_not_carried(tmp_path):
    record = parse(json.dumps({"events": [{"call": "aoti_load_package", "status": "returned", "path": ["/x"],
                                           "sha256": {"a": 1}, "error": 7, "existed_before": "yes"}]}))
    event = record.events[0]
    assert (event.path, event.sha256, event.error, event.existed_before) == (None, None, None, None)


def test_a_deeply_nested_hook_record_is_one_problem_in_a_real_read(tmp_path):
    (tmp_path / contract.HOOK_RECORD).write_text('{"events": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert len(read_hook(str(tmp_path)).problems) == 1


def test_a_hook_record_planted_as_a_link_is_not_read(tmp_path):
    target = victim(tmp_path)
    target.write_text(json.dumps({"events": [{"call": "aoti_load_package", "status": "returned", "path": "/x"}]}))
    run = tmp_path / "run"
    run.mkdir()
    os.symlink(target, run / contract.HOOK_RECORD)
    os.link(target, run / "hook-123.json")
    record = read_hook(str(run))
    assert not record.events and len(record.problems) == 2


# -- logs and run files through links ---------------------------------------------------------------------------

def test_a_runs_log_planted_as_a_hard_link_is_replaced_not_written_through(tmp_path):
    target = victim(tmp_path)
    log = tmp_path / "output.log"
    os.link(target, log)
    exit = process.execute([sys.executable, "-c", "print('child output')"], dict(os.environ), str(tmp_path),
                           str(log), 60)
    assert exit.returncode == 0
    assert target.read_text() == SECRET
    assert log.read_text() == "child output\n" and os.stat(log).st_nlink == 1


SPEC = RunSpec((sys.executable, "r.py"), "trace", 3, (("AOTI_X", "1"),))


def test_a_runs_files_planted_as_hard_links_are_replaced_not_written_through(tmp_path):
    layout = Layout(str(tmp_path / "run"))
    run_path = layout.run_path(SPEC)
    os.makedirs(run_path)
    target = victim(tmp_path)
    names = ("spec.json", "rerun.sh", "output.log", "result.json")
    for name in names:
        os.link(target, os.path.join(run_path, name))
    layout.write_run_files(SPEC, run_path, {"AOTI_X": "1"})
    layout.write_result(RunResult(SPEC, Outcome.PASSED, ProcessExit(0, None, False, 1.0, 0), run_path,
                                  os.path.join(run_path, "output.log")))
    assert target.read_text() == SECRET and os.stat(target).st_nlink == 1
    assert json.load(open(os.path.join(run_path, "spec.json")))["stage"] == "trace"
    assert os.access(os.path.join(run_path, "rerun.sh"), os.X_OK)


# -- a run's folders --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("planted", ["cache/{key}", "cache/precompiled-headers", "cache/{key}.reuse",
                                     "runs/trace-003", "runs"])
def test_a_runs_folders_are_made_without_following_a_planted_link(tmp_path, planted, monkeypatch):
    monkeypatch.delenv(HEADERS_ENV, raising=False)  # the cache root's own headers (the suite shares one folder)
    layout = Layout(str(tmp_path / "run"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = tmp_path / "run" / planted.format(key=compile_key(SPEC.env_dict))
    link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(elsewhere, link)
    with pytest.raises(OSError, match="not followed"):
        layout.prepare(SPEC, layout.run_path(SPEC), 0, layout.cache_dir(SPEC.env_dict) + ".reuse")
    assert os.listdir(elsewhere) == []


def test_a_runs_folders_are_made(tmp_path):
    layout = Layout(str(tmp_path / "run"))
    layout.prepare(SPEC, layout.run_path(SPEC), 1, layout.cache_dir(SPEC.env_dict) + ".reuse")
    for folder in ("cwd", "tmp"):
        assert os.path.isdir(os.path.join(layout.run_path(SPEC), folder))
    assert os.path.isdir(os.path.join(layout.cache_dir(SPEC.env_dict, 1), "inductor"))
    assert os.path.isdir(layout.cache_dir(SPEC.env_dict) + ".reuse")


@pytest.mark.parametrize("shared", [False, True])
def test_the_precompiled_headers_are_the_cache_roots_unless_the_environment_names_a_folder(tmp_path, monkeypatch,
                                                                                            shared):
    headers = tmp_path / "headers" if shared else tmp_path / "run" / "cache" / "precompiled-headers"
    if shared:
        monkeypatch.setenv(HEADERS_ENV, str(headers))
    else:
        monkeypatch.delenv(HEADERS_ENV, raising=False)
    layout = Layout(str(tmp_path / "run"))
    layout.prepare(SPEC, layout.run_path(SPEC), 0, None)
    link = os.path.join(layout.run_path(SPEC), "tmp", f"torchinductor_{user_name()}")
    assert os.path.isdir(headers) and os.readlink(link) == os.path.realpath(headers)
    assert os.path.exists(tmp_path / "run" / "cache" / "precompiled-headers") != shared


# -- the redirect mapping ---------------------------------------------------------------------------------------

def _roots(tmp_path, mapping):
    spec = RunSpec(("python", "r.py"), "trace", 3, ((contract.REDIRECT_ENV, str(mapping)),))
    run = RunResult(spec, Outcome.PASSED, ProcessExit(0, None, False, 1.0, 0), str(tmp_path / "runs" / "trace-003"),
                    str(tmp_path / "log"), None, str(tmp_path / "cache" / "k"))
    return RunEvidence(str(tmp_path / "prebuilt"))._roots(run)


def test_the_redirect_mapping_is_read_without_following_a_link(tmp_path):
    target = victim(tmp_path)
    target.write_text(json.dumps({"abc": "/home/user/secret-folder/copy.pt2"}))
    (tmp_path / "prebuilt").mkdir()
    os.symlink(target, tmp_path / "prebuilt" / "redirect-1.json")
    assert not any("secret-folder" in r for r in _roots(tmp_path, tmp_path / "prebuilt" / "redirect-1.json"))


@pytest.mark.parametrize("text", ['{"a": ["/x"], "b": 7}', "[" * 100_000, '{"a": ' + "[" * 500 + "]" * 500 + "}"],
                         ids=["wrong-types", "past-recursion", "nested"])
def test_a_damaged_redirect_mapping_is_no_mapping(tmp_path, text):
    (tmp_path / "prebuilt").mkdir()
    (tmp_path / "prebuilt" / "redirect-1.json").write_text(text)
    roots = _roots(tmp_path, tmp_path / "prebuilt" / "redirect-1.json")
    assert all(isinstance(r, str) for r in roots)


# -- the hook's temporary files ---------------------------------------------------------------------------------

def _plant_tmp(path, target):
    """A link at the temporary name the hook used to write through: `{path}.{pid}.tmp`."""
    os.symlink(target, f"{path}.{os.getpid()}.tmp")


def test_the_hooks_json_writes_never_go_through_a_planted_link(tmp_path):
    target = victim(tmp_path)
    for name in ("fakecheck.json", "hook.json"):
        path = tmp_path / name
        _plant_tmp(path, target)
        os.symlink(target, path)  # at the name itself: replaced, never followed
    fakecheck.write_json(str(tmp_path / "fakecheck.json"), {"calls": []})
    record = Record(str(tmp_path / "hook.json"))
    record.target = record.path  # as _claim leaves it once the run's first process owns the name
    record.add({"call": "aoti_load_package"})
    assert target.read_text() == SECRET
    assert json.load(open(tmp_path / "fakecheck.json")) == {"calls": []}
    assert json.load(open(tmp_path / "hook.json"))["events"][0]["call"] == "aoti_load_package"
    assert not record.errors


def test_a_failed_hook_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "capture.json"
    path.write_text("old")
    with pytest.raises(ZeroDivisionError):
        with atomic.replacing(str(path)) as f:
            f.write("half")
            1 / 0
    assert path.read_text() == "old" and os.listdir(tmp_path) == ["capture.json"]


def test_every_reader_of_a_childs_json_takes_json_nested_past_the_recursion_limit_as_damaged():
    from aoti_bisect.aoti import eagerwalk, fakecheck, provenance
    deep = "[" * 100_000 + "]" * 100_000
    assert "recursion" in fakecheck.parse(deep).problem
    assert "recursion" in eagerwalk.parse(deep).problem
    assert provenance.parse_kernel_information(deep) == {}
