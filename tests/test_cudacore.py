"""CUDA core dumps (issue #36): the dump environment, the cuda-gdb command line and where cuda-gdb is found, and
`parse` over cuda-gdb 13.0's real batch output (tests/logs/cuda/cudagdb-*.log, captured on an H200 on 2026-11-26;
docs/evidence/cuda-coredump-2026-11-26.md) and over text that holds no device exception."""
import os
import random
import stat

import pytest

from aoti_bisect.aoti import cudacore
from aoti_bisect.aoti.cudacore import DUMP_NAME, DeviceFault, dump_env, failure_kind, find_cuda_gdb, parse, reader_argv

LOGS = os.path.join(os.path.dirname(__file__), "logs", "cuda")
IMA_FILE = "/tmp/cdlab/cache/ima/inductor/6i/c6ixc2zf7taylhub46wlledpzw5ob3jpcbra35m3hhbe4xtot4sw.py"
ASSERT_FILE = "/tmp/cdlab/cache/oob/inductor/kd/ckdilxl5r3gu4srou4mty6dxvgv3jqg34fsv6uqau7r5r7gusg3p.py"
ASSERT_KERNEL = "triton_poi_fused_add_index_mul_sin_0"


def log(name: str) -> str:
    with open(os.path.join(LOGS, name), errors="replace") as f:
        return f.read()


# --- the environment and the command line ---------------------------------------------------------------------

def test_dump_env_puts_a_small_dump_in_the_folder_and_no_host_core(tmp_path):
    env = dump_env(str(tmp_path))
    assert env["CUDA_ENABLE_COREDUMP_ON_EXCEPTION"] == "1"
    assert env["CUDA_ENABLE_CPU_COREDUMP_ON_EXCEPTION"] == "0"
    assert env["CUDA_COREDUMP_FILE"] == os.path.join(str(tmp_path), DUMP_NAME + ".%p")
    flags = env["CUDA_COREDUMP_GENERATION_FLAGS"].split(",")
    # no memory contents: the dumps seen were 3.4-5.6 MB on an H200 (141 GB of global memory)
    for skip in ("skip_global_memory", "skip_shared_memory", "skip_local_memory", "skip_constbank_memory",
                 "skip_nonrelocated_elf_images"):
        assert skip in flags
    # without it the driver aborts the repro after the dump: SIGABRT instead of the repro's own error
    assert "skip_abort" in flags
    assert set(env) == {"CUDA_ENABLE_COREDUMP_ON_EXCEPTION", "CUDA_ENABLE_CPU_COREDUMP_ON_EXCEPTION",
                        "CUDA_COREDUMP_GENERATION_FLAGS", "CUDA_COREDUMP_FILE"}


def test_reader_argv_is_batch_without_gdbinit_and_reads_the_dump():
    argv = reader_argv("/usr/local/cuda/bin/cuda-gdb", "/runs/baseline-000/cudacore.123")
    assert argv[:3] == ["/usr/local/cuda/bin/cuda-gdb", "-nx", "-batch"]
    commands = argv[4::2]
    assert all(a == "-ex" for a in argv[3::2]) and len(argv[3::2]) == len(commands)
    assert commands[0] == "target cudacore /runs/baseline-000/cudacore.123"
    assert commands[1:] == ["info cuda kernels", "bt", "info cuda lanes"]


def _fake_tool(folder, name="cuda-gdb", executable=True):
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, name)
    with open(path, "w") as f:
        f.write("#!/bin/sh\n")
    os.chmod(path, stat.S_IRWXU if executable else stat.S_IRUSR | stat.S_IWUSR)
    return path


def test_find_cuda_gdb_prefers_path_then_cuda_home(tmp_path):
    on_path = _fake_tool(str(tmp_path / "bin"))
    in_home = _fake_tool(str(tmp_path / "cuda" / "bin"))
    assert find_cuda_gdb({"PATH": str(tmp_path / "bin"), "CUDA_HOME": str(tmp_path / "cuda")}) == on_path
    assert find_cuda_gdb({"PATH": str(tmp_path / "nothing"), "CUDA_HOME": str(tmp_path / "cuda")}) == in_home
    assert find_cuda_gdb({"PATH": "", "CUDA_PATH": str(tmp_path / "cuda")}) == in_home


