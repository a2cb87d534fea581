"""Loads a prebuilt .pt2 handed over on the command line (built by prebuilt_build.py, the scenario's setup) and
checks its output: nobody here has the model's code, and no compile-time debug flag can reach the package.

    python prebuilt_package.py PACKAGE.pt2 [--cuda]"""
import sys

import torch

torch.manual_seed(0)
x = torch.rand(4, 16, device="cuda" if "--cuda" in sys.argv else "cpu")
runner = torch._inductor.aoti_load_package(sys.argv[1])
out = runner(x)
if not torch.isfinite(out).all():
    raise SystemExit("non-finite output")
print("ok", float(out.sum()))
