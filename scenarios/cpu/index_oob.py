"""An index computed inside the graph (idx * 3 + 1) runs past the gathered dimension: Inductor's bounds
check in the generated CPU kernel raises at run time."""
import os

import torch


class M(torch.nn.Module):
    def forward(self, x, idx):
        j = idx * 3 + 1  # BUG: for idx >= 5 this is past x.shape[1] == 16
        y = torch.sin(x) + 1
        return y[:, j].sum(dim=1)


torch.manual_seed(0)
x = torch.randn(4, 16)
idx = torch.arange(0, 8)
ep = torch.export.export(M(), (x, idx))
path = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.abspath("index_oob.pt2"))
runner = torch._inductor.aoti_load_package(path)
print(float(runner(x, idx).sum()))
