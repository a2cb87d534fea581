"""Small file helpers every wing shares: bounded log reads, whole-file reads, atomic writes, the user's name."""
from __future__ import annotations

import getpass
import os

MAX_LOG_READ = 64 << 20


def read_log(path: str, limit: int = MAX_LOG_READ) -> str:
    """A child's log as text, at most `limit` bytes of it (logs are capped on disk, but not all by us)."""
    with open(path, "rb") as f:
        data = f.read(limit)
    return data.decode("utf-8", errors="replace")


def read_text(path: str) -> str:
    with open(path, errors="replace") as f:
        return f.read()


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
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
        if executable:
            os.fchmod(fd, 0o755)


def user_name() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid_{os.getuid()}"
