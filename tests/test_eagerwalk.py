"""The walk against eager (issue #16 item 4): the parser and the decision over a real level-1 run's record."""
import json
import os

import pytest

from aoti_bisect.report.facts import render, render_all
from aoti_bisect.aoti import wrapper
from aoti_bisect.aoti.eagerwalk import EagerWalk, Pair, Saved, parse, read_eager_walk
from aoti_bisect.aoti.provenance import SourceMap, read_kernel_information
from aoti_bisect.diagnose.eagerwalk import Reference, extern_op, judge, reference, walk_eager

DATA = os.path.join(os.path.dirname(__file__), "data", "eagerwalk")
WRAPPER = f"{DATA}/wrong_value_pass.wrapper.cpp"


def real_graph():
    with open(WRAPPER) as f:
        return wrapper.parse_wrapper(f.read(), WRAPPER, [])


def nodes_of(graph):
    sources = SourceMap(read_kernel_information(WRAPPER), {})
    return lambda launch: sources.origin(launch.name, launch.handle, launch.source_nodes).nodes


def captured(path):
    """A captured level-1 wrapper's graph, and the FX nodes its compile's provenance gives each launch."""
    with open(path) as f:
        graph = wrapper.parse_wrapper(f.read(), path, [])
    sources = SourceMap(read_kernel_information(path), {})
    return graph, lambda launch: sources.origin(launch.name, launch.handle, launch.source_nodes).nodes


def test_the_real_record_parses_into_the_call_its_outputs_and_every_saved_tensor():
    walk = read_eager_walk(DATA)
    assert walk.status == "differs" and walk.call == 0 and walk.factor == 10
    assert [line.split(" differs")[0] for line in walk.outputs] == ["output 0 ([4, 8] float32)", "output 1 ([8] float32)"]
    saved = walk.around("after", "cpp_fused__softmax_add_mul_sum_1", "buf3")
    assert saved.shape == (4, 8) and saved.rtol > 1e-6 and saved.pairs[0].node in ("add", "mul_1")


def test_the_walk_convicts_the_kernel_the_miscompiled_pass_changed_from_inputs_that_agree():
    graph = real_graph()
    culprit = walk_eager(graph, read_eager_walk(DATA), nodes_of(graph))
    assert culprit.kind == "kernel" and culprit.kernel == "cpp_fused__softmax_add_mul_sum_1"
    assert "from inputs that agree with eager" in render(culprit.summary)
    assert "= eager `linear`" in " ".join(render_all(culprit.evidence))  # the extern matmul before it is right
    assert any(line.startswith("output 0") for line in render_all(culprit.evidence))


def test_without_provenance_the_walk_still_finds_the_kernel_by_value():
    graph = real_graph()
    culprit = walk_eager(graph, read_eager_walk(DATA), lambda launch: ())
    assert culprit.kernel == "cpp_fused__softmax_add_mul_sum_1"


def test_a_kernel_whose_outputs_all_agree_is_passed_over():
    with open(f"{DATA}/eager_walk.json") as f:
        doc = json.load(f)
    for dump in doc["dumps"]:  # as if each tensor equalled the eager value nearest to it
        for pair in dump["pairs"][:1]:
            pair[2] = True
    graph = real_graph()
    culprit = walk_eager(graph, parse(json.dumps(doc)), nodes_of(graph))
    lines = render_all(culprit.evidence)
    assert culprit.kind == "unknown" and "outside them" in lines[-2]
    assert lines[-1].startswith("gap from eager, launch by launch: cpp_fused_mul_tanh_0 wrote buf0 ([4, 16] float32) "
                                "= eager `mul` (max abs 0); ")
    assert "aoti_torch_cpu_addmm_out wrote buf2 ([4, 8] float32) = eager `linear` (max abs 0)" in lines[-1]


def test_outputs_that_agree_on_every_call_say_so_instead_of_walking():
    walk = parse(json.dumps({"status": "agree", "calls": 3, "outputs": [], "dumps": []}))
    culprit = walk_eager(real_graph(), walk, lambda launch: ())
    assert culprit.kind == "unknown" and "agree with eager on every call compared (3)" in render_all(culprit.evidence)[0]


def test_a_damaged_record_is_one_line_not_an_exception(tmp_path):
    (tmp_path / "eager_walk.json").write_text("{not json")
    assert read_eager_walk(str(tmp_path)).problem.startswith("eager_walk.json is damaged")
    assert "never called a compiled model" in read_eager_walk(str(tmp_path / "none")).problem


def saved(*pairs, dropped=0):
    return Saved((4, 8), "float32", 1e-5, 1e-4, tuple(Pair(*p) for p in pairs), dropped)


def test_judge_holds_a_buffer_against_its_kernels_nodes_first():
    assert judge(saved(("x", 0.0, True), ("mul", 2.0, False)), Reference(("mul",))).state == "differs"
    assert judge(saved(("mul", 0.0, True)), Reference(("mul",))).state == "agrees"
    # Provenance names no node of this shape: an intermediate that equals some eager value agrees ...
    assert judge(saved(("x", 0.0, True)), Reference(("amax",))).state == "agrees"
    # ... and one that equals none is not convicted on a guess
    assert judge(saved(("x", 1.0, False)), Reference(("amax",))).state == "unjudged"
    # with no provenance at all, a buffer unlike every eager value of its shape differs
    assert judge(saved(("x", 1.0, False)), Reference(())).state == "differs"
    assert judge(saved(("x", 1.0, False), dropped=3), Reference(())).state == "unjudged"
    assert judge(None, Reference(("mul",))).state == "unjudged"


