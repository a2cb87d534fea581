"""Loads a prebuilt .pt2 (built by prebuilt_named_build.py from a program exported with keyword inputs) and calls
it by keyword with a `gain` that holds a NaN. The run built nothing, so the user's names come only from the
package itself: its call spec keeps the keyword inputs' names, and the report must use them, not arg1_1.
--cuda (prebuilt_named_inputs_cuda): the package was built for CUDA (prebuilt_named_build.py --cuda) and the
inputs live on the GPU.

    python prebuilt_named_inputs.py PACKAGE.pt2 [--cuda]"""
import sys

import torch

torch.manual_seed(0)
device = "cuda" if "--cuda" in sys.argv else "cpu"
gain = torch.rand(16)
gain[3] = float("nan")  # a corrupt calibration value
features = torch.rand(4, 16)
runner = torch._inductor.aoti_load_package(sys.argv[1])
out = runner(features=features.to(device), gain=gain.to(device))
if not torch.isfinite(out).all():
    raise SystemExit("non-finite output")
print("ok", float(out.sum()))
