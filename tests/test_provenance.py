"""Kernels -> the user's source lines, from Inductor's provenance (aoti/provenance.py, diagnose/source.py).

The data under tests/data/provenance/ is what torch 2.13 (CPU) wrote:
- nan_source_line/: scenarios/cpu/nan_source_line.py run once with the hook and the trace stage's flags
  (INDUCTOR_PROVENANCE=1, printer level 3): the wrapper, its kernel_information.json and hook.json.
- two_linear/: a model with a parameter matmul and an nn.Linear (two extern ops) compiled with
  INDUCTOR_PROVENANCE=1 (its wrapper's folder holds kernel_information.json, as Inductor's cache does);
  two_linear_plain/ is the same model compiled without it.
"""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from aoti_bisect.report.facts import render, render_all
from aoti_bisect.aoti import provenance, wrapper
from aoti_bisect.aoti.hook_record import parse
from aoti_bisect.diagnose.findings import Culprit, CulpritKind, Findings
from aoti_bisect.diagnose.facts import FactKind, Namer, Subject, SubjectKind, fact, kernel
from aoti_bisect.diagnose.source import locate_findings, source_map
from aoti_bisect.report.markdown import render_markdown
from aoti_bisect.report.model import Report, culprit_record
from aoti_bisect.stats import Rate
from aoti_bisect.verdict import Verdict

DATA = os.path.join(os.path.dirname(__file__), "data", "provenance")
SCENARIO = "nan_source_line.py"


def data(name: str) -> str:
    with open(os.path.join(DATA, name)) as f:
        return f.read()


def graph(name: str) -> wrapper.WrapperGraph:
    return wrapper.parse_wrapper(data(name), os.path.join(DATA, name))


def hook():
    return parse(data("nan_source_line/hook.json"))


def test_the_wrapper_marks_each_launch_with_its_provenance_handle():
    g = graph("nan_source_line/model.wrapper.cpp")
    assert [(l.name, l.handle) for l in g.launches] == [
        ("cpp_fused_sqrt_sub_0", "cpp_fused_sqrt_sub_0:1"), ("aoti_torch_cpu_addmm_out", "aoti_torch_cpu_addmm_out:2"),
        ("cpp_fused_mul_tanh_1", "cpp_fused_mul_tanh_1:3")]
    assert all(l.handle == "" for l in graph("two_linear_plain/model.wrapper.cpp").launches)


def test_kernel_information_gives_each_kernel_the_users_line_and_text():
    kernels = provenance.read_kernel_information(os.path.join(DATA, "nan_source_line", "model.wrapper.cpp"))
    assert provenance.read_kernel_information(os.path.join(DATA, "two_linear_plain", "model.wrapper.cpp")) == {}
    o = provenance.SourceMap(kernels, {}).origin("cpp_fused_sqrt_sub_0", "cpp_fused_sqrt_sub_0:1")
    assert o.how == "inductor" and o.nodes == ("sqrt", "sub", "proj_bias")
    assert [(l.where, l.code) for l in o.lines] == [
        (f"{SCENARIO}:14", "y = torch.sqrt(x - 0.5)  # BUG: NaN wherever x < 0.5")]
    assert o.describe() == f"line 14 of {SCENARIO}: `y = torch.sqrt(x - 0.5)  # BUG: NaN wherever x < 0.5`"


def test_a_line_inside_torch_is_skipped_for_the_users_own():
    # nn.Linear's forward is torch's frame; the user's is the `self.proj(y)` line that called it.
    kernels = provenance.parse_kernel_information(data("nan_source_line/kernel_information.json"))
    o = provenance.SourceMap(kernels, {}).origin("aoti_torch_cpu_addmm_out", "aoti_torch_cpu_addmm_out:2")
    assert [l.where for l in o.lines] == [f"{SCENARIO}:15"]
    assert o.lines[0].code == "return torch.tanh(self.proj(y)) * 2.0"


def test_a_fused_kernel_from_two_lines_names_both_in_source_order():
    kernels = provenance.parse_kernel_information(data("two_linear/kernel_information.json"))
    o = provenance.SourceMap(kernels, {}).origin("cpp_fused_add_log_mul_relu_sub_0",
                                                  "cpp_fused_add_log_mul_relu_sub_0:1")
    assert [l.line for l in o.lines] == [11, 12]


