"""The load doctor's toolchain experiment: a package that crashes while loading, rebuilt from its own sources by
each other C++ toolchain on the machine and loaded in a fresh process; the doctor names the one that loads.

Why a wrapper toolchain models the GPU machine's failure: there, packages built by the image's /opt/gcc g++
segfaulted while loading, because code of that toolchain's runtime (inlined into the package's library) ran in
a process whose libstdc++ is the system's. The crashing toolchain here
(scenarios/cpu/build_with_crashing_toolchain.py) is the system g++ that also links, into every library it
builds, an object whose constructor raises SIGSEGV: code of the toolchain that crashes the loading process as soon as the library is loaded, with
nothing of the model at fault. The package's own sources rebuilt by /usr/bin/g++ load, as /usr/bin/g++'s did
there (CXX=g++).
"""
import hashlib
import importlib.util
import os
import subprocess
import sys
import zipfile

import pytest

from aoti_bisect.report.facts import render, render_all
from aoti_bisect.aoti.hook_record import HookRecord
from aoti_bisect.aoti.package import PackageFacts, read_package
from aoti_bisect.diagnose.context import Options
from aoti_bisect.diagnose.ladder import Ladder
from aoti_bisect.diagnose.loaddoctor import diagnose_load
from aoti_bisect.run import toolchains
from aoti_bisect.run.toolchains import Experiment, Trial
from aoti_bisect.run.types import Outcome, ProcessExit, RunResult, Signature
from aoti_bisect.verdict import Verdict

SCENARIOS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scenarios", "cpu")
SEGFAULT = Signature("segfault", "load", "killed by SIGSEGV")
FRESH = {"torch": "2.13.0+cpu", "ops": {}, "cpu_capability": "AVX2", "cuda": False}
FACTS = PackageFacts("/data/model.pt2", (), (("AOTI_DEVICE_KEY", "cpu"),), "GCC: (GCC) 13.2.0")
BUILT_BY = "/opt/gcc/bin/g++"


# -- the decision, from records ---------------------------------------------------------------------------------

def test_the_toolchain_whose_copy_loads_is_named():
    exp = Experiment(BUILT_BY, (Trial("/usr/bin/clang++-14", "clang version 14.0.6", False,
                                      "rebuilding the package's wrapper failed (exit 1)"),
                                Trial("/usr/bin/g++-12", "g++ (Debian 12.2.0-14) 12.2.0", True, "loads")))
    c = diagnose_load(SEGFAULT, FACTS, FRESH, [], None, exp)
    assert c.kind == "load_environment"
    assert render(c.summary) == ("the package built by /opt/gcc/bin/g++ (GCC: (GCC) 13.2.0) crashes while loading; rebuilt "
                         "from its own sources with /usr/bin/g++-12 (g++ (Debian 12.2.0-14) 12.2.0) it loads: "
                         "rebuild it with that toolchain (CXX=/usr/bin/g++-12)")
    assert "/usr/bin/clang++-14 (clang version 14.0.6): rebuilding the package's wrapper failed (exit 1)" in render_all(c.evidence)


def test_no_copy_that_loads_convicts_nothing_and_says_what_was_tried():
    exp = Experiment(BUILT_BY, (Trial("/usr/bin/g++-12", "g++ 12", False, "does not load (segfault: ...)"),))
    c = diagnose_load(SEGFAULT, FACTS, FRESH, [], None, exp)
    assert c.kind == "unknown"
    assert render(c.summary).endswith("; rebuilt from its own sources with /usr/bin/g++-12 it does not load either")
    assert "/usr/bin/g++-12 (g++ 12): does not load (segfault: ...)" in render_all(c.evidence)


@pytest.mark.parametrize("why", ["no C++ toolchain other than /opt/gcc/bin/g++ is on PATH (looked for ...)",
                                 "the package cannot be rebuilt from its own sources: it is for device 'cuda'"])
