"""An index made by an extern op: ages are bucketized by 9 boundaries into an embedding of 9 rows, one per
bucket. bucketize gives 10 buckets (0..9) for 9 boundaries: an age above the last boundary (91 > 90) lands in
bucket 9, past the table. The ages are valid, the table and the boundaries disagree; the kernel's bounds
check raises on an index the wrapper made with an extern `bucketize` call from model input `age`.

    python index_from_bucketize.py [--cuda]"""
import os
import sys

import torch


class AgeEmbedding(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("bounds", torch.tensor([10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0]))
        self.table = torch.nn.Embedding(9, 4)  # BUG: 9 rows for 10 buckets

    def forward(self, age):
        return self.table(torch.bucketize(age, self.bounds)).sum(dim=0)


device = "cuda" if "--cuda" in sys.argv else "cpu"
torch.manual_seed(0)
model = AgeEmbedding().to(device)
age = torch.rand(32, device=device) * 80
ep = torch.export.export(model, (age,))
path = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.abspath("index_from_bucketize.pt2"))
runner = torch._inductor.aoti_load_package(path)
age[5] = 91.0  # an age above the last boundary
out = runner(age)
print("ok", float(out.sum()))
