"""The load doctor: for a failure while loading a package, what its cheap experiments found, as a named culprit.

The experiments (run by the ladder through run_batch and Evidence): the package's own facts (the custom ops
its proxy executor calls, the device and CPU ISA it was compiled for, the compiler that built it), what a
fresh process of the repro's interpreter registers and loads, a native backtrace of a crash under gdb, and for a
crash, copies rebuilt by the machine's other C++ toolchains (run/toolchains.py). This module only decides what
they show.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from ..aoti.package import PackageFacts
from ..run.types import Signature
from .facts import Fact, FactKind
from .findings import Culprit, CulpritKind

if TYPE_CHECKING:  # a record only: the experiment's processes stay out of the decision
    from ..run.toolchains import Experiment

# torch.backends.cpu.get_cpu_capability() names, weakest first; a package compiled for a later one runs
# instructions an earlier CPU does not have.
_ISA_ORDER = ("DEFAULT", "VSX", "ZVECTOR", "SVE256", "AVX2", "AVX512")


def said(text: str) -> Fact:
    """The doctor's sentences name packages, ops and toolchains, never a model's tensors: their text is the fact."""
    return Fact(FactKind.LOAD, "{text}", (("text", text),))


def diagnose_load(sig: Signature, facts: Optional[PackageFacts], fresh: dict, backtrace: list[str],
                  no_backtrace: Optional[str], toolchains: Optional[Experiment] = None) -> Culprit:
    """`fresh`: child/registry.py's answer for facts.custom_ops; `no_backtrace`: why there is none, if none;
    `toolchains`: the rebuilds by other toolchains (None: not tried, the load did not crash)."""
    if facts is None:
        return Culprit(CulpritKind.UNKNOWN, evidence=[said(
            "the hooked run recorded no package load (the repro loads its package some other way than "
            "aoti_load_package / load_package), so the package's needs could not be read")])
    if facts.problem:
        return Culprit(CulpritKind.UNKNOWN, evidence=[said(facts.problem)])
    evidence = [_package_line(facts)]
    if fresh.get("error"):
        evidence.append(f"no fresh process of the repro's Python could answer: {fresh['error']}")
    else:
        evidence.append(f"a fresh process of the repro's Python has torch {fresh.get('torch')}, CPU capability "
                        f"{fresh.get('cpu_capability')}, CUDA {'available' if fresh.get('cuda') else 'not available'}"
                        f", {fresh.get('libstdcxx') or 'an unknown libstdc++'}")
    evidence.append("the package records no torch version (torch 2.13 writes none into a .pt2), so the torch "
                    "that built it cannot be compared" + (f"; this process has torch {fresh['torch']}"
                                                          if fresh.get("torch") else ""))
    evidence += _toolchain_lines(facts, toolchains) if toolchains else []
    evidence += (["native backtrace (gdb) of the crash, innermost first:", *backtrace] if backtrace else
                 [f"no native backtrace: {no_backtrace}"] if no_backtrace else [])
    culprit = _named(sig, facts, fresh) or _toolchain(facts, toolchains)
    if culprit is None:
        culprit = Culprit(CulpritKind.UNKNOWN)
        summary = ("the package's custom ops are all registered, and its device and CPU ISA match "
                           "this machine: the load failure is none of the causes checked")
        if toolchains and toolchains.trials:
            summary += (f"; rebuilt from its own sources with {_names(toolchains.trials)} it does not "
                        "load either")
        culprit.summary = said(summary)
    culprit.evidence = [culprit.summary, *(said(line) for line in evidence)]
    return culprit


def _named(sig: Signature, facts: PackageFacts, fresh: dict) -> Optional[Culprit]:
    ops = fresh.get("ops") or {}
    missing = [op for op in facts.custom_ops if ops.get(op) is False]
    if missing:
        # The loader names the op it failed on; otherwise the package's first unregistered one.
        op = next((o for o in missing if o in sig.message), missing[0])
        c = Culprit(CulpritKind.MISSING_CUSTOM_OP, op=op)
        summary = (f"the package needs `{op}`, which the loading process never registered (a fresh process "
                     f"with torch {fresh.get('torch')} does not have it either): load the library that defines "
                     "it (torch.ops.load_library, or import its extension) before aoti_load_package")
        if len(missing) > 1:
            summary += f"; also unregistered: {', '.join(o for o in missing if o != op)}"
        c.summary = said(summary)
        return c
    meta = dict(facts.metadata)
    if facts.device and facts.device.startswith("cuda") and fresh.get("cuda") is False:
        c = Culprit(CulpritKind.LOAD_ENVIRONMENT)
        c.summary = said(f"the package was compiled for {facts.device} (AOTI_DEVICE_KEY) but the loading torch "
                     f"{fresh.get('torch')} sees no CUDA device: load it where it was built for, or recompile")
        return c
    built, here = meta.get("AOTI_CPU_ISA"), fresh.get("cpu_capability")
    if built in _ISA_ORDER and here in _ISA_ORDER and _ISA_ORDER.index(built) > _ISA_ORDER.index(here):
        c = Culprit(CulpritKind.LOAD_ENVIRONMENT)
        c.summary = said(f"the package was compiled for CPU ISA {built} (AOTI_CPU_ISA) but this CPU runs {here}: "
                     "its kernels use instructions this machine lacks; recompile here")
        return c
    return None


def _toolchain(facts: PackageFacts, toolchains: Optional[Experiment]) -> Optional[Culprit]:
    good = next((t for t in toolchains.trials if t.loads), None) if toolchains else None
    if good is None:
        return None
    c = Culprit(CulpritKind.LOAD_ENVIRONMENT)
    c.summary = said(f"the package built by {_builder(facts, toolchains)} crashes while loading; rebuilt from its own "
                 f"sources with {good.compiler} ({good.version}) it loads: rebuild it with that toolchain "
                 f"(CXX={good.compiler})")
    return c


def _toolchain_lines(facts: PackageFacts, toolchains: Experiment) -> list[str]:
    if toolchains.skipped:
        return [f"no toolchain experiment: {toolchains.skipped}"]
    return [f"the package (built by {_builder(facts, toolchains)}) rebuilt from its own sources by each other C++ "
            "toolchain here, each copy loaded in a fresh process:",
            *(f"{t.compiler} ({t.version}): {t.outcome}" for t in toolchains.trials)]


def _builder(facts: PackageFacts, toolchains: Experiment) -> str:
    return " ".join(filter(None, [toolchains.built_by, facts.compiler and f"({facts.compiler})"])) or "its toolchain"


def _names(trials: tuple) -> str:
    return ", ".join(t.compiler for t in trials)


def _package_line(facts: PackageFacts) -> str:
    meta = dict(facts.metadata)
    ops = ", ".join(f"`{o}`" for o in facts.custom_ops) or "none"
    target = " ".join(v for v in (meta.get("AOTI_DEVICE_KEY"), meta.get("AOTI_PLATFORM"), meta.get("AOTI_MACHINE"))
                      if v)
    return (f"the package ({facts.path}) was compiled for {target or 'an unrecorded target'}"
            + (f", CPU ISA {meta['AOTI_CPU_ISA']}" if meta.get("AOTI_CPU_ISA") else "")
            + (f", compute capability {meta['AOTI_COMPUTE_CAPABILITY']}" if meta.get("AOTI_COMPUTE_CAPABILITY")
               else "")
            + (f", built by {facts.compiler}" if facts.compiler else "")
            + f"; custom ops its proxy executor calls: {ops}")
