"""Minified AOTInductor repro (aoti-bisect minify): device_assert in run, culprit kernel triton_per_fused_relu_sum_1

Run: python repro.py  (needs only torch; reads inputs.pt beside this file)
"""
import os

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


class Repro(torch.nn.Module):
    def forward(self, add_1, add, w2):
        index = torch.ops.aten.index.Tensor(add_1, [None, add])
        matmul_1 = torch.ops.aten.matmul.default(index, w2)
        relu = torch.ops.aten.relu.default(matmul_1)
        return (relu,)


def main():
    inputs = torch.load(os.path.join(HERE, "inputs.pt"))
    # The module's inputs: what the original program held there on the failing call
    #   add_1: float32 [64, 100] on cuda:0, the output of aten::add.Tensor there; zeros fail the same; cut to [1, 1]
    #   add: int64 [40] on cuda:0, the output of aten::add.Tensor there
    #   w2: float32 [40, 32] on cuda:0, an input of the original program; zeros fail the same; cut to [40, 1]
    args = (
        torch.zeros([1, 1], dtype=torch.float32, device='cuda:0'),
        inputs["add"].to('cuda:0'),
        torch.zeros([40, 1], dtype=torch.float32, device='cuda:0'),
    )
    ep = torch.export.export(Repro(), args)
    path = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.join(HERE, "repro.pt2"))
    runner = torch._inductor.aoti_load_package(path)
    out = runner(*args)
    torch.cuda.synchronize()
    print("aoti-bisect repro: ran without the failure")


if __name__ == "__main__":
    main()