def test_an_experiment_that_could_not_run_says_why_in_one_line(why):
    c = diagnose_load(SEGFAULT, FACTS, FRESH, [], None, Experiment(BUILT_BY, skipped=why))
    assert c.kind == "unknown" and f"no toolchain experiment: {why}" in render_all(c.evidence)


class CrashEvidence:
    def __init__(self):
        self.asked = []

    def package(self, result):
        return FACTS

    def fresh_process(self, ops):
        return FRESH

    def backtrace(self, result):
        return ["#0 raise", "#1 incompatible_runtime"]

    def toolchains(self, package):
        self.asked.append(package)
        return Experiment(BUILT_BY, (Trial("/usr/bin/g++", "g++ 12", True, "loads"),))

    def graph(self, result):
        return None

    def hook(self, result):
        return HookRecord()


def test_the_ladder_runs_the_experiment_for_a_crash_while_loading():
    def run_batch(batch, on_result, stop):
        for spec in batch:
            on_result(RunResult(spec, Outcome.FAILED, ProcessExit(None, 11, False, 1.0, 0), "/r", "/r/output.log",
                                SEGFAULT, "/c"))

    evidence = CrashEvidence()
    out = Ladder(["python", "repro.py"], run_batch, evidence, Options(debugger=(("gdb",), None))).run()
    assert out.verdict is Verdict.REPRODUCED and evidence.asked == [FACTS.path]
    assert out.culprit.kind == "load_environment" and "CXX=/usr/bin/g++" in render(out.culprit.summary)


def test_toolchains_are_found_once_each_and_never_the_builder(tmp_path):
    def tool(folder, name, target=None):
        os.makedirs(tmp_path / folder, exist_ok=True)
        path = tmp_path / folder / name
        if target:
            os.symlink(tmp_path / target, path)
        else:
            path.write_text("#!/bin/sh\n")
            path.chmod(0o755)
        return str(path)

    builder = tool("opt", "g++")
    tool("a", "c++", "b/g++-13")  # one compiler under two names: the first name of its family is kept
    g13 = tool("b", "g++-13")
    clang = tool("b", "clang++-17")
    tool("b", "gcc-13")  # a C compiler
    tool("b", "g++", "opt/g++")  # the builder under another name
    env = {"PATH": os.pathsep.join([str(tmp_path / "a"), str(tmp_path / "b"), str(tmp_path / "missing")])}
    assert toolchains.find(builder, env) == [g13, clang]
    cxx = tool("c", "my-cxx")
    assert toolchains.find(builder, dict(env, CXX=f"{cxx} -O1")) == [cxx, g13, clang]
    assert toolchains.find(builder, {"PATH": str(tmp_path / "opt")}) == []


def test_a_package_without_sources_is_not_rebuilt(tmp_path):
    bare = tmp_path / "bare.pt2"
    with zipfile.ZipFile(bare, "w") as z:
        z.writestr("bare/data/aotinductor/model/x.wrapper.so", b"\x7fELF")
        z.writestr("bare/data/aotinductor/model/x.wrapper_metadata.json", '{"AOTI_DEVICE_KEY": "cpu"}')
    exp = toolchains.experiment(str(bare), sys.executable, str(tmp_path / "exp"), dict(os.environ))
    assert exp.trials == () and exp.skipped.startswith("the package cannot be rebuilt from its own sources: ")
    assert "no generated wrapper source" in exp.skipped
    assert toolchains.experiment(str(bare), None, str(tmp_path / "exp"), {}).skipped.startswith(
        "the repro's Python is unknown")


# -- the real experiment --------------------------------------------------------------------------------------

