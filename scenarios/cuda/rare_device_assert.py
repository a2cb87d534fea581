"""A rare bad token id on CUDA: about one run in ten draws an id past the embedding table (20000 rows), and the
Triton kernel Inductor generated for the gather trips its own index check (a device-side assert, `index out of
bounds: 0 <= tmpN < 20000`). The bad id exists only in the runs that fail.

`--one-in N` sets the rate (default 10). Under aoti-bisect the draw is fixed by the run's index (the 4th of every N:
indices 3, 13, 23, ... for N = 10), so a scenario check meets the same rare assert every time; elsewhere it is
os.urandom's.
"""
import os
import sys

import torch

VOCAB, DIM = 20000, 64
ONE_IN = int(sys.argv[sys.argv.index("--one-in") + 1]) if "--one-in" in sys.argv else 10


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(VOCAB, DIM))
        self.proj = torch.nn.Linear(DIM, 8)

    def forward(self, ids):
        h = torch.nn.functional.embedding(ids, self.table)  # BUG: nothing keeps ids below VOCAB
        return self.proj(torch.relu(h)).sum(dim=1)


def bad_request() -> bool:
    index = os.environ.get("AOTI_BISECT_RUN_INDEX")
    if index is not None:
        return int(index) % ONE_IN == 3
    return int.from_bytes(os.urandom(2), "little") % ONE_IN == 0


torch.manual_seed(0)
model = Model().eval().cuda()
ids = torch.randint(0, VOCAB, (32, 128), device="cuda")
ep = torch.export.export(model, (ids,))
path = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.abspath("rare_device_assert.pt2"))
runner = torch._inductor.aoti_load_package(path)
if bad_request():
    ids[7, 99] = VOCAB + 311  # the rare request with an id past the table
print(f"largest id {int(ids.max())}", flush=True)
with torch.no_grad():
    out = runner(ids)
print(float(out.sum()))
