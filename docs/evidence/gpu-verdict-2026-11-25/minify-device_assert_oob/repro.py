"""Minified AOTInductor repro (aoti-bisect minify): device_assert in run, culprit kernel triton_poi_fused_add_index_mul_sin_0

Run: python repro.py  (needs only torch; reads inputs.pt beside this file)
"""
import os

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


class Repro(torch.nn.Module):
    def forward(self, add_1, add):
        index = torch.ops.aten.index.Tensor(add_1, [None, add])
        return (index,)


def main():
    inputs = torch.load(os.path.join(HERE, "inputs.pt"))
    # The module's inputs: what the original program held there on the failing call
    #   add_1: float32 [64, 100] on cuda:0, the output of aten::add.Tensor there; zeros fail the same; cut to [1, 1]
    #   add: int64 [40] on cuda:0, the output of aten::add.Tensor there; cut to [1]
    args = (
        torch.zeros([1, 1], dtype=torch.float32, device='cuda:0'),
        inputs["add"].to('cuda:0'),
    )
    ep = torch.export.export(Repro(), args)
    path = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.join(HERE, "repro.pt2"))
    runner = torch._inductor.aoti_load_package(path)
    out = runner(*args)
    torch.cuda.synchronize()
    print("aoti-bisect repro: ran without the failure")


if __name__ == "__main__":
    main()
