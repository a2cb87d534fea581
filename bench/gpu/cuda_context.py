"""A CUDA process's GPU memory beside what torch's allocator reserved (run/slots.py's CUDA_CONTEXT): nvidia-smi's
used memory before and after a process initialises CUDA and runs a matmul and a Triton kernel, against
torch.cuda.memory_reserved(). Run it alone on the GPU: `python bench/gpu/cuda_context.py`."""
import subprocess

import torch


def used_mib() -> int:
    out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, check=True).stdout
    return int(out.split()[0])


def main() -> None:
    before = used_mib()
    x = torch.randn(1024, 1024, device="cuda")
    (x @ x).sum().item()
    torch.compile(lambda t: torch.relu(t) * 2)(x).sum().item()  # a Triton kernel loaded, as a package's are
    torch.cuda.synchronize()
    after = used_mib()
    reserved = torch.cuda.max_memory_reserved() >> 20
    print(f"torch {torch.__version__} {torch.cuda.get_device_name(0)}: used {before} -> {after} MiB "
          f"(+{after - before}), allocator reserved {reserved} MiB, beside it {after - before - reserved} MiB")


if __name__ == "__main__":
    main()
