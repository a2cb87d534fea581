"""An index computed from the model's inputs, not handed in (#29): the kernel's source says which tensor its failed
check indexes with, and the launch graph which model input and op made that tensor. Captured from the
index_from_cumsum scenario (torch 2.13 CPU): positions = cumsum(mask) index a table of 16 rows beside token ids
that index their own table of 100."""
import json
import os

from aoti_bisect.aoti import wrapper
from aoti_bisect.aoti.checks import IndexBound, index_operands
from aoti_bisect.aoti.printer import KernelView, TensorStats
from aoti_bisect.diagnose.facts import Namer
from aoti_bisect.diagnose.walk import walk
from aoti_bisect.report.facts import render, render_all

DATA = os.path.join(os.path.dirname(__file__), "data", "index")
KERNEL = "cpp_fused_add_embedding_0"


def read(name):
    with open(os.path.join(DATA, name)) as f:
        return f.read()


def stats(when, kernel, arg, lo, hi):
    return TensorStats(when, kernel, arg, 48, "torch.int64", (lo + hi) / 2, lo, hi, "[2, 24]", "[24, 1]", "cpu")


def observe(with_mask):
    tokens = stats("input", "", "arg2_1", 0, 99)
    inputs = {"arg2_1": tokens, **({"arg3_1": stats("input", "", "arg3_1", 1, 1)} if with_mask else {})}
    before = {"arg2_1": stats("before_launch", KERNEL, "arg2_1", 0, 99),
              "buf1": stats("before_launch", KERNEL, "buf1", 1, 24)}
    return lambda kernels: ({KERNEL: KernelView(KERNEL, before, {})}, inputs)


def test_the_failed_check_indexes_with_the_tensor_its_temporary_is_loaded_from():
    source = read("index_from_cumsum.kernel.cpp")
    assert index_operands(source, IndexBound("tmp7", "16")) == ("in_ptr2",)  # positions, for the table of 16
    assert index_operands(source, IndexBound("tmp2", "100")) == ("in_ptr0",)  # token ids, for the table of 100
    assert index_operands(source, IndexBound("tmp99", "16")) == ()


def test_an_index_made_by_cumsum_convicts_the_mask_not_the_token_ids_in_range_for_their_own_table():
    g = wrapper.parse_wrapper(read("index_from_cumsum.wrapper.cpp"))
    namer = Namer(inputs={"arg2_1": "tokens", "arg3_1": "mask"}, placeholders=tuple(g.inputs))
    c = walk(g, observe(True), KERNEL, True, IndexBound("tmp7", "16"), namer=namer,
             source=lambda k: read("index_from_cumsum.kernel.cpp") if k == KERNEL else None)
    assert (c.kind, c.input_index, c.input_name, c.user_name) == ("model_input", 1, "arg3_1", "mask")
    came = ("the index is computed, not handed in: aoti_torch_cpu_cumsum (cumsum) makes it from model input 1 "
            "(`mask`, wrapper arg3_1), which holds 1..1 at run time; that op takes it past the bound 16")
    assert render(c.summary).startswith(f"{KERNEL} faulted: {came}; index into dim 0 of `pos_weight` (size 16, fixed "
                                        "at export) reached 24; "
                                        "the values come from `buf1`")
    assert "tokens" not in render(c.summary)  # in range for its own table
    assert came in render_all(c.evidence)


def test_without_the_masks_printed_values_the_origin_still_names_it():
    g = wrapper.parse_wrapper(read("index_from_cumsum.wrapper.cpp"))
    c = walk(g, observe(False), KERNEL, True, IndexBound("tmp7", "16"),
             source=lambda k: read("index_from_cumsum.kernel.cpp"))
    assert c.kind == "model_input" and c.input_name == "arg3_1"
    assert "makes it from model input 1 (arg3_1) (its run-time values were not printed)" in render(c.summary)


def test_without_the_kernels_source_every_integer_read_is_held_to_the_bound_as_before():
    g = wrapper.parse_wrapper(read("index_from_cumsum.wrapper.cpp"))
    c = walk(g, observe(True), KERNEL, True, IndexBound("tmp7", "16"))
    assert (c.kind, c.input_name) == ("model_input", "arg2_1")  # the token ids: the source would have cleared them


SCORES_KERNEL = """extern "C" void cpp_fused_index_mul_0(const float* in_ptr0, const float* in_ptr1, float* out_ptr0)
{
    auto tmp0 = in_ptr0[x0];
    auto tmp1 = static_cast<float>(100.0);
    auto tmp2 = float(tmp0 * tmp1);
    auto tmp3 = c10::convert<int64_t>(tmp2);
    AOTI_TORCH_CHECK((0 <= tmp3) & (tmp3 < 16L), "index out of bounds: 0 <= tmp3 < 16L");
    auto tmp4 = in_ptr1[x1 + 8L*tmp3];
}
"""


