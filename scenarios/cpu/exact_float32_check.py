"""A float32 control where nothing is miscompiled: the script holds the package to eager's exact bits
(`torch.equal`). Inductor fuses a softmax, a row sum, a layer norm and a column sum into one kernel that reduces in
its own order; the last sum over 512 rows cancels, so the orders round apart by about 3e-05, beyond
assert_close's float32 tolerance. Against the program run in float64 the package and eager are off by the same
order. No kernel may be convicted; the report must say the script's check is stricter than float32 allows.

    python exact_float32_check.py [--cuda]"""
import os
import sys

import torch


class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(256, 256)

    def forward(self, x):
        h = self.proj(x)
        h = torch.softmax(h * 0.37, dim=-1) * h.sum(dim=-1, keepdim=True)
        return torch.layer_norm(h + x, (256,)).sum(dim=0)


device = "cuda" if "--cuda" in sys.argv else "cpu"
torch.manual_seed(0)
m = M().to(device).eval()
x = torch.randn(512, 256, device=device)
ep = torch.export.export(m, (x,))
path = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.abspath("exact_float32_check.pt2"))
runner = torch._inductor.aoti_load_package(path)
with torch.no_grad():
    out, ref = runner(x), m(x)
print("max diff", (out - ref).abs().max().item())
assert torch.equal(out, ref), "package output differs from eager"
print("ok")
