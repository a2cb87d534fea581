"""Loads a package built by another process (sys.argv[1]), runs it, then dies of SIGSEGV (tests/test_hook.py)."""
import ctypes
import sys

import torch

runner = torch._inductor.aoti_load_package(sys.argv[1])
print(runner(torch.randn(3, 4), torch.tensor([0, 2]), bias=torch.zeros(4), s=2.0).shape, flush=True)
ctypes.string_at(0)
