"""The walk against eager: the first kernel whose output differs from eager's while what it read agrees. Pure.

For a wrong-but-finite output no NaN or bad index marks the first bad value: eager is the reference. The
hook compared every tensor the level-1 wrapper saved around each launch with the exported program's node
values on the same call (aoti/eagerwalk.py). Which node a kernel's output stands for comes from Inductor's
provenance of that compile (the kernel's FX nodes); where provenance names no node of the buffer's shape (an
intermediate such as a softmax's running max), the buffer agrees if it equals any eager value of its shape
and is otherwise left unjudged rather than convicted.

A false conviction is worse than none, so a tensor is convicted only against the eager value it really is:
- an extern kernel computes one aten op, which may be only part of its FX node (on CUDA Inductor runs `linear`
  as an mm and adds the bias in the next kernel): it is held against the node only where the node is that op,
  or against the part the hook computed alone (`linear:mm`), and is otherwise compared by value and never
  convicted; a Triton GEMM template (`triton_tem_*`) may compute that part too, and is held against both;
- a node whose float32 eager value (on a GPU, also the program's float32 run on the CPU) misses the program run
  in float64 beyond the tolerance is an unstable reference: a kernel is never convicted on it;
- a buffer a kernel writes that no later launch reads and the graph does not return is the kernel's scratch (a
  reduction's running sum): what it holds is the kernel's business, and it is not compared.

A node that draws random numbers (a dropout in training mode, `rand_like`) draws other numbers in the package than
in eager: the launch that computes it, and every launch that reads what such a launch wrote, is not held against
eager. Where the walk convicts nothing else, it says so and names the node's module (a module left in training mode).

Where a bfloat16 or float16 kernel misses only unstable eager values, and float64 takes the package's side (its
error against the program run in float64 is below eager's, and within dynamo's accuracy rule everywhere), the
gap is eager's rounding after every op, which a fused kernel computing in float32 does not share: the walk names
where it arises (culprit kind `precision`) and convicts nothing. So does a gap below the walk's tolerance that the
script's check is stricter than (`torch.equal` on a fused reduction): every output within the walk's tolerance of
eager, not all exactly, and within dynamo's rule against float64.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional

from ..aoti.eagerwalk import EagerWalk, Pair, Random, Saved
from ..aoti.wrapper import Launch, WrapperGraph
from .facts import Arg, Fact, FactKind, Namer, Subject, fact, kernel, note
from .findings import Cause, Culprit, CulpritKind, Gap, Precision

MAX_NAMED = 4
MAX_GAPS = 12  # launches listed with their gap from eager, the nearest to where the walk ended
# dynamo's accuracy rule against float64 (torch/_dynamo/utils.py `same`): the compiled RMSE may be MULTIPLIER times
# eager's, plus TOL / 10
MULTIPLIER = 2.0
TOL = 1e-4
LOW_PRECISION = ("bfloat16", "float16")  # eager rounds to these after every op; Inductor's kernels compute in float32
_EXTERN = re.compile(r"^aoti_torch_(?:cpu|cuda|xpu|mps)_(?P<op>\w+?)(?:_out)?$")
# (node's aten op, extern op): the extern computes the whole node. linear is matched through its parts, which the
# hook keeps for every linear: an mm of a linear with a bias lacks the bias.
WHOLE = {("linear", "addmm"), ("matmul", "mm"), ("matmul", "bmm"),
         *((conv, "convolution") for conv in ("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                                              "conv_transpose3d")),
         *(("scaled_dot_product_attention", f"_scaled_dot_product_{kind}_attention")
           for kind in ("flash", "efficient", "cudnn"))}


SCRATCH = fact(FactKind.EAGER, "the kernel's own scratch: no later launch reads it and the graph does not return "
              "it, so it may hold an intermediate eager never computes")


def extern_op(name: str) -> Optional[str]:
    """The aten op an extern launch runs (`mm` for aoti_torch_cuda_mm_out, `pad_double` for a custom op run
    through the proxy executor, `bisectlab::pad_double`); None for a generated kernel."""
    if "::" in name:
        return name.rsplit("::", 1)[-1]
    m = _EXTERN.match(name)
    return m["op"] if m else None


@dataclass(frozen=True)
class Reference:
    """What a launch's output is held against: eager nodes, and whether a miss convicts (`why` says why not)."""
    nodes: tuple[str, ...]
    why: Optional[Fact] = None  # set: the launch computes only part of its nodes; compared by value only


