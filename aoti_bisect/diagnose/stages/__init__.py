"""The ladder's stages, one module each, registered here in the order the ladder climbs them.

Adding a stage: write a module with a `RUNG` (stages/rung.py), add it to LATER below, add its name to
findings.StageName; its flags go in aoti/flags.py. docs/architecture.md walks through one.
"""
from ...aoti import flags
from ..findings import StageName
from . import baseline, determinism, doctor, eager, fakecheck, inspect, memcheck, sanity, trace, unmask

# After the baseline: the doctor (load failures only), then the runtime stages.
LATER = (doctor.RUNG, sanity.RUNG, determinism.RUNG, trace.RUNG, fakecheck.RUNG, memcheck.RUNG, inspect.RUNG,
         eager.RUNG)
# What --stages offers (the baseline always runs), in order.
REQUESTABLE = (StageName.BASELINE.value, *(r.name.value for r in LATER if r.requestable))

# Later stages whose compile-time flags do not hang on what earlier stages find: their packages can be built in
# the slots the baseline's first run leaves idle (run/harness.py ahead), so that the stages find them waiting.
AHEAD = ((StageName.SANITY, flags.SANITY), (StageName.TRACE, flags.TRACE))

__all__ = ["AHEAD", "LATER", "REQUESTABLE", "baseline", "memcheck", "unmask"]
