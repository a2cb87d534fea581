"""The crash witness: its parsers on a real captured witness file (flaky_custom_op_crash, a custom op's SIGSEGV
inside a compiled model), and the library itself in real processes that crash in a function of their own."""
import os
import shutil
import signal
import subprocess
import sys

import pytest

from aoti_bisect.child.contract import CRASH_FILE
import itertools

from aoti_bisect.diagnose.findings import Stage
from aoti_bisect.diagnose.judge import Ledger, crash_verdict
from aoti_bisect.aoti import wrapper
from aoti_bisect.run import process
from aoti_bisect.run.classify import fingerprint
from aoti_bisect.run.harness import Harness, _with_crash
from aoti_bisect.run.classify import Frame
from aoti_bisect.report.facts import render
from aoti_bisect.run.types import DEVICE_DUMP, CrashSite, Outcome, ProcessExit, RunResult, RunSpec, Signature
from aoti_bisect.run.witness import (Witness, assert_site, culprit_frame, native_site, parse, parse_addr2line,
                                     python_op_frame, uncaught_exception)

LOGS = "tests/logs/cpu/"


def _read(name: str) -> str:
    with open(LOGS + name) as f:
        return f.read()


def test_the_captured_custom_op_crash_names_the_ops_function_as_the_faulting_frame():
    crashes = parse(_read("witness-flaky_custom_op_crash.txt"))
    assert len(crashes) == 1 and crashes[0].signal == signal.SIGSEGV
    frame, exact, callee = culprit_frame(crashes[0])
    # The handler's own frames, the re-raise and libc are skipped: the fault is in the op, at its exact instruction.
    assert frame.object.endswith("bisectlab_flaky_gather.so") and frame.symbol == "_Z14shifted_gatherRKN2at6TensorES2_"
    assert exact and callee is None


def test_a_block_cut_short_by_the_dying_process_is_no_crash_and_hostile_text_never_raises():
    text = _read("witness-flaky_custom_op_crash.txt")
    assert parse(text[: text.index("\nend")]) == []
    assert parse("frame 0x1 0x1 /x.so\nend\n" + "\x00garbage\n" * 3 + "aoti-bisect-crash pid=x") == []
    assert parse("") == []


def test_addr2line_answers_are_read_with_and_without_a_source_line():
    assert parse_addr2line("rare_gather(at::Tensor const&, at::Tensor const&)\n/tmp/ext/main.cpp:18\n") == (
        "rare_gather(at::Tensor const&, at::Tensor const&)", "main.cpp:18")
    assert parse_addr2line("shifted_gather(at::Tensor const&, at::Tensor const&)\n??:?\n") == (
        "shifted_gather(at::Tensor const&, at::Tensor const&)", None)
    assert parse_addr2line("??\n??:0\n") == (None, None)
    assert parse_addr2line("") == (None, None)


def test_without_addr2line_the_site_keeps_the_exported_symbol():
    crash = parse(_read("witness-flaky_custom_op_crash.txt"))[0]
    site = native_site(crash, culprit_frame(crash), (None, None), _read("flaky_custom_op_crash-witnessed.log"))
    assert site.how == "SIGSEGV" and site.function == "_Z14shifted_gatherRKN2at6TensorES2_"
    assert site.library == "bisectlab_flaky_gather.so" and site.source == "native stack"


FAULTHANDLER_PYTHON_OP = """Fatal Python error: Segmentation fault

Current thread 0x00007f0e (most recent call first):
  File "/usr/lib/python3.11/ctypes/__init__.py", line 519 in string_at
  File "/work/repro.py", line 21 in my_gather_impl
  File "/usr/lib/python3.11/site-packages/torch/_library/custom_ops.py", line 617 in inner
  File "/usr/lib/python3.11/site-packages/torch/export/pt2_archive/_package.py", line 743 in __call__
  File "/work/repro.py", line 40 in main
  File "/work/repro.py", line 44 in <module>
"""


