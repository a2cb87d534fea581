"""Scenario (CUDA): a silent out-of-bounds read in an Inductor-generated Triton kernel, masked in plain runs.

The model gathers rows `tanh(table)[ids]`. The repro turns off Inductor's indirect-indexing assert
(`torch._inductor.config.assert_indirect_indexing = False`, as some users do for speed), so the generated
kernel reads table[ids[i]] without a bounds check, and one run-time id is 10000 in a table of 8192 rows
(4 MiB): the read lands ~0.9 MiB past the table, in mapped memory, like masked_oob_user_triton.py's user
kernel. The script prints a wrong mean and exits 0; compute-sanitizer memcheck names the Inductor kernel.
"""
import os

import torch

D = 128                       # row width (floats): 512 B per row
N_ROWS = 8192                 # table: 8192 x 128 fp32 = 4 MiB
N_IDS = 256
BAD_ROW = 10000               # BUG: 1808 rows (~0.9 MiB) past the end of the table


class M(torch.nn.Module):
    def forward(self, table, ids, w):
        emb = torch.tanh(table)[ids]        # Inductor Triton gather (the culprit: no bounds check)
        h = emb @ w                         # extern mm
        return torch.relu(h).sum(dim=-1)    # Triton reduction


def main():
    dev = "cuda"
    torch._inductor.config.assert_indirect_indexing = False
    g = torch.Generator(device=dev).manual_seed(0)
    table = torch.randn(N_ROWS, D, device=dev, generator=g)
    ids = torch.randint(0, N_ROWS, (N_IDS,), device=dev, generator=g)
    w = torch.randn(D, 64, device=dev, generator=g)
    ep = torch.export.export(M(), (table, ids, w))
    path = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.abspath("masked_oob_inductor.pt2"))
    runner = torch._inductor.aoti_load_package(path)
    ids[7] = BAD_ROW
    out = runner(table, ids, w)
    torch.cuda.synchronize()
    print("OK", tuple(out.shape), float(out.float().mean()), flush=True)  # wrong, but nothing checks it


if __name__ == "__main__":
    main()
