"""All child-process I/O: launch in a new session, log to a capped file, contain and kill whole trees.

Nothing else in aoti_bisect starts a process (a warm interpreter, started here too, forks the repeated runs that
warm.py asks it for); the search logic receives a callable instead.
Containment: we are the child subreaper of our runs, so what a run orphans (a double-forked daemon, a setsid
child of a dead parent) is reparented to us, not to init, and stays findable; each run's processes inherit
RUN_MARK=<token> in their environment, which tells whose an orphan is when runs go in parallel; a watchdog
process (watchdog.py) kills every marked process once we die, even of SIGKILL.
"""
from __future__ import annotations

import atexit
import contextlib
import ctypes
import itertools
import os
import secrets
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple, Optional

import psutil

from ..child.contract import RUN_MARK
from ..files.write import unlink_stale
from .checkers import create_checker_log
from .types import ProcessExit

POLL_S = 0.05
_PAGE = os.sysconf("SC_PAGE_SIZE")
TREE_SCAN_S = 0.5
KILL_GRACE_S = 3.0
KILL_SWEEP_S = 5.0
ABORT_GRACE_S = 2.0
WATCHDOG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "watchdog.py")
PR_SET_CHILD_SUBREAPER = 36
LINE_SEARCH = 1 << 20  # how far from a log's splice a line end is looked for


# fork(argv, env, cwd, log fd): the run forked by a warm interpreter, with Popen's pid/poll/wait/send_signal, or None.
Fork = Callable[[list[str], dict[str, str], str, int], Optional[Any]]


@dataclass(frozen=True)
class OutputLimits:
    head_bytes: int = 16 << 20
    tail_bytes: int = 16 << 20


class Cancel:
    """Shared by every running child: set once, everything still running is killed. A child Cancel is set with
    its parent, and can also be set alone."""

    def __init__(self, parent: Optional[Cancel] = None) -> None:
        self._event = threading.Event()
        self._parent = parent

    def set(self) -> None:
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set() or (self._parent is not None and self._parent.is_set())


_libc = ctypes.CDLL(None, use_errno=True)
_PUNCH_HOLE = 0x01 | 0x02  # FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE

# One containment per aoti-bisect process (docs/containment.md).
_lock = threading.Lock()
_session = secrets.token_hex(6)
_runs = itertools.count()
_hurry = threading.Event()
_contained = False
_watchdog: Optional[subprocess.Popen] = None


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
        # Cut at line ends: a token cut in two at the splice would match no rule of the redactor, and its two
        # halves would reach a bundle (a key block cut so is masked from its BEGIN or END line, redact.py).
        # A line longer than LINE_SEARCH is cut at a space or tab instead (no token holds one), else dropped.
        edge = min(LINE_SEARCH, head)
        near = os.pread(self.fd, edge, head - edge)
        end = max(near.rfind(b"\n"), near.rfind(b" "), near.rfind(b"\t"))
        head = head - edge + end + 1
        kept = os.pread(self.fd, tail, size - tail)
        starts = [i for i in (kept.find(c, 0, LINE_SEARCH) for c in (b"\n", b" ", b"\t")) if i != -1]
        kept = kept[min(starts) + 1:] if starts else kept[LINE_SEARCH:]
        dropped = size - head - len(kept)
        marker = f"[aoti-bisect: {dropped} bytes of output dropped here]\n".encode()
        marker = marker if head == 0 or near[end:end + 1] == b"\n" else b"\n" + marker
        os.ftruncate(self.fd, head)
        os.pwrite(self.fd, marker + kept, head)
        return head + len(marker) + len(kept), dropped


def _children(pid: int) -> list[int]:
    """Direct children of pid, from /proc/PID/task/*/children: no scan of every process on the host."""
    kids: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                kids += map(int, f.read().split())
    except FileNotFoundError:  # gone, or a kernel without CONFIG_PROC_CHILDREN
        try:
            return [p.pid for p in psutil.Process(pid).children()]
        except psutil.Error:
            return []
    except OSError:
        pass
    return kids


