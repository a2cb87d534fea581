"""Scenario (CUDA): flaky illegal memory access in a user-defined Triton kernel.

`gather_rows` (torch.library.triton_op + wrap_triton) copies table[ids[i]] without a bounds
check. The ids are run-time data: the example ids used at compile time (when Inductor runs
the user kernel once to build its cubin) are all valid, so compilation succeeds. At run time
one "corrupted" id, drawn from os.urandom, points past the end of the table.

Why it is flaky and why the caching allocator masks it:
  * The corrupted id points past the end of the table by a distance drawn log-uniformly
    between 1 MiB and 128 GiB (os.urandom), so it changes from run to run.
  * The script releases its compile-time memory, then a preprocessing step uses a 1 GiB
    workspace and frees it. With the caching allocator (default) that 1 GiB segment stays
    mapped and the 64 MiB table is carved from its start: a bad read that lands in the
    remaining ~960 MiB silently reads stale workspace memory; only reads that land further
    away, in unmapped memory, fault.
  * With PYTORCH_NO_CUDA_MEMORY_CACHING=1 the workspace is cudaFree'd, the table is its own
    cudaMalloc, and short-distance reads hit unmapped memory too: the fault shows far more often.

Pipeline: tanh(w)*0.5 (Triton) -> gather_rows (user Triton kernel, BUG) -> mm -> relu/sum (Triton).
"""
import os

import torch
import triton
import triton.language as tl
from torch.library import triton_op, wrap_triton

D = 128                      # row width (floats) -> 512 B per row
N_ROWS = 1 << 17             # table: 131072 x 128 fp32 = 64 MiB
N_IDS = 256
WORKSPACE_BYTES = 1 << 30    # 1 GiB preprocessing workspace
MIN_LOG2, MAX_LOG2 = 20, 37  # a bad id lands 2**20 B (1 MiB) .. 2**37 B (128 GiB) past the table end


@triton.jit
def gather_rows(table_ptr, ids_ptr, out_ptr, D: tl.constexpr):
    pid = tl.program_id(0)
    row = tl.load(ids_ptr + pid)                     # int64 row id, run-time data
    cols = tl.arange(0, D)
    v = tl.load(table_ptr + row * D + cols)          # BUG: no check that row < n_rows
    tl.store(out_ptr + pid * D + cols, v)


@triton_op("bisectlab::gather_rows", mutates_args={})
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
    table_ex = torch.randn(N_ROWS, D, device=dev, generator=g)
    ids_ex = torch.randint(0, N_ROWS, (N_IDS,), device=dev, generator=g)   # all valid
    w = torch.randn(D, 64, device=dev, generator=g)
    ep = torch.export.export(M(), (table_ex, ids_ex, w))
    path = torch._inductor.aoti_compile_and_package(
        ep, package_path=os.path.abspath("flaky_ima_user_triton.pt2"))
    print("compiled", path, flush=True)
    runner = torch._inductor.aoti_load_package(path)
    print("loaded", flush=True)

    # release compile-time memory
    del table_ex, ep
    torch.cuda.synchronize()
    torch.cuda.empty_cache()

    # preprocessing step with a large temporary workspace
    ws = torch.empty(WORKSPACE_BYTES // 4, device=dev)
    ws.fill_(0.25)
    del ws

    table = torch.randn(N_ROWS, D, device=dev, generator=g)
    ids = torch.randint(0, N_ROWS, (N_IDS,), device=dev, generator=g)
    r = int.from_bytes(os.urandom(8), "little")
    bad_pos = r % N_IDS
    u = ((r >> 8) & ((1 << 52) - 1)) / float(1 << 52)                  # uniform in [0, 1)
    dist_bytes = int(2.0 ** (MIN_LOG2 + u * (MAX_LOG2 - MIN_LOG2)))      # log-uniform distance
    bad_row = N_ROWS + dist_bytes // (D * 4)                            # BUG: corrupted id
    ids[bad_pos] = bad_row
    past = (bad_row - N_ROWS) * D * 4
    print(f"[flaky_ima] table=0x{table.data_ptr():x} bad id {bad_row} at position {bad_pos}: "
          f"reads {past / 2**20:.1f} MiB past the table end "
          f"(address 0x{table.data_ptr() + bad_row * D * 4:x}); "
          f"caching={'off' if os.environ.get('PYTORCH_NO_CUDA_MEMORY_CACHING') == '1' else 'on'}",
          flush=True)

    out = runner(table, ids, w)
    torch.cuda.synchronize()
    print("OK", tuple(out.shape), float(out.float().mean()), flush=True)


if __name__ == "__main__":
    main()
