"""Loads a .pt2 handed over on the command line, built by build_with_crashing_toolchain.py (the scenario's
setup) with a toolchain whose runtime this process cannot take: the load segfaults in native code."""
import sys

import torch

runner = torch._inductor.aoti_load_package(sys.argv[1])
print("ok", float(runner(torch.rand(2, 8)).sum()))
