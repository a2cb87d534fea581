"""Re-instrumenting a .pt2 package the run did not build: pure transforms of what the package holds.

A CPU package from aoti_compile_and_package carries, per model, `<hash>.wrapper.cpp` (the launch sequence),
`<hash>.kernel.cpp`, `*_metadata.json` and the linked `<hash>.wrapper.so`; the two sources end with the
compiler and linker commands Inductor ran ("// Compile cmd", "// Link cmd"). The model's weights are not a
file of the package: they are linked into the .so as the `_binary_constants_bin_start` blob (and, when
Inductor mmaps them, appended after the ELF image). So a copy is rebuilt from the package's own sources, the
same commands and the original .so's weights, with the printer statements that Inductor's debug printer
(codegen/debug_utils.py) would have generated at that level inserted around each launch, spelled as it spells
them, so that the level 2/3 parsers read the copy's output unchanged. The processes are run/rebuild.py's.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import struct
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional

from .wrapper import _CALL, split_args

TRACE_LEVEL = 3
INSPECT_LEVEL = 2
PLAIN = 0  # a copy as built, for the load doctor's toolchain experiment
# A CUDA package's Triton kernels are cubins beside the wrapper, loaded by path from the package's own folder:
# the copy keeps them as they are and rebuilds only the wrapper that launches them.
DEVICES = ("cpu", "cuda")
MAX_MEMBER_BYTES = 256 << 20  # a wrapper or kernel source; anything bigger is not one Inductor wrote
_MODEL_DIR = re.compile(r"^(?P<root>[^/]+)/data/aotinductor/(?P<model>[^/]+)/(?P<file>[^/]+)$")
_COMMAND = re.compile(r"^// (?P<what>Compile|Link) cmd\n// (?P<cmd>.+)$", re.M)
_INPUT = re.compile(r"^\s*auto (?P<name>arg\d+_\d+) = std::move\(inputs\[\d+\]\);", re.M)
_ARG = re.compile(r"^(buf|arg)")


class Unusable(Exception):
    """Why a package cannot be re-instrumented: one line, for the report; `device`, where the package said."""

    def __init__(self, why: str, device: Optional[str] = None) -> None:
        super().__init__(why)
        self.device = device


@dataclass(frozen=True)
class Package:
    """One model's files inside a .pt2 (zip member names)."""
    model: str
    wrapper: str
    kernel: Optional[str]
    so: str
    device: str


def device_of(path: str, model: str = "model") -> Optional[str]:
    """The device a package's model was compiled for (its metadata's AOTI_DEVICE_KEY); None: unreadable."""
    try:
        return read_package(path, model).device
    except Unusable as exc:
        return exc.device


def read_package(path: str, model: str = "model") -> Package:
    """The members that rebuild `model`, or Unusable saying why this file cannot be re-instrumented."""
    try:
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
            bad = z.testzip()
            files: dict[str, str] = {}
            root_model = None
            for name in names:
                m = _MODEL_DIR.match(name)
                if m and m["model"] == model:
                    root_model = m["root"]
                    files[m["file"]] = name
            meta = next((files[f] for f in files if f.endswith(".wrapper_metadata.json")), None)
            device = json.loads(z.read(meta)).get("AOTI_DEVICE_KEY", "?") if meta else "?"
    except FileNotFoundError:
        raise Unusable(f"{path} does not exist")
    except IsADirectoryError:
        raise Unusable(f"{path} is a directory, not a .pt2 package")
    except (zipfile.BadZipFile, EOFError) as exc:
        raise Unusable(f"{path} is not a .pt2 package (not a readable zip: {exc})")
    except (OSError, ValueError, KeyError) as exc:
        raise Unusable(f"{path} cannot be read as a .pt2 package: {type(exc).__name__}: {exc}")
    if bad is not None:
        raise Unusable(f"{path} is a damaged zip (bad CRC in {bad})")
    if root_model is None:
        found = sorted({m["model"] for n in names if (m := _MODEL_DIR.match(n))})
        raise Unusable(f"{path} holds no AOTInductor model named {model!r}"
                       + (f" (it holds {', '.join(found)})" if found else " (not an AOTInductor package)"))
    pick = lambda suffix: next((files[f] for f in sorted(files) if f.endswith(suffix)), None)  # noqa: E731
    wrapper, kernel, so = pick(".wrapper.cpp"), pick(".kernel.cpp"), pick(".so")
    if device not in DEVICES:
        raise Unusable(f"{path} is a package for device {device!r}: only CPU and CUDA packages can be "
                       "re-instrumented", device)
    if wrapper is None or so is None:
        raise Unusable(f"{path} holds no generated wrapper source or no .so for {model!r} (built with "
                       "package_cpp_only, or stripped): nothing to rebuild from", device)
    return Package(model, wrapper, kernel, so, device)


