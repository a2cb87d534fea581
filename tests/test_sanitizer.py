"""CPU memory checker: valgrind found (or the install hint), its report parsed from real captured logs, and one
real checked run of the silent out-of-bounds scenario through the harness."""
import os
import subprocess
import sys

import pytest

from aoti_bisect.aoti.sanitizer import parse, parse_compute_sanitizer, parse_valgrind
from aoti_bisect.diagnose.memcheck import memcheck_culprit
from aoti_bisect.run import checkers
from aoti_bisect.run.checkers import VALGRIND_ERROR_EXIT, Checker, Missing
from aoti_bisect.run.layout import compile_key
from aoti_bisect.report.facts import render

HERE = os.path.dirname(__file__)
LOGS = os.path.join(HERE, "logs", "cpu")


def log(name: str) -> str:
    with open(os.path.join(LOGS, name), errors="replace") as f:
        return f.read()


def installed_valgrind() -> Checker:
    found = checkers.valgrind()
    if isinstance(found, Missing):
        pytest.skip(found.why)
    return found[0]


# --- finding the checker --------------------------------------------------------------------------------------

def test_valgrind_missing_says_how_to_install(tmp_path):
    found = checkers.valgrind(env={"PATH": str(tmp_path)})
    assert isinstance(found, Missing) and found.device == "cpu"
    assert "valgrind not found on PATH" in found.why and "apt-get install valgrind" in found.why
    given = checkers.valgrind(path=str(tmp_path / "valgrind"))
    assert isinstance(given, Missing) and f"at {tmp_path / 'valgrind'}" in given.why


def test_valgrind_found_on_path_checks_addressability_with_python_on_malloc(tmp_path):
    exe = tmp_path / "valgrind"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    [checker] = checkers.valgrind(env={"PATH": str(tmp_path)}, cpuinfo=cpu(tmp_path, "fpu sse avx2"))
    assert checker.tool == "valgrind" and checker.device == "cpu" and checker.prefix[0] == str(exe)
    assert "--tool=memcheck" in checker.prefix and "--trace-children=no" in checker.prefix
    assert f"--error-exitcode={VALGRIND_ERROR_EXIT}" in checker.prefix
    assert dict(checker.env) == {"PYTHONMALLOC": "malloc"}


def cpu(tmp_path, flags: str) -> str:
    path = tmp_path / "cpuinfo"
    path.write_text(f"processor\t: 0\nflags\t\t: {flags}\n")
    return str(path)


def test_checker_env_does_not_recompile(tmp_path):
    # The checked run must reuse the plain runs' compile: a compile under valgrind takes many minutes.
    [checker] = checkers.valgrind(path=sys.executable, cpuinfo=cpu(tmp_path, "fpu sse avx2 fma"))
    assert compile_key(dict(checker.env)) == "default"


def test_on_an_avx512_cpu_the_checked_runs_get_an_avx2_package(tmp_path):
    # valgrind emulates no AVX-512: the checked runs load a package built for AVX2 (its own flag set, compiled
    # outside the checker first: tests/test_ladder.py), unless the user chose a -march or ISA of their own.
    avx512 = cpu(tmp_path, "fpu avx2 avx512f avx512dq avx512bw")
    [checker] = checkers.valgrind(path=sys.executable, cpuinfo=avx512)
    assert dict(checker.env) == {"PYTHONMALLOC": "malloc", "TORCHINDUCTOR_CPP_MARCH": "x86-64-v3",
                                 "ATEN_CPU_CAPABILITY": "avx2"}
    assert compile_key(dict(checker.env)) != "default"
    [mine] = checkers.valgrind(path=sys.executable, env={"ATEN_CPU_CAPABILITY": "avx512"}, cpuinfo=avx512)
    assert dict(mine.env) == {"PYTHONMALLOC": "malloc"}


def test_suppressions_file_is_accepted_by_valgrind(tmp_path):
    checker = installed_valgrind()
    (tmp_path / "cwd").mkdir()  # the checker writes its report to ../checker.log, as from a run's cwd
    proc = subprocess.run([*checker.prefix, "/bin/true"], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path / "cwd")
    assert proc.returncode == 0, proc.stderr
    assert "ERROR SUMMARY: 0 errors" in (tmp_path / "checker.log").read_text()


# --- reading valgrind's report (real logs, captured by running the scenarios under valgrind) ------------------

