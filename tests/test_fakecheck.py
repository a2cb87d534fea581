"""Custom ops' fake functions checked against the real op (issue #20 item 3): the hook's capture and check
(child/hook/capture.py, fakecheck.py), their reader (aoti/fakecheck.py) and the ladder's fakecheck stage.

The reader runs on a check a real run wrote (tests/data/fakecheck-wrong_fake_custom_op.json); the ladder on
fakes shaped like tests/test_ladder.py's, over the real wrapper of scenarios/cpu/wrong_fake_custom_op.py; the
hook in real children running that scenario (one real AOTI compile, marked slow).
"""
import json
import os
import subprocess
import sys
import zipfile

import pytest

from aoti_bisect.report.facts import render, render_all
from aoti_bisect.aoti import flags, printer
from aoti_bisect.aoti.fakecheck import FakeCheck, OpCheck, capture_problem, differences, parse, read_fakecheck
from aoti_bisect.run.harness import Harness
from aoti_bisect.run.types import RunSpec
from test_ladder import Seen, always, climb, sig, stage

HERE = os.path.dirname(__file__)
SCENARIO = os.path.join(os.path.dirname(HERE), "scenarios", "cpu", "wrong_fake_custom_op.py")
CHECK = os.path.join(HERE, "data", "fakecheck-wrong_fake_custom_op.json")
WRAPPER = "cpu/wrapper_wrong_fake_custom_op.cpp"
SUMMARY = ("the fake function of `bisectlab::pad_double` disagrees with the op on inputs [6, 12] float32: "
           "the fake returns [6, 12], the op returns [6, 16]")


def real_check() -> FakeCheck:
    with open(CHECK) as f:
        return parse(f.read())


# -- the reader --------------------------------------------------------------------------------------------

def test_reader_names_the_op_and_both_shapes_from_a_real_check():
    check = real_check()
    assert check.call == 0 and check.custom_ops == ("bisectlab::pad_double",) and check.problem is None
    assert check.mismatch.describe() == SUMMARY
    assert check.unchecked == []


@pytest.mark.parametrize("doc, words", [
    ({"status": "running", "ops": [{"op": "ns::op", "status": "running"}]},
     "the process died while the program ran eagerly (inside `ns::op`)"),
    ({"status": "no_program", "problem": "compiled no program itself (a prebuilt package)", "ops": []},
     "compiled no program itself"),
    ({"status": "eager_raised", "problem": "the program raised when run eagerly: ValueError: x", "ops": []},
     "raised when run eagerly"),
])
def test_reader_says_in_one_line_why_nothing_was_convicted(doc, words):
    check = parse(json.dumps(doc))
    assert check.mismatch is None and words in check.problem and "\n" not in check.problem


def test_an_op_without_a_fake_or_raising_is_a_line_not_a_finding():
    check = parse(json.dumps({"status": "done", "ops": [
        {"op": "a::b", "status": "no_fake", "error": "UnsupportedOperatorException: a.b.default"},
        {"op": "c::d", "status": "op_raised", "error": "RuntimeError: bad"}]}))
    assert check.mismatch is None
    assert [o.describe() for o in check.unchecked] == [
        "`a::b` could not be checked: has no fake function (UnsupportedOperatorException: a.b.default)",
        "`c::d` could not be checked: the op raised (RuntimeError: bad)"]


def test_missing_or_damaged_files_give_one_line(tmp_path):
    missing = read_fakecheck(str(tmp_path))
    assert missing.mismatch is None and "no fake-function check was written" in missing.problem
    assert missing.capture is None and "capture.json is missing" in missing.capture_problem
    (tmp_path / "fakecheck.json").write_text('{"ops": [{"status": 1}')
    (tmp_path / "capture").mkdir()
    (tmp_path / "capture" / "capture.json").write_text("[]")
    damaged = read_fakecheck(str(tmp_path))
    assert damaged.problem.startswith(f"{tmp_path}/fakecheck.json is not a fake-function check: ")
    assert damaged.capture_problem.startswith("capture.json is damaged")


def test_capture_problem_says_which_file_is_missing_and_why():
    with open(os.path.join(HERE, "data", "capture-wrong_fake_custom_op.json")) as f:
        assert capture_problem(f.read()) is None
    over = {"program": "program.pt2", "inputs": None,
            "inputs_problem": "the inputs of call 0 hold 600.0 MiB of tensors, over the cap of 512.0 MiB"}
    assert capture_problem(json.dumps(over)) == over["inputs_problem"]
    assert capture_problem(json.dumps({"program": None, "inputs": None})) == "no program saved; no inputs saved"


