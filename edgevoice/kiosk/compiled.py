"""The knowledge's compiled ways of asking, kept on disk by content, and the entries with them.

A compile (:mod:`edgevoice.kiosk.compiler`, :mod:`edgevoice.kiosk.background_compile`) costs the language model
seconds an entry; :class:`CompileCache` keeps its work in one JSON file per generator
(``<cache dir>/compiled/<hash of the generator's identity and prompt version>.json``):

* ``entries``: per :attr:`~edgevoice.kiosk.knowledge.Entry.key` (the entry's question and answer, what the prompt
  shows the model), the questions written and the model's yes or no on each. An edited entry has another key and is
  written again; an unchanged one never is, and a compile stopped midway (a restart, a power cut) resumes at the
  first entry without a record.
* ``finished``: per knowledge (the digest of its entries' keys, in order, and the sentence encoder's identity), the
  questions kept by the checks, per entry key: what :func:`load_compiled` hands the kiosk at the next start, at once.

The file is written whole, beside itself, and renamed over itself after every entry (:mod:`edgevoice.atomic_write`):
a reader sees the old file or the new one. A file that cannot be read is a warning (the entries are compiled again);
one that cannot be written (a full disk, a read-only directory) is a warning too, kept in :attr:`CompileCache.warning`
for the status page: the compile goes on in memory and the kiosk answers as before.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from edgevoice.atomic_write import atomic_write
from edgevoice.kiosk.knowledge import Entry

__all__ = ["CompileCache", "knowledge_digest", "load_compiled", "with_compiled"]

log = logging.getLogger(__name__)

MAX_RECORDS = 20_000
"""At most this many entries' records are kept in one file: the current knowledge's first, then earlier ones'."""
MAX_FINISHED = 8
"""At most this many finished compiles (knowledge versions) are kept, the newest first."""


def with_compiled(entries: Sequence[Entry], compiled: Mapping[str, Sequence[str]]) -> list[Entry]:
    """``entries`` with each entry's compiled questions (by :attr:`Entry.key`) appended to its ``asked``; a question
    the entry already asks is not added twice."""
    out = []
    for entry in entries:
        extra = [q for q in compiled.get(entry.key, ()) if q not in entry.asked]
        out.append(replace(entry, asked=entry.asked + tuple(dict.fromkeys(extra))) if extra else entry)
    return out


def knowledge_digest(entries: Sequence[Entry], encoder: str = "") -> str:
    """What names a finished compile: the entries' keys in order, and the sentence encoder the checks ranked with."""
    digest = hashlib.sha256(encoder.encode())
    for entry in entries:
        digest.update(f"\0{entry.key}".encode())
    return digest.hexdigest()[:24]


