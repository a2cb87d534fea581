"""Constants convicted: the hook reads a loaded package's constant values (child/hook/constants.py), the reader
parses them (aoti/constants.py), and a NaN/Inf constant takes the conviction from the kernel that reads it
(diagnose/constants.py), in report.json's `constants` and report.md.

The captured record and wrapper come from one real package (tests/data/README.md says how); one real AOTI
compile (marked slow) shows the hook reading a real package in a real child without changing its output.
"""
import json
import os
import subprocess
import sys
import textwrap
import types
import zipfile

import pytest

from aoti_bisect.report.facts import render, render_all
from aoti_bisect.aoti import wrapper
from aoti_bisect.aoti.hook_record import parse, read_hook
from aoti_bisect.child.hook import constants as hook_constants
from aoti_bisect.diagnose.constants import convict_constants, gather
from aoti_bisect.diagnose.findings import Culprit, Findings
from aoti_bisect.diagnose.walk import walk
from aoti_bisect.report.model import Report
from aoti_bisect.run.harness import Harness
from aoti_bisect.run.types import RunSpec, Signature
from aoti_bisect.stats import Rate
from aoti_bisect.verdict import Verdict

HERE = os.path.dirname(__file__)
DATA = os.path.join(HERE, "data", "hook")
SCENARIOS = os.path.join(os.path.dirname(HERE), "scenarios", "cpu")
RECORD = "load_nan_bias_inf_scale.json"
ADDMM = "aoti_torch_cpu_addmm_out"


def captured():
    with open(os.path.join(DATA, RECORD)) as f:
        return parse(f.read(), RECORD)


def captured_at(package):
    """The captured record, as if the package it loaded lay at `package`."""
    with open(os.path.join(DATA, RECORD)) as f:
        doc = json.load(f)
    doc["events"][0]["path"] = str(package)
    return parse(json.dumps(doc))


def graph():
    path = os.path.join(DATA, "nan_bias_inf_scale.wrapper.cpp")
    with open(path) as f:
        return wrapper.parse_wrapper(f.read(), path)


def findings(culprit=None, kind="nan_inf"):
    sig = Signature(kind, "run", "non-finite output", None, "f")
    return Findings(Verdict.REPRODUCED, sig, Rate(2, 2), [], culprit=culprit, next_steps=["old step"])


# -- the reader, on a real captured record -----------------------------------------------------------------

def test_reader_parses_the_constants_a_real_load_read():
    (event,) = captured().events
    read = event.constant_values
    assert read.skipped is None and read.so.endswith(".wrapper.so") and read.left_out == 0
    by = {v.placeholder: v for v in read.values}
    assert set(by) == {"proj_weight", "proj_bias", "scale"}
    bias = by["proj_bias"]
    assert (bias.fqn, bias.dtype, bias.shape, bias.numel, bias.nan, bias.bad) == \
        ("proj.bias", "float32", (16,), 16, 3, True)
    assert bias.holds() == "NaN (3 of 16 elements)"
    assert by["scale"].holds() == "+Inf (1 of 16 elements)" and by["scale"].max == 1.0  # of the finite part
    assert not by["proj_weight"].bad and by["proj_weight"].shape == (16, 8)
    assert -1 < by["proj_weight"].min < by["proj_weight"].mean < by["proj_weight"].max < 1


def test_a_damaged_constants_section_is_one_line_and_the_load_event_stands():
    with open(os.path.join(DATA, RECORD)) as f:
        doc = json.load(f)
    doc["events"][0]["constant_values"]["constants"][1]["nan"] = "three"
    record = parse(json.dumps(doc), RECORD)
    (event,) = record.events
    assert event.status == "returned" and event.path == "/tmp/constants-work/m.pt2"
    why = event.constant_values.skipped
    assert why.startswith("the hook's constant values are damaged: ValueError") and "\n" not in why
    values, not_read, _ = gather([record])
    assert values == [] and not_read == [why]
    out = findings(Culprit("unknown"))
    convict_constants(out, [record], None, ["python", "repro.py"])
    assert out.culprit.kind == "unknown" and out.constants["not_read"] == [why]


