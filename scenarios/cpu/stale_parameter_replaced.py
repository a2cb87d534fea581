"""A parameter replaced on the module after the package was built: the script loads a fine-tuned checkpoint with
`load_state_dict(..., assign=True)` once the package exists, so the module holds new parameter objects while the
package computes with the weights it baked in. Wrong but finite. The exported program still holds the old
objects, so it agrees with the package: only the module's live state, looked up by each constant's attribute path,
shows which weight moved. The culprit is `head.weight`, which the head's extern addmm reads, not that addmm.

    python stale_parameter_replaced.py [--cuda]"""
import os
import sys

import torch


class Classifier(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Linear(16, 32)
        self.head = torch.nn.Linear(32, 5)

    def forward(self, x):
        return torch.softmax(self.head(torch.relu(self.body(x))), dim=-1)


device = "cuda" if "--cuda" in sys.argv else "cpu"
torch.manual_seed(0)
model = Classifier().to(device).eval()
x = torch.randn(8, 16, device=device)
ep = torch.export.export(model, (x,))
path = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.abspath("stale_parameter_replaced.pt2"))
tuned = {k: v.clone() for k, v in model.state_dict().items()}
tuned["head.weight"][2] += 0.25  # the fine-tuned checkpoint: class 2's row moved
model.load_state_dict(tuned, assign=True)  # new parameter objects: the exported program keeps the old ones
runner = torch._inductor.aoti_load_package(path)
with torch.no_grad():
    diff = float((runner(x) - model(x)).abs().max())
if diff > 1e-4:
    print(f"wrong values: max abs difference {diff:.4g}", flush=True)
    sys.exit(1)
print("OK")
