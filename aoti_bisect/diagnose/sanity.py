"""What the sanity flags' checks convict: a rejected model input, or the kernel that wrote a NaN/Inf."""
from __future__ import annotations

from typing import Optional

from ..aoti.checks import InputRejected, NanAssert, dim_rejected
from ..aoti.wrapper import WrapperGraph
from .bounds import rejected_dim
from .facts import Fact, FactKind, Namer, fact, kernel
from .findings import Culprit, CulpritKind


def sanity_culprit(hit: InputRejected | NanAssert, graph: Optional[WrapperGraph],
                   namer: Optional[Namer] = None, called_again: bool = False) -> tuple[Culprit, Fact]:
    """(culprit, the stage's finding) for a check that fired. `called_again`: the run called its model more than
    once, so a NaN in an input may be the model's own output of an earlier call fed back (a decoder's loop): not
    the input's own, and left to the walk, which reads the first call that printed a bad value."""
    namer = namer or Namer(placeholders=tuple(graph.inputs) if graph else ())
    if isinstance(hit, InputRejected):
        idx = hit.index
        name = graph.inputs[idx] if graph and idx < len(graph.inputs) else f"input {idx}"
        who = namer.input(idx, name)
        expected = graph.expected.get(name) if graph else None
        c = Culprit(CulpritKind.MODEL_INPUT, input_index=idx, input_name=name, user_name=who.user_name)
        c.evidence.append(fact(FactKind.INPUT_REJECTED, "AOTI_RUNTIME_CHECK_INPUTS rejects {input:phrase}: {what}",
                               input=who, what=hit.what))
        if expected:
            c.evidence.append(fact(FactKind.INPUT_REJECTED, "the package was compiled for {input} with sizes "
                                   "[{sizes}] and strides [{strides}]", input=who, sizes=expected[0],
                                   strides=expected[1]))
        finding = fact(FactKind.INPUT_REJECTED, "input check fired: {input:phrase}: {what}", input=who, what=hit.what)
        dim = dim_rejected(hit.what)
        if dim is not None:
            refused = rejected_dim(dim, name, graph, namer)
            c.evidence.append(refused)
            c.summary = fact(FactKind.INPUT_REJECTED, "model input {index}: {refused}", index=idx, refused=refused)
            finding = fact(FactKind.INPUT_REJECTED, "{finding}; {refused}", finding=finding, refused=refused)
        return c, finding
    if graph and graph.is_model_input(hit.var) and called_again:
        c = Culprit(CulpritKind.UNKNOWN)
        c.evidence.append(fact(FactKind.NAN_ASSERT, "TORCHINDUCTOR_NAN_ASSERTS: at least one {what} in {var}, on a "
                               "run that called the model more than once: an earlier call's output fed back in "
                               "reads the same, so the input is not convicted", what=hit.what,
                               var=namer.var(hit.var)))
        return c, c.evidence[0]
    if graph and graph.is_model_input(hit.var):
        idx = graph.inputs.index(graph.storage(hit.var))
        c = Culprit(CulpritKind.MODEL_INPUT, input_index=idx, input_name=hit.var,
                    user_name=namer.input(idx, hit.var).user_name)
    else:
        producer = graph.producer(hit.var, len(graph.launches)) if graph else None
        c = Culprit(CulpritKind.KERNEL if producer else CulpritKind.UNKNOWN, kernel=producer.name if producer else None)
    c.evidence.append(fact(FactKind.NAN_ASSERT, "TORCHINDUCTOR_NAN_ASSERTS: at least one {what} in {var}, written "
                           "by {kernel}", what=hit.what, var=namer.var(hit.var), kernel=kernel(c.kernel))
                      if c.kernel else
                      fact(FactKind.NAN_ASSERT, "TORCHINDUCTOR_NAN_ASSERTS: at least one {what} in {var}",
                           what=hit.what, var=namer.var(hit.var)))
    return c, c.evidence[0]