# -- the decision, with findings made by hand --------------------------------------------------------------

def test_the_walks_kernel_gives_way_to_the_bad_constant_it_reads():
    walk = ["cpp_fused_mul_relu_0 reads bad buf0, written by aoti_torch_cpu_addmm_out",
            f"{ADDMM} produced bad values from good inputs: arg3_1 ...",
            f"unverified: {ADDMM} also reads proj_bias, proj_weight, which level 2 does not print"]
    out = findings(Culprit("kernel", kernel=ADDMM, evidence=list(walk), probes=[["cpp_fused_mul_relu_0"]]))
    out.source = ("k.cpp", "void ...")
    convict_constants(out, [captured()], graph(), ["python", "repro.py"])
    c = out.culprit
    line = f"constant `proj.bias` (wrapper proj_bias) holds NaN (3 of 16 elements); read by {ADDMM}"
    assert (c.kind, c.kernel, c.input_name, c.user_name, render(c.summary)) == ("constant", None, "proj_bias", "proj.bias", line)
    # The walk's chain stays, the conviction follows it, and the other bad constant is said too.
    assert render_all(c.evidence) == [*walk, line, "also: constant `scale` (wrapper scale) holds +Inf (1 of 16 elements); "
                                       "read by cpp_fused_mul_relu_0"]
    assert c.probes == [["cpp_fused_mul_relu_0"]] and out.source is None
    assert "proj.bias" in out.next_steps[0] and "old step" not in out.next_steps
    assert [x["wrapper"] for x in out.constants["nonfinite"]] == ["proj_bias", "scale"]
    assert out.constants["read"] == 3 and out.constants["nonfinite"][0]["readers"] == [ADDMM]


def test_another_culprit_keeps_the_conviction_and_the_bad_constants_are_said_beside_it():
    out = findings(Culprit("kernel", kernel="cpp_fused_log_0", evidence=["cpp_fused_log_0 produced bad values"]))
    convict_constants(out, [captured()], graph(), ["python", "repro.py"])
    assert out.culprit.kind == "kernel" and out.culprit.kernel == "cpp_fused_log_0"
    assert render_all(out.culprit.evidence)[1:] == [
        f"also: constant `proj.bias` (wrapper proj_bias) holds NaN (3 of 16 elements); read by {ADDMM}",
        "also: constant `scale` (wrapper scale) holds +Inf (1 of 16 elements); read by cpp_fused_mul_relu_0"]
    assert out.next_steps == ["old step"]


def test_with_no_walk_a_nan_failure_convicts_the_bad_constant_read_first_from_the_packages_own_wrapper(tmp_path):
    # A prebuilt package: no run compiled a wrapper, so the readers come from the source inside the package.
    record = captured()
    so = record.events[0].constant_values.so
    package = tmp_path / "m.pt2"
    with zipfile.ZipFile(package, "w") as z:
        z.write(os.path.join(DATA, "nan_bias_inf_scale.wrapper.cpp"), so[: -len(".so")] + ".cpp")
    out = findings(Culprit("unknown", evidence=["no launch lines: ..."]))
    convict_constants(out, [captured_at(package)], None, ["python", "repro.py"])
    assert out.culprit.kind == "constant" and out.culprit.user_name == "proj.bias"
    assert render(out.culprit.summary).endswith(f"read by {ADDMM}")
    # Without the package's source the conviction stands, and says it could not name a reader.
    out = findings(None)
    convict_constants(out, [captured_at(tmp_path / "gone.pt2")], None, ["python", "repro.py"])
    assert out.culprit.kind == "constant" and "no launch in the wrapper reads it by name" in render(out.culprit.summary)


