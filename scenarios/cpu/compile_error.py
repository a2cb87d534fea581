"""C++ compile failure inside aoti_compile_and_package (CPU toolchain problem).

The user wants a package for an ARM edge box and sets Inductor's target
architecture (torch._inductor.config.cpp.march, the same knob as the
TORCHINDUCTOR_CPP_MARCH env var) to "armv8.2-a" while building on an x86-64
machine with the host g++.  torch.export succeeds; then Inductor generates the
C++ kernels and wrapper and the host compiler rejects `-march=armv8.2-a`, so
aoti_compile_and_package raises torch._inductor.exc.CppCompileError.
"""
import os
import sys

import torch
import torch._inductor.config as inductor_config


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(32, 16)

    def forward(self, x):
        return torch.relu(self.lin(x)).sum(dim=-1) * 2.0


def main():
    torch.manual_seed(0)
    model = Model().eval()
    x = torch.randn(8, 32)
    with torch.no_grad():
        ep = torch.export.export(model, (x,))
    print("export OK", flush=True)

    # Deployment target: ARM (Cortex-A76-class) edge device.
    inductor_config.cpp.march = "armv8.2-a"

    pkg = torch._inductor.aoti_compile_and_package(
        ep, package_path=os.path.abspath("compile_error.pt2"))
    runner = torch._inductor.aoti_load_package(pkg)
    out = runner(x)
    with torch.no_grad():
        torch.testing.assert_close(out, model(x))
    print("OK", out.shape)


if __name__ == "__main__":
    main()
    sys.exit(0)
