"""The nightly history: one SQLite row per run, keyed by repro, torch build, GPU/driver and environment, and one
per checked run (--sanitize) with what its memory checker found."""
from __future__ import annotations

import contextlib
import os
import sqlite3
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Optional

from ..exits import UsageFailure
from ..run.types import Outcome
from ..stats import Rate
from .records import Night

SCHEMA_VERSION = 2
# Writers wait this long for each other (two nightly jobs on one host) before "database is locked" counts.
BUSY_TIMEOUT_S = 60

_SCHEMA_V1 = """
CREATE TABLE batches (
    batch TEXT PRIMARY KEY, started TEXT NOT NULL, finished TEXT, set_path TEXT, shards TEXT,
    complete INTEGER NOT NULL);
CREATE TABLE runs (
    id INTEGER PRIMARY KEY,
    batch TEXT NOT NULL REFERENCES batches(batch),
    repro TEXT NOT NULL, run_index INTEGER NOT NULL, started TEXT NOT NULL,
    outcome TEXT NOT NULL, failed INTEGER NOT NULL, duration_s REAL,
    kind TEXT, phase TEXT, fingerprint TEXT, message TEXT,
    torch TEXT, torch_git TEXT, gpu TEXT, driver TEXT, env_fp TEXT, host TEXT, log TEXT,
    UNIQUE (batch, repro, run_index));
CREATE INDEX runs_by_key ON runs (repro, torch, torch_git, gpu, driver, env_fp);
CREATE INDEX runs_by_time ON runs (repro, started);
"""

# _MIGRATIONS[i] upgrades a database from schema v(i+1) to v(i+2); a new database gets v1, then every one of
# them, so an upgraded database and a new one are built by the same statements.
_MIGRATIONS: list[str] = [
    # v2: each repro's checked run of a night; fingerprints: its findings' fingerprints, space-separated.
    """CREATE TABLE memchecks (
        batch TEXT NOT NULL REFERENCES batches(batch), repro TEXT NOT NULL, tool TEXT, errors INTEGER,
        finding TEXT, fingerprints TEXT NOT NULL, refused TEXT, skipped TEXT, log TEXT,
        PRIMARY KEY (batch, repro))""",
]

# The tables (and their columns) each schema version has.
_COLUMNS = {1: {"batches": {"batch", "started", "finished", "set_path", "shards", "complete"},
                "runs": {"batch", "repro", "run_index", "started", "outcome", "failed", "duration_s", "kind",
                         "phase", "fingerprint", "message", "torch", "torch_git", "gpu", "driver", "env_fp",
                         "host", "log"}}}
_COLUMNS[2] = {**_COLUMNS[1], "memchecks": {"batch", "repro", "tool", "errors", "finding", "fingerprints", "refused",
                                            "skipped", "log"}}


def default_path() -> str:
    data = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(data, "aoti-bisect", "history.sqlite3")


class HistoryError(UsageFailure):
    """A history database that cannot be opened, read or written, said in one line."""


def reused_batch(batch: str, path: str) -> str:
    return (f"batch {batch} is already in the history {path} (another night ran under that name); "
            "give a fresh --batch")


@dataclass(frozen=True)
class Baseline:
    """Earlier nights of one repro, pooled."""

    rate: Rate
    nights: int
    torch: Optional[str]
    torch_git: Optional[str]


@dataclass(frozen=True)
class Past:
    """What the history knows of one repro before tonight: all a night's judging asks of it."""

    baseline: Optional[Baseline]
    known_fingerprints: frozenset[str]
    # fingerprint -> (first, last) time any run showed it, tonight's runs included
    seen: dict[str, tuple[str, str]]
    # fingerprints of the findings of earlier nights' checked runs; None when no earlier checked run finished
    memcheck_known: Optional[frozenset[str]] = None