class CompileCache:
    """The compile's work under one generator (its identity and prompt version), kept in ``directory``."""

    def __init__(self, directory: Path, generator: str, prompt_version: int) -> None:
        self.directory = Path(directory)
        self.generator = generator
        self.prompt_version = prompt_version
        name = hashlib.sha256(f"{generator}\0{prompt_version}".encode()).hexdigest()[:24]
        self.path = self.directory / f"{name}.json"
        self._lock = threading.Lock()
        self._records: dict[str, dict[str, list[Any]]] = {}
        self._finished: dict[str, dict[str, list[str]]] = {}
        self.warning: str | None = None
        """Why the cache could not be written or read (for the status page); None: all is well."""
        self._read()

    def record(self, key: str) -> tuple[tuple[str, ...], tuple[bool, ...]] | None:
        """The questions written for the entry with ``key`` and the model's verdicts, or None: not compiled yet."""
        with self._lock:
            rec = self._records.get(key)
        if rec is None:
            return None
        return tuple(rec["questions"]), tuple(bool(j) for j in rec["judged"])

    def put(self, key: str, questions: Sequence[str], judged: Sequence[bool], *, keep: Sequence[str] = ()) -> None:
        """Keep an entry's work and write the file (the entries' keys in ``keep`` first, then the others)."""
        with self._lock:
            self._records.pop(key, None)
            self._records[key] = {"questions": list(questions), "judged": [bool(j) for j in judged]}
            self._write(keep)

    def finished(self, digest: str) -> dict[str, list[str]] | None:
        """The questions kept for the knowledge named ``digest`` (:func:`knowledge_digest`), per entry key."""
        with self._lock:
            done = self._finished.get(digest)
        return {k: list(v) for k, v in done.items()} if done is not None else None

    def finish(self, digest: str, kept: Mapping[str, Sequence[str]], *, keep: Sequence[str] = ()) -> None:
        """Keep the questions the checks kept for the knowledge named ``digest`` and write the file."""
        with self._lock:
            self._finished.pop(digest, None)
            self._finished = {digest: {k: list(v) for k, v in kept.items()}, **self._finished}
            self._finished = dict(list(self._finished.items())[:MAX_FINISHED])
            self._write(keep)

    def forget(self, digest: str) -> None:
        """Drop the finished compile of the knowledge named ``digest`` (its questions are checked again)."""
        with self._lock:
            self._finished.pop(digest, None)

    def _read(self) -> None:
        records, finished = self._load()
        self._records, self._finished = records, finished

    def _load(self) -> tuple[dict[str, dict[str, list[Any]]], dict[str, dict[str, list[str]]]]:
        """The records and finished compiles in the file now (none when it is missing or cannot be read)."""
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
            if (
                not isinstance(raw, dict)
                or raw.get("generator") != self.generator
                or raw.get("prompt_version") != self.prompt_version
            ):
                raise ValueError("written by another generator or prompt")
            records, finished = raw["entries"], raw["finished"]
            if not isinstance(records, dict) or not isinstance(finished, dict):
                raise ValueError("not a compile cache")
            for key, rec in records.items():
                if len(rec["questions"]) != len(rec["judged"]) or not all(isinstance(q, str) for q in rec["questions"]):
                    raise ValueError(f"entry {key}: questions and verdicts do not pair up")
            return records, finished
        except FileNotFoundError:
            pass
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("compile cache %s cannot be read (%s): the knowledge is compiled again", self.path, exc)
        return {}, {}

    def _write(self, keep: Sequence[str]) -> None:
        """Write the whole file atomically (under the lock), with what another writer (a second kiosk, the command
        line) put in it meanwhile: its records and finished compiles this one does not have are kept."""
        records, finished = self._load()
        self._records = {**{k: v for k, v in records.items() if k not in self._records}, **self._records}
        self._finished = {**self._finished, **{k: v for k, v in finished.items() if k not in self._finished}}
        self._finished = dict(list(self._finished.items())[:MAX_FINISHED])
        wanted = [k for k in dict.fromkeys(keep) if k in self._records]
        others = [k for k in self._records if k not in set(wanted)]
        kept = (wanted + others[::-1])[:MAX_RECORDS]
        self._records = {k: self._records[k] for k in kept}
        body = {
            "generator": self.generator,
            "prompt_version": self.prompt_version,
            "entries": self._records,
            "finished": self._finished,
        }
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            atomic_write(self.path, json.dumps(body, ensure_ascii=False) + "\n")
        except OSError as exc:
            message = (
                f"the compile cannot be kept in {self.path} ({exc.strerror or exc}): it goes on in memory and is "
                "made again at the next start"
            )
            if self.warning != message:
                log.warning("%s", message)
            self.warning = message
        else:
            self.warning = None


def load_compiled(
    entries: Sequence[Entry], directory: Path, generator: str, prompt_version: int, encoder: str = ""
) -> dict[str, list[str]] | None:
    """The finished compile of ``entries`` (the questions kept, per entry key) from the cache in ``directory`` under
    ``generator`` and ``prompt_version`` and checked with the sentence encoder ``encoder``; None when it was not
    finished."""
    return CompileCache(directory, generator, prompt_version).finished(knowledge_digest(entries, encoder))
