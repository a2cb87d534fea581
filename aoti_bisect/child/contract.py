"""What both sides of the process boundary agree on: the AOTI_BISECT_* environment variables aoti-bisect sets
for a run (and the repro's process, through the hook, reads), the marker lines the child scripts print, and the
files the hook leaves in a run's folder for the parent to read.

The one place these are spelled. Standard library only, importing nothing: the parent imports it as
`aoti_bisect.child.contract`; the hook (hook/__init__.py) and the scripts run by the repro's interpreter
(probe.py, registry.py, loads.py) load it by path, since that interpreter may lack aoti_bisect.
"""

# -- the environment of a run --------------------------------------------------------------------------------
HOOK_ENV = "AOTI_BISECT_HOOK"  # the hook record's path; its folder is the run's folder (recorder.py)
REUSE_ENV = "AOTI_BISECT_REUSE"  # the flag set's package folder (hook/reuse.py)
FLAG_SET_ENV = "AOTI_BISECT_FLAG_SET"  # the flag set's compile key, kept with each package stored for reuse
# Set for the diagnostic stages only: reading a package's constants opens a second container, whose copy of the
# weights lands in the repro's own allocator (on a GPU, its caching allocator), which a baseline that carries
# the hook only for reuse must not see.
CONSTANTS_ENV = "AOTI_BISECT_CONSTANTS"
# A run that only compiles ahead for a later stage (run/scheduler.py): the process ends at its first package load,
# once every compile before it has stored its package for the flag set's later runs (hook/reuse.py).
AHEAD_ENV = "AOTI_BISECT_AHEAD"
VEC_ISA_ENV = "AOTI_BISECT_VEC_ISA"  # where the first run with torch's vector-ISA answer writes it (hook/vecisa.py)
REDIRECT_ENV = "AOTI_BISECT_REDIRECT"  # the JSON {sha256: copy} the hook loads instrumented copies from
CAPTURE_ENV = "AOTI_BISECT_CAPTURE"  # "1": capture the program and the compiled model's calls (hook/capture.py)
FAKECHECK_ENV = "AOTI_BISECT_FAKECHECK"  # "1": check custom ops' fake functions before each call
MAX_CAPTURE_MB_ENV = "AOTI_BISECT_MAX_CAPTURE_MB"  # tensors over this, in all, are not saved (default 512)
EAGER_WALK_ENV = "AOTI_BISECT_EAGER_WALK"  # "1": compare a level-1 wrapper's saved tensors with eager values
TF32_OFF_ENV = "AOTI_BISECT_TF32_OFF"  # "1": compile with TF32 matmuls off (the precision stage's control)
RUN_INDEX_ENV = "AOTI_BISECT_RUN_INDEX"  # a repro may seed its randomness per run from this
RUN_MARK = "AOTI_BISECT_RUN"  # <token> in every process of a run: whose an orphan is (run/process.py)
# Where the preloaded crash witness (run/witness.c, which spells it again) appends a crashing process's native stack.
CRASH_FILE_ENV = "AOTI_BISECT_CRASH_FILE"
DB_ENV = "AOTI_BISECT_DB"  # the user's, not a run's: the nightly history database (cli.py)
HEADERS_ENV = "AOTI_BISECT_HEADERS"  # the user's: one folder of precompiled headers for every run (run/layout.py)

# -- the lines a child script prints, each followed by a space and its JSON answer (LOADED alone) -------------
PROBE_MARK = "AOTI_BISECT_PROBE"  # probe.py
REGISTRY_MARK = "AOTI_BISECT_REGISTRY"  # registry.py
LOADED_MARK = "AOTI_BISECT_LOADED"  # loads.py: the package loaded

# -- what the hook leaves in a run's folder ------------------------------------------------------------------
HOOK_RECORD = "hook.json"  # beside output.log; a second recording process writes hook-<pid>.json
HOOK_LOADED = "hook.loaded"  # left when the hook installs: its absence says it never ran
CAPTURE_DIR = "capture"  # the program, the calls' inputs, and CAPTURE_RECORD
CAPTURE_RECORD = "capture.json"
CAPTURE_LIBS = "libs"  # in CAPTURE_DIR: a copy of each shared library that registers a custom op of the program
FAKECHECK_RESULT = "fakecheck.json"
DIFFERENTIAL_RESULT = "differential.json"  # the package's outputs of the first call against eager's
EAGER_WALK_RESULT = "eager_walk.json"
CRASH_FILE = "crash-stack.txt"  # beside output.log: the native stack of each process of the run that crashed
