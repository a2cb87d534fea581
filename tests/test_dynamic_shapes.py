"""Dynamic shapes: a symbolic index bound (`0 <= tmpN < ks0`) mapped through the generated wrapper to a model
input's dimension and its run-time size, and the guide's usual causes checked. On wrappers and level-2 logs
captured from torch 2.13 CPU packages exported with a dynamic dimension (scenarios/cpu/symbolic_index_bound.py,
scenarios/cpu/empty_batch.py)."""
from conftest import log

from aoti_bisect.diagnose.facts import Namer
from aoti_bisect.report.facts import render, render_all
from aoti_bisect.aoti import checks, printer, wrapper
from aoti_bisect.aoti.checks import DimRejected, IndexBound
from aoti_bisect.diagnose.bounds import DimRef, bound_dims, explain
from aoti_bisect.diagnose.sanity import sanity_culprit
from aoti_bisect.diagnose.walk import walk
from aoti_bisect.scenarios import compare, load_manifest

SYMBOLIC = "cpu/wrapper_symbolic_index_bound_level2.cpp"
EMPTY = "cpu/wrapper_empty_batch_level2.cpp"
SYM_KERNEL = "cpp_fused_index_sum_tanh_0"
EMPTY_KERNEL = "cpp_fused_index_relu_sum_0"


def observed(level2_log):
    return printer.collect(printer.parse_blocks(log(level2_log).splitlines()))


def test_symbolic_and_numeric_bounds_parse_from_cpu_raises_and_triton_asserts():
    cpu = checks.index_bound(log("cpu/symbolic_index_bound_level2.log"))
    assert cpu == IndexBound("tmp10", "ks0") and cpu.value is None and cpu.symbols == ("ks0",)
    assert checks.index_bound("Assertion `index out of bounds: 0 <= tmp7 < 2L*ks0` failed.") == \
        IndexBound("tmp7", "2*ks0")
    assert checks.index_bound("RuntimeError: index out of bounds: 0 <= tmp16 < 16L").value == 16
    assert checks.index_bound('tl.device_assert(m, "index out of bounds: 0 <= tmp8 < 100")').value == 100


def test_an_input_checks_dimension_refusals_parse():
    assert checks.dim_rejected(checks.sanity_hit(log("cpu/symbolic_too_small.check_inputs.log")).what) == \
        DimRejected(0, 1, ">= 2")
    assert checks.dim_rejected("dim value is too large at 0, expected to be <= 64, but got: 100") == \
        DimRejected(0, 100, "<= 64")
    assert checks.dim_rejected("unmatched dim value at 1, expected: 4, but got: 5") == DimRejected(1, 5, "== 4")
    assert checks.dim_rejected("unmatched stride value at 0, expected: 32, but got: 1") is None


def test_the_wrapper_says_which_input_dimension_a_size_parameter_receives():
    g = wrapper.parse_wrapper(log(SYMBOLIC))
    assert g.params[SYM_KERNEL] == ["in_ptr0", "in_ptr1", "out_ptr0", "ks0"]
    assert g.launches[0].call_args[-1] == "s70" and g.size_argument(SYM_KERNEL, "ks0") == "s70"
    assert g.sizes == {"s70": ("arg0_1", 0)}
    assert g.ranges == {("arg0_1", 0): (2, 64)}
    assert g.size_argument(SYM_KERNEL, "ks1") is None and g.size_argument("cpp_other_0", "ks0") is None
    assert bound_dims(IndexBound("tmp10", "ks0"), SYM_KERNEL, g) == [DimRef("arg0_1", 0)]


def test_call_arguments_split_at_top_level_commas_only():
    assert wrapper.split_args("(float*)(buf0.data_ptr()), std::max(s0, 1L), 2L*s1") == \
        ["(float*)(buf0.data_ptr())", "std::max(s0, 1L)", "2L*s1"]


def test_a_numeric_bound_is_the_static_dimension_it_equals():
    g = wrapper.parse_wrapper(log("cpu/wrapper_index_oob_level3.cpp"))
    assert bound_dims(IndexBound("tmp16", "16"), "cpp_fused_add_index_mul_sin_sum_0", g) == [DimRef("arg0_1", 1)]
    assert bound_dims(IndexBound("tmp16", "7"), "cpp_fused_add_index_mul_sin_sum_0", g) == []


