"""Small file helpers every wing shares: bounded log reads, whole-file reads, atomic writes, the user's name."""
from __future__ import annotations

import getpass
import os

from .exits import UsageFailure

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
    """Readers see the old file or the new one, never half of one (a report, a summary)."""
    tmp = os.path.join(os.path.dirname(path) or ".", f".{os.path.basename(path)}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def user_name() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid_{os.getuid()}"


def prepare_out(path: str) -> str:
    """Makes the run folder and proves it writable before any work goes into it; returns its absolute path."""
    path = os.path.abspath(path)
    try:
        os.makedirs(path, exist_ok=True)
        probe = os.path.join(path, ".writable")
        with open(probe, "w"):
            pass
        os.remove(probe)
    except OSError as exc:
        raise UsageFailure(f"cannot write to --out {path}: {exc.strerror}")
    return path