# -- the printer's statements ---------------------------------------------------------------------------------

def _printed_name(fn: str) -> str:
    return fn[len("call_"):] if fn.startswith("call_") else fn


def _tensor_args(raw_args: str) -> list[str]:
    """The args Inductor's printer shows for a CPU or extern launch: those named buf*/arg* (never constants,
    never sizes), as DebugPrinterManager.set_printer_args picks them; a cast `(const float*)(buf0.data_ptr())`
    is the variable it wraps."""
    out = []
    for token in split_args(raw_args):
        m = re.fullmatch(r"\([^()]*\*\)\((?P<v>\w+)\.data_ptr\(\)\)", token)
        name = m["v"] if m else token
        if re.fullmatch(r"\w+", name) and _ARG.match(name):
            out.append(name)
    return out


def _statements(level: int, when: str, kernel: str, args: list[str], wanted: frozenset[str]) -> list[str]:
    if level == TRACE_LEVEL:
        return [f'printf("[ {when}: {kernel} ]\\n");']
    if kernel.lower() not in wanted:
        return []
    return [f'aoti_torch_print_tensor_handle({a}, "{when} - {kernel} - {a}");' for a in args]


def instrument(text: str, level: int, kernels: tuple[str, ...] = ()) -> str:
    """The wrapper source with the printer statements of `level` (3: launch markers; 2: tensor statistics of
    `kernels` and the model inputs; 0, the printer off: none) inserted around each launch of run_impl, as
    Inductor generates them."""
    if level == PLAIN:
        return text
    if level not in (TRACE_LEVEL, INSPECT_LEVEL):
        raise ValueError(f"printer level {level}")
    start = text.find("void AOTInductorModel::run_impl(")
    end = text.find("} // AOTInductorModel::run_impl", start)
    if start < 0 or end < 0:
        raise Unusable("the wrapper source has no AOTInductorModel::run_impl to instrument")
    wanted = frozenset(k.strip().lower() for k in kernels if k.strip())
    lines = text[start:end].split("\n")
    out: list[str] = []
    last_input = max((i for i, line in enumerate(lines) if _INPUT.match(line)), default=None)
    for i, line in enumerate(lines):
        call = _CALL.match(line)
        if call is None:
            out.append(line)
        else:
            indent = line[: len(line) - len(line.lstrip())]
            kernel, args = _printed_name(call["fn"]), _tensor_args(call["args"])
            out += [indent + s for s in _statements(level, "before_launch", kernel, args, wanted)]
            out.append(line)
            out += [indent + s for s in _statements(level, "after_launch", kernel, args, wanted)]
        if level == INSPECT_LEVEL and i == last_input:
            indent = line[: len(line) - len(line.lstrip())]
            names = [m["name"] for m in map(_INPUT.match, lines) if m]
            out += [f'{indent}aoti_torch_print_tensor_handle({n}, "aoti_model_inputs - {n}");' for n in names]
    return text[:start] + "\n".join(out) + text[end:]


# -- the recorded commands --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Commands:
    compile: tuple[str, ...]
    link: tuple[str, ...]


def with_compiler(commands: Commands, compiler: Optional[str]) -> Commands:
    """The commands run by another compiler (its argv[0] only: the flags stay the recorded ones)."""
    if compiler is None:
        return commands
    return Commands((compiler, *commands.compile[1:]), (compiler, *commands.link[1:]))


def recorded_commands(source: str, what: str) -> Commands:
    found = {m["what"]: tuple(shlex.split(m["cmd"])) for m in _COMMAND.finditer(source)}
    if "Compile" not in found or "Link" not in found:
        raise Unusable(f"the package's {what} records no compile and link command (built by another torch "
                       "version?): nothing says how to rebuild it")
    return Commands(found["Compile"], found["Link"])


def _rewrite(recorded: tuple[str, ...], output: str, file: Callable[[str], list[str]],
             option: Callable[[str, str], Optional[list[str]]] = lambda flag, value: None) -> list[str]:
    """The recorded command with `-o` pointing at `output`, each file argument through `file`, and each
    option with a value (`-include H`) through `option` (None: kept)."""
    out: list[str] = []
    args = iter(recorded)
    for arg in args:
        if arg in ("-o", "-include"):
            value = next(args, "")
            replaced = ["-o", output] if arg == "-o" else option(arg, value)
            out += [arg, value] if replaced is None else replaced
        else:
            out += [arg] if arg.startswith("-") else file(arg)
    return out


def compile_command(recorded: tuple[str, ...], source: str, output: str) -> list[str]:
    """The recorded compile with our source and object; a precompiled header that is gone is left out (the
    source includes the same headers itself)."""
    return _rewrite(recorded, output, lambda arg: [source] if arg.endswith((".cpp", ".cc")) else [arg],
                    lambda flag, header: None if os.path.exists(header) else [])


