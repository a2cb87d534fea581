"""aoti-bisect minify: the pure search (fakes, no torch), the graph model and its program text (a tiny FX
graph, no compile), the candidate runner's batching (a fake run), and a real minification of a custom op's crash
(heavy). The real minification of a kernel's failure in CI is tests/test_e2e.py's, on the lane's index_oob run."""
import copy
import json
import os
import subprocess
import sys

import pytest

from aoti_bisect.minify import MinifyOptions, extract_child
from aoti_bisect.minify.ddmin import ddmin, sequential, shrink_sizes, simplify_each
from aoti_bisect.minify.graph import Candidate, Check, Graph, render
from aoti_bisect.minify.search import Expected, Trials, refuse

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# -- ddmin, with a fake test -------------------------------------------------------------------------------

def _counting(predicate):
    tried = []

    def test(candidate):
        tried.append(candidate)
        return predicate(set(candidate))
    return test, tried


def test_ddmin_finds_the_one_item_that_fails():
    test, tried = _counting(lambda s: 5 in s)
    assert ddmin(range(10), sequential(test)) == (5,)
    assert len(tried) < 20


def test_ddmin_keeps_two_items_that_fail_only_together():
    test, _ = _counting(lambda s: {1, 8} <= s)
    assert ddmin(range(10), sequential(test)) == (1, 8)


def test_ddmin_result_is_one_minimal():
    test, _ = _counting(lambda s: {2, 3} <= s or {7} <= s and {9} <= s)
    result = ddmin(range(10), sequential(test))
    assert test(result)
    assert not any(test(tuple(x for x in result if x != drop)) for drop in result)


def test_ddmin_stops_when_the_budget_is_spent():
    test, tried = _counting(lambda s: 5 in s)
    # The budget is looked at between rounds: one round (two halves) ran, its answer stands.
    assert ddmin(range(10), sequential(test), stop=lambda: len(tried) >= 2) == (5, 6, 7, 8, 9)
    assert len(tried) == 2


def test_ddmin_takes_the_first_failing_in_list_order():
    # Both halves fail; the batch answer is the first one, whatever finished first.
    assert ddmin((1, 2), lambda batch: 0 if len(batch) == 2 else None) == (1,)


def test_simplify_each_keeps_the_choices_that_still_fail():
    assert simplify_each(["a", "b", "c"], lambda chosen: "b" not in chosen) == ("a", "c")
    assert simplify_each(["a", "b"], lambda chosen: True, stop=lambda: True) == ()


def test_shrink_sizes_tries_one_then_halves_each_dimension():
    tried = []

    def first_failing(options):
        tried.extend(options)
        # fails while dim 0 of x stays at least 3 (so 16 -> 8 -> 4, not 2 or 1); y's one dim goes to 1 at once
        return next((i for i, o in enumerate(options) if o["x"][0] >= 3), None)
    assert shrink_sizes({"x": (16, 5), "y": (7,)}, first_failing) == {"x": (4, 1), "y": (1,)}
    assert shrink_sizes({"x": (1,)}, first_failing) == {"x": (1,)}


# -- the graph model and its program text --------------------------------------------------------------

def _tensor(shape, dtype="float32", finite=True):
    return {"kind": "tensor", "shape": shape, "dtype": dtype, "device": "cpu", "finite": finite}


# x -> sub(x, 0.5) -> log -> relu -> mm(., w) ; size = sym_size(x, 0) -> view(mm, [size, -1]); then a node
# after the eager failure (unknown).
GRAPH = {
    "placeholders": [{"name": "w", "user": False, "value": _tensor([4, 2])},
                     {"name": "x", "user": True, "value": _tensor([3, 4])}],
    "nodes": [
        {"name": "sub", "target": "aten::sub.Tensor", "args": [{"ref": "x"}, 0.5], "kwargs": {},
         "value": _tensor([3, 4])},
        {"name": "log", "target": "aten::log.default", "args": [{"ref": "sub"}], "kwargs": {},
         "value": _tensor([3, 4], finite=False)},
        {"name": "relu", "target": "aten::relu.default", "args": [{"ref": "log"}], "kwargs": {},
         "value": _tensor([3, 4], finite=False)},
        {"name": "mm", "target": "aten::mm.default", "args": [{"ref": "relu"}, {"ref": "w"}], "kwargs": {},
         "value": _tensor([3, 2], finite=False)},
        {"name": "size", "target": "aten::sym_size.int", "args": [{"ref": "x"}, 0], "kwargs": {},
         "value": {"kind": "literal", "py": "3"}},
        {"name": "view", "target": "aten::view.default", "args": [{"ref": "mm"}, [{"ref": "size"}, -1]],
         "kwargs": {}, "value": _tensor([3, 2], finite=False)},
        {"name": "tail", "target": "aten::sum.dim_IntList", "args": [{"ref": "view"}, [1]],
         "kwargs": {"dtype": {"py": "torch.float32"}}, "value": {"kind": "unknown"}},
        {"name": "after", "target": "aten::neg.default", "args": [{"ref": "tail"}], "kwargs": {},
         "value": {"kind": "unknown"}},
    ],
    "output": [{"ref": "after"}],
}


def test_graph_ancestors_feeds_and_sinks():
    g = Graph.from_json(GRAPH)
    assert g.ancestors(["mm"]) == ("sub", "log", "relu", "mm")
    assert g.feeds(["log", "relu"]) == ("sub",)
    assert g.feeds(["mm"]) == ("relu", "w")
    assert g.sinks(["sub", "log", "relu"]) == ("relu",)
    assert g.node("tail").op == "sum" and g.node("size").op == "sym_size"


def test_a_candidate_cannot_read_a_value_the_eager_walk_never_had():
    g = Graph.from_json(GRAPH)
    assert g.problem(["after"]) == "reads tail, which has no saved value (unknown)"
    assert g.problem(["tail", "after"]) is None
    assert g.problem([]) == "no node kept"


