"""One .tar.gz to attach to a ticket: the report, every run's log and command, and the culprit's sources.

A bundle is often made later, from another shell, whose environment no longer holds the run's secrets. So the
run itself, while it still holds them, records where its secret values occur in each file a bundle may take
(redactions.json: offsets and a digest of each file, never a value nor a hash of one); the bundle masks those
spans, then redacts as usual. A file that changed since, or that the record does not cover, is left out.

minify writes its folder after the run, so no record covers it: its repro.py and record are redacted like any
file, and its binary files (inputs.pt, the custom ops' libraries the repro loads) go in only where the
redactor finds nothing in their bytes."""
from __future__ import annotations

import glob
import hashlib
import io
import json
import os
import stat
import tarfile
from collections.abc import Callable
from typing import Optional

from ..child.contract import CRASH_FILE
from ..diagnose.findings import StageName
from ..exits import EXIT_INCONCLUSIVE, EXIT_USAGE, UsageFailure
from ..files.out import DISK_FAULTS
from ..files.own import MAX_LOG_READ, TooLarge, read_run_file, read_text
from ..files.runfolder import RunFolder, RunFolderError
from ..files.write import atomic_write, valid_utf8, write_file
from ..run.witness import DUMP_READING
from .markdown import render_markdown
from .model import MINIFY_RECORD, minified_record
from .record import ReportRecord
from .redact import Redactor, mask_spans

# Not the capture/ folder of a fakecheck run: it holds the repro's own tensors.
_RUN_FILES = ("output.log", "checker.log", "rerun.sh", "spec.json", "result.json", "hook.json", "fakecheck.json",
              "differential.json", CRASH_FILE, DUMP_READING)  # checker.log: a memory checker's own report
# (run/checkers.py); a crash's native stack and cuda-gdb's reading of a core dump (run/witness.py), never the dump.
RECORD = "redactions.json"
REPRO_DIR = "repro"  # the session's copy of the repro script: the one file a maintainer reads first
# What `aoti-bisect minify` leaves for a ticket: repro.py runs alone with inputs.pt and the custom ops'
# libraries (*.so) beside it (minify/graph.py writes it so).
_MINIFIED = ("minify/repro.py", "minify/inputs.pt", MINIFY_RECORD)
_BINARY = (".pt", ".so")
MAX_BINARY = 64 << 20  # a ticket's attachment, not a checkpoint: GitHub takes 25 MB
# Each text member at most (a log is capped at this on disk): a file the repro grew past it (a sparse GiB of
# hook.json) is asked its size and left out, never read whole.
MAX_MEMBER = MAX_LOG_READ


def keep_repro_script(run_dir: str, argv: list[str]) -> None:
    """Copies the repro script (argv[1] of `python SCRIPT ...`) into the run directory as it was when the run
    started, so that the bundle carries the script the runs ran, redacted like every other file."""
    os.makedirs(os.path.join(run_dir, REPRO_DIR), exist_ok=True)
    write_file(os.path.join(run_dir, REPRO_DIR, os.path.basename(argv[1])), read_text(argv[1]))


def bundle_files(run_dir: str, report: Optional[ReportRecord]) -> list[tuple[str, str]]:
    """(name in the bundle, path) of every run file and culprit source a bundle takes (no culprit source
    without a report)."""
    files = []
    for path in sorted(glob.glob(os.path.join(glob.escape(run_dir), "runs", "*", ""))):
        for name in _RUN_FILES:
            f = os.path.join(path, name)
            if _packable(run_dir, f):
                files.append((f"runs/{os.path.basename(os.path.dirname(path))}/{name}", f))
    files += [(f"{REPRO_DIR}/{os.path.basename(p)}", p)
              for p in sorted(glob.glob(os.path.join(glob.escape(run_dir), REPRO_DIR, "*"))) if _packable(run_dir, p)]
    if report:
        files += [(f"generated/{os.path.basename(p)}", p) for p in _culprit_sources(run_dir, report)]
    return files


def minified_files(run_dir: str) -> list[tuple[str, str]]:
    """(name in the bundle, path) of the minified repro and what it needs, where minify wrote one."""
    libraries = sorted(glob.glob(os.path.join(glob.escape(run_dir), "minify", "*.so")))
    paths = [os.path.join(run_dir, name) for name in _MINIFIED] + libraries
    return [(os.path.relpath(p, run_dir), p) for p in paths if _packable(run_dir, p)]


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def record_secret_spans(run_dir: str, report: ReportRecord, redactor: Redactor) -> None:
    """Called at the end of a run, by the process whose environment holds the secrets."""
    record = {}
    for name, path in bundle_files(run_dir, report):
        try:
            text = read_run_file(path, MAX_MEMBER)
        except OSError:  # a link, too large, or gone since bundle_files looked: never packed
            continue
        record[name] = {"sha256": _digest(text), "spans": redactor.value_spans(text)}
    atomic_write(os.path.join(run_dir, RECORD), json.dumps({"version": 1, "files": record}))


def _load_record(run_dir: str) -> dict:
    try:
        files = RunFolder(run_dir).read_json(RECORD).get("files")
    except (RunFolderError, OSError):
        return {}
    return files if isinstance(files, dict) else {}


def _recorded_spans(entry: object, text: str) -> Optional[list[tuple[int, int]]]:
    """The secret spans the run recorded for a file still as it was then; None where there is no such record
    (none, the file changed since, or a record that is not what the run wrote: the file is left out)."""
    if not isinstance(entry, dict) or entry.get("sha256") != _digest(text):
        return None
    spans = entry.get("spans")
    if not isinstance(spans, list) or not all(isinstance(s, list) and len(s) == 2
                                              and all(type(i) is int for i in s) for s in spans):
        return None
    return [(start, end) for start, end in spans]


