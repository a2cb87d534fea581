"""Fails with probability P, drawn from a PRNG seeded with SEED and the run index aoti-bisect gives each run,
so a set of runs fails the same way however it is split into shards. MODE picks how it fails."""
import os
import random
import sys

p, seed = float(sys.argv[1]), int(sys.argv[2])
mode = sys.argv[3] if len(sys.argv) > 3 else "raise"
index = int(os.environ["AOTI_BISECT_RUN_INDEX"])
if random.Random(seed * 1_000_003 + index).random() < p:
    if mode == "abort":
        print("seeded failure: aborting", flush=True)
        os.abort()
    raise RuntimeError(f"seeded failure (p={p})")
print("ok")