def _tree(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        todo += _children(p)
    return found


def _stat_pgid(pid: int) -> Optional[int]:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[2])
    except (OSError, IndexError, ValueError):
        return None


def _carries(pid: int, token: str) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read()
    except OSError:
        return False
    entry = f"{RUN_MARK}={token}".encode()
    return env.startswith(entry + b"\0") or b"\0" + entry + b"\0" in env


def members(pgid: int, token: Optional[str]) -> list[int]:
    """Every process of one run, however it left the run's tree: a fresh look, never a snapshot.

    A run's root and whatever its processes orphan (a double-forked daemon, a setsid child of a dead
    parent) are all our direct children, since we are their subreaper; the run's own are those carrying
    its mark or still in its process group, and everything below them.
    """
    pids: list[int] = []
    for kid in _children(os.getpid()):
        if kid == pgid or _stat_pgid(kid) == pgid or (token is not None and _carries(kid, token)):
            pids += _tree(kid)
    return pids


def kill_tree(pgid: int, known: list[psutil.Process], grace: float = KILL_GRACE_S,
              token: Optional[str] = None) -> None:
    """SIGTERM a run's processes, SIGKILL those left after `grace`; returns when none is left.

    The run's processes are looked up afresh on every pass (members), so a child started during the kill,
    or one that called setsid a moment ago, is signalled too; `known` adds those seen earlier.
    """
    found = set(known)
    termed: set[psutil.Process] = set()
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, KILL_SWEEP_S)):
        deadline = time.monotonic() + wait
        while True:
            _signal_group(pgid, sig)
            for pid in members(pgid, token):
                try:
                    found.add(psutil.Process(pid))
                except psutil.Error:
                    pass
            procs = _living(list(found))
            for p in procs:
                if sig == signal.SIGKILL or p not in termed:
                    try:
                        p.send_signal(sig)
                    except psutil.Error:
                        pass
                    termed.add(p)
            if not procs or time.monotonic() >= deadline or (sig == signal.SIGTERM and _hurry.is_set()):
                break
            time.sleep(0.01)
        if not procs:
            break
    _reap(found, pgid)


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


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


def _reap(procs: set[psutil.Process], root: int) -> None:
    """Collects the exit status of a run's orphans, reparented to us, or a night of runs piles up zombies.

    Only processes seen as the run's: we start no process of a run but its root (whose status belongs to
    its Popen), so any other of them that is our child is an orphan. One that died before it was ever seen,
    outside the run's group, stays a zombie until we exit.
    """
    for p in procs:
        try:
            # is_running() compares start times: a pid reused since (another run's root) is not taken.
            if p.pid != root and p.is_running():
                os.waitpid(p.pid, os.WNOHANG)
        except (ChildProcessError, psutil.Error):  # not ours: still under a living parent of the run's
            pass


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


def hurry() -> None:
    """Skip what is left of every kill's SIGTERM grace (a second Ctrl-C): SIGKILL at once."""
    _hurry.set()


def _contain() -> None:
    """Once per process, before its first run (hold _lock): become the runs' subreaper, start the watchdog."""
    global _contained, _watchdog
    if _contained:
        return
    _contained = True
    _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    atexit.register(_kill_orphans)
    # Unmarked, and in its own session: it must outlive us, and an outer aoti-bisect's watchdog (where a
    # repro runs aoti-bisect) must not kill it before it has swept our runs.
    env = {k: v for k, v in os.environ.items() if k != RUN_MARK}
    try:
        _watchdog = subprocess.Popen([sys.executable, "-I", "-S", WATCHDOG, f"{RUN_MARK}={_session}."],
                                     stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     env=env, start_new_session=True, close_fds=True)
    except OSError:  # no process to spare: the runs are still contained while we live
        pass


