"""A run folder as `report`, `minify` and a bundle read it (and write into it): RunFolder reaches its files only
through real folders inside it, so a link planted at any name is refused, never followed."""
from __future__ import annotations

import errno
import json
import os
import shutil
import stat

from ..exits import UsageFailure
from ..text import printable
from .own import ESCAPED_SURROGATE_BYTES, MAX_JSON_DEPTH, TooLarge, json_depth, no_surrogates, own, read_capped


class RunFolderError(UsageFailure):
    """A run folder file that is not what aoti-bisect wrote there (a link, no regular file, too big, not UTF-8,
    not JSON, nested past reason, of a newer schema): one line, exit 2, the same at every commit."""

    def __init__(self, message: str) -> None:
        # One line whatever the names in it hold: a file name may carry a newline or an escape sequence.
        super().__init__(printable(message).replace("\n", "\\n").replace("\t", "\\t"))


# The largest JSON file of a run folder read; aoti-bisect's own are some MB.
MAX_JSON_BYTES = 64 << 20


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
        if json_depth(data) > MAX_JSON_DEPTH:
            raise RunFolderError(f"{where} is nested over {MAX_JSON_DEPTH} levels deep: not a file aoti-bisect wrote")
        return no_surrogates(data) if ESCAPED_SURROGATE_BYTES.search(blob) else data

    def read_bytes(self, rel: str, limit: int) -> bytes:
        """The bytes of a regular file of the folder: TooLarge over `limit` (never read past it), RunFolderError
        for a link or a missing file."""
        try:
            fd = self._open(rel, os.O_RDONLY | os.O_NONBLOCK)
        except FileNotFoundError:
            raise RunFolderError(f"{self.path(rel)} does not exist")
        with os.fdopen(fd, "rb") as f:
            return read_capped(f, limit, self.path(rel))

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
        return own(fd, RunFolderError(f"{self.path(rel)} is a link or not a regular file: not read"))

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
