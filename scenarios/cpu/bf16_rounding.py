"""A bfloat16 model whose package differs from eager by rounding alone: `exp(g) * exp(-g) - 1` is zero in exact
arithmetic. Eager rounds to bfloat16 after every op, so the product lands a bfloat16 step away from 1 and the
difference keeps that step; Inductor fuses the chain into one kernel that computes in float32 and rounds once, and
its result is near zero, as float64 says. The script's check against its own eager model fails, yet nothing is
miscompiled: the fused kernel is the more accurate side. No kernel may be convicted; the report names where the
gap arises and which side float64 takes.

    python bf16_rounding.py [--cuda] [--fp16]"""
import os
import sys

import torch


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(16, 32)

    def forward(self, x):
        g = self.fc(x)
        return (torch.exp(g) * torch.exp(-g) - 1.0) * 64.0


device = "cuda" if "--cuda" in sys.argv else "cpu"
dtype = torch.float16 if "--fp16" in sys.argv else torch.bfloat16
torch.manual_seed(0)
model = Block().to(device=device, dtype=dtype).eval()
x = torch.randn(8, 16, device=device, dtype=dtype)
ep = torch.export.export(model, (x,))
path = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.abspath("bf16_rounding.pt2"))
runner = torch._inductor.aoti_load_package(path)
with torch.no_grad():
    got, want = runner(x), model(x)
diff = float((got.float() - want.float()).abs().max())
if not torch.allclose(got.float(), want.float(), rtol=1.6e-2, atol=1e-2):  # bfloat16's usual tolerance
    print(f"wrong values: max abs difference {diff:.4g}", flush=True)
    sys.exit(1)
print("OK")
