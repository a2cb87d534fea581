"""Scenario (CUDA): a RARE illegal memory access in a user Triton kernel whose bad read happens in EVERY run.

`gather_rows` (torch.library.triton_op + wrap_triton) copies table[ids[i]] without a bounds check. The ids
are run-time data: the example ids used at compile time (when Inductor runs the user kernel once to build
its cubin) are all valid, so compilation succeeds; the bad ids are written after compiling.

Two bugs in the run-time ids:
  * every run: id 7 is 10000 in a table of 8192 rows (4 MiB), so that row is read ~0.9 MiB past the
    table's end. This is masked_oob_user_triton's layout exactly (same sizes, same allocation order):
    the read lands in memory that is mapped but not the table's, so it never faults (not even with
    PYTORCH_NO_CUDA_MEMORY_CACHING=1 CUDA_LAUNCH_BLOCKING=1, issue #18) and the script prints a wrong
    mean and exits 0. compute-sanitizer memcheck (with PYTORCH_NO_CUDA_MEMORY_CACHING=1) reports an
    "Invalid __global__ read" in gather_rows in every run, crashing or not.
  * rarely (RARE_CRASH_PERCENT, default 7: about 1 run in 15, drawn from os.urandom): one other id is
    corrupted to point 16..64 GiB past the table, which is never mapped (flaky_ima_user_triton faulted
    at every distance it drew above 1 GiB: 3.8, 24 and 47 GiB), so the launch faults with an illegal
    memory access.
So a plain run fails about 1 time in 15, while the memory checker convicts gather_rows from any run.

Options (none: the above):
  --only-rare        no every-run read past the table: the bad id exists only in the runs that crash, so no
                     checker sees anything in the others; only a crashing run can say where it faulted.
  PACKAGE            load this package instead of compiling (a package built before the run);
  --build-only       with PACKAGE: compile it there and exit (the scenario's setup).

Pipeline: tanh(w)*0.5 (Triton) -> gather_rows (user Triton kernel, BUG) -> mm -> relu/sum (Triton).
"""
import argparse
import os

import torch
import triton
import triton.language as tl
from torch.library import triton_op, wrap_triton

D = 128                       # row width (floats): 512 B per row
N_ROWS = 8192                 # table: 8192 x 128 fp32 = 4 MiB
N_IDS = 256
NEAR_POS, NEAR_ROW = 7, 10000  # BUG (every run): 1808 rows (~0.9 MiB) past the end of the table
MIN_FAR, MAX_FAR = 16 << 30, 64 << 30  # BUG (rare): a corrupted id lands 16..64 GiB past the table end
CRASH_PERCENT = int(os.environ.get("RARE_CRASH_PERCENT", "7"))


@triton.jit
def gather_rows(table_ptr, ids_ptr, out_ptr, D: tl.constexpr):
    pid = tl.program_id(0)
    row = tl.load(ids_ptr + pid)                     # int64 row id, run-time data
    cols = tl.arange(0, D)
    v = tl.load(table_ptr + row * D + cols)          # BUG: no check that row < n_rows
    tl.store(out_ptr + pid * D + cols, v)


@triton_op("bisectlab::gather_rows_rare", mutates_args={})
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
    p = argparse.ArgumentParser()
    p.add_argument("package", nargs="?")
    p.add_argument("--build-only", action="store_true")
    p.add_argument("--only-rare", action="store_true")
    a = p.parse_args()
    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(0)
    table = torch.randn(N_ROWS, D, device=dev, generator=g)
    ids = torch.randint(0, N_ROWS, (N_IDS,), device=dev, generator=g)   # all valid at compile time
    w = torch.randn(D, 64, device=dev, generator=g)
    path = os.path.abspath(a.package or "rare_ima.pt2")
    if a.build_only or not a.package:
        ep = torch.export.export(M(), (table, ids, w))
        path = torch._inductor.aoti_compile_and_package(ep, package_path=path)
        if a.build_only:
            return
    runner = torch._inductor.aoti_load_package(path)

    if not a.only_rare:
        ids[NEAR_POS] = NEAR_ROW                                    # every run: silent, memcheck sees it
    r = int.from_bytes(os.urandom(8), "little")
    far = r % 100 < CRASH_PERCENT
    if far:                                                         # rare: faults
        pos = NEAR_POS + 1 + (r >> 8) % (N_IDS - 1)                 # any position but NEAR_POS
        pos %= N_IDS
        dist = MIN_FAR + ((r >> 16) % (MAX_FAR - MIN_FAR))
        ids[pos] = N_ROWS + dist // (D * 4)
    print(f"[rare_ima] table=0x{table.data_ptr():x}"
          + ("" if a.only_rare else f" id {NEAR_ROW} at position {NEAR_POS} reads "
             f"{(NEAR_ROW - N_ROWS) * D * 4 / 2**20:.2f} MiB past the table end")
          + (f"; corrupted id {int(ids[pos])} at position {pos} reads {dist / 2**30:.1f} GiB past it" if far else "")
          + f"; caching={'off' if os.environ.get('PYTORCH_NO_CUDA_MEMORY_CACHING') == '1' else 'on'}",
          flush=True)
    out = runner(table, ids, w)
    torch.cuda.synchronize()
    print("OK", tuple(out.shape), float(out.float().mean()), flush=True)  # wrong, but nothing checks it


if __name__ == "__main__":
    main()