def test_a_kernel_inductor_traced_no_stack_for_falls_back_to_its_fx_nodes_and_says_so():
    kernels = provenance.parse_kernel_information(data("two_linear/kernel_information.json"))
    o = provenance.SourceMap(kernels, {}).origin("cpp_fused_1", "cpp_fused_1:3")
    assert (o.lines, o.nodes, o.how) == ((), ("lin_bias",), "nodes")
    assert o.describe() == "FX nodes lin_bias (no source line recorded)"


def test_the_hooks_program_nodes_turn_a_wrapper_comment_into_lines():
    """No kernel_information.json (a compile without provenance): the wrapper's Source Nodes comment names
    the exported program's nodes, whose stack traces the hook recorded."""
    (compiled, _) = hook().events
    program = {n.name: n for n in compiled.nodes}
    assert program["linear"].module == "proj (Linear)"
    o = provenance.SourceMap({}, program).origin("aoti_torch_cpu_addmm_out", comment="[linear], Original ATen: [x]")
    assert o.how == "program" and [l.where for l in o.lines] == [f"{SCENARIO}:15"]
    assert provenance.SourceMap({}, {}).origin("cpp_fused_sqrt_sub_0").how == "none"


def test_the_hook_records_the_programs_nodes_in_hook_json():
    raw = json.loads(data("nan_source_line/hook.json"))["events"][0]["provenance"]
    assert [n[0] for n in raw["nodes"]] == ["sub", "sqrt", "linear", "tanh", "mul"]
    assert provenance.parse_program({"traces": [], "nodes": [["a", "t", None, 7], "junk"]}) == (
        provenance.ProgramNode("a", "t", None, None),)
    assert provenance.parse_program("not a dict") == ()


def walked(culprit: Culprit) -> Findings:
    return Findings(Verdict.REPRODUCED, None, Rate(2, 2), [], culprit=culprit)


def nan_walk() -> Culprit:
    """The walk's evidence as diagnose/walk.py words it for this scenario."""
    K, B = FactKind.BAD_VALUE, buffer
    c = Culprit(CulpritKind.KERNEL, kernel="cpp_fused_sqrt_sub_0")
    c.evidence = [fact(K, "graph output {v} is bad after {k}: buf3: float32 size [4, 8] min nan", v=B("buf3"),
                       k=kernel("cpp_fused_mul_tanh_1")),
                  fact(K, "{k} reads bad {v} (min nan), written by {p}", k=kernel("cpp_fused_mul_tanh_1"), v=B("buf3"),
                       p=kernel("aoti_torch_cpu_addmm_out")),
                  fact(K, "{k} reads bad {v} (min nan), written by {p}", k=kernel("aoti_torch_cpu_addmm_out"),
                       v=B("buf0"), p=kernel("cpp_fused_sqrt_sub_0")),
                  fact(FactKind.CONVICTION, "{k} produced bad values from good inputs: {v}: float32 size [4, 8] min "
                       "0.01", k=kernel("cpp_fused_sqrt_sub_0"), v=Namer().input(0, "arg2_1")),
                  fact(K, "{k} wrote bad {v}: buf0: float32 min nan", k=kernel("cpp_fused_sqrt_sub_0"), v=B("buf0"))]
    c.summary = c.evidence[3]
    return c


def buffer(name: str) -> Subject:
    return Subject(SubjectKind.BUFFER, name)


def test_the_verdict_and_each_step_of_the_walk_name_the_line(tmp_path):
    out = walked(nan_walk())
    g = graph("nan_source_line/model.wrapper.cpp")
    locate_findings(out, g, source_map(g, [hook()]))
    c = out.culprit
    line14 = f"line 14 of {SCENARIO}: `y = torch.sqrt(x - 0.5)  # BUG: NaN wherever x < 0.5`"
    assert render_all(c.evidence)[0].endswith(f"[cpp_fused_mul_tanh_1: line 15 of {SCENARIO}: "
                                  "`return torch.tanh(self.proj(y)) * 2.0`]")
    assert render_all(c.evidence)[1].endswith(f"[aoti_torch_cpu_addmm_out: line 15 of {SCENARIO}: "
                                  "`return torch.tanh(self.proj(y)) * 2.0`]")
    assert render_all(c.evidence)[2].endswith(f"[cpp_fused_sqrt_sub_0: {line14}]")
    assert render_all(c.evidence)[3] == render_all(nan_walk().evidence)[3]  # each kernel is told once
    assert render(c.summary) == render(nan_walk().summary) + f" [cpp_fused_sqrt_sub_0: {line14}]"
    report = Report.from_findings("/tmp/r", ["python", SCENARIO], out)
    j = report.data["culprit"]
    assert c.origin.how == "inductor" and set(j["kernel_origins"]) == {
        "cpp_fused_mul_tanh_1", "aoti_torch_cpu_addmm_out", "cpp_fused_sqrt_sub_0"}
    assert j["origin"]["lines"] == [{"path": "/work/wt-source/scenarios/cpu/nan_source_line.py", "line": 14,
                                     "where": f"{SCENARIO}:14",
                                     "code": "y = torch.sqrt(x - 0.5)  # BUG: NaN wherever x < 0.5"}]
    assert f"(from {SCENARIO}:14)" in report.headline()
    md = render_markdown(report.data)
    Report(str(tmp_path), report.record).write()
    assert Report.load(str(tmp_path)).record == report.record  # each fact's tensors and origins read back
    assert f"- **Source**: line 14 of {SCENARIO}: `y = torch.sqrt(x - 0.5) # BUG: NaN wherever x < 0.5`" in md


