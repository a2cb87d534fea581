"""compute-sanitizer reports, parsed from real captured logs (H100, torch 2.11.0+cu130), and what they convict."""
import sys

import pytest
from conftest import log

from aoti_bisect.report.facts import render, render_all
from aoti_bisect.aoti import wrapper
from aoti_bisect.aoti.sanitizer import parse, parse_compute_sanitizer
from aoti_bisect.diagnose.memcheck import launch_for, memcheck_culprit
from aoti_bisect.run.checkers import MEMCHECK_PADDING, compute_sanitizer


def test_an_invalid_read_is_one_finding_with_its_count_kernel_line_and_distance():
    r = parse_compute_sanitizer(log("cuda/memcheck_masked_user_triton.log"))
    assert r.finished and not r.clean and r.total == 131 and len(r.errors) == 1
    e = r.errors[0]
    assert (e.kind, e.function, e.size, e.block) == ("Invalid __global__ read", "gather_rows", 4, "7,0,0")
    assert e.location.endswith(".py:22") and e.count == 100  # --print-limit 100: the rest only in the total
    assert "461,793 bytes after the nearest allocation" in e.where


def test_the_repro_own_output_between_the_checker_lines_is_ignored():
    r = parse_compute_sanitizer(log("cuda/memcheck_flaky_ima_user_triton.log"))
    assert r.total == 131 and r.errors[0].function == "gather_rows" and "101,613,697 bytes" in r.errors[0].where


@pytest.mark.parametrize("name", ["cuda/compute-sanitizer-memcheck-clean.log",
                                  "cuda/memcheck_clean_read_inside_another_allocation.log"])
def test_a_clean_run_is_clean(name):
    # The second read 16 KiB past its table into another live allocation: invisible to memcheck too.
    r = parse("compute-sanitizer", log(name))
    assert r.clean and r.finished and r.total == 0


def test_a_checker_that_never_finished_or_was_refused_proves_nothing():
    assert not parse_compute_sanitizer("========= COMPUTE-SANITIZER\nTraceback ...\n").finished
    refused = parse_compute_sanitizer("========= COMPUTE-SANITIZER\n========= Error: Device not supported. "
                                      "Please refer to the \"Supported Devices\" section\n")
    assert refused.refused.startswith("Device not supported") and not refused.clean
    found = memcheck_culprit([refused, refused], None, None)
    assert found.culprit is None and "could not check" in render(found.finding)


def test_the_checker_kernel_maps_to_its_launch_and_convicts_it():
    graph = wrapper.parse_wrapper(log("cuda/wrapper_ima_user_triton.cpp"))
    assert launch_for("gather_rows", graph).name == "gather_rows_0"
    assert launch_for("triton_poi_fused_mul_tanh_0", graph).name == "triton_poi_fused_mul_tanh_0"
    assert launch_for("gather", graph) is None
    report = parse_compute_sanitizer(log("cuda/compute-sanitizer-memcheck-user-triton-oob.log"))
    found = memcheck_culprit([parse_compute_sanitizer(""), report], graph, suspect=None)
    assert found.culprit.kind == "kernel" and found.culprit.kernel == "gather_rows_0"
    assert render(found.finding).startswith("compute-sanitizer found 130 error(s) in 1/2 checked run(s)")


def test_a_function_outside_the_wrapper_points_at_the_graph_custom_op():
    graph = wrapper.parse_wrapper(log("cpu/wrapper_load_error.cpp"), "w.cpp",
                                  wrapper.extern_nodes_for("tests/logs/cpu/wrapper_load_error.cpp"))
    report = parse_compute_sanitizer(log("cuda/compute-sanitizer-memcheck-user-triton-oob.log"))
    c = memcheck_culprit([report], graph, None).culprit
    assert c.kind == "outside_instrumented_kernels" and c.kernel == "bisectlab::fused_norm"
    assert "gather_rows is not a kernel of the generated wrapper" in render_all(c.evidence)[-1]


def test_an_invalid_write_in_a_user_kernel_is_named_with_its_distance():
    r = parse_compute_sanitizer(log("cuda/memcheck_user_kernel_oob_write.log"))
    e = r.errors[0]
    assert (e.kind, e.function, e.size, e.block) == ("Invalid __global__ write", "scatter_rows", 4, "3,0,0")
    assert r.total == 130 and "925,953 bytes after the nearest allocation" in e.where


def test_a_store_into_a_neighbours_allocation_is_seen_only_with_padding_after_each_allocation():
    # scenarios/cuda/scatter_rows_oob_write.py under compute-sanitizer memcheck, PYTORCH_NO_CUDA_MEMORY_CACHING=1, on an
    # H100 (torch 2.11.0+cu130, 2026-11-28): its user kernel stores one row 1 MiB past its 2 MiB output. Unpadded, the
    # row lands in the next live tensor and the checker reports nothing; with --padding 4 MiB it lands in the gap.
    assert parse_compute_sanitizer(log("cuda/memcheck_unpadded_user_kernel_write_into_neighbour.log")).clean
    r = parse_compute_sanitizer(log("cuda/memcheck_padded_user_kernel_write_into_neighbour.log"))
    e = r.errors[0]
    assert r.total == 130 and (e.kind, e.function, e.block) == ("Invalid __global__ write", "scatter_rows", "11,0,0")
    assert "1,048,833 bytes after the nearest allocation" in e.where
    checker = compute_sanitizer(path=sys.executable)[0]
    assert checker.prefix[checker.prefix.index("--padding") + 1] == str(MEMCHECK_PADDING) and MEMCHECK_PADDING > 1 << 20


def test_a_device_assert_under_the_checker_names_no_kernel_and_convicts_nothing_by_itself():
    r = parse_compute_sanitizer(log("cuda/memcheck_device_assert.log"))
    assert r.total == 46 and r.errors[0].kind == "Warp assert" and r.errors[0].function is None
    assert r.errors[0].count == 44 and any(e.kind.startswith("Program hit cudaErrorAssert") for e in r.errors)
    c = memcheck_culprit([r], None, None).culprit
    assert c.kind == "unknown" and "named no function" in render_all(c.evidence)[-1]


def test_an_out_of_bounds_read_that_stays_inside_the_allocation_is_invisible_to_memcheck():
    # An Inductor gather kernel (indirect-indexing assert off) read ~18 floats past a 64x100 tensor: within
    # its allocation's padding, so memcheck saw nothing and the script printed OK (H100, 2026-11-23).
    r = parse_compute_sanitizer(log("cuda/memcheck_inductor_kernel_read_inside_padding.log"))
    assert r.clean and "OK" in log("cuda/memcheck_inductor_kernel_read_inside_padding.log")


def test_an_invalid_read_in_an_inductor_generated_kernel_convicts_it():
    # scenarios/cuda/masked_oob_inductor.py under the memcheck stage (H100, torch 2.11.0+cu130, 2026-11-23):
    # the generated gather reads ~0.9 MiB past its table; plain runs pass, memcheck names the kernel.
    r = parse_compute_sanitizer(log("cuda/memcheck_inductor_kernel_oob_read.log"))
    e = r.errors[0]
    assert r.finished and r.total == 35
    assert (e.kind, e.function, e.size, e.block) == ("Invalid __global__ read", "triton_poi_fused_index_tanh_0",
                                                     16, "0,0,0")
    assert e.location.endswith(".py:34") and "461,302 bytes after the nearest allocation" in e.where
    c = memcheck_culprit([r], None, None).culprit
    assert (c.kind, c.kernel) == ("kernel", "triton_poi_fused_index_tanh_0")
