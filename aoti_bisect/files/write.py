"""Files aoti-bisect writes into a run: never through a link planted at the name (a new file, or the name unlinked
first), atomically where a reader may look meanwhile, in UTF-8; the saved traceback of an internal error; and the
user's name, which the per-user folders (torchinductor_<user>) carry."""
from __future__ import annotations

import getpass
import os
import sys
import traceback
from typing import Optional

from ..exits import EXIT_INTERNAL


def valid_utf8(text: str) -> str:
    """Text that encodes as UTF-8: a name that is not UTF-8 (kept by Python as lone surrogates) is shown as
    its escape (`\\udcff`) instead of writing its raw bytes into a file a renderer or CI parser must read."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def atomic_write(path: str, text: str) -> None:
    """Readers see the old file or the new one, never half of one (a report, a summary).

    The temporary file is new (O_EXCL, a random name), so a link planted under a fixed name is never written
    through; os.replace swaps a link at `path` itself for the file, never its target.
    """
    tmp = os.path.join(os.path.dirname(path) or ".", f".{os.path.basename(path)}.{os.urandom(4).hex()}.tmp")
    try:
        _write(tmp, text, os.O_EXCL)
        os.replace(tmp, path)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise


def write_file(path: str, text: str, executable: bool = False) -> None:
    """Creates or truncates `path` in a run directory, never through a symbolic link (that raises OSError)."""
    _write(path, text, os.O_TRUNC, executable)


def _write(path: str, text: str, flags: int, executable: bool = False) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | flags, 0o777 if executable else 0o666)
    # Python keeps argv bytes that are not UTF-8 (and such file names) as lone surrogates; surrogateescape
    # writes those bytes back as they were (rerun.sh must run the same argv), where strict UTF-8 crashed the run.
    with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as f:
        f.write(text)
        if executable:
            os.fchmod(fd, 0o755)


def unlink_stale(path: str) -> None:
    """Removes whatever stands at `path` before a new file is made there with O_EXCL. A repro can plant a link
    (symbolic, or hard: then O_NOFOLLOW does not see it) at a name aoti-bisect is about to write, to a file of
    the user's; truncating it would destroy that file. Unlinking removes only the name; O_EXCL then refuses a
    link planted again in between."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def write_new(path: str, text: str, executable: bool = False) -> None:
    """write_file into a new file: what stood at `path` (an earlier version, a planted link) is replaced,
    never written through."""
    unlink_stale(path)
    _write(path, text, os.O_EXCL, executable)


def report_crash(exc: BaseException, run_dir: Optional[str]) -> int:
    """An uncaught exception: one line on stderr and EXIT_INTERNAL. The traceback is saved in the run
    directory; before there is one, it follows the line on stderr (nothing is written outside a run)."""
    text = "".join(traceback.format_exception(exc))
    line = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
    where = "traceback below"
    if run_dir and os.path.isdir(run_dir):
        path = os.path.join(run_dir, "crash-traceback.txt")
        try:
            # A new file renamed into place: a link the repro planted at the name is replaced, never written through.
            atomic_write(path, text)
            where, text = f"traceback saved in {path}", ""
        except OSError as write_error:
            where = f"traceback not saved ({write_error.strerror}), below"
    print(f"aoti-bisect: internal error: {line}; {where}; please report it", file=sys.stderr)
    if text:
        print(text, file=sys.stderr, end="")
    return EXIT_INTERNAL


def user_name() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid_{os.getuid()}"
