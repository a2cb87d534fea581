"""aoti-bisect's in-process hook, first on the repro's PYTHONPATH; it then runs the sitecustomize it shadows.

Loaded by Python's `site` at start-up. It loads the folder above as the package `_aoti_bisect_hook`, by path
(the repro's interpreter may lack aoti_bisect, and our module names must not shadow the repro's), and never
lets its own failure stop the repro.
"""
import importlib
import importlib.machinery
import importlib.util
import os
import sys


def _load(name, spec):
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _install():
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        if "_aoti_bisect_hook" not in sys.modules:
            package = os.path.dirname(here)
            hook = _load("_aoti_bisect_hook", importlib.util.spec_from_file_location(
                "_aoti_bisect_hook", os.path.join(package, "__init__.py"), submodule_search_locations=[package]))
            if os.environ.get(hook.contract.HOOK_ENV):
                importlib.import_module("_aoti_bisect_hook.recorder").install()
    except Exception as exc:  # the repro must run as it would without us; say why the record is missing
        sys.stderr.write(f"aoti-bisect hook: not installed: {type(exc).__name__}: {exc}\n")
    # The user's own sitecustomize (a venv's, a distribution's) runs next, as it would have without us.
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        del sys.modules["sitecustomize"]
        _load("sitecustomize", spec)


_install()
