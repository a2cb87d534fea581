"""Where each node of the compiled program comes from in the user's code, recorded at aoti_compile_and_package.

The exported program's call_function nodes carry the stack trace of the line that made them
(node.meta["stack_trace"], as torch.export recorded it, source text included) and the module path they ran
in (node.meta["nn_module_stack"]). Inductor names these nodes in the generated code (the wrapper's
"Topologically Sorted Source Nodes" comments, kernel_information.json's pre_grad_nodes), so aoti_bisect can
turn a kernel's node names into the user's file:line without reading any file. Nothing here imports torch.
"""

MAX_NODES = 20000
MAX_TRACE_CHARS = 2000  # a trace lists outermost frames first: the tail holds the frames that matter


def program_nodes(ep):
    """{"traces": [distinct stack traces], "nodes": [[name, target, module, trace index or None]]}."""
    traces, index, nodes = [], {}, []
    for node in ep.graph.nodes:
        if node.op != "call_function":
            continue
        if len(nodes) >= MAX_NODES:
            return {"traces": traces, "nodes": nodes, "truncated": True}
        trace = (node.meta.get("stack_trace") or "")[-MAX_TRACE_CHARS:] or None
        if trace is not None and trace not in index:
            index[trace] = len(traces)
            traces.append(trace)
        stack = node.meta.get("nn_module_stack") or {}
        # The innermost module: its path (`proj`, `layers.0.attn`) and class (`torch.nn.modules.linear.Linear`).
        path, cls = next(reversed(stack.values()), ("", ""))
        module = f"{path} ({getattr(cls, '__qualname__', None) or str(cls).rsplit('.', 1)[-1]})" if path else None
        nodes.append([node.name, str(node.target), module, index.get(trace)])
    return {"traces": traces, "nodes": nodes, "truncated": False}
