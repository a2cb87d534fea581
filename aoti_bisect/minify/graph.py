"""The exported program's graph as plain data (from graph.json, extract_child.py's output), which candidate
subgraphs can be built from it, and the standalone Python source of one candidate. Pure: no torch, no I/O.

A candidate keeps some call_function nodes. Whatever a kept node reads and the candidate does not compute (a
model input, a parameter, a removed node) becomes an input of the candidate's module, fed the value the
original program computed there on the failing call (values.pt); a removed node that computed a Python number
is written in as that number. A candidate cannot be built when a kept node reads a removed node without a saved
value (it ran at or after the eager failure, or returned a tuple).
"""
from __future__ import annotations

import enum
import keyword
import textwrap
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Optional

# Namespaces whose ops the minified file can call with only torch imported; any other is a custom op.
BUILTIN_NAMESPACES = ("aten", "prims", "operator")


class Check(str, enum.Enum):
    """What the generated program does after running the package, so that it fails as the repro did."""

    RUN = "run"  # a crash, a bounds check, a device assert: running it is the check
    FINITE = "finite"  # Inf: raise when an output holds a non-finite value
    NAN = "nan"  # NaN: raise when an output holds a NaN (an Inf from zeros fed to a log is not the failure)
    EAGER = "eager"  # wrong but finite: raise when an output differs from the same module run eagerly


class ValueKind(enum.StrEnum):
    """What a node or an input computed on the failing call: graph.json's `value.kind` (extract_child.py)."""
    TENSOR = "tensor"  # saved in values.pt, fed to a candidate that reads it
    LITERAL = "literal"  # a Python number, written into the candidate
    OTHER = "other"  # anything else: no candidate can read it
    UNKNOWN = "unknown"  # not computed: the node ran at or after the eager failure

    @classmethod
    def of(cls, value: dict) -> ValueKind:
        """A value description's kind; a word this aoti-bisect does not know is UNKNOWN."""
        kind = value.get("kind")
        return cls(kind) if kind in cls._value2member_map_ else cls.UNKNOWN


@dataclass(frozen=True)
class Node:
    name: str
    target: str  # "aten::index.Tensor", "operator.getitem", "mylib::op.default"
    args: Any
    kwargs: dict
    value: dict  # {"kind": a ValueKind, ...}: what it computed on the failing call
    fake: Optional[dict] = None  # a custom op without a fake of its own: {"like": i} or {"shape", "dtype"}

    @property
    def namespace(self) -> str:
        return self.target.split("::", 1)[0] if "::" in self.target else self.target.split(".", 1)[0]

    @property
    def op(self) -> str:
        """The op family: aten::index.Tensor -> index, aten::sum.dim_IntList -> sum."""
        base = self.target.split("::", 1)[-1].split(".", 1)[0]
        return base.rstrip("_") if self.namespace != "operator" else self.target.split(".", 1)[1]

    @property
    def custom(self) -> bool:
        return self.namespace not in BUILTIN_NAMESPACES


