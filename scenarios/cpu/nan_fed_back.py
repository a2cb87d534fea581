"""A decoder's loop: each call's output is the next call's input. On the fourth call `sqrt(h + 2)` meets h < -2 in
one fused kernel and makes a NaN from finite inputs; the later calls take that NaN in as their input, and the script
checks only the final state. The sanity stage's input check fires on a later call's input, which the model itself
made: the culprit is the kernel, on the call that made the NaN, never the input."""
import os

import torch


class Step(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(32, 32)

    def forward(self, x):
        h = self.lin(x)
        return torch.sqrt(h + 2.0) * 0.5 + x * 1.5


torch.manual_seed(0)
m = Step().eval()
x = torch.randn(8, 32) * 0.1
ep = torch.export.export(m, (x,))
path = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.abspath("nan_fed_back.pt2"))
runner = torch._inductor.aoti_load_package(path)
for step in range(8):
    x = runner(x)
if not torch.isfinite(x).all():
    raise RuntimeError("non-finite state after decoding")
print("ok")