def test_an_index_computed_inside_the_kernel_from_a_float_input_convicts_that_input():
    # (scores * 100).long() fused into the gather: the kernel reads no integer tensor at all.
    from aoti_bisect.aoti.wrapper import Launch, WrapperGraph
    k = "cpp_fused_index_mul_0"
    g = WrapperGraph("w.cpp", [Launch(0, k, 1, ("arg1_1", "table", "buf0"), ("arg1_1", "table"), ("buf0",),
                                      "[mul, long, index]",
                                      ("(const float*)(arg1_1.data_ptr())", "(const float*)(table.data_ptr())",
                                       "(float*)(buf0.data_ptr())"))], ["arg1_1"], ["table"], ["buf0"],
                     params={k: ["in_ptr0", "in_ptr1", "out_ptr0"]})
    scores = TensorStats("before_launch", k, "arg1_1", 4, "torch.float32", 0.5, 0.0, 0.9, "[4]", "[1]", "cpu")
    observe = lambda kernels: ({k: KernelView(k, {"arg1_1": scores}, {})}, {"arg1_1": scores})  # noqa: E731
    c = walk(g, observe, k, True, IndexBound("tmp3", "16"), namer=Namer(inputs={"arg1_1": "scores"}),
             source=lambda name: SCORES_KERNEL)
    assert (c.kind, c.input_index, c.user_name) == ("model_input", 0, "scores")
    assert ("the index is computed inside cpp_fused_index_mul_0 (mul, long, index) from model input 0 (`scores`, "
            "wrapper arg1_1), which holds 0..0.9 at run time; that op takes it past the bound 16") in render(c.summary)


GATHER_TRITON = '''@triton.jit
def triton_poi_fused_add_embedding_1(in_ptr0, in_ptr1, in_ptr2, in_ptr3, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    tmp0 = tl.load(in_ptr0 + (x1), xmask, eviction_policy='evict_last')
    tmp1 = tl.full([XBLOCK], 100, tl.int32)
    tmp2 = tmp0 + tmp1
    tmp3 = tmp0 < 0
    tmp4 = tl.where(tmp3, tmp2, tmp0)
    tl.device_assert(((0 <= tmp4) & (tmp4 < 100)) | ~(xmask), "index out of bounds: 0 <= tmp4 < 100")
    tmp6 = tl.load(in_ptr1 + (x0 + 8*tmp4), xmask)
    tmp7 = tl.load(in_ptr2 + (x1), xmask, eviction_policy='evict_last')
    tmp8 = tl.full([XBLOCK], 16, tl.int32)
    tmp9 = tmp7 + tmp8
    tmp10 = tmp7 < 0
    tmp11 = tl.where(tmp10, tmp9, tmp7)
    tl.device_assert(((0 <= tmp11) & (tmp11 < 16)) | ~(xmask), "index out of bounds: 0 <= tmp11 < 16")
'''


def test_on_cuda_a_triton_cumsum_that_made_the_index_is_followed_to_the_mask_not_convicted():
    # On CUDA cumsum is a Triton kernel the printer shows, not an extern op: its output, past the gather's bound,
    # is a valid count; the mask it counts is the input to change.
    from aoti_bisect.aoti.wrapper import Launch, WrapperGraph
    scan, gather = "triton_per_fused_cumsum_0", "triton_poi_fused_add_embedding_1"
    g = WrapperGraph("w.cpp", [
        Launch(0, scan, 1, ("arg3_1", "buf0"), ("arg3_1",), ("buf0",), "[cumsum]", ("arg3_1", "buf0", "2L", "24L")),
        Launch(1, gather, 2, ("arg2_1", "tok_weight", "buf0", "pos_weight", "buf1"),
               ("arg2_1", "tok_weight", "buf0", "pos_weight"), ("buf1",), "[add, embedding]",
               ("arg2_1", "tok_weight", "buf0", "pos_weight", "buf1", "384L"))],
        ["arg2_1", "arg3_1"], ["tok_weight", "pos_weight"], ["buf1"], cuda=True,
        params={scan: ["in_ptr0", "out_ptr0", "xnumel", "r0_numel"],
                gather: ["in_ptr0", "in_ptr1", "in_ptr2", "in_ptr3", "out_ptr0", "xnumel"]})

    def int_stats(when, k, arg, lo, hi):
        return TensorStats(when, k, arg, 48, "torch.int64", (lo + hi) / 2, lo, hi, "[2, 24]", "[24, 1]", "cuda:0")

    mask, tokens = int_stats("input", "", "arg3_1", 1, 1), int_stats("input", "", "arg2_1", 0, 99)
    views = {scan: KernelView(scan, {"arg3_1": int_stats("before_launch", scan, "arg3_1", 1, 1)},
                              {"buf0": int_stats("after_launch", scan, "buf0", 1, 24)}),
             gather: KernelView(gather, {"arg2_1": int_stats("before_launch", gather, "arg2_1", 0, 99),
                                         "buf0": int_stats("before_launch", gather, "buf0", 1, 24)}, {})}
    c = walk(g, lambda kernels: (views, {"arg2_1": tokens, "arg3_1": mask}), gather, True,
             IndexBound("tmp11", "16"), namer=Namer(inputs={"arg2_1": "tokens", "arg3_1": "mask"},
                                                    placeholders=tuple(g.inputs)),
             source=lambda k: GATHER_TRITON if k == gather else None)
    assert (c.kind, c.input_index, c.user_name) == ("model_input", 1, "mask")
    assert ("the index is computed, not handed in: triton_per_fused_cumsum_0 (cumsum) makes it from model input 1 "
            "(`mask`, wrapper arg3_1), which holds 1..1 at run time") in render(c.summary)