@dataclass(frozen=True)
class Graph:
    inputs: dict  # placeholder name -> value description
    nodes: tuple[Node, ...]
    output: Any
    eager_failure: Optional[str] = None
    libraries: tuple[str, ...] = ()  # files of the shared libraries that register its custom ops
    # the source of each custom op Python defines (child/hook/pyops.py): {"ops": {qualname: [key]}, "pieces": {}}
    python_ops: dict = field(default_factory=dict, compare=False, repr=False)
    _by_name: dict = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_json(cls, doc: dict) -> Graph:
        nodes = tuple(Node(n["name"], n["target"], n["args"], n.get("kwargs") or {}, n["value"], n.get("fake"))
                      for n in doc["nodes"])
        graph = cls({p["name"]: p["value"] for p in doc["placeholders"]}, nodes, doc["output"],
                    doc.get("eager_failure"), tuple(doc.get("libraries") or ()), doc.get("python_ops") or {})
        graph._by_name.update({n.name: n for n in nodes})
        return graph

    def node(self, name: str) -> Node:
        return self._by_name[name]

    def order(self, names: Iterable[str]) -> tuple[str, ...]:
        """names in graph order, each once."""
        wanted = set(names)
        return tuple(n.name for n in self.nodes if n.name in wanted)

    def value(self, name: str) -> dict:
        return self.inputs[name] if name in self.inputs else self.node(name).value

    def kind(self, name: str) -> ValueKind:
        return ValueKind.of(self.value(name))

    def ancestors(self, names: Iterable[str]) -> tuple[str, ...]:
        """names and every node they read, directly or not, in graph order."""
        seen, todo = set(), list(names)
        while todo:
            name = todo.pop()
            if name in seen or name in self.inputs:
                continue
            seen.add(name)
            todo += list(refs(self.node(name).args)) + list(refs(self.node(name).kwargs))
        return self.order(seen)

    def feeds(self, kept: Iterable[str]) -> tuple[str, ...]:
        """What the kept nodes read but do not compute, in first-use order: the candidate's inputs or literals."""
        kept, out = set(kept), []
        for name in self.order(kept):
            node = self.node(name)
            for ref in (*refs(node.args), *refs(node.kwargs)):
                if ref not in kept and ref not in out:
                    out.append(ref)
        return tuple(out)

    def problem(self, kept: Collection[str]) -> Optional[str]:
        """Why these kept nodes make no program (None: they do)."""
        if not kept:
            return "no node kept"
        for ref in self.feeds(kept):
            kind = self.kind(ref)
            if kind not in (ValueKind.TENSOR, ValueKind.LITERAL):
                return f"reads {ref}, which has no saved value ({kind})"
        return None

    def within(self, kept: Iterable[str], name: str) -> tuple[str, ...]:
        """name and the kept nodes it reads, directly or not, through kept nodes only."""
        kept, seen, todo = set(kept), set(), [name]
        while todo:
            current = todo.pop()
            if current in seen or current not in kept:
                continue
            seen.add(current)
            todo += [*refs(self.node(current).args), *refs(self.node(current).kwargs)]
        return self.order(seen)

    def sinks(self, kept: Collection[str]) -> tuple[str, ...]:
        """Kept nodes no kept node reads: the candidate's outputs."""
        read = {r for name in kept for r in (*refs(self.node(name).args), *refs(self.node(name).kwargs))}
        return tuple(n for n in self.order(kept) if n not in read)


def refs(arg: object) -> Iterator[str]:
    if isinstance(arg, dict) and "ref" in arg:
        yield arg["ref"]
    elif isinstance(arg, dict) and "py" not in arg:
        for v in arg.values():
            yield from refs(v)
    elif isinstance(arg, list):
        for a in arg:
            yield from refs(a)


@dataclass(frozen=True)
class Candidate:
    """One program to try: the kept nodes (graph order) and the inputs written as zeros instead of saved values."""

    kept: tuple[str, ...]
    zeros: tuple[str, ...] = ()
    # (input, shape) where an input is cut to the leading part of each dimension (a zeros input: made smaller)
    sizes: tuple[tuple[str, tuple[int, ...]], ...] = ()

    def shape(self, graph: Graph, name: str) -> list[int]:
        return list(dict(self.sizes).get(name, graph.value(name)["shape"]))


@dataclass(frozen=True)
class Source:
    text: str
    inputs: tuple[str, ...]  # the saved tensors it loads from inputs.pt, by name
    nodes: int
    libraries: tuple[str, ...] = ()  # the library files it loads from beside itself


def _ident(name: str) -> str:
    return f"{name}_" if keyword.iskeyword(name) else name


def _expr(arg: object, literals: dict) -> str:
    if isinstance(arg, dict) and "ref" in arg:
        return literals.get(arg["ref"], _ident(arg["ref"]))
    if isinstance(arg, dict) and "py" in arg:
        return arg["py"]
    if isinstance(arg, list):
        inner = ", ".join(_expr(a, literals) for a in arg)
        return f"[{inner}]"
    return repr(arg)


def _call(node: Node, literals: dict) -> str:
    args = [_expr(a, literals) for a in node.args]
    if node.target == "operator.getitem":
        return f"{args[0]}[{args[1]}]"
    args += [f"{k}={_expr(v, literals)}" for k, v in node.kwargs.items()]
    if node.namespace == "operator":
        return f"operator.{node.op}({', '.join(args)})"
    namespace, rest = node.target.split("::", 1)
    return f"torch.ops.{namespace}.{rest}({', '.join(args)})"


def _describe(graph: Graph, name: str) -> str:
    value = graph.value(name)
    where = "an input of the original program" if name in graph.inputs else \
        f"the output of {graph.node(name).target} there"
    return f"{value['dtype']} {value['shape']} on {value['device']}, {where}"


