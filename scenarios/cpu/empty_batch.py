"""An empty batch: the candidates are exported with a dynamic count that may be zero, and the model always
keeps the first three. A request arrives with no candidates: the generated CPU kernel checks
`0 <= tmpN < ks0` with ks0 = 0 and raises."""
import os

import torch


class KeepFirst(torch.nn.Module):
    def forward(self, candidates, keep):
        return torch.relu(candidates)[keep].sum(dim=1)


count = torch.export.Dim("count", min=0, max=64)
ep = torch.export.export(KeepFirst(), (torch.randn(8, 4), torch.arange(3)),
                         dynamic_shapes={"candidates": {0: count}, "keep": None})
path = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.abspath("empty_batch.pt2"))
runner = torch._inductor.aoti_load_package(path)
candidates = torch.randn(0, 4)  # BUG: an empty request reaches the model
print(float(runner(candidates, torch.arange(3)).sum()))
