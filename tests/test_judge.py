"""The judge (diagnose/judge.py): every run's evidence in one ledger, and what it convicts, one test per kind of
evidence, on captured real logs: a CPU kernel's uncaught index check (tests/logs/cpu/rare_index_abort.log, its
witness file and wrapper, torch 2.13.0+cpu), cuda-gdb's reading of a device assert's core dump and the lines the
device printed (tests/logs/cuda/, H200, torch 2.11), compute-sanitizer's report of the same assert."""
import itertools
import os
import signal

import pytest

from aoti_bisect.aoti import checks, wrapper
from aoti_bisect.aoti.cudacore import parse as parse_dump
from aoti_bisect.child.contract import CRASH_FILE
from aoti_bisect.diagnose import bounds
from aoti_bisect.diagnose.facts import Namer
from aoti_bisect.diagnose.findings import Stage
from aoti_bisect.diagnose.judge import EvidenceKind, Ledger, crash_verdict
from aoti_bisect.report.facts import render
from aoti_bisect.run.classify import classify, kernel_throw
from aoti_bisect.run.types import KERNEL_THROW, CrashSite, Outcome, ProcessExit, RunResult, RunSpec, Signature
from aoti_bisect.run.witness import Witness, assert_site, device_site

CPU = "tests/logs/cpu/"
CUDA = "tests/logs/cuda/"
_INDEX = itertools.count()


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def _graph(path: str) -> wrapper.WrapperGraph:
    return wrapper.parse_wrapper(_read(path), path, wrapper.extern_nodes_for(path))


def _run(stage: str, crash=None, kind="device_assert", also=None, failed=True) -> RunResult:
    spec = RunSpec(("python", "repro.py"), stage, next(_INDEX))
    sig = Signature(kind, "run", "boom", None, "f") if failed else None
    return RunResult(spec, Outcome.CRASHED if failed else Outcome.PASSED, ProcessExit(1, None, False, 1.0, 0),
                     f"runs/{spec.name}", "", sig, crash=crash, crash_also=also)


def _judge(stages, graph):
    ledger = Ledger()
    ledger.add_runs(stages, graph)
    return ledger, crash_verdict(ledger, graph)


def _cpu_abort_site(tmp_path) -> CrashSite:
    """What the witness makes of the captured run: SIGABRT as the kernel's own index check threw."""
    run = tmp_path / "run"
    run.mkdir()
    (run / CRASH_FILE).write_text(_read(CPU + "witness-rare_index_abort.txt"))
    witness = Witness(str(tmp_path / "w"), dict(os.environ))
    witness.cuda_gdb = None
    site, problem = witness.read(str(run), ProcessExit(None, signal.SIGABRT, False, 4.0, 0),
                                 _read(CPU + "rare_index_abort.log"))
    assert problem is None
    return site


def test_a_cpu_kernels_uncaught_index_check_names_that_kernel(tmp_path):
    log = _read(CPU + "rare_index_abort.log")
    outcome, sig = classify(log, ProcessExit(None, signal.SIGABRT, False, 4.0, len(log)))
    assert outcome is Outcome.CRASHED and sig.kind == "index_out_of_bounds"
    thrown = kernel_throw(log)
    assert (thrown.kernel, thrown.what) == ("cpp_fused_embedding_relu_0", "index out of bounds: 0 <= tmp2 < 20000L")
    site = _cpu_abort_site(tmp_path)
    assert (site.function, site.source, site.how) == ("cpp_fused_embedding_relu_0", KERNEL_THROW, "SIGABRT")
    assert site.location.endswith(".kernel.cpp:26")


def test_an_uncaught_exception_thrown_elsewhere_still_names_nothing(tmp_path):
    # A CUDA error rethrown at exit aborts the same way; no generated kernel threw it, so its throw is no site.
    run = tmp_path / "run"
    run.mkdir()
    (run / CRASH_FILE).write_text(_read(CPU + "witness-rare_index_abort.txt"))
    witness = Witness(str(tmp_path / "w"), dict(os.environ))
    witness.cuda_gdb = None
    log = _read(CPU + "rare_index_abort.log").replace("Exception raised from cpp_fused_embedding_relu_0",
                                                       "Exception raised from c10_cuda_check_implementation")
    site, problem = witness.read(str(run), ProcessExit(None, signal.SIGABRT, False, 4.0, 0), log)
    assert site is None and "nobody caught" in problem