def reference(walk: EagerWalk, launch: Optional[Launch], nodes: tuple[str, ...]) -> Reference:
    """The eager values a launch's output stands for. A generated kernel's are its provenance nodes; an extern
    op's are the nodes it computes whole (`addmm` of a `linear`) or the parts of them the hook computed
    (`linear:mm`, the product before a bias Inductor fused into a later kernel)."""
    op = extern_op(launch.name) if launch is not None else None
    if op is None and launch is not None and "_tem_" in launch.name:
        # A Triton GEMM template may compute a linear's product alone and leave the bias to a later kernel, as an
        # extern mm does (on an H100 triton_tem_fused_addmm_t_0 wrote `linear:mm`, 0.063 off `linear` by the bias):
        # it is held against the node and that part, and may equal either.
        return Reference(tuple(x for n in nodes for x in (n, *([f"{n}:mm"] if walk.has_part(n, "mm") else []))))
    if op is None:
        return Reference(nodes)
    whole = tuple(f"{n}:{op}" if walk.has_part(n, op) else n for n in nodes
                  if walk.has_part(n, op) or walk.op(n) == op or (walk.op(n), op) in WHOLE)
    if whole:
        return Reference(whole)
    known = tuple(f"`{n}` ({walk.targets[n]})" for n in nodes if n in walk.targets)[:MAX_NAMED]
    if not known:
        return Reference((), fact(FactKind.EAGER, "{kernel} is an extern op and no eager node of its provenance "
                                  "has a recorded op: compared by value only", kernel=kernel(launch.name)))
    return Reference((), fact(FactKind.EAGER, "{kernel} computes aten {op}, not the op of eager {of: and } (it may "
                              "be only part of it): no eager value is known to hold what it computes alone",
                              kernel=kernel(launch.name), op=op, of=known))


def eager_name(node: str) -> str:
    """`linear`, or `the mm part of `linear`` for a part the hook computed alone."""
    name, _, part = node.partition(":")
    return f"the {part} part of `{name}`" if part else f"`{name}`"


def gap(p: Pair, dtype: str = "") -> str:
    """The named metrics of one comparison: 'max abs 0.1248, max rel 0.031, 16 ULP in bfloat16, cosine 0.9998'."""
    if p.max_abs is None:
        return "no element finite in both"
    return ", ".join([f"max abs {p.max_abs:.4g}", *_more(p, dtype)])


def _up_to(p: Pair, dtype: str = "") -> str:
    """A miss, as the fakecheck's differential says it: 'up to 1.745 (max abs; max rel 0.2493)'."""
    if p.max_abs is None:
        return "? (no element finite in both)"
    return f"up to {p.max_abs:.4g} (" + "; ".join(["max abs", *_more(p, dtype)]) + ")"


def _more(p: Pair, dtype: str) -> list[str]:
    """The metrics beside max abs, where measured: max rel, ULP in the tensor's dtype (a few: rounding), cosine."""
    return [*([] if p.max_rel is None else [f"max rel {p.max_rel:.4g}"]),
            *([] if p.ulp is None else [f"{p.ulp:.4g} ULP in {dtype or 'its dtype'}"]),
            *([] if p.cosine is None else [f"cosine {p.cosine:.7g}"])]


@dataclass(frozen=True)
class Rounding:
    """A tensor that misses an unstable eager value, against the program run in float64: which side float64 takes.
    The node is the one of its launch's the tensor is nearest in float64 (which one a buffer holds is not
    recorded)."""
    node: str
    package: tuple[float, float]  # (max abs, RMSE) against the node run in float64
    eager: tuple[float, float]  # eager's own

    @property
    def closer(self) -> bool:
        return self.package[1] < self.eager[1]

    @property
    def within(self) -> bool:
        """dynamo's rule: the compiled error within MULTIPLIER times eager's, plus TOL / 10."""
        return self.package[1] <= MULTIPLIER * self.eager[1] + TOL / 10

    def describe(self) -> Fact:
        return fact(FactKind.EAGER, "against {node} run in float64 the package is off by RMSE {p:.3g} (max abs "
                    "{pa:.3g}), eager by RMSE {e:.3g} (max abs {ea:.3g})", node=eager_name(self.node),
                    p=self.package[1], pa=self.package[0], e=self.eager[1], ea=self.eager[0])


def rounding(walk: Optional[EagerWalk], pairs: list[Pair]) -> Optional[Rounding]:
    """The float64 comparison of a tensor held against `pairs` (its launch's nodes), where the hook made one."""
    known = [(p, walk.float64[p.node]) for p in pairs if walk is not None and p.f64_rmse is not None and
             p.f64_abs is not None and None not in walk.float64.get(p.node, (None, None))]
    if not known:
        return None
    p, own = min(known, key=lambda pe: pe[0].f64_rmse)
    return Rounding(p.node, (p.f64_abs, p.f64_rmse), own)