def _redact_file(name: str, text: str, redactor: Redactor) -> str:
    if name.endswith(".json"):
        try:
            return json.dumps(redactor.data(json.loads(text)), indent=2)
        except (ValueError, RecursionError):  # not JSON, or nested past what the redactor walks: as text
            pass
    return redactor(text)


def write_bundle(run_dir: str, dest: str, report: ReportRecord, redactor: Redactor) -> list[str]:
    """Everything goes through the redactor on its way in: the bundle never holds a raw byte of a log.
    `report` is report.json as the run wrote it; returns the names left out (changed since the run, or a run
    that recorded no redactions: an older aoti-bisect, or one killed before its report)."""
    inside = os.path.commonpath([os.path.realpath(dest), os.path.realpath(run_dir)]) == os.path.realpath(run_dir)
    if inside and os.path.lexists(dest) and not dest.endswith((".tar.gz", ".tgz")):
        raise UsageFailure(f"--bundle {dest} would overwrite a file of the run; give a new .tar.gz path")
    try:
        return _write(run_dir, dest, report, redactor)
    except OSError as exc:
        raise UsageFailure(f"cannot write the bundle {dest}: {exc.strerror or exc}",
                           EXIT_INCONCLUSIVE if exc.errno in DISK_FAULTS else EXIT_USAGE)  # a full disk: 125


def _write(run_dir: str, dest: str, report: ReportRecord, redactor: Redactor) -> list[str]:
    root = os.path.basename(os.path.abspath(run_dir)) or "aoti-bisect-run"
    record = _load_record(run_dir)
    left_out: dict[str, str] = {}  # name in the bundle -> why it is not in it
    # O_NOFOLLOW: the default destination lies in the run directory, where a link may wait.
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o666)
    with os.fdopen(fd, "wb") as blob, tarfile.open(fileobj=blob, mode="w:gz") as tar:
        def add(name: str, content: str | bytes) -> None:
            blob = content if isinstance(content, bytes) else valid_utf8(content).encode()
            # Names are redacted as contents are: a token can sit in the script's or the --out folder's name.
            info = tarfile.TarInfo(valid_utf8(redactor(f"{root}/{name}")))
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))

        report = redactor.data(report)
        add("report.json", json.dumps(report.to_json(), indent=2))
        add("report.md", render_markdown(report, minified_record(run_dir, redactor)))
        for name, path in bundle_files(run_dir, report):
            try:
                text = read_run_file(path, MAX_MEMBER)
            except TooLarge:
                left_out[name] = f"over {MAX_MEMBER >> 20} MiB"
                continue
            except OSError:  # replaced by a link since bundle_files looked
                left_out[name] = "a link or gone"
                continue
            spans = _recorded_spans(record.get(name), text)
            if spans is None:
                left_out[name] = "no record of its secrets: the run recorded none, or it changed since"
                continue
            add(name, _redact_file(name, mask_spans(text, spans), redactor))
        left_out.update(_add_minified(run_dir, add, redactor))
        if left_out:
            add("LEFT_OUT.txt", "Left out: files whose secrets cannot be known, each with why:\n"
                                + "".join(f"{redactor(name)}: {why}\n" for name, why in left_out.items()))
    return list(left_out)


def _add_minified(run_dir: str, add: Callable[[str, str | bytes], None], redactor: Redactor) -> dict[str, str]:
    """Packs the minified repro and what it needs; returns the names left out, each with why. A binary file cannot
    be masked without breaking it: it goes in whole where the redactor finds nothing in its bytes, else not at all."""
    left_out = {}
    folder = RunFolder(run_dir)
    for name, _ in minified_files(run_dir):
        try:
            blob = folder.read_bytes(name, MAX_BINARY)
        except TooLarge:
            left_out[name] = f"over {MAX_BINARY >> 20} MiB"
            continue
        except (RunFolderError, OSError):  # replaced by a link since minified_files looked
            left_out[name] = "a link or gone"
            continue
        if not name.endswith(_BINARY):
            add(name, _redact_file(name, blob.decode("utf-8", "replace"), redactor))
        elif redactor(blob.decode("latin-1")) == blob.decode("latin-1"):
            add(name, blob)
        else:
            left_out[name] = "a binary file the redactor found something in"
    return left_out


def _culprit_sources(run_dir: str, report: ReportRecord) -> list[str]:
    """The culprit kernel's source file and the generated wrappers of the runs that localised it."""
    found = [report.culprit.source.path] if report.culprit.source else []
    for stage in report.stages:
        if stage.name in (StageName.TRACE, StageName.INSPECT) and stage.logs:
            spec = os.path.join(os.path.dirname(stage.logs[0]), "spec.json")
            try:
                overlay = json.loads(read_run_file(spec, 1 << 20)).get("env_overlay") or {}
                cache = overlay.get("TORCHINDUCTOR_CACHE_DIR")
            except (OSError, ValueError, RecursionError, AttributeError):  # a link, or not the spec we wrote
                continue
            if isinstance(cache, str):
                found += glob.glob(os.path.join(glob.escape(cache), "*", "*.wrapper.cpp"))
    return [f for f in dict.fromkeys(found) if _packable(run_dir, f)]


def _packable(run_dir: str, path: str) -> bool:
    """A regular file inside the run directory: a link, or a path in report.json, could name any file the
    user can read (one bundle shipped /etc/shadow), and so could a hard link made by the repro."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    # A hard link has the target's own mode (regular) and may sit inside the run folder: its link count tells.
    regular = stat.S_ISREG(st.st_mode) and st.st_nlink == 1
    root = os.path.realpath(run_dir)
    return regular and os.path.commonpath([os.path.realpath(path), root]) == root
