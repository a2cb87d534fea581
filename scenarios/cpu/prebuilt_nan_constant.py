"""Loads a prebuilt package given on the command line and checks its output; it never compiles anything.

    python prebuilt_nan_constant.py [PACKAGE.pt2]

The package (built by build_nan_constant_package.py) has a NaN in its parameter proj.bias. Without PACKAGE,
it uses $AOTI_BISECT_SCENARIO_PACKAGES/ (default ~/.cache/aoti-bisect-scenarios/) and, when the package is
not there yet, builds it first in a separate process, so that `aoti-bisect scenarios check` needs no setup
step. That process runs without aoti-bisect's hook and with its own Inductor cache: this process only loads.
"""
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
BUILDER = os.path.join(HERE, "build_nan_constant_package.py")


def default_package():
    folder = os.environ.get("AOTI_BISECT_SCENARIO_PACKAGES") or os.path.expanduser("~/.cache/aoti-bisect-scenarios")
    os.makedirs(folder, exist_ok=True)
    with open(BUILDER, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:12]
    path = os.path.join(folder, f"nan_constant-{torch.__version__}-{digest}.pt2")
    with open(path + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two runs at once: one builds, the other waits and loads
        if not os.path.exists(path):
            cache = tempfile.mkdtemp(prefix="inductor-", dir=folder)
            env = {k: v for k, v in os.environ.items() if k != "AOTI_BISECT_HOOK"}
            env["TORCHINDUCTOR_CACHE_DIR"] = cache
            try:
                subprocess.run([sys.executable, BUILDER, path], env=env, check=True)
            finally:
                shutil.rmtree(cache, ignore_errors=True)
    return path


package = sys.argv[1] if len(sys.argv) > 1 else default_package()
runner = torch._inductor.aoti_load_package(package)
out = runner(torch.rand(4, 8))
if not torch.isfinite(out).all():
    raise SystemExit("non-finite output")
print("ok", float(out.sum()))
