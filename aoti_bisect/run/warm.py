"""Warm starts: a run of a flag set whose package is stored (hook/reuse.py) is forked from the repro's interpreter
with torch already imported (child/warm.py) instead of starting an interpreter that imports it again.

One warm interpreter per interpreter and environment, a run's own variables left out (WarmPool.key): the runs it
forks get exactly the environment a cold start would, and every import it made read the same values. The run is
reparented to us (we are the runs' subreaper, process.py), so process.execute waits on it, times it out and kills
its tree as it does a run it started itself (Forked). Where the warm interpreter cannot serve (it cannot import
torch, has a thread, or died), the run starts cold and the pool keeps the reason for the report.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import Optional

from ..child import contract
from ..child import warm as server
from . import process
from .probe import PYTHON_NAME

# A run's own variables: they name its folder, index and mark, and no import reads them (TMPDIR: tempfile asks
# again in the run, child/warm.py). Every other variable is the same for every run a warm interpreter forks.
PER_RUN = frozenset({contract.RUN_INDEX_ENV, contract.HOOK_ENV, contract.CRASH_FILE_ENV, contract.RUN_MARK, "TMPDIR",
                     "CUDA_COREDUMP_FILE"})
READY_S = 120.0  # the imports: seconds on a warm page cache, a minute where torch's bytecode is compiled first


def plain_script(argv: list[str]) -> bool:
    """`python script.py args...`: the one command a warm interpreter can stand in for (no interpreter options,
    no -m or -c, no wrapper such as a memory checker)."""
    return (len(argv) >= 2 and bool(PYTHON_NAME.match(os.path.basename(argv[0]))) and not argv[1].startswith("-")
            and argv[1].endswith(".py"))


class Forked:
    """subprocess.Popen's face (pid, poll, wait, send_signal, returncode) for a run forked by a warm interpreter and
    reparented to us: its exit status is ours to collect."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: Optional[int] = None

    def poll(self) -> Optional[int]:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped by someone else: nothing left to tell
                self.returncode = 255
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: Optional[float] = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(str(self.pid), timeout or 0.0)
            time.sleep(process.POLL_S)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)


@dataclass
class _Interpreter:
    folder: str
    lock: threading.Lock = field(default_factory=threading.Lock)  # its launch, then one request at a time
    popen: Optional[subprocess.Popen] = None
    sock: Optional[socket.socket] = None
    problem: Optional[str] = None  # set once: it cannot serve, and its runs start cold


class WarmPool:
    def __init__(self, folder: str) -> None:
        self.folder = folder  # in the cache root: one subfolder per warm interpreter
        self._lock = threading.Lock()
        self._interpreters: dict[tuple, _Interpreter] = {}
        self.problems: list[str] = []  # why a warm interpreter could not serve, each said once

    @staticmethod
    def key(argv: list[str], env: dict[str, str]) -> tuple:
        return argv[0], tuple(sorted((k, v) for k, v in env.items() if k not in PER_RUN))

    def start(self, argv: list[str], env: dict[str, str], cwd: str, fd: int) -> Optional[Forked]:
        """The run forked from its warm interpreter, its output on fd; None: start it cold."""
        with self._lock:
            key = self.key(argv, env)
            interp = self._interpreters.get(key)
            if interp is None:  # launched below, outside the pool's lock: each slot's starts at once
                interp = self._interpreters[key] = _Interpreter(os.path.join(self.folder, str(len(self._interpreters))))
        with interp.lock:
            if interp.sock is None and interp.problem is None:
                self._launch(interp, argv[0], env)
            if interp.problem is not None or interp.sock is None:
                return None
            try:
                server.send(interp.sock, {"argv": argv, "env": env, "cwd": cwd}, fds=[fd])
                answer, _ = server.receive(interp.sock)
            except (OSError, ValueError) as exc:
                answer = {"problem": f"the warm interpreter stopped answering: {exc}"}
            if answer is None or "pid" not in answer:
                self._give_up(interp, (answer or {}).get("problem") or "the warm interpreter exited")
                return None
        return Forked(int(answer["pid"]))

    def _launch(self, interp: _Interpreter, python: str, env: dict[str, str]) -> None:
        os.makedirs(os.path.join(interp.folder, "tmp"), exist_ok=True)
        ours, theirs = socket.socketpair()
        interp.sock = ours
        own = {k: v for k, v in env.items() if k not in PER_RUN}
        own[contract.HOOK_ENV] = os.path.join(interp.folder, contract.HOOK_RECORD)
        own["TMPDIR"] = os.path.join(interp.folder, "tmp")
        if contract.CRASH_FILE_ENV in env:
            own[contract.CRASH_FILE_ENV] = os.path.join(interp.folder, contract.CRASH_FILE)
        boot = server.BOOT.format(path=os.path.abspath(server.__file__), fd=theirs.fileno())
        log = os.open(os.path.join(interp.folder, "output.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            interp.popen = process.start_warm([python, "-c", boot], own, interp.folder, log, theirs.fileno())
        except OSError as exc:
            self._give_up(interp, f"cannot start the warm interpreter: {exc}")
            return
        finally:
            os.close(log)
            theirs.close()
        ours.settimeout(READY_S)
        try:
            ready, _ = server.receive(ours)
        except (OSError, ValueError) as exc:
            ready = {"problem": f"the warm interpreter did not start: {exc}"}
        ours.settimeout(None)
        if not ready or not ready.get("ready"):
            self._give_up(interp, (ready or {}).get("problem") or "the warm interpreter exited at start")

    def _give_up(self, interp: _Interpreter, problem: str) -> None:
        interp.problem = problem
        with self._lock:
            if problem not in self.problems:
                self.problems.append(problem)
        self._stop(interp)

    def close(self) -> None:
        """Ends every warm interpreter (the runs they forked are ours, and end on their own)."""
        with self._lock:
            interps, self._interpreters = list(self._interpreters.values()), {}
        for interp in interps:
            with interp.lock:
                self._stop(interp)

    @staticmethod
    def _stop(interp: _Interpreter) -> None:
        if interp.sock is not None:
            interp.sock.close()  # its end of the stream: it exits
        if interp.popen is None:
            return
        try:
            interp.popen.wait(timeout=5)
        except subprocess.TimeoutExpired:
            interp.popen.send_signal(signal.SIGKILL)
            interp.popen.wait()
        process.forget(interp.popen)
        interp.popen = None
