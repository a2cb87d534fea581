"""A custom op whose fake function is wrong only for some sizes, exported with a dynamic dimension.

`bisectlab::pad_double` doubles its input and pads the columns to a multiple of 8 (an alignment its real
implementation needs); its fake function promises the input's own shape. Exported at 16 columns the two
agree, so export and compile succeed; at run time the model gets 12 columns: the op returns [6, 16] while the
package was compiled for [6, 12] and reads the op's output with a row stride of 12, so the sums that follow
mix padding into the wrong rows. Eager (which runs the real op) disagrees with the package, and the script's
own check fails. The op is a Python torch.library.custom_op: AOTI runs it through its proxy executor.
"""
import os
import sys

import torch


@torch.library.custom_op("bisectlab::pad_double", mutates_args=())
def pad_double(x: torch.Tensor) -> torch.Tensor:
    rows, cols = x.shape
    out = x.new_zeros(rows, (cols + 7) // 8 * 8)
    out[:, :cols] = x * 2
    return out


@pad_double.register_fake
def _(x):
    return torch.empty_like(x)  # BUG: the real op pads the columns to a multiple of 8


class Model(torch.nn.Module):
    def forward(self, x):
        h = torch.relu(x) + 1.0
        return pad_double(h).sum(dim=1) * 0.5


torch.manual_seed(0)
cols = torch.export.Dim("cols", min=2, max=64)
model = Model()
ep = torch.export.export(model, (torch.randn(6, 16),), dynamic_shapes={"x": {1: cols}})
path = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.abspath("wrong_fake_custom_op.pt2"))
runner = torch._inductor.aoti_load_package(path)
x = torch.randn(6, 12)  # 12 columns: the real op returns 16, the fake promised 12
out = runner(x)
ref = model(x)
if not torch.allclose(out, ref):
    print(f"wrong values: max abs difference {float((out - ref).abs().max()):.4g}", flush=True)
    sys.exit(1)
print("OK", out.shape)
