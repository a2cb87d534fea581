"""An eval-mode BatchNorm whose running_var holds one negative entry (a checkpoint merged by hand, a buffer
written after init): the activation is clean, but rsqrt(var + eps) of a negative variance is NaN. The level-2
printer never prints constants, and a negative variance is finite, so only a check of the constant against the
op's domain names the buffer. Only the script's own check of the output notices."""
import os
import sys

import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 64)
        self.bn = torch.nn.BatchNorm1d(64)

    def forward(self, x):
        return self.bn(torch.relu(self.proj(x)))


device = "cuda" if "--cuda" in sys.argv else "cpu"
torch.manual_seed(0)
model = Net().eval()
with torch.no_grad():
    model.bn.running_var[5] = -0.3  # 64 channels: small buffers would be inlined into the kernel as literals
model = model.to(device)
x = torch.rand(4, 8, device=device)
ep = torch.export.export(model, (x,))
path = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.abspath("bn_negative_running_var.pt2"))
runner = torch._inductor.aoti_load_package(path)
out = runner(x)
if not torch.isfinite(out).all():
    raise SystemExit("non-finite output")
print("ok", float(out.sum()))
