"""A NaN born in one fused kernel (log of a negative number), carried through an extern matmul and a second
fused kernel, and only noticed by the script's own check of the model's output."""
import os

import torch


class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(16, 8))

    def forward(self, x):
        h = torch.log(x - 0.5) * 2.0  # BUG: NaN wherever x < 0.5
        h = torch.relu(h) + 1.0
        y = h @ self.w
        return torch.tanh(y) * 3.0


torch.manual_seed(0)
x = torch.rand(4, 16)
ep = torch.export.export(M(), (x,))
path = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.abspath("nan_after_matmul.pt2"))
runner = torch._inductor.aoti_load_package(path)
out = runner(x)
if not torch.isfinite(out).all():
    raise SystemExit("non-finite output")
print("ok", float(out.sum()))
