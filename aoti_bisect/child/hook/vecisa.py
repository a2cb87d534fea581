"""Torch's answer to "which CPU vector ISAs may Inductor generate code for", shared between a bisection's runs.

Inductor answers it once per process by dry-compiling a test file for each ISA the CPU claims and loading it in a
fresh Python; on torch 2.11 that Python imports torch, once per ISA, which took 36 s of a 50 s run that only
loaded a small package on an H100 host (docs/evidence/cuda-notes.md §7). The first hooked run that has the
answer writes it where the harness says (AOTI_BISECT_VEC_ISA); the harness then gives later hooked runs
TORCHINDUCTOR_VEC_ISA_OK=1, but only where that gives the same answer: every ISA the CPU claims passed its check.
Standard library at import time; torch only once the repro has imported it.
"""
import json
import os

from . import atomic, contract


def effective():
    """The ISAs Inductor takes in this process, by name, in its order of preference (it checks them now if it
    has not yet: a compile or a load would, in the same process)."""
    from torch._inductor import cpu_vec_isa
    return [str(isa) for isa in cpu_vec_isa.valid_vec_isa_list()]


def share():
    """Writes this process's checked answer beside the one the CPU claims, once per bisection, if torch checked
    its ISAs here (TORCHINDUCTOR_VEC_ISA_OK unset) and has already done so."""
    path = os.environ.get(contract.VEC_ISA_ENV)
    if not path or os.path.exists(path):
        return
    from torch._inductor import config, cpu_vec_isa
    checked = cpu_vec_isa.valid_vec_isa_list
    if config.cpp.vec_isa_ok is not None or checked.cache_info().currsize == 0:
        return
    with config.patch({"cpp.vec_isa_ok": True}):  # what the shortcut would answer: every ISA the CPU claims
        claimed = [str(isa) for isa in checked.__wrapped__()]
    with atomic.replacing(path) as f:
        json.dump({"checked": effective(), "claimed": claimed, "pid": os.getpid()}, f)