def _kill_orphans(seconds: float = KILL_SWEEP_S) -> None:
    """At exit, SIGKILL whatever of the runs is still our child: an orphan that cleared its environment and
    left its run's group before a tree scan carries nothing that ties it to a run (members misses it, so does
    the watchdog), but as its subreaper we are still its parent. Every run has ended by now, so each child
    of ours but the watchdog is such an orphan; without this it outlived us, reparented to init."""
    keep = _watchdog.pid if _watchdog is not None else None
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        left = [pid for kid in _children(os.getpid()) if kid != keep for pid in _tree(kid)]
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for pid in left:  # reap ours, so the next look sees only the living
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
        if not left:
            break
        time.sleep(0.01)
    _let_watchdog_go()


def _let_watchdog_go() -> None:
    """At exit: close our end of its pipe (EOF: it sweeps, then exits) and drop our claim on it. It outlives us
    by design, so its Popen must not warn "subprocess is still running" (nor its pipe "unclosed file")."""
    if _watchdog is None:
        return
    try:
        _watchdog.stdin.close()
    except OSError:
        pass
    _watchdog.returncode = 0  # never waited on: reparented to init (or the outer subreaper) as we exit


def _tell_watchdog(line: str) -> None:
    # One short write: atomic on a pipe, so threads need no lock.
    try:
        os.write(_watchdog.stdin.fileno(), line.encode())
    except (OSError, AttributeError):  # it died (someone killed it): the runs are still killed by us
        pass


def _start(argv: list[str], env: dict[str, str], cwd: str, fd: int, niceness: int = 0) -> subprocess.Popen:
    with _lock:
        _contain()
    child = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=fd, stderr=fd,
                             start_new_session=True, close_fds=True)
    _tell_watchdog(f"+{child.pid}\n")
    if niceness:
        # Set before the interpreter has imported torch, so the compilers it starts inherit it.
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, child.pid, niceness)
    return child


def start_warm(argv: list[str], env: dict[str, str], cwd: str, fd: int, pass_fd: int) -> subprocess.Popen:
    """A warm interpreter (run/warm.py): contained as a run is, under a mark of its own, so that the watchdog ends it
    and the runs it forks once we die; `pass_fd` is its end of the socket."""
    with _lock:
        _contain()
    child = subprocess.Popen(argv, cwd=cwd, env={**env, RUN_MARK: f"{_session}.warm{next(_runs)}"},
                             stdin=subprocess.DEVNULL, stdout=fd, stderr=fd, start_new_session=True, close_fds=True,
                             pass_fds=(pass_fd,))
    _tell_watchdog(f"+{child.pid}\n")
    return child


def forget(child: subprocess.Popen) -> None:
    """A warm interpreter has exited and been waited on."""
    _tell_watchdog(f"-{child.pid}\n")


class Watched(NamedTuple):
    timed_out: bool
    cancelled: bool
    seen: list[psutil.Process]  # the processes that left the group, for the final sweep
    peak_rss: Optional[int]  # bytes: the most the run's processes held at once, as sampled (resident_bytes)


