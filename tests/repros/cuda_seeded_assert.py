"""Eager CUDA repro for `aoti-bisect nightly` GPU pinning: args P SEED.

Prints which GPU it sees (CUDA_VISIBLE_DEVICES, device_count, uuid, name, PCI bus id) and checks that it sees
exactly one. Then, with probability P drawn from a PRNG seeded with SEED and AOTI_BISECT_RUN_INDEX (the same
formula as seeded_flaky.py), it triggers a real device-side assert (an out-of-bounds CUDA gather), else prints ok.
No AOTI compile: the run takes a second or two.
"""
import os
import random
import sys

import torch

p, seed = float(sys.argv[1]), int(sys.argv[2])
index = int(os.environ["AOTI_BISECT_RUN_INDEX"])
print(f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '<unset>')}", flush=True)
count = torch.cuda.device_count()
print(f"device_count={count}", flush=True)
props = torch.cuda.get_device_properties(0)
uuid = str(getattr(props, "uuid", "?"))
bus = "{:04x}:{:02x}:{:02x}".format(getattr(props, "pci_domain_id", 0), getattr(props, "pci_bus_id", -1) & 0xff,
                                    getattr(props, "pci_device_id", -1) & 0xff)
print(f"gpu uuid={uuid} name={props.name} pci={bus}", flush=True)
assert count == 1, f"expected exactly one visible CUDA device, got {count}"

fail = random.Random(seed * 1_000_003 + index).random() < p
print(f"run index={index} seeded failure={fail}", flush=True)
x = torch.arange(10, device="cuda")
idx = torch.tensor([3, 20 if fail else 4], device="cuda")  # 20 is past the end: the gather kernel asserts
y = x[idx]
torch.cuda.synchronize()
print(f"gathered {y.tolist()}")
print("ok")