def test_silent_oob_names_the_op_function_and_line():
    # Captured before valgrind.supp existed: ld.so's strncmp noise is in it, and must not be the finding.
    report = parse_valgrind(log("valgrind-silent_oob_custom_op-nosupp.log"))
    assert report.tool == "valgrind" and report.finished and not report.clean and report.refused is None
    assert report.total == 34
    [error] = report.errors
    assert (error.kind, error.size) == ("Invalid read", 4)
    assert error.function == "window_sum(at::Tensor const&)" and error.location == "main.cpp:19"
    assert error.where == "is 0 bytes after a block of size 32,768 alloc'd"
    assert error.describe().startswith("Invalid read of size 4 bytes in window_sum(at::Tensor const&) (main.cpp:19)")


def test_silent_oob_with_the_shipped_options_is_one_finding():
    # Captured by the slow test below (the checker's own prefix, suppressions on): the noise is suppressed.
    report = parse("valgrind", log("valgrind-silent_oob_custom_op.log"))
    assert report.total == 12
    assert [(e.kind, e.function, e.location) for e in report.errors] == [
        ("Invalid read", "window_sum(at::Tensor const&)", "main.cpp:19")]


def test_flaky_crash_names_the_op_without_debug_info_by_its_library():
    # The run that drew the bad shift: valgrind reports the wild read, then the process dies of SIGSEGV.
    report = parse_valgrind(log("valgrind-flaky_custom_op_crash.log"))
    assert report.total == 1 and report.refused is None
    [error] = report.errors
    assert (error.kind, error.size) == ("Invalid read", 4)
    assert error.function == "shifted_gather(at::Tensor const&, at::Tensor const&)"
    assert error.location is None  # built without -g: valgrind names the library, not a line
    assert error.where == "is not stack'd, malloc'd or (recently) free'd"


def test_rare_crash_is_seen_by_valgrind_in_a_run_that_did_not_crash():
    # rare_oob_custom_op crashes about 1 run in 8; this run drew no corrupted id (max id 128, the padding slot one
    # row past the table) and exited 0, yet every read of that row is an invalid read at the op's line.
    report = parse("valgrind", log("valgrind-rare_oob_custom_op.log"))
    assert report.finished and not report.clean and report.refused is None
    assert report.total == 128  # 64 floats of the row, read once by the package and once by the eager reference
    [error] = report.errors
    assert (error.kind, error.size) == ("Invalid read", 4)
    assert error.function == "rare_gather(at::Tensor const&, at::Tensor const&)" and error.location == "main.cpp:18"
    assert error.where == "is 0 bytes after a block of size 32,768 alloc'd"


def test_refused_when_valgrind_meets_an_avx512_instruction():
    # The same scenario on an AVX-512 host: the wrapper Inductor built with -march=native dies of SIGILL under
    # valgrind 3.19 before the op runs. That proves nothing either way: a refusal, not 0 errors.
    report = parse_valgrind(log("valgrind-rare_oob_custom_op-avx512.log"))
    assert report.refused == "Unrecognised instruction at address 0x3fbbeb33."
    assert report.errors == () and report.total == 0  # valgrind's summary still says 0 errors
    found = memcheck_culprit([report], None, None)
    assert found.culprit is None and render(found.finding).startswith("the checker could not check this repro: "
                                                                      "Unrecognised")


def test_runtime_only_errors_are_kept_when_nothing_reaches_op_code():
    # The same log up to the op's call ("running compiled model"): only the dlopen noise had been printed.
    text = log("valgrind-silent_oob_custom_op-nosupp.log")
    report = parse_valgrind(text[:text.index("running compiled model")])
    assert not report.finished and report.total is None
    assert [(e.function, e.location, e.count) for e in report.errors] == [
        ("strncmp", "strcmp-sse2.S:160", 2), ("strncmp", "strcmp-sse2.S:162", 2)]


def test_parse_dispatches_on_the_checker_tool():
    text = log("valgrind-silent_oob_custom_op-nosupp.log")
    assert parse("valgrind", text) == parse_valgrind(text)
    cuda = os.path.join(HERE, "logs", "cuda", "compute-sanitizer-memcheck-clean.log")
    with open(cuda) as f:
        clean = f.read()
    assert parse("compute-sanitizer", clean) == parse_compute_sanitizer(clean)
    # The repro's own output never looks like a finding to the other checker's parser.
    assert parse("valgrind", clean).errors == () and parse("compute-sanitizer", text).errors == ()


def test_refused_when_valgrind_cannot_start_its_tool():
    # Captured with VALGRIND_LIB pointing nowhere: a valgrind whose tools are not installed beside it.
    report = parse_valgrind(log("valgrind-refused-tool-missing.log"))
    assert report.refused == "failed to start tool 'memcheck' for platform 'amd64-linux': No such file or directory"
    assert report.errors == () and not report.finished and not report.clean


# --- one real checked run through the harness --------------------------------------------------------------------
