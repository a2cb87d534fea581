"""Kills what is left of aoti-bisect's runs once aoti-bisect is gone, however it went (SIGKILL, the OOM killer).

aoti-bisect starts one per process as `python -I -S watchdog.py MARK` (process.py) and keeps the only write
end of a pipe to its stdin: it writes `+PGID` when a run starts and `-PGID` when that run is swept. EOF on
stdin means aoti-bisect died; then every process whose environment carries MARK (every run's processes
inherit it) and every process group still recorded is SIGKILLed, until no marked process is left.
Standard library only (it starts with -S, in its own session, so a Ctrl-C or hangup of the terminal that
takes aoti-bisect down leaves it to do its job).
"""
import os
import signal
import sys
import time

GIVE_UP_S = 10.0


def _marked(mark: bytes) -> list[int]:
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                env = f.read()
        except OSError:  # gone, or not ours to read
            continue
        if env.startswith(mark) or b"\0" + mark in env:
            pids.append(int(name))
    return pids


def _kill(pid: int, group: bool = False) -> None:
    try:
        (os.killpg if group else os.kill)(pid, signal.SIGKILL)
    except OSError:
        pass


def main() -> None:
    mark = sys.argv[1].encode()
    groups: set[int] = set()
    for line in sys.stdin:
        line = line.strip()
        if line[:1] == "+":
            groups.add(int(line[1:]))
        elif line[:1] == "-":
            groups.discard(int(line[1:]))
    deadline = time.monotonic() + GIVE_UP_S
    quiet = 0
    # Two quiet scans in a row: a process forked while the first one ran is seen by the second.
    while quiet < 2 and time.monotonic() < deadline:
        for pgid in groups:
            _kill(pgid, group=True)
        pids = _marked(mark)
        for pid in pids:
            _kill(pid)
        quiet = 0 if pids else quiet + 1
        time.sleep(0.02)


if __name__ == "__main__":
    main()
