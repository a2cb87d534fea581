"""An index made inside the model, not handed in: positions are the running count of a padding mask
(torch.cumsum(mask, 1)), used to look up a position table of 16 rows. Every model input is in range for its own
table (token ids < 100, mask 0/1), but a batch of 24 unpadded tokens counts up to 24, past the table. The
CPU kernel's bounds check raises; the input to change is `mask` (or the table), not the token ids."""
import os
import sys

import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = torch.nn.Embedding(100, 8)
        self.pos = torch.nn.Embedding(16, 8)

    def forward(self, tokens, mask):
        positions = torch.cumsum(mask, 1)
        return self.tok(tokens) + self.pos(positions)


device = "cuda" if "--cuda" in sys.argv else "cpu"
torch.manual_seed(0)
model = Net().to(device)
tokens = torch.randint(0, 100, (2, 24), device=device)
mask = torch.zeros(2, 24, dtype=torch.int64, device=device)
mask[:, :10] = 1  # export with a padded batch: positions 0..10
ep = torch.export.export(model, (tokens, mask))
path = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.abspath("index_from_cumsum.pt2"))
runner = torch._inductor.aoti_load_package(path)
out = runner(tokens, torch.ones_like(mask))  # no padding: positions run to 24
print("ok", float(out.sum()))
