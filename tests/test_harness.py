"""The run directory: its layout, per-flag-set caches, rerun.sh, parallel slots (real child processes)."""
import glob
import os
import subprocess
import sys

import pytest
from conftest import spec

from aoti_bisect.files.own import read_log
from aoti_bisect.run import environment
from aoti_bisect.run.harness import Harness
from aoti_bisect.run.layout import compile_key
from aoti_bisect.run.types import Outcome, RunSpec


def test_flag_sets_get_separate_caches_and_rerun_script(tmp_path, write_script):
    child = write_script("env.py", """
        import os
        print(os.environ["TORCHINDUCTOR_CACHE_DIR"], os.environ["TMPDIR"], os.getcwd())
    """)
    h = Harness(str(tmp_path / "run"))
    a = h.run(spec(child, 0))
    b = h.run(spec(child, 1, env=(("AOTI_RUNTIME_CHECK_INPUTS", "1"),)))
    c = h.run(spec(child, 2, env=(("AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER", "3"),)))
    cache_a, tmp_a, cwd_a = read_log(a.log_path).split()
    cache_b = read_log(b.log_path).split()[0]
    cache_c = read_log(c.log_path).split()[0]
    assert cache_a == cache_b != cache_c  # run-time flags share the compile, compile-time flags never do
    assert compile_key({"CUDA_LAUNCH_BLOCKING": "1"}) == "default"
    assert tmp_a.startswith(str(tmp_path / "run")) and cwd_a.startswith(str(tmp_path / "run"))
    rerun = open(os.path.join(c.run_dir, "rerun.sh")).read()
    assert "AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER=3" in rerun and "PYTHONUNBUFFERED=1" in rerun
    out = subprocess.run(["sh", os.path.join(c.run_dir, "rerun.sh")], capture_output=True, text=True)
    assert out.stdout.split()[0] == cache_c


@pytest.mark.parametrize("reuse, compiles", [("all", 1), ("hooked", 3)])
def test_parallel_runs_never_share_a_writable_cache_and_those_taking_the_package_compile_once(tmp_path, write_script,
                                                                                              reuse, compiles):
    # Stands in for AOTI: a cold cache "compiles" (slowly); every run then rewrites a file in the cache
    # non-atomically and reads it back, as aoti_compile_and_package does with extern_kernel_nodes.json. Runs that
    # take the flag set's package wait for its first run; runs that compile the user's way anyway (the baseline's
    # under --reuse hooked) fill the slots beside it, each in its own slot's cache, and later ones take the snapshot.
    child = write_script("compile.py", """
        import os, time
        cache = os.environ["TORCHINDUCTOR_CACHE_DIR"]
        artifact = os.path.join(cache, "model.so")
        if not os.path.exists(artifact):
            time.sleep(0.5)
            open(artifact, "w").write("compiled")
            print("compiled")
        start = time.time()
        with open(os.path.join(cache, "nodes.json"), "w") as f:
            f.write("{}")
        time.sleep(0.3)
        print(cache, start, time.time(), open(os.path.join(cache, "nodes.json")).read() or "EMPTY")
    """)
    h = Harness(str(tmp_path / "run"), jobs=3, reuse=reuse)
    results = h.scheduler.run_many([spec(child, i) for i in range(9)])
    logs = [read_log(r.log_path) for r in results]
    assert sum("compiled" in log for log in logs) == compiles
    runs = [log.split()[-4:] for log in logs]
    assert all(body == "{}" for *_, body in runs)
    assert len({cache for cache, *_ in runs}) == 3
    for i, (cache_a, start_a, end_a, _) in enumerate(runs):
        for cache_b, start_b, end_b, _ in runs[i + 1:]:
            overlap = float(start_a) < float(end_b) and float(start_b) < float(end_a)
            assert not (overlap and cache_a == cache_b)


def test_parallel_runs_respect_jobs_and_stop(tmp_path, write_script):
    # Each child notes when it starts and ends; the notes are taken inside its process lifetime, so the
    # concurrency read from them can only understate the real one. The 1 s sleep dwarfs start-up skew.
    notes = tmp_path / "notes"
    child = write_script("fail.py", f"""
        import time
        def note(what):
            with open({str(notes)!r}, "a") as f:
                f.write(f"{{what}} {{time.time()}}\\n")
        note("start")
        time.sleep(1.0)
        note("end")
        raise SystemExit('boom')
    """)
    h = Harness(str(tmp_path / "run"), jobs=2)
    seen = []
    results = h.scheduler.run_many([spec(child, i) for i in range(6)], on_result=seen.append,
                         stop=lambda rs: len(rs) >= 3)
    events = sorted((float(t), what == "start") for what, t in map(str.split, notes.read_text().splitlines()))
    alive = most = 0
    for _, started in events:  # at equal times an end sorts before a start
        alive += 1 if started else -1
        most = max(most, alive)
    assert most == 2  # never more than --jobs at once, and --jobs reached once the first run warmed the key
    assert 3 <= len(results) <= 4  # at most one batch in flight when stop fired
    assert all(r.outcome is Outcome.FAILED for r in results)
    assert [r.spec.index for r in results] == sorted(r.spec.index for r in results)
    assert sum(started for _, started in events) == len(results)  # nothing started after stop fired


def test_hooked_runs_keep_bytecode_in_the_cache_root_where_the_user_turned_it_off(tmp_path, write_script,
                                                                                    monkeypatch):
    """PYTHONDONTWRITEBYTECODE (container images set it), with torch installed without bytecode, makes every
    process compile torch's sources afresh; hooked runs keep theirs under the cache root, the runs that stand
    for the user's keep the user's setting."""
    (tmp_path / "helper.py").write_text("VALUE = 7\n")
    script = write_script("uses_helper.py", f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        import helper
        print("VALUE", helper.VALUE, "DONT_WRITE", sys.flags.dont_write_bytecode)
    """)
    assert not environment.torch_bytecode_missing()  # pip wrote torch's bytecode at install: no prefix here
    assert Harness(str(tmp_path / "run0"), base_env={"PYTHONDONTWRITEBYTECODE": "1"}).environment.bytecode_cache() == {}
    monkeypatch.setattr(environment, "torch_bytecode_missing", lambda: True)  # as in the lent GPU host's image
    h = Harness(str(tmp_path / "run"), base_env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}, reuse="hooked")
    base = h.run(RunSpec((sys.executable, script), "baseline", 0, (), 60.0, False))
    assert "DONT_WRITE 1" in open(base.log_path).read()
    trace = h.run(RunSpec((sys.executable, script), "trace", 1, (), 60.0, True))
    assert "VALUE 7 DONT_WRITE 0" in open(trace.log_path).read()
    cached = glob.glob(str(tmp_path / "run" / "cache" / "pycache" / "**" / "helper*.pyc"), recursive=True)
    assert cached and not (tmp_path / "__pycache__").exists()  # nothing written beside the user's sources
    spec = RunSpec(("python", "x.py"), "baseline", 2, (), 1.0, False)
    assert "PYTHONPYCACHEPREFIX" not in h.environment.overlay(spec, "/r")
    mine = Harness(str(tmp_path / "run2"), base_env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1",
                                                     "PYTHONPYCACHEPREFIX": str(tmp_path / "mine")})
    assert mine.environment.bytecode_cache() == {}  # the user's own prefix stands
    off = Harness(str(tmp_path / "run3"), base_env={**os.environ, "PYTHONDONTWRITEBYTECODE": ""})
    assert off.environment.bytecode_cache() == {}
