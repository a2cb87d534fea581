"""One .tar.gz to attach to a ticket: the report, every run's log and command, and the culprit's sources."""
from __future__ import annotations

import glob
import io
import json
import os
import stat
import tarfile

from ..files import read_text
from .markdown import render_markdown
from .redact import Redactor

_RUN_FILES = ("output.log", "rerun.sh", "spec.json", "result.json")


def write_bundle(run_dir: str, dest: str, data: dict, redactor: Redactor) -> str:
    """Everything goes through the redactor on its way in: the bundle never holds a raw byte of a log."""
    root = os.path.basename(os.path.abspath(run_dir)) or "aoti-bisect-run"
    # O_NOFOLLOW: the default destination lies in the run directory, where a link may wait.
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o666)
    with os.fdopen(fd, "wb") as blob, tarfile.open(fileobj=blob, mode="w:gz") as tar:
        def add(name: str, text: str) -> None:
            blob = redactor(text).encode()
            info = tarfile.TarInfo(f"{root}/{name}")
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))

        add("report.json", json.dumps(data, indent=2))
        add("report.md", render_markdown(data))
        for path in sorted(glob.glob(os.path.join(run_dir, "runs", "*", ""))):
            for name in _RUN_FILES:
                f = os.path.join(path, name)
                if _packable(run_dir, f):
                    add(f"runs/{os.path.basename(os.path.dirname(path))}/{name}", read_text(f))
        for path in _culprit_sources(run_dir, data):
            add(f"generated/{os.path.basename(path)}", read_text(path))
    return dest


def _culprit_sources(run_dir: str, data: dict) -> list[str]:
    """The culprit kernel's source file and the generated wrappers of the runs that localised it."""
    found = []
    source = ((data.get("culprit") or {}).get("source") or {}).get("path")
    if source:
        found.append(source)
    for stage in data.get("stages", []):
        if stage["name"] in ("trace", "inspect") and stage.get("logs"):
            spec = os.path.join(os.path.dirname(stage["logs"][0]), "spec.json")
            try:
                with open(spec) as f:
                    cache = json.load(f)["env_overlay"]["TORCHINDUCTOR_CACHE_DIR"]
            except (OSError, KeyError, ValueError):
                continue
            found += glob.glob(os.path.join(cache, "*", "*.wrapper.cpp"))
    return [f for f in dict.fromkeys(found) if _packable(run_dir, f)]


def _packable(run_dir: str, path: str) -> bool:
    """A regular file inside the run directory: a link, or a path in report.json, could name any file the
    user can read (one bundle shipped /etc/shadow)."""
    try:
        regular = stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False
    root = os.path.realpath(run_dir)
    return regular and os.path.commonpath([os.path.realpath(path), root]) == root
