"""Lab (issue #18 parser captures): an out-of-bounds WRITE in a user Triton kernel (triton_op + wrap_triton).

`scatter_rows` writes row ids[i] of its output without a bounds check; one id is past the end.
"""
import os
import torch
import triton
import triton.language as tl
from torch.library import triton_op, wrap_triton

D, N_ROWS, N_IDS = 128, 8192, 256


@triton.jit
def scatter_rows(src_ptr, ids_ptr, out_ptr, D: tl.constexpr):
    pid = tl.program_id(0)
    row = tl.load(ids_ptr + pid)
    cols = tl.arange(0, D)
    tl.store(out_ptr + row * D + cols, tl.load(src_ptr + pid * D + cols))   # BUG: no check that row < n_rows


@triton_op("bisectlab::scatter_rows", mutates_args={})
def scatter(src: torch.Tensor, ids: torch.Tensor, n_rows: int) -> torch.Tensor:
    out = torch.zeros((n_rows, src.shape[1]), device=src.device, dtype=src.dtype)
    wrap_triton(scatter_rows)[(ids.shape[0],)](src, ids, out, D=src.shape[1])
    return out


class M(torch.nn.Module):
    def forward(self, src, ids):
        return scatter(torch.tanh(src), ids, N_ROWS).sum(dim=0)


def main():
    dev = "cuda"
    src = torch.randn(N_IDS, D, device=dev)
    ids = torch.randperm(N_ROWS, device=dev)[:N_IDS]
    ep = torch.export.export(M(), (src, ids))
    runner = torch._inductor.aoti_load_package(torch._inductor.aoti_compile_and_package(
        ep, package_path=os.path.abspath("user_kernel_oob_write.pt2")))
    ids[3] = 10000
    out = runner(src, ids)
    torch.cuda.synchronize()
    print("OK", float(out.sum()), flush=True)


if __name__ == "__main__":
    main()
