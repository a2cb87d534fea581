"""What the sanity flags' checks convict: a rejected model input, or the kernel that wrote a NaN/Inf."""
from __future__ import annotations

from typing import Optional

from ..aoti.checks import InputRejected, NanAssert, dim_rejected
from ..aoti.wrapper import WrapperGraph
from .bounds import rejected_dim
from .findings import Culprit, input_phrase


def sanity_culprit(hit: InputRejected | NanAssert, graph: Optional[WrapperGraph]) -> tuple[Culprit, str]:
    """(culprit, the stage's finding) for a check that fired."""
    if isinstance(hit, InputRejected):
        idx = hit.index
        name = graph.inputs[idx] if graph and idx < len(graph.inputs) else f"input {idx}"
        expected = graph.expected.get(name) if graph else None
        c = Culprit("model_input", input_index=idx, input_name=name)
        c.evidence.append(f"AOTI_RUNTIME_CHECK_INPUTS rejects {input_phrase(idx, name)}: {hit.what}")
        if expected:
            c.evidence.append(f"the package was compiled for {name} with sizes [{expected[0]}] "
                              f"and strides [{expected[1]}]")
        finding = f"input check fired: {input_phrase(idx, name)}: {hit.what}"
        dim = dim_rejected(hit.what)
        if dim is not None:
            c.evidence.append(rejected_dim(dim, name, graph))
            c.summary = f"model input {idx}: {c.evidence[-1]}"
            finding += f"; {c.evidence[-1]}"
        return c, finding
    if graph and graph.is_model_input(hit.var):
        idx = graph.inputs.index(graph.storage(hit.var))
        c = Culprit("model_input", input_index=idx, input_name=hit.var)
    else:
        producer = graph.producer(hit.var, len(graph.launches)) if graph else None
        c = Culprit("kernel" if producer else "unknown", kernel=producer.name if producer else None)
    c.evidence.append(f"TORCHINDUCTOR_NAN_ASSERTS: at least one {hit.what} in {hit.var}"
                      + (f", written by {c.kernel}" if c.kernel else ""))
    return c, c.evidence[0]
