"""A healthy model: compiles, loads, runs and matches eager. aoti-bisect must say it did not reproduce.

Eager runs in float64: in float32, torch 2.13's first torch.sin of a process goes to oneMKL's VML from both intra-op
threads at once, and under load one thread's half can come back at VML's low (EP) accuracy (pytorch#188792), which
fails this comparison with the package right (docs/scenarios.md, "A healthy control's eager reference")."""
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
torch.testing.assert_close(runner(x), M()(x.double()).float())
print("ok")
