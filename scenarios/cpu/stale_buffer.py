"""A buffer changed on the module after the package was built: the script calibrates `scale` once the package
exists, so the package computes with the copy of the buffer it baked in while the eager model uses the new one.
Wrong but finite: nothing is NaN, every kernel computes what it was compiled to compute, and an eager run of the
program as exported agrees with the package. Only the script's comparison with its own module notices."""
import os
import sys

import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(16, 64)
        self.register_buffer("scale", torch.ones(64))

    def forward(self, x):
        return torch.relu(self.proj(x)) * self.scale


torch.manual_seed(0)
model = Net().eval()
x = torch.randn(4, 16)
ep = torch.export.export(model, (x,))
path = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.abspath("stale_buffer.pt2"))
with torch.no_grad():
    model.scale.copy_(torch.linspace(0.5, 1.5, 64))  # calibrated after the build
runner = torch._inductor.aoti_load_package(path)
with torch.no_grad():
    diff = float((runner(x) - model(x)).abs().max())
if diff > 1e-4:
    print(f"wrong values: max abs difference {diff:.4g}", flush=True)
    sys.exit(1)
print("OK")
