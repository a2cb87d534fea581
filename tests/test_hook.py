"""The in-process hook (aoti_bisect/child/hook): installed by the harness, recording what the repro's own process
compiles and loads into hook.json, read back by aoti/hook_record.py, named in the findings and the report.

Real children throughout; one real AOTI compile (marked slow). A stand-in `torch` package (a folder on the
child's PYTHONPATH) plays a process that dies inside a load, which real torch does not do on demand.
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys

import pytest

from aoti_bisect.report.facts import render
from aoti_bisect.aoti import wrapper
from aoti_bisect.aoti.hook_record import Names, package_rows, parse, read_hook
from aoti_bisect.child import contract, hook
from aoti_bisect.diagnose.findings import Findings, Stage, StageName
from aoti_bisect.diagnose.facts import FactKind, Namer, fact, kernel
from aoti_bisect.diagnose.sanity import sanity_culprit
from aoti_bisect.aoti.checks import InputRejected
from aoti_bisect.report.model import Report
from aoti_bisect.run.harness import Harness
from aoti_bisect.run.types import Outcome, RunSpec
from aoti_bisect.stats import Rate
from aoti_bisect.verdict import Verdict

HERE = os.path.dirname(__file__)
DATA = os.path.join(HERE, "data", "hook")
REPROS = os.path.join(HERE, "repros")


def run(run_dir, argv, hook_on, index=0, base_env=None):
    harness = Harness(str(run_dir), base_env=base_env)
    return harness.run(RunSpec(tuple(argv), "trace" if hook_on else "baseline", index, (), 300.0, hook_on))


def log_bytes(result):
    with open(result.log_path, "rb") as f:
        return f.read()


def captured(name):
    with open(os.path.join(DATA, name)) as f:
        return parse(f.read(), name)


# -- installation ------------------------------------------------------------------------------------------

def test_only_hooked_runs_get_the_hook_and_the_users_pythonpath_is_kept(tmp_path):
    harness = Harness(str(tmp_path / "run"), base_env={"PYTHONPATH": "/user/lib"})
    on = harness.environment.overlay(RunSpec(("python", "x.py"), "trace", 0, (), 1.0, True), "/r/trace-000")
    off = harness.environment.overlay(RunSpec(("python", "x.py"), "baseline", 1, (), 1.0, False), "/r/baseline-001")
    assert on["PYTHONPATH"] == hook.SITE_DIR + os.pathsep + "/user/lib"
    assert on[contract.HOOK_ENV] == "/r/trace-000/hook.json"
    assert "PYTHONPATH" not in off and contract.HOOK_ENV not in off
    assert os.listdir(hook.SITE_DIR) in (["sitecustomize.py"], ["sitecustomize.py", "__pycache__"],
                                         ["__pycache__", "sitecustomize.py"])


def test_baseline_and_determinism_run_without_the_hook_later_stages_with_it():
    assert [Stage(n, {}).hook for n in ("baseline", "determinism", "sanity", "trace", "inspect", "memcheck")] == \
        [False, False, True, True, True, True]


def test_importing_the_hook_package_and_the_harness_imports_no_torch():
    out = subprocess.run([sys.executable, "-c", "import sys, aoti_bisect.child.hook, aoti_bisect.run.harness; "
                          "print(sorted(m for m in sys.modules if m.split('.')[0] == 'torch'))"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_repro_that_never_imports_torch_runs_unchanged_and_imports_none(tmp_path, write_script):
    script = write_script("plain.py", """
        import sys
        print("modules:", sorted(m for m in sys.modules if m.split('.')[0] == 'torch'))
        print("args", sys.argv[1:])
        sys.exit(3)
    """)
    off = run(tmp_path / "a", [sys.executable, script, "x"], False)
    on = run(tmp_path / "b", [sys.executable, script, "x"], True)
    assert log_bytes(on) == log_bytes(off) == b"modules: []\nargs ['x']\n"
    assert on.exit.returncode == off.exit.returncode == 3
    assert not os.path.exists(os.path.join(on.run_dir, "hook.json"))
    assert read_hook(on.run_dir).events == ()

    assert read_hook(on.run_dir).loaded and not read_hook(off.run_dir).loaded


@pytest.mark.parametrize("flag", ["", "-I", "-E", "-S"])
def test_a_python_that_ignores_pythonpath_is_said_to_have_run_without_the_hook(tmp_path, write_script, flag):
    script = write_script("fails.py", "raise SystemExit('the check failed')\n")
    out = subprocess.run([sys.executable, "-m", "aoti_bisect", "--cmd", f"{sys.executable} {flag} {script}",
                          "--runs", "1", "--stages", "baseline,sanity", "--out", str(tmp_path / "o"), "--json"],
                         capture_output=True, text=True, timeout=300)
    report = json.loads(out.stdout)
    sanity = next(s for s in report["stages"] if s["name"] == "sanity")
    assert sanity["runs"] == 1 and read_hook(str(tmp_path / "o" / "runs" / "sanity-001")).loaded == (not flag)
    said = [s for s in report["next_steps"] if "no run's Python loaded aoti-bisect's in-process hook" in s]
    assert bool(said) == bool(flag) and ("python -I, -E or -S" in out.stderr) == bool(flag)


def test_a_repro_that_imports_torch_but_no_aoti_runs_unchanged(tmp_path, write_script):
    script = write_script("eager.py", """
        import sys, torch
        print(torch.arange(6.0).reshape(2, 3).sum(0).tolist(), "torch._inductor" in sys.modules)
    """)
    off = run(tmp_path / "a", [sys.executable, script], False)
    on = run(tmp_path / "b", [sys.executable, script], True)
    assert log_bytes(on) == log_bytes(off) == b"[3.0, 5.0, 7.0] False\n"
    assert on.exit.returncode == off.exit.returncode == 0
    assert read_hook(on.run_dir).events == ()


def test_the_users_own_sitecustomize_still_runs_and_their_path_still_imports(tmp_path, write_script):
    user = tmp_path / "userlib"
    user.mkdir()
    (user / "sitecustomize.py").write_text("import os\nos.environ['USER_SITE_RAN'] = 'yes'\n")
    (user / "helper.py").write_text("VALUE = 42\n")
    script = write_script("uses.py", """
        import os, sys, helper, sitecustomize
        print(os.environ.get("USER_SITE_RAN"), helper.VALUE, os.path.basename(sitecustomize.__file__),
              "_aoti_bisect_hook" in sys.modules)
    """)
    env = {**os.environ, "PYTHONPATH": str(user)}
    on = run(tmp_path / "b", [sys.executable, script], True, base_env=env)
    off = run(tmp_path / "a", [sys.executable, script], False, base_env=env)
    assert log_bytes(on) == b"yes 42 sitecustomize.py True\n"
    assert log_bytes(off) == b"yes 42 sitecustomize.py False\n"


# -- recording, with a stand-in torch ----------------------------------------------------------------------

FAKE_INDUCTOR = '''
import os, signal
def aoti_load_package(path, run_single_threaded=False, device_index=-1):
    if os.environ.get("DIE_IN_LOAD"):
        os.kill(os.getpid(), signal.SIGSEGV)
    return ("loaded", path)
'''


@pytest.fixture
def fake_torch(tmp_path):
    """A folder holding a `torch` whose aoti_load_package can die of SIGSEGV, and a `.pt2` to load."""
    root = tmp_path / "fake"
    (root / "torch" / "_inductor").mkdir(parents=True)
    (root / "torch" / "__init__.py").write_text("")
    (root / "torch" / "_inductor" / "__init__.py").write_text(FAKE_INDUCTOR)
    package = tmp_path / "prebuilt.pt2"
    package.write_bytes(b"not really a zip")
    return str(root), str(package)


def test_a_process_that_dies_inside_a_load_leaves_the_started_event(tmp_path, fake_torch, write_script):
    root, package = fake_torch
    script = write_script("load.py", """
        import sys, torch._inductor
        print(torch._inductor.aoti_load_package(sys.argv[1]), flush=True)
    """)
    env = {**os.environ, "PYTHONPATH": root, "DIE_IN_LOAD": "1"}
    result = run(tmp_path / "r", [sys.executable, script, package], True, base_env=env)
    assert result.outcome is Outcome.CRASHED and result.exit.signal == 11
    (event,) = read_hook(result.run_dir).events
    assert (event.call, event.status, event.path, event.built_here) == \
        ("aoti_load_package", "started", package, False)
    assert event.sha256 == hashlib.sha256(b"not really a zip").hexdigest()
    assert package_rows("trace", [read_hook(result.run_dir)])[0]["unfinished"] == 1


def test_a_second_recording_process_writes_beside_the_first(tmp_path, fake_torch, write_script):
    root, package = fake_torch
    script = write_script("load.py", """
        import sys, torch._inductor
        print(torch._inductor.aoti_load_package(sys.argv[1]) == ("loaded", sys.argv[1]))
    """)
    both = f"{sys.executable} {script} {package} && {sys.executable} {script} {package}"
    result = run(tmp_path / "r", ["sh", "-c", both], True, base_env={**os.environ, "PYTHONPATH": root})
    assert log_bytes(result) == b"True\nTrue\n"
    names = sorted(os.listdir(result.run_dir))
    assert "hook.json" in names and len([n for n in names if n.startswith("hook-")]) == 1
    record = read_hook(result.run_dir)
    assert [e.status for e in record.events] == ["returned", "returned"]
    assert package_rows("trace", [record])[0]["runs"] == 1  # one run, two processes


# -- the reader, on captured records -----------------------------------------------------------------------

def test_reader_parses_a_captured_compile_and_load():
    record = captured("compile_and_load.json")
    compile_, load, load2 = record.events
    assert (compile_.call, compile_.status, compile_.built_here, compile_.existed_before) == \
        ("aoti_compile_and_package", "returned", True, False)
    assert [(i.name, i.placeholder) for i in compile_.inputs] == \
        [("x", "arg3_1"), ("idx", "arg4_1"), ("bias", "arg5_1"), ("s", None)]
    assert [(c.fqn, c.kind, c.placeholder) for c in compile_.constants] == \
        [("proj.weight", "parameter", "proj_weight"), ("proj.bias", "parameter", None), ("scale", "buffer", None)]
    assert (load.call, load2.call) == ("aoti_load_package", "load_package")
    assert load.built_here and load.sha256 == compile_.sha256 == load2.sha256
    names = Names.of([record])
    assert names.inputs == {"arg3_1": "x", "arg4_1": "idx", "arg5_1": "bias"}
    assert names.constants == {"proj_weight": "proj.weight"}
    rows = package_rows("trace", [record, record])
    assert [(r["action"], r["built_here"], r["runs"]) for r in rows] == [("compiled", True, 2), ("loaded", True, 2)]


def test_reader_parses_a_captured_prebuilt_load_before_a_segfault():
    record = captured("load_prebuilt_then_segfault.json")
    (load,) = record.events
    assert (load.call, load.status, load.built_here) == ("aoti_load_package", "returned", False)
    assert Names.of([record]) == Names({}, {})  # a load alone names nothing in the user's terms


def test_reader_turns_damage_into_problem_lines(tmp_path):
    assert parse("") == parse("  \n")
    assert parse("") .events == () and parse("").problems == ()
    assert "not a hook record" in parse("{truncated", "hook.json").problems[0]
    assert "not a hook record" in parse('{"events": [{"status": "returned"}]}').problems[0]
    (tmp_path / "hook.json").write_text("[1, 2]")
    assert "not a hook record" in read_hook(str(tmp_path)).problems[0]


def test_names_are_unknown_when_two_programs_disagree():
    record = captured("compile_and_load.json")
    other = json.loads(open(os.path.join(DATA, "compile_and_load.json")).read())
    other["events"][0]["program"]["inputs"][0]["name"] = "y"
    assert Names.of([record, parse(json.dumps(other))]) == Names({}, {})


# -- naming the findings and the report --------------------------------------------------------------------

def test_a_rejected_input_is_named_by_the_users_name(tmp_path):
    culprit, finding = sanity_culprit(InputRejected(1, "dim value is too small at 0"), None)
    assert culprit.input_name == "input 1"  # no graph: the wrapper's name is unknown, so nothing is renamed
    graph = wrapper.WrapperGraph("w.cpp", [], ["arg3_1", "arg4_1", "arg5_1"], [], [])
    names = Names.of([captured("compile_and_load.json")])
    namer = Namer(names.inputs, names.constants, tuple(graph.inputs))
    culprit, finding = sanity_culprit(InputRejected(1, "dim value is too small at 0"), graph, namer)
    stage = Stage(StageName.SANITY, {}, finding=finding)
    out = Findings(Verdict.REPRODUCED, None, Rate(1, 1), [stage], culprit=culprit, summary=finding)
    assert culprit.user_name == "idx"
    assert render(culprit.evidence[0]).startswith("AOTI_RUNTIME_CHECK_INPUTS rejects model input 1 (`idx`, wrapper "
                                                  "arg4_1)")
    assert render(stage.finding) == render(out.summary) == "input check fired: model input 1 (`idx`, wrapper " \
                                                           "arg4_1): dim value is too small at 0"
    report = Report.from_findings(str(tmp_path), ["python", "r.py"], out, packages=package_rows(
        "sanity", [captured("compile_and_load.json")]))
    assert "culprit: model input 1 (`idx`, wrapper arg4_1)" in report.headline()
    assert [p["action"] for p in report.data["packages"]] == ["compiled", "loaded"]
    report.write()
    markdown = (tmp_path / "report.md").read_text()
    assert "and packages</summary>" in markdown
    assert r"model input 1 (\`idx\`, wrapper arg4_1)" in markdown  # user text is escaped in cells


def test_a_constant_is_named_by_its_fqn():
    names = Names.of([captured("compile_and_load.json")])
    who = Namer(names.inputs, names.constants).constant("proj_weight")
    assert who.user_name == "proj.weight"
    said = fact(FactKind.BAD_VALUE, "{k} reads {c:phrase} and it is already bad: nan", k=kernel("cpp_fused_1"), c=who)
    assert render(said) == "cpp_fused_1 reads constant `proj.weight` (wrapper proj_weight) and it is already bad: nan"


# -- end to end, with a real AOTI compile ------------------------------------------------------------------

def _compile_and_load(folder, environ):
    """The repro with the hook and without it (one real compile, which the second run may take from the shared
    cache), then a process that loads the package the first built and segfaults: an `early` job."""
    repro = [sys.executable, os.path.join(REPROS, "hook_named_inputs.py"), "model.pt2"]
    cache = str(folder / "cache")
    on = Harness(str(folder / "run"), environ, cache_root=cache).run(RunSpec(tuple(repro), "trace", 0, (), 600.0,
                                                                             True))
    off = Harness(str(folder / "run"), environ, cache_root=cache).run(RunSpec(tuple(repro), "baseline", 1, (),
                                                                              600.0))
    package = os.path.join(on.run_dir, "cwd", "model.pt2")
    seg = run(folder / "seg", [sys.executable, os.path.join(REPROS, "hook_load_then_segfault.py"), package], True,
              base_env=environ)
    return on, off, package, seg


@pytest.mark.slow
@pytest.mark.early(job=_compile_and_load)
def test_real_compile_and_load_recorded_and_the_output_is_unchanged(early):
    on, off, package, seg = early(_compile_and_load)
    assert on.exit.returncode == off.exit.returncode == 0
    assert log_bytes(on) == log_bytes(off) and b"tensor(" in log_bytes(on)
    record = read_hook(on.run_dir)
    assert not os.path.exists(os.path.join(off.run_dir, "hook.json")) and not record.problems
    compile_, load, load2 = record.events
    with open(package, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    assert (compile_.call, compile_.status, compile_.path, compile_.sha256, compile_.built_here) == \
        ("aoti_compile_and_package", "returned", package, digest, True)
    assert [(e.call, e.path, e.sha256, e.built_here) for e in (load, load2)] == \
        [("aoti_load_package", package, digest, True), ("load_package", package, digest, True)]
    # The first model is called twice, the second once: a NaN the input check finds may then be an output fed back.
    assert (load.called_again, load2.called_again) == (True, False)
    # The names the hook paired agree with the wrapper the run compiled, read independently.
    graph = next(g for p in wrapper.find_wrappers(os.path.join(on.cache_dir, "inductor"))
                 if (g := wrapper.parse_wrapper(open(p).read(), p)).launches)
    assert [i.placeholder for i in compile_.inputs if i.placeholder] == graph.inputs
    assert [i.name for i in compile_.inputs] == ["x", "idx", "bias", "s"]
    assert ("proj.weight", "proj_weight") in [(c.fqn, c.placeholder) for c in compile_.constants]

    # The module moved on after the build (#53, as stale_parameter_replaced and folded_temperature): the replaced
    # proj.weight, which the extern addmm reads, is named by its FQN; the calibrated temperature, which Inductor folded
    # into the pointwise kernel (the package lists no constant of that name), is named as folded.
    from aoti_bisect.diagnose.constants import convict_constants
    from aoti_bisect.diagnose.facts import note
    from aoti_bisect.diagnose.findings import Culprit
    from aoti_bisect.run.types import Signature
    stale = {v.fqn: v.stale for v in load.constant_values.values}
    assert (stale["proj.weight"].differ, stale["proj.weight"].index, stale["proj.weight"].max_abs_diff) == \
        (4, (2, 0), 0.25)
    assert ("temperature", None) in [(c.fqn, c.placeholder) for c in compile_.constants]
    assert (dict(load.constant_values.folded)["temperature"].package, dict(load.constant_values.folded)[
        "temperature"].module) == (2.0, 0.5)
    addmm, pointwise = (next(l.name for l in graph.launches if "proj_weight" in l.reads), graph.launches[-1].name)
    wrong = Signature("python_exception", "run", "wrong values: max abs difference 0.5", None, "f")
    for walked, kind, name, reader in ((Culprit("unknown", evidence=[note("the package agrees with eager")]),
                                        "stale_constant", "proj.weight", addmm),
                                       (Culprit("kernel", kernel=pointwise, evidence=[note("differs from eager")]),
                                        "folded_constant", "temperature", pointwise)):
        out = Findings(Verdict.REPRODUCED, wrong, Rate(1, 1), [], culprit=walked)
        convict_constants(out, [record], graph, ["python", "repro.py"])
        assert (out.culprit.kind, out.culprit.user_name) == (kind, name)
        assert render(out.culprit.summary).endswith(f"read by {reader}")
    assert addmm == "aoti_torch_cpu_addmm_out"

    # The same package, loaded by a process that did not build it and then segfaults.
    assert seg.exit.signal == 11 and b"torch.Size([2, 4])" in log_bytes(seg)
    (loaded,) = read_hook(seg.run_dir).events
    assert (loaded.status, loaded.path, loaded.sha256, loaded.built_here) == ("returned", package, digest, False)


def test_a_bundle_takes_the_runs_hook_record(tmp_path):
    from aoti_bisect.report.bundle import bundle_files
    run_dir = tmp_path / "runs" / "trace-000"
    run_dir.mkdir(parents=True)
    shutil.copy(os.path.join(DATA, "compile_and_load.json"), run_dir / "hook.json")
    assert ("runs/trace-000/hook.json", str(run_dir / "hook.json")) in bundle_files(str(tmp_path), {})


def test_a_run_reports_the_packages_its_hooked_stages_loaded(tmp_path, fake_torch, write_script):
    root, package = fake_torch
    script = write_script("check.py", """
        import sys, torch._inductor
        torch._inductor.aoti_load_package(sys.argv[1])
        raise AssertionError("output mismatch: max abs diff 3.0")
    """)
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.dirname(HERE), root])}
    subprocess.run([sys.executable, "-m", "aoti_bisect", script, package, "--runs", "2", "--out", str(out), "-q"],
                   env=env, capture_output=True, timeout=300)
    report = json.loads((out / "report.json").read_text())
    digest = hashlib.sha256(b"not really a zip").hexdigest()
    # The baseline failed every run, so determinism's one run carries the hook (and the trace's flags) too.
    assert {(p["stage"], p["action"], p["path"], p["sha256"], p["built_here"]) for p in report["packages"]} == \
        {(stage, "loaded", package, digest, False) for stage in ("sanity", "determinism", "trace")}
    assert not any(os.path.exists(out / "runs" / r / "hook.json") for r in os.listdir(out / "runs")
                   if r.startswith("baseline"))
    assert "and packages</summary>" in (out / "report.md").read_text()


# -- names of a package the run did not build (#29) --------------------------------------------------------

KW_SPEC = ('[1, {"type": "builtins.tuple", "context": "null", "children_spec": [{"type": "builtins.tuple", "context": '
           '"null", "children_spec": [{"type": null, "context": null, "children_spec": []}]}, {"type": "builtins.dict", '
           '"context": "[\\"mask\\"]", "children_spec": [{"type": null, "context": null, "children_spec": []}]}]}]')


def test_a_prebuilt_packages_keyword_inputs_are_named_from_its_call_spec():
    from aoti_bisect.child.hook.recorder import call_names
    assert call_names(KW_SPEC, ["arg2_1", "arg3_1"]) == [{"name": "mask", "placeholder": "arg3_1",
                                                          "kind": "TensorArgument"}]
    assert call_names(KW_SPEC, ["arg3_1"]) is None  # leaves and wrapper inputs do not line up
    positional = KW_SPEC.replace('"[\\"mask\\"]"', '"[]"').replace(
        '"children_spec": [{"type": null, "context": null, "children_spec": []}]}]}]', '"children_spec": []}]}]')
    assert call_names(positional, ["arg2_1"]) is None  # a package holds no names for positional inputs


def test_with_no_compile_seen_a_loads_names_name_the_findings():
    event = {"call": "aoti_load_package", "status": "returned", "built_here": False,
             "program": {"inputs": [{"name": "mask", "placeholder": "arg3_1"}],
                         "constants": [{"fqn": "pos.weight", "kind": "constant", "placeholder": "pos_weight"}]}}
    names = Names.of([parse(json.dumps({"events": [event]}))])
    assert (names.inputs, names.constants) == ({"arg3_1": "mask"}, {"pos_weight": "pos.weight"})
