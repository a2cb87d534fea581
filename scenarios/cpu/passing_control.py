"""A healthy model: compiles, loads, runs and matches eager. aoti-bisect must say it did not reproduce."""
import os

import torch


class M(torch.nn.Module):
    def forward(self, x):
        return torch.sin(x) * 2 + 1


torch.manual_seed(0)
x = torch.randn(64, 100)
ep = torch.export.export(M(), (x,))
path = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.abspath("passing_control.pt2"))
runner = torch._inductor.aoti_load_package(path)
torch.testing.assert_close(runner(x), M()(x))
print("ok")