@dataclass(frozen=True)
class Judged:
    state: str  # agrees | differs | unjudged
    pair: Optional[Pair] = None  # the eager value it equals, or the nearest it was held against
    saved: Optional[Saved] = None
    others: tuple[Pair, ...] = ()  # the other eager values it was held against
    why: Optional[Fact] = None  # why it is unjudged, where more than "no eager value of its shape"
    rounded: Optional[Rounding] = None  # missed only unstable eager values: against float64

    @property
    def node(self) -> Optional[str]:
        return self.pair.node if self.pair else None

    def describe(self, var: Optional[Subject]) -> Fact:
        """`var`: the tensor's subject (None: the sentence around it names the tensor)."""
        s = self.saved
        if var is None:  # the sentence names the tensor already
            tensor = fact(FactKind.EAGER, "({shape})", shape=s.tensor()) if s else fact(FactKind.EAGER, "it")
        else:
            tensor = fact(FactKind.EAGER, "{var} ({shape})", var=var, shape=s.tensor()) if s else \
                fact(FactKind.EAGER, "{var}", var=var)
        if self.state == "agrees":
            return fact(FactKind.EAGER, "{tensor} = eager {node} ({gap})", tensor=tensor,
                        node=eager_name(self.pair.node), gap=gap(self.pair, s.dtype if s else ""))
        if self.state == "differs":
            by = ", ".join(f"{eager_name(p.node)} by {_up_to(p, s.dtype)}" for p in (self.pair, *self.others))
            return fact(FactKind.EAGER, "{tensor} differs from eager {by} (tolerance rtol {rtol:g}, atol {atol:g})",
                        tensor=tensor, by=by, rtol=s.rtol, atol=s.atol)
        why = self.why or (s.problem or "no eager value of its shape" if s else
                           "the level-1 wrapper saved no copy of it")
        return fact(FactKind.EAGER, "{tensor} (not compared: {why})", tensor=tensor, why=why)


def judge(saved: Optional[Saved], ref: Reference, walk: Optional[EagerWalk] = None) -> Judged:
    """A saved tensor against the eager values it may stand for: `ref.nodes` (provenance), else any of its
    shape. Only a tensor held against what its launch computes whole can differ."""
    if saved is None or saved.problem:
        return Judged("unjudged", saved=saved)
    named = [p for p in saved.pairs if p.node in ref.nodes]
    if named:
        hit = next((p for p in named if p.close), None)
        if hit:
            return Judged("agrees", hit, saved)
        shaky = _unstable(walk, named[0], saved.dtype)
        if shaky is not None:
            rounded = rounding(walk, named)
            if rounded is not None:
                shaky = fact(FactKind.EAGER, "{shaky}; {rounded}", shaky=shaky, rounded=rounded.describe())
            return Judged("unjudged", named[0], saved, why=shaky, rounded=rounded)
        # Which of the kernel's nodes this buffer holds is not recorded: each one it was held against is said.
        return Judged("differs", named[0], saved, tuple(named[1:MAX_NAMED]))
    equal = next((p for p in saved.pairs if p.close), None)
    if equal is not None:
        return Judged("agrees", equal, saved)
    if saved.pairs and not ref.nodes and ref.why is None and not saved.dropped:
        return Judged("differs", saved.pairs[0], saved)
    return Judged("unjudged", saved=saved, why=ref.why)


def _unstable(walk: Optional[EagerWalk], p: Pair, dtype: str) -> Optional[Fact]:
    """Why a miss of `p` convicts nothing: its eager value is itself unstable (eager in the tensor's `dtype` and
    float64 disagree).
    However far the miss, the float32 errors seen bound nothing: on an H200 a correct kernel missed by 35.5 a
    one-pass variance whose two float32 orders erred by 1.07 and 1e-4 (docs/evidence/gpu-verdict-2026-11-27.md). A
    miscompile there shows in a stable node, before or after it."""
    if walk is None or p.node not in walk.unstable:
        return None
    own = walk.unstable[p.node]
    return fact(FactKind.EAGER, "the eager reference {node} is itself unstable: {dtype} and float64 eager differ "
                "by up to {own}, beyond the tolerance, and this tensor misses it by {gap}", node=eager_name(p.node),
                dtype=dtype, own="?" if own is None else f"{own:.4g}", gap=gap(p, dtype))


