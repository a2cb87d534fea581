"""The precision stage: a control recompile for a precision difference the eager walk found (culprit kind
`precision`). Inductor builds the package once more rounding as eager does (`emulate_precision_casts`: every
intermediate of a low-precision op cast to its dtype and back, as eager stores it); if the script's check then
passes, eager's intermediate rounding is the gap, named by the control as Polygraphy names a precision culprit by
running a layer in higher precision. Convicts nothing either way: the float64 evidence stands."""
from __future__ import annotations

from ..context import StageContext
from ..facts import FactKind, fact
from ..findings import CulpritKind, Findings, Stage
from .rung import Rung

NAME = "precision"
EMULATE = {"TORCHINDUCTOR_EMULATE_PRECISION_CASTS": "1"}


def run(ctx: StageContext, out: Findings) -> None:
    # One run, as the determinism stage after a baseline that failed every run: it says whether the flag keeps
    # the failure. No printer and no walk: the script's own check is the answer.
    stage = ctx.run_stage(Stage(NAME, dict(EMULATE)), 1)
    if not stage.results or out.culprit is None:
        return
    sig, rate = stage.results[0].signature, out.baseline
    same = sig is not None and out.signature is not None and (sig.kind, sig.phase) == (out.signature.kind,
                                                                                      out.signature.phase)
    if stage.failures and not same:
        stage.finding = fact(FactKind.NOTE, "the control recompile (emulate_precision_casts) failed otherwise ({sig}): "
                             "it says nothing of the gap", sig=f"{sig.kind} in {sig.phase}" if sig else "no signature")
        return
    if stage.failures:
        stage.finding = fact(FactKind.NOTE, "control recompile: the package built rounding as eager does "
                             "(emulate_precision_casts) still fails the script's check: the gap is not eager's "
                             "intermediate rounding alone; float64 still takes the package's side, so no kernel is "
                             "convicted")
    else:
        weak = "" if rate.failures == rate.runs else " (the baseline failed {base}: one passing run is weak evidence)"
        stage.finding = fact(FactKind.NOTE, "control recompile: the package built rounding as eager does "
                             "(emulate_precision_casts) passes the script's check" + weak + ": the gap is eager's "
                             "intermediate rounding", base=rate.describe())
    out.culprit.evidence.append(stage.finding)


def applies(ctx: StageContext, out: Findings) -> bool:
    return out.culprit is not None and out.culprit.kind is CulpritKind.PRECISION


RUNG = Rung(NAME, run, applies=applies, requestable=False, after=frozenset({CulpritKind.PRECISION}))
