"""A dynamic batch the export left open (2 and up) that the compiler narrowed: the package's input check refuses a
batch of 100 although the exported program allows it. The repro's post-grad pass stands in for a lowering that
specialises on the size hint (it adds the guard `batch <= 64`), as wrong_value_pass's pass stands in for a faulty
rewrite. The script turns the runtime's input check on, as a server validating its inputs does; the user must
hear that Inductor narrowed the range, not that the batch is outside the exported one."""
import os

import torch
from torch._inductor.custom_graph_pass import CustomGraphPass
from torch.export import Dim


class SpecialiseBatch(CustomGraphPass):
    def __call__(self, graph):
        for node in graph.nodes:
            val = node.meta.get("val") if node.op == "placeholder" else None
            if isinstance(val, torch.Tensor) and isinstance(val.shape[0], torch.SymInt):
                bool(val.shape[0] <= 64)  # a guard on the size hint: the package's check narrows the range

    def uuid(self):
        return "specialise-batch-1"


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(16, 8)

    def forward(self, x):
        return torch.relu(self.proj(x))


torch.manual_seed(0)
ep = torch.export.export(Net().eval(), (torch.randn(8, 16),), dynamic_shapes={"x": {0: Dim.DYNAMIC}})
path = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.abspath("narrowed_dynamic_dim.pt2"),
                                                inductor_configs={"post_grad_custom_post_pass": SpecialiseBatch()})
os.environ["AOTI_RUNTIME_CHECK_INPUTS"] = "1"
runner = torch._inductor.aoti_load_package(path)
print("ok", runner(torch.randn(100, 16)).shape)