def walk_eager(graph: WrapperGraph, walk: EagerWalk, nodes_of: Callable[[Launch], tuple[str, ...]],
               namer: Optional[Namer] = None) -> Culprit:
    """`nodes_of(launch)`: the FX node names provenance gives the launch (empty where none was recorded)."""
    namer = namer or Namer(placeholders=tuple(graph.inputs))
    if walk.status != "differs":
        return Culprit(CulpritKind.UNKNOWN, evidence=[_no_walk(walk)])
    head = [*(note(line) for line in walk.outputs),
            fact(FactKind.EAGER, "compared on call {call} of the compiled model, the first whose outputs differ from "
                 "the exported program run eagerly on the same inputs", call=walk.call)]
    if walk.stability_problem:
        head.append(fact(FactKind.UNVERIFIED, "unverified: the eager reference's stability (float32 against "
                         "float64): {why}", why=walk.stability_problem))
    if walk.unwritten:
        return _unwritten(walk, head)
    gaps: list[Fact] = []
    rows: list[Gap] = []
    rounded: list[tuple[Launch, str, Judged]] = []  # outputs that missed only unstable eager values
    drawn: dict[str, Draw] = {}  # storage -> the random draw what it holds comes from
    written: dict[str, tuple[Launch, str, Judged]] = {}  # storage -> its last write, judged
    for launch in graph.launches:
        reads = [v for v in launch.args if graph.storage(v) in launch.reads]
        writes = [v for v in launch.args if graph.storage(v) in launch.writes]
        nodes = nodes_of(launch)
        draw = _draw(walk, graph, launch, nodes, reads, drawn)
        if draw is not None:
            drawn.update((graph.storage(v), draw) for v in writes)
            skipped = {v: Judged("unjudged", saved=walk.around("after", launch.name, v), why=draw.describe(launch))
                       for v in writes}
            gaps += [_gap(launch, v, j, namer) for v, j in skipped.items()]
            rows += [_row(walk, launch, v, j) for v, j in skipped.items()]
            continue
        seen = {v: judge(saved, _read_reference(graph, walk, launch, v, nodes_of, saved), walk)
                for v in reads for saved in (walk.around("before", launch.name, v),)}
        for v in reads:
            if seen[v].state == "differs":
                return _ended(_bad_read(graph, launch, v, seen[v], head, namer), gaps, rows)
        own = reference(walk, launch, nodes)
        made = {v: _judge_write(graph, walk, launch, v, own) for v in writes}
        shown = {v: j for v, j in made.items() if j.pair is not None or (j.why is not None and j.why is not SCRATCH)}
        gaps += [_gap(launch, v, j, namer) for v, j in shown.items()]
        rows += [_row(walk, launch, v, j) for v, j in shown.items()]
        rounded += [(launch, v, j) for v, j in made.items() if j.rounded is not None]
        written.update((graph.storage(v), (launch, v, j)) for v, j in made.items())
        bad = [v for v in writes if made[v].state == "differs"]
        if bad and (branch := _branch_before(graph, launch, nodes_of)) is not None:
            return _ended(_after_branch(launch, bad, made, branch, head, namer), gaps, rows)
        later = graph.unwrapped(launch.index) if graph.cuda else ()
        if bad and later:
            return _ended(_lead(launch, bad, made, later, head, namer), gaps, rows)
        if bad:
            return _ended(_tf32(_bad_kernel(launch, bad, made, seen, head, namer), graph, walk, nodes,
                                made[bad[0]]), gaps, rows)
    found = _precision(rounded, head, namer) or _reordered(graph, walk, written, head, namer)
    if found is not None:
        return _ended(found, gaps, rows)
    if drawn:  # said of the first random node, past Inductor's seeds for it
        draws = list(drawn.values())
        return _ended(_random_only(next((d for d in draws if d.node), draws[0]), head, walk), gaps, rows)
    return _ended(_unexplained(walk, head), gaps, rows)


def _unexplained(walk: EagerWalk, head: list[Fact]) -> Culprit:
    return Culprit(CulpritKind.UNKNOWN, evidence=[*head, *_shaky(walk), note(
        "no tensor the instrumented kernels read or wrote differs from the eager value it stands for beyond "
        "tolerance (tensors not compared say why below): the difference arises outside them (an output copy or "
        "view, a custom op, state carried between calls) or where eager itself is unstable")])


# Extern ops that draw random numbers, by name: where provenance names no node for the launch (Inductor's seeds for
# its own random kernels run as aoti_torch_*_randint_low_out).
_RANDOM_EXTERN = re.compile(r"^(rand|bernoulli|normal|uniform|exponential|multinomial|poisson|native_dropout|"
                            r"geometric|cauchy|log_normal)")


@dataclass(frozen=True)
class Draw:
    """Where what a buffer holds was drawn at random: the launch that drew it (None: one the walk does not see, in a
    branch of torch.cond), and the node it computes (None: an extern random op provenance names no node for)."""
    kernel: Optional[str]
    node: Optional[str]
    random: Optional[Random]

    def source(self) -> Fact:
        r = self.random
        if r is None:
            return fact(FactKind.EAGER, "{kernel}", kernel=kernel(self.kernel or "?"))
        module = fact(FactKind.EAGER, ", in `{m}`{cls}", m=r.module,
                      cls=f" ({r.cls})" if r.cls else "") if r.module else ""
        if self.kernel is None:
            return fact(FactKind.EAGER, "{target} in eager `{node}`{module}", node=self.node, target=r.target,
                        module=module)
        return fact(FactKind.EAGER, "{kernel} (eager `{node}`: {target}{module})", kernel=kernel(self.kernel),
                    node=self.node, target=r.target, module=module)

    def describe(self, launch: Launch) -> Fact:
        if launch.name == self.kernel:
            return fact(FactKind.EAGER, "it draws random numbers, {source}: the package and eager draw different "
                        "ones", source=self.source())
        return fact(FactKind.EAGER, "it is computed from the random numbers {source} drew: eager drew others",
                    source=self.source())


