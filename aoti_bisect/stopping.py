"""How aoti-bisect stops: Ctrl-C, a scheduler's SIGTERM and a closed terminal's SIGHUP all end a command the
same way (kill the runs, write the partial report, exit 130); a second one only hurries the kill."""
from __future__ import annotations

import os
import signal
import sys
from types import FrameType
from typing import Optional

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
terminal_fds: tuple[int, ...] = ()


def _stop(signum: int, frame: Optional[FrameType]) -> None:
    for sig in STOP_SIGNALS:
        if signal.getsignal(sig) is _stop:
            signal.signal(sig, _stop_again)
    _leave_dead_terminal(signum)
    raise KeyboardInterrupt


def _stop_again(signum: int, frame: Optional[FrameType]) -> None:
    """A second signal must not abandon the kill under way (TERM-ignoring repros would outlive us): it only
    cuts the SIGTERM grace short."""
    _leave_dead_terminal(signum)
    process = sys.modules.get("aoti_bisect.run.process")  # not loaded: no run to hurry
    if process is not None:
        process.hurry()
        try:
            os.write(2, b"aoti-bisect: stopping: killing the runs now, then writing the partial report\n")
        except OSError:
            pass


def _leave_dead_terminal(signum: int) -> None:
    # After a hangup, writing to the terminal fails with EIO, which would lose the report's last lines.
    if signum == signal.SIGHUP:
        devnull = os.open(os.devnull, os.O_WRONLY)
        for fd in terminal_fds:
            os.dup2(devnull, fd)
        os.close(devnull)


def _still_ignored(signum: int, frame: Optional[FrameType]) -> None:
    """Stands for SIG_IGN in this process: an ignored disposition survives exec, a handler does not."""


# What a child would inherit ignored (nohup: HUP; a background job of a script: INT, QUIT; some CI runners
# more) and what changes its behaviour: a repro must start as it would from a shell, with default dispositions.
CHILD_DEFAULT_SIGNALS = tuple(getattr(signal, name) for name in (
    "SIGINT", "SIGQUIT", "SIGHUP", "SIGTERM", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGTSTP", "SIGTTIN", "SIGTTOU",
    "SIGWINCH", "SIGCONT", "SIGURG") if hasattr(signal, name))


def install() -> None:
    """Handlers for the stop signals, except those ignored when we start (nohup, `cmd &` in a script).

    Children start with default signal dispositions and an empty signal mask whatever ours were: a signal we
    were started with ignored gets a no-op handler instead (we still ignore it; exec resets a handler to the
    default, never SIG_IGN), and the mask is cleared in the main thread before any thread exists (threads, and
    the children they fork, inherit it). No preexec_fn: the harness forks from a thread pool."""
    global terminal_fds
    terminal_fds = tuple(fd for fd in (1, 2) if os.isatty(fd))
    for sig in STOP_SIGNALS:
        if signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, _stop)
    for sig in CHILD_DEFAULT_SIGNALS:
        try:
            if signal.getsignal(sig) is signal.SIG_IGN:
                signal.signal(sig, _still_ignored)
        except (OSError, ValueError):
            pass
    if hasattr(signal, "SIGCHLD") and signal.getsignal(signal.SIGCHLD) is signal.SIG_IGN:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # ignored, it reaps our children before we can wait
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
