"""A healthy CUDA model with the shapes the faulting scenarios have (an embedding gather, a user-sized linear head, a
reduction): compiles, loads, runs and matches eager. aoti-bisect must say it did not reproduce, whatever the memory
checker and the crash witness look at."""
import os

import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(20000, 64))
        self.proj = torch.nn.Linear(64, 8)

    def forward(self, ids):
        return self.proj(torch.relu(torch.nn.functional.embedding(ids, self.table))).sum(dim=1)


torch.manual_seed(0)
model = Model().eval().cuda()
ids = torch.randint(0, 20000, (32, 128), device="cuda")
ep = torch.export.export(model, (ids,))
path = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.abspath("passing_control_cuda.pt2"))
runner = torch._inductor.aoti_load_package(path)
with torch.no_grad():
    torch.testing.assert_close(runner(ids), model(ids), rtol=1e-4, atol=1e-4)
print("ok")
