"""The lines AOTI's own checks print, parsed: the input check, the NaN asserts, an index's bound. Pure."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

_INPUT_CHECK = re.compile(r"input_handles\[(?P<i>\d+)\]: (?P<what>[^\n]*)")
_NAN_ASSERT = re.compile(r"At least one (?P<what>NaN|INF) in (?P<var>\w+)")
# The bound runs to the message's end: a CPU raise ends the line, a Triton assert closes with a quote or backtick.
_INDEX_BOUND = re.compile(r"index out of bounds: 0 <= (?P<index>\w+) < (?P<bound>[^`\"'\n]+)")
_INT_LITERAL = re.compile(r"\b(\d+)L\b")
_DIM_CHECK = re.compile(
    r"dim value is too (?:small|large) at (?P<dim>\d+), expected (?:it )?to be (?P<op>>=|<=) (?P<n>-?\d+), "
    r"but got: (?P<got>-?\d+)|unmatched dim value at (?P<sdim>\d+), expected: (?P<sn>-?\d+), but got: (?P<sgot>-?\d+)")


@dataclass(frozen=True)
class InputRejected:
    """AOTI_RUNTIME_CHECK_INPUTS refused model input `index`."""

    index: int
    what: str


@dataclass(frozen=True)
class NanAssert:
    """TORCHINDUCTOR_NAN_ASSERTS found `what` (NaN or INF) in buffer `var`."""

    what: str
    var: str


def sanity_hit(text: str) -> Optional[InputRejected | NanAssert]:
    """The first check the sanity flags made fire in a run's log: the input check, else a NaN assert."""
    m = _INPUT_CHECK.search(text)
    if m:
        return InputRejected(int(m["i"]), m["what"].strip())
    m = _NAN_ASSERT.search(text)
    if m:
        return NanAssert(m["what"], m["var"])
    return None


@dataclass(frozen=True)
class IndexBound:
    """An `index out of bounds: 0 <= tmpN < B` check: B is a number fixed at export (`16`) or an
    expression of the kernel's size parameters (`ks0`), known only at run time."""

    index: str  # the kernel's temporary, tmpN
    bound: str  # as the check prints it, without C++'s L suffixes: "16", "ks0", "2*ks0"

    @property
    def value(self) -> Optional[int]:
        """The bound when it is a number (a symbolic bound's value is read from the run-time sizes)."""
        return int(self.bound) if self.bound.isdigit() else None

    @property
    def symbols(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(re.findall(r"\b[A-Za-z_]\w*\b", self.bound)))


@dataclass(frozen=True)
class DimRejected:
    """AOTI_RUNTIME_CHECK_INPUTS refused one dimension's size: `expected` is ">= 2", "<= 64" or "== 4"."""

    dim: int
    got: int
    expected: str


def index_bound(text: str) -> Optional[IndexBound]:
    """The first `index out of bounds: 0 <= tmpN < B` check in a message (CPU raise or Triton assert)."""
    m = _INDEX_BOUND.search(text)
    return IndexBound(m["index"], _INT_LITERAL.sub(r"\1", m["bound"]).strip()) if m else None


def dim_rejected(what: str) -> Optional[DimRejected]:
    """The dimension an input check's message names: `dim value is too small at 0, expected it to be >= 6,
    but got: 3` (a dynamic dimension outside its exported range) or `unmatched dim value at 1` (a static one)."""
    m = _DIM_CHECK.search(what)
    if not m:
        return None
    if m["dim"] is not None:
        return DimRejected(int(m["dim"]), int(m["got"]), f"{m['op']} {m['n']}")
    return DimRejected(int(m["sdim"]), int(m["sgot"]), f"== {m['sn']}")


# A temporary's definition in a generated kernel: C++ `auto tmp7 = c10::convert<int64_t>(tmp6);`, Triton
# `tmp7 = tmp6.to(tl.int64)`.
_TMP_DEF = re.compile(r"^\s*(?:auto\s+)?(?P<tmp>tmp\d+)\s*=\s*(?P<expr>[^;\n]*)", re.M)
_PARAM = re.compile(r"\b(in_ptr\d+|in_out_ptr\d+|ks\d+)\b")


def index_operands(source: str, bound: IndexBound) -> tuple[str, ...]:
    """The kernel parameters (`in_ptr2`) the checked index is computed from, read from the kernel's source:
    which tensor the index into this bound comes from, when the kernel reads several integer tensors (token ids
    for one table, positions for another). Each temporary's latest definition before its use is followed back;
    () when the check or its definitions are not in the source."""
    check = source.find(f"index out of bounds: 0 <= {bound.index} <")
    if check < 0:
        return ()
    defs = [(m.start(), m["tmp"], m["expr"]) for m in _TMP_DEF.finditer(source, 0, check)]
    found: dict[str, None] = {}
    todo, seen = [(bound.index, check)], set()
    while todo:
        tmp, at = todo.pop()
        if (tmp, at) in seen:
            continue
        seen.add((tmp, at))
        where = next(((pos, expr) for pos, name, expr in reversed(defs) if name == tmp and pos < at), None)
        if where is None:
            continue
        pos, expr = where
        found.update(dict.fromkeys(p for p in _PARAM.findall(expr) if not p.startswith("ks")))
        todo += [(t, pos) for t in re.findall(r"\btmp\d+\b", expr)]
    return tuple(found)


@dataclass(frozen=True)
class Term:
    """One addend of a checked index: `scale` times what the kernel loads from parameter `param`, or a literal."""
    scale: int = 1
    param: Optional[str] = None  # in_ptr2; None: a literal
    literal: int = 0


