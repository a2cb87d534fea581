"""A buffer Inductor folded into the generated code: a scorer divides its logits by a `temperature` buffer, a
0-d tensor that Inductor bakes into the softmax kernel as a literal, so the package holds no copy of it. The
script calibrates the temperature once the package exists; the package still divides by the old value. Wrong but
finite: the softmax kernel differs from the exported program run eagerly (which reads the module's buffer), but it
computes what it was compiled to. The culprit is the buffer, folded into the code: updating the package's
constants cannot reach it, only a rebuild can.

    python folded_temperature.py [--cuda]"""
import os
import sys

import torch


class Scorer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(16, 8)
        self.register_buffer("temperature", torch.tensor(2.0))

    def forward(self, x):
        return torch.softmax(self.proj(x) / self.temperature, dim=-1)


device = "cuda" if "--cuda" in sys.argv else "cpu"
torch.manual_seed(0)
model = Scorer().to(device).eval()
x = torch.randn(4, 16, device=device)
ep = torch.export.export(model, (x,))
path = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.abspath("folded_temperature.pt2"))
with torch.no_grad():
    model.temperature.fill_(0.5)  # calibrated after the build
runner = torch._inductor.aoti_load_package(path)
with torch.no_grad():
    diff = float((runner(x) - model(x)).abs().max())
if diff > 1e-4:
    print(f"wrong values: max abs difference {diff:.4g}", flush=True)
    sys.exit(1)
print("OK")