def _draw(walk: EagerWalk, graph: WrapperGraph, launch: Launch, nodes: tuple[str, ...], reads: list[str],
          drawn: dict[str, Draw]) -> Optional[Draw]:
    """The random draw a launch's outputs carry: its own (a node of its provenance draws, or it is an extern random
    op), one a buffer it reads carries, or one made where the walk sees no launch (a branch of torch.cond) that a
    node of its provenance is computed from."""
    own = next((n for n in nodes if n in walk.random and walk.random[n].origin is None), None)
    if own is not None:
        return Draw(launch.name, own, walk.random[own])
    op = extern_op(launch.name)
    if op is not None and _RANDOM_EXTERN.match(op):
        return Draw(launch.name, None, None)
    carried = next((drawn[graph.storage(v)] for v in reads if graph.storage(v) in drawn), None)
    if carried is not None:
        return carried
    origin = next((walk.random[n].origin for n in nodes if n in walk.random), None)
    return None if origin is None else Draw(None, origin, walk.random.get(origin))


def _random_only(draw: Draw, head: list[Fact], walk: EagerWalk) -> Culprit:
    """No launch differs from eager but those that carry random numbers: the program draws them on every call and
    the package's generator draws others, so the script's comparison with eager fails whatever the compiler did."""
    dropouts = [r for r in walk.random.values() if r.origin is None and "dropout" in r.target.lower()]
    modes = sorted({f"`{r.module}` ({r.cls})" if r.cls else f"`{r.module}`" for r in dropouts if r.module})
    hint: Fact | str = ""
    if modes:
        hint = fact(FactKind.EAGER, ": {modes:, } left in training mode; export after `.eval()`", modes=tuple(modes))
    elif dropouts:  # inside a branch of torch.cond export records no module
        hint = fact(FactKind.EAGER, ": a dropout left in training mode; export after `.eval()`")
    c = Culprit(CulpritKind.UNKNOWN)
    c.summary = fact(FactKind.EAGER, "the program draws random numbers on every call, first in {source}{hint}; the "
                     "package draws other numbers than eager, so what is computed from them cannot be held against "
                     "eager, and no launch before or beside them differs from it. No kernel is convicted",
                     source=draw.source(), hint=hint)
    c.evidence = [c.summary, *head]
    return c


def _unwritten(walk: EagerWalk, head: list[Fact]) -> Culprit:
    """The package computes from the state the program writes as it was built: its outputs equal the program run with
    that state as built, and differ from it run as the module holds it now (pytorch#165444: a counter the package
    returns as 2, 2, 2 where eager gives 2, 3, 4). No kernel is at fault: the package does not carry the writes."""
    fqn, x = walk.unwritten[0]
    subject = Namer(constants={fqn: fqn}).constant(fqn)
    c = Culprit(CulpritKind.STALE_CONSTANT, user_name=fqn)
    c.summary = fact(FactKind.EAGER, "{constant:quoted} is written by the program, but the package does not carry "
                     "the write between calls: on call {call} its outputs equal the program run with "
                     "{constant:quoted} as built, not as the module holds it now ({differ} element(s) differ, first "
                     "[{index}]: {package:.6g} as built, {module:.6g} now)", constant=subject, call=walk.call,
                     differ=x.differ, index=", ".join(map(str, x.index)), package=_num(x.package),
                     module=_num(x.module))
    c.evidence = [c.summary, *head, *(fact(FactKind.EAGER, "also written by the program and not carried: "
                                           "{constant:quoted}", constant=Namer(constants={f: f}).constant(f))
                                      for f, _ in walk.unwritten[1:])]
    return c


def _num(v: Optional[float]) -> float:
    return float("nan") if v is None else v


def _precision(rounded: list[tuple[Launch, str, Judged]], head: list[Fact], namer: Namer) -> Optional[Culprit]:
    """Where the gap is eager's rounding, not a kernel: the first output that missed only unstable eager values is
    a generated kernel's, low-precision and nearer float64 than eager, and every such output is within dynamo's
    rule. Said, with the
    kernel where it arises; nothing is convicted. A float32 gap stays unexplained: there an ill-conditioned
    computation lands near float64 by luck of its order as often as by accuracy."""
    if not rounded:
        return None
    launch, v, j = rounded[0]
    r = j.rounded
    # A generated kernel: an extern runs eager's own op, so "eager rounds after every op" does not explain its gap.
    if extern_op(launch.name) is not None or j.saved is None or j.saved.dtype not in LOW_PRECISION or \
            not r.closer or not all(other.rounded.within for _, _, other in rounded):
        return None
    k = kernel(launch.name)
    c = Culprit(CulpritKind.PRECISION, kernel=launch.name, precision=Precision(Cause.EAGER_ROUNDING))
    c.summary = fact(FactKind.EAGER, "a precision difference, not a miscompile: {kernel}'s output {output} misses "
                     "eager where eager itself rounds, and float64 takes the package's side: {rounded}, within "
                     "dynamo's rule (RMSE against float64 at most {m:g} times eager's + {t:g}). Eager rounds to "
                     "{dtype} after every op; the fused kernel computes in float32 and rounds once. No kernel is "
                     "convicted", kernel=k, output=namer.var(v), rounded=r.describe(), m=MULTIPLIER, t=TOL / 10,
                     dtype=j.saved.dtype)
    c.evidence = [c.summary, *head, fact(FactKind.EAGER, "{kernel} wrote {output}", kernel=k,
                                         output=j.describe(namer.var(v))),
                  *(fact(FactKind.EAGER, "also within dynamo's rule against float64 (RMSE at most {m:g} times "
                         "eager's + {t:g}): {kernel}'s {output}: {rounded}", m=MULTIPLIER, t=TOL / 10,
                         kernel=kernel(l.name), output=namer.var(w), rounded=o.rounded.describe())
                    for l, w, o in rounded[1:])]
    return c


