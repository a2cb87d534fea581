"""A symbolic index bound: the embedding table is exported with a dynamic number of rows, and the ids come
from the caller. At run time the table has 5 rows but an id is 9: the generated CPU kernel checks
`0 <= tmpN < ks0` (ks0 = the table's rows at run time) and raises."""
import os

import torch


class Lookup(torch.nn.Module):
    def forward(self, table, ids):
        return torch.tanh(table)[ids].sum(dim=1)


rows = torch.export.Dim("rows", min=2, max=64)
ep = torch.export.export(Lookup(), (torch.randn(8, 4), torch.arange(3)),
                         dynamic_shapes={"table": {0: rows}, "ids": None})
path = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.abspath("symbolic_index_bound.pt2"))
runner = torch._inductor.aoti_load_package(path)
table = torch.randn(5, 4)  # BUG: the vocabulary shrank to 5 rows, but the ids still reach 9
ids = torch.tensor([0, 9, 3])
print(float(runner(table, ids).sum()))
