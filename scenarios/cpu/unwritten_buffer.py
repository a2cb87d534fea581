"""State the program writes, and the package does not carry between calls (the shape of pytorch#165444, where a
compiled counter returned 2, 2, 2 while eager gave 2, 3, 4): a decoder step scales its output by a `step` buffer
it increments in forward (`self.step.add_(1)`). Eager moves the counter on every call; the package computes from
the value it was built with every time. The first call agrees, the second differs. No kernel is wrong: each
computes what it was compiled to, from the state as built. The culprit is the buffer, not carried.

    python unwritten_buffer.py [--cuda]"""
import os
import sys

import torch


class Stepper(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)
        self.register_buffer("step", torch.zeros(1))

    def forward(self, x):
        self.step.add_(1)
        return torch.tanh(self.proj(x)) * self.step


device = "cuda" if "--cuda" in sys.argv else "cpu"
torch.manual_seed(0)
model = Stepper().to(device).eval()
x = torch.randn(4, 8, device=device)
ep = torch.export.export(model, (x,))
path = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.abspath("unwritten_buffer.pt2"))
runner = torch._inductor.aoti_load_package(path)
with torch.no_grad():
    for call in range(3):
        diff = float((runner(x) - model(x)).abs().max())
        if diff > 1e-4:
            print(f"wrong values on call {call}: max abs difference {diff:.4g}", flush=True)
            sys.exit(1)
print("OK")
