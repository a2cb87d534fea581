"""Scenario (CUDA, dynamic shapes): an illegal memory access that appears only at some sizes.

`scale2` is a user Triton kernel (torch.library.triton_op + wrap_triton) whose offsets are int32:
`pid * BLOCK + arange(BLOCK)` wraps negative once the tensor has more than 2**31 elements, and the masked
load then reads gigabytes before the tensor's start. The package is exported with a dynamic length and
compiled on 4096 elements; it is right at 2**20 elements and hits an illegal memory access at 2**31 + 4096
(8 GiB in and 8 GiB out in fp32). That size is outside what the package was built for: Inductor bounds every
dynamic size by 2**31 - 1 (int32 indexing), and AOTI_RUNTIME_CHECK_INPUTS=1 says "dim value is too large".
The guide's usual cause, "a size outside the exported range", is the answer the tool must give.
"""
import os
import sys

import torch
import triton
import triton.language as tl
from torch.library import triton_op, wrap_triton

BLOCK = 1024
BIG = 2 ** 31 + 4096


@triton.jit
def scale2(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)     # BUG: int32, wraps past 2**31 elements
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0, mask=mask)


@triton_op("bisectlab::scale2", mutates_args={})
def scale(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    wrap_triton(scale2)[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK=BLOCK)
    return out


class M(torch.nn.Module):
    def forward(self, x):
        return scale(torch.relu(x)).sum()


def main():
    dev = "cuda"
    n = torch.export.Dim("n", min=2)
    ep = torch.export.export(M(), (torch.randn(4096, device=dev),), dynamic_shapes={"x": {0: n}})
    path = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.abspath("size_dependent_ima.pt2"))
    runner = torch._inductor.aoti_load_package(path)
    small = torch.ones(1 << 20, device=dev)
    print("small", float(runner(small)), flush=True)           # 2 * 2**20: right
    size = int(sys.argv[1]) if len(sys.argv) > 1 else BIG
    big = torch.ones(size, device=dev)
    out = float(runner(big))
    torch.cuda.synchronize()
    print("big", out, "expected", 2.0 * size, flush=True)
    sys.exit(0 if abs(out - 2.0 * size) <= 1e-3 * size else 1)


if __name__ == "__main__":
    main()
