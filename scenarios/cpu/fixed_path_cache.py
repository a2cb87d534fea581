"""Caches its package at a fixed path outside any run folder (given on the command line) and compiles only when
it is missing, as many scripts do; the scenario's setup runs it once, so the cache is there before the
bisection and every run loads a package no flag set built. The model: an index computed inside the graph
(idx * 3 + 1) runs past the gathered dimension; the generated CPU kernel's bounds check raises (with --cuda, the
Triton kernel's device-side assert fires).

    python fixed_path_cache.py PATH.pt2 [--build-only] [--cuda]"""
import os
import sys

import torch


class M(torch.nn.Module):
    def forward(self, x, idx):
        j = idx * 3 + 1  # BUG: for idx >= 5 this is past x.shape[1] == 16
        y = torch.cos(x) * 2
        return y[:, j].sum(dim=1)


device = "cuda" if "--cuda" in sys.argv else "cpu"
torch.manual_seed(0)
x = torch.randn(4, 16, device=device)
idx = torch.arange(0, 8, device=device)
path = sys.argv[1]
if not os.path.exists(path):
    ep = torch.export.export(M(), (x, idx))
    torch._inductor.aoti_compile_and_package(ep, package_path=path)
    if "--build-only" in sys.argv:
        sys.exit(0)
runner = torch._inductor.aoti_load_package(path)
print(float(runner(x, idx).sum()))
