"""The precision stage: a control recompile for a gap the eager walk put down to rounding, or found where rounding
may explain it. The control removes one source of rounding, as Polygraphy names a precision culprit by running a
layer in higher precision, and says whether the gap went with it.

- Eager's intermediate rounding (culprit kind `precision`: a low-precision kernel that float64 sides with): the
  package built rounding as eager does (`emulate_precision_casts`: every intermediate of a low-precision op cast to
  its dtype and back, as eager stores it); the script's own check is the answer. Convicts nothing either way: the
  float64 evidence stands.
- TF32 (a float32 matmul kernel of a program compiled with TF32 matmuls allowed, convicted by the walk; float64
  cannot clear it, TF32 being the farther side by design): the package built with TF32 matmuls off, walked against
  eager as the eager stage walks. The script's check passing, or failing with no kernel beyond the walk's tolerance
  (a script may hold float32 to less than a matmul's reordering), the gap was TF32's and the kernel is cleared (kind
  `precision`); a kernel still beyond it is a miscompile, convicted from the control's own walk; a control that fails
  otherwise, or whose walk did not run, clears nothing and convicts nothing: unknown.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

from ...aoti import flags
from ..context import StageContext
from ..facts import Fact, FactKind, fact, kernel
from ..findings import Cause, Control, Culprit, CulpritKind, Findings, Stage
from . import eager
from .rung import Rung

NAME = "precision"


@dataclass(frozen=True)
class Recompile:
    """The control recompile that tells a cause: its flags, and what they build and remove, in words."""
    env: dict[str, str]
    built: str
    gap: str
    otherwise: str  # what a control that still fails leaves standing


RECOMPILES = {
    Cause.EAGER_ROUNDING: Recompile(flags.EMULATE_PRECISION, "rounding as eager does (emulate_precision_casts)",
                                    "eager's intermediate rounding", "the gap is not eager's intermediate rounding "
                                    "alone; float64 still takes the package's side, so no kernel is convicted"),
    # walked as the eager stage walks: the script's check may hold float32 to less than the walk's tolerance
    Cause.TF32: Recompile({**flags.EAGER, **flags.TF32_OFF}, "with TF32 matmuls off",
                          "TF32's rounding of the matmul's operands", "its walk convicts a kernel without TF32"),
}


def run(ctx: StageContext, out: Findings) -> None:
    # One run, as the determinism stage after a baseline that failed every run: it says whether the flag keeps
    # the failure.
    c = out.culprit
    if c is None or c.precision is None:
        return
    recompile = RECOMPILES[c.precision.cause]
    stage = ctx.run_stage(Stage(NAME, dict(recompile.env)), 1)
    control, stage.finding = _control(stage, out, recompile)
    if c.kind is CulpritKind.PRECISION:
        c.precision = replace(c.precision, control=control)
        if control is not Control.INCONCLUSIVE:
            c.evidence.append(stage.finding)
        return
    if control is Control.STILL_FAILS:
        control, stage.finding, found = _walked(ctx, stage, recompile)
        if found is not None:  # a miscompile: convicted from the control's walk, the question it answered kept
            found.precision = replace(c.precision, control=control)
            out.culprit = found
            return
    c.precision = replace(c.precision, control=control)
    _settle(c, control, stage.finding)


def _control(stage: Stage, out: Findings, recompile: Recompile) -> tuple[Control, Fact]:
    """What the control run showed to the script's check, and its finding."""
    sig = stage.results[0].signature if stage.results else None
    same = sig is not None and out.signature is not None and (sig.kind, sig.phase) == (out.signature.kind,
                                                                                      out.signature.phase)
    if not stage.results:
        return Control.INCONCLUSIVE, fact(FactKind.NOTE, "the control recompile ({built}) did not run: it says "
                                          "nothing of the gap", built=recompile.built)
    if stage.failures and not same:
        return Control.INCONCLUSIVE, fact(
            FactKind.NOTE, "the control recompile ({built}) failed otherwise ({sig}): it says nothing of the gap",
            built=recompile.built, sig=f"{sig.kind} in {sig.phase}" if sig else "no signature")
    if stage.failures:
        return Control.STILL_FAILS, fact(FactKind.NOTE, "control recompile: the package built {built} still fails "
                                         "the script's check: {otherwise}", built=recompile.built,
                                         otherwise=recompile.otherwise)
    rate = out.baseline
    weak = "" if rate.failures == rate.runs else " (the baseline failed {base}: one passing run is weak evidence)"
    return Control.PASSES, fact(FactKind.NOTE, "control recompile: the package built {built} passes the script's "
                                "check" + weak + ": the gap is {gap}", built=recompile.built, base=rate.describe(),
                                gap=recompile.gap)


