"""Torch's answer to "which CPU vector ISAs may Inductor generate code for", shared between a bisection's runs.

Inductor answers it once per process by dry-compiling a test file for each ISA the CPU claims and loading it in a
fresh Python; on torch 2.11 that Python imports torch, once per check, which took 36 s of a 50 s run that only
loaded a small package on an H100 host (docs/evidence/cuda-notes.md §7). The first hooked run that has the
answer writes it where the harness says (AOTI_BISECT_VEC_ISA), with the outcome of each dry-compile it made. The
harness then gives later hooked runs TORCHINDUCTOR_VEC_ISA_OK=1 where that gives the same answer (every ISA the CPU
claims passed its check), and their hook answers each dry-compile the first run made with that run's outcome: the
checks for AVX-512 BF16, VNNI and AMX ignore TORCHINDUCTOR_VEC_ISA_OK, and cost 13 s of every repeated run on the
H100 host (docs/evidence/gpu-warm-2026-11-28). A check the first run did not make is made as torch makes it.
Standard library at import time; torch only once the repro has imported it.
"""
import functools
import hashlib
import json
import os

from . import atomic, contract

_OUTCOMES: dict[str, bool] = {}  # this process's dry-compiles, by _check_key: True where the test file built and loaded
_FIRST = [True]  # whether every check of this process went through prime's wrapper (its outcomes are complete)


def effective():
    """The ISAs Inductor takes in this process, by name, in its order of preference (it checks them now if it
    has not yet: a compile or a load would, in the same process)."""
    prime()
    from torch._inductor import cpu_vec_isa
    return [str(isa) for isa in cpu_vec_isa.valid_vec_isa_list()]


def built_for():
    """The ISA Inductor builds this process's CPU code for: its one choice among effective(), which the CPU's
    ISAs, ATEN_CPU_CAPABILITY and cpp.simdlen decide (torch 2.13's codegen reads the list only through it). Not
    the list: under valgrind, which emulates no AVX-512, the list is shorter than outside it while a run told
    ATEN_CPU_CAPABILITY=avx2 builds the same AVX2 code in both (run/checkers.py, AVX2_ONLY)."""
    prime()
    from torch._inductor import cpu_vec_isa
    return str(cpu_vec_isa.pick_vec_isa())


def _check_key(isa, code):
    # The flags are read at the call: torch adds -mavx512bf16 or -mamx-fp16 to them around the check it makes.
    text = "\0".join((type(isa).__name__, str(getattr(isa, "_arch_flags", "")), code))
    return hashlib.sha256(text.encode()).hexdigest()


def _given():
    try:
        with open(os.environ.get(contract.VEC_ISA_ENV, ""), encoding="utf-8") as f:
            outcomes = json.load(f).get("builds")
    except (OSError, ValueError, AttributeError):
        return {}
    if not isinstance(outcomes, dict):
        return {}
    return {k: v for k, v in outcomes.items() if isinstance(k, str) and isinstance(v, bool)}


def prime():
    """Routes Inductor's ISA dry-compiles through this module, once per process, before torch checks its ISAs:
    each outcome is noted, and one the bisection's first answer holds is given without compiling."""
    from torch._inductor import cpu_vec_isa
    original = cpu_vec_isa.VecISA.check_build
    if getattr(original, "_aoti_bisect_hook", False):
        return
    if cpu_vec_isa.valid_vec_isa_list.cache_info().currsize:
        _FIRST[0] = False  # the repro's process checked before the hook could see it
    given = _given()

    @functools.wraps(original)
    def check_build(self, code):
        key = _check_key(self, code)
        outcome = given[key] if key in given else original(self, code)
        _OUTCOMES[key] = outcome
        return outcome

    check_build._aoti_bisect_hook = True
    cpu_vec_isa.VecISA.check_build = check_build


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
    answer = {"checked": effective(), "claimed": claimed, "pid": os.getpid()}
    if _FIRST[0]:
        answer["builds"] = dict(_OUTCOMES)
    with atomic.replacing(path) as f:
        json.dump(answer, f)