def _reordered(graph: WrapperGraph, walk: EagerWalk, written: dict[str, tuple[Launch, str, Judged]], head: list[Fact],
               namer: Namer) -> Optional[Culprit]:
    """Where the outputs miss eager by more than assert_close's tolerance but every launch that writes one agrees with
    eager within the walk's (walk.factor times it), and float64 finds each within dynamo's accuracy rule: the same
    arithmetic in another order (a fused kernel reduces in its own), which the script's check holds to less than
    the dtype's rounding allows. Said, with the kernel of the largest gap; nothing is convicted. An output the walk
    could not judge (no launch writes it, no eager value, no float64 run) leaves the gap unexplained."""
    made = [written.get(graph.storage(v)) for v in graph.outputs]
    outputs = [m for m in made if m is not None and m[2].state == "agrees" and m[2].pair is not None]
    if not outputs or len(outputs) < len(made):
        return None
    rounded = [(launch, v, j, rounding(walk, [j.pair])) for launch, v, j in outputs]
    if any(r is None or not r.within for *_, r in rounded):
        return None
    launch, v, j, r = max(rounded, key=lambda t: t[2].pair.max_abs or 0.0)
    if not j.pair.max_abs:
        return None
    assert r is not None
    k = kernel(launch.name)
    c = Culprit(CulpritKind.PRECISION, kernel=launch.name)
    c.summary = fact(FactKind.EAGER, "a rounding difference, not a miscompile: every output is within {factor:g} times "
                     "assert_close's tolerance of eager, and against float64 each is within dynamo's accuracy rule "
                     "(RMSE at most {m:g} times eager's + {t:g}); the largest gap is {kernel}'s {output}: "
                     "{rounded}. The package computes in another order than eager (a fused reduction sums in an "
                     "order of its own), and the script's check holds {dtype} to less than that reordering allows. No "
                     "kernel is convicted", factor=walk.factor, m=MULTIPLIER, t=TOL / 10, kernel=k, output=namer.var(v),
                     rounded=r.describe(), dtype=j.saved.dtype if j.saved else "the output")
    c.evidence = [c.summary, *head, fact(FactKind.EAGER, "{kernel} wrote {output}", kernel=k,
                                         output=j.describe(namer.var(v)))]
    return c


# aten ops a generated kernel may compute as a matmul: a Triton GEMM template (triton_tem_*) for one of these, or
# with an epilogue fused into it
MATMULS = frozenset({"mm", "addmm", "bmm", "baddbmm", "linear", "matmul"})


def _tf32(c: Culprit, graph: WrapperGraph, walk: EagerWalk, nodes: tuple[str, ...], j: Judged) -> Culprit:
    """A float32 GPU kernel that computes a matmul, convicted where the program was compiled with TF32 matmuls
    allowed: a Triton GEMM template bakes TF32 into its code, so it rounds the operands to 10 mantissa bits while
    eager, run at the setting the script holds when it calls, may compute in full float32. Its gap from eager can be
    that design and no miscompile; float64 cannot tell (TF32 is the farther side either way), so the conviction
    waits on the precision stage's control recompile with TF32 off."""
    if not (graph.cuda and walk.tf32 and j.saved is not None and j.saved.dtype == "float32" and c.kernel
            and extern_op(c.kernel) is None and ("_tem_" in c.kernel or any(walk.op(n) in MATMULS for n in nodes))):
        return c
    c.precision = Precision(Cause.TF32)
    rounded = rounding(walk, [p for p in (j.pair, *j.others) if p is not None])
    c.evidence.append(fact(FactKind.UNVERIFIED, "unverified: the program was compiled with TF32 matmuls allowed and "
                           "{kernel} computes a matmul in float32: TF32's rounding alone may make this gap{f64}; a "
                           "control recompile with TF32 off decides", kernel=kernel(c.kernel),
                           f64=fact(FactKind.EAGER, " ({r})", r=rounded.describe()) if rounded else ""))
    return c


def _row(walk: EagerWalk, launch: Launch, var: str, j: Judged) -> Gap:
    p, s = j.pair, j.saved
    own = walk.float64.get(p.node) if p is not None else None
    return Gap(launch.index, launch.name, var, j.state, p.node if p else None, p.max_abs if p else None,
               p.max_rel if p else None, p.f64_abs if p else None, own[0] if own else None,
               s.rtol if s else None, s.atol if s else None, p.ulp if p else None, p.cosine if p else None)


