"""Reruns one run of a kept ladder (its spec.json: argv, env overlay, cwd) under bench/gpu/where.py, so that its
stacks every $WHERE_EVERY s say where a reused run's time goes. Writes $OUT/<name>.tb and <name>.log.

Usage (on the GPU machine, after bench_on_gpu.sh kept the ladder): python3 bench/gpu/profile_run.py RUN_DIR
"""
import json
import os
import subprocess
import sys
import time

run_dir = sys.argv[1]
with open(os.path.join(run_dir, "spec.json")) as f:
    spec = json.load(f)
name = os.path.basename(run_dir.rstrip("/"))
out = os.environ.get("OUT", ".")
env = {**os.environ, **spec["env_overlay"], "TB": os.path.join(out, f"{name}.tb")}
where = os.path.join(os.path.dirname(os.path.abspath(__file__)), "where.py")
start = time.time()
with open(os.path.join(out, f"{name}.log"), "w") as log:
    rc = subprocess.call([spec["argv"][0], where, *spec["argv"][1:]], env=env, cwd=spec["cwd"], stdout=log,
                         stderr=subprocess.STDOUT)
print(f"{name}: rc {rc}, {time.time() - start:.1f} s")
