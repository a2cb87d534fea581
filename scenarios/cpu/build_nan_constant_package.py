"""Builds the package prebuilt_nan_constant.py loads: python build_nan_constant_package.py OUT.pt2 [--cuda]

A stand-in for a package handed over from elsewhere (a production export): a model whose parameter proj.bias
holds NaN in three of its 16 elements, compiled with aoti_compile_and_package. nan_constant.py compiles the
same model itself.
"""
import os
import sys

import torch


class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 16)

    def forward(self, x):
        return torch.tanh(torch.relu(self.proj(x))) * 3.0


def corrupt_model():
    torch.manual_seed(0)
    m = M()
    with torch.no_grad():
        m.proj.bias[[1, 5, 9]] = float("nan")  # BUG: the weights arrive corrupt
    return m


if __name__ == "__main__":
    device = "cuda" if "--cuda" in sys.argv else "cpu"
    ep = torch.export.export(corrupt_model().to(device), (torch.rand(4, 8, device=device),))
    # Written beside its final name and renamed: a reader never sees half a package.
    tmp = f"{sys.argv[1]}.{os.getpid()}.tmp.pt2"
    torch._inductor.aoti_compile_and_package(ep, package_path=tmp)
    os.replace(tmp, sys.argv[1])