def test_an_ancestor_that_wrote_nan_is_still_followed_past_a_failed_index_check():
    from aoti_bisect.aoti.wrapper import Launch, WrapperGraph
    a, b = "triton_poi_fused_div_0", "triton_poi_fused_index_1"
    g = WrapperGraph("w.cpp", [Launch(0, a, 1, ("arg0_1", "buf0"), ("arg0_1",), ("buf0",), "", ("arg0_1", "buf0")),
                               Launch(1, b, 2, ("buf0", "buf1"), ("buf0",), ("buf1",), "", ("buf0", "buf1"))],
                     ["arg0_1"], [], ["buf1"], cuda=True)

    def f(when, k, arg, lo, hi):
        return TensorStats(when, k, arg, 4, "torch.float32", lo, lo, hi, "[4]", "[1]", "cuda:0")

    views = {a: KernelView(a, {"arg0_1": f("before_launch", a, "arg0_1", 0.0, 1.0)},
                           {"buf0": f("after_launch", a, "buf0", float("nan"), float("nan"))}),
             b: KernelView(b, {"buf0": f("before_launch", b, "buf0", float("nan"), float("nan"))}, {})}
    c = walk(g, lambda kernels: (views, {}), b, True, IndexBound("tmp3", "16"))
    assert (c.kind, c.kernel) == ("kernel", a)  # the NaN's maker, as before


# -- the index as an expression (#37): captured from the index_plus_offsets and index_from_bucketize scenarios --

OFFSETS_KERNEL = "cpp_fused_add_embedding_sum_0"


def int64(when, kernel, arg, lo, hi, size):
    return TensorStats(when, kernel, arg, 48, "torch.int64", (lo + hi) / 2, lo, hi, size, "[3, 1]", "cpu")


def offsets_walk(names=True):
    g = wrapper.parse_wrapper(read("index_plus_offsets.wrapper.cpp"))
    ids = int64("before_launch", OFFSETS_KERNEL, "arg2_1", 1, 19, "[16, 3]")
    views = {OFFSETS_KERNEL: KernelView(OFFSETS_KERNEL, {"arg2_1": ids}, {})}
    namer = Namer(inputs={"arg2_1": "ids"}, constants={"table_weight": "table.weight"},
                  placeholders=tuple(g.inputs)) if names else None
    return g, walk(g, lambda kernels: (views, {"arg2_1": ids}), OFFSETS_KERNEL, True, IndexBound("tmp33", "60"),
                   namer=namer, source=lambda k: read("index_plus_offsets.kernel.cpp"))


def test_the_index_is_read_from_the_kernel_as_a_sum_of_its_loads_and_the_literals_it_adds():
    from aoti_bisect.aoti.checks import Term, index_terms
    source = read("index_plus_offsets.kernel.cpp")
    # Three fields, three checks: the per-field offsets are literals chosen by selects the source fixes.
    assert index_terms(source, IndexBound("tmp33", "60")) == (Term(1, "in_ptr0"), Term(1, None, 55))
    assert index_terms(source, IndexBound("tmp22", "60")) == (Term(1, "in_ptr0"), Term(1, None, 20))
    assert index_terms(source, IndexBound("tmp12", "60")) == (Term(1, "in_ptr0"),)
    # the wrap of a negative index is decided by the data: the index as it is when it does not wrap
    assert index_terms(read("index_from_cumsum.kernel.cpp"), IndexBound("tmp7", "16")) == (Term(1, "in_ptr2"),)
    assert index_terms(source, IndexBound("tmp99", "60")) == ()


def test_ids_in_range_plus_an_inlined_offset_name_the_literal_that_takes_the_index_out():
    _, c = offsets_walk()
    assert (c.kind, c.kernel) == ("kernel", OFFSETS_KERNEL)  # the walk cannot see the buffer: constants.py can
    assert (f"{OFFSETS_KERNEL} computes the index into dim 0 of `table.weight` (table_weight) (size 60, fixed at "
            "export) as `ids` (arg2_1) + 55: `ids` (arg2_1) 1..19 plus 55 reach 74 ≥ 60; the literal 55 (a constant "
            "Inductor inlined into the kernel) takes it out of range") in render(c.summary)


