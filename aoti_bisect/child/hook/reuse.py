"""Serves later compiles of a flag set from the package its first compile built, inside the repro's process.

The harness names a flag set's folder in AOTI_BISECT_REUSE (cache/<flag set>.reuse) and the flag set in
AOTI_BISECT_FLAG_SET. A call to aoti_compile_and_package is keyed by sha256 over the exported program as
torch.export.save writes it, the call's inductor_configs, Inductor's effective config, the flag set, torch's
version, the devices and the C++ compiler. One process per key at a time holds <key>.lock (flock): it either
finds <key>.pt2 whose sha256 matches its sidecar <key>.json and copies it to the package_path the repro asked
for, or compiles and stores the package (temp file, then rename; the sidecar last). Anything that cannot be
keyed or checked compiles, as the repro would without us, and says why; the repro's own exceptions pass
through untouched. Standard library at import time; torch only inside calls the repro made into torch.
"""
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
import warnings
import zipfile

from . import atomic, contract, vecisa

# What Inductor's build reads from the environment outside its config: the compiler (a package built by another
# g++ may not even load; see docs/aoti-facts.md).
_TOOLCHAIN_ENV = ("CXX", "CC", "CUDA_HOME", "TORCH_CUDA_ARCH_LIST", "ATEN_CPU_CAPABILITY")


class NoKey(Exception):
    """The call cannot be keyed: compile, and record why."""


def compile_or_reuse(original, args, kwargs, note):
    """What `original(*args, **kwargs)` returns, served from the flag set's folder where the key matches.

    `note(fields)` records the outcome on the call's hook event; it never raises.
    """
    folder = os.environ.get(contract.REUSE_ENV)
    if not folder:
        return original(*args, **kwargs)
    started = time.monotonic()
    try:
        target = _package_path(kwargs.get("package_path"))
        os.makedirs(folder, exist_ok=True)
        key, parts = _key(args[0] if args else kwargs.get("exported_program"), kwargs.get("inductor_configs"),
                          folder)
        keyed = time.monotonic()
        lock = _lock(os.path.join(folder, f"{key}.lock"), note)
    except Exception as exc:  # keying is ours: whatever goes wrong, the repro compiles as it would without us
        note({"outcome": "compiled", "reason": _reason(exc), "flag_set": os.environ.get(contract.FLAG_SET_ENV)})
        return original(*args, **kwargs)
    fields = {"key": key, "flag_set": parts["flag_set"], "key_s": round(keyed - started, 3),
              "waited_s": round(time.monotonic() - keyed, 3)}
    try:
        stored = os.path.join(folder, f"{key}.pt2")
        problem = _check(stored)
        if problem is None:
            try:
                _place(stored, target)
                note({**fields, "outcome": "reused", "reason": None, "source": stored})
                return kwargs["package_path"]
            except OSError as exc:
                problem = f"cannot copy the cached package to {target}: {_reason(exc)}"
        note({**fields, "outcome": "compiling", "reason": problem})
        result = original(*args, **kwargs)
        built = os.fspath(result) if isinstance(result, (str, os.PathLike)) else target
        try:
            _store(built, stored, parts)
            stored_ok = True
        except OSError as exc:
            stored_ok, problem = False, f"{problem}; not stored: {_reason(exc)}"
        note({**fields, "outcome": "compiled", "reason": problem, "stored": stored_ok})
        return result
    finally:
        _unlock(lock)


def _reason(exc):
    return (str(exc) if isinstance(exc, NoKey) else f"{type(exc).__name__}: {exc}")[:300]


def _package_path(value):
    # Inductor picks a path of its own for None, and writes a buffer in place: neither can take a copy.
    if not isinstance(value, (str, os.PathLike)):
        raise NoKey(f"package_path is {'None' if value is None else type(value).__name__}, not a file path")
    return os.path.abspath(os.fspath(value))


