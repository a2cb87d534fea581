"""The environment probe: run as a script by the repro's own interpreter, which may lack aoti_bisect.

It imports nothing of aoti_bisect and never imports torch: it answers where torch is broken, and costs the
runs beside it a tenth of a second. It prints one line, `AOTI_BISECT_PROBE <json>`.
"""
import importlib.metadata as md
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import sys

info = {"python": sys.version.split()[0], "platform": platform.platform()}
def first_line(cmd):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.TimeoutExpired):
        return None
spec = importlib.util.find_spec("torch")
if spec is None or not spec.submodule_search_locations:
    info["torch_error"] = "No module named 'torch'"
else:
    info["torch"] = md.version("torch")
    try:
        text = open(os.path.join(spec.submodule_search_locations[0], "version.py")).read()
        for key, var in (("torch_git", "git_version"), ("cuda_runtime", "cuda")):
            m = re.search(rf"^{var}\s*(?::\s*\S+)?\s*=\s*'([^']*)'", text, re.M)
            info[key] = m.group(1) if m else None
    except OSError:
        pass
if shutil.which("nvidia-smi"):
    info["gpu"] = first_line(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"])
cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
info["cxx"] = cxx
info["cxx_version"] = first_line([cxx, "--version"]) if cxx else None
lib = first_line([cxx, "-print-file-name=libstdc++.so.6"]) if cxx else None
info["libstdcxx"] = os.path.realpath(lib) if lib and os.path.exists(lib) else None
try:
    # collect_env is loaded from torch's own file with `import torch` blocked: it is written to run without
    # torch and then reads only the system (compilers, OS, libc, driver, GPUs, cuDNN). Importing torch would
    # cost ~1.6 s of CPU, taken from the runs beside the probe, for fields the lines above already hold.
    sys.modules["torch"] = None
    path = os.path.join(spec.submodule_search_locations[0], "utils", "collect_env.py")
    source = importlib.util.spec_from_file_location("collect_env", path)
    collect_env = importlib.util.module_from_spec(source)
    source.loader.exec_module(collect_env)
    skip = {"pip_packages", "conda_packages", "cpu_info"}
    # `pip list` would be the dearest part (~0.75 s of CPU) and is skipped anyway.
    collect_env.get_pip_packages = lambda run_lambda, patterns=None: (None, None)
    for key, value in collect_env.get_env_info()._asdict().items():
        if key not in skip and value not in (None, "", "N/A"):
            info["collect_env." + key] = " ".join(str(value).split())[:300]
except Exception as exc:
    info["collect_env"] = f"unavailable: {type(exc).__name__}: {exc}"[:300]
print("AOTI_BISECT_PROBE " + json.dumps(info))