def _walked(ctx: StageContext, stage: Stage, recompile: Recompile) -> tuple[Control, Fact, Optional[Culprit]]:
    """A control that still fails the script's check, judged by its own walk against eager: a kernel still beyond the
    walk's tolerance is convicted from it (a miscompile); none, and the gap beyond the tolerance went with the cause."""
    found, run, status = eager.walk(ctx, stage)
    if status not in eager.WALKED:
        return Control.INCONCLUSIVE, fact(FactKind.NOTE, "the control recompile ({built}) still fails the script's "
                                          "check, and its walk against eager did not run ({status}): it says nothing "
                                          "of the gap", built=recompile.built, status=status), None
    if found.kind is CulpritKind.KERNEL and found.precision is None:
        finding = fact(FactKind.NOTE, "control recompile: the package built {built} still fails the script's check "
                       "and {otherwise}: the gap is there without the cause, a miscompile", built=recompile.built,
                       otherwise=recompile.otherwise)
        found.evidence.append(finding)
        ctx.ledger.walked(NAME, run, found)
        return Control.STILL_FAILS, finding, found
    if found.pinned:  # another kind of culprit in the control alone: not the question it was asked
        return Control.INCONCLUSIVE, fact(FactKind.NOTE, "the control recompile ({built}) found another culprit "
                                          "({kind}): it says nothing of the gap", built=recompile.built,
                                          kind=found.kind), None
    return Control.PASSES, fact(FactKind.NOTE, "control recompile: the package built {built} still fails the "
                                "script's check, but no kernel of it misses eager beyond the walk's tolerance: the gap "
                                "beyond it is {gap}; what remains is float32 reordering within it",
                                built=recompile.built, gap=recompile.gap), None


def _settle(c: Culprit, control: Control, finding: Fact) -> None:
    """The walk's conviction of a TF32 matmul kernel, settled by the control: cleared, or left unknown."""
    assert c.kernel is not None
    was = c.summary or c.headline
    if control is Control.PASSES:
        c.kind = CulpritKind.PRECISION
        c.summary = fact(FactKind.EAGER, "a precision difference, not a miscompile: {was}; the program was compiled "
                         "with TF32 matmuls allowed, and the package built with them off clears the gap: the gap is "
                         "TF32's rounding of the matmul's operands (10 mantissa bits), which the compile allowed. No "
                         "kernel is convicted", was=was)
        c.evidence = [c.summary, *c.evidence[1:], finding]
        return
    c.kind, name = CulpritKind.UNKNOWN, c.kernel
    c.kernel = c.summary = None
    c.evidence = [fact(FactKind.UNVERIFIED, "not convicted: {was}, but the program was compiled with TF32 matmuls "
                       "allowed and {kernel} computes a matmul; the control recompile that tells TF32's rounding "
                       "from a miscompile could not ({finding})", was=was, kernel=kernel(name), finding=finding),
                  *c.evidence[1:]]


def applies(ctx: StageContext, out: Findings) -> bool:
    return out.culprit is not None and out.culprit.precision is not None and out.culprit.precision.control is None


RUNG = Rung(NAME, run, applies=applies, requestable=False,
            after=frozenset({CulpritKind.PRECISION, CulpritKind.KERNEL}))
