"""Lab (issue #18 parser captures): an out-of-bounds read inside an Inductor-generated Triton kernel.

The model of scenarios/cuda/device_assert_oob.py, compiled with Inductor's indirect-indexing assert turned
off (torch._inductor.config.assert_indirect_indexing = False), so the gather kernel reads past its input
instead of asserting: compute-sanitizer names the generated kernel (triton_poi_fused_...).
"""
import os
import torch


class M(torch.nn.Module):
    def forward(self, x, w, idx, w2):
        h = x @ w
        s = (torch.sin(h) + 1.0)[:, idx * 3 + 1]     # BUG: column idx*3+1 >= 100 once idx >= 33
        return torch.relu(s @ w2).sum(dim=1)


def main():
    torch._inductor.config.assert_indirect_indexing = False
    torch.manual_seed(0)
    dev = "cuda"
    x, w = torch.randn(64, 100, device=dev), torch.randn(100, 100, device=dev)
    idx, w2 = torch.arange(0, 40, device=dev), torch.randn(40, 32, device=dev)
    ep = torch.export.export(M(), (x, w, idx, w2))
    runner = torch._inductor.aoti_load_package(torch._inductor.aoti_compile_and_package(
        ep, package_path=os.path.abspath("inductor_kernel_oob.pt2")))
    out = runner(x, w, idx, w2)
    torch.cuda.synchronize()
    print("OK", float(out.sum()), flush=True)


if __name__ == "__main__":
    main()
