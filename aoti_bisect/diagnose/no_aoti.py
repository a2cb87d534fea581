"""A failure with no AOTI in it: the failing runs that carried the hook compiled and loaded no AOTI package.

Every stage after the baseline sets AOTI's or Inductor's debugging flags, which cannot reach a failure outside
AOTI, so the ladder stops there and says why (ladder.Ladder.run). The hook sees torch._inductor's
aoti_compile_and_package, aoti_load_package and load_package (child/hook/recorder.py); a package loaded through
torch._export.aot_load or AOTIModelPackageLoader directly is not seen, and the reason says so."""
from __future__ import annotations

from typing import Optional

from ..aoti.hook_record import HookRecord


def without_aoti(failing: list[HookRecord]) -> Optional[str]:
    """Why to stop, where every failing run whose Python loaded the hook compiled or loaded no package; else None
    (no such run yet, or one touched AOTI)."""
    hooked = [h for h in failing if h.loaded]
    if not hooked or any(h.events for h in hooked):
        return None
    return (f"the failure happens without any AOTI compile or load: {len(hooked)} failing run(s) with the hook "
            "compiled or loaded no package through torch._inductor (aoti_compile_and_package, aoti_load_package), "
            "so AOTI's debugging flags cannot reach it. A package loaded with torch._export.aot_load or "
            "AOTIModelPackageLoader directly is not seen: load it with torch._inductor.aoti_load_package")