def test_without_provenance_the_culprit_says_it_has_no_line():
    out = walked(nan_walk())
    g = graph("two_linear_plain/model.wrapper.cpp")
    out.culprit.kernel = "cpp_fused_add_log_mul_relu_sub_0"
    locate_findings(out, g, source_map(g, []))
    assert out.culprit.origin.how == "none"
    assert render_all(out.culprit.evidence)[-1].startswith("no source line for cpp_fused_add_log_mul_relu_sub_0: the compile "
                                               "the walk read recorded no provenance")
    assert "Source" not in render_markdown(Report.from_findings("/tmp/r", ["x"], out).data).split("## Stages")[0]


def test_two_programs_compiled_in_one_run_give_no_node_lines():
    one = hook()
    other = parse(data("nan_source_line/hook.json").replace('"sqrt"', '"sqrt_other"'))
    g = graph("nan_source_line/model.wrapper.cpp")
    assert source_map(g, [one, other]).program == {}
    assert set(source_map(g, [one, one]).program) == {"sub", "sqrt", "linear", "tanh", "mul"}


def test_stats_and_bounds_name_the_users_input_beside_the_wrappers():
    namer = Namer({"arg2_1": "x"}, {"proj_weight": "proj.weight", "w": "w"}, ("arg2_1",))
    said = [fact(FactKind.CONVICTION, "{k} produced bad values from good inputs: {v}: float32 size [4]",
                 k=kernel("k"), v=namer.var("arg2_1")),
            fact(FactKind.INDEX, "index into dim 0 of {v:quoted} reached 9", v=namer.var("arg2_1")),
            fact(FactKind.BAD_VALUE, "{k} reads {v:phrase} and it is bad", k=kernel("k"), v=namer.input(0, "arg2_1")),
            fact(FactKind.BAD_VALUE, "{k} reads {v:phrase} and it is bad", k=kernel("k"), v=namer.constant("w"))]
    assert render_all(said) == ["k produced bad values from good inputs: `x` (arg2_1): float32 size [4]",
                                "index into dim 0 of `x` (arg2_1) reached 9",
                                "k reads model input 0 (`x`, wrapper arg2_1) and it is bad",
                                "k reads constant `w` (wrapper w) and it is bad"]
    assert namer.var("buf0").user_name is None and namer.var("proj_weight").user_name == "proj.weight"


COMPILE = textwrap.dedent("""
    import os, sys, zipfile
    import torch

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(8, 8)

        def forward(self, x):
            return torch.tanh(self.proj(torch.sqrt(x - 0.5))) * 2.0

    torch.manual_seed(0)
    x = torch.rand(4, 8)
    path = torch._inductor.aoti_compile_and_package(torch.export.export(M(), (x,)),
                                                    package_path=os.path.abspath("m.pt2"))
    out = torch._inductor.aoti_load_package(path)(x)
    print("out", out.flatten().tolist())
    with zipfile.ZipFile(path) as z:
        for name in z.namelist():
            if name.endswith((".wrapper.cpp", ".kernel.cpp")):
                print("FILE", name.rsplit(".", 2)[-2], z.read(name).decode())
""")


