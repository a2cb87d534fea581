"""Setup of the prebuilt_named_inputs scenario: builds a .pt2 from a program exported with keyword inputs
(`features`, `gain`), as a serving stack that calls its models by keyword does. No debug flags.

    python prebuilt_named_build.py OUT.pt2"""
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
    kwargs = {"features": torch.rand(4, 16), "gain": torch.rand(16)}
    ep = torch.export.export(M(), (), kwargs)
    print(torch._inductor.aoti_compile_and_package(ep, package_path=os.path.abspath(sys.argv[1])))