def _key(ep, inductor_configs, folder):
    import torch  # the repro is calling into torch._inductor: torch is imported already
    from torch._inductor import config

    # Saved to a file, not to memory: a model's weights would otherwise be held twice in the repro's process.
    fd, saved = tempfile.mkstemp(suffix=".key.pt2", dir=folder)
    os.close(fd)
    try:
        with warnings.catch_warnings():  # its deprecation chatter would land in the repro's log
            warnings.simplefilter("ignore")
            torch.export.save(ep, saved)
        program = _archive_digest(saved)
    except Exception as exc:
        raise NoKey(f"the exported program cannot be serialized: {_reason(exc)}") from exc
    finally:
        os.unlink(saved)
    portable = getattr(config, "save_config_portable", None)
    if portable is None:
        raise NoKey("this torch has no torch._inductor.config.save_config_portable")
    settings = portable()
    # Whether torch checked its vector ISAs or was told they pass (the harness's shortcut, vecisa.py) is not
    # what the code is built for; the ISA it takes is. A checked run under valgrind thereby takes the package its
    # flag set compiled ahead outside the checker, rather than compiling under it (seen: 100 s of a 410 s run).
    settings.pop("cpp.vec_isa_ok", None)
    parts = {
        "program": program,
        "inductor_configs": _stable(inductor_configs or {}, "inductor_configs"),
        "config": _stable(settings, "Inductor's config"),
        "vec_isa": vecisa.built_for(),
        "flag_set": os.environ.get(contract.FLAG_SET_ENV, ""),
        "torch": [torch.__version__, torch.version.cuda, getattr(torch.version, "hip", None)],
        "devices": _devices(torch, ep),
        "toolchain": {k: os.environ.get(k) for k in _TOOLCHAIN_ENV},
        # A user Triton kernel is saved by its op's name only: an edit of its body must still miss.
        "script": _file_digest(sys.argv[0]) if sys.argv and os.path.isfile(sys.argv[0]) else None,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest(), parts


def _archive_digest(path):
    """sha256 over the archive's records, less the id that torch's zip writer draws afresh on every save, the
    example inputs' values and the top folder, which torch names after the file. The graph records each input's
    shape, strides, dtype, device and size hints; Inductor builds nothing from the values, which a script that
    draws them unseeded (torch.randn) changes on every run."""
    h = hashlib.sha256()
    with zipfile.ZipFile(path) as z:
        for info in sorted(z.infolist(), key=lambda i: i.filename):
            name = info.filename.split("/", 1)[-1]
            if name != ".data/serialization_id" and not name.startswith("data/sample_inputs/"):
                h.update(f"{name}\0{info.file_size}\0".encode())
                with z.open(info) as f:
                    for block in iter(lambda: f.read(1 << 20), b""):
                        h.update(block)
    return h.hexdigest()


def _stable(value, what):
    """A text that is equal exactly when the values are; refuses a value whose repr names an address."""
    def plain(v):
        if isinstance(v, (set, frozenset)):
            return sorted(map(repr, v))
        text = repr(v)
        if " at 0x" in text or " object at " in text:
            raise NoKey(f"{what} holds an object that cannot be compared across processes: {text[:120]}")
        return text
    return json.dumps(value, sort_keys=True, default=plain)


def _devices(torch, ep):
    """The devices the program's tensors live on, each with what its code is built for."""
    tensors = [*torch.utils._pytree.tree_leaves(ep.example_inputs), *ep.state_dict.values(),
               *ep.constants.values()]
    names = sorted({str(t.device) for t in tensors if isinstance(t, torch.Tensor)})
    out = {}
    for name in names:
        device = torch.device(name)
        if device.type == "cuda":
            index = device.index if device.index is not None else torch.cuda.current_device()
            out[name] = [torch.cuda.get_device_name(index), list(torch.cuda.get_device_capability(index))]
    out["host"] = _host_cpu()  # the wrapper's .so is built for the host CPU's vector ISA too
    return out


def _host_cpu():
    try:
        with open("/proc/cpuinfo") as f:
            lines = [line for line in f if line.startswith(("model name", "flags", "Features"))]
    except OSError:
        import platform
        return platform.processor() or platform.machine()
    return hashlib.sha256("".join(sorted(set(lines))).encode()).hexdigest()[:16]


def _lock(path, note):
    import fcntl
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        # Another run of this flag set is compiling this program: its package is ours once it is stored.
        note({"outcome": "waiting", "reason": "another run holds the lock", "lock": path})
        fcntl.flock(fd, fcntl.LOCK_EX)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _unlock(fd):
    import fcntl
    # Explicitly, not by close alone: a forked compile worker may share this open file.
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)


def _check(stored):
    """None when `stored` is whole (its sha256 is its sidecar's, and it is a readable zip); else why not."""
    sidecar = f"{os.path.splitext(stored)[0]}.json"
    if not os.path.exists(sidecar):
        return "no cached package for this key"
    try:
        with open(sidecar) as f:
            want = json.load(f)["sha256"]
        have = _file_digest(stored)
        if have != want:
            return f"cached package failed its check: sha256 {have[:12]} is not the sidecar's {str(want)[:12]}"
        with zipfile.ZipFile(stored) as z:
            bad = z.testzip()
        if bad is not None:
            return f"cached package failed its check: {bad} is damaged"
    except (OSError, ValueError, KeyError, TypeError, zipfile.BadZipFile) as exc:
        return f"cached package failed its check: {_reason(exc)}"
    return None


def _file_digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _place(source, target):
    # Temp and rename: a reader of target never sees half a package.
    with open(source, "rb") as src, atomic.replacing(target, "wb") as f:
        shutil.copyfileobj(src, f)


def _store(built, stored, parts):
    _place(built, stored)
    sidecar = f"{os.path.splitext(stored)[0]}.json"
    with atomic.replacing(sidecar) as f:
        json.dump({"sha256": _file_digest(stored), "parts": parts, "pid": os.getpid()}, f, indent=1)
