"""What the hook's eager walk (child/hook/eagerwalk.py) measured in a run, as frozen records. Pure but for
`read_eager_walk`, which reads a run folder's eager_walk.json; a missing or damaged file gives a record whose
`problem` says why in one line, never an exception."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Optional

from ..child import contract
from ..files.own import loads_child_json, read_run_file
from .constants import Stale, parse_stale
from .fakecheck import differing_outputs
from .provenance import SourceLine, user_line

MAX_BYTES = 32 << 20


@dataclass(frozen=True)
class Pair:
    node: str  # the exported program's node (or input, or constant) the saved tensor was compared with
    max_abs: Optional[float]  # over the elements finite in both; None where none is
    close: bool  # within the saved tensor's tolerance, NaNs equal
    max_rel: Optional[float] = None  # |saved - eager| / |eager| over the elements eager holds away from zero
    # The saved tensor against the node run in float64 (max abs, RMSE); None: no float64 value (schema < 3)
    f64_abs: Optional[float] = None
    f64_rmse: Optional[float] = None
    # max |saved - eager| in units of the last place of the larger value in the saved dtype, and the two's cosine
    # similarity; None: not measured (schema < 4) or not defined (an integer tensor, an all-zero one)
    ulp: Optional[float] = None
    cosine: Optional[float] = None


@dataclass(frozen=True)
class Saved:
    """One tensor the level-1 wrapper saved around a launch, against the eager values of its shape."""
    shape: tuple[int, ...]
    dtype: str
    rtol: float
    atol: float
    pairs: tuple[Pair, ...]  # closest first
    dropped: int = 0  # eager values of its shape left out (only the closest are kept)
    problem: Optional[str] = None

    def tensor(self) -> str:
        return f"{list(self.shape)} {self.dtype}"


@dataclass(frozen=True)
class Born:
    """Where the program run eagerly first makes a non-finite value from finite ones: eager's own NaN or Inf."""
    node: str
    target: str  # its aten op, `aten.sqrt.default`
    line: Optional[SourceLine]  # the user's line that made the node, where its stack trace names one


@dataclass(frozen=True)
class Random:
    """A node that draws random numbers on every call: the package's generator and eager's draw different ones."""
    target: str  # its aten op, `aten.dropout.default`
    module: Optional[str] = None  # the submodule that made it, `drop`
    cls: Optional[str] = None  # its class, `Dropout`
    origin: Optional[str] = None  # set: this node draws nothing itself but is computed from the draw of that node


@dataclass(frozen=True)
class EagerWalk:
    status: str  # agree | differs | no_program | eager_raised | missing
    call: Optional[int] = None  # the compiled model's call (from 0) whose tensors were compared
    calls: int = 0
    problem: Optional[str] = None
    outputs: tuple[str, ...] = ()  # one line per output that differs from eager
    factor: float = 1.0  # the tolerance's multiple of assert_close's
    saved: dict[tuple[str, str], Saved] = field(default_factory=dict)  # (before|after, "<kernel>_<arg>")
    targets: dict[str, str] = field(default_factory=dict)  # node -> its aten op, `aten.linear.default`
    # node -> how far its float32 eager value is from the program run in float64, where beyond the tolerance
    unstable: dict[str, Optional[float]] = field(default_factory=dict)
    stability_problem: Optional[str] = None  # why the float64 run was not made or failed
    # node -> eager's own (max abs, RMSE) against the program run in float64
    float64: dict[str, tuple[Optional[float], Optional[float]]] = field(default_factory=dict)
    # (FQN, as built against now) of the state the program writes, where its build values reproduce the package's
    # outputs while the module's values now do not: the package does not carry the writes between calls
    unwritten: tuple[tuple[str, Stale], ...] = ()
    tf32: Optional[bool] = None  # whether TF32 matmuls were allowed when the program was compiled; None: not seen
    born: Optional[Born] = None  # where eager itself first makes a NaN or Inf; None: it makes none (or schema < 5)
    random: dict[str, Random] = field(default_factory=dict)  # node -> what it draws with (empty before schema 6)

    def op(self, node: str) -> Optional[str]:
        """The aten op of a node (`linear` for aten.linear.default); None for a placeholder or a part."""
        target = self.targets.get(node)
        if target is None or ":" in node:
            return None
        parts = target.split(".")
        return parts[-2] if len(parts) >= 3 else parts[-1]

    def has_part(self, node: str, op: str) -> bool:
        """Whether the hook computed the part of `node` an extern `op` computes alone (`linear:mm`)."""
        return f"{node}:{op}" in self.targets

    def around(self, when: str, kernel: str, arg: str) -> Optional[Saved]:
        return self.saved.get((when, f"{kernel}_{arg}"))