def test_find_cuda_gdb_skips_a_file_that_is_not_executable(tmp_path, monkeypatch):
    _fake_tool(str(tmp_path / "bin"), executable=False)
    monkeypatch.setattr(cudacore.os.path, "isfile",
                        lambda p: p.startswith(str(tmp_path)) and os.path.exists(p))  # hide /usr/local/cuda
    assert find_cuda_gdb({"PATH": str(tmp_path / "bin")}) is None
    assert find_cuda_gdb({}) is None


# --- parse: real dumps ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["cudagdb-ima-user-triton.log", "cudagdb-ima-user-triton-explore.log"])
def test_illegal_address_in_a_user_triton_kernel(name):
    fault = parse(log(name))
    assert fault == DeviceFault(
        exception="Warp Illegal Address", kernel="gather_rows", source=IMA_FILE,
        line=22,  # the exception PC's line: `v = tl.load(table_ptr + row * D + cols)`, the faulting load
        frame_line=23,  # where the warp stood: the store that waits on the load
        block=(223, 0, 0), thread=(0, 0, 0), grid_dim=(256, 1, 1), block_dim=(128, 1, 1), pc="0x7fabf77a8800")
    assert fault.describe() == ("Warp Illegal Address in gather_rows "
                                "(c6ixc2zf7taylhub46wlledpzw5ob3jpcbra35m3hhbe4xtot4sw.py:22) "
                                "in block (223,0,0), thread (0,0,0)")


def test_illegal_address_block_is_the_corrupted_row():
    # coredump_replay.py puts the far id at position 100: one program per id, so block 100 faulted
    fault = parse(log("cudagdb-ima-user-triton-lanes.log"))
    assert (fault.kernel, fault.line, fault.block, fault.thread) == ("gather_rows", 22, (100, 0, 0), (96, 0, 0))
    assert fault.exception == "Warp Illegal Address" and fault.pc == "0x7f2e1b7a5400"


def test_the_dump_names_the_failure_kind():
    assert failure_kind("Warp Assert") == "device_assert"
    assert failure_kind("Warp Illegal Address") == failure_kind("Warp Out-of-range Address") == \
        "illegal_memory_access"
    assert failure_kind("Warp Illegal Instruction") is None


def test_an_exception_named_before_cuda_gdb_itself_died_is_read():
    # size_dependent_ima in a bisection on an H200: cuda-gdb printed the exception, then died of its own internal
    # error (std::out_of_range) before the backtrace; the exception line alone names the kernel and its line.
    fault = parse(log("cudagdb-ima-inductor-reader-died-after.log"))
    assert (fault.exception, fault.kernel, fault.line) == ("Warp Illegal Address", "triton_poi_fused_relu_0", 26)


def test_a_dump_read_in_a_real_bisection_names_the_rare_fault():
    # rare_only_ima_user_triton's first crash, 28 runs into a bisection on an H200 (bench/gpu/verdict_groups.sh)
    fault = parse(log("cudagdb-ima-rare-only-bisection.log"))
    assert (fault.kernel, fault.line, fault.block, fault.grid_dim) == ("gather_rows", 22, (43, 0, 0), (256, 1, 1))


@pytest.mark.parametrize("name", ["cudagdb-device-assert.log", "cudagdb-device-assert-explore.log",
                                  "cudagdb-device-assert-lanes.log"])
def test_device_assert_in_inductors_kernel(name):
    # cuda-gdb prints only "Assertion failed." for it: no "CUDA Exception:" line and no exception PC
    text = log(name)
    assert "CUDA Exception" not in text and "Assertion failed." in text
    fault = parse(text)
    assert (fault.exception, fault.kernel, fault.source, fault.line, fault.frame_line) == (
        "Warp Assert", ASSERT_KERNEL, ASSERT_FILE, 35, 35)
    assert (fault.block, fault.thread, fault.grid_dim, fault.block_dim) == ((8, 0, 0), (9, 0, 0), (20, 1, 1),
                                                                            (128, 1, 1))


