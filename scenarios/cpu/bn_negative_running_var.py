"""An eval-mode BatchNorm whose running_var holds one negative entry (a checkpoint merged by hand, a buffer
written after init): the activation is clean, but rsqrt(var + eps) of a negative variance is NaN. The level-2
printer never prints constants, and a negative variance is finite, so only a check of the constant against the
op's domain names the buffer. Only the script's own check of the output notices.

    python bn_negative_running_var.py [--channels N] [--cuda]

With 8 channels Inductor inlines the buffers into the kernel as literals: the package holds no copy to read, and
the buffer is judged by the exported value."""
import os
import sys

import torch


class Net(torch.nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.proj = torch.nn.Linear(8, channels)
        self.bn = torch.nn.BatchNorm1d(channels)

    def forward(self, x):
        return self.bn(torch.relu(self.proj(x)))


device = "cuda" if "--cuda" in sys.argv else "cpu"
channels = int(sys.argv[sys.argv.index("--channels") + 1]) if "--channels" in sys.argv else 64
torch.manual_seed(0)
model = Net(channels).eval()
with torch.no_grad():
    model.bn.running_var[5] = -0.3
model = model.to(device)
x = torch.rand(4, 8, device=device)
ep = torch.export.export(model, (x,))
path = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.abspath("bn_negative_running_var.pt2"))
runner = torch._inductor.aoti_load_package(path)
out = runner(x)
if not torch.isfinite(out).all():
    raise SystemExit("non-finite output")
print("ok", float(out.sum()))
