"""Holdout: an index made by a reduction (argmax + a shift) feeds an embedding lookup past its table."""
import os

import torch


class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(10, 8))

    def forward(self, scores):
        idx = scores.argmax(dim=1) + 4  # BUG: argmax is in [0, 8), the table has 10 rows
        return torch.nn.functional.embedding(idx, self.table).sum()


torch.manual_seed(2)
scores = torch.randn(16, 8)
ep = torch.export.export(M(), (scores,))
path = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.abspath("m.pt2"))
runner = torch._inductor.aoti_load_package(path)
print(float(runner(scores)))
