"""Run by the repro's interpreter, in a fresh process: load the .pt2 named in argv (the load doctor's toolchain
experiment); a crash or an exception means it does not load. Imports nothing of aoti_bisect."""
import sys

if __name__ == "__main__":
    import torch._inductor

    torch._inductor.aoti_load_package(sys.argv[1])
    print("AOTI_BISECT_LOADED", flush=True)