def test_an_extern_is_held_only_against_what_it_computes_whole():
    # The shape of issue #37's CUDA false conviction: Inductor runs `linear` as an extern mm and adds the bias in
    # the next kernel, so the mm's output misses eager `linear` by the bias.
    walk = EagerWalk("differs", targets={"linear": "aten.linear.default", "linear:mm": "aten.linear.default:mm",
                                         "relu": "aten.relu.default", "add": "aten.add.Tensor"})
    mm = wrapper.Launch(0, "aoti_torch_cuda_mm_out", 1, ("buf0",), (), ("buf0",))
    addmm = wrapper.Launch(0, "aoti_torch_cpu_addmm_out", 1, ("buf0",), (), ("buf0",))
    assert extern_op(mm.name) == "mm" and extern_op("bisectlab::pad_double") == "pad_double"
    assert extern_op("cpp_fused_relu_0") is None and extern_op("triton_poi_fused_addmm_relu_0") is None
    assert reference(walk, mm, ("linear",)).nodes == ("linear:mm",)  # the part the hook computed alone
    assert reference(walk, addmm, ("linear",)).nodes == ("linear",)  # addmm computes a linear whole
    # an extern whose provenance names a node it computes part of, with no part kept: by value only, never convicted
    part = reference(walk, addmm, ("add",))
    assert part.nodes == () and "computes aten addmm, not the op of eager `add` (aten.add.Tensor)" in render(part.why)
    missed = judge(saved(("linear", 0.1248, False)), part, walk)
    assert missed.state == "unjudged" and "(it may be only part of it)" in render(missed.describe(None))
    held = judge(saved(("linear:mm", 0.0, True, 0.0), ("linear", 0.1248, False, 0.5)), reference(walk, mm, ("linear",)))
    assert held.state == "agrees"
    assert render(held.describe(None)) == "([4, 8] float32) = eager the mm part of `linear` (max abs 0, max rel 0)"


def test_a_miss_within_an_unstable_references_own_error_convicts_nothing():
    walk = EagerWalk("differs", unstable={"sub": 0.05})
    shaky = judge(saved(("sub", 0.2, False, 0.01)), Reference(("sub",)), walk)
    assert shaky.state == "unjudged"
    assert "the eager reference `sub` is itself unstable: float32 and float64 eager differ by up to 0.05" in \
        render(shaky.describe(None))
    # however far the miss: the float32 errors seen bound nothing where the node is ill-conditioned
    assert judge(saved(("sub", 35.5, False, 0.9)), Reference(("sub",)), walk).state == "unjudged"
    # a stable node is judged as ever
    assert judge(saved(("mul", 0.6, False, 0.03)), Reference(("mul",)), walk).state == "differs"


@pytest.mark.slow
def test_outputs_that_agree_where_eager_makes_the_nan_itself_name_the_node_and_its_line():
    trace = ('File "/home/u/repro.py", line 12, in forward\n    y = torch.cond(x.sum() > 0, hot, cold, (x,))\n'
             '  File "<eval_with_key>.5", line 9, in forward\n    cond = torch.ops.higher_order.cond(l_args_0_)')
    walk = parse(json.dumps({"status": "agree", "calls": 1, "outputs": [], "dumps": [],
                             "born": {"node": "cond", "target": "cond", "trace": trace}}))
    culprit = walk_eager(real_graph(), walk, lambda launch: ())
    said = render_all(culprit.evidence)[0]
    assert culprit.kind == "unknown" and "eager makes the same non-finite values" in said
    assert "line 12 of repro.py" in said and "eval_with_key" not in said  # torch's generated frame is not the user's


def _born(torch, model, *args):
    from aoti_bisect.child.hook import eagerwalk

    ep = torch.export.export(model, args)
    return eagerwalk.before_call(ep, args, {}, 0, 1 << 20)["born"]


def test_the_hook_finds_where_eager_first_makes_a_nan_from_finite_values_and_not_in_a_nan_input(monkeypatch):
    import torch
    from aoti_bisect.child import contract

    class Sqrt(torch.nn.Module):
        def forward(self, x, y):
            h = torch.relu(x) + y
            return torch.sqrt(h - 0.75).exp() * 2.0  # NaN born at sqrt; exp and mul only carry it

    class Cond(torch.nn.Module):
        def forward(self, x):
            y = torch.cond(x.sum() > 0, lambda x: torch.log(x - 0.5), lambda x: x * 2.0, (x,))
            return torch.tanh(y)

    monkeypatch.setenv(contract.EAGER_WALK_ENV, "1")
    monkeypatch.chdir(os.path.dirname(__file__))  # no level-1 dumps here to clear
    torch.manual_seed(0)
    x, y = torch.rand(4, 8), torch.rand(4, 8)
    born = _born(torch, Sqrt(), x, y)
    assert born["node"] == "sqrt" and born["target"] == "aten.sqrt.default" and "test_eagerwalk.py" in born["trace"]
    # The control: a NaN the script passes in is the input's, and no node makes one.
    y[1, 2] = float("nan")
    assert _born(torch, Sqrt(), x + 1.0, y) is None
    assert _born(torch, Cond(), x)["target"] == "cond"  # made inside the branch: the cond node returns it


