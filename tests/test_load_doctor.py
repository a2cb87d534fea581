"""The load doctor: the error line (not a C++ frame) as the message, the baseline without C++ stack traces, and
the experiments for a load failure (the package's custom ops against a fresh process, its target, gdb)."""
import os
import sys
import zipfile

from conftest import LOGS, log

from aoti_bisect.report.facts import render, render_all
from aoti_bisect.aoti.hook_record import HookRecord
from aoti_bisect.aoti.package import read_package
from aoti_bisect.diagnose.context import Options
from aoti_bisect.diagnose.ladder import Ladder
from aoti_bisect.diagnose.loaddoctor import diagnose_load
from aoti_bisect.run.classify import classify
from aoti_bisect.run.harness import Harness
from aoti_bisect.run.registry import fresh_process, native_backtrace
from aoti_bisect.run.types import Outcome, ProcessExit, RunResult, RunSpec, Signature
from aoti_bisect.verdict import Verdict

OP = "bisectlab::fused_norm"
MISSING = Signature("python_exception", "load", f"RuntimeError: Could not find schema for {OP}.")


def test_the_message_is_the_error_line_not_a_cpp_frame():
    # Real: a serving script that catches the load error and prints it (as a public report's repro did),
    # under TORCH_SHOW_CPP_STACKTRACES=1; the log ends in "#30 _start from ??:0".
    text = log("cpu/load_error_caught.log")
    assert text.rstrip().endswith("#30 _start from ??:0")
    _, sig = classify(text, ProcessExit(1, None, False, 1.0, 0))
    assert sig.message == f"failed to load the model: Could not find schema for {OP}."
    assert sig.phase == "load"


def test_the_baseline_runs_without_cpp_stack_traces(tmp_path):
    h = Harness(str(tmp_path / "run"), base_env={})
    base = h.environment.overlay(RunSpec(("python", "r.py"), "baseline", 0), str(tmp_path / "b"))
    traced = h.environment.overlay(RunSpec(("python", "r.py"), "trace", 1, hook=True), str(tmp_path / "t"))
    assert "TORCH_SHOW_CPP_STACKTRACES" not in base
    assert traced["TORCH_SHOW_CPP_STACKTRACES"] == "1"  # a CPU kernel's exception still names the kernel


def real_package(tmp_path) -> str:
    """A zip of the real members of load_error.pt2 (torch 2.13.0+cpu): its extern-node JSON, its metadata,
    and its model library cut down to the real `.comment` section (the whole .so is 1.5 MB)."""
    path = tmp_path / "load_error.pt2"
    model = "load_error/data/aotinductor/model/cashan5l6qhskidtt3yixtztf22mdajri3feenj54run2vxfcivp"
    with zipfile.ZipFile(path, "w") as z:
        z.write(os.path.join(LOGS, "cpu/wrapper_load_error.json"), f"{model}.wrapper.json")
        z.write(os.path.join(LOGS, "cpu/wrapper_load_error_metadata.json"), f"{model}.wrapper_metadata.json")
        z.write(os.path.join(LOGS, "cpu/wrapper_load_error_so_comment.bin"), f"{model}.wrapper.so")
    return str(path)


def test_the_package_says_what_it_needs(tmp_path):
    facts = read_package(real_package(tmp_path))
    assert facts.problem is None
    assert facts.custom_ops == (OP,)
    assert facts.device == "cpu" and dict(facts.metadata)["AOTI_CPU_ISA"] == "AVX2"
    assert facts.compiler == "GCC: (Debian 12.2.0-14+deb12u1) 12.2.0"
    assert read_package(str(tmp_path / "nothing.pt2")).problem.startswith("cannot read the package")


def test_a_fresh_process_lacks_the_custom_op_and_the_doctor_names_it(tmp_path):
    fresh = fresh_process(sys.executable, (OP, "aten::mm"), str(tmp_path / "doctor"), dict(os.environ))
    assert fresh["ops"] == {OP: False, "aten::mm": True}
    c = diagnose_load(MISSING, read_package(real_package(tmp_path)), fresh, [], "no crash")
    assert c.kind == "missing_custom_op" and c.op == OP
    assert render(c.summary).startswith(f"the package needs `{OP}`, which the loading process never registered")
    assert "before aoti_load_package" in render(c.summary)
    assert any("compiled for cpu linux x86_64, CPU ISA AVX2" in e for e in render_all(c.evidence))
    assert any("records no torch version" in e for e in render_all(c.evidence))