def _compile(tmp_path, environ, tag: str, extra: dict) -> dict:
    cwd = tmp_path / tag
    cwd.mkdir()
    env = {k: v for k, v in environ.items() if k != "INDUCTOR_PROVENANCE"}
    env.update(TORCHINDUCTOR_CACHE_DIR=str(tmp_path / f"cache-{tag}"), **extra)
    done = subprocess.run([sys.executable, "-c", COMPILE], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    files = {}
    for chunk in done.stdout.split("FILE ")[1:]:
        kind, text = chunk.split(" ", 1)
        files[kind] = text
    out = done.stdout.split("FILE ")[0]
    return {"out": out, "files": files}


def _code(text: str) -> list[str]:
    """The generated code without what names the cache folder (comments of paths and compile commands) and
    without the provenance handles: what is left must be identical."""
    return [line for line in text.splitlines()
            if "[Provenance debug handles]" not in line and not line.startswith(("// g++", "// Triton kernels"))]


def _plain_and_traced(folder, environ):
    """The same model compiled without provenance and with it (two real compiles): an `early` job."""
    return _compile(folder, environ, "plain", {}), _compile(folder, environ, "prov", {"INDUCTOR_PROVENANCE": "1"})


@pytest.mark.slow
@pytest.mark.early(job=_plain_and_traced)
def test_provenance_leaves_the_generated_code_and_the_result_unchanged(early):
    plain, traced = early(_plain_and_traced)
    assert plain["out"] == traced["out"]
    assert set(plain["files"]) == set(traced["files"]) == {"wrapper", "kernel"}
    assert _code(plain["files"]["kernel"]) == _code(traced["files"]["kernel"])
    assert _code(plain["files"]["wrapper"]) == _code(traced["files"]["wrapper"])
    assert "[Provenance debug handles]" in traced["files"]["wrapper"]  # it was on


def test_a_scenarios_expected_line_is_checked():
    from aoti_bisect.scenarios import compare, load_manifest
    s = next(s for s in load_manifest() if s.name == "nan_source_line")
    assert s.line == "nan_source_line.py:14"
    report = {"verdict": "reproduced", "signature": {"kind": "nan_inf", "phase": "run"},
              "reproduction": {"ci95": [0.3, 1.0]},
              "culprit": {"kind": "kernel", "kernel": "cpp_fused_sqrt_sub_0", "summary": "", "evidence": []}}
    assert compare(s, report) == ["culprit source none lacks nan_source_line.py:14"]
    report["culprit"]["origin"] = {"lines": [{"where": "nan_source_line.py:15"}]}
    assert compare(s, report) == ["culprit source nan_source_line.py:15 lacks nan_source_line.py:14"]
    report["culprit"]["origin"] = {"lines": [{"where": "nan_source_line.py:14"}]}
    assert compare(s, report) == []


@pytest.mark.parametrize("scenario, names, said", [
    ("symbolic_index_bound", {"arg0_1": "table", "arg1_1": "ids"},
     ["the bound `ks0` of k is a size known only at run time: ks0 = s70, read from dim 0 of {i0:quoted} (5 at run time)",
      "index into dim 0 of {i0:quoted} (5 rows at run time) reached 9; the values come from {i1:quoted}"]),
    ("empty_batch", {"arg0_1": "candidates", "arg1_1": "keep"},
     ["model input 0: dim 0 of {i0:quoted} is 0 at run time, inside the range the export allows (0..64), but Inductor "
      "narrowed it to 2..64 while compiling the package (its input check requires >= 2): a specialisation by the "
      "compiler, not a size outside the exported range (a zero-size dimension at run time)"])])
def test_the_scenarios_evidence_is_checked_in_the_users_names(scenario, names, said):
    """What those scenarios' walks say (their `observed`), in the user's names, against the manifest's regexes."""
    from aoti_bisect.scenarios import compare, load_manifest
    s = next(s for s in load_manifest() if s.name == scenario)
    namer = Namer(names, {}, ("arg0_1", "arg1_1"))
    evidence = [fact(FactKind.INDEX, t, i0=namer.var("arg0_1"), i1=namer.var("arg1_1")) for t in said]
    out = walked(Culprit(CulpritKind.KERNEL, kernel="k", evidence=evidence))
    report = {"verdict": s.verdict, "signature": {"kind": s.kind, "phase": s.phase}, "reproduction": {"ci95": [1, 1]},
              "culprit": {**culprit_record(out).to_json(), "kind": s.culprit["kind"], "input_index": s.culprit.get("input"),
                          "kernel": "cpp_fused_index_sum_tanh_0"}}
    assert [p for p in compare(s, report) if "evidence" in p] == []