class History:
    """The history database. `readonly` (for `aoti-bisect history`) opens it with SQLite's mode=ro: it never
    writes, so it works on a read-only file and leaves a file that is not a history exactly as it was."""

    def __init__(self, path: str, readonly: bool = False) -> None:
        self.path = os.path.abspath(path)
        try:
            if readonly:
                self._open_readonly()
            else:
                os.makedirs(os.path.dirname(self.path), exist_ok=True)
                self.db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
                self._open_for_writing()
        except sqlite3.DatabaseError as exc:
            raise HistoryError(f"history database {self.path}: {exc}")
        except OSError as exc:
            raise HistoryError(f"history database {self.path}: {exc.strerror}")

    def _open_readonly(self) -> None:
        """mode=ro, else immutable=1. A WAL database opened read-only still needs its -shm file, which a reader
        cannot create in a folder it cannot write (a history published read-only, a CI cache): immutable=1
        reads the file as it is, with no locks and no -shm; a file nobody may write cannot change meanwhile."""
        quoted = urllib.parse.quote(self.path)
        for i, options in enumerate(("mode=ro", "mode=ro&immutable=1")):
            db = None
            try:
                db = self.db = sqlite3.connect(f"file:{quoted}?{options}", uri=True, timeout=BUSY_TIMEOUT_S,
                                               isolation_level=None)
                self._check_version(self.db.execute("PRAGMA user_version").fetchone()[0], readonly=True)
                return
            except sqlite3.OperationalError:
                if db is not None:
                    db.close()
                if i:
                    raise

    def _open_for_writing(self) -> None:
        # Two jobs opening one new database at once race to create its schema and to switch it to WAL; the
        # switch needs the database to itself and answers "locked" at once, without waiting for the busy
        # timeout. So "locked" during these two steps is retried until the timeout.
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        while True:
            try:
                self._upgrade()
                # WAL lets readers (`history`) go on while a night is written.
                self.db.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def _check_version(self, version: int, readonly: bool = False) -> None:
        if version == 0 and (readonly or self.db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0]):
            raise HistoryError(f"{self.path} is not an aoti-bisect history (it has no history schema)")
        if version > SCHEMA_VERSION:
            raise HistoryError(f"history database {self.path} has schema v{version}; this aoti-bisect "
                               f"knows up to v{SCHEMA_VERSION} (upgrade aoti-bisect)")
        if version and not self._has_history_tables(version):
            raise HistoryError(f"{self.path} is not an aoti-bisect history (its tables are not the history schema)")
        if readonly and version < SCHEMA_VERSION:
            raise HistoryError(f"history database {self.path} has schema v{version}; a nightly or merge "
                               f"upgrades it to v{SCHEMA_VERSION}")

    def _has_history_tables(self, version: int) -> bool:
        """A user_version is any SQLite file's to set: the tables it claims must be there, with their columns,
        or the first query fails deep inside a night (a traceback, after the runs)."""
        for table, columns in _COLUMNS[version].items():
            have = {row[1] for row in self.db.execute(f"PRAGMA table_info({table})")}
            if not columns <= have:
                return False
        return True

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        # IMMEDIATE takes the write lock up front, so two writers queue on the busy timeout instead of one
        # failing halfway with "database is locked".
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def _upgrade(self) -> None:
        with self._transaction():
            version = self.db.execute("PRAGMA user_version").fetchone()[0]
            self._check_version(version)
            if version == 0:
                for statement in _SCHEMA_V1.split(";"):
                    if statement.strip():
                        self.db.execute(statement)
                version = 1
            for migration in _MIGRATIONS[version - 1:]:
                self.db.execute(migration)
            self.db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def close(self) -> None:
        self.db.close()

    def has_batch(self, batch: str) -> bool:
        return self.db.execute("SELECT 1 FROM batches WHERE batch = ?", (batch,)).fetchone() is not None

    def add(self, night: Night) -> int:
        """Stores a night's runs; adding the same night again (a re-merge) adds nothing. Returns rows added.
        Another night under a batch name already stored is refused: its runs would be dropped as duplicates."""
        with self._transaction():
            for r in night.runs:
                stored = self.db.execute("SELECT started FROM runs WHERE batch = ? AND repro = ? AND run_index = ?",
                                         (night.batch, r["repro"], r["index"])).fetchone()
                if stored and stored[0] != r["started"]:
                    raise HistoryError(reused_batch(night.batch, self.path))
            self.db.execute(
                "INSERT INTO batches VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(batch) DO UPDATE SET "
                "finished = excluded.finished, shards = excluded.shards, complete = excluded.complete",
                (night.batch, night.started, night.finished, night.set_path, ",".join(night.shards),
                 int(night.complete)))
            before = self.db.total_changes
            self.db.executemany(
                "INSERT OR IGNORE INTO runs (batch, repro, run_index, started, outcome, failed, duration_s, kind,"
                " phase, fingerprint, message, torch, torch_git, gpu, driver, env_fp, host, log)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(night.batch, r["repro"], r["index"], r["started"], r["outcome"],
                  int(Outcome(r["outcome"]).is_failure), r["duration_s"], r["kind"], r["phase"],
                  r["fingerprint"], r["message"], r["torch"], r["torch_git"], r["gpu"], r["driver"],
                  r["env_fp"], r["host"], r["log"]) for r in night.runs])
            added = self.db.total_changes - before
            self.db.executemany(
                "INSERT OR IGNORE INTO memchecks (batch, repro, tool, errors, finding, fingerprints, refused, skipped,"
                " log) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(night.batch, m["repro"], m["tool"], m["errors"],
                  m["findings"][0]["description"] if m["findings"] else None,
                  " ".join(f["fingerprint"] for f in m["findings"]), m["refused"], m["skipped"], m["log"])
                 for m in night.memchecks.values()])
        return added

    def _earlier_batches(self, repro: str, night: Night, window: int) -> list[str]:
        rows = self.db.execute(
            "SELECT b.batch FROM batches b WHERE b.batch != ? AND b.started < ? AND EXISTS "
            "(SELECT 1 FROM runs r WHERE r.batch = b.batch AND r.repro = ? AND r.outcome != 'infra_error') "
            "ORDER BY b.started DESC LIMIT ?", (night.batch, night.started, repro, window)).fetchall()
        return [b for (b,) in rows]

    def past(self, repro: str, night: Night, window: int) -> Past:
        return Past(self._baseline(repro, night, window), frozenset(self._known_fingerprints(repro, night)),
                    self._seen(repro), self._memcheck_known(repro, night))

    def _baseline(self, repro: str, night: Night, window: int) -> Optional[Baseline]:
        """The last `window` nights before this one that ran the repro, pooled; None on its first night."""
        batches = self._earlier_batches(repro, night, window)
        if not batches:
            return None
        marks = ",".join("?" * len(batches))
        failures, runs = self.db.execute(
            f"SELECT SUM(failed), COUNT(*) FROM runs WHERE repro = ? AND outcome != 'infra_error' "
            f"AND batch IN ({marks})", (repro, *batches)).fetchone()
        torch, git = self.db.execute(
            "SELECT torch, torch_git FROM runs WHERE repro = ? AND batch = ? LIMIT 1", (repro, batches[0])).fetchone()
        return Baseline(Rate(failures or 0, runs), len(batches), torch, git)

    def _known_fingerprints(self, repro: str, night: Night) -> set[str]:
        rows = self.db.execute(
            "SELECT DISTINCT r.fingerprint FROM runs r JOIN batches b ON b.batch = r.batch "
            "WHERE r.repro = ? AND r.failed = 1 AND r.batch != ? AND b.started < ?",
            (repro, night.batch, night.started)).fetchall()
        return {fp for (fp,) in rows}

    def _memcheck_known(self, repro: str, night: Night) -> Optional[frozenset[str]]:
        """What earlier nights' checked runs of a repro found; only runs whose checker finished count."""
        rows = self.db.execute(
            "SELECT m.fingerprints FROM memchecks m JOIN batches b ON b.batch = m.batch WHERE m.repro = ? "
            "AND m.errors IS NOT NULL AND m.batch != ? AND b.started < ?",
            (repro, night.batch, night.started)).fetchall()
        return frozenset(fp for (fps,) in rows for fp in fps.split()) if rows else None

    def _seen(self, repro: str) -> dict[str, tuple[str, str]]:
        """Each failure fingerprint of a repro, with the first and last time any run showed it."""
        rows = self.db.execute(
            "SELECT fingerprint, MIN(started), MAX(started) FROM runs WHERE repro = ? AND failed = 1 "
            "GROUP BY fingerprint", (repro,)).fetchall()
        return {fp: (first, last) for fp, first, last in rows}

    def trend(self, repros: tuple[str, ...] = (), nights: int = 14) -> list[dict]:
        """Per repro and night (oldest first): the key columns and the rate."""
        where, args = "", []
        if repros:
            where = f"WHERE r.repro IN ({','.join('?' * len(repros))})"
            args = list(repros)
        rows = self.db.execute(
            "SELECT r.repro, b.batch, b.started, GROUP_CONCAT(DISTINCT r.torch), GROUP_CONCAT(DISTINCT r.torch_git),"
            " GROUP_CONCAT(DISTINCT r.gpu), GROUP_CONCAT(DISTINCT r.driver),"
            " SUM(r.outcome != 'infra_error'), SUM(r.failed), SUM(r.outcome = 'infra_error'),"
            " COUNT(DISTINCT CASE WHEN r.failed THEN r.fingerprint END)"
            f" FROM runs r JOIN batches b ON b.batch = r.batch {where}"
            " GROUP BY r.repro, b.batch ORDER BY r.repro, b.started", args).fetchall()
        out: dict[str, list[dict]] = {}
        for repro, batch, started, torch, git, gpu, driver, runs, failures, infra, signatures in rows:
            out.setdefault(repro, []).append({
                "repro": repro, "batch": batch, "started": started, "torch": torch, "torch_git": git, "gpu": gpu,
                "driver": driver, "infra_errors": infra, "signatures": signatures,
                **Rate(failures, runs).to_json()})
        return [row for rows_ in out.values() for row in rows_[-nights:]]
