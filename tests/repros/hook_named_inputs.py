"""A small AOTI CPU model for the in-process hook's tests (tests/test_hook.py): parameters, a buffer, a
positional and a keyword tensor input and a constant float input; it compiles, loads twice, prints outputs.
Between the build and the loads the module's state moves on, as in scenarios stale_parameter_replaced and
folded_temperature: `proj.weight` (read by the extern addmm) is replaced by a fine-tuned copy, and the 0-d
`temperature` (which Inductor folds into the kernel as a literal) is calibrated."""
import os
import sys

import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)
        self.register_buffer("scale", torch.arange(4, dtype=torch.float32))
        self.register_buffer("temperature", torch.tensor(2.0))

    def forward(self, x, idx, *, bias, s=2.0):
        return (self.proj(x) * self.scale / self.temperature)[idx] * s + bias


torch.manual_seed(0)
args = (torch.randn(3, 4), torch.tensor([0, 2]))
kwargs = {"bias": torch.randn(4), "s": 2.0}
model = Model()
ep = torch.export.export(model, args, kwargs)
path = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.abspath(sys.argv[1]))
tuned = {k: v.clone() for k, v in model.state_dict().items()}
tuned["proj.weight"][2] += 0.25  # a fine-tuned checkpoint: new parameter objects the exported program never sees
model.load_state_dict(tuned, assign=True)
model.temperature.fill_(0.5)  # calibrated after the build
runner = torch._inductor.aoti_load_package(path)
print(runner(*args, **kwargs))
print(runner(*args, **kwargs))  # called again, as a decoder's loop calls its model
from torch._inductor.package import load_package  # noqa: E402 (the second entry point, after the first)
print(load_package(path)(*args, **kwargs))
