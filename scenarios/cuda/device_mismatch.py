"""Scenario (CUDA): a package compiled for CUDA inputs is fed a CPU tensor as input 0.

The model is compiled with all inputs on cuda; at run time x (input 0) is passed on the CPU,
w (input 1) stays on cuda. AOTI does not check input devices unless AOTI_RUNTIME_CHECK_INPUTS=1.
"""
import os
import torch


class M(torch.nn.Module):
    def forward(self, x, w):
        h = x @ w                      # extern mm reads input 0 first
        return torch.sin(torch.relu(h)) + 1.0


def main():
    torch.manual_seed(0)
    x = torch.randn(32, 64, device="cuda")
    w = torch.randn(64, 16, device="cuda")
    ep = torch.export.export(M(), (x, w))
    path = torch._inductor.aoti_compile_and_package(
        ep, package_path=os.path.abspath("device_mismatch.pt2"))
    print("compiled", path, flush=True)
    runner = torch._inductor.aoti_load_package(path)
    print("loaded", flush=True)
    ref = M()(x, w)
    x_cpu = x.cpu()                    # BUG: input 0 on the wrong device
    out = runner(x_cpu, w)
    torch.cuda.synchronize()
    out = out.to("cuda")
    if not torch.allclose(out, ref, atol=1e-3, rtol=1e-3):
        raise SystemExit("wrong result: max abs err %g" % float((out - ref).abs().max()))
    print("OK (no failure)", flush=True)


if __name__ == "__main__":
    main()