def test_a_walk_whose_printer_showed_nothing_says_so_instead_of_calling_the_outputs_finite():
    # A prebuilt package: the inspect compile's wrapper never ran, so level 2 printed no kernel at all.
    culprit = walk(graph(), lambda kernels: ({}, {}), None, False)
    assert culprit.kind == "unknown" and culprit.probes == [["cpp_fused_mul_relu_0", ADDMM]]
    assert render_all(culprit.evidence) == ["the level-2 run printed nothing for cpp_fused_mul_relu_0: the repro ran code other "
                                "than the wrapper compiled under these flags (a prebuilt or cached package), or "
                                "the failure did not reproduce under the printer"]
    out = findings(culprit)
    convict_constants(out, [captured()], graph(), ["python", "repro.py"])
    assert out.culprit.kind == "constant" and render_all(out.culprit.evidence)[0] == render_all(culprit.evidence)[0]


@pytest.mark.parametrize("culprit,kind", [(Culprit("unknown"), "segfault"),
                                          (Culprit("model_input", input_index=0, input_name="arg3_1"), "nan_inf")])
def test_a_bad_constant_does_not_explain_a_crash_nor_override_a_bad_input(culprit, kind):
    out = findings(culprit, kind)
    convict_constants(out, [captured()], graph(), ["python", "repro.py"])
    assert out.culprit.kind == culprit.kind and len(out.constants["nonfinite"]) == 2


def test_a_run_that_read_no_constants_changes_nothing():
    out = findings(Culprit("kernel", kernel=ADDMM))
    convict_constants(out, [parse('{"events": [{"call": "aoti_load_package", "status": "returned"}]}')], graph(),
                      ["python", "repro.py"])
    assert out.culprit.kind == "kernel" and out.constants == {}


def test_report_json_and_markdown_carry_the_constants(tmp_path):
    out = findings(Culprit("kernel", kernel=ADDMM))
    convict_constants(out, [captured()], graph(), ["python", "repro.py"])
    report = Report.from_findings(str(tmp_path), ["python", "repro.py"], out)
    report.write()
    loaded = Report.load(str(tmp_path))  # the schema check accepts it
    assert loaded.record == report.record  # written from the record, read back into the same one
    data = loaded.data
    assert data["culprit"]["kind"] == "constant" and data["constants"]["nonfinite"][0]["nan"] == 3
    md = (tmp_path / "report.md").read_text()
    assert "## Constants" in md and "The hook read 3 constant(s) of the loaded package; holding NaN/Inf: 2." in md
    assert "holds NaN (3 of 16 elements)" in md


# -- the hook's reader on bad packages (no torch needed: each stops before using it) ------------------------

def test_the_hook_reader_skips_what_it_cannot_read_with_a_reason(tmp_path, monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert hook_constants.read(str(tmp_path / "x"), None, "model", str(tmp_path))["skipped"] == \
        "torch is not imported in this process"
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace())
    garbage = tmp_path / "garbage.pt2"
    garbage.write_bytes(b"not a zip")
    assert "cannot be opened as a zip: BadZipFile" in hook_constants.read(str(garbage), None, "model", str(tmp_path))["skipped"]
    empty = tmp_path / "empty.pt2"
    with zipfile.ZipFile(empty, "w") as z:
        z.writestr("m/data/aotinductor/model/a.wrapper.cpp", "")
    assert hook_constants.read(str(empty), None, "model", str(tmp_path))["skipped"] == \
        "no wrapper .so for model 'model' in the package"
    cuda = tmp_path / "cuda.pt2"
    with zipfile.ZipFile(cuda, "w") as z:
        z.writestr("m/data/aotinductor/model/a.wrapper.so", b"\x7fELF")
        z.writestr("m/data/aotinductor/model/a.wrapper_metadata.json", '{"AOTI_DEVICE_KEY": "cuda"}')
    assert hook_constants.read(None, cuda.read_bytes(), "model", str(tmp_path))["skipped"].startswith(
        "a cuda package, and no CUDA device to read it on: AttributeError")
    assert sorted(os.listdir(tmp_path)) == ["cuda.pt2", "empty.pt2", "garbage.pt2"]  # no scratch left behind


