"""The walk against eager (issue #16 item 4): the parser and the decision over a real level-1 run's record."""
import json
import os

from aoti_bisect.report.facts import render, render_all
from aoti_bisect.aoti import wrapper
from aoti_bisect.aoti.eagerwalk import Pair, Saved, parse, read_eager_walk
from aoti_bisect.aoti.provenance import SourceMap, read_kernel_information
from aoti_bisect.diagnose.eagerwalk import judge, walk_eager

DATA = os.path.join(os.path.dirname(__file__), "data", "eagerwalk")
WRAPPER = f"{DATA}/wrong_value_pass.wrapper.cpp"


def real_graph():
    with open(WRAPPER) as f:
        return wrapper.parse_wrapper(f.read(), WRAPPER, [])


def nodes_of(graph):
    sources = SourceMap(read_kernel_information(WRAPPER), {})
    return lambda launch: sources.origin(launch.name, launch.handle, launch.source_nodes).nodes


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
    assert culprit.kind == "unknown" and "outside them" in render_all(culprit.evidence)[-1]


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
    assert judge(saved(("x", 0.0, True), ("mul", 2.0, False)), ("mul",)).state == "differs"
    assert judge(saved(("mul", 0.0, True)), ("mul",)).state == "agrees"
    # Provenance names no node of this shape: an intermediate that equals some eager value agrees ...
    assert judge(saved(("x", 0.0, True)), ("amax",)).state == "agrees"
    # ... and one that equals none is not convicted on a guess
    assert judge(saved(("x", 1.0, False)), ("amax",)).state == "unjudged"
    # with no provenance at all, a buffer unlike every eager value of its shape differs
    assert judge(saved(("x", 1.0, False)), ()).state == "differs"
    assert judge(saved(("x", 1.0, False), dropped=3), ()).state == "unjudged"
    assert judge(None, ("mul",)).state == "unjudged"



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
