"""Setup of the prebuilt_named_inputs scenario: builds a .pt2 from a program exported with keyword inputs
(`features`, `gain`), as a serving stack that calls its models by keyword does. No debug flags. --cuda: a CUDA
package (the prebuilt_named_inputs_cuda scenario).

    python prebuilt_named_build.py OUT.pt2 [--cuda]"""
import os
import sys

import torch


class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(16, 8))

    def forward(self, features, gain):
        return torch.tanh((features * gain) @ self.w)


if __name__ == "__main__":
    torch.manual_seed(0)
    device = "cuda" if "--cuda" in sys.argv else "cpu"
    kwargs = {"features": torch.rand(4, 16, device=device), "gain": torch.rand(16, device=device)}
    ep = torch.export.export(M().to(device), (), kwargs)
    print(torch._inductor.aoti_compile_and_package(ep, package_path=os.path.abspath(sys.argv[1])))