def test_a_wrapper_so_that_torch_cannot_open_is_a_reason_and_leaves_no_copy(tmp_path):
    pytest.importorskip("torch")
    broken = tmp_path / "broken.pt2"
    with zipfile.ZipFile(broken, "w") as z:
        z.writestr("m/data/aotinductor/model/a.wrapper.so", b"\x7fELF, but cut short")
        z.writestr("m/data/aotinductor/model/a.wrapper_metadata.json", '{"AOTI_DEVICE_KEY": "cpu"}')
    read = hook_constants.read(str(broken), None, "model", str(tmp_path))
    assert read["skipped"].startswith("cannot open a runner on it: RuntimeError") and "\n" not in read["skipped"]
    assert os.listdir(tmp_path) == ["broken.pt2"]


# -- the hook in a real child on a real package ------------------------------------------------------------

LOAD_AND_PRINT = """
import sys, torch
torch.manual_seed(1)
runner = torch._inductor.aoti_load_package(sys.argv[1])
out = runner(torch.rand(4, 8))
print(out)
sys.exit(3 if not torch.isfinite(out).all() else 0)
"""


def _nan_constant_runs(folder, environ):
    """A real package with a NaN bias (one compile), loaded and run with the hook, without it, and by a baseline
    that carries the hook only to reuse compiles: an `early` job."""
    package = str(folder / "nan_constant.pt2")
    env = {**environ, "TORCHINDUCTOR_CACHE_DIR": str(folder / "build-cache")}
    subprocess.run([sys.executable, os.path.join(SCENARIOS, "build_nan_constant_package.py"), package],
                   env=env, check=True, capture_output=True, timeout=900, cwd=folder)
    script = str(folder / "load_and_print.py")
    with open(script, "w") as f:
        f.write(textwrap.dedent(LOAD_AND_PRINT))
    harness = Harness(str(folder / "run"), environ)
    on = harness.run(RunSpec((sys.executable, script, package), "trace", 0, (), 600.0, True))
    off = harness.run(RunSpec((sys.executable, script, package), "baseline", 1, (), 600.0))
    reusing = Harness(str(folder / "run-all"), environ, reuse="all")
    plain = reusing.run(RunSpec((sys.executable, script, package), "baseline", 0, (), 600.0))
    return on, off, plain


@pytest.mark.slow
@pytest.mark.early(job=_nan_constant_runs)
def test_the_hook_reads_a_real_packages_constants_without_changing_the_run(early):
    on, off, plain = early(_nan_constant_runs)
    with open(on.log_path, "rb") as a, open(off.log_path, "rb") as b:
        on_log, off_log = a.read(), b.read()
    assert on.exit.returncode == off.exit.returncode == 3
    assert on_log == off_log and b"nan" in on_log
    record = read_hook(on.run_dir)
    assert not record.problems
    (load,) = record.events
    by = {v.fqn: v for v in load.constant_values.values}
    assert set(by) == {"proj.weight", "proj.bias"} and load.constant_values.skipped is None
    assert (by["proj.bias"].nan, by["proj.bias"].numel, by["proj.weight"].bad) == (3, 16, False)
    assert not [n for n in os.listdir(on.run_dir) if n.startswith("constants-")]  # the private .so copy is gone
    # A baseline run that carries the hook only to reuse compiles never opens the second container.
    (load,) = read_hook(plain.run_dir).events
    assert plain.exit.returncode == 3 and load.constant_values is None


# -- finite constants outside an op's domain (a negative running_var under batch norm's rsqrt) ---------------

def test_the_hook_counts_negative_and_zero_elements_and_keeps_the_first_of_each():
    torch = pytest.importorskip("torch")
    row = hook_constants.stats(torch, torch.tensor([[1.0, 0.0], [-0.25, 2.0]]))
    assert (row["negative"], row["first_negative"], row["zero"], row["first_zero"]) == \
        (1, {"index": [1, 0], "value": -0.25}, 1, {"index": [0, 1], "value": 0.0})
    assert hook_constants.stats(torch, torch.ones(3))["negative"] == 0
    assert "negative" not in hook_constants.stats(torch, torch.ones(3, dtype=torch.bool))


