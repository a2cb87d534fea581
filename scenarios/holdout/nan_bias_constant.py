"""Holdout: a parameter loaded from a corrupted checkpoint holds a NaN; the graph itself is correct."""
import os

import torch


class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.zeros(16))
        self.proj = torch.nn.Parameter(torch.randn(16, 4))

    def forward(self, x):
        h = torch.tanh(x * 2.0 + self.bias)
        return torch.softmax(h @ self.proj, dim=-1)


torch.manual_seed(3)
m = M()
with torch.no_grad():
    m.bias[5] = float("nan")  # the corrupted checkpoint
x = torch.randn(4, 16)
ep = torch.export.export(m, (x,))
path = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.abspath("m.pt2"))
runner = torch._inductor.aoti_load_package(path)
out = runner(x)
if torch.isnan(out).any():
    raise SystemExit(f"NaN in output: {int(torch.isnan(out).sum())} elements")
