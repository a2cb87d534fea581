"""A warm interpreter: the repro's own Python, started with one run's environment, that imports torch once and
then forks a process per run of the same flag set, which runs the repro's script as `python script.py` would.

Run by the repro's interpreter as `python -c <BOOT>`, so nothing of ours lands on sys.path[0] while torch imports
(a module here must not shadow one torch looks for). Standard library only. The parent (run/warm.py) talks to it
over one Unix socket, a length-prefixed JSON message each way:

    parent -> warm   {"argv": [...], "env": {...}, "cwd": "..."} with the run's log fd attached (SCM_RIGHTS)
    warm -> parent   {"ready": true, "seconds": s} once, after the imports; then per request {"pid": n} or
                     {"problem": "..."} (the parent then starts that run cold)

Each run is forked twice and its middle process exits at once, so the run is reparented to the parent, the runs'
subreaper, which waits on it and contains it like any run it started itself. A fork from a process that has a
second thread or an initialised CUDA context is unsound, so the server checks both before every fork and says
so instead. It exits when the parent closes the socket or after IDLE_S without a request.
"""
import builtins
import importlib
import importlib.machinery
import json
import os
import select
import signal
import socket
import struct
import sys
import tempfile
import threading
import time
import types

PRELOAD = ("torch", "torch.export", "torch._inductor")
IDLE_S = 300.0
_HEADER = struct.Struct("!I")
MAX_MESSAGE = 1 << 22


def send(sock, doc, fds=()):
    data = json.dumps(doc).encode()
    payload = _HEADER.pack(len(data)) + data
    if fds:
        socket.send_fds(sock, [payload], list(fds))
    else:
        sock.sendall(payload)


def receive(sock, max_fds=0):
    """(the message, its fds); (None, []) at the end of the stream."""
    head, fds, _flags, _addr = socket.recv_fds(sock, _HEADER.size, max_fds) if max_fds else \
        (sock.recv(_HEADER.size, socket.MSG_WAITALL), [], 0, None)
    if len(head) < _HEADER.size:
        return None, fds
    (size,) = _HEADER.unpack(head)
    if size > MAX_MESSAGE:
        raise ValueError(f"message of {size} bytes")
    data = sock.recv(size, socket.MSG_WAITALL)
    return json.loads(data), fds


def _unforkable():
    """Why a fork now would not be a fresh run's equal, or None. A native thread is allowed: the one `import torch`
    starts is OpenBLAS's pool (numpy's import), which OpenBLAS stops at every fork (pthread_atfork) and restarts
    when next used (docs/warm.md); a Python thread may hold any lock at the fork."""
    if threading.active_count() > 1:
        return f"the warm interpreter runs {threading.active_count()} Python threads"
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return "the warm interpreter initialised CUDA"
    # The driver can be initialised under torch's flag (a device count asked for): a fork then gets "CUDA error:
    # initialization error" at its first CUDA call. Seen on an H100 when the warm interpreter ran Inductor's
    # vector-ISA check (docs/warm.md); the driver's device files open are the sign, whoever opened them.
    try:
        opened = [os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")]
    except OSError:
        opened = []
    if any(target.startswith("/dev/nvidia") for target in opened):
        return "the warm interpreter opened the GPU driver"
    return None


def _run_script(argv):
    """What `python script.py args` does once the interpreter is up: the script as __main__, its folder first
    on sys.path, an uncaught exception printed by sys.excepthook and exit status 1."""
    script = argv[1]
    sys.argv = list(argv[1:])
    sys.path[0] = os.path.dirname(os.path.realpath(script))
    main = types.ModuleType("__main__")
    main.__dict__.update({"__file__": script, "__builtins__": builtins, "__cached__": None, "__package__": None,
                          "__loader__": importlib.machinery.SourceFileLoader("__main__", script)})
    sys.modules["__main__"] = main
    with open(script, "rb") as f:
        code = compile(f.read(), script, "exec")
    try:
        exec(code, main.__dict__)
    except SystemExit:
        raise
    except BaseException as exc:  # as Python's own top level: the traceback from the script's frame down
        tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
        sys.excepthook(type(exc), exc.with_traceback(tb), tb)
        if isinstance(exc, KeyboardInterrupt):
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        raise SystemExit(1) from None


def _become_run(request, log_fd, sock):
    sock.close()
    os.setsid()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(null)
    os.close(log_fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    # State an import may have fixed from the warm interpreter's own environment or entropy.
    tempfile.tempdir = None
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is not None:
        numpy_random.seed()  # `random` reseeds itself in a forked child; numpy's global state does not
    hook = sys.modules.get("_aoti_bisect_hook.recorder")
    if hook is not None:
        hook.reinstall()
    _run_script(request["argv"])
    raise SystemExit(0)


def _fork_run(request, log_fd, sock):
    """The run's pid, reparented to the parent once this returns."""
    read_end, write_end = os.pipe()
    middle = os.fork()
    if middle == 0:
        os.close(read_end)
        pid = os.fork()
        if pid == 0:
            os.close(write_end)
            _become_run(request, log_fd, sock)
        os.write(write_end, str(pid).encode())
        os._exit(0)
    os.close(write_end)
    os.close(log_fd)
    with os.fdopen(read_end, "rb") as f:
        pid = int(f.read() or 0)
    os.waitpid(middle, 0)
    return pid


def serve(fd):
    sock = socket.socket(fileno=fd)
    start = time.monotonic()
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception as exc:  # the repro's interpreter lacks it: its runs start cold, as before
            send(sock, {"problem": f"cannot import {name}: {type(exc).__name__}: {exc}"[:300]})
            return
    send(sock, {"ready": True, "seconds": round(time.monotonic() - start, 3)})
    while select.select([sock], [], [], IDLE_S)[0]:
        request, fds = receive(sock, max_fds=1)
        if request is None:
            return
        problem = _unforkable() if fds else "no log attached"
        if problem is None:
            sys.stdout.flush()
            sys.stderr.flush()
            pid = _fork_run(request, fds[0], sock)
            send(sock, {"pid": pid})
        else:
            for extra in fds:
                os.close(extra)
            send(sock, {"problem": problem})


# The -c program: this file by path, under a private name, then serve(fd). sys.path[0] is '' (the warm
# interpreter's own empty folder) until a run puts its script's folder there.
BOOT = ("import importlib.util as u, sys; s = u.spec_from_file_location('_aoti_bisect_warm', {path!r});"
        " m = u.module_from_spec(s); sys.modules[s.name] = m; s.loader.exec_module(m); m.serve({fd})")
