"""The review inbox as the admin page acts on it: list the items; attach an item's question to an entry as another
way of asking it, or answer it in a new entry (the knowledge file saved and reloaded, as the editor saves it); mark
it rightly refused; delete one or all (docs/admin.md, "Review inbox").

An attachment or new entry is made on the file as it is on disk when the action runs, and saved only if the file is
still that one (``expected_sha256``): should another save come between, the action is made again on the new file, so
two operators at once lose nothing. An attachment to an entry edited or deleted since the item was collected is
refused with ``knowledge_entry_changed`` (its key, question plus answer, no longer names an entry).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from edgevoice.admin.knowledge_file import decode_text, read_for_edit, save_and_reload
from edgevoice.errors import ConfigError, EdgeVoiceError
from edgevoice.kiosk.knowledge import Entry, parse_knowledge
from edgevoice.kiosk.knowledge_edit import add_entry, attach_question
from edgevoice.review.store import Item, ReviewStore

__all__ = ["SAVE_TRIES", "Inbox", "KnowledgeHost"]

SAVE_TRIES = 3
"""An action is made again on a file saved meanwhile (``knowledge_changed_meanwhile``) at most this many times."""
_KEY = re.compile(r"[0-9a-f]{12}")
MAX_ANSWER_CHARS = 2000
"""A new entry's answer written in the inbox is refused past this many characters."""


class KnowledgeHost(Protocol):
    """What the inbox needs of the appliance (:class:`~edgevoice.admin.app.Appliance`): the knowledge file and its
    reload."""

    @property
    def knowledge_path(self) -> Path | None: ...

    def reload_knowledge(self) -> object: ...


def _off() -> EdgeVoiceError:
    return EdgeVoiceError("the review inbox is off: set [review] enabled = true", code="review_off")


class Inbox:
    """The admin page's actions on ``store`` (None: ``[review]`` is off) and the knowledge of ``host``. Blocking:
    call them on a worker thread, the saves one at a time (the page's saving lock)."""

    def __init__(
        self, store: ReviewStore | None, host: KnowledgeHost, clock: Callable[[], float] = time.perf_counter
    ) -> None:
        self.store, self.host, self.clock = store, host, clock

    @property
    def enabled(self) -> bool:
        return self.store is not None

    def listing(self, entries: Sequence[Entry] | None = None) -> dict[str, object]:
        """``{"enabled", "items"}``: each item as JSON, each ranked entry with ``current``: it is still in
        ``entries`` (default: the knowledge file's now) as it was (false: edited or deleted since; attaching to it is
        refused)."""
        if self.store is None:
            return {"enabled": False, "items": []}
        current = frozenset(e.key for e in (self.current_entries() if entries is None else entries))
        items = []
        for item in self.store.items():
            shown = item.as_json()
            shown["ranked"] = [{**r, "current": r["key"] in current} for r in shown["ranked"]]  # type: ignore[attr-defined]
            items.append(shown)
        return {"enabled": True, "items": items}

    def attach(self, item_id: int, key: str, question: str | None = None) -> dict[str, object]:
        """Add the item's question (or ``question``, the operator's wording of it) to the ways of asking of the entry
        named ``key``, save and reload; the item leaves the inbox."""
        item = self._item(item_id)
        asked = _question(question, item)
        key = self._key(key)
        saved = self._edit(lambda text, source: attach_question(text, key, asked, source=source))
        self._done(item)
        return saved

    def add(self, item_id: int, answer: str, question: str | None = None) -> dict[str, object]:
        """A new entry: the item's question (or ``question``) and the operator's ``answer``; saved and reloaded, the
        item leaves the inbox."""
        item = self._item(item_id)
        asked = _question(question, item)
        answer = " ".join(answer.split())
        if not answer:
            raise ConfigError("a new entry needs an answer: write what the kiosk should say", code="review_invalid")
        if len(answer) > MAX_ANSWER_CHARS:
            raise ConfigError(f"the answer is over {MAX_ANSWER_CHARS} characters", code="review_invalid")
        saved = self._edit(lambda text, source: add_entry(text, asked, answer, source=source))
        self._done(item)
        return saved

    def settle(self, item_id: int) -> dict[str, object]:
        """Mark the item rightly refused (it leaves the inbox and the same question is not kept again)."""
        if self.store is None:
            raise _off()
        if not self.store.settle(item_id):
            raise _gone(item_id)
        return {"ok": True}

    def delete(self, item_id: int) -> dict[str, object]:
        if self.store is None:
            raise _off()
        if not self.store.delete(item_id):
            raise _gone(item_id)
        return {"ok": True}

    def clear(self) -> dict[str, object]:
        if self.store is None:
            raise _off()
        return {"ok": True, "deleted": self.store.clear()}

    # -------------------------------------------------------------------------------------------------------------
    def _item(self, item_id: int) -> Item:
        if self.store is None:
            raise _off()
        item = self.store.item(item_id)
        if item is None:
            raise _gone(item_id)
        return item

    def _done(self, item: Item) -> None:
        assert self.store is not None
        self.store.delete(item.id)

    def _path(self) -> Path:
        path = self.host.knowledge_path
        if path is None:
            raise EdgeVoiceError(
                "no [kiosk] knowledge_file is configured: the knowledge is not editable", code="knowledge_not_editable"
            )
        return path

    def _edit(self, change: Callable[[str, str], str]) -> dict[str, object]:
        """Apply ``change`` to the knowledge file as it is now and save it only if it is still that file; made again
        on a file saved meanwhile (at most :data:`SAVE_TRIES` times)."""
        path = self._path()
        source = f"kiosk.knowledge_file = {str(path)!r}"
        for attempt in range(SAVE_TRIES):
            text, version = read_for_edit(path)
            try:
                saved = save_and_reload(
                    path, change(text, source), self.host.reload_knowledge, self.clock, expected_sha256=version
                )
            except ConfigError as exc:
                if exc.code == "knowledge_changed_meanwhile" and attempt + 1 < SAVE_TRIES:
                    continue
                raise
            return {
                "ok": True,
                "entries": saved.entries,
                "warnings": list(saved.warnings),
                "reload_ms": round(saved.reload_ms, 1),
            }
        raise AssertionError("unreachable")  # the last try returns or raises

    def _key(self, name: str) -> str:
        """The key of the entry ``name`` names: a key (checked when the file is saved: an entry edited since has
        another), or an entry's question as the knowledge now has it."""
        name = " ".join(name.split())
        if _KEY.fullmatch(name):
            return name
        wanted = name.casefold().rstrip("?. ")
        for entry in self.current_entries():
            if entry.question and entry.question.casefold().rstrip("?. ") == wanted:
                return entry.key
        raise ConfigError(
            f"{name!r} names no entry of the knowledge: choose an entry, or give its question as written",
            code="review_invalid",
        )

    def current_entries(self) -> list[Entry]:
        """The knowledge file's entries now (none when it cannot be read: every ranked entry shows as changed)."""
        path = self.host.knowledge_path
        if path is None:
            return []
        try:
            return parse_knowledge(decode_text(path.read_bytes(), str(path)), source=str(path), warnings=[])
        except (OSError, EdgeVoiceError):
            return []


def _question(given: str | None, item: Item) -> str:
    question = " ".join((given if given is not None else item.question).split())
    if not question:
        raise ConfigError("the question is empty", code="review_invalid")
    return question


def _gone(item_id: int) -> EdgeVoiceError:
    return EdgeVoiceError(f"review item {item_id} is not in the inbox (deleted, or past its days)", code="review_gone")
