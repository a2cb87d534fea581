"""Flaky SIGSEGV inside a custom op defined in Python (torch.library.custom_op, in this file) run by an AOTInductor
package (CPU).

`bisectlab_py::gather_rows` copies rows of its table at the given ids through raw pointers (ctypes.memmove: the
stand-in for a hand-written kernel, with no bounds check). Now and then (CRASH_PERCENT of the calls, default 25,
drawn from os.urandom inside the op: the stand-in for a race in a user kernel) it reads its rows at a stale
stride, 64 GiB past the table, which is never mapped: the process dies with SIGSEGV. The other calls compute the
right rows. The failure lives in the op's own code, not in its inputs, so a reduced repro that keeps the op fails
about as often as the script does.

The op is called inside the AOTI-compiled graph, between fused Inductor kernels (relu/add before, mul/sum after):
at run time AOTI's proxy executor calls back into this Python function. It is the CPU stand-in for a user Triton
kernel (triton_op + wrap_triton) with an illegal memory access (scenarios/cuda/flaky_ima_user_triton.py).
PY_OP_CRASH_PERCENT sets the share (100: every call).
"""
import ctypes
import os
import sys

import torch

ROWS, COLS = 64, 32
CRASH_PERCENT = int(os.environ.get("PY_OP_CRASH_PERCENT", "25"))
STALE_STRIDE = 1 << 36  # bytes: a row stride from another layout, 64 GiB


@torch.library.custom_op("bisectlab_py::gather_rows", mutates_args=())
def gather_rows(table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    table = table.contiguous()
    out = table.new_empty((ids.numel(), table.shape[1]))
    row_bytes = table.shape[1] * table.element_size()
    stride = row_bytes
    if int.from_bytes(os.urandom(2), "little") % 100 < CRASH_PERCENT:
        stride = STALE_STRIDE  # BUG (now and then): the stride of another layout, far past the table
    for i, row in enumerate(ids.tolist()):
        ctypes.memmove(out.data_ptr() + i * row_bytes, table.data_ptr() + row * stride, row_bytes)
    return out


@gather_rows.register_fake
def _(table, ids):
    return table.new_empty((ids.shape[0], table.shape[1]))


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.randn(COLS))
        self.scale = torch.nn.Parameter(torch.randn(COLS))

    def forward(self, x, ids):
        h = torch.relu(x) + self.bias                        # fused Inductor kernel
        g = torch.ops.bisectlab_py.gather_rows(h, ids)        # Python custom op (proxy executor)
        return (g * self.scale).sum(dim=1)                    # fused Inductor kernel


def main():
    torch.manual_seed(0)
    model = Model().eval()
    x, ids = torch.randn(ROWS, COLS), torch.arange(8, dtype=torch.int64) * 5
    with torch.no_grad():
        ep = torch.export.export(model, (x, ids))
    pkg = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.abspath("flaky_python_op_oob.pt2"))
    runner = torch._inductor.aoti_load_package(pkg)
    print("running compiled model ...", flush=True)
    out = runner(x, ids)
    print("OK", out.shape, f"{out.sum().item():.4f}")


if __name__ == "__main__":
    main()
    sys.exit(0)
