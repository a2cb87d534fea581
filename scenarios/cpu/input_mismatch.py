"""Silent wrong result: an AOTI package fed an input with a different stride.

The model is exported and compiled for a contiguous (64, 32) float32 input.
At run time the script feeds `feats.t()`, a (64, 32) view of a (32, 64)
tensor, i.e. same shape and dtype but strides (1, 64) instead of (32, 1).
The AOTI runtime does not check input strides unless AOTI_RUNTIME_CHECK_INPUTS=1
is set, so the generated kernels read the memory as if it were contiguous and
return garbage without any error.  The script's own comparison against eager
then fails (AssertionError, exit code 1).

With AOTI_RUNTIME_CHECK_INPUTS=1 the runtime itself raises
`input_handles[0]: unmatched stride value at 0, expected: 32, but got: 1`.
"""
import os
import sys

import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.randn(32))
        self.weight = torch.nn.Parameter(torch.randn(32))

    def forward(self, x, y):
        h = torch.relu(x + self.bias) * self.weight
        return h.sum(dim=1) + y


def main():
    torch.manual_seed(0)
    model = Model().eval()
    x = torch.randn(64, 32)
    y = torch.randn(64)
    with torch.no_grad():
        ep = torch.export.export(model, (x, y))
    pkg = torch._inductor.aoti_compile_and_package(
        ep, package_path=os.path.abspath("input_mismatch.pt2"))
    runner = torch._inductor.aoti_load_package(pkg)

    # Features arrive feature-major from the upstream pipeline and get transposed
    # to (batch, feature) -- same shape as at export, but not contiguous.
    feats = torch.randn(32, 64)
    x_rt = feats.t()
    print(f"run-time input 0: shape={tuple(x_rt.shape)} stride={x_rt.stride()} "
          f"(compiled for stride {x.stride()})", flush=True)
    out = runner(x_rt, y)

    with torch.no_grad():
        ref = model(x_rt, y)
    max_err = (out - ref).abs().max().item()
    print(f"max abs diff vs eager: {max_err:.4g}", flush=True)
    if not torch.allclose(out, ref, rtol=1e-4, atol=1e-4):
        raise AssertionError(f"output mismatch vs eager (max abs diff {max_err:.4g})")
    print("OK", out.shape)


if __name__ == "__main__":
    main()
    sys.exit(0)