def parse(text: str) -> EagerWalk:
    try:
        data = loads_child_json(text)
        saved = {}
        for d in data.get("dumps") or ():
            pairs = tuple(_pair(*p) for p in d.get("pairs") or ())
            saved[(str(d["when"]), str(d["stem"]))] = Saved(
                tuple(int(s) for s in d.get("shape") or ()), str(d.get("dtype")), float(d.get("rtol") or 0.0),
                float(d.get("atol") or 0.0), pairs, int(d.get("pairs_dropped") or 0), d.get("problem"))
        return EagerWalk(str(data["status"]), data.get("call"), int(data.get("calls") or 0), data.get("problem"),
                         differing_outputs({"problem": data.get("outputs_problem"),
                                            "outputs": data.get("outputs") or []}),
                         float(data.get("factor") or 1.0), saved,
                         {str(k): str(v) for k, v in (data.get("targets") or {}).items()},
                         {str(k): _number(v) for k, v in (data.get("unstable") or {}).items()},
                         data.get("stability_problem"),
                         {str(k): (_number(v[0]), _number(v[1])) for k, v in (data.get("float64") or {}).items()},
                         tuple((str(u["fqn"]), stale) for u in data.get("unwritten") or ()
                               if (stale := parse_stale(u.get("stale"))) is not None),
                         None if data.get("tf32") is None else bool(data["tf32"]), _born(data.get("born")),
                         {str(k): Random(str(v["target"]), _text(v.get("module")), _text(v.get("class")),
                                         _text(v.get("from"))) for k, v in (data.get("random") or {}).items()})
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        problem = f"{contract.EAGER_WALK_RESULT} is damaged: {type(exc).__name__}: {exc}"
        return EagerWalk("missing", problem=problem[:300])


def _born(raw: object) -> Optional[Born]:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise TypeError(f"born is a {type(raw).__name__}")
    trace = raw.get("trace")
    return Born(str(raw["node"]), str(raw["target"]), user_line(str(trace)) if trace else None)


def _text(v: object) -> Optional[str]:
    return None if v is None else str(v)


# A number as the child's JSON holds it: a float (or int), or null where there is none. float() still converts it, so
# that anything else raises the ValueError or TypeError that parse reports as a damaged file.
Number = Optional[float]


def _number(v: Number) -> Optional[float]:
    return None if v is None else float(v)


def _pair(node: object, max_abs: Number, close: object, max_rel: Number = None, f64_abs: Number = None,
          f64_rmse: Number = None, ulp: Number = None, cosine: Number = None) -> Pair:
    """A row of `pairs`; schema 1 rows have no relative difference, schema 2 rows no float64 error, schema 3 rows
    no ULP or cosine."""
    return Pair(str(node), _number(max_abs), bool(close), _number(max_rel), _number(f64_abs), _number(f64_rmse),
                _number(ulp), _number(cosine))


def read_eager_walk(run_dir: str) -> EagerWalk:
    path = os.path.join(run_dir, contract.EAGER_WALK_RESULT)
    try:
        text = read_run_file(path, MAX_BYTES)
    except FileNotFoundError:
        return EagerWalk("missing", problem="no eager comparison was written: the process never called a compiled "
                                            "model (it failed before, or ran without the hook)")
    except OSError as exc:
        return EagerWalk("missing", problem=f"cannot read {path}: {exc.strerror or exc}")
    return parse(text)