def _shaky(walk: EagerWalk) -> list[Fact]:
    """The unstable eager values, said once where the walk convicted nothing: the package may differ by rounding."""
    if not walk.unstable:
        return []
    worst = sorted(walk.unstable.items(), key=lambda kv: -(kv[1] or 0.0))[:MAX_NAMED]
    return [fact(FactKind.EAGER, "eager is itself unstable here: float32 and float64 eager disagree beyond the "
                 "tolerance at {n} nodes ({worst:, }): the package may differ by rounding an ill-conditioned "
                 "computation otherwise, not by a miscompile", n=len(walk.unstable),
                 worst=tuple(f"{eager_name(k)} by up to {'?' if v is None else f'{v:.4g}'}" for k, v in worst))]


def _judge_write(graph: WrapperGraph, walk: EagerWalk, launch: Launch, var: str, own: Reference) -> Judged:
    saved = walk.around("after", launch.name, var)
    if not _escapes(graph, launch, var):
        return Judged("unjudged", saved=saved, why=SCRATCH)
    finisher = _finished_by(graph, launch, var)
    if finisher is not None:
        # A zero fill that a user Triton kernel or custom op then scatters into: the node's value is the buffer after
        # the finisher, and the fill alone differs from it by design.
        return Judged("unjudged", saved=saved, why=fact(
            FactKind.EAGER, "{later} writes it again before any launch reads it: the value eager computes is the "
            "one after {later}", later=kernel(finisher.name)))
    return judge(saved, own, walk)


def _finished_by(graph: WrapperGraph, launch: Launch, var: str) -> Optional[Launch]:
    """The later launch that writes `var` again before any launch reads it, where there is one."""
    storage = graph.storage(var)
    for later in graph.launches[launch.index + 1:]:
        if storage in later.reads:
            return None
        if storage in later.writes:
            return later
    return None


def _escapes(graph: WrapperGraph, launch: Launch, var: str) -> bool:
    """Whether what `launch` wrote to `var` leaves the kernel: a later launch reads it or the graph returns it. A
    buffer that does neither is the kernel's own scratch (a reduction's running sum, a softmax's max), holding an
    intermediate eager never computes, however like a node its shape is."""
    storage = graph.storage(var)
    return storage in {graph.storage(o) for o in graph.outputs} or \
        any(storage in later.reads for later in graph.launches[launch.index + 1:])


def _read_reference(graph: WrapperGraph, walk: EagerWalk, launch: Launch, var: str,
                    nodes_of: Callable[[Launch], tuple[str, ...]], saved: Optional[Saved]) -> Reference:
    """A read is held against what its producer computed: an extern's part of a node is not the node. A constant
    read is held against the eager value of its own name where one was compared: the closest value of its shape
    may be another weight (a stale `shift` of 0 lay nearer `fc1_bias` than the module's own -0.5)."""
    producer = graph.producer(var, launch.index)
    if producer is not None:
        return reference(walk, producer, nodes_of(producer))
    own = graph.storage(var)
    if graph.is_constant(var) and saved is not None and any(p.node == own for p in saved.pairs):
        return Reference((own,))
    return Reference(())


def _gap(launch: Launch, var: str, j: Judged, namer: Namer) -> Fact:
    return fact(FactKind.EAGER, "{kernel} wrote {output}", kernel=kernel(launch.name),
                output=j.describe(namer.var(var)))


def _ended(c: Culprit, gaps: list[Fact], rows: list[Gap]) -> Culprit:
    """The walk's gap from eager launch by launch, so the first divergence and its growth are visible: the last
    few in the evidence, every one in `gaps` (report.md's table)."""
    c.gaps = tuple(rows)
    if gaps:
        shown = gaps[-MAX_GAPS:]
        c.evidence.append(fact(FactKind.EAGER, "gap from eager, launch by launch" + (
            " (the last {shown} of {n})" if len(gaps) > len(shown) else "") + ": {gaps:; }",
            shown=len(shown), n=len(gaps), gaps=tuple(shown)))
    return c


def _bad_kernel(launch: Launch, bad: list[str], made: dict[str, Judged], seen: dict[str, Judged],
                head: list[Fact], namer: Namer) -> Culprit:
    c = Culprit(CulpritKind.KERNEL, kernel=launch.name)
    k = kernel(launch.name)
    good = tuple(j.describe(namer.var(v)) for v, j in seen.items() if j.state == "agrees")
    unseen = tuple(j.describe(namer.var(v)) for v, j in seen.items() if j.state == "unjudged")
    c.summary = fact(FactKind.EAGER, "{kernel}'s output {output}" + ("" if unseen else
                                                                      ", from inputs that agree with eager"),
                     kernel=k, output=made[bad[0]].describe(namer.var(bad[0])))
    c.evidence = [c.summary, *head,
                  fact(FactKind.EAGER, "{kernel} read {good}", kernel=k,
                       good=good or "no tensor eager could be compared with"),
                  *(fact(FactKind.EAGER, "{kernel}'s output {output} as well", kernel=k,
                         output=made[v].describe(namer.var(v))) for v in bad[1:])]
    if unseen:
        c.evidence.append(fact(FactKind.UNVERIFIED, "unverified: {kernel} also read {unseen:, }", kernel=k,
                               unseen=unseen))
    return c


