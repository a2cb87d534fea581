"""The environment probe: run as a script by the repro's own interpreter, which may lack aoti_bisect.

It imports nothing of aoti_bisect and never imports torch: it answers where torch is broken, and costs the
runs beside it a fraction of a second. It prints one line, contract.PROBE_MARK and its JSON.
"""
import importlib.metadata as md
import importlib.util
import json
import os
import platform
import runpy
import shutil
import subprocess
import sys

# contract.py by path: PYTHONSAFEPATH (the user's) would keep this folder off sys.path.
CONTRACT = runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "contract.py"))

info = {"python": sys.version.split()[0], "executable": sys.executable, "platform": platform.platform()}


def first_line(cmd):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.TimeoutExpired):
        return None


def load_file(name, path):
    source = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(source)
    source.loader.exec_module(module)
    return module


def collect_env_text(torch_dir, version):
    """torch's collect_env report (what PyTorch's bug template asks for), from its own code, without torch.

    collect_env is written to run without torch; it then reads only the system (OS, compilers, libc, driver,
    GPUs, cuDNN). Importing torch would cost ~1.6 s of CPU, taken from the runs beside the probe, and fail
    where torch is broken, so the fields it would give come from torch/version.py (constants only).
    """
    sys.modules["torch"] = None
    collect_env = load_file("collect_env", os.path.join(torch_dir, "utils", "collect_env.py"))
    default = [p for name in ("PIP_PATTERNS", "COMMON_PATTERNS", "NVIDIA_PATTERNS", "ONEAPI_PATTERNS")
               for p in getattr(collect_env, name, [])]

    def pip_packages(run_lambda, patterns=None):
        # `pip list` would cost ~0.75 s of CPU; the installed distributions' metadata holds the same lines.
        names = sorted({f"{d.metadata['Name']}=={d.version}" for d in md.distributions() if d.metadata["Name"]},
                       key=str.lower)
        return "pip3", "\n".join(n for n in names if any(p in n for p in patterns or default))

    collect_env.get_pip_packages = pip_packages
    env = collect_env.get_env_info()
    if version is not None:
        # A build without CUDA (or XPU) cannot have it available; a CUDA build's answer needs `import torch`.
        unprobed = "not probed (aoti-bisect does not import torch)"
        env = env._replace(
            torch_version=version.__version__, is_debug_build=str(version.debug),
            cuda_compiled_version=str(version.cuda),
            hip_compiled_version=getattr(version, "hip", None) or "N/A",
            is_cuda_available="False" if version.cuda is None else unprobed,
            is_xpu_available="False" if getattr(version, "xpu", None) is None else unprobed)
    return collect_env.pretty_str(env)


spec = importlib.util.find_spec("torch")
torch_dir = spec.submodule_search_locations[0] if spec and spec.submodule_search_locations else None
version = None
if torch_dir is None:
    info["torch_error"] = "No module named 'torch'"
else:
    info["torch"] = md.version("torch")
    try:
        version = load_file("torch_version", os.path.join(torch_dir, "version.py"))
        info["torch_git"] = version.git_version
        info["cuda_runtime"] = version.cuda
    except Exception as exc:  # a half-installed torch: say so, keep probing the rest
        info["torch_error"] = f"cannot read torch/version.py: {type(exc).__name__}: {exc}"[:300]
if shutil.which("nvidia-smi"):
    info["gpu"] = first_line(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"])
    # The first GPU's free memory, MiB: how many runs it holds at once (run/slots.py).
    info["gpu_free_mib"] = first_line(["nvidia-smi", "--query-gpu=memory.free", "--format=csv,noheader,nounits"])
cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
info["cxx"] = cxx
info["cxx_version"] = first_line([cxx, "--version"]) if cxx else None
lib = first_line([cxx, "-print-file-name=libstdc++.so.6"]) if cxx else None
info["libstdcxx"] = os.path.realpath(lib) if lib and os.path.exists(lib) else None
if torch_dir is not None:
    try:
        info["collect_env"] = collect_env_text(torch_dir, version)
    except Exception as exc:
        info["collect_env_error"] = f"{type(exc).__name__}: {exc}"[:300]
print(CONTRACT["PROBE_MARK"], json.dumps(info))