def test_a_crash_in_a_later_stage_convicts_and_says_which_run(tmp_path):
    graph = _graph(CPU + "wrapper_rare_index_abort.cpp")
    site = _cpu_abort_site(tmp_path)
    base = Stage("baseline", {}, results=[_run("baseline", kind="index_out_of_bounds", failed=False)] * 1)
    sanity = Stage("sanity", {}, results=[_run("sanity", site, kind="index_out_of_bounds")])
    ledger, culprit = _judge([base, sanity], graph)
    assert culprit.kind == "kernel" and culprit.kernel == "cpp_fused_embedding_relu_0"
    said = render(culprit.summary)
    assert "1/1 crashed run(s) faulted in SIGABRT in cpp_fused_embedding_relu_0" in said
    assert f"first: {sanity.results[0].spec.name}, sanity stage" in said
    assert [e.kind for e in ledger.entries] == [EvidenceKind.CRASH]
    assert (ledger.entries[0].names, ledger.entries[0].run) == ("cpp_fused_embedding_relu_0", sanity.results[0].spec.name)


def test_the_crash_names_the_model_input_its_index_is_read_from():
    graph = _graph(CPU + "wrapper_rare_index_abort.cpp")
    bound = checks.index_bound("what(): index out of bounds: 0 <= tmp2 < 20000L")
    terms = checks.index_terms(_read(CPU + "rare_index_abort.kernel.cpp"), bound)
    given = bounds.index_given(bound, "cpp_fused_embedding_relu_0", graph, terms,
                               Namer({graph.inputs[0]: "ids"}, placeholders=tuple(graph.inputs)))
    assert given is not None
    assert "`ids`" in render(given) and "came in with that input" in render(given)
    # A computed index (a sum with a literal) is the walk's to follow: the source alone names no input.
    assert bounds.index_given(bound, "cpp_fused_embedding_relu_0", graph,
                              (checks.Term(1, terms[0].param), checks.Term(1, None, 5)), Namer()) is None


def _assert_dump() -> CrashSite:
    return device_site(parse_dump(_read(CUDA + "cudagdb-device-assert.log")))


def test_cuda_gdbs_spelling_of_a_kernel_matches_its_launch():
    graph = _graph(CUDA + "wrapper_device_assert_oob_level3.cpp")
    # cuda-gdb writes a `.` where the launch has a run of underscores (`triton_per_fused.to_copy_0`).
    dotted = _read(CUDA + "cudagdb-device-assert.log").replace("triton_poi_fused_add_index", "triton_poi_fused.add_index")
    site = device_site(parse_dump(dotted))
    assert site.function.startswith("triton_poi_fused.add_index")
    _, culprit = _judge([Stage("baseline", {}, results=[_run("baseline", site)])], graph)
    assert culprit.kind == "kernel" and culprit.kernel == "triton_poi_fused_add_index_mul_sin_0"


def test_two_accounts_naming_two_launches_convict_nothing():
    graph = _graph(CUDA + "wrapper_device_assert_oob_level3.cpp")
    other = next(l.name for l in graph.launches if l.name != "triton_poi_fused_add_index_mul_sin_0")
    printed = CrashSite("Assertion `index out of bounds` failed", other, "k.py:9", None, "", "device-side assert's "
                        "printed lines")
    ledger, culprit = _judge([Stage("baseline", {}, results=[_run("baseline", _assert_dump(), also=printed)])],
                             graph)
    assert culprit is None
    assert [e.kind for e in ledger.entries] == [EvidenceKind.CONTRADICTION]
    assert "accounts disagree" in render(ledger.entries[0].fact)


def test_when_one_account_is_no_launch_the_one_that_is_convicts():
    graph = _graph(CUDA + "wrapper_device_assert_oob_level3.cpp")
    stray = CrashSite("Warp Assert", "triton_red_fused_never_launched_7", None, None, "", "CUDA core dump")
    printed = assert_site("triton_poi_fused_add_index_mul_sin_0", _read(CUDA + "device-assert-index-out-of-bounds.log"))
    _, culprit = _judge([Stage("baseline", {}, results=[_run("baseline", stray, also=printed)])], graph)
    assert culprit.kernel == "triton_poi_fused_add_index_mul_sin_0"


