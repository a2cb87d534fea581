"""What a child wrote into a run (logs, the hook's records, generated sources), read only as the run's own file: a
regular file with one name, opened without following a link, capped in size, its JSON checked for depth and lone
surrogates. A repro can plant a link at any of these names to a file of the user's; nothing read here follows one,
so no such file reaches a report, a summary or a bundle member."""
from __future__ import annotations

import errno
import json
import os
import re
import stat
from typing import Any, BinaryIO

MAX_LOG_READ = 64 << 20


LINKED_LOG = "[aoti-bisect: this log was replaced by a link (symbolic or hard) during the run; not read]\n"


def read_log(path: str, limit: int = MAX_LOG_READ) -> str:
    """A child's log as text, at most `limit` bytes of it (logs are capped on disk, but not all by us).

    A log the repro replaced by a link (symbolic or hard: open_own) is not read: its target is some other file
    of the user's, which no verdict, report or bundle may quote. Other errors (missing) raise OSError."""
    try:
        fd = open_own(path)
    except NotOwnFile:
        return LINKED_LOG
    with os.fdopen(fd, "rb") as f:
        data = f.read(limit)
    return data.decode("utf-8", errors="replace")


class NotOwnFile(OSError):
    """A run file that is a link (symbolic or hard), or no regular file: never read into a report or bundle."""


def open_own(path: str) -> int:
    """A file descriptor on a run's own file: a regular file with one name. A repro can replace its log (or any
    file of its run folder) by a symbolic link, or a hard link, to a file of the user's (~/.ssh/id_rsa): O_NOFOLLOW
    refuses the first, the link count the second. O_NONBLOCK: a FIFO put there must not block the open."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # O_NOFOLLOW on a symbolic link
            raise NotOwnFile(errno.ELOOP, "a symbolic link: left out", path)
        raise
    return own(fd, NotOwnFile(errno.EPERM, "a link or not a regular file: left out", path))


def own(fd: int, refusal: Exception) -> int:
    """fd, if it is a regular file with one name; else it is closed and `refusal` raised."""
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            raise refusal
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_own_text(path: str, limit: int = -1) -> str:
    """read_text of a run's own file (open_own): raises OSError (NotOwnFile) for a link."""
    with os.fdopen(open_own(path), "rb") as f:
        return f.read(limit).decode("utf-8", errors="replace")


class TooLarge(OSError):
    """A run file over the size its reader takes: a child can write any amount (a sparse file of a GiB costs it
    nothing), and no reader may hold more than its cap."""


def read_run_file(path: str, limit: int) -> str:
    """The text of a file a child wrote into a run (a record, a generated source): open_own's rule (no link, a
    regular file), at most `limit` bytes (TooLarge past it, never a truncated record read as whole), decoded as
    UTF-8 with errors replaced. Raises OSError (NotOwnFile, TooLarge, FileNotFoundError)."""
    with os.fdopen(open_own(path), "rb") as f:
        blob = read_capped(f, limit, path)
    return blob.decode("utf-8", errors="replace")


def read_capped(f: BinaryIO, limit: int, path: str) -> bytes:
    """At most `limit` bytes of an open file, TooLarge past them: its size is asked first (a sparse GiB costs a
    child nothing and would cost us a GiB), then at most one byte more is read, for a file still growing."""
    too_large = TooLarge(errno.EFBIG, f"over {limit >> 20} MiB: not read", path)
    if os.fstat(f.fileno()).st_size > limit:
        raise too_large
    blob = f.read(limit + 1)
    if len(blob) > limit:
        raise too_large
    return blob


def read_child_json(path: str, limit: int) -> Any:
    """read_run_file's JSON (loads_child_json): OSError for a file that cannot be read, ValueError for one that
    is no JSON aoti-bisect's child writes."""
    return loads_child_json(read_run_file(path, limit))


def loads_child_json(text: str) -> Any:
    """JSON a child wrote (the hook's records): ValueError, as for any malformed JSON, for JSON nested past
    MAX_JSON_DEPTH or past the interpreter's recursion (json.loads raises RecursionError there), so the reader's
    one problem line for a damaged file covers it too and the repro cannot end a bisection with 255."""
    try:
        data = json.loads(text)
    except RecursionError:
        raise ValueError("nested past Python's recursion limit: not a file aoti-bisect wrote")
    if json_depth(data) > MAX_JSON_DEPTH:  # deep enough to overflow whatever walks it next (the redactor, renderers)
        raise ValueError(f"nested over {MAX_JSON_DEPTH} levels deep: not a file aoti-bisect wrote")
    return no_surrogates(data) if _ESCAPED_SURROGATE.search(text) else data


# What aoti-bisect itself writes is at most a few levels deep; more is not ours, and a deeper structure would
# overflow the recursion of whatever walks it (the redactor, the renderers).
MAX_JSON_DEPTH = 64


def json_depth(value: object) -> int:
    """How deep JSON nests, counted without recursion (the point is that recursion could overflow)."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        value, level = todo.pop()
        deepest = max(deepest, level)
        if deepest > MAX_JSON_DEPTH:
            break
        if isinstance(value, dict):
            todo += [(v, level + 1) for v in value.values()]
        elif isinstance(value, list):
            todo += [(v, level + 1) for v in value]
    return deepest


# Where no \uD800-\uDFFF escape is, json.loads made no surrogate: the walk below is skipped (files of 64 MiB).
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")


ESCAPED_SURROGATE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]")


_SURROGATE = re.compile("[\ud800-\udfff]")


def no_surrogates(value: Any) -> Any:
    """JSON's `\\ud800` escape decodes to a lone surrogate, which no terminal, file or renderer can encode (print
    raised): at the boundary each becomes U+FFFD, in keys and values. Called on data nested at most
    MAX_JSON_DEPTH deep (checked first), so the recursion is bounded."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [no_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {no_surrogates(k): no_surrogates(v) for k, v in value.items()}
    return value


def read_text(path: str) -> str:
    with open(path, errors="replace") as f:
        return f.read()