def test_the_inlined_buffer_whose_element_takes_the_index_out_is_convicted_by_fqn_index_and_value():
    from aoti_bisect.aoti.hook_record import parse
    from aoti_bisect.diagnose.constants import convict_constants
    from aoti_bisect.diagnose.findings import Findings
    from aoti_bisect.run.types import Signature
    from aoti_bisect.stats import Rate
    from aoti_bisect.verdict import Verdict
    g, c = offsets_walk()
    # the compile record of the real run: `offsets` has no placeholder (inlined), its exported value summarised
    event = {"call": "aoti_compile_and_package", "status": "returned", "program": {"inputs": [], "constants": [
        {"fqn": "table.weight", "kind": "parameter", "placeholder": "table_weight", "uses": [["embedding", "weight"]]},
        {"fqn": "offsets", "kind": "buffer", "placeholder": None, "uses": [["add", "other"]],
         "values": {"dtype": "int64", "shape": [3], "numel": 3, "min": 0.0, "max": 55.0, "zero": 1,
                    "first_zero": {"index": [0], "value": 0.0}, "first_max": {"index": [2], "value": 55.0}}}]}}
    out = Findings(Verdict.REPRODUCED, Signature("index_out_of_bounds", "run", "x"), Rate(2, 2), [], culprit=c)
    convict_constants(out, [parse(json.dumps({"events": [event]}))], g, ["python", "repro.py"])
    line = ("buffer `offsets` (inlined into its kernels by Inductor: the package holds no copy; the exported value): "
            f"element [2] = 55 takes the index of {OFFSETS_KERNEL} out of range: `ids` (arg2_1) ≤ 19 plus `offsets`[2] "
            "= 55 gives 74 ≥ 60 (dim 0 of `table.weight` (table_weight) (size 60, fixed at export))")
    assert (out.culprit.kind, out.culprit.user_name, render(out.culprit.summary)) == ("constant", "offsets", line)


def test_an_index_made_by_an_extern_op_is_followed_to_the_ops_own_inputs():
    g = wrapper.parse_wrapper(read("index_from_bucketize.wrapper.cpp"))
    k = "cpp_fused_embedding_sum_0"
    buckets = TensorStats("before_launch", k, "buf1", 32, "torch.int64", 4, 0, 9, "[32]", "[1]", "cpu")
    age = TensorStats("input", "", "arg2_1", 32, "torch.float32", 40, 0.6, 91, "[32]", "[1]", "cpu")
    views = {k: KernelView(k, {"buf1": buckets}, {})}
    # The vectorised kernel spreads its load over lines: its source does not say what the index is loaded from.
    c = walk(g, lambda kernels: (views, {"arg2_1": age}), k, True, IndexBound("tmp2", "9"),
             namer=Namer(inputs={"arg2_1": "age"}, placeholders=tuple(g.inputs)),
             source=lambda name: read("index_from_bucketize.kernel.cpp"))
    assert (c.kind, c.input_index, c.user_name) == ("model_input", 0, "age")
    assert ("the index is computed, not handed in: aoti_torch_cpu_bucketize_Tensor (bucketize) makes it from model "
            "input 0 (`age`, wrapper arg2_1), which holds 0.6..91 at run time, and from `bounds`; that op takes it "
            "past the bound 9") in render(c.summary)


def test_the_constants_an_index_maker_also_read_are_told_with_their_values():
    from aoti_bisect.aoti.constants import ConstantValue
    from aoti_bisect.diagnose.constants import maker_constants
    g = wrapper.parse_wrapper(read("index_from_bucketize.wrapper.cpp"))
    k = "cpp_fused_embedding_sum_0"
    buckets = TensorStats("before_launch", k, "buf1", 32, "torch.int64", 4, 0, 9, "[32]", "[1]", "cpu")
    age = TensorStats("input", "", "arg2_1", 32, "torch.float32", 40, 0.6, 91, "[32]", "[1]", "cpu")
    c = walk(g, lambda kernels: ({k: KernelView(k, {"buf1": buckets}, {})}, {"arg2_1": age}), k, True,
             IndexBound("tmp2", "9"), source=lambda name: read("index_from_bucketize.kernel.cpp"))
    bounds = ConstantValue("bounds", "bounds", "float32", (9,), 9, min=10.0, max=90.0)
    assert render_all(maker_constants(c, [bounds], {"bounds": "buffer"})) == [
        "buffer `bounds`, which aoti_torch_cpu_bucketize_Tensor also reads, holds 10..90 over 9 elements"]
