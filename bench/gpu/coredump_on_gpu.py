"""Lab (CUDA, issue #36): what a CUDA core dump on a device exception gives, measured on the lent GPU
(docs/evidence/cuda-coredump-2026-11-26.md).

Three passes, each run in its own folder under $WORK (default /tmp/cdlab), the dump folder polled every few
milliseconds while it runs (so the record says when the dump appeared and when it stopped growing):
  (no argument) rare_ima_user_triton with RARE_CRASH_PERCENT=100 (the far, faulting id in every run) and
     device_assert_oob, each with the dump environment, without it, and with skip_abort and a %h.%t.%p name;
     cuda-gdb over every dump;
  more   the packages replayed by coredump_replay.py: why an assert leaves no dump (abort or not, lingering,
     CUDA_LAUNCH_BLOCKING, ELF images kept); cuda-gdb over files that are not dumps;
  final  each assert setting again, an illegal address replayed, a real dump cut to half and to 4 KiB.
Everything lands in $WORK: logs/, reads/, results.jsonl. A fresh process spends ~45 s in aoti_load_package (the
vector-ISA probe's C++ build), so every replay costs that. Stdlib only; the device's python3 runs it:
`CXX=/usr/bin/g++ python3 bench/gpu/coredump_on_gpu.py [more|final]`.
"""
import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
S = os.path.join(REPO, "scenarios", "cuda")
WORK = os.environ.get("WORK", "/tmp/cdlab")
LOGS, READS, CACHE = (os.path.join(WORK, d) for d in ("logs", "reads", "cache"))
CUDA_GDB = shutil.which("cuda-gdb") or "/usr/local/cuda/bin/cuda-gdb"
DEADLINE = time.time() + float(os.environ.get("BUDGET_S", "520"))
FLAGS = ("skip_nonrelocated_elf_images,skip_global_memory,skip_shared_memory,skip_local_memory,"
         "skip_constbank_memory")
_lock = threading.Lock()


def left():
    return DEADLINE - time.time()


def record(d):
    with _lock, open(os.path.join(WORK, "results.jsonl"), "a") as f:
        f.write(json.dumps(d) + "\n")
    print(json.dumps(d), flush=True)


def dump_env(folder, pattern="cudacore.%p", flags=FLAGS):
    return {"CUDA_ENABLE_COREDUMP_ON_EXCEPTION": "1", "CUDA_ENABLE_CPU_COREDUMP_ON_EXCEPTION": "0",
            "CUDA_COREDUMP_GENERATION_FLAGS": flags, "CUDA_COREDUMP_FILE": os.path.join(folder, pattern)}