def _proportional(pid: int) -> int:
    """A process's proportional set size: its pages, each shared one divided among its sharers (a compile's workers
    share most of torch with their parent, and counted whole they made a run of 2 GiB look like 8)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith(b"Pss:"))
    except (OSError, IndexError, ValueError, StopIteration):
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE


def resident_bytes(pids: list[int], root: int) -> Optional[int]:
    """The memory a run's processes hold now, or the root's high-water mark if that is more (a peak between two
    samples); None where /proc tells nothing."""
    total, seen_any = 0, False
    for pid in pids:
        try:
            total += _proportional(pid)
            seen_any = True
        except (OSError, IndexError, ValueError):
            pass
    try:
        with open(f"/proc/{root}/status", "rb") as f:
            hwm = next(int(line.split()[1]) * 1024 for line in f if line.startswith(b"VmHWM:"))
        total, seen_any = max(total, hwm), True
    except (OSError, IndexError, ValueError, StopIteration):
        pass
    return total if seen_any else None


def _watch(child: subprocess.Popen, token: str, log: _CappedLog, deadline: float,
           cancel: Optional[Cancel]) -> Watched:
    """Waits for the child's exit, keeping its log under the caps; at the deadline or a cancel the whole tree is
    killed."""
    seen: dict[int, psutil.Process] = {}
    timed_out = cancelled = False
    next_scan = 0.0
    peak: Optional[int] = None
    exit_fd = _pidfd(child.pid)
    try:
        while child.poll() is None:
            now = time.monotonic()
            if now >= next_scan:
                pids = members(child.pid, token)
                # Only for processes that dropped the mark (a cleared environment) and left the group.
                for pid in pids:
                    if pid not in seen:
                        try:
                            seen[pid] = psutil.Process(pid)
                        except psutil.Error:
                            pass
                held = resident_bytes(pids, child.pid)
                peak = max(peak or 0, held) if held is not None else peak
                next_scan = now + TREE_SCAN_S
            log.check()
            if now > deadline:
                timed_out = True
            elif cancel is not None and cancel.is_set():
                cancelled = True
            if timed_out:
                # With PYTHONFAULTHANDLER set, SIGABRT makes a hung Python dump every thread's stack (even
                # when stuck in native code): that stack is the only record of where it hung.
                _signal_and_wait(child, signal.SIGABRT, ABORT_GRACE_S)
            if timed_out or cancelled:
                kill_tree(child.pid, list(seen.values()), token=token)
                child.wait()
                break
            _wait_exit(exit_fd, POLL_S)
    finally:
        if exit_fd is not None:
            os.close(exit_fd)
    return Watched(timed_out, cancelled, list(seen.values()), peak)


def execute(
    argv: list[str],
    env: dict[str, str],
    cwd: str,
    log_path: str,
    timeout: float,
    limits: OutputLimits = OutputLimits(),
    cancel: Optional[Cancel] = None,
    niceness: int = 0,
    fork: Optional[Fork] = None,
) -> ProcessExit:
    """Run argv to completion (or timeout/cancel) with stdout+stderr in log_path; nothing of it outlives this.
    `niceness`: a lower CPU priority for work nobody waits on yet (a compile ahead). `fork`: asks a warm interpreter
    for the run first (run/warm.py); where it gives none, the run starts cold."""
    # A new file, never an old one truncated: a link planted at log_path (symbolic, or hard: O_NOFOLLOW does
    # not see that one) would have the child's output written over its target, a file of the user's.
    unlink_stale(log_path)
    fd = os.open(log_path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_NOFOLLOW, 0o644)
    start = time.monotonic()
    token = f"{_session}.{next(_runs)}"
    try:
        try:
            create_checker_log(argv, cwd)
            marked = {**env, RUN_MARK: token}
            forked = fork(argv, marked, cwd, fd) if fork is not None else None
            if forked is not None:
                _tell_watchdog(f"+{forked.pid}\n")
            child = forked or _start(argv, marked, cwd, fd, niceness)
        except OSError as exc:
            return ProcessExit(None, None, False, 0.0, 0, launch_error=f"{argv[0]}: {exc.strerror or exc}")
        log = _CappedLog(fd, limits)
        try:
            timed_out, cancelled, seen, peak_rss = _watch(child, token, log, start + timeout, cancel)
            duration = time.monotonic() - start
            # Inductor's compile workers and a repro's daemons may outlive its main process: always sweep.
            kill_tree(child.pid, seen, grace=1.0, token=token)
        finally:
            _tell_watchdog(f"-{child.pid}\n")
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
            warm=forked is not None,
            peak_rss=peak_rss,
        )
    finally:
        os.close(fd)