def test_symbolic_bound_story_names_the_dimension_its_run_time_size_and_the_index_source():
    g = wrapper.parse_wrapper(log(SYMBOLIC))
    views, inputs = observed("cpu/symbolic_index_bound_level2.log")
    reads = list(views[SYM_KERNEL].before.values())
    story = explain(IndexBound("tmp10", "ks0"), SYM_KERNEL, g, inputs, reads)
    assert render(story.summary).startswith(
        "index into dim 0 of `arg0_1` (5 rows at run time) reached 9; the values come from `arg1_1`; none of the")
    assert ("the bound `ks0` of cpp_fused_index_sum_tanh_0 is a size known only at run time: ks0 = s70, read from "
            "dim 0 of `arg0_1` (5 at run time)") in render_all(story.lines)
    assert "usual cause, a size outside the exported range: no (dim 0 of `arg0_1` in 2..64)" in render_all(story.lines)
    # The user's names are data: the hook that learns them changes no logic.
    named = explain(IndexBound("tmp10", "ks0"), SYM_KERNEL, g, inputs, reads,
                    Namer({"arg0_1": "table", "arg1_1": "ids"}, placeholders=tuple(g.inputs)))
    assert render(named.summary).startswith("index into dim 0 of `table` (arg0_1) (5 rows at run time) reached 9; the "
                                            "values come from `ids` (arg1_1)")


def test_an_empty_batch_is_a_zero_size_dimension_that_held():
    g = wrapper.parse_wrapper(log(EMPTY))
    views, inputs = observed("cpu/empty_batch_level2.log")
    story = explain(IndexBound("tmp10", "ks0"), EMPTY_KERNEL, g, inputs, list(views[EMPTY_KERNEL].before.values()))
    assert render(story.summary).startswith("index into dim 0 of `arg0_1` (0 rows at run time) reached 2; the values come "
                                    "from `arg1_1`; held: a zero-size dimension at run time (dim 0 of `arg0_1` is 0")
    assert "usual cause, a zero-size dimension at run time: held: dim 0 of `arg0_1` is 0" in render_all(story.lines)
    # Inductor compiled the dimension for 2..64 although export declared min=0 (0/1 specialisation).
    assert "usual cause, a size outside the exported range: held: dim 0 of `arg0_1` is 0, exported for 2..64" \
        in render_all(story.lines)


def test_an_index_below_zero_past_the_wrap_is_said():
    g = wrapper.parse_wrapper(log(SYMBOLIC))
    views, inputs = observed("cpu/symbolic_index_bound_level2.log")
    ids = views[SYM_KERNEL].before["arg1_1"]._replace(min=-7.0, max=1.0)
    story = explain(IndexBound("tmp10", "ks0"), SYM_KERNEL, g, inputs, [ids])
    assert render(story.summary).startswith("index into dim 0 of `arg0_1` (5 rows at run time) went to -7, below zero even "
                                    "after a negative index wraps by adding 5")
    assert "held: an index below zero (`arg1_1` holds -7; a negative index wraps once by adding 5)" in render(story.summary)


def test_the_walk_convicts_the_kernel_and_tells_the_bound_in_the_users_terms():
    g = wrapper.parse_wrapper(log(SYMBOLIC))

    def observe(kernels):
        return observed("cpu/symbolic_index_bound_level2.log")
    c = walk(g, observe, start=SYM_KERNEL, crashed=True, bound=IndexBound("tmp10", "ks0"))
    # ids reaching 9 is no bad input by itself: 9 is past the table only because the table has 5 rows.
    assert c.kind == "kernel" and c.kernel == SYM_KERNEL
    assert render(c.summary) == (f"{SYM_KERNEL} faulted: index into dim 0 of `arg0_1` (5 rows at run time) reached 9; the "
                         "values come from `arg1_1`; none of the guide's usual causes held (zero-size dimension, "
                         "negative index, size outside the exported range)")
    assert render_all(c.evidence)[-1].startswith("index into dim 0 of `arg0_1`")


def test_an_input_check_refusing_a_dynamic_dimension_names_the_range():
    g = wrapper.parse_wrapper(log(SYMBOLIC))
    c, finding = sanity_culprit(checks.sanity_hit(log("cpu/symbolic_too_small.check_inputs.log")), g)
    assert c.kind == "model_input" and c.input_index == 0
    assert render(c.summary) == ("model input 0: dim 0 of `arg0_1` is 1 at run time, outside its exported range 2..64: a "
                         "size outside the exported range")
    assert render(finding).endswith(render_all(c.evidence)[-1])


