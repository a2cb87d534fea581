"""Def-use extraction from AOTI's generated C++ wrapper: which launch reads and writes which buffer."""
from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass, field
from typing import Optional

from ..files.own import read_child_json, read_run_file

# A generated source or Inductor's JSON beside it, read from a cache the repro's process can write into.
MAX_SOURCE_BYTES = 64 << 20

# The names Inductor gives the kernels it generates (`cpp_fused_*`, `triton_poi_*`, `kernel_*`). A function by
# another name is the user's: a custom op, a user Triton kernel.
GENERATED_PREFIXES = ("cpp_", "triton_", "kernel_")


def generated(function: str) -> bool:
    """Whether a function or launch name is a kernel Inductor generated."""
    return function.startswith(GENERATED_PREFIXES)


# What counts as a launch: generated kernels, Triton call wrappers, extern ops, custom ops.
_CALL = re.compile(
    r"^\s*(?:AOTI_TORCH_ERROR_CODE_CHECK\()?\s*"
    r"(?P<fn>call_\w+|cpp_fused_\w+|cpp_\w+|triton_\w+|aoti_torch_(?:cpu|cuda|xpu|mps)_\w+|"
    r"aoti_torch_proxy_executor_call_function|aoti_torch_copy_)\((?P<args>.*)\)\)?;")
_TOKEN = re.compile(r"\b(buf\d+|arg\d+_\d+)\b")
# A fallback op's new output: `aoti_torch_cpu_cumsum(arg3_1, 1L, &var_0, &buf1_handle)` writes buf1.
_OUT_HANDLE = re.compile(r"&(buf\d+)_handle\b")
_WORD = re.compile(r"\b[A-Za-z_]\w*\b")
_ALIAS = re.compile(r"^\s*(?:auto|RAIIAtenTensorHandle|AtenTensorHandle)\s+(?P<new>buf\d+)\s*(?:=|\()\s*"
                    r"(?:std::move\(|wrap_with_raii_handle_if_needed\(|reinterpret_tensor_wrapper\()?(?P<old>buf\d+)\b")
_ARRAY = re.compile(r"\b(?P<name>\w+)\[\]\s*=\s*\{(?P<items>[^}]*)\}")
_CONST_REF = re.compile(r"auto&\s+(?P<name>\w+)\s*=\s*constants_->at\(\d+\)")
_INPUT_NAME = re.compile(r'inputs_info_\[(?P<i>\d+)\]\.name = "(?P<name>[^"]+)"')
_CONSTANT_INFO = re.compile(r'constants_info_\[(?P<i>\d+)\]\.(?P<field>name|shape) = (?P<value>"[^"]*"|\{[^}]*\})')
_OUTPUT = re.compile(r"output_handles\[(?P<i>\d+)\]\s*=\s*(?P<name>\w+)\.release\(\)")
_ASSERT = re.compile(r"assert_size_stride\((?P<name>\w+), \{(?P<size>[^}]*)\}, \{(?P<stride>[^}]*)\}")
_SOURCE_NODES = re.compile(r"//\s*Topologically Sorted Source Nodes: (?P<nodes>.*)")
# With INDUCTOR_PROVENANCE, the key of the launch that follows in kernel_information.json (aoti/provenance.py).
_HANDLE = re.compile(r"//\s*\[Provenance debug handles\] (?P<handle>\S+)")
_CPP_PARAM = re.compile(r"\((?P<const>const\s+)?[\w:<> ]+\*\)\((?P<name>\w+)\.data_ptr\(\)\)")
_TRITON_DEF = re.compile(r"def (?P<name>\w+)\((?P<params>[^)]*)\)")
# A CPU kernel's prototype, declared in the wrapper: its parameter names place a size argument (`ks0`).
_CPP_DECL = re.compile(r'extern "C"\s+void\s+(?P<name>\w+)\((?P<params>[^)]*)\);')
# A dynamic dimension read from an input at run time (`int64_t s70 = arg0_1_size[0];`).
_SIZE_SYMBOL = re.compile(r"int64_t (?P<sym>\w+) = (?P<var>\w+)_size\[(?P<dim>\d+)\];")
# The input check's range of a dynamic dimension (`if (arg0_1_size[0] < 2) {`).
_DIM_LIMIT = re.compile(r"if \((?P<var>\w+)_size\[(?P<dim>\d+)\] (?P<op>[<>]) (?P<n>-?\d+)\)")