def test_a_python_op_the_model_called_back_is_named_but_the_scripts_own_call_is_not():
    assert python_op_frame(FAULTHANDLER_PYTHON_OP) == Frame("/work/repro.py", "my_gather_impl", 21)
    own = FAULTHANDLER_PYTHON_OP.replace('  File "/work/repro.py", line 21 in my_gather_impl\n', "").replace(
        '  File "/usr/lib/python3.11/site-packages/torch/_library/custom_ops.py", line 617 in inner\n', "")
    own = own.replace("ctypes/__init__.py", "x/torch/export/pt2_archive/_package.py")
    assert python_op_frame(own) is None
    assert python_op_frame(_read("flaky_custom_op_crash-witnessed.log")) is None  # the op is C++, torch runs it


_INDEX = itertools.count()


def _result(crash, kind="segfault", phase="run") -> RunResult:
    spec = RunSpec(("python", "repro.py"), "baseline", next(_INDEX))
    return RunResult(spec, Outcome.CRASHED, ProcessExit(None, 11, False, 1.0, 0), "runs/b", "runs/b/output.log",
                     Signature(kind, phase, "killed by SIGSEGV", None, fingerprint(kind, phase, "m", None)),
                     crash=crash)


def test_a_crash_in_a_custom_ops_function_convicts_the_graphs_op_of_that_name():
    with open(LOGS + "wrapper_flaky_custom_op_crash.cpp") as f:
        graph = wrapper.parse_wrapper(f.read(), "w.cpp", wrapper.extern_nodes_for(LOGS + "wrapper_flaky_custom_op_crash.cpp"))
    site = CrashSite("SIGSEGV", "shifted_gather(at::Tensor const&, at::Tensor const&)", "main.cpp:18",
                     "bisectlab_flaky_gather.so")
    culprit = crash_culprit([_result(site)], graph)
    assert culprit.kind == "outside_instrumented_kernels" and culprit.kernel == "bisectlab::shifted_gather"
    assert "SIGSEGV in shifted_gather(at::Tensor const&, at::Tensor const&) (main.cpp:18)" in render(culprit.summary)


def test_a_crash_in_a_generated_kernel_convicts_its_launch_and_a_load_crash_convicts_nothing():
    with open(LOGS + "wrapper_flaky_custom_op_crash.cpp") as f:
        graph = wrapper.parse_wrapper(f.read(), "w.cpp", wrapper.extern_nodes_for(LOGS + "wrapper_flaky_custom_op_crash.cpp"))
    name = graph.launches[0].name
    site = CrashSite("SIGSEGV", f"{name}._omp_fn.0", None, "model.wrapper.so")
    assert crash_culprit([_result(site)], graph).kernel == name
    assert crash_culprit([_result(site, phase="load")], graph) is None  # the load doctor's
    assert crash_culprit([_result(None)], graph) is None


def crash_culprit(results: list[RunResult], graph):
    """What the judge convicts from these runs alone (diagnose/judge.py)."""
    stage = Stage("baseline", {}, results=list(results))
    ledger = Ledger()
    ledger.add_runs([stage], graph)
    return crash_verdict(ledger, graph)


BOOM = """
#include <stddef.h>
int boom_read(const int *p, size_t i) {
    return p[i];
}
"""
CALLER = """
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
lib.boom_read.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
print("reading", flush=True)
lib.boom_read(None, 1 << 40)
"""


@pytest.fixture(scope="module")
def witnessed(tmp_path_factory):
    """A real library with -g whose function reads far out of bounds, called from Python under the witness."""
    if shutil.which("cc") is None:
        pytest.skip("no C compiler")
    root = tmp_path_factory.mktemp("witness")
    (root / "boom.c").write_text(BOOM)
    subprocess.run(["cc", "-g", "-O0", "-shared", "-fPIC", "-o", str(root / "libboom.so"), str(root / "boom.c")],
                   check=True)
    (root / "caller.py").write_text(CALLER)
    witness = Witness(str(root / "witness"), dict(os.environ))
    return root, witness