def run(name, argv, tag, extra=None, timeout=240, watch=None, mkdir_watch=True):
    """Run argv in WORK/name with the cache of `tag`; poll `watch` for files while it runs."""
    cwd = os.path.join(WORK, name)
    os.makedirs(cwd, exist_ok=True)
    if watch and mkdir_watch:
        os.makedirs(watch, exist_ok=True)
    # TORCHINDUCTOR_COMPILE_THREADS=1 was tried against the ~45 s load; it is the vector-ISA probe, not the pool.
    env = dict(os.environ, CXX="/usr/bin/g++", PYTHONUNBUFFERED="1", PYTHONFAULTHANDLER="1",
               TORCHINDUCTOR_COMPILE_THREADS="1",
               TORCHINDUCTOR_CACHE_DIR=os.path.join(CACHE, tag, "inductor"),
               TRITON_CACHE_DIR=os.path.join(CACHE, tag, "triton"))
    env.update(extra or {})
    timeout = max(5, min(timeout, left() - 10))
    seen = {}  # file -> {"first_s", "last_change_s", "size"}
    t0 = time.time()
    with open(os.path.join(LOGS, name + ".log"), "wb") as log:
        p = subprocess.Popen(argv, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
        while p.poll() is None:
            if time.time() - t0 > timeout:
                p.kill()
            if watch and os.path.isdir(watch):
                for e in os.scandir(watch):
                    try:
                        size = e.stat().st_size
                    except OSError:
                        continue
                    now = round(time.time() - t0, 3)
                    s = seen.setdefault(e.name, {"first_s": now, "last_change_s": now, "size": size})
                    if s["size"] != size:
                        s["size"], s["last_change_s"] = size, now
            time.sleep(0.005)
    wall = round(time.time() - t0, 3)
    if watch and os.path.isdir(watch):  # the final sizes, and files that came and went between polls
        for e in os.scandir(watch):
            s = seen.setdefault(e.name, {"first_s": None, "last_change_s": None, "size": 0})
            s["final_size"] = e.stat().st_size
    d = {"name": name, "rc": p.returncode, "wall_s": wall, "watch": watch, "files": seen,
         "env": {k: v for k, v in (extra or {}).items()}, "argv": argv}
    record(d)
    return d


def read(name, dump, commands):
    argv = [CUDA_GDB, "-nx", "-batch"] + [a for c in ["target cudacore " + dump] + commands for a in ("-ex", c)]
    t0 = time.time()
    try:
        p = subprocess.run(argv, capture_output=True, timeout=max(5, min(120, left() - 5)))
        rc, out = p.returncode, p.stdout + b"\n--- stderr ---\n" + p.stderr
    except subprocess.TimeoutExpired as e:
        rc, out = "timeout", (e.stdout or b"") + b"\n--- stderr ---\n" + (e.stderr or b"")
    wall = round(time.time() - t0, 3)
    with open(os.path.join(READS, name + ".log"), "wb") as f:
        f.write(("$ " + " ".join(repr(a) if " " in a else a for a in argv) + "\n").encode() + out)
        f.write(f"\n--- rc {rc} wall {wall}s\n".encode())
    record({"read": name, "dump": dump, "rc": rc, "wall_s": wall,
            "size": os.path.getsize(dump) if os.path.exists(dump) else None})


READER = ["info cuda kernels", "bt"]
EXPLORE = ["info cuda kernels", "bt", "info cuda devices", "info cuda warps", "info cuda lanes",
           "info cuda blocks", "info cuda threads", "info cuda contexts", "cuda device sm warp lane block thread",
           "info frame", "x/4i $errorpc", "x/4i $pc", "info line *$pc", "info cuda exception",
           "info registers pc", "info cuda launch trace"]


def dumps_in(folder):
    return sorted(os.path.join(folder, f) for f in os.listdir(folder)) if os.path.isdir(folder) else []


def main():
    for d in (LOGS, READS, CACHE):
        os.makedirs(d, exist_ok=True)
    py = sys.executable
    env_txt = []
    for cmd in (["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                [CUDA_GDB, "--version"], [py, "-c", "import torch, triton; print('torch', torch.__version__, "
                                              "'cuda', torch.version.cuda, 'triton', triton.__version__)"],
                ["/usr/bin/g++", "--version"], ["hostname"]):
        p = subprocess.run(cmd, capture_output=True, text=True)
        env_txt.append("$ " + " ".join(cmd) + "\n" + p.stdout + p.stderr)
    with open(os.path.join(WORK, "env.txt"), "w") as f:
        f.write("\n".join(env_txt))
    print("\n".join(env_txt), flush=True)

    ima = [py, os.path.join(S, "rare_ima_user_triton.py")]
    oob = [py, os.path.join(S, "device_assert_oob.py")]
    pkg = os.path.join(WORK, "pass.pt2")
    passing = [py, os.path.join(S, "lab", "coredump_pass.py")]

    # Cold compiles side by side, none with the dump environment: the IMA scenario with its far id off (passes),
    # the assert scenario as is (asserts: plain, so no dump of another process can stop the device).
    ts = [threading.Thread(target=run, args=a) for a in (
        ("ima_warm", ima, "ima", {"RARE_CRASH_PERCENT": "0"}),
        ("oob_warm", oob, "oob"),
        ("pass_build", passing + ["build", pkg], "pass"))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()

    # a. the user Triton kernel's illegal address, every run
    far = {"RARE_CRASH_PERCENT": "100"}
    w = os.path.join(WORK, "ima_dump", "dumps")
    run("ima_dump", ima, "ima", {**far, **dump_env(w)}, watch=w)
    for i, dump in enumerate(dumps_in(w)):
        read(f"ima_dump-reader-{i}", dump, READER)
        read(f"ima_dump-explore-{i}", dump, EXPLORE)
    run("ima_nodump", ima, "ima", far)
    w2 = os.path.join(WORK, "ima_skipabort", "dumps")
    run("ima_skipabort", ima, "ima", {**far, **dump_env(w2, "cudacore.%h.%t.%p", FLAGS + ",skip_abort"),
                                      "CUDA_COREDUMP_SHOW_PROGRESS": "1"}, watch=w2)

    # b. Inductor's device-side assert
    w3 = os.path.join(WORK, "oob_dump", "dumps")
    run("oob_dump", oob, "oob", dump_env(w3), watch=w3)
    for i, dump in enumerate(dumps_in(w3)):
        read(f"oob_dump-reader-{i}", dump, READER)
        read(f"oob_dump-explore-{i}", dump, EXPLORE)
    run("oob_nodump", oob, "oob")
    w4 = os.path.join(WORK, "oob_skipabort", "dumps")
    run("oob_skipabort", oob, "oob", {**dump_env(w4, "cudacore.%h.%t.%p", FLAGS + ",skip_abort"),
                                      "CUDA_COREDUMP_SHOW_PROGRESS": "1"}, watch=w4)

    # d. files that are not dumps, and a real dump cut to half
    real = (dumps_in(w) or dumps_in(w3) or [None])[0]
    bad = os.path.join(WORK, "bad")
    os.makedirs(bad, exist_ok=True)
    open(os.path.join(bad, "empty"), "wb").close()
    shutil.copy("/etc/os-release", os.path.join(bad, "text"))
    with open(os.path.join(bad, "random"), "wb") as f:
        f.write(random.Random(0).randbytes(1 << 20))
    if real:
        with open(real, "rb") as f:
            data = f.read()
        with open(os.path.join(bad, "half"), "wb") as f:
            f.write(data[:len(data) // 2])
        with open(os.path.join(bad, "head4k"), "wb") as f:
            f.write(data[:4096])
    for n in ("empty", "text", "random", "half", "head4k", "missing"):
        if left() > 60:
            read(f"bad-{n}", os.path.join(bad, n), READER)

    # c. passing runs, with and without the dump environment, interleaved; the folder must stay empty
    for i in range(5):
        if left() < 40:
            break
        run(f"pass_plain_{i}", passing + ["run", pkg], "pass", timeout=60)
        wp = os.path.join(WORK, f"pass_dump_{i}", "dumps")
        run(f"pass_dump_{i}", passing + ["run", pkg], "pass", dump_env(wp), timeout=60, watch=wp)

    # a missing dump folder: does the driver make it?
    if left() > 60:
        wm = os.path.join(WORK, "ima_nofolder", "no", "such")
        run("ima_nofolder", ima, "ima", {**far, **dump_env(wm)}, watch=wm, mkdir_watch=False)
    record({"done": True, "left_s": round(left(), 1)})


def more():
    """Second pass (`more`): why Inductor's assert left no dump, the unreadable files, the passing runs' overhead;
    the packages are built first where this machine lacks them."""
    py = sys.executable
    for d in (LOGS, READS, CACHE):
        os.makedirs(d, exist_ok=True)
    replay = [py, os.path.join(S, "lab", "coredump_replay.py")]
    oob_pkg = os.path.join(WORK, "oob_dump", "device_assert_oob.pt2")
    ima_pkg = os.path.join(WORK, "ima_dump", "rare_ima.pt2")
    pkg = os.path.join(WORK, "pass.pt2")
    builds = [a for a in (("oob_dump", [py, os.path.join(S, "device_assert_oob.py")], "oob"),
                          ("ima_dump", [py, os.path.join(S, "rare_ima_user_triton.py")], "ima",
                           {"RARE_CRASH_PERCENT": "0"}),
                          ("pass_build", passing_argv(py, pkg)[:-2] + ["build", pkg], "pass"))
              if not os.path.exists({"oob": oob_pkg, "ima": ima_pkg, "pass": pkg}[a[2]])]
    ts = [threading.Thread(target=run, args=a) for a in builds]  # a fresh machine: build the three packages
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    with open(os.path.join(WORK, "smi2.txt"), "w") as f:
        f.write(subprocess.run(["nvidia-smi"], capture_output=True, text=True).stdout)
    ab = FLAGS + ",skip_abort"
    for name, extra in (("oob_r_plain", {}),
                        ("oob_r_dump", dump_env(os.path.join(WORK, "oob_r_dump", "dumps"))),
                        ("oob_r_linger", {**dump_env(os.path.join(WORK, "oob_r_linger", "dumps"), flags=ab),
                                          "LINGER": "15", "CUDA_COREDUMP_SHOW_PROGRESS": "1"}),
                        ("oob_r_blocking", {**dump_env(os.path.join(WORK, "oob_r_blocking", "dumps"), flags=ab),
                                            "CUDA_LAUNCH_BLOCKING": "1", "CUDA_COREDUMP_SHOW_PROGRESS": "1"}),
                        ("oob_r_elf", {**dump_env(os.path.join(WORK, "oob_r_elf", "dumps"),
                                                  flags="skip_global_memory,skip_shared_memory,skip_local_memory,"
                                                        "skip_abort"),
                                       "CUDA_COREDUMP_SHOW_PROGRESS": "1"}),
                        ("ima_r_plain", {}),
                        ("ima_r_dump", dump_env(os.path.join(WORK, "ima_r_dump", "dumps"), flags=ab))):
        if left() < 30:
            break
        kind = name.split("_")[0]
        watch = extra.get("CUDA_COREDUMP_FILE")
        run(name, replay + [kind, oob_pkg if kind == "oob" else ima_pkg], kind, extra, timeout=60,
            watch=os.path.dirname(watch) if watch else None)
        for i, dump in enumerate(dumps_in(os.path.dirname(watch)) if watch else []):
            read(f"{name}-reader-{i}", dump, READER)
            if kind == "oob":
                read(f"{name}-explore-{i}", dump, EXPLORE)

    real = (dumps_in(os.path.join(WORK, "ima_r_dump", "dumps")) or [None])[0]
    bad = os.path.join(WORK, "bad")
    os.makedirs(bad, exist_ok=True)
    open(os.path.join(bad, "empty"), "wb").close()
    shutil.copy("/etc/os-release", os.path.join(bad, "text"))
    with open(os.path.join(bad, "random"), "wb") as f:
        f.write(random.Random(0).randbytes(1 << 20))
    if real:
        with open(real, "rb") as f:
            data = f.read()
        with open(os.path.join(bad, "half"), "wb") as f:
            f.write(data[:len(data) // 2])
        with open(os.path.join(bad, "head4k"), "wb") as f:
            f.write(data[:4096])
        for i in range(3):
            read(f"real-reader-{i}", real, READER)
    for n in ("empty", "text", "random", "half", "head4k", "missing"):
        if left() > 20:
            read(f"bad-{n}", os.path.join(bad, n), READER)

    for i in range(5):
        if left() < 30:
            break
        run(f"pass_plain_{i}", passing_argv(py, pkg), "pass", timeout=50)
        wp = os.path.join(WORK, f"pass_dump_{i}", "dumps")
        run(f"pass_dump_{i}", passing_argv(py, pkg), "pass", dump_env(wp), timeout=50, watch=wp)
    if left() > 30:
        wm = os.path.join(WORK, "ima_nofolder", "no", "such")
        run("ima_nofolder", replay + ["ima", ima_pkg], "ima", dump_env(wm, flags=ab), timeout=60, watch=wm,
            mkdir_watch=False)
    record({"done2": True, "left_s": round(left(), 1)})


def final():
    """Third pass (`final`): is a Warp Assert's dump written before the process exits, per setting, repeated;
    the passing runs' overhead; a missing dump folder."""
    py = sys.executable
    for d in (LOGS, READS, CACHE):
        os.makedirs(d, exist_ok=True)
    replay = [py, os.path.join(S, "lab", "coredump_replay.py")]
    oob_pkg = os.path.join(WORK, "oob_dump", "device_assert_oob.pt2")
    ima_pkg = os.path.join(WORK, "ima_dump", "rare_ima.pt2")
    pkg = os.path.join(WORK, "pass.pt2")
    builds = (("oob_dump", [py, os.path.join(S, "device_assert_oob.py")], "oob"),
              ("ima_dump", [py, os.path.join(S, "rare_ima_user_triton.py")], "ima", {"RARE_CRASH_PERCENT": "0"}),
              ("pass_build", passing_argv(py, pkg)[:-2] + ["build", pkg], "pass"))
    ts = [threading.Thread(target=run, args=a) for a in builds]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    ab = FLAGS + ",skip_abort"
    prog = {"CUDA_COREDUMP_SHOW_PROGRESS": "1"}
    block = {"CUDA_LAUNCH_BLOCKING": "1"}
    cases = [("oob_f_skipabort_block_1", "oob", ab, {**prog, **block}),
             ("oob_f_abort_1", "oob", FLAGS, prog),
             ("oob_f_skipabort_1", "oob", ab, prog),
             ("ima_f_skipabort_1", "ima", ab, prog),
             ("oob_f_skipabort_block_2", "oob", ab, block),
             ("oob_f_abort_2", "oob", FLAGS, {}),
             ("oob_f_skipabort_2", "oob", ab, {}),
             ("oob_f_abort_block_1", "oob", FLAGS, block),
             ("ima_f_skipabort_2", "ima", ab, {})]
    for name, kind, flags, extra in cases:
        if left() < 100:
            break
        w = os.path.join(WORK, name, "dumps")
        run(name, replay + [kind, oob_pkg if kind == "oob" else ima_pkg], kind,
            {**dump_env(w, flags=flags), **extra}, timeout=60, watch=w)
        for i, dump in enumerate(dumps_in(w)):
            read(f"{name}-reader-{i}", dump, READER + ["info cuda lanes"])
    for i in range(5):
        if left() < 40:
            break
        run(f"pass_plain_{i}", passing_argv(py, pkg), "pass", timeout=60)
        wp = os.path.join(WORK, f"pass_dump_{i}", "dumps")
        run(f"pass_dump_{i}", passing_argv(py, pkg), "pass", dump_env(wp, flags=ab), timeout=60, watch=wp)
    real = (dumps_in(os.path.join(WORK, "ima_f_skipabort_1", "dumps")) or [None])[0]
    if real:
        with open(real, "rb") as f:
            data = f.read()
        bad = os.path.join(WORK, "bad")
        os.makedirs(bad, exist_ok=True)
        for n, cut in (("half", len(data) // 2), ("head4k", 4096)):
            with open(os.path.join(bad, n), "wb") as f:
                f.write(data[:cut])
            read(f"bad-{n}", os.path.join(bad, n), READER)
    if left() > 25:
        wm = os.path.join(WORK, "ima_nofolder", "no", "such")
        run("ima_nofolder", replay + ["ima", ima_pkg], "ima", dump_env(wm, flags=ab), timeout=40, watch=wm,
            mkdir_watch=False)
    record({"done3": True, "left_s": round(left(), 1)})


def passing_argv(py, pkg):
    return [py, os.path.join(S, "lab", "coredump_pass.py"), "run", pkg]


if __name__ == "__main__":
    {"more": more, "final": final}.get(sys.argv[1] if sys.argv[1:] else "", main)()
