"""A control where nothing is miscompiled: dropout_in_training's mistake inside a branch of torch.cond. The module was
exported in training mode (no `.eval()`), so the dropout in the branch the model takes draws a random mask on every
call, in the package with Inductor's generator and in eager with torch's. The script's check of the package against
the module fails on every run, and no kernel is wrong. The walk cannot see the launches inside the branch; the
matmul after the cond reads what they wrote, a value computed from the draw, so it convicts nothing and says that a
dropout draws in training mode.

    python dropout_in_cond.py"""
import os

import torch


class Head(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(32, 64)
        self.drop = torch.nn.Dropout(0.1)
        self.fc2 = torch.nn.Linear(64, 8)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        h = torch.cond(h.sum() > 0, lambda h: self.drop(h) * 2, lambda h: h.clone(), (h,))
        return self.fc2(h)


torch.manual_seed(0)
model = Head()  # the user forgot model.eval()
x = torch.randn(16, 32)
ep = torch.export.export(model, (x,))
path = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.abspath("dropout_in_cond.pt2"))
runner = torch._inductor.aoti_load_package(path)
torch.testing.assert_close(runner(x), model(x))
print("OK")
