"""Run by the repro's interpreter, in a fresh process: load the .pt2 named in argv (the load doctor's toolchain
experiment); a crash or an exception means it does not load. Imports nothing of aoti_bisect."""
import os
import runpy
import sys

# contract.py by path: PYTHONSAFEPATH (the user's) would keep this folder off sys.path.
CONTRACT = runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "contract.py"))

if __name__ == "__main__":
    import torch._inductor

    torch._inductor.aoti_load_package(sys.argv[1])
    print(CONTRACT["LOADED_MARK"], flush=True)