def _run(root, witness, argv, name):
    run = root / name
    (run / "cwd").mkdir(parents=True)
    env = {**os.environ, "PYTHONFAULTHANDLER": "1", **witness.env(str(run))}
    exit = process.execute(argv, env, str(run / "cwd"), str(run / "output.log"), 60)
    return run, exit


def test_a_real_crash_in_a_library_of_the_users_is_named_with_its_source_line(witnessed):
    root, witness = witnessed
    run, exit = _run(root, witness, [sys.executable, str(root / "caller.py"), str(root / "libboom.so")], "crash")
    assert exit.signal == signal.SIGSEGV  # the witness lets the signal end the process as it would have
    log = (run / "output.log").read_text()
    assert "Fatal Python error: Segmentation fault" in log  # faulthandler still speaks first
    site, problem = witness.read(str(run), exit, log)
    assert problem is None and site.function == "boom_read" and site.location == "boom.c:4"
    assert site.library == "libboom.so" and site.how == "SIGSEGV"


def test_a_passing_run_leaves_no_witness_file_and_exits_as_it_would(witnessed):
    root, witness = witnessed
    run, exit = _run(root, witness, [sys.executable, "-c", "print('fine')"], "pass")
    assert exit.returncode == 0 and not (run / CRASH_FILE).exists()
    assert witness.read(str(run), exit, "fine\n") == (None, None)


def test_a_crash_with_no_witness_file_says_why_in_one_line(witnessed):
    root, witness = witnessed
    run = root / "nofile"
    run.mkdir()
    site, problem = witness.read(str(run), ProcessExit(None, signal.SIGSEGV, False, 1.0, 0), "")
    assert site is None and "no native stack" in problem
    (run / "elsewhere").write_text("aoti-bisect-crash pid=1 signal=11 addr=0x0\nend\n")
    os.symlink(run / "elsewhere", run / CRASH_FILE)
    site, problem = witness.read(str(run), ProcessExit(None, signal.SIGSEGV, False, 1.0, 0), "")
    assert site is None and "link" in problem


def test_an_abort_on_an_uncaught_exception_at_exit_names_no_site(tmp_path):
    # index_from_cumsum_cuda on an H200: after the device assert, the package's destructor threw the sticky CUDA
    # error at interpreter exit and std::terminate aborted; the throw is in the wrapper, where nothing faulted.
    with open("tests/logs/cuda/witness-abort-uncaught-exception-at-exit.txt") as f:
        text = f.read()
    crash = parse(text)[0]
    assert crash.signal == signal.SIGABRT and uncaught_exception(crash)
    assert not uncaught_exception(parse(_read("witness-flaky_custom_op_crash.txt"))[0])
    run = tmp_path / "run"
    run.mkdir()
    (run / CRASH_FILE).write_text(text)
    witness = Witness(str(tmp_path / "w"), dict(os.environ))
    witness.cuda_gdb = None
    site, problem = witness.read(str(run), ProcessExit(None, signal.SIGABRT, False, 1.0, 0), "")
    assert site is None and "nobody caught" in problem


def test_a_device_dump_outweighs_host_stacks_and_convicts_a_kernel_without_a_wrapper():
    dumped = CrashSite("Warp Illegal Address", "gather_rows", "k.py:22", None, "", DEVICE_DUMP)
    host = CrashSite("SIGABRT", "model.wrapper.so+0x1b180", None, "model.wrapper.so")
    runs = [_result(host, kind="illegal_memory_access"), _result(host, kind="illegal_memory_access"),
            _result(dumped, kind="illegal_memory_access")]
    culprit = crash_culprit(runs, None)  # a package the runs did not build: no wrapper to map to
    assert culprit.kind == "kernel" and culprit.kernel == "gather_rows"
    assert "by the run's own CUDA core dump" in render(culprit.summary)