_LOAD = re.compile(r"^(?:tl\.load\(\s*)?(?P<param>in_ptr\d+|in_out_ptr\d+)\s*(?:\[|\+|,|\))")
_NUMBER = re.compile(r"^(?:static_cast<\w+>\()?\s*(?P<n>-?\d+)L?\s*\)?$|^tl\.full\(\[[^\]]*\],\s*(?P<t>-?\d+)")
# Casts that keep an integer's value: c10::convert<int64_t>(x), int64_t(x), decltype(tmp3)(x), static_cast<T>(x)
_CAST = re.compile(r"^(?:c10::convert<[\w:]+>|int64_t|int32_t|decltype\(\w+\)|static_cast<[\w:]+>)?\((?P<x>.*)\)$")
_COMPARE = re.compile(r"^(?P<a>\w+)\s*(?P<op><=|>=|<|>|==|!=)\s*(?P<b>\w+)$")


def index_terms(source: str, bound: IndexBound) -> tuple[Term, ...]:
    """The checked index as a sum of what the kernel loads and literals (`ids + 55`: an offset Inductor inlined),
    read from the kernel's source; () where it is anything else (a product of two loads, a call). A select on a
    condition the source fixes (`tmp27 ? tmp1 : tmp29`, per-field offsets) is resolved; one the data decides (the
    wrap of a negative index) takes the value the index has when it does not wrap."""
    check = source.find(f"index out of bounds: 0 <= {bound.index} <")
    if check < 0:
        return ()
    defs = [(m.start(), m["tmp"], m["expr"].strip()) for m in _TMP_DEF.finditer(source, 0, check)]
    terms = _terms(bound.index, check, defs, 0)
    if not terms:
        return ()
    literal = sum(t.scale * t.literal for t in terms if t.param is None)
    loads = tuple(t for t in terms if t.param is not None)
    return loads + ((Term(1, None, literal),) if literal or not loads else ())


def _terms(expr: str, at: int, defs: list, depth: int) -> Optional[list[Term]]:
    expr = expr.strip()
    if depth > 64:
        return None
    while (m := _CAST.match(expr)) and _balanced(m["x"]):
        expr = m["x"].strip()
    expr = re.sub(r"\.to\(tl\.\w+\)$", "", expr)
    if (n := _NUMBER.match(expr)):
        return [Term(1, None, int(n["n"] if n["n"] is not None else n["t"]))]
    if (load := _LOAD.match(expr)):
        return [Term(1, load["param"])]
    if re.fullmatch(r"tmp\d+", expr):
        where = next(((pos, e) for pos, name, e in reversed(defs) if name == expr and pos < at), None)
        return _terms(where[1], where[0], defs, depth + 1) if where else None
    chosen = _select(expr, at, defs, depth)
    if chosen is not None:
        return _terms(chosen, at, defs, depth + 1)
    cut = _top_level(expr, "+-") or _top_level(expr, "*")
    if cut is None:
        return None
    left, right = _terms(expr[:cut], at, defs, depth + 1), _terms(expr[cut + 1:], at, defs, depth + 1)
    if left is None or right is None:
        return None
    if expr[cut] == "+":
        return left + right
    if expr[cut] == "-":
        return left + [Term(-t.scale, t.param, t.literal) for t in right]
    factor = next((s for s in (left, right) if len(s) == 1 and s[0].param is None), None)
    other = right if factor is left else left
    return None if factor is None else [Term(t.scale * factor[0].literal, t.param, t.literal) for t in other]


def _select(expr: str, at: int, defs: list, depth: int) -> Optional[str]:
    """The branch a select takes: `c ? a : b` (C++) or `tl.where(c, a, b)` (Triton); None: not a select."""
    if expr.startswith("tl.where(") and expr.endswith(")"):
        from .wrapper import split_args
        parts = split_args(expr[len("tl.where("):-1])
        if len(parts) != 3:
            return None
        cond, a, b = parts
    else:
        q = _top_level(expr, "?")
        colon = _top_level(expr[q + 1:], ":") if q is not None else None
        if colon is None:
            return None
        cond, a, b = expr[:q], expr[q + 1:q + 1 + colon], expr[q + 2 + colon:]
    fixed = _condition(cond.strip(), at, defs, depth)
    return (a if fixed else b) if fixed is not None else b


def _condition(cond: str, at: int, defs: list, depth: int) -> Optional[bool]:
    """A comparison of two values the source fixes (`tmp4 < tmp2` over literals); None where the data decides."""
    if re.fullmatch(r"tmp\d+", cond):
        where = next(((pos, e) for pos, name, e in reversed(defs) if name == cond and pos < at), None)
        return _condition(where[1].strip(), where[0], defs, depth + 1) if where and depth < 64 else None
    m = _COMPARE.match(cond)
    if not m:
        return None
    a, b = _terms(m["a"], at, defs, depth + 1), _terms(m["b"], at, defs, depth + 1)
    if not a or not b or any(t.param for t in a + b):
        return None
    x, y = sum(t.scale * t.literal for t in a), sum(t.scale * t.literal for t in b)
    return {"<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y, "==": x == y, "!=": x != y}[m["op"]]


def _balanced(text: str) -> bool:
    depth = 0
    for ch in text:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth < 0:
            return False
    return depth == 0


def _top_level(expr: str, ops: str) -> Optional[int]:
    """The position of the last operator of `ops` outside brackets (not a sign at the start or after another
    operator); None where there is none."""
    depth, found = 0, None
    for i, ch in enumerate(expr):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch in ops and depth == 0 and i > 0 and expr[:i].rstrip()[-1:] not in "+-*/?:(<>=&|" \
                and expr[i - 1:i + 1] not in ("->", "<<", ">>") and expr[i:i + 2] not in ("->",):
            found = i
    return found