def spelling(name: str) -> str:
    """A kernel's name as every reader agrees on it: cuda-gdb writes `triton_per_fused.to_copy_0` for the launch
    `triton_per_fused__to_copy_0` (a `.` for a run of underscores), so runs of `_` and `.` are one separator."""
    return re.sub(r"[._]+", "_", name.lower())


@dataclass(frozen=True)
class Launch:
    index: int
    name: str  # as the printer names it (call_ prefix dropped)
    line: int
    args: tuple[str, ...]  # buffer/input variables as written at the call
    reads: tuple[str, ...]  # storages read (aliases resolved)
    writes: tuple[str, ...]  # storages written
    source_nodes: str = ""
    call_args: tuple[str, ...] = ()  # every argument as written at the call, sizes included (`s70`)
    handle: str = ""  # its provenance handle (`cpp_fused_sqrt_sub_0:1`), where the compile had provenance on


@dataclass
class WrapperGraph:
    path: str
    launches: list[Launch]
    inputs: list[str]  # input index -> variable name
    constants: list[str]
    outputs: list[str]
    aliases: dict[str, str] = field(default_factory=dict)
    expected: dict[str, tuple[str, str]] = field(default_factory=dict)  # input -> (sizes, strides)
    cuda: bool = False  # the generated code targets a CUDA device
    params: dict[str, list[str]] = field(default_factory=dict)  # kernel -> parameter names (CPU and Triton)
    sizes: dict[str, tuple[str, int]] = field(default_factory=dict)  # size symbol -> (input, dim)
    # (input, dim) -> the exported range of a dynamic dimension, as the input check enforces it (None: open)
    ranges: dict[tuple[str, int], tuple[Optional[int], Optional[int]]] = field(default_factory=dict)
    constant_shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)  # constant -> its shape

    def storage(self, var: str) -> str:
        while var in self.aliases:
            var = self.aliases[var]
        return var

    def by_name(self, name: str) -> list[Launch]:
        return [launch for launch in self.launches if launch.name.lower() == name.lower()]

    def unwrapped(self, after: int = -1) -> tuple[Launch, ...]:
        """The launches (after index `after`) no printer wraps: user Triton kernels and custom ops. Their stores are
        seen by no printer, and one that strays lands in whatever buffer lies there."""
        return tuple(l for l in self.launches[after + 1:]
                     if not generated(l.name) and not l.name.startswith("aoti_torch_"))

    def producer(self, var: str, before: int) -> Optional[Launch]:
        """The last launch before index `before` that wrote var's storage (None: a model input or constant)."""
        s = self.storage(var)
        writers = [launch for launch in self.launches if launch.index < before and s in launch.writes]
        return writers[-1] if writers else None

    def ancestors(self, launch: Launch) -> list[Launch]:
        """Every launch whose output can reach `launch`, in launch order."""
        found: dict[int, Launch] = {}
        stack = [launch]
        while stack:
            cur = stack.pop()
            for var in cur.reads:
                p = self.producer(var, cur.index)
                if p is not None and p.index not in found:
                    found[p.index] = p
                    stack.append(p)
        return [found[i] for i in sorted(found)]

    def output_producers(self) -> list[Launch]:
        end = len(self.launches)
        out = [self.producer(v, end) for v in self.outputs]
        return sorted({p.index: p for p in out if p is not None}.values(), key=lambda launch: launch.index)

    def next_after(self, name: str) -> Optional[str]:
        """The wrapper statement that follows the last launch of `name`: where an uninstrumented fault lies."""
        hits = self.by_name(name)
        if not hits:
            return None
        following = [launch for launch in self.launches if launch.index > hits[-1].index]
        return following[0].name if following else "the end of the graph (outputs are handed back)"

    def size_argument(self, kernel: str, param: str) -> Optional[str]:
        """What the wrapper passes a kernel's size parameter (`ks0`) at its launch: `s70`, `2L*s70`."""
        params, hits = self.params.get(kernel, []), self.by_name(kernel)
        if param not in params or not hits:
            return None
        i = params.index(param)
        return hits[0].call_args[i] if i < len(hits[0].call_args) else None

    def is_model_input(self, var: str) -> bool:
        return self.storage(var) in self.inputs

    def is_constant(self, var: str) -> bool:
        return self.storage(var) in self.constants