def _to(value: dict) -> str:
    """inputs.pt holds CPU tensors (extract_child.py): the program moves them to the device it ran on."""
    return "" if value["device"] == "cpu" else f".to({value['device']!r})"


def _zeros(value: dict, shape: list[int]) -> str:
    return f"torch.zeros({shape}, dtype=torch.{value['dtype']}, device={value['device']!r})"


CHECKS = {
    Check.RUN: "",
    Check.FINITE: """\
    if not all(torch.isfinite(o).all() for o in outs):
        raise SystemExit("aoti-bisect repro: non-finite output (NaN/Inf) from the AOTI package")
""",
    Check.NAN: """\
    if any(torch.isnan(o).any() for o in outs):
        raise SystemExit("aoti-bisect repro: non-finite output (NaN) from the AOTI package")
""",
    # The line names the output's node: minify keeps a candidate only where it reads an op of the culprit.
    Check.EAGER: """\
    expected = Repro()(*args)
    expected = expected if isinstance(expected, (list, tuple)) else [expected]
    for i, (name, got, want) in enumerate(zip(OUTPUTS, outs, expected)):
        if not torch.allclose(got, want, rtol=1e-3, atol=1e-3, equal_nan=True):
            raise AssertionError(f"aoti-bisect repro: output {i} ({name}) differs from eager by "
                                 f"{(got - want).abs().max().item()}")
""",
}


def definitions(python_ops: dict, ops: Iterable[str], have: tuple[str, ...] = ()) -> str:
    """The source that defines these custom ops (qualnames), each piece once, what it reads first ('' if none of
    them is defined in Python); pieces equal to a line in `have` (the file's own imports) are left out."""
    keys = dict.fromkeys(k for op in ops for k in (python_ops.get("ops") or {}).get(op, ()))
    return "\n\n".join(python_ops["pieces"][k] for k in keys if python_ops["pieces"][k] not in have)


PACKAGE = "repro.pt2"  # what the program builds beside itself and `--reuse` loads
HEADER = ("import os", "import sys", "import torch")  # what every program imports itself


def _qualname(target: str) -> str:
    return target.rsplit(".", 1)[0]  # mylib::gather.default -> mylib::gather


def _custom_lines(graph: Graph, kept: tuple[str, ...]) -> list[str]:
    """Defines the custom ops Python defined (their source, from the repro's process) and loads the libraries of
    the others (copied beside the file), then gives each op without a fake of its own one that makes the output
    the program recorded."""
    custom = [_qualname(graph.node(n).target) for n in kept if graph.node(n).custom]
    if not custom:
        return []
    python = [op for op in dict.fromkeys(custom) if op in (graph.python_ops.get("ops") or {})]
    lines = []
    if python:
        lines += ["# The custom ops the repro defines in Python: their code, as the repro's process held it",
                  definitions(graph.python_ops, python, HEADER), "", ""]
    if len(python) < len(set(custom)):
        lines += ["# The custom ops' shared libraries, copied from the repro's process (its code built them)"]
        lines += [f'torch.ops.load_library(os.path.join(HERE, "{lib}"))' for lib in graph.libraries]
    fakes: dict[str, dict] = {}
    for name in kept:
        node = graph.node(name)
        if node.custom and node.fake:
            fakes.setdefault(_qualname(node.target), node.fake)
    for op, rule in fakes.items():
        if "like" in rule:
            made, like = f"torch.empty_like(args[{rule['like']}])", f"like its argument {rule['like']}"
        else:
            device = "next(a.device for a in args if isinstance(a, torch.Tensor))"
            made, like = (f"torch.empty({rule['shape']}, dtype=torch.{rule['dtype']}, device={device})",
                          f"{rule['dtype']} {rule['shape']}")
        lines += ["", "", f"# No fake for {op} that this file can carry (none, or one that is not plain source):",
                  f"# this one makes the output the program recorded ({like}).",
                  f'@torch.library.register_fake("{op}")',
                  f"def _fake_{op.split('::')[-1]}(*args, **kwargs):",
                  f"    return {made}"]
    return lines + ["", ""]


def _how_often(rate: tuple[int, int]) -> list[str]:
    """The docstring's word on the failure's rate, as the run measured it (report.json's reproduction)."""
    failures, runs = rate
    reuse = "`python repro.py --reuse` runs the package an earlier run built instead of compiling again"
    if runs and failures == runs:
        text = f"The original repro failed in every one of its {runs} run(s). {reuse}."
    elif failures:
        text = (f"A failure that comes and goes: the original repro failed in {failures} of {runs} runs, so run this "
                f"one several times; {reuse}, so each run costs a load and a run.")
    else:
        text = f"{reuse}."
    return textwrap.wrap(text, 110)