def test_a_dumped_device_assert_is_a_device_assert_whatever_the_host_printed():
    # index_from_cumsum_cuda on an H200: in the run whose assert the driver dumped, the assert's printed lines were
    # lost and the host saw a failed launch; its nine other runs printed the assert.
    host = Signature("illegal_memory_access", "run", "killed by SIGABRT (Aborted)", None, "f")
    site = CrashSite("Warp Assert", "triton_poi_fused_add_embedding_1", None, None, "", DEVICE_DUMP)
    sig = _with_crash(host, site)
    assert (sig.kind, sig.kernel) == ("device_assert", "triton_poi_fused_add_embedding_1")
    assert sig.fingerprint == fingerprint("device_assert", "run", host.message, site.function)
    native = CrashSite("SIGSEGV", "shifted_gather", "main.cpp:18")
    assert _with_crash(Signature("segfault", "run", "killed by SIGSEGV", "k", "f"), native).kind == "segfault"


def test_a_user_preload_is_kept_behind_the_witness(tmp_path):
    witness = Witness(str(tmp_path / "w"), {**os.environ, "LD_PRELOAD": "/opt/theirs.so"})
    env = witness.env(str(tmp_path / "run"))
    if witness.library() is None:
        pytest.skip(witness.problem)
    assert env["LD_PRELOAD"].endswith(":/opt/theirs.so") and env["LD_PRELOAD"].startswith(str(tmp_path / "w"))


# -- CUDA: the run's core dump, read by cuda-gdb (its real output captured on an H200, tests/logs/cuda/) ----------
def _fake_cuda_gdb(tmp_path, body: str) -> str:
    """A stand-in for cuda-gdb (there is no GPU here) that prints what the real one printed, or hangs."""
    tool = tmp_path / "cuda-gdb"
    tool.write_text("#!/bin/sh\n" + body + "\n")
    tool.chmod(0o755)
    return str(tool)


def _crashed_run(tmp_path, dump_bytes: bytes = b"\x7fELF dump") -> str:
    run = tmp_path / "run"
    run.mkdir()
    (run / "cudacore.4242").write_bytes(dump_bytes)
    return str(run)


def test_a_dumped_illegal_address_names_the_user_kernel_and_convicts_its_launch(tmp_path):
    witness = Witness(str(tmp_path / "w"), dict(os.environ))
    witness.cuda_gdb = _fake_cuda_gdb(tmp_path, "cat " + os.path.abspath("tests/logs/cuda/cudagdb-ima-user-triton.log"))
    run = _crashed_run(tmp_path)
    site, problem = witness.read(run, ProcessExit(1, None, False, 60.0, 0), "RuntimeError: CUDA error")
    assert problem is None and site.source == "CUDA core dump" and site.function == "gather_rows"
    assert site.how == "Warp Illegal Address" and site.location.endswith(".py:22") and "block (" in site.detail
    with open("tests/logs/cuda/wrapper_ima_user_triton.cpp") as f:
        graph = wrapper.parse_wrapper(f.read(), "w.cpp")
    culprit = crash_culprit([_result(site, kind="illegal_memory_access")], graph)
    assert culprit.kind == "kernel" and culprit.kernel == "gather_rows_0"  # the user kernel's launch name


@pytest.mark.parametrize("log", ["cudagdb-not-a-dump-random.log", "cudagdb-truncated-half.log",
                                 "cudagdb-dump-cut-by-exit.log"])
def test_a_dump_cuda_gdb_cannot_read_is_one_line_and_no_site(tmp_path, log):
    witness = Witness(str(tmp_path / "w"), dict(os.environ))
    witness.cuda_gdb = _fake_cuda_gdb(tmp_path, "cat " + os.path.abspath("tests/logs/cuda/" + log) + "; exit 1")
    site, problem = witness.read(_crashed_run(tmp_path), ProcessExit(1, None, False, 1.0, 0), "")
    assert site is None and "no device exception" in problem