def test_the_packages_outputs_against_eager_from_a_real_run():
    # The run's script printed "wrong values: max abs difference 6.853" for the same call.
    with open(os.path.join(HERE, "data", "differential-wrong_fake_custom_op.json")) as f:
        assert differences(f.read()) == (
            "output 0 ([6] float32) differs from eager on the same inputs by up to 6.853 (tolerance rtol 1.3e-06, "
            "atol 1e-05, as torch.testing.assert_close)",)
    close = {"outputs": [{"index": 0, "close": True}]}
    assert differences(json.dumps(close)) == ()
    assert differences(json.dumps({"problem": "eager returns 2 outputs, the package 1", "outputs": []})) == (
        "the package's outputs against eager: eager returns 2 outputs, the package 1",)
    assert differences("{").__len__() == 1 and differences("{")[0].startswith("differential.json is damaged")


# -- the ladder, on fakes ----------------------------------------------------------------------------------

FINISHED = printer.Trace(tuple(printer.TraceEvent(k, True) for k in (
    "cpp_fused_add_pad_double_relu_0", "bisectlab::pad_double", "cpp_fused_mul_sum_1")))


def seen_with(check: FakeCheck, wrapper_log: str = WRAPPER) -> Seen:
    seen = Seen(wrapper_log, trace=FINISHED)
    seen.fake_check = check
    return seen


def test_a_wrong_fake_convicts_the_op_before_the_walk():
    world = always(sig("python_exception", "run", "wrong values: max abs difference 8.54"))
    _, out = climb(world, seen_with(real_check()))
    (spec,) = world.ran("fakecheck")  # one run: it failed, so it is the failing call's check
    assert spec.env_dict == flags.FAKECHECK and spec.hook
    assert out.culprit.kind == "custom_op" and out.culprit.kernel == "bisectlab::pad_double"
    assert render(out.culprit.summary).startswith(SUMMARY + ": the package was compiled for the fake's layout")
    assert render(stage(out, "fakecheck").finding) == render(out.culprit.summary)
    assert "its program and inputs were not captured" in render_all(out.culprit.evidence)[1]
    assert stage(out, "inspect").skipped == "culprit already pinned" and not world.ran("inspect")
    assert any("torch.library.opcheck" in s for s in out.next_steps)


def test_a_crash_after_every_launch_is_still_checked_and_the_op_convicted():
    _, out = climb(always(sig("segfault")), seen_with(real_check()))
    assert out.culprit.kind == "custom_op"
    assert render_all(out.culprit.evidence)[-1].startswith(
        "the earlier stages' suspect, outside_instrumented_kernels the end of the graph (outputs are handed back): "
        "every instrumented launch finished (last: cpp_fused_mul_sum_1)")


def test_agreeing_fakes_leave_the_walk_to_find_the_kernel():
    agree = FakeCheck(0, ("bisectlab::pad_double",), (OpCheck("bisectlab::pad_double", "match"),),
                      differences=("output 0 ([6] float32) differs from eager ...",))
    world = always(sig("python_exception", "run", "wrong values"))
    _, out = climb(world, seen_with(agree))
    assert render(stage(out, "fakecheck").finding) == ("the fake functions of `bisectlab::pad_double` agree with the ops "
                                               "on the call's inputs; output 0 ([6] float32) differs from eager ...")
    assert out.culprit.kind != "custom_op" and world.ran("inspect")


def test_no_custom_op_in_the_graph_runs_no_check():
    world = always(sig("nan_inf", "run", "SystemExit: non-finite output"))
    _, out = climb(world, seen_with(real_check(), "cpu/wrapper_nan_after_matmul_level2.cpp"))
    assert stage(out, "fakecheck").skipped == "no custom op runs through the proxy executor"
    assert not world.ran("fakecheck") and out.culprit.kind != "custom_op"


# -- the hook, in real children ----------------------------------------------------------------------------

def run_scenario(run_dir, cache, stage_name, env, hook_on, base_env=None):
    # Every run compiles: a run served from the reuse folder would not print the compile's warnings.
    harness = Harness(str(run_dir), base_env=base_env, cache_root=str(cache), reuse="none")
    return harness.run(RunSpec((sys.executable, SCENARIO), stage_name, 0, tuple(env.items()), 600.0, hook_on))


def log_bytes(result):
    with open(result.log_path, "rb") as f:
        return f.read()