def render(graph: Graph, candidate: Candidate, check: Check, headline: str, rate: tuple[int, int] = (0, 0)) -> Source:
    """The standalone program of one candidate: build, export, compile, load, run, check. `rate`: the original
    repro's (failures, runs)."""
    kept = graph.order(candidate.kept)
    literals = {r: graph.value(r)["py"] for r in graph.feeds(kept) if graph.kind(r) is ValueKind.LITERAL}
    params = [r for r in graph.feeds(kept) if r not in literals]
    saved = tuple(p for p in params if p not in candidate.zeros)
    body = [f"        {_ident(n)} = {_call(graph.node(n), literals)}" for n in kept]
    outputs = ", ".join(_ident(n) for n in graph.sinks(kept))
    custom = _custom_lines(graph, kept)
    libraries = graph.libraries if any("load_library" in line for line in custom) else ()
    needs = ("needs torch and what its custom ops' code imports" if any(l.startswith("# The custom ops the repro")
                                                                          for l in custom) else "needs only torch")
    uses_operator = any(graph.node(n).namespace == "operator" and graph.node(n).target != "operator.getitem"
                        for n in kept)
    lines = [
        f'"""Minified AOTInductor repro (aoti-bisect minify): {headline}',
        "",
        *_how_often(rate),
        "",
        f"Run: python repro.py  ({needs}; reads inputs.pt and {', '.join(libraries)} beside this file)"
        if libraries else
        f"Run: python repro.py  ({needs}; reads inputs.pt beside this file)",
        '"""',
        *(["import operator"] if uses_operator else []),
        "import os",
        "import sys",
        "",
        "import torch",
        "",
        "HERE = os.path.dirname(os.path.abspath(__file__))",
        *([f"OUTPUTS = {list(graph.sinks(kept))!r}"] if check is Check.EAGER else []),
        "",
        "",
        *custom,
        "class Repro(torch.nn.Module):",
        f"    def forward(self, {', '.join(_ident(p) for p in params)}):",
        *body,
        f"        return ({outputs},)",
        "",
        "",
        *_main(graph, candidate, params, saved, check),
        "",
        "",
        'if __name__ == "__main__":',
        "    main()",
        "",
    ]
    return Source("\n".join(lines), saved, len(kept), libraries)


def _main(graph: Graph, candidate: Candidate, params: list[str], saved: tuple[str, ...], check: Check) -> list[str]:
    """The program's main(): its inputs (saved ones from inputs.pt, the others zeros), build the package unless
    --reuse finds it, load, run, check."""
    device_sync = any(graph.value(p).get("device", "cpu").startswith("cuda") for p in params)
    arg_lines = [f'        inputs["{p}"]{_to(graph.value(p))},' if p in saved else
                 f"        {_zeros(graph.value(p), candidate.shape(graph, p))}," for p in params]
    notes = [f"    #   {_ident(p)}: {_describe(graph, p)}" + ("" if p in saved else "; zeros fail the same")
             + (f"; cut to {candidate.shape(graph, p)}" if candidate.shape(graph, p) != graph.value(p)["shape"]
                else "") for p in params]
    return [
        "def main():",
        '    inputs = torch.load(os.path.join(HERE, "inputs.pt"), weights_only=True)' if saved else "    inputs = {}",
        "    # The module's inputs: what the original program held there on the failing call",
        *notes,
        "    args = (",
        *arg_lines,
        "    )",
        f'    path = os.path.join(HERE, "{PACKAGE}")',
        '    if "--reuse" not in sys.argv[1:] or not os.path.isfile(path):',
        "        ep = torch.export.export(Repro(), args)",
        "        path = torch._inductor.aoti_compile_and_package(ep, package_path=path)",
        "    runner = torch._inductor.aoti_load_package(path)",
        "    out = runner(*args)",
        *(["    torch.cuda.synchronize()"] if device_sync else []),
        *(["    outs = out if isinstance(out, (list, tuple)) else [out]"] if CHECKS[check] else []),
        *([CHECKS[check].rstrip("\n")] if CHECKS[check] else []),
        '    print("aoti-bisect repro: ran without the failure")',
    ]
