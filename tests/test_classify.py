"""The classifier (log text + exit -> Outcome + Signature) on real captured logs: torch 2.13 CPU (captured
here) and torch 2.11 CUDA (the lent GPU)."""
import signal

import pytest
from conftest import log

from aoti_bisect.aoti.checks import index_bound
from aoti_bisect.run.classify import (
    classify,
    collapse_repeats,
    fingerprint,
    parse_frames,
    phase_of,
    relative_missing,
)
from aoti_bisect.run.types import Outcome, ProcessExit


def exited(rc=1, sig=None, timed_out=False):
    return ProcessExit(rc, sig, timed_out, 1.0, 0)


@pytest.mark.parametrize("name, exit, outcome, kind, phase, kernel", [
    ("cpu/index_oob_level3.log", exited(1), Outcome.FAILED, "index_out_of_bounds", "run",
     "cpp_fused_add_index_mul_sin_sum_0"),
    ("cpu/nan_after_matmul_level2.log", exited(1), Outcome.FAILED, "nan_inf", "run", None),
    # the script's torch.testing.assert_close of what the package returned (dropout_in_training)
    ("cpu/assert_close_failed.log", exited(1), Outcome.FAILED, "python_exception", "run", None),
    ("cuda/device-assert-index-out-of-bounds.log", exited(1), Outcome.FAILED, "device_assert", "run",
     "/tmp/ic5/ax/caxexnqi7svrktqos2vhdiktohgyzww45aiog2tolje2pxqndgpc.py"),
    ("cuda/ima-while-compiling-user-triton-kernel.log", exited(1), Outcome.FAILED, "illegal_memory_access",
     "compile", None),
    ("cuda/load-segfault-faulthandler.log", exited(None, signal.SIGSEGV), Outcome.CRASHED, "segfault", "load",
     None),
])
def test_classify_real_logs(name, exit, outcome, kind, phase, kernel):
    got, sig = classify(log(name), exit)
    assert got is outcome
    assert (sig.kind, sig.phase, sig.kernel) == (kind, phase, kernel)
    assert "\n" not in sig.message and len(sig.message) <= 300


def test_native_backtrace_segfault_is_a_load_crash():
    _, sig = classify(log("cuda/load-segfault-native-backtrace.log"), exited(None, signal.SIGSEGV))
    assert sig.kind == "segfault"
    assert sig.phase == "load"  # std::regex inside parse_device_str while loading the package


def test_device_assert_spam_collapses_to_one_line_with_count():
    lines = log("cuda/device-assert-index-out-of-bounds.log").splitlines()
    spam = [line for line in lines if "Assertion" in line]
    assert len(spam) > 50
    collapsed = [line for line in collapse_repeats(lines) if "Assertion" in line]
    assert len(collapsed) == 1 and f"(x{len(spam)} threads)" in collapsed[0]
    assert index_bound(collapsed[0]).value == 100


def test_fingerprint_ignores_hashes_numbers_and_kernel_suffix():
    a = fingerprint("index_out_of_bounds", "run", "index out of bounds: 0 <= tmp16 < 16L", "cpp_fused_x_0")
    b = fingerprint("index_out_of_bounds", "run", "index out of bounds: 0 <= tmp8 < 100L", "cpp_fused_x_3")
    c = fingerprint("nan_inf", "run", "index out of bounds: 0 <= tmp8 < 100L", "cpp_fused_x_3")
    assert a == b != c


def test_timeout_script_error_and_pass():
    assert classify("", exited(None, None, timed_out=True))[1].kind == "timeout"
    assert classify("hello\n", exited(0))[0] is Outcome.PASSED
    text = ('Traceback (most recent call last):\n  File "/home/u/repro.py", line 1, in <module>\n'
            "    import nonexistent_pkg\nModuleNotFoundError: No module named 'nonexistent_pkg'\n")
    assert classify(text, exited(1))[1].kind == "script_error"
    assert classify("python: can't open file '/x.py': [Errno 2] No such file or directory\n",
                    exited(2))[1].kind == "script_error"


def test_a_relative_path_the_repro_opens_through_torch_is_the_scripts_error_and_an_absolute_one_is_not():
    # A real run (torch 2.13 CPU): `torch.load("inputs.pt")` from a run's own working directory, raised inside
    # torch/serialization.py. The path is the script's; torch's own missing files are named absolute.
    text = log("cpu/relative_inputs_missing.log")
    outcome, sig = classify(text, exited(1))
    assert sig.kind == "script_error" and sig.message.endswith("No such file or directory: 'inputs.pt'")
    assert relative_missing(sig.message) == "inputs.pt"
    absolute = text.replace("'inputs.pt'", "'/tmp/torchinductor_u/ab/cache.pt'")
    assert classify(absolute, exited(1))[1].kind == "python_exception"
    assert relative_missing("FileNotFoundError: [Errno 2] No such file or directory: '/tmp/x'") is None


def test_phase_from_traceback_and_faulthandler():
    frames = parse_frames(log("cuda/load-segfault-faulthandler.log"))
    assert frames[0].path.endswith("trivial.py") and frames[-1].func == "_load_aoti"
    assert phase_of(frames, "") == "load"
    assert phase_of(parse_frames(log("cpu/index_oob_level3.log")), "") == "run"


def test_a_run_stopped_inside_its_compile_is_a_timeout_in_the_compile():
    # A real run stopped at its 120 s limit (SIGABRT: faulthandler's stack), its cold compile waiting in a post-grad
    # pass (scenarios/cpu/slow_cold_compile.py): the run limit judge (slow_not_stuck) reads the compile phase.
    outcome, sig = classify(log("cpu/slow_cold_compile_timeout.log"), ProcessExit(None, None, True, 120.1, 0))
    assert outcome is Outcome.TIMEOUT and sig.kind == "timeout" and sig.phase == "compile"
    assert sig.message == "no exit after 120s; stuck in __call__ (slow_cold_compile.py)"


@pytest.mark.parametrize("name, exit, kind", [
    ("cuda/nan_asserts.log", exited(1), "nan_inf"),
    ("cuda/nan_triton.log", exited(1), "nan_inf"),
    ("cuda/device_mismatch.log", exited(1), "device_mismatch"),
    ("cuda/device_mismatch_checked.log", exited(1), "device_mismatch"),
    ("cuda/ima_user_triton.log", exited(1), "illegal_memory_access"),
    ("cuda/ima_user_triton_level3.log", exited(None, signal.SIGABRT), "illegal_memory_access"),
    ("cuda/ima_user_triton_invalid_address_space.log", exited(1), "illegal_memory_access"),
    ("cuda/device_assert_oob_level3.log", exited(1), "device_assert"),
])
def test_classify_cuda_logs(name, exit, kind):
    _, sig = classify(log(name), exit)
    assert sig.kind == kind and sig.phase == "run"
