"""A compiler pass bug gives wrong but finite values: the package and eager disagree, nothing is NaN. [--bf16]"""
import os
import sys

import torch
from torch._inductor.custom_graph_pass import CustomGraphPass


class OffByHalf(CustomGraphPass):
    """Stands in for a faulty Inductor pattern rewrite: `t * 2.0` becomes `t * 2.5` in the post-grad graph."""

    def __call__(self, graph):
        for node in graph.nodes:
            if node.target is torch.ops.aten.mul.Tensor and node.args[1] == 2.0:
                node.args = (node.args[0], 2.5)

    def uuid(self):
        return "off-by-half-1"


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(16, 8)

    def forward(self, x):
        h = torch.tanh(x) * 3.0
        z = self.proj(h) * 2.0 + 1.0
        return z, torch.softmax(z, dim=1).sum(dim=0)


dtype = torch.bfloat16 if "--bf16" in sys.argv else torch.float32
torch.manual_seed(0)
model = Model().to(dtype).eval()
x = torch.randn(4, 16, dtype=dtype)
ep = torch.export.export(model, (x,))
path = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.abspath("wrong_value_pass.pt2"),
                                                inductor_configs={"post_grad_custom_post_pass": OffByHalf()})
runner = torch._inductor.aoti_load_package(path)
with torch.no_grad():
    out = runner(x)
    ref = model(x)
diff = max(float((o.float() - r.float()).abs().max()) for o, r in zip(out, ref))
if diff > (5e-2 if dtype == torch.bfloat16 else 1e-4):  # bfloat16: beyond what its rounding explains
    print(f"wrong values: max abs difference {diff:.4g}", flush=True)
    sys.exit(1)
print("OK")