def _running_var(**kw):
    from aoti_bisect.aoti.constants import ConstantValue
    return ConstantValue("bn.running_var", "bn_running_var", "float32", (64,), 64, min=-0.3, max=1.0,
                         **{"negative": 1, "first_negative": ((5,), -0.3), **kw})


BN = "cpp_fused__native_batch_norm_legit_no_training_relu_1"


def test_a_negative_running_var_breaks_batch_norms_domain_by_the_graph_or_by_the_kernels_name():
    from aoti_bisect.aoti.hook_record import ConstantName
    from aoti_bisect.diagnose.constants import violations
    fed = ConstantName("bn.running_var", "buffer", "bn_running_var", (("batch_norm", "running_var"),))
    (x,) = violations(_running_var(), fed, BN)
    assert (x.index, x.element, x.count, x.seen_in, x.rule.op) == ((5,), -0.3, 1, "the exported graph", "batch_norm")
    # The mean may be negative: the graph says it is not under the rsqrt.
    mean = ConstantName("bn.running_mean", "buffer", "bn_running_mean", (("batch_norm", "running_mean"),))
    assert violations(_running_var(), mean, BN) == []
    # A package the run did not build: the kernel's op words and the buffer's own name stand in for the graph.
    (x,) = violations(_running_var(), None, BN)
    assert x.seen_in == "the kernel's name"
    assert violations(_running_var(), None, "cpp_fused_add_relu_0") == []
    assert violations(_running_var(negative=0, first_negative=None), None, BN) == []
    # Without the graph a `div` or `log` in the name says nothing of which operand it takes: no conviction.
    zero = _running_var(negative=0, first_negative=None, zero=2, first_zero=((3,), 0.0))
    assert violations(zero, None, "cpp_fused_div_mul_0") == []
    fed = ConstantName("bn.running_var", "buffer", "bn_running_var", (("div", "other"),))
    (x,) = violations(zero, fed, "cpp_fused_div_mul_0")
    assert (x.rule.op, x.index, x.count) == ("div", (3,), 2)


def test_the_walks_kernel_gives_way_to_the_negative_buffer_it_reads(monkeypatch):
    from aoti_bisect.aoti.hook_record import ConstantName
    from aoti_bisect.aoti.constants import ConstantValues
    from aoti_bisect.aoti.hook_record import HookRecord, PackageEvent
    from aoti_bisect.diagnose import constants as dc
    monkeypatch.setattr(dc, "readers", lambda graph, name: [BN] if name == "bn_running_var" else [])
    fed = ConstantName("bn.running_var", "buffer", "bn_running_var", (("batch_norm", "running_var"),))
    events = (PackageEvent("aoti_compile_and_package", "returned", None, None, True, constants=(fed,)),
              PackageEvent("aoti_load_package", "returned", None, None, True,
                           constant_values=ConstantValues("m.wrapper.so", (_running_var(),))))
    walked = f"{BN} produced bad values from good inputs: buf2 ..."
    from aoti_bisect.diagnose.facts import note
    out = findings(Culprit("kernel", kernel=BN, evidence=[note(walked)]))
    convict_constants(out, [HookRecord(events)], None, ["python", "repro.py"])
    c = out.culprit
    line = (f"buffer `bn.running_var` (bn_running_var): element [5] = -0.3 (1 of 64 negative) feeds "
            f"rsqrt(running_var + eps) of batch_norm (per the exported graph), read by {BN}: outside the op's "
            "domain, so finite inputs give NaN/Inf there")
    assert (c.kind, c.input_name, c.user_name, render(c.summary)) == ("constant", "bn_running_var", "bn.running_var",
                                                                      line)
    assert render_all(c.evidence) == [walked, line]
    assert out.constants["outside_domain"][0]["index"] == [5] and out.constants["outside_domain"][0]["element"] == -0.3
    assert render(out.culprit.summary) in [r["finding"] for r in Report.from_findings(
        "/nonexistent", ["python", "repro.py"], out).data["constants"]["outside_domain"]]