def test_the_hook_runs_a_program_called_with_keyword_arguments_in_any_order(monkeypatch):
    import torch
    from aoti_bisect.child import contract
    from aoti_bisect.child.hook import eagerwalk

    class Model(torch.nn.Module):
        def forward(self, x, offset, scale=None):
            return torch.tanh(x + offset) * scale

    x, offset, scale = torch.randn(3, 4), torch.randn(4), torch.randn(4)
    ep = torch.export.export(Model(), (x,), {"scale": scale, "offset": offset})
    monkeypatch.setenv(contract.EAGER_WALK_ENV, "1")
    monkeypatch.chdir(os.path.dirname(__file__))  # no level-1 dumps here to clear
    eager = eagerwalk.before_call(ep, (x,), {"offset": offset, "scale": scale}, 0, 1 << 20)
    assert eager["status"] is None and eager["problem"] is None
    torch.testing.assert_close(eager["outputs"], Model()(x, offset, scale), rtol=0, atol=0)
    assert {"add", "tanh", "mul"} <= set(eager["values"])


def test_the_hook_keeps_the_part_of_a_linear_an_extern_mm_computes_and_each_nodes_op(monkeypatch):
    import torch
    from aoti_bisect.child import contract
    from aoti_bisect.child.hook import eagerwalk

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 3)

        def forward(self, x):
            return torch.relu(self.fc(x))

    model, x = Model(), torch.randn(2, 5, 4)
    ep = torch.export.export(model, (x,))
    monkeypatch.setenv(contract.EAGER_WALK_ENV, "1")
    monkeypatch.chdir(os.path.dirname(__file__))
    eager = eagerwalk.before_call(ep, (x,), {}, 0, 1 << 20)
    assert eager["targets"]["linear"] == "aten.linear.default" and eager["targets"]["linear:mm"].endswith(":mm")
    # what CUDA's extern mm writes: the 2-D product before the bias; and the 2-D addmm CPU runs a 3-D linear as
    product = x.reshape(-1, 4) @ model.fc.weight.t()
    torch.testing.assert_close(eager["values"]["linear:mm"], product)
    torch.testing.assert_close(eager["values"]["linear:addmm"], product + model.fc.bias)


