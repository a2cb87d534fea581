"""Loads a prebuilt package given on the command line and checks its output; it never compiles anything.

    python prebuilt_nan_constant.py PACKAGE.pt2 [--cuda]

The package (built by build_nan_constant_package.py, the scenario's setup step) has a NaN in its parameter
proj.bias.
"""
import sys

import torch

runner = torch._inductor.aoti_load_package(sys.argv[1])
out = runner(torch.rand(4, 8, device="cuda" if "--cuda" in sys.argv else "cpu"))
if not torch.isfinite(out).all():
    raise SystemExit("non-finite output")
print("ok", float(out.sum()))
