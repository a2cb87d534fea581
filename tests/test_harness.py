"""The orchestrator against real child processes (small Python children stand in for a repro)."""
import json
import os
import resource
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from aoti_bisect.files import read_log
from aoti_bisect.run import process
from aoti_bisect.run.harness import Harness, compile_key
from aoti_bisect.run.types import Outcome, RunSpec


def _script(tmp_path, name, body):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return str(path)


def _spec(path, index=0, timeout=60.0, env=()):
    return RunSpec((sys.executable, path), "baseline", index, tuple(env), timeout)


def test_printf_lines_survive_abort(tmp_path):
    child = _script(tmp_path, "abort.py", """
        import ctypes
        libc = ctypes.CDLL(None)
        libc.printf(b"[ before_launch: cpp_fused_add_0 ]\\n")
        libc.printf(b"[ after_launch: cpp_fused_add_0 ]\\n")
        libc.printf(b"[ before_launch: cpp_fused_mul_1 ]\\n")
        libc.abort()
    """)
    r = Harness(str(tmp_path / "run")).run(_spec(child))
    text = read_log(r.log_path)
    assert "[ before_launch: cpp_fused_mul_1 ]" in text
    assert r.outcome is Outcome.CRASHED
    assert r.signature.kind == "abort"
    assert r.signature.kernel == "cpp_fused_mul_1"


def test_segfault_is_classified_with_phase(tmp_path):
    child = _script(tmp_path, "segv.py", """
        import ctypes
        def aoti_load_package():
            ctypes.string_at(0)
        aoti_load_package()
    """)
    r = Harness(str(tmp_path / "run")).run(_spec(child))
    assert r.outcome is Outcome.CRASHED
    assert r.exit.signal == signal.SIGSEGV
    assert r.signature.kind == "segfault"
    assert "Fatal Python error: Segmentation fault" in read_log(r.log_path)


def test_hang_with_grandchildren_holding_stdout_is_killed(tmp_path):
    child = _script(tmp_path, "hang.py", """
        import subprocess, sys, time
        a = subprocess.Popen(["sleep", "1000"])                            # same group, holds stdout
        b = subprocess.Popen(["sleep", "1000"], start_new_session=True)    # escaped the group
        print("pids", a.pid, b.pid, flush=True)
        time.sleep(1000)
    """)
    start = time.monotonic()
    r = Harness(str(tmp_path / "run")).run(_spec(child, timeout=3.0))
    elapsed = time.monotonic() - start
    assert r.outcome is Outcome.TIMEOUT and r.signature.kind == "timeout"
    assert elapsed < 3.0 + 5.0
    pids = [int(p) for p in read_log(r.log_path).split("pids", 1)[1].split()[:2]]
    time.sleep(0.2)
    for pid in pids:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_tree_kill_does_not_wait_for_zombies():
    # Orphans of a run stay zombies for good where PID 1 never reaps (containers); here the zombie's parent
    # lives on outside the killed group, so this holds on any host.
    keeper = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import os, time
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        print(pid, flush=True)
        time.sleep(1000)
    """)], stdout=subprocess.PIPE, text=True)
    group = subprocess.Popen(["sleep", "1000"], start_new_session=True)
    try:
        zombie = psutil.Process(int(keeper.stdout.readline()))
        while zombie.status() != psutil.STATUS_ZOMBIE:
            time.sleep(0.01)
        start = time.monotonic()
        process.kill_tree(group.pid, [zombie, psutil.Process(group.pid)], grace=5.0)
        assert time.monotonic() - start < 2.0
        assert group.wait(timeout=1) == -signal.SIGTERM
    finally:
        keeper.kill()
        keeper.wait()
        group.kill()
        group.wait()


def test_flood_is_capped_with_bounded_memory(tmp_path):
    child = _script(tmp_path, "flood.py", """
        import os
        os.write(1, b"HEAD-MARKER\\n")
        block = b"x" * ((1 << 20) - 1) + b"\\n"
        for _ in range(2048):          # 2 GiB
            os.write(1, block)
        os.write(1, b"TAIL-MARKER\\n")
    """)
    limits = process.OutputLimits(head_bytes=1 << 20, tail_bytes=1 << 20)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    r = Harness(str(tmp_path / "run"), limits=limits).run(_spec(child, timeout=300))
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    size = os.path.getsize(r.log_path)
    assert size < 3 << 20
    assert r.exit.dropped_bytes > (2 << 30) - (4 << 20)
    text = read_log(r.log_path)
    assert text.startswith("HEAD-MARKER") and text.rstrip().endswith("TAIL-MARKER")
    assert "bytes of output dropped here" in text
    assert grown_kib < 64 * 1024  # the parent never held more than a few MiB of it


def test_flag_sets_get_separate_caches_and_rerun_script(tmp_path):
    child = _script(tmp_path, "env.py", """
        import os
        print(os.environ["TORCHINDUCTOR_CACHE_DIR"], os.environ["TMPDIR"], os.getcwd())
    """)
    h = Harness(str(tmp_path / "run"))
    a = h.run(_spec(child, 0))
    b = h.run(_spec(child, 1, env=(("AOTI_RUNTIME_CHECK_INPUTS", "1"),)))
    c = h.run(_spec(child, 2, env=(("AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER", "3"),)))
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


def test_parallel_runs_compile_once_and_never_share_a_writable_cache(tmp_path):
    # Stands in for AOTI: a cold cache "compiles" (slowly); every run then rewrites a file in the cache
    # non-atomically and reads it back, as aoti_compile_and_package does with extern_kernel_nodes.json.
    child = _script(tmp_path, "compile.py", """
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
    h = Harness(str(tmp_path / "run"), jobs=3)
    results = h.run_many([_spec(child, i) for i in range(9)])
    logs = [read_log(r.log_path) for r in results]
    assert sum("compiled" in log for log in logs) == 1
    runs = [log.split()[-4:] for log in logs]
    assert all(body == "{}" for *_, body in runs)
    assert len({cache for cache, *_ in runs}) == 3
    for i, (cache_a, start_a, end_a, _) in enumerate(runs):
        for cache_b, start_b, end_b, _ in runs[i + 1:]:
            overlap = float(start_a) < float(end_b) and float(start_b) < float(end_a)
            assert not (overlap and cache_a == cache_b)


def test_parallel_runs_respect_jobs_and_stop(tmp_path):
    child = _script(tmp_path, "fail.py", "raise SystemExit('boom')\n")
    h = Harness(str(tmp_path / "run"), jobs=2)
    seen = []
    results = h.run_many([_spec(child, i) for i in range(6)], on_result=seen.append,
                         stop=lambda rs: len(rs) >= 3)
    assert 3 <= len(results) <= 4  # at most one batch in flight when stop fired
    assert all(r.outcome is Outcome.FAILED for r in results)
    assert [r.spec.index for r in results] == sorted(r.spec.index for r in results)


def test_sigint_kills_children_and_writes_partial_report(tmp_path):
    marker = tmp_path / "first-done"
    pidfile = tmp_path / "pids"
    child = _script(tmp_path, "slow.py", f"""
        import os, sys, time
        with open({str(pidfile)!r}, "a") as f:
            f.write(f"{{os.getpid()}}\\n")
        if not os.path.exists({str(marker)!r}):
            open({str(marker)!r}, "w").close()
            raise SystemExit("first run fails fast")
        time.sleep(1000)
    """)
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "aoti_bisect", child, "--runs", "4", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(pidfile.read_text().split() if pidfile.exists() else []) < 2:
        time.sleep(0.2)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
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
