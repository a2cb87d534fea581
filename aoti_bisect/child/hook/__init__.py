"""The in-process hook: code the repro's own interpreter runs at start-up, through `sitecustomize`.

The harness puts SITE_DIR first on a run's PYTHONPATH and names the record's path in AOTI_BISECT_HOOK
(run/harness.py). SITE_DIR holds nothing but `sitecustomize.py`, so no module of ours can shadow one of the
repro's; that file loads this folder by path as the package `_aoti_bisect_hook` and calls recorder.install().
Its modules therefore import only the standard library and each other (relatively), never aoti_bisect or torch
at import time. Importing this package imports no torch (nor anything else).
"""
import os

ENV = "AOTI_BISECT_HOOK"
REUSE_ENV = "AOTI_BISECT_REUSE"  # the flag set's package folder (reuse.py)
FLAG_SET_ENV = "AOTI_BISECT_FLAG_SET"
# Set for the diagnostic stages only: reading a package's constants opens a second container, whose copy of the
# weights lands in the repro's own allocator (on a GPU, its caching allocator), which a baseline that carries
# the hook only for reuse must not see.
CONSTANTS_ENV = "AOTI_BISECT_CONSTANTS"
# A run that only compiles ahead for a later stage (run/harness.py): the process ends at its first package load,
# once every compile before it has stored its package for the flag set's later runs (reuse.py).
AHEAD_ENV = "AOTI_BISECT_AHEAD"
VEC_ISA_ENV = "AOTI_BISECT_VEC_ISA"  # where the first run with torch's vector-ISA answer writes it (vecisa.py)
LOADED = "hook.loaded"  # left beside the record when the hook installs: its absence says it never ran
SITE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sitedir")
