"""Small file helpers every wing shares: bounded log reads, whole-file reads, atomic writes, the user's name, the
guarded reads and writes of a run folder (RunFolder) that report and minify make, and the saved traceback of an
internal error (report_crash)."""
from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import fcntl
import getpass
import json
import os
import re
import shutil
import stat
import sys
import tempfile
import traceback
from collections.abc import Iterator
from typing import Any, BinaryIO, Optional

from .exits import EXIT_INCONCLUSIVE, EXIT_INTERNAL, EXIT_USAGE, UsageFailure
from .text import printable

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
    return _own(fd, NotOwnFile(errno.EPERM, "a link or not a regular file: left out", path))


def _own(fd: int, refusal: Exception) -> int:
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
        blob = _read_capped(f, limit, path)
    return blob.decode("utf-8", errors="replace")


def _read_capped(f: BinaryIO, limit: int, path: str) -> bytes:
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


def read_text(path: str) -> str:
    with open(path, errors="replace") as f:
        return f.read()


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


class RunFolderError(UsageFailure):
    """A run folder file that is not what aoti-bisect wrote there (a link, no regular file, too big, not UTF-8,
    not JSON, nested past reason, of a newer schema): one line, exit 2, the same at every commit."""

    def __init__(self, message: str) -> None:
        # One line whatever the names in it hold: a file name may carry a newline or an escape sequence.
        super().__init__(printable(message).replace("\n", "\\n").replace("\t", "\\t"))


# What aoti-bisect itself writes is at most a few levels deep and some MB; more is not ours, and a deeper
# structure would overflow the recursion of whatever walks it (the redactor, the renderers).
MAX_JSON_BYTES = 64 << 20
MAX_JSON_DEPTH = 64


class RunFolder:
    """The files of one run folder, reached only through real folders inside it: no component of a path under
    the folder may be a symbolic link, and no read or write leaves it. A repro (or whoever sent the folder) can
    plant a link at any name in it; every read and write of report and minify goes through here, so none
    follows one. The folder itself is the user's argument, taken as given (resolved once)."""

    def __init__(self, root: str) -> None:
        self.root = os.path.realpath(root)

    def path(self, rel: str) -> str:
        return os.path.join(self.root, rel)

    def read_json(self, rel: str, limit: int = MAX_JSON_BYTES) -> dict:
        """A JSON object from a regular file of the folder; RunFolderError in one line for anything else."""
        where = self.path(rel)
        try:
            blob = self.read_bytes(rel, limit)
        except TooLarge:
            raise RunFolderError(f"{where} is over {limit >> 20} MiB: not a file aoti-bisect wrote")
        try:
            data = json.loads(blob.decode("utf-8"))
        except UnicodeDecodeError:
            raise RunFolderError(f"{where} is not UTF-8 text: not a file aoti-bisect wrote")
        except (ValueError, RecursionError) as exc:
            raise RunFolderError(f"{where} is not valid JSON: {' '.join(str(exc).split())[:200]}")
        if not isinstance(data, dict):
            raise RunFolderError(f"{where} holds a JSON {type(data).__name__}, not an object")
        if _depth(data) > MAX_JSON_DEPTH:
            raise RunFolderError(f"{where} is nested over {MAX_JSON_DEPTH} levels deep: not a file aoti-bisect wrote")
        return no_surrogates(data) if _ESCAPED_SURROGATE_BYTES.search(blob) else data

    def read_bytes(self, rel: str, limit: int) -> bytes:
        """The bytes of a regular file of the folder: TooLarge over `limit` (never read past it), RunFolderError
        for a link or a missing file."""
        try:
            fd = self._open(rel, os.O_RDONLY | os.O_NONBLOCK)
        except FileNotFoundError:
            raise RunFolderError(f"{self.path(rel)} does not exist")
        with os.fdopen(fd, "rb") as f:
            return _read_capped(f, limit, self.path(rel))

    def is_file(self, rel: str) -> bool:
        """A regular file of the folder's own, reached through real folders (a link anywhere on the way: False)."""
        try:
            os.close(self._open(rel, os.O_RDONLY | os.O_NONBLOCK))
            return True
        except (OSError, RunFolderError):
            return False

    def write_text(self, rel: str, text: str) -> str:
        """Replaces the file at `rel` atomically: a new file (O_EXCL, never through a link, never into a hard
        link's other name) renamed over whatever was there. Returns its path."""
        folder, name = _split(rel)
        dir_fd = self._open_dir(folder, create=True)
        tmp = f".{name}.{os.urandom(4).hex()}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666,
                         dir_fd=dir_fd)
            with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as f:
                f.write(text)
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=dir_fd)
            except OSError:
                pass
            raise
        finally:
            os.close(dir_fd)
        return self.path(rel)

    def folder(self, rel: str) -> str:
        """The path of a real folder at `rel`, made where missing; a link or a file in its place is refused."""
        os.close(self._open_dir(rel, create=True))
        return self.path(rel)

    def remove(self, rel: str) -> None:
        """Removes `rel`, a file or a whole folder, without following a link: a link is removed, not its target."""
        folder, name = _split(rel)
        dir_fd = self._open_dir(folder)
        try:
            st = os.lstat(name, dir_fd=dir_fd)
            if stat.S_ISDIR(st.st_mode):
                shutil.rmtree(name, dir_fd=dir_fd)  # fd-based on Linux: it never descends through a link
            else:
                os.unlink(name, dir_fd=dir_fd)
        except FileNotFoundError:
            pass
        finally:
            os.close(dir_fd)

    def _open(self, rel: str, flags: int) -> int:
        """A file descriptor on a regular file with one name (open_own's rule), under real folders only."""
        folder, name = _split(rel)
        dir_fd = self._open_dir(folder)
        try:
            fd = os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        except OSError as exc:
            raise self._refused(rel, exc)
        finally:
            os.close(dir_fd)
        return _own(fd, RunFolderError(f"{self.path(rel)} is a link or not a regular file: not read"))

    def _open_dir(self, rel: str, create: bool = False) -> int:
        try:
            fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise RunFolderError(f"{self.root}: not a folder ({exc.strerror})")
        for i, part in enumerate(_parts(rel)):
            try:
                if create:
                    try:
                        os.mkdir(part, dir_fd=fd)
                    except FileExistsError:
                        pass
                child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except OSError as exc:
                raise self._refused(os.path.join(*_parts(rel)[: i + 1]), exc)
            finally:
                os.close(fd)
            fd = child
        return fd

    def _refused(self, rel: str, exc: OSError) -> Exception:
        """A link or a file where a folder or a file of ours should be is the folder's content (2), one line;
        a missing file stays FileNotFoundError; the disk's faults stay what they are."""
        if exc.errno == errno.ELOOP:
            return RunFolderError(f"{self.path(rel)} is a symbolic link: not followed (remove it)")
        if exc.errno == errno.ENOTDIR:
            return RunFolderError(f"{self.path(rel)} is not a folder (a file or a link stands where aoti-bisect "
                                  "keeps one): not followed (remove it)")
        return exc


