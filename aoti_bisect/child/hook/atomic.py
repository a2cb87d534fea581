"""Writing a file of the run from inside the repro's process: whole or not at all, and never through a link.

The repro shares this process and its folders, so it can plant a link (symbolic or hard) at any name it can
guess, to a file of the user's; a temporary file at a fixed name (`hook.json.<pid>.tmp`) opened for writing
truncated that file and wrote the record over it. Standard library only: this runs in the repro's interpreter.
"""
import contextlib
import os


@contextlib.contextmanager
def replacing(path, mode="w"):
    """A new file to write `path`'s new contents into, renamed over `path` when the block ends without error.

    The temporary file is new (a random name, O_EXCL|O_NOFOLLOW): nothing planted is opened. os.replace swaps a
    link planted at `path` itself for our file, never writing its target. Readers see the old file or the new."""
    tmp = f"{path}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        with os.fdopen(fd, mode) as f:
            yield f
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
