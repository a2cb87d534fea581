"""The walk-back on real generated wrapper code and real level-2 output (captured from torch 2.13 CPU)."""
from conftest import log

from aoti_bisect.report.facts import render, render_all
from aoti_bisect.aoti import printer, wrapper
from aoti_bisect.aoti.checks import IndexBound
from aoti_bisect.diagnose.walk import spread, walk


def observer(level2_log, bound=None):
    calls = []

    def observe(kernels):
        calls.append(list(kernels))
        views, inputs = printer.collect(printer.parse_blocks(log(level2_log).splitlines()), bound)
        # The printer only shows filtered kernels: hide the others, as a filtered compile would.
        wanted = {k.lower() for k in kernels}
        return {k: v for k, v in views.items() if k.lower() in wanted}, inputs
    return observe, calls


def test_walk_from_outputs_finds_the_kernel_that_made_the_nan():
    g = wrapper.parse_wrapper(log("cpu/wrapper_nan_after_matmul_level2.cpp"))
    observe, calls = observer("cpu/nan_after_matmul_level2.log")
    c = walk(g, observe, start=None, crashed=False)
    assert c.kind == "kernel" and c.kernel == "cpp_fused_add_log_mul_relu_sub_0"
    assert len(calls) == 1  # the whole chain fits in one filtered compile
    assert any("from good inputs" in e for e in render_all(c.evidence))


def test_walk_with_a_cap_of_one_needs_one_compile_per_step():
    g = wrapper.parse_wrapper(log("cpu/wrapper_nan_after_matmul_level2.cpp"))
    observe, calls = observer("cpu/nan_after_matmul_level2.log")
    c = walk(g, observe, start=None, crashed=False, cap=1)
    assert c.kernel == "cpp_fused_add_log_mul_relu_sub_0"
    assert calls == [["cpp_fused_mul_tanh_1"], ["aoti_torch_cpu_mm_out"], ["cpp_fused_add_log_mul_relu_sub_0"]]


def test_crashed_suspect_with_good_inputs_is_the_culprit():
    g = wrapper.parse_wrapper(log("cpu/wrapper_index_oob_level3.cpp"))
    observe, _ = observer("cpu/index_oob_level2_filtered.log", bound=16)
    c = walk(g, observe, start="cpp_fused_add_index_mul_sin_sum_0", crashed=True, bound=IndexBound("tmp16", "16"))
    assert c.kind == "kernel" and c.kernel == "cpp_fused_add_index_mul_sin_sum_0"
    assert "faulted from good inputs" in render_all(c.evidence)[0]
    # The numeric bound is a static dimension of an input the kernel reads: which one is said.
    assert "the bound 16 of cpp_fused_add_index_mul_sin_sum_0 was fixed at export: the size of dim 1 of `arg0_1`" \
        in render_all(c.evidence)
    assert render(c.summary).startswith("cpp_fused_add_index_mul_sin_sum_0 faulted: index into dim 1 of `arg0_1` (size 16, "
                                "fixed at export) went out of range; cpp_fused_add_index_mul_sin_sum_0 computes it "
                                "from `arg1_1` (values 0..7)")


def test_out_of_range_index_input_walks_to_the_model_input():
    g = wrapper.parse_wrapper(log("cpu/wrapper_index_oob_level3.cpp"))
    observe, _ = observer("cpu/index_oob_level2_filtered.log", bound=5)  # idx max 7 >= 5: a bad index input
    c = walk(g, observe, start="cpp_fused_add_index_mul_sin_sum_0", crashed=True, bound=IndexBound("tmp16", "5"))
    assert c.kind == "model_input" and c.input_index == 1 and c.input_name == "arg1_1"


def test_drifted_kernel_name_is_reported_not_guessed():
    g = wrapper.parse_wrapper(log("cpu/wrapper_index_oob_level3.cpp"))
    observe, calls = observer("cpu/index_oob_level2_filtered.log")
    c = walk(g, observe, start="cpp_fused_add_index_mul_sin_sum_7", crashed=True)
    assert c.kind == "unknown" and "drifted" in render_all(c.evidence)[0] and not calls


def test_spread_keeps_ends_and_spacing():
    assert spread(list(range(5)), 8) == [0, 1, 2, 3, 4]
    assert spread(list(range(10)), 3) == [0, 4, 9] or spread(list(range(10)), 3) == [0, 5, 9]
    assert spread(list(range(10)), 0) == []


def test_a_fault_without_an_index_check_names_an_integer_input_past_every_dimension_first():
    # rare_only_ima_user_triton on an H200 (docs/evidence/gpu-verdict-2026-11-27.md, run d): an illegal address
    # prints no bound, and `ids` held values up to 8.19e7 for a table of 8192 rows. Here the CPU kernel's index input
    # is pushed the same way past every dimension it touches.
    g = wrapper.parse_wrapper(log("cpu/wrapper_index_oob_level3.cpp"))
    real, _ = observer("cpu/index_oob_level2_filtered.log")

    def observe(kernels):
        views, inputs = real(kernels)
        for view in views.values():
            if "arg1_1" in view.before:
                view.before["arg1_1"] = view.before["arg1_1"]._replace(max=8.1893e7)
        return views, inputs
    c = walk(g, observe, start="cpp_fused_add_index_mul_sin_sum_0", crashed=True)
    assert c.kind == "kernel" and c.kernel == "cpp_fused_add_index_mul_sin_sum_0"
    assert render(c.summary).startswith("arg1_1 of cpp_fused_add_index_mul_sin_sum_0 holds values up to 8.1893e+07")
    assert "a likely out-of-range index" in render(c.summary)
    assert any("faulted from finite inputs" in e for e in render_all(c.evidence))  # not "good": nothing judged them
