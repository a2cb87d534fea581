"""All child-process I/O: launch in a new session, log to a capped file, kill whole trees.

Nothing else in aoti_bisect starts a process; the search logic receives a callable instead.
"""
from __future__ import annotations

import ctypes
import os
import select
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Optional

import psutil

from .types import ProcessExit

POLL_S = 0.05
TREE_SCAN_S = 0.5
KILL_GRACE_S = 3.0
ABORT_GRACE_S = 2.0


@dataclass(frozen=True)
class OutputLimits:
    head_bytes: int = 16 << 20
    tail_bytes: int = 16 << 20


class Cancel:
    """Shared by every running child: set once, everything still running is killed."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def set(self) -> None:
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()


_libc = ctypes.CDLL(None, use_errno=True)
_PUNCH_HOLE = 0x01 | 0x02  # FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE


class _CappedLog:
    """Keeps a child's log file at about head + tail bytes of disk while the child writes to it.

    The middle is punched out (the file stays sparse at its full logical size), so nothing is moved under
    the child's O_APPEND writes and no byte can be lost or miscounted; at the end, head + marker + tail
    are spliced together. Where the filesystem cannot punch holes, the cap applies only at the end.
    """

    def __init__(self, fd: int, limits: OutputLimits) -> None:
        self.fd = fd
        self.limits = limits
        self.punched_to = limits.head_bytes

    def check(self) -> None:
        end = os.fstat(self.fd).st_size - self.limits.tail_bytes
        if end - self.punched_to < self.limits.tail_bytes:
            return
        length = end - self.punched_to
        if _libc.fallocate(self.fd, _PUNCH_HOLE, ctypes.c_long(self.punched_to), ctypes.c_long(length)) == 0:
            self.punched_to = end

    def finish(self) -> tuple[int, int]:
        """Splice head + marker + tail; returns (final size, bytes dropped)."""
        head, tail = self.limits.head_bytes, self.limits.tail_bytes
        size = os.fstat(self.fd).st_size
        if size <= head + tail:
            return size, 0
        dropped = size - head - tail
        kept = os.pread(self.fd, tail, size - tail)
        marker = f"\n[aoti-bisect: {dropped} bytes of output dropped here]\n".encode()
        os.ftruncate(self.fd, head)
        os.pwrite(self.fd, marker + kept, head)
        return head + len(marker) + len(kept), dropped


def _descendants(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return proc.children(recursive=True)
    except psutil.Error:
        return []


def kill_tree(pgid: int, known: list[psutil.Process], grace: float = KILL_GRACE_S) -> None:
    """SIGTERM the process group and every descendant we ever saw, then SIGKILL what is left.

    Descendants that called setsid() left the group; we only find them because we snapshot the tree
    while they still hang off our child (after its death they are reparented to init).
    """
    procs = _living(known)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        for p in procs:
            try:
                p.send_signal(sig)
            except psutil.Error:
                pass
        procs = _wait_gone(procs, grace if sig == signal.SIGTERM else 1.0)
        if not procs and not _group_alive(pgid):
            return


def _living(procs: list[psutil.Process]) -> list[psutil.Process]:
    # A zombie has exited, but in a container whose PID 1 never reaps, orphans stay zombies for good:
    # psutil.wait_procs would wait out the whole grace for them (torch's addr2line helpers did, ~1 s a run).
    alive = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                alive.append(p)
        except psutil.Error:
            pass
    return alive


def _wait_gone(procs: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    """The processes still living after at most `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while (procs := _living(procs)) and time.monotonic() < deadline:
        time.sleep(0.01)
    return procs


def _pidfd(pid: int) -> Optional[int]:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _wait_exit(pidfd: Optional[int], seconds: float) -> None:
    """Sleep until the child exits or `seconds` pass: a pidfd wakes us at once, a plain sleep cannot."""
    if pidfd is None:
        time.sleep(seconds)
    else:
        select.select([pidfd], [], [], seconds)


def _signal_and_wait(child: subprocess.Popen, sig: int, grace: float) -> None:
    try:
        child.send_signal(sig)
        child.wait(timeout=grace)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def execute(
    argv: list[str],
    env: dict[str, str],
    cwd: str,
    log_path: str,
    timeout: float,
    limits: OutputLimits = OutputLimits(),
    cancel: Optional[Cancel] = None,
) -> ProcessExit:
    """Run argv to completion (or timeout/cancel) with stdout+stderr in log_path."""
    # O_NOFOLLOW: a link planted at log_path would have the child's output written over its target.
    fd = os.open(log_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND | os.O_NOFOLLOW, 0o644)
    start = time.monotonic()
    try:
        try:
            child = subprocess.Popen(
                argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=fd, stderr=fd,
                start_new_session=True, close_fds=True,
            )
        except OSError as exc:
            return ProcessExit(None, None, False, 0.0, 0, launch_error=f"{argv[0]}: {exc.strerror or exc}")
        log = _CappedLog(fd, limits)
        seen: dict[int, psutil.Process] = {}
        try:
            root = psutil.Process(child.pid)
        except psutil.Error:
            root = None
        timed_out = cancelled = False
        next_scan = 0.0
        exit_fd = _pidfd(child.pid)
        while child.poll() is None:
            now = time.monotonic()
            if root is not None and now >= next_scan:
                seen.update((p.pid, p) for p in _descendants(root))
                next_scan = now + TREE_SCAN_S
            log.check()
            if now - start > timeout:
                timed_out = True
            elif cancel is not None and cancel.is_set():
                cancelled = True
            if timed_out:
                # With PYTHONFAULTHANDLER set, SIGABRT makes a hung Python dump every thread's stack (even
                # when stuck in native code): that stack is the only record of where it hung.
                _signal_and_wait(child, signal.SIGABRT, ABORT_GRACE_S)
            if timed_out or cancelled:
                kill_tree(child.pid, list(seen.values()))
                child.wait()
                break
            _wait_exit(exit_fd, POLL_S)
        duration = time.monotonic() - start
        if exit_fd is not None:
            os.close(exit_fd)
        # Inductor's compile workers may outlive a crashed parent: always sweep the group.
        kill_tree(child.pid, list(seen.values()), grace=1.0)
        size, dropped = log.finish()
        rc = child.returncode
        return ProcessExit(
            returncode=None if timed_out or cancelled else (rc if rc >= 0 else None),
            signal=-rc if (rc is not None and rc < 0 and not (timed_out or cancelled)) else None,
            timed_out=timed_out,
            duration=duration,
            log_bytes=size,
            dropped_bytes=dropped,
            launch_error="cancelled" if cancelled else None,
        )
    finally:
        os.close(fd)
