"""Packages the run did not build: re-instrumenting a .pt2 from its own sources (aoti/reinstrument.py,
run/rebuild.py), the hook loading the copy and keeping fixed-path compiles private (child/hook/redirect.py),
the ladder handing copies to the trace and inspect stages, and bad packages refused in one line.

The transforms are checked against what torch 2.13 itself generated (tests/data/prebuilt/: the wrapper of a
package built without flags, and the run_impl of the same model built at printer level 3 and at level 2 with
a kernel filter). Hook tests run real children with a stand-in `torch` folder, as tests/test_hook.py does.
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
import zipfile

import pytest

from aoti_bisect.report.facts import render
from aoti_bisect.aoti import printer, reinstrument, wrapper
from aoti_bisect.aoti.hook_record import HookRecord, PackageEvent, read_hook
from aoti_bisect.aoti.reinstrument import Unusable
from aoti_bisect.diagnose.evidence import Instrumented
from aoti_bisect.diagnose.context import Options
from aoti_bisect.diagnose.ladder import Ladder
from aoti_bisect.run import rebuild
from aoti_bisect.run.harness import Harness
from aoti_bisect.run.types import Outcome, RunSpec

DATA = os.path.join(os.path.dirname(__file__), "data", "prebuilt")
KERNELS = ("cpp_fused_add_log_mul_relu_sub_0", "aoti_torch_cpu_mm_out")


def data(name):
    with open(os.path.join(DATA, name)) as f:
        return f.read()


def run_impl(text):
    start = text.find("void AOTInductorModel::run_impl(")
    return text[start: text.find("} // AOTInductorModel::run_impl", start)]


# -- the printer's statements, as torch generates them --------------------------------------------------------

def test_level3_copy_prints_exactly_what_a_level3_compile_generates():
    assert run_impl(reinstrument.instrument(data("plain.wrapper.cpp"), 3)) == data("level3.run_impl.cpp")


def test_level2_copy_prints_exactly_what_a_filtered_level2_compile_generates():
    mine = reinstrument.instrument(data("plain.wrapper.cpp"), 2, tuple(k.upper() for k in KERNELS))
    assert run_impl(mine) == data("level2.run_impl.cpp")


def test_the_copy_has_the_same_launch_graph_and_the_rest_of_the_source_is_untouched():
    plain = data("plain.wrapper.cpp")
    mine = reinstrument.instrument(plain, 3)
    assert [l.name for l in wrapper.parse_wrapper(mine).launches] == \
        [l.name for l in wrapper.parse_wrapper(plain).launches] == \
        ["cpp_fused_add_log_mul_relu_sub_0", "aoti_torch_cpu_mm_out", "cpp_fused_mul_tanh_1"]
    assert mine.replace(run_impl(mine), "") == plain.replace(run_impl(plain), "")


def test_the_recorded_commands_are_rewritten_onto_our_files(tmp_path):
    text = data("plain.wrapper.cpp").replace("/tmp/torchinductor_root/precompiled_headers", str(tmp_path / "gone"))
    commands = reinstrument.recorded_commands(text, "wrapper")
    assert commands.compile[0] == "g++" and commands.compile[-2] == "-o"
    argv = reinstrument.compile_command(commands.compile, "/w/x.wrapper.cpp", "/w/x.wrapper.o")
    assert argv[1] == "/w/x.wrapper.cpp" and argv[argv.index("-o") + 1] == "/w/x.wrapper.o"
    assert "-include" not in argv  # the recorded precompiled header is gone: the source includes the same
    header = tmp_path / "here.h"
    header.write_text("")
    kept = reinstrument.compile_command(("g++", "a.cpp", "-include", str(header), "-o", "a.o"), "b.cpp", "b.o")
    assert kept == ["g++", "b.cpp", "-include", str(header), "-o", "b.o"]
    assert sum(a.endswith(".cpp") for a in argv) == 1
    link = reinstrument.link_command(commands.link, {".wrapper.o": "W", ".kernel.o": "K", ".weights.o": "C"},
                                     "/w/x.so")
    assert link[1:4] == ["W", "K", "C"] and link[link.index("-o") + 1] == "/w/x.so" and "-shared" in link
    with pytest.raises(Unusable, match="records no compile and link command"):
        reinstrument.recorded_commands("int main() {}", "wrapper")


def test_the_weights_linked_into_a_library_are_read_back(tmp_path):
    """A real library linked from the assembler that rebuild.py writes: the blob comes back byte for byte."""
    if shutil.which("g++") is None:
        pytest.skip("no g++")
    blob = bytes(range(256)) * 40 + b"\x00tail"
    (tmp_path / "w.bin").write_bytes(blob)
    (tmp_path / "w.S").write_text(reinstrument.weights_asm(str(tmp_path / "w.bin")))
    subprocess.run(["g++", "-shared", "-fPIC", str(tmp_path / "w.S"), "-o", str(tmp_path / "w.so")], check=True)
    so = (tmp_path / "w.so").read_bytes()
    assert reinstrument.weights(so) == reinstrument.Weights(blob, b"")
    padded = so + b" " * (16384 - len(so) % 16384) + b"mmapped"
    assert reinstrument.weights(padded).tail == b"mmapped"
    with pytest.raises(Unusable, match="the package's .so is damaged"):
        reinstrument.weights(so[: len(so) // 3])
    with pytest.raises(Unusable, match="no _binary_constants_bin symbols"):
        reinstrument.weights(open(shutil.which("g++"), "rb").read())


# -- bad packages: one line, the original untouched ------------------------------------------------------------

def package(tmp_path, device="cpu", name="pkg.pt2", sources=True, text=None):
    path = tmp_path / name
    with zipfile.ZipFile(path, "w") as z:
        root = "pkg/data/aotinductor/model/"
        if sources:
            z.writestr(root + "abc.wrapper.cpp", text or data("plain.wrapper.cpp"))
        z.writestr(root + "abc.wrapper.so", b"\x7fELF not really")
        z.writestr(root + "abc.wrapper_metadata.json", json.dumps({"AOTI_DEVICE_KEY": device}))
        z.writestr("pkg/archive_format", "pt2")
    return str(path)


@pytest.mark.parametrize("make, reason", [
    (lambda t: (t / "a.txt").write_text("hello") and str(t / "a.txt"), "is not a .pt2 package"),
    (lambda t: str(t), "is a directory"),
    (lambda t: str(t / "absent.pt2"), "does not exist"),
    (lambda t: _truncated(package(t)), "is not a .pt2 package"),
    (lambda t: _foreign_zip(t), "holds no AOTInductor model named 'model' (not an AOTInductor package)"),
    (lambda t: package(t, device="xpu"), "for device 'xpu': only CPU and CUDA packages"),
    (lambda t: package(t, sources=False), "holds no generated wrapper source"),
])
def test_a_package_that_cannot_be_reinstrumented_gets_one_line(tmp_path, make, reason):
    path = make(tmp_path)
    before = open(path, "rb").read() if os.path.isfile(path) else None
    with pytest.raises(Unusable) as caught:
        reinstrument.read_package(path)
    assert reason in str(caught.value) and "\n" not in str(caught.value)
    assert reinstrument.device_of(path) == ("xpu" if "xpu" in reason else "cpu" if "wrapper source" in reason
                                            else None)
    assert (open(path, "rb").read() if os.path.isfile(path) else None) == before


def _truncated(path):
    blob = open(path, "rb").read()
    with open(path, "wb") as f:
        f.write(blob[: len(blob) // 2])
    return path


def _foreign_zip(t):
    with zipfile.ZipFile(t / "other.zip", "w") as z:
        z.writestr("README", "a zip, but no package")
    return str(t / "other.zip")


def test_a_package_built_elsewhere_fails_the_build_in_one_line_and_stays_untouched(tmp_path):
    """A package whose recorded torch folders are absent here (another machine, another torch install), in a
    read-only folder: the copy is refused with the folder named, nothing is written beside the original."""
    ro = tmp_path / "ro"
    ro.mkdir()
    text = data("plain.wrapper.cpp").replace("/site-packages/torch/include", "/elsewhere/torch/include")
    path = package(ro, text=text)
    os.chmod(ro, 0o555)
    try:
        before = hashlib.sha256(open(path, "rb").read()).hexdigest()
        copy = rebuild.build(path, before, 3, (), str(tmp_path / "out"), dict(os.environ))
        assert copy.path is None and "\n" not in copy.problem
        # the fake .so fails first; a real one would fail on the folder: both are one line naming the cause
        assert "not a 64-bit little-endian ELF" in copy.problem
        assert hashlib.sha256(open(path, "rb").read()).hexdigest() == before and os.listdir(ro) == ["pkg.pt2"]
    finally:
        os.chmod(ro, 0o755)
    assert reinstrument.missing_paths(["g++", "-I/elsewhere/torch/include", "-L", "/no/lib", f"-I{tmp_path}"]) \
        == ["/elsewhere/torch/include", "/no/lib"]


# -- the hook: loads redirected to a copy, fixed-path compiles kept private --------------------------------------

FAKE_INDUCTOR = '''
def aoti_compile_and_package(ep, _a=None, _k=None, *, package_path=None, inductor_configs=None):
    with open(package_path, "wb") as f:
        f.write(b"built " + ep.encode())
    return package_path

def aoti_load_package(path, run_single_threaded=False, device_index=-1):
    with open(path, "rb") as f:
        return f.read().decode()
'''


@pytest.fixture
def fake_torch(tmp_path):
    root = tmp_path / "fake"
    (root / "torch" / "_inductor").mkdir(parents=True)
    (root / "torch" / "__init__.py").write_text("")
    (root / "torch" / "_inductor" / "__init__.py").write_text(FAKE_INDUCTOR)
    return str(root)


def hooked(tmp_path, argv, env, stage="trace", index=0):
    harness = Harness(str(tmp_path / "r"), base_env=env)
    return harness.run(RunSpec(tuple(argv), stage, index, (), 120.0, stage != "baseline"))


def test_a_load_of_a_package_the_run_did_not_build_gets_the_instrumented_copy(tmp_path, fake_torch, write_script):
    original, copy = tmp_path / "model.pt2", tmp_path / "copy.pt2"
    original.write_bytes(b"original")
    copy.write_bytes(b"instrumented")
    mapping = tmp_path / "redirect.json"
    mapping.write_text(json.dumps({hashlib.sha256(b"original").hexdigest(): str(copy)}))
    script = write_script("load.py", "import sys, torch._inductor\nprint(torch._inductor.aoti_load_package(sys.argv[1]))\n")
    env = {**os.environ, "PYTHONPATH": fake_torch}
    plain = hooked(tmp_path / "a", [sys.executable, script, str(original)], env)
    redirected = hooked(tmp_path / "b", [sys.executable, script, str(original)],
                        {**env, "AOTI_BISECT_REDIRECT": str(mapping)}, index=1)
    # The tool owns AOTI_BISECT_REDIRECT: one left in the user's shell reaches no run.
    assert open(redirected.log_path).read() == open(plain.log_path).read() == "original\n"
    harness = Harness(str(tmp_path / "c"), base_env=env)
    spec = RunSpec((sys.executable, script, str(original)), "trace", 2, (("AOTI_BISECT_REDIRECT", str(mapping)),),
                   120.0, True)
    result = harness.run(spec)
    assert open(result.log_path).read() == "instrumented\n"
    (event,) = read_hook(result.run_dir).events
    assert (event.path, event.built_here, event.redirect, event.served_from) == \
        (str(original), False, "instrumented", str(copy))
    assert original.read_bytes() == b"original"


def test_a_compile_to_a_fixed_path_stays_private_to_its_run(tmp_path, fake_torch, write_script):
    cache = tmp_path / "cache" / "model.pt2"
    cache.parent.mkdir()
    script = write_script("cached.py", """
        import os, sys, torch._inductor
        path = sys.argv[1]
        if not os.path.exists(path):
            torch._inductor.aoti_compile_and_package(sys.argv[2], package_path=path)
        print(torch._inductor.aoti_load_package(path))
    """)
    env = {**os.environ, "PYTHONPATH": fake_torch}
    first = hooked(tmp_path / "a", [sys.executable, script, str(cache), "sanity-flags"], env)
    second = hooked(tmp_path / "b", [sys.executable, script, str(cache), "trace-flags"], env, index=1)
    assert open(first.log_path).read() == "built sanity-flags\n" and open(second.log_path).read() == "built trace-flags\n"
    assert not cache.exists()  # no hooked run left anything where other runs (and flag sets) would find it
    compiled, loaded = read_hook(second.run_dir).events
    assert compiled.requested_path == str(cache) and compiled.path.startswith(second.run_dir + os.sep)
    assert compiled.redirect == "private"
    assert (loaded.path, loaded.served_from, loaded.redirect, loaded.built_here) == \
        (str(cache), compiled.path, "private", True)
    # A baseline run (no hook) caches it the user's way; a hooked run then sees it as a package it did not build.
    base = hooked(tmp_path / "c", [sys.executable, script, str(cache), "user"], env, stage="baseline", index=2)
    assert open(base.log_path).read() == "built user\n" and cache.read_bytes() == b"built user"
    later = hooked(tmp_path / "d", [sys.executable, script, str(cache), "x"], env, index=3)
    (event,) = read_hook(later.run_dir).events
    assert (event.compiled, event.built_here, event.redirect) == (False, False, None)


# -- the ladder: copies before the trace and inspect stages ------------------------------------------------------

class Prebuilt:
    """Evidence of runs that load /pkg/model.pt2 without building it; records what it was asked to build."""

    def __init__(self, problem=None, failing_level=3, finished=False):
        self.finished = finished  # the traced launch finished: the runs ran to the end (a NaN, not a crash)
        self.asked = []
        self.prepared = []
        self.problem = problem
        self.failing_level = failing_level

    def hook(self, result):
        return HookRecord((PackageEvent("aoti_load_package", "returned", "/pkg/model.pt2", "ab" * 32, False),))

    def prepare(self, packages, level, walk=None):
        self.prepared.append(([p.path for p in packages], level, len(self.asked)))
        if walk is not None:  # the copy's graph is the wrapper's the trace's runs see
            self.prepared.append(([p.path for p in packages], 2, walk(wrapper.parse_wrapper(data("plain.wrapper.cpp"))),
                                  len(self.asked)))

    def instrumented(self, packages, level, kernels):
        self.asked.append(([p.path for p in packages], level, kernels))
        if self.problem and level == self.failing_level:
            return Instrumented(problems=(f"/pkg/model.pt2 cannot be re-instrumented: {self.problem}",))
        return Instrumented({"AOTI_BISECT_REDIRECT": f"/out/redirect-L{level}.json"})

    def package_device(self, path):
        return "cpu"

    def sanity(self, result):
        return None

    def trace(self, result):
        copied = "AOTI_BISECT_REDIRECT" in result.spec.env_dict
        lines = [f"[ before_launch: {KERNELS[0]} ]"] + ([f"[ after_launch: {KERNELS[0]} ]"] if self.finished else [])
        return printer.parse_trace(lines if copied else [])

    def graph(self, result):  # the copy's wrapper: a run that loaded none compiled none
        copied = "AOTI_BISECT_REDIRECT" in result.spec.env_dict
        return wrapper.parse_wrapper(data("plain.wrapper.cpp")) if copied else None

    def level2(self, result, bound):
        return {}, {}

    def kernel_source(self, kernel, results, max_lines=80):
        return None


def fail_always(specs, on_result, stop):
    from aoti_bisect.run.types import ProcessExit, RunResult, Signature
    done = []
    for spec in specs:
        if stop(done):
            return
        r = RunResult(spec, Outcome.CRASHED, ProcessExit(None, 11, False, 0.1, 0), "r", "r/output.log",
                      Signature("segfault", "run", "SIGSEGV", None, "f"), "cache")
        done.append(r)
        on_result(r)


def test_the_ladder_hands_the_trace_stage_a_copy_of_the_package_the_runs_did_not_build():
    seen = Prebuilt()
    out = Ladder(["python", "repro.py"], fail_always, seen, Options(runs=2, max_runs=2)).run()
    trace = next(s for s in out.stages if s.name == "trace")
    inspect = next(s for s in out.stages if s.name == "inspect")
    assert trace.env["AOTI_BISECT_REDIRECT"] == "/out/redirect-L3.json"
    # A CPU package: no CUDA flags, no determinism runs, though no run compiled a wrapper.
    assert "CUDA_LAUNCH_BLOCKING" not in trace.env
    assert next(s for s in out.stages if s.name == "determinism").skipped.startswith("CPU-only repro")
    assert inspect.env["AOTI_BISECT_REDIRECT"] == "/out/redirect-L2.json"
    assert seen.asked == [(["/pkg/model.pt2"], 3, ()), (["/pkg/model.pt2"], 2, (KERNELS[0],))]
    # The trace's copy started building once a hooked run (sanity's) showed the package, before the trace asked.
    # The walk starts where the trace names the unfinished launch: its copy waits for the trace.
    assert seen.prepared == [(["/pkg/model.pt2"], 3, 0)]
    assert render(trace.finding).startswith(f"last launch without after_launch: {KERNELS[0]}")
    assert out.culprit.kind == "kernel" and out.culprit.kernel == KERNELS[0]


def test_a_nan_in_a_package_the_runs_did_not_build_has_the_walks_first_copy_built_before_the_trace_runs():
    # prebuilt_package's shape: no crash, so the walk starts at the graph's outputs, which the trace's copy shows.
    def nan_always(specs, on_result, stop):
        from aoti_bisect.run.types import ProcessExit, RunResult, Signature
        done = []
        for spec in specs:
            if stop(done):
                return
            r = RunResult(spec, Outcome.FAILED, ProcessExit(1, None, False, 0.1, 0), "r", "r/output.log",
                          Signature("nan_inf", "run", "non-finite output", None, "n"), "cache")
            done.append(r)
            on_result(r)
    seen = Prebuilt(finished=True)
    Ladder(["python", "repro.py"], nan_always, seen,
           Options(runs=2, max_runs=2, stages=("baseline", "sanity", "trace", "inspect"))).run()
    (trace_copy, walk_copy) = seen.prepared
    inspected = [a for a in seen.asked if a[1] == 2]
    assert trace_copy[1:] == (3, 0) and walk_copy[1] == 2
    # Prepared before the trace asked for its copy, for exactly the kernels the walk's first compile then asked for.
    assert walk_copy[3] == 0 and inspected and walk_copy[2] == inspected[0][2]


def test_a_copy_prepared_beside_the_runs_is_built_once_and_the_stage_that_asks_waits_for_it(tmp_path, monkeypatch):
    from aoti_bisect.diagnose.evidence import RunEvidence
    started, release = threading.Event(), threading.Event()
    calls = []

    def build(original, sha256, level, kernels, folder, env, cancel):
        calls.append((level, kernels))
        started.set()
        release.wait(10)
        os.makedirs(os.path.join(folder, "sources"))
        shutil.copy(os.path.join(DATA, "plain.wrapper.cpp"),
                    os.path.join(folder, "sources", "model.wrapper.cpp"))
        return rebuild.Copy(original, sha256, path=os.path.join(folder, "model.pt2"),
                            sources=os.path.join(folder, "sources"))
    monkeypatch.setattr(rebuild, "build", build)
    evidence = RunEvidence(str(tmp_path / "prebuilt"))
    package = PackageEvent("aoti_load_package", "returned", "/pkg/model.pt2", "ab" * 32, False)
    evidence.prepare([package], reinstrument.TRACE_LEVEL)
    assert started.wait(10)  # building in the background while the caller goes on
    threading.Timer(0.2, release.set).start()
    got = evidence.instrumented([package], reinstrument.TRACE_LEVEL, ())
    assert calls == [(reinstrument.TRACE_LEVEL, ())] and got.copies[0].path.endswith("model.pt2")
    assert os.path.isfile(got.env["AOTI_BISECT_REDIRECT"])
    # The walk's first copy follows in the builder, for the kernels picked from the first copy's launch graph.
    picked, ready = [], threading.Event()

    def walk(graph):
        picked.append(graph)
        ready.set()
        return (KERNELS[0],)
    evidence.prepare([package], reinstrument.TRACE_LEVEL, walk)
    assert ready.wait(10)
    evidence.instrumented([package], reinstrument.INSPECT_LEVEL, (KERNELS[0],))
    assert KERNELS[0] in [launch.name for launch in picked[0].launches]
    assert calls == [(reinstrument.TRACE_LEVEL, ()), (reinstrument.INSPECT_LEVEL, (KERNELS[0],))]


def test_a_package_that_cannot_be_rebuilt_is_named_with_why_in_the_trace_finding():
    out = Ladder(["python", "repro.py"], fail_always, Prebuilt("no compiler g++ on PATH"),
                 Options(runs=2, max_runs=2)).run()
    trace = next(s for s in out.stages if s.name == "trace")
    assert "AOTI_BISECT_REDIRECT" not in trace.env
    assert out.culprit.kind == "unknown"
    assert "/pkg/model.pt2 cannot be re-instrumented: no compiler g++ on PATH" in render(trace.finding)


# -- the scenario manifest's setup step -------------------------------------------------------------------------

def test_a_scenarios_setup_runs_once_in_its_own_folder_and_its_args_name_that_folder(tmp_path, write_script):
    from aoti_bisect.scenarios import load_manifest, run_setup
    build = write_script("build.py", "import os, sys\nopen(sys.argv[1], 'w').write(os.environ['TMPDIR'])\n")
    manifest = tmp_path / "manifest.toml"
    manifest.write_text(f'''
        [[scenario]]
        name = "s"
        script = "cpu/x.py"
        device = "cpu"
        demonstrates = "d"
        verdict = "reproduced"
        setup = ["{build}", "{{setup}}/model.pt2"]
        args = ["{{setup}}/model.pt2"]
    ''')
    (s,) = load_manifest(str(manifest))
    assert s.setup == (build, "{setup}/model.pt2") and s.args == ("{setup}/model.pt2",)
    folder = str(tmp_path / "check" / "setup" / "s")
    assert run_setup(s, folder) is None
    assert open(os.path.join(folder, "model.pt2")).read() == os.path.join(folder, "tmp")
    broken = write_script("broken.py", "raise SystemExit(4)\n")
    import dataclasses
    problem = run_setup(dataclasses.replace(s, setup=(broken,)), str(tmp_path / "b"))
    assert problem.startswith("setup ") and "failed (exit 4)" in problem and "\n" not in problem
    assert run_setup(dataclasses.replace(s, setup=()), str(tmp_path / "none")) is None
    assert not os.path.exists(tmp_path / "none")


def test_the_bundled_prebuilt_scenarios_have_their_setup():
    from aoti_bisect.scenarios import SCENARIO_DIR, load_bundled
    found = {s.name: s for s in load_bundled()}
    for name in ("fixed_path_cache", "prebuilt_package"):
        s = found[name]
        assert os.path.isfile(os.path.join(SCENARIO_DIR, s.setup[0])) and "{setup}/model.pt2" in s.args


LOGS = os.path.join(os.path.dirname(__file__), "logs", "cpu")


@pytest.mark.parametrize("name, level", [("wrapper_index_oob_level3.cpp", 3), ("wrapper_nan_after_matmul_level2.cpp", 2),
                                         ("wrapper_empty_batch_level2.cpp", 2),
                                         ("wrapper_symbolic_index_bound_level2.cpp", 2)])
def test_other_captured_wrappers_stripped_of_their_printer_lines_are_instrumented_back_to_themselves(name, level):
    """More real models (dynamic sizes, a gather, scalars in the call): remove what the printer generated and
    the transform puts back exactly that, with the filter the captured compile had."""
    with open(os.path.join(LOGS, name)) as f:
        captured = f.read()
    body = run_impl(captured)
    printed = [line for line in body.split("\n") if "print_tensor_handle(" in line or "printf(\"[ " in line]
    assert printed
    plain = captured.replace(body, "\n".join(line for line in body.split("\n") if line not in printed))
    kernels = tuple({line.split(" - ")[1] for line in printed if "_launch - " in line})
    assert run_impl(reinstrument.instrument(plain, level, kernels)) == body


# 46 s: the e2e fixed_path_cache scenario makes a real fixed-path compile private and still convicts its kernel;
# keeps `python -m pytest -q` under CI's 30 minutes (see the README's set-up section).
@pytest.mark.heavy
def test_real_fixed_path_compile_is_private_and_measures_the_same(tmp_path):
    """A real repro compiling to a fixed path: hooked, it compiles into its run folder and fails exactly as the
    unhooked run (the user's way, which writes the fixed path) does; the fixed path never sees the hooked run."""
    repro = os.path.join(os.path.dirname(os.path.dirname(__file__)), "scenarios", "cpu", "fixed_path_cache.py")
    fixed = str(tmp_path / "elsewhere" / "model.pt2")
    os.makedirs(os.path.dirname(fixed))
    cache = str(tmp_path / "cache")
    on = Harness(str(tmp_path / "run"), cache_root=cache).run(RunSpec((sys.executable, repro, fixed), "sanity", 0,
                                                                      (), 600.0, True))
    assert not os.path.exists(fixed)
    off = Harness(str(tmp_path / "run"), cache_root=cache).run(RunSpec((sys.executable, repro, fixed), "baseline", 1,
                                                                       (), 600.0))
    assert os.path.exists(fixed)
    assert on.exit.returncode == off.exit.returncode != 0
    assert on.signature.fingerprint == off.signature.fingerprint and on.signature.kind == "index_out_of_bounds"
    compiled, loaded = read_hook(on.run_dir).events
    assert compiled.requested_path == fixed and compiled.path.startswith(on.run_dir + os.sep)
    assert (loaded.redirect, loaded.built_here, loaded.served_from) == ("private", True, compiled.path)


def test_a_copy_that_cannot_be_built_for_an_inspection_is_said_in_its_finding():
    out = Ladder(["python", "repro.py"], fail_always, Prebuilt("rebuilding the package's wrapper failed (exit 1)", 2),
                 Options(runs=2, max_runs=2)).run()
    inspect = next(s for s in out.stages if s.name == "inspect")
    assert "AOTI_BISECT_REDIRECT" not in inspect.env
    assert render(inspect.finding).startswith("/pkg/model.pt2 cannot be re-instrumented: rebuilding the package's wrapper")
    assert out.culprit.kernel == KERNELS[0]  # the trace, through its copy, still named it


# -- a real CUDA package (built on the lent H100, torch 2.11.0+cu130: docs/evidence/cuda-notes.md §7) -----------------

CUDA_PACKAGE = os.path.join(os.path.dirname(__file__), "data", "cuda-prebuilt-nan.pt2")


def test_a_cuda_package_is_rebuilt_from_its_wrapper_and_keeps_its_cubins():
    package = reinstrument.read_package(CUDA_PACKAGE)
    assert package.device == "cuda" and package.kernel and package.so.endswith(".wrapper.so")
    with zipfile.ZipFile(CUDA_PACKAGE) as z:
        wrapper = z.read(package.wrapper).decode()
        so = z.read(package.so)
        cubins = [n for n in z.namelist() if n.endswith(".cubin")]
    traced = reinstrument.instrument(wrapper, reinstrument.TRACE_LEVEL)
    assert [line.strip() for line in traced.splitlines() if "_launch: " in line] == [
        f'printf("[ {when}: {k} ]\\n");' for k in ("triton_poi_fused_add_log_mul_relu_sub_0", "aoti_torch_cuda_mm_out",
                                                   "triton_poi_fused_mul_tanh_1") for when in ("before_launch", "after_launch")]
    inspected = reinstrument.instrument(wrapper, reinstrument.INSPECT_LEVEL, ("triton_poi_fused_add_log_mul_relu_sub_0",))
    assert 'aoti_torch_print_tensor_handle(buf0, "after_launch - triton_poi_fused_add_log_mul_relu_sub_0 - buf0");' \
        in inspected and "aoti_torch_cuda_mm_out -" not in inspected
    assert traced.count("loadKernel(") == wrapper.count("loadKernel(") > 0  # the cubins load as they did
    assert len(cubins) == 2 and reinstrument.weights(so).blob  # the weights come over from the original .so
    commands = reinstrument.recorded_commands(wrapper, "wrapper source")
    assert commands.compile[0] == commands.link[0] == "g++" and "-lcuda" in commands.link
