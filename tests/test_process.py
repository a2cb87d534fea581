"""Starting, capturing and killing a repro's processes: real children (small Python scripts stand in)."""
import os
import resource
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest
from conftest import spec

from aoti_bisect.files.own import read_log
from aoti_bisect.run import process
from aoti_bisect.run.harness import Harness
from aoti_bisect.run.types import Outcome


def test_printf_lines_survive_abort(tmp_path, write_script):
    child = write_script("abort.py", """
        import ctypes
        libc = ctypes.CDLL(None)
        libc.printf(b"[ before_launch: cpp_fused_add_0 ]\\n")
        libc.printf(b"[ after_launch: cpp_fused_add_0 ]\\n")
        libc.printf(b"[ before_launch: cpp_fused_mul_1 ]\\n")
        libc.abort()
    """)
    r = Harness(str(tmp_path / "run")).run(spec(child))
    text = read_log(r.log_path)
    assert "[ before_launch: cpp_fused_mul_1 ]" in text
    assert r.outcome is Outcome.CRASHED
    assert r.signature.kind == "abort"
    assert r.signature.kernel == "cpp_fused_mul_1"


def test_segfault_is_classified_with_phase(tmp_path, write_script):
    child = write_script("segv.py", """
        import ctypes
        def aoti_load_package():
            ctypes.string_at(0)
        aoti_load_package()
    """)
    r = Harness(str(tmp_path / "run")).run(spec(child))
    assert r.outcome is Outcome.CRASHED
    assert r.exit.signal == signal.SIGSEGV
    assert r.signature.kind == "segfault"
    assert "Fatal Python error: Segmentation fault" in read_log(r.log_path)


def test_hang_with_grandchildren_holding_stdout_is_killed(tmp_path, write_script):
    child = write_script("hang.py", """
        import subprocess, sys, time
        a = subprocess.Popen(["sleep", "1000"])                            # same group, holds stdout
        b = subprocess.Popen(["sleep", "1000"], start_new_session=True)    # escaped the group
        print("pids", a.pid, b.pid, flush=True)
        time.sleep(1000)
    """)
    start = time.monotonic()
    r = Harness(str(tmp_path / "run")).run(spec(child, timeout=3.0))
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


@pytest.mark.slow
def test_flood_is_capped_with_bounded_memory(tmp_path, write_script):
    child = write_script("flood.py", """
        import os
        os.write(1, b"HEAD-MARKER\\n")
        block = b"x" * ((1 << 20) - 1) + b"\\n"
        for _ in range(2048):          # 2 GiB
            os.write(1, block)
        os.write(1, b"TAIL-MARKER\\n")
    """)
    limits = process.OutputLimits(head_bytes=1 << 20, tail_bytes=1 << 20)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    r = Harness(str(tmp_path / "run"), limits=limits).run(spec(child, timeout=300))
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    size = os.path.getsize(r.log_path)
    assert size < 3 << 20
    assert r.exit.dropped_bytes > (2 << 30) - (4 << 20)
    text = read_log(r.log_path)
    assert text.startswith("HEAD-MARKER") and text.rstrip().endswith("TAIL-MARKER")
    assert "bytes of output dropped here" in text
    assert grown_kib < 64 * 1024  # the parent never held more than a few MiB of it