def test_a_package_for_a_wider_cpu_is_named():
    from aoti_bisect.aoti.package import PackageFacts
    facts = PackageFacts("p.pt2", (), (("AOTI_CPU_ISA", "AVX512"), ("AOTI_DEVICE_KEY", "cpu")))
    c = diagnose_load(Signature("segfault", "load", "killed by SIGILL"), facts,
                      {"torch": "2.13.0", "ops": {}, "cpu_capability": "AVX2", "cuda": False}, [], None)
    assert c.kind == "load_environment" and "AVX512" in render(c.summary) and "AVX2" in render(c.summary)


def test_gdb_frames_are_read_from_a_real_crash():
    frames = native_backtrace(log("cpu/gdb-segfault-ctypes.log"))
    assert frames[0] == "#0 __strlen_avx2 at ../sysdeps/x86_64/multiarch/strlen-avx2.S:76"
    assert frames[3] == "#3 ?? from /lib/x86_64-linux-gnu/libffi.so.8"
    assert native_backtrace(log("cpu/load_error.log")) == []


class DoctorEvidence:
    def __init__(self, package):
        self.asked = []
        self.the_package = package

    def graph(self, result):
        return None

    def package(self, result):
        assert result.spec.hook  # the hook is what recorded which package was loaded
        return self.the_package

    def fresh_process(self, ops):
        self.asked.append(ops)
        return {"torch": "2.13.0+cpu", "ops": {op: False for op in ops}, "cpu_capability": "AVX2", "cuda": False}

    def backtrace(self, result):
        raise AssertionError("no debugger for an exception")

    def hook(self, result):
        return HookRecord()  # the doctor reads the package through package()


def test_the_ladder_runs_the_doctor_once_for_a_load_failure(tmp_path):
    specs = []

    def run_batch(batch, on_result, stop):
        results = []
        for spec in batch:
            specs.append(spec)
            r = RunResult(spec, Outcome.FAILED, ProcessExit(1, None, False, 1.0, 0), "/r", "/r/output.log",
                          MISSING, "/c")
            results.append(r)
            on_result(r)
            if stop(results):
                return

    evidence = DoctorEvidence(read_package(real_package(tmp_path)))
    out = Ladder(["python", "repro.py"], run_batch, evidence, Options(debugger=(("gdb",), None))).run()
    assert out.verdict is Verdict.REPRODUCED
    assert [s.stage for s in specs if s.stage != "baseline"] == ["doctor"]
    assert evidence.asked == [(OP,)]
    assert out.culprit.kind == "missing_custom_op" and out.culprit.op == OP
    doctor = next(s for s in out.stages if s.name == "doctor")
    assert render(doctor.finding) == render(out.culprit.summary) and doctor.tool is None  # no gdb for an exception
    assert all("load phase" in s.skipped for s in out.stages if s.name not in ("baseline", "doctor"))
    assert not any("register every custom-op library" in step for step in out.next_steps)


def test_the_scenario_manifest_matches_the_op_and_only_a_climbing_ladder_runs_the_doctor(tmp_path):
    from aoti_bisect.scenarios import culprit_matches
    expected = {"kind": "missing_custom_op", "pattern": "^bisectlab::fused_norm$"}
    assert culprit_matches(expected, {"kind": "missing_custom_op", "kernel": None, "op": OP})
    assert not culprit_matches(expected, {"kind": "missing_custom_op", "kernel": None, "op": "mylib::other"})

    specs = []

    def run_batch(batch, on_result, stop):
        for spec in batch:
            specs.append(spec)
            on_result(RunResult(spec, Outcome.FAILED, ProcessExit(1, None, False, 1.0, 0), "/r", "/r/output.log",
                                MISSING, "/c"))

    out = Ladder(["python", "repro.py"], run_batch, DoctorEvidence(None), Options(stages=("baseline",))).run()
    assert {s.stage for s in specs} == {"baseline"} and out.culprit is None
