"""A NaN in a parameter (three elements of proj.bias, as a corrupt checkpoint leaves them) compiled into the
package. The level-2 printer never prints constants, so without reading them the walk would blame the extern
addmm that reads the bias; only the script's own check of the output notices."""
import os

import torch

from build_nan_constant_package import corrupt_model

x = torch.rand(4, 8)
ep = torch.export.export(corrupt_model(), (x,))
path = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.abspath("nan_constant.pt2"))
runner = torch._inductor.aoti_load_package(path)
out = runner(x)
if not torch.isfinite(out).all():
    raise SystemExit("non-finite output")
print("ok", float(out.sum()))
