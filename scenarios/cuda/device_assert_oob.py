"""Scenario (CUDA): Triton device-side assert from an in-graph index that goes out of bounds.

mm -> [fused sin/add/gather kernel: indexes column idx*3+1 of a 100-column tensor, BUG for idx >= 33]
   -> mm -> fused relu/sum kernel.
Inductor's bounds check inside the gather kernel fires a device-side assert at run time
(every run; the example inputs used for compilation already contain the bad indices).
"""
import os
import torch


class M(torch.nn.Module):
    def forward(self, x, w, idx, w2):
        h = x @ w                      # extern mm
        j = idx * 3 + 1                # BUG: past h.shape[1] (100) once idx >= 33
        y = torch.sin(h) + 1.0
        s = y[:, j]                    # gather -> Triton kernel with tl.device_assert bounds check
        t = s @ w2                     # extern mm
        return torch.relu(t).sum(dim=1)


def main():
    torch.manual_seed(0)
    dev = "cuda"
    x = torch.randn(64, 100, device=dev)
    w = torch.randn(100, 100, device=dev)
    idx = torch.arange(0, 40, device=dev)
    w2 = torch.randn(40, 32, device=dev)
    ep = torch.export.export(M(), (x, w, idx, w2))
    path = torch._inductor.aoti_compile_and_package(
        ep, package_path=os.path.abspath("device_assert_oob.pt2"))
    print("compiled", path, flush=True)
    runner = torch._inductor.aoti_load_package(path)
    print("loaded", flush=True)
    out = runner(x, w, idx, w2)
    torch.cuda.synchronize()
    print("OK", tuple(out.shape), float(out.sum()), flush=True)


if __name__ == "__main__":
    main()
