"""Scenario (CUDA): a silent out-of-bounds read in a user Triton kernel, masked in every plain run.

`gather_rows` (torch.library.triton_op + wrap_triton) copies table[ids[i]] without a bounds check, and one
run-time id is 10000 in a table of 8192 rows (4 MiB): the read lands ~0.9 MiB past the table's end, in
memory that is mapped but not the table's. It never faults, with or without PYTORCH_NO_CUDA_MEMORY_CACHING=1
(seen on the H100, issue #18), so the script prints a wrong mean and exits 0 every time. Only a memory
checker sees it: compute-sanitizer memcheck reports an invalid __global__ read in gather_rows. (A read
only 16 KiB past the end landed inside another live allocation, where memcheck cannot see it either:
docs/evidence/cuda-notes.md.)
The example ids used at compile time are all valid (Inductor runs the user kernel once to build its cubin).
"""
import os

import torch
import triton
import triton.language as tl
from torch.library import triton_op, wrap_triton

D = 128                       # row width (floats): 512 B per row
N_ROWS = 8192                 # table: 8192 x 128 fp32 = 4 MiB
N_IDS = 256
BAD_ROW = 10000               # BUG: 1808 rows (~0.9 MiB) past the end of the table


@triton.jit
def gather_rows(table_ptr, ids_ptr, out_ptr, D: tl.constexpr):
    pid = tl.program_id(0)
    row = tl.load(ids_ptr + pid)                     # int64 row id, run-time data
    cols = tl.arange(0, D)
    v = tl.load(table_ptr + row * D + cols)          # BUG: no check that row < n_rows
    tl.store(out_ptr + pid * D + cols, v)


@triton_op("bisectlab::gather_rows_masked", mutates_args={})
def gather(table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    out = torch.empty((ids.shape[0], table.shape[1]), device=table.device, dtype=table.dtype)
    wrap_triton(gather_rows)[(ids.shape[0],)](table, ids, out, D=table.shape[1])
    return out


class M(torch.nn.Module):
    def forward(self, table, ids, w):
        w2 = torch.tanh(w) * 0.5            # Triton kernel
        emb = gather(table, ids)            # user Triton kernel (the culprit)
        h = emb @ w2                        # extern mm
        return torch.relu(h).sum(dim=-1)    # Triton reduction


def main():
    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(0)
    table = torch.randn(N_ROWS, D, device=dev, generator=g)
    ids = torch.randint(0, N_ROWS, (N_IDS,), device=dev, generator=g)   # all valid at compile time
    w = torch.randn(D, 64, device=dev, generator=g)
    ep = torch.export.export(M(), (table, ids, w))
    path = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.abspath("masked_oob.pt2"))
    runner = torch._inductor.aoti_load_package(path)
    ids[7] = BAD_ROW
    out = runner(table, ids, w)
    torch.cuda.synchronize()
    print("OK", tuple(out.shape), float(out.float().mean()), flush=True)  # wrong, but nothing checks it


if __name__ == "__main__":
    main()
