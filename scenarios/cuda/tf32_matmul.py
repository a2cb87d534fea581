"""A float32 model compiled while TF32 matmuls were allowed (`torch.set_float32_matmul_precision("high")`, a
common default in training scripts): with max-autotune's Triton GEMM templates the package's matmul kernel is
generated with TF32 baked in, so it rounds its operands to 10 mantissa bits whatever the precision setting is
when it runs. The script checks the package against full-float32 eager ("highest") and fails by TF32's rounding
alone. Nothing is miscompiled: the gap is the precision the compile was allowed, and no kernel may be convicted
for it. The control recompile that tells it: the same build with TF32 off agrees with eager.

    python tf32_matmul.py"""
import os
import sys

import torch


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(256, 512)
        self.down = torch.nn.Linear(512, 64)

    def forward(self, x):
        return self.down(torch.nn.functional.gelu(self.up(x)))


torch.manual_seed(0)
model = Mlp().cuda().eval()
x = torch.randn(128, 256, device="cuda")
torch.set_float32_matmul_precision("high")  # TF32 allowed while compiling
ep = torch.export.export(model, (x,))
path = torch._inductor.aoti_compile_and_package(
    ep, package_path=os.path.abspath("tf32_matmul.pt2"),
    inductor_configs={"max_autotune": True, "max_autotune_gemm_backends": "TRITON"})
torch.set_float32_matmul_precision("highest")  # the reference: full float32
runner = torch._inductor.aoti_load_package(path)
with torch.no_grad():
    got, want = runner(x), model(x)
diff = float((got - want).abs().max())
if not torch.allclose(got, want, rtol=1.3e-6, atol=1e-5):  # float32's assert_close tolerance
    print(f"wrong values: max abs difference {diff:.4g}", flush=True)
    sys.exit(1)
print("OK")