# -- a constant changed on the module after the build: the package's copy is stale --------------------------

def test_the_hook_compares_the_packages_copy_with_the_modules_tensor_now():
    torch = pytest.importorskip("torch")
    packaged = torch.ones(4)
    assert hook_constants._stale(torch, packaged, torch.ones(4)) is None
    assert hook_constants._stale(torch, packaged, torch.tensor([1.0, 1.0, 1.5, 0.75])) == \
        {"differ": 2, "max_abs_diff": 0.5, "index": [2], "package": 1.0, "module": 1.5}
    assert hook_constants._stale(torch, packaged, torch.ones(5)) == {"shape": [5], "dtype": "float32"}


def test_with_nothing_pinned_a_wrong_output_convicts_the_stale_buffer():
    from aoti_bisect.aoti.constants import ConstantValue, ConstantValues, Stale
    from aoti_bisect.aoti.hook_record import HookRecord, PackageEvent
    from aoti_bisect.diagnose.facts import note
    scale = ConstantValue("scale", "scale", "float32", (64,), 64, min=1.0, max=1.0,
                          stale=Stale(63, 0.5, (0,), 1.0, 0.5))
    events = (PackageEvent("aoti_load_package", "returned", None, None, True,
                           constant_values=ConstantValues("m.wrapper.so", (scale,))),)
    out = findings(Culprit("unknown", evidence=[note("the eager run agrees with the package")]), "python_exception")
    convict_constants(out, [HookRecord(events)], None, ["python", "repro.py"])
    c = out.culprit
    assert (c.kind, c.input_name, c.user_name) == ("stale_constant", "scale", "scale")
    assert render(c.summary) == ("constant `scale` is stale in the package: changed on the module after the build, 63 of "
                                 "64 elements differ by up to 0.5 (first [0]: 1 packaged, 0.5 in the module now); no "
                                 "launch in the wrapper reads it by name")
    # A pinned culprit that does not read it keeps the conviction; the stale buffer is said beside it.
    out = findings(Culprit("kernel", kernel="cpp_fused_log_0", evidence=[note("k")]), "python_exception")
    convict_constants(out, [HookRecord(events)], None, ["python", "repro.py"])
    assert out.culprit.kind == "kernel" and render_all(out.culprit.evidence)[-1].startswith("also: constant `scale`")


def test_a_negative_running_var_inlined_into_the_kernel_is_judged_by_its_exported_value():
    # Eight channels: Inductor makes the buffers literals of the batch-norm kernel, the package holds no copy, so
    # the hook summarised the exported value at the compile.
    from aoti_bisect.aoti.hook_record import parse
    from aoti_bisect.diagnose.facts import note
    from aoti_bisect.aoti.wrapper import Launch, WrapperGraph
    event = {"call": "aoti_compile_and_package", "status": "returned", "program": {"inputs": [], "constants": [
        {"fqn": "bn.running_var", "kind": "buffer", "placeholder": None, "uses": [["batch_norm", "running_var"]],
         "values": {"dtype": "float32", "shape": [8], "numel": 8, "min": -0.3, "max": 1.0, "negative": 1,
                    "first_negative": {"index": [5], "value": -0.3}, "zero": 0}},
        {"fqn": "bn.running_mean", "kind": "buffer", "placeholder": None, "uses": [["batch_norm", "running_mean"]],
         "values": {"dtype": "float32", "shape": [8], "numel": 8, "min": -1.0, "max": 1.0, "negative": 4,
                    "first_negative": {"index": [0], "value": -1.0}, "zero": 0}}]}}
    record = parse(json.dumps({"events": [event]}))
    g = WrapperGraph("w.cpp", [Launch(0, "cpp_fused_0", 1, ("buf0",), (), ("buf0",)),
                               Launch(1, BN, 2, ("buf2",), ("buf2",), ("buf2",))], ["arg7_1"], [], ["buf2"])
    out = findings(Culprit("kernel", kernel=BN, evidence=[note(f"{BN} produced bad values from good inputs: buf2")]))
    convict_constants(out, [record], g, ["python", "repro.py"])
    c = out.culprit
    assert (c.kind, c.user_name) == ("constant", "bn.running_var")
    assert render(c.summary).startswith("buffer `bn.running_var` (inlined into its kernels by Inductor: the package "
                                        "holds no copy; the exported value): element [5] = -0.3 (1 of 8 negative)")
    assert render(c.summary).endswith(f"read by {BN}: outside the op's domain, so finite inputs give NaN/Inf there")
    assert out.constants["read"] == 0 and len(out.constants["outside_domain"]) == 1


