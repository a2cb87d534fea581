"""Run by the repro's interpreter, in a fresh process: which of the ops named in argv torch registers by itself,
and what this process loads (torch, CPU capability, CUDA, libstdc++). Imports nothing of aoti_bisect."""
import json
import os
import runpy
import sys

# contract.py by path: PYTHONSAFEPATH (the user's) would keep this folder off sys.path.
CONTRACT = runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "contract.py"))


def registered(torch, op):
    """Whether `namespace::name[.overload]` resolves through torch.ops, as the AOTI proxy executor's lookup does."""
    namespace, _, rest = op.partition("::")
    name, _, overload = rest.partition(".")
    try:
        packet = getattr(getattr(torch.ops, namespace), name)
        if overload:
            getattr(packet, overload)
    except (AttributeError, RuntimeError):
        return False
    return True


def libstdcxx():
    try:
        with open("/proc/self/maps") as f:
            return next((line.split()[-1] for line in f if "libstdc++.so" in line), None)
    except OSError:
        return None


def main():
    try:
        import torch
    except Exception as exc:  # a broken torch is an answer too
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {"torch": torch.__version__, "ops": {op: registered(torch, op) for op in sys.argv[1:]},
            "cpu_capability": torch.backends.cpu.get_cpu_capability(), "cuda": torch.cuda.is_available(),
            "libstdcxx": libstdcxx()}


if __name__ == "__main__":
    print(CONTRACT["REGISTRY_MARK"], json.dumps(main()), flush=True)
