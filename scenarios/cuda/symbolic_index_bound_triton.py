"""Scenario (CUDA, dynamic shapes): a symbolic index bound in an Inductor Triton kernel.

The embedding table is exported with a dynamic row count and the ids come from the caller. At run time the
table has 5 rows but an id is 9: the generated Triton kernel's `tl.device_assert(0 <= tmpN < ks0)` fires
(ks0 = the table's rows at run time), a device-side assert. The CUDA twin of cpu/symbolic_index_bound.py.
"""
import os

import torch


class Lookup(torch.nn.Module):
    def forward(self, table, ids):
        return torch.tanh(table)[ids].sum(dim=1)


def main():
    dev = "cuda"
    rows = torch.export.Dim("rows", min=2, max=64)
    ep = torch.export.export(Lookup(), (torch.randn(8, 4, device=dev), torch.arange(3, device=dev)),
                             dynamic_shapes={"table": {0: rows}, "ids": None})
    path = torch._inductor.aoti_compile_and_package(
        ep, package_path=os.path.abspath("symbolic_index_bound_triton.pt2"))
    runner = torch._inductor.aoti_load_package(path)
    table = torch.randn(5, 4, device=dev)  # BUG: the vocabulary shrank to 5 rows, but the ids still reach 9
    ids = torch.tensor([0, 9, 3], device=dev)
    out = runner(table, ids)
    torch.cuda.synchronize()
    print(float(out.sum()))


if __name__ == "__main__":
    main()
