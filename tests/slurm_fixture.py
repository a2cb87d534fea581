"""A real single-node Slurm for the tests: munged, slurmctld and slurmd started from a temp folder, this host
as controller and sole node, on free loopback ports; stopped by process id (other sessions on this machine
may run daemons of the same names).

Debian's packages: slurmctld slurmd slurm-client munge (.ci/run installs them where apt works). Where they
are missing or the daemons do not come up, `start_slurm` raises SlurmUnavailable with the reason and the
tests skip with it.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sinfo", "sbatch", "squeue", "scancel", "srun")


class SlurmUnavailable(Exception):
    pass


def _daemon(name: str) -> str:
    # Debian puts the daemons in /usr/sbin, which a non-root PATH may lack.
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")
    if not found:
        raise SlurmUnavailable(f"{name} not installed (apt-get install slurmctld slurmd slurm-client munge)")
    return found


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@dataclass
class Slurm:
    root: str
    conf: str
    node: str
    procs: list[subprocess.Popen] = field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        """What a client (sbatch, sinfo, aoti-bisect) needs to talk to this cluster and no other."""
        return {"SLURM_CONF": self.conf}

    def run(self, *argv: str, timeout: float = 30) -> subprocess.CompletedProcess:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env={**os.environ, **self.env})

    def logs(self) -> str:
        out = []
        for name in ("slurmctld.log", "slurmd.log", "munged.log"):
            path = os.path.join(self.root, name)
            if os.path.isfile(path):
                with open(path, errors="replace") as f:
                    out.append(f"== {name}\n" + "".join(f.readlines()[-30:]))
        return "\n".join(out)

    def wait_until_idle(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        state = ""
        while time.monotonic() < deadline:
            for proc in self.procs:
                if proc.poll() is not None:
                    raise SlurmUnavailable(f"{proc.args[0]} exited with {proc.returncode}\n{self.logs()}")
            got = self.run("sinfo", "-h", "-N", "-o", "%t")
            state = (got.stdout + got.stderr).strip()
            if got.returncode == 0 and state == "idle":
                return
            time.sleep(0.5)
        raise SlurmUnavailable(f"the node did not become idle in {timeout:.0f} s (sinfo: {state!r})\n{self.logs()}")

    def wait_until_empty(self, timeout: float = 60) -> None:
        """No job left in the queue: each test starts on an idle node."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.run("squeue", "-h", "-o", "%i").stdout.strip():
                return
            time.sleep(0.5)
        raise AssertionError("jobs still queued: " + self.run("squeue").stdout)

    def stop(self) -> None:
        # Reverse order: slurmd and slurmctld still need munged while they shut down.
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self.procs.clear()


def _write_conf(root: str, node: str, ctld_port: int, d_port: int) -> str:
    conf = os.path.join(root, "slurm.conf")
    p = lambda name: os.path.join(root, name)  # noqa: E731
    text = f"""\
ClusterName=aoti-test
SlurmctldHost={node}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={p("munge.sock")}
StateSaveLocation={p("state")}
SlurmdSpoolDir={p("spool")}
SlurmctldPidFile={p("slurmctld.pid")}
SlurmdPidFile={p("slurmd.pid")}
SlurmctldLogFile={p("slurmctld.log")}
SlurmdLogFile={p("slurmd.log")}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
KillWait=5
MinJobAge=600
NodeName={node} NodeAddr=127.0.0.1 CPUs={os.cpu_count() or 1} State=UNKNOWN
PartitionName=debug Nodes={node} Default=YES MaxTime=INFINITE State=UP
"""
    with open(conf, "w") as f:
        f.write(text)
    return conf


def start_slurm(root: str) -> Slurm:
    """Starts munged, slurmctld and slurmd under root (a short path: the munge socket's must fit in 108 bytes)
    and waits until the node is idle. Raises SlurmUnavailable with the reason."""
    paths = {name: _daemon(name) for name in DAEMONS}
    for name in CLIENTS:
        if not shutil.which(name):
            raise SlurmUnavailable(f"{name} not installed (apt-get install slurm-client)")
    if os.getuid() != 0:
        raise SlurmUnavailable("slurmd must run as root to start jobs")
    node = socket.gethostname().split(".")[0]
    for sub in ("state", "spool"):
        os.makedirs(os.path.join(root, sub), exist_ok=True)
    key = os.path.join(root, "munge.key")
    with open(os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
        f.write(os.urandom(1024))
    conf = _write_conf(root, node, *_free_ports(2))
    slurm = Slurm(root, conf, node)
    null = subprocess.DEVNULL
    j = lambda name: os.path.join(root, name)  # noqa: E731
    try:
        # -F: in the foreground, so the process we hold is the daemon itself and we stop it by its id.
        slurm.procs.append(subprocess.Popen(
            [paths["munged"], "-F", "--force", f"--key-file={key}", f"--socket={j('munge.sock')}",
             f"--pid-file={j('munged.pid')}", f"--log-file={j('munged.log')}", f"--seed-file={j('munged.seed')}"],
            stdin=null, stdout=null, stderr=null))
        deadline = time.monotonic() + 10
        while not os.path.exists(j("munge.sock")):
            if slurm.procs[0].poll() is not None or time.monotonic() > deadline:
                raise SlurmUnavailable(f"munged did not start\n{slurm.logs()}")
            time.sleep(0.1)
        slurm.procs.append(subprocess.Popen([paths["slurmctld"], "-D", "-f", conf], stdin=null, stdout=null,
                                            stderr=null))
        slurm.procs.append(subprocess.Popen([paths["slurmd"], "-D", "-f", conf, "-N", node], stdin=null,
                                            stdout=null, stderr=null))
        slurm.wait_until_idle()
    except BaseException:
        slurm.stop()
        raise
    return slurm
