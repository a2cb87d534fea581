"""Rare SIGSEGV inside a C++ custom op run by an AOTInductor package, with an invalid read in EVERY run (CPU).

`bisectlab_rare::rare_gather` is a tiny C++ operator that copies rows of its table at run-time ids,
out[i, :] = table[ids[i], :], WITHOUT a bounds check.  The caller builds the ids with an off-by-one:
the last id (a padding slot whose output the caller drops) is `ROWS`, one row past the end of the
table, in every run.  Separately, with probability RARE_CRASH_PERCENT (default 12, about 1 run in 8;
drawn from os.urandom so runs differ) one id is "corrupted" to a row between 2**31 and 2**32, i.e.
512 GiB .. 1 TiB past the table.

Why it is rare, and why a memory checker sees it in every run:
  * The padding slot's read lands 0..255 bytes past the table's 32 KiB heap block: that is mapped
    heap (malloc metadata and the next chunk), so a plain run does not crash, and the caller drops
    that slot, so the output check passes and the script exits 0.
  * The corrupted id, when drawn, reads hundreds of GiB away, which is never mapped: SIGSEGV.
    So plain runs crash only about 1 time in 8.
  * Valgrind memcheck (PYTHONMALLOC=malloc) puts a redzone after each heap block, so the padding
    slot's read is reported in EVERY run, crashing or not, at the same place: "Invalid read of size 4
    at rare_gather(...) (main.cpp:<line of the copy>)", "Address ... is 0 bytes after a block of size
    32,768 alloc'd".  The op is built with -g so valgrind names that source line.

The op is called inside the AOTI-compiled graph, between fused Inductor kernels (relu/add before,
mul/sum after), so at run time it goes through AOTI's proxy executor, not through a generated kernel.
The example ids used at compile time are all valid (and AOTI never runs a C++ op at compile time).
It is the CPU stand-in for a rare CUDA illegal memory access (scenarios/cuda/rare_ima_user_triton.py).
"""
import os
import sys

import torch
from torch.utils.cpp_extension import load_inline

ROWS, COLS = 128, 64          # table: 128 x 64 fp32 = 32 KiB, its own heap block
N_IDS = 32
CPP_SRC = r"""
#include <torch/library.h>
#include <ATen/ATen.h>

// out[i, :] = table[ids[i], :]   (no check that 0 <= ids[i] < rows: the bug)
at::Tensor rare_gather(const at::Tensor& table, const at::Tensor& ids) {
  auto tc = table.contiguous();
  auto ic = ids.contiguous();
  const int64_t n = ic.numel(), cols = tc.size(1);
  auto out = at::empty({n, cols}, tc.options());
  const float* src = tc.data_ptr<float>();
  const int64_t* idx = ic.data_ptr<int64_t>();
  float* dst = out.data_ptr<float>();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t row = idx[i];
    for (int64_t j = 0; j < cols; ++j)
      dst[i * cols + j] = src[row * cols + j];
  }
  return out;
}

TORCH_LIBRARY(bisectlab_rare, m) {
  m.def("rare_gather(Tensor table, Tensor ids) -> Tensor");
}
TORCH_LIBRARY_IMPL(bisectlab_rare, CPU, m) {
  m.impl("rare_gather", &rare_gather);
}
"""

# Builds (or reuses) the extension under $TORCH_EXTENSIONS_DIR and registers the op.
load_inline(
    name="bisectlab_rare_oob",
    cpp_sources=[CPP_SRC],
    extra_cflags=["-g"],
    is_python_module=False,
    verbose=False,
)


@torch.library.register_fake("bisectlab_rare::rare_gather")
def _(table, ids):
    return table.new_empty((ids.shape[0], table.shape[1]))


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.randn(COLS))
        self.scale = torch.nn.Parameter(torch.randn(COLS))

    def forward(self, x, ids):
        h = torch.relu(x) + self.bias                        # fused Inductor kernel
        g = torch.ops.bisectlab_rare.rare_gather(h, ids)      # custom op (proxy executor)
        return (g * self.scale).sum(dim=1)                    # fused Inductor kernel


# The share of runs that crash, in percent (a benchmark may set it; the manifest's answer is for the default).
CRASH_PERCENT = int(os.environ.get("RARE_CRASH_PERCENT", "12"))


def rare_draw(r: int) -> bool:
    """Whether this run draws the corrupted id. Run by hand: from os.urandom. Run by aoti-bisect (which numbers its
    runs in AOTI_BISECT_RUN_INDEX): one run in 8, the 4th of each 8 (indices 3, 11, 19, ...), so that a scenario
    check sees the same rare crashes every time; the rate is the same, only its draw is fixed."""
    index = os.environ.get("AOTI_BISECT_RUN_INDEX")
    if index is not None and "RARE_CRASH_PERCENT" not in os.environ:
        return int(index) % 8 == 3
    return r % 100 < CRASH_PERCENT


def draw_ids():
    ids = torch.arange(N_IDS, dtype=torch.int64) * 3 % ROWS
    ids[-1] = ROWS                      # BUG (every run): the padding slot's id is one past the last row
    r = int.from_bytes(os.urandom(8), "little")
    if rare_draw(r):                    # BUG (rare): a corrupted id, 512 GiB .. 1 TiB past the table
        ids[(r >> 8) % (N_IDS - 1)] = (1 << 31) + ((r >> 16) % (1 << 31))
    return ids


def main():
    torch.manual_seed(0)
    model = Model().eval()
    x = torch.randn(ROWS, COLS)
    example = (x, torch.arange(N_IDS, dtype=torch.int64))   # all valid at compile time
    with torch.no_grad():
        ep = torch.export.export(model, example)
    pkg = torch._inductor.aoti_compile_and_package(
        ep, package_path=os.path.abspath("rare_oob_custom_op.pt2"))
    runner = torch._inductor.aoti_load_package(pkg)

    ids = draw_ids()
    print(f"running compiled model (max id {int(ids.max())}, table rows {ROWS})", flush=True)
    out = runner(x, ids)
    with torch.no_grad():
        ref = model(x, ids)
    torch.testing.assert_close(out[:-1], ref[:-1])   # the padding slot (last) is dropped
    print("OK", out.shape, f"{out[:-1].sum().item():.4f}")


if __name__ == "__main__":
    main()
    sys.exit(0)