# The subgraphs a higher-order op runs, as provenance names them: torch.cond's true_graph_0 and false_graph_0,
# while_loop's while_loop_body_graph_0, map's body_graph_0.
_SUBGRAPH = re.compile(r"^(.*_)?graph_\d+$")


def _branch_before(graph: WrapperGraph, launch: Launch, nodes_of: Callable[[Launch], tuple[str, ...]]
                   ) -> Optional[Launch]:
    return next((b for b in graph.launches[:launch.index] if any(map(_SUBGRAPH.match, nodes_of(b)))), None)


def _after_branch(launch: Launch, bad: list[str], made: dict[str, Judged], branch: Launch, head: list[Fact],
                  namer: Namer) -> Culprit:
    """A kernel's output differs after a branch of torch.cond (or another subgraph) ran: the wrapper runs the
    branch's launches in a block whose buffers the walk does not follow (a miscompile there reaches the next kernel
    as an input the walk never saw differ)."""
    return _unseen(launch, bad, made, head, namer, "it runs after {branch}, a launch inside a branch of torch.cond or "
                   "another subgraph, whose buffers the walk does not follow: what the branch wrote",
                   branch=kernel(branch.name))


def _lead(launch: Launch, bad: list[str], made: dict[str, Judged], later: tuple[Launch, ...], head: list[Fact],
          namer: Namer) -> Culprit:
    """A kernel's output differs, but launches no printer wraps ran after it on the GPU: a stray store of theirs
    into that buffer looks exactly like a wrong kernel (seen on an H100: a user kernel's row store 1 MiB past its
    own tensor changed a correct gelu's output)."""
    return _unseen(launch, bad, made, head, namer, "{later:, } ran after it, which no printer wraps (a user Triton "
                   "kernel or custom op): a stray store of theirs into that buffer",
                   later=tuple(kernel(l.name) for l in later))


def _unseen(launch: Launch, bad: list[str], made: dict[str, Judged], head: list[Fact], namer: Namer, but: str,
            **values: Arg) -> Culprit:
    """A kernel's output differs, but something the walk cannot see (`but`, a template over `values`) would look
    the same: where the gap appears, said; nothing convicted."""
    return Culprit(CulpritKind.UNKNOWN, evidence=[fact(
        FactKind.UNVERIFIED, "{kernel}'s output {output}, but " + but + " would look exactly like this, so it is "
        "where the gap appears, not a conviction", kernel=kernel(launch.name),
        output=made[bad[0]].describe(namer.var(bad[0])), **values), *head])


def _bad_read(graph: WrapperGraph, launch: Launch, var: str, j: Judged, head: list[Fact], namer: Namer) -> Culprit:
    storage = graph.storage(var)
    if graph.is_model_input(var):
        idx = graph.inputs.index(storage)
        who = namer.input(idx, storage)
        c = Culprit(CulpritKind.MODEL_INPUT, input_index=idx, input_name=storage, user_name=who.user_name)
        what = fact(FactKind.EAGER, "{who:phrase}", who=who)
        why = "the package read it otherwise than the script passed it (strides, a copy, or an earlier write)"
    elif graph.is_constant(var):
        who = namer.constant(storage)
        c = Culprit(CulpritKind.CONSTANT, input_name=storage, user_name=who.user_name)
        what = fact(FactKind.EAGER, "{who:phrase}", who=who)
        why = "the package's state differs from the program's (a buffer not written back, or written twice)"
    else:
        c = Culprit(CulpritKind.OUTSIDE_INSTRUMENTED_KERNELS)
        what = fact(FactKind.EAGER, "{who}", who=namer.var(var))
        why = "its producer wrote it as eager computes it, so it changed between the launches"
    c.summary = fact(FactKind.EAGER, "{kernel} read {what} as {judged}: {why}", kernel=kernel(launch.name), what=what,
                     judged=j.describe(None), why=why)
    c.evidence = [c.summary, *head]
    return c


def _no_walk(walk: EagerWalk) -> Fact:
    if walk.status == "agree" and walk.born is not None:
        b = walk.born
        return fact(FactKind.EAGER, "the package's outputs agree with eager on every call compared ({calls}), and "
                    "eager makes the same non-finite values: they first appear at node {node} ({op}{where}) from "
                    "finite inputs, the model's own arithmetic, which the compiled code reproduces",
                    calls=walk.calls, node=eager_name(b.node), op=b.target,
                    where=f", {b.line.describe()}" if b.line else "")
    if walk.status == "agree":
        return fact(FactKind.EAGER, "the package's outputs agree with eager on every call compared ({calls}): the "
                    "script's check fails on something the exported program does not hold (the module's state "
                    "changed since the export, or code outside the compiled model)", calls=walk.calls)
    return fact(FactKind.EAGER, "no eager comparison: {why}", why=walk.problem or walk.status)
