"""Setup of the crashing_toolchain scenario: builds a small .pt2 with CXX set to a C++ toolchain whose runtime
the loading process cannot take, as the GPU image's /opt/gcc g++ was (its packages segfaulted while loading
against the system libstdc++, in std::regex).

The toolchain is a wrapper around this machine's g++ that links into every shared library it builds a tiny
object whose constructor crashes (raise(SIGSEGV)): like a foreign runtime, code of the toolchain runs inside
the loading process as soon as the library is loaded, and kills it there. It lives beside the package
(crashing-toolchain/bin/g++); the compile uses its own Inductor cache, so no shared cache ever holds a library
it built."""
import os
import shutil
import subprocess
import sys


def crashing_toolchain(folder: str, constructor: str = "raise(SIGSEGV);") -> str:
    """`folder`/bin/g++: this machine's g++, linking into each shared library an object whose constructor runs
    `constructor` (C) when the library is loaded."""
    real = shutil.which("g++")
    if real is None:
        raise SystemExit("no g++ on PATH: the crashing toolchain wraps it")
    bin_dir = os.path.join(folder, "bin")
    os.makedirs(bin_dir, exist_ok=True)
    source, crash = os.path.join(folder, "crash.c"), os.path.join(folder, "crash.o")
    with open(source, "w") as f:
        f.write("#include <signal.h>\n#include <unistd.h>\n"
                f"__attribute__((constructor)) static void incompatible_runtime(void) {{ {constructor} }}\n")
    subprocess.run([real, "-x", "c", "-c", "-fPIC", source, "-o", crash], check=True)
    cxx = os.path.join(bin_dir, "g++")
    with open(cxx, "w") as f:
        f.write(f'#!/bin/sh\ncase " $* " in *" -shared "*) exec {real} "$@" {crash} ;; esac\nexec {real} "$@"\n')
    os.chmod(cxx, 0o755)
    return cxx


if __name__ == "__main__":
    out = os.path.abspath(sys.argv[1])
    os.environ["CXX"] = crashing_toolchain(os.path.join(os.path.dirname(out), "crashing-toolchain"))
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(os.path.dirname(out), "inductor-cache")
    import torch  # after CXX: Inductor reads it when its config is imported

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(8, 4))

        def forward(self, x):
            return torch.relu(x @ self.w) + 1.0

    torch.manual_seed(0)
    ep = torch.export.export(M(), (torch.rand(2, 8),))
    print(torch._inductor.aoti_compile_and_package(ep, package_path=out))