def test_device_assert_kind_comes_from_the_lanes_table_when_listed():
    text = log("cudagdb-device-assert-lanes.log").replace("Assertion failed.", "")
    assert parse(text).exception == "Warp Assert"
    assert parse(text.replace("Warp Assert", "Warp Misaligned Address")).exception == "Warp Misaligned Address"


def test_other_exception_names_are_read_whole():
    text = log("cudagdb-ima-user-triton.log")
    for kind in ("Warp Out-of-range Address", "Warp Misaligned Address", "Device Illegal Address"):
        assert parse(text.replace("Warp Illegal Address", kind)).exception == kind


# --- parse: no device exception -------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["cudagdb-not-a-dump-empty.log", "cudagdb-not-a-dump-text.log",
                                  "cudagdb-not-a-dump-random.log", "cudagdb-not-a-dump-missing.log",
                                  "cudagdb-truncated-half.log", "cudagdb-truncated-4k.log",
                                  "cudagdb-dump-cut-by-exit.log"])
def test_not_a_dump_or_a_dump_cut_short_names_nothing(name):
    text = log(name)
    # what cuda-gdb says: it cannot open the file, or its own internal error (a dump cut short)
    assert "Failed to read core file" in text or "internal-error" in text
    assert parse(text) is None


def test_a_read_cut_off_before_the_exception_names_nothing():
    text = log("cudagdb-ima-user-triton.log")
    cut = text[:text.index("CUDA Exception")]
    assert "Current focus set to CUDA kernel" in cut and parse(cut) is None


def test_an_exception_without_a_kernel_names_nothing():
    assert parse("CUDA Exception: Warp Illegal Address\n") is None


@pytest.mark.parametrize("seed", range(30))
def test_random_text_never_raises(seed):
    rng = random.Random(seed)
    junk = rng.randbytes(rng.randrange(0, 20000)).decode("utf-8", errors="replace")
    assert parse(junk) is None
    # the real output's lines shuffled and cut at random: never an exception out of parse
    lines = log("cudagdb-ima-user-triton-explore.log").splitlines()
    rng.shuffle(lines)
    mixed = "\n".join(lines)[: rng.randrange(0, 7000)]
    result = parse(mixed)
    assert result is None or result.kernel == "gather_rows"


def test_hostile_text_is_handled_fast_and_safely():
    huge = "9" * 5000  # int() refuses strings past 4300 digits
    assert parse(f"CUDA Exception: Warp Illegal Address\n#0  0x1 in k<<<({huge},1,1),(1,1,1)>>> () at a.py:{huge}"
                 ) == DeviceFault("Warp Illegal Address", "k", None, None, pc="0x1")
    assert parse(None) is None and parse("") is None and parse("\x00" * 1000) is None
    long_line = "CUDA Exception: Warp Assert\n0x1 in f" + " at a:" * 200000
    assert parse(long_line).kernel == "f"


def test_live_process_wording_is_read_too():
    # cuda-gdb's wording when an exception stops a live process (its manual's example), which older versions
    # also print over a dump: a signal line, "Switching focus", and a frame without "#0" or a launch config.
    text = ("Program received signal CUDA_EXCEPTION_14, Warp Illegal Address.\n"
            "[Switching focus to CUDA kernel 0, grid 1, block (7,0,0), thread (96,0,0), device 0, sm 1, warp 3, "
            "lane 0]\n"
            "0x0000000000796f60 in example (data=0x200300000) at example.cu:17\n"
            "17\t        *data = 1;\n")
    assert parse(text) == DeviceFault("Warp Illegal Address", "example", "example.cu", 17, frame_line=17,
                                      block=(7, 0, 0), thread=(96, 0, 0), pc="0x0000000000796f60")
