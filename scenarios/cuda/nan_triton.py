"""Scenario (CUDA): a NaN made inside a fused Triton kernel (log of negative values),
then an extern mm, then a second fused Triton kernel. The output is non-finite.

kernel 1 (Triton): a = log(x) * 2      <- BUG: x has negative entries -> NaN
extern mm        : b = a @ w
kernel 2 (Triton): out = relu(b) + 1
"""
import os
import torch


class M(torch.nn.Module):
    def forward(self, x, w):
        a = torch.log(x) * 2.0         # NaN for x < 0
        b = a @ w                      # extern mm (aoti_torch_cuda_mm_out)
        return torch.relu(b) + 1.0


def main():
    torch.manual_seed(0)
    x = torch.randn(32, 64, device="cuda")
    w = torch.randn(64, 16, device="cuda")
    ep = torch.export.export(M(), (x, w))
    path = torch._inductor.aoti_compile_and_package(
        ep, package_path=os.path.abspath("nan_triton.pt2"))
    print("compiled", path, flush=True)
    runner = torch._inductor.aoti_load_package(path)
    print("loaded", flush=True)
    out = runner(x, w)
    torch.cuda.synchronize()
    print("out", tuple(out.shape), "nan count", int(torch.isnan(out).sum()), flush=True)
    if not torch.isfinite(out).all():
        raise SystemExit("non-finite output")
    print("OK", flush=True)


if __name__ == "__main__":
    main()