def _proxy_name(raw_args: str, extern_nodes: list[str]) -> str:
    """A custom op run through the proxy executor: its target, e.g. `bisectlab::shifted_gather`."""
    m = re.match(r"\s*proxy_executor,\s*(\d+)", raw_args)
    idx = int(m.group(1)) if m else -1
    return extern_nodes[idx] if 0 <= idx < len(extern_nodes) else f"custom_op[{idx}]"


def extern_nodes_for(wrapper_path: str) -> list[str]:
    """Custom-op targets from the JSON Inductor writes beside the wrapper (`<hash>.wrapper.json`)."""
    path = wrapper_path[: -len(".cpp")] + ".json" if wrapper_path.endswith(".cpp") else ""
    try:
        nodes = read_child_json(path, MAX_SOURCE_BYTES).get("nodes", [])
        return [str(n.get("node", {}).get("target", "?")) for n in nodes]
    except (OSError, ValueError, AttributeError, TypeError):  # Inductor's file, in a cache the repro can write
        return []


def _run_impl(text: str) -> tuple[str, int]:
    start = text.find("::run_impl(")
    if start < 0:
        return text, 0
    end = text.find("// AOTInductorModel::run_impl", start)
    return text[start: end if end > 0 else len(text)], text.count("\n", 0, start)


def _triton_params(text: str) -> dict[str, list[str]]:
    """Parameter names of Triton kernels embedded in the wrapper (in/out/in_out pointers tell roles)."""
    return {m["name"]: [p.strip() for p in m["params"].split(",")] for m in _TRITON_DEF.finditer(text)}


def _triton_roles(text: str) -> dict[str, list[str]]:
    """Each embedded Triton kernel's parameters by role. Inductor's names say it (in_ptr0, out_ptr0, in_out_ptr0); a
    user kernel's names are the user's (`dst`, `out`), so its body says it: a pointer it `tl.store`s to is written,
    one it `tl.load`s from is read. A user kernel launched as `k_0` is `k` here."""
    roles = {}
    for m in _TRITON_DEF.finditer(text):
        end = text.find("'''", m.end())
        body = text[m.end(): end if end > 0 else len(text)]
        named = []
        for p in (p.strip().split(":")[0].strip() for p in m["params"].split(",")):
            stored = re.search(rf"tl\.(?:store|atomic_\w+)\(\s*{re.escape(p)}\b", body) if p else None
            loaded = re.search(rf"tl\.(?:load|atomic_\w+)\(\s*{re.escape(p)}\b", body) if p else None
            named.append(p if p.startswith(("in_ptr", "out_ptr", "in_out_ptr")) else
                         "in_out_ptr" if stored and loaded else "out_ptr" if stored else "in_ptr" if loaded else p)
        roles[m["name"]] = named
    return roles


def _cpp_params(text: str) -> dict[str, list[str]]:
    return {m["name"]: [p.split()[-1].lstrip("*&") for p in m["params"].split(",") if p.strip()]
            for m in _CPP_DECL.finditer(text)}


