"""The in-process hook: code the repro's own interpreter runs at start-up, through `sitecustomize`.

The harness puts SITE_DIR first on a run's PYTHONPATH and names the record's path in contract.HOOK_ENV
(run/environment.py). SITE_DIR holds nothing but `sitecustomize.py`, so no module of ours can shadow one of the
repro's; that file loads this folder by path as the package `_aoti_bisect_hook` and calls recorder.install().
Its modules therefore import only the standard library and each other (relatively), never aoti_bisect or torch
at import time; they take the names both sides agree on from `contract` here. Importing this package imports no
torch (nor anything else).
"""
import importlib.util
import os
import sys

SITE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sitedir")


def _load_contract():
    """../contract.py, by path and under a private name: as `_aoti_bisect_hook` this package has no parent to
    import it from, and the repro may have a module of its own called `contract`."""
    name = "_aoti_bisect_contract"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "contract.py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[name] = module
    return sys.modules[name]


contract = _load_contract()