def link_command(recorded: tuple[str, ...], objects: dict[str, str], output: str) -> list[str]:
    """The recorded link with our objects: `objects` maps a recorded object's suffix (`.wrapper.o`,
    `.kernel.o`, `.weights.o`) to ours."""
    def ours(arg: str) -> list[str]:
        if not arg.endswith(".o"):
            return [arg]
        mine = next((o for suffix, o in objects.items() if arg.endswith(suffix)), None)
        if mine is None:
            raise Unusable(f"the recorded link takes {os.path.basename(arg)}, which the package does not hold")
        return [mine]
    return _rewrite(recorded, output, ours)


def missing_paths(command: list[str]) -> list[str]:
    """Include and library folders the command names that this machine lacks (built elsewhere)."""
    found = []
    for i, arg in enumerate(command):
        path = arg[2:] if arg.startswith(("-I", "-L")) and len(arg) > 2 else None
        if arg in ("-I", "-L") and i + 1 < len(command):
            path = command[i + 1]
        if path and not os.path.isdir(path):
            found.append(path)
    return found


# -- the weights ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Weights:
    blob: bytes  # _binary_constants_bin_start .. _end
    tail: bytes  # mmapped weights, which Inductor appends after the ELF image (its padding left out)


def weights(so: bytes) -> Weights:
    """The constants blob linked into an AOTI .so, read through the ELF symbol tables."""
    try:
        return _weights(so)
    except (struct.error, IndexError, ValueError) as exc:  # offsets past the end: a truncated or damaged file
        raise Unusable(f"the package's .so is damaged ({type(exc).__name__}: {exc}): its weights cannot be read")


def _weights(so: bytes) -> Weights:
    if so[:4] != b"\x7fELF" or so[4] != 2 or so[5] != 1:
        raise Unusable("the package's .so is not a 64-bit little-endian ELF library (built for another platform)")
    shoff, = struct.unpack_from("<Q", so, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", so, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", so, shoff + i * shentsize) for i in range(shnum)]
    symbols: dict[bytes, int] = {}
    for _name, kind, _f, _addr, offset, size, link, _info, _align, entsize in sections:
        if kind not in (2, 11) or not entsize:  # SHT_SYMTAB, SHT_DYNSYM
            continue
        strtab = sections[link][4]
        for k in range(size // entsize):
            st_name, _i, _o, _s, value, _sz = struct.unpack_from("<IBBHQQ", so, offset + k * entsize)
            name = so[strtab + st_name: so.index(b"\0", strtab + st_name)]
            if name in (b"_binary_constants_bin_start", b"_binary_constants_bin_end"):
                symbols[name] = value
    if len(symbols) < 2:
        raise Unusable("the package's .so has no _binary_constants_bin symbols: its weights cannot be carried over")
    start, stop = symbols[b"_binary_constants_bin_start"], symbols[b"_binary_constants_bin_end"]

    def file_offset(addr: int) -> int:
        for _n, kind, _f, base, offset, size, *_ in sections:
            if kind != 8 and base <= addr < base + size:  # not SHT_NOBITS
                return offset + addr - base
        raise Unusable("the package's .so places its weights in no section of the file")
    begin = file_offset(start)
    image_end = shoff + shnum * shentsize
    tail = so[image_end:]
    return Weights(so[begin: begin + (stop - start)], tail[16384 - image_end % 16384:] if tail else b"")


def weights_asm(blob_path: str) -> str:
    """The object Inductor links the weights from (codecache._compile_consts), as assembler: read-only, in a
    large-data section, 64-byte aligned, between the two symbols the runtime reads."""
    return (f'\t.section\t.lrodata, "a"\n\t.balign 64\n\t.globl\t_binary_constants_bin_start\n'
            f'_binary_constants_bin_start:\n\t.incbin "{blob_path}"\n'
            f'\t.globl\t_binary_constants_bin_end\n_binary_constants_bin_end:\n')


def append_tail(so_path: str, tail: bytes) -> None:
    """Mmapped weights go after the image, padded to 16 KiB as package.compile_so pads them."""
    if not tail:
        return
    with open(so_path, "ab") as f:
        size = f.tell()
        f.write(b" " * (16384 - size % 16384))
        f.write(tail)


def repackage(original: str, out_path: str, replaced: dict[str, bytes]) -> None:
    """A copy of the package with some members' bytes replaced; the original is only read."""
    tmp = out_path + ".tmp"
    with zipfile.ZipFile(original) as src, zipfile.ZipFile(tmp, "w") as dst:
        for info in src.infolist():
            data = replaced.get(info.filename)
            dst.writestr(info, src.read(info) if data is None else data)
    os.replace(tmp, out_path)
