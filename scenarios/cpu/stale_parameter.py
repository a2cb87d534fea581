"""A parameter changed on the module after the package was built: the script fine-tunes the classifier's
`head.weight` in place once the package exists (one step of a calibration), so the package computes with the
weight it baked in while the module uses the new one. Wrong but finite: every kernel computes what it was
compiled to compute; only the script's comparison with its own module notices. The culprit is the parameter,
by its attribute path, not the head's matmul that reads it.

    python stale_parameter.py [--cuda]"""
import os
import sys

import torch


class Classifier(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Linear(16, 32)
        self.head = torch.nn.Linear(32, 5)

    def forward(self, x):
        return torch.softmax(self.head(torch.relu(self.body(x))), dim=-1)


device = "cuda" if "--cuda" in sys.argv else "cpu"
torch.manual_seed(0)
model = Classifier().to(device).eval()
x = torch.randn(8, 16, device=device)
ep = torch.export.export(model, (x,))
path = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.abspath("stale_parameter.pt2"))
with torch.no_grad():
    model.head.weight[2].add_(0.25)  # an in-place update after the build: class 2's row moved
runner = torch._inductor.aoti_load_package(path)
with torch.no_grad():
    diff = float((runner(x) - model(x)).abs().max())
if diff > 1e-4:
    print(f"wrong values: max abs difference {diff:.4g}", flush=True)
    sys.exit(1)
print("OK")
