"""The repro's command line: SCRIPT or --cmd, the interpreter that runs it, each checked before any run.

A fault of the script itself (missing, unreadable, not Python at this commit) is EXIT_INCONCLUSIVE, so that
`git bisect run` skips the commit; a fault of the command line is a usage error (2), the same at every commit.
"""
from __future__ import annotations

import difflib
import os
import shlex
import shutil
import stat
import sys
from collections.abc import Iterable
from typing import Optional

from .exits import EXIT_INCONCLUSIVE, UsageFailure

# A repro is a script someone reads; beyond this it is a data file or a device, not a script.
MAX_SCRIPT_BYTES = 64 << 20


def validate_script(script: str, syntax: bool = True) -> None:
    """Only a regular file, read with a bound: a FIFO would block the open, /dev/zero never ends.

    A script that cannot run at this commit (missing, unreadable, not Python) says 125, not 2: under
    `git bisect run` it is the commit's state, like a build that failed. `syntax` is off when the repro runs
    in another interpreter (--python), whose grammar may differ from ours: its own run then says."""
    def cannot(message: str) -> UsageFailure:
        return UsageFailure(message, EXIT_INCONCLUSIVE)

    try:
        fd = os.open(script, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise cannot(f"no such file: {script}")
    except OSError as exc:
        raise cannot(f"cannot read {script}: {exc.strerror}")
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise cannot(f"{script} is a directory, not a Python script")
        if not stat.S_ISREG(st.st_mode):
            raise UsageFailure(f"{script} is not a regular file (a pipe or a device cannot be rerun)")
        if st.st_size > MAX_SCRIPT_BYTES:
            raise UsageFailure(f"{script} is too large for a Python script ({st.st_size >> 20} MiB; the limit "
                               f"is {MAX_SCRIPT_BYTES >> 20} MiB)")
        source = os.read(fd, MAX_SCRIPT_BYTES) if syntax else b""  # a regular file: one read returns all
    except OSError as exc:
        raise cannot(f"cannot read {script}: {exc.strerror}")
    finally:
        os.close(fd)
    if not syntax:
        return
    try:
        compile(source, script, "exec")
    except SyntaxError as exc:
        if not script.endswith(".py") and (b"\0" in source or exc.lineno in (None, 1)):
            raise cannot(f"{script} is not a Python script")
        raise cannot(f"{script}:{exc.lineno}: syntax error: {exc.msg}")
    except ValueError:
        raise cannot(f"{script} is not a Python script (it contains NUL bytes)")


def validate_python(python: str) -> str:
    """--python as an absolute path (runs have a private cwd), not resolved: a venv's python is a symlink
    whose target would lose the venv.

    A --python that is missing or does not run is 125, not 2: the README's recipe builds a venv per commit, and
    a commit whose venv failed to build must be skipped by `git bisect run`, not marked bad (2 is bad to git)."""
    def cannot(message: str) -> UsageFailure:
        return UsageFailure(message, EXIT_INCONCLUSIVE)

    path = shutil.which(python) if os.sep not in python else python
    if not path or not os.path.exists(path):
        raise cannot(f"--python {python}: no such file")
    if os.path.isdir(path) or not os.access(path, os.X_OK):
        raise cannot(f"--python {python} is not an executable file")
    return os.path.abspath(path)


def check_python_runs(python: str, run_dir: str) -> None:
    from .files.own import read_log
    from .run import process

    log = os.path.join(run_dir, "python-check.log")
    exit = process.execute([python, "-c", "import sys; print(sys.version_info[0])"], dict(os.environ), run_dir,
                           log, timeout=60)
    if exit.returncode != 0 or read_log(log).strip() != "3":
        raise UsageFailure(f"--python {python} does not run as Python 3 (exit {exit.returncode}); see {log}",
                           EXIT_INCONCLUSIVE)


def unknown_word(word: str, commands: list[str]) -> Optional[str]:
    """The usage error for a first word that is neither a command nor a script: `aoti-bisect scenario list`
    meant `scenarios`, and must not become a missing script (125, skip) that `git bisect run` skips at every
    commit. A word with no path separator and no dot that names no file is taken for a command."""
    if os.sep in word or "." in word or word.startswith("-") or os.path.lexists(word):
        return None
    close = difflib.get_close_matches(word, commands, n=1, cutoff=0.6)
    hint = f"did you mean `{close[0]}`?" if close else f"commands: {', '.join(sorted(commands))}"
    return f"no such command or script: {word!r}; {hint} (a script in this folder: ./{word})"


def repro_argv(script: Optional[str], script_args: tuple[str, ...], cmd: Optional[str],
          python: Optional[str] = None) -> list[str]:
    if cmd and script:
        raise UsageFailure("give either SCRIPT or --cmd, not both")
    if cmd:
        try:
            argv = shlex.split(cmd)
        except ValueError as exc:
            raise UsageFailure(f"cannot split --cmd: {exc}")
        if not argv:
            raise UsageFailure("--cmd is empty")
        if shutil.which(argv[0]) is None and not os.path.isfile(argv[0]):
            raise UsageFailure(f"command not found: {argv[0]}", EXIT_INCONCLUSIVE)
        # A bare name (`python`, `torchrun`) is looked up on PATH, as a shell would; a path is the user's.
        head = os.path.abspath(argv[0]) if os.sep in argv[0] else argv[0]
        return [head, *absolute_paths(argv[1:])]
    if not script:
        raise UsageFailure("missing SCRIPT (or --cmd); see --help")
    validate_script(script, syntax=python is None)
    return [python or sys.executable, os.path.abspath(script), *absolute_paths(script_args)]


def absolute_paths(args: Iterable[str]) -> list[str]:
    """Every run has a private working directory, so an argument naming an existing file or folder relative to
    the user's directory would miss it there: such arguments become absolute. `--opt=path` forms stay as given."""
    return [os.path.abspath(a) if a and not os.path.isabs(a) and os.path.exists(a) else a for a in args]
