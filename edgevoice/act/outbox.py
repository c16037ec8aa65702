"""The durable outbox of the kiosk's notifications: one SQLite file (stdlib :mod:`sqlite3`, WAL, every commit
synced), mode 0600, under the service's state directory. A notification is written here, one row for each place it
goes, before anything reports the action as taken; a row leaves only once delivered, or stays marked failed (expired,
refused by the receiver, or pushed out of a full backlog) for the admin page. Each message has an id that every try
repeats, so a receiver dedupes what a restart in the middle of a delivery sends twice."""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["FILE_NAME", "Outbox", "Row", "default_outbox_dir"]

log = logging.getLogger(__name__)

FILE_NAME = "outbox.sqlite3"
KEEP_FAILED = 200
"""Failed rows kept for the admin page (the oldest go first)."""
_SCHEMA = """
CREATE TABLE IF NOT EXISTS rows (
    id TEXT NOT NULL,
    sink TEXT NOT NULL,
    action TEXT NOT NULL,
    body TEXT NOT NULL,
    created REAL NOT NULL,
    next_try REAL NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    state TEXT NOT NULL DEFAULT 'pending',
    error TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (id, sink)
);
CREATE INDEX IF NOT EXISTS rows_due ON rows (state, next_try);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
"""


def default_outbox_dir() -> Path:
    """The service's state directory for the outbox (the ``…/outbox`` entry of ``$STATE_DIRECTORY``, systemd's
    ``StateDirectory=edgevoice/outbox``), else ``$XDG_STATE_HOME/edgevoice/outbox``."""
    for entry in os.environ.get("STATE_DIRECTORY", "").split(":"):
        if entry and Path(entry).name == "outbox":
            return Path(entry)
    xdg = os.environ.get("XDG_STATE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".local" / "state") / "edgevoice" / "outbox"


@dataclass(frozen=True, slots=True)
class Row:
    """One message on its way to one place (``sink``)."""

    id: str
    sink: str
    action: str
    body: str
    created: float
    next_try: float
    attempts: int
    state: str = "pending"
    error: str = ""

    def as_json(self) -> dict[str, object]:
        """What the admin page shows: never the body's text beyond the action (the body is the receiver's)."""
        return {
            "id": self.id,
            "sink": self.sink,
            "action": self.action,
            "created": self.created,
            "attempts": self.attempts,
            "state": self.state,
            "error": self.error,
        }


class Outbox:
    """The outbox's file, open for the run (thread-safe: one connection behind a lock). ``max_pending``: rows that
    may wait at once; one more marks the oldest waiting row failed (``backlog full``)."""

    def __init__(self, directory: Path, *, max_pending: int) -> None:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.path = directory / FILE_NAME
        os.close(os.open(self.path, os.O_CREAT | os.O_RDWR, 0o600))  # created 0600 before SQLite opens it
        os.chmod(self.path, 0o600)
        self.max_pending = max_pending
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")  # a commit survives a power cut
        self._db.executescript(_SCHEMA)

    def add(self, message_id: str, action: str, body: Mapping[str, object], sinks: Sequence[str], now: float) -> None:
        """Queue ``body`` (JSON) for each of ``sinks``: on disk when this returns."""
        text = json.dumps(dict(body), separators=(",", ":"), sort_keys=True)
        with self._lock, self._db:
            self._db.execute("BEGIN IMMEDIATE")
            for sink in sinks:
                self._db.execute(
                    "INSERT OR IGNORE INTO rows (id, sink, action, body, created, next_try) VALUES (?, ?, ?, ?, ?, ?)",
                    (message_id, sink, action, text, now, now),
                )
            over = self._count("pending") - self.max_pending
            if over > 0:
                self._db.execute(
                    "UPDATE rows SET state = 'failed', error = 'backlog full' WHERE rowid IN (SELECT rowid FROM rows "
                    "WHERE state = 'pending' ORDER BY created, rowid LIMIT ?)",
                    (over,),
                )
                log.warning("outbox: %d notification(s) waiting; the oldest %d marked failed", self.max_pending, over)

    def due(self, now: float, limit: int = 32) -> list[Row]:
        """Rows waiting whose next try is due at ``now``, oldest first."""
        with self._lock:
            cursor = self._db.execute(
                "SELECT id, sink, action, body, created, next_try, attempts, state, error FROM rows "
                "WHERE state = 'pending' AND next_try <= ? ORDER BY created, rowid LIMIT ?",
                (now, limit),
            )
            return [Row(*r) for r in cursor.fetchall()]

    def next_due(self) -> float | None:
        """When the earliest waiting row is due; None when none waits."""
        with self._lock:
            (value,) = self._db.execute("SELECT MIN(next_try) FROM rows WHERE state = 'pending'").fetchone()
            return None if value is None else float(value)

    def delivered(self, row: Row) -> None:
        with self._lock, self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute("DELETE FROM rows WHERE id = ? AND sink = ?", (row.id, row.sink))
            self._db.execute(
                "INSERT INTO meta (name, value) VALUES ('delivered', 1) "
                "ON CONFLICT(name) DO UPDATE SET value = value + 1"
            )

    def retry(self, row: Row, next_try: float, error: str) -> None:
        with self._lock, self._db:
            self._db.execute(
                "UPDATE rows SET attempts = attempts + 1, next_try = ?, error = ? WHERE id = ? AND sink = ?",
                (next_try, error[:200], row.id, row.sink),
            )

    def fail(self, row: Row, error: str) -> None:
        with self._lock, self._db:
            self._db.execute(
                "UPDATE rows SET attempts = attempts + 1, state = 'failed', error = ? WHERE id = ? AND sink = ?",
                (error[:200], row.id, row.sink),
            )
            self._prune_failed()

    def expire(self, now: float, max_age_s: float) -> int:
        """Mark failed every waiting row older than ``max_age_s`` at ``now``; how many."""
        with self._lock, self._db:
            cursor = self._db.execute(
                "UPDATE rows SET state = 'failed', error = 'expired: not delivered in time' "
                "WHERE state = 'pending' AND created < ?",
                (now - max_age_s,),
            )
            self._prune_failed()
            return cursor.rowcount

    def shift(self, seconds: float) -> None:
        """The wall clock jumped by ``seconds``: move every waiting row's times with it, so that a jump neither
        expires them nor holds them back."""
        with self._lock, self._db:
            self._db.execute(
                "UPDATE rows SET created = created + ?, next_try = next_try + ? WHERE state = 'pending'",
                (seconds, seconds),
            )

    def summary(self, limit: int = 50) -> dict[str, object]:
        """Counts of what waits, what failed and what was delivered, with the latest rows of the first two."""
        with self._lock:
            listed: dict[str, list[dict[str, object]]] = {}
            for state in ("pending", "failed"):
                cursor = self._db.execute(
                    "SELECT id, sink, action, body, created, next_try, attempts, state, error FROM rows "
                    "WHERE state = ? ORDER BY created DESC, rowid DESC LIMIT ?",
                    (state, limit),
                )
                listed[state] = [Row(*r).as_json() for r in cursor.fetchall()]
            delivered = self._db.execute("SELECT value FROM meta WHERE name = 'delivered'").fetchone()
            return {
                "pending": self._count("pending"),
                "failed": self._count("failed"),
                "delivered": delivered[0] if delivered else 0,
                "pending_rows": listed["pending"],
                "failed_rows": listed["failed"],
            }

    def _count(self, state: str) -> int:
        (n,) = self._db.execute("SELECT COUNT(*) FROM rows WHERE state = ?", (state,)).fetchone()
        return int(n)

    def _prune_failed(self) -> None:
        self._db.execute(
            "DELETE FROM rows WHERE rowid IN (SELECT rowid FROM rows WHERE state = 'failed' "
            "ORDER BY created DESC, rowid DESC LIMIT -1 OFFSET ?)",
            (KEEP_FAILED,),
        )

    def close(self) -> None:
        with self._lock:
            self._db.close()