def split_args(raw: str) -> list[str]:
    """A call's arguments, split at top-level commas only (`std::max(s0, 1L)` is one argument)."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(raw):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(raw[start:i].strip())
            start = i + 1
    tail = raw[start:].strip()
    return out + [tail] if tail else out


def _ranges(text: str) -> dict[tuple[str, int], tuple[Optional[int], Optional[int]]]:
    out: dict[tuple[str, int], tuple[Optional[int], Optional[int]]] = {}
    for m in _DIM_LIMIT.finditer(text):
        key = (m["var"], int(m["dim"]))
        lo, hi = out.get(key, (None, None))
        out[key] = (int(m["n"]), hi) if m["op"] == "<" else (lo, int(m["n"]))
    return out


def _constant_shapes(text: str) -> dict[str, tuple[int, ...]]:
    """Each constant's shape as the model's constructor declares it (`constants_info_[0].shape = {60, 8};`)."""
    info: dict[int, dict[str, str]] = {}
    for m in _CONSTANT_INFO.finditer(text):
        info.setdefault(int(m["i"]), {})[m["field"]] = m["value"]
    return {i["name"].strip('"'): tuple(int(d) for d in re.findall(r"-?\d+", i["shape"]))
            for i in info.values() if "name" in i and "shape" in i}


def parse_wrapper(text: str, path: str = "", extern_nodes: Optional[list[str]] = None) -> WrapperGraph:
    """extern_nodes: custom-op targets by proxy-executor index (the wrapper's .json), to name those calls."""
    body, offset = _run_impl(text)
    triton = _triton_params(text)
    roles = _triton_roles(text)
    inputs = [m["name"] for m in sorted(_INPUT_NAME.finditer(text), key=lambda m: int(m["i"]))]
    constants = [m["name"] for m in _CONST_REF.finditer(body)]
    aliases: dict[str, str] = {}
    arrays: dict[str, list[str]] = {}
    written: set[str] = set(inputs) | set(constants)
    launches: list[Launch] = []
    nodes = handle = ""
    graph = WrapperGraph(path, launches, inputs, constants, [], aliases)
    for lineno, line in enumerate(body.splitlines(), start=offset + 1):
        if (n := _SOURCE_NODES.search(line)):
            nodes = n["nodes"]
            continue
        if (h := _HANDLE.search(line)):
            handle = h["handle"]
            continue
        if (a := _ALIAS.match(line)) and a["new"] != a["old"]:
            aliases[a["new"]] = a["old"]
        for arr in _ARRAY.finditer(line):
            arrays[arr["name"]] = _TOKEN.findall(arr["items"])
        call = _CALL.match(line)
        if not call or "print_tensor_handle" in line:
            continue
        fn = call["fn"]
        name = fn[len("call_"):] if fn.startswith("call_") else fn
        if fn == "aoti_torch_proxy_executor_call_function":
            name = _proxy_name(call["args"], extern_nodes or [])
        raw_args = call["args"]
        call_args = split_args(raw_args)
        args: list[str] = []
        for token in call_args:
            args.extend(arrays.get(token)
                        or _TOKEN.findall(token) + [w for w in _WORD.findall(token) if w in constants])
        made = _OUT_HANDLE.findall(raw_args)
        args += made
        reads, writes = _roles(name, raw_args, args, graph, written,
                               roles.get(name) or (None if generated(name) else roles.get(re.sub(r"_\d+$", "", name))))
        reads = [r for r in reads if r not in made]
        writes += [m for m in made if m not in writes]
        written.update(writes)
        launches.append(Launch(len(launches), name, lineno, tuple(dict.fromkeys(args)), tuple(reads),
                               tuple(writes), nodes, tuple(call_args), handle))
        nodes = handle = ""
    graph.cuda = "device_type_cuda" in text or "call_triton_" in text
    graph.params = {**triton, **_cpp_params(text)}
    graph.sizes = {m["sym"]: (m["var"], int(m["dim"])) for m in _SIZE_SYMBOL.finditer(body)}
    graph.ranges = _ranges(text)
    graph.constant_shapes = _constant_shapes(text)
    graph.outputs = [m["name"] for m in sorted(_OUTPUT.finditer(body), key=lambda m: int(m["i"]))]
    graph.expected = {m["name"]: (m["size"].replace("L", "").strip(", "), m["stride"].replace("L", "").strip(", "))
                      for m in _ASSERT.finditer(body)}
    return graph


def _roles(name: str, raw_args: str, args: list[str], graph: WrapperGraph, written: set[str],
           triton_params: Optional[list[str]]) -> tuple[list[str], list[str]]:
    """Split a launch's arguments into storages read and written.

    Sources of truth, best first: a CPU kernel's pointer casts (`const T*` is read-only), a Triton
    kernel's parameter names (in_ptr/out_ptr/in_out_ptr), an extern `*_out` op's first argument; and
    always, the first touch of a fresh buffer is its producing write.
    """
    known_out: set[str] = set()
    known_in: set[str] = set()
    casts = list(_CPP_PARAM.finditer(raw_args))
    if casts:
        for c in casts:
            (known_in if c["const"] else known_out).add(c["name"])
    elif triton_params:
        for param, arg in zip(triton_params, [a.strip() for a in raw_args.split(",")]):
            for token in _TOKEN.findall(arg):
                if param.startswith("out_ptr"):
                    known_out.add(token)
                elif param.startswith("in_out_ptr"):
                    known_out.add(token)
                    known_in.add(token)
                elif param.startswith("in_ptr"):
                    known_in.add(token)
    elif name.endswith("_out") and args:
        known_out.add(args[0])
    reads, writes = [], []
    for var in args:
        s = graph.storage(var)
        fresh = s not in written
        pure_out = var in known_out and var not in known_in and (fresh or not casts)
        if fresh or var in known_out:
            writes.append(s)
        if not fresh and not pure_out:
            reads.append(s)
    return list(dict.fromkeys(reads)), list(dict.fromkeys(writes))


def find_wrappers(*roots: str) -> list[str]:
    """Generated wrapper sources under cache dirs / run dirs, newest first."""
    found = []
    for root in roots:
        found += glob.glob(os.path.join(glob.escape(root), "**", "*.wrapper.cpp"), recursive=True)
    return sorted(set(found), key=os.path.getmtime, reverse=True)


def kernel_source(name: str, roots: list[str], max_lines: int = 80) -> Optional[tuple[str, str]]:
    """(path, excerpt) of a kernel's definition, and nothing after it: CPU kernel sources, then Triton sources,
    then the wrapper."""
    definition = re.compile(rf"(\bvoid\s+{re.escape(name)}\s*\([^;{{]*\)\s*\{{|def {re.escape(name)}\s*\()")
    for suffix in ("*.kernel.cpp", "*.py", "*.wrapper.cpp"):
        for root in roots:
            for path in sorted(glob.glob(os.path.join(glob.escape(root), "**", suffix), recursive=True)):
                try:
                    text = read_run_file(path, MAX_SOURCE_BYTES)
                except OSError:
                    continue
                m = definition.search(text)
                if m:
                    start = text.rfind("\n", 0, m.start()) + 1
                    # Include the decorators/comments right above a Triton def (they carry the source nodes).
                    above = text[:start].splitlines()[-12:] if suffix == "*.py" else []
                    body = (_python_def(text[start:]) if suffix == "*.py" else _cpp_function(text, start, m.end() - 1))
                    lines = body.splitlines()
                    if len(lines) > max_lines:
                        more = "#" if suffix == "*.py" else "//"
                        lines = lines[:max_lines] + [f"{more} ... {len(lines) - max_lines} more lines in "
                                                     f"{os.path.basename(path)}"]
                    return path, "\n".join([l for l in above if l.startswith(("@", "#"))] + lines)
    return None


def _cpp_function(text: str, start: int, brace: int) -> str:
    """From `start` to the brace that closes the one at `brace` (generated code: no braces in strings)."""
    depth = 0
    for i in range(brace, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[start: i + 1]
    return text[start:]


def _python_def(text: str) -> str:
    """A top-level def up to the next top-level statement (the next kernel's decorator, say)."""
    lines = text.splitlines()
    end = next((i for i, l in enumerate(lines[1:], 1) if l and not l[0].isspace() and not l.startswith(")")),
               len(lines))
    return "\n".join(lines[:end]).rstrip()


def triton_kernel_name(source: str) -> Optional[str]:
    """The kernel a Triton source file defines (a device assert names only the file)."""
    m = _TRITON_DEF.search(source)
    return m["name"] if m else None
