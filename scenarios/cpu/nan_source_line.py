"""A NaN made by one line of the model (a square root of a negative number), fused with its neighbours into
one CPU kernel and noticed only by the script's check of the output: the report must name that line."""
import os

import torch


class Scale(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x):
        y = torch.sqrt(x - 0.5)  # BUG: NaN wherever x < 0.5
        return torch.tanh(self.proj(y)) * 2.0


torch.manual_seed(0)
x = torch.rand(4, 8)
ep = torch.export.export(Scale(), (x,))
path = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.abspath("nan_source_line.pt2"))
out = torch._inductor.aoti_load_package(path)(x)
if not torch.isfinite(out).all():
    raise SystemExit("non-finite output")
print("ok", float(out.sum()))