def test_a_scenarios_evidence_patterns_are_checked():
    s = next(s for s in load_manifest() if s.name == "symbolic_index_bound")
    report = {"verdict": "reproduced", "signature": {"kind": "index_out_of_bounds", "phase": "run"},
              "reproduction": {"ci95": [0.3, 1.0]},
              "culprit": {"kind": "kernel", "kernel": SYM_KERNEL, "summary": "index went out of range",
                          "evidence": []}}
    assert [p for p in compare(s, report) if "evidence lacks" in p] == [f"culprit evidence lacks /{e}/"
                                                                         for e in render_all(s.evidence)]
    report["culprit"]["evidence"] = ["the bound `ks0` of k is a size known only at run time: ks0 = s70, read from "
                                     "dim 0 of `table` (arg0_1) (5 at run time)",
                                     "index into dim 0 of `table` (arg0_1) (5 rows at run time) reached 9; the values "
                                     "come from `ids` (arg1_1)"]
    report["culprit"]["origin"] = {"lines": [{"where": "symbolic_index_bound.py:11"}]}
    assert compare(s, report) == []


def test_the_ladder_carries_a_symbolic_bound_from_the_failure_message_to_the_verdict():
    from test_ladder import Seen, always, climb, sig, stage, trace_of
    fail = sig("index_out_of_bounds", "run", "RuntimeError: index out of bounds: 0 <= tmp10 < ks0", SYM_KERNEL)
    seen = Seen(SYMBOLIC, trace=trace_of("cpu/symbolic_index_bound_level3.log"),
                level2_log="cpu/symbolic_index_bound_level2.log")
    _, out = climb(always(fail), seen)
    assert out.culprit.kind == "kernel" and out.culprit.kernel == SYM_KERNEL
    assert "index into dim 0 of `arg0_1` (5 rows at run time) reached 9" in render(out.culprit.summary)
    assert render(stage(out, "inspect").finding).endswith("reached 9; the values come from `arg1_1`")


def test_the_ladder_says_an_empty_batch_refused_by_the_input_check():
    from test_ladder import Seen, always, climb, sig, stage
    fail = sig("index_out_of_bounds", "run", "RuntimeError: index out of bounds: 0 <= tmp10 < ks0", EMPTY_KERNEL)
    hit = checks.sanity_hit(log("cpu/empty_batch.check_inputs.log"))
    _, out = climb(always(fail), Seen(EMPTY, sanity=hit))
    assert out.culprit.kind == "model_input" and out.culprit.input_index == 0
    assert render(out.culprit.summary) == ("model input 0: dim 0 of `arg0_1` is 0 at run time, outside its exported range "
                                   "2..64: a size outside the exported range (a zero-size dimension at run time)")
    assert stage(out, "trace").skipped == "culprit already pinned"


def test_a_package_check_narrower_than_the_export_is_said_to_be_inductors():
    # The package checks 2..64 (captured); an export that allowed 1..512 for that dimension means Inductor narrowed it.
    g = wrapper.parse_wrapper(log(SYMBOLIC))
    hit = checks.sanity_hit(log("cpu/symbolic_too_small.check_inputs.log"))
    namer = Namer({"arg0_1": "table"}, placeholders=tuple(g.inputs), exported={("arg0_1", 0): (1, 512)})
    c, _ = sanity_culprit(hit, g, namer)
    assert c.kind == "model_input" and c.user_name == "table"
    assert render(c.summary) == ("model input 0: dim 0 of `table` (arg0_1) is 1 at run time, inside the range the "
                                 "export allows (1..512), but Inductor narrowed it to 2..64 while compiling the package "
                                 "(its input check requires >= 2): a specialisation by the compiler, not a size "
                                 "outside the exported range")
    # The export's own range: the usual story.
    for exported in ({("arg0_1", 0): (2, 64)}, {}):
        c, _ = sanity_culprit(hit, g, Namer(placeholders=tuple(g.inputs), exported=exported))
        assert "outside its exported range 2..64" in render(c.summary)


def test_the_exports_ranges_the_hook_records_reach_the_namer():
    import json
    from aoti_bisect.aoti.hook_record import Names, parse
    event = {"call": "aoti_compile_and_package", "status": "returned",
             "program": {"inputs": [{"name": "x", "placeholder": "arg0_1", "dims": [[2, None], 4]}], "constants": []}}
    names = Names.of([parse(json.dumps({"events": [event]}))])
    assert names.inputs == {"arg0_1": "x"} and names.exported == {("arg0_1", 0): (2, None), ("arg0_1", 1): (4, 4)}