def test_a_parameter_updated_in_place_after_the_export_is_stale_by_its_attribute_path():
    # The hook compares with the exported program's state_dict, which holds the user's own parameter objects: an
    # in-place update of head.weight after packaging shows there as it does for a buffer.
    torch = pytest.importorskip("torch")

    class Classifier(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.head = torch.nn.Linear(4, 3)

        def forward(self, x):
            return self.head(x)

    model = Classifier()
    ep = torch.export.export(model, (torch.randn(2, 4),))
    packaged = {fqn: t.detach().clone() for fqn, t in ep.state_dict.items()}  # what the package baked in
    with torch.no_grad():
        model.head.weight[2].add_(0.25)
    rows = hook_constants._rows(torch, {"head_weight": "head.weight", "head_bias": "head.bias"}, packaged,
                                {**ep.state_dict, **ep.constants})["constants"]
    stale = {r["fqn"]: r.get("stale") for r in rows}
    assert stale["head.bias"] is None
    assert stale["head.weight"]["differ"] == 4 and stale["head.weight"]["index"] == [2, 0]


def test_a_parameter_replaced_after_the_export_is_found_in_the_module_by_its_attribute_path():
    # load_state_dict(assign=True) gives the module new parameter objects: the exported program keeps the old ones,
    # so only the module the hook saw exported, looked up by FQN, shows the package's copy is stale.
    torch = pytest.importorskip("torch")
    from aoti_bisect.child.hook import recorder

    model = torch.nn.Sequential(torch.nn.Linear(4, 3))
    ep = torch.export.export(model, (torch.randn(2, 4),))
    recorder._remember_module(ep, model)
    packaged = {fqn: t.detach().clone() for fqn, t in ep.state_dict.items()}
    tuned = {k: v.clone() for k, v in model.state_dict().items()}
    tuned["0.weight"][2] += 0.25
    model.load_state_dict(tuned, assign=True)
    assert torch.equal(ep.state_dict["0.weight"], packaged["0.weight"])  # the program never sees it
    rows = hook_constants._rows(torch, {"w": "0.weight", "b": "0.bias"}, packaged, recorder.live_state(ep))
    stale = {r["fqn"]: r.get("stale") for r in rows["constants"]}
    assert stale["0.bias"] is None and stale["0.weight"]["differ"] == 4 and stale["0.weight"]["index"] == [2, 0]


def test_a_buffer_folded_into_the_code_is_compared_with_the_value_the_compile_kept():
    torch = pytest.importorskip("torch")
    from aoti_bisect.child.hook import recorder

    class Scorer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("temperature", torch.tensor(2.0))
            self.register_buffer("bias", torch.zeros(3))

        def forward(self, x):
            return x / self.temperature + self.bias

    model = Scorer()
    ep = torch.export.export(model, (torch.randn(2, 3),))
    # the wrapper lists `bias` (a placeholder) and not `temperature` (folded into the kernel as a literal)
    kept = recorder._folded_values(ep, [{"fqn": "temperature", "placeholder": None},
                                        {"fqn": "bias", "placeholder": "bias"}])
    assert set(kept) == {"temperature"}
    assert hook_constants.folded(torch, kept, recorder.live_state(ep)) == []
    model.temperature.fill_(0.5)  # calibrated after the build: the same object, so only the kept copy tells
    assert hook_constants.folded(torch, kept, recorder.live_state(ep)) == [
        {"fqn": "temperature", "stale": {"differ": 1, "max_abs_diff": 1.5, "index": [], "package": 2.0,
                                         "module": 0.5}}]


def test_a_stale_buffer_folded_into_the_softmax_kernel_is_convicted_as_folded():
    # The records of scenario folded_temperature's eager run (torch 2.13.0+cpu, 2026-11-28), unchanged but for the
    # run folder: the compile's program lists `temperature` with no placeholder (a literal of the softmax kernel;
    # `proj.bias` is folded too, into cpp_fused_0, and unchanged) and the load found it changed since the build.
    from aoti_bisect.diagnose.facts import note
    record = parse(open(os.path.join(DATA, "folded_temperature.hook.json")).read())
    with open(os.path.join(DATA, "folded_temperature.wrapper.cpp")) as f:
        g = wrapper.parse_wrapper(f.read(), "folded_temperature.wrapper.cpp")
    kernel = "cpp_fused__softmax_abs_all_amax_div_eq_ge_mul_ne_neg_scalar_tensor_sub_where_1"
    assert [l.name for l in g.launches] == ["cpp_fused_0", "aoti_torch_cpu_addmm_out", kernel]
    from aoti_bisect.diagnose.findings import Gap
    gaps = (Gap(2, kernel, "buf7", "differs", "softmax", 0.4152, 24.54),)
    out = findings(Culprit("kernel", kernel=kernel, evidence=[note(f"{kernel}'s output differs from eager")],
                           gaps=gaps), "python_exception")
    convict_constants(out, [record], g, ["python", "repro.py"])
    c = out.culprit
    assert (c.kind, c.user_name, c.input_name) == ("folded_constant", "temperature", None)  # no wrapper name
    headline = Report.from_findings("/nonexistent", ["python", "repro.py"], out).headline()
    assert headline.endswith("| culprit: folded_constant (`temperature`)")
    assert c.gaps == gaps  # the walk's numeric gap still shows where the values went wrong
    assert render(c.summary) == (
        "buffer `temperature` is folded into the generated code (the package lists no constant of that name) and "
        "stale there: changed on the module after the build, 1 of 1 elements differ by up to 1.5 (first []: 2 "
        f"packaged, 0.5 in the module now); read by {kernel}")
    assert out.constants["stale"][0]["folded"] is True


def test_a_constant_the_eager_walk_convicted_is_told_by_what_is_wrong_with_it():
    # On CUDA the level-1 wrapper may save the stale buffer a Triton kernel reads: the eager walk then convicts the
    # constant itself ("read it otherwise than the program"), and the stale comparison says why.
    from aoti_bisect.aoti.constants import ConstantValue, ConstantValues, Stale
    from aoti_bisect.aoti.hook_record import HookRecord, PackageEvent
    from aoti_bisect.diagnose.facts import note
    shift = ConstantValue("shift", "shift", "float32", (32,), 32, min=0.0, max=0.0,
                          stale=Stale(32, 0.5, (0,), 0.0, -0.5))
    events = (PackageEvent("aoti_load_package", "returned", None, None, True,
                           constant_values=ConstantValues("m.wrapper.so", (shift,))),)
    walked = note("triton_poi_fused_addmm_relu_0 read `shift` as differs from eager")
    out = findings(Culprit("constant", input_name="shift", user_name="shift", evidence=[walked]), "python_exception")
    convict_constants(out, [HookRecord(events)], None, ["python", "repro.py"])
    c = out.culprit
    assert (c.kind, c.input_name) == ("stale_constant", "shift") and render_all(c.evidence)[0] == render(walked)
    assert render(c.summary).startswith("constant `shift` is stale in the package: changed on the module after the "
                                        "build, 32 of 32 elements differ by up to 0.5")
