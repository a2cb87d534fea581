"""Setup of the prebuilt_package scenario: builds the .pt2 that prebuilt_package.py is handed, as a colleague
would have built it (no debug flags). The model: a NaN born in one fused kernel (log of a negative number),
carried through an extern matmul and a second fused kernel.

    python prebuilt_build.py OUT.pt2 [--cuda]"""
import os
import sys

import torch


class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(16, 8))

    def forward(self, x):
        h = torch.log(x - 0.5) * 2.0  # BUG: NaN wherever x < 0.5
        h = torch.relu(h) + 1.0
        y = h @ self.w
        return torch.tanh(y) * 3.0


if __name__ == "__main__":
    torch.manual_seed(0)
    device = "cuda" if "--cuda" in sys.argv else "cpu"
    ep = torch.export.export(M().to(device), (torch.rand(4, 16, device=device),))
    print(torch._inductor.aoti_compile_and_package(ep, package_path=os.path.abspath(sys.argv[1])))