def _check_runs(folder, environ):
    """The scenario without the check, with it, and with it over the capture's size cap (real compiles on a
    shared, warming Inductor cache): an `early` job."""
    cache = folder / "cache"
    off = run_scenario(folder / "off", cache, "baseline", {}, False, environ)
    on = run_scenario(folder / "on", cache, "fakecheck", flags.FAKECHECK, True, environ)
    capped = run_scenario(folder / "capped", cache, "fakecheck", flags.FAKECHECK, True,
                          base_env={**environ, "AOTI_BISECT_MAX_CAPTURE_MB": "0.0001"})
    return off, on, capped


@pytest.mark.slow
@pytest.mark.early(job=_check_runs)
def test_capture_and_check_leave_the_repros_output_and_exit_unchanged(early):
    off, on, capped = early(_check_runs)
    assert off.exit.returncode == on.exit.returncode == 1
    assert log_bytes(on) == log_bytes(off) and b"wrong values: max abs difference" in log_bytes(on)
    assert not os.path.exists(os.path.join(off.run_dir, "capture"))

    check = read_fakecheck(on.run_dir)
    assert check.mismatch.describe() == SUMMARY and check.capture == os.path.join(on.run_dir, "capture")
    import torch
    inputs = torch.load(os.path.join(check.capture, "inputs.pt"))
    outputs = torch.load(os.path.join(check.capture, "outputs.pt"))
    assert inputs["call"] == outputs["call"] == 0 and inputs["args"][0].shape == (6, 12) and not inputs["kwargs"]
    assert outputs["outputs"].shape == (6,)
    assert zipfile.is_zipfile(os.path.join(check.capture, "program.pt2"))

    # Over the size cap: the inputs are not saved, and the check and the repro go on.
    assert capped.exit.returncode == 1 and log_bytes(capped) == log_bytes(off)
    check = read_fakecheck(capped.run_dir)
    assert check.mismatch is not None and check.capture is None
    assert check.capture_problem == "the inputs of call 0 hold 288 bytes of tensors, over the cap of 104 bytes"


CHECK_CHILD = """
import json, sys, torch
from aoti_bisect.child.hook import fakecheck

@torch.library.custom_op("fc_test::colmajor", mutates_args=())
def colmajor(x: torch.Tensor) -> torch.Tensor:
    return (x * 2).t().contiguous().t()  # column-major: strides (1, rows)

@colmajor.register_fake
def _(x):
    return torch.empty_like(x)  # promises row-major

@torch.library.custom_op("fc_test::picky", mutates_args=())
def picky(x: torch.Tensor) -> torch.Tensor:
    if x.shape[1] > 4:
        raise ValueError("picky: more than 4 columns")
    return x + 1

@picky.register_fake
def _(x):
    return torch.empty_like(x)

class M(torch.nn.Module):
    def forward(self, x):
        return picky(colmajor(x) + 1)

cols = torch.export.Dim("cols", min=2, max=16)
ep = torch.export.export(M(), (torch.randn(3, 4),), dynamic_shapes={"x": {1: cols}})
x = torch.randn(3, 6)
before = torch.get_rng_state()
fakecheck.check_call(ep, (x,), {}, 0, sys.argv[1])
print(torch.equal(before, torch.get_rng_state()))
"""


@pytest.mark.slow
def test_strides_and_a_raising_op_in_a_real_program(tmp_path, write_script):
    script = write_script("check.py", CHECK_CHILD)
    result = tmp_path / "fakecheck.json"
    out = subprocess.run([sys.executable, script, str(result)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "True", out.stderr[-2000:]  # RNG state left as it was
    check = read_fakecheck(str(tmp_path))
    assert check.problem == "the program raised when run eagerly: ValueError: picky: more than 4 columns"
    colmajor, picky = check.ops
    assert colmajor.mismatches == ("the fake returns strides [6, 1], the op [1, 3] for shape [3, 6]",)
    assert picky.describe() == "`fc_test::picky` could not be checked: the op raised (ValueError: picky: more " \
                               "than 4 columns)"


def test_a_bundle_takes_the_check_but_not_the_captured_tensors(tmp_path):
    from aoti_bisect.report.bundle import bundle_files
    run_dir = tmp_path / "runs" / "fakecheck-004"
    (run_dir / "capture").mkdir(parents=True)
    for name in ("fakecheck.json", "differential.json", "capture/inputs.pt", "capture/capture.json"):
        (run_dir / name).write_text("{}")
    assert sorted(name for name, _ in bundle_files(str(tmp_path), {})) == [
        "runs/fakecheck-004/differential.json", "runs/fakecheck-004/fakecheck.json"]
