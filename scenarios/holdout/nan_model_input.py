"""Holdout: the model is fine; one element of the input batch is NaN (a broken preprocessing step)."""
import os

import torch


class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(32, 16)
        self.l2 = torch.nn.Linear(16, 4)

    def forward(self, x):
        return torch.sigmoid(self.l2(torch.relu(self.l1(x * 0.5 + 1.0))))


torch.manual_seed(1)
x = torch.randn(8, 32)
ep = torch.export.export(M(), (x,))
path = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.abspath("m.pt2"))
runner = torch._inductor.aoti_load_package(path)
batch = torch.randn(8, 32)
batch[3, 7] = float("nan")  # BUG upstream of the model
out = runner(batch)
assert torch.isfinite(out).all(), "model produced non-finite values"
