"""Hang inside a C++ custom op run by an AOTInductor package (CPU).

`bisectlab::wait_ready` is a tiny C++ operator that polls a "ready" flag tensor
until it becomes non-zero (a stand-in for a custom kernel that spins on a
producer/consumer flag or a collective that never completes).  The flag passed
at run time is 0 and nothing ever sets it, so the op -- and the script -- never
returns.  The harness is expected to kill the process on a timeout.

The op is called inside the AOTI-compiled graph, between fused Inductor
kernels (relu/add before, mul/sum after), so at run time it goes through
AOTI's proxy executor.
"""
import os
import sys

import torch
from torch.utils.cpp_extension import load_inline

CPP_SRC = r"""
#include <torch/library.h>
#include <ATen/ATen.h>
#include <atomic>
#include <chrono>
#include <thread>

// Waits until *ready != 0, then returns a copy of x.  Nobody ever sets the flag.
at::Tensor wait_ready(const at::Tensor& x, const at::Tensor& ready) {
  volatile const int64_t* flag = ready.data_ptr<int64_t>();
  while (*flag == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return x.clone();
}

TORCH_LIBRARY(bisectlab, m) {
  m.def("wait_ready(Tensor x, Tensor ready) -> Tensor");
}
TORCH_LIBRARY_IMPL(bisectlab, CPU, m) {
  m.impl("wait_ready", &wait_ready);
}
"""

load_inline(
    name="bisectlab_hang_wait",
    cpp_sources=[CPP_SRC],
    is_python_module=False,
    verbose=False,
)


@torch.library.register_fake("bisectlab::wait_ready")
def _(x, ready):
    return torch.empty_like(x)


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.randn(64))
        self.scale = torch.nn.Parameter(torch.randn(64))

    def forward(self, x, ready):
        h = torch.relu(x) + self.bias                   # fused Inductor kernel
        w = torch.ops.bisectlab.wait_ready(h, ready)     # custom op (proxy executor): never returns
        return (w * self.scale).sum(dim=1)               # fused Inductor kernel


def main():
    torch.manual_seed(0)
    model = Model().eval()
    x = torch.randn(128, 64)
    ready = torch.ones(1, dtype=torch.int64)   # example input: flag already set
    with torch.no_grad():
        ep = torch.export.export(model, (x, ready))
    pkg = torch._inductor.aoti_compile_and_package(
        ep, package_path=os.path.abspath("hang_custom_op.pt2"))
    runner = torch._inductor.aoti_load_package(pkg)

    print("running compiled model ...", flush=True)
    out = runner(x, torch.zeros(1, dtype=torch.int64))   # the flag is never set -> hangs
    print("OK", out.shape)


if __name__ == "__main__":
    main()
    sys.exit(0)
