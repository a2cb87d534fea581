"""A multi-field embedding: three categorical fields share one table of 60 rows, each field's ids shifted by a
per-field `offsets` buffer (0, 20, 40 for fields of 20 values each). The buffer was rebuilt after a vocabulary
change and one offset is stale (55 instead of 40): the ids are all in range for their own field, but ids up to
19 plus 55 reach past the table. The CPU kernel's bounds check raises; the operand that takes the index out of
range is the buffer, not the ids.

    python index_plus_offsets.py [--cuda]"""
import os
import sys

import torch


class FieldEmbedding(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.table = torch.nn.Embedding(60, 8)
        self.register_buffer("offsets", torch.tensor([0, 20, 40]))

    def forward(self, ids):
        return self.table(ids + self.offsets).sum(dim=1)


device = "cuda" if "--cuda" in sys.argv else "cpu"
torch.manual_seed(0)
model = FieldEmbedding().to(device)
with torch.no_grad():
    model.offsets[2] = 55  # BUG: a stale offset from the old vocabulary (field 2 starts at 40)
ids = torch.randint(0, 20, (16, 3), device=device)
ep = torch.export.export(model, (ids,))
path = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.abspath("index_plus_offsets.pt2"))
runner = torch._inductor.aoti_load_package(path)
out = runner(ids)
print("ok", float(out.sum()))
