"""The report's next steps: what to try once the ladder has concluded, in the repro's own command line."""
from __future__ import annotations

import enum
import shlex
from typing import Optional

from ..failure import FailureKind, Phase
from ..run.types import Signature
from .findings import Cause, Culprit, CulpritKind


class Step(enum.StrEnum):
    """A next step the report words, since only it knows the run's folder."""
    MINIFY = "minify"  # cut the failing program down to a standalone repro: `aoti-bisect minify RUN_DIR`


def next_steps(argv: list[str], sig: Optional[Signature], c: Optional[Culprit], cuda: bool) -> list[str]:
    cmd = " ".join(shlex.quote(a) for a in argv)
    kind = sig.kind if sig else None
    steps = []
    if c and c.kind == CulpritKind.MODEL_INPUT:
        steps.append("Feed inputs that match the compiled package (same device, dtype, sizes and strides: "
                     "call .contiguous() / .to(device)), or export with dynamic shapes (torch.export.Dim) "
                     f"for the dimension that varies; confirm with: AOTI_RUNTIME_CHECK_INPUTS=1 {cmd}")
    if c and c.kind == CulpritKind.CONSTANT:
        name = c.user_name or c.input_name
        steps.append(f"Find where `{name}` got its non-finite values (the checkpoint or state_dict the package "
                     f"was built from: torch.isfinite(model.get_parameter('{name}')).all(), or get_buffer), then "
                     "rebuild the package; nothing in the generated code needs fixing")
    if c and c.kind in (CulpritKind.STALE_CONSTANT, CulpritKind.FOLDED_CONSTANT):
        name = c.user_name or c.input_name
        steps.append(f"Rebuild the package from the module as it is now (`{name}` changed after the build)"
                     + (": Inductor folded it into the generated code, so no constant update reaches it; keep it "
                        "a graph input or a parameter the package lists if it must change after packaging"
                        if c.kind == CulpritKind.FOLDED_CONSTANT else ", or hand the package the new weights "
                        "(load_constants / update_constant_buffer)"))
    if c and c.kind == CulpritKind.PRECISION and c.precision is not None and c.precision.cause is Cause.TF32:
        steps.append("Compare against eager at the precision the package was built with, or build it with TF32 "
                     "matmuls off: torch.set_float32_matmul_precision('highest') before aoti_compile_and_package (a "
                     "Triton GEMM template keeps the setting it was compiled with)")
    elif c and c.kind == CulpritKind.PRECISION and c.precision is None:
        steps.append("Hold the package's outputs to eager with a tolerance that allows the same arithmetic in another "
                     "order (torch.testing.assert_close's defaults, or against the model run in float64), not to "
                     "exact equality: a compiled model never promises eager's bits")
    elif c and c.kind == CulpritKind.PRECISION:
        steps.append("Judge the package against float64 rather than low-precision eager (eager rounds after every "
                     "op, the fused kernel once); to build the package rounding as eager does "
                     f"(torch._inductor.config.emulate_precision_casts): TORCHINDUCTOR_EMULATE_PRECISION_CASTS=1 {cmd}")
    if c and c.kind == CulpritKind.OUTSIDE_INSTRUMENTED_KERNELS:
        steps.append("Check the custom op's kernel and its fake/meta function (shapes, strides, bounds); "
                     + (f"run it under compute-sanitizer: PYTORCH_NO_CUDA_MEMORY_CACHING=1 "
                        f"compute-sanitizer --tool memcheck {cmd}" if cuda else
                        f"run it under valgrind: valgrind --error-exitcode=9 {cmd}"))
    if c and c.kind == CulpritKind.CUSTOM_OP:
        steps.append(f"Make the fake function of `{c.kernel}` return what the op returns (shape, strides, dtype) "
                     "for every size the program is exported for, in SymInts; check it on the failing inputs "
                     "with torch.library.opcheck (the program and inputs are in the fakecheck run's capture/)")
    if kind == FailureKind.ILLEGAL_MEMORY_ACCESS:
        steps.append(f"Ground truth for the access: PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer "
                     f"--tool memcheck {cmd}")
    if kind in (FailureKind.INDEX_OUT_OF_BOUNDS, FailureKind.DEVICE_ASSERT) and c and c.kind == CulpritKind.KERNEL:
        steps.append(f"Read the index computation in {c.kernel} (source below) against the bound in the "
                     "assertion; an index derived from input values needs clamping or a guard")
    if kind == FailureKind.NAN_INF and c and c.kind == CulpritKind.KERNEL:
        steps.append(f"Check the numerics of the ops fused into {c.kernel} (log/sqrt/div of values outside "
                     "their domain); on CUDA, TORCHINDUCTOR_RUNTIME_TRITON_NAN_ASSERTS=1 narrows it to the "
                     "element")
    return steps + _by_phase(sig, c, cmd)


def _by_phase(sig: Optional[Signature], c: Optional[Culprit], cmd: str) -> list[str]:
    """The step for the phase the failure happened in; or, for one in the model's run without a culprit beyond a
    kernel, minify."""
    steps: list[str] = []
    loads_elsewhere = c and c.kind in (CulpritKind.MISSING_CUSTOM_OP, CulpritKind.LOAD_ENVIRONMENT)
    if sig and sig.phase == Phase.LOAD and not loads_elsewhere:
        steps.append("Load failures: register every custom-op library the package calls "
                     "(torch.ops.load_library / import the extension) before aoti_load_package, and load "
                     "with the same torch build and C++ toolchain (CXX) that compiled it")
    if sig and sig.kind == FailureKind.TIMEOUT and sig.phase == Phase.COMPILE:
        # A large model's cold compile outlasts the default limit: every run then stops where a hang would.
        steps.append("The failing runs were stopped inside their AOTI compile at the --timeout limit: a compile "
                     "slower than the limit reads the same as one that hangs. Tell them apart with a larger "
                     f"--timeout; where it still hangs, TORCH_LOGS=+inductor {cmd} shows the last step it reached")
    elif sig and sig.phase in (Phase.EXPORT, Phase.COMPILE):
        steps.append(f"Reproduce the {sig.phase} error alone with TORCH_LOGS=+inductor and check custom-op "
                     f"fake/meta functions; shrink it with: DUMP_AOTI_MINIFIER=1 {cmd}")
    elif c is None or c.kind in (CulpritKind.KERNEL, CulpritKind.UNKNOWN):
        steps.append(Step.MINIFY)
    return steps
