"""How aoti-bisect stops: Ctrl-C, a scheduler's SIGTERM and a closed terminal's SIGHUP all end a command the
same way (kill the runs, write the partial report, exit 130); a second one only hurries the kill."""
from __future__ import annotations

import os
import signal
import sys

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
terminal_fds: tuple[int, ...] = ()


def _stop(signum, frame):
    for sig in STOP_SIGNALS:
        if signal.getsignal(sig) is _stop:
            signal.signal(sig, _stop_again)
    _leave_dead_terminal(signum)
    raise KeyboardInterrupt


def _stop_again(signum, frame):
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


def install() -> None:
    """Handlers for the stop signals, except those ignored when we start (nohup, `cmd &` in a script)."""
    global terminal_fds
    terminal_fds = tuple(fd for fd in (1, 2) if os.isatty(fd))
    for sig in STOP_SIGNALS:
        if signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, _stop)
