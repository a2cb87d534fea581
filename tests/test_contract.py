"""child/contract.py: the one place the names both sides of the process boundary agree on are spelled."""
import ast
import os

import aoti_bisect
from aoti_bisect.child import contract, hook

PACKAGE = os.path.dirname(aoti_bisect.__file__)


def _spelled(path):
    """The AOTI_BISECT_* string literals of a module's code (docstrings left out: they may name a variable)."""
    tree = ast.parse(open(path).read())
    docstrings = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
    return [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and "AOTI_BISECT_" in node.value and id(node) not in docstrings]


def test_every_aoti_bisect_name_is_spelled_in_the_contract_only():
    found = {}
    for folder, _, files in os.walk(PACKAGE):
        for name in files:
            path = os.path.join(folder, name)
            if name.endswith(".py") and path != contract.__file__ and _spelled(path):
                found[os.path.relpath(path, PACKAGE)] = _spelled(path)
    assert found == {}


def test_the_hook_loads_the_same_contract_by_path():
    names = {k: v for k, v in vars(contract).items() if k.isupper()}
    assert names and {k: getattr(hook.contract, k) for k in names} == names
    assert hook.contract.__name__ == "_aoti_bisect_contract"  # never shadows, nor is shadowed by, a repro's own
