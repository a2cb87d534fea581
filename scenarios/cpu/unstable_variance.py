"""A control where nothing is miscompiled: a feature normaliser computes the variance in one pass, E[h^2] - E[h]^2,
on activations with a large mean (a bias near 3000, a spread of a few units). The subtraction cancels almost every
digit, so any two correct float32 programs that sum in another order disagree: the package and eager differ and
the script's strict check fails. No kernel is wrong; the reference itself is unstable (float32 and float64 eager
disagree by as much). A false conviction would send the user hunting a compiler bug that does not exist.

On CUDA (--cuda) Inductor runs `fc` as an extern mm and adds the bias in the next kernel: the mm's output is
`fc`'s product without its bias, and must be held against that, not against the whole `linear`.

    python unstable_variance.py [--cuda]"""
import os
import sys

import torch


class Normaliser(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(16, 32)

    def forward(self, x):
        h = self.fc(x)
        mu = h.mean(dim=-1, keepdim=True)
        var = (h * h).mean(dim=-1, keepdim=True) - mu * mu  # one-pass variance: cancels when |mu| >> spread
        return (h - mu) * torch.rsqrt(var.clamp_min(1e-2))


device = "cuda" if "--cuda" in sys.argv else "cpu"
torch.manual_seed(0)
model = Normaliser().eval()
with torch.no_grad():
    model.fc.bias.fill_(3000.0)
model = model.to(device)
x = torch.randn(8, 16, device=device) * 4
ep = torch.export.export(model, (x,))
path = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.abspath("unstable_variance.pt2"))
runner = torch._inductor.aoti_load_package(path)
with torch.no_grad():
    diff = float((runner(x) - model(x)).abs().max())
if diff > 1e-4:
    print(f"wrong values: max abs difference {diff:.4g}", flush=True)
    sys.exit(1)
print("OK")
