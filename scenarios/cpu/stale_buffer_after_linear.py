"""A buffer added after a linear layer, changed on the module after the package was built: the script
re-centres `shift` once the package exists, so the package adds the copy it baked in. Wrong but finite.

On CUDA (--cuda) Inductor runs `fc1` as an extern mm and adds its bias and `shift` in the next kernel: the mm's
output lacks the bias, so held against eager's whole `linear` it would look wrong by the bias (issue #37 convicted
`aoti_torch_cuda_mm_out` so). It must be held against the product alone, and the stale buffer named.

    python stale_buffer_after_linear.py [--cuda]"""
import os
import sys

import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.register_buffer("shift", torch.zeros(32))
        self.fc2 = torch.nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x) + self.shift))


device = "cuda" if "--cuda" in sys.argv else "cpu"
torch.manual_seed(0)
model = Net().to(device).eval()
x = torch.randn(8, 16, device=device)
ep = torch.export.export(model, (x,))
path = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.abspath("stale_buffer_after_linear.pt2"))
with torch.no_grad():
    model.shift.copy_(torch.linspace(-0.5, 0.5, 32))  # re-centred after the build
runner = torch._inductor.aoti_load_package(path)
with torch.no_grad():
    diff = float((runner(x) - model(x)).abs().max())
if diff > 1e-4:
    print(f"wrong values: max abs difference {diff:.4g}", flush=True)
    sys.exit(1)
print("OK")