def test_refuse_needs_an_op_of_the_culprit_and_finite_inputs_for_nan():
    g = Graph.from_json(GRAPH)
    nan = Expected("nan_inf", "run", frozenset({"log"}), Check.FINITE, "")
    assert refuse(g, Candidate(("relu",)), nan) == "keeps no op of the culprit kernel"
    assert refuse(g, Candidate(("log", "relu")), nan) is None
    # relu fed log's NaN from outside is not the culprit making it
    anything = Expected("nan_inf", "run", frozenset(), Check.FINITE, "")
    assert refuse(g, Candidate(("relu",)), anything) == "input log is already non-finite"
    assert refuse(g, Candidate(("relu",), zeros=("log",)), anything) is None


def test_render_writes_literals_inline_and_zeros_in_place_of_inputs():
    g = Graph.from_json(GRAPH)
    source = render(g, Candidate(("mm", "view"), zeros=("w",)), Check.FINITE, "nan_inf in run")
    compile(source.text, "repro.py", "exec")
    assert source.inputs == ("relu",) and source.nodes == 2
    assert "view = torch.ops.aten.view.default(mm, [3, -1])" in source.text  # sym_size became its value
    assert "torch.zeros([4, 2], dtype=torch.float32, device='cpu')" in source.text
    assert "torch.isfinite" in source.text and 'inputs["relu"]' in source.text
    assert "def forward(self, relu, w):" in source.text and "return (view,)" in source.text


def test_the_repros_docstring_says_how_often_the_run_failed():
    g = Graph.from_json(GRAPH)
    docstring = lambda rate: render(g, Candidate(("mm",)), Check.FINITE, "", rate).text.split('"""')[1]  # noqa: E731
    every = " ".join(docstring((10, 10)).split())
    assert "failed in every one of its 10 run(s)" in every and "comes and goes" not in every
    assert "comes and goes: the original repro failed in 3 of 10 runs" in " ".join(docstring((3, 10)).split())


def test_render_cuts_zeros_inputs_to_their_smaller_shape():
    g = Graph.from_json(GRAPH)
    text = render(g, Candidate(("mm",), zeros=("w",), sizes=(("w", (4, 1)),)), Check.RUN, "").text
    assert "torch.zeros([4, 1], dtype=torch.float32, device='cpu')" in text and "cut to [4, 1]" in text


def test_saved_inputs_go_back_to_the_device_the_program_ran_on():
    doc = json.loads(json.dumps(GRAPH))
    doc["placeholders"][1]["value"]["device"] = "cuda:0"
    text = render(Graph.from_json(doc), Candidate(("sub",)), Check.RUN, "").text
    assert 'inputs["x"].to(\'cuda:0\'),' in text and "torch.cuda.synchronize()" in text


def test_a_nan_check_is_not_met_by_an_inf():
    g = Graph.from_json(GRAPH)
    text = render(g, Candidate(("log",)), Check.NAN, "").text
    assert "torch.isnan(o).any()" in text and "isfinite" not in text


def test_render_of_a_crash_only_runs_and_of_wrong_values_compares_with_eager():
    g = Graph.from_json(GRAPH)
    crash = render(g, Candidate(("tail",)), Check.RUN, "").text
    assert "torch.ops.aten.sum.dim_IntList(view, [1], dtype=torch.float32)" in crash
    assert "isfinite" not in crash and "allclose" not in crash
    assert "torch.allclose" in render(g, Candidate(("tail",)), Check.EAGER, "").text


# -- a real (tiny) exported program: extract, render, run the module eagerly (no AOTI compile) -------------

@pytest.fixture(scope="module")
def extracted(tmp_path_factory):
    import torch

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(4, 3))

        def forward(self, x, idx):
            h = torch.log(x - 0.5) * 2.0
            return (torch.relu(h) @ self.w)[idx].sum(dim=0)

    folder = tmp_path_factory.mktemp("extract")
    x, idx = torch.rand(5, 4), torch.tensor([0, 2, 4])
    torch.export.save(torch.export.export(M(), (x, idx)), str(folder / "program.pt2"))
    torch.save({"call": 0, "args": [x, idx], "kwargs": {}}, str(folder / "inputs.pt"))
    extract_child.main(str(folder / "program.pt2"), str(folder / "inputs.pt"), str(folder))
    with open(folder / "graph.json") as f:
        graph = Graph.from_json(json.load(f))
    return graph, torch.load(str(folder / "values.pt")), M, folder


def _module_of(source):
    scope = {"__name__": "not_main", "__file__": "repro.py"}
    exec(compile(source.text, "repro.py", "exec"), scope)
    return scope["Repro"]()


def test_the_whole_graph_renders_to_a_module_that_computes_what_the_program_did(extracted):
    import torch

    graph, values, _, _ = extracted
    whole = Candidate(graph.order(n.name for n in graph.nodes))
    source = render(graph, whole, Check.FINITE, "")
    out = _module_of(source)(*(values[n] for n in source.inputs))
    last = graph.sinks(whole.kept)[0]
    torch.testing.assert_close(out[0], values[last], equal_nan=True, rtol=0, atol=0)
    assert graph.eager_failure is None and not any(n.custom for n in graph.nodes)
    assert next(n for n in graph.nodes if n.op == "log").value["nan"]  # what picks Check.NAN over FINITE


def test_a_cut_graph_reads_the_removed_nodes_values(extracted):
    import torch

    graph, values, _, _ = extracted
    log = next(n.name for n in graph.nodes if n.op == "log")
    source = render(graph, Candidate((log,)), Check.FINITE, "")
    assert len(source.inputs) == 1 and source.inputs[0] not in graph.inputs  # the sub node's value
    out = _module_of(source)(values[source.inputs[0]])
    torch.testing.assert_close(out[0], values[log], equal_nan=True, rtol=0, atol=0)


