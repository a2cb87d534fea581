"""Scenario (CUDA): a user Triton kernel writes a row out of bounds, and the script's own check is what fails.

`scatter_rows` (torch.library.triton_op + wrap_triton) copies src[i] to out[dst[i]] without a bounds check. At run
time one destination id is 1 MiB past `out`'s end, so that row of `out` is never written (it stays zero) and the
store lands in a neighbour's live allocation. Seen on an H100 (torch 2.11): nothing faults, with or without the
caching allocator and blocking launches; compute-sanitizer reports 0 errors unpadded (the address is inside another
allocation) and 130 invalid writes in scatter_rows with --padding 4 MiB; the saved output of the correct gelu kernel
Inductor generated shows the stray row. The kernels Inductor generates around it (a gelu, a zeros fill, a
reduction) are correct: a tool that blames one of them is wrong. The example ids used at compile time are all valid (Inductor runs the user kernel once to build its cubin).
"""
import os

import torch
import triton
import triton.language as tl
from torch.library import triton_op, wrap_triton

D = 128
N_ROWS = 4096
BAD_ROW = N_ROWS + (1 << 20) // (D * 4)  # BUG: 1 MiB past the end of `out` (2 MiB)


@triton.jit
def scatter_rows(src_ptr, dst_ptr, out_ptr, D: tl.constexpr):
    pid = tl.program_id(0)
    row = tl.load(dst_ptr + pid)                    # int64 destination row, run-time data
    cols = tl.arange(0, D)
    v = tl.load(src_ptr + pid * D + cols)
    tl.store(out_ptr + row * D + cols, v)           # BUG: no check that row < n_rows


@triton_op("bisectlab::scatter_rows", mutates_args={})
def scatter(src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(src)
    wrap_triton(scatter_rows)[(dst.shape[0],)](src, dst, out, D=src.shape[1])
    return out


class M(torch.nn.Module):
    def forward(self, x, dst, w):
        h = torch.nn.functional.gelu(x * 0.5)       # Triton kernel
        rows = scatter(h, dst)                      # user Triton kernel (the culprit)
        return (rows @ w).sum(dim=-1), rows         # extern mm, Triton reduction


def main():
    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(0)
    x = torch.randn(N_ROWS, D, device=dev, generator=g) + 3.0   # gelu(x/2) is never 0
    dst = torch.randperm(N_ROWS, device=dev, generator=g)       # a permutation: every row written once
    w = torch.randn(D, 32, device=dev, generator=g)
    ep = torch.export.export(M(), (x, dst, w))
    path = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.abspath("scatter_rows.pt2"))
    runner = torch._inductor.aoti_load_package(path)
    dst[11] = BAD_ROW
    out, rows = runner(x, dst, w)
    torch.cuda.synchronize()
    unwritten = int((rows == 0).all(dim=1).sum())
    if unwritten:
        raise RuntimeError(f"{unwritten} output rows were never written")
    print("OK", float(out.mean()), flush=True)


if __name__ == "__main__":
    main()
