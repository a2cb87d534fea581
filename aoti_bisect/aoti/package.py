"""What a .pt2 package says about what loading it needs: its custom ops, its target, the compiler that built it.

Read from what torch 2.13 writes into the zip (checked on a real package): `<hash>.wrapper.json` lists the
extern nodes the wrapper hands to the proxy executor (each `aoti_torch_proxy_executor_call_function(
proxy_executor, N, ...)` runs node N), whose `target` is the op (`mylib::scale`) the loader looks up, and fails
on, when the loading process never registered it. `*_metadata.json` holds AOTI_DEVICE_KEY, AOTI_PLATFORM,
AOTI_MACHINE, AOTI_CPU_ISA and AOTI_COMPUTE_CAPABILITY; no torch version is recorded. The compiled `.so`
keeps the compiler's `.comment` string ("GCC: (Debian 12.2.0-14+deb12u1) 12.2.0").
"""
from __future__ import annotations

import json
import re
import zipfile
from dataclasses import dataclass
from typing import Optional

_COMPILER = re.compile(rb"(GCC: \([^)\n]{0,120}\) [\w.\-]+|clang version [\w.\-]+)")
# A package's model library is a few MB; reading it whole (for its .comment) is cheap, an absurd one is not.
MAX_SO_BYTES = 512 << 20


@dataclass(frozen=True)
class PackageFacts:
    path: str
    custom_ops: tuple[str, ...] = ()  # the proxy executor's ops, as `namespace::name[.overload]`
    metadata: tuple[tuple[str, str], ...] = ()  # AOTI_* keys of the model's metadata
    compiler: Optional[str] = None
    problem: Optional[str] = None  # why the package could not be read (the facts are then empty)

    @property
    def device(self) -> Optional[str]:
        return dict(self.metadata).get("AOTI_DEVICE_KEY")


def read_package(path: str, model: str = "model") -> PackageFacts:
    try:
        with zipfile.ZipFile(path) as z:
            names = [n for n in z.namelist() if f"/data/aotinductor/{model}/" in n] or z.namelist()
            ops: list[str] = []
            metadata: dict[str, str] = {}
            compiler = None
            for name in names:
                if name.endswith(".wrapper.json"):
                    ops += extern_ops(z.read(name).decode(errors="replace"))
                elif name.endswith("_metadata.json"):
                    metadata.update({str(k): str(v) for k, v in json.loads(z.read(name)).items()})
                elif name.endswith(".so") and compiler is None and z.getinfo(name).file_size <= MAX_SO_BYTES:
                    m = _COMPILER.search(z.read(name))
                    compiler = m.group(1).decode(errors="replace") if m else None
    except (OSError, zipfile.BadZipFile, KeyError, ValueError) as exc:
        return PackageFacts(path, problem=f"cannot read the package {path}: {type(exc).__name__}: {exc}")
    return PackageFacts(path, tuple(dict.fromkeys(ops)), tuple(sorted(metadata.items())), compiler)


def extern_ops(text: str) -> list[str]:
    """The ops of a wrapper's extern-node JSON (`{"nodes": [{"node": {"target": "ns::op"}}]}`), in order."""
    try:
        nodes = json.loads(text).get("nodes") or []
    except (ValueError, AttributeError):
        return []
    return [str(n["node"]["target"]) for n in nodes
            if isinstance(n, dict) and isinstance(n.get("node"), dict) and "::" in str(n["node"].get("target"))]
