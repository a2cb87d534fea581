"""Flaky SIGSEGV inside a C++ custom op run by an AOTInductor package (CPU).

`bisectlab::shifted_gather` is a tiny C++ operator that gathers rows of `x`
at `row + shift[0]` WITHOUT a bounds check.  The shift comes in as a run-time
input tensor drawn from os.urandom, so about half of the runs read far outside
the buffer (an unmapped address) and the process dies with SIGSEGV; the other
half compute a correct result.  It is the CPU stand-in for a flaky CUDA
illegal memory access in a custom kernel.

The op is called inside the AOTI-compiled graph, between fused Inductor
kernels (relu/add before, mul/sum after), so at run time it goes through
AOTI's proxy executor, not through a generated kernel.
"""
import os
import sys

import torch
from torch.utils.cpp_extension import load_inline

CPP_SRC = r"""
#include <torch/library.h>
#include <ATen/ATen.h>

// out[i, :] = x[i + shift[0], :]   (no bounds check: the bug)
at::Tensor shifted_gather(const at::Tensor& x, const at::Tensor& shift) {
  auto xc = x.contiguous();
  auto out = at::empty_like(xc);
  const int64_t rows = xc.size(0), cols = xc.size(1);
  const int64_t s = shift.item<int64_t>();
  const float* src = xc.data_ptr<float>();
  float* dst = out.data_ptr<float>();
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      dst[i * cols + j] = src[(i + s) * cols + j];
  return out;
}

TORCH_LIBRARY(bisectlab, m) {
  m.def("shifted_gather(Tensor x, Tensor shift) -> Tensor");
}
TORCH_LIBRARY_IMPL(bisectlab, CPU, m) {
  m.impl("shifted_gather", &shifted_gather);
}
"""

# Builds (or reuses) the extension under $TORCH_EXTENSIONS_DIR and registers the op.
load_inline(
    name="bisectlab_flaky_gather",
    cpp_sources=[CPP_SRC],
    is_python_module=False,
    verbose=False,
)


@torch.library.register_fake("bisectlab::shifted_gather")
def _(x, shift):
    return torch.empty_like(x)


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.randn(64))
        self.scale = torch.nn.Parameter(torch.randn(64))

    def forward(self, x, shift):
        h = torch.relu(x) + self.bias                        # fused Inductor kernel
        g = torch.ops.bisectlab.shifted_gather(h, shift)      # custom op (proxy executor)
        return (g * self.scale).sum(dim=1)                    # fused Inductor kernel


# The share of runs that crash, in percent (a benchmark sets it; the manifest's answer is for the default).
CRASH_PERCENT = int(os.environ.get("FLAKY_CRASH_PERCENT", "50"))
# `--one-in N`: a rare crash, one run in N (the manifest's rare_crash_custom_op). Under aoti-bisect the draw is fixed
# by the run's index (the 4th of every N: indices 3, 13, 23, ... for N = 10), so that a scenario check meets the
# same rare crash every time; elsewhere it is os.urandom's.
ONE_IN = int(sys.argv[sys.argv.index("--one-in") + 1]) if "--one-in" in sys.argv else None


def crashes() -> bool:
    r = int.from_bytes(os.urandom(2), "little")
    if ONE_IN is None:
        return r % 100 < CRASH_PERCENT
    index = os.environ.get("AOTI_BISECT_RUN_INDEX")
    return int(index) % ONE_IN == 3 if index is not None else r % ONE_IN == 0


def draw_shift():
    # Run-time randomness: the crashing runs get a wildly out-of-range shift, only they
    # (2**31 rows * 64 floats = 512 GiB past the buffer -> unmapped -> SIGSEGV).
    return (1 << 31) if crashes() else 0


def main():
    torch.manual_seed(0)
    model = Model().eval()
    x = torch.randn(128, 64)
    example = (x, torch.zeros(1, dtype=torch.int64))
    with torch.no_grad():
        ep = torch.export.export(model, example)
    pkg = torch._inductor.aoti_compile_and_package(
        ep, package_path=os.path.abspath("flaky_custom_op_crash.pt2"))
    runner = torch._inductor.aoti_load_package(pkg)

    shift = draw_shift()
    print(f"running compiled model (shift={shift})", flush=True)
    out = runner(x, torch.tensor([shift], dtype=torch.int64))
    with torch.no_grad():
        ref = model(x, torch.tensor([shift], dtype=torch.int64))
    torch.testing.assert_close(out, ref)
    print("OK", out.shape)


if __name__ == "__main__":
    main()
    sys.exit(0)