def _setup_module():
    spec = importlib.util.spec_from_file_location("build_with_crashing_toolchain",
                                                  os.path.join(SCENARIOS, "build_with_crashing_toolchain.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _private_tmp(environ, folder) -> dict:
    # Inductor caches under $TMPDIR (its precompiled headers, over 100 MB each, named for the compiler's path,
    # which is new every session), and a package load killed by its crash leaves its unpacked copy there.
    os.makedirs(folder, exist_ok=True)
    return dict(environ, TMPDIR=str(folder))


def _crashing_experiment(folder, environ):
    """One real package built by the crashing toolchain (the scenario's setup, one AOTI compile), its plain load,
    and the experiment on it beside /usr/bin/g++ and two fake toolchains: one that cannot compile the sources and
    one whose libraries hang when loaded (its load sits out the tool's load timeout: an `early` job)."""
    package = str(folder / "built" / "model.pt2")
    os.makedirs(os.path.dirname(package))
    subprocess.run([sys.executable, os.path.join(SCENARIOS, "build_with_crashing_toolchain.py"), package], check=True,
                   stdout=subprocess.DEVNULL, timeout=900, cwd=folder,
                   env=_private_tmp(environ, folder / "build-tmp"))
    load = subprocess.run([sys.executable, toolchains.LOAD_SCRIPT, package], capture_output=True, cwd=folder,
                          env=_private_tmp(environ, folder / "load-tmp"))
    fakes = folder / "fakes"
    fakes.mkdir()
    (fakes / "g++-99").write_text("#!/bin/sh\necho 'g++-99: error: unrecognized option' >&2\nexit 1\n")
    (fakes / "g++-99").chmod(0o755)
    # Not named g++ on PATH: loading a package runs Inductor's ISA check, which builds a library with that g++.
    hangs = fakes / "clang++-98"
    hangs.symlink_to(_setup_module().crashing_toolchain(str(folder / "hangs"), "for (;;) pause();"))
    env = dict(environ, PATH=os.pathsep.join([str(fakes), "/usr/bin", "/bin"]))
    before = (_digest(package), sorted(os.listdir(os.path.dirname(package))))
    # The tool's own load timeout: a good load (a torch import, Inductor's ISA check building its library) beside the
    # suite's busy lanes ran past 60 s in CI (2026-11-29); the hanging load's wait is off the chain of tests.
    exp = toolchains.experiment(package, sys.executable, str(folder / "exp"), env)
    after = (_digest(package), sorted(os.listdir(os.path.dirname(package))))
    return folder, package, load.returncode, env, exp, before == after


@pytest.mark.slow
@pytest.mark.early(job=_crashing_experiment)
def test_the_experiment_finds_the_toolchain_that_loads_a_package_that_crashes_while_loading(early, tmp_path):
    folder, crashing_package, plain_load, env, exp, untouched = early(_crashing_experiment)
    fakes = folder / "fakes"
    assert plain_load == -11  # the package as built crashes in native code while loading
    assert exp.built_by.endswith("crashing-toolchain/bin/g++") and exp.skipped is None
    failing, good, hanging = exp.trials
    assert failing.compiler == str(fakes / "g++-99") and not failing.loads
    assert failing.outcome.startswith("rebuilding the package's wrapper failed (exit 1): g++-99: error: unrecognized")
    assert hanging.compiler == str(fakes / "clang++-98") and not hanging.loads
    assert hanging.outcome.startswith(f"the load did not finish in {toolchains.LOAD_TIMEOUT_S:.0f} s")
    assert (good.compiler, good.loads, good.outcome) == ("/usr/bin/g++", True, "loads"), good
    assert good.version.startswith("g++ ")
    assert untouched

    facts = read_package(crashing_package)
    c = diagnose_load(SEGFAULT, facts, FRESH, [], None, exp)
    assert c.kind == "load_environment"
    assert render(c.summary).startswith(f"the package built by {exp.built_by} (GCC: ")
    assert render(c.summary).endswith("it loads: rebuild it with that toolchain (CXX=/usr/bin/g++)")

    # The control: a package that loads by itself convicts no toolchain (the copy that loaded, here).
    copy = str(folder / "exp" / "1-g++" / "model.pt2")
    again = toolchains.experiment(copy, sys.executable, str(tmp_path / "exp2"), env)
    assert again.trials == () and again.skipped.startswith("the package as built loads in a fresh process")
