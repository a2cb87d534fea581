"""The registry: the ladder's one list of its stages, in the order it climbs them, one module each.

The baseline and un-masking (baseline.py, unmask.py) go before the climb and are no rungs: the baseline makes the
Findings every rung writes into and decides whether there is a failure to climb for, and un-masking runs only when
it found none, to decide whether the climb happens at all (docs/ladder.md, How to add a stage).
"""
from ...aoti import flags
from ..findings import StageName
from . import baseline, determinism, doctor, eager, fakecheck, inspect, memcheck, precision, sanity, trace, unmask

# The climb after the baseline: the memory checker where it goes first, the doctor (load failures only), then the
# runtime stages, the eager walk before the inspect stage for a wrong value, and the precision control after a walk
# that found one. A name may stand twice; the ladder runs a stage once, at the first of its rungs that applies.
LATER = (memcheck.FIRST, doctor.RUNG, sanity.RUNG, determinism.RUNG, trace.RUNG, fakecheck.RUNG, memcheck.RUNG,
         eager.FIRST, inspect.RUNG, eager.RUNG, precision.RUNG)
# What --stages offers (the baseline always runs), in order.
REQUESTABLE = (StageName.BASELINE.value, *(str(r.name) for r in LATER if r.requestable))

# Later stages whose compile-time flags do not hang on what earlier stages find: their packages can be built in the
# slots the baseline's first run leaves idle (Scheduler.ahead, run/scheduler.py), so that the stages find them waiting.
AHEAD = ((StageName.SANITY, flags.SANITY), (StageName.TRACE, flags.TRACE))

__all__ = ["AHEAD", "LATER", "REQUESTABLE", "baseline", "unmask"]
