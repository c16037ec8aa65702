"""The review inbox's store: one SQLite file (stdlib :mod:`sqlite3`), mode 0600, under the service's state directory.

SQLite rather than a JSON file rewritten whole: an item is added by the bus subscriber while the admin page reads
and deletes others, each in a transaction of its own, with no rewrite of every item per refused question, and
``secure_delete`` overwrites what is deleted instead of leaving it in the file's free pages. A file that cannot be
read as the inbox is logged (without its content), removed, and a fresh inbox begun: it could never be pruned.

Privacy (docs/admin.md, "Review inbox"): the text is masked (:mod:`edgevoice.review.masking`) before it is stored,
nothing of it is logged, items are kept at most ``keep_days`` after they were last asked and at most ``max_items``
(pruned on every write and at open), and :meth:`ReviewStore.clear` deletes everything. A question marked "rightly
refused" leaves no text behind: only a keyed hash of it, so the same question is not added again.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import os
import re
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from edgevoice.errors import EdgeVoiceError
from edgevoice.review.masking import mask_text

__all__ = ["FILE_NAME", "REASONS", "Item", "Ranked", "ReviewStore", "default_review_dir"]

log = logging.getLogger(__name__)

FILE_NAME = "inbox.sqlite3"
REASONS = ("refused", "asked_again", "low_margin")
"""Why a question is in the inbox: the kiosk said it does not know, asked the visitor to say it again, or answered
with its best entry barely ahead of the next."""
DAY_S = 86400.0
_SCHEMA = """
CREATE TABLE IF NOT EXISTS items (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    question TEXT NOT NULL,
    same TEXT NOT NULL UNIQUE,
    reason TEXT NOT NULL,
    verdict TEXT,
    reply TEXT NOT NULL,
    ranked TEXT NOT NULL,
    margin REAL,
    first_at REAL NOT NULL,
    last_at REAL NOT NULL,
    times INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS items_last ON items (last_at);
CREATE TABLE IF NOT EXISTS settled (digest TEXT PRIMARY KEY, at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
_NOT_WORD = re.compile(r"[^\w\[\]]+")


def default_review_dir() -> Path:
    """The service's state directory for the inbox (the ``…/review`` entry of ``$STATE_DIRECTORY``, systemd's
    ``StateDirectory=edgevoice/review``), else ``$XDG_STATE_HOME/edgevoice/review``."""
    for entry in os.environ.get("STATE_DIRECTORY", "").split(":"):
        if entry and Path(entry).name == "review":
            return Path(entry)
    xdg = os.environ.get("XDG_STATE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".local" / "state") / "edgevoice" / "review"


def same_question(text: str) -> str:
    """What two askings of the same question share: lower case, words only."""
    return " ".join(_NOT_WORD.sub(" ", text.casefold()).split())


@dataclass(frozen=True)
class Ranked:
    """An entry the kiosk ranked first: its key and its question as the knowledge had it then."""

    key: str
    question: str


@dataclass(frozen=True)
class Item:
    """One question in the inbox (its text masked), with what the kiosk made of it the last time it was asked."""

    id: int
    question: str
    reason: str
    verdict: str | None
    reply: str
    ranked: tuple[Ranked, ...]
    margin: float | None
    first_at: float
    last_at: float
    times: int

    def as_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "question": self.question,
            "reason": self.reason,
            "verdict": self.verdict,
            "reply": self.reply,
            "ranked": [{"key": r.key, "question": r.question} for r in self.ranked],
            "margin": None if self.margin is None else round(self.margin, 3),
            "first_at": _iso(self.first_at),
            "last_at": _iso(self.last_at),
            "times": self.times,
        }


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


class ReviewStore:
    """The inbox in ``directory``/:data:`FILE_NAME`; every method is safe from any thread (one connection, one lock).

    ``now``: the wall clock in seconds (retention counts days)."""

    def __init__(
        self,
        directory: Path,
        *,
        keep_days: int,
        max_items: int,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.path = Path(directory) / FILE_NAME
        self.keep_days, self.max_items, self._now = keep_days, max_items, now
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise EdgeVoiceError(
                f"review inbox: cannot make {str(self.path.parent)!r} ({exc.strerror}); set [review] dir",
                code="review_unavailable",
            ) from None
        self._db = self._open()

    # -- opening --------------------------------------------------------------------------------------------------
    def _open(self) -> sqlite3.Connection:
        try:
            return self._connect()
        except sqlite3.DatabaseError as exc:  # not a database, or a broken one: it can never be pruned, so it goes
            log.warning("review inbox: %s cannot be read (%s); it is removed and a fresh inbox begun", self.path, exc)
            for leftover in (self.path, self.path.with_name(self.path.name + "-journal")):
                with contextlib.suppress(FileNotFoundError):
                    leftover.unlink()
            return self._connect()

    def _connect(self) -> sqlite3.Connection:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)  # made 0600 before SQLite writes a byte of it
        try:
            os.fchmod(fd, 0o600)  # and kept so, whoever made it
        finally:
            os.close(fd)
        db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        try:
            db.execute("PRAGMA secure_delete = ON")  # deleted text is overwritten, not left in free pages
            db.execute("PRAGMA journal_mode = DELETE")
            if db.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                raise sqlite3.DatabaseError("its integrity check failed")
            db.executescript(_SCHEMA)
            with db:
                db.execute("BEGIN IMMEDIATE")
                self._prune(db)
        except BaseException:
            db.close()
            raise
        return db

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # -- writing --------------------------------------------------------------------------------------------------
    def add(
        self,
        question: str,
        *,
        reason: str,
        verdict: str | None,
        reply: str,
        ranked: Sequence[Ranked],
        margin: float | None,
    ) -> int | None:
        """Keep ``question`` (masked) with what the kiosk made of it; the same question already in the inbox is
        counted again and updated. None: not kept (empty, or marked rightly refused)."""
        if reason not in REASONS:
            raise ValueError(f"reason {reason!r} is not one of {REASONS}")
        question = mask_text(" ".join(question.split()))
        same = same_question(question)
        if not same:
            return None
        reply = mask_text(reply.strip())
        listed = json.dumps([[r.key, mask_text(r.question)] for r in ranked])
        now = self._now()
        with self._lock, self._db:
            self._db.execute("BEGIN IMMEDIATE")
            if self._db.execute("SELECT 1 FROM settled WHERE digest = ?", (self._digest(same),)).fetchone():
                return None
            row = self._db.execute(
                "INSERT INTO items (question, same, reason, verdict, reply, ranked, margin, first_at, last_at, times) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1) ON CONFLICT (same) DO UPDATE SET "
                "question = excluded.question, reason = excluded.reason, verdict = excluded.verdict, "
                "reply = excluded.reply, ranked = excluded.ranked, margin = excluded.margin, "
                "last_at = excluded.last_at, times = times + 1 RETURNING id",
                (question, same, reason, verdict, reply, listed, margin, now, now),
            ).fetchone()
            self._prune(self._db)
            return int(row[0])

    def settle(self, item_id: int) -> bool:
        """Mark the item "rightly refused": it leaves the inbox, and the same question is never added again (a keyed
        hash of it is kept, not its text). False: no such item."""
        with self._lock, self._db:
            self._db.execute("BEGIN IMMEDIATE")
            row = self._db.execute("DELETE FROM items WHERE id = ? RETURNING same", (item_id,)).fetchone()
            if row is None:
                return False
            self._db.execute(
                "INSERT OR REPLACE INTO settled (digest, at) VALUES (?, ?)", (self._digest(row[0]), self._now())
            )
            self._db.execute(
                "DELETE FROM settled WHERE digest NOT IN (SELECT digest FROM settled ORDER BY at DESC LIMIT ?)",
                (self.max_items,),
            )
            return True

    def delete(self, item_id: int) -> bool:
        """Delete one item; False: no such item."""
        with self._lock, self._db:
            return self._db.execute("DELETE FROM items WHERE id = ?", (item_id,)).rowcount > 0

    def clear(self) -> int:
        """Delete everything: the items and the marks of questions rightly refused; how many items there were."""
        with self._lock, self._db:
            self._db.execute("BEGIN IMMEDIATE")
            count = self._db.execute("DELETE FROM items").rowcount
            self._db.execute("DELETE FROM settled")
            self._db.execute("DELETE FROM meta WHERE name = 'hash_key'")  # old marks' hashes mean nothing now
            return int(count)

    # -- reading --------------------------------------------------------------------------------------------------
    def items(self) -> list[Item]:
        """The items, the most recently asked first (pruned first: nothing past its days is ever shown)."""
        with self._lock, self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self._prune(self._db)
            rows = self._db.execute(
                "SELECT id, question, reason, verdict, reply, ranked, margin, first_at, last_at, times FROM items "
                "ORDER BY last_at DESC, id DESC"
            ).fetchall()
        return [_item(row) for row in rows]

    def item(self, item_id: int) -> Item | None:
        return next((i for i in self.items() if i.id == item_id), None)

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT count(*) FROM items").fetchone()[0])

    # -- within a transaction -------------------------------------------------------------------------------------
    def _prune(self, db: sqlite3.Connection) -> None:
        """(In a transaction.) Items past ``keep_days`` since last asked, and the oldest past ``max_items``, go."""
        db.execute("DELETE FROM items WHERE last_at < ?", (self._now() - self.keep_days * DAY_S,))
        db.execute(
            "DELETE FROM items WHERE id NOT IN (SELECT id FROM items ORDER BY last_at DESC, id DESC LIMIT ?)",
            (self.max_items,),
        )

    def _digest(self, same: str) -> str:
        """(In a transaction.) The keyed hash a question rightly refused is remembered by (the key: random, in the
        file, made anew by :meth:`clear`)."""
        row = self._db.execute("SELECT value FROM meta WHERE name = 'hash_key'").fetchone()
        if row is None:
            key = secrets.token_hex(32)
            self._db.execute("INSERT INTO meta (name, value) VALUES ('hash_key', ?)", (key,))
        else:
            key = row[0]
        return hmac.new(bytes.fromhex(key), same.encode(), hashlib.sha256).hexdigest()


def _item(row: tuple[object, ...]) -> Item:
    ident, question, reason, verdict, reply, ranked, margin, first_at, last_at, times = row
    return Item(
        id=int(ident),  # type: ignore[call-overload]
        question=str(question),
        reason=str(reason),
        verdict=None if verdict is None else str(verdict),
        reply=str(reply),
        ranked=tuple(Ranked(str(k), str(q)) for k, q in json.loads(str(ranked))),
        margin=None if margin is None else float(margin),  # type: ignore[arg-type]
        first_at=float(first_at),  # type: ignore[arg-type]
        last_at=float(last_at),  # type: ignore[arg-type]
        times=int(times),  # type: ignore[call-overload]
    )