def test_a_dump_of_a_kernel_the_wrapper_never_launches_is_stated_and_convicts_nothing():
    graph = _graph(CUDA + "wrapper_device_assert_oob_level3.cpp")
    stray = CrashSite("Warp Assert", "triton_red_fused_never_launched_7", None, None, "", "CUDA core dump")
    ledger, culprit = _judge([Stage("baseline", {}, results=[_run("baseline", stray)])], graph)
    assert culprit is None
    assert "never launches" in render(ledger.entries[0].fact)


def test_a_compute_sanitizer_device_assert_convicts_the_kernel_its_printed_assert_names():
    # The checker's own frame is __assertfail, which names no kernel; the checked run printed the assert's source
    # file and line, which the harness reads into the run's crash site, and the judge convicts from it.
    log = _read(CUDA + "memcheck_device_assert.log")
    site = assert_site("triton_poi_fused_add_index_mul_sin_0", log)
    assert site is not None and site.location.endswith(".py:35")
    graph = _graph(CUDA + "wrapper_device_assert_oob_level3.cpp")
    base = Stage("baseline", {}, results=[_run("baseline", failed=False)])
    checked = Stage("memcheck", {}, results=[_run("memcheck", site)])
    _, culprit = _judge([base, checked], graph)
    assert culprit.kind == "kernel" and culprit.kernel == "triton_poi_fused_add_index_mul_sin_0"
    assert "memcheck stage" in render(culprit.summary)


def test_a_failure_that_turns_into_a_memory_fault_under_other_flags_is_on_the_ledger():
    base = Stage("baseline", {}, results=[_run("baseline", kind="python_exception")])
    det = Stage("determinism", {"CUDA_LAUNCH_BLOCKING": "1"}, results=[_run("determinism",
                                                                              kind="illegal_memory_access")])
    ledger = Ledger()
    ledger.add_runs([base, det], None)
    turned = ledger.memory_fault()
    assert turned is not None and turned.stage == "determinism"
    assert "failed with illegal_memory_access, not with the baseline's python_exception" in render(turned.fact)


def test_no_crash_no_conviction():
    ledger, culprit = _judge([Stage("baseline", {}, results=[_run("baseline", kind="nan_inf")])], None)
    assert culprit is None and ledger.entries == []


def test_the_ledger_and_the_entries_that_convicted_reach_report_json_and_the_first_screen(tmp_path):
    # A bisection whose crash came in the sanity stage: report.json carries the ledger, the culprit the entries it
    # was convicted from, and the first screen's "Convicted by" names the run and its stage.
    from aoti_bisect.diagnose.findings import Findings
    from aoti_bisect.report.markdown import render_markdown
    from aoti_bisect.report.model import Report
    from aoti_bisect.report.record import ReportRecord
    from aoti_bisect.stats import Rate
    from aoti_bisect.verdict import Verdict
    graph = _graph(CPU + "wrapper_rare_index_abort.cpp")
    site = CrashSite("SIGABRT", "cpp_fused_embedding_relu_0", "k.cpp:26", None, "index out of bounds", KERNEL_THROW)
    base = Stage("baseline", {}, results=[_run("baseline", kind="index_out_of_bounds")])
    sanity = Stage("sanity", {}, results=[_run("sanity", site, kind="index_out_of_bounds")])
    ledger, culprit = _judge([base, sanity], graph)
    out = Findings(Verdict.REPRODUCED, base.results[0].signature, Rate(1, 1), [base, sanity], culprit=culprit,
                   ledger=list(ledger.entries))
    data = Report.from_findings(str(tmp_path), ["python", "repro.py"], out).data
    run = sanity.results[0].spec.name
    assert [e["run"] for e in data["ledger"]] == [run] and data["ledger"][0]["kind"] == "crash"
    assert data["culprit"]["convicted_by"] == [{"kind": "crash", "stage": "sanity", "run": run,
                                                "names": "cpp_fused_embedding_relu_0",
                                                "text": data["ledger"][0]["text"]}]
    record = ReportRecord.from_json(data)
    assert record.ledger[0].run == run and record.culprit.convicted_by[0].stage == "sanity"
    first = render_markdown(data).split("\n## ")[0]
    assert f"evidence from run {run} (sanity, crash)" in first


def test_a_culprit_holds_its_kind_as_the_enum_and_refuses_a_word_that_is_none():
    from aoti_bisect.diagnose.findings import Culprit, CulpritKind

    assert Culprit("model_input").kind is CulpritKind.MODEL_INPUT  # given as the word report.json holds
    with pytest.raises(ValueError, match="sideways"):
        Culprit("sideways")
