"""The debugging guide's flags: which the ladder sets at each stage, and which take effect without a recompile.

docs/aoti-facts.md says what each one does; the sets below are the only place they are spelled (the tool's
own variables, AOTI_BISECT_*, are spelled in child/contract.py).
"""
from __future__ import annotations

from ..child import contract

SANITY = {"AOTI_RUNTIME_CHECK_INPUTS": "1", "TORCHINDUCTOR_NAN_ASSERTS": "1"}
DETERMINISM = {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1", "CUDA_LAUNCH_BLOCKING": "1"}
PRINTER = "AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER"
FILTER = "AOT_INDUCTOR_FILTERED_KERNELS_TO_PRINT"
# Read by aoti-bisect's in-process hook (child/hook/capture.py): capture the program and the compiled model's
# calls, and check custom ops' fake functions against the real ops before each call.
FAKECHECK = {contract.CAPTURE_ENV: "1", contract.FAKECHECK_ENV: "1"}
# Inductor's provenance: kernel_information.json beside the wrapper maps each kernel to the user's source lines
# (aoti/provenance.py). It adds `// [Provenance debug handles]` comments and nothing else to the generated code
# (tests/test_provenance.py compiles with and without it), so the stages that read the wrapper carry it.
PROVENANCE = {"INDUCTOR_PROVENANCE": "1"}
TRACE = {PRINTER: "3", **PROVENANCE}
INSPECT = {PRINTER: "2", **PROVENANCE}
# Level 1 saves every kernel's tensor arguments before and after its launch; the hook compares them with the
# exported program run eagerly on the same call's inputs (child/hook/eagerwalk.py).
EAGER_WALK = {contract.EAGER_WALK_ENV: "1"}
EAGER = {PRINTER: "1", **PROVENANCE, **EAGER_WALK}
# The precision stage's control recompiles, each removing one source of rounding: the package built rounding as
# eager does (every low-precision intermediate cast to its dtype and back), and built with TF32 matmuls off (the
# hook turns them off around the compile: a Triton GEMM template bakes the setting into its code).
EMULATE_PRECISION = {"TORCHINDUCTOR_EMULATE_PRECISION_CASTS": "1"}
TF32_OFF = {contract.TF32_OFF_ENV: "1"}

# Read by the AOTI runtime, the CUDA runtime or the interpreter at run time: they never need a fresh compile.
# PYTHONMALLOC comes with the CPU memory checker (run/checkers.py): were it a compile key, the checked run
# would compile the model again under valgrind, which takes many times a plain compile.
RUNTIME = frozenset({"AOTI_RUNTIME_CHECK_INPUTS", "PYTORCH_NO_CUDA_MEMORY_CACHING", "CUDA_LAUNCH_BLOCKING",
                     "PYTHONMALLOC", *FAKECHECK, *EAGER_WALK})

# The tool's own: a user's shell may have them set, but a run must only see what its stage says.
OWNED = (PRINTER, FILTER, contract.REDIRECT_ENV, contract.CONSTANTS_ENV, contract.AHEAD_ENV, *FAKECHECK, *EAGER_WALK,
         *TF32_OFF)

# Which runs serve a flag set's later compiles from the package its first run built (child/hook/reuse.py):
# `hooked` the runs that carry the hook anyway, and the baseline's and determinism's after the baseline's first wave
# (run the user's way) while the reused runs fail as those did (diagnose/stages/baseline.py check_reuse),
# `all` every run (the baseline then carries the hook too), `none` no run.
REUSE_MODES = ("hooked", "all", "none")


def needs_compile(env: dict[str, str]) -> bool:
    return any(k not in RUNTIME for k in env)
