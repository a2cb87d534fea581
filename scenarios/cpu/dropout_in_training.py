"""A control where nothing is miscompiled: the module was exported in training mode (no `.eval()`), so its dropout
draws a random mask on every call, in the package with Inductor's generator and in eager with torch's. The script's
check of the package against the module fails on every run, and no kernel is wrong. The eager walk finds the
dropout kernel's output off eager's, and everything computed from it: a comparison that can never hold, so it
convicts nothing and names the module left in training mode.

    python dropout_in_training.py"""
import os

import torch


class Head(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(32, 64)
        self.drop = torch.nn.Dropout(0.1)
        self.fc2 = torch.nn.Linear(64, 8)

    def forward(self, x):
        return self.fc2(self.drop(torch.relu(self.fc1(x))))


torch.manual_seed(0)
model = Head()  # the user forgot model.eval()
x = torch.randn(16, 32)
ep = torch.export.export(model, (x,))
path = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.abspath("dropout_in_training.pt2"))
runner = torch._inductor.aoti_load_package(path)
torch.testing.assert_close(runner(x), model(x))
print("OK")