def test_a_custom_op_only_the_repro_registers_is_said_plainly(tmp_path):
    import torch

    @torch.library.custom_op("minifytest::twice", mutates_args=())
    def twice(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    twice.register_fake(lambda x: torch.empty_like(x))

    class M(torch.nn.Module):
        def forward(self, x):
            return torch.sin(torch.ops.minifytest.twice(x))

    x = torch.randn(3)
    torch.export.save(torch.export.export(M(), (x,)), str(tmp_path / "program.pt2"))
    torch.save({"call": 0, "args": [x], "kwargs": {}}, str(tmp_path / "inputs.pt"))
    proc = subprocess.run([sys.executable, extract_child.__file__, str(tmp_path / "program.pt2"),
                           str(tmp_path / "inputs.pt"), str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 3
    assert proc.stderr.splitlines()[-1].startswith(
        "aoti-bisect minify: the program calls the custom op torch.ops.minifytest.twice.default, which the repro "
        "defines in Python")


CUSTOM = {
    "placeholders": [{"name": "x", "value": {"kind": "tensor", "shape": [8, 4], "dtype": "float32",
                                             "device": "cpu", "finite": True}},
                     {"name": "shift", "value": {"kind": "tensor", "shape": [1], "dtype": "int64", "device": "cpu",
                                                 "finite": True}}],
    "nodes": [
        {"name": "relu", "target": "aten::relu.default", "args": [{"ref": "x"}], "kwargs": {},
         "value": {"kind": "tensor", "shape": [8, 4], "dtype": "float32", "device": "cpu", "finite": True}},
        {"name": "gather", "target": "mylib::gather.default", "args": [{"ref": "relu"}, {"ref": "shift"}],
         "kwargs": {}, "value": {"kind": "unknown"}, "fake": {"like": 0}},
        {"name": "rows", "target": "mylib::rows.default", "args": [{"ref": "gather"}], "kwargs": {},
         "value": {"kind": "unknown"}, "fake": {"shape": [8], "dtype": "float32"}},
        {"name": "meta", "target": "mylib::has_meta.default", "args": [{"ref": "rows"}], "kwargs": {},
         "value": {"kind": "unknown"}},
    ],
    "output": [{"ref": "meta"}],
    "libraries": ["libmylib.so"],
}


def test_a_candidate_with_a_custom_op_loads_its_library_and_fakes_what_only_python_faked():
    g = Graph.from_json(CUSTOM)
    source = render(g, Candidate(("gather", "rows", "meta")), Check.RUN, "segfault in run")
    compile(source.text, "repro.py", "exec")
    assert source.libraries == ("libmylib.so",) and "reads inputs.pt and libmylib.so beside" in source.text
    load = source.text.index('torch.ops.load_library(os.path.join(HERE, "libmylib.so"))')
    assert load < source.text.index('@torch.library.register_fake("mylib::gather")') < source.text.index("class Repro")
    assert "return torch.empty_like(args[0])" in source.text
    assert "torch.empty([8], dtype=torch.float32, device=next(" in source.text
    assert "mylib::has_meta" not in source.text.split("class Repro")[0]  # its library has a fake of its own
    # Without a custom op kept, the program needs nothing but torch.
    plain = render(g, Candidate(("relu",)), Check.RUN, "")
    assert plain.libraries == () and "load_library" not in plain.text and "needs only torch;" in plain.text


def test_a_custom_op_culprit_is_its_own_family():
    from types import SimpleNamespace

    from aoti_bisect.minify import _expected

    # The origin lists the fused nodes around the op too (relu); only the op can make its own crash.
    report = SimpleNamespace(signature=SimpleNamespace(kind="segfault", phase="run"), culprit=SimpleNamespace(
        kind="outside_instrumented_kernels", kernel="mylib::gather", origin=SimpleNamespace(nodes=("relu", "gather"))),
        reproduction=SimpleNamespace(failures=3, runs=4))
    expected = _expected(report, Graph.from_json(CUSTOM))
    assert expected.family == {"gather"} and expected.rate == (3, 4)  # the repro's docstring says 3 of 4


def test_a_capture_from_a_run_that_failed_comes_first(tmp_path):
    from aoti_bisect.files.runfolder import RunFolder
    from aoti_bisect.minify import _find_capture

    for run, kind in (("baseline-000", None), ("fakecheck-004", "segfault"), ("fakecheck-005", None)):
        capture = tmp_path / "runs" / run / "capture"
        capture.mkdir(parents=True)
        (capture / "program.pt2").write_text("")
        (capture / "inputs.pt").write_text("")
        (tmp_path / "runs" / run / "result.json").write_text(json.dumps(
            {"signature": {"kind": kind, "phase": "run"} if kind else None}))
    run = RunFolder(str(tmp_path))
    assert _find_capture(run, "segfault") == (str(tmp_path / "runs" / "fakecheck-004" / "capture"), None)
    assert _find_capture(run, "nan_inf") == (str(tmp_path / "runs" / "baseline-000" / "capture"), None)


# -- the runner's batches, with a fake run ----------------------------------------------------------------

class FakeTrials(Trials):
    def __init__(self, graph, expected, fails, jobs):
        super().__init__("/nonexistent", graph, expected, sys.executable, MinifyOptions(jobs=jobs), lambda s: None,
                         jobs=jobs)
        self.fails, self.ran = fails, []

    def _try(self, candidate):
        self.ran.append(candidate.kept)
        self.trials.append(None)
        self.cache[candidate] = self.fails(candidate.kept)
        return self.cache[candidate]


@pytest.mark.parametrize("jobs", [1, 2, 3])
def test_the_runner_answers_the_same_whatever_the_jobs(jobs):
    g = Graph.from_json(GRAPH)
    expected = Expected("nan_inf", "run", frozenset({"log"}), Check.FINITE, "")
    trials = FakeTrials(g, expected, lambda kept: "log" in kept and "sub" in kept, jobs)
    kept = ddmin(g.ancestors(["mm"]), lambda b: trials.first_failing([Candidate(k) for k in b]), trials.spent)
    assert kept == ("sub", "log")
    assert all("log" in k for k in trials.ran)  # the others were refused without a run


def test_the_runner_stops_at_max_candidates():
    g = Graph.from_json(GRAPH)
    expected = Expected("nan_inf", "run", frozenset(), Check.FINITE, "")
    trials = FakeTrials(g, expected, lambda kept: False, 1)
    trials.options = MinifyOptions(max_candidates=2)
    assert trials.first_failing([Candidate((n,)) for n in ("sub", "log", "mm", "view")]) is None
    assert len(trials.ran) == 2


def test_a_window_of_jobs_stops_at_max_candidates_too():
    g = Graph.from_json(GRAPH)
    trials = FakeTrials(g, Expected("segfault", "run", frozenset(), Check.RUN, ""), lambda kept: False, 2)
    trials.options = MinifyOptions(jobs=2, max_candidates=3)
    trials.first_failing([Candidate((n,)) for n in ("sub", "log", "mm", "view")])
    assert len(trials.ran) == 3


def test_reduce_cuts_nodes_then_zeros_then_shapes():
    from aoti_bisect.minify import _reduce

    g = Graph.from_json(GRAPH)
    # "fails" while log is kept and fed by the real sub (not zeros) with at least 2 rows
    def fails(c):
        return ("log" in c.kept and "sub" not in c.zeros and g.problem(c.kept) is None
                and c.shape(g, "sub")[0] >= 2 if "sub" in g.feeds(c.kept) else False)
    trials = FakeTrials(g, Expected("nan_inf", "run", frozenset({"log"}), Check.NAN, ""), None, 1)
    trials.first_failing = lambda batch: next((i for i, c in enumerate(batch) if fails(c)), None)
    # 3 rows: size 1 loses it and 3 // 2 is 1 too, so 3 stays; the columns go to 1
    assert _reduce(g, trials, g.ancestors(["mm"])) == Candidate(("log",), (), (("sub", (3, 1)),))


def test_minify_of_a_folder_without_a_report_is_a_usage_error(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "aoti_bisect", "minify", str(tmp_path)], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": REPO})
    assert proc.returncode == 2 and "no report.json" in proc.stderr


def _run_with_minify(tmp_path, body):
    """`aoti-bisect SCRIPT --minify` on a one-line script: (the finished process, its run directory)."""
    script, run_dir = tmp_path / "repro.py", tmp_path / "run"
    script.write_text(body)
    proc = subprocess.run([sys.executable, "-m", "aoti_bisect", str(script), "--stages", "baseline", "--runs", "1",
                           "--minify", "--out", str(run_dir)], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": REPO})
    return proc, run_dir


def test_run_with_minify_reduces_after_the_verdict_and_keeps_its_exit_code(tmp_path):
    # A failure with no compiled program: the --minify stage runs, says why it cannot reduce, and the run still
    # answers git with the verdict's 1; report.md carries the reducer's answer.
    proc, run_dir = _run_with_minify(tmp_path, "raise RuntimeError('the output differs from the reference')\n")
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "aoti-bisect: minify: " in proc.stderr
    record = json.load(open(run_dir / "minify" / "minify.json"))
    assert record["status"] == "no_program"
    assert "## Minified repro" in (run_dir / "report.md").read_text()


def test_run_with_minify_leaves_a_run_that_did_not_reproduce_alone(tmp_path):
    proc, run_dir = _run_with_minify(tmp_path, "print('ok')\n")
    assert proc.returncode == 0 and not (run_dir / "minify").exists()


def test_the_library_that_registers_a_namespace_is_the_mapped_file_that_names_it_and_its_ops(tmp_path):
    import mmap
    from types import SimpleNamespace

    import torch

    from aoti_bisect.child.hook import oplibs

    lib = torch.library.Library("oplibstest", "DEF")  # noqa: F841 (the namespace lives while it does)
    lib.define("gather(Tensor x) -> Tensor")
    program = SimpleNamespace(graph=SimpleNamespace(nodes=[
        SimpleNamespace(op="call_function", target=torch.ops.oplibstest.gather.default),
        SimpleNamespace(op="call_function", target=torch.ops.aten.relu.default)]))
    assert oplibs.custom_ops(program) == {"oplibstest": {"gather"}}
    assert oplibs.libraries(program) == {}  # defined in Python: no file registers it
    right, wrong = tmp_path / "libright.so", tmp_path / "libwrong.so"
    right.write_bytes(b"\0oplibstest\0gather(Tensor x) -> Tensor\0" * 64)
    wrong.write_bytes(b"\0oplibstest\0scatter\0" * 64)  # the namespace, but not the op
    with open(right, "rb") as a, open(wrong, "rb") as b, \
            mmap.mmap(a.fileno(), 0, access=mmap.ACCESS_READ), mmap.mmap(b.fileno(), 0, access=mmap.ACCESS_READ):
        assert oplibs.libraries(program) == {"oplibstest": str(right)}


# -- end to end: a custom op's crash kept in the reduced graph (heavy: a C++ extension build, then AOTI) ------

@pytest.mark.slow
@pytest.mark.heavy
def test_a_custom_op_that_crashes_stays_in_a_reduced_repro_that_loads_its_library(tmp_path):
    run_dir = str(tmp_path / "run")
    env = {**os.environ, "PYTHONPATH": REPO, "FLAKY_CRASH_PERCENT": "100",
           "TORCH_EXTENSIONS_DIR": str(tmp_path / "ext")}
    subprocess.run([sys.executable, "-m", "aoti_bisect", os.path.join(REPO, "scenarios/cpu/flaky_custom_op_crash.py"),
                    "--out", run_dir, "--runs", "1", "--jobs", "2", "--stages", "baseline,trace", "-q"],
                   env=env, timeout=900, check=False, capture_output=True)
    proc = subprocess.run([sys.executable, "-m", "aoti_bisect", "minify", run_dir, "--jobs", "2", "--script",
                           os.path.join(REPO, "scenarios/cpu/flaky_custom_op_crash.py")],
                          env=env, timeout=1800, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "walking again without running custom ops" in proc.stderr
    record = json.load(open(os.path.join(run_dir, "minify", "minify.json")))
    assert record["verified"] and record["signature"] == {"kind": "segfault", "phase": "run"}
    assert record["nodes_after"] == 1 and record["ops_after"] == ["shifted_gather"]
    assert record["libraries"] == ["bisectlab_flaky_gather.so"] and "keeps the custom op" in record["message"]
    assert os.path.isfile(os.path.join(run_dir, "minify", "bisectlab_flaky_gather.so"))


# -- custom ops the repro defines in Python: their source, taken from the live process ------------------------

OPS_MODULE = '''
import ctypes
import torch
from torch import Tensor

SCALE = 2.0
KIND = torch.float32


def helper(x):
    return x * SCALE


@torch.library.custom_op("pyopstest::twice", mutates_args=())
def twice(x: Tensor) -> Tensor:
    return helper(x).to(KIND)


@twice.register_fake
def _(x):
    return torch.empty_like(x)


@torch.library.custom_op("pyopstest::lam", mutates_args=())
def lam(x: Tensor) -> Tensor:
    return x + ctypes.sizeof(ctypes.c_int)


lam.register_fake(lambda x: torch.empty_like(x))


def make(k):
    @torch.library.custom_op("pyopstest::closed", mutates_args=())
    def closed(x: Tensor) -> Tensor:
        return x + k
    closed.register_fake(lambda x: torch.empty_like(x))


make(3)
LIB = torch.library.Library("pyopstest", "FRAGMENT")
LIB.define("lib_op(Tensor x) -> Tensor")
LIB.impl("lib_op", lambda x: x + 1, "CompositeExplicitAutograd")


class M(torch.nn.Module):
    def forward(self, x):
        return torch.ops.pyopstest.lib_op(torch.ops.pyopstest.closed(torch.ops.pyopstest.lam(twice(x))))
'''


@pytest.fixture(scope="module")
def python_ops(tmp_path_factory):
    """pyops.record of a real exported program whose ops a module of its own defines in Python."""
    import importlib.util

    import torch

    from aoti_bisect.child.hook import pyops

    folder = tmp_path_factory.mktemp("pyops")
    (folder / "opsmod.py").write_text(OPS_MODULE)
    spec = importlib.util.spec_from_file_location("opsmod", folder / "opsmod.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.library.register_fake("pyopstest::lib_op", lib=module.LIB)(lambda x: torch.empty_like(x))
    return pyops.record(torch.export.export(module.M(), (torch.ones(3),)))


def test_a_python_custom_op_and_what_it_reads_become_source_a_fresh_process_runs(python_ops, tmp_path):
    from aoti_bisect.minify.graph import definitions

    assert set(python_ops["ops"]) == {"pyopstest::twice", "pyopstest::lam"}
    text = definitions(python_ops, ["pyopstest::twice", "pyopstest::lam"])
    assert "SCALE = 2.0" in text and "KIND = torch.float32" in text and "import ctypes" in text
    assert text.index("def helper(x):") < text.index("torch.library.custom_op('pyopstest::twice'")
    # the fake named `_` in the module gets a name of its own; the lambda fake is left to minify's recorded one
    assert "def _pyopstest_twice_fake(x):" in text and python_ops["no_fake"] == ["pyopstest::lam"]
    (tmp_path / "ops.py").write_text(text + "\nprint(torch.ops.pyopstest.twice(torch.ones(2)).tolist(), "
                                            "torch.ops.pyopstest.lam(torch.ones(2)).tolist())\n")
    proc = subprocess.run([sys.executable, str(tmp_path / "ops.py")], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split("\n")[-2] == "[2.0, 2.0] [5.0, 5.0]"


def test_an_op_whose_source_cannot_be_had_is_named_with_the_reason(python_ops):
    from aoti_bisect.minify import _unwritable

    problems = python_ops["problems"]
    assert problems["pyopstest::closed"] == ("`make.<locals>.closed` closes over local variables (k) of the "
                                             "function that made it")
    assert "torch.library.Library" in problems["pyopstest::lib_op"]
    line = _unwritable(python_ops)
    assert line.startswith("the program calls the custom op pyopstest::") and "\n" not in line
    assert _unwritable({"ops": {}, "pieces": {}, "problems": {}}) is None


PY_CUSTOM = {**CUSTOM, "libraries": [], "python_ops": {
    "ops": {"mylib::gather": ["name:torch", "op:mylib::gather"]},
    "pieces": {"name:torch": "import torch", "op:mylib::gather": "# the op's source\nGATHER_DEFINED = True"}}}


def test_a_candidate_defines_the_python_ops_it_keeps_instead_of_loading_a_library():
    g = Graph.from_json(PY_CUSTOM)
    text = render(g, Candidate(("gather",)), Check.RUN, "segfault in run").text
    compile(text, "repro.py", "exec")
    assert "GATHER_DEFINED = True" in text and text.index("GATHER_DEFINED") < text.index("class Repro")
    assert "load_library" not in text and "needs torch and what its custom ops' code imports" in text
    assert "GATHER_DEFINED" not in render(g, Candidate(("relu",)), Check.RUN, "").text


# -- rare failures: how many runs judge a candidate, and the runs themselves (real processes) ---------------

def test_the_runs_that_judge_a_candidate_follow_the_runs_own_rate():
    from aoti_bisect.minify import runs_per_candidate

    assert runs_per_candidate(3, 3, 12) == 1
    assert runs_per_candidate(1, 4, 12) == 11  # 1 - 0.75**11 >= 95%
    assert runs_per_candidate(1, 5, 12) == 12  # 14 would be needed: the cap
    assert runs_per_candidate(0, 0, 12) == 1


# A candidate that dies of SIGSEGV in its nth run (a counter beside it), or never: real processes, no torch.
FLAKY = """import os, signal, sys
here = os.path.dirname(os.path.abspath(__file__))
run = sum(name.startswith("ran.") for name in os.listdir(here)) + 1
open(os.path.join(here, "ran." + str(run)), "w").close()
print("reuse" if "--reuse" in sys.argv else "compile", flush=True)
if run == {fail_at}:
    os.kill(os.getpid(), signal.SIGSEGV)
"""


class ScriptTrials(Trials):
    """Trials whose candidates are FLAKY scripts: only what a candidate's folder holds is fake."""

    def __init__(self, out, runs, fail_at, jobs=1, script=FLAKY):
        g = Graph.from_json(GRAPH)
        super().__init__(str(out), g, Expected("segfault", "unknown", frozenset(), Check.RUN, ""), sys.executable,
                         MinifyOptions(), lambda s: None, runs=runs, jobs=jobs)
        self.fail_at, self.script = fail_at, script

    def _write(self, candidate, folder):
        with open(os.path.join(folder, "repro.py"), "w") as f:
            f.write(self.script.format(fail_at=self.fail_at))


def test_the_budget_leaves_the_final_check_its_time_and_starts_no_candidate_that_would_end_past_it(tmp_path):
    trials = ScriptTrials(tmp_path, runs=1, fail_at=0, jobs=2)
    trials.options = MinifyOptions(budget_s=100.0)
    trials.start -= 50  # half the budget gone (the capture's, say: the budget is the whole minify's)
    assert not trials.spent()  # no candidate ran: nothing to judge by
    trials._durations[0].extend([40.0, 44.0, 60.0])  # first runs, each compiling
    trials._durations[1].extend([9.0])
    # The check: its first run compiles (44 s, the median first run) while its 2 later runs load the final
    # candidate's package in the one other slot (2 x 9 s).
    assert trials._verify_estimate() == 44.0
    assert not trials.out_of_time() and trials.spent()  # a candidate's 44 s would leave the check 6 of its 44
    trials._durations[0][:] = [20.0]
    assert trials._verify_estimate() == 20.0 and not trials.spent()  # 50 + 20 + 20 < 100
    alone = ScriptTrials(tmp_path / "alone", runs=1, fail_at=0, jobs=1)  # no slot beside the compile
    alone._durations[0].append(20.0)
    alone._durations[1].append(5.0)
    assert alone._verify_estimate() == 30.0  # the compile, then the 2 later runs one after the other


# Passes; leaves when it started and ended, its TMPDIR (its slot's) and whether it reused the package.
TIMED = """import json, os, sys, time
start = time.time()
time.sleep(1.0)
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ran.%d" % os.getpid()), "w") as f:
    json.dump([start, time.time(), os.environ["TMPDIR"], "--reuse" in sys.argv], f)
"""


def test_a_candidates_later_runs_go_at_once_in_the_slots_no_other_candidate_holds(tmp_path):
    trials = ScriptTrials(tmp_path, runs=4, fail_at=0, jobs=3, script=TIMED)
    assert trials.first_failing([Candidate(("sub",))]) is None and trials.trials[0].runs == 4
    ran = sorted(json.load(open(p)) for p in (tmp_path / "candidates" / "000").glob("ran.*"))
    first, later = ran[0], ran[1:]
    assert not first[3] and all(r[3] for r in later)  # the first compiled; the others took its package
    assert all(r[0] >= first[1] for r in later)  # after the first, which built the package
    assert max(r[0] for r in later) < min(r[1] for r in later)  # at once
    assert len({r[2] for r in later}) == 3  # each in a slot of its own
    assert trials._slots.qsize() == 3  # every slot handed back


def test_a_rare_failure_keeps_a_candidate_from_the_run_it_fails_in(tmp_path):
    trials = ScriptTrials(tmp_path, runs=5, fail_at=3)
    assert trials.first_failing([Candidate(("sub",))]) == 0
    trial = trials.trials[0]
    assert trial.interesting and trial.runs == 3 and trial.kind == "segfault"
    logs = sorted(p.name for p in (tmp_path / "candidates" / "000").glob("output*.log"))
    assert logs == ["output.1.log", "output.2.log", "output.log"]
    assert (tmp_path / "candidates" / "000" / "output.1.log").read_text().startswith("reuse")
    assert json.load(open(tmp_path / "candidates" / "000" / "trial.json"))["runs"] == 3
    never = ScriptTrials(tmp_path / "never", runs=4, fail_at=0)
    never.options = MinifyOptions(max_candidates=1)  # the last candidate allowed still gets all its runs
    assert never.first_failing([Candidate(("sub",))]) is None and never.trials[0].runs == 4
    assert never.summary().candidate_runs == 4 and never.summary().runs_per_candidate == 4


def test_the_reduced_repro_is_run_from_a_copy_and_its_rate_stated(tmp_path):
    trials = ScriptTrials(tmp_path, runs=1, fail_at=2)
    out = tmp_path / "final"
    out.mkdir()
    (out / "repro.py").write_text(FLAKY.format(fail_at=2))  # the copy fails in the 2nd of its 3 runs
    rate, signature = trials.verify(str(out), Candidate(("sub",)))
    assert (rate.failures, rate.runs) == (1, 3) and signature.startswith("segfault/unknown")
    assert rate.describe() == "1/3 = 33% (95% CI 6%-79%)" and len(trials.verify_seconds) == 3


# Passes; a run without --reuse "compiles" (3 s) and writes repro.pt2, one with it reads the package beside it;
# each leaves its start, end, argv and what it ran in LOG (the copies are removed after the check).
BUILDS = """import json, os, sys, time
here = os.path.dirname(os.path.abspath(__file__))
start, package = time.time(), os.path.join(here, "repro.pt2")
if "--reuse" in sys.argv and os.path.isfile(package):
    ran = open(package).read()
else:
    time.sleep(3.0)
    ran = "compiled in " + os.path.basename(here)
    open(package, "w").write(ran)
with open(os.path.join("LOG", "ran.%d" % os.getpid()), "w") as f:
    json.dump([start, time.time(), "--reuse" in sys.argv, ran], f)
"""


def test_the_final_checks_later_runs_load_the_final_candidates_package_beside_the_first_ones_compile(tmp_path):
    log = tmp_path / "log"
    log.mkdir()
    script = BUILDS.replace("LOG", str(log))
    trials = ScriptTrials(tmp_path, runs=4, fail_at=0, jobs=4, script=script)
    best = Candidate(("sub",))
    built = tmp_path / "candidates" / "000"
    built.mkdir(parents=True)
    (built / "repro.pt2").write_text("the final candidate's package")
    trials.folders[best] = str(built)
    out = tmp_path / "final"
    out.mkdir()
    (out / "repro.py").write_text(script)
    rate, _ = trials.verify(str(out), best)
    ran = sorted(json.load(open(p)) for p in log.glob("ran.*"))
    compiles = [r for r in ran if not r[2]]
    loads = [r for r in ran if r[2]]
    assert (rate.runs, len(compiles), len(loads)) == (4, 1, 3)
    assert compiles[0][3] == "compiled in compiles"  # the copy compiled, in its own folder
    assert all(r[3] == "the final candidate's package" for r in loads)
    assert all(r[0] < compiles[0][1] for r in loads)  # beside the compile, not after it
    # Without a package of the final candidate the later runs wait for the copy's own.
    trials.folders.clear()
    for p in log.glob("ran.*"):
        p.unlink()
    trials.verify(str(out), best)
    ran = sorted(json.load(open(p)) for p in log.glob("ran.*"))
    assert [r[3] for r in ran] == ["compiled in compiles"] * 4 and ran[0][1] <= min(r[0] for r in ran[1:])


# -- wrong values: the output that differs must read the culprit's ops ----------------------------------------

MISMATCH_LOG = """Traceback (most recent call last):
  File "/tmp/x/repro.py", line 40, in <module>
    main()
  File "/tmp/x/repro.py", line 36, in main
    raise AssertionError(f"aoti-bisect repro: output {i} ({name}) differs from eager by "
AssertionError: aoti-bisect repro: output 1 (view) differs from eager by 6.853
"""


def test_wrong_values_count_only_on_an_output_that_reads_the_culprits_ops():
    from aoti_bisect.minify.search import differing_output, same_failure
    from aoti_bisect.run.classify import classify
    from aoti_bisect.run.types import ProcessExit

    g = Graph.from_json(GRAPH)
    assert differing_output(MISMATCH_LOG) == "view" and differing_output("Traceback ...\nValueError: x\n") is None
    _, signature = classify(MISMATCH_LOG, ProcessExit(1, None, False, 1.0, len(MISMATCH_LOG)))
    log_family = Expected(signature.kind, signature.phase, frozenset({"log"}), Check.EAGER, "")
    assert g.within(("log", "relu", "mm", "view"), "view") == ("log", "relu", "mm", "view")
    assert same_failure(g, ("log", "relu", "mm", "view"), log_family, signature, MISMATCH_LOG)
    # the same wrong output from a candidate that no longer computes it from log: another bug
    assert not same_failure(g, ("mm", "view"), log_family, signature, MISMATCH_LOG)
    # a Python exception that is not the comparison's
    other = "Traceback (most recent call last):\nValueError: export failed\n"
    assert not same_failure(g, ("log", "relu", "mm", "view"), log_family, signature, other)
    text = render(g, Candidate(("mm", "view")), Check.EAGER, "").text
    assert "OUTPUTS = ['view']" in text and "aoti-bisect repro: output {i} ({name}) differs" in text


# -- end to end on real AOTI compiles: a custom op defined in the repro's Python, cut down and run alone -------

PY_OP_SCENARIO = os.path.join(REPO, "scenarios", "cpu", "flaky_python_op_oob.py")


def _bisect_then_minify(tmp_path, env, runs, *minify_args, kept=None):
    """`kept`, a dict, gets what the run folder held before and after the minify: its caches' files and its bundle."""
    run_dir = tmp_path / "run"
    subprocess.run([sys.executable, "-m", "aoti_bisect", PY_OP_SCENARIO, "--out", str(run_dir), "--runs", str(runs),
                    "--stages", "baseline", "--jobs", "2", "-q"], env=env, timeout=900, capture_output=True,
                   cwd=tmp_path)
    if kept is not None:
        kept["before"] = _run_folder_state(run_dir, tmp_path / "before.tar.gz", env)
    proc = subprocess.run([sys.executable, "-m", "aoti_bisect", "minify", str(run_dir), "--script", PY_OP_SCENARIO,
                           *minify_args],
                          env=env, timeout=1800, capture_output=True, text=True, cwd=tmp_path)
    if kept is not None:
        kept["after"] = _run_folder_state(run_dir, tmp_path / "after.tar.gz", env)
    return proc, run_dir, json.load(open(run_dir / "minify" / "minify.json"))


def _run_folder_state(run_dir, bundle, env) -> tuple[dict, dict]:
    """The run's cache, every file with its size and mtime, and its bundle (`report --bundle`), every member's bytes."""
    import tarfile

    cache = {os.path.relpath(os.path.join(d, f), run_dir): (os.stat(os.path.join(d, f)).st_size,
                                                              os.stat(os.path.join(d, f)).st_mtime_ns)
             for d, _, files in os.walk(run_dir / "cache") for f in files}
    subprocess.run([sys.executable, "-m", "aoti_bisect", "report", str(run_dir), "--bundle", str(bundle)], env=env,
                   timeout=300, capture_output=True, check=True)
    with tarfile.open(bundle) as tar:
        members = {m.name.split("/", 1)[1]: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    return cache, members


def _python_op_minify(folder, environ):
    # One candidate: the culprit's nodes (relu, add, the op), 5 -> 3 nodes, each candidate a real compile; ddmin's
    # cuts, zeros and smaller inputs are what the other tests and the heavy one cover.
    env = {**environ, "PYTHONPATH": REPO, "PY_OP_CRASH_PERCENT": "100"}
    kept = {}
    return (*_bisect_then_minify(folder, env, 1, "--jobs", "1", "--max-candidates", "1", kept=kept), kept)


@pytest.mark.slow
@pytest.mark.early(job=_python_op_minify)
def test_a_python_custom_op_that_crashes_is_cut_to_a_repro_that_defines_it_and_crashes_alone(early, tmp_path):
    from aoti_bisect.files.write import user_name
    from aoti_bisect.run.layout import headers_folder

    proc, run_dir, record, kept = early(_python_op_minify)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # The result on stdout: the line, the folder to attach, the next command.
    assert proc.stdout.splitlines() == [f"minify: {record['message']}", f"folder: {run_dir}/minify/ (repro.py + "
                                        f"inputs.pt)", f"next: aoti-bisect report {run_dir} --bundle"]
    assert record["signature"] == {"kind": "segfault", "phase": "run"} and record["op_family"] == ["gather_rows"]
    assert record["nodes_after"] <= 3 and "gather_rows" in record["ops_after"]
    assert record["repro_failure_rate"]["failures"] == record["repro_failure_rate"]["runs"] == 3
    assert "s each at the median" in record["message"] and record["seconds_per_candidate"] > 0
    assert "defined in repro.py by the repro's own Python source" in record["message"]
    text = (run_dir / "minify" / "repro.py").read_text()
    assert "torch.library.custom_op('bisectlab_py::gather_rows'" in text and "CRASH_PERCENT = 100" in text
    # The file alone, in an empty folder, without the scenario's variable or aoti-bisect on the path: its own
    # definition of the op crashes it (the minify's compile cache only saves time).
    alone = tmp_path / "alone"
    alone.mkdir()
    for name in ("repro.py", "inputs.pt"):
        (alone / name).write_bytes((run_dir / "minify" / name).read_bytes())
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    (tmp / f"torchinductor_{user_name()}").symlink_to(headers_folder(str(run_dir / "cache")))
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PY_OP_CRASH_PERCENT")}
    ran = subprocess.run([sys.executable, "repro.py"], cwd=alone, capture_output=True, text=True, timeout=600,
                         env={**clean, "PYTHONFAULTHANDLER": "1", "TMPDIR": str(tmp),
                              "TORCHINDUCTOR_CACHE_DIR": str(run_dir / "minify" / "cache" / "shared" / "inductor")})
    assert ran.returncode == -11, ran.stderr[-3000:]
    assert "Segmentation fault" in ran.stderr and "_bisectlab_py_gather_rows_impl" in ran.stderr


@pytest.mark.slow
@pytest.mark.early(job=_python_op_minify)
def test_minify_leaves_the_runs_caches_as_they_were_and_its_bundle_gains_only_the_minified_repro(early):
    _, _, _, kept = early(_python_op_minify)
    (cache_before, bundle_before), (cache_after, bundle_after) = kept["before"], kept["after"]
    # The capture compiled the repro under minify's own cache root: the run's caches hold what the report names.
    assert cache_before and cache_after == cache_before
    added = set(bundle_after) - set(bundle_before)
    assert {"minify/repro.py", "minify/inputs.pt", "minify/minify.json"} <= added
    assert all(name.startswith("minify/") for name in added)
    # Every file the bundle had, it has again, the same bytes; report.md gains its "Minified repro" section.
    assert {n: b for n, b in bundle_after.items() if n in bundle_before and n != "report.md"} == \
        {n: b for n, b in bundle_before.items() if n != "report.md"}
    assert "## Minified repro" in bundle_after["report.md"].decode()


@pytest.mark.slow
@pytest.mark.heavy
def test_a_flaky_python_op_is_minified_and_the_repros_own_rate_is_stated(tmp_path):
    from aoti_bisect.stats import runs_to_observe

    env = {**os.environ, "PYTHONPATH": REPO, "PY_OP_CRASH_PERCENT": "30"}
    proc, run_dir, record = _bisect_then_minify(tmp_path, env, 12, "--jobs", "2", "--max-candidates", "4")
    reproduction = json.load(open(run_dir / "report.json"))["reproduction"]
    k, n = reproduction["failures"], reproduction["runs"]
    assert 0 < k < n, reproduction  # flaky at baseline: 12 runs at 30% all pass in 1.4% of tries
    assert record["runs_per_candidate"] == runs_to_observe(k / n, cap=12) > 1
    rate = record["repro_failure_rate"]
    assert rate["runs"] == record["runs_per_candidate"] and 0 <= rate["failures"] <= rate["runs"]
    assert proc.returncode == (0 if rate["failures"] else 1), proc.stderr[-3000:]
    assert record["nodes_after"] <= 3 and "gather_rows" in record["ops_after"]
    assert f"{rate['failures']}/{rate['runs']}" in record["message"] or "did NOT fail" in record["message"]


@pytest.mark.parametrize("failures, runs, cores, wave", [(10, 10, 16, 1), (3, 8, 16, 5), (3, 8, 2, 2), (1, 2, 4, 4),
                                                         (0, 0, 8, 1)])
def test_capture_runs_go_in_a_wave_as_wide_as_one_failure_takes(failures, runs, cores, wave):
    # flaky_ima_user_triton on an H200 failed 3 of 8 runs: its first two captures, one after the other, passed.
    from aoti_bisect.minify import capture_wave
    assert capture_wave(failures, runs, cores) == wave


def test_candidates_at_once_by_default_are_the_cores_and_at_most_four_a_gpu(monkeypatch):
    from aoti_bisect import minify

    torch = pytest.importorskip("torch")
    cpu = Graph.from_json(GRAPH)
    on_cuda = copy.deepcopy(GRAPH)
    on_cuda["placeholders"][1]["value"]["device"] = "cuda:0"
    cuda = Graph.from_json(on_cuda)
    monkeypatch.setattr(minify.os, "sched_getaffinity", lambda pid: set(range(16)))
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert minify.default_jobs(cpu) == (16, 0)
    assert minify.default_jobs(cuda) == (4, 1)  # a candidate's time is its host compile: 4 share one GPU
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 8)
    assert minify.default_jobs(cuda) == (16, 8)  # the cores bound it
    monkeypatch.setattr(minify.os, "sched_getaffinity", lambda pid: {0, 1})
    assert minify.default_jobs(cuda) == (2, 8)
