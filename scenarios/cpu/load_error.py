"""Load-time failure: the package needs a custom-op library the loading process never registered.

Build step (a separate process, like an offline "export & compile" job): the
C++ custom op `bisectlab::fused_norm` is built with load_inline and registered,
the model is exported and compiled with aoti_compile_and_package into
load_error.pt2 in the current directory.  The op is not lowered by Inductor, so
the package calls it by name through AOTI's proxy executor.

Serve step (this process, like the deployed inference service): it loads
load_error.pt2 with torch._inductor.aoti_load_package but forgets to load the
custom-op library (torch.ops.load_library / importing the extension) first.
Loading the package fails because the operator `bisectlab::fused_norm` is not
registered in this process.
"""
import os
import subprocess
import sys

import torch

PKG = os.path.abspath("load_error.pt2")

CPP_SRC = r"""
#include <torch/library.h>
#include <ATen/ATen.h>

// x / (||x||_row + eps)
at::Tensor fused_norm(const at::Tensor& x, double eps) {
  return x / (x.norm(2, {1}, /*keepdim=*/true) + eps);
}

TORCH_LIBRARY(bisectlab, m) {
  m.def("fused_norm(Tensor x, float eps) -> Tensor");
}
TORCH_LIBRARY_IMPL(bisectlab, CPU, m) {
  m.impl("fused_norm", &fused_norm);
}
"""


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(32, 32)

    def forward(self, x):
        h = torch.relu(self.lin(x))
        h = torch.ops.bisectlab.fused_norm(h, 1e-6)
        return h * 2.0 + 1.0


def build():
    """Offline compile job: registers the custom op, exports, compiles."""
    from torch.utils.cpp_extension import load_inline

    load_inline(name="bisectlab_fused_norm", cpp_sources=[CPP_SRC],
                is_python_module=False, verbose=False)

    @torch.library.register_fake("bisectlab::fused_norm")
    def _(x, eps):
        return torch.empty_like(x)

    torch.manual_seed(0)
    model = Model().eval()
    with torch.no_grad():
        ep = torch.export.export(model, (torch.randn(16, 32),))
    torch._inductor.aoti_compile_and_package(ep, package_path=PKG)
    print(f"built {PKG}", flush=True)


def serve():
    """Inference service: loads the package (without registering bisectlab ops)."""
    runner = torch._inductor.aoti_load_package(PKG)
    out = runner(torch.randn(16, 32))
    print("OK", out.shape)


if __name__ == "__main__":
    if sys.argv[1:] == ["--build"]:
        build()
        sys.exit(0)
    # 1) offline compile job (separate process, as in a real export pipeline)
    subprocess.run([sys.executable, os.path.abspath(__file__), "--build"], check=True)
    # 2) deployment: load and run the package in a fresh process (this one)
    serve()
    sys.exit(0)
