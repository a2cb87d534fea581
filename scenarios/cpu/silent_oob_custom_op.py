"""Silent out-of-bounds read inside a C++ custom op run by an AOTInductor package (CPU).

`bisectlab::window_sum` is a tiny C++ operator that sums each element with the
3 elements after it in the flat buffer.  Its loop runs to the very end, so the
last row's last 3 outputs read up to 12 bytes past the end of the input's heap
buffer (an off-by-window bug).  The caller drops those columns, and 12 bytes
past a small malloc'd block is still mapped heap, so every plain run passes
(exit 0) and prints the same numbers: only a memory checker can tell that the
op reads memory it does not own.

The op is called inside the AOTI-compiled graph, between fused Inductor
kernels (relu/add before, mul/sum after), so at run time it goes through
AOTI's proxy executor, not through a generated kernel.  It is built with -g so
a checker can name its source line (the flaky_custom_op_crash scenario's op
has no debug info: a checker names only its function there).
"""
import os
import sys

import torch
from torch.utils.cpp_extension import load_inline

WINDOW = 4

CPP_SRC = r"""
#include <torch/library.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>

// out[k] = x[k] + x[k+1] + x[k+2] + x[k+3] over the flat buffer; the caller keeps only
// the columns whose window stays inside the row.  The loop does not stop 3 short of the
// end (the bug), so the last 3 outputs read past the input's allocation.
at::Tensor window_sum(const at::Tensor& x) {
  auto xc = x.contiguous();
  auto out = at::empty_like(xc);
  const int64_t n = xc.numel();
  const float* src = xc.data_ptr<float>();
  float* dst = out.data_ptr<float>();
  for (int64_t k = 0; k < n; ++k) {
    float acc = 0.f;
    for (int64_t w = 0; w < 4; ++w)
      acc += src[k + w];
    dst[k] = acc;
  }
  return out;
}

TORCH_LIBRARY(bisectlab, m) {
  m.def("window_sum(Tensor x) -> Tensor");
}
TORCH_LIBRARY_IMPL(bisectlab, CPU, m) {
  m.impl("window_sum", &window_sum);
}
"""

# Builds (or reuses) the extension under $TORCH_EXTENSIONS_DIR and registers the op.
load_inline(
    name="bisectlab_silent_window_sum",
    cpp_sources=[CPP_SRC],
    extra_cflags=["-g"],
    is_python_module=False,
    verbose=False,
)


@torch.library.register_fake("bisectlab::window_sum")
def _(x):
    return torch.empty_like(x)


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.randn(64))
        self.scale = torch.nn.Parameter(torch.randn(64 - (WINDOW - 1)))

    def forward(self, x):
        h = torch.relu(x) + self.bias                        # fused Inductor kernel
        g = torch.ops.bisectlab.window_sum(h)                 # custom op (proxy executor)
        g = g[:, : h.shape[1] - (WINDOW - 1)]                 # drops the columns that read past
        return (g * self.scale).sum(dim=1)                    # fused Inductor kernel


def main():
    torch.manual_seed(0)
    model = Model().eval()
    x = torch.randn(128, 64)
    with torch.no_grad():
        ep = torch.export.export(model, (x,))
    pkg = torch._inductor.aoti_compile_and_package(
        ep, package_path=os.path.abspath("silent_oob_custom_op.pt2"))
    runner = torch._inductor.aoti_load_package(pkg)

    print("running compiled model", flush=True)
    out = runner(x)
    with torch.no_grad():
        ref = model(x)
    torch.testing.assert_close(out, ref)
    print("OK", out.shape, f"{out.sum().item():.4f}")


if __name__ == "__main__":
    main()
    sys.exit(0)
