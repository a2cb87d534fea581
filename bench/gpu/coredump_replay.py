"""Lab (CUDA, issue #36): run a package that a scenario already built, with that scenario's failing inputs, so
that each core-dump experiment costs seconds instead of a compile.

    python3 coredump_replay.py oob PKG     # device_assert_oob's package: Inductor's bounds assert fires
    python3 coredump_replay.py ima PKG     # rare_ima_user_triton's package, with a far id: illegal address

LINGER=S makes the process wait S seconds after the failure before it exits, to tell whether the process's own
exit cuts a dump short. Prints one line per step with its time, and a faulthandler stack if it hangs (HANG_S).
"""
import faulthandler
import os
import sys
import time

T0 = time.time()


def say(msg):
    print(f"[replay +{time.time() - T0:.3f}s] {msg}", flush=True)


faulthandler.dump_traceback_later(float(os.environ.get("HANG_S", "60")), exit=True)
import torch  # noqa: E402


def inputs(kind):
    dev = "cuda"
    torch.manual_seed(0)
    if kind == "oob":
        return (torch.randn(64, 100, device=dev), torch.randn(100, 100, device=dev),
                torch.arange(0, 40, device=dev), torch.randn(40, 32, device=dev))
    table = torch.randn(8192, 128, device=dev)
    ids = torch.randint(0, 8192, (256,), device=dev)
    ids[100] = 8192 + (32 << 30) // 512  # 32 GiB past the table: never mapped, faults every run
    return table, ids, torch.randn(128, 64, device=dev)


def main():
    kind, pkg = sys.argv[1], sys.argv[2]
    say("imported torch")
    runner = torch._inductor.aoti_load_package(pkg)
    args = inputs(kind)
    torch.cuda.synchronize()
    say("loaded; running")
    try:
        out = runner(*args)
        torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001 - the failure is what this lab looks at
        say(f"failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
        linger = float(os.environ.get("LINGER", "0"))
        if linger:
            time.sleep(linger)
            say(f"lingered {linger}s")
        sys.exit(1)
    say(f"passed {tuple(out.shape)}")


if __name__ == "__main__":
    main()
