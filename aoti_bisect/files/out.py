"""The --out folder: where a command writes when none is given, made and checked writable, claimed by one run for
good (an O_EXCL lock file) or locked while a night runs (flock); a full or read-only disk is said as such."""
from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import fcntl
import os
import tempfile
from collections.abc import Iterator
from typing import Optional

from ..exits import EXIT_INCONCLUSIVE, EXIT_USAGE, UsageFailure
from ..text import printable
from .own import own


def default_out(prefix: str) -> str:
    """Where a command writes when --out is not given: a new folder under ./aoti-bisect-runs/."""
    return os.path.join("aoti-bisect-runs", prefix + _dt.datetime.now().strftime("%Y%m%d-%H%M%S-%f"))


def prepare_out(out: str, option: str = "--out") -> str:
    """A writable folder, created if need be; shared use is allowed (shards of one night share one)."""
    path = _made(out, option)
    try:
        fd, probe = tempfile.mkstemp(dir=path, prefix=".writable")  # O_EXCL: never through a planted link
        os.close(fd)
        os.remove(probe)
    except OSError as exc:
        raise out_failure(option, path, exc)
    return path


def _made(out: str, option: str) -> str:
    path = os.path.realpath(out)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise out_failure(option, path, exc)
    return path


# The disk's state, not the command line's: a full, over-quota, read-only or failing disk. `git bisect run` must
# skip the commit (125); a folder the user cannot write (EACCES) or a file in the way is the command line (2).
DISK_FAULTS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO)


def out_failure(option: str, path: str, exc: OSError) -> UsageFailure:
    return UsageFailure(f"cannot write to {option} {path}: {exc.strerror}",
                        EXIT_INCONCLUSIVE if exc.errno in DISK_FAULTS else EXIT_USAGE)


# Claims a run directory: created with O_EXCL and never removed, so a second run (at the same time or
# later) cannot share the folder.
LOCK_NAME = ".aoti-bisect.lock"


def claim_out(out: str) -> str:
    """A run directory of our own: new or empty, and locked against every other run, now and later.

    The lock is taken before the folder is looked at, so two runs started at once cannot both find it empty. It is
    also the folder's write probe: a probe file beside it would look to a second claimer like a folder in use, and
    both racers would be refused.
    """
    path = _made(out, "--out")
    lock = os.path.join(path, LOCK_NAME)
    try:
        fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    except FileExistsError:
        raise UsageFailure(f"--out {path} already holds an aoti-bisect run (running or finished); "
                           "give a new or empty folder")
    except OSError as exc:
        raise out_failure("--out", path, exc)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(f"{os.getpid()}\n")
    except OSError:
        pass  # the pid only informs a person; a full disk is said, with what was gathered, by the run itself
    others = sorted(set(os.listdir(path)) - {LOCK_NAME})
    if others:
        os.remove(lock)
        raise UsageFailure(f"--out {path} is not empty (it holds {others[0]!r}{' and more' if others[1:] else ''}); "
                           "give a new or empty folder")
    return path


def release_empty_claim(path: Optional[str]) -> None:
    """Called when a command stops (Ctrl-C) before its run wrote anything: a folder holding only our lock is
    given back, or that --out could never be used again ("already holds an aoti-bisect run")."""
    if not path:
        return
    lock = os.path.join(path, LOCK_NAME)
    try:
        if os.listdir(path) != [LOCK_NAME]:
            return
        with open(lock) as f:
            ours = f.read().strip() in ("", str(os.getpid()))
        if ours:
            os.remove(lock)
    except OSError:
        pass


class OutInUse(UsageFailure):
    """Another aoti-bisect process holds the lock of this --out: one line, exit 2."""


@contextlib.contextmanager
def out_lock(folder: str, name: str, shared: bool = False,
             holder: str = "another aoti-bisect process") -> Iterator[None]:
    """Holds an advisory lock (flock) on `folder/name` while the block runs; another process holding it (or,
    for `shared`, holding it exclusively) is refused at once with OutInUse, naming `holder`.

    flock, not an O_EXCL file: the kernel drops it when its holder dies, however it dies (SIGKILL, a lost node),
    so a crashed night never leaves a lock someone must find and remove. The lock file is opened without
    following a link and must be a regular file with one name; nothing is ever written into it."""
    path = os.path.join(folder, name)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UsageFailure(f"{printable(path)} is a symbolic link, not aoti-bisect's lock file (remove it)")
        raise out_failure("--out", folder, exc)
    own(fd, UsageFailure(f"{printable(path)} is a link or not a regular file, not aoti-bisect's lock file "
                          "(remove it)"))
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise OutInUse(f"--out {printable(folder)} is in use by {holder}; wait for it to end, or give another "
                       "--out")
    try:
        yield
    finally:
        os.close(fd)
