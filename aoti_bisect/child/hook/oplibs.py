"""Which shared library in the repro's process registers each custom-op namespace its program calls, so that a
capture can carry the library and a process that imported only torch (minify's walk and candidates) can load it.

A C++ op (TORCH_LIBRARY, `load_inline`, an extension module) is found by its library file: one mapped into this
process that holds both the namespace and an op name as bytes (the TORCH_LIBRARY macro spells the namespace, the
schema the op). An op defined in Python (torch.library.custom_op, a Library("ns", "DEF")) has no library: it
stays out, and whoever loads the program later says so.
"""
import mmap
import os

# Namespaces a process that imported only torch already has; their ops are never carried.
TORCH_NAMESPACES = {"aten", "prims", "prim", "_c10d_functional", "c10d_functional", "higher_order", "quantized",
                    "_quantized", "inductor", "profiler", "rngprims", "mkldnn", "onednn", "_inductor_test"}
MAX_LIBRARY_BYTES = 256 << 20  # a larger file is not searched nor copied


def custom_ops(ep):
    """{namespace: {op name, ...}} of the ops in the program that torch does not register itself."""
    import torch

    found = {}
    for node in ep.graph.nodes:
        if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload):
            namespace = node.target.namespace
            if namespace not in TORCH_NAMESPACES:
                found.setdefault(namespace, set()).add(node.target._opname)
    return found


def _mapped_libraries():
    """Shared libraries mapped into this process, outside torch's own folder and the system's."""
    import torch

    skip = (os.path.dirname(os.path.abspath(torch.__file__)) + os.sep, "/lib/", "/lib64/", "/usr/lib/",
            "/usr/lib64/")
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split(None, 5)[-1].strip() for line in f if ".so" in line}
    except OSError:
        paths = set()
    paths.update(getattr(torch.ops, "loaded_libraries", ()))
    return sorted(p for p in paths if p.startswith("/") and not p.startswith(skip) and os.path.isfile(p))


def _holds(path, words):
    try:
        if os.path.getsize(path) > MAX_LIBRARY_BYTES:
            return False
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return all(data.find(w) >= 0 for w in words)
    except (OSError, ValueError):
        return False


def python_defined(qualname):
    """Whether torch.library.custom_op (or triton_op) made the op: its code is Python, whatever library file
    happens to hold its short names as bytes (libpython holds most short words)."""
    from torch._library.custom_ops import OPDEFS

    return qualname in OPDEFS


def libraries(ep):
    """{namespace: library path} for each custom namespace a mapped library registers (Python-defined: absent)."""
    wanted = {ns: ops for ns, ops in ((ns, {o for o in ops if not python_defined(f"{ns}::{o}")})
                                      for ns, ops in custom_ops(ep).items()) if ops}
    if not wanted:
        return {}
    found = {}
    for path in _mapped_libraries():
        for namespace, ops in wanted.items():
            if namespace not in found and _holds(path, [namespace.encode()] + [o.encode() for o in ops]):
                found[namespace] = path
    return found
