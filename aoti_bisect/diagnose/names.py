"""The findings in the user's terms: model inputs by their forward's names, constants by their FQNs.

The ladder and the walk speak the generated wrapper's names (arg3_1, proj_weight); the in-process hook
recorded what the exported program calls them. Only the phrases findings.py formats are rewritten, and only
where the mapping is known (one compiled program, every name paired); elsewhere the wrapper's names stand.
"""
from __future__ import annotations

import re

from ..aoti.hook_record import Names
from .findings import Findings, constant_phrase, input_phrase


def name_findings(out: Findings, names: Names) -> None:
    c = out.culprit
    if c is None or not (names.inputs or names.constants):
        return
    if c.kind == "model_input" and c.input_name in names.inputs:
        c.user_name = names.inputs[c.input_name]
    elif c.kind == "constant" and c.input_name in names.constants:
        c.user_name = names.constants[c.input_name]
    for s in c.stats:
        if s.get("arg") in names.inputs or s.get("arg") in names.constants:
            s["user_name"] = names.inputs.get(s["arg"]) or names.constants[s["arg"]]
    out.summary = _rename(out.summary, names)
    c.summary = _rename(c.summary, names)
    c.evidence[:] = [_rename(line, names) for line in c.evidence]
    for stage in out.stages:
        stage.finding = _rename(stage.finding, names)


def _rename(text: str, names: Names) -> str:
    for index, (placeholder, user) in enumerate(names.inputs.items()):
        text = text.replace(input_phrase(index, placeholder), input_phrase(index, placeholder, user))
        # The input check's own words (`input_handles[0]: unmatched dim value ...`), as the signature quotes them.
        text = text.replace(f"input_handles[{index}]:", f"input_handles[{index}] (`{user}`):")
    for placeholder, fqn in names.constants.items():
        text = text.replace(constant_phrase(placeholder) + " ", constant_phrase(placeholder, fqn) + " ")
    # Any other mention (a tensor's stats `arg3_1: float32 ...`, a bound's "dim 0 of `arg3_1`") gains the
    # user's name beside the wrapper's; a phrase above already says "wrapper arg3_1" and is left alone.
    for placeholder, user in (names.inputs | names.constants).items():
        if user != placeholder:  # a parameter `w` is `w` in the wrapper too: nothing to add
            text = re.sub(rf"(?<!wrapper )(`?)\b{re.escape(placeholder)}\b\1",
                          lambda _, user=user, placeholder=placeholder: f"`{user}` ({placeholder})", text)
    return text
