"""Lab (CUDA, issue #36): a tiny AOTI model that passes, to time what the CUDA core-dump environment costs a run
that never faults. `build PKG` compiles the package once; `run PKG` loads and runs it and prints one JSON line of
timings, so the many timed runs measure loading and running, not Inductor.
"""
import faulthandler
import json
import os
import sys
import time

if sys.argv[1:2] == ["run"]:
    faulthandler.dump_traceback_later(float(os.environ.get("HANG_S", "90")), exit=True)  # where a hung run hangs
t0 = time.perf_counter()
import torch  # noqa: E402

t_import = time.perf_counter() - t0


class M(torch.nn.Module):
    def forward(self, x, w):
        return torch.relu(x @ w) + 1.0


def main():
    mode, pkg = sys.argv[1], os.path.abspath(sys.argv[2])
    torch.manual_seed(0)
    x = torch.randn(64, 128, device="cuda")
    w = torch.randn(128, 32, device="cuda")
    if mode == "build":
        ep = torch.export.export(M(), (x, w))
        torch._inductor.aoti_compile_and_package(ep, package_path=pkg)
    t1 = time.perf_counter()
    runner = torch._inductor.aoti_load_package(pkg)
    t2 = time.perf_counter()
    out = runner(x, w)
    torch.cuda.synchronize()
    t3 = time.perf_counter()
    for _ in range(200):  # warm calls: what the dump environment costs each kernel launch, if anything
        runner(x, w)
    torch.cuda.synchronize()
    t4 = time.perf_counter()
    ok = bool(torch.isfinite(out).all()) and float(out.min()) >= 1.0
    print(json.dumps({"import_s": round(t_import, 3), "load_s": round(t2 - t1, 3), "first_run_s": round(t3 - t2, 3),
                      "warm_call_us": round((t4 - t3) / 200 * 1e6, 1), "ok": ok}), flush=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