def test_the_float64_run_marks_a_cancelling_node_unstable_and_leaves_the_users_module_alone():
    import torch
    from aoti_bisect.child.hook import eagerwalk

    class Variance(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = torch.nn.Parameter(torch.full((32,), 2.0))

        def forward(self, h):
            mu = h.mean(dim=-1, keepdim=True)
            return (h * h).mean(dim=-1, keepdim=True) - mu * mu, h * self.scale

    model, h = Variance(), 3000 + torch.randn(8, 32) * 3
    ep = torch.export.export(model, (h,))
    recorder = eagerwalk._interpreter_class()(ep.module(), 1 << 20)
    eagerwalk._run(torch, recorder, [h])
    wide, unstable, errors, problem = eagerwalk._unstable(recorder.values, ep, [h], 1 << 20)
    assert problem is None and "sub" in unstable and unstable["sub"] > 0.01 and "mul_2" not in unstable
    assert wide["sub"].dtype == torch.float64 and errors["sub"][0] == unstable["sub"] and errors["mul_2"] == [0, 0]
    assert model.scale.dtype == torch.float32  # the float64 run converted a copy, not the module's parameter


# The eager stage of scenario unstable_variance (torch 2.13.0+cpu, 2026-11-26, `scenarios check`): the eager run's
# eager_walk.json and its level-1 compile's wrapper and kernel_information.json, unchanged but for the run folder.
VARIANCE = f"{DATA}/unstable_variance"


def test_a_control_with_nothing_miscompiled_convicts_no_kernel():
    graph, of = captured(f"{VARIANCE}/unstable_variance.wrapper.cpp")
    walk = read_eager_walk(VARIANCE)
    assert walk.unstable["mul_2"] > 0.4 and "mean" not in walk.unstable  # float32 eager itself misses float64
    culprit = walk_eager(graph, walk, of)
    lines = render_all(culprit.evidence)
    assert culprit.kind == "unknown"
    assert any(line.startswith("eager is itself unstable here: float32 and float64 eager disagree beyond the tolerance "
                               "at 5 nodes (`sub` by up to 2.326, `clamp_min` by up to 2.326, `mul_2` by up to 0.487, "
                               "`rsqrt` by up to 0.0996)") for line in lines)
    # the output misses eager `mul_2` by 1.27, as eager's own float32 misses float64 by 0.49: no conviction
    assert ("wrote buf3 ([8, 32] float32) (not compared: the eager reference `mul_2` is itself unstable: float32 and "
            "float64 eager differ by up to 0.487, beyond the tolerance, and this tensor misses it by max abs 1.271") \
        in lines[-1]
    # the reduction's running sums (buf1, buf2) are the kernel's scratch, never held against `mean`
    assert "buf1" not in lines[-1]
    assert "aoti_torch_cpu_addmm_out wrote buf0 ([8, 32] float32) = eager `linear`" in lines[-1]


def test_a_constant_read_is_held_against_its_own_eager_value_not_the_nearest_of_its_shape():
    # stale_buffer_after_linear_cuda on an H200: the stale `shift` (0 in the package, -0.5 in the module) lay nearer
    # eager `fc1_bias` than its own value, and the evidence named fc1_bias.
    graph = real_graph()
    saved = Saved((8, 8), "float32", 1e-5, 1e-4, (Pair("fc1_weight", 0.25, False), Pair("proj_weight", 0.5, False)))
    walk = EagerWalk("differs", call=0, saved={("before", "aoti_torch_cpu_addmm_out_proj_weight"): saved})
    c = walk_eager(graph, walk, lambda launch: ())
    assert c.kind == "constant" and c.input_name == "proj_weight"
    assert "differs from eager `proj_weight` by up to 0.5" in render(c.summary)


def test_a_kernel_whose_output_a_later_launch_writes_again_is_not_held_to_the_node():
    # scatter_rows_oob_write's shape on an H100: Inductor fills a buffer with zeros and a user Triton kernel then
    # scatters rows into it, so the fill alone differs from the node's eager value by design; judging it convicted
    # the correct zeros kernel. What a later launch writes again before anyone reads it is judged after that launch.
    import dataclasses
    graph = real_graph()
    fill = graph.launches[2]
    scatter = wrapper.Launch(3, "scatter_rows_0", fill.line + 1, fill.writes, (), fill.writes)
    graph = dataclasses.replace(graph, launches=[*graph.launches, scatter])
    culprit = walk_eager(graph, read_eager_walk(DATA), nodes_of(graph))
    assert culprit.kernel != "cpp_fused__softmax_add_mul_sum_1"
    assert "scatter_rows_0 writes it again before any launch reads it" in " ".join(render_all(culprit.evidence))


def test_on_a_gpu_a_kernel_followed_by_a_launch_no_printer_wraps_is_a_lead_not_a_culprit():
    # scatter_rows_oob_write on an H100: a user kernel's stray row store changed a correct gelu's output, which the
    # walk then held against eager. A launch no printer wraps after the kernel could have written what it made.
    import dataclasses
    graph = real_graph()
    user = wrapper.Launch(3, "scatter_rows_0", graph.launches[-1].line + 1, ("buf9",), (), ("buf9",))
    on_gpu = dataclasses.replace(graph, launches=[*graph.launches, user], cuda=True)
    culprit = walk_eager(on_gpu, read_eager_walk(DATA), nodes_of(on_gpu))
    assert culprit.kind == "unknown"
    said = render(culprit.evidence[0])
    assert said.startswith("cpp_fused__softmax_add_mul_sum_1's output") and "scatter_rows_0 ran after it" in said
    # On the CPU the launches are synchronous and the control is the same graph: the kernel is convicted.
    on_cpu = dataclasses.replace(on_gpu, cuda=False)
    assert walk_eager(on_cpu, read_eager_walk(DATA), nodes_of(on_cpu)).kernel == "cpp_fused__softmax_add_mul_sum_1"


# The eager stage of scenario bf16_rounding (torch 2.13.0+cpu, 2026-11-28): the eager run's eager_walk.json (schema
# 3, with float64 errors) and its level-1 compile's wrapper and kernel_information.json, unchanged but for the run
# folder. exp(g) * exp(-g) - 1 in bfloat16: eager keeps a bfloat16 step, the fused kernel computes in float32.
BF16 = f"{DATA}/bf16_rounding"


def _bf16_walk(walk):
    graph, of = captured(f"{BF16}/bf16_rounding.wrapper.cpp")
    return walk_eager(graph, walk, of)


def test_a_bfloat16_gap_where_float64_takes_the_packages_side_is_a_precision_difference_convicting_nothing():
    walk = read_eager_walk(BF16)
    assert walk.float64["mul_1"][0] == pytest.approx(0.5) and walk.unstable.keys() == {"sub", "mul_1"}
    culprit = _bf16_walk(walk)
    assert (culprit.kind, culprit.kernel) == ("precision", "cpp_fused_exp_mul_neg_sub_0")
    assert render(culprit.summary) == (
        "a precision difference, not a miscompile: cpp_fused_exp_mul_neg_sub_0's output buf1 misses eager where "
        "eager itself rounds, and float64 takes the package's side: against `mul_1` run in float64 the package is "
        "off by RMSE 2.95e-06 (max abs 7.63e-06), eager by RMSE 0.153 (max abs 0.5), within dynamo's rule (RMSE "
        "against float64 at most 2 times eager's + 1e-05). Eager rounds to bfloat16 after every op; the fused kernel "
        "computes in float32 and rounds once. No kernel is convicted")
    assert culprit.precision.cause == "eager_rounding" and culprit.precision.control is None
    # the gap table: every launch output in launch order, with both sides against float64
    assert [(g.kernel, g.node, g.state) for g in culprit.gaps] == [
        ("aoti_torch_cpu_addmm_out", "linear", "agrees"), ("cpp_fused_exp_mul_neg_sub_0", "sub", "unjudged")]
    assert culprit.gaps[1].f64 == pytest.approx(7.63e-06, rel=1e-2) and culprit.gaps[1].eager_f64 == pytest.approx(
        0.0078125)


def test_a_gap_float64_does_not_side_with_or_a_float32_one_stays_unexplained():
    import dataclasses
    walk = read_eager_walk(BF16)
    stem = ("after", "cpp_fused_exp_mul_neg_sub_0_buf1")
    saved = walk.saved[stem]
    # the package as far from float64 as eager is, times 3: beyond dynamo's rule, no precision verdict
    far = tuple(dataclasses.replace(p, f64_rmse=3 * walk.float64[p.node][1]) for p in saved.pairs)
    worse = dataclasses.replace(walk, saved={**walk.saved, stem: dataclasses.replace(saved, pairs=far)})
    assert _bf16_walk(worse).kind == "unknown"
    # float32: an ill-conditioned computation lands near float64 by luck of its order as often as by accuracy
    wide = dataclasses.replace(walk, saved={**walk.saved, stem: dataclasses.replace(saved, dtype="float32")})
    assert _bf16_walk(wide).kind == "unknown"
    # a walk from before float64 errors were measured (schema 2) is judged as before
    old = dataclasses.replace(walk, float64={})
    assert _bf16_walk(old).kind == "unknown"


def _tf32_walk(walk, cuda=True, matmul=True):
    """wrong_value_pass's record as if on a GPU, the program compiled with TF32 matmuls allowed, and the kernel it
    convicts one that computes a linear (as a Triton GEMM template with its epilogue does)."""
    import dataclasses
    graph = dataclasses.replace(real_graph(), cuda=cuda)
    walk = dataclasses.replace(walk, targets={**walk.targets, "linear": "aten.linear.default"})
    of = nodes_of(graph)
    return walk_eager(graph, walk, lambda l: (*of(l), "linear") if matmul and l.name.endswith("_sum_1") else of(l))


def test_a_float32_matmul_kernel_compiled_with_tf32_allowed_waits_on_the_control_before_it_is_convicted():
    import dataclasses
    walk = dataclasses.replace(read_eager_walk(DATA), tf32=True)
    c = _tf32_walk(walk)
    assert (c.kind, c.kernel, c.precision.cause) == ("kernel", "cpp_fused__softmax_add_mul_sum_1", "tf32")
    assert render(c.evidence[-2]).startswith(
        "unverified: the program was compiled with TF32 matmuls allowed and cpp_fused__softmax_add_mul_sum_1 computes "
        "a matmul in float32: TF32's rounding alone may make this gap; a control recompile with TF32 off decides")
    # convicted at once: TF32 not allowed, the CPU (no TF32), or a kernel that computes no matmul
    for other in (_tf32_walk(dataclasses.replace(walk, tf32=False)), _tf32_walk(walk, cuda=False),
                  _tf32_walk(walk, matmul=False)):
        assert other.kind == "kernel" and other.precision is None


# The eager stage of scenario tf32_matmul_cuda on an H100 (torch 2.11.0+cu130, 2026-11-28, bench/verdict.py at 1dae773):
# the eager run's eager_walk.json (schema 4, `tf32` true) and its level-1 compile's wrapper and kernel_information.json.
TF32 = f"{DATA}/tf32_matmul_cuda"


def test_a_tf32_template_is_held_against_the_linear_part_it_computes_and_its_conviction_waits_on_the_control():
    import dataclasses
    graph, of = captured(f"{TF32}/tf32_matmul.wrapper.cpp")
    walk = read_eager_walk(TF32)
    assert graph.cuda and walk.tf32 is True

    def walked(w):
        return walk_eager(graph, w, of)
    c = walked(walk)
    # the template wrote the product before the bias (added by the next kernel): held against `linear` alone it
    # missed by 0.063, the bias; against the mm part, by TF32's 0.0018
    assert (c.kind, c.kernel, c.precision.cause) == ("kernel", "triton_tem_fused_addmm_t_0", "tf32")
    assert render(c.summary).startswith(
        "triton_tem_fused_addmm_t_0's output buf0 ([128, 512] float32) differs from eager the mm part of `linear` by up "
        "to 0.001795 (max abs; max rel 12; 2.192e+07 ULP in float32; cosine 1), `linear` by up to 0.06326")
    assert [(g.node, g.state) for g in c.gaps] == [("linear:mm", "differs")]
    assert "against the mm part of `linear` run in float64 the package is off by RMSE 0.000419 (max abs 0.0018), " \
           "eager by RMSE 8.67e-08" in render(c.evidence[-2])
    # compiled with TF32 off, the same miss convicts at once
    assert walked(dataclasses.replace(walk, tf32=False)).precision is None


def test_each_comparison_names_its_metrics_ulp_and_cosine_where_measured():
    from aoti_bisect.diagnose.eagerwalk import Judged, gap
    p = Pair("mul_1", 0.5, False, 1.0, 7.6e-06, 2.9e-06, 64.0, 0.9838699)
    assert gap(p, "bfloat16") == "max abs 0.5, max rel 1, 64 ULP in bfloat16, cosine 0.9838699"
    saved = Saved((4, 8), "bfloat16", 0.16, 1e-4, (p,))
    assert render(Judged("differs", p, saved).describe(None)) == (
        "([4, 8] bfloat16) differs from eager `mul_1` by up to 0.5 (max abs; max rel 1; 64 ULP in bfloat16; cosine "
        "0.9838699) (tolerance rtol 0.16, atol 0.0001)")
    # a schema 4 row parses into them; older rows leave them None
    doc = {"status": "differs", "tf32": True, "dumps": [{"when": "after", "stem": "k_buf0", "shape": [2], "dtype":
                                                        "float32", "pairs": [["add", 0.1, False, 0.2, 0.3, 0.4, 5, 0.9]]}]}
    walk = parse(json.dumps(doc))
    row = walk.around("after", "k", "buf0").pairs[0]
    assert walk.tf32 is True and (row.ulp, row.cosine) == (5.0, 0.9)
    assert read_eager_walk(DATA).tf32 is None and read_eager_walk(DATA).saved[("after", "cpp_fused__softmax_add_mul_"
                                                                               "sum_1_buf3")].pairs[0].ulp is None


def test_the_hook_measures_ulp_in_the_saved_dtype_and_the_cosine():
    import torch
    from aoti_bisect.child.hook import eagerwalk
    eager = torch.tensor([1.0, 2.0, 0.0, 1e-40], dtype=torch.float64)
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        eps = torch.finfo(dtype).eps
        package = eager + torch.tensor([eps, 2 * eps, 0.0, 0.0], dtype=torch.float64)  # one last place each
        assert eagerwalk._shape_of_gap(torch, dtype, package, eager) == (1.0, pytest.approx(1.0))
    ulp, cosine = eagerwalk._shape_of_gap(torch, torch.bfloat16, torch.tensor([1.5, 2.0, 0.0, 0.0]).double(), eager)
    assert ulp == 64 and cosine == pytest.approx(0.98387, abs=1e-5)
    # bf16_rounding's shape: eager holds an exact 0 where the package holds 7.6e-6, and a bfloat16 step (2**-7) where
    # the package holds 0: counted in the larger one's last place, 1 and 128, not 0's subnormal spacing (1e34)
    ulp, _ = eagerwalk._shape_of_gap(torch, torch.bfloat16, torch.tensor([2.0 ** -17, 0.0]).double(),
                                     torch.tensor([0.0, 2.0 ** -7]).double())
    assert ulp == 128
    assert eagerwalk._shape_of_gap(torch, torch.int64, eager, eager) == (None, None)


def test_the_hook_notes_tf32_at_the_compile_and_the_control_turns_it_off_for_the_compile_alone(monkeypatch):
    import torch
    from aoti_bisect.child import contract
    from aoti_bisect.child.hook import eagerwalk
    matmul = torch.backends.cuda.matmul
    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("high")  # as tf32_matmul.py allows TF32
        with eagerwalk.compiling():
            assert matmul.allow_tf32
        assert eagerwalk._state["tf32"] is True
        monkeypatch.setenv(contract.TF32_OFF_ENV, "1")
        with eagerwalk.compiling():
            # what Inductor reads while it lowers a GEMM template, and reads without raising (on an H100 the legacy
            # allow_tf32 = False after set_float32_matmul_precision left the APIs at odds: the lowering raised)
            assert not matmul.allow_tf32 and matmul.fp32_precision == "ieee"
            assert torch.get_float32_matmul_precision() == "highest"
        # the script's setting is back; the record says the compile ran without TF32, so its walk convicts
        assert torch.get_float32_matmul_precision() == "high" and eagerwalk._state["tf32"] is False
    finally:
        torch.set_float32_matmul_precision(before)
        eagerwalk._state["tf32"] = None


@pytest.mark.slow
def test_the_tf32_control_compiles_a_real_package_where_the_legacy_switch_broke_inductor(monkeypatch, tmp_path):
    # tf32_matmul_cuda on an H100 (torch 2.11): `allow_tf32 = False` after set_float32_matmul_precision("high") made
    # Inductor's lowering raise ("mix of the legacy and new APIs"), so the control said nothing. The same state breaks
    # a CPU compile of a Linear on torch 2.13; the control as built compiles it, and leaves the script's setting.
    import torch
    from aoti_bisect.child import contract
    from aoti_bisect.child.hook import eagerwalk
    model, x = torch.nn.Linear(16, 8).eval(), torch.randn(4, 16)
    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("high")
        ep = torch.export.export(model, (x,))
        monkeypatch.setenv(contract.TF32_OFF_ENV, "1")
        with eagerwalk.compiling():
            path = torch._inductor.aoti_compile_and_package(ep, package_path=str(tmp_path / "control.pt2"))
        assert torch.get_float32_matmul_precision() == "high"
        torch.testing.assert_close(torch._inductor.aoti_load_package(path)(x), model(x))
    finally:
        torch.set_float32_matmul_precision(before)
        eagerwalk._state["tf32"] = None


def test_the_eager_run_never_moves_the_state_of_the_users_module(monkeypatch):
    # ep.module() holds the user's own buffers: a counter's add_ in forward (issue #165444's shape, which the package
    # does not carry between calls) would move once more for each check, changing what the repro's eager call sees.
    import torch

    from aoti_bisect.child import contract
    from aoti_bisect.child.hook import eagerwalk, fakecheck

    class Counter(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("count", torch.ones(1))
            self.scale = torch.nn.Parameter(torch.ones(1))

        def forward(self, x):
            self.count.add_(1)
            return x * self.scale + self.count

    model, x = Counter(), torch.zeros(1)
    ep = torch.export.export(model, (x,))
    assert fakecheck._written(ep) == {"count"}
    monkeypatch.setenv(contract.EAGER_WALK_ENV, "1")
    monkeypatch.chdir(os.path.dirname(__file__))
    eager = eagerwalk.before_call(ep, (x,), {}, 0, 1 << 20)
    assert float(eager["outputs"]) == 2.0 and float(model.count) == 1.0  # the check ran on a copy
    assert float(model(x)) == 2.0  # the repro's own call sees what it would without aoti-bisect


def test_state_the_program_writes_and_the_package_does_not_carry_is_named_not_a_kernel(monkeypatch, tmp_path):
    # unwritten_buffer's shape on a real exported program: the package keeps `step` as built (0), the module moves it.
    import torch

    from aoti_bisect.child import contract
    from aoti_bisect.child.hook import eagerwalk

    class Stepper(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("step", torch.zeros(1))

        def forward(self, x):
            self.step.add_(1)
            return x * self.step

    model, x = Stepper(), torch.ones(2)
    ep = torch.export.export(model, (x,))
    monkeypatch.setenv(contract.EAGER_WALK_ENV, "1")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(eagerwalk, "_state", {"kept": False})
    eagerwalk.on_compile(ep)
    model(x)  # the repro's own call 0 moves the counter to 1; the package's stays 0
    eager = eagerwalk.before_call(ep, (x,), {}, 1, 1 << 20)
    assert float(eager["outputs"][0]) == 2.0 and float(eager["as_built"][0][0]) == 1.0 and model.step.item() == 1
    eagerwalk.after_call(eager, torch.ones(2), 1, str(tmp_path / "eager_walk.json"))  # the package's output: 1, 1
    walk = read_eager_walk(str(tmp_path))
    assert walk.status == "differs" and [f for f, _ in walk.unwritten] == ["step"]
    c = walk_eager(wrapper.WrapperGraph("w.cpp", [], [], [], []), walk, lambda l: ())
    assert (c.kind, c.user_name) == ("stale_constant", "step")
    assert render(c.summary) == ("`step` is written by the program, but the package does not carry the write between "
                                 "calls: on call 1 its outputs equal the program run with `step` as built, not as the "
                                 "module holds it now (1 element(s) differ, first [0]: 0 as built, 1 now)")
    # a package whose outputs follow the module's state carries its writes: nothing said of them
    monkeypatch.setattr(eagerwalk, "_state", {"kept": False})
    eager = eagerwalk.before_call(ep, (x,), {}, 1, 1 << 20)
    eagerwalk.after_call(eager, torch.full((2,), 3.0), 1, str(tmp_path / "eager_walk.json"))
    assert read_eager_walk(str(tmp_path)).unwritten == ()


def _random_of(monkeypatch, forward):
    """random(train) -> the hook's `random` for a module (a Linear `fc`, a Dropout `drop`) run by `forward`."""
    import torch
    from aoti_bisect.child import contract
    from aoti_bisect.child.hook import eagerwalk

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)
            self.drop = torch.nn.Dropout(0.25)

        def forward(self, x):
            return forward(self, x)

    monkeypatch.setenv(contract.EAGER_WALK_ENV, "1")
    monkeypatch.chdir(os.path.dirname(__file__))  # no level-1 dumps here to clear
    x = torch.randn(2, 4)

    def random(train):
        model = Model().train(train)
        return eagerwalk.before_call(torch.export.export(model, (x,)), (x,), {}, 0, 1 << 20)["random"]
    return random


def test_the_hook_names_the_nodes_that_draw_random_numbers_and_not_a_dropout_that_draws_none(monkeypatch):
    import torch

    def forward(m, x):
        noise = torch.rand_like(x) * 0.0
        return m.drop(m.fc(x)) + noise + torch.nn.functional.dropout(x, 0.0, training=True)

    random = _random_of(monkeypatch, forward)

    def draws(train):
        return {k: v for k, v in random(train).items() if "from" not in v}

    noise = {"rand_like": {"target": "aten.rand_like.default", "module": None, "class": None}}
    assert draws(True) == {**noise, "dropout": {"target": "aten.dropout.default", "module": "drop", "class": "Dropout"}}
    # the control: export keeps an eval-mode dropout as aten.dropout with train=False, and one of p=0 draws nothing
    assert draws(False) == noise
    # what is computed from a draw follows it, named with the draw; the linear before the dropout does not
    computed = {k: v["from"] for k, v in random(True).items() if "from" in v}
    assert computed == {"mul": "rand_like", "add": "dropout", "add_1": "dropout"}, computed


def test_a_draw_inside_a_branch_of_torch_cond_names_the_cond_and_the_node_inside(monkeypatch):
    import torch

    def forward(m, x):
        h = m.fc(x)
        return torch.cond(h.sum() > 0, lambda h: m.drop(h) * 2, lambda h: h.clone(), (h,))

    random = _random_of(monkeypatch, forward)
    drawn = random(True)
    # the cond draws in its branch, and the node inside draws; what reads the cond's output is computed from the draw
    assert {k for k, v in drawn.items() if "from" not in v} == {"cond", "dropout"}, drawn
    assert drawn["cond"]["target"] == drawn["dropout"]["target"] == "aten.dropout.default"
    assert drawn["getitem"]["from"] == "cond"
    assert random(False) == {}  # the control: the same branches in eval mode draw nothing


def _with(walk, **changes):
    import dataclasses
    return dataclasses.replace(walk, **changes)


def test_a_draw_in_the_kernel_that_differs_convicts_nothing_and_one_after_it_hides_nothing():
    from aoti_bisect.aoti.eagerwalk import Random
    graph = real_graph()
    walk = read_eager_walk(DATA)
    bad = "cpp_fused__softmax_add_mul_sum_1"
    own = nodes_of(graph)(next(l for l in graph.launches if l.name == bad))
    drawn = walk_eager(graph, _with(walk, random={own[0]: Random("aten.bernoulli.p")}), nodes_of(graph))
    assert drawn.kind == "unknown" and drawn.kernel is None
    assert render(drawn.summary).startswith(f"the program draws random numbers on every call, first in {bad} (eager "
                                            f"`{own[0]}`: aten.bernoulli.p)")
    # the control: a draw no launch computes (or one after the kernel) leaves the miscompile convicted
    elsewhere = walk_eager(graph, _with(walk, random={"not_a_node": Random("aten.rand.default")}), nodes_of(graph))
    assert elsewhere.kind == "kernel" and elsewhere.kernel == bad


# The eager stage of scenario dropout_in_training (torch 2.13.0+cpu, 2026-11-29): the eager run's eager_walk.json
# (schema 6, with the nodes that draw) and its level-1 compile's wrapper and kernel_information.json, unchanged.
DROPOUT = f"{DATA}/dropout_training"


def test_a_module_left_in_training_mode_convicts_no_kernel_and_names_its_dropout():
    walk = read_eager_walk(DROPOUT)
    assert set(walk.random) == {"dropout"} and walk.random["dropout"].module == "drop"
    graph, of = captured(f"{DROPOUT}/dropout_training.wrapper.cpp")
    culprit = walk_eager(graph, walk, of)
    assert culprit.kind == "unknown"
    assert render(culprit.summary).startswith(
        "the program draws random numbers on every call, first in cpp_fused_native_dropout_relu_0 (eager `dropout`: "
        "aten.dropout.default, in `drop` (Dropout)): `drop` (Dropout) left in training mode; export after `.eval()`")
    gaps = render_all(culprit.evidence)[-1]
    assert "aoti_torch_cpu_addmm_out wrote buf2 ([16, 64] float32) = eager `linear`" in gaps  # before the draw
    # fc2's matmul reads the dropout's output: held against eager, it would differ, and it is not
    assert "wrote buf5 ([16, 8] float32) (not compared: it is computed from the random numbers " \
           "cpp_fused_native_dropout_relu_0" in gaps


# The eager stage of scenario dropout_in_cond (torch 2.13.0+cpu, 2026-11-29): its eager_walk.json (schema 7: the draws
# and the nodes computed from them) and its level-1 compile's wrapper and kernel_information.json, unchanged.
COND = f"{DATA}/dropout_in_cond"


def test_a_draw_in_a_branch_the_walk_cannot_see_holds_nothing_computed_from_it_against_eager():
    walk = read_eager_walk(COND)
    assert walk.random["linear_1"].origin == "cond" and walk.random["cond"].origin is None
    graph, of = captured(f"{COND}/dropout_in_cond.wrapper.cpp")
    culprit = walk_eager(graph, walk, of)
    assert culprit.kind == "unknown"
    assert render(culprit.summary).startswith(
        "the program draws random numbers on every call, first in aten.dropout.default in eager `cond`: a dropout left "
        "in training mode; export after `.eval()`")
    assert "wrote buf7 ([16, 8] float32) (not compared: it is computed from the random numbers aten.dropout.default " \
           "in eager `cond` drew" in render_all(culprit.evidence)[-1]
    # the same record without the nodes computed from the draw holds fc2's matmul against eager, which the float64
    # run (another mask) calls unstable; held as stable (a miscompile inside the branch would look the same), the
    # correct matmul that reads what the branch wrote is where the gap appears, not convicted: the walk does not
    # follow the branch's buffers
    import dataclasses
    bare = dataclasses.replace(walk, random={k: r for k, r in walk.random.items() if r.origin is None})
    assert not render(walk_eager(graph, bare, of).summary).startswith("the program draws")
    after = walk_eager(graph, dataclasses.replace(bare, unstable={}), of)
    assert after.kind == "unknown", after.kernel
    assert "but it runs after cpp_fused_dropout_gt_mul_relu_1, a launch inside a branch of torch.cond" in \
        render_all(after.evidence)[0]


# The eager stage of scenario exact_float32_check (torch 2.13.0+cpu, 2026-11-29): eager_walk.json and the level-1
# compile's wrapper and kernel_information.json, unchanged. The script holds the package to eager's exact bits; the
# fused kernel's column sum over 512 rows rounds apart from eager's by 2.9e-05.
EXACT = f"{DATA}/exact_float32_check"
EXACT_KERNEL = "cpp_fused__softmax_abs_add_all_amax_eq_mul_native_layer_norm_ne_sub_sum_0"


def _exact_walk(walk):
    graph, of = captured(f"{EXACT}/exact_float32_check.wrapper.cpp")
    return walk_eager(graph, walk, of)


def test_outputs_within_the_walks_tolerance_and_dynamos_rule_are_a_rounding_difference_convicting_nothing():
    walk = read_eager_walk(EXACT)
    assert walk.outputs and walk.factor == 10 and not walk.unstable
    culprit = _exact_walk(walk)
    assert (culprit.kind, culprit.kernel, culprit.precision) == ("precision", EXACT_KERNEL, None)
    said = render(culprit.summary)
    assert said.startswith("a rounding difference, not a miscompile: every output is within 10 times assert_close's "
                           "tolerance of eager")
    assert "against `sum_2` run in float64 the package is off by RMSE 7.99e-06 (max abs 2.4e-05), eager by RMSE " \
           "3.02e-06" in said and said.endswith("No kernel is convicted")
    assert [g.state for g in culprit.gaps] == ["agrees", "agrees"]


def test_a_sub_tolerance_gap_float64_does_not_excuse_or_an_unjudged_output_stays_unexplained():
    import dataclasses
    walk = read_eager_walk(EXACT)
    stem = ("after", f"{EXACT_KERNEL}_buf10")
    saved = walk.saved[stem]
    # the package 10 times as far from float64 as eager, past dynamo's rule's slack: no rounding verdict
    far = tuple(dataclasses.replace(p, f64_rmse=10 * walk.float64[p.node][1] + 1e-4) for p in saved.pairs)
    worse = dataclasses.replace(walk, saved={**walk.saved, stem: dataclasses.replace(saved, pairs=far)})
    assert _exact_walk(worse).kind == "unknown"
    # no float64 run of the output's node: nothing says the gap is rounding
    assert _exact_walk(dataclasses.replace(walk, float64={})).kind == "unknown"
    # the output's copy not saved: the output is not judged
    unsaved = {k: v for k, v in walk.saved.items() if k != stem}
    assert _exact_walk(dataclasses.replace(walk, saved=unsaved)).kind == "unknown"