def _parts(rel: str) -> list[str]:
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if os.path.isabs(rel) or ".." in parts or "\0" in rel:
        raise RunFolderError(f"{rel!r} is not a path inside the run folder: not read")
    return parts


def _split(rel: str) -> tuple[str, str]:
    """(folder, name) of a file's path inside the run folder, checked as _parts checks it."""
    parts = _parts(rel)
    if not parts:
        raise RunFolderError(f"{rel!r} names no file inside the run folder: not read")
    return "/".join(parts[:-1]), parts[-1]


def _depth(value: object) -> int:
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


def user_name() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid_{os.getuid()}"


def default_out(prefix: str) -> str:
    """Where a command writes when --out is not given: a new folder under ./aoti-bisect-runs/."""
    return os.path.join("aoti-bisect-runs", prefix + _dt.datetime.now().strftime("%Y%m%d-%H%M%S-%f"))


def prepare_out(out: str, option: str = "--out") -> str:
    """A writable folder, created if need be; shared use is allowed (shards of one night share one)."""
    path = os.path.realpath(out)
    try:
        os.makedirs(path, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=path, prefix=".writable")  # O_EXCL: never through a planted link
        os.close(fd)
        os.remove(probe)
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

    The lock is taken before the folder is looked at, so two runs started at once cannot both find it empty.
    """
    path = prepare_out(out)
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


def loads_child_json(text: str) -> Any:
    """JSON a child wrote (the hook's records): ValueError, as for any malformed JSON, for JSON nested past
    MAX_JSON_DEPTH or past the interpreter's recursion (json.loads raises RecursionError there), so the reader's
    one problem line for a damaged file covers it too and the repro cannot end a bisection with 255."""
    try:
        data = json.loads(text)
    except RecursionError:
        raise ValueError("nested past Python's recursion limit: not a file aoti-bisect wrote")
    if _depth(data) > MAX_JSON_DEPTH:  # deep enough to overflow whatever walks it next (the redactor, renderers)
        raise ValueError(f"nested over {MAX_JSON_DEPTH} levels deep: not a file aoti-bisect wrote")
    return no_surrogates(data) if _ESCAPED_SURROGATE.search(text) else data


# Where no \uD800-\uDFFF escape is, json.loads made no surrogate: the walk below is skipped (files of 64 MiB).
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")
_ESCAPED_SURROGATE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]")
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
    _own(fd, UsageFailure(f"{printable(path)} is a link or not a regular file, not aoti-bisect's lock file "
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