def test_a_reader_that_hangs_is_cut_off_and_a_huge_or_linked_dump_is_not_read(tmp_path, monkeypatch):
    from aoti_bisect.run import witness as module
    monkeypatch.setattr(module, "READ_TIMEOUT_S", 1.0)
    witness = Witness(str(tmp_path / "w"), dict(os.environ))
    witness.cuda_gdb = _fake_cuda_gdb(tmp_path, "sleep 30")
    run = _crashed_run(tmp_path)
    site, problem = witness.read(run, ProcessExit(1, None, False, 1.0, 0), "")
    assert site is None and "did not read" in problem
    monkeypatch.setattr(module, "MAX_DUMP_BYTES", 4)
    assert "larger than" in witness.read(run, ProcessExit(1, None, False, 1.0, 0), "")[1]
    os.remove(os.path.join(run, "cudacore.4242"))
    os.symlink("/etc/hostname", os.path.join(run, "cudacore.4242"))
    assert "link" in witness.read(run, ProcessExit(1, None, False, 1.0, 0), "")[1]


def test_without_cuda_gdb_a_run_carries_no_dump_settings(tmp_path):
    witness = Witness(str(tmp_path / "w"), {"PATH": "/nonexistent"})
    env = witness.env(str(tmp_path / "run"))
    assert "CUDA_ENABLE_COREDUMP_ON_EXCEPTION" not in env
    assert witness.env(str(tmp_path / "run"), checked=True) == {}  # a memory checker's run gets neither


# -- CUDA: a device assert's printed lines (the driver dumps such an assert only now and then) -----------------------
ASSERTING = """
import os, sys
# What device_assert_oob printed on an H200 (tests/logs/cuda/device_assert_oob.log), its kernel's file where the run
# compiled it; then the abort of the package's destructor at exit that the real run ended with.
kernel = os.path.join(sys.argv[1], "ckdilxl5r3gu4srou4mty6dxvgv3jqg34fsv6uqau7r5r7gusg3p.py")
with open(sys.argv[2]) as src, open(kernel, "w") as out:
    out.write(src.read())
with open(sys.argv[3]) as f:
    sys.stderr.write(f.read().replace("/tmp/cache/oob_base/inductor/kd", sys.argv[1]))
sys.stderr.flush()
os.abort()
"""


def test_a_device_assert_names_its_kernel_from_the_lines_it_printed(tmp_path):
    script = tmp_path / "asserting.py"
    script.write_text(ASSERTING)
    (tmp_path / "cache").mkdir()
    harness = Harness(str(tmp_path / "run"))
    harness.environment.witness.cuda_gdb = None  # no dump: the case this reads the printed lines for
    result = harness.run(RunSpec((sys.executable, str(script), str(tmp_path / "cache"),
                                  os.path.abspath("tests/logs/cuda/triton_kernel_device_assert_oob.py.txt"),
                                  os.path.abspath("tests/logs/cuda/device_assert_oob.log")), "baseline", 0, (), 60.0))
    assert result.signature.kind == "device_assert" and result.crash_problem is None
    site = result.crash
    assert site.on_device and site.function == "triton_poi_fused_add_index_mul_sin_0"
    assert site.location == "ckdilxl5r3gu4srou4mty6dxvgv3jqg34fsv6uqau7r5r7gusg3p.py:35"
    assert site.detail == "block (4,0,0), thread (1,0,0)" and "0 <= tmp8 < 100" in site.how
    culprit = crash_culprit([result], None)  # no wrapper: a package the runs did not build convicts the same way
    assert culprit.kind == "kernel" and culprit.kernel == "triton_poi_fused_add_index_mul_sin_0"
    assert "by the run's own device-side assert's printed lines" in render(culprit.summary)


def test_an_assert_whose_kernel_file_is_gone_or_whose_line_is_missing_names_no_site():
    with open("tests/logs/cuda/device_assert_oob.log") as f:
        text = f.read()
    path = "/tmp/cache/oob_base/inductor/kd/ckdilxl5r3gu4srou4mty6dxvgv3jqg34fsv6uqau7r5r7gusg3p.py"
    assert assert_site(path, text) is None  # the kernel's file was not read: its name is unknown
    assert assert_site(None, text) is None
    assert assert_site("triton_poi_fused_0", "RuntimeError: CUDA error: device-side assert triggered\n") is None
