"""Minified AOTInductor repro (aoti-bisect minify): illegal_memory_access in run, culprit kernel gather_rows_0

A failure that comes and goes: `python repro.py --reuse` runs the package an earlier run built instead of
compiling again, so running it many times costs a load and a run each.

Run: python repro.py  (needs torch and what its custom ops' code imports; reads inputs.pt beside this file)
"""
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


# The custom ops the repro defines in Python: their code, as the repro's process held it
import torch.library

wrap_triton = torch.library.wrap_triton

import triton.language as tl

import triton

# __main__.gather_rows (flaky_ima_user_triton.py:35)
@triton.jit
def gather_rows(table_ptr, ids_ptr, out_ptr, D: tl.constexpr):
    pid = tl.program_id(0)
    row = tl.load(ids_ptr + pid)                     # int64 row id, run-time data
    cols = tl.arange(0, D)
    v = tl.load(table_ptr + row * D + cols)          # BUG: no check that row < n_rows
    tl.store(out_ptr + pid * D + cols, v)

# __main__.gather (flaky_ima_user_triton.py:44)
def _bisectlab_gather_rows_impl(table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    out = torch.empty((ids.shape[0], table.shape[1]), device=table.device, dtype=table.dtype)
    wrap_triton(gather_rows)[(ids.shape[0],)](table, ids, out, D=table.shape[1])
    return out

torch.library.triton_op('bisectlab::gather_rows', _bisectlab_gather_rows_impl, mutates_args=(), schema='(Tensor table, Tensor ids) -> Tensor')




class Repro(torch.nn.Module):
    def forward(self, table, ids):
        gather_rows = torch.ops.bisectlab.gather_rows.default(table, ids)
        return (gather_rows,)


def main():
    inputs = torch.load(os.path.join(HERE, "inputs.pt"), weights_only=True)
    # The module's inputs: what the original program held there on the failing call
    #   table: float32 [131072, 128] on cuda:0, an input of the original program
    #   ids: int64 [256] on cuda:0, an input of the original program
    args = (
        inputs["table"].to('cuda:0'),
        inputs["ids"].to('cuda:0'),
    )
    path = os.path.join(HERE, "repro.pt2")
    if "--reuse" not in sys.argv[1:] or not os.path.isfile(path):
        ep = torch.export.export(Repro(), args)
        path = torch._inductor.aoti_compile_and_package(ep, package_path=path)
    runner = torch._inductor.aoti_load_package(path)
    out = runner(*args)
    torch.cuda.synchronize()
    print("aoti-bisect repro: ran without the failure")


if __name__ == "__main__":
    main()
